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
//! GPUs, all shared whole GPUs of a node share one mode and replica count (`Share`: MPS or
//! time-slicing, never both on a node), every MIG GPU holds a valid
//! layout, spread is honoured, and no node or GPU beyond the pool's capacity is used.
//!
//! Files: this one holds the state types and the placement routine every algorithm shares;
//! `ffd.rs` first-fit-decreasing, `decompose.rs` the decomposition of counts, `search.rs` the
//! two backtracking searches.

use std::collections::BTreeMap;

use crate::plan::layouts;
use crate::plan::problem::{Kind, PoolCtx, Problem, Share};
use crate::plan::rules::{self, SharedTenant};
use crate::spec::Spread;

/// Whether the time-sliced (or MPS) whole-GPU tenants of `node` (whose GPUs are shared `k`
/// ways by the share's mode), with one of model `m` added, may run together. Light tenants alone always may (their options
/// were admitted against the worst light neighbours). A node with a heavy tenant is a
/// combined-compute node of the optimiser's model: all its tenants together within the
/// efficiency (sufficient for the verifier's "any k together"), none of a `spread` model, and
/// every tenant's latency SLO met with its k − 1 largest co-tenants
/// ([`rules::shared_tenants_fit`], the verifier's rules).
pub(crate) fn ts_room(problem: &Problem<'_>, pi: usize, node: &NodeA, m: usize, share: Share) -> bool {
    let k = share.k;
    let eff = problem.spec.policy.time_slicing_efficiency;
    let mut ms: Vec<usize> = node
        .gpus
        .iter()
        .flat_map(|d| match d {
            Dev::Ts { tenants, .. } => tenants.as_slice(),
            _ => &[],
        })
        .copied()
        .collect();
    ms.push(m);
    let models: Vec<&crate::spec::Model> =
        ms.iter().filter_map(|&x| problem.models.get(x)).map(|x| x.spec).collect();
    if models.iter().all(|x| rules::light_tenant(x.compute, k, eff, 1.0)) {
        return true;
    }
    let total: f64 = models.iter().map(|x| x.compute).sum();
    if total > eff + 1e-9 || models.iter().any(|x| x.spread != Spread::None) {
        return false;
    }
    let Some(gpu) = problem.pools.get(pi).map(|p| p.gpu) else { return false };
    let mut tenants: Vec<SharedTenant> = Vec::new();
    for x in &models {
        // The baseline on this pool's GPU, as the verifier scales it; a refusal fits nowhere.
        let latency = match x.latency.as_ref().and_then(|l| rules::baseline_ms(l, gpu).map(|b| (l.p99_ms, b)))
        {
            None => None,
            Some((slo, Ok(b))) => Some((slo, b)),
            Some((_, Err(_))) => return false,
        };
        tenants.push(SharedTenant { compute: x.compute, latency });
    }
    if share.mps {
        return rules::mps_tenants_fit(&tenants, k, eff, 1.0);
    }
    rules::shared_tenants_fit(&tenants, k, eff, 1.0, None)
}

/// One GPU's state.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Dev {
    Unused,
    /// MIG disabled, exclusive; `tenant` is the model (also on every GPU of a multi-GPU replica).
    Whole {
        tenant: Option<usize>,
    },
    /// MIG disabled, shared by `k`'s mode (time-slicing or MPS) with `k.k` replicas.
    Ts {
        k: Share,
        tenants: Vec<usize>,
    },
    /// MIG enabled: instance counts per usable profile, and (profile, model) per used instance.
    Mig {
        counts: Vec<u8>,
        tenants: Vec<(usize, usize)>,
    },
    /// MIG enabled on a node whose instances of profile `q` are all time-sliced with `k`
    /// replicas (device-plugin sharing is per node and resource): `tenants` share the `q`
    /// instances (at most `k` per instance), `excl` are (profile, model) on instances of the
    /// other profiles of the layout, exclusive as on [`Dev::Mig`].
    MigTs {
        q: usize,
        k: u32,
        counts: Vec<u8>,
        tenants: Vec<usize>,
        excl: Vec<(usize, usize)>,
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

    pub(crate) fn has_whole(&self) -> bool {
        self.gpus.iter().any(|d| matches!(d, Dev::Whole { .. }))
    }

    /// The share of this node's shared whole GPUs (mode and replica count), if any is shared.
    pub(crate) fn ts_k(&self) -> Option<Share> {
        self.gpus.iter().find_map(|d| if let Dev::Ts { k, .. } = d { Some(*k) } else { None })
    }

    /// The replicas this node runs, per (model, kind); a multi-GPU replica counts once.
    pub(crate) fn replicas(&self, problem: &Problem<'_>) -> BTreeMap<(usize, Kind), u32> {
        let mut out: BTreeMap<(usize, Kind), u32> = BTreeMap::new();
        let mut add = |m: usize, kind: Kind| *out.entry((m, kind)).or_insert(0) += 1;
        let mut whole: BTreeMap<usize, u32> = BTreeMap::new();
        for d in &self.gpus {
            match d {
                Dev::Unused | Dev::Whole { tenant: None } => {}
                Dev::Whole { tenant: Some(m) } => *whole.entry(*m).or_insert(0) += 1,
                Dev::Ts { k, tenants } => tenants.iter().for_each(|&m| add(m, Kind::TimeSliced(*k))),
                Dev::Mig { tenants, .. } => tenants.iter().for_each(|&(q, m)| add(m, Kind::Mig(q))),
                Dev::MigTs { q, k, tenants, excl, .. } => {
                    tenants.iter().for_each(|&m| add(m, Kind::MigTs(*q, *k)));
                    excl.iter().for_each(|&(p, m)| add(m, Kind::Mig(p)));
                }
            }
        }
        for (m, g) in whole {
            let per = problem.models.get(m).and_then(|x| x.spec.gpus).unwrap_or(1).max(1);
            *out.entry((m, Kind::Whole(per))).or_insert(0) += g / per;
        }
        out
    }

    pub(crate) fn hosts(&self, m: usize) -> bool {
        self.gpus.iter().any(|d| dev_hosts(d, m))
    }

    /// Whether a time-sliced device of this node (whole or MIG) serves model `m`. A node has
    /// one time-sliced resource at most (one k for whole GPUs; MIG time-slicing nodes hold one
    /// profile), so this is "on the same shared resource".
    pub(crate) fn hosts_shared(&self, m: usize) -> bool {
        self.gpus.iter().any(|d| match d {
            Dev::Ts { tenants, .. } | Dev::MigTs { tenants, .. } => tenants.contains(&m),
            _ => false,
        })
    }

    /// `spread: gpu` on MIG: the device plugin, not gpuplan, picks which instance of a MIG
    /// resource (and so which GPU) a pod gets. Two replicas of a `spread: gpu` model on this
    /// node are safe only when no GPU has two distinct instances, one of each replica's profile
    /// (two of it when the profiles are equal). The same rule as the verifier's, judged on the
    /// layouts as they are (the verifier sees them trimmed: `trim`).
    pub(crate) fn mig_spread_ok(&self, problem: &Problem<'_>) -> bool {
        self.clashes(problem, true) == 0
    }

    /// How many pairs of replicas of one `spread: gpu` model break the rule of
    /// [`NodeA::mig_spread_ok`] on this node.
    pub(crate) fn mig_spread_clashes(&self, problem: &Problem<'_>) -> usize {
        self.clashes(problem, false)
    }

    /// The clashing pairs, or only whether there is one (`first`: 0 or 1). Placement asks this
    /// after every MIG placement on a node with a `spread: gpu` model on MIG, so it allocates
    /// nothing: pairs of the node's tenants are walked directly.
    fn clashes(&self, problem: &Problem<'_>, first: bool) -> usize {
        let spread = |m: usize| problem.models.get(m).is_some_and(|x| x.spec.spread == Spread::Gpu);
        let tenants = || {
            self.gpus
                .iter()
                .flat_map(|d| match d {
                    Dev::Mig { tenants, .. } | Dev::MigTs { excl: tenants, .. } => tenants.as_slice(),
                    _ => &[],
                })
                .copied()
                .filter(|&(_, m)| spread(m))
        };
        // Instances of profile `q` on GPU `d` that a `spread: gpu` replica may be handed
        // (instances of a MIG time-slicing GPU's shared profile are another resource).
        let count = |d: &Dev, q: usize| match d {
            Dev::Mig { counts, .. } => counts.get(q).copied().unwrap_or(0),
            Dev::MigTs { q: shared, counts, .. } if *shared != q => counts.get(q).copied().unwrap_or(0),
            _ => 0,
        };
        let mut clashes = 0;
        for (i, (a, m)) in tenants().enumerate() {
            for (b, _) in tenants().skip(i + 1).filter(|&(_, n)| n == m) {
                let clash = self.gpus.iter().any(|d| {
                    let (x, y) = (count(d, a), count(d, b));
                    if a == b { x >= 2 } else { x >= 1 && y >= 1 }
                });
                if clash {
                    clashes += 1;
                    if first {
                        return clashes;
                    }
                }
            }
        }
        clashes
    }

    /// Whether the node is reserved for time-sliced MIG instances of one profile.
    pub(crate) fn has_mig_ts(&self) -> bool {
        self.gpus.iter().any(|d| matches!(d, Dev::MigTs { .. }))
    }

    pub(crate) fn gpus_used(&self) -> usize {
        self.gpus.iter().filter(|d| !matches!(d, Dev::Unused)).count()
    }

    pub(super) fn used(&self) -> bool {
        self.gpus.iter().any(|d| !matches!(d, Dev::Unused))
    }
}

pub(crate) fn dev_hosts(d: &Dev, m: usize) -> bool {
    match d {
        Dev::Unused => false,
        Dev::Whole { tenant } => *tenant == Some(m),
        Dev::Ts { tenants, .. } => tenants.contains(&m),
        Dev::Mig { tenants, .. } => tenants.iter().any(|&(_, t)| t == m),
        Dev::MigTs { tenants, excl, .. } => tenants.contains(&m) || excl.iter().any(|&(_, t)| t == m),
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
    pub(super) fn gpus_used(&self) -> u64 {
        self.pools.iter().flat_map(|p| &p.nodes).flat_map(|n| &n.gpus).filter(|d| **d != Dev::Unused).count()
            as u64
    }

    pub(super) fn cost(&self, problem: &Problem<'_>) -> f64 {
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

/// Costs closer than this are equal: a later candidate replaces an earlier one only when it is
/// cheaper by more (the cascade's ties go to its earlier step; the local search empties a GPU
/// only when the plan gets cheaper by more).
pub(crate) const COST_EPSILON: f64 = 1e-9;

/// How freely [`place`] may change devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Only use devices already configured (decomposition).
    Fixed,
    /// Configure unused GPUs and extend MIG layouts (first-fit).
    Grow,
    /// Extend MIG layouts and fill free slots of GPUs in use, never configuring an unused GPU
    /// (the search that empties GPUs, [`empty_gpus`]).
    Extend,
}

/// Places one replica of model `m` at the first of `attempts` (pool, kind, mode) that has room
/// and counts it. Returns whether one had room.
pub(crate) fn place_first(
    problem: &Problem<'_>,
    a: &mut Assignment,
    m: usize,
    attempts: impl IntoIterator<Item = (usize, Kind, Mode)>,
) -> bool {
    for (pi, kind, mode) in attempts {
        if place(problem, a, m, pi, kind, mode, usize::MAX) {
            *a.replicas.entry((m, pi, kind)).or_insert(0) += 1;
            return true;
        }
    }
    false
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
    let Some(pa) = a.pools.get_mut(pi) else { return false };
    let mut limit = node_limit.min(pa.nodes.len());
    if mode == Mode::Grow {
        // Nodes after the first empty one are all empty: looking at one of them is enough.
        if let Some(first_empty) = pa.nodes.iter().take(limit).position(|n| !n.used()) {
            limit = limit.min(first_empty + 1);
        }
    }
    place_in(problem, a, m, pi, kind, mode, 0..limit)
}

/// [`place`] on the nodes `nodes` of pool `pi` only (an empty range when out of bounds).
pub(crate) fn place_in(
    problem: &Problem<'_>,
    a: &mut Assignment,
    m: usize,
    pi: usize,
    kind: Kind,
    mode: Mode,
    nodes: std::ops::Range<usize>,
) -> bool {
    let Some(pool) = problem.pools.get(pi) else { return false };
    let spread = problem.models.get(m).map_or(Spread::None, |x| x.spec.spread);
    let Some(pa) = a.pools.get_mut(pi) else { return false };
    let at = Placing { problem, pool, pi, m, spread, mode };
    let Some(nodes) = pa.nodes.get_mut(nodes) else { return false };
    match kind {
        Kind::Whole(count) => at.whole(nodes, count as usize),
        Kind::TimeSliced(k) => at.time_sliced(nodes, k),
        Kind::MigTs(q, k) => at.mig_ts(nodes, q, k),
        Kind::Mig(q) => at.mig(nodes, q),
    }
}

/// One replica being placed by [`place`]: model `m` (its `spread`) in pool `pi`.
struct Placing<'p, 'a> {
    problem: &'p Problem<'a>,
    pool: &'p PoolCtx<'a>,
    pi: usize,
    m: usize,
    spread: Spread,
    mode: Mode,
}

/// What [`Placing::mig_on`] did to one GPU.
enum MigStep {
    /// Nothing: the GPU has no room at this pass.
    Nothing,
    /// The replica was added; what takes it back.
    Placed(Undo),
    /// The pool cannot hold one instance of the profile on a GPU at all.
    Impossible,
}

/// What [`Placing::mig_on`] changed besides adding the tenant.
#[derive(Clone, Copy)]
enum Undo {
    /// Nothing: the tenant took a free instance.
    Tenant,
    /// One instance of profile `q` was added to the layout.
    Extended(usize),
    /// The GPU was unused.
    Opened,
}

impl Placing<'_, '_> {
    fn node_ok(&self, n: &NodeA) -> bool {
        self.spread != Spread::Node || !n.hosts(self.m)
    }

    fn whole(&self, nodes: &mut [NodeA], count: usize) -> bool {
        for n in nodes {
            if !self.node_ok(n) || n.ts_k().is_some() || n.has_mig_ts() {
                continue;
            }
            let free: Vec<usize> = n
                .gpus
                .iter()
                .enumerate()
                .filter(|(_, d)| match self.mode {
                    Mode::Fixed | Mode::Extend => **d == Dev::Whole { tenant: None },
                    Mode::Grow => **d == Dev::Unused,
                })
                .map(|(i, _)| i)
                .take(count)
                .collect();
            if free.len() == count {
                for i in free {
                    n.gpus[i] = Dev::Whole { tenant: Some(self.m) };
                }
                return true;
            }
        }
        false
    }

    fn time_sliced(&self, nodes: &mut [NodeA], k: Share) -> bool {
        let (m, spread) = (self.m, self.spread);
        // A time-sliced GPU with a free slot first, then (growing) a new one.
        for pass in 0..2 {
            if pass == 1 && self.mode != Mode::Grow {
                break;
            }
            for n in nodes.iter_mut() {
                // Under `spread: gpu` one time-sliced replica per node: the device plugin,
                // not gpuplan, picks the physical GPU behind a shared resource.
                if !self.node_ok(n) || (spread == Spread::Gpu && n.hosts_shared(m)) {
                    continue;
                }
                if n.ts_k().is_some_and(|x| x == k) && !ts_room(self.problem, self.pi, n, m, k) {
                    continue;
                }
                if pass == 1 && (n.has_whole() || n.has_mig_ts() || n.ts_k().is_some_and(|x| x != k)) {
                    continue;
                }
                for d in n.gpus.iter_mut() {
                    match d {
                        Dev::Ts { k: dk, tenants }
                            if pass == 0 && *dk == k && (tenants.len() as u32) < k.k =>
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

    fn mig_ts(&self, nodes: &mut [NodeA], q: usize, k: u32) -> bool {
        let (m, spread) = (self.m, self.spread);
        // Only configured GPUs (the first-fit baseline does not time-slice MIG instances).
        for n in nodes {
            if !self.node_ok(n) || (spread == Spread::Gpu && n.hosts_shared(m)) {
                continue;
            }
            for d in n.gpus.iter_mut() {
                let free = spread == Spread::None || !dev_hosts(d, m);
                if let Dev::MigTs { q: dq, k: dk, counts, tenants, .. } = d
                    && *dq == q
                    && *dk == k
                    && (tenants.len() as u64) < u64::from(k) * u64::from(counts.get(q).copied().unwrap_or(0))
                    && free
                {
                    tenants.push(m);
                    return true;
                }
            }
        }
        false
    }

    fn mig(&self, nodes: &mut [NodeA], q: usize) -> bool {
        let problem = self.problem;
        // A free instance first, then (growing) an extended layout, then a new MIG GPU.
        for pass in 0..3 {
            if (pass > 0 && self.mode == Mode::Fixed) || (pass > 1 && self.mode == Mode::Extend) {
                break;
            }
            for n in nodes.iter_mut() {
                if !self.node_ok(n) {
                    continue;
                }
                // On a node that time-slices a MIG profile, only the other profiles'
                // instances of its GPUs are exclusive (small programs: the large ones'
                // model has none); no other GPU is opened there.
                let mig_ts_node = n.has_mig_ts();
                if mig_ts_node && !problem.small {
                    continue;
                }
                // A change that would let the device plugin put two `spread: gpu` replicas
                // on one GPU is undone (checked only where such models run on MIG).
                let guard = problem.mig_spread_models
                    && n.gpus.iter().any(|d| matches!(d, Dev::Mig { .. } | Dev::MigTs { .. }));
                for gi in 0..n.gpus.len() {
                    let undo = match self.mig_on(&mut n.gpus[gi], q, pass, mig_ts_node) {
                        MigStep::Nothing => continue,
                        MigStep::Impossible => return false,
                        MigStep::Placed(undo) => undo,
                    };
                    if !guard || n.mig_spread_ok(problem) {
                        return true;
                    }
                    // Taken back exactly: the tenant just added, and the counts or device.
                    let d = &mut n.gpus[gi];
                    if let Undo::Opened = undo {
                        *d = Dev::Unused;
                    } else if let Dev::Mig { counts, tenants } | Dev::MigTs { counts, excl: tenants, .. } = d
                    {
                        tenants.pop();
                        if let Undo::Extended(p) = undo
                            && let Some(x) = counts.get_mut(p)
                        {
                            *x -= 1;
                        }
                    }
                }
            }
        }
        false
    }

    /// Pass `pass` of [`Placing::mig`] on one GPU: a free `q` instance (0), an extended
    /// layout (1), an unused GPU made a MIG GPU (2, not on a MIG time-slicing node).
    fn mig_on(&self, d: &mut Dev, q: usize, pass: u32, mig_ts_node: bool) -> MigStep {
        let (pool, m) = (self.pool, self.m);
        if self.spread != Spread::None && dev_hosts(d, m) {
            return MigStep::Nothing;
        }
        let shared_q = if let Dev::MigTs { q: s, .. } = d { Some(*s) } else { None };
        match d {
            Dev::Mig { counts, tenants } | Dev::MigTs { counts, excl: tenants, .. }
                if pass < 2 && shared_q != Some(q) =>
            {
                let used = tenants.iter().filter(|&&(p, _)| p == q).count();
                let have = usize::from(counts.get(q).copied().unwrap_or(0));
                if pass == 0 && used < have {
                    tenants.push((q, m));
                    MigStep::Placed(Undo::Tenant)
                } else if pass == 1 && used >= have {
                    // One more instance of `q`, kept only when the layout stays valid.
                    let Some(x) = counts.get_mut(q) else { return MigStep::Nothing };
                    let Some(more) = x.checked_add(1) else { return MigStep::Nothing };
                    *x = more;
                    if pool.fits(counts) {
                        tenants.push((q, m));
                        MigStep::Placed(Undo::Extended(q))
                    } else {
                        if let Some(x) = counts.get_mut(q) {
                            *x -= 1;
                        }
                        MigStep::Nothing
                    }
                } else {
                    MigStep::Nothing
                }
            }
            Dev::Unused if pass == 2 && !mig_ts_node => {
                let mut c = vec![0u8; pool.profiles.len()];
                if let Some(x) = c.get_mut(q) {
                    *x = 1;
                }
                if !pool.fits(&c) {
                    return MigStep::Impossible;
                }
                *d = Dev::Mig { counts: c, tenants: vec![(q, m)] };
                MigStep::Placed(Undo::Opened)
            }
            _ => MigStep::Nothing,
        }
    }
}

pub(crate) fn empty(problem: &Problem<'_>, nodes_per_pool: impl Fn(usize) -> usize) -> Assignment {
    Assignment {
        pools: problem
            .pools
            .iter()
            .enumerate()
            .map(|(i, p)| PoolA { nodes: (0..nodes_per_pool(i)).map(|_| NodeA::new(p.gpn())).collect() })
            .collect(),
        replicas: BTreeMap::new(),
        repaired: 0,
    }
}

/// Drops MIG instances nobody uses (so that a layout shows exactly what runs, whichever
/// maximal layout the solver picked), except on GPUs that keep the layout they run today, and
/// drops trailing unused nodes of autoscaled pools (keeping the pool's minimum).
fn trim(problem: &Problem<'_>, a: &mut Assignment) {
    trim_instances(problem, a);
    for (pa, p) in a.pools.iter_mut().zip(&problem.pools) {
        if !p.autoscaled() {
            continue;
        }
        while pa.nodes.len() > p.min_nodes as usize && pa.nodes.last().is_some_and(|n| !n.used()) {
            pa.nodes.pop();
        }
    }
}

/// [`trim`]'s first half: the MIG instances nobody uses dropped (a GPU with none left is
/// unused), every node kept.
fn trim_instances(problem: &Problem<'_>, a: &mut Assignment) {
    for (pa, p) in a.pools.iter_mut().zip(&problem.pools) {
        for (ni, node) in pa.nodes.iter_mut().enumerate() {
            let name = p.node_name(ni);
            let current = p.spec.current.iter().find(|n| n.node == name);
            for (gi, d) in node.gpus.iter_mut().enumerate() {
                if let Dev::MigTs { q, counts, excl, .. } = d {
                    // The shared profile's instances stay (the device plugin hands them out);
                    // exclusive ones nobody uses go.
                    let mut used = vec![0u8; counts.len()];
                    for &(x, _) in excl.iter() {
                        if let Some(u) = used.get_mut(x) {
                            *u += 1;
                        }
                    }
                    if let (Some(u), Some(&c)) = (used.get_mut(*q), counts.get(*q)) {
                        *u = c;
                    }
                    *counts = used;
                    continue;
                }
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

mod decompose;
mod empty;
mod ffd;
mod program;
mod search;

pub(crate) use decompose::{
    Deferred, decompose, decompose_deferred, decompose_partial, decompose_program, decompose_unguarded,
};
#[cfg(test)]
pub(crate) use decompose::{replace_mig_spread, untangle_mig_spread};
pub(crate) use empty::{KickBudget, empty_gpus, kicks_for, large_kicks_for};
pub(crate) use ffd::{ffd, ffd_every_order, ffd_guided, ffd_reordered};
pub(crate) use search::{Stuck, decompose_search, ffd_search, improve};
