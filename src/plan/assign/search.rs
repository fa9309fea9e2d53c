//! Backtracking searches: first-fit-decreasing with backtracking ([`ffd_search`]) and the
//! layout of the optimiser's replica choices by backtracking ([`decompose_search`]).

use std::collections::BTreeMap;

use crate::plan::assign::ffd::ffd_items;
use crate::plan::assign::{Assignment, Dev, NodeA, PoolA, dev_hosts, empty, trim, ts_room};
use crate::plan::problem::{Kind, Need, PoolCtx, Problem, Share};
use crate::spec::Spread;

/// Replicas the backtracking search handles at most; larger inputs keep the greedy result.
const SEARCH_MAX_REPLICAS: usize = 512;

/// Placements the backtracking search tries at most (a step count, not a clock: deterministic).
const SEARCH_STEPS: u32 = 20_000;

/// What the backtracking search places: per replica, its model and the (pool, kind) choices to
/// try in order.
type SearchItem = (usize, Vec<(usize, Kind)>);

/// First-fit-decreasing with backtracking, for when the greedy pass ([`ffd`]) fails on node
/// sharing rules or spread: the same replicas in the same order, each trying every option of its
/// model (time-slices of MIG instances included) on every device with room, and undoing earlier
/// choices when a later replica finds none. Its first path is the greedy one. Bounded by
/// [`SEARCH_STEPS`]; `None` when that is not enough or nothing fits.
///
/// On failure, says which model's replica the deepest attempt could not place, and whether the
/// search was exhaustive (then no plan exists at all).
pub(crate) fn ffd_search(problem: &Problem<'_>) -> Result<Assignment, Stuck> {
    let items: Vec<SearchItem> = ffd_items(problem, true)
        .ok_or(Stuck { model: None, proven: false })?
        .into_iter()
        .map(|(_, m, c)| (m, c))
        .collect();
    // Every option of every model is tried, so an exhausted search proves that no plan exists;
    // not so with rate models, whose replica count the greedy choice fixes.
    let complete = problem.models.iter().all(|m| matches!(m.need, Need::Replicas(_)));
    search(problem, &items, f64::INFINITY).map_err(|s| Stuck { proven: s.proven && complete, ..s })
}

/// Why a backtracking search found no assignment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stuck {
    /// The model whose replica the deepest attempt could not place.
    pub model: Option<usize>,
    /// Whether every placement was tried (the step limit was not reached).
    pub proven: bool,
}

/// Lays out the optimiser's replica choices by backtracking, when [`decompose`] (which fixes
/// devices to nodes before placing replicas) fails: each replica, the most constrained first,
/// goes to a device with room or opens one (any valid MIG layout, any node whose sharing class
/// allows it), never exceeding the optimiser's cost `cap`. `None` when the search finds nothing
/// within [`SEARCH_STEPS`].
pub(crate) fn decompose_search(
    problem: &Problem<'_>,
    replicas: &BTreeMap<(usize, usize, Kind), u32>,
    cap: f64,
) -> Option<Assignment> {
    let size = |m: usize, pi: usize, kind: Kind| {
        problem.models[m].options.iter().find(|o| o.pool == pi && o.kind == kind).map_or(1.0, |o| o.size)
    };
    let mut items: Vec<(Spread, f64, usize, SearchItem)> = Vec::new();
    for (&(m, pi, kind), &n) in replicas {
        let spread = problem.models.get(m).map_or(Spread::None, |x| x.spec.spread);
        for _ in 0..n {
            items.push((spread, size(m, pi, kind), m, (m, vec![(pi, kind)])));
        }
    }
    // Spread models first (fewest places), then larger replicas; ties by model and kind.
    items.sort_by(|x, y| y.0.cmp(&x.0).then(y.1.total_cmp(&x.1)).then(x.2.cmp(&y.2)).then(x.3.1.cmp(&y.3.1)));
    let items: Vec<SearchItem> = items.into_iter().map(|(.., i)| i).collect();
    search(problem, &items, cap).ok()
}

/// Replicas up to which [`improve`] searches.
const IMPROVE_MAX_REPLICAS: usize = 16;

/// On small inputs (at most [`IMPROVE_MAX_REPLICAS`] replicas), a plan cheaper than `a`, found
/// by first-fit-decreasing with backtracking over every option of every replica (the
/// optimiser's model aggregates some node-level rules, e.g. the combined compute of
/// time-sliced tenants, so its counts may not lay out where another choice of options would),
/// each run capped below the best cost found so far. `None` when none is found within the step
/// limit.
pub(crate) fn improve(problem: &Problem<'_>, a: &Assignment) -> Option<Assignment> {
    let items: Vec<SearchItem> = ffd_items(problem, true)?.into_iter().map(|(_, m, c)| (m, c)).collect();
    if items.len() > IMPROVE_MAX_REPLICAS {
        return None;
    }
    let mut best: Option<Assignment> = None;
    let mut cap = a.cost(problem) - 1e-6;
    while let Ok(b) = search(problem, &items, cap) {
        cap = b.cost(problem) - 1e-6;
        best = Some(b);
    }
    best
}

fn search(problem: &Problem<'_>, items: &[SearchItem], cap: f64) -> Result<Assignment, Stuck> {
    if items.len() > SEARCH_MAX_REPLICAS {
        return Err(Stuck { model: None, proven: false });
    }
    let mut a = empty(problem, |i| problem.pools[i].max_nodes as usize);
    let mut state = Search { problem, steps: SEARCH_STEPS, cap, cost: 0.0, deepest: 0 };
    if !state.go(&mut a, items, 0) {
        return Err(Stuck { model: items.get(state.deepest).map(|i| i.0), proven: state.steps > 0 });
    }
    trim(problem, &mut a);
    Ok(a)
}

struct Search<'p, 'a> {
    problem: &'p Problem<'a>,
    steps: u32,
    cap: f64,
    cost: f64,
    /// The furthest item any attempt reached (the first it could not place).
    deepest: usize,
}

impl Search<'_, '_> {
    fn go(&mut self, a: &mut Assignment, items: &[SearchItem], i: usize) -> bool {
        let Some((m, choices)) = items.get(i) else { return true };
        let m = *m;
        self.deepest = self.deepest.max(i);
        for &(pi, kind) in choices {
            let (Some(pool), Some(pa)) = (self.problem.pools.get(pi), a.pools.get(pi)) else { continue };
            let weight = pool.weight;
            for (ni, node) in candidates(self.problem, pa, pi, m, kind) {
                if self.steps == 0 {
                    return false;
                }
                self.steps -= 1;
                let before = a.pools[pi].nodes[ni].gpus_used();
                let delta = (node.gpus_used() as f64 - before as f64) * weight;
                if self.cost + delta > self.cap + 1e-9 {
                    continue;
                }
                let old = std::mem::replace(&mut a.pools[pi].nodes[ni], node);
                self.cost += delta;
                *a.replicas.entry((m, pi, kind)).or_insert(0) += 1;
                if self.go(a, items, i + 1) {
                    return true;
                }
                a.pools[pi].nodes[ni] = old;
                self.cost -= delta;
                if let Some(n) = a.replicas.get_mut(&(m, pi, kind)) {
                    *n -= 1;
                    if *n == 0 {
                        a.replicas.remove(&(m, pi, kind));
                    }
                }
            }
        }
        false
    }
}

/// Every way to place one replica of model `m` with `kind` in pool `pi`, as (node, new node
/// state), in first-fit order: devices with room first, then extended MIG layouts, then a new
/// device. Nodes after the first empty one are skipped (they are alike), and placements that
/// leave a node in the same state up to GPU order are listed once. Honours the node sharing
/// rules (one class of `nvidia.com/gpu` per node, one k; MIG time-slicing nodes hold only GPUs
/// of their profile and k) and spread.
fn candidates(problem: &Problem<'_>, pa: &PoolA, pi: usize, m: usize, kind: Kind) -> Vec<(usize, NodeA)> {
    let Some(pool) = problem.pools.get(pi) else { return Vec::new() };
    let spread = problem.models.get(m).map_or(Spread::None, |x| x.spec.spread);
    let limit = pa.nodes.iter().position(|n| !n.used()).map_or(pa.nodes.len(), |e| e + 1);
    let at = Candidate { problem, pool, pi, m, spread };
    // (pass, node, state): sorted by pass so that the order is the greedy one.
    let mut out: Vec<(u8, usize, NodeA)> = Vec::new();
    for (ni, n) in pa.nodes.iter().enumerate().take(limit) {
        if spread == Spread::Node && n.hosts(m) {
            continue;
        }
        let states = match kind {
            Kind::Whole(count) => at.whole(n, count as usize),
            Kind::TimeSliced(k) => at.time_sliced(n, k),
            Kind::MigTs(q, k) => at.mig_ts(n, q, k),
            Kind::Mig(q) => at.mig(n, q),
        };
        let mut seen: Vec<Vec<Dev>> = Vec::new();
        for (pass, node) in states {
            if problem.mig_spread_models && !node.mig_spread_ok(problem) {
                continue;
            }
            let mut key = node.gpus.clone();
            key.sort_by_key(|d| format!("{d:?}"));
            if !seen.contains(&key) {
                seen.push(key);
                out.push((pass, ni, node));
            }
        }
    }
    out.sort_by_key(|x| x.0);
    out.into_iter().map(|(_, ni, node)| (ni, node)).collect()
}

/// One replica of model `m` (its `spread`) in pool `pi`, whose placements [`candidates`] lists:
/// each method gives one node's new states as (pass, state), in first-fit order.
struct Candidate<'p, 'a> {
    problem: &'p Problem<'a>,
    pool: &'p PoolCtx<'a>,
    pi: usize,
    m: usize,
    spread: Spread,
}

impl Candidate<'_, '_> {
    fn whole(&self, n: &NodeA, count: usize) -> Vec<(u8, NodeA)> {
        if n.ts_k().is_some() || n.has_mig_ts() {
            return Vec::new();
        }
        let free: Vec<usize> = n
            .gpus
            .iter()
            .enumerate()
            .filter(|(_, d)| **d == Dev::Unused)
            .map(|(i, _)| i)
            .take(count)
            .collect();
        if free.len() != count {
            return Vec::new();
        }
        let mut node = n.clone();
        for i in free {
            node.gpus[i] = Dev::Whole { tenant: Some(self.m) };
        }
        vec![(0, node)]
    }

    fn time_sliced(&self, n: &NodeA, k: Share) -> Vec<(u8, NodeA)> {
        let (problem, pi, m, spread) = (self.problem, self.pi, self.m, self.spread);
        let mut out = Vec::new();
        if spread == Spread::Gpu && n.hosts_shared(m) {
            return out;
        }
        for (gi, d) in n.gpus.iter().enumerate() {
            if let Dev::Ts { k: dk, tenants } = d
                && *dk == k
                && (tenants.len() as u32) < k.k
                && (spread == Spread::None || !tenants.contains(&m))
            {
                let mut node = n.clone();
                if let Dev::Ts { tenants, .. } = &mut node.gpus[gi] {
                    tenants.push(m);
                }
                if ts_room(problem, pi, n, m, k) {
                    out.push((0, node));
                }
            }
        }
        if let Some(gi) = n.gpus.iter().position(|d| *d == Dev::Unused)
            && !n.has_whole()
            && !n.has_mig_ts()
            && n.ts_k().is_none_or(|x| x == k)
            && ts_room(problem, pi, n, m, k)
        {
            let mut node = n.clone();
            node.gpus[gi] = Dev::Ts { k, tenants: vec![m] };
            out.push((1, node));
        }
        out
    }

    fn mig_ts(&self, n: &NodeA, q: usize, k: u32) -> Vec<(u8, NodeA)> {
        let (m, spread) = (self.m, self.spread);
        let mut out = Vec::new();
        if spread == Spread::Gpu && n.hosts_shared(m) {
            return out;
        }
        let slots = |counts: &[u8]| u64::from(k) * u64::from(counts.get(q).copied().unwrap_or(0));
        for (gi, d) in n.gpus.iter().enumerate() {
            if let Dev::MigTs { q: dq, k: dk, counts, tenants, .. } = d
                && *dq == q
                && *dk == k
                && (tenants.len() as u64) < slots(counts)
                && (spread == Spread::None || !dev_hosts(d, m))
            {
                let mut node = n.clone();
                if let Dev::MigTs { tenants, .. } = &mut node.gpus[gi] {
                    tenants.push(m);
                }
                out.push((0, node));
            }
        }
        let only_this = n.gpus.iter().all(|d| match d {
            Dev::Unused => true,
            Dev::MigTs { q: dq, k: dk, .. } => *dq == q && *dk == k,
            _ => false,
        });
        let per_gpu = self.pool.homogeneous.get(q).copied().unwrap_or(0);
        if let Some(gi) = n.gpus.iter().position(|d| *d == Dev::Unused)
            && only_this
            && per_gpu > 0
        {
            let mut counts = vec![0u8; self.pool.profiles.len()];
            if let Some(x) = counts.get_mut(q) {
                *x = per_gpu;
            }
            let mut node = n.clone();
            node.gpus[gi] = Dev::MigTs { q, k, counts, tenants: vec![m], excl: Vec::new() };
            out.push((1, node));
        }
        out
    }

    fn mig(&self, n: &NodeA, q: usize) -> Vec<(u8, NodeA)> {
        let (pool, m, spread) = (self.pool, self.m, self.spread);
        let mut out = Vec::new();
        // On a node that time-slices a MIG profile, only the other profiles' instances
        // of its GPUs are exclusive; no other GPU is opened there.
        let mig_ts_node = n.has_mig_ts();
        if mig_ts_node && !self.problem.small {
            return out;
        }
        for (gi, d) in n.gpus.iter().enumerate() {
            let (Dev::Mig { counts, tenants } | Dev::MigTs { counts, excl: tenants, .. }) = d else {
                continue;
            };
            if matches!(d, Dev::MigTs { q: shared, .. } if *shared == q) {
                continue;
            }
            if spread != Spread::None && dev_hosts(d, m) {
                continue;
            }
            let used = tenants.iter().filter(|&&(p, _)| p == q).count();
            let have = usize::from(counts.get(q).copied().unwrap_or(0));
            let mut node = n.clone();
            let (Dev::Mig { counts: nc, tenants: nt } | Dev::MigTs { counts: nc, excl: nt, .. }) =
                &mut node.gpus[gi]
            else {
                continue;
            };
            if used < have {
                nt.push((q, m));
                out.push((0, node));
            } else {
                let mut c = nc.clone();
                if let Some(x) = c.get_mut(q) {
                    *x += 1;
                }
                if pool.fits(&c) {
                    *nc = c;
                    nt.push((q, m));
                    out.push((1, node));
                }
            }
        }
        if let Some(gi) = n.gpus.iter().position(|d| *d == Dev::Unused).filter(|_| !mig_ts_node) {
            let mut c = vec![0u8; pool.profiles.len()];
            if let Some(x) = c.get_mut(q) {
                *x = 1;
            }
            if pool.fits(&c) {
                let mut node = n.clone();
                node.gpus[gi] = Dev::Mig { counts: c, tenants: vec![(q, m)] };
                out.push((2, node));
            }
        }
        out
    }
}
