//! Day 2 as a state machine: per node, what the cluster carries, the target, and the phase.
//!
//! In: the new plan (its nodes are the targets), the [`Previous`] plan with its per-node
//! [`Transition`]s, and optionally what the cluster reports ([`Observed`], from
//! `kubectl get nodes -o json`). Out: every node's `must_drain` and `transition` set, the
//! configs that held nodes still carry added to the plan's configs, and a [`Report`] of what
//! advanced.
//!
//! The rules (docs/planner.md, "Day 2"):
//! - a node of an earlier plan without a transition is *released*: the cluster carries its
//!   labels (a `plan.json` written before transitions existed reads as every node released);
//! - a node whose change against what it carries needs a drain ([`node_change`]) is *held*: its
//!   new labels wait under `nodes/drain/`, and it carries on with its old labels, layout and
//!   tenants;
//! - a held node stays held at every later compile, until the cluster confirms its target
//!   ([`Observed`] shows both labels equal to the target and, where MIG is involved,
//!   `nvidia.com/mig.config.state=success`): the drain rule is applied against what it
//!   *carries*, never against the target of the last compile; so it is released without a
//!   drain only when the manifest is edited back to what it runs (cancelled, or changed only
//!   on GPUs that run nothing);
//! - nothing advances without an observation: without `--observed`, a compile over its own
//!   output changes nothing;
//! - a held node that an `--observed` file does not list is `missing`: it stays held, and the
//!   rollout leaves it out of its waves, so that it blocks no other node, until an observation
//!   lists it again;
//! - autoscaled pools have template nodes, not nodes to hold: their `must_drain` says whether
//!   the template's change would need a drain, and they carry no transition.

use std::collections::BTreeMap;

use crate::catalog::layout::PlacedInstance;
use crate::catalog::migparted::ALL_DISABLED;
use crate::plan::day2::changes::{NodeChange, node_change};
use crate::plan::day2::previous::{
    Carried, Labels, Phase, PrevGpu, PrevMode, PrevNode, Previous, Transition,
};
use crate::plan::{DevicePluginConfig, GpuMode, NodePlan, Plan, Tenant};
use crate::spec::Spec;

/// One node as the cluster reports it: the labels the gate reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservedNode {
    /// `nvidia.com/mig.config`.
    pub mig_config: Option<String>,
    /// `nvidia.com/device-plugin.config`.
    pub device_plugin_config: Option<String>,
    /// `nvidia.com/mig.config.state` (`pending`, `rebooting`, `success`, `failed`).
    pub mig_config_state: Option<String>,
    /// `nvidia.com/gpu.deploy.device-plugin` (`false` on a node whose GPUs DRA manages: the GPU
    /// Operator then runs no device plugin there).
    pub device_plugin_deploy: Option<String>,
}

/// What the cluster reports, by node name (`crate::day2::observed` reads it from
/// `kubectl get nodes -o json`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    pub nodes: BTreeMap<String, ObservedNode>,
}

/// What one compile advanced, for the command line's report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Held nodes the cluster confirmed: released by this compile ("ready to advance").
    pub confirmed: Vec<String>,
    /// Held nodes whose MIG manager reported `failed` for the new labels: still held.
    pub failed: Vec<String>,
    /// Held nodes whose target the manifest took back: released without a drain.
    pub cancelled: Vec<String>,
    /// One sentence each: what the observation said that the plan does not explain.
    pub notes: Vec<String>,
}

/// Where a held node stands against an observation of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gate {
    Confirmed,
    Still(Phase),
}

/// The MIG manager's word on a node that carries `target` (`mig`: whether MIG is involved).
/// `to_dra`: the change moves the node's GPUs to DRA (`Some(true)`) or back to the device
/// plugin (`Some(false)`); such a change is applied only when the node's
/// `nvidia.com/gpu.deploy.device-plugin` label says so too (`false`, or anything else), since it
/// may keep both config labels.
fn gate(obs: &ObservedNode, target: &Labels, mig: bool, to_dra: Option<bool>) -> Gate {
    let dra_off = obs.device_plugin_deploy.as_deref() == Some("false");
    let carries_target = obs.mig_config.as_deref() == Some(target.mig_config.as_str())
        && obs.device_plugin_config.as_deref() == Some(target.device_plugin_config.as_str())
        && to_dra.is_none_or(|dra| dra == dra_off);
    if !carries_target {
        return Gate::Still(Phase::Held);
    }
    match obs.mig_config_state.as_deref() {
        _ if !mig => Gate::Confirmed,
        Some("success") => Gate::Confirmed,
        Some("failed") => Gate::Still(Phase::Failed),
        _ => Gate::Still(Phase::Applying),
    }
}

/// Whether `pn`'s pending change moves its GPUs to DRA (`Some(true)`) or back to the device
/// plugin (`Some(false)`): DRA GPUs carry UUIDs in the plan; `None` when the backend stays.
fn to_dra(t: &Transition, pn: &PrevNode) -> Option<bool> {
    let dra = |gpus: &[PrevGpu]| gpus.iter().any(|g| g.uuid.is_some());
    (dra(&t.carries.gpus) != dra(&pn.gpus)).then(|| dra(&pn.gpus))
}

/// Whether a change between these two mig-parted configs involves the MIG manager.
fn involves_mig(a: &str, b: &str) -> bool {
    let off = |c: &str| c.is_empty() || c == ALL_DISABLED;
    !(off(a) && off(b))
}

fn labels_of(n: &NodePlan) -> Labels {
    Labels { mig_config: n.mig_config.clone(), device_plugin_config: n.device_plugin_config.clone() }
}

/// What a released node of the previous plan carries: its own labels, layout and tenants.
fn carried_of(pn: &PrevNode) -> Carried {
    Carried {
        mig_config: pn.mig_config.clone(),
        device_plugin_config: pn.device_plugin_config.clone(),
        gpus: pn.gpus.clone(),
    }
}

/// The carried state as a node of the previous plan, for [`node_change`].
fn as_prev_node(name: &str, c: &Carried) -> PrevNode {
    PrevNode {
        name: name.to_owned(),
        mig_config: c.mig_config.clone(),
        device_plugin_config: c.device_plugin_config.clone(),
        gpus: c.gpus.clone(),
        must_drain: false,
        transition: None,
    }
}

/// Sets every node's transition over the previous plan (see the module docs).
pub fn advance(plan: &mut Plan, spec: &Spec, previous: &Previous, observed: Option<&Observed>) -> Report {
    let prev = previous.nodes();
    let configs = plan.device_plugin_configs.clone();
    let mut report = Report::default();
    for pool in &mut plan.pools {
        if pool.autoscaled {
            // Template nodes: nothing to hold or observe; their nodes roll with the template.
            for n in &mut pool.nodes {
                let pn = prev.get(n.name.as_str()).map(|(_, pn)| *pn);
                n.must_drain = node_change(n, &configs, previous, pn) == NodeChange::Drain;
                n.transition = None;
            }
            continue;
        }
        let current = spec.pool(&pool.name).map(|p| p.current.as_slice()).unwrap_or_default();
        for n in &mut pool.nodes {
            let Some((_, pn)) = prev.get(n.name.as_str()) else {
                // New to the plan: held only when the manifest's `current` says it runs
                // another layout (a running node adopted); else it runs nothing to protect, and
                // its pods wait Pending until the GPU Operator has applied its labels.
                let layout = current.iter().find(|c| c.node == n.name).map(|c| c.gpus.as_slice());
                n.transition = n.must_drain.then(|| adopted(n, layout));
                continue;
            };
            let seen = observed.and_then(|o| o.nodes.get(&n.name));
            step(n, pn, seen, &configs, previous, &mut report);
            if observed.is_some()
                && seen.is_none()
                && let Some(t) = &mut n.transition
            {
                // Absent from the cluster's word: held, and out of the waves (blocks nothing).
                t.phase = Phase::Missing;
                report.notes.push(format!(
                    "held node `{}` is not in the `--observed` file: it stays held and is in no rollout wave until an observation lists it again",
                    n.name
                ));
            }
        }
    }
    keep_carried_configs(plan, previous, &mut report);
    report
}

/// One node's step: what it carries after the observation, then held or released.
fn step(
    n: &mut NodePlan,
    pn: &PrevNode,
    seen: Option<&ObservedNode>,
    configs: &BTreeMap<String, DevicePluginConfig>,
    previous: &Previous,
    report: &mut Report,
) {
    let before = pn_target(pn);
    // What the node carries now, and the phase of its pending change (if it stays).
    let (carried, held_before, phase) = match &pn.transition {
        None => (carried_of(pn), false, Phase::Held),
        Some(t) => {
            let mig = involves_mig(&t.carries.mig_config, &before.mig_config);
            match seen.map(|o| gate(o, &before, mig, to_dra(t, pn))) {
                Some(Gate::Confirmed) => {
                    report.confirmed.push(n.name.clone());
                    (carried_of(pn), false, Phase::Held)
                }
                Some(Gate::Still(p)) => (t.carries.clone(), true, p),
                None => (t.carries.clone(), true, t.phase),
            }
        }
    };
    if let Some(o) = seen {
        let shows = |l: &Labels| {
            o.mig_config.as_deref() == Some(l.mig_config.as_str())
                && o.device_plugin_config.as_deref() == Some(l.device_plugin_config.as_str())
        };
        let known = Labels {
            mig_config: carried.mig_config.clone(),
            device_plugin_config: carried.device_plugin_config.clone(),
        };
        if !shows(&known) && !shows(&before) && !carried.mig_config.is_empty() {
            report.notes.push(format!(
                "node `{}` is observed with `nvidia.com/mig.config={}`, `nvidia.com/device-plugin.config={}`: neither what gpuplan released nor its target (a stale or foreign `--observed` file, or labels set by hand)",
                n.name,
                o.mig_config.as_deref().unwrap_or("(none)"),
                o.device_plugin_config.as_deref().unwrap_or("(none)")
            ));
        }
    }
    let change = node_change(n, configs, previous, Some(&as_prev_node(&n.name, &carried)));
    // The one drain rule, against what the node carries: a held node whose target is edited
    // back (or changes only GPUs that run nothing) is released without a drain.
    let held = change == NodeChange::Drain;
    let was_drain = pn.transition.is_some() && pn.must_drain;
    if held_before && was_drain && !held {
        report.cancelled.push(n.name.clone());
    }
    // A new target starts held (or applying, when no drain is needed: its labels sync at
    // once); an unchanged one keeps its phase.
    let same_target = held_before && labels_of(n) == before;
    let phase = match (held, same_target, phase) {
        (_, true, Phase::Failed) => Phase::Failed,
        (true, true, p) => p,
        (true, false, _) => Phase::Held,
        (false, ..) => Phase::Applying,
    };
    if phase == Phase::Failed && change != NodeChange::None {
        report.failed.push(n.name.clone());
    }
    n.must_drain = held;
    // The idle-GPU gate: a node re-laid out without a drain keeps what it carries in the
    // synced part (its workloads stay off the new instances) until the cluster confirms it.
    n.transition =
        (change != NodeChange::None).then(|| Transition { phase, carries: carried, target: labels_of(n) });
}

/// The nodes of `previous` still held once `observed` is read (a transition the cluster has not
/// confirmed): a bounded re-optimisation takes its next step only when there are none.
pub fn still_held<'p>(previous: &'p Previous, observed: Option<&Observed>) -> Vec<&'p str> {
    let mut out = Vec::new();
    for (name, (_, pn)) in previous.nodes() {
        let Some(t) = &pn.transition else { continue };
        let target = pn_target(pn);
        let mig = involves_mig(&t.carries.mig_config, &target.mig_config);
        let seen = observed.and_then(|o| o.nodes.get(name));
        if seen.is_none_or(|o| gate(o, &target, mig, to_dra(t, pn)) != Gate::Confirmed) {
            out.push(name);
        }
    }
    out
}

fn pn_target(pn: &PrevNode) -> Labels {
    Labels { mig_config: pn.mig_config.clone(), device_plugin_config: pn.device_plugin_config.clone() }
}

/// The transition of a node that the manifest's `current` says runs another layout (the first
/// compile, or a node adopted later): it carries that layout under labels gpuplan does not
/// know (`""`), every GPU busy (what runs there is unknown), and stays held until the cluster
/// confirms the target.
fn adopted(n: &NodePlan, current: Option<&[Vec<String>]>) -> Transition {
    let gpus = current
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, profiles)| PrevGpu {
            index: u32::try_from(i).unwrap_or(u32::MAX),
            uuid: None,
            mode: PrevMode::Known(if profiles.is_empty() {
                GpuMode::Whole
            } else {
                GpuMode::Mig {
                    instances: profiles
                        .iter()
                        .map(|p| PlacedInstance { profile: p.clone(), start: 0 })
                        .collect(),
                }
            }),
            // What runs there is unknown: every GPU counts as busy.
            tenants: vec![Tenant::default()],
        })
        .collect();
    Transition {
        phase: Phase::Held,
        carries: Carried { mig_config: String::new(), device_plugin_config: String::new(), gpus },
        target: labels_of(n),
    }
}

/// The first compile: nodes that the manifest's `current` says run another layout are held,
/// carrying that layout.
pub fn adopt(plan: &mut Plan, spec: &Spec) {
    for pool in plan.pools.iter_mut().filter(|p| !p.autoscaled) {
        let current = spec.pool(&pool.name).map(|p| p.current.as_slice()).unwrap_or_default();
        for n in pool.nodes.iter_mut().filter(|n| n.must_drain) {
            let layout = current.iter().find(|c| c.node == n.name).map(|c| c.gpus.as_slice());
            n.transition = Some(adopted(n, layout));
        }
    }
}

/// Every config a held node carries stays in the plan (and so in the ConfigMaps), with the
/// contents the previous plan gave it: the MIG manager and the device plugin read the config
/// a node's label names at every restart.
fn keep_carried_configs(plan: &mut Plan, previous: &Previous, report: &mut Report) {
    let carried: Vec<Carried> =
        plan.nodes().filter_map(|n| n.transition.as_ref()).map(|t| t.carries.clone()).collect();
    for c in carried {
        if !c.mig_config.is_empty() && !plan.mig_configs.contains_key(&c.mig_config) {
            match previous.mig_configs.get(&c.mig_config) {
                Some(cfg) => {
                    plan.mig_configs.insert(c.mig_config.clone(), cfg.clone());
                }
                None => report.notes.push(format!(
                    "mig-parted config `{}`, which a held node carries, is not in the previous plan: it cannot be kept",
                    c.mig_config
                )),
            }
        }
        if !plan.device_plugin_configs.contains_key(&c.device_plugin_config)
            && let Some(cfg) = previous.device_plugin_configs.get(&c.device_plugin_config)
        {
            plan.device_plugin_configs.insert(c.device_plugin_config.clone(), cfg.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Gate, ObservedNode, gate, involves_mig};
    use crate::plan::day2::previous::{Labels, Phase};

    fn seen(mig: &str, dp: &str, state: Option<&str>) -> ObservedNode {
        ObservedNode {
            mig_config: Some(mig.to_owned()),
            device_plugin_config: Some(dp.to_owned()),
            mig_config_state: state.map(str::to_owned),
            device_plugin_deploy: None,
        }
    }

    #[test]
    fn the_gate_needs_both_labels_and_the_mig_managers_success() {
        let target = Labels { mig_config: "a100-1".to_owned(), device_plugin_config: "ts-2".to_owned() };
        assert_eq!(gate(&seen("a100-1", "ts-2", Some("success")), &target, true, None), Gate::Confirmed);
        assert_eq!(
            gate(&seen("a100-1", "ts-2", Some("pending")), &target, true, None),
            Gate::Still(Phase::Applying)
        );
        assert_eq!(gate(&seen("a100-1", "ts-2", None), &target, true, None), Gate::Still(Phase::Applying));
        assert_eq!(
            gate(&seen("a100-1", "ts-2", Some("failed")), &target, true, None),
            Gate::Still(Phase::Failed)
        );
        // One label still the old one: not applied, whatever the state says.
        assert_eq!(
            gate(&seen("a100-0", "ts-2", Some("success")), &target, true, None),
            Gate::Still(Phase::Held)
        );
        assert_eq!(
            gate(&seen("a100-1", "ts-4", Some("success")), &target, true, None),
            Gate::Still(Phase::Held)
        );
        // Without MIG (time-slicing only), the device-plugin label is the whole change.
        assert_eq!(gate(&seen("a100-1", "ts-2", None), &target, false, None), Gate::Confirmed);
        assert!(!involves_mig("all-disabled", "all-disabled"));
    }

    #[test]
    fn a_backend_change_is_applied_only_when_the_device_plugin_deploy_label_follows() {
        let target = Labels { mig_config: "a100-1".to_owned(), device_plugin_config: "ts-2".to_owned() };
        let mut o = seen("a100-1", "ts-2", Some("success"));
        // To DRA: both config labels may be unchanged; the operator's deploy label decides.
        assert_eq!(gate(&o, &target, true, Some(true)), Gate::Still(Phase::Held));
        o.device_plugin_deploy = Some("false".to_owned());
        assert_eq!(gate(&o, &target, true, Some(true)), Gate::Confirmed);
        // Back to the device plugin: the label must be gone (or anything but `false`).
        assert_eq!(gate(&o, &target, true, Some(false)), Gate::Still(Phase::Held));
        o.device_plugin_deploy = None;
        assert_eq!(gate(&o, &target, true, Some(false)), Gate::Confirmed);
        assert_eq!(gate(&o, &target, true, None), Gate::Confirmed);
        assert!(!involves_mig("", "all-disabled"));
        assert!(involves_mig("all-disabled", "a100-1"));
    }
}
