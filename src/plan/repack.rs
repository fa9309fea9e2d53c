//! Pairs of nodes re-packed exactly (issue 23, the pure-Rust build): a large-neighbourhood
//! search whose neighbourhoods are programs of their own.
//!
//! The pure-Rust build leaves the `spread: gpu` rows on MIG out of its integer programs on
//! problems that are not small (microlp's branch and bound stalls with them), so its counts
//! lay out on more GPUs than they count, and it has no program per node to fix that (HiGHS's
//! [`crate::plan::per_node`]). Its local search ([`crate::plan::assign::empty_gpus`]) moves one
//! GPU's replicas at a time; what it cannot do is change the layouts of several GPUs of a node
//! together, which is what the per-node spread rules ask for.
//!
//! Here two nodes in use, with every replica they run, make a problem of their own: each node
//! a pool of one node (its pool's options, layouts and price), each model asking for the
//! replicas it runs there. That problem is small, so its program carries every row
//! ([`milp::solve_every_row`]), and on one-node pools the rows of `spread: node`, of the node
//! sharing classes and of `spread: gpu` bind each node. Its counts are laid out on the two
//! nodes, and they replace the nodes' GPUs where they cost less. The other nodes are not
//! touched, and every rule is per node, so the plan stays valid.
//!
//! Left out: nodes of autoscaled pools (their node names are templates), nodes with
//! time-sliced MIG instances, and nodes running a rate model (its replicas are counted by the
//! requests they serve, which a neighbourhood would have to carry).
//!
//! Deterministic: the pairs come in a fixed order, and the search stops after a count of
//! programs ([`REPACK_SOLVES`]), not a clock.

use std::collections::BTreeMap;

use crate::plan::assign::{self, Assignment, COST_EPSILON};
use crate::plan::bounds;
use crate::plan::milp;
use crate::plan::per_node;
use crate::plan::problem::{Kind, Need, Opt, Problem};

/// Programs [`repacked`] solves at most (a count, not a clock).
pub(crate) const REPACK_SOLVES: usize = 400;

/// GPUs in use above which [`repacked`] does nothing: measured on 100-GPU fleets only (25 s to
/// 5 minutes there), and beyond them the pairs' programs and the kicks from a second start
/// (`strategy::emptied`) would add to what 256-GPU fleets already spend in the kicks (8 to 32
/// minutes; docs/benchmarks.md).
pub(crate) const REPACK_MAX_GPUS: u64 = 128;

/// A cheaper assignment than `a`, found by re-packing pairs of its nodes in use, or `None`.
/// Stops once `enough` says a cost is good enough, or after [`REPACK_SOLVES`] programs;
/// nothing on plans of more than [`REPACK_MAX_GPUS`] GPUs.
pub(crate) fn repacked(
    problem: &Problem<'_>,
    a: &Assignment,
    enough: impl Fn(f64) -> bool,
) -> Option<Assignment> {
    if a.gpus_used() > REPACK_MAX_GPUS {
        return None;
    }
    let mut best = a.clone();
    let mut improved = false;
    let mut solves = 0;
    loop {
        let mut progress = false;
        let nodes = in_use(&best);
        'pairs: for (i, &x) in nodes.iter().enumerate() {
            for &y in &nodes[i + 1..] {
                if enough(best.cost(problem)) || solves >= REPACK_SOLVES {
                    break 'pairs;
                }
                let Some(sub) = neighbourhood(problem, &best, &[x, y]) else { continue };
                solves += 1;
                if let Some(b) = repack(problem, &best, &[x, y], &sub) {
                    best = b;
                    progress = true;
                    improved = true;
                }
            }
        }
        if !progress || enough(best.cost(problem)) || solves >= REPACK_SOLVES {
            break;
        }
    }
    improved.then_some(best)
}

/// The nodes of `a` that use a GPU, as (pool, node), in order.
fn in_use(a: &Assignment) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (pi, pa) in a.pools.iter().enumerate() {
        for (ni, n) in pa.nodes.iter().enumerate() {
            if n.used() {
                out.push((pi, ni));
            }
        }
    }
    out
}

/// The problem of `nodes` alone: each node a pool of one node, each model asking for the
/// replicas it runs there, with its options on those nodes. `None` where a node is left out
/// (module header).
fn neighbourhood<'a>(problem: &Problem<'a>, a: &Assignment, nodes: &[(usize, usize)]) -> Option<Problem<'a>> {
    let mut demand = vec![0u32; problem.models.len()];
    let mut pools = Vec::new();
    for &(pi, ni) in nodes {
        let pool = problem.pools.get(pi)?;
        let node = a.pools.get(pi)?.nodes.get(ni)?;
        if pool.autoscaled() || node.has_mig_ts() {
            return None;
        }
        for ((m, _), n) in node.replicas(problem) {
            let model = problem.models.get(m)?;
            if !matches!(model.need, Need::Replicas(_)) {
                return None;
            }
            *demand.get_mut(m)? += n;
        }
        pools.push(per_node::one_node_pool(pool, pool.node_name(ni)));
    }
    let models = problem
        .models
        .iter()
        .zip(&demand)
        .map(|(m, &n)| {
            let mut m = m.clone();
            m.need = Need::Replicas(n);
            m.options = nodes
                .iter()
                .enumerate()
                .flat_map(|(j, &(pi, _))| {
                    m.options.iter().filter(move |o| o.pool == pi).map(move |o| Opt { pool: j, ..o.clone() })
                })
                .collect();
            m.rejected.clear();
            m
        })
        .collect();
    Some(crate::plan::problem::widened(&Problem { pools, models, ..problem.clone() }))
}

/// `a` with `nodes` replaced by the optimum of their problem `sub` laid out, when that costs
/// less than they do now.
fn repack(
    problem: &Problem<'_>,
    a: &Assignment,
    nodes: &[(usize, usize)],
    sub: &Problem<'_>,
) -> Option<Assignment> {
    let now: f64 = nodes
        .iter()
        .map(|&(pi, ni)| {
            let used = a.pools[pi].nodes[ni].gpus_used() as f64;
            used * problem.pools[pi].weight
        })
        .sum();
    let r = milp::solve_repack(sub, now - step(problem, nodes) + 1e-6);
    let r = r.ok()?;
    if r.cost >= now - COST_EPSILON {
        return None;
    }
    // The decompositions that solve no program of their own (the cascade's assignment program
    // took up to 20 s on a pair of A100 nodes): exact, without the `spread: gpu` rule at
    // placement and then made to pass it, or with first fit for what finds no room; the
    // cheapest.
    let laid = [
        assign::decompose(sub, &r.counts, &r.replicas, false),
        assign::decompose_unguarded(sub, &r.counts, &r.replicas),
        assign::decompose(sub, &r.counts, &r.replicas, true),
    ]
    .into_iter()
    .flatten()
    .reduce(|a, b| if b.cost(sub) < a.cost(sub) - COST_EPSILON { b } else { a })?;
    if laid.cost(sub) >= now - COST_EPSILON {
        return None;
    }
    let mut b = a.clone();
    for (j, &(pi, ni)) in nodes.iter().enumerate() {
        let old = b.pools.get(pi)?.nodes.get(ni)?.replicas(problem);
        let new_node = laid.pools.get(j)?.nodes.first()?.clone();
        let new = new_node.replicas(sub);
        recount(&mut b.replicas, pi, &old, |c, n| c.checked_sub(n))?;
        recount(&mut b.replicas, pi, &new, |c, n| c.checked_add(n))?;
        *b.pools.get_mut(pi)?.nodes.get_mut(ni)? = new_node;
    }
    Some(b)
}

/// The least by which a packing of `nodes` can cost less than another, in the problem's
/// weights: one GPU unpriced; priced, the greatest common divisor of the nodes' prices in
/// cents (every packing costs `Σ price × GPUs`, `bounds::price_step`), or a millionth where a
/// price is not a whole number of cents. A cap that much below the pair's cost cuts no
/// cheaper packing, and the search proves most pairs infeasible at once (with a millionth
/// only, on a priced 100-GPU fleet, the pairs took minutes).
fn step(problem: &Problem<'_>, nodes: &[(usize, usize)]) -> f64 {
    let Some(unit) = problem.unit_price else { return 1.0 };
    let prices: Vec<f64> =
        nodes.iter().filter_map(|&(pi, _)| problem.pools.get(pi)?.spec.cost_per_gpu_hour).collect();
    bounds::price_step(&prices).map_or(1e-6, |s| s / unit)
}

/// `replicas` with a node's `counts` (per model and kind) of pool `pi` combined by `f`.
fn recount(
    replicas: &mut BTreeMap<(usize, usize, Kind), u32>,
    pi: usize,
    counts: &BTreeMap<(usize, Kind), u32>,
    f: impl Fn(u32, u32) -> Option<u32>,
) -> Option<()> {
    for (&(m, kind), &n) in counts {
        let c = f(replicas.get(&(m, pi, kind)).copied().unwrap_or(0), n)?;
        if c == 0 {
            replicas.remove(&(m, pi, kind));
        } else {
            replicas.insert((m, pi, kind), c);
        }
    }
    Some(())
}
