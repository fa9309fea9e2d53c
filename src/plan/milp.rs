//! The optimiser: a small mixed-integer program over counts, solved with good_lp.
//!
//! In: a [`Problem`] (and optionally an upper bound from first-fit-decreasing). Out: per-pool
//! counts ([`PoolCounts`]: GPUs per MIG layout, exclusive and time-sliced whole GPUs, node
//! classes) and replica counts per (model, pool, option), or why no solution was found.
//!
//! Formulation (identical GPUs of a pool are interchangeable, so nothing is indexed by GPU):
//! - `y[m,o]` integer replicas of model `m` served by option `o`; fixed demand: `Σ_o y = n`;
//!   rate demand: `Σ_o rps_o·y ≥ rate`, `Σ_o y ≥ min_replicas`.
//! - `g[p,l]` GPUs of pool `p` with MIG layout `l`; supply per profile `q`:
//!   `Σ_m y[m,(p,q)] ≤ Σ_l count(l,q)·g[p,l]`.
//! - `w[p]` exclusive whole GPUs: `Σ_m n_m·y[m,(p,whole n)] ≤ w[p]`.
//! - `t[p,k]` time-sliced GPUs with k replicas: `Σ_m y[m,(p,ts k)] ≤ k·t[p,k]`, light tenants
//!   only (k copies fit the efficiency, so any k do). Here and below `k` is a share
//!   (`problem::Share`: k replicas by time-slicing or k MPS clients), so that MPS and
//!   time-sliced GPUs are separate node classes.
//! - `ts[p,k]` time-sliced GPUs on nodes judged by their tenants' combined compute (small
//!   problems): replicas `ys` there, `Σ ys ≤ k·ts`, `Σ compute·ys ≤ efficiency·zs_k` (all of a
//!   node's tenants together within the efficiency: sufficient for "any k together"); heavy
//!   tenants (only they fit alone) run only there.
//! - `tm[p,q,k,l]` GPUs with layout `l` on nodes whose `q` instances are all time-sliced with k
//!   (`problem::mig_ts_layouts`: the layout with the most `q`, and on small problems,
//!   `Problem::small`, per profile used exclusively the layout with the most of it):
//!   `Σ y[·,(p,mig-ts q k)] ≤ k·Σ_l count(l,q)·tm`, and their other instances supply exclusive
//!   MIG replicas; `Σ_l tm ≤ gpn·zm_{q,k}`.
//! - node classes (device-plugin sharing is per node and resource): `w ≤ gpn·zw`,
//!   `t_k ≤ gpn·zt_k`, `ts_k ≤ gpn·zs_k`, `zw + Σ_k (zt_k + zs_k) + Σ zm ≤ u`, all GPUs
//!   `≤ gpn·u`, `min ≤ u ≤ max nodes`; multi-GPU replicas of size ≥ n: at most `⌊gpn/n⌋·zw`.
//! - spread (necessary conditions; the decomposition enforces the rest): `gpu` — MIG replicas
//!   of a model ≤ MIG GPUs, Hall's condition over its profiles, per profile q ≤ `N_q + G1_q`
//!   and ≤ `N_q + gpn·(u − N_q)` (`N_q` nodes with a GPU of two or more q instances, where the
//!   device plugin could give two replicas one GPU; `G1_q` GPUs with one), time-sliced ones
//!   ≤ `t_k` and ≤ `zt_k` (one per node and shared
//!   resource: the device plugin picks the GPU); `node` — replicas in a pool ≤ `u`,
//!   whole ≤ `zw`, time-sliced ≤ `zt_k` and ≤ `t_k`, MIG ≤ MIG GPUs.
//! - objective, lexicographic through weights: cost (GPUs × relative price) × 1000, then one
//!   per distinct layout/sharing config in use, then GPUs whose current layout changes, then nodes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use good_lp::{Constraint, Expression, ProblemVariables, SolverModel, Variable, constraint, variable};

use crate::plan::problem::{self, Kind, Need, Opt, PoolCtx, Problem, Share, is_large};
use crate::spec::Spread;

/// Whether the objective counts distinct configs (needs binaries; HiGHS only).
const WITH_CONFIG_COUNT: bool = cfg!(feature = "highs");

/// Relative gap of large programs: the cost is within 0.2% of the proven bound (well inside
/// the 2% quality target) instead of within half of the cheapest GPU.
pub(crate) const LARGE_RELATIVE_GAP: f64 = 0.002;

/// What to optimise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Goal {
    /// The real plan: integers, full objective, optional upper bound on the weighted cost.
    Plan { cost_bound: Option<f64>, gpu_floor: Option<f64> },
    /// The LP relaxation, minimising GPUs: a lower bound.
    Bound,
    /// The LP relaxation, minimising the weighted cost (GPUs × relative price), with every
    /// plan's GPU lower bound as a cut: a lower bound on cost.
    CostBound { gpu_floor: Option<f64> },
    /// Capacity relaxed by extra nodes per pool; minimise the GPUs added (its LP relaxation
    /// when not `integer`: the fallback when the integer program stops without a solution).
    Extend { integer: bool },
}

/// Per-pool counts chosen by the optimiser.
#[derive(Clone, Debug, Default)]
pub(crate) struct PoolCounts {
    /// GPUs per candidate layout (same index as `PoolCtx::layouts`).
    pub layouts: Vec<u64>,
    /// Time-sliced GPUs per replica count k.
    pub ts: BTreeMap<Share, u64>,
    /// Nodes allowed to hold exclusive whole GPUs, and time-sliced GPUs per k.
    pub whole_nodes: u64,
    pub ts_nodes: BTreeMap<Share, u64>,
    /// GPUs on nodes whose instances of one profile are time-sliced with k, per (profile, k),
    /// per candidate layout (same index as `PoolCtx::layouts`), and their nodes.
    pub mig_ts: BTreeMap<(usize, u32), Vec<u64>>,
    pub mig_ts_nodes: BTreeMap<(usize, u32), u64>,
    pub nodes: u64,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct MilpResult {
    pub counts: Vec<PoolCounts>,
    pub replicas: BTreeMap<(usize, usize, Kind), u32>,
    /// Objective value (GPUs for `Bound`).
    pub objective: f64,
    /// Extra nodes per pool (`Extend`).
    pub extra_nodes: Vec<u64>,
    /// Whether the solver proved optimality.
    pub optimal: bool,
    /// Unrounded replicas of single-model columns (rate and spread models), for LP rounding.
    pub fractional: BTreeMap<(usize, usize, Kind), f64>,
    /// The weighted cost (GPUs × relative price) of the solution.
    pub cost: f64,
    /// A lower bound on the weighted cost of every plan of the program as solved, from the
    /// solver's dual bound (HiGHS's, or microlp's best bound; `None` where the goal is not a
    /// plan).
    pub floor: Option<f64>,
    /// Whether the program wrote rows that a plan trimming a GPU may break
    /// ([`Program::cuts_trimmed_plans`]): its optimum and floor then steer the cascade as
    /// before, but bound only the plans of its candidates, not every plan
    /// ([`MilpResult::sound_proven`]).
    pub cuts_trims: bool,
    /// A relaxation's counts rounded up instead of to the nearest (empty for an integer
    /// program): another lay-out of the relaxation ([`crate::plan::strategy`]), which leaves
    /// fewer replicas without room where the relaxation spreads a pool's GPUs thinly over
    /// node classes (each of its fractions rounded down to none).
    pub counts_up: Vec<PoolCounts>,
}

impl MilpResult {
    /// The result of a restriction of the program (pinned, capped, judged against another
    /// program): it proves nothing for the full program, and its dual bound bounds nothing.
    pub(crate) fn restrict(&mut self) {
        self.optimal = false;
        self.floor = None;
    }

    /// The full program's optimum where the solver proved it, else the solver's lower bound on
    /// it: no plan of the planner's model costs less (weights). Meaningful only for a result
    /// not [`MilpResult::restrict`]ed.
    pub(crate) fn proven(&self) -> Option<f64> {
        if self.optimal { Some(self.cost) } else { self.floor }
    }

    /// [`MilpResult::proven`] where it bounds every plan, a plan that trims a GPU included:
    /// `None` where the program's rows may cut such a plan ([`MilpResult::cuts_trims`]).
    pub(crate) fn sound_proven(&self) -> Option<f64> {
        if self.cuts_trims { None } else { self.proven() }
    }
}

/// Why a solve may end unproven, for the plan's reasons.
#[cfg(feature = "highs")]
pub(crate) const UNPROVEN_WHY: &str = "HiGHS stopped at its node limit or a relative gap, solved a program with the relaxation's choices rounded and pinned, or wrote spread rows that a plan trimming a GPU's MIG layout may break";
#[cfg(not(feature = "highs"))]
pub(crate) const UNPROVEN_WHY: &str = "microlp stopped at its node limit or a relative gap, solved a program with the relaxation's choices rounded and pinned, or wrote spread rows that a plan trimming a GPU's MIG layout may break";

/// Replica counts to impose, per (model, pool, kind); models absent are free.
pub(crate) type Pins = BTreeMap<(usize, usize, Kind), u32>;

#[derive(Debug)]
pub(crate) enum MilpError {
    Infeasible,
    Solver(String),
}

struct PoolVars {
    g: Vec<Variable>,
    w: Option<Variable>,
    t: BTreeMap<Share, Variable>,
    zw: Option<Variable>,
    zt: BTreeMap<Share, Variable>,
    /// Time-sliced GPUs with k replicas on nodes judged by their tenants' combined compute
    /// (`Σ compute ≤ efficiency` per node), and those nodes, per k.
    ts: BTreeMap<Share, (Variable, Variable)>,
    /// GPUs on nodes whose instances of profile q are time-sliced with k, per (q, k), per
    /// candidate layout (index into `PoolCtx::layouts`); and those nodes.
    tm: BTreeMap<(usize, u32), Vec<(usize, Variable)>>,
    zm: BTreeMap<(usize, u32), Variable>,
    u: Variable,
    extra: Option<Variable>,
}

impl PoolVars {
    /// Every GPU variable of the pool except the MIG time-slicing ones.
    fn plain_gpus(&self) -> impl Iterator<Item = Variable> + '_ {
        self.g
            .iter()
            .copied()
            .chain(self.w)
            .chain(self.t.values().copied())
            .chain(self.ts.values().map(|v| v.0))
    }

    /// The MIG time-slicing GPU variables.
    fn mig_ts_gpus(&self) -> impl Iterator<Item = Variable> + '_ {
        self.tm.values().flatten().map(|&(_, v)| v)
    }

    /// The pool's counts in a solution (`val`), each made whole by `whole`.
    fn counts(&self, p: &PoolCtx<'_>, val: &impl Fn(Variable) -> f64, whole: fn(f64) -> u64) -> PoolCounts {
        let mut ts: BTreeMap<Share, u64> = self.t.iter().map(|(&k, &t)| (k, whole(val(t)))).collect();
        let mut ts_nodes: BTreeMap<Share, u64> = self.zt.iter().map(|(&k, &z)| (k, whole(val(z)))).collect();
        for (&k, &(t, z)) in &self.ts {
            *ts.entry(k).or_insert(0) += whole(val(t));
            *ts_nodes.entry(k).or_insert(0) += whole(val(z));
        }
        let mig_ts = self
            .tm
            .iter()
            .map(|(&key, layouts)| {
                let mut per = vec![0u64; p.layouts.len()];
                for &(l, var) in layouts {
                    per[l] = whole(val(var));
                }
                (key, per)
            })
            .collect();
        PoolCounts {
            layouts: self.g.iter().map(|&g| whole(val(g))).collect(),
            ts,
            whole_nodes: self.zw.map_or(0, |z| whole(val(z))),
            ts_nodes,
            mig_ts,
            mig_ts_nodes: self.zm.iter().map(|(&k, &z)| (k, whole(val(z)))).collect(),
            nodes: whole(val(self.u)),
        }
    }
}

/// `x` rounded to the nearest whole count (none below zero).
fn round_count(x: f64) -> u64 {
    if x <= 0.0 { 0 } else { x.round() as u64 }
}

/// `x` rounded up to a whole count, less the solver's tolerance (a millionth).
fn ceil_count(x: f64) -> u64 {
    if x <= 1e-6 { 0 } else { (x - 1e-6).ceil() as u64 }
}

/// A column group of the program: one rate model, one spread model, or all fixed-demand models
/// that share exactly the same options (their replicas are interchangeable, so one set of
/// integer variables serves them all; this keeps the program small for thousands of models).
/// On small problems members of a group that may be time-sliced also share their compute.
struct Col<'p> {
    members: Vec<usize>,
    need: Need,
    options: Vec<&'p Opt>,
    spread: Spread,
    /// The largest compute of the members (for the combined-compute time-slicing rows).
    compute: f64,
}

/// Whether `o` is a heavy time-slice for a tenant of compute `c`.
fn heavy(problem: &Problem<'_>, o: &Opt, c: f64) -> bool {
    crate::plan::problem::heavy(o, c, problem.spec.policy.time_slicing_efficiency)
}

fn columns<'p>(problem: &'p Problem<'_>) -> Vec<Col<'p>> {
    let mut cols: Vec<Col<'p>> = Vec::new();
    // Options, and on small problems the compute of models that may be time-sliced (the
    // combined-compute rows weigh each replica by it, so members must agree).
    let mut by_key: BTreeMap<(Vec<(usize, Kind)>, u64), usize> = BTreeMap::new();
    for (mi, m) in problem.models.iter().enumerate() {
        let c = m.spec.compute;
        // Only models that need a replica count and spread nothing share a column.
        let n = match m.need {
            Need::Replicas(n) if m.spec.spread == Spread::None => n,
            _ => {
                cols.push(Col {
                    members: vec![mi],
                    need: m.need.clone(),
                    options: m.options.iter().collect(),
                    spread: m.spec.spread,
                    compute: c,
                });
                continue;
            }
        };
        let shared = problem.small && m.options.iter().any(|o| matches!(o.kind, Kind::TimeSliced(_)));
        let key =
            (m.options.iter().map(|o| (o.pool, o.kind)).collect(), if shared { c.to_bits() } else { 0 });
        match by_key.get(&key) {
            Some(&ci) => {
                if let Some(col) = cols.get_mut(ci) {
                    col.members.push(mi);
                    col.compute = col.compute.max(c);
                    if let Need::Replicas(total) = &mut col.need {
                        *total += n;
                    }
                }
            }
            None => {
                by_key.insert(key, cols.len());
                cols.push(Col {
                    members: vec![mi],
                    need: m.need.clone(),
                    options: m.options.iter().collect(),
                    spread: Spread::None,
                    compute: c,
                });
            }
        }
    }
    cols
}

/// Splits a column's replica counts per option among its member models: each model, largest
/// first, takes the option with the least room that still holds all its replicas (so that most
/// models get a single resource), else fills options in order.
fn disaggregate(problem: &Problem<'_>, col: &Col<'_>, counts: &[u32]) -> Vec<(usize, usize, u32)> {
    if col.members.len() == 1 {
        return col
            .members
            .iter()
            .flat_map(|&m| counts.iter().enumerate().map(move |(oi, &n)| (m, oi, n)))
            .collect();
    }
    let mut left = counts.to_vec();
    let mut members: Vec<(usize, u32)> = col
        .members
        .iter()
        .map(|&m| {
            (m, if let Some(Need::Replicas(n)) = problem.models.get(m).map(|x| &x.need) { *n } else { 0 })
        })
        .collect();
    members.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut out = Vec::new();
    for (m, need) in members {
        let fit = (0..left.len()).filter(|&oi| left[oi] >= need).min_by_key(|&oi| (left[oi], oi));
        if let Some(oi) = fit {
            left[oi] -= need;
            out.push((m, oi, need));
            continue;
        }
        let mut rest = need;
        for (oi, l) in left.iter_mut().enumerate() {
            if rest == 0 {
                break;
            }
            let take = rest.min(*l);
            if take > 0 {
                *l -= take;
                rest -= take;
                out.push((m, oi, take));
            }
        }
    }
    out
}

/// Builds and solves the program.
pub(crate) fn solve(problem: &Problem<'_>, goal: Goal, pins: &Pins) -> Result<MilpResult, MilpError> {
    solve_with_work(problem, goal, pins, &Caps::new(), 1, false)
}

/// Most replicas a model may have in a pool, per (model, pool); models absent are free.
pub(crate) type Caps = BTreeMap<(usize, usize), u32>;

/// [`solve`] with the replicas of some single-model columns (spread and rate models) capped
/// per pool: the cascade's re-solve when counts do not lay out ([`crate::plan::strategy`]).
/// A restriction of the program: its result proves nothing for the full one. With
/// `profile_rows`, the rows of [`solve_with_profile_rows`] too. A program that is not large
/// gets the node budget of the program per node ([`PER_NODE_COLUMN_NODES`] ÷ its columns, at
/// most [`HIGHS_NODE_LIMIT`]): its lay-out is only a candidate, and under the fixed limit a
/// 128-GPU stress fleet spent 400 s in one capped re-solve whose lay-out was not kept
/// (docs/benchmarks.md). A large one keeps its own, smaller, limit.
pub(crate) fn solve_capped(
    problem: &Problem<'_>,
    goal: Goal,
    caps: &Caps,
    profile_rows: bool,
) -> Result<MilpResult, MilpError> {
    let mut prog = Program::with_rows(problem, goal, profile_rows);
    prog.budget = !prog.large;
    prog.build(&Pins::new(), caps);
    prog.run_and_read()
}

/// The pure-Rust build's program with the `spread: gpu` rows on MIG that its plain program
/// leaves out ([`Program::mig_spread_gpu_rows`]), their nodes `N` continuous
/// ([`Program::relaxed_spread_rows`]), with [`HARDER_WORK`] times the node limit (with the
/// default limit microlp found no solution of it on the 100-GPU six-type stress fleets "mixed",
/// seeds 0 and 2; with 8 times, 47 and 49 GPUs). The cascade's re-solve where the plain
/// program's counts did not lay out (`strategy::with_relaxed_spread_rows`). Its result is
/// restricted (judged against the plain program's). Where `spread_rows` is on (HiGHS, small
/// problems) it is the plain program with more work.
pub(crate) fn solve_with_relaxed_spread_rows(
    problem: &Problem<'_>,
    goal: Goal,
    pins: &Pins,
) -> Result<MilpResult, MilpError> {
    let mut prog = Program::new(problem, goal);
    prog.relaxed_spread_rows = !prog.spread_rows;
    prog.work = HARDER_WORK;
    prog.build(pins, &Caps::new());
    let mut r = prog.run_and_read()?;
    r.restrict();
    Ok(r)
}

/// How many times its node limit a solve with more work may explore ([`solve_harder`]).
pub(crate) const HARDER_WORK: u32 = 8;

/// [`solve`] with [`HARDER_WORK`] times the node limit: the cascade's last resort when the
/// solver stopped without a feasible solution (a count, not a clock: the same on any machine).
pub(crate) fn solve_harder(problem: &Problem<'_>, goal: Goal, pins: &Pins) -> Result<MilpResult, MilpError> {
    solve_with_work(problem, goal, pins, &Caps::new(), HARDER_WORK, false)
}

/// [`solve`] stopped after `nodes` branch-and-bound nodes, for tests of what a stop at a node
/// limit proves.
#[cfg(test)]
pub(crate) fn solve_with_nodes(
    problem: &Problem<'_>,
    goal: Goal,
    nodes: u64,
) -> Result<MilpResult, MilpError> {
    let mut prog = Program::new(problem, goal);
    prog.nodes = Some(nodes);
    prog.build(&Pins::new(), &Caps::new());
    prog.run_and_read()
}

/// [`solve`] with a zero gap and [`HARDER_WORK`] times the node limit, for tests that check
/// what a wider gap proved.
#[cfg(test)]
pub(crate) fn solve_exact(problem: &Problem<'_>, goal: Goal) -> Result<MilpResult, MilpError> {
    let mut prog = Program::new(problem, goal);
    prog.exact = true;
    prog.work = HARDER_WORK;
    prog.build(&Pins::new(), &Caps::new());
    prog.run_and_read()
}

/// [`solve`] with the rows for `spread: gpu` models on several MIG profiles of a pool
/// ([`Program::mixed_profile_rows`]; the bounds' relaxations always have them): the cascade's
/// re-solve when the counts of the plain program did not lay out. A program with more
/// necessary conditions: unpinned, its optimum is still at most any valid plan's cost.
pub(crate) fn solve_with_profile_rows(
    problem: &Problem<'_>,
    goal: Goal,
    pins: &Pins,
) -> Result<MilpResult, MilpError> {
    solve_with_work(problem, goal, pins, &Caps::new(), 1, true)
}

/// Which `spread: gpu` rows on MIG the program per node writes ([`solve_per_node`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeRows {
    /// The rows of the pooled program on each node, those of several profiles among them
    /// ([`Program::mig_spread_gpu_rows`], [`Program::mixed_profile_rows`]): on the candidate
    /// layouts' instances, which is how the lay-out places replicas, so its counts lay out.
    /// On the maximal layouts they may cut a plan that trims an instance to keep two replicas
    /// apart, so the result is a restriction and proves nothing.
    Placed,
    /// The same rows on a split problem whose candidates are
    /// [`crate::plan::per_node::Split::with_spread_layouts`]: every layout a plan may trim a
    /// GPU to, up to instances of profiles no `spread: gpu` model uses. On one node the rows
    /// are then the rule itself: its counts lay out, and they cut no plan, so unpinned the
    /// optimum and dual bound bound every plan of the planner's model. A plan cut node by node
    /// meets them, so the plan so far is a start HiGHS keeps.
    Exact,
    /// The rows on the instances replicas use ([`Program::trimmed_spread_rows`]): necessary for
    /// every plan, so the optimum and the dual bound bound every plan of the planner's model.
    Trimmed,
}

/// [`solve`] on a problem whose pools are single nodes ([`crate::plan::per_node`]), with
/// `twins` (pairs of interchangeable nodes) ordered by their GPUs, the `spread: gpu` rows of
/// `rows`, no objective level for distinct configs (it would count them node by node), and a
/// node budget in proportion to its columns ([`PER_NODE_COLUMN_NODES`]). With
/// [`NodeRows::Exact`] or [`NodeRows::Trimmed`], unpinned, its optimum and dual bound bound
/// every plan of the planner's model (see [`crate::plan::per_node`]); `pins` (tests: a plan's
/// own counts) make it a restriction, as does `exact_cuts` (the exact rows on candidates that
/// are not [`crate::plan::per_node::Split::with_spread_layouts`]', where they may cut a plan;
/// [`crate::plan::per_node::Split::solve`] says which). `start` (a plan's counts per node,
/// [`crate::plan::per_node::Split::cut`]; may be empty) only seeds the search. `work`: the
/// multiple of the node budget (1, or [`HARDER_WORK`] for the per-node step's last solve).
#[allow(clippy::too_many_arguments, reason = "the program per node's knobs; one caller, Split::solve")]
pub(crate) fn solve_per_node(
    problem: &Problem<'_>,
    goal: Goal,
    twins: &[(usize, usize)],
    pins: &Pins,
    rows: NodeRows,
    start: Pins,
    work: u32,
    exact_cuts: bool,
) -> Result<MilpResult, MilpError> {
    let mut prog = Program::per_node(problem, goal, start);
    prog.work = work;
    prog.twins = twins.to_vec();
    prog.trimmed = rows == NodeRows::Trimmed;
    prog.profile_rows = rows != NodeRows::Trimmed;
    prog.build(pins, &Caps::new());
    let mut r = prog.run_and_read()?;
    let proves = match rows {
        NodeRows::Placed => false,
        NodeRows::Exact => !exact_cuts,
        NodeRows::Trimmed => true,
    };
    if !pins.is_empty() || !proves {
        r.restrict();
    }
    Ok(r)
}

/// [`solve_per_node`] with the exact rows ([`NodeRows::Exact`]; on a split from
/// [`crate::plan::per_node::Split::with_spread_layouts`] every node can hold what the plan
/// gives it) from `plan` (a plan cut node by node, [`crate::plan::per_node::Split::cut`]),
/// every pool but those of `free` holding the replicas `plan` gives it ([`Program::hold`]): the
/// plan's neighbourhood of the `free` nodes, for a large-neighbourhood search. No twins' rows
/// (the held pools fix the order). A restriction: it proves nothing.
pub(crate) fn solve_neighbourhood(
    problem: &Problem<'_>,
    goal: Goal,
    plan: Pins,
    free: &BTreeSet<usize>,
) -> Result<MilpResult, MilpError> {
    let mut prog = Program::per_node(problem, goal, plan);
    prog.held = (0..problem.pools.len()).filter(|p| !free.contains(p)).collect();
    prog.profile_rows = true;
    prog.build(&Pins::new(), &Caps::new());
    let mut r = prog.run_and_read()?;
    r.restrict();
    Ok(r)
}

/// Whether [`solve_with_profile_rows`] writes rows the plain program lacks: some `spread: gpu`
/// model may run on MIG, and the solver is HiGHS or the problem small (microlp's branch and
/// bound gets them only there, as the rows of one profile).
pub(crate) fn has_profile_rows(problem: &Problem<'_>) -> bool {
    problem.mig_spread_models && (cfg!(feature = "highs") || problem.small)
}

/// [`solve`] with `caps`, `work` times the solver's node limit, and the rows for `spread: gpu`
/// models on several profiles when `profile_rows` (or when the goal is a bound).
fn solve_with_work(
    problem: &Problem<'_>,
    goal: Goal,
    pins: &Pins,
    caps: &Caps,
    work: u32,
    profile_rows: bool,
) -> Result<MilpResult, MilpError> {
    let mut prog = Program::with_rows(problem, goal, profile_rows);
    prog.work = work;
    prog.build(pins, caps);
    prog.run_and_read()
}

/// The program with every row the solver may write — the `spread: gpu` rows on MIG, which the
/// pure-Rust build leaves out of the programs it solves on problems that are not small
/// ([`Program::mig_spread_gpu_rows`]), and those of several profiles
/// ([`Program::mixed_profile_rows`]), which the plain program lacks in either build. For the
/// cascade's last word, where a failure would otherwise blame the planner: proven infeasible,
/// no plan exists (the rows are necessary for every plan, and where they may cut a plan that
/// trims a GPU the widened program must be infeasible too; issue 23: 128-GPU stress fleets
/// HiGHS proves infeasible ended in `planner-failed` in the pure-Rust build, and a 16-GPU
/// six-type fleet whose `spread: gpu` model has more replicas than the fleet has GPUs it can
/// share in the HiGHS build); solved, its counts respect the rows the plain program's counts
/// broke, and may lay out where those did not. A solve that stops without an answer proves
/// nothing.
pub(crate) fn solve_every_row(problem: &Problem<'_>) -> Result<MilpResult, MilpError> {
    let mut prog = Program::new(problem, Goal::Plan { cost_bound: None, gpu_floor: None });
    prog.spread_rows = true;
    prog.profile_rows = true;
    prog.every_row = true;
    prog.build(&Pins::new(), &Caps::new());
    prog.run_and_read()
}

/// Branch-and-bound nodes of [`solve_whole_bound`], either solver: past them its best bound
/// stands.
const WHOLE_BOUND_NODES: u64 = 1_000;

/// The bound's relaxation of cost ([`Goal::CostBound`]: GPUs × relative price, at least
/// `gpu_floor` GPUs) with the counts of nodes and each pool's GPUs whole, the rest continuous:
/// a lower bound on the weighted cost of every plan of the program — the optimum where the
/// solver proves it within [`WHOLE_BOUND_NODES`], else its best bound (also where it found no
/// solution of the relaxation in them: the least bound of its open nodes) — less a millionth
/// for the solver's tolerances. Few integers, so microlp solves it where it cannot solve the
/// program (issue 23: 8-GPU stress fleets whose plans it then proves, priced and not).
pub(crate) fn solve_whole_bound(problem: &Problem<'_>, gpu_floor: Option<f64>) -> Option<f64> {
    whole_bound_within(problem, gpu_floor, WHOLE_BOUND_NODES)
}

/// [`solve_whole_bound`] with `nodes` branch-and-bound nodes (tests: a stop before any
/// solution of the relaxation).
pub(crate) fn whole_bound_within(problem: &Problem<'_>, gpu_floor: Option<f64>, nodes: u64) -> Option<f64> {
    let mut prog = Program::with_rows(problem, Goal::CostBound { gpu_floor }, false);
    prog.aggregates = true;
    prog.build(&Pins::new(), &Caps::new());
    let Program { vars, cons, objective, large, .. } = prog;
    let value = objective.clone();
    let bound = match run_nodes(vars, objective, cons, 0.0, large, nodes, &[]).ok()? {
        Stop::Solved(out) => {
            let reached = value.eval_with(&out.values);
            match (out.dual, out.optimal) {
                (Some(d), _) => d.min(reached),
                (None, true) => reached,
                (None, false) => return None,
            }
        }
        // No plan of the relaxation within the nodes: the least bound of the open ones holds.
        Stop::NoSolution { dual, .. } => dual?,
    };
    Some(bound - 1e-6 * bound.abs().max(1.0))
}

/// The smallest addition of nodes per pool ([`Goal::Extend`], integer) that is not within any
/// of `excluded` (additions already tried that gpuplan did not plan with), or `Err` when none is
/// (the program is then infeasible: every addition it could name is within one of them).
pub(crate) fn solve_extend(problem: &Problem<'_>, excluded: &[Vec<u64>]) -> Result<MilpResult, MilpError> {
    let mut prog = Program::new(problem, Goal::Extend { integer: true });
    prog.excluded = excluded.to_vec();
    prog.build(&Pins::new(), &Caps::new());
    prog.run_and_read()
}

/// Branch-and-bound nodes of one program of [`solve_repack`].
const REPACK_NODES: u64 = 500;

/// The program of a few nodes ([`crate::plan::repack`]; each a pool of one node whose
/// candidates are [`crate::plan::per_node::Split::with_spread_layouts`]') with every row, the
/// exact `spread: gpu` rows ([`NodeRows::Exact`]) among them, so that its counts lay out;
/// capped at `cost_bound` (none where the neighbourhood takes replicas no node has yet,
/// [`crate::plan::repack::completed`]), with at most [`REPACK_NODES`] branch-and-bound nodes:
/// a neighbourhood is worth its solve only where a packing is found soon. A restriction: it
/// proves nothing.
pub(crate) fn solve_repack(problem: &Problem<'_>, cost_bound: Option<f64>) -> Result<MilpResult, MilpError> {
    let goal = Goal::Plan { cost_bound, gpu_floor: None };
    let mut prog = Program::per_node(problem, goal, Pins::new());
    prog.spread_rows = true;
    prog.profile_rows = true;
    prog.nodes = Some(REPACK_NODES);
    prog.build(&Pins::new(), &Caps::new());
    let mut r = prog.run_and_read()?;
    r.restrict();
    Ok(r)
}

/// What [`Program::run_and_read`] needs to solve the full pooled program again on the problem
/// [`problem::widened`] to every layout a plan may trim a GPU to.
struct Recipe<'p, 'a> {
    problem: &'p Problem<'a>,
    goal: Goal,
    work: u32,
    profile_rows: bool,
    spread_rows: bool,
    relaxed_spread_rows: bool,
    every_row: bool,
}

impl Recipe<'_, '_> {
    /// Whether the program, with the same rows, is infeasible on the widened problem too: only
    /// then does no plan exist (its rows there hold for every plan).
    fn widened_infeasible(self) -> bool {
        let wide = problem::widened(self.problem);
        let mut prog = Program::with_rows(&wide, self.goal, self.profile_rows);
        prog.work = self.work;
        // The pure-Rust build's last word ([`solve_every_row`]) writes the `spread: gpu` rows
        // its other programs leave out; without them here it could not prove what they make
        // infeasible (128-GPU stress fleet "mixed", seed 1: infeasible in 0.3 s with them, a
        // solver stop without, and `planner-failed` where HiGHS says `capacity-exceeded`).
        prog.spread_rows = self.spread_rows;
        prog.relaxed_spread_rows = self.relaxed_spread_rows;
        prog.every_row = self.every_row;
        prog.build(&Pins::new(), &Caps::new());
        matches!(prog.run_and_read(), Err(MilpError::Infeasible))
    }
}

/// Weights of the objective's lower levels (see the module header).
struct Weights {
    /// Per GPU whose current MIG layout is dropped.
    stability: f64,
    /// Per node.
    node: f64,
    /// Per replica × (device size + sharing penalty): the last tie-break.
    tie: f64,
}

/// The program under construction, one step per seam of the formulation: replica variables,
/// pool variables, pinned counts, demand, per pool its supply and node classes, spread and
/// objective, then the goal's rows; [`Program::run_and_read`] solves and reads the counts.
struct Program<'p, 'a> {
    problem: &'p Problem<'a>,
    goal: Goal,
    cols: Vec<Col<'p>>,
    large: bool,
    integer: bool,
    vars: ProblemVariables,
    cons: Vec<Constraint>,
    objective: Expression,
    /// Replicas per column and option.
    y: Vec<Vec<Variable>>,
    /// The same on time-sliced nodes judged by their tenants' combined compute (`None` where
    /// not modelled: spread models, problems that are not [`Problem::small`], other kinds).
    ys: Vec<Vec<Option<Variable>>>,
    pv: Vec<PoolVars>,
    weights: Weights,
    /// Multiple of the solver's node limit (1 but for [`solve_harder`]).
    work: u32,
    /// Branch-and-bound nodes at most, in place of the budget `work` scales (the small
    /// programs of [`solve_repack`]).
    nodes: Option<u64>,
    /// Whether [`Program::mixed_profile_rows`] are written.
    profile_rows: bool,
    /// The largest value the objective's lower levels (every term but 1000 × the cost) can
    /// take in a plan, each variable at its upper bound or the least its plan needs: a dual
    /// bound `d` then bounds every plan's cost below by `(d − levels) / 1000`.
    levels: f64,
    /// Upper bound of the replicas each `y[c,o]` (with its `ys`) can serve.
    served_ub: Vec<Vec<f64>>,
    /// Solved with a zero gap (tests: [`solve_exact`]).
    exact: bool,
    /// Pairs of pools (a, b) of interchangeable nodes: `a` holds at least as many GPUs as `b`
    /// (the program per node, [`solve_per_node`]).
    twins: Vec<(usize, usize)>,
    /// Whether the objective counts distinct configs ([`WITH_CONFIG_COUNT`]; not per node).
    configs: bool,
    /// Whether the `spread: gpu` rows on MIG are written on the instances replicas use
    /// ([`Program::trimmed_spread_rows`], [`NodeRows::Trimmed`]), not on the candidate layouts'.
    trimmed: bool,
    /// Whether HiGHS's node limit is [`PER_NODE_COLUMN_NODES`] ÷ the columns (the program per
    /// node and the capped re-solves: past its root each node re-solves an LP of thousands of
    /// columns).
    budget: bool,
    /// A plan's replica counts to start from ([`start_values`]; empty: none).
    start: Pins,
    /// Pools that hold the replicas `start` gives them ([`Program::hold`]; empty: none).
    held: BTreeSet<usize>,
    /// Additions of nodes per pool ([`Goal::Extend`]) the solution may not fit within: each
    /// one's rows ask for more nodes than it adds in at least one pool ([`solve_extend`]).
    excluded: Vec<Vec<u64>>,
    /// Whether [`Program::build`] imposed pins or caps (a restriction whatever its rows).
    imposed: bool,
    /// Whether the `spread: gpu` rows on MIG are written ([`Program::mig_spread_gpu_rows`]):
    /// with HiGHS, or on small problems, or in the bounds' relaxations of programs that are
    /// not large (no branch and bound to slow down; without them the pure-Rust bound was 9
    /// GPUs lower than HiGHS's on a 256-GPU stress fleet, 143.8 against 152.5; a large
    /// program's relaxation also guides its plan, whose benchmarks were not re-measured with
    /// them), or where only no plan answers — the smallest addition of nodes
    /// ([`Goal::Extend`]) and [`solve_every_row`] — so that the addition named is one a plan
    /// needs with every rule.
    spread_rows: bool,
    /// Whether the rows of [`Program::mig_spread_gpu_rows`] are written with their nodes `N`
    /// continuous where [`Program::spread_rows`] leaves them out
    /// ([`solve_with_relaxed_spread_rows`]). A relaxation of those rows, so still necessary for
    /// every plan, with no integer of their own to branch on; without them the counts put
    /// `spread: gpu` replicas on GPUs with several instances of their profile that no node can
    /// give them (100-GPU six-type stress fleet "mixed", seed 2: counts of 52 GPUs laid out with
    /// 39 replicas re-placed by first fit; docs/benchmarks.md).
    relaxed_spread_rows: bool,
    /// Whether this is the program with every row ([`solve_every_row`]): the rows of several
    /// profiles are written in the pure-Rust build too, whatever the problem's size.
    every_row: bool,
    /// Whether the counts of nodes and each pool's GPUs are integers in a bound's relaxation
    /// ([`solve_whole_bound`]): [`Program::add_whole`].
    aggregates: bool,
}

impl<'p, 'a> Program<'p, 'a> {
    fn new(problem: &'p Problem<'a>, goal: Goal) -> Self {
        let integer = match goal {
            Goal::Bound | Goal::CostBound { .. } => false,
            Goal::Extend { integer } => integer,
            Goal::Plan { .. } => true,
        };
        let cols = columns(problem);
        let large = is_large(problem);
        let total_current: f64 = problem
            .pools
            .iter()
            .map(|p| p.spec.current.iter().map(|n| n.gpus.len()).sum::<usize>() as f64)
            .sum();
        let total_nodes: f64 = problem.pools.iter().map(|p| f64::from(p.max_nodes)).sum();
        let stability = 0.5 / (1.0 + total_current);
        let node = stability / (2.0 * (1.0 + total_nodes));
        // Last tie-break: the smallest device that serves a replica (it leaves room to grow),
        // and a MIG instance or whole GPU before a time-slice (isolation) when the cost is the
        // same.
        let total_replicas: f64 = problem
            .models
            .iter()
            .map(|m| match m.need {
                Need::Replicas(n) => f64::from(n),
                Need::Rate { rps, min_replicas } => {
                    let best = m.options.iter().filter_map(|o| o.rps).fold(0.0, f64::max);
                    if best > 0.0 { (rps / best).ceil().max(f64::from(min_replicas)) } else { 0.0 }
                }
            })
            .sum();
        let tie = node / (4.0 * (1.0 + total_replicas));
        Program {
            problem,
            goal,
            cols,
            large,
            integer,
            vars: ProblemVariables::new(),
            cons: Vec::new(),
            objective: Expression::from(0.0),
            y: Vec::new(),
            ys: Vec::new(),
            pv: Vec::new(),
            weights: Weights { stability, node, tie },
            levels: 0.0,
            served_ub: Vec::new(),
            exact: false,
            work: 1,
            nodes: None,
            // The smallest addition of nodes has every row that holds for every plan.
            profile_rows: matches!(goal, Goal::Extend { .. }),
            twins: Vec::new(),
            configs: WITH_CONFIG_COUNT,
            trimmed: false,
            budget: false,
            start: Pins::new(),
            held: BTreeSet::new(),
            excluded: Vec::new(),
            imposed: false,
            spread_rows: cfg!(feature = "highs")
                || problem.small
                || matches!(goal, Goal::Extend { .. })
                || (matches!(goal, Goal::Bound | Goal::CostBound { .. }) && !large),
            relaxed_spread_rows: false,
            every_row: false,
            aggregates: false,
        }
    }

    /// The program per node's setup ([`solve_per_node`], [`solve_neighbourhood`]): a start
    /// (may be empty), no objective level for distinct configs (it would count them node by
    /// node), and the node budget in proportion to the columns.
    fn per_node(problem: &'p Problem<'a>, goal: Goal, start: Pins) -> Self {
        let mut prog = Self::new(problem, goal);
        prog.start = start;
        prog.configs = false;
        prog.budget = true;
        prog
    }

    /// [`Program::new`] with the rows of several profiles ([`Program::mixed_profile_rows`]) where
    /// `profile_rows` asks for them, and always for a bound (its relaxation has them).
    fn with_rows(problem: &'p Problem<'a>, goal: Goal, profile_rows: bool) -> Self {
        let mut prog = Program::new(problem, goal);
        prog.profile_rows = profile_rows || matches!(goal, Goal::Bound | Goal::CostBound { .. });
        prog
    }

    /// Every variable, row and objective level of the program, `pins` and `caps` imposed.
    fn build(&mut self, pins: &Pins, caps: &Caps) {
        self.imposed = !pins.is_empty() || !caps.is_empty();
        self.replica_vars();
        self.pool_vars();
        self.pin(pins);
        self.hold();
        self.cap(caps);
        self.demand_rows();
        let mut bound_gpus = Expression::from(0.0);
        let mut cost_expr = Expression::from(0.0);
        let mut per_pool = Vec::new();
        for pi in 0..self.problem.pools.len() {
            let gpus = self.pool_rows(pi);
            self.spread_rows(pi);
            if self.aggregates {
                let whole = self.add_whole(variable().min(0));
                self.cons.push(constraint!(gpus.clone() == whole));
            }
            bound_gpus += gpus.clone();
            cost_expr += self.problem.pools[pi].weight * gpus.clone();
            per_pool.push(gpus.clone());
            self.pool_objective(pi, gpus);
        }
        for &(a, b) in &self.twins {
            if let (Some(ga), Some(gb)) = (per_pool.get(a), per_pool.get(b)) {
                self.cons.push(constraint!(ga.clone() >= gb.clone()));
            }
        }
        self.goal_rows(bound_gpus, cost_expr);
        self.exclusion_rows();
    }

    /// For each addition in [`Program::excluded`], binaries `b[p]` with `Σ b[p] ≥ 1` and
    /// `extra[p] ≥ (addition[p] + 1) · b[p]`: the program's addition is not within it.
    fn exclusion_rows(&mut self) {
        for addition in std::mem::take(&mut self.excluded) {
            let mut any = Expression::from(0.0);
            for (v, &e) in self.pv.iter().zip(&addition) {
                let Some(x) = v.extra else { continue };
                let b = self.vars.add(variable().binary());
                self.cons.push(constraint!(x >= (e as f64 + 1.0) * b));
                any += b;
            }
            self.cons.push(constraint!(any >= 1.0));
        }
    }

    fn int(&self, d: good_lp::VariableDefinition) -> good_lp::VariableDefinition {
        if self.integer { d.integer() } else { d }
    }

    /// A count of nodes, or a pool's GPUs: integer in the integer program and, in a bound's
    /// relaxation, where [`Program::aggregates`] (every plan has whole numbers of both).
    fn add_whole(&mut self, d: good_lp::VariableDefinition) -> Variable {
        let d = if self.aggregates { d.integer() } else { self.int(d) };
        self.vars.add(d)
    }

    /// `y[c,o]`, and `ys[c,o]` for time-slices on combined-compute nodes.
    fn replica_vars(&mut self) {
        for ci in 0..self.cols.len() {
            let (mut row, mut row_s, mut row_ub) = (Vec::new(), Vec::new(), Vec::new());
            for oi in 0..self.cols[ci].options.len() {
                let (col, o) = (&self.cols[ci], self.cols[ci].options[oi]);
                let ub = match col.need {
                    Need::Replicas(n) => f64::from(n),
                    Need::Rate { rps, min_replicas } => {
                        let per = o.rps.unwrap_or(0.0);
                        if per > 0.0 { (rps / per).ceil() + f64::from(min_replicas) } else { 0.0 }
                    }
                };
                // A heavy time-slice exists only on combined-compute nodes.
                let light_ub = if heavy(self.problem, o, col.compute) { 0.0 } else { ub };
                let combined =
                    self.problem.small && col.spread == Spread::None && matches!(o.kind, Kind::TimeSliced(_));
                let d = self.int(variable().min(0).max(light_ub));
                row.push(self.vars.add(d));
                row_s.push(combined.then_some(ub));
                row_ub.push(light_ub + if combined { ub } else { 0.0 });
            }
            self.y.push(row);
            self.served_ub.push(row_ub);
            let mut row_ys = Vec::new();
            for ub in row_s {
                row_ys.push(ub.map(|ub| {
                    let d = self.int(variable().min(0).max(ub));
                    self.vars.add(d)
                }));
            }
            self.ys.push(row_ys);
        }
    }

    /// Most nodes pool `pi` may use: its nodes, unbounded where the program adds nodes
    /// ([`Goal::Extend`]; a count of nodes bounded by the pool's own would cap the addition's
    /// rows: the `spread: gpu` rows on MIG then asked for more nodes than a plan needs).
    fn node_cap(&self, pi: usize) -> f64 {
        if matches!(self.goal, Goal::Extend { .. }) {
            f64::INFINITY
        } else {
            f64::from(self.problem.pools[pi].max_nodes)
        }
    }

    /// Per pool: GPUs per layout, whole, time-sliced per k, combined-compute time-sliced per
    /// k, MIG time-slicing per (profile, k) and layout; node classes; nodes.
    fn pool_vars(&mut self) {
        for pi in 0..self.problem.pools.len() {
            let p = &self.problem.pools[pi];
            let cap = p.capacity_gpus() as f64;
            let unbounded = matches!(self.goal, Goal::Extend { .. });
            let gcap = if unbounded { f64::INFINITY } else { cap };
            let ncap = self.node_cap(pi);
            let kinds: Vec<Kind> = self
                .cols
                .iter()
                .flat_map(|m| m.options.iter())
                .filter(|o| o.pool == pi)
                .map(|o| o.kind)
                .collect();
            let any_mig = kinds.iter().any(|k| matches!(k, Kind::Mig(_)));
            let n_layouts = p.layouts.len();
            let count = |s: &mut Self, max: f64| {
                let d = s.int(variable().min(0).max(max));
                s.vars.add(d)
            };
            let nodes = |s: &mut Self, max: f64| s.add_whole(variable().min(0).max(max));
            let g: Vec<Variable> =
                if any_mig { (0..n_layouts).map(|_| count(self, gcap)).collect() } else { Vec::new() };
            let any_whole = kinds.iter().any(|k| matches!(k, Kind::Whole(_)));
            let w = any_whole.then(|| count(self, gcap));
            let zw = any_whole.then(|| nodes(self, ncap));
            let mut t = BTreeMap::new();
            let mut zt = BTreeMap::new();
            for &kind in &kinds {
                if let Kind::TimeSliced(k) = kind
                    && !t.contains_key(&k)
                {
                    t.insert(k, count(self, gcap));
                    zt.insert(k, nodes(self, ncap));
                }
            }
            let mut ts: BTreeMap<Share, ()> = BTreeMap::new();
            for (ci, col) in self.cols.iter().enumerate() {
                for (oi, o) in col.options.iter().enumerate() {
                    if let (Kind::TimeSliced(k), Some(_)) = (o.kind, self.ys[ci][oi])
                        && o.pool == pi
                        && !ts.contains_key(&k)
                    {
                        ts.insert(k, ());
                    }
                }
            }
            let ts: BTreeMap<Share, (Variable, Variable)> =
                ts.into_keys().map(|k| (k, (count(self, gcap), nodes(self, ncap)))).collect();
            let mut tm = BTreeMap::new();
            let mut zm = BTreeMap::new();
            for &kind in &kinds {
                if let Kind::MigTs(q, k) = kind
                    && !tm.contains_key(&(q, k))
                {
                    let layouts: Vec<(usize, Variable)> =
                        crate::plan::problem::mig_ts_layouts(self.problem, pi, q, self.problem.small)
                            .into_iter()
                            .map(|l| (l, count(self, gcap)))
                            .collect();
                    tm.insert((q, k), layouts);
                    zm.insert((q, k), nodes(self, ncap));
                }
            }
            let extra = unbounded.then(|| {
                let d = self.int(variable().min(0));
                self.vars.add(d)
            });
            let min_nodes = f64::from(self.problem.pools[pi].min_nodes);
            let u = self.add_whole(variable().min(min_nodes).max(ncap));
            self.pv.push(PoolVars { g, w, t, zw, zt, ts, tm, zm, u, extra });
        }
    }

    /// Pinned replica counts (LP rounding) of single-model columns.
    fn pin(&mut self, pins: &Pins) {
        for (ci, col) in self.cols.iter().enumerate() {
            if let [m] = col.members[..]
                && pins.keys().any(|k| k.0 == m)
            {
                for (oi, o) in col.options.iter().enumerate() {
                    let n = f64::from(pins.get(&(m, o.pool, o.kind)).copied().unwrap_or(0));
                    let yv = self.served(ci, oi);
                    self.cons.push(constraint!(yv == n));
                }
            }
        }
    }

    /// On each [`Program::held`] pool, every column's replicas per option fixed at the sum of
    /// its members' in [`Program::start`] (zero where it has none): unlike [`Program::pin`],
    /// which fixes single-model columns in every pool, this fixes every column in some pools.
    fn hold(&mut self) {
        for (ci, col) in self.cols.iter().enumerate() {
            for (oi, o) in col.options.iter().enumerate() {
                if !self.held.contains(&o.pool) {
                    continue;
                }
                let n: u32 = col.members.iter().filter_map(|&m| self.start.get(&(m, o.pool, o.kind))).sum();
                let yv = self.served(ci, oi);
                self.cons.push(constraint!(yv == f64::from(n)));
            }
        }
    }

    /// Capped replicas per pool ([`Caps`]) of single-model columns.
    fn cap(&mut self, caps: &Caps) {
        for (&(m, pi), &n) in caps {
            let Some(ci) = self.cols.iter().position(|c| c.members[..] == [m]) else { continue };
            let mut sum = Expression::from(0.0);
            for (oi, o) in self.cols[ci].options.iter().enumerate() {
                if o.pool == pi {
                    sum += self.served(ci, oi);
                }
            }
            self.cons.push(constraint!(sum <= f64::from(n)));
        }
    }

    /// Replicas of column `ci` on option `oi`, on either kind of node.
    fn served(&self, ci: usize, oi: usize) -> Expression {
        let mut e = Expression::from(self.y[ci][oi]);
        if let Some(s) = self.ys[ci][oi] {
            e += s;
        }
        e
    }

    /// `Σ coef(kind) · y` over the options of pool `pi` (replicas on ordinary nodes only).
    fn replicas_in(&self, pi: usize, coef: impl Fn(Kind) -> Option<f64>) -> (Expression, bool) {
        let mut e = Expression::from(0.0);
        let mut any = false;
        for (ci, col) in self.cols.iter().enumerate() {
            for (oi, o) in col.options.iter().enumerate() {
                if o.pool == pi
                    && let Some(c) = coef(o.kind)
                {
                    e += c * self.y[ci][oi];
                    any = true;
                }
            }
        }
        (e, any)
    }

    /// Demand: fixed counts, or the rate and the minimum replicas; and the tie-break.
    fn demand_rows(&mut self) {
        for ci in 0..self.cols.len() {
            let col = &self.cols[ci];
            if matches!(self.goal, Goal::Plan { .. }) {
                for (oi, o) in col.options.iter().enumerate() {
                    // Exclusive devices first; among shared ones a MIG time-slice (memory
                    // isolated from other instances), then an MPS share (the pool opted in:
                    // its clients' threads and memory are capped) before a time-slice.
                    let shared = match o.kind {
                        Kind::TimeSliced(Share { mps: true, .. }) => 0.9,
                        Kind::TimeSliced(_) => 1.0,
                        Kind::MigTs(..) => 0.5,
                        _ => 0.0,
                    };
                    self.objective += self.weights.tie * (o.size + shared) * self.served(ci, oi);
                    self.levels += self.weights.tie * (o.size + shared) * self.served_ub[ci][oi];
                }
            }
            let mut sum = Expression::from(0.0);
            for oi in 0..col.options.len() {
                sum += self.served(ci, oi);
            }
            match col.need {
                Need::Replicas(n) => self.cons.push(constraint!(sum == f64::from(n))),
                Need::Rate { rps, min_replicas } => {
                    let mut cover = Expression::from(0.0);
                    for (oi, o) in col.options.iter().enumerate() {
                        cover += o.rps.unwrap_or(0.0) * self.y[ci][oi];
                    }
                    self.cons.push(constraint!(cover >= rps));
                    self.cons.push(constraint!(sum >= f64::from(min_replicas)));
                }
            }
        }
    }

    /// Supply and node classes of pool `pi`; returns its GPUs.
    fn pool_rows(&mut self, pi: usize) -> Expression {
        let p = &self.problem.pools[pi];
        let v = &self.pv[pi];
        let gpn = f64::from(p.gpn());
        let mut gpus = Expression::from(0.0);
        for g in v.g.iter().copied().chain(v.w).chain(v.t.values().copied()) {
            gpus += g;
        }
        let mut cons = self.mig_supply_rows(pi);
        self.whole_rows(pi, &mut cons);
        for (&k, &t) in &v.t {
            let (demand, _) = self.replicas_in(pi, |x| (x == Kind::TimeSliced(k)).then_some(1.0));
            cons.push(constraint!(demand <= f64::from(k.k) * t));
            if let Some(&z) = v.zt.get(&k) {
                cons.push(constraint!(t <= gpn * z));
            }
        }
        self.combined_ts_rows(pi, &mut cons, &mut gpus);
        let mig_ts_nodes = self.mig_ts_rows(pi, &mut cons);
        let mut classes = Expression::from(0.0);
        if let Some(zw) = v.zw {
            classes += zw;
        }
        for &z in v.zt.values() {
            classes += z;
        }
        for &(_, z) in v.ts.values() {
            classes += z;
        }
        classes += mig_ts_nodes.clone();
        cons.push(constraint!(classes <= v.u));
        cons.push(constraint!(gpus.clone() <= gpn * v.u - gpn * mig_ts_nodes));
        for tmv in v.mig_ts_gpus() {
            gpus += tmv;
        }
        if let Some(e) = v.extra {
            cons.push(constraint!(v.u <= f64::from(p.max_nodes) + e));
            self.objective += gpn * p.weight * e;
        }
        self.cons.extend(cons);
        gpus
    }

    /// MIG supply per profile of pool `pi`: exclusive instances of the layouts, and of the MIG
    /// time-slicing GPUs' other profiles.
    fn mig_supply_rows(&self, pi: usize) -> Vec<Constraint> {
        let p = &self.problem.pools[pi];
        let v = &self.pv[pi];
        let mut cons = Vec::new();
        if v.g.is_empty() {
            return cons;
        }
        for q in 0..p.profiles.len() {
            let (demand, any) = self.replicas_in(pi, |k| (k == Kind::Mig(q)).then_some(1.0));
            if any {
                let mut supply = Expression::from(0.0);
                for (l, layout) in p.layouts.iter().enumerate() {
                    let c = layout.counts.get(q).copied().unwrap_or(0);
                    if c > 0 {
                        supply += f64::from(c) * v.g[l];
                    }
                }
                for (&(shared, _), layouts) in v.tm.iter().filter(|_| self.problem.small) {
                    for &(l, var) in layouts.iter().filter(|_| shared != q) {
                        let c = p.layouts[l].counts.get(q).copied().unwrap_or(0);
                        if c > 0 {
                            supply += f64::from(c) * var;
                        }
                    }
                }
                cons.push(constraint!(demand <= supply));
            }
        }
        cons
    }

    /// Whole GPUs of pool `pi` and multi-GPU packing on its exclusive-whole nodes.
    fn whole_rows(&self, pi: usize, cons: &mut Vec<Constraint>) {
        let p = &self.problem.pools[pi];
        let v = &self.pv[pi];
        let gpn = f64::from(p.gpn());
        let (Some(w), Some(zw)) = (v.w, v.zw) else { return };
        let (demand, _) = self.replicas_in(pi, |k| match k {
            Kind::Whole(n) => Some(f64::from(n)),
            _ => None,
        });
        let mut sizes: Vec<u32> = Vec::new();
        for col in &self.cols {
            for o in &col.options {
                if o.pool == pi
                    && let Kind::Whole(n) = o.kind
                    && n > 1
                    && !sizes.contains(&n)
                {
                    sizes.push(n);
                }
            }
        }
        cons.push(constraint!(demand <= w));
        cons.push(constraint!(w <= gpn * zw));
        for &n in &sizes {
            let (big_ones, _) =
                self.replicas_in(pi, |k| matches!(k, Kind::Whole(s) if s >= n).then_some(1.0));
            cons.push(constraint!(big_ones <= f64::from(p.gpn() / n) * zw));
        }
    }

    /// Combined-compute time-slicing nodes of pool `pi`: slots, and their tenants' compute
    /// within the efficiency per node (a sufficient form of "any k together": all of them
    /// together). Their GPUs are added to `gpus`.
    fn combined_ts_rows(&self, pi: usize, cons: &mut Vec<Constraint>, gpus: &mut Expression) {
        let gpn = f64::from(self.problem.pools[pi].gpn());
        let eff = self.problem.spec.policy.time_slicing_efficiency;
        for (&k, &(t, z)) in &self.pv[pi].ts {
            let (mut slots, mut compute) = (Expression::from(0.0), Expression::from(0.0));
            for (ci, col) in self.cols.iter().enumerate() {
                for (oi, o) in col.options.iter().enumerate() {
                    if let Some(s) = self.ys[ci][oi]
                        && o.pool == pi
                        && o.kind == Kind::TimeSliced(k)
                    {
                        slots += s;
                        compute += col.compute * s;
                    }
                }
            }
            cons.push(constraint!(slots <= f64::from(k.k) * t));
            cons.push(constraint!(t <= gpn * z));
            // Each such node's budget is real only with a GPU on it.
            cons.push(constraint!(z <= t));
            cons.push(constraint!(compute <= eff * z));
            *gpus += t;
        }
    }

    /// MIG time-slicing of pool `pi`: slots per profile and k, and its nodes, which hold only
    /// their own GPUs; returns the count of those nodes.
    fn mig_ts_rows(&self, pi: usize, cons: &mut Vec<Constraint>) -> Expression {
        let p = &self.problem.pools[pi];
        let gpn = f64::from(p.gpn());
        let v = &self.pv[pi];
        let mut mig_ts_nodes = Expression::from(0.0);
        for (&(q, k), layouts) in &v.tm {
            let (demand, _) = self.replicas_in(pi, |x| (x == Kind::MigTs(q, k)).then_some(1.0));
            let mut slots = Expression::from(0.0);
            let mut on_nodes = Expression::from(0.0);
            for &(l, var) in layouts {
                let c = p.layouts[l].counts.get(q).copied().unwrap_or(0);
                slots += f64::from(k) * f64::from(c) * var;
                on_nodes += var;
            }
            cons.push(constraint!(demand <= slots));
            if let Some(&z) = v.zm.get(&(q, k)) {
                cons.push(constraint!(on_nodes <= gpn * z));
                mig_ts_nodes += z;
            }
        }
        mig_ts_nodes
    }

    /// Spread (necessary conditions) of the single-model columns in pool `pi`.
    fn spread_rows(&mut self, pi: usize) {
        let mut cons: Vec<Constraint> = self.mig_spread_gpu_rows(pi);
        // Per `spread: gpu` model, its MIG options here, for the rows of several profiles.
        let mut pending: Vec<Vec<(usize, Variable)>> = Vec::new();
        let v = &self.pv[pi];
        let p = &self.problem.pools[pi];
        for (mi, mc) in self.cols.iter().enumerate() {
            let in_pool: Vec<usize> = (0..mc.options.len()).filter(|&oi| mc.options[oi].pool == pi).collect();
            if in_pool.is_empty() || mc.spread == Spread::None {
                continue;
            }
            // Distinct GPUs (`gpu`) or nodes (`node`, which are distinct GPUs too).
            let by_node = mc.spread == Spread::Node;
            let mut all = Expression::from(0.0);
            let mut mig = Expression::from(0.0);
            let mut mig_opts: Vec<(usize, Variable)> = Vec::new();
            for &oi in &in_pool {
                let yv = self.y[mi][oi];
                all += yv;
                // Time-sliced (whole or MIG): at most one replica per node of that class, as
                // the device plugin picks the GPU behind a shared resource, and at most one per
                // such GPU. Whole GPUs: one per node under `node`. Row order (GPUs then nodes
                // for `gpu`, nodes then GPUs for `node`) is kept as it was: it steers HiGHS, and
                // swapping it made the 1,000-GPU benchmark fleet three times slower.
                let ordered = |gpus: Option<Expression>, nodes: Option<Expression>| {
                    if by_node { [nodes, gpus] } else { [gpus, nodes] }
                };
                let caps: [Option<Expression>; 2] = match mc.options[oi].kind {
                    Kind::Mig(q) => {
                        mig += yv;
                        mig_opts.push((q, yv));
                        [None, None]
                    }
                    Kind::TimeSliced(k) => {
                        ordered(v.t.get(&k).map(|&x| x.into()), v.zt.get(&k).map(|&x| x.into()))
                    }
                    Kind::MigTs(q, k) => ordered(
                        v.tm.get(&(q, k)).map(|ls| ls.iter().map(|&(_, x)| Expression::from(x)).sum()),
                        v.zm.get(&(q, k)).map(|&x| x.into()),
                    ),
                    Kind::Whole(_) => [if by_node { v.zw.map(Into::into) } else { None }, None],
                };
                for cap in caps.into_iter().flatten() {
                    cons.push(constraint!(yv <= cap));
                }
            }
            if by_node {
                cons.push(constraint!(all <= v.u));
                cons.extend(self.mig_spread_node_row(pi, &mig, mig_opts.is_empty()));
            }
            if !mig_opts.is_empty() {
                let mut mig_gpus = Expression::from(0.0);
                for &g in &v.g {
                    mig_gpus += g;
                }
                cons.push(constraint!(mig <= mig_gpus));
                cons.extend(distinct_gpu_cuts(&p.layouts, &v.g, &mig_opts, !self.large));
                if !by_node {
                    pending.push(mig_opts);
                }
            }
        }
        for mig_opts in pending {
            cons.extend(self.mixed_profile_rows(pi, &mig_opts));
        }
        self.cons.extend(cons);
    }

    /// `spread: gpu` on MIG for one model whose replicas in pool `pi` may use several profiles
    /// (`opts`: its (profile, replicas) there): two of its replicas on one node may share a GPU
    /// when some GPU of the node holds an instance of each one's profile, so a node that hosts
    /// it on two or more profiles of a set S holds no GPU whose layout has every profile of S.
    /// With `x_q` the nodes where it has a replica on `q` (at most `gpn` replicas each, one per
    /// GPU) and `B_S` the GPUs whose layout has all of S: `Σ_S x_q ≤ u + (|S| − 1)·(u − B_S/gpn)`
    /// (a node hosts one profile of S, or several on a node without such a GPU, of which there
    /// are at most `u − B_S/gpn`). Necessary only, like the rows of one profile: they keep the
    /// optimiser from giving such a model instances of two or three profiles on GPUs that hold
    /// one of each on every node (issue 23: "mixed" seed 1 at 100 GPUs of six types, 21
    /// replicas that found no place). Every set of two or more profiles up to
    /// [`MIXED_MAX_PROFILES`], else pairs and the whole set. With microlp only on small
    /// problems, as the rows of one profile. Written in the bounds' relaxations always, in the
    /// integer program only for [`solve_with_profile_rows`] (the cascade's re-solve when the
    /// plain program's counts did not lay out: on the 128-GPU stress fleet "mixed", seed 0,
    /// the counts of the program with them laid out worse, 93 GPUs against 90).
    fn mixed_profile_rows(&mut self, pi: usize, opts: &[(usize, Variable)]) -> Vec<Constraint> {
        let mut profiles: Vec<usize> = opts.iter().map(|&(q, _)| q).collect();
        profiles.sort_unstable();
        profiles.dedup();
        if !self.profile_rows || profiles.len() < 2 || !(self.every_row || has_profile_rows(self.problem)) {
            return Vec::new();
        }
        let p = &self.problem.pools[pi];
        let gpn = f64::from(p.gpn());
        let u = self.pv[pi].u;
        let mut cons = Vec::new();
        let mut x: Vec<Variable> = Vec::new();
        for &q in &profiles {
            let xq = self.add_whole(variable().min(0).max(self.node_cap(pi)));
            let mut ys = Expression::from(0.0);
            for &(_, y) in opts.iter().filter(|o| o.0 == q) {
                ys += y;
            }
            cons.push(constraint!(ys <= gpn * xq));
            cons.push(constraint!(xq <= u));
            x.push(xq);
        }
        let n = profiles.len();
        let sets: Vec<u32> = if n <= MIXED_MAX_PROFILES {
            (1..(1u32 << n)).filter(|s| s.count_ones() >= 2).collect()
        } else {
            let mut s: Vec<u32> =
                (0..n).flat_map(|i| (i + 1..n).map(move |j| (1u32 << i) | (1 << j))).collect();
            s.push(u32::MAX >> (32 - n.min(32)));
            s
        };
        for set in sets {
            let in_set = |i: usize| i < 32 && set & (1 << i) != 0;
            let mut holders = Expression::from(0.0);
            let mut any = false;
            for (l, &g) in p.layouts.iter().zip(&self.pv[pi].g) {
                let all =
                    (0..n).filter(|&i| in_set(i)).all(|i| l.counts.get(profiles[i]).is_some_and(|&c| c > 0));
                if all {
                    holders += g;
                    any = true;
                }
            }
            if !any {
                continue;
            }
            let size = f64::from(set.count_ones());
            let mut lhs = Expression::from(0.0);
            for (i, &xq) in x.iter().enumerate() {
                if in_set(i) {
                    lhs += xq;
                }
            }
            cons.push(constraint!(gpn * lhs <= gpn * size * u - (size - 1.0) * holders));
        }
        cons
    }

    /// `spread: node` on exclusive MIG instances of pool `pi` (`mig`: the model's replicas
    /// there): outside small problems, nodes that time-slice a MIG profile hold no exclusive
    /// instances, so such replicas are at most the nodes of the other classes, `u − Σ zm`.
    /// Necessary only (as the other spread rows).
    fn mig_spread_node_row(&self, pi: usize, mig: &Expression, none: bool) -> Option<Constraint> {
        let v = &self.pv[pi];
        if none || self.problem.small || v.zm.is_empty() {
            return None;
        }
        let mut nodes = Expression::from(v.u);
        for &z in v.zm.values() {
            nodes -= z;
        }
        Some(constraint!(mig.clone() <= nodes))
    }

    /// `spread: gpu` on MIG inside a node (the device plugin picks the instance): on a node
    /// with a GPU that holds two or more `q` instances, a model has at most one replica on `q`
    /// (two would be allowed onto that GPU); elsewhere one per GPU with a `q` instance, which
    /// then has exactly one. With `N` the nodes holding such a GPU (`B` of them in the pool),
    /// `G1` the GPUs with exactly one `q` instance and `u` the nodes: replicas on `q` ≤ `N + G1`
    /// and ≤ `N + gpn·(u − N)` (the GPUs of the other nodes), where `B/gpn ≤ N ≤ min(B, u)`.
    /// `N` is one variable per profile, integer in the integer program. Necessary only: the
    /// decomposition decides which node gets which GPU. With microlp, `N` integer only where
    /// [`Program::spread_rows`] says (small problems, the smallest addition of nodes,
    /// [`solve_every_row`]): on the 100-GPU benchmark fleet its branch and bound found no
    /// solution within its node limit with these rows (first fit's 69 GPUs instead of 56);
    /// continuous where [`Program::relaxed_spread_rows`] says.
    fn mig_spread_gpu_rows(&mut self, pi: usize) -> Vec<Constraint> {
        if !self.spread_rows && !self.relaxed_spread_rows {
            return Vec::new();
        }
        if self.trimmed {
            return self.trimmed_spread_rows(pi);
        }
        let whole = self.spread_rows;
        let p = &self.problem.pools[pi];
        let gpn = f64::from(p.gpn());
        let mut per_q: BTreeMap<usize, Vec<Variable>> = BTreeMap::new();
        for (ci, col) in self.cols.iter().enumerate() {
            if col.spread != Spread::Gpu {
                continue;
            }
            for (oi, o) in col.options.iter().enumerate() {
                if let (true, Kind::Mig(q)) = (o.pool == pi, o.kind) {
                    per_q.entry(q).or_default().push(self.y[ci][oi]);
                }
            }
        }
        let mut cons = Vec::new();
        for (q, ys) in per_q {
            let (mut one, mut more) = (Expression::from(0.0), Expression::from(0.0));
            for (l, &g) in p.layouts.iter().zip(&self.pv[pi].g) {
                match l.counts.get(q).copied().unwrap_or(0) {
                    0 => {}
                    1 => one += g,
                    _ => more += g,
                }
            }
            let nodes = variable().min(0).max(self.node_cap(pi));
            let n = if whole { self.add_whole(nodes) } else { self.vars.add(nodes) };
            let u = self.pv[pi].u;
            cons.push(constraint!(n <= u));
            cons.push(constraint!(n <= more.clone()));
            cons.push(constraint!(gpn * n >= more));
            for &y in &ys {
                cons.push(constraint!(y <= n + one.clone()));
                cons.push(constraint!(y <= gpn * u - (gpn - 1.0) * n));
            }
            cons.extend(spread_group_cuts(&ys, n, &one, u, gpn));
        }
        cons
    }

    /// `spread: gpu` on MIG on the instances replicas use ([`NodeRows::Trimmed`]):
    /// a plan trims the instances no replica uses (`assign::trim`), so a candidate layout with
    /// two `q` instances may run with one, and the rows of [`Program::mig_spread_gpu_rows`]
    /// (written on the candidate layouts) could cut a valid plan. On node `pi` with `G` GPUs
    /// whose layout has a `q` instance and `U` replicas of every model on `q`: where no GPU
    /// runs two used `q` instances, `U ≤ G`; where one does (`b = 1`), every `spread: gpu`
    /// model has at most one replica on `q` (the device plugin could hand two of them that
    /// GPU's instances): `U − G ≤ M·b`, `y ≤ 1 + M·(1 − b)` (`M`: the most `q` instances the
    /// node holds). Necessary for every plan: each GPU's trimmed layout lies inside a candidate
    /// (maximal) layout, which then counts among the `G`. The rows of several profiles
    /// ([`Program::mixed_profile_rows`]) are not written here: they too read the candidate
    /// layouts' instances.
    fn trimmed_spread_rows(&mut self, pi: usize) -> Vec<Constraint> {
        let p = &self.problem.pools[pi];
        let mut spread: BTreeMap<usize, Vec<Variable>> = BTreeMap::new();
        let mut used: BTreeMap<usize, Expression> = BTreeMap::new();
        for (ci, col) in self.cols.iter().enumerate() {
            for (oi, o) in col.options.iter().enumerate() {
                if let (true, Kind::Mig(q)) = (o.pool == pi, o.kind) {
                    *used.entry(q).or_default() += self.y[ci][oi];
                    if col.spread == Spread::Gpu {
                        spread.entry(q).or_default().push(self.y[ci][oi]);
                    }
                }
            }
        }
        let mut cons = Vec::new();
        for (q, ys) in spread {
            let mut holders = Expression::from(0.0);
            let mut most = 0.0f64;
            for (l, &g) in p.layouts.iter().zip(&self.pv[pi].g) {
                let c = l.counts.get(q).copied().unwrap_or(0);
                if c > 0 {
                    holders += g;
                    most = most.max(f64::from(c));
                }
            }
            let big = most * f64::from(p.gpn()) * f64::from(p.max_nodes.max(1));
            let b = self.vars.add(self.int(variable().min(0).max(1)));
            let u = used.remove(&q).unwrap_or_default();
            cons.push(constraint!(u - holders <= big * b));
            for y in ys {
                cons.push(constraint!(y <= 1.0 + big * (1.0 - b)));
            }
        }
        cons
    }

    /// The objective's levels for pool `pi` whose GPUs are `gpus`.
    fn pool_objective(&mut self, pi: usize, gpus: Expression) {
        let p = &self.problem.pools[pi];
        match self.goal {
            Goal::Bound | Goal::CostBound { .. } => {}
            Goal::Extend { .. } => {
                self.objective += 1e-3 * gpus;
            }
            Goal::Plan { .. } => {
                let v = &self.pv[pi];
                self.objective += 1000.0 * p.weight * gpus;
                self.objective += self.weights.node * v.u;
                self.levels += self.weights.node * f64::from(p.max_nodes);
                // Distinct configs in use. The pure-Rust fallback's branch and bound does not
                // cope with these big-M binaries; it plans without this objective level
                // (documented in docs/planner.md).
                let big = p.capacity_gpus() as f64;
                if self.configs && !self.large {
                    let configs: Vec<Variable> =
                        v.g.iter()
                            .copied()
                            .chain(v.w)
                            .chain(v.t.values().copied())
                            .chain(v.mig_ts_gpus())
                            .chain(v.ts.values().map(|x| x.0))
                            .collect();
                    for x in configs {
                        let b = self.vars.add(variable().binary());
                        self.cons.push(constraint!(x <= big * b));
                        self.objective += b;
                        self.levels += 1.0;
                    }
                }
                // Stability: GPUs whose current MIG layout is no longer planned.
                let v = &self.pv[pi];
                if !v.g.is_empty() {
                    let mut current: BTreeMap<usize, u32> = BTreeMap::new();
                    for node in &p.spec.current {
                        for names in node.gpus.iter().filter(|n| !n.is_empty()) {
                            if let Some(l) = crate::plan::layouts::from_names(p.gpu, &p.profiles, names)
                                .and_then(|l| p.layouts.iter().position(|x| x.counts == l.counts))
                            {
                                *current.entry(l).or_insert(0) += 1;
                            }
                        }
                    }
                    let gs: Vec<Variable> = v.g.clone();
                    for (l, c) in current {
                        let d = self.vars.add(variable().min(0));
                        let g = gs[l];
                        self.cons.push(constraint!(d >= f64::from(c) - g));
                        self.objective += self.weights.stability * d;
                        self.levels += self.weights.stability * f64::from(c);
                    }
                }
            }
        }
    }

    /// The goal's own rows and objective: the cost cap, the GPU floor, the bound objectives.
    fn goal_rows(&mut self, bound_gpus: Expression, cost_expr: Expression) {
        if let Goal::Plan { cost_bound: Some(b), .. } = self.goal {
            self.cons.push(constraint!(cost_expr.clone() <= b + 1e-6));
        }
        // The rounded-up LP bound as a cut: the root relaxation then proves a plan with that
        // many GPUs optimal at once, instead of branching to close a fractional gap.
        if let Goal::Plan { gpu_floor: Some(f), .. } | Goal::CostBound { gpu_floor: Some(f) } = self.goal
            && f > 0.0
        {
            self.cons.push(constraint!(bound_gpus.clone() >= f));
        }
        match self.goal {
            Goal::Bound => self.objective = bound_gpus,
            Goal::CostBound { .. } => self.objective = cost_expr,
            Goal::Plan { .. } | Goal::Extend { .. } => {}
        }
    }

    /// Whether the program writes rows on its candidates' instances (the pooled `spread: gpu`
    /// rows on MIG, those of several profiles) that a plan trimming a GPU may break
    /// ([`problem::trims_matter`]): then it proves nothing about every plan.
    fn cuts_trimmed_plans(&self) -> bool {
        ((self.spread_rows && !self.trimmed) || self.relaxed_spread_rows || self.profile_rows)
            && problem::trims_matter(self.problem)
    }

    /// Solves and reads the counts back; where [`Program::cuts_trimmed_plans`], a plan's
    /// result says so ([`MilpResult::cuts_trims`]: its proofs steer the cascade but bound
    /// nothing), and the full pooled program's infeasibility stands only where the widened
    /// program's does.
    fn run_and_read(self) -> Result<MilpResult, MilpError> {
        let cuts = matches!(self.goal, Goal::Plan { .. }) && self.cuts_trimmed_plans();
        if !cuts {
            return self.solve_and_read();
        }
        // Only the full pooled program's infeasibility says that no plan exists (the cascade
        // then explains it); a pinned, capped, held or per-node program's only that it found
        // nothing, as before.
        let full = !self.imposed && !self.budget && self.held.is_empty() && self.twins.is_empty();
        let recipe = full.then_some(Recipe {
            problem: self.problem,
            goal: self.goal,
            work: self.work,
            profile_rows: self.profile_rows,
            spread_rows: self.spread_rows,
            relaxed_spread_rows: self.relaxed_spread_rows,
            every_row: self.every_row,
        });
        match self.solve_and_read() {
            Ok(mut r) => {
                r.cuts_trims = true;
                Ok(r)
            }
            Err(MilpError::Infeasible) if recipe.is_some_and(|r| !r.widened_infeasible()) => Err(MilpError::Solver(
                "the program's spread rows on its candidate layouts cut every plan, and a plan that trims a GPU may still exist".to_owned(),
            )),
            Err(e) => Err(e),
        }
    }

    /// Solves and reads the counts back.
    fn solve_and_read(self) -> Result<MilpResult, MilpError> {
        let Program {
            problem,
            goal,
            cols,
            large,
            integer,
            vars,
            cons,
            objective,
            y,
            ys,
            pv,
            work,
            nodes,
            levels,
            exact,
            budget,
            start,
            ..
        } = self;
        // Size of the objective in GPUs, so that a relative gap can be kept below one GPU.
        // The objective is at most 1000 × the cost bound (+1 for the lower levels).
        let scale = match goal {
            Goal::Plan { cost_bound: Some(b), .. } => b + 1.0,
            Goal::Plan { .. } => {
                problem.pools.iter().map(|p| p.capacity_gpus() as f64 * p.weight).sum::<f64>() + 1.0
            }
            Goal::Bound | Goal::CostBound { .. } | Goal::Extend { .. } => 0.0,
        };
        let asked = if exact { 0.0 } else { scale };
        let start = start_values(problem, &cols, &y, &ys, &start);
        let search = Search { large, budget, work, nodes, start: &start };
        let Outcome { values, optimal, gap, dual } = run(vars, objective, cons, asked, &search)?;
        // Proven only for the program as solved (pinned programs prove nothing for the full
        // model; the caller knows). A gap below half a GPU's weight proves the GPU count, which
        // is the cost only when every GPU weighs the same (unpriced); on priced pools a zero
        // gap proves it, and so does the dual bound below.
        let widened = gap > relative_gap(scale);
        let optimal = optimal && !widened && (problem.unit_price.is_none() || gap == 0.0);
        let val = |v: Variable| values.get(&v).copied().unwrap_or(0.0);
        let mut res = MilpResult { optimal, ..Default::default() };
        for (p, v) in problem.pools.iter().zip(&pv) {
            let gpus = v.plain_gpus().chain(v.mig_ts_gpus()).map(val).sum::<f64>();
            res.objective += gpus;
            res.cost += p.weight * gpus;
            res.counts.push(v.counts(p, &val, round_count));
            if !integer {
                res.counts_up.push(v.counts(p, &val, ceil_count));
            }
            // A relaxation's fractional nodes round up (the confirmation in `infeasible` grows
            // them).
            res.extra_nodes
                .push(v.extra.map_or(0, |e| if integer { round_count(val(e)) } else { ceil_count(val(e)) }));
        }
        for (ci, col) in cols.iter().enumerate() {
            let served = |oi: usize| val(y[ci][oi]) + ys[ci][oi].map_or(0.0, val);
            if let [m] = col.members[..] {
                for (oi, o) in col.options.iter().enumerate() {
                    *res.fractional.entry((m, o.pool, o.kind)).or_insert(0.0) += served(oi);
                }
            }
            let counts: Vec<u32> = (0..col.options.len())
                .map(|oi| {
                    let n = round_count(val(y[ci][oi])) + ys[ci][oi].map_or(0, |s| round_count(val(s)));
                    u32::try_from(n).unwrap_or(u32::MAX)
                })
                .collect();
            for (mi, oi, n) in disaggregate(problem, col, &counts) {
                if n > 0
                    && let Some(o) = col.options.get(oi)
                {
                    *res.replicas.entry((mi, o.pool, o.kind)).or_insert(0) += n;
                }
            }
        }
        if matches!(goal, Goal::Plan { .. }) && integer {
            res.floor = dual.map(|d| cost_floor(d, levels));
            res.optimal |= res.floor.is_some_and(|f| proves(f, res.cost, cost_step(problem)));
        }
        Ok(res)
    }
}

/// Models of one profile and pool up to which [`spread_group_cuts`] writes a row for every
/// set of two or more of them (above, one row for all of them).
const GROUP_MAX_MODELS: usize = 4;

/// `spread: gpu` on MIG for several models on profile `q` of one pool together
/// ([`Program::mig_spread_gpu_rows`]: `n` the nodes holding a GPU with two or more `q`
/// instances, `one` the GPUs with exactly one, `u` the nodes): on each of those `n` nodes every
/// model has at most one replica, elsewhere each GPU holds one `q` instance, so for a set S of
/// the models, `Σ_S y ≤ |S|·n + one` and `≤ |S|·n + gpn·(u − n)`. Necessary only, and
/// stronger than the rows per model when the models compete for the GPUs with one instance
/// (issue 23: two such models with nine replicas on counts whose nodes held eight).
fn spread_group_cuts(
    ys: &[Variable],
    n: Variable,
    one: &Expression,
    u: Variable,
    gpn: f64,
) -> Vec<Constraint> {
    if ys.len() < 2 {
        return Vec::new();
    }
    let sets: Vec<u32> = if ys.len() <= GROUP_MAX_MODELS {
        (1..(1u32 << ys.len())).filter(|s| s.count_ones() >= 2).collect()
    } else {
        vec![u32::MAX]
    };
    let mut cons = Vec::new();
    for set in sets {
        let mut lhs = Expression::from(0.0);
        let mut size = 0.0;
        for (i, &y) in ys.iter().enumerate() {
            if i >= 32 || set & (1 << i) != 0 {
                lhs += y;
                size += 1.0;
            }
        }
        cons.push(constraint!(lhs.clone() <= size * n + one.clone()));
        cons.push(constraint!(lhs <= (size - gpn) * n + gpn * u));
    }
    cons
}

/// Profiles of one model's MIG options in a pool up to which [`Program::mixed_profile_rows`]
/// writes a row for every set of two or more of them (above, pairs and the whole set).
const MIXED_MAX_PROFILES: usize = 4;

/// Profiles of one model's MIG options above which [`distinct_gpu_cuts`] keeps only single
/// profiles (2^n subsets would make the program too large). Large programs keep only single
/// profiles too: on the 1,000-GPU benchmark fleet every subset made HiGHS ten times slower.
const HALL_MAX_PROFILES: usize = 8;

/// Hall's condition for one model's MIG replicas that must sit on distinct GPUs (`spread: gpu`,
/// and `spread: node`, whose distinct nodes are distinct GPUs): for every set S of the profiles
/// it uses in the pool, its replicas on S are at most the GPUs whose layout has a profile of S.
/// Per-profile bounds alone let, say, ten GPUs with one `1g` and one `2g` instance each take
/// eighteen replicas. For one model alone these conditions are exact (Hall's theorem). Only
/// the largest S per set of holding layouts is kept: it implies the others.
fn distinct_gpu_cuts(
    layouts: &[crate::plan::layouts::Layout],
    g: &[Variable],
    opts: &[(usize, Variable)],
    all_subsets: bool,
) -> Vec<Constraint> {
    let n = opts.len();
    let subsets: Vec<u32> = if all_subsets && n <= HALL_MAX_PROFILES {
        (1..(1u32 << n)).collect()
    } else {
        (0..n).map(|i| 1u32 << i).collect()
    };
    let mut by_holders: BTreeMap<Vec<usize>, u32> = BTreeMap::new();
    for s in subsets {
        let holders: Vec<usize> = (0..layouts.len().min(g.len()))
            .filter(|&l| {
                opts.iter()
                    .enumerate()
                    .any(|(i, &(q, _))| s & (1 << i) != 0 && layouts[l].counts.get(q).is_some_and(|&c| c > 0))
            })
            .collect();
        *by_holders.entry(holders).or_insert(0) |= s;
    }
    by_holders
        .into_iter()
        .map(|(holders, s)| {
            let mut lhs = Expression::from(0.0);
            for (i, &(_, yv)) in opts.iter().enumerate() {
                if s & (1 << i) != 0 {
                    lhs += yv;
                }
            }
            let mut rhs = Expression::from(0.0);
            for l in holders {
                rhs += g[l];
            }
            constraint!(lhs <= rhs)
        })
        .collect()
}

/// What a solve gives back: the variables' values, whether the solver proved the program
/// optimal (to the gap asked for), that gap, and the solver's dual bound on the objective
/// where it reports one (HiGHS: valid at any stop, a node limit included).
struct Outcome {
    values: HashMap<Variable, f64>,
    optimal: bool,
    gap: f64,
    dual: Option<f64>,
}

/// Solves with the selected backend: every variable's value, whether the solver proved
/// optimality (within the relative gap), that gap and its dual bound ([`Outcome`]).
fn run(
    vars: ProblemVariables,
    objective: Expression,
    cons: Vec<Constraint>,
    scale: f64,
    search: &Search<'_>,
) -> Result<Outcome, MilpError> {
    let Search { large, budget, work, nodes: cap, start } = *search;
    #[cfg(feature = "highs")]
    let nodes = if budget {
        column_budget(vars.len(), PER_NODE_COLUMN_NODES).saturating_mul(u64::from(work))
    } else {
        highs_node_limit(vars.len(), large, work)
    };
    #[cfg(not(feature = "highs"))]
    let nodes = {
        let _ = budget;
        MICROLP_NODE_LIMIT * u64::from(work)
    };
    run_nodes(vars, objective, cons, scale, large, cap.unwrap_or(nodes), start).and_then(Stop::solved)
}

/// How the solver searches a program: whether it is large, whether its node limit is in
/// proportion to its columns ([`Program::budget`]), the multiple of the node limit, and a
/// partial start ([`start_values`]).
#[derive(Clone, Copy)]
struct Search<'s> {
    large: bool,
    budget: bool,
    work: u32,
    nodes: Option<u64>,
    start: &'s [(Variable, f64)],
}

/// The replica variables' values of a plan's counts `start` (per model, pool and kind; empty:
/// no start): per column and option the members' replicas, on light time-slices where they
/// fit, else on combined-compute nodes. Every other variable is left to the solver, which
/// completes the start (HiGHS: a sub-MIP over the rest) or drops it if it meets no row set.
fn start_values(
    problem: &Problem<'_>,
    cols: &[Col<'_>],
    y: &[Vec<Variable>],
    ys: &[Vec<Option<Variable>>],
    start: &Pins,
) -> Vec<(Variable, f64)> {
    let mut out = Vec::new();
    if start.is_empty() {
        return out;
    }
    for (ci, col) in cols.iter().enumerate() {
        for (oi, o) in col.options.iter().enumerate() {
            let n: u32 = col.members.iter().filter_map(|&m| start.get(&(m, o.pool, o.kind))).sum();
            let n = f64::from(n);
            let (Some(&yv), Some(&ysv)) =
                (y.get(ci).and_then(|r| r.get(oi)), ys.get(ci).and_then(|r| r.get(oi)))
            else {
                continue;
            };
            match ysv {
                Some(s) if heavy(problem, o, col.compute) => out.extend([(yv, 0.0), (s, n)]),
                Some(s) => out.extend([(yv, n), (s, 0.0)]),
                None => out.push((yv, n)),
            }
        }
    }
    out
}

/// HiGHS's node limit on a program of `columns` columns: [`HIGHS_NODE_LIMIT`], on a large
/// program at most [`LARGE_COLUMN_NODES`] ÷ `columns` (at least one node); times `work`.
#[cfg(feature = "highs")]
pub(crate) fn highs_node_limit(columns: usize, large: bool, work: u32) -> u64 {
    let nodes = if large {
        column_budget(columns, LARGE_COLUMN_NODES)
    } else {
        u64::try_from(HIGHS_NODE_LIMIT).unwrap_or(u64::MAX)
    };
    nodes.saturating_mul(u64::from(work))
}

/// `budget` ÷ `columns` branch-and-bound nodes, at least one, at most [`HIGHS_NODE_LIMIT`].
#[cfg(feature = "highs")]
pub(crate) fn column_budget(columns: usize, budget: u64) -> u64 {
    let columns = u64::try_from(columns).unwrap_or(u64::MAX).max(1);
    let most = u64::try_from(HIGHS_NODE_LIMIT).unwrap_or(u64::MAX);
    (budget / columns).clamp(1, most)
}

/// A small program's solve with a branch-and-bound node limit of its own (either solver), zero
/// gap: for the decomposition's assignment programs ([`crate::plan::assign`]).
pub(crate) fn run_small(
    vars: ProblemVariables,
    objective: Expression,
    cons: Vec<Constraint>,
    nodes: u64,
) -> Result<HashMap<Variable, f64>, MilpError> {
    run_nodes(vars, objective, cons, 0.0, false, nodes, &[]).and_then(Stop::solved).map(|x| x.values)
}

/// Where a solve with a node limit stopped: with a solution, or without one, where the
/// solver's dual bound on the objective may still hold (the least bound of its open nodes).
enum Stop {
    Solved(Outcome),
    NoSolution {
        /// Why, for the diagnostic a failure would show.
        why: &'static str,
        dual: Option<f64>,
    },
}

impl Stop {
    /// The solution, or the stop without one as a solver failure.
    fn solved(self) -> Result<Outcome, MilpError> {
        match self {
            Stop::Solved(outcome) => Ok(outcome),
            Stop::NoSolution { why, .. } => Err(MilpError::Solver(why.to_owned())),
        }
    }
}

/// [`run`] with the node limit given: where the solver stopped at it without a feasible
/// solution, [`Stop::NoSolution`] with its dual bound ([`Stop::solved`] makes that a failure).
fn run_nodes(
    vars: ProblemVariables,
    objective: Expression,
    cons: Vec<Constraint>,
    scale: f64,
    large: bool,
    nodes: u64,
    start: &[(Variable, f64)],
) -> Result<Stop, MilpError> {
    let handles: Vec<Variable> = vars.iter_variables_with_def().map(|(v, _)| v).collect();
    // Small programs are solved exactly, tie-breaks included, so that both solvers agree on
    // them (the seed's plan is the same bytes with either).
    let gap = if handles.len() <= EXACT_BELOW_VARIABLES {
        0.0
    } else if large && scale > 0.0 {
        relative_gap(scale).max(LARGE_RELATIVE_GAP)
    } else {
        relative_gap(scale)
    };
    let unsolved = vars.minimise(objective);
    #[cfg(feature = "highs")]
    {
        use highs::{HighsModelStatus as S, HighsSolutionStatus};
        // good_lp builds the model (columns in the variables' order, rows); HiGHS is then
        // driven directly, for its dual bound, which good_lp does not report.
        let mut p = unsolved.using(good_lp::solvers::highs::highs);
        for c in cons {
            p.add_constraint(c);
        }
        let mut m = p.try_into_inner().map_err(|e| MilpError::Solver(e.to_string()))?;
        // Deterministic: one thread, fixed seed, no time limit; a node limit (not a clock)
        // bounds the search the same way on every machine. The relative gap keeps the GPU
        // count exact (it is below half a GPU's weight) and lets the search stop before
        // proving the lower objective levels optimal.
        m.set_option("output_flag", false);
        m.set_option("threads", 1);
        m.set_option("random_seed", 0);
        m.set_option("mip_rel_gap", gap);
        m.set_option("mip_abs_gap", 1e-6);
        m.set_option("mip_max_nodes", i32::try_from(nodes).unwrap_or(i32::MAX));
        if !start.is_empty() {
            // A partial start: the columns not given are undefined (infinite), and HiGHS
            // completes the rest with a sub-MIP of `mip_max_start_nodes` nodes before its
            // search, or drops the start. The vector has the model's length, so this cannot
            // fail; were it to, the search would only run without a start.
            let at: HashMap<Variable, usize> = handles.iter().enumerate().map(|(i, &v)| (v, i)).collect();
            let mut cols = vec![f64::INFINITY; handles.len()];
            for &(v, x) in start {
                if let Some(c) = at.get(&v).and_then(|&i| cols.get_mut(i)) {
                    *c = x;
                }
            }
            let _ = m.try_set_solution(Some(&cols), None, None, None);
        }
        let solved =
            m.try_solve().map_err(|e| MilpError::Solver(format!("HiGHS error while solving: {e:?}")))?;
        // An optimal status is HiGHS stopping inside the relative gap asked for, not cut short
        // by a limit: below half a GPU's weight the GPU count is proven optimal; a large
        // program's wider gap proves it only to that gap.
        let optimal = match solved.status() {
            S::Optimal | S::ObjectiveBound | S::ObjectiveTarget => {
                let achieved = solved.mip_gap();
                !(large && achieved.is_finite() && achieved > 0.0)
            }
            S::ReachedTimeLimit
            | S::ReachedSolutionLimit
            | S::ReachedInterrupt
            | S::ReachedIterationLimit
            | S::ReachedMemoryLimit => false,
            S::Infeasible | S::UnboundedOrInfeasible => return Err(MilpError::Infeasible),
            other => return Err(MilpError::Solver(format!("HiGHS stopped with status {other:?}"))),
        };
        let dual = solved.double_info_value(c"mip_dual_bound").ok().filter(|d| d.is_finite());
        if solved.primal_solution_status() != HighsSolutionStatus::Feasible {
            return Ok(Stop::NoSolution { why: "HiGHS found no feasible solution", dual });
        }
        let solution = solved.get_solution();
        let columns = solution.columns();
        let values = handles
            .into_iter()
            .enumerate()
            .map(|(i, v)| (v, columns.get(i).copied().unwrap_or(0.0)))
            .collect();
        Ok(Stop::Solved(Outcome { values, optimal, gap, dual }))
    }
    #[cfg(not(feature = "highs"))]
    {
        let _ = start;
        let mut m = unsolved.using(good_lp::solvers::microlp::microlp);
        for c in cons {
            m.add_constraint(c);
        }
        // microlp is called directly for its node limit (good_lp only exposes a clock limit).
        // The relative gap keeps the cost exact (one GPU weighs 1000 in an objective of about
        // 1000 × GPUs) and lets the solver stop before proving the tie-breaks optimal.
        let mut options = microlp::SolveOptions::default();
        options.node_limit = Some(nodes);
        options.mip_gap = gap;
        match m.as_inner().solve_with(options) {
            Ok(outcome) => {
                let optimal = outcome.is_optimal();
                // The least bound of the open nodes and the incumbent: no solution of the
                // program is below it (microlp's `Stats::best_bound`).
                let dual = outcome.stats().best_bound.filter(|d| d.is_finite());
                match outcome.into_solution() {
                    Ok(sol) => {
                        let values: Vec<f64> = sol.iter().map(|(_, v)| v).collect();
                        let values = handles
                            .into_iter()
                            .enumerate()
                            .map(|(i, v)| (v, values.get(i).copied().unwrap_or(0.0)))
                            .collect();
                        Ok(Stop::Solved(Outcome { values, optimal, gap, dual }))
                    }
                    Err(_) => {
                        Ok(Stop::NoSolution { why: "node limit reached before a feasible solution", dual })
                    }
                }
            }
            Err(microlp::Error::Infeasible) => Err(MilpError::Infeasible),
            Err(e) => Err(MilpError::Solver(e.to_string())),
        }
    }
}

/// The least weighted cost of any plan of a program whose objective (1000 × cost, then lower
/// levels worth at most `levels`) has the dual bound `dual`: a plan of cost `c` has a
/// completion of objective at most `1000 c + levels`, which is at least `dual`. Less a
/// millionth of the bound's size for the solver's tolerances.
pub(crate) fn cost_floor(dual: f64, levels: f64) -> f64 {
    (dual - levels - 1e-6 * dual.abs().max(1.0)) / 1000.0
}

/// Whether a cost floor proves a plan of weighted cost `cost` optimal, where every two plans'
/// costs differ by a multiple of `step` (0 where nothing is known): no plan costs less than
/// `cost − step` and none below the floor, so none costs less once the floor is above
/// `cost − step`.
pub(crate) fn proves(floor: f64, cost: f64, step: f64) -> bool {
    step > 0.0 && floor > cost - step + 1e-9 * cost.abs().max(1.0)
}

/// The step between two plans' weighted costs: one GPU when unpriced; on priced pools the
/// greatest common divisor of the prices in cents over the cheapest price (every plan costs
/// `Σ price × GPUs`), 0 when a price is not a whole number of cents.
pub(crate) fn cost_step(problem: &Problem<'_>) -> f64 {
    let Some(unit) = problem.unit_price else { return 1.0 };
    let prices = crate::plan::bounds::pool_prices(problem);
    crate::plan::bounds::price_step(&prices).map_or(0.0, |g| g / unit)
}

/// A relative MIP gap below half a GPU's weight (1000 per GPU in an objective of at most
/// 1000 × `scale`), so that the number of GPUs is exact.
fn relative_gap(scale: f64) -> f64 {
    if scale > 0.0 { (0.4 / scale).min(0.01) } else { 0.0 }
}

/// Programs with at most this many variables are solved with a zero gap.
const EXACT_BELOW_VARIABLES: usize = 120;

/// Branch-and-bound nodes HiGHS may explore.
#[cfg(feature = "highs")]
const HIGHS_NODE_LIMIT: i32 = 50_000;

/// Branch-and-bound nodes × columns HiGHS may explore on a large program: the node limit
/// there is this divided by the program's columns (at least one node, at most
/// [`HIGHS_NODE_LIMIT`]), a count of work that grows with the program instead of a clock. Past
/// its root (presolve, cuts, the heuristics that find its plans) each node of a large program
/// re-solves an LP of thousands of columns, and the 0.2% gap of [`LARGE_RELATIVE_GAP`] may
/// never close when the plan is one GPU above an LP bound with a fractional part: on a
/// 1,024-GPU stress fleet (5,881 columns) HiGHS found its plan at the root after 25 s and then
/// explored 1,091 nodes in the next 90 s without a better one (docs/benchmarks.md). 600,000
/// leaves that program 102 nodes and a 10,000-GPU one of 60,000 columns 10.
#[cfg(feature = "highs")]
const LARGE_COLUMN_NODES: u64 = 600_000;

/// Branch-and-bound nodes × columns HiGHS may explore on the program per node
/// ([`solve_per_node`]): four times a large program's [`LARGE_COLUMN_NODES`]. Issue 23's
/// 100-GPU six-type fleet "mixed", seed 2 (3,242 columns): with 185 nodes the program found no
/// plan under the pooled one's 52 GPUs; with 740 it finds 50 (bound 49) in about 90 s, and
/// "mixed, priced", seed 2, goes from $138.30 to $136.80 (bound $134.70); with 1,480 the first
/// takes 146 s for the same 50 (docs/benchmarks.md).
#[cfg(feature = "highs")]
pub(crate) const PER_NODE_COLUMN_NODES: u64 = 4 * LARGE_COLUMN_NODES;

/// Branch-and-bound nodes the pure-Rust fallback may explore.
#[cfg(not(feature = "highs"))]
const MICROLP_NODE_LIMIT: u64 = 5_000;
