//! From a concrete [`Assignment`] to the public [`Plan`]: node and GPU views, named mig-parted
//! and device-plugin configs, replica groups per model, reasons and the quality report.
//!
//! Guarantee: every MIG GPU's layout is re-validated with [`crate::catalog::layout::validate`]
//! here (its placements come from that call); a layout that fails is an internal error.

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::migparted::{ALL_DISABLED, DEFAULT_DEVICE_PLUGIN_CONFIG};
use crate::plan::assign::{Assignment, Dev, NodeA, PoolA};
use crate::plan::bounds::LowerBound;
use crate::plan::problem::{Kind, ModelCtx, Need, PoolCtx, Problem, Share};
use crate::plan::{
    CostFigures, DevicePluginConfig, GpuFigures, GpuMode, GpuPlan, MigConfig, MigConfigEntry, ModelPlan,
    NodePlan, Plan, PoolPlan, Quality, ReplicaGroup, Tenant,
};
use crate::spec::Keyword;

/// Figures the quality report needs besides the assignment.
#[derive(Clone, Debug)]
pub(crate) struct Figures {
    /// No plan the verifier accepts beats it.
    pub valid: LowerBound,
    /// No plan of the planner's model beats it (the LP relaxations of GPUs and of cost, or the
    /// program's proven optimum: `plan::proven_bounds`).
    pub model: LowerBound,
    /// Whether the solver proved the plan optimal for the full program.
    pub solver_proved: bool,
    /// The first-fit-decreasing plan, when there is one.
    pub ffd: Option<FirstFit>,
    /// Which planner produced the assignment and how (one sentence, goes into every model's reasons).
    pub method: String,
}

/// The size of the first-fit-decreasing plan, the baseline the quality report compares with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FirstFit {
    pub gpus: u32,
    /// Its cost per hour, when every pool is priced.
    pub cost_per_hour: Option<f64>,
}

/// How a reason naming an alternative the planner did not take begins (`explain` shows the
/// first few of them, closest first).
pub const ALTERNATIVE_PREFIX: &str = "could also run on";

/// (model, pool, resource, GPUs per replica).
type GroupKey = (usize, usize, String, u32);

/// The MPS processes each replica of `mc`'s group on pool `pi` and `resource` runs on its device:
/// a measured point's `k` (one option per model, pool and device kind, so the resource names it),
/// else 1.
fn group_processes(problem: &Problem<'_>, mc: &ModelCtx<'_>, pi: usize, resource: &str) -> u32 {
    mc.options
        .iter()
        .find(|o| {
            o.pool == pi
                && matches!(o.kind, Kind::Mig(_) | Kind::Whole(1))
                && problem.pools[pi].resource(o.kind, false) == resource
        })
        .map_or(1, |o| o.processes)
}

/// A Kubernetes label value made of the pool name: `[A-Za-z0-9._-]`, alphanumeric ends.
fn label_part(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' { c } else { '-' })
        .collect();
    out.truncate(max);
    let trimmed = out.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if trimmed.is_empty() { "pool".to_owned() } else { trimmed.to_owned() }
}

/// What the pools add up to while [`build`] walks them: the named configs, the replica groups
/// and the totals of the quality report.
struct Totals {
    mig_configs: BTreeMap<String, MigConfig>,
    plugin_configs: BTreeMap<String, DevicePluginConfig>,
    /// (model, pool, resource, per_replica) → (replicas, nodes)
    groups: BTreeMap<GroupKey, (u32, BTreeSet<String>)>,
    gpus_used: u32,
    cost: f64,
    priced: bool,
}

pub(crate) fn build(problem: &Problem<'_>, a: &Assignment, fig: &Figures) -> Result<Plan, String> {
    let mut plugin_configs: BTreeMap<String, DevicePluginConfig> = BTreeMap::new();
    plugin_configs.insert(DEFAULT_DEVICE_PLUGIN_CONFIG.to_owned(), DevicePluginConfig::default());
    let mut t = Totals {
        mig_configs: BTreeMap::from([(ALL_DISABLED.to_owned(), MigConfig::disabled())]),
        plugin_configs,
        groups: BTreeMap::new(),
        gpus_used: 0,
        cost: 0.0,
        priced: true,
    };
    let mut pools = Vec::new();
    for (pi, (pool, pa)) in problem.pools.iter().zip(&a.pools).enumerate() {
        pools.push(pool_plan(problem, pi, pool, pa, &mut t)?);
    }
    let (models, one_per_replica) = model_plans(problem, a, fig, &t.groups);
    // The bounds are reported as computed, never clamped to the plan: a bound above the plan
    // is a bug the verifier reports.
    let gpus_used = t.gpus_used;
    let mut quality = Quality {
        gpus: GpuFigures {
            used: gpus_used,
            lower_bound: fig.valid.gpus,
            model_lower_bound: fig.model.gpus,
            one_per_replica,
            first_fit_decreasing: fig.ffd.map(|f| f.gpus),
        },
        cost: CostFigures {
            used: (t.priced && gpus_used > 0).then_some((t.cost * 1e6).round() / 1e6),
            lower_bound: fig.valid.cost_per_hour,
            model_lower_bound: fig.model.cost_per_hour,
            first_fit_decreasing: fig.ffd.and_then(|f| f.cost_per_hour).map(|c| (c * 1e6).round() / 1e6),
        },
        proof: crate::plan::Proof::Unproven,
    };
    quality.proof = quality.judge(fig.solver_proved);
    Ok(Plan {
        name: problem.spec.name.clone(),
        pools,
        models,
        mig_configs: t.mig_configs,
        device_plugin_configs: t.plugin_configs,
        quality,
        changes: None,
    })
}

/// One pool's view: its nodes (named MIG and device-plugin configs registered in `t`), its
/// replica groups and GPUs added to `t`.
fn pool_plan(
    problem: &Problem<'_>,
    pi: usize,
    pool: &PoolCtx<'_>,
    pa: &PoolA,
    t: &mut Totals,
) -> Result<PoolPlan, String> {
    // Per node: the MIG spec of each GPU (None = MIG disabled).
    let mut node_specs: Vec<Vec<Option<Vec<u8>>>> = Vec::new();
    for n in &pa.nodes {
        node_specs.push(
            n.gpus
                .iter()
                .map(|d| match d {
                    Dev::Mig { counts, .. } | Dev::MigTs { counts, .. } => Some(counts.clone()),
                    _ => None,
                })
                .collect(),
        );
    }
    // Name the distinct MIG node layouts of this pool, in order of their description.
    let describe = |spec: &[Option<Vec<u8>>]| -> String {
        spec.iter()
            .map(|s| match s {
                None => "off".to_owned(),
                Some(c) => crate::plan::layouts::from_counts(pool.gpu, &pool.profiles, c.clone())
                    .map_or_else(|| "invalid".to_owned(), |l| l.key),
            })
            .collect::<Vec<_>>()
            .join("|")
    };
    let distinct: BTreeSet<String> =
        node_specs.iter().filter(|s| s.iter().any(Option::is_some)).map(|s| describe(s)).collect();
    let base = format!("gpuplan-{}", label_part(pool.name(), 40));
    let names: BTreeMap<String, String> =
        distinct.iter().enumerate().map(|(i, d)| (d.clone(), format!("{base}-{}", i + 1))).collect();

    let mut nodes = Vec::new();
    for (ni, (n, spec)) in pa.nodes.iter().zip(&node_specs).enumerate() {
        let node_name = pool.node_name(ni);
        let mut gpus = Vec::new();
        let mut ts_k = None;
        let mut mig_ts: BTreeMap<String, u32> = BTreeMap::new();
        for (gi, d) in n.gpus.iter().enumerate() {
            let index = gi as u32;
            let (mode, tenants) = gpu_view(problem, pool, d, &node_name, gi, &mut ts_k, &mut mig_ts)?;
            let uuid = pool.spec.dra.as_ref().and_then(|d| d.uuid(&node_name, index)).map(str::to_owned);
            gpus.push(GpuPlan { index, uuid, mode, tenants });
        }
        node_groups(problem, pi, pool, n, &node_name, &mut t.groups);
        let used = gpus.iter().filter(|g| g.mode != GpuMode::Unused).count() as u32;
        t.gpus_used += used;
        match pool.spec.cost_per_gpu_hour {
            Some(c) => t.cost += c * f64::from(used),
            None if used > 0 => t.priced = false,
            None => {}
        }
        let mig_config = if spec.iter().any(Option::is_some) {
            let key = describe(spec);
            let name = names.get(&key).cloned().unwrap_or_else(|| ALL_DISABLED.to_owned());
            t.mig_configs.entry(name.clone()).or_insert_with(|| mig_config(pool, spec));
            name
        } else {
            ALL_DISABLED.to_owned()
        };
        let device_plugin_config = plugin_config(ts_k, &mig_ts, &mut t.plugin_configs);
        let must_drain = must_drain(pool, &node_name, &gpus);
        nodes.push(NodePlan {
            name: node_name,
            mig_config,
            device_plugin_config,
            must_drain,
            gpus,
            transition: None,
        });
    }
    nodes.sort_by(|x, y| x.name.cmp(&y.name));
    Ok(PoolPlan {
        name: pool.name().to_owned(),
        gpu: pool.gpu.id.clone(),
        autoscaled: pool.autoscaled(),
        nodes,
    })
}

/// One GPU's mode and tenants. Notes the share (mode and replicas) of a shared whole GPU in `ts_k`
/// and those of a time-sliced MIG profile in `mig_ts` (resource → replicas).
fn gpu_view(
    problem: &Problem<'_>,
    pool: &PoolCtx<'_>,
    d: &Dev,
    node_name: &str,
    gi: usize,
    ts_k: &mut Option<Share>,
    mig_ts: &mut BTreeMap<String, u32>,
) -> Result<(GpuMode, Vec<Tenant>), String> {
    let tenant = |m: usize| Tenant { model: problem.models[m].name().to_owned(), instance_start: None };
    Ok(match d {
        Dev::Unused => (GpuMode::Unused, Vec::new()),
        Dev::Whole { tenant: t } => (GpuMode::Whole, t.iter().map(|&m| tenant(m)).collect()),
        Dev::Ts { k, tenants } => {
            *ts_k = Some(*k);
            let mut t: Vec<Tenant> = tenants.iter().map(|&m| tenant(m)).collect();
            t.sort_by(|x, y| x.model.cmp(&y.model));
            let mode =
                if k.mps { GpuMode::Mps { replicas: k.k } } else { GpuMode::TimeSliced { replicas: k.k } };
            (mode, t)
        }
        Dev::MigTs { q, k, counts, tenants, excl } => {
            let placed = placed_instances(pool, counts, node_name, gi)?;
            let Some(shared) = pool.profiles.get(*q) else {
                return Err(format!("internal: no shared profile on `{node_name}` GPU {gi}"));
            };
            mig_ts.insert(format!("nvidia.com/mig-{}", shared.name), *k);
            // The device plugin picks the instance; show the shared tenants spread
            // over the instances of the shared profile.
            let starts: Vec<u8> =
                placed.iter().filter(|p| p.profile == shared.name).map(|p| p.start).collect();
            let mut sorted: Vec<&str> = tenants.iter().map(|&m| problem.models[m].name()).collect();
            sorted.sort();
            let mut ts: Vec<Tenant> = sorted
                .iter()
                .enumerate()
                .map(|(i, m)| Tenant {
                    model: (*m).to_owned(),
                    instance_start: starts.get(i % starts.len().max(1)).copied(),
                })
                .collect();
            let free: Vec<(String, u8)> = placed
                .iter()
                .filter(|p| p.profile != shared.name)
                .map(|p| (p.profile.clone(), p.start))
                .collect();
            ts.extend(exclusive_tenants(problem, pool, free, excl, node_name, gi)?);
            ts.sort_by(|x, y| x.instance_start.cmp(&y.instance_start).then(x.model.cmp(&y.model)));
            (GpuMode::Mig { instances: placed }, ts)
        }
        Dev::Mig { counts, tenants } => {
            let placed = placed_instances(pool, counts, node_name, gi)?;
            let free: Vec<(String, u8)> = placed.iter().map(|p| (p.profile.clone(), p.start)).collect();
            let mut ts = exclusive_tenants(problem, pool, free, tenants, node_name, gi)?;
            ts.sort_by_key(|t| t.instance_start);
            (GpuMode::Mig { instances: placed }, ts)
        }
    })
}

/// Adds one node's replicas to the replica groups (model, pool, resource, GPUs per replica).
fn node_groups(
    problem: &Problem<'_>,
    pi: usize,
    pool: &PoolCtx<'_>,
    n: &NodeA,
    node_name: &str,
    groups: &mut BTreeMap<GroupKey, (u32, BTreeSet<String>)>,
) {
    for ((m, kind), count) in n.replicas(problem) {
        // `resource` names MIG instances the same whatever the renaming of shared resources.
        let per = if let Kind::Whole(per) = kind { per } else { 1 };
        let e = groups.entry((m, pi, pool.resource(kind, problem.rename_shared), per)).or_default();
        e.0 += count;
        e.1.insert(node_name.to_owned());
    }
}

/// The device-plugin config a node needs (registered in `configs` under its name): time-slicing
/// or MPS of whole GPUs (by the node's share `ts_k`), time-slicing of MIG profiles (`mig_ts`),
/// or the default.
fn plugin_config(
    ts_k: Option<Share>,
    mig_ts: &BTreeMap<String, u32>,
    configs: &mut BTreeMap<String, DevicePluginConfig>,
) -> String {
    match ts_k {
        Some(Share { k, mps: true }) => {
            let name = format!("gpuplan-mps-gpu-{k}");
            configs.entry(name.clone()).or_insert_with(|| DevicePluginConfig {
                mps: BTreeMap::from([("nvidia.com/gpu".to_owned(), k)]),
                ..DevicePluginConfig::default()
            });
            name
        }
        Some(Share { k, .. }) => {
            let name = format!("gpuplan-ts-gpu-{k}");
            configs.entry(name.clone()).or_insert_with(|| DevicePluginConfig {
                time_slicing: BTreeMap::from([("nvidia.com/gpu".to_owned(), k)]),
                ..DevicePluginConfig::default()
            });
            name
        }
        None if !mig_ts.is_empty() => {
            let parts: Vec<String> =
                mig_ts.iter().map(|(r, k)| format!("{}-{k}", r.trim_start_matches("nvidia.com/"))).collect();
            let mut name = format!("gpuplan-ts-{}", parts.join("-"));
            name.truncate(63);
            let name = name.trim_end_matches(|c: char| !c.is_ascii_alphanumeric()).to_owned();
            configs
                .entry(name.clone())
                .or_insert_with(|| DevicePluginConfig { time_slicing: mig_ts.clone(), ..Default::default() });
            name
        }
        None => DEFAULT_DEVICE_PLUGIN_CONFIG.to_owned(),
    }
}

/// Every model's replica groups and reasons, and the GPUs if every replica had its own.
fn model_plans(
    problem: &Problem<'_>,
    a: &Assignment,
    fig: &Figures,
    groups: &BTreeMap<GroupKey, (u32, BTreeSet<String>)>,
) -> (Vec<ModelPlan>, u32) {
    let mut models = Vec::new();
    let mut one_per_replica = 0u32;
    for (mi, mc) in problem.models.iter().enumerate() {
        let mut gs = Vec::new();
        for ((m, pi, resource, per), (replicas, nodes)) in groups {
            if *m != mi {
                continue;
            }
            let processes = group_processes(problem, mc, *pi, resource);
            gs.push(ReplicaGroup {
                resource: resource.clone(),
                per_replica: *per,
                replicas: *replicas,
                pool: problem.pools[*pi].name().to_owned(),
                nodes: nodes.iter().cloned().collect(),
                processes,
            });
            one_per_replica += replicas * per;
        }
        let reasons = reasons(problem, a, mi, fig);
        let slo_unverified = slo_unverified(problem, a, mi);
        models.push(ModelPlan { name: mc.name().to_owned(), groups: gs, reasons, slo_unverified });
    }
    (models, one_per_replica)
}

/// Exclusive MIG tenants `(profile, model)`, each on a `free` instance `(profile, start)` of
/// its profile, in model-name order.
fn exclusive_tenants(
    problem: &Problem<'_>,
    pool: &crate::plan::problem::PoolCtx<'_>,
    mut free: Vec<(String, u8)>,
    tenants: &[(usize, usize)],
    node: &str,
    gi: usize,
) -> Result<Vec<Tenant>, String> {
    let mut sorted = tenants.to_vec();
    sorted.sort_by(|x, y| problem.models[x.1].name().cmp(problem.models[y.1].name()).then(x.0.cmp(&y.0)));
    let mut out = Vec::new();
    for (q, m) in sorted {
        let pname = &pool.profiles[q].name;
        let Some(pos) = free.iter().position(|(p, _)| p == pname) else {
            return Err(format!("internal: no `{pname}` instance left on `{node}` GPU {gi}"));
        };
        let (_, start) = free.remove(pos);
        out.push(Tenant { model: problem.models[m].name().to_owned(), instance_start: Some(start) });
    }
    Ok(out)
}

/// The instances of the MIG layout `counts` on GPU `gi` of `node`, re-validated through the
/// catalog: the placement shown is that call's.
fn placed_instances(
    pool: &crate::plan::problem::PoolCtx<'_>,
    counts: &[u8],
    node: &str,
    gi: usize,
) -> Result<Vec<crate::catalog::layout::PlacedInstance>, String> {
    let layout = crate::plan::layouts::from_counts(pool.gpu, &pool.profiles, counts.to_vec())
        .ok_or_else(|| format!("internal: invalid MIG layout on `{node}` GPU {gi}"))?;
    let names = layout.names(&pool.profiles);
    crate::catalog::layout::validate(pool.gpu, &names)
        .map_err(|e| format!("internal: layout on `{node}` GPU {gi}: {e}"))
}

fn mig_config(pool: &crate::plan::problem::PoolCtx<'_>, spec: &[Option<Vec<u8>>]) -> MigConfig {
    let counts_map = |c: &[u8]| -> BTreeMap<String, u32> {
        c.iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .filter_map(|(q, n)| pool.profiles.get(q).map(|p| (p.name.clone(), u32::from(*n))))
            .collect()
    };
    let filter = pool.gpu.pci_ids.clone();
    let uniform = spec.windows(2).all(|w| w[0] == w[1]);
    if uniform && let Some(Some(c)) = spec.first() {
        return MigConfig {
            entries: vec![MigConfigEntry {
                devices: None,
                device_filter: filter,
                mig_enabled: true,
                mig_devices: counts_map(c),
            }],
        };
    }
    // Devices differ: one entry per distinct GPU spec, by index, MIG-disabled GPUs first.
    let mut by_spec: BTreeMap<Option<Vec<u8>>, Vec<u32>> = BTreeMap::new();
    for (i, s) in spec.iter().enumerate() {
        by_spec.entry(s.clone()).or_default().push(i as u32);
    }
    let mut entries: Vec<MigConfigEntry> = by_spec
        .into_iter()
        .map(|(s, devices)| MigConfigEntry {
            devices: Some(devices),
            device_filter: filter.clone(),
            mig_enabled: s.is_some(),
            mig_devices: s.as_deref().map(counts_map).unwrap_or_default(),
        })
        .collect();
    entries.sort_by(|x, y| x.devices.cmp(&y.devices));
    MigConfig { entries }
}

fn must_drain(pool: &crate::plan::problem::PoolCtx<'_>, node: &str, gpus: &[GpuPlan]) -> bool {
    let Some(current) = pool.spec.current.iter().find(|c| c.node == node) else { return false };
    gpus.iter().enumerate().any(|(i, g)| {
        let mut planned: Vec<String> = match &g.mode {
            GpuMode::Mig { instances } => instances.iter().map(|p| p.profile.clone()).collect(),
            _ => Vec::new(),
        };
        let mut now: Vec<String> = current.gpus.get(i).cloned().unwrap_or_default();
        planned.sort();
        now.sort();
        planned != now
    })
}

fn gib(mib: f64) -> String {
    format!("{:.1} GiB", mib / 1024.0)
}

/// The sentences of the chosen options whose SLO is unverified ([`crate::plan::rules::alone_slo`]),
/// each once, in option order.
fn slo_unverified(problem: &Problem<'_>, a: &Assignment, mi: usize) -> Vec<String> {
    let mc = &problem.models[mi];
    let mut out: Vec<String> = Vec::new();
    for o in &mc.options {
        let chosen = a.replicas.get(&(mi, o.pool, o.kind)).is_some_and(|&n| n > 0);
        if let Some(why) = o.unverified.as_ref().filter(|w| chosen && !out.contains(w)) {
            out.push(why.clone());
        }
    }
    out
}

fn reasons(problem: &Problem<'_>, a: &Assignment, mi: usize, fig: &Figures) -> Vec<String> {
    let mc = &problem.models[mi];
    let m = mc.spec;
    let mut out = Vec::new();
    let chosen: Vec<(usize, Kind, u32)> =
        a.replicas.iter().filter(|((x, _, _), _)| *x == mi).map(|(&(_, p, k), &n)| (p, k, n)).collect();
    match &mc.need {
        Need::Replicas(n) => out.push(format!(
            "needs {n} replica(s) of {} and compute {:.2} each, isolation `{}`, spread `{}`",
            gib(m.memory_mib as f64),
            m.compute,
            m.isolation.word(),
            m.spread.word()
        )),
        Need::Rate { rps, min_replicas } => out.push(format!(
            "needs {rps:.1} requests/s with at least {min_replicas} replica(s) of {}",
            gib(m.memory_mib as f64)
        )),
    }
    let mut covered = 0.0;
    for &(pi, kind, n) in &chosen {
        let pool = &problem.pools[pi];
        let opt = mc.options.iter().find(|o| o.pool == pi && o.kind == kind);
        let mut s = format!(
            "{n} replica(s) on {} in pool `{}` (`{}`)",
            pool.kind_label(kind),
            pool.name(),
            pool.resource(kind, problem.rename_shared)
        );
        if let Some(o) = opt {
            if let Some(r) = o.rps {
                covered += r * f64::from(n);
                s.push_str(&format!(", {r:.1} requests/s each"));
                if o.processes > 1 {
                    s.push_str(&format!(" as {} MPS processes on one DRA claim", o.processes));
                }
            }
            if let Some(why) = &o.measured {
                s.push_str(&format!(" ({why})"));
            }
            if let Some(why) = &o.unverified {
                s.push_str(&format!("; {why}"));
            }
            if let Some(p) = o.p99_ms {
                s.push_str(&format!(", predicted p99 {p:.1} ms"));
                if let Some(l) = &m.latency {
                    s.push_str(&format!(" within the {:.1} ms SLO", l.p99_ms));
                    let mig = matches!(kind, Kind::Mig(_) | Kind::MigTs(..));
                    if let Some(note) = super::rules::uncalibrated(l, pool.gpu, mig) {
                        s.push_str(&format!(" ({note})"));
                    }
                }
            }
        }
        out.push(s);
    }
    if let Need::Rate { rps, .. } = mc.need {
        out.push(format!("throughput: the replicas cover {covered:.1} of the {rps:.1} requests/s needed"));
    }
    // Why not smaller: the rejected candidates in the pools the model uses.
    let used_pools: BTreeSet<usize> = chosen.iter().map(|c| c.0).collect();
    for r in mc.rejected.iter().filter(|r| used_pools.contains(&r.pool)) {
        out.push(format!("not {}: {}", r.reason.word(), r.text));
    }
    // Options it had but did not take, the closest in size to a chosen one first (ties: pool,
    // kind), so that `explain` can show the few nearest.
    let chosen_sizes: Vec<f64> = chosen
        .iter()
        .filter_map(|c| mc.options.iter().find(|o| o.pool == c.0 && o.kind == c.1).map(|o| o.size))
        .collect();
    let distance = |o: &crate::plan::problem::Opt| {
        chosen_sizes.iter().map(|s| (s - o.size).abs()).fold(f64::INFINITY, f64::min)
    };
    let mut others: Vec<&crate::plan::problem::Opt> = mc
        .options
        .iter()
        .filter(|o| used_pools.contains(&o.pool) && !chosen.iter().any(|c| c.0 == o.pool && c.1 == o.kind))
        .collect();
    others.sort_by(|x, y| {
        distance(x).total_cmp(&distance(y)).then(x.pool.cmp(&y.pool)).then(x.kind.cmp(&y.kind))
    });
    for o in others {
        let pool = &problem.pools[o.pool];
        out.push(format!(
            "{ALTERNATIVE_PREFIX} {} in pool `{}`; the optimiser preferred the choice above",
            pool.kind_label(o.kind),
            pool.name()
        ));
    }
    out.push(fig.method.clone());
    out
}
