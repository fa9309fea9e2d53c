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
//! The same neighbourhoods complete a partial plan ([`completed`], both builds, the cascade's
//! last step before a failure): a node or a pair of nodes asked for what they run plus
//! replicas no node runs yet, re-packed pairs freeing room where none takes them.
//!
//! Deterministic: the pairs come in a fixed order, and the search stops after a count of
//! programs ([`REPACK_SOLVES`]), not a clock.

use std::collections::BTreeMap;

use crate::plan::assign::{self, Assignment, COST_EPSILON};
use crate::plan::bounds;
use crate::plan::milp;
use crate::plan::per_node;
use crate::plan::problem::{Kind, Need, Opt, Problem};
use crate::spec::Spread;

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
                let Some(sub) = neighbourhood(problem, &best, &[x, y], &BTreeMap::new()) else { continue };
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

/// Neighbourhood programs [`completed`] solves after its start or a re-pack before it stops
/// (a count, not a clock).
const COMPLETE_SOLVES: usize = 400;

/// Times [`completed`] re-packs the plan so far ([`repacked`]) where no neighbourhood takes a
/// replica.
const COMPLETE_REPACKS: usize = 4;

/// Nodes of most room among which [`completed`] also tries pairs, per model.
const COMPLETE_PAIR_NODES: usize = 8;

/// Programs [`completed`] solves at most, over the whole completion, to eject replicas
/// ([`ejected`]) where no neighbourhood takes one (a count, not a clock).
const EJECT_SOLVES: usize = 400;

/// Models [`ejected`] tries to eject per node, the fewest GPUs' worth first.
const EJECT_MODELS: usize = 3;

/// A plan from `a`, a partial one that leaves out the replicas `left` (one (model, pool, kind)
/// entry each; [`assign::decompose_partial`]), each model's missing replicas placed by
/// neighbourhood programs: one node, then a pair of nodes, of the pools where the model may run
/// (most unused GPUs first), asked for what they run and some of the missing replicas (all, then
/// half as many down to one), every row on each node ([`milp::solve_repack`] without a cap),
/// laid out and put in place of those nodes. Every rule is per node, so what the other nodes
/// run stays valid; the cost may grow. Where no neighbourhood takes a replica, one node is asked
/// for it *instead of* the replicas of another model it runs ([`ejected`]: an ejection chain,
/// the ejected replicas missing in turn, to go where there is room), and where that fails too,
/// the plan so far is re-packed ([`repacked`]: pairs of nodes onto fewer GPUs), which frees
/// room, and the placing goes on (at most [`COMPLETE_REPACKS`] times). Spread models first
/// (they have the fewest places), then the models with the most replicas missing, the larger
/// first. `None` where some replica still finds no place, after [`COMPLETE_SOLVES`] programs
/// since the last re-pack, or where a replica left out is a rate model's (its replicas count by
/// the requests they serve, which a neighbourhood does not carry). Deterministic.
pub(crate) fn completed(
    problem: &Problem<'_>,
    a: &Assignment,
    left: &assign::Deferred,
) -> Option<Assignment> {
    let mut missing: BTreeMap<usize, u32> = BTreeMap::new();
    for &(m, _, _) in left {
        if !matches!(problem.models.get(m)?.need, Need::Replicas(_)) {
            return None;
        }
        *missing.entry(m).or_insert(0) += 1;
    }
    let size = |m: usize| -> f64 {
        problem.models.get(m).map_or(0.0, |x| x.options.iter().map(|o| o.size).fold(0.0, f64::max))
    };
    let spread = |m: usize| problem.models.get(m).is_some_and(|x| x.spec.spread != Spread::None);
    let mut a = a.clone();
    let (mut solves, mut repacks, mut eject_solves) = (0, 0, 0);
    let mut current: Option<usize> = None;
    loop {
        let next = current.filter(|m| missing.contains_key(m)).or_else(|| {
            missing.keys().copied().max_by(|&x, &y| {
                spread(x)
                    .cmp(&spread(y))
                    .then(missing[&x].cmp(&missing[&y]))
                    .then(size(x).total_cmp(&size(y)))
                    .then(y.cmp(&x))
            })
        });
        let Some(m) = next else { break };
        current = Some(m);
        let n = missing.get(&m).copied().unwrap_or(0);
        let (b, placed, out) = match placed_somewhere(problem, &a, m, n, &mut solves) {
            Some((b, took)) => (b, took, None),
            None => match ejected(problem, &a, m, &mut eject_solves) {
                Some((b, e, k)) => (b, 1, Some((e, k))),
                None if repacks < COMPLETE_REPACKS => {
                    repacks += 1;
                    a = repacked(problem, &a, |_| false)?;
                    solves = 0;
                    continue;
                }
                None => return None,
            },
        };
        a = b;
        if n == placed {
            missing.remove(&m);
        } else {
            missing.insert(m, n - placed);
        }
        if let Some((e, k)) = out {
            *missing.entry(e).or_insert(0) += k;
        }
    }
    Some(a)
}

/// `a` with one replica of model `m` placed on one node in place of every replica another
/// model runs there, the model ejected and how many replicas it lost; `None` where no node
/// takes it so. The ejected model has no spread rule and counts replicas, so it may go to any
/// node with room; models that may run in a pool with unused GPUs are tried first, then the
/// fewest GPUs' worth on the node ([`EJECT_MODELS`] per node, the nodes of most room first,
/// [`EJECT_SOLVES`] programs over the whole completion).
fn ejected(
    problem: &Problem<'_>,
    a: &Assignment,
    m: usize,
    solves: &mut usize,
) -> Option<(Assignment, usize, u32)> {
    let roomy: Vec<bool> = a
        .pools
        .iter()
        .enumerate()
        .map(|(pi, pa)| {
            problem.pools.get(pi).is_some_and(|p| !p.autoscaled())
                && pa.nodes.iter().any(|n| n.gpus_used() < n.gpus.len())
        })
        .collect();
    let elsewhere = |e: usize| {
        problem.models.get(e).is_some_and(|x| x.options.iter().any(|o| roomy.get(o.pool) == Some(&true)))
    };
    for (pi, ni) in nodes_of(problem, a, m) {
        let node = a.pools.get(pi)?.nodes.get(ni)?;
        let mut share: BTreeMap<usize, (f64, u32)> = BTreeMap::new();
        for ((e, kind), k) in node.replicas(problem) {
            let Some(other) = problem.models.get(e) else { continue };
            if e == m || other.spec.spread != Spread::None || !matches!(other.need, Need::Replicas(_)) {
                continue;
            }
            let size = other.options.iter().find(|o| o.pool == pi && o.kind == kind).map_or(1.0, |o| o.size);
            let s = share.entry(e).or_insert((0.0, 0));
            s.0 += size * f64::from(k);
            s.1 += k;
        }
        let mut candidates: Vec<(usize, (f64, u32))> = share.into_iter().collect();
        candidates.sort_by(|x, y| {
            elsewhere(y.0).cmp(&elsewhere(x.0)).then(x.1.0.total_cmp(&y.1.0)).then(x.0.cmp(&y.0))
        });
        for &(e, (_, on_node)) in candidates.iter().take(EJECT_MODELS) {
            if *solves >= EJECT_SOLVES {
                return None;
            }
            let extra = BTreeMap::from([(m, 1), (e, -i64::from(on_node))]);
            let Some(sub) = neighbourhood(problem, a, &[(pi, ni)], &extra) else { break };
            *solves += 1;
            if let Some(b) = rewritten(problem, a, &[(pi, ni)], &sub) {
                return Some((b, e, on_node));
            }
        }
    }
    None
}

/// The nodes of the pools where model `m` may run (not autoscaled), most unused GPUs first,
/// as (pool, node).
fn nodes_of(problem: &Problem<'_>, a: &Assignment, m: usize) -> Vec<(usize, usize)> {
    let Some(model) = problem.models.get(m) else { return Vec::new() };
    let mut nodes: Vec<(usize, usize, usize)> = Vec::new();
    for (pi, pa) in a.pools.iter().enumerate() {
        if problem.pools.get(pi).is_none_or(|p| p.autoscaled()) || !model.options.iter().any(|o| o.pool == pi)
        {
            continue;
        }
        for (ni, node) in pa.nodes.iter().enumerate() {
            nodes.push((node.gpus.len() - node.gpus_used(), pi, ni));
        }
    }
    nodes.sort_by(|x, y| y.0.cmp(&x.0).then((x.1, x.2).cmp(&(y.1, y.2))));
    nodes.into_iter().map(|(_, pi, ni)| (pi, ni)).collect()
}

/// `a` with `n` replicas of model `m` placed by one neighbourhood program (else half as many,
/// down to one), and how many it placed; `None` where no neighbourhood of [`completed`] takes
/// one.
fn placed_somewhere(
    problem: &Problem<'_>,
    a: &Assignment,
    m: usize,
    n: u32,
    solves: &mut usize,
) -> Option<(Assignment, u32)> {
    let nodes = nodes_of(problem, a, m);
    let singles = nodes.iter().map(|&x| vec![x]);
    let roomy = &nodes[..nodes.len().min(COMPLETE_PAIR_NODES)];
    let pairs = roomy.iter().enumerate().flat_map(|(i, &x)| roomy[i + 1..].iter().map(move |&y| vec![x, y]));
    let mut takes: Vec<u32> = vec![n];
    while let Some(&t) = takes.last().filter(|&&t| t > 1) {
        takes.push(t / 2);
    }
    for set in singles.chain(pairs) {
        for &take in &takes {
            if *solves >= COMPLETE_SOLVES {
                return None;
            }
            let Some(sub) = neighbourhood(problem, a, &set, &BTreeMap::from([(m, i64::from(take))])) else {
                break;
            };
            *solves += 1;
            if let Some(b) = rewritten(problem, a, &set, &sub) {
                return Some((b, take));
            }
        }
    }
    None
}

/// Programs [`pool_by_pool`] solves at most per pool or chunk of a pool ([`fewest_dropped`];
/// a count, not a clock).
const POOL_SOLVES: usize = 32;

/// A plan from the optimiser's replica choices `replicas` (model, pool, kind → count), laid
/// out pool by pool: every rule is per node, so given how many replicas of each model a pool
/// runs, each pool is a problem of its own. Each pool's share is solved by the program of its
/// nodes alone, each node a pool of one node, with every row ([`neighbourhood`],
/// [`milp::solve_every_row`]: small enough for microlp where the program of the whole fleet
/// with those rows is not), its counts laid out on the pool's nodes; a pool of more than
/// [`WHOLE_POOL_NODES`] nodes in chunks of [`CHUNK_NODES`], its share dealt among them
/// ([`chunks`]). Where that program finds no plan (the share is more than the nodes hold with
/// the spread rules, or the solver stops), the pool is asked for fewer replicas (dropped one at
/// a time: of the replicas offered from earlier pools first, each time of the model with the
/// most, the lowest index among equals; [`dropped`]), the fewest dropped that give a plan
/// looked for within [`POOL_SOLVES`] programs ([`fewest_dropped`]), else the pool takes none.
/// The replicas a pool did not take are offered to the pools (and chunks) after it where their
/// model may run, and those no pool took are placed by [`completed`]. `None` where a model
/// counts by rate (the neighbourhoods count replicas), a pool with replicas is autoscaled (its
/// node names are templates), or something stays unplaced. Deterministic.
pub(crate) fn pool_by_pool(
    problem: &Problem<'_>,
    replicas: &BTreeMap<(usize, usize, Kind), u32>,
) -> Option<Assignment> {
    if problem.models.iter().any(|m| !matches!(m.need, Need::Replicas(_))) {
        return None;
    }
    let mut a = assign::empty(problem, |pi| problem.pools.get(pi).map_or(0, |p| p.max_nodes as usize));
    // Replicas no pool so far took, per model, with the (pool, kind) they were chosen for.
    let mut carried: BTreeMap<usize, (i64, (usize, Kind))> = BTreeMap::new();
    for (pi, pool) in problem.pools.iter().enumerate() {
        let mut whole: BTreeMap<usize, i64> = BTreeMap::new();
        let mut kinds: BTreeMap<usize, (u32, Kind)> = BTreeMap::new();
        for (&(m, _, kind), &n) in replicas.iter().filter(|((_, p, _), _)| *p == pi) {
            *whole.entry(m).or_insert(0) += i64::from(n);
            let most = kinds.entry(m).or_insert((n, kind));
            if n > most.0 {
                *most = (n, kind);
            }
        }
        let runs_here =
            |m: usize| problem.models.get(m).is_some_and(|x| x.options.iter().any(|o| o.pool == pi));
        for (nodes, mut share) in chunks(pi, pool.max_nodes as usize, &whole) {
            let offered: BTreeMap<usize, i64> = carried
                .iter()
                .filter(|&(&m, &(n, _))| n > 0 && runs_here(m))
                .map(|(&m, &(n, _))| (m, n))
                .collect();
            if share.is_empty() && offered.is_empty() {
                continue;
            }
            let total = share.clone();
            let asked = share.values().chain(offered.values()).map(|&n| n.max(0) as usize).sum::<usize>();
            // The pool's program with `k` replicas dropped ([`dropped`]).
            let attempt = |k: usize| -> Option<Outcome<(Assignment, Ask)>> {
                let (sh, of) = dropped(&share, &offered, k);
                let mut ask = sh.clone();
                for (&m, &n) in &of {
                    *ask.entry(m).or_insert(0) += n;
                }
                let sub = neighbourhood(problem, &a, &nodes, &ask)?;
                let solved = milp::solve_every_row(&sub);
                Some(match solved {
                    Err(milp::MilpError::Infeasible) => Outcome::Infeasible,
                    Err(milp::MilpError::Solver(_)) => Outcome::Stopped,
                    Ok(r) => {
                        match lay_out(&sub, &r).and_then(|laid| replaced(problem, &a, &nodes, &sub, &laid)) {
                            Some(b) => Outcome::Plan((b, (sh, of))),
                            None => Outcome::Stopped,
                        }
                    }
                })
            };
            let found = fewest_dropped(asked, attempt)?;
            if let Some((_, (b, (sh, of)))) = found {
                a = b;
                share = sh;
                for (&m, &n) in &of {
                    if let Some(c) = carried.get_mut(&m) {
                        c.0 -= n;
                    }
                }
            } else {
                share.clear();
            }
            for (&m, &n) in &total {
                let out = n - share.get(&m).copied().unwrap_or(0);
                if out > 0 {
                    let kind = kinds.get(&m)?.1;
                    carried.entry(m).or_insert((0, (pi, kind))).0 += out;
                }
            }
        }
    }
    let mut left: assign::Deferred = Vec::new();
    for (&m, &(n, (pi, kind))) in &carried {
        left.extend(std::iter::repeat_n((m, pi, kind), usize::try_from(n).ok()?));
    }
    if left.is_empty() { Some(a) } else { completed(problem, &a, &left) }
}

/// What a pool's program with some replicas dropped gave ([`pool_by_pool`]).
enum Outcome<T> {
    /// A plan (in [`pool_by_pool`], with the share and offered replicas it holds).
    Plan(T),
    /// Proven infeasible: so is every ask holding these replicas and more (fewer dropped).
    Infeasible,
    /// The solver stopped, or its counts did not lay out: nothing is known.
    Stopped,
}

/// The plan that drops fewest replicas among those [`pool_by_pool`] tries, within
/// [`POOL_SOLVES`] programs, with how many it drops; `Some(None)` where none gave a plan;
/// `None` where a pool's nodes cannot make a problem of their own. `attempt(k)` solves the
/// pool with `k` of its `asked` replicas dropped. A proven infeasibility at `k` holds for every
/// smaller `k` (those ask for a superset), so the search first doubles `k` from none while the
/// program is infeasible and halves the interval to the first `k` that is not (infeasible
/// shares fail in milliseconds: their relaxation already has no solution, so this is quick
/// even where a split asks for hundreds of replicas more than a pool holds); from there, where
/// the solver stopped instead (microlp's node limit, seconds each, and not monotone: a share
/// it stops on may be followed by a smaller one it solves and a smaller one still it stops on
/// again), it doubles `k` until a plan and halves the interval to the fewest dropped that
/// gave one.
fn fewest_dropped<T>(
    asked: usize,
    mut attempt: impl FnMut(usize) -> Option<Outcome<T>>,
) -> Option<Option<(usize, T)>> {
    let mut s = Search { solves: 0, best: None, failed: BTreeMap::new() };
    // Doubling while infeasible: `infeasible` the largest k proven so, `open` the first try
    // that was not.
    let mut infeasible: Option<usize> = None;
    let mut open: Option<usize> = None;
    let mut step = 1;
    while s.solves < POOL_SOLVES {
        let k = infeasible.map_or(0, |f| (f + step).min(asked));
        if s.run(k, &mut attempt)? == Seen::Infeasible {
            infeasible = Some(k);
            if k == asked {
                return Some(None);
            }
            step *= 2;
        } else {
            open = Some(k);
            break;
        }
    }
    // Halving to the first k not proven infeasible.
    while let Some(hi) = open {
        let lo = infeasible.map_or(0, |f| f + 1);
        if lo >= hi || s.solves >= POOL_SOLVES {
            break;
        }
        let mid = lo + (hi - lo) / 2;
        if s.run(mid, &mut attempt)? == Seen::Infeasible {
            infeasible = Some(mid);
        } else {
            open = Some(mid);
        }
    }
    // From there, the fewest dropped that gives a plan: doubling past the stops, then halving.
    let Some(mut failed) = open else { return Some(s.best) };
    let mut step = 1;
    while s.solves < POOL_SOLVES && s.best_k().is_none_or(|j| j > failed + 1) {
        let k = (failed + step).min(asked);
        if k <= failed || s.best_k().is_some_and(|j| k >= j) {
            break;
        }
        if s.run(k, &mut attempt)? == Seen::Plan {
            break;
        }
        failed = k;
        step *= 2;
    }
    while let Some(hi) = s.best_k() {
        if hi <= failed + 1 || s.solves >= POOL_SOLVES {
            break;
        }
        let mid = failed + (hi - failed) / 2;
        if s.run(mid, &mut attempt)? != Seen::Plan {
            failed = mid;
        }
    }
    Some(s.best)
}

/// What one try of [`fewest_dropped`] saw.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Seen {
    Plan,
    Infeasible,
    Stopped,
}

/// The state of [`fewest_dropped`]: programs solved, the plan with fewest dropped so far, and
/// the counts already tried without a plan (not solved twice).
struct Search<T> {
    solves: usize,
    best: Option<(usize, T)>,
    failed: BTreeMap<usize, Seen>,
}

impl<T> Search<T> {
    fn best_k(&self) -> Option<usize> {
        self.best.as_ref().map(|(k, _)| *k)
    }

    /// `attempt(k)`, unless `k` was tried already; `None` where it says the pool makes no
    /// problem of its own.
    fn run(&mut self, k: usize, attempt: &mut impl FnMut(usize) -> Option<Outcome<T>>) -> Option<Seen> {
        if self.best_k() == Some(k) {
            return Some(Seen::Plan);
        }
        if let Some(seen) = self.failed.get(&k) {
            return Some(*seen);
        }
        self.solves += 1;
        Some(match attempt(k)? {
            Outcome::Plan(x) => {
                if self.best_k().is_none_or(|j| k < j) {
                    self.best = Some((k, x));
                }
                Seen::Plan
            }
            Outcome::Infeasible => *self.failed.entry(k).or_insert(Seen::Infeasible),
            Outcome::Stopped => *self.failed.entry(k).or_insert(Seen::Stopped),
        })
    }
}

/// Pools of at most this many nodes are solved whole by [`pool_by_pool`]; larger ones in
/// chunks of [`CHUNK_NODES`] nodes. On the 100-GPU six-type stress fleet "mixed, priced", fill
/// 0.7, seed 2, microlp stopped at its node limit on nearly every share of a pool of 5 and of
/// 11 nodes with every row, tens of programs of seconds each, where on pools of one to three
/// nodes it stopped on a few shares only (docs/benchmarks.md).
pub(crate) const WHOLE_POOL_NODES: usize = 3;

/// Nodes of a chunk of a larger pool ([`WHOLE_POOL_NODES`]).
const CHUNK_NODES: usize = 2;

/// A group of nodes (pool, node) and its part of a pool's share, per model ([`chunks`]).
type Chunk = (Vec<(usize, usize)>, BTreeMap<usize, i64>);

/// The nodes of pool `pi` (of `count` nodes) in the groups [`pool_by_pool`] solves, each with
/// its part of the pool's share `share`: the pool whole where it is small, else chunks of
/// [`CHUNK_NODES`] nodes, the share dealt node by node (each model's replicas in turn, one to
/// a node, going on from where the last model stopped), so that each chunk gets a part as
/// even as whole replicas allow and a `spread: node` model one replica a node.
fn chunks(pi: usize, count: usize, share: &BTreeMap<usize, i64>) -> Vec<Chunk> {
    let nodes: Vec<(usize, usize)> = (0..count).map(|ni| (pi, ni)).collect();
    if count <= WHOLE_POOL_NODES {
        return vec![(nodes, share.clone())];
    }
    let mut out: Vec<Chunk> = nodes.chunks(CHUNK_NODES).map(|c| (c.to_vec(), BTreeMap::new())).collect();
    let mut next = 0usize;
    for (&m, &n) in share {
        for _ in 0..n.max(0) {
            if let Some((_, part)) = out.get_mut((next % count) / CHUNK_NODES) {
                *part.entry(m).or_insert(0) += 1;
            }
            next += 1;
        }
    }
    out
}

/// A pool's share and the replicas offered to it from earlier pools, per model.
type Ask = (BTreeMap<usize, i64>, BTreeMap<usize, i64>);

/// `share` and `offered` with `k` replicas taken away, one at a time: of the replicas
/// offered first, else of the share; each time of the model with the most, the lowest index
/// among equals. Deterministic, so the same `k` always drops the same replicas.
fn dropped(share: &BTreeMap<usize, i64>, offered: &BTreeMap<usize, i64>, k: usize) -> Ask {
    let (mut share, mut offered) = (share.clone(), offered.clone());
    let most = |x: &BTreeMap<usize, i64>| {
        x.iter().filter(|e| *e.1 > 0).max_by_key(|&(&m, &n)| (n, std::cmp::Reverse(m))).map(|e| *e.0)
    };
    for _ in 0..k {
        if let Some(m) = most(&offered) {
            *offered.entry(m).or_insert(0) -= 1;
        } else if let Some(m) = most(&share) {
            *share.entry(m).or_insert(0) -= 1;
        } else {
            break;
        }
    }
    (share, offered)
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
/// replicas it runs there and those `extra` adds (per model; a negative count takes replicas
/// away), with its options on those nodes. `None` where a node is left out (module header) or
/// a model would ask for fewer than none.
fn neighbourhood<'a>(
    problem: &Problem<'a>,
    a: &Assignment,
    nodes: &[(usize, usize)],
    extra: &BTreeMap<usize, i64>,
) -> Option<Problem<'a>> {
    let mut demand = vec![0i64; problem.models.len()];
    for (&m, &n) in extra {
        *demand.get_mut(m)? += n;
    }
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
            *demand.get_mut(m)? += i64::from(n);
        }
        pools.push(per_node::one_node_pool(pool, pool.node_name(ni)));
    }
    let demand: Vec<u32> = demand.into_iter().map(u32::try_from).collect::<Result<_, _>>().ok()?;
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

/// `a` with `nodes` replaced by a solution of their problem `sub` (uncapped: the cost may
/// grow) laid out; `None` where the program or its lay-out finds none. The completion's
/// neighbourhoods ([`placed_somewhere`], [`ejected`]).
fn rewritten(
    problem: &Problem<'_>,
    a: &Assignment,
    nodes: &[(usize, usize)],
    sub: &Problem<'_>,
) -> Option<Assignment> {
    let r = milp::solve_repack(sub, None).ok()?;
    replaced(problem, a, nodes, sub, &lay_out(sub, &r)?)
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
    let r = milp::solve_repack(sub, Some(now - step(problem, nodes) + 1e-6));
    let r = r.ok()?;
    if r.cost >= now - COST_EPSILON {
        return None;
    }
    let laid = lay_out(sub, &r)?;
    if laid.cost(sub) >= now - COST_EPSILON {
        return None;
    }
    replaced(problem, a, nodes, sub, &laid)
}

/// The counts of a neighbourhood's program laid out on its nodes by the decompositions that
/// solve no program of their own (the cascade's assignment program took up to 20 s on a pair
/// of A100 nodes): exact, without the `spread: gpu` rule at placement and then made to pass
/// it, or with first fit for what finds no room; the cheapest.
fn lay_out(sub: &Problem<'_>, r: &milp::MilpResult) -> Option<Assignment> {
    [
        assign::decompose(sub, &r.counts, &r.replicas, false),
        assign::decompose_unguarded(sub, &r.counts, &r.replicas),
        assign::decompose(sub, &r.counts, &r.replicas, true),
    ]
    .into_iter()
    .flatten()
    .reduce(|a, b| if b.cost(sub) < a.cost(sub) - COST_EPSILON { b } else { a })
}

/// `a` with each of `nodes` replaced by its node of `laid`, a plan of their problem `sub`, and
/// the replica counts moved with them.
fn replaced(
    problem: &Problem<'_>,
    a: &Assignment,
    nodes: &[(usize, usize)],
    sub: &Problem<'_>,
    laid: &Assignment,
) -> Option<Assignment> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The outcome of dropping `k` replicas in a made-up pool: infeasible below `frontier`,
    /// the solver stopping on the counts in `stops`, a plan elsewhere.
    fn pool(frontier: usize, stops: &[usize]) -> impl FnMut(usize) -> Option<Outcome<usize>> + '_ {
        move |k| {
            Some(if k < frontier {
                Outcome::Infeasible
            } else if stops.contains(&k) {
                Outcome::Stopped
            } else {
                Outcome::Plan(k)
            })
        }
    }

    #[test]
    fn the_fewest_replicas_dropped_are_found_by_doubling_and_halving() {
        for frontier in [0, 1, 2, 7, 100, 299, 300] {
            let mut tried = Vec::new();
            let mut p = pool(frontier, &[]);
            let found = fewest_dropped(300, |k| {
                tried.push(k);
                p(k)
            });
            assert_eq!(found, Some(Some((frontier, frontier))));
            assert!(tried.len() <= 2 * 9 + 1, "{frontier}: {} programs", tried.len());
        }
    }

    #[test]
    fn the_search_goes_past_the_counts_the_solver_stops_on() {
        // Infeasible below 40, the solver stops on 40 to 45 and on 47, a plan from 46 on.
        let stops = [40, 41, 42, 43, 44, 45, 47];
        let found = fewest_dropped(300, pool(40, &stops));
        assert_eq!(found.and_then(|f| f.map(|(k, _)| k)), Some(46));
    }

    #[test]
    fn a_pool_that_holds_nothing_takes_nothing_and_no_count_is_solved_twice() {
        let mut tried = Vec::new();
        let found = fewest_dropped(20, |k| {
            tried.push(k);
            Some(if k == 20 { Outcome::Plan(()) } else { Outcome::<()>::Stopped })
        });
        assert_eq!(found.and_then(|f| f.map(|(k, _)| k)), Some(20));
        let mut unique = tried.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), tried.len(), "{tried:?}");
        // A pool whose nodes make no problem of their own ends the search.
        assert!(fewest_dropped(20, |_| None::<Outcome<()>>).is_none());
    }

    #[test]
    fn a_large_pool_is_dealt_in_chunks_one_replica_a_node_in_turn() {
        let share = BTreeMap::from([(0, 5), (1, 2), (2, 4)]);
        let whole = chunks(1, WHOLE_POOL_NODES, &share);
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].1, share);
        let parts = chunks(1, 5, &share);
        let nodes: Vec<Vec<(usize, usize)>> = parts.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(nodes, vec![vec![(1, 0), (1, 1)], vec![(1, 2), (1, 3)], vec![(1, 4)]]);
        // Model 0 one a node; model 1 on nodes 0 and 1; model 2 on nodes 2, 3, 4 and 0.
        let got: Vec<BTreeMap<usize, i64>> = parts.into_iter().map(|(_, s)| s).collect();
        assert_eq!(
            got,
            vec![
                BTreeMap::from([(0, 2), (1, 2), (2, 1)]),
                BTreeMap::from([(0, 2), (2, 2)]),
                BTreeMap::from([(0, 1), (2, 1)]),
            ]
        );
    }
}
