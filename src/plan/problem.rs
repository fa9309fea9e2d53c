//! The planning problem in the planner's own terms: pools with their usable MIG profiles and
//! layouts, and for every model the ways one replica may be served (its options), each already
//! checked against memory, compute, isolation, latency and measured throughput.
//!
//! In: a [`Spec`] and the [`Catalog`]. Out: a [`Problem`] whose pools and models are sorted by
//! name (so that input order never matters), plus, per model, the options that were rejected and
//! why (used for `explain` and for infeasibility diagnostics).
//!
//! Guarantee: an option listed for a model satisfies every per-replica hard constraint; only
//! the shared ones (capacity, spread, node sharing classes) are left to the optimiser.

use std::collections::BTreeMap;

use crate::catalog::{Catalog, GpuModel};
use crate::measurements::WHOLE;
use crate::plan::latency::Refusal;
use crate::plan::layouts::{self, Layout, ProfileInfo};
use crate::plan::rules::{self, AloneSlo};
use crate::spec::capacity::Capacity;
use crate::spec::{Demand, Isolation, Keyword, MigStrategy, Model, Policy, Pool, RateDemand, Spec, Spread};

/// How one replica is served, within one pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Kind {
    /// `n` exclusive whole GPUs on one node (n = 1 for an ordinary whole-GPU replica).
    Whole(u32),
    /// One MIG instance of the pool's profile with this index.
    Mig(usize),
    /// One of `k` shared replicas of a whole GPU, by time-slicing or by MPS ([`Share`]): the
    /// device plugin runs one sharing mode and one replica count per node, so each share is
    /// its own node class, and on a pool allowing both modes the planner picks one per node.
    TimeSliced(Share),
    /// One of `k` time-slicing replicas of a MIG instance of the profile with this index, on a
    /// GPU cut into as many such instances as fit (the device-plugin sharing of that resource
    /// applies to the whole node, so such nodes hold only these GPUs).
    MigTs(usize, u32),
}

/// How a shared whole GPU is shared: `k` replicas by time-slicing, or `k` MPS clients (each
/// `1/k` of the memory and `⌊100/k⌋%` of the threads) where the pool's `sharing` lists `mps`.
/// Ordered by `k` first, so that a problem without MPS lists its shares as before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Share {
    pub k: u32,
    pub mps: bool,
}

impl Share {
    /// `k` time-slicing replicas.
    pub(crate) fn ts(k: u32) -> Self {
        Share { k, mps: false }
    }
}

/// One way to serve a replica.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Opt {
    pub pool: usize,
    pub kind: Kind,
    /// Requests per second one replica sustains here (rate demand only).
    pub rps: Option<f64>,
    /// Processes of the model one replica runs on its device: 1, or `k` MPS processes of a
    /// point measured with `k` ([`rules::measured_mps`], DRA only; `rps` is then their sum).
    pub processes: u32,
    /// Predicted p99 latency, when the model gives a latency baseline.
    pub p99_ms: Option<f64>,
    /// Why the SLO of a replica alone on its device is unverified (the latency model refuses
    /// there; [`rules::alone_slo`]), with what to measure.
    pub unverified: Option<String>,
    /// Where a rate option's capacity comes from when a measured sweep gives it
    /// ([`crate::spec::capacity::Capacity::sweep_reason`]).
    pub measured: Option<String>,
    /// Share of a GPU this option occupies (for ordering and first-fit-decreasing).
    pub size: f64,
    /// A share no GPU can exceed in total over its replicas (for the size lower bound): the
    /// smaller of the compute-slice and memory-slice shares on MIG.
    pub bound_share: f64,
}

/// Why an option was not admitted. Ordered by how close to feasible it got: the binding reason
/// of an unservable model is the largest one over all its candidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Reason {
    /// The model may not use this pool or GPU type.
    Pool,
    /// The isolation policy (or `llmNeverTimeSliced`) forbids this kind of device.
    Isolation,
    /// A multi-GPU replica needs more GPUs than a node of the pool has.
    NodeSize,
    /// The device has too little memory.
    Memory,
    /// The device has too little compute.
    Compute,
    /// No admissible measured point for this device (rate demand).
    Measurement,
    /// The predicted p99 latency exceeds the SLO.
    Latency,
}

impl Reason {
    pub(super) fn word(self) -> &'static str {
        match self {
            Reason::Pool => "pool",
            Reason::Isolation => "isolation",
            Reason::NodeSize => "node size",
            Reason::Memory => "memory",
            Reason::Compute => "compute",
            Reason::Measurement => "measurement",
            Reason::Latency => "latency",
        }
    }
}

/// A rejected candidate with a sentence saying why.
#[derive(Clone, Debug)]
pub(crate) struct Rejection {
    pub pool: usize,
    pub reason: Reason,
    pub text: String,
}

#[derive(Clone, Debug)]
pub(crate) struct PoolCtx<'a> {
    pub spec: &'a Pool,
    pub gpu: &'a GpuModel,
    pub max_nodes: u32,
    pub min_nodes: u32,
    /// The named nodes, sorted and without repeats (empty for an autoscaled pool, whose nodes
    /// are `<pool>-<n>` templates up to `max_nodes`).
    pub named: Vec<String>,
    /// Profiles the planner uses (no media-attribute or whole-GPU profiles), by index.
    pub profiles: Vec<ProfileInfo>,
    /// Candidate layouts (the maximal ones plus those running today), as counts per profile.
    pub layouts: Vec<Layout>,
    /// Weight of one GPU in the objective (relative cost; 1.0 without prices).
    pub weight: f64,
    /// Per usable profile, how many instances of it alone fit on one GPU (0 if none).
    pub homogeneous: Vec<u8>,
    /// Counts per profile of every valid layout of the usable profiles (see [`PoolCtx::fits`]).
    pub valid: ValidLayouts,
}

/// The counts per usable profile of every valid layout of a pool's GPU, for [`PoolCtx::fits`].
/// First fit and the local search ask it for every GPU they look at, so each layout is packed
/// into a `u64` (four bits a profile) and the keys sorted: a lookup neither hashes nor
/// allocates. A catalog GPU with more than 16 usable profiles, or a layout of more than 15
/// instances of one, keeps the counts themselves.
#[derive(Clone, Debug)]
pub(crate) enum ValidLayouts {
    /// The keys of [`pack`], sorted, and the length of every layout's counts (the number of
    /// usable profiles).
    Packed {
        profiles: usize,
        keys: Vec<u64>,
    },
    Counts(std::collections::BTreeSet<Vec<u8>>),
}

impl ValidLayouts {
    fn new(every: &[&[u8]]) -> Self {
        let profiles = every.first().map_or(0, |c| c.len());
        let packed: Option<Vec<u64>> =
            every.iter().map(|c| if c.len() == profiles { pack(c) } else { None }).collect();
        match packed {
            Some(mut keys) => {
                keys.sort_unstable();
                keys.dedup();
                Self::Packed { profiles, keys }
            }
            None => Self::Counts(every.iter().map(|c| c.to_vec()).collect()),
        }
    }

    fn contains(&self, counts: &[u8]) -> bool {
        match self {
            Self::Packed { profiles, keys } => {
                counts.len() == *profiles && pack(counts).is_some_and(|k| keys.binary_search(&k).is_ok())
            }
            Self::Counts(set) => set.contains(counts),
        }
    }
}

/// `counts` four bits a profile (profile `i` at bits `4i..4i + 4`); `None` beyond 16 profiles
/// or 15 instances of one.
fn pack(counts: &[u8]) -> Option<u64> {
    if counts.len() > 16 {
        return None;
    }
    counts.iter().enumerate().try_fold(0u64, |key, (i, &c)| (c < 16).then(|| key | (u64::from(c) << (4 * i))))
}

impl PoolCtx<'_> {
    pub(super) fn name(&self) -> &str {
        &self.spec.name
    }

    /// GPUs per node.
    pub(crate) fn gpn(&self) -> u32 {
        self.spec.gpus_per_node
    }

    /// Whether the pool's nodes come from an autoscaler (node templates) rather than by name.
    pub(crate) fn autoscaled(&self) -> bool {
        matches!(self.spec.nodes, crate::spec::Nodes::Autoscaled { .. })
    }

    /// Whether instances with these counts per usable profile form a valid layout: the same
    /// answer as [`layouts::from_counts`] (both come from `catalog::layout::validate`), without
    /// placing the instances again (first fit asks this for every GPU it looks at).
    pub(super) fn fits(&self, counts: &[u8]) -> bool {
        self.valid.contains(counts)
    }

    pub(super) fn capacity_gpus(&self) -> u64 {
        u64::from(self.max_nodes) * u64::from(self.gpn())
    }

    pub(super) fn node_name(&self, i: usize) -> String {
        match self.named.get(i) {
            Some(n) => n.clone(),
            None => format!("{}-{}", self.spec.name, i + 1),
        }
    }

    /// The resource a replica of this kind requests.
    pub(super) fn resource(&self, kind: Kind, rename_shared: bool) -> String {
        match kind {
            Kind::Whole(_) => "nvidia.com/gpu".to_owned(),
            Kind::TimeSliced(_) if rename_shared => "nvidia.com/gpu.shared".to_owned(),
            Kind::TimeSliced(_) => "nvidia.com/gpu".to_owned(),
            Kind::MigTs(q, _) => {
                let base = self.resource(Kind::Mig(q), false);
                if rename_shared { format!("{base}.shared") } else { base }
            }
            Kind::Mig(q) => self
                .profiles
                .get(q)
                .map_or_else(|| "nvidia.com/gpu".to_owned(), |p| format!("nvidia.com/mig-{}", p.name)),
        }
    }

    pub(super) fn kind_label(&self, kind: Kind) -> String {
        match kind {
            Kind::Whole(1) => "a whole GPU".to_owned(),
            Kind::Whole(n) => format!("{n} whole GPUs on one node"),
            Kind::TimeSliced(Share { k, mps: true }) => {
                format!("a 1/{k} MPS share of a whole GPU (thread cap {}%)", 100 / k.max(1))
            }
            Kind::TimeSliced(Share { k, .. }) => format!("a 1/{k} time-slice of a whole GPU"),
            Kind::MigTs(q, k) => self
                .profiles
                .get(q)
                .map_or_else(String::new, |p| format!("a 1/{k} time-slice of a MIG `{}` instance", p.name)),
            Kind::Mig(q) => {
                self.profiles.get(q).map_or_else(String::new, |p| format!("a MIG `{}` instance", p.name))
            }
        }
    }
}

/// How many replicas a model needs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Need {
    Replicas(u32),
    Rate { rps: f64, min_replicas: u32 },
}

#[derive(Clone, Debug)]
pub(crate) struct ModelCtx<'a> {
    pub spec: &'a Model,
    pub need: Need,
    pub options: Vec<Opt>,
    pub rejected: Vec<Rejection>,
}

impl ModelCtx<'_> {
    pub(super) fn name(&self) -> &str {
        &self.spec.name
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Problem<'a> {
    pub spec: &'a Spec,
    /// The catalog the pools' GPUs and the models' `gpuTypes` are resolved in.
    pub catalog: &'a Catalog,
    pub pools: Vec<PoolCtx<'a>>,
    pub models: Vec<ModelCtx<'a>>,
    pub rename_shared: bool,
    /// The cheapest pool's cost per GPU-hour when every pool has one (pool weights are
    /// relative to it), else `None` (the planner then minimises GPUs).
    pub unit_price: Option<f64>,
    /// Whether some `spread: gpu` model may run on MIG instances (then placements check
    /// [`crate::plan::assign::NodeA::mig_spread_ok`]).
    pub mig_spread_models: bool,
    /// Small problems (at most [`SMALL_REPLICAS`] replicas, no rate demand, and not
    /// [`is_large`]) model more: heavy time-sliced tenants on combined-compute
    /// nodes, and exclusive MIG replicas on the other instances of MIG time-slicing GPUs of
    /// any layout. Others leave both out (their options and placements too, so that every plan
    /// stays inside the model its bound is for).
    pub small: bool,
}

/// Builds the problem. Pools whose GPU is unknown to the catalog are skipped (the spec stage
/// already rejects them).
pub(crate) fn build<'a>(spec: &'a Spec, catalog: &'a Catalog) -> Problem<'a> {
    let mut pool_specs: Vec<&Pool> = spec.pools.iter().collect();
    pool_specs.sort_by(|a, b| a.name.cmp(&b.name));
    let priced =
        !pool_specs.is_empty() && pool_specs.iter().all(|p| p.cost_per_gpu_hour.is_some_and(|c| c > 0.0));
    let min_cost = pool_specs.iter().filter_map(|p| p.cost_per_gpu_hour).fold(f64::INFINITY, f64::min);
    let mut pools = Vec::new();
    for p in pool_specs {
        let Some(gpu) = catalog.get(&p.gpu) else { continue };
        pools.push(pool_ctx(spec, p, gpu, priced, min_cost));
    }
    let mut model_specs: Vec<&Model> = spec.models.iter().collect();
    model_specs.sort_by(|a, b| a.name.cmp(&b.name));
    let models: Vec<ModelCtx<'_>> =
        model_specs.into_iter().map(|m| model_ctx(spec, catalog, &pools, m)).collect();
    let unit_price = (priced && min_cost.is_finite() && min_cost > 0.0).then_some(min_cost);
    let mig_spread_models = models
        .iter()
        .any(|m| m.spec.spread == Spread::Gpu && m.options.iter().any(|o| matches!(o.kind, Kind::Mig(_))));
    let mut problem = Problem {
        spec,
        catalog,
        pools,
        models,
        rename_shared: spec.cluster.time_slicing.rename_by_default,
        unit_price,
        mig_spread_models,
        small: true,
    };
    // Heavy time-slices only where the optimiser models them: small programs, models without
    // spread (their columns have no combined-compute variables).
    let replicas: u64 = problem
        .models
        .iter()
        .map(|m| match m.need {
            Need::Replicas(n) => u64::from(n),
            Need::Rate { .. } => u64::from(SMALL_REPLICAS) + 1,
        })
        .sum();
    problem.small = !is_large(&problem) && replicas <= u64::from(SMALL_REPLICAS);
    let eff = spec.policy.time_slicing_efficiency;
    for mc in &mut problem.models {
        let keep_heavy = problem.small && mc.spec.spread == Spread::None;
        let c = mc.spec.compute;
        mc.options.retain(|o| keep_heavy || !heavy(o, c, eff));
    }
    problem
}

/// The planner's view of one pool: its usable profiles and candidate layouts (the maximal
/// ones plus those running today), node names, weight in the objective.
fn pool_ctx<'a>(spec: &Spec, p: &'a Pool, gpu: &'a GpuModel, priced: bool, min_cost: f64) -> PoolCtx<'a> {
    // Only the `mixed` strategy exposes MIG devices of several profiles next to whole GPUs;
    // under `none` the device plugin ignores MIG, and `single` needs one profile per node
    // (not planned yet), so both plan whole and time-sliced GPUs only.
    // On the DRA backend the device plugin's strategy does not apply (the driver publishes
    // every static MIG device): MIG is planned wherever the pool allows it.
    let mig_exposed = spec.cluster.mig_strategy == MigStrategy::Mixed || p.dra.is_some();
    let profiles = if mig_exposed && p.sharing.mig { usable_profiles(gpu) } else { Vec::new() };
    let every = layouts::all(gpu, &profiles);
    let counts: Vec<&[u8]> = every.iter().map(|l| l.counts.as_slice()).collect();
    let valid = ValidLayouts::new(&counts);
    let mut layouts = layouts::maximal_of(every);
    // Layouts running today are candidates too, so that keeping them is possible.
    for node in &p.current {
        for names in &node.gpus {
            if names.is_empty() {
                continue;
            }
            if let Some(l) = layouts::from_names(gpu, &profiles, names)
                && !layouts.iter().any(|x| x.counts == l.counts)
            {
                layouts.push(l);
            }
        }
    }
    layouts.sort_by(|a, b| a.key.cmp(&b.key));
    let (named, autoscaled, min_nodes) = match &p.nodes {
        crate::spec::Nodes::Named(names) => {
            let mut names = names.clone();
            names.sort();
            names.dedup();
            (names, false, 0)
        }
        crate::spec::Nodes::Autoscaled { min, .. } => (Vec::new(), true, *min),
    };
    let max_nodes =
        if autoscaled { p.nodes.max_nodes() } else { u32::try_from(named.len()).unwrap_or(u32::MAX) };
    let weight = match p.cost_per_gpu_hour {
        Some(c) if priced && min_cost.is_finite() && min_cost > 0.0 => c / min_cost,
        _ => 1.0,
    };
    let homogeneous = (0..profiles.len())
        .map(|q| {
            let mut best = 0u8;
            for c in 1..=8u8 {
                let mut counts = vec![0u8; profiles.len()];
                counts[q] = c;
                if valid.contains(&counts) {
                    best = c;
                }
            }
            best
        })
        .collect();
    PoolCtx {
        homogeneous,
        spec: p,
        gpu,
        max_nodes,
        min_nodes: min_nodes.min(max_nodes),
        named,
        profiles,
        layouts,
        weight,
        valid,
    }
}

/// The share of a GPU a whole-GPU time-slice takes, for ordering: `1/k` for a light tenant;
/// for a heavy one its share of the efficiency, plus a little per slot so that among equal
/// shares the fewest slots (the most memory, the fewest neighbours) come first.
fn ts_size(compute: f64, k: u32, efficiency: f64) -> f64 {
    if rules::light_tenant(compute, k, efficiency, 1.0) {
        1.0 / f64::from(k)
    } else {
        compute / efficiency.max(1e-9) + 1e-3 * f64::from(k)
    }
}

/// Inputs with at most this many replicas (and no rate demand) are small (see
/// [`Problem::small`]). Beyond, the extensions' variables slowed HiGHS down enough to plan
/// worse: a 40-model, 128-GPU spec (`mid_size_plan_is_near_the_bound…`) took 79 GPUs
/// instead of 77.
const SMALL_REPLICAS: u32 = 32;

/// Column groups above which a program is *large*: the distinct-configs level (a big-M binary
/// per config variable) is left out and the relative gap is [`crate::plan::milp::LARGE_RELATIVE_GAP`]. On the
/// 1,000-GPU benchmark fleet (200 models) those binaries cost HiGHS most of its time in
/// root heuristics while the cost was settled at the first good incumbent.
const LARGE_ABOVE_COLUMNS: usize = 60;

/// The candidate layouts of pool `pi` for rows exact on the `spread: gpu` rule: every valid
/// layout to which no instance of a profile that no `spread: gpu` model uses here can be
/// added (`crate::plan::per_node`'s module header says why the rows need them). `None` when
/// no such model may run on MIG in the pool.
pub(crate) fn spread_layouts(problem: &Problem<'_>, pi: usize) -> Option<Vec<Layout>> {
    let p = &problem.pools[pi];
    let mut spread = vec![false; p.profiles.len()];
    for m in problem.models.iter().filter(|m| m.spec.spread == Spread::Gpu) {
        for o in m.options.iter().filter(|o| o.pool == pi) {
            if let Kind::Mig(q) = o.kind
                && let Some(s) = spread.get_mut(q)
            {
                *s = true;
            }
        }
    }
    if !spread.iter().any(|&s| s) {
        return None;
    }
    let mut out = layouts::maximal_in(layouts::all(p.gpu, &p.profiles), |q| spread.get(q) == Some(&false));
    // Layouts running today stay candidates (the pool is then kept whole).
    for l in &p.layouts {
        if !out.iter().any(|x| x.counts == l.counts) {
            out.push(l.clone());
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Some(out)
}

/// Whether a plan may trim a GPU of some pool to a layout whose `spread: gpu` rows the pool's
/// candidates do not stand for: a layout of [`spread_layouts`] that is not a candidate. The
/// pooled rows of `spread: gpu` on MIG and of several profiles (`milp::Program`) read the
/// candidates' instances, so there they may cut a valid plan (issue 23: on a 32-GPU stress fleet
/// an A30 GPU trimmed to `2g.12gb + 1g.6gb` holds a `spread: gpu` replica on its one `1g.6gb`,
/// while the only candidate holding it has two), and a program with them proves nothing.
pub(crate) fn trims_matter(problem: &Problem<'_>) -> bool {
    (0..problem.pools.len()).any(|pi| {
        spread_layouts(problem, pi).is_some_and(|wide| {
            let p = &problem.pools[pi];
            wide.iter().any(|l| !p.layouts.iter().any(|x| x.counts == l.counts))
        })
    })
}

/// `problem` with [`spread_layouts`] as the candidates of each pool where a `spread: gpu` model
/// may run on MIG: the pooled rows then hold for every plan (see [`trims_matter`]).
pub(crate) fn widened<'a>(problem: &Problem<'a>) -> Problem<'a> {
    let mut wide = problem.clone();
    for pi in 0..wide.pools.len() {
        if let Some(l) = spread_layouts(problem, pi) {
            wide.pools[pi].layouts = l;
        }
    }
    wide
}

/// Whether the program for this problem is *large* (see [`LARGE_ABOVE_COLUMNS`]): counted
/// with the columns of light options only, as the program was before heavy time-slices (which
/// large programs leave out).
pub(crate) fn is_large(problem: &Problem<'_>) -> bool {
    let eff = problem.spec.policy.time_slicing_efficiency;
    let mut keys: std::collections::BTreeSet<Vec<(usize, Kind)>> = std::collections::BTreeSet::new();
    let mut singles = 0usize;
    for m in &problem.models {
        match m.need {
            Need::Replicas(_) if m.spec.spread == Spread::None => {
                let c = m.spec.compute;
                keys.insert(
                    m.options.iter().filter(|o| !heavy(o, c, eff)).map(|o| (o.pool, o.kind)).collect(),
                );
            }
            _ => singles += 1,
        }
    }
    keys.len() + singles > LARGE_ABOVE_COLUMNS
}

/// Candidate layouts (indices into `PoolCtx::layouts`) of GPUs on nodes that time-slice
/// profile `q` of pool `pi`: the one with the most `q` instances (the homogeneous cut, plus
/// idle instances), and with `mixed`, per other profile some model may use exclusively in the
/// pool, the layout with a `q` instance and the most instances of that profile (then the most
/// `q`): where exclusive replicas of that profile share a GPU with the shared ones.
pub(crate) fn mig_ts_layouts(problem: &Problem<'_>, pi: usize, q: usize, mixed: bool) -> Vec<usize> {
    let Some(p) = problem.pools.get(pi) else { return Vec::new() };
    let count = |l: usize, x: usize| p.layouts[l].counts.get(x).copied().unwrap_or(0);
    let with: Vec<usize> = (0..p.layouts.len()).filter(|&l| count(l, q) > 0).collect();
    let best = |key: &dyn Fn(usize) -> (u8, u8)| {
        with.iter().copied().max_by(|&a, &b| key(a).cmp(&key(b)).then(b.cmp(&a)))
    };
    let mut out: Vec<usize> = best(&|l| (count(l, q), 0)).into_iter().collect();
    if mixed {
        let exclusive: std::collections::BTreeSet<usize> = problem
            .models
            .iter()
            .flat_map(|m| &m.options)
            .filter_map(|o| match o.kind {
                Kind::Mig(x) if o.pool == pi && x != q => Some(x),
                _ => None,
            })
            .collect();
        for x in exclusive {
            if let Some(l) = best(&|l| (count(l, x), count(l, q))).filter(|&l| count(l, x) > 0) {
                out.push(l);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether `o` is a heavy time-slice for a tenant of compute `c` ([`rules::light_tenant`]).
pub(crate) fn heavy(o: &Opt, c: f64, efficiency: f64) -> bool {
    matches!(o.kind, Kind::TimeSliced(s) if !rules::light_tenant(c, s.k, efficiency, 1.0))
}

/// Profiles the planner may create: one full-size compute instance per GPU instance, no media
/// attributes (no model asks for them) and not the whole-GPU profile (MIG disabled is strictly
/// better: more memory, more SMs, no config).
pub(crate) fn usable_profiles(gpu: &GpuModel) -> Vec<ProfileInfo> {
    let Some(mig) = &gpu.mig else { return Vec::new() };
    let mut out: Vec<ProfileInfo> = mig
        .profiles
        .iter()
        .filter(|p| !p.name.contains('+') && !p.name.contains('-'))
        .filter(|p| !(p.compute_slices >= mig.compute_slices && p.memory_slices >= mig.memory_slices))
        .map(|p| ProfileInfo {
            name: p.name.clone(),
            memory_mib: p.memory_mib,
            sms: p.sms,
            compute_slices: p.compute_slices,
            memory_slices: p.memory_slices,
        })
        .collect();
    out.sort_by(|a, b| {
        (a.compute_slices, a.memory_slices, &a.name).cmp(&(b.compute_slices, b.memory_slices, &b.name))
    });
    out
}

fn gib(mib: f64) -> String {
    format!("{:.1} GiB", mib / 1024.0)
}

/// Where the option builders put what they admit and what they reject, for one pool.
struct Sink<'o> {
    pi: usize,
    /// Whether a replica alone on its device may be admitted with its SLO unverified (the
    /// second pass of [`model_ctx`], for a model that has no option otherwise).
    unverified_ok: bool,
    options: &'o mut Vec<Opt>,
    rejected: &'o mut Vec<Rejection>,
}

impl Sink<'_> {
    fn reject(&mut self, reason: Reason, text: String) {
        self.rejected.push(Rejection { pool: self.pi, reason, text });
    }

    fn admit(&mut self, kind: Kind, p99_ms: Option<f64>, size: f64, bound_share: f64) {
        self.admit_unverified(kind, p99_ms, None, (size, bound_share));
    }

    /// An option of one process per replica and no measured rate, its SLO possibly unverified.
    fn admit_unverified(
        &mut self,
        kind: Kind,
        p99_ms: Option<f64>,
        unverified: Option<String>,
        size: (f64, f64),
    ) {
        self.options.push(Opt {
            pool: self.pi,
            kind,
            rps: None,
            processes: 1,
            p99_ms,
            unverified,
            measured: None,
            size: size.0,
            bound_share: size.1,
        });
    }

    /// Admits an option whose replica is alone on its device, by [`rules::alone_slo`]: a
    /// prediction above the SLO rejects it (`label` names the device), a refusal of the model
    /// admits it with its SLO unverified.
    fn admit_alone(
        &mut self,
        c: &Candidate<'_, '_>,
        kind: Kind,
        predicted: Option<(f64, Result<f64, Refusal>)>,
        label: &str,
        size: (f64, f64),
    ) {
        let (mut p99_ms, mut unverified) = (None, None);
        match predicted.map(|(slo, p)| (slo, rules::alone_slo(p, slo))) {
            Some((slo, AloneSlo::Missed(pred))) => {
                let at = if kind == Kind::Whole(1) {
                    format!(" at compute {:.2}", c.m.compute)
                } else {
                    String::new()
                };
                self.reject(
                    Reason::Latency,
                    format!("{label} predicts a p99 of {pred:.1} ms{at}, above the {slo:.1} ms SLO"),
                );
                return;
            }
            Some((_, AloneSlo::Met(pred))) => p99_ms = Some(pred),
            Some((_, AloneSlo::Unverified(why))) if !self.unverified_ok => {
                self.reject(Reason::Latency, format!("{label}: the latency model refuses: {why}"));
                return;
            }
            Some((_, AloneSlo::Unverified(why))) => {
                let rate = matches!(c.m.demand, Demand::Rate(_));
                unverified = Some(rules::unverified_slo(label, &c.pool.gpu.id, &why, rate));
            }
            None => {}
        }
        self.admit_unverified(kind, p99_ms, unverified, size);
    }
}

/// One replica-demand model on one pool, as every option builder sees it.
struct Candidate<'c, 'a> {
    pool: &'c PoolCtx<'a>,
    m: &'a Model,
    policy: &'c Policy,
    /// Usable memory of one whole GPU of the pool ([`rules::usable_mib`]).
    gpu_mib: f64,
    /// `(p99 SLO, baseline on this pool's GPU type)` in ms, when the model has a baseline.
    baseline: Option<(f64, f64)>,
}

fn model_ctx<'a>(spec: &Spec, catalog: &Catalog, pools: &[PoolCtx<'a>], m: &'a Model) -> ModelCtx<'a> {
    let need = match &m.demand {
        Demand::Replicas(n) => Need::Replicas(*n),
        Demand::Rate(r) => Need::Rate { rps: r.rps, min_replicas: r.min_replicas.max(1) },
    };
    // First the options whose SLO the model can check; only a model left with none gets its
    // options alone on a device outside the range, unverified (a bigger MIG instance inside the
    // range is an improvement the planner can make, so it is preferred).
    let build = |unverified_ok: bool| {
        let (mut options, mut rejected) = (Vec::new(), Vec::new());
        for (pi, pool) in pools.iter().enumerate() {
            let mut out = Sink { pi, options: &mut options, rejected: &mut rejected, unverified_ok };
            pool_options(&spec.policy, catalog, pool, m, &mut out);
        }
        (options, rejected)
    };
    let (mut options, mut rejected) = build(false);
    if options.is_empty() {
        (options, rejected) = build(true);
    }
    ModelCtx { spec: m, need, options, rejected }
}

/// Every option of `m` on one pool, one builder per kind of option. A new kind of option (a
/// sharing mode) is one more builder called here, with its rule in [`rules`].
fn pool_options<'a>(
    policy: &Policy,
    catalog: &Catalog,
    pool: &PoolCtx<'a>,
    m: &'a Model,
    out: &mut Sink<'_>,
) {
    if !pool_allowed(catalog, pool, m, out) {
        return;
    }
    let gpu_mib = rules::usable_mib(pool.gpu.memory_mib, policy.memory_headroom);
    if let (Some(n), Demand::Replicas(_)) = (m.gpus, &m.demand) {
        multi_gpu_option(pool, m, n, gpu_mib, out);
        return;
    }
    if let Demand::Rate(rate) = &m.demand {
        if m.gpus.is_some_and(|n| n > 1) {
            out.reject(
                Reason::Measurement,
                "rate demand with multi-GPU replicas is not supported; give `replicas`".to_owned(),
            );
            return;
        }
        rate_options(pool, m, rate, policy, out);
        return;
    }
    // The baseline on this pool's GPU type (scaled when measured on another one).
    let baseline =
        match m.latency.as_ref().and_then(|l| rules::baseline_ms(l, pool.gpu).map(|b| (l.p99_ms, b))) {
            Some((slo, Ok(b))) => Some((slo, b)),
            Some((_, Err(why))) => {
                out.reject(Reason::Latency, format!("the latency model refuses: {why}"));
                return;
            }
            None => None,
        };
    let c = Candidate { pool, m, policy, gpu_mib, baseline };
    whole_gpu_option(&c, out);
    mig_options(&c, out);
    if shareable(&c, out) {
        if pool.spec.sharing.time_slicing {
            mig_time_slice_options(&c, out);
        }
        // Both where the pool allows both: each node is then MPS or time-sliced, as chosen.
        if pool.spec.sharing.time_slicing {
            time_slice_options(&c, out);
        }
        if pool.spec.sharing.mps {
            mps_options(&c, out);
        }
    }
}

/// Whether the model may use this pool at all: its `pools` and `gpuTypes`.
fn pool_allowed(catalog: &Catalog, pool: &PoolCtx<'_>, m: &Model, out: &mut Sink<'_>) -> bool {
    if !m.allows_pool(pool.name()) {
        out.reject(Reason::Pool, format!("pool `{}` is not in the model's `pools`", pool.name()));
        return false;
    }
    if !m.allows_gpu(catalog, &pool.gpu.id) {
        out.reject(
            Reason::Pool,
            format!("GPU `{}` of pool `{}` is not in the model's `gpuTypes`", pool.gpu.id, pool.name()),
        );
        return false;
    }
    true
}

/// `n` exclusive whole GPUs on one node: each GPU holds its share of the replica's memory
/// ([`rules::per_gpu_mib`], as the verifier checks it).
fn multi_gpu_option(pool: &PoolCtx<'_>, m: &Model, n: u32, gpu_mib: f64, out: &mut Sink<'_>) {
    let mem = m.memory_mib as f64;
    if n > pool.gpn() {
        out.reject(
            Reason::NodeSize,
            format!(
                "a replica needs {n} GPUs on one node but nodes of pool `{}` have {}",
                pool.name(),
                pool.gpn()
            ),
        );
    } else if rules::per_gpu_mib(m.memory_mib, n) as f64 > gpu_mib {
        out.reject(
            Reason::Memory,
            format!(
                "{} per GPU on {n} × `{}` ({}) is less than the {} each GPU needs ({} in all)",
                gib(gpu_mib),
                pool.gpu.id,
                pool.name(),
                gib(rules::per_gpu_mib(m.memory_mib, n) as f64),
                gib(mem)
            ),
        );
    } else {
        out.admit(Kind::Whole(n), None, f64::from(n), f64::from(n));
        if m.latency.as_ref().is_some_and(|l| l.baseline_ms.is_some())
            && let Some(o) = out.options.last_mut()
        {
            let rate = matches!(m.demand, Demand::Rate(_));
            let why =
                rules::unverified_slo(&format!("{n} whole GPUs"), &pool.gpu.id, &Refusal::MultiGpu, rate);
            o.unverified = Some(why);
        }
    }
}

/// One exclusive whole GPU.
fn whole_gpu_option(c: &Candidate<'_, '_>, out: &mut Sink<'_>) {
    let (m, mem) = (c.m, c.m.memory_mib as f64);
    if mem > c.gpu_mib {
        out.reject(
            Reason::Memory,
            format!(
                "a whole `{}` has {} usable, less than the {} needed",
                c.pool.gpu.id,
                gib(c.gpu_mib),
                gib(mem)
            ),
        );
        return;
    }
    if m.compute > 1.0 + 1e-9 {
        out.reject(Reason::Compute, format!("compute {:.2} exceeds one whole GPU", m.compute));
        return;
    }
    let predicted = c.baseline.map(|(slo, b)| (slo, rules::whole_p99_ms(b, m.compute)));
    out.admit_alone(c, Kind::Whole(1), predicted, "a whole GPU", (1.0, 1.0));
}

/// The share of a GPU a MIG instance of this profile occupies: (larger, smaller) of its
/// compute-slice and memory-slice shares, for ordering and for the size lower bound.
fn mig_shares(pool: &PoolCtx<'_>, p: &ProfileInfo) -> (f64, f64) {
    let mig = pool.gpu.mig.as_ref();
    let cs = mig.map_or(7.0, |g| f64::from(g.compute_slices));
    let ms = mig.map_or(8.0, |g| f64::from(g.memory_slices));
    let (c, me) = (f64::from(p.compute_slices) / cs, f64::from(p.memory_slices) / ms);
    (c.max(me), c.min(me))
}

/// One exclusive MIG instance per usable profile (never for `dedicated` models).
fn mig_options(c: &Candidate<'_, '_>, out: &mut Sink<'_>) {
    let (pool, m, mem) = (c.pool, c.m, c.m.memory_mib as f64);
    if m.isolation == Isolation::Dedicated {
        if !pool.profiles.is_empty() {
            out.reject(
                Reason::Isolation,
                "isolation `dedicated` allows whole GPUs only, not MIG instances".to_owned(),
            );
        }
        return;
    }
    for (q, p) in pool.profiles.iter().enumerate() {
        let inst_mib = rules::usable_mib(p.memory_mib, c.policy.memory_headroom);
        let share = f64::from(p.sms) / f64::from(pool.gpu.sms.max(1));
        if mem > inst_mib {
            out.reject(
                Reason::Memory,
                format!("`{}` has {} usable, less than the {} needed", p.name, gib(inst_mib), gib(mem)),
            );
            continue;
        }
        if share + 1e-9 < m.compute {
            out.reject(
                Reason::Compute,
                format!(
                    "`{}` has {}/{} SMs ({share:.2}), less than compute {:.2}",
                    p.name, p.sms, pool.gpu.sms, m.compute
                ),
            );
            continue;
        }
        let predicted =
            c.baseline.map(|(slo, b)| (slo, rules::mig_p99_ms(b, pool.gpu.sms, p.sms, m.compute)));
        out.admit_alone(c, Kind::Mig(q), predicted, &format!("`{}`", p.name), mig_shares(pool, p));
    }
}

/// Whether the model may share a device with other replicas at all (time-slicing of a GPU or
/// of a MIG instance): the policy allows sharing, the model is `shared`, and not an `llm`
/// under `policy.llmNeverTimeSliced`.
fn shareable(c: &Candidate<'_, '_>, out: &mut Sink<'_>) -> bool {
    if c.policy.max_time_slicing_replicas < 2 {
        return false;
    }
    if c.m.isolation != Isolation::Shared {
        out.reject(Reason::Isolation, format!("isolation `{}` forbids time-slicing", c.m.isolation.word()));
        return false;
    }
    if c.m.llm && c.policy.llm_never_time_sliced {
        out.reject(
            Reason::Isolation,
            "`llm` models are never time-sliced (`policy.llmNeverTimeSliced`)".to_owned(),
        );
        return false;
    }
    true
}

/// One of `k` time-slicing replicas of a whole GPU, for every `k` from 2 up to
/// `policy.maxTimeSlicingReplicas` while the replica fits 1/k of the memory, the compute rule
/// and the SLO ([`whole_share_options`]).
fn time_slice_options(c: &Candidate<'_, '_>, out: &mut Sink<'_>) {
    whole_share_options(c, out, WholeShare::TimeSlicing);
}

/// How a pool shares its whole GPUs: the mode's words, compute rule and latency law.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WholeShare {
    TimeSlicing,
    Mps,
}

/// One of `k` shared replicas of a whole GPU by `mode`, for every `k` from 2 up to
/// `policy.maxTimeSlicingReplicas` (the limit of both modes) while the replica fits `1/k` of
/// the memory ([`rules::slot_mib`]), the mode's compute rule and, with a baseline, the SLO by
/// the mode's law against worst-case neighbours: `k − 1` co-tenants sharing the rest of the
/// efficiency. A light tenant (k copies fit the efficiency) fits next to any k − 1 light ones;
/// a heavy one (it fits alone) only next to co-tenants small enough, which placement checks
/// against the node's real tenants.
fn whole_share_options(c: &Candidate<'_, '_>, out: &mut Sink<'_>, mode: WholeShare) {
    let (m, mem) = (c.m, c.m.memory_mib as f64);
    let eff = c.policy.time_slicing_efficiency;
    let what = if mode == WholeShare::Mps { "MPS share" } else { "time-slice" };
    for k in 2..=c.policy.max_time_slicing_replicas.min(64) {
        let slot = rules::slot_mib(c.gpu_mib, k);
        if mem > slot {
            out.reject(
                Reason::Memory,
                format!(
                    "a 1/{k} {what} of `{}` has {}, less than the {} needed",
                    c.pool.gpu.id,
                    gib(slot),
                    gib(mem)
                ),
            );
            return;
        }
        let (fits, why) = match mode {
            WholeShare::TimeSlicing => (
                rules::shared_compute_fits(&[m.compute], k, eff, 1.0),
                format!("compute {:.2} exceeds the time-slicing efficiency {eff:.2}", m.compute),
            ),
            WholeShare::Mps => (
                rules::mps_compute_fits(&[m.compute], k, eff, 1.0),
                format!(
                    "compute {:.2} exceeds a 1/{k} MPS share's thread cap {:.2} or the efficiency {eff:.2}",
                    m.compute,
                    rules::mps_thread_cap(k)
                ),
            ),
        };
        if !fits {
            out.reject(Reason::Compute, why);
            return;
        }
        let predicted = c.baseline.map(|(slo, b)| {
            let neighbours = rules::admission_neighbours(m.compute, k, eff, 1.0);
            let p99 = match mode {
                WholeShare::TimeSlicing => rules::time_sliced_p99_ms(b, m.compute, &neighbours),
                WholeShare::Mps => rules::mps_p99_ms(b, 1.0, m.compute, &neighbours, k),
            };
            (slo, p99)
        });
        let Some(p99) = colocated_p99(out, &format!("a 1/{k} {what}"), predicted) else { return };
        let share = Share { k, mps: mode == WholeShare::Mps };
        out.admit(Kind::TimeSliced(share), p99, ts_size(m.compute, k, eff), rules::slot_share(k));
    }
}

/// Judges the predicted p99 of a co-location option (`label` names it): a refusal of the
/// latency model or a prediction above the SLO rejects the option (`None`: the larger `k` fare
/// no better); otherwise the prediction, if the model has a baseline.
fn colocated_p99(
    out: &mut Sink<'_>,
    label: &str,
    predicted: Option<(f64, Result<f64, Refusal>)>,
) -> Option<Option<f64>> {
    match predicted {
        None => Some(None),
        Some((_, Err(why))) => {
            out.reject(Reason::Latency, format!("{label}: the latency model refuses: {why}"));
            None
        }
        Some((slo, Ok(pred))) if pred > slo => {
            out.reject(
                Reason::Latency,
                format!("{label} predicts a p99 of {pred:.1} ms, above the {slo:.1} ms SLO"),
            );
            None
        }
        Some((_, Ok(pred))) => Some(Some(pred)),
    }
}

/// One of `k` MPS clients of a whole GPU ([`whole_share_options`] by MPS): each client within
/// `1/k` of the memory (the control daemon pins `total ÷ k` per client), within its thread cap
/// `⌊100/k⌋%` ([`rules::mps_compute_fits`]) and the SLO by the MPS law. A model with
/// `allowMps: false` is refused: one client's fatal error takes the others on the GPU down.
fn mps_options(c: &Candidate<'_, '_>, out: &mut Sink<'_>) {
    if !c.m.allow_mps {
        out.reject(Reason::Isolation, format!("`allowMps: false`: no MPS share of pool `{}`", c.pool.name()));
        return;
    }
    whole_share_options(c, out, WholeShare::Mps);
}

/// Options of a rate-demand model: only devices with an admissible measured point. A point is
/// admissible when it was measured with one process (the device plugin cannot run MPS on MIG)
/// or, under measured-point MPS ([`rules::measured_mps`]: a `dra` pool allowing `mps`), with up
/// to `policy.maxTimeSlicingReplicas` processes each within its pinned share of the device
/// memory ([`rules::mps_process_fits`]). Per device and process count the capacity is
/// [`crate::spec::RateDemand::capacity_with`]: a measured sweep interpolated up to
/// `admission_factor × slo`, never beyond its last point; a single point for its own rate. The
/// device's best capacity over its processes together wins. A point on the MIG profile
/// spanning the GPU is a whole-GPU option ([`point_kind`]). Time-slicing is never used for rate
/// models: a measurement of one process alone says nothing about throughput under sharing.
fn rate_options(pool: &PoolCtx<'_>, m: &Model, rate: &RateDemand, policy: &Policy, out: &mut Sink<'_>) {
    let gpu_mib = rules::usable_mib(pool.gpu.memory_mib, policy.memory_headroom);
    let max_processes = rules::measured_mps_max(pool.spec, m, policy);
    let mem = m.memory_mib as f64;
    let saw_point = rate.points.iter().any(|p| p.gpu == pool.gpu.id);
    // `whole` first, so that a tie keeps the whole GPU's own points.
    let mut names: Vec<&str> =
        rate.points.iter().filter(|p| p.gpu == pool.gpu.id).map(|p| p.profile.as_str()).collect();
    names.sort_by_key(|&n| (n != WHOLE, n));
    names.dedup();
    let mut best: BTreeMap<Kind, (Capacity, u32, String)> = BTreeMap::new();
    for name in names {
        let Some(kind) = point_kind(pool, name) else { continue };
        let (cap, ..) = rate_device(pool, kind, gpu_mib, policy.memory_headroom);
        for k in 1..=max_processes {
            if k > 1 && !rules::mps_process_fits(mem, cap, k) {
                continue;
            }
            let Some(c) = rate.capacity_with(&pool.gpu.id, name, k) else { continue };
            let total = c.rps * f64::from(k);
            if best.get(&kind).is_none_or(|(b, bk, _)| total > b.rps * f64::from(*bk)) {
                best.insert(kind, (c, k, name.to_owned()));
            }
        }
    }
    if best.is_empty() {
        let text = if saw_point {
            format!(
                "no measured point on `{}` is admissible ({}, latency below {:.2} × SLO)",
                pool.gpu.id,
                if max_processes > 1 {
                    format!("up to {max_processes} MPS processes within their memory share")
                } else {
                    "one process".to_owned()
                },
                rate.admission_factor
            )
        } else {
            format!("no measured point on `{}`", pool.gpu.id)
        };
        out.reject(Reason::Measurement, text);
        return;
    }
    for (kind, (capacity, processes, profile)) in best {
        let rps = capacity.rps * f64::from(processes);
        let (cap, size, label) = rate_device(pool, kind, gpu_mib, policy.memory_headroom);
        if (m.isolation == Isolation::Dedicated || m.gpus.is_some()) && matches!(kind, Kind::Mig(_)) {
            out.reject(
                Reason::Isolation,
                "isolation `dedicated` allows whole GPUs only, not MIG instances".to_owned(),
            );
            continue;
        }
        if mem > cap {
            out.reject(
                Reason::Memory,
                format!("`{label}` has {} usable, less than the {} needed", gib(cap), gib(mem)),
            );
            continue;
        }
        out.options.push(Opt {
            pool: out.pi,
            kind,
            rps: Some(rps),
            processes,
            p99_ms: None,
            unverified: None,
            measured: capacity.sweep_reason(&pool.gpu.id, &profile),
            size: size.0,
            bound_share: size.1,
        });
    }
}

/// The device a measured point's profile names on `pool`: a whole GPU
/// ([`rules::whole_gpu_point`]), else the pool's usable profile of that name.
fn point_kind(pool: &PoolCtx<'_>, profile: &str) -> Option<Kind> {
    if rules::whole_gpu_point(pool.gpu, profile) {
        Some(Kind::Whole(1))
    } else {
        pool.profiles.iter().position(|p| p.name == profile).map(Kind::Mig)
    }
}

/// A rate option's device: its usable memory, its (ordering, bound) shares and its name.
fn rate_device(pool: &PoolCtx<'_>, kind: Kind, gpu_mib: f64, headroom: f64) -> (f64, (f64, f64), String) {
    match kind {
        Kind::Mig(q) => pool.profiles.get(q).map_or((0.0, (1.0, 1.0), String::new()), |p| {
            (rules::usable_mib(p.memory_mib, headroom), mig_shares(pool, p), p.name.clone())
        }),
        _ => (gpu_mib, (1.0, 1.0), "whole".to_owned()),
    }
}

/// Time-slices of MIG instances for `shared` models: every tenant must fit in 1/k of the
/// instance's memory, k tenants' compute must fit in the efficiency share of the instance's SMs,
/// and the predicted p99 (MIG stretch, then time-slicing inflation with worst-case neighbours)
/// must meet the SLO. Only profiles whose instances alone can fill a GPU (`homogeneous`) count.
fn mig_time_slice_options(c: &Candidate<'_, '_>, out: &mut Sink<'_>) {
    let (pool, m, policy) = (c.pool, c.m, c.policy);
    let eff = policy.time_slicing_efficiency;
    for (q, p) in pool.profiles.iter().enumerate() {
        let n = pool.homogeneous.get(q).copied().unwrap_or(0);
        if n == 0 {
            continue;
        }
        let inst = rules::usable_mib(p.memory_mib, policy.memory_headroom);
        let share = f64::from(p.sms) / f64::from(pool.gpu.sms.max(1));
        for k in 2..=policy.max_time_slicing_replicas.min(64) {
            if m.memory_mib as f64 > rules::slot_mib(inst, k)
                || !rules::shared_compute_fits(&vec![m.compute; k as usize], k, eff, share)
            {
                break;
            }
            let p99 = c.baseline.map(|(slo, b)| {
                // Worst case: k − 1 neighbours sharing the rest of the instance's efficiency.
                let neighbours = rules::worst_neighbours(k, eff, share);
                let pred = rules::mig_time_sliced_p99_ms(b, pool.gpu.sms, p.sms, m.compute, &neighbours);
                (slo, pred.unwrap_or(f64::INFINITY))
            });
            if p99.is_some_and(|(slo, pred)| pred > slo) {
                break;
            }
            let size = 1.0 / (f64::from(k) * f64::from(n));
            out.admit(Kind::MigTs(q, k), p99.map(|(_, v)| v), size, size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ValidLayouts, usable_profiles};
    use crate::catalog::Catalog;
    use crate::plan::layouts;

    /// Every count vector of up to 7 instances of each usable profile (`f` is called with
    /// each), in a fixed order.
    fn every_count(profiles: usize, f: &mut impl FnMut(&[u8])) {
        let mut counts = vec![0u8; profiles];
        loop {
            f(&counts);
            let Some(i) = counts.iter().position(|&c| c < 7) else { return };
            counts[i] += 1;
            counts[..i].fill(0);
        }
    }

    /// The packed keys answer as the layout validator (`layouts::from_counts`, through
    /// `catalog::layout::validate`) for every count vector of up to 7 instances a profile, on
    /// every MIG GPU of the built-in catalog; so does the fallback that keeps the counts.
    #[test]
    fn valid_layouts_answer_as_the_layout_validator() {
        let catalog = Catalog::builtin();
        let mut checked = 0;
        for gpu in catalog.iter().filter(|g| g.mig.is_some()) {
            let profiles = usable_profiles(gpu);
            let every = layouts::all(gpu, &profiles);
            let counts: Vec<&[u8]> = every.iter().map(|l| l.counts.as_slice()).collect();
            let packed = ValidLayouts::new(&counts);
            assert!(matches!(packed, ValidLayouts::Packed { .. }), "{}: not packed", gpu.id);
            let kept = ValidLayouts::Counts(counts.iter().map(|c| c.to_vec()).collect());
            every_count(profiles.len(), &mut |c| {
                let valid = layouts::from_counts(gpu, &profiles, c.to_vec()).is_some();
                assert_eq!(packed.contains(c), valid, "{}: {c:?}", gpu.id);
                assert_eq!(kept.contains(c), valid, "{}: {c:?}", gpu.id);
                checked += usize::from(valid);
            });
            // A vector of another length is no layout of this GPU, even with the same key.
            let mut longer = every.first().map(|l| l.counts.clone()).unwrap_or_default();
            longer.push(0);
            assert!(!packed.contains(&longer), "{}: {longer:?}", gpu.id);
        }
        assert!(checked > 100, "only {checked} valid layouts checked");
    }
}
