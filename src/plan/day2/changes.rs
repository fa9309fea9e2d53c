//! Day 2: the changes section of `plan.json` and how one node's configuration changes.
//!
//! In: a node of the new plan and its previous state. Out: the [`Changes`] types (models added,
//! removed and moved, nodes re-partitioned, the rollout [`Wave`]s, the [`Advice`]) and
//! [`node_change`], the one rule that says whether a node's change needs a drain. The re-planner ([`super::replan`])
//! and the rollout ([`super::rollout`]) both use it; this file imports neither.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::plan::day2::previous::{PrevNode, Previous};
use crate::plan::{DevicePluginConfig, GpuMode, NodePlan};

/// The changes section of `plan.json` (and of `PLAN.md`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Changes {
    pub gpus_before: u32,
    pub gpus_after: u32,
    pub cost_per_hour_before: Option<f64>,
    pub cost_per_hour_after: Option<f64>,
    /// GPUs and cost per hour of a from-scratch plan of the same manifest (the price of
    /// stability is `gpusAfter - fromScratchGpus`).
    pub from_scratch_gpus: Option<u32>,
    pub from_scratch_cost_per_hour: Option<f64>,
    pub models_added: Vec<ModelCount>,
    pub models_removed: Vec<ModelCount>,
    /// Models whose replica count changed or whose replicas run on other nodes.
    pub models_changed: Vec<ModelChange>,
    /// Nodes whose MIG layout or device-plugin config changes (they are drained).
    pub nodes_repartitioned: Vec<String>,
    /// Nodes whose MIG layout or sharing changes only on GPUs that ran nothing (no drain; their
    /// labels sync with the bundle).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes_configured: Vec<String>,
    /// Held nodes absent from the last `--observed` file: in no wave until an observation
    /// lists them again (they block no other node).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes_missing: Vec<String>,
    /// A cheap lower bound on how many nodes any re-plan had to re-partition.
    pub repartition_lower_bound: u32,
    /// Replicas that stop on one node and start on another.
    pub replicas_moved: u32,
    pub waves: Vec<Wave>,
    pub notes: Vec<String>,
    /// The way down from the ratchet: the smallest re-optimisation found that recovers most of
    /// the price of stability (absent when there is none to recover, or no bounded one saves).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advice: Option<Advice>,
}

/// A bounded re-optimisation: re-partition these running nodes (re-planning their replicas on
/// them) and the plan uses `gpusSaved` GPUs fewer (docs/planner.md, "A way down from the
/// ratchet").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Advice {
    /// The nodes to re-partition (each drained), in name order.
    pub nodes: Vec<String>,
    pub gpus_saved: u32,
    /// Saved per hour, on priced pools.
    pub cost_saved_per_hour: Option<f64>,
    /// Sub-plans solved to find it (the search is bounded: docs/planner.md).
    pub evaluated: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModelCount {
    pub model: String,
    pub replicas: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModelChange {
    pub model: String,
    pub replicas_before: u32,
    pub replicas_after: u32,
    pub moved: u32,
}

/// One step of the rollout: nodes drained and re-partitioned together.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Wave {
    pub number: u32,
    pub nodes: Vec<String>,
    /// Replicas evicted in this wave, per model.
    pub evicts: Vec<ModelCount>,
    /// Set when no order keeps every model within its budget: the models that go below it.
    pub below_budget: Vec<String>,
    /// What to do, in order.
    pub steps: Vec<String>,
}

impl Changes {
    /// Whether nothing placed differs.
    pub fn is_empty(&self) -> bool {
        self.models_added.is_empty()
            && self.models_removed.is_empty()
            && self.models_changed.is_empty()
            && self.nodes_repartitioned.is_empty()
            && self.nodes_configured.is_empty()
            && self.gpus_before == self.gpus_after
    }
}

/// How a node's configuration changes against the previous plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeChange {
    /// Same MIG layout per GPU and same device-plugin sharing.
    None,
    /// Only GPUs that ran nothing in the previous plan change, and the sharing config changes
    /// only on a node that ran nothing: no pod is disturbed, no drain.
    IdleOnly,
    /// A GPU that ran replicas changes its layout, or the sharing config of a node that ran
    /// replicas changes: the node is drained first.
    Drain,
}

/// Compares a node of the new plan with its previous state (`None`: new to the plan).
pub fn node_change(
    n: &NodePlan,
    configs: &BTreeMap<String, DevicePluginConfig>,
    previous: &Previous,
    pn: Option<&PrevNode>,
) -> NodeChange {
    let Some(pn) = pn else { return NodeChange::None };
    // Both sharing modes: a node switched between time-slicing and MPS (or leaving MPS for
    // exclusive GPUs) changes its sharing as surely as one changing its replica count.
    let sharing_new = configs.get(&n.device_plugin_config).map(|c| (c.time_slicing.clone(), c.mps.clone()));
    let sharing_old = previous
        .device_plugin_configs
        .get(&pn.device_plugin_config)
        .map(|c| (c.time_slicing.clone(), c.mps.clone()));
    let busy = |i: usize| pn.gpus.get(i).is_some_and(|g| !g.tenants.is_empty());
    let node_busy = pn.gpus.iter().any(|g| !g.tenants.is_empty());
    let new = layout(n.gpus.iter().map(|g| Some(&g.mode)));
    let old = layout(pn.gpus.iter().map(|g| g.mode.known()));
    // A backend change (device plugin ↔ DRA: the GPUs gain or lose their UUIDs) moves the GPUs
    // to another mechanism, which the pods running on them do not survive: a sharing change.
    let dra = n.gpus.iter().any(|g| g.uuid.is_some()) != pn.gpus.iter().any(|g| g.uuid.is_some());
    let sharing_changed = sharing_new.unwrap_or_default() != sharing_old.unwrap_or_default() || dra;
    if new == old && !sharing_changed {
        return NodeChange::None;
    }
    let gpu_drain = new.len() != old.len() && node_busy
        || new.iter().zip(&old).enumerate().any(|(i, (x, y))| x != y && busy(i));
    if gpu_drain || (sharing_changed && node_busy) { NodeChange::Drain } else { NodeChange::IdleOnly }
}

/// Sorted MIG profile names per GPU (empty for MIG disabled, or a mode this gpuplan does not
/// know).
fn layout<'a>(modes: impl Iterator<Item = Option<&'a GpuMode>>) -> Vec<Vec<String>> {
    modes
        .map(|mode| match mode {
            Some(GpuMode::Mig { instances }) => sorted_profiles(instances.iter().map(|i| &i.profile)),
            _ => Vec::new(),
        })
        .collect()
}

/// One GPU's MIG profile names, sorted: the layout as a comparable value.
fn sorted_profiles<'a>(profiles: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut v: Vec<String> = profiles.cloned().collect();
    v.sort();
    v
}
