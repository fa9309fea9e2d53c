//! Concrete assignments: every GPU of every node with its mode and tenants, and the one routine
//! that places a replica on a device while respecting the node sharing rules and spread.
//!
//! In: a [`Problem`]. Out: an [`Assignment`] built either by first-fit-decreasing ([`ffd`]) or by
//! decomposing the optimiser's per-pool counts ([`decompose`]) — the same type, so that the plan
//! builder and the comparison with the baseline treat both alike. When the greedy routines fail
//! on node sharing rules or spread, [`decompose_search`] and [`ffd_search`] backtrack over
//! nodes, devices and (for first-fit) each replica's options, bounded by a step count.
//!
//! Guarantees of every assignment built here: a node never mixes exclusive and time-sliced whole
//! GPUs, all time-sliced GPUs of a node share one replica count, every MIG GPU holds a valid
//! layout, spread is honoured, and no node or GPU beyond the pool's capacity is used.

use std::collections::BTreeMap;

use crate::plan::layouts;
use crate::plan::problem::{Kind, Need, Problem};
use crate::spec::Spread;

/// One GPU's state.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Dev {
    Unused,
    /// MIG disabled, exclusive; `tenant` is the model (also on every GPU of a multi-GPU replica).
    Whole {
        tenant: Option<usize>,
    },
    /// MIG disabled, time-sliced with `k` replicas.
    Ts {
        k: u32,
        tenants: Vec<usize>,
    },
    /// MIG enabled: instance counts per usable profile, and (profile, model) per used instance.
    Mig {
        counts: Vec<u8>,
        tenants: Vec<(usize, usize)>,
    },
    /// MIG enabled with only instances of profile `q`, each time-sliced with `k` replicas.
    MigTs {
        q: usize,
        k: u32,
        counts: Vec<u8>,
        tenants: Vec<usize>,
    },
}

#[derive(Clone, Debug, Default)]
pub(crate) struct NodeA {
    pub gpus: Vec<Dev>,
}

impl NodeA {
    fn new(gpn: u32) -> Self {
        Self { gpus: vec![Dev::Unused; gpn as usize] }
    }

    fn has_whole(&self) -> bool {
        self.gpus.iter().any(|d| matches!(d, Dev::Whole { .. }))
    }

    /// The time-slicing replica count of this node's whole GPUs, if any is time-sliced.
    fn ts_k(&self) -> Option<u32> {
        self.gpus.iter().find_map(|d| if let Dev::Ts { k, .. } = d { Some(*k) } else { None })
    }

    fn hosts(&self, m: usize) -> bool {
        self.gpus.iter().any(|d| dev_hosts(d, m))
    }

    /// Whether a time-sliced device of this node (whole or MIG) serves model `m`. A node has
    /// one time-sliced resource at most (one k for whole GPUs; MIG time-slicing nodes hold one
    /// profile), so this is "on the same shared resource".
    fn hosts_shared(&self, m: usize) -> bool {
        self.gpus.iter().any(|d| matches!(d, Dev::Ts { .. } | Dev::MigTs { .. }) && dev_hosts(d, m))
    }

    /// Whether the node is reserved for time-sliced MIG instances of one profile.
    fn has_mig_ts(&self) -> bool {
        self.gpus.iter().any(|d| matches!(d, Dev::MigTs { .. }))
    }

    fn gpus_used(&self) -> usize {
        self.gpus.iter().filter(|d| **d != Dev::Unused).count()
    }

    pub fn used(&self) -> bool {
        self.gpus.iter().any(|d| *d != Dev::Unused)
    }
}

fn dev_hosts(d: &Dev, m: usize) -> bool {
    match d {
        Dev::Unused => false,
        Dev::Whole { tenant } => *tenant == Some(m),
        Dev::Ts { tenants, .. } => tenants.contains(&m),
        Dev::Mig { tenants, .. } => tenants.iter().any(|&(_, t)| t == m),
        Dev::MigTs { tenants, .. } => tenants.contains(&m),
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct PoolA {
    pub nodes: Vec<NodeA>,
}

/// Every pool's nodes and GPUs, and per model how many replicas run with which option.
#[derive(Clone, Debug, Default)]
pub(crate) struct Assignment {
    pub pools: Vec<PoolA>,
    /// (model, pool, kind) → replicas.
    pub replicas: BTreeMap<(usize, usize, Kind), u32>,
    /// Replicas that [`decompose`] in repair mode placed by first fit (0 for other assignments).
    pub repaired: u32,
}

impl Assignment {
    pub fn gpus_used(&self) -> u64 {
        self.pools.iter().flat_map(|p| &p.nodes).flat_map(|n| &n.gpus).filter(|d| **d != Dev::Unused).count()
            as u64
    }

    pub fn cost(&self, problem: &Problem<'_>) -> f64 {
        self.pools
            .iter()
            .zip(&problem.pools)
            .map(|(a, p)| {
                let used = a.nodes.iter().flat_map(|n| &n.gpus).filter(|d| **d != Dev::Unused).count();
                used as f64 * p.weight
            })
            .sum()
    }
}

/// How freely [`place`] may change devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Only use devices already configured (decomposition).
    Fixed,
    /// Configure unused GPUs and extend MIG layouts (first-fit).
    Grow,
}

/// Places one replica of model `m` with `kind` in pool `pi`. Returns whether it found room.
pub(crate) fn place(
    problem: &Problem<'_>,
    a: &mut Assignment,
    m: usize,
    pi: usize,
    kind: Kind,
    mode: Mode,
    node_limit: usize,
) -> bool {
    let Some(pool) = problem.pools.get(pi) else { return false };
    let spread = problem.models.get(m).map_or(Spread::None, |x| x.spec.spread);
    let Some(pa) = a.pools.get_mut(pi) else { return false };
    let mut limit = node_limit.min(pa.nodes.len());
    if mode == Mode::Grow {
        // Nodes after the first empty one are all empty: looking at one of them is enough.
        if let Some(first_empty) = pa.nodes.iter().take(limit).position(|n| !n.used()) {
            limit = limit.min(first_empty + 1);
        }
    }
    let node_ok = |n: &NodeA| spread != Spread::Node || !n.hosts(m);
    let gpu_ok = |d: &Dev| spread == Spread::None || !dev_hosts(d, m);
    match kind {
        Kind::Whole(count) => {
            let count = count as usize;
            for n in pa.nodes.iter_mut().take(limit) {
                if !node_ok(n) || n.ts_k().is_some() || n.has_mig_ts() {
                    continue;
                }
                let free: Vec<usize> = n
                    .gpus
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| match mode {
                        Mode::Fixed => **d == Dev::Whole { tenant: None },
                        Mode::Grow => **d == Dev::Unused,
                    })
                    .map(|(i, _)| i)
                    .take(count)
                    .collect();
                if free.len() == count {
                    for i in free {
                        n.gpus[i] = Dev::Whole { tenant: Some(m) };
                    }
                    return true;
                }
            }
            false
        }
        Kind::TimeSliced(k) => {
            // A time-sliced GPU with a free slot first, then (growing) a new one.
            for pass in 0..2 {
                if pass == 1 && mode == Mode::Fixed {
                    break;
                }
                for n in pa.nodes.iter_mut().take(limit) {
                    // Under `spread: gpu` one time-sliced replica per node: the device plugin,
                    // not gpuplan, picks the physical GPU behind a shared resource.
                    if !node_ok(n) || (spread == Spread::Gpu && n.hosts_shared(m)) {
                        continue;
                    }
                    if pass == 1 && (n.has_whole() || n.has_mig_ts() || n.ts_k().is_some_and(|x| x != k)) {
                        continue;
                    }
                    for d in n.gpus.iter_mut() {
                        match d {
                            Dev::Ts { k: dk, tenants }
                                if pass == 0 && *dk == k && (tenants.len() as u32) < k =>
                            {
                                if spread != Spread::None && tenants.contains(&m) {
                                    continue;
                                }
                                tenants.push(m);
                                return true;
                            }
                            Dev::Unused if pass == 1 => {
                                *d = Dev::Ts { k, tenants: vec![m] };
                                return true;
                            }
                            _ => {}
                        }
                    }
                }
            }
            false
        }
        Kind::MigTs(q, k) => {
            // Only configured GPUs (the first-fit baseline does not time-slice MIG instances).
            for n in pa.nodes.iter_mut().take(limit) {
                if !node_ok(n) || (spread == Spread::Gpu && n.hosts_shared(m)) {
                    continue;
                }
                for d in n.gpus.iter_mut() {
                    if let Dev::MigTs { q: dq, k: dk, counts, tenants } = d
                        && *dq == q
                        && *dk == k
                        && (tenants.len() as u64)
                            < u64::from(k) * u64::from(counts.get(q).copied().unwrap_or(0))
                        && (spread == Spread::None || !tenants.contains(&m))
                    {
                        tenants.push(m);
                        return true;
                    }
                }
            }
            false
        }
        Kind::Mig(q) => {
            // A free instance first, then (growing) an extended layout, then a new MIG GPU.
            for pass in 0..3 {
                if pass > 0 && mode == Mode::Fixed {
                    break;
                }
                for n in pa.nodes.iter_mut().take(limit) {
                    if !node_ok(n) || n.has_mig_ts() {
                        continue;
                    }
                    for d in n.gpus.iter_mut() {
                        if !gpu_ok(d) {
                            continue;
                        }
                        match d {
                            Dev::Mig { counts, tenants } if pass < 2 => {
                                let used = tenants.iter().filter(|&&(p, _)| p == q).count();
                                let have = usize::from(counts.get(q).copied().unwrap_or(0));
                                if pass == 0 && used < have {
                                    tenants.push((q, m));
                                    return true;
                                }
                                if pass == 1 && used >= have {
                                    let mut c = counts.clone();
                                    if let Some(x) = c.get_mut(q) {
                                        *x += 1;
                                    }
                                    if pool.fits(&c) {
                                        *counts = c;
                                        tenants.push((q, m));
                                        return true;
                                    }
                                }
                            }
                            Dev::Unused if pass == 2 => {
                                let mut c = vec![0u8; pool.profiles.len()];
                                if let Some(x) = c.get_mut(q) {
                                    *x = 1;
                                }
                                if !pool.fits(&c) {
                                    return false;
                                }
                                *d = Dev::Mig { counts: c, tenants: vec![(q, m)] };
                                return true;
                            }
                            _ => {}
                        }
                    }
                }
            }
            false
        }
    }
}

fn empty(problem: &Problem<'_>, nodes_per_pool: impl Fn(usize) -> usize) -> Assignment {
    Assignment {
        pools: problem
            .pools
            .iter()
            .enumerate()
            .map(|(i, p)| PoolA { nodes: (0..nodes_per_pool(i)).map(|_| NodeA::new(p.gpn)).collect() })
            .collect(),
        replicas: BTreeMap::new(),
        repaired: 0,
    }
}

/// Drops MIG instances nobody uses (so that a layout shows exactly what runs, whichever
/// maximal layout the solver picked), except on GPUs that keep the layout they run today, and
/// drops trailing unused nodes of autoscaled pools (keeping the pool's minimum).
fn trim(problem: &Problem<'_>, a: &mut Assignment) {
    for (pa, p) in a.pools.iter_mut().zip(&problem.pools) {
        for (ni, node) in pa.nodes.iter_mut().enumerate() {
            let name = p.node_name(ni);
            let current = p.spec.current.iter().find(|n| n.node == name);
            for (gi, d) in node.gpus.iter_mut().enumerate() {
                let Dev::Mig { counts, tenants } = d else { continue };
                let kept = current
                    .and_then(|c| c.gpus.get(gi))
                    .and_then(|names| layouts::from_names(p.gpu, &p.profiles, names))
                    .is_some_and(|l| &l.counts == counts);
                if kept {
                    continue;
                }
                let mut used = vec![0u8; counts.len()];
                for &(q, _) in tenants.iter() {
                    if let Some(u) = used.get_mut(q) {
                        *u += 1;
                    }
                }
                if used.iter().all(|&u| u == 0) {
                    *d = Dev::Unused;
                } else {
                    *counts = used;
                }
            }
        }
    }
    for (pa, p) in a.pools.iter_mut().zip(&problem.pools) {
        if !p.autoscaled {
            continue;
        }
        while pa.nodes.len() > p.min_nodes as usize && pa.nodes.last().is_some_and(|n| !n.used()) {
            pa.nodes.pop();
        }
    }
}

/// Spread models first (they have the fewest choices), then larger replicas first.
fn model_order(problem: &Problem<'_>) -> Vec<usize> {
    let mut order: Vec<usize> = (0..problem.models.len()).collect();
    order.sort_by(|&a, &b| {
        let ma = &problem.models[a];
        let mb = &problem.models[b];
        mb.spec.spread.cmp(&ma.spec.spread).then(ma.name().cmp(mb.name()))
    });
    order
}

/// One replica to place: its size, its model and the (pool, kind) choices in order.
type Item = (f64, usize, Vec<(usize, Kind)>);

/// The replicas first-fit-decreasing places, in model order (sorted by size afterwards): each
/// model's options smallest first (rate models: as many replicas as the option with the most
/// requests per second per GPU share needs, on any option at least as fast). With `mig_ts`,
/// time-slices of MIG instances follow as last resorts (the backtracking search uses them; the
/// greedy pass does not). `None` when a model has no option.
fn ffd_items(problem: &Problem<'_>, mig_ts: bool) -> Option<Vec<Item>> {
    let mut items: Vec<Item> = Vec::new();
    let by_size = |x: &&crate::plan::problem::Opt, y: &&crate::plan::problem::Opt| {
        x.size.total_cmp(&y.size).then(x.pool.cmp(&y.pool)).then(x.kind.cmp(&y.kind))
    };
    for m in model_order(problem) {
        let mc = &problem.models[m];
        let mut opts: Vec<&crate::plan::problem::Opt> =
            mc.options.iter().filter(|o| !matches!(o.kind, Kind::MigTs(..))).collect();
        let mut last: Vec<&crate::plan::problem::Opt> =
            mc.options.iter().filter(|o| mig_ts && matches!(o.kind, Kind::MigTs(..))).collect();
        last.sort_by(by_size);
        if opts.is_empty() && last.is_empty() {
            return None;
        }
        match mc.need {
            Need::Replicas(n) => {
                opts.sort_by(by_size);
                let size = opts.first().or(last.first()).map_or(0.0, |o| o.size);
                let choices: Vec<(usize, Kind)> =
                    opts.iter().chain(&last).map(|o| (o.pool, o.kind)).collect();
                for _ in 0..n {
                    items.push((size, m, choices.clone()));
                }
            }
            Need::Rate { rps, min_replicas } => {
                let best = opts.iter().filter(|o| o.rps.is_some()).max_by(|x, y| {
                    let ex = x.rps.unwrap_or(0.0) / x.size;
                    let ey = y.rps.unwrap_or(0.0) / y.size;
                    ex.total_cmp(&ey)
                        .then(y.size.total_cmp(&x.size))
                        .then(y.pool.cmp(&x.pool))
                        .then(y.kind.cmp(&x.kind))
                })?;
                let per = best.rps.unwrap_or(0.0);
                if per <= 0.0 {
                    return None;
                }
                let n = ((rps / per - 1e-9).ceil().max(0.0) as u32).max(min_replicas);
                // Any device at least as fast will do for these replicas, smallest first.
                let mut alts: Vec<&crate::plan::problem::Opt> =
                    opts.iter().copied().filter(|o| o.rps.is_some_and(|r| r >= per)).collect();
                alts.sort_by(by_size);
                let choices: Vec<(usize, Kind)> = alts.iter().map(|o| (o.pool, o.kind)).collect();
                for _ in 0..n {
                    items.push((best.size, m, choices.clone()));
                }
            }
        }
    }
    // Stable: larger first; equal sizes keep the model order above.
    items.sort_by(|x, y| y.0.total_cmp(&x.0));
    Some(items)
}

/// First-fit-decreasing: each model takes its smallest option (rate models: the option with the
/// most requests per second per GPU share, as many replicas as the rate needs); replicas,
/// largest first, go to the first device with room, opening GPUs and nodes in order. A replica
/// that fits nowhere with its preferred option tries the model's other options, smallest first.
/// Returns `None` when some replica fits nowhere.
pub(crate) fn ffd(problem: &Problem<'_>) -> Option<Assignment> {
    let mut a = empty(problem, |i| problem.pools[i].max_nodes as usize);
    let items = ffd_items(problem, false)?;
    for (_, m, choices) in items {
        let mut placed = false;
        for &(pi, kind) in &choices {
            if place(problem, &mut a, m, pi, kind, Mode::Grow, usize::MAX) {
                *a.replicas.entry((m, pi, kind)).or_insert(0) += 1;
                placed = true;
                break;
            }
        }
        if !placed {
            return None;
        }
    }
    trim(problem, &mut a);
    Some(a)
}

/// Per-pool counts chosen by the optimiser.
#[derive(Clone, Debug, Default)]
pub(crate) struct PoolCounts {
    /// GPUs per candidate layout (same index as `PoolCtx::layouts`).
    pub layouts: Vec<u64>,
    /// Time-sliced GPUs per replica count k.
    pub ts: BTreeMap<u32, u64>,
    /// Nodes allowed to hold exclusive whole GPUs, and time-sliced GPUs per k.
    pub whole_nodes: u64,
    pub ts_nodes: BTreeMap<u32, u64>,
    /// GPUs cut into instances of one profile time-sliced with k, and their nodes, per (profile, k).
    pub mig_ts: BTreeMap<(usize, u32), u64>,
    pub mig_ts_nodes: BTreeMap<(usize, u32), u64>,
    pub nodes: u64,
}

/// Turns the optimiser's counts into concrete nodes and GPUs, then places every replica.
///
/// Devices are configured first: node classes (exclusive whole GPUs, time-sliced per k, MIG
/// time-slicing per profile and k), then multi-GPU and whole replicas, time-sliced GPUs and
/// MIG GPUs spread round robin over their eligible nodes (so that `spread` replicas find
/// distinct nodes). Then replicas go to configured devices with room, spread models first and,
/// within a model, time-sliced replicas before MIG ones.
///
/// Without `repair`, returns `None` as soon as a device or replica finds no room (the caller
/// then tries [`decompose_search`]). With `repair`, what finds no room is placed at the end by
/// first fit (any option of its model, configured room first, else a grown device), so the
/// result may cost more than the counts; `None` only if that fails too. The optimiser's spread
/// conditions are necessary, not sufficient, which is why repair exists.
pub(crate) fn decompose(
    problem: &Problem<'_>,
    counts: &[PoolCounts],
    replicas: &BTreeMap<(usize, usize, Kind), u32>,
    repair: bool,
) -> Option<Assignment> {
    let mut a = empty(problem, |i| {
        let p = &problem.pools[i];
        if !p.autoscaled {
            p.named.len()
        } else if repair {
            p.max_nodes as usize
        } else {
            counts.get(i).map_or(0, |c| c.nodes as usize).max(p.min_nodes as usize)
        }
    });
    // Replicas (model, pool, kind) the configured devices could not take, placed at the end
    // by first fit (repair mode only).
    let mut deferred: Vec<(usize, usize, Kind)> = Vec::new();
    for (pi, (pool, c)) in problem.pools.iter().zip(counts).enumerate() {
        let pa = &mut a.pools[pi];
        let used_nodes = (c.nodes as usize).min(pa.nodes.len());
        // Node classes: exclusive-whole nodes first, then time-sliced nodes per k.
        let mut class: Vec<Option<Option<u32>>> = vec![None; pa.nodes.len()];
        let mut next = 0usize;
        for _ in 0..c.whole_nodes {
            if next < used_nodes {
                class[next] = Some(None);
                next += 1;
            }
        }
        for (&k, &z) in &c.ts_nodes {
            for _ in 0..z {
                if next < used_nodes {
                    class[next] = Some(Some(k));
                    next += 1;
                }
            }
        }
        // MIG time-slicing nodes next: they hold only their GPUs of one profile and k.
        let mut mig_ts_class: Vec<bool> = vec![false; pa.nodes.len()];
        for (&(q, k), &z) in &c.mig_ts_nodes {
            let mut want = c.mig_ts.get(&(q, k)).copied().unwrap_or(0);
            let mut counts = vec![0u8; pool.profiles.len()];
            if let Some(x) = counts.get_mut(q) {
                *x = pool.homogeneous.get(q).copied().unwrap_or(0);
            }
            let first = next;
            for _ in 0..z {
                if next >= used_nodes {
                    break;
                }
                mig_ts_class[next] = true;
                class[next] = Some(Some(0));
                next += 1;
            }
            // Round robin over the class's nodes, so that each holds one (`spread` needs them).
            let mut gi = 0;
            while want > 0 && first < next && gi < pool.gpn as usize {
                for node in &mut pa.nodes[first..next] {
                    if want > 0 {
                        node.gpus[gi] = Dev::MigTs { q, k, counts: counts.clone(), tenants: Vec::new() };
                        want -= 1;
                    }
                }
                gi += 1;
            }
            if want > 0 && !repair {
                return None;
            }
        }
        // Multi-GPU replicas first (largest first), on whole nodes, reserving their GPUs.
        let mut multi: Vec<(u32, usize)> = Vec::new();
        for (&(m, p, kind), &n) in replicas {
            if p == pi
                && let Kind::Whole(g) = kind
            {
                for _ in 0..n {
                    multi.push((g, m));
                }
            }
        }
        // Largest first; among equal sizes `spread: node` models first (they need distinct
        // nodes, which the others would fill).
        let spread_of = |m: usize| problem.models.get(m).map_or(Spread::None, |x| x.spec.spread);
        multi.sort_by(|x, y| y.0.cmp(&x.0).then(spread_of(y.1).cmp(&spread_of(x.1))).then(x.1.cmp(&y.1)));
        for (g, m) in multi {
            let g = g as usize;
            let by_node = problem.models.get(m).is_some_and(|x| x.spec.spread == Spread::Node);
            let slot = (0..used_nodes).find(|&i| {
                class[i] == Some(None)
                    && !(by_node && pa.nodes[i].hosts(m))
                    && pa.nodes[i].gpus.iter().filter(|d| **d == Dev::Unused).count() >= g
            });
            let Some(slot) = slot else {
                if !repair {
                    return None;
                }
                deferred.push((m, pi, Kind::Whole(g as u32)));
                continue;
            };
            let node = &mut pa.nodes[slot];
            let mut left = g;
            for d in node.gpus.iter_mut() {
                if left > 0 && *d == Dev::Unused {
                    *d = Dev::Whole { tenant: Some(m) };
                    left -= 1;
                }
            }
        }
        for (&k, &t) in &c.ts {
            for _ in 0..t {
                // Round robin over the nodes of the class, so that every such node holds one,
                // as `spread: node` replicas need.
                let dev = Dev::Ts { k, tenants: Vec::new() };
                if !deal(&mut pa.nodes[..used_nodes], |i| class[i] == Some(Some(k)), dev) {
                    if !repair {
                        return None;
                    }
                    break; // first fit opens time-sliced GPUs where replicas need them
                }
            }
        }
        // MIG GPUs whose layout a node runs today stay where they are (no drain).
        let mut left: Vec<u64> = c.layouts.clone();
        for (ni, node) in pa.nodes.iter_mut().enumerate() {
            if mig_ts_class.get(ni).copied().unwrap_or(false) {
                continue;
            }
            let name = pool.node_name(ni);
            let Some(current) = pool.spec.current.iter().find(|n| n.node == name) else { continue };
            for (gi, names) in current.gpus.iter().enumerate() {
                if names.is_empty() || node.gpus.get(gi) != Some(&Dev::Unused) {
                    continue;
                }
                let Some(now) = layouts::from_names(pool.gpu, &pool.profiles, names) else { continue };
                if let Some(l) = pool.layouts.iter().position(|x| x.counts == now.counts)
                    && left.get(l).is_some_and(|&n| n > 0)
                {
                    left[l] -= 1;
                    node.gpus[gi] = Dev::Mig { counts: now.counts, tenants: Vec::new() };
                }
            }
        }
        // The other MIG GPUs: spread over the used nodes, the node with the most free GPUs
        // first, so that spread models find distinct nodes.
        for (l, &g) in left.iter().enumerate() {
            let Some(layout) = pool.layouts.get(l) else { continue };
            for _ in 0..g {
                let dev = Dev::Mig { counts: layout.counts.clone(), tenants: Vec::new() };
                if !deal(&mut pa.nodes[..used_nodes], |i| !mig_ts_class[i], dev) {
                    if !repair {
                        return None;
                    }
                    break; // first fit opens MIG GPUs where replicas need them
                }
            }
        }
    }
    // Whole-GPU replicas are on their GPUs, except the deferred ones.
    a.replicas =
        replicas.iter().filter(|(k, _)| matches!(k.2, Kind::Whole(_))).map(|(&k, &n)| (k, n)).collect();
    for key in &deferred {
        if let Some(n) = a.replicas.get_mut(key) {
            *n -= 1;
        }
    }
    a.replicas.retain(|_, n| *n > 0);
    // Place the other replicas on the configured devices.
    for m in model_order(problem) {
        // Time-sliced replicas first: they fit only on the few nodes of their sharing class,
        // which a `spread: node` model's MIG replicas (fitting almost anywhere) must not take.
        let mut mine: Vec<(usize, Kind, u32)> = replicas
            .range((m, 0, Kind::Whole(0))..)
            .take_while(|(k, _)| k.0 == m)
            .filter(|(k, _)| !matches!(k.2, Kind::Whole(_))) // already placed above
            .map(|(&(_, pi, kind), &n)| (pi, kind, n))
            .collect();
        mine.sort_by_key(|&(pi, kind, _)| (matches!(kind, Kind::Mig(_)), pi, kind));
        for (pi, kind, n) in mine {
            for _ in 0..n {
                if place(problem, &mut a, m, pi, kind, Mode::Fixed, usize::MAX) {
                    *a.replicas.entry((m, pi, kind)).or_insert(0) += 1;
                } else if !repair {
                    return None;
                } else {
                    deferred.push((m, pi, kind));
                }
            }
        }
    }
    // Repair: what found no configured room goes where first fit puts it: the optimiser's
    // choice or the model's other options (smallest first) on a configured device with room,
    // else on a grown one (extended layout, new GPU, new node).
    a.repaired = u32::try_from(deferred.len()).unwrap_or(u32::MAX);
    for (m, pi, kind) in deferred {
        let mc = problem.models.get(m)?;
        let mut others: Vec<&crate::plan::problem::Opt> =
            mc.options.iter().filter(|o| (o.pool, o.kind) != (pi, kind)).collect();
        others.sort_by(|x, y| x.size.total_cmp(&y.size).then(x.pool.cmp(&y.pool)).then(x.kind.cmp(&y.kind)));
        let choices: Vec<(usize, Kind)> =
            std::iter::once((pi, kind)).chain(others.iter().map(|o| (o.pool, o.kind))).collect();
        let attempts =
            [Mode::Fixed, Mode::Grow].into_iter().flat_map(|mode| choices.iter().map(move |&c| (mode, c)));
        let mut placed = false;
        for (mode, (p, k)) in attempts {
            if place(problem, &mut a, m, p, k, mode, usize::MAX) {
                *a.replicas.entry((m, p, k)).or_insert(0) += 1;
                placed = true;
                break;
            }
        }
        if !placed {
            return None;
        }
    }
    trim(problem, &mut a);
    Some(a)
}

/// Puts `dev` on the first unused GPU of the eligible node with the most unused GPUs (the
/// lowest index among equals): dealing devices one by one this way spreads them round robin.
/// Returns whether some eligible node had room.
fn deal(nodes: &mut [NodeA], eligible: impl Fn(usize) -> bool, dev: Dev) -> bool {
    let free = |n: &NodeA| n.gpus.iter().filter(|d| **d == Dev::Unused).count();
    let slot = (0..nodes.len())
        .filter(|&i| eligible(i) && free(&nodes[i]) > 0)
        .max_by(|&x, &y| free(&nodes[x]).cmp(&free(&nodes[y])).then(y.cmp(&x)));
    let Some(d) = slot.and_then(|i| nodes[i].gpus.iter_mut().find(|d| **d == Dev::Unused)) else {
        return false;
    };
    *d = dev;
    true
}

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
    // (pass, node, state): sorted by pass so that the order is the greedy one.
    let mut out: Vec<(u8, usize, NodeA)> = Vec::new();
    for (ni, n) in pa.nodes.iter().enumerate().take(limit) {
        if spread == Spread::Node && n.hosts(m) {
            continue;
        }
        let mut seen: Vec<Vec<Dev>> = Vec::new();
        let mut push = |pass: u8, node: NodeA, out: &mut Vec<(u8, usize, NodeA)>| {
            let mut key = node.gpus.clone();
            key.sort_by_key(|d| format!("{d:?}"));
            if !seen.contains(&key) {
                seen.push(key);
                out.push((pass, ni, node));
            }
        };
        let first_unused = n.gpus.iter().position(|d| *d == Dev::Unused);
        match kind {
            Kind::Whole(count) => {
                if n.ts_k().is_some() || n.has_mig_ts() {
                    continue;
                }
                let free: Vec<usize> = n
                    .gpus
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| **d == Dev::Unused)
                    .map(|(i, _)| i)
                    .take(count as usize)
                    .collect();
                if free.len() == count as usize {
                    let mut node = n.clone();
                    for i in free {
                        node.gpus[i] = Dev::Whole { tenant: Some(m) };
                    }
                    push(0, node, &mut out);
                }
            }
            Kind::TimeSliced(k) => {
                if spread == Spread::Gpu && n.hosts_shared(m) {
                    continue;
                }
                for (gi, d) in n.gpus.iter().enumerate() {
                    if let Dev::Ts { k: dk, tenants } = d
                        && *dk == k
                        && (tenants.len() as u32) < k
                        && (spread == Spread::None || !tenants.contains(&m))
                    {
                        let mut node = n.clone();
                        if let Dev::Ts { tenants, .. } = &mut node.gpus[gi] {
                            tenants.push(m);
                        }
                        push(0, node, &mut out);
                    }
                }
                if let Some(gi) = first_unused
                    && !n.has_whole()
                    && !n.has_mig_ts()
                    && n.ts_k().is_none_or(|x| x == k)
                {
                    let mut node = n.clone();
                    node.gpus[gi] = Dev::Ts { k, tenants: vec![m] };
                    push(1, node, &mut out);
                }
            }
            Kind::MigTs(q, k) => {
                if spread == Spread::Gpu && n.hosts_shared(m) {
                    continue;
                }
                let slots = |counts: &[u8]| u64::from(k) * u64::from(counts.get(q).copied().unwrap_or(0));
                for (gi, d) in n.gpus.iter().enumerate() {
                    if let Dev::MigTs { q: dq, k: dk, counts, tenants } = d
                        && *dq == q
                        && *dk == k
                        && (tenants.len() as u64) < slots(counts)
                        && (spread == Spread::None || !tenants.contains(&m))
                    {
                        let mut node = n.clone();
                        if let Dev::MigTs { tenants, .. } = &mut node.gpus[gi] {
                            tenants.push(m);
                        }
                        push(0, node, &mut out);
                    }
                }
                let only_this = n.gpus.iter().all(|d| match d {
                    Dev::Unused => true,
                    Dev::MigTs { q: dq, k: dk, .. } => *dq == q && *dk == k,
                    _ => false,
                });
                let per_gpu = pool.homogeneous.get(q).copied().unwrap_or(0);
                if let Some(gi) = first_unused
                    && only_this
                    && per_gpu > 0
                {
                    let mut counts = vec![0u8; pool.profiles.len()];
                    if let Some(x) = counts.get_mut(q) {
                        *x = per_gpu;
                    }
                    let mut node = n.clone();
                    node.gpus[gi] = Dev::MigTs { q, k, counts, tenants: vec![m] };
                    push(1, node, &mut out);
                }
            }
            Kind::Mig(q) => {
                if n.has_mig_ts() {
                    continue;
                }
                for (gi, d) in n.gpus.iter().enumerate() {
                    let Dev::Mig { counts, tenants } = d else { continue };
                    if spread != Spread::None && tenants.iter().any(|&(_, t)| t == m) {
                        continue;
                    }
                    let used = tenants.iter().filter(|&&(p, _)| p == q).count();
                    let have = usize::from(counts.get(q).copied().unwrap_or(0));
                    let mut node = n.clone();
                    let Dev::Mig { counts: nc, tenants: nt } = &mut node.gpus[gi] else { continue };
                    if used < have {
                        nt.push((q, m));
                        push(0, node, &mut out);
                    } else {
                        let mut c = nc.clone();
                        if let Some(x) = c.get_mut(q) {
                            *x += 1;
                        }
                        if pool.fits(&c) {
                            *nc = c;
                            nt.push((q, m));
                            push(1, node, &mut out);
                        }
                    }
                }
                if let Some(gi) = first_unused {
                    let mut c = vec![0u8; pool.profiles.len()];
                    if let Some(x) = c.get_mut(q) {
                        *x = 1;
                    }
                    if pool.fits(&c) {
                        let mut node = n.clone();
                        node.gpus[gi] = Dev::Mig { counts: c, tenants: vec![(q, m)] };
                        push(2, node, &mut out);
                    }
                }
            }
        }
    }
    out.sort_by_key(|x| x.0);
    out.into_iter().map(|(_, ni, node)| (ni, node)).collect()
}
