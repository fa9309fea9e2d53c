//! The plan: how every GPU is cut and where every replica runs, with the reason for each choice.
//!
//! In: a checked [`Spec`] and the [`Catalog`]. Out: a [`Plan`] — per pool, per node, per GPU the
//! mode (whole, time-sliced, MIG instances with placements), the node's named mig-parted and
//! device-plugin configs, and per model the replica groups with the resource each requests —
//! or diagnostics that say which models cannot be served and why.
//!
//! Invariants: deterministic (same bytes for the same input, whatever its order); every MIG
//! layout in a plan passed [`crate::catalog::layout::validate`]; solver types never leave this module.

/// One line of the planning trace: `tr!(tracer, "format", args…)` (see [`Tracer`]). The
/// arguments are evaluated only while tracing (some format a solver's result).
macro_rules! tr {
    ($t:expr, $($a:tt)*) => {
        if $t.on() {
            $t.line(format_args!($($a)*))
        }
    };
}

mod assign;
mod bounds;
mod build;
pub use build::ALTERNATIVE_PREFIX;
#[doc(hidden)]
pub use splitmix::SplitMix64;
pub mod day2;
mod infeasible;
#[doc(hidden)]
pub mod latency;
mod layouts;
mod milp;
mod per_node;
mod problem;
mod repack;
mod rounding;
pub mod rules;
mod splitmix;
mod strategy;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::catalog::layout::PlacedInstance;
use crate::diagnostics::{Diagnostic, Diagnostics, codes};
use crate::plan::milp::Goal;
use crate::spec::Spec;

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
    pub changes: Option<day2::changes::Changes>,
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
    /// Day 2: the change of a node held back for its drain (absent: released).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transition: Option<day2::previous::Transition>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuPlan {
    pub index: u32,
    /// The GPU's UUID, on pools of the DRA backend (its claims select it by this UUID).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    pub mode: GpuMode,
    /// Replicas on this GPU: on a MIG GPU, one entry per used instance (by `start`).
    pub tenants: Vec<Tenant>,
}

/// How one GPU is configured. The next compile reads it back from `plan.json` (a missing field
/// takes its default, as [`day2::previous`] reads everything).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "mode")]
pub enum GpuMode {
    /// Not used by the plan (MIG disabled, nothing scheduled).
    Unused,
    /// MIG disabled, one exclusive tenant (or part of a multi-GPU replica).
    Whole,
    /// MIG disabled, shared by time-slicing with `replicas` slots.
    TimeSliced {
        #[serde(default)]
        replicas: u32,
    },
    /// MIG disabled, shared by MPS with `replicas` clients (each `1/replicas` of the memory and
    /// `⌊100/replicas⌋%` of the threads).
    Mps {
        #[serde(default)]
        replicas: u32,
    },
    /// MIG enabled with these instances.
    Mig {
        #[serde(default)]
        instances: Vec<PlacedInstance>,
    },
}

/// One replica (or slot) placed on a GPU.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Tenant {
    pub model: String,
    /// The MIG instance's start slice, for MIG GPUs.
    pub instance_start: Option<u8>,
}

/// A mig-parted config: entries applied in order, as in mig-parted's `mig-configs` lists. The
/// next compile reads it back from `plan.json`, a missing field as its default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
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

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MigConfigEntry {
    /// GPU indices, or `None` for `all`.
    pub devices: Option<Vec<u32>>,
    /// PCI ids (`0xDDDD10DE`) the entry applies to; empty = any GPU.
    pub device_filter: Vec<String>,
    pub mig_enabled: bool,
    /// Profile name → count (empty when MIG is disabled).
    pub mig_devices: BTreeMap<String, u32>,
}

/// A device-plugin config (one key of the device-plugin ConfigMap); read back like
/// [`MigConfig`] (`mps` is absent in plans written before MPS).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DevicePluginConfig {
    /// Resource name (`nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`) → time-slicing replicas.
    pub time_slicing: BTreeMap<String, u32>,
    /// Resource name (`nvidia.com/gpu` only: the device plugin runs MPS on whole GPUs) → MPS
    /// replicas. A node config has `time_slicing` or `mps`, never both.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub mps: BTreeMap<String, u32>,
}

impl DevicePluginConfig {
    /// Replicas per shared resource, whichever the sharing mode.
    pub fn shared(&self) -> &BTreeMap<String, u32> {
        if self.mps.is_empty() { &self.time_slicing } else { &self.mps }
    }
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
    /// Replicas alone on their device whose latency SLO the model could not check (outside its
    /// calibrated range), one sentence per device kind saying why and what to measure.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slo_unverified: Vec<String>,
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
    /// MPS processes (pods) each replica runs on its device, sharing it through one DRA claim:
    /// measured-point MPS (`plan::rules::measured_mps`); 1 (not written) otherwise.
    #[serde(skip_serializing_if = "one_process")]
    pub processes: u32,
}

fn one_process(n: &u32) -> bool {
    *n == 1
}

/// How good the plan is, and what it is compared with.
///
/// Two kinds of bound (`docs/planner.md`, "Bounds"): `lowerBound` and `costLowerBoundPerHour`
/// hold for every plan gpuplan's verifier accepts; `modelLowerBound` and
/// `modelCostLowerBoundPerHour` only for the plans of the planner's own model (which leaves
/// some valid plans out), so they may be higher. Neither is clamped to the plan.
#[derive(Clone, Debug, Serialize)]
pub struct Quality {
    /// The figures in GPUs.
    #[serde(flatten)]
    pub gpus: GpuFigures,
    /// The figures in cost per hour, each when every pool it needs has a price.
    #[serde(flatten)]
    pub cost: CostFigures,
    /// What is proven about the plan's GPU count (its cost, on priced pools).
    pub proof: Proof,
}

/// A plan's quality in GPUs (`gpusUsed`, `lowerBound`, `modelLowerBound`, `oneGpuPerReplica`,
/// `firstFitDecreasing` in `plan.json`).
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuFigures {
    /// GPUs the plan uses.
    #[serde(rename = "gpusUsed")]
    pub used: u32,
    /// No plan that gpuplan's verifier accepts uses fewer GPUs than this.
    pub lower_bound: u32,
    /// No plan of the planner's model uses fewer GPUs (the LP relaxation of its program and
    /// its options' sizes, or the program's optimum where the solver proved it); plans
    /// outside the model may.
    pub model_lower_bound: u32,
    /// GPUs if every replica had its own whole GPU(s).
    #[serde(rename = "oneGpuPerReplica")]
    pub one_per_replica: u32,
    /// GPUs first-fit-decreasing needs, if it finds a plan.
    pub first_fit_decreasing: Option<u32>,
}

/// A plan's quality in cost per hour (`costPerHour`, `costLowerBoundPerHour`,
/// `modelCostLowerBoundPerHour`, `firstFitDecreasingCostPerHour` in `plan.json`).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CostFigures {
    /// Cost per hour of the GPUs used, when every used pool has a price.
    #[serde(rename = "costPerHour")]
    pub used: Option<f64>,
    /// No plan the verifier accepts costs less per hour than this, when every pool has a price
    /// (then the planner minimises cost, and this is the bound to compare it with).
    #[serde(rename = "costLowerBoundPerHour")]
    pub lower_bound: Option<f64>,
    /// No plan of the planner's model costs less per hour (the LP relaxation of cost, or the
    /// program's optimum where the solver proved it with a zero gap).
    #[serde(rename = "modelCostLowerBoundPerHour")]
    pub model_lower_bound: Option<f64>,
    /// Cost per hour of the first-fit-decreasing plan, when every pool has a price.
    #[serde(rename = "firstFitDecreasingCostPerHour")]
    pub first_fit_decreasing: Option<f64>,
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
    /// The bound valid for every plan the verifier accepts, as the planner holds it.
    pub(crate) fn valid_bound(&self) -> bounds::LowerBound {
        bounds::LowerBound { gpus: self.gpus.lower_bound, cost_per_hour: self.cost.lower_bound }
    }

    /// The bound of the planner's model, as the planner holds it.
    pub(crate) fn model_bound(&self) -> bounds::LowerBound {
        bounds::LowerBound { gpus: self.gpus.model_lower_bound, cost_per_hour: self.cost.model_lower_bound }
    }

    /// Whether the plan is judged by cost (every pool priced) rather than by GPUs.
    pub fn priced(&self) -> bool {
        self.cost.used.is_some() && self.cost.lower_bound.is_some()
    }

    /// One sentence saying how good the plan is and what is proven, the same wherever it is
    /// shown (`PLAN.md`, `explain`, the `compile` summary).
    pub fn verdict(&self) -> String {
        let money = |x: f64| format!("${x:.2}/h");
        if let (Some(cost), Some(valid)) = (self.cost.used, self.cost.lower_bound) {
            let model = self.cost.model_lower_bound.unwrap_or(valid).max(valid);
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
        let model = self.gpus.model_lower_bound.max(self.gpus.lower_bound);
        let over_valid = self.gpus.used.saturating_sub(self.gpus.lower_bound);
        let over_model = self.gpus.used.saturating_sub(model);
        match self.proof {
            Proof::Optimal => format!("optimal: no plan uses fewer than {} GPU(s)", self.gpus.lower_bound),
            Proof::ModelOptimal => format!(
                "optimal among the planner's plans; {over_valid} GPU(s) above the bound valid for every plan ({})",
                self.gpus.lower_bound
            ),
            Proof::Unproven => format!(
                "not proven optimal: within {over_model} GPU(s) of the planner's bound ({model}) and {over_valid} of the bound valid for every plan ({})",
                self.gpus.lower_bound
            ),
        }
    }

    /// The one line `compile` prints: GPUs and $/h used, the bound valid for every plan, the
    /// one-GPU-per-replica baseline, and the verdict; `drains` is the number of nodes to
    /// re-partition.
    pub fn summary(&self, drains: usize) -> String {
        let cost = self.cost.used.map_or_else(String::new, |c| format!(" (${c:.2}/h)"));
        let bound = match self.cost.lower_bound {
            Some(b) if self.priced() => format!("{} GPU(s), ${b:.2}/h", self.gpus.lower_bound),
            _ => format!("{} GPU(s)", self.gpus.lower_bound),
        };
        format!(
            "plan: {} GPU(s) used{cost}; lower bound {bound}; one GPU per replica: {}; {drains} node(s) to re-partition; {}",
            self.gpus.used,
            self.gpus.one_per_replica,
            self.verdict()
        )
    }

    /// What is proven, from the figures and whether a solver proved the full program optimal.
    pub(crate) fn judge(&self, solver_proved: bool) -> Proof {
        if let (Some(cost), Some(valid)) = (self.cost.used, self.cost.lower_bound) {
            let tol = COST_TOLERANCE * cost.abs().max(1.0);
            let model = self.cost.model_lower_bound.unwrap_or(valid);
            return if cost <= valid + tol {
                Proof::Optimal
            } else if solver_proved || cost <= model + tol {
                Proof::ModelOptimal
            } else {
                Proof::Unproven
            };
        }
        if self.gpus.used <= self.gpus.lower_bound {
            Proof::Optimal
        } else if solver_proved || self.gpus.used <= self.gpus.model_lower_bound {
            Proof::ModelOptimal
        } else {
            Proof::Unproven
        }
    }
}

impl Plan {
    /// Every node of the plan, pool by pool.
    pub fn nodes(&self) -> impl Iterator<Item = &NodePlan> {
        self.pools.iter().flat_map(|p| &p.nodes)
    }

    /// Nodes whose layout or sharing config changes and that must be drained.
    pub fn drains(&self) -> usize {
        self.nodes().filter(|n| n.must_drain).count()
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
    let valid = bounds::valid_bound(&problem);
    // The same spec with `mps` removed from every pool's `sharing`, planned when the plan with
    // MPS is not proven ([`strategy::without_mps`]): a plan never costs more for allowing MPS.
    let plain_spec = strategy::spec_without_mps(spec);
    let plain = plain_spec.as_ref().map(|s| problem::build(s, catalog));
    let solved = solve(&problem, &valid, plain.as_ref(), Some(&plans_grown), &mut tracer)?;
    let Solved { candidate, ffd_gpus, ffd_cost, lower_bound, cost_bound } = solved;
    let solver_proved = candidate.sound_proved();
    let strategy::Candidate { assignment, method, searched, sound: proven, .. } = candidate;
    let (lower_bound, cost_bound) = proven_bounds(&problem, &assignment, proven, lower_bound, cost_bound);
    // The first-fit figure: the greedy pass, or its backtracking version when that made the plan.
    let ffd_gpus =
        ffd_gpus.or_else(|| searched.then(|| u32::try_from(assignment.gpus_used()).unwrap_or(u32::MAX)));
    tr!(tracer, "plan: {} GPUs, cost {:.3}", assignment.gpus_used(), assignment.cost(&problem));
    let ffd_cost = ffd_cost.or_else(|| searched.then(|| assignment.cost(&problem))).zip(problem.unit_price);
    let figures = build::Figures {
        valid,
        model: bounds::LowerBound { gpus: lower_bound, cost_per_hour: cost_bound },
        solver_proved,
        ffd: ffd_gpus.map(|gpus| build::FirstFit { gpus, cost_per_hour: ffd_cost.map(|(c, unit)| c * unit) }),
        method: method.sentence(),
    };
    build::build(&problem, &assignment, &figures)
        .map_err(|e| Diagnostics::from_iter([Diagnostic::error(codes::PLANNER_FAILED, e)]))
}

/// The planner-model bounds (`gpus`, `cost` per hour) raised to the full program's optimum
/// where the solver proved one, or to the solver's lower bound on it (`proven`, in relative
/// weights; [`strategy::Candidate::proven`]): no plan of the planner's model does better, whether
/// or not the plan's lay-out reaches it. A cost is raised by integrality as well (every plan of
/// the model costs `Σ price × GPUs`: [`bounds::integral_cost`]). Not where the plan does better
/// (a plan made outside the model, by first fit or a search, shows the program is not a
/// relaxation there): the relaxation's bounds stay.
fn proven_bounds(
    problem: &problem::Problem<'_>,
    a: &assign::Assignment,
    proven: Option<f64>,
    gpus: u32,
    cost: Option<f64>,
) -> (u32, Option<f64>) {
    let Some(optimum) = proven else { return (gpus, cost) };
    if a.cost(problem) < optimum - COST_TOLERANCE * optimum.max(1.0) {
        return (gpus, cost);
    }
    match problem.unit_price {
        None => (gpus.max((optimum - 1e-6).ceil().max(0.0) as u32), cost),
        Some(unit) => (gpus, cost.map(|c| c.max(bounds::integral_dollars(problem, optimum, unit)))),
    }
}

/// Bounds the cascade did not prove, raised once it is done, where the plan is above its
/// sound bound ([`strategy::Candidate::sound`]); not on large programs. Where the pooled rows
/// may cut a plan that trims a GPU (`wide`: the problem widened to every layout a plan may
/// trim to), the plan reports bounds from sound programs only, and the pooled program on the
/// widened problem is one: its optimum or dual bound raises the bound (100-GPU six-type stress
/// fleet "mixed", seed 0: 40 GPUs in 2.5 s, where the widened relaxation gives 38). Then, on
/// the widened problem or the problem itself, the relaxation with whole counts of nodes and
/// GPUs per pool ([`milp::solve_whole_bound`]): it proves priced plans whose cost the program's
/// dual bound leaves a fraction of a GPU-hour below, and in the pure-Rust build plans whose
/// program microlp could not solve.
fn widened_bound(
    problem: &problem::Problem<'_>,
    wide: Option<&problem::Problem<'_>>,
    floor: Option<f64>,
    mut c: strategy::Candidate,
    tracer: &mut Tracer<'_>,
) -> strategy::Candidate {
    let cost = c.assignment.cost(problem);
    let proven = |c: &strategy::Candidate| c.sound.is_some_and(|b| b >= cost - 1e-9);
    if proven(&c) {
        return c;
    }
    if let Some(w) = wide {
        let r = milp::solve(w, Goal::Plan { cost_bound: None, gpu_floor: floor }, &milp::Pins::new());
        let bound = r.ok().and_then(|r| r.sound_proven());
        tr!(tracer, "MILP on the widened problem, a bound for every plan: {bound:?}");
        c.sound = strategy::higher(c.sound, bound);
        if proven(&c) {
            return c;
        }
    }
    let whole = milp::solve_whole_bound(wide.unwrap_or(problem), floor);
    tr!(tracer, "relaxation with whole counts of nodes and GPUs, a bound for every plan: {whole:?}");
    c.sound = strategy::higher(c.sound, whole);
    c
}

/// GPUs of a grown fleet up to which [`plans_grown`] runs the cascade; above, the optimiser's
/// counts laid out only.
const GROWN_CASCADE_MAX_GPUS: u64 = 256;

/// Whether the planner plans `problem`, a fleet grown by an addition of nodes that a failure
/// would name ([`infeasible::Planner`]): the cascade up to its first plan (no improvement
/// steps: [`strategy::Inputs::improve`]), naming no addition of its own, on grown fleets of at
/// most [`GROWN_CASCADE_MAX_GPUS`] GPUs that are not large programs; else the optimiser's
/// counts laid out ([`strategy::counts_lay_out`]). Deterministic, as the cascade is.
fn plans_grown(problem: &problem::Problem<'_>) -> bool {
    let gpus: u64 = problem.pools.iter().map(problem::PoolCtx::capacity_gpus).sum();
    if gpus > GROWN_CASCADE_MAX_GPUS || problem::is_large(problem) {
        return strategy::counts_lay_out(problem);
    }
    let valid = bounds::valid_bound(problem);
    let mut tracer = Tracer { out: None, t0: std::time::Instant::now() };
    solve(problem, &valid, None, None, &mut tracer).is_ok()
}

/// The cascade's plan for one problem, with the figures the plan reports about how it was made.
struct Solved {
    candidate: strategy::Candidate,
    ffd_gpus: Option<u32>,
    ffd_cost: Option<f64>,
    /// The planner's own lower bound (LP relaxation and sizes), in GPUs.
    lower_bound: u32,
    cost_bound: Option<f64>,
}

/// First fit, the relaxations and the cascade on `problem` (`valid`: the bound valid for every
/// plan). `plain`, the problem without MPS, is planned too unless the plan with MPS is proven
/// ([`strategy::without_mps`]).
fn solve(
    problem: &problem::Problem<'_>,
    valid: &bounds::LowerBound,
    plain: Option<&problem::Problem<'_>>,
    planner: infeasible::Planner<'_>,
    tracer: &mut Tracer<'_>,
) -> Result<Solved, Diagnostics> {
    let ffd = assign::ffd(problem);
    let ffd_cost = ffd.as_ref().map(|a| a.cost(problem));
    let ffd_gpus = ffd.as_ref().map(|a| u32::try_from(a.gpus_used()).unwrap_or(u32::MAX));
    tr!(tracer, "first-fit-decreasing: {ffd_gpus:?} GPUs, cost {ffd_cost:?}");
    let no_pins = milp::Pins::new();
    let relaxed = milp::solve(problem, Goal::Bound, &no_pins).ok();
    // The bounds come from the problem widened to every layout a plan may trim a GPU to where
    // the pooled rows on the candidates could cut such a plan (`problem::trims_matter`); the
    // relaxation of the problem itself still guides the lay-outs.
    let wide = problem::trims_matter(problem).then(|| problem::widened(problem));
    let relaxed_wide = wide.as_ref().map(|w| milp::solve(w, Goal::Bound, &no_pins).ok());
    let bounding = relaxed_wide.as_ref().map_or(relaxed.as_ref(), Option::as_ref);
    let lp = bounding.map_or(0, |r| (r.objective - 1e-6).ceil().max(0.0) as u32);
    let lower_bound = lp.max(infeasible::size_bound(problem));
    tr!(
        tracer,
        "LP bound: {:.3} GPUs (widened: {}); model lower bound {lower_bound} GPUs; bound valid for every plan {} GPUs",
        bounding.map_or(f64::NAN, |r| r.objective),
        wide.is_some(),
        valid.gpus
    );
    let floor = (lower_bound > 0).then_some(f64::from(lower_bound));
    // On priced pools the plan minimises cost: its own bound is the LP relaxation of cost, cut
    // by the GPU bound (every plan uses that many GPUs at least).
    let cost_of = |p: &problem::Problem<'_>| {
        problem.unit_price.and_then(|_| milp::solve(p, Goal::CostBound { gpu_floor: floor }, &no_pins).ok())
    };
    let cost_relaxed = cost_of(problem);
    let cost_wide = wide.as_ref().map(cost_of);
    let cost_bounding = cost_wide.as_ref().map_or(cost_relaxed.as_ref(), Option::as_ref);
    if let Some(r) = cost_bounding {
        tr!(tracer, "LP cost bound: {:.3} (relative weights)", r.cost);
    }
    let cost_bound = cost_bounding
        .zip(problem.unit_price)
        .map(|(r, unit)| bounds::integral_dollars(problem, r.cost, unit));
    let goal = Goal::Plan { cost_bound: ffd_cost, gpu_floor: floor };
    let guide = if problem.unit_price.is_some() { cost_relaxed.as_ref() } else { relaxed.as_ref() };
    let large = problem::is_large(problem);
    let preferred = guide.filter(|_| large).map(|lp| {
        let mut p = lp.replicas.clone();
        p.extend(rounding::round_all(problem, lp));
        p
    });
    let bound = if problem.unit_price.is_some() { cost_bounding } else { bounding }.map(|r| r.cost);
    // A fleet grown by an addition (no planner) asks only whether it plans.
    let improve = planner.is_some();
    let inputs = strategy::Inputs {
        goal,
        guide,
        relaxed: relaxed.as_ref(),
        bound,
        large,
        preferred,
        valid,
        planner,
        improve,
    };
    let candidate = strategy::run(problem, &inputs, ffd, tracer)?;
    if !improve {
        return Ok(Solved { candidate, ffd_gpus, ffd_cost, lower_bound, cost_bound });
    }
    let candidate =
        if large { candidate } else { widened_bound(problem, wide.as_ref(), floor, candidate, tracer) };
    let candidate = strategy::without_mps(
        problem,
        &inputs,
        candidate,
        |t| plain.and_then(|p| solve(p, valid, None, planner, t).ok()).map(|s| s.candidate),
        tracer,
    );
    Ok(Solved { candidate, ffd_gpus, ffd_cost, lower_bound, cost_bound })
}

/// Where [`plan_traced`] writes its steps: one line each, with the time since planning began.
struct Tracer<'w> {
    out: Option<&'w mut dyn std::io::Write>,
    t0: std::time::Instant,
}

impl Tracer<'_> {
    /// Whether the trace is written (`GPUPLAN_TRACE`).
    fn on(&self) -> bool {
        self.out.is_some()
    }

    fn line(&mut self, args: std::fmt::Arguments<'_>) {
        if let Some(w) = self.out.as_mut() {
            // Trace write errors are ignored: the trace is a diagnostic aid, not output.
            let _ = writeln!(w, "[{:>8.3} s] {}", self.t0.elapsed().as_secs_f64(), args);
        }
    }
}
