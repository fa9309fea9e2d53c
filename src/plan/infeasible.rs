//! Why no plan exists: per-model binding reasons, spread and capacity, with the smallest
//! inventory addition that would make the plan feasible.
//!
//! In: a [`Problem`] (and the optimiser's failure). Out: [`Diagnostics`] labelled with the
//! model's or pool's span when the spec has one. Also the simple size lower bound.

use crate::diagnostics::{Code, Diagnostic, Diagnostics, codes};
use crate::plan::assign;
use crate::plan::milp::{self, Goal, MilpError};
use crate::plan::problem::{Need, Problem, Reason};
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
pub(crate) fn explain(problem: &Problem<'_>, err: &MilpError) -> Diagnostics {
    let mut diags = Diagnostics::new();
    if let MilpError::Solver(e) = err {
        diags.push(
            Diagnostic::error(codes::PLANNER_FAILED, format!("the solver failed: {e}"))
                .with_help("this is a planner limitation; please report it with the manifest"),
        );
        return diags;
    }
    match addition(problem) {
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
                let at_least = if confirmed { "" } else { "at least " };
                let add = if pool.autoscaled() {
                    format!("raise the maximum of pool `{}` by {at_least}{extra} node(s) of {} × `{}`", pool.name(), pool.gpn(), pool.gpu.id)
                } else {
                    format!("add {at_least}{extra} × {} node(s) ({} GPU(s) each) to pool `{}`", pool.gpu.id, pool.gpn(), pool.name())
                };
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

/// The smallest addition of nodes per pool the optimiser finds ([`Goal::Extend`]): the integer
/// program first; when it stops without a solution (microlp's node limit), its relaxation
/// rounded up. Either way the addition is confirmed by planning with it (first fit, then its
/// backtracking search), and grown until that succeeds; the flag says whether it was.
fn addition(problem: &Problem<'_>) -> Option<(Vec<u64>, bool)> {
    milp::solve(problem, Goal::Extend { integer: true }, &milp::Pins::new())
        .ok()
        .filter(|r| r.extra_nodes.iter().any(|&e| e > 0))
        .or_else(|| {
            milp::solve(problem, Goal::Extend { integer: false }, &milp::Pins::new())
                .ok()
                .filter(|r| r.extra_nodes.iter().any(|&e| e > 0))
        })
        .map(|r| r.extra_nodes)
        .map(|mut extra| {
            let confirmed = confirm(problem, &mut extra);
            (extra, confirmed)
        })
}

/// Where the planner failed without knowing whether a plan exists (the solver stopped without
/// one and no other strategy found one): the addition of nodes with which first fit plans, as
/// a note, when [`addition`] confirms one. It names what the fleet would need, not that the
/// nodes it has cannot hold a plan.
pub(crate) fn addition_note(problem: &Problem<'_>) -> Option<String> {
    let (extra, true) = addition(problem)? else { return None };
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
        "with {}, first fit finds a plan; whether the nodes there now can hold one is not known",
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

/// Tries of [`confirm`] before the addition is reported as "at least".
const CONFIRM_TRIES: usize = 6;

/// Whether the plan becomes feasible with `extra` nodes per pool, judged by planning with them
/// (first fit, then its backtracking search); grows every pool with an addition by half (at
/// least one node) until it does. Returns whether it was confirmed.
fn confirm(problem: &Problem<'_>, extra: &mut [u64]) -> bool {
    for _ in 0..CONFIRM_TRIES {
        let mut grown = problem.clone();
        for (pool, &e) in grown.pools.iter_mut().zip(extra.iter()) {
            pool.max_nodes = pool.max_nodes.saturating_add(u32::try_from(e).unwrap_or(u32::MAX));
        }
        if assign::ffd(&grown).is_some() || assign::ffd_search(&grown).is_ok() {
            return true;
        }
        for e in extra.iter_mut().filter(|e| **e > 0) {
            *e += (*e / 2).max(1);
        }
    }
    false
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
