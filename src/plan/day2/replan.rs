//! Day 2: re-planning from the previous plan, changing as little as the new manifest allows.
//!
//! In: a checked [`Spec`], the [`Catalog`] and the [`Previous`] plan (today's state). Out: a
//! [`Replanned`] plan whose nodes keep their MIG layout and device-plugin config and whose
//! replicas stay where they run unless the new demand cannot be met otherwise, with notes on
//! what of the previous plan no longer matches the manifest and the figures of the change.
//!
//! Steps (docs/planner.md, "Day 2"): (a) start from the previous placement; drop replicas of
//! removed models, excess replicas, and replicas the new spec no longer admits there; (b) place
//! the missing replicas in the capacity already configured (idle MIG instances, free
//! time-slices, unused GPUs as whole GPUs) without touching a layout; (c) if replicas remain,
//! re-plan them together with the replicas of a few nodes on those nodes only, with the
//! planner itself on the sub-problem, growing the set of nodes (1, 2, 4, …) and then narrowing
//! it to the smallest prefix that works; (d) compare with a from-scratch plan of the same spec:
//! the from-scratch plan is taken when `changePolicy` says so or its saving reaches the
//! threshold. Each node's `must_drain` and transition are then set by [`transition::advance`].

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::Catalog;
use crate::diagnostics::Diagnostics;
use crate::plan::assign::{self, Assignment, Dev, NodeA, PoolA};
use crate::plan::build::{self, Figures};
use crate::plan::day2::advice;
use crate::plan::day2::changes::{Advice, NodeChange, node_change};
use crate::plan::day2::previous::{PrevNode, Previous};
use crate::plan::day2::transition::{self, Observed};
use crate::plan::problem::{self, Kind, Need, Problem, Share};
use crate::plan::{GpuMode, Plan};
use crate::spec::{ChangeMode, Demand, Nodes, RateDemand, Spec, Spread};

/// The sentence every model's reasons end with when the day-2 re-planner made the plan. It does
/// not depend on the previous plan, so that recompiling an unchanged manifest gives the same bytes.
pub const METHOD: &str = "day 2 (`changePolicy: minimal`): the previous plan's layouts and replicas are kept where the manifest allows; only what it needs was re-planned";

/// A re-planned plan and what it took.
#[derive(Clone, Debug)]
pub struct Replanned {
    pub plan: Plan,
    /// What of the previous plan no longer matched the manifest, and how re-planning went.
    pub notes: Vec<String>,
    /// A cheap lower bound on the nodes any plan must re-partition (0 or 1).
    pub repartition_lower_bound: u32,
    /// GPUs and cost per hour of a from-scratch plan of the same spec, when it exists.
    pub from_scratch_gpus: Option<u32>,
    pub from_scratch_cost_per_hour: Option<f64>,
    /// Whether the from-scratch plan was taken (full mode, threshold reached, or fallback).
    pub took_from_scratch: bool,
    /// What the cluster confirmed and what advanced ([`transition::advance`]).
    pub advanced: transition::Report,
    /// The way down from the ratchet, when the kept plan costs more than a from-scratch one.
    pub advice: Option<Advice>,
}

/// How a re-plan treats the previous plan.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options<'a> {
    /// `--from-scratch`: any plan may be chosen, as with `changePolicy.mode: full`; every
    /// running node whose layout or sharing changes is still held for its drain.
    pub from_scratch: bool,
    /// What the cluster reports (`--observed`): the only way a held node advances.
    pub observed: Option<&'a Observed>,
}

/// The from-scratch plan of the same spec, solved on its own thread while the re-plan runs: it
/// gives the price of stability, the threshold comparison and the fallback, and the re-plan
/// waits for it only where it needs it (the result does not depend on the timing).
struct Scratch<'s> {
    spec: &'s Spec,
    catalog: &'s Catalog,
    running: Option<std::thread::ScopedJoinHandle<'s, Result<Plan, Diagnostics>>>,
    done: Option<Result<Plan, Diagnostics>>,
}

impl Scratch<'_> {
    fn get(&mut self) -> &Result<Plan, Diagnostics> {
        let (running, spec, catalog) = (&mut self.running, self.spec, self.catalog);
        self.done.get_or_insert_with(|| match running.take() {
            Some(h) => h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)),
            None => crate::plan::plan(spec, catalog),
        })
    }
}

/// Re-plans `spec` starting from `previous` (see the module docs).
pub fn replan(
    spec: &Spec,
    catalog: &Catalog,
    previous: &Previous,
    options: Options<'_>,
) -> Result<Replanned, Diagnostics> {
    std::thread::scope(|s| {
        // No thread to be had: it is solved here, when first needed.
        let running = std::thread::Builder::new()
            .name("gpuplan-from-scratch".to_owned())
            .spawn_scoped(s, || crate::plan::plan(spec, catalog))
            .ok();
        let mut scratch = Scratch { spec, catalog, running, done: None };
        replan_with(spec, catalog, previous, options, &mut scratch)
    })
}

fn replan_with(
    spec: &Spec,
    catalog: &Catalog,
    previous: &Previous,
    options: Options<'_>,
    scratch: &mut Scratch<'_>,
) -> Result<Replanned, Diagnostics> {
    let mut notes = Vec::new();
    let finish = |mut plan: Plan, notes: Vec<String>, bound: u32, took: bool, scratch: &mut Scratch<'_>| {
        let (fs_gpus, fs_cost) = match scratch.get() {
            Ok(p) => (Some(p.quality.gpus.used), p.quality.cost.used),
            Err(_) => (None, None),
        };
        stabilise_names(&mut plan, previous);
        let advanced = transition::advance(&mut plan, spec, previous, options.observed);
        Replanned {
            plan,
            notes,
            repartition_lower_bound: bound,
            from_scratch_gpus: fs_gpus,
            from_scratch_cost_per_hour: fs_cost,
            took_from_scratch: took,
            advanced,
            advice: None,
        }
    };
    let reoptimise = spec.change_policy.mode == ChangeMode::Full || options.from_scratch;
    if reoptimise && spec.change_policy.max_repartitions.is_none() {
        let plan = scratch.get().clone()?;
        notes.push(if options.from_scratch {
            "`--from-scratch`: planned from scratch; running nodes whose layout changes are held for their drain"
                .to_owned()
        } else {
            "`changePolicy.mode: full`: planned from scratch".to_owned()
        });
        return Ok(finish(plan, notes, 0, true, scratch));
    }
    let problem = problem::build(spec, catalog);
    let diags = crate::plan::infeasible::unservable(&problem);
    if diags.has_errors() {
        return Err(diags);
    }
    let (mut a, mut fresh, mut displaced) = from_previous(&problem, previous, &mut notes);
    let mut remaining = trim_to_demand(&problem, &mut a, &mut displaced, &mut notes);
    let bound = lower_bound(&problem, &a, &remaining);
    fill_displaced(&problem, &mut a, &mut remaining, &displaced, &busy_nodes(&problem, previous));
    fill_free(&problem, &mut a, &mut remaining);
    normalise(&mut a);
    if !remaining.is_empty() {
        match repartition(spec, catalog, &problem, &mut a, &remaining, &mut fresh) {
            Some(n) => notes
                .push(format!("{n} node(s) re-planned with the planner so that every replica has a place")),
            None => {
                let plan = scratch.get().clone()?;
                notes.push(
                    "the missing replicas found no place on a subset of the nodes: planned from scratch"
                        .to_owned(),
                );
                return Ok(finish(plan, notes, bound, true, scratch));
            }
        }
    }
    recount(&problem, &mut a);
    trim_autoscaled(&problem, &mut a);
    let scratch_plan = scratch.get().as_ref().ok().cloned();
    let scratch_ref = scratch_plan.as_ref();
    let valid = scratch_ref.map(|p| p.quality.valid_bound()).unwrap_or_default();
    let model = scratch_ref.map(|p| p.quality.model_bound()).unwrap_or_default();
    // The from-scratch plan's model bound holds for the plans of its model; a kept plan that
    // does better (its layouts are the cluster's, not the model's) is judged by the valid one.
    let cost = problem.unit_price.map(|unit| a.cost(&problem) * unit);
    let undercuts = a.gpus_used() < u64::from(model.gpus)
        || cost.zip(model.cost_per_hour).is_some_and(|(c, m)| c < m * (1.0 - crate::plan::COST_TOLERANCE));
    let fig = Figures {
        model: if undercuts { valid } else { model },
        valid,
        // A kept plan is not what a solver proved optimal, whatever its count.
        solver_proved: false,
        // First fit is a from-scratch baseline: a kept plan is judged by the price of stability
        // (the changes section), not against it.
        ffd: None,
        method: METHOD.to_owned(),
    };
    let kept = match build::build(&problem, &a, &fig) {
        Ok(p) => p,
        Err(e) => {
            notes.push(format!("the kept plan could not be built ({e}): planned from scratch"));
            return Ok(finish(scratch.get().clone()?, notes, bound, true, scratch));
        }
    };
    let Some(fs) = scratch_ref else { return Ok(finish(kept, notes, bound, false, scratch)) };
    if same_placement(&kept, fs) {
        return Ok(finish(fs.clone(), notes, bound, true, scratch));
    }
    let ctx = Ctx { spec, catalog, problem: &problem, a: &a, fig: &fig };
    let (plan, took, advice) = conclude(&ctx, kept, fs, (previous, options.observed), reoptimise, &mut notes);
    let mut r = finish(plan, notes, bound, took, scratch);
    r.advice = advice;
    Ok(r)
}

/// Step 4 once the kept plan and the from-scratch plan differ: the plan taken (the kept one,
/// the from-scratch one, or a bounded re-optimisation), whether it is a re-optimisation, and
/// the way down from the ratchet when the kept plan is taken.
fn conclude(
    ctx: &Ctx<'_>,
    kept: Plan,
    fs: &Plan,
    cluster: (&Previous, Option<&Observed>),
    reoptimise: bool,
    notes: &mut Vec<String>,
) -> (Plan, bool, Option<Advice>) {
    let wanted = if reoptimise { Some(String::new()) } else { threshold_reached(ctx.spec, &kept, fs) };
    let step = match (ctx.spec.change_policy.max_repartitions, wanted) {
        (_, None) => Step::Keep,
        (None, Some(note)) => Step::FromScratch(note),
        (Some(max), Some(note)) => bounded_step(ctx, max, (&kept, fs), cluster, note),
    };
    match step {
        Step::FromScratch(note) => {
            notes.extend(Some(note).filter(|n| !n.is_empty()));
            (fs.clone(), true, None)
        }
        Step::Bounded(plan, note) => {
            notes.push(note);
            (*plan, true, None)
        }
        Step::Wait(note) => {
            notes.push(note);
            let advice = way_down(ctx, (&kept, fs), None).map(|(a, _, _)| a);
            (kept, false, advice)
        }
        Step::Keep => {
            let advice = way_down(ctx, (&kept, fs), None).map(|(a, _, _)| a);
            (kept, false, advice)
        }
    }
}

/// What the re-plan takes, once the kept plan and the from-scratch plan are known.
enum Step {
    /// The kept plan (no re-optimisation asked for, or its saving is below the threshold).
    Keep,
    /// The from-scratch plan, with the note that says why (empty: said already).
    FromScratch(String),
    /// A bounded re-optimisation (`changePolicy.maxRepartitions`): the plan and its note.
    Bounded(Box<Plan>, String),
    /// A bounded re-optimisation waits for held nodes: the kept plan, and the note.
    Wait(String),
}

/// The parts of the kept re-plan that a bounded re-optimisation builds on.
struct Ctx<'c> {
    spec: &'c Spec,
    catalog: &'c Catalog,
    problem: &'c Problem<'c>,
    /// The kept plan's assignment.
    a: &'c Assignment,
    fig: &'c Figures,
}

/// A re-optimisation under `changePolicy.maxRepartitions: max`: the from-scratch plan when it
/// drains at most `max` running nodes; else, once no node is held any more, the best set of at
/// most `max` running nodes re-planned ([`way_down`]) — taken when asked for (`mode: full`,
/// `--from-scratch`) or when its own saving reaches the threshold. Nothing while a node is held
/// (one step per confirmation, so that recompiling changes nothing).
fn bounded_step(
    ctx: &Ctx<'_>,
    max: u32,
    (kept, fs): (&Plan, &Plan),
    (previous, observed): (&Previous, Option<&Observed>),
    note: String,
) -> Step {
    let held = transition::still_held(previous, observed);
    if !held.is_empty() {
        return Step::Wait(format!(
            "`changePolicy.maxRepartitions: {max}`: the next re-optimisation waits until the cluster confirms the {} held node(s) (`--observed`)",
            held.len()
        ));
    }
    let drains = running_nodes_changed(fs, previous);
    if drains <= max as usize {
        return Step::FromScratch(note);
    }
    // Steps whose nodes need no drain (only idle GPUs change) are repeated in this compile, so
    // that the next compile, finding nothing held, does not take another: at most
    // `BOUNDED_STEPS`, and the last one taken is the only one that drains.
    let asked = note.is_empty();
    let (mut a, mut current, mut nodes) = (ctx.a.clone(), kept.clone(), Vec::new());
    for _ in 0..BOUNDED_STEPS {
        let here = Ctx { a: &a, ..*ctx };
        let Some((advice, plan, merged)) = way_down(&here, (&current, fs), Some(max as usize)) else { break };
        if !asked && threshold_reached(ctx.spec, &current, &plan).is_none() {
            break;
        }
        nodes.extend(advice.nodes);
        (a, current) = (merged, plan);
        if running_nodes_changed(&current, previous) > 0 {
            break;
        }
    }
    if nodes.is_empty() {
        return Step::Keep;
    }
    nodes.sort();
    nodes.dedup();
    Step::Bounded(
        Box::new(current.clone()),
        format!(
            "`changePolicy.maxRepartitions: {max}`: a from-scratch plan would re-partition {drains} running node(s); re-optimised {} only ({} GPU(s) saved)",
            nodes.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
            kept.quality.gpus.used.saturating_sub(current.quality.gpus.used)
        ),
    )
}

/// The most bounded re-optimisation steps one compile takes (see [`bounded_step`]).
const BOUNDED_STEPS: usize = 4;

/// How many running nodes of the previous plan `plan` re-partitions under their pods (named
/// pools; the drain rule, [`node_change`]).
fn running_nodes_changed(plan: &Plan, previous: &Previous) -> usize {
    let prev = previous.nodes();
    plan.pools
        .iter()
        .filter(|p| !p.autoscaled)
        .flat_map(|p| &p.nodes)
        .filter(|n| {
            let pn = prev.get(n.name.as_str()).map(|(_, pn)| *pn);
            node_change(n, &plan.device_plugin_configs, previous, pn) == NodeChange::Drain
        })
        .count()
}

/// The way down from the ratchet: the smallest set of running nodes of the kept plan (at most
/// `max` nodes, else [`advice::MAX_NODES`]) whose replicas, re-planned on those nodes only
/// (the sub-plan of step 3, [`sub_spec`]), save most of the price of stability; the advice and
/// the kept plan with those nodes re-planned. `None` when the kept plan costs no more than the
/// from-scratch one or no bounded set saves (module [`advice`] bounds the search).
fn way_down(
    ctx: &Ctx<'_>,
    (kept, fs): (&Plan, &Plan),
    max: Option<usize>,
) -> Option<(Advice, Plan, Assignment)> {
    let price = kept.quality.gpus.used.saturating_sub(fs.quality.gpus.used);
    let cost_price = kept.quality.cost.used.zip(fs.quality.cost.used).map(|(k, f)| k - f);
    if price == 0 && cost_price.is_none_or(|c| c <= 1e-9) {
        return None;
    }
    let (problem, a) = (ctx.problem, ctx.a);
    let used = |(pi, ni): (usize, usize)| -> u32 {
        a.pools[pi].nodes[ni].gpus.iter().filter(|d| **d != Dev::Unused).count() as u32
    };
    let mut plans: BTreeMap<Vec<(usize, usize)>, Plan> = BTreeMap::new();
    let evaluate = |set: &[(usize, usize)]| -> Option<advice::Saving> {
        let sub = sub_spec(ctx.spec, problem, a, &BTreeMap::new(), set)?;
        let p = crate::plan::plan(&sub, ctx.catalog).ok()?;
        let before: u32 = set.iter().map(|&n| used(n)).sum();
        let cost_before: Option<f64> = set
            .iter()
            .map(|&(pi, ni)| problem.pools[pi].spec.cost_per_gpu_hour.map(|c| c * f64::from(used((pi, ni)))))
            .sum();
        let saving = advice::Saving {
            gpus: before.saturating_sub(p.quality.gpus.used),
            cost_per_hour: cost_before.zip(p.quality.cost.used).map(|(b, c)| b - c),
        };
        plans.insert(set.to_vec(), p);
        Some(saving)
    };
    let found = advice::search(candidates(problem, a), price, max.unwrap_or(advice::MAX_NODES), evaluate)?;
    let sub = plans.get(&found.nodes)?;
    let mut merged = a.clone();
    merge(problem, &mut merged, sub, &found.nodes);
    recount(problem, &mut merged);
    trim_autoscaled(problem, &mut merged);
    let plan = build::build(problem, &merged, ctx.fig).ok()?;
    let mut nodes: Vec<String> =
        found.nodes.iter().map(|&(pi, ni)| problem.pools[pi].node_name(ni)).collect();
    nodes.sort();
    let advice = Advice {
        nodes,
        gpus_saved: kept.quality.gpus.used.saturating_sub(plan.quality.gpus.used),
        // In cents, as the report prints it (no float noise in `plan.json`).
        cost_saved_per_hour: kept
            .quality
            .cost
            .used
            .zip(plan.quality.cost.used)
            .map(|(k, p)| ((k - p) * 100.0).round() / 100.0),
        evaluated: found.evaluated,
    };
    Some((advice, plan, merged))
}

/// The running nodes of named pools in the kept assignment, each scored by the GPUs its
/// replicas leave idle: GPUs in use minus the smallest share each replica could take in its
/// pool (a node of small replicas on whole GPUs scores high).
fn candidates(problem: &Problem<'_>, a: &Assignment) -> Vec<((usize, usize), f64)> {
    let mut need: BTreeMap<(usize, usize), f64> = BTreeMap::new();
    for (m, mc) in problem.models.iter().enumerate() {
        for ((pi, ni, _, _), _) in replicas_of(problem, a, m) {
            let smallest =
                mc.options.iter().filter(|o| o.pool == pi).map(|o| o.size).fold(f64::INFINITY, f64::min);
            *need.entry((pi, ni)).or_insert(0.0) += if smallest.is_finite() { smallest } else { 0.0 };
        }
    }
    need.into_iter()
        .filter(|((pi, _), _)| !problem.pools[*pi].autoscaled())
        .map(|((pi, ni), n)| {
            let used = a.pools[pi].nodes[ni].gpus.iter().filter(|d| **d != Dev::Unused).count() as f64;
            ((pi, ni), used - n)
        })
        .collect()
}

/// Whether the from-scratch plan saves enough to reach `changePolicy`'s threshold: the note
/// that says so.
fn threshold_reached(spec: &Spec, kept: &Plan, fs: &Plan) -> Option<String> {
    let policy = &spec.change_policy;
    let gpu_saving = i64::from(kept.quality.gpus.used) - i64::from(fs.quality.gpus.used);
    let cost_saving = kept.quality.cost.used.zip(fs.quality.cost.used).map(|(k, f)| k - f);
    let by_gpus = policy.reoptimize_when_saving_gpus.is_some_and(|t| gpu_saving >= i64::from(t));
    let by_cost =
        policy.reoptimize_when_saving_cost_per_hour.zip(cost_saving).is_some_and(|(t, s)| s >= t - 1e-9);
    (by_gpus || by_cost).then(|| {
        format!(
            "a from-scratch plan saves {gpu_saving} GPU(s){}, which reaches `changePolicy`'s threshold: re-optimised",
            cost_saving.map_or_else(String::new, |s| format!(" and {s:.2}/h"))
        )
    })
}

/// Whether two plans place the same: nodes, GPUs, tenants, configs and replica groups.
fn same_placement(a: &Plan, b: &Plan) -> bool {
    let groups = |p: &Plan| p.models.iter().map(|m| serde_json::to_value(&m.groups).ok()).collect::<Vec<_>>();
    serde_json::to_value(&a.pools).ok() == serde_json::to_value(&b.pools).ok()
        && serde_json::to_value(&a.mig_configs).ok() == serde_json::to_value(&b.mig_configs).ok()
        && serde_json::to_value(&a.device_plugin_configs).ok()
            == serde_json::to_value(&b.device_plugin_configs).ok()
        && groups(a) == groups(b)
}

/// The kind of option a model's replica on this device is.
fn kind_of(d: &Dev, per: u32) -> Option<Kind> {
    match d {
        Dev::Unused => None,
        Dev::Whole { .. } => Some(Kind::Whole(per)),
        Dev::Ts { k, .. } => Some(Kind::TimeSliced(*k)),
        Dev::Mig { .. } => None,
        Dev::MigTs { q, k, .. } => Some(Kind::MigTs(*q, *k)),
    }
}

fn admitted(problem: &Problem<'_>, m: usize, pi: usize, kind: Kind) -> bool {
    problem.models[m].options.iter().any(|o| o.pool == pi && o.kind == kind)
}

/// Converts a node of a plan (previous, or a sub-plan) into the planner's device states, or
/// says why it cannot be kept. Tenants of models unknown to `problem` are dropped.
fn node_devs(
    problem: &Problem<'_>,
    pi: usize,
    node: &PrevNode,
    plugin: Option<&BTreeMap<String, u32>>,
) -> Result<Vec<Dev>, String> {
    let pool = &problem.pools[pi];
    if node.gpus.len() != pool.gpn() as usize {
        return Err(format!("it had {} GPU(s), the pool now has {} per node", node.gpus.len(), pool.gpn()));
    }
    let model = |name: &str| problem.models.iter().position(|m| m.name() == name);
    let mut devs = Vec::new();
    for g in &node.gpus {
        let tenants: Vec<usize> = g.tenants.iter().filter_map(|t| model(&t.model)).collect();
        let Some(mode) = g.mode.known() else {
            return Err("a GPU has a mode this gpuplan does not know".to_owned());
        };
        let dev = match mode {
            GpuMode::Unused => Dev::Unused,
            GpuMode::Whole => Dev::Whole { tenant: tenants.first().copied() },
            // Time-slicing and MPS are one device state with the node's share; a node whose
            // mode the pool no longer allows is a sharing change, re-planned (and drained).
            GpuMode::TimeSliced { .. } if !pool.spec.sharing.time_slicing => {
                return Err("it time-sliced its GPUs; the pool no longer allows `timeSlicing`".to_owned());
            }
            GpuMode::Mps { .. } if !pool.spec.sharing.mps => {
                return Err("it shared its GPUs by MPS; the pool no longer allows `mps`".to_owned());
            }
            GpuMode::TimeSliced { replicas } => Dev::Ts { k: Share::ts((*replicas).max(1)), tenants },
            GpuMode::Mps { replicas } => Dev::Ts { k: Share { k: (*replicas).max(1), mps: true }, tenants },
            GpuMode::Mig { instances } => {
                let mut counts = vec![0u8; pool.profiles.len()];
                let mut at: BTreeMap<u8, usize> = BTreeMap::new();
                for inst in instances {
                    let Some(q) = pool.profiles.iter().position(|p| p.name == inst.profile) else {
                        return Err(format!("MIG profile `{}` is not usable here now", inst.profile));
                    };
                    counts[q] = counts[q].saturating_add(1);
                    at.insert(inst.start, q);
                }
                if !pool.fits(&counts) {
                    return Err("its MIG layout is not valid for the pool's GPU".to_owned());
                }
                // A profile of this GPU that the node's device plugin time-slices (the planner
                // shares one per node); the other instances are exclusive.
                let shared = plugin.and_then(|ts| {
                    let qs: BTreeSet<usize> = at.values().copied().collect();
                    qs.iter().find_map(|&q| {
                        ts.get(&format!("nvidia.com/mig-{}", pool.profiles[q].name)).map(|&k| (q, k))
                    })
                });
                let mut excl = Vec::new();
                let mut on_shared = Vec::new();
                for t in &g.tenants {
                    let (Some(m), Some(&q)) = (model(&t.model), t.instance_start.and_then(|s| at.get(&s)))
                    else {
                        continue;
                    };
                    if shared.is_some_and(|(sq, _)| sq == q) {
                        on_shared.push(m);
                    } else {
                        excl.push((q, m));
                    }
                }
                match shared {
                    Some((q, k)) => Dev::MigTs { q, k, counts, tenants: on_shared, excl },
                    None => {
                        let ts = excl;
                        Dev::Mig { counts, tenants: ts }
                    }
                }
            }
        };
        devs.push(dev);
    }
    Ok(devs)
}

/// Replicas per model that must move whatever the policy: their node left the inventory or is
/// planned afresh, or the manifest no longer admits them where they ran.
type Displaced = BTreeMap<usize, u32>;

/// Counts the replicas of a previous node's tenants as displaced (a multi-GPU replica once).
fn displace(problem: &Problem<'_>, node: &PrevNode, displaced: &mut Displaced) {
    let mut tenants: BTreeMap<usize, u32> = BTreeMap::new();
    for t in node.gpus.iter().flat_map(|g| &g.tenants) {
        if let Some(m) = problem.models.iter().position(|x| x.name() == t.model) {
            *tenants.entry(m).or_insert(0) += 1;
        }
    }
    for (m, n) in tenants {
        let per = problem.models[m].spec.gpus.unwrap_or(1).max(1);
        *displaced.entry(m).or_insert(0) += n.div_ceil(per);
    }
}

/// Step (a), first half: the previous placement mapped onto the new problem. Returns the
/// assignment, per pool the nodes that had no usable previous state, and the replicas displaced
/// by nodes that left or are planned afresh.
fn from_previous(
    problem: &Problem<'_>,
    previous: &Previous,
    notes: &mut Vec<String>,
) -> (Assignment, BTreeSet<(usize, usize)>, Displaced) {
    let prev_nodes = previous.nodes();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut fresh = BTreeSet::new();
    let mut displaced = Displaced::new();
    let mut a = Assignment::default();
    for (pi, pool) in problem.pools.iter().enumerate() {
        let count = if pool.autoscaled() { pool.max_nodes as usize } else { pool.named.len() };
        let mut pa = PoolA { nodes: Vec::new() };
        for ni in 0..count {
            let name = pool.node_name(ni);
            let mut node = NodeA { gpus: vec![Dev::Unused; pool.gpn() as usize] };
            match prev_nodes.get(name.as_str()) {
                None => {
                    fresh.insert((pi, ni));
                }
                Some((pp, pn)) => {
                    seen.insert(pn.name.as_str());
                    if pp.gpu != pool.gpu.id {
                        notes.push(format!(
                            "node `{name}`: its GPU was `{}` in the previous plan and is `{}` now; it is planned afresh",
                            pp.gpu, pool.gpu.id
                        ));
                        fresh.insert((pi, ni));
                        displace(problem, pn, &mut displaced);
                    } else {
                        if pp.name != pool.name() {
                            notes.push(format!(
                                "node `{name}` was in pool `{}` and is in pool `{}` now; its layout is kept",
                                pp.name,
                                pool.name()
                            ));
                        }
                        let plugin = previous
                            .device_plugin_configs
                            .get(&pn.device_plugin_config)
                            .map(|c| &c.time_slicing);
                        match node_devs(problem, pi, pn, plugin) {
                            Ok(devs) => node.gpus = devs,
                            Err(why) => {
                                notes.push(format!("node `{name}`: {why}; it is planned afresh"));
                                fresh.insert((pi, ni));
                                displace(problem, pn, &mut displaced);
                            }
                        }
                    }
                }
            }
            pa.nodes.push(node);
        }
        a.pools.push(pa);
    }
    for (name, (pp, pn)) in &prev_nodes {
        let replicas: usize = pn.gpus.iter().map(|g| g.tenants.len()).sum();
        if !seen.contains(name) {
            displace(problem, pn, &mut displaced);
        }
        if !seen.contains(name) && (replicas > 0 || !pp.autoscaled) {
            notes.push(format!(
                "node `{name}` (pool `{}`) is no longer in the inventory; its {replicas} replica slot(s) are placed elsewhere",
                pp.name
            ));
        }
    }
    for m in &previous.models {
        if !problem.models.iter().any(|x| x.name() == m.name) {
            notes.push(format!("model `{}` was removed: its replicas are stopped", m.name));
        }
    }
    (a, fresh, displaced)
}

/// What is still missing of a model's demand.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Missing {
    replicas: u32,
    rps: f64,
}

/// A replica slot in the assignment: (pool, node, gpu, tenant position).
type Slot = (usize, usize, usize, usize);

/// Every kept replica of model `m`, with its option kind, in placement order. A multi-GPU
/// replica is its first GPU.
fn replicas_of(problem: &Problem<'_>, a: &Assignment, m: usize) -> Vec<(Slot, Kind)> {
    let per = problem.models[m].spec.gpus.unwrap_or(1).max(1);
    let mut out = Vec::new();
    for (pi, pa) in a.pools.iter().enumerate() {
        for (ni, n) in pa.nodes.iter().enumerate() {
            let mut whole = 0u32;
            for (gi, d) in n.gpus.iter().enumerate() {
                match d {
                    Dev::Whole { tenant: Some(t) } if *t == m => {
                        if whole.is_multiple_of(per) {
                            out.push(((pi, ni, gi, 0), Kind::Whole(per)));
                        }
                        whole += 1;
                    }
                    Dev::Ts { tenants, .. } | Dev::MigTs { tenants, .. } => {
                        for (ti, t) in tenants.iter().enumerate() {
                            if *t == m
                                && let Some(k) = kind_of(d, per)
                            {
                                out.push(((pi, ni, gi, ti), k));
                            }
                        }
                        // Exclusive instances of a MIG time-slicing GPU: positions after the
                        // shared tenants.
                        if let Dev::MigTs { excl, .. } = d {
                            for (ti, (q, t)) in excl.iter().enumerate() {
                                if *t == m {
                                    out.push(((pi, ni, gi, tenants.len() + ti), Kind::Mig(*q)));
                                }
                            }
                        }
                    }
                    Dev::Mig { tenants, .. } => {
                        for (ti, (q, t)) in tenants.iter().enumerate() {
                            if *t == m {
                                out.push(((pi, ni, gi, ti), Kind::Mig(*q)));
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    out
}

/// Removes one replica of `m` at `slot` (all GPUs of a multi-GPU replica).
fn remove(problem: &Problem<'_>, a: &mut Assignment, m: usize, slot: Slot) {
    let per = problem.models[m].spec.gpus.unwrap_or(1).max(1) as usize;
    let (pi, ni, gi, ti) = slot;
    let Some(node) = a.pools.get_mut(pi).and_then(|p| p.nodes.get_mut(ni)) else { return };
    match node.gpus.get_mut(gi) {
        Some(Dev::Whole { .. }) => {
            for d in node.gpus.iter_mut().skip(gi).filter(|d| **d == Dev::Whole { tenant: Some(m) }).take(per)
            {
                *d = Dev::Whole { tenant: None };
            }
        }
        Some(Dev::Ts { tenants, .. } | Dev::MigTs { tenants, .. }) if ti < tenants.len() => {
            tenants.remove(ti);
        }
        Some(Dev::MigTs { tenants, excl, .. }) if ti - tenants.len() < excl.len() => {
            excl.remove(ti - tenants.len());
        }
        Some(Dev::Mig { tenants, .. }) if ti < tenants.len() => {
            tenants.remove(ti);
        }
        _ => {}
    }
}

/// Step (a), second half: drops replicas the new spec no longer admits where they run (pool,
/// isolation, memory, compute, latency, spread) and replicas beyond the demand. Returns what is
/// missing per model.
fn trim_to_demand(
    problem: &Problem<'_>,
    a: &mut Assignment,
    displaced: &mut Displaced,
    notes: &mut Vec<String>,
) -> BTreeMap<usize, Missing> {
    let mut missing = BTreeMap::new();
    for (m, mc) in problem.models.iter().enumerate() {
        // Not admitted any more: removed from the end so that slots stay valid.
        let mut reps = replicas_of(problem, a, m);
        let mut dropped = 0;
        for (slot, kind) in reps.iter().rev() {
            if !admitted(problem, m, slot.0, *kind) {
                remove(problem, a, m, *slot);
                dropped += 1;
            }
        }
        // Spread: at most one replica per node (`node`) or per GPU / shared resource (`gpu`).
        reps = replicas_of(problem, a, m);
        let mut seen_nodes = BTreeSet::new();
        let mut seen_gpus = BTreeSet::new();
        let mut spread_out = Vec::new();
        for (slot, kind) in &reps {
            let shared = matches!(kind, Kind::TimeSliced(_) | Kind::MigTs(..));
            let clash = match mc.spec.spread {
                Spread::None => false,
                Spread::Node => !seen_nodes.insert((slot.0, slot.1)),
                Spread::Gpu if shared => !seen_nodes.insert((slot.0, slot.1)),
                Spread::Gpu => !seen_gpus.insert((slot.0, slot.1, slot.2)),
            };
            if clash {
                spread_out.push(*slot);
            }
        }
        for slot in spread_out.iter().rev() {
            remove(problem, a, m, *slot);
            dropped += 1;
        }
        if dropped > 0 {
            *displaced.entry(m).or_insert(0) += dropped;
            notes.push(format!(
                "{dropped} replica(s) of `{}` no longer fit the manifest where they ran and are re-placed",
                mc.name()
            ));
        }
        reps = replicas_of(problem, a, m);
        let rps_of = |kind: Kind, pi: usize| {
            mc.options.iter().find(|o| o.pool == pi && o.kind == kind).and_then(|o| o.rps).unwrap_or(0.0)
        };
        match mc.need {
            Need::Replicas(n) => {
                let extra = reps.len().saturating_sub(n as usize);
                for (slot, _) in reps.iter().rev().take(extra) {
                    remove(problem, a, m, *slot);
                }
                let have = u32::try_from(reps.len().min(n as usize)).unwrap_or(u32::MAX);
                if have < n {
                    missing.insert(m, Missing { replicas: n - have, rps: 0.0 });
                }
            }
            Need::Rate { rps, min_replicas } => {
                let mut covered: f64 = reps.iter().map(|(s, k)| rps_of(*k, s.0)).sum();
                let mut count = reps.len() as u32;
                for (slot, kind) in reps.iter().rev() {
                    let r = rps_of(*kind, slot.0);
                    if count > min_replicas && covered - r >= rps - 1e-9 {
                        remove(problem, a, m, *slot);
                        covered -= r;
                        count -= 1;
                    }
                }
                let miss =
                    Missing { replicas: min_replicas.saturating_sub(count), rps: (rps - covered).max(0.0) };
                if miss.replicas > 0 || miss.rps > 1e-9 {
                    missing.insert(m, miss);
                }
            }
        }
    }
    missing
}

/// A lower bound on the nodes to re-partition: 1 when a missing model has no admissible kind of
/// device anywhere in today's layouts (then no re-arrangement of replicas can avoid a change),
/// else 0.
fn lower_bound(problem: &Problem<'_>, a: &Assignment, missing: &BTreeMap<usize, Missing>) -> u32 {
    let exists = |pi: usize, kind: Kind| -> bool {
        a.pools.get(pi).is_some_and(|pa| {
            pa.nodes.iter().any(|n| {
                let ts = n.gpus.iter().find_map(|d| if let Dev::Ts { k, .. } = d { Some(*k) } else { None });
                let mig_ts = n.gpus.iter().any(|d| matches!(d, Dev::MigTs { .. }));
                match kind {
                    Kind::Whole(c) => {
                        ts.is_none()
                            && !mig_ts
                            && n.gpus.iter().filter(|d| matches!(d, Dev::Unused | Dev::Whole { .. })).count()
                                >= c as usize
                    }
                    Kind::TimeSliced(k) => ts == Some(k),
                    Kind::Mig(q) => n.gpus.iter().any(|d| match d {
                        Dev::Mig { counts, .. } => counts.get(q).is_some_and(|c| *c > 0),
                        Dev::MigTs { q: shared, counts, .. } => {
                            *shared != q && counts.get(q).is_some_and(|c| *c > 0)
                        }
                        _ => false,
                    }),
                    Kind::MigTs(q, k) => n
                        .gpus
                        .iter()
                        .any(|d| matches!(d, Dev::MigTs { q: dq, k: dk, .. } if *dq == q && *dk == k)),
                }
            })
        })
    };
    let stuck = missing.keys().any(|&m| !problem.models[m].options.iter().any(|o| exists(o.pool, o.kind)));
    u32::from(stuck)
}

/// Nodes (pool, index) that ran a replica in the previous plan.
fn busy_nodes(problem: &Problem<'_>, previous: &Previous) -> BTreeSet<(usize, usize)> {
    let prev = previous.nodes();
    let mut out = BTreeSet::new();
    for (pi, pool) in problem.pools.iter().enumerate() {
        let count = if pool.autoscaled() { pool.max_nodes as usize } else { pool.named.len() };
        for ni in 0..count {
            let busy = prev
                .get(pool.node_name(ni).as_str())
                .is_some_and(|(_, pn)| pn.gpus.iter().any(|g| !g.tenants.is_empty()));
            if busy {
                out.insert((pi, ni));
            }
        }
    }
    out
}

/// The options of model `m`, cheapest share first (size weighted by the pool's price);
/// rate models: most requests per second per weighted share first.
fn cheapest_first<'p>(problem: &'p Problem<'_>, m: usize) -> Vec<&'p problem::Opt> {
    let mut opts: Vec<&problem::Opt> = problem.models[m].options.iter().collect();
    let share = |o: &problem::Opt| o.size * problem.pools[o.pool].weight.max(1e-9);
    opts.sort_by(|x, y| {
        let kx = x.rps.map_or(share(x), |r| -r / share(x).max(1e-9));
        let ky = y.rps.map_or(share(y), |r| -r / share(y).max(1e-9));
        kx.total_cmp(&ky).then(x.pool.cmp(&y.pool)).then(x.kind.cmp(&y.kind))
    });
    opts
}

/// Step (b), displaced replicas first: replicas that must move anyway (their node left or is
/// planned afresh, or the manifest no longer admits them where they ran) are placed
/// economically. Besides configured free capacity they may use GPUs that are unused now, laid
/// out afresh: MIG instances (packed onto the GPUs this step lays out), time-slices where the
/// node already time-slices with that count or ran nothing before, whole GPUs. An unused GPU
/// runs no pod, so configuring it drains nothing ([`transition::advance`]); a GPU that runs
/// replicas keeps its layout. Other missing replicas (more demand) go to [`fill_free`], which
/// changes no layout at all.
fn fill_displaced(
    problem: &Problem<'_>,
    a: &mut Assignment,
    missing: &mut BTreeMap<usize, Missing>,
    displaced: &Displaced,
    busy: &BTreeSet<(usize, usize)>,
) {
    // Largest replicas first: they are the hardest to pack.
    let mut models: Vec<usize> =
        missing.keys().copied().filter(|m| displaced.get(m).is_some_and(|&d| d > 0)).collect();
    let smallest = |m: usize| problem.models[m].options.iter().map(|o| o.size).fold(f64::INFINITY, f64::min);
    models.sort_by(|&x, &y| smallest(y).total_cmp(&smallest(x)).then(x.cmp(&y)));
    let mut laid_out: BTreeSet<(usize, usize, usize)> = BTreeSet::new();
    for m in models {
        let opts = cheapest_first(problem, m);
        // Rate models: smaller replicas than the displaced ones may be needed to cover the rate.
        let d = displaced.get(&m).copied().unwrap_or(0);
        let mut budget = match problem.models[m].need {
            Need::Replicas(_) => d,
            Need::Rate { .. } => d.saturating_mul(8).saturating_add(8),
        };
        while budget > 0 {
            let Some(miss) = missing.get_mut(&m) else { break };
            if miss.replicas == 0 && miss.rps <= 1e-9 {
                break;
            }
            let useful = |o: &&problem::Opt| miss.replicas > 0 || o.rps.unwrap_or(0.0) > 0.0;
            let fixed = || opts.iter().copied().filter(useful);
            let mut placed = None;
            for o in fixed() {
                if assign::place(problem, a, m, o.pool, o.kind, assign::Mode::Fixed, usize::MAX) {
                    placed = Some(o);
                    break;
                }
            }
            for grow_new in [false, true] {
                if placed.is_some() {
                    break;
                }
                placed =
                    fixed().find(|o| lay_out(problem, a, m, o.pool, o.kind, grow_new, &mut laid_out, busy));
            }
            let Some(o) = placed else { break };
            miss.replicas = miss.replicas.saturating_sub(1);
            miss.rps = (miss.rps - o.rps.unwrap_or(0.0)).max(0.0);
            budget -= 1;
        }
    }
    missing.retain(|_, x| x.replicas > 0 || x.rps > 1e-9);
}

/// Places one replica of `m` on GPUs laid out in this step: with `on_unused`, a GPU unused now
/// gets a new MIG layout, time-slicing or a whole-GPU tenant; without, a MIG GPU laid out
/// earlier in this step gets one more instance. Returns whether it placed.
#[allow(clippy::too_many_arguments)]
fn lay_out(
    problem: &Problem<'_>,
    a: &mut Assignment,
    m: usize,
    pi: usize,
    kind: Kind,
    on_unused: bool,
    laid_out: &mut BTreeSet<(usize, usize, usize)>,
    busy: &BTreeSet<(usize, usize)>,
) -> bool {
    let pool = &problem.pools[pi];
    let spread = problem.models[m].spec.spread;
    let Some(pa) = a.pools.get_mut(pi) else { return false };
    for (ni, n) in pa.nodes.iter_mut().enumerate() {
        if (spread == Spread::Node && n.hosts(m)) || n.has_mig_ts() {
            continue;
        }
        match kind {
            Kind::Mig(q) => {
                for gi in 0..n.gpus.len() {
                    let before = n.gpus[gi].clone();
                    if spread != Spread::None && assign::dev_hosts(&before, m) {
                        continue;
                    }
                    let next = match &before {
                        Dev::Unused if on_unused => {
                            let mut c = vec![0u8; pool.profiles.len()];
                            c[q] = 1;
                            Some(Dev::Mig { counts: c, tenants: vec![(q, m)] })
                        }
                        Dev::Mig { counts, tenants } if !on_unused && laid_out.contains(&(pi, ni, gi)) => {
                            let mut c = counts.clone();
                            c[q] = c[q].saturating_add(1);
                            let mut t = tenants.clone();
                            t.push((q, m));
                            Some(Dev::Mig { counts: c, tenants: t })
                        }
                        _ => None,
                    };
                    let Some(next) = next else { continue };
                    if let Dev::Mig { counts, .. } = &next
                        && !pool.fits(counts)
                    {
                        continue;
                    }
                    n.gpus[gi] = next;
                    if problem.mig_spread_models && !n.mig_spread_ok(problem) {
                        n.gpus[gi] = before;
                        continue;
                    }
                    laid_out.insert((pi, ni, gi));
                    return true;
                }
            }
            Kind::TimeSliced(k) if on_unused => {
                // The node's sharing config changes only where it ran nothing before.
                let sharing_ok = match n.ts_k() {
                    Some(x) => x == k,
                    None => !busy.contains(&(pi, ni)) && !n.used(),
                };
                if n.has_whole() || !sharing_ok || (spread == Spread::Gpu && n.hosts_shared(m)) {
                    continue;
                }
                // The device plugin may put any of the node's shared tenants together on one
                // GPU: the node's tenants with this one added must pass the verifier's rule.
                if !assign::ts_room(problem, pi, n, m, k) {
                    continue;
                }
                if let Some(gi) = n.gpus.iter().position(|d| *d == Dev::Unused) {
                    n.gpus[gi] = Dev::Ts { k, tenants: vec![m] };
                    laid_out.insert((pi, ni, gi));
                    return true;
                }
            }
            // Whole GPUs: the planner's own placement on unused GPUs (it changes no other GPU).
            Kind::Whole(_) if on_unused => {
                return assign::place(problem, a, m, pi, kind, assign::Mode::Grow, usize::MAX);
            }
            _ => {}
        }
    }
    false
}

/// Step (b): places missing replicas on capacity that is already configured, without changing
/// any node's MIG layout or sharing config. Returns whether every replica found a place.
fn fill_free(problem: &Problem<'_>, a: &mut Assignment, missing: &mut BTreeMap<usize, Missing>) -> bool {
    // Unused GPUs take a replica without a config change: as time-slices on a node that
    // time-slices whole GPUs (the device plugin shares them already), else as whole GPUs.
    for pa in &mut a.pools {
        for n in &mut pa.nodes {
            let ts = n.gpus.iter().find_map(|d| if let Dev::Ts { k, .. } = d { Some(*k) } else { None });
            let mig_ts = n.gpus.iter().any(|d| matches!(d, Dev::MigTs { .. }));
            for d in &mut n.gpus {
                if *d == Dev::Unused {
                    match ts {
                        Some(k) => *d = Dev::Ts { k, tenants: Vec::new() },
                        None if !mig_ts => *d = Dev::Whole { tenant: None },
                        None => {}
                    }
                }
            }
        }
    }
    let models: Vec<usize> = missing.keys().copied().collect();
    for m in models {
        let mc = &problem.models[m];
        let mut opts: Vec<&problem::Opt> = mc.options.iter().collect();
        // Smallest share first; rate models: most requests per second per share first.
        opts.sort_by(|x, y| {
            let kx = x.rps.map_or(x.size, |r| -r / x.size.max(1e-9));
            let ky = y.rps.map_or(y.size, |r| -r / y.size.max(1e-9));
            kx.total_cmp(&ky).then(x.pool.cmp(&y.pool)).then(x.kind.cmp(&y.kind))
        });
        let Some(miss) = missing.get_mut(&m) else { continue };
        loop {
            if miss.replicas == 0 && miss.rps <= 1e-9 {
                break;
            }
            let mut placed = false;
            for o in &opts {
                if miss.replicas == 0 && o.rps.unwrap_or(0.0) <= 0.0 {
                    continue;
                }
                if assign::place(problem, a, m, o.pool, o.kind, assign::Mode::Fixed, usize::MAX) {
                    miss.replicas = miss.replicas.saturating_sub(1);
                    miss.rps = (miss.rps - o.rps.unwrap_or(0.0)).max(0.0);
                    placed = true;
                    break;
                }
            }
            if !placed {
                break;
            }
        }
    }
    missing.retain(|_, x| x.replicas > 0 || x.rps > 1e-9);
    missing.is_empty()
}

/// Turns capacity that step (b) did not use back into unused GPUs (whole GPUs without a
/// tenant; time-sliced GPUs without tenants when another GPU of the node keeps the sharing).
fn normalise(a: &mut Assignment) {
    for pa in &mut a.pools {
        for n in &mut pa.nodes {
            for d in &mut n.gpus {
                if *d == (Dev::Whole { tenant: None }) {
                    *d = Dev::Unused;
                }
            }
            let ts: Vec<usize> = n
                .gpus
                .iter()
                .enumerate()
                .filter(|(_, d)| matches!(d, Dev::Ts { .. }))
                .map(|(i, _)| i)
                .collect();
            let busy =
                ts.iter().any(|&i| matches!(&n.gpus[i], Dev::Ts { tenants, .. } if !tenants.is_empty()));
            for (j, &i) in ts.iter().enumerate() {
                let idle = matches!(&n.gpus[i], Dev::Ts { tenants, .. } if tenants.is_empty());
                // Keep one idle time-sliced GPU when none is busy: it holds the node's sharing config.
                if idle && (busy || j > 0) {
                    n.gpus[i] = Dev::Unused;
                }
            }
        }
    }
}

/// Step (c): re-plans the missing replicas plus those of a few nodes on those nodes only.
/// Returns how many nodes were re-planned, or `None` when no subset works.
fn repartition(
    spec: &Spec,
    catalog: &Catalog,
    problem: &Problem<'_>,
    a: &mut Assignment,
    missing: &BTreeMap<usize, Missing>,
    fresh: &mut BTreeSet<(usize, usize)>,
) -> Option<usize> {
    // Candidate nodes in pools some missing model may use: fewest kept replicas first.
    let usable: BTreeSet<usize> =
        missing.keys().flat_map(|&m| problem.models[m].options.iter().map(|o| o.pool)).collect();
    let mut cands: Vec<(usize, usize, usize)> = Vec::new();
    for &pi in &usable {
        for (ni, n) in a.pools[pi].nodes.iter().enumerate() {
            let load = n.gpus.iter().map(dev_load).sum::<usize>();
            cands.push((load, pi, ni));
        }
    }
    cands.sort();
    let cands: Vec<(usize, usize)> = cands.into_iter().map(|(_, p, n)| (p, n)).collect();
    if cands.is_empty() {
        return None;
    }
    let try_size = |s: usize| -> Option<Plan> {
        let chosen = &cands[..s.min(cands.len())];
        let sub = sub_spec(spec, problem, a, missing, chosen)?;
        crate::plan::plan(&sub, catalog).ok()
    };
    let mut lo = 0usize;
    let mut hi = 1usize;
    let mut found: Option<(usize, Plan)> = None;
    loop {
        let s = hi.min(cands.len());
        if let Some(p) = try_size(s) {
            found = Some((s, p));
            break;
        }
        if s == cands.len() {
            break;
        }
        lo = s;
        hi = s * 2;
    }
    let (mut best_s, mut best) = found?;
    // Narrow to the smallest working prefix.
    while best_s - lo > 1 {
        let mid = lo + (best_s - lo) / 2;
        match try_size(mid) {
            Some(p) => {
                best_s = mid;
                best = p;
            }
            None => lo = mid,
        }
    }
    merge(problem, a, &best, &cands[..best_s]);
    for &(pi, ni) in &cands[..best_s] {
        fresh.insert((pi, ni));
    }
    Some(best_s)
}

fn dev_load(d: &Dev) -> usize {
    match d {
        Dev::Unused => 0,
        Dev::Whole { tenant } => usize::from(tenant.is_some()),
        Dev::Ts { tenants, .. } => tenants.len(),
        Dev::MigTs { tenants, excl, .. } => tenants.len() + excl.len(),
        Dev::Mig { tenants, .. } => tenants.len(),
    }
}

/// The sub-problem of step (c): the chosen nodes only, with the missing demand plus the
/// replicas those nodes run today.
fn sub_spec(
    spec: &Spec,
    problem: &Problem<'_>,
    a: &Assignment,
    missing: &BTreeMap<usize, Missing>,
    chosen: &[(usize, usize)],
) -> Option<Spec> {
    let mut sub = spec.clone();
    let mut by_pool: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for &(pi, ni) in chosen {
        by_pool.entry(pi).or_default().push(problem.pools[pi].node_name(ni));
    }
    sub.pools = by_pool
        .iter()
        .map(|(&pi, names)| {
            let mut p = problem.pools[pi].spec.clone();
            p.nodes = Nodes::Named(names.clone());
            p.current = Vec::new();
            p
        })
        .collect();
    sub.pools.sort_by(|x, y| x.name.cmp(&y.name));
    let chosen_set: BTreeSet<(usize, usize)> = chosen.iter().copied().collect();
    let mut models = Vec::new();
    for (m, mc) in problem.models.iter().enumerate() {
        let reps = replicas_of(problem, a, m);
        let inside: Vec<&(Slot, Kind)> =
            reps.iter().filter(|(s, _)| chosen_set.contains(&(s.0, s.1))).collect();
        let miss = missing.get(&m).copied().unwrap_or(Missing { replicas: 0, rps: 0.0 });
        let mut spec_m = mc.spec.clone();
        match &mc.need {
            Need::Replicas(_) => {
                let n = miss.replicas + u32::try_from(inside.len()).unwrap_or(u32::MAX);
                if n == 0 {
                    continue;
                }
                spec_m.demand = Demand::Replicas(n);
            }
            Need::Rate { .. } => {
                let Demand::Rate(rate) = &mc.spec.demand else { continue };
                let rps_of = |kind: Kind, pi: usize| {
                    mc.options
                        .iter()
                        .find(|o| o.pool == pi && o.kind == kind)
                        .and_then(|o| o.rps)
                        .unwrap_or(0.0)
                };
                let inside_rps: f64 = inside.iter().map(|(s, k)| rps_of(*k, s.0)).sum();
                let rps = miss.rps + inside_rps;
                let min = miss.replicas + u32::try_from(inside.len()).unwrap_or(u32::MAX);
                if rps <= 1e-9 && min == 0 {
                    continue;
                }
                spec_m.demand =
                    Demand::Rate(RateDemand { rps: rps.max(1e-6), min_replicas: min.max(1), ..rate.clone() });
            }
        }
        spec_m.pools.retain(|p| sub.pools.iter().any(|x| &x.name == p));
        if !mc.spec.pools.is_empty() && spec_m.pools.is_empty() {
            return None;
        }
        models.push(spec_m);
    }
    if models.is_empty() {
        return None;
    }
    sub.models = models;
    Some(sub)
}

/// Puts the sub-plan's nodes into the assignment in place of the chosen nodes.
fn merge(problem: &Problem<'_>, a: &mut Assignment, sub: &Plan, chosen: &[(usize, usize)]) {
    let plugin: BTreeMap<&str, &BTreeMap<String, u32>> =
        sub.device_plugin_configs.iter().map(|(k, v)| (k.as_str(), &v.time_slicing)).collect();
    for &(pi, ni) in chosen {
        let name = problem.pools[pi].node_name(ni);
        let Some(node) = sub.nodes().find(|n| n.name == name) else {
            a.pools[pi].nodes[ni] = NodeA { gpus: vec![Dev::Unused; problem.pools[pi].gpn() as usize] };
            continue;
        };
        let prev = to_prev_node(node);
        // Tenants of the chosen nodes were handed to the sub-problem: the node is replaced.
        if let Ok(devs) =
            node_devs(problem, pi, &prev, plugin.get(node.device_plugin_config.as_str()).copied())
        {
            a.pools[pi].nodes[ni] = NodeA { gpus: devs };
        }
    }
}

fn to_prev_node(n: &crate::plan::NodePlan) -> PrevNode {
    use crate::plan::day2::previous::PrevGpu;
    PrevNode {
        name: n.name.clone(),
        mig_config: n.mig_config.clone(),
        device_plugin_config: n.device_plugin_config.clone(),
        gpus: n.gpus.iter().map(PrevGpu::from_planned).collect(),
        must_drain: n.must_drain,
        transition: None,
    }
}

/// Recomputes the per-option replica counts from the devices.
fn recount(problem: &Problem<'_>, a: &mut Assignment) {
    let mut counts: BTreeMap<(usize, usize, Kind), u32> = BTreeMap::new();
    for m in 0..problem.models.len() {
        for ((pi, _, _, _), kind) in replicas_of(problem, a, m) {
            *counts.entry((m, pi, kind)).or_insert(0) += 1;
        }
    }
    a.replicas = counts;
}

/// Drops trailing unused nodes of autoscaled pools, keeping the pool's minimum.
fn trim_autoscaled(problem: &Problem<'_>, a: &mut Assignment) {
    for (pa, p) in a.pools.iter_mut().zip(&problem.pools) {
        if !p.autoscaled() {
            continue;
        }
        while pa.nodes.len() > p.min_nodes as usize && pa.nodes.last().is_some_and(|n| !n.used()) {
            pa.nodes.pop();
        }
    }
}

/// The content-addressed name of a mig-parted config: `<prefix>-<8 hex digits of its
/// contents' stable hash>` (its JSON in `plan.json`, whose maps are sorted); a hash collision
/// with a name in `used` gets `-2`, `-3`, … appended.
fn content_name(prefix: &str, cfg: &crate::plan::MigConfig, used: &BTreeSet<String>) -> String {
    let text = serde_json::to_string(cfg).unwrap_or_default();
    let base = format!("{prefix}-{:08x}", crate::spec::names::stable_hash(text.as_bytes()));
    let mut name = base.clone();
    let mut i = 2;
    while used.contains(&name) {
        name = format!("{base}-{i}");
        i += 1;
    }
    name
}

/// Keeps the previous plan's mig-parted config names where the new plan has a config with the
/// same contents, so that unchanged nodes keep their `nvidia.com/mig.config` label value;
/// configs with new contents get content-addressed names ([`content_name`]).
fn stabilise_names(plan: &mut Plan, previous: &Previous) {
    let prefix = |name: &str| name.rsplit_once('-').map_or(name.to_owned(), |(p, _)| p.to_owned());
    let mut rename: BTreeMap<String, String> = BTreeMap::new();
    let mut taken: BTreeSet<String> = BTreeSet::new();
    for (name, cfg) in &plan.mig_configs {
        if let Some((old, _)) = previous
            .mig_configs
            .iter()
            .find(|(old, c)| !taken.contains(*old) && prefix(old) == prefix(name) && *c == cfg)
        {
            taken.insert(old.clone());
            rename.insert(name.clone(), old.clone());
        }
    }
    // Configs with new contents get a name derived from their contents, so that a name that
    // left the plan (no node carries it any more, and no later `plan.json` remembers it) is
    // never given other contents by a later compile.
    let mut used: BTreeSet<String> = taken.clone();
    used.extend(previous.mig_configs.keys().cloned());
    for (name, cfg) in &plan.mig_configs {
        if rename.contains_key(name) || name == crate::catalog::migparted::ALL_DISABLED {
            continue;
        }
        let target = content_name(&prefix(name), cfg, &used);
        used.insert(target.clone());
        rename.insert(name.clone(), target);
    }
    if rename.iter().all(|(a, b)| a == b) {
        return;
    }
    let configs = std::mem::take(&mut plan.mig_configs);
    for (name, cfg) in configs {
        let to = rename.get(&name).cloned().unwrap_or(name);
        plan.mig_configs.insert(to, cfg);
    }
    for n in plan.pools.iter_mut().flat_map(|p| &mut p.nodes) {
        if let Some(to) = rename.get(&n.mig_config) {
            n.mig_config = to.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::{Options, content_name, replan, stabilise_names};
    use crate::bench::{A100, catalog, model, pool, spec};
    use crate::catalog::migparted::ALL_DISABLED;

    /// A config name the previous plan gave other contents is not reused; new contents get a
    /// name that depends on the contents only, so a name dropped earlier never comes back with
    /// other contents.
    #[test]
    fn new_config_contents_get_content_addressed_names() {
        let s =
            spec("t", vec![pool("a", A100, 1, vec!["n1".to_owned()])], vec![model("m", 9 * 1024, 0.1, 3)]);
        let mut plan = crate::plan::plan(&s, &catalog()).expect("plans");
        let (name, cfg) = plan
            .mig_configs
            .iter()
            .find(|(n, _)| n.as_str() != ALL_DISABLED)
            .map(|(n, c)| (n.clone(), c.clone()))
            .expect("a MIG config");
        let mut prev =
            crate::plan::day2::previous::parse(&serde_json::to_string(&plan).expect("json")).expect("reads");
        if let Some(c) = prev.mig_configs.get_mut(&name) {
            c.entries[0].mig_devices.insert("7g.80gb".to_owned(), 1);
        }
        stabilise_names(&mut plan, &prev);
        let now = plan.pools[0].nodes[0].mig_config.clone();
        assert_ne!(now, name, "the name had other contents before");
        assert_eq!(now, content_name("gpuplan-a", &cfg, &BTreeSet::new()));
        assert!(plan.mig_configs.contains_key(&now) && !plan.mig_configs.contains_key(&name));
        let mut other = cfg.clone();
        other.entries[0].mig_devices.insert("7g.80gb".to_owned(), 1);
        let none = BTreeSet::new();
        assert_ne!(content_name("p", &cfg, &none), content_name("p", &other, &none));
        let taken = BTreeSet::from([content_name("p", &cfg, &none)]);
        assert_eq!(content_name("p", &cfg, &taken), format!("{}-2", content_name("p", &cfg, &none)));
    }

    /// A node removed: its small replicas are packed onto MIG instances of GPUs that ran
    /// nothing (no whole GPU each, no drain of the nodes that keep running).
    #[test]
    fn displaced_replicas_are_packed_on_idle_gpus_without_a_drain() {
        let nodes = |n: usize| (1..=n).map(|i| format!("n{i}")).collect::<Vec<_>>();
        let models: Vec<_> = (0..6).map(|i| model(&format!("m{i}"), 9 * 1024, 0.1, 2)).collect();
        let before = spec("t", vec![pool("a", A100, 2, nodes(4))], models.clone());
        let cat = catalog();
        let first = crate::plan::plan(&before, &cat).expect("plans");
        let prev =
            crate::plan::day2::previous::parse(&serde_json::to_string(&first).expect("json")).expect("reads");
        // Remove the first node that runs replicas.
        let busy = first.pools[0]
            .nodes
            .iter()
            .find(|n| n.gpus.iter().any(|g| !g.tenants.is_empty()))
            .map(|n| n.name.clone())
            .expect("a busy node");
        let after = spec(
            "t",
            vec![pool("a", A100, 2, nodes(4).into_iter().filter(|n| *n != busy).collect())],
            models,
        );
        let r = replan(&after, &cat, &prev, Options::default()).expect("re-plans");
        let fs = r.from_scratch_gpus.expect("from scratch");
        assert!(
            r.plan.quality.gpus.used <= fs + 1,
            "{} GPUs against {fs} from scratch",
            r.plan.quality.gpus.used
        );
        assert!(r.plan.nodes().all(|n| !n.must_drain));
        for g in r.plan.nodes().flat_map(|n| &n.gpus) {
            assert!(
                !matches!(g.mode, crate::plan::GpuMode::Whole) || g.tenants.is_empty(),
                "a small replica on a whole GPU"
            );
        }
    }
}
