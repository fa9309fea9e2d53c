//! Why no plan exists: per-model binding reasons, spread and capacity, with the smallest
//! inventory addition that would make the plan feasible.
//!
//! In: a [`Problem`] (and the optimiser's failure). Out: [`Diagnostics`] labelled with the
//! model's or pool's span when the spec has one. Also the simple size lower bound.

use crate::diagnostics::{Code, Diagnostic, Diagnostics, codes};
use crate::plan::assign;
use crate::plan::milp::{self, Goal, MilpError, MilpResult};
use crate::plan::problem::{self, Need, Problem, Reason};
use crate::spec::Spread;

fn at_model(d: Diagnostic, problem: &Problem<'_>, mi: usize) -> Diagnostic {
    match problem.models.get(mi).and_then(|m| m.spec.span.clone()) {
        Some(span) => d.at(span, "this model"),
        None => d,
    }
}

/// Models that no device of any allowed pool can serve, and spread demands no inventory can meet.
pub(crate) fn unservable(problem: &Problem<'_>) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for (mi, mc) in problem.models.iter().enumerate() {
        let name = mc.name();
        if mc.options.is_empty() {
            let binding = mc.rejected.iter().map(|r| r.reason).max();
            let details: Vec<&str> =
                mc.rejected.iter().filter(|r| Some(r.reason) == binding).map(|r| r.text.as_str()).collect();
            let (code, what, help) = unservable_because(binding);
            let mut d =
                Diagnostic::error(code, format!("model `{name}` cannot be served: {what}")).with_help(help);
            for t in details {
                d = d.with_note(t.to_owned());
            }
            diags.push(at_model(d, problem, mi));
            continue;
        }
        if mc.spec.spread == Spread::Node
            && let Need::Replicas(n) = mc.need
        {
            let mut pools: Vec<usize> = mc.options.iter().map(|o| o.pool).collect();
            pools.dedup();
            let nodes: u64 = pools.iter().map(|&p| u64::from(problem.pools[p].max_nodes)).sum();
            if u64::from(n) > nodes {
                let d = Diagnostic::error(
                    codes::SPREAD_UNSATISFIABLE,
                    format!("model `{name}` asks for {n} replicas on distinct nodes but its pools have {nodes} node(s)"),
                )
                .with_help(format!("add {} node(s), lower `replicas`, or set `spread: gpu`", u64::from(n) - nodes));
                diags.push(at_model(d, problem, mi));
            }
        }
    }
    diags
}

/// Why a model that no device can serve is refused, by the reason that rules out most of its
/// devices (`None`: there are no pools): the code, what the error says, and the hint.
fn unservable_because(binding: Option<Reason>) -> (Code, &'static str, &'static str) {
    let Some(reason) = binding else {
        return (codes::NO_ELIGIBLE_POOL, "there are no pools", "add a pool to `inventory.pools`");
    };
    match reason {
        Reason::Pool => (
            codes::NO_ELIGIBLE_POOL,
            "no pool is allowed by its `pools` / `gpuTypes`",
            "widen `pools` or `gpuTypes`, or add a pool with an allowed GPU",
        ),
        Reason::Isolation => (
            codes::ISOLATION_UNSATISFIABLE,
            "its isolation policy rules out every device that fits",
            "relax `isolation`, or add a pool whose GPUs fit it whole",
        ),
        Reason::NodeSize => (
            codes::REPLICA_EXCEEDS_NODE,
            "a replica needs more GPUs than any node has",
            "lower `gpus`, or add a pool with more GPUs per node",
        ),
        Reason::Memory => (
            codes::MODEL_EXCEEDS_MEMORY,
            "it needs more memory than any allowed device offers",
            "add a pool of GPUs with more memory, or use `gpus` for a multi-GPU replica",
        ),
        Reason::Compute => (
            codes::MODEL_EXCEEDS_COMPUTE,
            "it needs more compute than any allowed device offers",
            "lower `compute`, or use `gpus` for a multi-GPU replica",
        ),
        Reason::Measurement => (
            codes::NO_ADMISSIBLE_MEASUREMENT,
            "no measured point is admissible on any allowed device",
            "add measurements with one process whose latency is below admissionFactor × SLO",
        ),
        Reason::Latency => (
            codes::LATENCY_SLO_UNREACHABLE,
            "the predicted p99 latency exceeds its SLO on every device that fits",
            "raise the SLO, lower `compute` per replica (serve the load with more replicas), or add a faster GPU",
        ),
    }
}

/// Explains an infeasible optimisation: re-solves with node counts relaxed and names the
/// smallest addition per pool.
pub(crate) fn explain(problem: &Problem<'_>, err: &MilpError, planner: Planner<'_>) -> Diagnostics {
    let mut diags = Diagnostics::new();
    if let MilpError::Solver(e) = err {
        diags.push(
            Diagnostic::error(codes::PLANNER_FAILED, format!("the solver failed: {e}"))
                .with_help("this is a planner limitation; please report it with the manifest"),
        );
        return diags;
    }
    match addition(problem, planner) {
        Some((extra_nodes, confirmed)) => {
            for (pi, &extra) in extra_nodes.iter().enumerate() {
                if extra == 0 {
                    continue;
                }
                let pool = &problem.pools[pi];
                let users: Vec<String> = problem
                    .models
                    .iter()
                    .filter(|m| m.options.iter().any(|o| o.pool == pi))
                    .map(|m| format!("`{}`", m.name()))
                    .collect();
                let users = summarise(&users);
                let have = match &pool.spec.nodes {
                    crate::spec::Nodes::Named(_) => format!("{} node(s)", pool.max_nodes),
                    crate::spec::Nodes::Autoscaled { max, .. } => format!("at most {max} node(s)"),
                };
                let add = addition_help(pool, extra, confirmed);
                let mut d = Diagnostic::error(
                    codes::CAPACITY_EXCEEDED,
                    format!("the models exceed the capacity of pool `{}` ({have} × {} GPU(s))", pool.name(), pool.gpn()),
                )
                .with_help(add)
                .with_note(format!("models that can use this pool: {users}"));
                if let Some(span) = pool.spec.span.clone() {
                    d = d.at(span, "this pool");
                }
                diags.push(d);
            }
        }
        None => diags.push(
            Diagnostic::error(
                codes::NO_FEASIBLE_PLAN,
                "no plan satisfies every constraint together, even with more nodes",
            )
            .with_help("check spread, isolation and time-slicing settings; `gpuplan explain` on a smaller manifest shows each model's options"),
        ),
    }
    diags
}

/// The help of `capacity-exceeded` for `extra` more nodes in `pool`. Confirmed (gpuplan plans
/// with the addition): what to add. Not confirmed, the addition is the last that gpuplan
/// tried and did not plan with, which proves nothing about what a plan needs (fewer nodes may
/// hold one that gpuplan did not find, or it may need more): the help says only that.
pub(crate) fn addition_help(pool: &problem::PoolCtx<'_>, extra: u64, confirmed: bool) -> String {
    let (name, gpn, gpu) = (pool.name(), pool.gpn(), &pool.gpu.id);
    match (pool.autoscaled(), confirmed) {
        (true, true) => format!("raise the maximum of pool `{name}` by {extra} node(s) of {gpn} × `{gpu}`"),
        (false, true) => format!("add {extra} × {gpu} node(s) ({gpn} GPU(s) each) to pool `{name}`"),
        (true, false) => format!(
            "raise the maximum of pool `{name}`: gpuplan found no plan even with {extra} more node(s) of {gpn} × `{gpu}`, so how many a plan needs is not known"
        ),
        (false, false) => format!(
            "add {gpu} nodes ({gpn} GPU(s) each) to pool `{name}`: gpuplan found no plan even with {extra} more, so how many a plan needs is not known"
        ),
    }
}

/// The smallest addition of nodes per pool the optimiser finds ([`Goal::Extend`]) with which
/// gpuplan plans, and whether planning confirmed it ([`Trials::confirm`]).
///
/// The additions come smallest first: the integer program names one, planning with it is
/// tried, and where that fails the program runs again with every addition tried so far
/// excluded ([`milp::solve_extend`]: the next names more nodes than each of them in some pool),
/// up to [`SMALLEST_TRIES`] times (once on large programs). Growing a refuted addition by half
/// instead named additions several times what a plan needs (six-type stress fleets of 8 GPUs:
/// 73 L4 nodes where 10 plan; docs/benchmarks.md). Where none of those plans, the candidates'
/// program's addition grows by half, planning confirming as before; the flag is then false
/// when even that did not plan ([`addition_help`] then says only that).
///
/// Where the pooled rows on the candidate layouts may cut a plan that trims a GPU
/// ([`problem::trims_matter`]), the programs run on the problem widened to every layout a plan
/// may trim to: their rows hold for every plan, so their additions are never more than one a
/// plan needs (on the candidates' program the addition can be more than needed: an 8-GPU
/// six-type priced stress fleet, seed 2, one A100 and two L4 nodes there, one A100 and one A30
/// node on the widened problem, with which the planner plans). None without a [`Planner`]
/// (the planning of a grown fleet, which only asks whether it plans), or where the program adds
/// nothing and gpuplan plans the fleet as it is.
fn addition(problem: &Problem<'_>, planner: Planner<'_>) -> Option<(Vec<u64>, bool)> {
    planner?;
    let wide = problem::trims_matter(problem).then(|| problem::widened(problem));
    let on = wide.as_ref().unwrap_or(problem);
    let mut trials = Trials { problem, wide: wide.as_ref(), planner, refuted: Vec::new() };
    let tries = if problem::is_large(problem) { 1 } else { SMALLEST_TRIES };
    // The candidates' first program, kept for the growth below (not solved twice).
    let mut first = None;
    for _ in 0..tries {
        let Ok(r) = milp::solve_extend(on, &trials.refuted) else { break };
        let mut extra = r.extra_nodes.clone();
        if wide.is_none() && trials.refuted.is_empty() {
            first = Some(r.clone());
        }
        // An addition of nothing (the program fits the fleet as it is) confirmed: gpuplan plans
        // the fleet as it is, and nothing is to be added; refuted, the next program asks for a
        // node more somewhere.
        if trials.confirm(Some((on, &r)), &mut extra, 1) {
            return extra.iter().any(|&e| e > 0).then_some((extra, true));
        }
    }
    let start = match first {
        Some(r) if r.extra_nodes.iter().any(|&e| e > 0) => Some((r.extra_nodes.clone(), Some(r))),
        _ => smallest_extension(problem),
    };
    start.map(|(mut extra, solved)| {
        let solved = solved.as_ref().map(|r| (problem, r));
        let ok = trials.confirm(solved, &mut extra, CONFIRM_TRIES);
        (extra, ok)
    })
}

/// Additions [`addition`] tries smallest first, each program excluding those before it.
const SMALLEST_TRIES: usize = 4;

/// The extra nodes per pool of [`Goal::Extend`] on `problem`, when it adds any: the integer
/// program's (with its result, whose counts are a plan's with the addition), else its
/// relaxation's rounded up.
fn smallest_extension(problem: &Problem<'_>) -> Option<(Vec<u64>, Option<MilpResult>)> {
    let extend = |integer| {
        milp::solve(problem, Goal::Extend { integer }, &milp::Pins::new())
            .ok()
            .filter(|r| r.extra_nodes.iter().any(|&e| e > 0))
    };
    match extend(true) {
        Some(r) => Some((r.extra_nodes.clone(), Some(r))),
        None => extend(false).map(|r| (r.extra_nodes, None)),
    }
}

/// Where the planner failed without knowing whether a plan exists (the solver stopped without
/// one and no other strategy found one): the addition of nodes with which gpuplan plans, as
/// a note, when [`addition`] confirms one. It names what the fleet would need, not that the
/// nodes it has cannot hold a plan.
pub(crate) fn addition_note(problem: &Problem<'_>, planner: Planner<'_>) -> Option<String> {
    let (extra, true) = addition(problem, planner)? else { return None };
    let parts: Vec<String> = extra
        .iter()
        .enumerate()
        .filter(|&(_, &e)| e > 0)
        .map(|(pi, &e)| {
            let pool = &problem.pools[pi];
            format!("{e} more node(s) in pool `{}` ({} × {} each)", pool.name(), pool.gpn(), pool.gpu.id)
        })
        .collect();
    Some(format!(
        "with {}, gpuplan finds a plan; whether the nodes there now can hold one is not known",
        parts.join(" and ")
    ))
}

/// Names shown in a note at most; the rest are counted.
const NAMES_SHOWN: usize = 10;

/// `a, b, c` for short lists; the first [`NAMES_SHOWN`] names and "and N more" for long ones.
pub(crate) fn summarise(names: &[String]) -> String {
    if names.len() <= NAMES_SHOWN {
        return names.join(", ");
    }
    format!("{} and {} more", names[..NAMES_SHOWN].join(", "), names.len() - NAMES_SHOWN)
}

/// Tries of [`Trials::confirm`] before the addition is reported as not confirmed.
const CONFIRM_TRIES: usize = 6;

/// What says whether the planner plans a problem (a fleet grown by an addition of nodes):
/// `plan::plans_grown`, passed down by the planner so that this module does not call the
/// cascade that calls it; `None` in the planning of a grown fleet itself, which names no
/// addition of its own.
pub(crate) type Planner<'f> = Option<&'f dyn Fn(&Problem<'_>) -> bool>;

/// Whether the planner confirms the tries of [`Trials::confirm`] past the first (the growth by
/// half), or first fit alone: with HiGHS (16-GPU six-type priced stress fleet, fill 1.0, seed 3:
/// 6 A30 and 6 L4 nodes named where first fit's growth named 9 and 9, in about the same time);
/// not with microlp, whose cascade on a grown fleet takes minutes (8-GPU priced fleet, fill
/// 0.7, seed 1: 9 L4 nodes named where first fit said "at least 28", but in 508 s against 162).
const PLANNER_ON_GROWTH: bool = cfg!(feature = "highs");

/// `problem` with `extra` more nodes per pool.
fn grown<'a>(problem: &Problem<'a>, extra: &[u64]) -> Problem<'a> {
    let mut grown = problem.clone();
    for (pool, &e) in grown.pools.iter_mut().zip(extra) {
        pool.max_nodes = pool.max_nodes.saturating_add(u32::try_from(e).unwrap_or(u32::MAX));
    }
    grown
}

/// Planning with additions of nodes ([`addition`]): the fleet, the fleet widened to every
/// layout a plan may trim to (where that matters), the [`Planner`], and the additions tried
/// that nothing planned with.
struct Trials<'t, 'a> {
    problem: &'t Problem<'a>,
    /// `problem` widened ([`problem::widened`]): a plan there is a plan of `problem`, its GPUs
    /// trimmed.
    wide: Option<&'t Problem<'a>>,
    planner: Planner<'t>,
    /// Additions that first fit and the planner did not plan with: not planned again, and
    /// excluded from the next program ([`milp::solve_extend`]).
    refuted: Vec<Vec<u64>>,
}

impl Trials<'_, '_> {
    /// Whether the plan becomes feasible with `extra` nodes per pool, judged by planning with
    /// them: the optimiser's counts for that addition laid out (`solved`: the problem they were
    /// solved on and the result; first fit repairs what finds no room), then first fit and its
    /// backtracking search on the problem and on the widened one, then the planner (past the
    /// first try only where [`PLANNER_ON_GROWTH`]; first fit alone confirmed additions several
    /// times what the planner needs: six-type priced stress fleets of 16 GPUs, seed 5, 13 more
    /// L4 nodes where the planner plans with 2). Up to `tries` times, every pool with an
    /// addition grown by half (at least one node) after each failure, the counts tried only
    /// with the addition they were solved for. An addition already refuted is not planned
    /// again; one that does not plan joins them.
    fn confirm(
        &mut self,
        solved: Option<(&Problem<'_>, &MilpResult)>,
        extra: &mut Vec<u64>,
        tries: usize,
    ) -> bool {
        if let Some((on, r)) = solved
            && assign::decompose(&grown(on, extra), &r.counts, &r.replicas, true).is_some()
        {
            return true;
        }
        for attempt in 0..tries {
            if attempt > 0 {
                for e in extra.iter_mut().filter(|e| **e > 0) {
                    *e += (*e / 2).max(1);
                }
            }
            if self.refuted.contains(extra) {
                continue;
            }
            let plans = |p: &Problem<'_>| {
                let g = grown(p, extra);
                assign::ffd(&g).is_some() || assign::ffd_search(&g).is_ok()
            };
            if plans(self.problem) || self.wide.is_some_and(plans) {
                return true;
            }
            if (attempt == 0 || PLANNER_ON_GROWTH)
                && self.planner.is_some_and(|plans| plans(&grown(self.problem, extra)))
            {
                return true;
            }
            self.refuted.push(extra.clone());
        }
        false
    }
}

/// A lower bound on GPUs from sizes alone: every replica needs at least its smallest option's
/// share of a GPU (rate models: the best share per request per second).
pub(crate) fn size_bound(problem: &Problem<'_>) -> u32 {
    let mut total = 0.0;
    for mc in &problem.models {
        let need = match mc.need {
            Need::Replicas(n) => {
                mc.options.iter().map(|o| o.bound_share).fold(f64::INFINITY, f64::min) * f64::from(n)
            }
            Need::Rate { rps, min_replicas } => {
                let per = mc
                    .options
                    .iter()
                    .filter_map(|o| o.rps.filter(|r| *r > 0.0).map(|r| o.bound_share / r))
                    .fold(f64::INFINITY, f64::min)
                    * rps;
                let floor = mc.options.iter().map(|o| o.bound_share).fold(f64::INFINITY, f64::min)
                    * f64::from(min_replicas);
                per.max(floor)
            }
        };
        if need.is_finite() {
            total += need;
        }
    }
    (total - 1e-9).ceil().max(0.0) as u32
}
