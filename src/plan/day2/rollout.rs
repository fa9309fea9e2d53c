//! Day 2: what changed against the previous plan, and a safe order to apply it.
//!
//! In: the [`Previous`] plan, the new [`Plan`] and the PodDisruptionBudgets the bundle writes
//! ([`budgets`], from the checked spec). Out: [`Changes`] — models added, removed and moved
//! (with counts), nodes re-partitioned, GPUs and cost before and after, the price of stability against a
//! from-scratch plan, and the nodes to re-partition in waves such that no model has fewer ready
//! replicas than its budget allows at any point (see [`waves`] for the model of a rollout).

use std::collections::{BTreeMap, BTreeSet};

use crate::plan::Plan;
use crate::plan::day2::changes::{Advice, Changes, ModelChange, ModelCount, NodeChange, Wave, node_change};
use crate::plan::day2::previous::{Phase, Previous};
use crate::spec::Spec;
use crate::spec::deployment::Budget;

/// The PodDisruptionBudget of each model, as the bundle writes it: the spec's
/// `deployment.disruptionBudget` (default `maxUnavailable: 1`) of every model the plan gives
/// more than one replica (`render::workloads` writes no budget for a single replica). Taken
/// from the checked spec, never parsed back from the rendered YAML.
pub fn budgets(spec: &Spec, plan: &Plan) -> BTreeMap<String, Budget> {
    plan.models
        .iter()
        .filter(|m| m.groups.iter().map(|g| g.replicas).sum::<u32>() > 1)
        .filter_map(|m| spec.model(&m.name).map(|s| (m.name.clone(), s.deployment.disruption_budget.clone())))
        .collect()
}

/// Replicas per model per node: tenants, a multi-GPU replica counted once.
fn counts_new(plan: &Plan) -> BTreeMap<String, BTreeMap<String, u32>> {
    let mut tenants: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
    for n in plan.nodes() {
        for g in &n.gpus {
            for t in &g.tenants {
                *tenants.entry(t.model.clone()).or_default().entry(n.name.clone()).or_insert(0) += 1;
            }
        }
    }
    let groups = plan.models.iter().flat_map(|m| m.groups.iter().map(|g| (m.name.as_str(), g.per_replica)));
    into_replicas(tenants, groups)
}

fn counts_old(prev: &Previous) -> BTreeMap<String, BTreeMap<String, u32>> {
    let mut tenants: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
    for ((m, n), c) in prev.tenants() {
        tenants.entry(m).or_default().insert(n, c);
    }
    let groups = prev.models.iter().flat_map(|m| m.groups.iter().map(|g| (m.name.as_str(), g.per_replica)));
    into_replicas(tenants, groups)
}

/// Divides tenants per model per node by the model's GPUs per replica (the largest of its
/// `(model, per_replica)` groups, at least 1).
fn into_replicas<'a>(
    mut tenants: BTreeMap<String, BTreeMap<String, u32>>,
    groups: impl Iterator<Item = (&'a str, u32)>,
) -> BTreeMap<String, BTreeMap<String, u32>> {
    let mut per: BTreeMap<&str, u32> = BTreeMap::new();
    for (m, k) in groups {
        let e = per.entry(m).or_insert(k);
        *e = (*e).max(k);
    }
    for (m, nodes) in &mut tenants {
        let k = per.get(m.as_str()).copied().unwrap_or(1).max(1);
        for c in nodes.values_mut() {
            *c /= k;
        }
    }
    tenants
}

/// What the day-2 re-planner reports besides the plan.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub notes: Vec<String>,
    pub repartition_lower_bound: u32,
    pub from_scratch_gpus: Option<u32>,
    pub from_scratch_cost_per_hour: Option<f64>,
    pub advice: Option<Advice>,
}

/// The changes from `prev` to `plan`, with rollout waves that respect `budgets`.
pub fn changes(prev: &Previous, plan: &Plan, budgets: &BTreeMap<String, Budget>, facts: &Facts) -> Changes {
    let old = counts_old(prev);
    let new = counts_new(plan);
    let total = |m: Option<&BTreeMap<String, u32>>| m.map_or(0, |x| x.values().sum::<u32>());
    let mut ch = Changes {
        gpus_before: prev.quality.gpus_used,
        gpus_after: plan.quality.gpus.used,
        cost_per_hour_before: prev.quality.cost_per_hour,
        cost_per_hour_after: plan.quality.cost.used,
        from_scratch_gpus: facts.from_scratch_gpus,
        from_scratch_cost_per_hour: facts.from_scratch_cost_per_hour,
        repartition_lower_bound: facts.repartition_lower_bound,
        notes: facts.notes.clone(),
        advice: facts.advice.clone(),
        ..Changes::default()
    };
    let names: BTreeSet<&String> =
        prev.models.iter().map(|m| &m.name).chain(plan.models.iter().map(|m| &m.name)).collect();
    let in_prev: BTreeSet<&String> = prev.models.iter().map(|m| &m.name).collect();
    let in_new: BTreeSet<&String> = plan.models.iter().map(|m| &m.name).collect();
    for name in names {
        let o = old.get(name.as_str());
        let n = new.get(name.as_str());
        let (before, after) = (total(o), total(n));
        if !in_prev.contains(name) {
            ch.models_added.push(ModelCount { model: name.clone(), replicas: after });
            continue;
        }
        if !in_new.contains(name) {
            ch.models_removed.push(ModelCount { model: name.clone(), replicas: before });
            continue;
        }
        let nodes: BTreeSet<&String> =
            o.into_iter().flat_map(|x| x.keys()).chain(n.into_iter().flat_map(|x| x.keys())).collect();
        let (mut gone, mut came) = (0u32, 0u32);
        for node in nodes {
            let a = o.and_then(|x| x.get(node)).copied().unwrap_or(0);
            let b = n.and_then(|x| x.get(node)).copied().unwrap_or(0);
            gone += a.saturating_sub(b);
            came += b.saturating_sub(a);
        }
        let moved = gone.min(came);
        if before != after || moved > 0 {
            ch.models_changed.push(ModelChange {
                model: name.clone(),
                replicas_before: before,
                replicas_after: after,
                moved,
            });
        }
        ch.replicas_moved += moved;
    }
    ch.nodes_repartitioned = plan.nodes().filter(|n| n.must_drain).map(|n| n.name.clone()).collect();
    ch.nodes_repartitioned.sort();
    let prev_nodes = prev.nodes();
    ch.nodes_configured = plan
        .nodes()
        .filter(|n| {
            !n.must_drain
                && node_change(
                    n,
                    &plan.device_plugin_configs,
                    prev,
                    prev_nodes.get(n.name.as_str()).map(|(_, pn)| *pn),
                ) != NodeChange::None
        })
        .map(|n| n.name.clone())
        .collect();
    ch.nodes_configured.sort();
    ch.nodes_missing = plan
        .nodes()
        .filter(|n| n.transition.as_ref().is_some_and(|t| t.phase == Phase::Missing))
        .map(|n| n.name.clone())
        .collect();
    ch.nodes_missing.sort();
    ch.waves = waves(&old, &new, &ch.nodes_repartitioned, &ch.nodes_missing, budgets);
    for w in &mut ch.waves {
        w.steps = steps(&w.nodes, w.number, &plan.name);
    }
    ch
}

/// Ready replicas of every model while `draining` is drained, given the nodes already done.
///
/// The model of a rollout: before the first wave the bundle is synced except the re-labelling
/// of drained nodes, so every node that is not re-partitioned runs its new replicas (capacity
/// made before any is broken); a node not yet drained still runs its old replicas; a node
/// whose wave is done runs its new ones; a node being drained runs nothing.
fn ready(
    old: &BTreeMap<String, BTreeMap<String, u32>>,
    new: &BTreeMap<String, BTreeMap<String, u32>>,
    changed: &BTreeSet<&str>,
    done: &BTreeSet<&str>,
    draining: &BTreeSet<&str>,
    model: &str,
) -> u32 {
    let o = old.get(model);
    let n = new.get(model);
    let nodes: BTreeSet<&str> = o
        .into_iter()
        .flat_map(|x| x.keys())
        .chain(n.into_iter().flat_map(|x| x.keys()))
        .map(String::as_str)
        .collect();
    let mut r = 0;
    for node in nodes {
        let a = o.and_then(|x| x.get(node)).copied().unwrap_or(0);
        let b = n.and_then(|x| x.get(node)).copied().unwrap_or(0);
        r += if draining.contains(node) {
            0
        } else if !changed.contains(node) || done.contains(node) {
            b
        } else {
            a
        };
    }
    r
}

/// Groups the re-partitioned nodes into waves: each wave takes, in name order, every pending
/// node whose drain keeps all models at or above their budget together with the others of the
/// wave; a node that no order can drain within budget goes alone, marked `belowBudget`.
/// `missing` nodes (held, absent from the last `--observed` file) are in no wave and run
/// nothing: their replicas count against the budgets, and they block no other node.
pub fn waves(
    old: &BTreeMap<String, BTreeMap<String, u32>>,
    new: &BTreeMap<String, BTreeMap<String, u32>>,
    repartitioned: &[String],
    missing: &[String],
    budgets: &BTreeMap<String, Budget>,
) -> Vec<Wave> {
    let changed: BTreeSet<&str> = repartitioned.iter().map(String::as_str).collect();
    let gone: BTreeSet<&str> = missing.iter().map(String::as_str).collect();
    let mut pending: Vec<&str> =
        repartitioned.iter().map(String::as_str).filter(|n| !gone.contains(n)).collect();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    let models: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let desired = |m: &str| new.get(m).map_or(0, |x| x.values().sum::<u32>());
    let violations = |done: &BTreeSet<&str>, draining: &BTreeSet<&str>| -> Vec<String> {
        let mut v = Vec::new();
        for m in &models {
            let Some(b) = budgets.get(m.as_str()) else { continue };
            let need = b.min_ready(desired(m));
            let before = ready(old, new, &changed, done, &gone, m);
            let during = ready(old, new, &changed, done, &draining.union(&gone).copied().collect(), m);
            // Only evictions count: a model already below its budget before the wave (its new
            // replicas wait for this wave) must not lose more.
            if during < need && during < before {
                v.push((*m).clone());
            }
        }
        v
    };
    let mut out = Vec::new();
    while !pending.is_empty() {
        let mut wave: BTreeSet<&str> = BTreeSet::new();
        for &node in &pending {
            let mut trial = wave.clone();
            trial.insert(node);
            if violations(&done, &trial).is_empty() {
                wave = trial;
            }
        }
        let mut below = Vec::new();
        if wave.is_empty() {
            // No node can go within budget: the one that hurts the fewest models goes alone.
            let pick = pending
                .iter()
                .min_by_key(|n| violations(&done, &BTreeSet::from([**n])).len())
                .copied()
                .unwrap_or(pending[0]);
            wave.insert(pick);
            below = violations(&done, &wave);
        }
        let mut evicts = Vec::new();
        for m in &models {
            let c: u32 =
                wave.iter().map(|n| old.get(m.as_str()).and_then(|x| x.get(*n)).copied().unwrap_or(0)).sum();
            if c > 0 {
                evicts.push(ModelCount { model: (*m).clone(), replicas: c });
            }
        }
        let number = u32::try_from(out.len() + 1).unwrap_or(u32::MAX);
        let nodes: Vec<String> = wave.iter().map(|s| (*s).to_owned()).collect();
        out.push(Wave { number, steps: Vec::new(), nodes, evicts, below_budget: below });
        done.extend(wave.iter().copied());
        pending.retain(|n| !wave.contains(n));
    }
    out
}

/// What to do in one wave. The first wave's label patches are what `nodes/drain/` lists; a
/// later wave is staged by the compile that sees the one before confirmed (`--observed`).
fn steps(nodes: &[String], number: u32, plan: &str) -> Vec<String> {
    let list = nodes.join(" ");
    let files = nodes.iter().map(|n| format!("nodes/drain/{n}.yaml")).collect::<Vec<_>>().join(" -f ");
    let mut steps = Vec::new();
    if number > 1 {
        steps.push(format!(
            "first stage this wave: after wave {} is confirmed, `kubectl get nodes -o json > nodes.json` and `gpuplan compile --observed nodes.json` (one pull request per wave); merge it",
            number - 1
        ));
    }
    steps.extend([
        format!("kubectl cordon {list}"),
        format!("kubectl drain {list} --ignore-daemonsets --delete-emptydir-data (evictions respect the PodDisruptionBudgets)"),
        format!(
            "apply exactly this wave's label patches (`nodes/drain/` lists this wave only): Argo CD `argocd app sync gpuplan-{plan}-drain`; Flux `flux resume kustomization gpuplan-{plan}-drain --wait`, then `flux suspend kustomization gpuplan-{plan}-drain`; or `kubectl apply --server-side --field-manager=gpuplan -f {files}`"
        ),
        format!(
            "wait until every node has `nvidia.com/mig.config.state=success`: kubectl wait node {list} --for=jsonpath='{{.metadata.labels.nvidia\\.com/mig\\.config\\.state}}'=success --timeout=15m"
        ),
        format!("kubectl uncordon {list}"),
        "record the outcome: `kubectl get nodes -o json > nodes.json`; `gpuplan check --observed nodes.json` names the nodes ready to advance, and `gpuplan compile --observed nodes.json` releases them".to_owned(),
    ]);
    steps
}

/// The changes section as Markdown, for `PLAN.md` and the human `diff`.
pub fn markdown(ch: &Changes) -> String {
    let mut md = String::new();
    md.push_str(&summary_lines(ch));
    if !ch.waves.is_empty() {
        md.push_str("\n### Rollout\n\n");
        md.push_str("Before wave 1, sync everything except the held-back labels of the nodes below: new replicas start on spare capacity first.\n\n");
        for w in &ch.waves {
            md.push_str(&format!(
                "**Wave {}**: {}",
                w.number,
                w.nodes.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            ));
            if !w.evicts.is_empty() {
                md.push_str(&format!(
                    " — evicts {}",
                    w.evicts
                        .iter()
                        .map(|e| format!("{} × `{}`", e.replicas, e.model))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            md.push('\n');
            if !w.below_budget.is_empty() {
                md.push_str(&format!(
                    "\n> No order keeps {} within its PodDisruptionBudget here (no spare capacity): `kubectl drain` waits on the budget; add capacity or accept the disruption.\n",
                    w.below_budget.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ")
                ));
            }
            md.push('\n');
            for (i, s) in w.steps.iter().enumerate() {
                md.push_str(&format!("{}. {s}\n", i + 1));
            }
            md.push('\n');
        }
    }
    md
}

/// The `terraform plan`-like summary: one line per kind of change.
pub fn summary_lines(ch: &Changes) -> String {
    let mut s = String::new();
    let cost = |c: Option<f64>| c.map_or_else(String::new, |c| format!(", {c:.2}/h"));
    s.push_str(&format!(
        "- GPUs: {} → {}{}\n",
        ch.gpus_before,
        ch.gpus_after,
        match (ch.cost_per_hour_before, ch.cost_per_hour_after) {
            (Some(a), Some(b)) => format!(" ({a:.2}/h → {b:.2}/h)"),
            _ => String::new(),
        }
    ));
    if let Some(fs) = ch.from_scratch_gpus {
        s.push_str(&format!(
            "- price of stability: {} GPU(s){} above a from-scratch plan ({fs} GPUs{})\n",
            i64::from(ch.gpus_after) - i64::from(fs),
            match (ch.cost_per_hour_after, ch.from_scratch_cost_per_hour) {
                (Some(a), Some(b)) => format!(", {:.2}/h", a - b),
                _ => String::new(),
            },
            cost(ch.from_scratch_cost_per_hour)
        ));
    }
    for m in &ch.models_added {
        s.push_str(&format!("- + model `{}`: {} replica(s)\n", m.model, m.replicas));
    }
    for m in &ch.models_removed {
        s.push_str(&format!("- − model `{}`: {} replica(s) stopped\n", m.model, m.replicas));
    }
    for m in &ch.models_changed {
        s.push_str(&format!(
            "- ~ model `{}`: {} → {} replica(s){}\n",
            m.model,
            m.replicas_before,
            m.replicas_after,
            if m.moved > 0 { format!(", {} moved", m.moved) } else { String::new() }
        ));
    }
    if ch.nodes_repartitioned.is_empty() {
        s.push_str("- nodes re-partitioned (drained): none\n");
    } else {
        s.push_str(&format!(
            "- nodes re-partitioned (drained): {} (lower bound {}): {}\n",
            ch.nodes_repartitioned.len(),
            ch.repartition_lower_bound,
            ch.nodes_repartitioned.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    if !ch.nodes_configured.is_empty() {
        s.push_str(&format!(
            "- nodes configured on idle GPUs only (no drain): {}\n",
            ch.nodes_configured.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    if !ch.nodes_missing.is_empty() {
        s.push_str(&format!(
            "- held nodes missing from the cluster (not in the last `--observed` file; in no wave, they block nothing else): {}\n",
            ch.nodes_missing.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    s.push_str(&format!("- replicas moved: {}\n", ch.replicas_moved));
    if let Some(a) = &ch.advice {
        s.push_str(&advice_line(a, ch));
    }
    for n in &ch.notes {
        s.push_str(&format!("- note: {n}\n"));
    }
    s
}

/// The way down from the ratchet, as one line: what to re-partition, what it saves, how to take it.
pub fn advice_line(a: &Advice, ch: &Changes) -> String {
    let nodes = a.nodes.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    let price = ch.from_scratch_gpus.map(|fs| ch.gpus_after.saturating_sub(fs));
    format!(
        "- way down: re-partition {nodes}: −{} GPU(s){}{}; to take it, set `changePolicy.maxRepartitions: {}` with `reoptimizeWhenSavingGpus: {}` (or run `gpuplan compile --from-scratch` with that bound)\n",
        a.gpus_saved,
        a.cost_saved_per_hour.map_or_else(String::new, |c| format!(" (−{c:.2}/h)")),
        price.map_or_else(String::new, |p| format!(
            ", {} of the {p} GPU(s) the price of stability costs",
            a.gpus_saved
        )),
        a.nodes.len(),
        a.gpus_saved.max(1),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{Budget, budgets, waves};
    use crate::bench::{A100, catalog, model, pool, spec};
    use crate::spec::deployment::IntOrPercent;

    fn counts(v: &[(&str, &str, u32)]) -> BTreeMap<String, BTreeMap<String, u32>> {
        let mut out: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
        for (m, n, c) in v {
            out.entry((*m).to_owned()).or_default().insert((*n).to_owned(), *c);
        }
        out
    }

    #[test]
    fn waves_keep_each_model_within_its_budget() {
        // `a` runs one replica on each of three nodes that are all re-partitioned.
        let old = counts(&[("a", "n1", 1), ("a", "n2", 1), ("a", "n3", 1)]);
        let new = old.clone();
        let nodes = vec!["n1".to_owned(), "n2".to_owned(), "n3".to_owned()];
        let b = BTreeMap::from([("a".to_owned(), Budget::MaxUnavailable(IntOrPercent::Int(1)))]);
        let w = waves(&old, &new, &nodes, &[], &b);
        assert_eq!(w.len(), 3);
        assert!(w.iter().all(|w| w.nodes.len() == 1 && w.below_budget.is_empty()));
        // Without a budget, one wave.
        assert_eq!(waves(&old, &new, &nodes, &[], &BTreeMap::new()).len(), 1);
    }

    #[test]
    fn budgets_come_from_the_spec_for_models_with_more_than_one_replica() {
        let mut one = model("one", 9 * 1024, 0.1, 1);
        one.deployment.disruption_budget = Budget::MinAvailable(IntOrPercent::Percent(50));
        let mut three = model("three", 9 * 1024, 0.1, 3);
        three.deployment.disruption_budget = Budget::MinAvailable(IntOrPercent::Percent(50));
        let s = spec("t", vec![pool("a", A100, 2, vec!["n1".to_owned()])], vec![one, three]);
        let plan = crate::plan::plan(&s, &catalog()).expect("plans");
        let b = budgets(&s, &plan);
        // A single replica has no PodDisruptionBudget in the bundle, so none in the rollout.
        assert_eq!(b.keys().collect::<Vec<_>>(), vec!["three"]);
        assert_eq!(b["three"], Budget::MinAvailable(IntOrPercent::Percent(50)));
        assert_eq!(b["three"].min_ready(3), 2);
    }
}
