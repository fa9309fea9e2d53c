//! The plan: how every GPU is cut and where every replica runs, with the reason for each choice.
//!
//! In: a checked [`Spec`] and the [`Catalog`]. Out: a [`Plan`] — per pool, per node, per GPU the
//! mode (whole, time-sliced, MIG instances with placements), the node's named mig-parted and
//! device-plugin configs, and per model the replica groups with the resource each requests —
//! or diagnostics that say which models cannot be served and why.
//!
//! Invariants: deterministic (same bytes for the same input, whatever its order); every MIG
//! layout in a plan passed [`crate::catalog::layout::validate`]; solver types never leave this module.

mod assign;
mod bounds;
mod build;
pub use build::ALTERNATIVE_PREFIX;
mod infeasible;
#[doc(hidden)]
pub mod latency;
mod layouts;
mod milp;
#[doc(hidden)]
pub mod previous;
mod problem;
#[doc(hidden)]
pub mod replan;
#[doc(hidden)]
pub mod rollout;
#[doc(hidden)]
pub mod rules;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::catalog::Catalog;
use crate::catalog::layout::PlacedInstance;
use crate::diagnostics::{Diagnostic, Diagnostics, codes};
use crate::plan::milp::{Goal, MilpError};
use crate::spec::{Keyword, Spec};

/// One line of the planning trace: `tr!(tracer, "format", args…)` (see [`Tracer`]).
macro_rules! tr {
    ($t:expr, $($a:tt)*) => {
        $t.line(format_args!($($a)*))
    };
}

/// The output of planning.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The spec's name.
    pub name: String,
    /// Pools in spec order (sorted by name).
    pub pools: Vec<PoolPlan>,
    /// Models sorted by name.
    pub models: Vec<ModelPlan>,
    /// Named mig-parted configs, by config name (always includes `all-disabled`).
    pub mig_configs: BTreeMap<String, MigConfig>,
    /// Named device-plugin configs, by config (ConfigMap key) name.
    pub device_plugin_configs: BTreeMap<String, DevicePluginConfig>,
    pub quality: Quality,
    /// Day 2: what changed against the previous plan and the rollout order (absent on a first plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<rollout::Changes>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolPlan {
    pub name: String,
    /// Catalog id of the pool's GPU.
    pub gpu: String,
    /// Whether nodes are templates of an autoscaled group (not real node names).
    pub autoscaled: bool,
    /// Nodes the plan uses, sorted by name; unused named nodes appear with all GPUs `Unused`.
    pub nodes: Vec<NodePlan>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePlan {
    /// Kubernetes node name, or `<pool>-<n>` for a node of an autoscaled pool.
    pub name: String,
    /// Value of the `nvidia.com/mig.config` label: a key of [`Plan::mig_configs`].
    pub mig_config: String,
    /// Value of the `nvidia.com/device-plugin.config` label: a key of [`Plan::device_plugin_configs`].
    pub device_plugin_config: String,
    /// Whether this node's layout differs from the pool's current layout (it must be drained).
    pub must_drain: bool,
    /// GPUs by index.
    pub gpus: Vec<GpuPlan>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuPlan {
    pub index: u32,
    pub mode: GpuMode,
    /// Replicas on this GPU: on a MIG GPU, one entry per used instance (by `start`).
    pub tenants: Vec<Tenant>,
}

/// How one GPU is configured.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "mode")]
pub enum GpuMode {
    /// Not used by the plan (MIG disabled, nothing scheduled).
    Unused,
    /// MIG disabled, one exclusive tenant (or part of a multi-GPU replica).
    Whole,
    /// MIG disabled, shared by time-slicing with `replicas` slots.
    TimeSliced { replicas: u32 },
    /// MIG enabled with these instances.
    Mig { instances: Vec<PlacedInstance> },
}

/// One replica (or slot) placed on a GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tenant {
    pub model: String,
    /// The MIG instance's start slice, for MIG GPUs.
    pub instance_start: Option<u8>,
}

/// A mig-parted config: entries applied in order, as in mig-parted's `mig-configs` lists.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigConfig {
    pub entries: Vec<MigConfigEntry>,
}

impl MigConfig {
    /// MIG off on every GPU: the config every plan names `all-disabled`.
    pub fn disabled() -> Self {
        MigConfig {
            entries: vec![MigConfigEntry {
                devices: None,
                device_filter: Vec::new(),
                mig_enabled: false,
                mig_devices: BTreeMap::new(),
            }],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigConfigEntry {
    /// GPU indices, or `None` for `all`.
    pub devices: Option<Vec<u32>>,
    /// PCI ids (`0xDDDD10DE`) the entry applies to; empty = any GPU.
    pub device_filter: Vec<String>,
    pub mig_enabled: bool,
    /// Profile name → count (empty when MIG is disabled).
    pub mig_devices: BTreeMap<String, u32>,
}

/// A device-plugin config (one key of the device-plugin ConfigMap).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DevicePluginConfig {
    /// Resource name (`nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`) → time-slicing replicas.
    pub time_slicing: BTreeMap<String, u32>,
}

/// Where and how a model runs.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelPlan {
    pub name: String,
    /// One group per distinct resource the model's replicas request; each becomes a Deployment.
    pub groups: Vec<ReplicaGroup>,
    /// Why the planner chose this, one sentence each (`gpuplan explain`).
    pub reasons: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaGroup {
    /// Extended resource each replica requests, e.g. `nvidia.com/mig-3g.40gb` or `nvidia.com/gpu.shared`.
    pub resource: String,
    /// How many of `resource` each replica requests (whole GPUs of a multi-GPU model; else 1).
    pub per_replica: u32,
    pub replicas: u32,
    pub pool: String,
    /// Nodes that host this group's replicas, sorted.
    pub nodes: Vec<String>,
}

/// How good the plan is, and what it is compared with.
///
/// Two kinds of bound (`docs/planner.md`, "Bounds"): `lowerBound` and `costLowerBoundPerHour`
/// hold for every plan gpuplan's verifier accepts; `modelLowerBound` and
/// `modelCostLowerBoundPerHour` only for the plans of the planner's own model (which leaves
/// some valid plans out), so they may be higher. Neither is clamped to the plan.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Quality {
    pub gpus_used: u32,
    /// No plan that gpuplan's verifier accepts uses fewer GPUs than this.
    pub lower_bound: u32,
    /// No plan of the planner's model uses fewer GPUs (the LP relaxation of its program and
    /// its options' sizes); plans outside the model may.
    pub model_lower_bound: u32,
    /// GPUs if every replica had its own whole GPU(s).
    pub one_gpu_per_replica: u32,
    /// GPUs first-fit-decreasing needs, if it finds a plan.
    pub first_fit_decreasing: Option<u32>,
    /// Cost per hour of the GPUs used, when every used pool has a price.
    pub cost_per_hour: Option<f64>,
    /// No plan the verifier accepts costs less per hour than this, when every pool has a price
    /// (then the planner minimises cost, and this is the bound to compare it with).
    pub cost_lower_bound_per_hour: Option<f64>,
    /// No plan of the planner's model costs less per hour (the LP relaxation of cost).
    pub model_cost_lower_bound_per_hour: Option<f64>,
    /// Cost per hour of the first-fit-decreasing plan, when every pool has a price.
    pub first_fit_decreasing_cost_per_hour: Option<f64>,
    /// What is proven about the plan's GPU count (its cost, on priced pools).
    pub proof: Proof,
}

/// What is proven about a plan's GPU count, or its cost on priced pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Proof {
    /// It equals the bound valid for every plan: no plan the verifier accepts does better.
    Optimal,
    /// Optimal among the plans of the planner's model: the solver proved it for the full
    /// program, or it equals the model's bound. Plans outside the model may do better.
    ModelOptimal,
    /// Nothing proven: compare it with the bounds.
    Unproven,
}

/// Cost figures closer than this (relative) are equal: a bound of 350.9999999 is 351.
const COST_TOLERANCE: f64 = 1e-6;

impl Quality {
    /// Whether the plan is judged by cost (every pool priced) rather than by GPUs.
    pub fn priced(&self) -> bool {
        self.cost_per_hour.is_some() && self.cost_lower_bound_per_hour.is_some()
    }

    /// One sentence saying how good the plan is and what is proven, the same wherever it is
    /// shown (`PLAN.md`, `explain`, the `compile` summary).
    pub fn verdict(&self) -> String {
        let money = |x: f64| format!("${x:.2}/h");
        if let (Some(cost), Some(valid)) = (self.cost_per_hour, self.cost_lower_bound_per_hour) {
            let model = self.model_cost_lower_bound_per_hour.unwrap_or(valid).max(valid);
            let over_valid = (cost - valid).max(0.0);
            let over_model = (cost - model).max(0.0);
            return match self.proof {
                Proof::Optimal => format!("optimal: no plan costs less than {}", money(valid)),
                Proof::ModelOptimal => format!(
                    "optimal among the planner's plans; {} above the bound valid for every plan ({})",
                    money(over_valid),
                    money(valid)
                ),
                Proof::Unproven => format!(
                    "not proven optimal: within {} of the planner's bound ({}) and {} of the bound valid for every plan ({})",
                    money(over_model),
                    money(model),
                    money(over_valid),
                    money(valid)
                ),
            };
        }
        let model = self.model_lower_bound.max(self.lower_bound);
        let over_valid = self.gpus_used.saturating_sub(self.lower_bound);
        let over_model = self.gpus_used.saturating_sub(model);
        match self.proof {
            Proof::Optimal => format!("optimal: no plan uses fewer than {} GPU(s)", self.lower_bound),
            Proof::ModelOptimal => format!(
                "optimal among the planner's plans; {over_valid} GPU(s) above the bound valid for every plan ({})",
                self.lower_bound
            ),
            Proof::Unproven => format!(
                "not proven optimal: within {over_model} GPU(s) of the planner's bound ({model}) and {over_valid} of the bound valid for every plan ({})",
                self.lower_bound
            ),
        }
    }

    /// The one line `compile` prints: GPUs and $/h used, the bound valid for every plan, the
    /// one-GPU-per-replica baseline, and the verdict; `drains` is the number of nodes to
    /// re-partition.
    pub fn summary(&self, drains: usize) -> String {
        let cost = self.cost_per_hour.map_or_else(String::new, |c| format!(" (${c:.2}/h)"));
        let bound = match self.cost_lower_bound_per_hour {
            Some(b) if self.priced() => format!("{} GPU(s), ${b:.2}/h", self.lower_bound),
            _ => format!("{} GPU(s)", self.lower_bound),
        };
        format!(
            "plan: {} GPU(s) used{cost}; lower bound {bound}; one GPU per replica: {}; {drains} node(s) to re-partition; {}",
            self.gpus_used,
            self.one_gpu_per_replica,
            self.verdict()
        )
    }

    /// What is proven, from the figures and whether a solver proved the full program optimal.
    pub(crate) fn judge(&self, solver_proved: bool) -> Proof {
        if let (Some(cost), Some(valid)) = (self.cost_per_hour, self.cost_lower_bound_per_hour) {
            let tol = COST_TOLERANCE * cost.abs().max(1.0);
            let model = self.model_cost_lower_bound_per_hour.unwrap_or(valid);
            return if cost <= valid + tol {
                Proof::Optimal
            } else if solver_proved || cost <= model + tol {
                Proof::ModelOptimal
            } else {
                Proof::Unproven
            };
        }
        if self.gpus_used <= self.lower_bound {
            Proof::Optimal
        } else if solver_proved || self.gpus_used <= self.model_lower_bound {
            Proof::ModelOptimal
        } else {
            Proof::Unproven
        }
    }
}

impl Plan {
    /// Nodes whose layout or sharing config changes and that must be drained.
    pub fn drains(&self) -> usize {
        self.pools.iter().flat_map(|p| &p.nodes).filter(|n| n.must_drain).count()
    }
}

/// Plans a spec. Returns the plan, or diagnostics explaining why no plan exists.
///
/// Steps: build the problem (every model's admissible options), reject models that no device
/// can serve, run first-fit-decreasing (the floor), solve the MILP with the first-fit cost as an
/// upper bound, decompose its counts to nodes and GPUs (directly, else by backtracking), keep
/// whichever is cheaper (ties go to the MILP), compute the LP lower bound, and build the plan.
/// When neither gives a plan, first-fit-decreasing with backtracking is the last resort. When nothing fits, re-solve with
/// the pools' node counts relaxed to name the smallest inventory addition.
pub fn plan(spec: &Spec, catalog: &Catalog) -> Result<Plan, Diagnostics> {
    plan_traced(spec, catalog, None)
}

/// [`plan`], writing one line per step (elapsed time, what the step found) to `trace`: how the
/// benchmark (`GPUPLAN_TRACE=1`) shows where time and quality go. Trace write errors are ignored.
pub fn plan_traced(
    spec: &Spec,
    catalog: &Catalog,
    trace: Option<&mut dyn std::io::Write>,
) -> Result<Plan, Diagnostics> {
    let mut tracer = Tracer { out: trace, t0: std::time::Instant::now() };
    let problem = problem::build(spec, catalog);
    tr!(tracer, "problem: {} models, {} pools", problem.models.len(), problem.pools.len());
    let diags = infeasible::unservable(&problem);
    if diags.has_errors() {
        return Err(diags);
    }
    let ffd = assign::ffd(&problem);
    let ffd_cost = ffd.as_ref().map(|a| a.cost(&problem));
    let ffd_gpus = ffd.as_ref().map(|a| u32::try_from(a.gpus_used()).unwrap_or(u32::MAX));
    tr!(tracer, "first-fit-decreasing: {ffd_gpus:?} GPUs, cost {ffd_cost:?}");
    let no_pins = milp::Pins::new();
    let relaxed = milp::solve(&problem, Goal::Bound, &no_pins).ok();
    let lp = relaxed.as_ref().map_or(0, |r| (r.objective - 1e-6).ceil().max(0.0) as u32);
    let lower_bound = lp.max(infeasible::size_bound(&problem));
    let valid = bounds::valid_bound(&problem);
    tr!(
        tracer,
        "LP bound: {:.3} GPUs; model lower bound {lower_bound} GPUs; bound valid for every plan {} GPUs",
        relaxed.as_ref().map_or(f64::NAN, |r| r.objective),
        valid.gpus
    );
    let floor = (lower_bound > 0).then_some(f64::from(lower_bound));
    // On priced pools the plan minimises cost: its own bound is the LP relaxation of cost, cut
    // by the GPU bound (every plan uses that many GPUs at least).
    let cost_relaxed = problem
        .unit_price
        .and_then(|_| milp::solve(&problem, Goal::CostBound { gpu_floor: floor }, &no_pins).ok());
    if let Some(r) = &cost_relaxed {
        tr!(tracer, "LP cost bound: {:.3} (relative weights)", r.cost);
    }
    let cost_bound = cost_relaxed
        .as_ref()
        .zip(problem.unit_price)
        .map(|(r, unit)| (r.cost.max(0.0) * unit * 1e6).round() / 1e6);
    let goal = Goal::Plan { cost_bound: ffd_cost, gpu_floor: floor };
    // Large programs: the relaxation's choices laid out directly (its device counts rounded,
    // each model's replicas made whole on its most-used devices, what finds no room placed by
    // first fit). Within [`RELAXATION_PLAN_GAP`] of the relaxation's cost, no solve is run: it
    // costs a fraction of a second where the solves take many (microlp on the priced
    // 10,000-GPU benchmark fleet stops without any plan), and the plan is well inside the
    // quality target.
    let guide = if problem.unit_price.is_some() { cost_relaxed.as_ref() } else { relaxed.as_ref() };
    let large = milp::is_large(&problem);
    let preferred = guide.filter(|_| large).map(|lp| {
        let mut p = lp.replicas.clone();
        p.extend(round_all(&problem, lp));
        p
    });
    let relaxation_plan = guide.zip(preferred.as_ref()).and_then(|(lp, pref)| {
        let a = assign::decompose(&problem, &lp.counts, &exact_totals(&problem, pref), true)?;
        tr!(
            tracer,
            "relaxation laid out: {} GPUs, cost {:.3}, {} replica(s) placed by first fit",
            a.gpus_used(),
            a.cost(&problem),
            a.repaired
        );
        Some((a, lp.cost))
    });
    let close = |a: &assign::Assignment, lp: f64| {
        a.cost(&problem) <= lp * (1.0 + RELAXATION_PLAN_GAP) + 1e-9
            && ffd.as_ref().is_none_or(|f| a.cost(&problem) <= f.cost(&problem) + 1e-9)
    };
    let Optimised { assignment, method, searched, proved: solver_proved } = match relaxation_plan {
        Some((a, lp)) if close(&a, lp) => Optimised {
            assignment: a,
            method: format!(
                "the LP relaxation's device choices laid out on nodes, within {:.0}% of the relaxation's cost, so the optimiser was not run (large program; not proven optimal)",
                RELAXATION_PLAN_GAP * 100.0
            ),
            searched: false,
            proved: false,
        },
        laid_out => {
            let mut o = optimise(&problem, goal, guide, relaxed.as_ref(), ffd, large, &mut tracer)?;
            // A large program whose solve stopped without a proof: the relaxation laid out, or
            // first fit guided by its device choices, when cheaper.
            if !o.proved
                && let Some(pref) = &preferred
            {
                let best = [
                    (laid_out.map(|(a, _)| a), "the LP relaxation's device choices laid out on nodes"),
                    (
                        assign::ffd_guided(&problem, pref),
                        "first fit guided by the LP relaxation's device choices",
                    ),
                ]
                .into_iter()
                .filter_map(|(a, how)| a.map(|a| (a, how)))
                .min_by(|x, y| x.0.cost(&problem).total_cmp(&y.0.cost(&problem)));
                if let Some((g, how)) = best
                    && g.cost(&problem) < o.assignment.cost(&problem) - 1e-9
                {
                    tr!(tracer, "{how}: {} GPUs, cost {:.3}", g.gpus_used(), g.cost(&problem));
                    o.method = format!(
                        "{}; {how} then gave a cheaper plan, this one (not proven optimal)",
                        o.method
                    );
                    o.assignment = g;
                }
            }
            o
        }
    };
    // Small inputs: an exhaustive search may find a cheaper plan than the optimiser's counts
    // laid out (their model aggregates some node-level rules).
    let meets_bound = match (valid.cost_per_hour, problem.unit_price) {
        (Some(bound), Some(unit)) => assignment.cost(&problem) * unit <= bound * (1.0 + 1e-6),
        _ => assignment.gpus_used() <= u64::from(valid.gpus),
    };
    let better = (!solver_proved && !meets_bound).then(|| assign::improve(&problem, &assignment)).flatten();
    let (assignment, method) = match better {
        Some(b) => {
            tr!(tracer, "exhaustive search: {} GPUs, cost {:.3}", b.gpus_used(), b.cost(&problem));
            (
                b,
                format!(
                    "{method}; an exhaustive search of this small input then found a cheaper plan, this one"
                ),
            )
        }
        _ => (assignment, method),
    };
    // The first-fit figure: the greedy pass, or its backtracking version when that made the plan.
    let ffd_gpus =
        ffd_gpus.or_else(|| searched.then(|| u32::try_from(assignment.gpus_used()).unwrap_or(u32::MAX)));
    tr!(tracer, "plan: {} GPUs, cost {:.3}", assignment.gpus_used(), assignment.cost(&problem));
    let ffd_cost = ffd_cost.or_else(|| searched.then(|| assignment.cost(&problem))).zip(problem.unit_price);
    let figures = build::Figures {
        lower_bound: valid.gpus,
        model_lower_bound: lower_bound,
        solver_proved,
        ffd: ffd_gpus,
        method,
        cost_lower_bound: valid.cost_per_hour,
        model_cost_lower_bound: cost_bound,
        ffd_cost: ffd_cost.map(|(c, unit)| c * unit),
    };
    build::build(&problem, &assignment, &figures)
        .map_err(|e| Diagnostics::from_iter([Diagnostic::error(codes::PLANNER_FAILED, e)]))
}

/// Where [`plan_traced`] writes its steps: one line each, with the time since planning began.
struct Tracer<'w> {
    out: Option<&'w mut dyn std::io::Write>,
    t0: std::time::Instant,
}

impl Tracer<'_> {
    fn line(&mut self, args: std::fmt::Arguments<'_>) {
        if let Some(w) = self.out.as_mut() {
            // Trace write errors are ignored: the trace is a diagnostic aid, not output.
            let _ = writeln!(w, "[{:>8.3} s] {}", self.t0.elapsed().as_secs_f64(), args);
        }
    }
}

/// A plan as one path of [`plan_traced`] made it: the assignment, how (the plan's reasons),
/// whether a first-fit search made it (it then stands for the first-fit figure), and whether
/// the solver proved it optimal for the planner's model.
struct Optimised {
    assignment: assign::Assignment,
    method: String,
    searched: bool,
    proved: bool,
}

/// The optimiser's path: the MILP (on large programs, first with the relaxation's replica
/// choices pinned), its counts laid out on nodes, first fit when that fails or costs more, and
/// the backtracking searches when nothing gives a plan. `Err` when no plan exists (or the
/// searches gave up).
fn optimise(
    problem: &problem::Problem<'_>,
    goal: Goal,
    guide: Option<&milp::MilpResult>,
    relaxed: Option<&milp::MilpResult>,
    ffd: Option<assign::Assignment>,
    large: bool,
    tracer: &mut Tracer<'_>,
) -> Result<Optimised, Diagnostics> {
    let no_pins = milp::Pins::new();
    let mut proved = false;
    // Large programs: first the relaxation's replica choices rounded (what remains is packing,
    // which the solver does fast); when that is within the large-program gap of the relaxation's
    // cost, the full program could not do better than its own stopping rule, so it is skipped.
    let rounded = guide.filter(|_| large).and_then(|lp| {
        let pins = round_all(problem, lp);
        let mut r = milp::solve(problem, goal, &pins)
            .inspect_err(|e| tr!(tracer, "MILP on the rounded relaxation: {e:?}"))
            .ok()?;
        r.optimal = false; // pinned: proves nothing for the full program
        tr!(tracer, "MILP on the rounded relaxation: cost {:.3}", r.cost);
        Some((r, lp.cost))
    });
    // Otherwise both results are decomposed and the cheaper plan is kept (counts that cost the
    // same may lay out differently well).
    let (mut solved, second) = match rounded {
        Some((r, lp)) if r.cost <= lp * (1.0 + milp::LARGE_RELATIVE_GAP) + 1e-9 => (Ok(r), None),
        Some((r, _)) => match milp::solve(problem, goal, &no_pins) {
            Ok(full) => (Ok(full), Some(r)),
            Err(_) => (Ok(r), None),
        },
        None => (milp::solve(problem, goal, &no_pins), None),
    };
    // When the search stopped early and rate models are involved, also try the LP relaxation's
    // replica counts rounded (rounding down, then covering the rest with the cheapest device):
    // what remains is packing fixed replicas, which the solver does well. Keep the cheaper.
    tr!(tracer, "MILP: {:?}", solved.as_ref().map(|r| format!("cost {:.3}, optimal {}", r.cost, r.optimal)));
    let unproven = solved.as_ref().map_or(true, |r| !r.optimal);
    if unproven && let Some(relaxed) = relaxed {
        let pins = round_rates(problem, relaxed);
        if !pins.is_empty()
            && let Ok(mut alt) = milp::solve(problem, goal, &pins)
            && solved.as_ref().map_or(true, |r| alt.cost < r.cost - 1e-9)
        {
            alt.optimal = false; // pinned: proves nothing for the full program
            solved = Ok(alt);
        }
    }
    // The greedy first-fit may fail on node sharing rules or spread where a plan exists; its
    // backtracking version is tried when nothing else gives a plan.
    let fallback = |why: &str| -> Result<(assign::Assignment, String, bool), Diagnostics> {
        if let Some((f, order)) = assign::ffd_reordered(problem) {
            return Ok((f, format!("{why}; first fit in another order ({order}) found this plan"), true));
        }
        match assign::ffd_search(problem) {
            Ok(f) => Ok((f, format!("{why}; first-fit-decreasing with backtracking found this plan"), true)),
            Err(stuck) => {
                let mut d = if stuck.proven {
                    // The optimiser's conditions are necessary only; the search tried everything.
                    Diagnostic::error(
                        codes::NO_FEASIBLE_PLAN,
                        "no plan satisfies every constraint together on these nodes: an exhaustive search found none",
                    )
                    .with_help("check spread, isolation and time-slicing settings; more nodes may help")
                } else {
                    Diagnostic::error(
                        codes::PLANNER_FAILED,
                        "the optimiser found counts that cannot be laid out on nodes, and first-fit-decreasing found no plan",
                    )
                    .with_help("this is a planner limitation; please report it with the manifest")
                };
                if let Some(mc) = stuck.model.and_then(|m| problem.models.get(m)) {
                    d = d.with_note(format!(
                        "the search found no place for a replica of `{}` (spread `{}`, isolation `{}`) once the others were placed",
                        mc.name(),
                        mc.spec.spread.word(),
                        mc.spec.isolation.word()
                    ));
                }
                Err(Diagnostics::from_iter([d]))
            }
        }
    };
    let (assignment, method, searched) = match (solved, ffd) {
        (Ok(r), ffd) => {
            let optimal = r.optimal;
            let r_cost = r.cost;
            // Exactly the optimiser's counts; else its replica choices by backtracking (small
            // inputs); else its counts with the replicas that find no room placed by first fit.
            let lay_out = |r: &milp::MilpResult| {
                let guarded = assign::decompose(problem, &r.counts, &r.replicas, false)
                    .or_else(|| assign::decompose_search(problem, &r.replicas, r.cost))
                    .or_else(|| assign::decompose(problem, &r.counts, &r.replicas, true));
                // The `spread: gpu` rule on MIG is enforced at placement, against layouts not
                // yet trimmed (instances no replica will use count), so it defers replicas that
                // the final layout would take. The counts are laid out once more without it;
                // where that layout breaks the rule, replicas trade instances (same cost, each
                // keeps an option of its model) until no node does, and that plan is kept when
                // it is cheaper and every node of its trimmed layout passes the rule (the
                // verifier's).
                let unguarded = problem
                    .mig_spread_models
                    .then(|| problem::Problem { mig_spread_models: false, ..problem.clone() })
                    .and_then(|p| {
                        assign::decompose(&p, &r.counts, &r.replicas, false)
                            .or_else(|| assign::decompose(&p, &r.counts, &r.replicas, true))
                    })
                    .and_then(|mut a| {
                        let ok = assign::untangle_mig_spread(problem, &mut a)
                            || assign::replace_mig_spread(problem, &mut a);
                        ok.then_some(a)
                    });
                match (guarded, unguarded) {
                    (Some(g), Some(u)) if u.cost(problem) < g.cost(problem) - 1e-9 => Some(u),
                    (None, u) => u,
                    (g, _) => g,
                }
            };
            let mut decomposed = lay_out(&r);
            if let Some(other) = second.as_ref().and_then(lay_out)
                && decomposed.as_ref().is_none_or(|a| other.cost(problem) < a.cost(problem) - 1e-9)
            {
                decomposed = Some(other);
            }
            // `spread: gpu` on MIG: the optimiser may give such a model instances of two
            // profiles that share GPUs, which no node can hold both of (its conditions are
            // necessary only). When the lay-out lost against the counts, the program is solved
            // again with each such model's MIG replicas of a pool on one profile, and that plan
            // is kept when it lays out cheaper.
            if problem.mig_spread_models
                && !large
                && decomposed.as_ref().is_none_or(|a| a.repaired > 0 || a.cost(problem) > r_cost + 1e-9)
                && let Some(pins) = one_spread_profile(problem, &r.replicas)
                && let Ok(mut alt) = milp::solve(problem, goal, &pins)
            {
                alt.optimal = false; // pinned: proves nothing for the full program
                tr!(tracer, "MILP with one profile per spread: gpu model and pool: cost {:.3}", alt.cost);
                if let Some(b) = lay_out(&alt)
                    && decomposed.as_ref().is_none_or(|a| b.cost(problem) < a.cost(problem) - 1e-9)
                {
                    decomposed = Some(b);
                }
            }
            tr!(
                tracer,
                "decomposition: {:?}",
                decomposed.as_ref().map(|a| format!(
                    "{} GPUs, cost {:.3}, {} replica(s) re-placed by first fit",
                    a.gpus_used(),
                    a.cost(problem),
                    a.repaired
                ))
            );
            match (decomposed, ffd) {
                (Some(a), Some(f)) if a.cost(problem) > f.cost(problem) + 1e-9 => {
                    (f, "first-fit-decreasing beat the optimiser's result, so its plan is kept".to_owned(), false)
                }
                (Some(a), _) => {
                    let how = if a.repaired > 0 {
                        format!(
                            "placed by the MILP optimiser, except {} replica(s) its counts could not lay out on nodes (spread and node sharing are only partly in its model), which first fit placed",
                            a.repaired
                        )
                    } else if optimal && (a.cost(problem) - r_cost).abs() <= 1e-6 {
                        proved = true;
                        "placed by the MILP optimiser, which proved it optimal for the planner's model".to_owned()
                    } else {
                        format!(
                            "placed by the MILP optimiser, which did not prove it optimal ({})",
                            milp::UNPROVEN_WHY
                        )
                    };
                    (a, how, false)
                }
                (None, Some(f)) => {
                    (f, "the optimiser's counts could not be decomposed to nodes; the first-fit-decreasing plan is kept".to_owned(), false)
                }
                (None, None) => fallback("the optimiser's counts could not be decomposed to nodes")?,
            }
        }
        (Err(MilpError::Solver(e)), Some(f)) => {
            (f, format!("the solver failed ({e}); the first-fit-decreasing plan is kept"), false)
        }
        (Err(MilpError::Infeasible), Some(f)) => {
            (f, "the optimiser reported no solution; the first-fit-decreasing plan is kept".to_owned(), false)
        }
        (Err(MilpError::Solver(e)), None) => fallback(&format!("the solver failed ({e})"))?,
        (Err(err), None) => return Err(infeasible::explain(problem, &err)),
    };
    Ok(Optimised { assignment, method, searched, proved })
}

/// Pins for a second solve when the optimiser gave a `spread: gpu` model (fixed demand) MIG
/// instances of several profiles in one pool: there, all its MIG replicas on the profile with
/// the most of them (ties: the first option); its other choices as they were. Other models
/// stay free. `None` when no model mixes profiles.
fn one_spread_profile(
    problem: &problem::Problem<'_>,
    replicas: &BTreeMap<(usize, usize, problem::Kind), u32>,
) -> Option<milp::Pins> {
    let mut pins = milp::Pins::new();
    let mut mixed = false;
    for (mi, mc) in problem.models.iter().enumerate() {
        if mc.spec.spread != crate::spec::Spread::Gpu || !matches!(mc.need, problem::Need::Replicas(_)) {
            continue;
        }
        let mut mine: Vec<(usize, problem::Kind, u32)> = mc
            .options
            .iter()
            .filter_map(|o| replicas.get(&(mi, o.pool, o.kind)).map(|&n| (o.pool, o.kind, n)))
            .filter(|x| x.2 > 0)
            .collect();
        let mut this = false;
        for pi in 0..problem.pools.len() {
            let mig: Vec<usize> = (0..mine.len())
                .filter(|&i| mine[i].0 == pi && matches!(mine[i].1, problem::Kind::Mig(_)))
                .collect();
            let Some(&best) = mig.iter().max_by(|&&a, &&b| mine[a].2.cmp(&mine[b].2).then(b.cmp(&a))) else {
                continue;
            };
            if mig.len() > 1 {
                this = true;
                let total = mig.iter().map(|&i| mine[i].2).sum();
                for &i in &mig {
                    mine[i].2 = if i == best { total } else { 0 };
                }
            }
        }
        if this {
            mixed = true;
            pins.extend(mine.into_iter().filter(|x| x.2 > 0).map(|(p, k, n)| ((mi, p, k), n)));
        }
    }
    mixed.then_some(pins)
}

/// Rounds the LP relaxation's replicas of every single-model column (rate and spread models):
/// fixed demand by largest remainder (floors, then one more to the largest fractions, ties to
/// the first option, until the count is met); rate models as in [`round_rates`]. Columns that
/// aggregate several models stay free.
fn round_all(problem: &problem::Problem<'_>, relaxed: &milp::MilpResult) -> milp::Pins {
    let mut pins = round_rates(problem, relaxed);
    for (mi, mc) in problem.models.iter().enumerate() {
        let problem::Need::Replicas(n) = mc.need else { continue };
        let xs: Vec<f64> = mc
            .options
            .iter()
            .map(|o| relaxed.fractional.get(&(mi, o.pool, o.kind)).copied().unwrap_or(f64::NAN))
            .collect();
        if xs.iter().any(|x| x.is_nan()) {
            continue; // an aggregated column: not in `fractional`
        }
        let mut counts: Vec<u32> = xs.iter().map(|x| (x + 1e-6).floor().max(0.0) as u32).collect();
        let mut order: Vec<usize> = (0..xs.len()).collect();
        order.sort_by(|&a, &b| {
            let fa = xs[a] - f64::from(counts[a]);
            let fb = xs[b] - f64::from(counts[b]);
            fb.total_cmp(&fa).then(a.cmp(&b))
        });
        let missing = n.saturating_sub(counts.iter().sum());
        for &oi in order.iter().cycle().take(missing as usize) {
            counts[oi] += 1;
        }
        for (o, c) in mc.options.iter().zip(counts) {
            if c > 0 {
                pins.insert((mi, o.pool, o.kind), c);
            }
        }
    }
    pins
}

/// Relative gap to the LP relaxation's cost within which a large program's relaxation laid out
/// on nodes is kept without running the optimiser (half the 2% quality target of DESIGN.md).
const RELAXATION_PLAN_GAP: f64 = 0.01;

/// Replica counts per (model, pool, kind) that serve exactly each fixed-demand model's
/// replicas: `preferred` trimmed from its least-used options, or topped up on its most-used
/// one (else its smallest option). Rate models keep their counts.
fn exact_totals(problem: &problem::Problem<'_>, preferred: &milp::Pins) -> milp::Pins {
    let mut out = milp::Pins::new();
    for (mi, mc) in problem.models.iter().enumerate() {
        let mut mine: Vec<((usize, problem::Kind), u32)> = preferred
            .range((mi, 0, problem::Kind::Whole(0))..)
            .take_while(|((m, ..), _)| *m == mi)
            .map(|(&(_, pi, kind), &n)| ((pi, kind), n))
            .filter(|&((pi, kind), n)| n > 0 && mc.options.iter().any(|o| o.pool == pi && o.kind == kind))
            .collect();
        if let problem::Need::Replicas(n) = mc.need {
            mine.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
            let mut total: u32 = mine.iter().map(|x| x.1).sum();
            while total > n {
                if let Some(last) = mine.iter_mut().rev().find(|x| x.1 > 0) {
                    last.1 -= 1;
                    total -= 1;
                } else {
                    break;
                }
            }
            if total < n {
                match mine.first_mut() {
                    Some(first) => first.1 += n - total,
                    None => {
                        let smallest = mc
                            .options
                            .iter()
                            .filter(|o| !matches!(o.kind, problem::Kind::MigTs(..)))
                            .min_by(|x, y| {
                                x.size.total_cmp(&y.size).then(x.pool.cmp(&y.pool)).then(x.kind.cmp(&y.kind))
                            });
                        if let Some(o) = smallest {
                            mine.push(((o.pool, o.kind), n - total));
                        }
                    }
                }
            }
        }
        for ((pi, kind), n) in mine {
            if n > 0 {
                out.insert((mi, pi, kind), n);
            }
        }
    }
    out
}

/// Rounds the LP relaxation's replicas of every rate model: each option's count rounded down,
/// then the uncovered rate (and any missing minimum replicas) served by the option that needs
/// the smallest total GPU share for it.
fn round_rates(problem: &problem::Problem<'_>, relaxed: &milp::MilpResult) -> milp::Pins {
    let mut pins = milp::Pins::new();
    for (mi, mc) in problem.models.iter().enumerate() {
        let problem::Need::Rate { rps, min_replicas } = mc.need else { continue };
        let mut covered = 0.0;
        let mut count = 0u32;
        for o in &mc.options {
            let x = relaxed.fractional.get(&(mi, o.pool, o.kind)).copied().unwrap_or(0.0);
            let n = (x + 1e-6).floor().max(0.0) as u32;
            if n > 0 {
                pins.insert((mi, o.pool, o.kind), n);
                covered += o.rps.unwrap_or(0.0) * f64::from(n);
                count += n;
            }
        }
        let rest = (rps - covered).max(0.0);
        let best = mc
            .options
            .iter()
            .filter(|o| o.rps.is_some_and(|r| r > 0.0))
            .map(|o| {
                let per = o.rps.unwrap_or(1.0);
                let n = ((rest / per - 1e-9).ceil().max(0.0) as u32).max(min_replicas.saturating_sub(count));
                (o.size * f64::from(n), o, n)
            })
            .min_by(|x, y| x.0.total_cmp(&y.0).then(x.1.pool.cmp(&y.1.pool)).then(x.1.kind.cmp(&y.1.kind)));
        if let Some((_, o, n)) = best
            && n > 0
        {
            *pins.entry((mi, o.pool, o.kind)).or_insert(0) += n;
        }
        if !pins.keys().any(|k| k.0 == mi) {
            // Nothing to pin (no admissible option): leave the model free.
            continue;
        }
    }
    pins
}
