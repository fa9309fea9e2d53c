//! An independent checker of plans: does a [`Plan`] really serve its [`Spec`] on the hardware?
//!
//! In: the checked spec, the catalog and a plan from any source (the planner, a file, a test).
//! Out: every [`Violation`] found, sorted and without duplicates; empty means the plan is sound.
//! It shares no code with the planner beyond the stage types, [`crate::catalog::layout::validate`]
//! and the rules written once for both (`plan::rules`, `RateDemand::admits`); hand-made
//! counterexamples (`tests.rs`) test those rules here, so a shared bug cannot hide either.
//!
//! What is checked, per GPU, per node and per model:
//! - MIG GPUs: the instance multiset passes `layout::validate`, and the plan's own placements sit
//!   at allowed starts, inside the slice grid, without overlapping;
//! - memory: a tenant needs at most its device's NVML MiB (less `policy.memory_headroom`), or 1/k
//!   of it on a device time-sliced k ways (the device plugin, not gpuplan, picks the physical
//!   device); a multi-GPU replica needs `memory / gpus` on each of its GPUs;
//! - compute: at most the instance's SM share or the whole GPU; on a time-sliced resource with k
//!   replicas the k largest tenants of the node's devices together fit in
//!   `policy.time_slicing_efficiency` of one device;
//! - isolation: `hardware` never time-sliced, `dedicated` only on whole GPUs, multi-GPU models only
//!   on whole GPUs, `llm` models not time-sliced under `policy.llm_never_time_sliced`;
//! - demand: replicas placed = replicas asked, or the rate covered by the groups using the model's
//!   admissible measured points (`processes == 1`, `latency < admission_factor × slo`, the best
//!   rps per GPU and profile; a time-sliced group covers nothing, as no point was measured shared);
//! - spread (`gpu`: distinct GPUs, and at most one replica per node and time-sliced resource as
//!   the device plugin may stack them; `node`: distinct nodes), allowed pools and GPU types, node
//!   capacity of each pool;
//! - node configs: a node never exposes both exclusive and time-sliced `nvidia.com/gpu`, its
//!   device-plugin config exists and matches its GPUs, its mig-parted config exists, has an entry
//!   for every GPU and that entry matches the GPU's layout; `all-disabled` exists;
//! - every replica group's resource is exposed on each node it lists, and the groups agree with
//!   the tenants on the GPUs; the quality figures agree with the GPUs.

pub mod figures;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use crate::catalog::{Catalog, GpuModel, MigProfile, layout};
use crate::plan::latency::Refusal;
use crate::plan::{GpuMode, GpuPlan, NodePlan, Plan, PoolPlan, ReplicaGroup, rules};
use crate::spec::{Demand, Isolation, Model, Nodes, Pool, Spec, Spread};

pub use figures::{Coverage, Figures, figures};

/// Tolerance for comparing shares and rates computed in floating point.
const EPS: f64 = 1e-9;

/// What rule a plan breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A pool, model or GPU the plan names does not exist in the spec or catalog.
    Unknown,
    /// A MIG layout that cannot exist on the GPU, or placements that overlap or sit at a wrong start.
    InvalidLayout,
    /// A tenant that points at no instance, sits on an unused GPU, or crowds an exclusive device.
    Tenant,
    Memory,
    Compute,
    Isolation,
    /// Placed replicas differ from the demand, or from the replica groups.
    Replicas,
    /// A rate demand not covered by the groups' admissible measured points.
    Rate,
    /// A replica whose predicted p99 latency exceeds its SLO.
    Latency,
    Spread,
    /// A model placed in a pool or on a GPU type it may not use.
    AllowedPools,
    /// More nodes or GPUs than the pool has, or nodes the pool does not name.
    NodeCapacity,
    /// A node whose sharing is inconsistent (exclusive and time-sliced `nvidia.com/gpu`, two counts).
    NodeSharing,
    /// A node's device-plugin config is missing or disagrees with its GPUs.
    DevicePluginConfig,
    /// A node's mig-parted config is missing or disagrees with its GPUs.
    MigConfig,
    /// A replica group whose resource is not exposed on a node it lists.
    GroupResource,
    /// `Plan::quality` disagrees with the plan.
    Quality,
}

/// One broken rule: where, and what is wrong (lowercase, names in backticks).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Violation {
    pub kind: Kind,
    /// The place, e.g. ``pool `a100` node `gpu-a-1` gpu 0`` or ``model `asr` ``.
    pub at: String,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}: {}", self.kind, self.at, self.message)
    }
}

/// Checks `plan` against `spec` and `catalog`. Returns every violation, sorted; empty = sound.
pub fn check(spec: &Spec, catalog: &Catalog, plan: &Plan) -> Vec<Violation> {
    let mut checker = Checker {
        spec,
        catalog,
        plan,
        out: Vec::new(),
        placed: Vec::new(),
        models: spec.models.iter().map(|m| (m.name.as_str(), m)).collect(),
        nodes: plan
            .pools
            .iter()
            .flat_map(|p| p.nodes.iter().map(move |n| ((p.name.as_str(), n.name.as_str()), n)))
            .collect(),
    };
    checker.run();
    let mut out = checker.out;
    out.sort();
    out.dedup();
    out
}

/// One tenant entry on a device, as the verifier sees it.
#[derive(Clone, Debug)]
struct Placed<'a> {
    model: &'a str,
    pool: &'a str,
    node: &'a str,
    gpu: u32,
    /// The extended resource the tenant consumes (with `.shared` when renamed).
    resource: String,
    /// Time-slicing replicas of the device, if it is shared.
    shared: Option<u32>,
}

struct Checker<'a> {
    spec: &'a Spec,
    catalog: &'a Catalog,
    plan: &'a Plan,
    out: Vec<Violation>,
    placed: Vec<Placed<'a>>,
    /// Spec models by name.
    models: BTreeMap<&'a str, &'a Model>,
    /// Planned nodes by (pool, node).
    nodes: BTreeMap<(&'a str, &'a str), &'a NodePlan>,
}

fn gpu_at(pool: &str, node: &str, index: u32) -> String {
    format!("pool `{pool}` node `{node}` gpu {index}")
}

fn node_at(pool: &str, node: &str) -> String {
    format!("pool `{pool}` node `{node}`")
}

impl<'a> Checker<'a> {
    fn push(&mut self, kind: Kind, at: impl Into<String>, message: impl Into<String>) {
        self.out.push(Violation { kind, at: at.into(), message: message.into() });
    }

    fn run(&mut self) {
        if !self.plan.mig_configs.contains_key(crate::catalog::migparted::ALL_DISABLED) {
            self.push(Kind::MigConfig, "plan", "the mig configs lack `all-disabled`");
        }
        let mut seen_pools = BTreeSet::new();
        for pool_plan in &self.plan.pools {
            if !seen_pools.insert(pool_plan.name.as_str()) {
                self.push(Kind::Unknown, format!("pool `{}`", pool_plan.name), "the pool appears twice");
                continue;
            }
            self.check_pool(pool_plan);
        }
        self.check_models();
        self.check_quality();
    }

    fn model(&self, name: &str) -> Option<&'a Model> {
        self.models.get(name).copied()
    }

    fn shared_name(&self, base: &str) -> String {
        if self.spec.cluster.time_slicing.rename_by_default {
            format!("{base}.shared")
        } else {
            base.to_owned()
        }
    }

    fn check_pool(&mut self, pool_plan: &'a PoolPlan) {
        let at = format!("pool `{}`", pool_plan.name);
        let Some(pool) = self.spec.pools.iter().find(|p| p.name == pool_plan.name) else {
            self.push(Kind::Unknown, at, "the spec has no such pool");
            return;
        };
        let Some(gpu) = self.catalog.get(&pool.gpu) else {
            self.push(Kind::Unknown, at, format!("the catalog has no GPU `{}`", pool.gpu));
            return;
        };
        if self.catalog.get(&pool_plan.gpu).map(|g| &g.id) != Some(&gpu.id) {
            self.push(
                Kind::Unknown,
                at.clone(),
                format!("the plan says GPU `{}`, the spec `{}`", pool_plan.gpu, gpu.id),
            );
        }
        let max_nodes = pool.nodes.max_nodes();
        if pool_plan.nodes.len() > max_nodes as usize {
            self.push(
                Kind::NodeCapacity,
                at.clone(),
                format!("{} nodes planned, the pool has at most {max_nodes}", pool_plan.nodes.len()),
            );
        }
        let mut names = BTreeSet::new();
        for node in &pool_plan.nodes {
            if !names.insert(node.name.as_str()) {
                self.push(Kind::NodeCapacity, at.clone(), format!("node `{}` appears twice", node.name));
                continue;
            }
            if let Nodes::Named(named) = &pool.nodes
                && !named.contains(&node.name)
            {
                self.push(Kind::NodeCapacity, node_at(&pool.name, &node.name), "the pool names no such node");
            }
            self.check_node(pool, gpu, node);
        }
    }

    fn check_node(&mut self, pool: &'a Pool, gpu: &'a GpuModel, node: &'a NodePlan) {
        let at = node_at(&pool.name, &node.name);
        if node.gpus.len() > pool.gpus_per_node as usize {
            self.push(
                Kind::NodeCapacity,
                at.clone(),
                format!("{} GPUs planned, nodes have {}", node.gpus.len(), pool.gpus_per_node),
            );
        }
        let mut indices = BTreeSet::new();
        for g in &node.gpus {
            if g.index >= pool.gpus_per_node || !indices.insert(g.index) {
                self.push(
                    Kind::NodeCapacity,
                    at.clone(),
                    format!("gpu index {} is out of range or repeated", g.index),
                );
            }
        }
        let empty = BTreeMap::new();
        let config_mps = self
            .plan
            .device_plugin_configs
            .get(&node.device_plugin_config)
            .is_some_and(|c| !c.mps.is_empty());
        let sharing = match self.plan.device_plugin_configs.get(&node.device_plugin_config) {
            Some(config) => config.shared(),
            None => {
                self.push(
                    Kind::DevicePluginConfig,
                    at.clone(),
                    format!("device-plugin config `{}` does not exist", node.device_plugin_config),
                );
                &empty
            }
        };
        let mig_config = self.plan.mig_configs.get(&node.mig_config);
        if mig_config.is_none() {
            self.push(
                Kind::MigConfig,
                at.clone(),
                format!("mig config `{}` does not exist", node.mig_config),
            );
        }

        // Node-level sharing of `nvidia.com/gpu`.
        let exclusive = node.gpus.iter().any(|g| g.mode == GpuMode::Whole && !g.tenants.is_empty());
        let counts: BTreeSet<u32> = node
            .gpus
            .iter()
            .filter_map(|g| match g.mode {
                GpuMode::TimeSliced { replicas } | GpuMode::Mps { replicas } => Some(replicas),
                _ => None,
            })
            .collect();
        self.check_mps_node(pool, node, config_mps);
        if exclusive && !counts.is_empty() {
            self.push(
                Kind::NodeSharing,
                at.clone(),
                "the node exposes both exclusive and time-sliced `nvidia.com/gpu`",
            );
        }
        if counts.len() > 1 {
            self.push(
                Kind::NodeSharing,
                at.clone(),
                format!("time-sliced GPUs use different replica counts {counts:?}; sharing is per node"),
            );
        }
        let whole_shared = sharing.get("nvidia.com/gpu").copied();
        if let Some(&k) = counts.iter().next()
            && whole_shared != Some(k)
        {
            self.push(
                Kind::DevicePluginConfig,
                at.clone(),
                format!(
                    "config `{}` must time-slice `nvidia.com/gpu` with {k} replicas, it has {whole_shared:?}",
                    node.device_plugin_config
                ),
            );
        }
        if exclusive && whole_shared.is_some() {
            self.push(
                Kind::DevicePluginConfig,
                at.clone(),
                format!(
                    "config `{}` time-slices `nvidia.com/gpu` but the node has exclusive whole GPUs",
                    node.device_plugin_config
                ),
            );
        }

        let first_placed = self.placed.len();
        for g in &node.gpus {
            self.check_gpu(pool, gpu, node, g, sharing);
            if let Some(config) = mig_config {
                self.check_mig_entry(pool, gpu, node, g, config);
            }
        }
        self.check_any_k_cotenants(pool, gpu, node, sharing, first_placed);
    }

    /// MPS is one sharing mode per node, on whole GPUs only, where the pool allows it: a node
    /// whose config shares by MPS has no time-sliced or MIG GPU, and its GPUs are MPS GPUs only
    /// if it does.
    fn check_mps_node(&mut self, pool: &Pool, node: &NodePlan, config_mps: bool) {
        let at = node_at(&pool.name, &node.name);
        let mps_gpus = node.gpus.iter().any(|g| matches!(g.mode, GpuMode::Mps { .. }));
        if mps_gpus && !pool.sharing.mps {
            self.push(Kind::NodeSharing, at.clone(), "MPS on a pool whose `sharing` does not list `mps`");
        }
        if mps_gpus != config_mps {
            self.push(
                Kind::DevicePluginConfig,
                at.clone(),
                format!(
                    "config `{}` {} MPS but the node's GPUs {}",
                    node.device_plugin_config,
                    if config_mps { "configures" } else { "does not configure" },
                    if mps_gpus { "are MPS clients" } else { "are not" }
                ),
            );
        }
        if config_mps
            && node.gpus.iter().any(|g| matches!(g.mode, GpuMode::TimeSliced { .. } | GpuMode::Mig { .. }))
        {
            self.push(
                Kind::NodeSharing,
                at,
                "an MPS node with time-sliced or MIG GPUs (MPS is one mode per node, on whole GPUs)",
            );
        }
    }

    fn check_gpu(
        &mut self,
        pool: &'a Pool,
        gpu: &'a GpuModel,
        node: &'a NodePlan,
        g: &'a GpuPlan,
        sharing: &BTreeMap<String, u32>,
    ) {
        let at = gpu_at(&pool.name, &node.name, g.index);
        let headroom = self.spec.policy.memory_headroom;
        for t in &g.tenants {
            if self.model(&t.model).is_none() {
                self.push(Kind::Unknown, at.clone(), format!("tenant `{}` is no model of the spec", t.model));
            }
            if !matches!(g.mode, GpuMode::Mig { .. }) && t.instance_start.is_some() {
                self.push(
                    Kind::Tenant,
                    at.clone(),
                    format!("tenant `{}` names a MIG instance on a non-MIG GPU", t.model),
                );
            }
        }
        let models: Vec<&'a Model> = g.tenants.iter().filter_map(|t| self.model(&t.model)).collect();
        match &g.mode {
            GpuMode::Unused => {
                if !g.tenants.is_empty() {
                    self.push(Kind::Tenant, at, "an unused GPU has tenants");
                }
            }
            GpuMode::Whole => {
                if g.tenants.len() > 1 {
                    self.push(
                        Kind::Tenant,
                        at.clone(),
                        format!("{} tenants on an exclusive whole GPU", g.tenants.len()),
                    );
                }
                for m in models {
                    let per_gpu = m.memory_mib.div_ceil(u64::from(m.gpus.unwrap_or(1).max(1)));
                    self.check_memory(
                        &at,
                        m,
                        per_gpu,
                        rules::usable_mib(gpu.memory_mib, headroom),
                        "the GPU",
                    );
                    if m.compute > 1.0 + EPS {
                        self.push(
                            Kind::Compute,
                            at.clone(),
                            format!("`{}` needs compute {} > 1", m.name, m.compute),
                        );
                    }
                    // Multi-GPU replicas have no latency model (the planner predicts none).
                    let p99 = m
                        .latency
                        .as_ref()
                        .and_then(|l| rules::baseline_ms(l, gpu))
                        .filter(|_| m.gpus.unwrap_or(1) <= 1)
                        .map(|b| b.and_then(|b| rules::whole_p99_ms(b, m.compute)));
                    self.check_alone_latency(&at, m, p99);
                    self.record(m, pool, node, g.index, "nvidia.com/gpu".to_owned(), None);
                }
            }
            GpuMode::TimeSliced { replicas } | GpuMode::Mps { replicas } => {
                self.check_shared_gpu(pool, gpu, node, g, *replicas, &models);
            }
            GpuMode::Mig { instances } => self.check_mig_gpu(pool, gpu, node, g, instances, sharing),
        }
    }

    /// A whole GPU shared by time-slicing or MPS with `replicas` slots: the slot count, the
    /// tenants' memory (`1/k` each) and compute, and for MPS the thread cap and `allowMps`.
    fn check_shared_gpu(
        &mut self,
        pool: &'a Pool,
        gpu: &'a GpuModel,
        node: &'a NodePlan,
        g: &'a GpuPlan,
        replicas: u32,
        models: &[&'a Model],
    ) {
        let at = gpu_at(&pool.name, &node.name, g.index);
        let headroom = self.spec.policy.memory_headroom;
        let efficiency = self.spec.policy.time_slicing_efficiency;
        let (k, mps) = (replicas, matches!(g.mode, GpuMode::Mps { .. }));
        if k < 2 || k > self.spec.policy.max_time_slicing_replicas {
            self.push(
                Kind::NodeSharing,
                at.clone(),
                format!(
                    "time-slicing replicas {k} outside 2..={}",
                    self.spec.policy.max_time_slicing_replicas
                ),
            );
        }
        if g.tenants.len() > k as usize {
            self.push(
                Kind::Tenant,
                at.clone(),
                format!("{} tenants on {k} time-slicing replicas", g.tenants.len()),
            );
        }
        let share = rules::slot_mib(rules::usable_mib(gpu.memory_mib, headroom), k);
        let computes: Vec<f64> = models.iter().map(|m| m.compute).collect();
        let total: f64 = computes.iter().sum();
        if !rules::shared_compute_fits(&computes, k, efficiency, 1.0) {
            self.push(
                Kind::Compute,
                at.clone(),
                format!("tenants need compute {total:.3} > time-slicing efficiency {efficiency}"),
            );
        }
        if mps && !rules::mps_compute_fits(&computes, k, efficiency, 1.0) {
            self.push(
                Kind::Compute,
                at.clone(),
                format!(
                    "an MPS client needs more compute than its thread cap {:.2}",
                    rules::mps_thread_cap(k)
                ),
            );
        }
        let resource = self.shared_name("nvidia.com/gpu");
        for &m in models {
            self.check_memory(&at, m, m.memory_mib, share, &format!("1/{k} of the GPU"));
            self.check_shareable(&at, m);
            if mps && !m.allow_mps {
                self.push(
                    Kind::Isolation,
                    at.clone(),
                    format!("`{}` refuses MPS (`allowMps: false`)", m.name),
                );
            }
            self.record(m, pool, node, g.index, resource.clone(), Some(k));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn check_mig_gpu(
        &mut self,
        pool: &'a Pool,
        gpu: &'a GpuModel,
        node: &'a NodePlan,
        g: &'a GpuPlan,
        instances: &'a [layout::PlacedInstance],
        sharing: &BTreeMap<String, u32>,
    ) {
        let at = gpu_at(&pool.name, &node.name, g.index);
        let Some(mig) = &gpu.mig else {
            self.push(Kind::InvalidLayout, at, format!("`{}` does not support MIG", gpu.id));
            return;
        };
        let names: Vec<&str> = instances.iter().map(|i| i.profile.as_str()).collect();
        if let Err(e) = layout::validate(gpu, &names) {
            self.push(Kind::InvalidLayout, at.clone(), format!("layout {names:?}: {e}"));
        }
        // The plan's own placements, checked on the slice grid independently of `validate`.
        let mut used = vec![false; usize::from(mig.memory_slices)];
        let mut starts = BTreeSet::new();
        for inst in instances {
            let Some(p) = gpu.profile(&inst.profile) else {
                self.push(
                    Kind::InvalidLayout,
                    at.clone(),
                    format!("`{}` has no profile `{}`", gpu.id, inst.profile),
                );
                continue;
            };
            if !starts.insert(inst.start) {
                self.push(
                    Kind::InvalidLayout,
                    at.clone(),
                    format!("two instances start at slice {}", inst.start),
                );
            }
            if !p.starts.contains(&inst.start) {
                self.push(
                    Kind::InvalidLayout,
                    at.clone(),
                    format!("`{}` may not start at slice {} (allowed {:?})", p.name, inst.start, p.starts),
                );
            }
            let range = usize::from(inst.start)..usize::from(inst.start) + usize::from(p.size);
            if range.end > used.len() {
                self.push(
                    Kind::InvalidLayout,
                    at.clone(),
                    format!("`{}` at slice {} leaves the GPU", p.name, inst.start),
                );
                continue;
            }
            if used[range.clone()].iter().any(|&u| u) {
                self.push(
                    Kind::InvalidLayout,
                    at.clone(),
                    format!("`{}` at slice {} overlaps another instance", p.name, inst.start),
                );
            }
            used[range].iter_mut().for_each(|u| *u = true);
        }
        let headroom = self.spec.policy.memory_headroom;
        let efficiency = self.spec.policy.time_slicing_efficiency;
        for t in &g.tenants {
            let found = t.instance_start.and_then(|s| instances.iter().find(|i| i.start == s));
            if found.is_none() {
                self.push(
                    Kind::Tenant,
                    at.clone(),
                    format!("tenant `{}` names no instance (start {:?})", t.model, t.instance_start),
                );
            }
        }
        for inst in instances {
            let Some(p) = gpu.profile(&inst.profile) else { continue };
            let here: Vec<&'a Model> = g
                .tenants
                .iter()
                .filter(|t| t.instance_start == Some(inst.start))
                .filter_map(|t| self.model(&t.model))
                .collect();
            let inst_at = format!("{at} instance `{}`@{}", p.name, inst.start);
            let base = p.resource_name();
            let sm_share = f64::from(p.sms) / f64::from(gpu.sms.max(1));
            match sharing.get(&base).copied() {
                Some(k) => {
                    if here.len() > k as usize {
                        self.push(
                            Kind::Tenant,
                            inst_at.clone(),
                            format!("{} tenants on {k} time-slicing replicas", here.len()),
                        );
                    }
                    let computes: Vec<f64> = here.iter().map(|m| m.compute).collect();
                    let total: f64 = computes.iter().sum();
                    if !rules::shared_compute_fits(&computes, k, efficiency, sm_share) {
                        self.push(
                            Kind::Compute,
                            inst_at.clone(),
                            format!(
                                "tenants need compute {total:.3} > {:.3} (efficiency × SM share)",
                                efficiency * sm_share
                            ),
                        );
                    }
                    let resource = self.shared_name(&base);
                    for m in here {
                        let share = rules::slot_mib(rules::usable_mib(p.memory_mib, headroom), k);
                        self.check_memory(
                            &inst_at,
                            m,
                            m.memory_mib,
                            share,
                            &format!("1/{k} of the instance"),
                        );
                        self.check_shareable(&inst_at, m);
                        self.check_mig_allowed(&inst_at, m);
                        self.record(m, pool, node, g.index, resource.clone(), Some(k));
                    }
                }
                None => {
                    if here.len() > 1 {
                        self.push(
                            Kind::NodeSharing,
                            inst_at.clone(),
                            format!(
                                "{} tenants share an instance whose resource `{base}` is not time-sliced",
                                here.len()
                            ),
                        );
                    }
                    for m in here {
                        self.check_memory(
                            &inst_at,
                            m,
                            m.memory_mib,
                            rules::usable_mib(p.memory_mib, headroom),
                            "the instance",
                        );
                        if m.compute > sm_share + EPS {
                            self.push(
                                Kind::Compute,
                                inst_at.clone(),
                                format!(
                                    "`{}` needs compute {} > the instance's SM share {sm_share:.3}",
                                    m.name, m.compute
                                ),
                            );
                        }
                        self.check_mig_allowed(&inst_at, m);
                        let p99 = m
                            .latency
                            .as_ref()
                            .and_then(|l| rules::baseline_ms(l, gpu))
                            .map(|b| b.and_then(|b| rules::mig_p99_ms(b, gpu.sms, p.sms, m.compute)));
                        self.check_alone_latency(&inst_at, m, p99);
                        self.record(m, pool, node, g.index, base.clone(), None);
                    }
                }
            }
        }
    }

    /// Under time-slicing the device plugin picks the device: any k tenants of one shared resource
    /// on the node may land together, so the k largest must fit.
    fn check_any_k_cotenants(
        &mut self,
        pool: &'a Pool,
        gpu: &'a GpuModel,
        node: &'a NodePlan,
        sharing: &BTreeMap<String, u32>,
        first_placed: usize,
    ) {
        let efficiency = self.spec.policy.time_slicing_efficiency;
        let mps = node.gpus.iter().any(|g| matches!(g.mode, GpuMode::Mps { .. }));
        let mut by_resource: BTreeMap<String, Vec<&'a Model>> = BTreeMap::new();
        // This node's tenants were recorded last, from `first_placed` on.
        for p in self.placed.iter().skip(first_placed).filter(|p| p.shared.is_some()) {
            if let Some(m) = self.model(p.model) {
                by_resource.entry(p.resource.clone()).or_default().push(m);
            }
        }
        for (resource, tenants) in by_resource {
            let base = resource.strip_suffix(".shared").unwrap_or(&resource);
            let Some(&k) = sharing.get(base) else { continue };
            let instance = if base == "nvidia.com/gpu" {
                None
            } else {
                match gpu.mig.as_ref().and_then(|m| m.profiles.iter().find(|p| p.resource_name() == base)) {
                    Some(p) => Some(p),
                    None => continue,
                }
            };
            let capacity = instance.map_or(1.0, |p| f64::from(p.sms) / f64::from(gpu.sms.max(1)));
            let computes: Vec<f64> = tenants.iter().map(|m| m.compute).collect();
            // Latency with the largest k − 1 other tenants of the resource as neighbours (the
            // device plugin may put any of them next to this one), in the planner's model.
            for (i, m) in tenants.iter().enumerate() {
                let Some(b) = m.latency.as_ref().and_then(|l| rules::baseline_ms(l, gpu)) else { continue };
                let mut others: Vec<f64> =
                    computes.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, &c)| c).collect();
                others.sort_by(|x, y| y.total_cmp(x));
                others.truncate(k.saturating_sub(1) as usize);
                let p99 = b.and_then(|b| match instance {
                    None if mps => rules::mps_p99_ms(b, 1.0, m.compute, &others, k),
                    None => rules::time_sliced_p99_ms(b, m.compute, &others),
                    Some(p) => rules::mig_time_sliced_p99_ms(b, gpu.sms, p.sms, m.compute, &others),
                });
                self.check_latency(
                    &format!("{} resource `{resource}`", node_at(&pool.name, &node.name)),
                    m,
                    Some(p99),
                );
            }
            let mut sorted = computes.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            let top: f64 = sorted.iter().take(k as usize).sum();
            if !rules::shared_compute_fits(&computes, k, efficiency, capacity) {
                self.push(
                    Kind::Compute,
                    node_at(&pool.name, &node.name),
                    format!(
                        "any {k} tenants of `{resource}` may share one device: the largest need {top:.3} > {:.3}",
                        efficiency * capacity
                    ),
                );
            }
        }
    }

    fn check_mig_entry(
        &mut self,
        pool: &Pool,
        gpu: &GpuModel,
        node: &NodePlan,
        g: &GpuPlan,
        config: &crate::plan::MigConfig,
    ) {
        let at = gpu_at(&pool.name, &node.name, g.index);
        // mig-parted applies every matching entry in order: the last one decides.
        let entry = config.entries.iter().rev().find(|e| {
            e.devices.as_ref().is_none_or(|d| d.contains(&g.index))
                && (e.device_filter.is_empty()
                    || e.device_filter
                        .iter()
                        .any(|f| gpu.pci_ids.iter().any(|id| id.eq_ignore_ascii_case(f))))
        });
        let Some(entry) = entry else {
            self.push(
                Kind::MigConfig,
                at,
                format!("no entry of mig config `{}` applies to this GPU", node.mig_config),
            );
            return;
        };
        match &g.mode {
            GpuMode::Mig { instances } => {
                let mut want: BTreeMap<String, u32> = BTreeMap::new();
                for i in instances {
                    *want.entry(i.profile.clone()).or_default() += 1;
                }
                if !entry.mig_enabled || entry.mig_devices != want {
                    self.push(
                        Kind::MigConfig,
                        at,
                        format!(
                            "mig config `{}` gives {:?} (enabled {}), the GPU needs {want:?}",
                            node.mig_config, entry.mig_devices, entry.mig_enabled
                        ),
                    );
                }
            }
            _ => {
                if entry.mig_enabled {
                    self.push(
                        Kind::MigConfig,
                        at,
                        format!("mig config `{}` enables MIG on a GPU planned without MIG", node.mig_config),
                    );
                }
            }
        }
    }

    fn check_memory(&mut self, at: &str, m: &Model, need_mib: u64, capacity_mib: f64, what: &str) {
        if need_mib as f64 > capacity_mib + EPS {
            self.push(
                Kind::Memory,
                at.to_owned(),
                format!("`{}` needs {need_mib} MiB, {what} offers {capacity_mib:.0} MiB", m.name),
            );
        }
    }

    /// A replica's predicted p99 (the planner's latency model, [`rules`]) within its SLO.
    /// Rate models are judged by their measured points instead.
    /// A latency SLO holds when the planner's model predicts a p99 within it; a refusal of the
    /// model (outside its calibrated range) is a violation too, since the planner refuses it.
    fn check_latency(&mut self, at: &str, m: &Model, predicted: Option<Result<f64, Refusal>>) {
        let (Some(l), Some(predicted), Demand::Replicas(_)) = (&m.latency, predicted, &m.demand) else {
            return;
        };
        match predicted {
            Ok(p99) if p99.is_nan() || p99 > l.p99_ms + EPS => self.push(
                Kind::Latency,
                at.to_owned(),
                format!("`{}` is predicted a p99 of {p99:.1} ms, above its {:.1} ms SLO", m.name, l.p99_ms),
            ),
            Ok(_) => {}
            Err(why) => self.push(
                Kind::Latency,
                at.to_owned(),
                format!("`{}`: the latency model refuses to predict: {why}", m.name),
            ),
        }
    }

    /// A replica alone on its device is judged by [`rules::alone_slo`]: a prediction above the
    /// SLO is a violation, a refusal of the model is not (nothing the plan could choose would
    /// change its latency; the plan reports the SLO unverified).
    fn check_alone_latency(&mut self, at: &str, m: &Model, predicted: Option<Result<f64, Refusal>>) {
        let (Some(l), Some(predicted)) = (&m.latency, predicted) else { return };
        if let rules::AloneSlo::Missed(_) = rules::alone_slo(predicted.clone(), l.p99_ms) {
            self.check_latency(at, m, Some(predicted));
        }
    }

    fn check_shareable(&mut self, at: &str, m: &Model) {
        if m.isolation != Isolation::Shared {
            self.push(
                Kind::Isolation,
                at.to_owned(),
                format!("`{}` asks for isolation `{:?}` but is time-sliced", m.name, m.isolation)
                    .to_lowercase(),
            );
        }
        if m.llm && self.spec.policy.llm_never_time_sliced {
            self.push(
                Kind::Isolation,
                at.to_owned(),
                format!("LLM `{}` is time-sliced against policy", m.name),
            );
        }
        if m.gpus.is_some() {
            self.push(Kind::Isolation, at.to_owned(), format!("multi-GPU model `{}` is time-sliced", m.name));
        }
    }

    fn check_mig_allowed(&mut self, at: &str, m: &Model) {
        if m.isolation == Isolation::Dedicated {
            self.push(
                Kind::Isolation,
                at.to_owned(),
                format!("dedicated `{}` runs on a MIG instance", m.name),
            );
        }
        if m.gpus.is_some() {
            self.push(
                Kind::Isolation,
                at.to_owned(),
                format!("multi-GPU model `{}` runs on a MIG instance", m.name),
            );
        }
    }

    fn record(
        &mut self,
        m: &'a Model,
        pool: &'a Pool,
        node: &'a NodePlan,
        gpu: u32,
        resource: String,
        shared: Option<u32>,
    ) {
        self.placed.push(Placed {
            model: &m.name,
            pool: &pool.name,
            node: &node.name,
            gpu,
            resource,
            shared,
        });
    }

    fn check_models(&mut self) {
        for mp in &self.plan.models {
            if self.model(&mp.name).is_none() {
                self.push(Kind::Unknown, format!("model `{}`", mp.name), "the spec has no such model");
            }
        }
        let mut by_model: BTreeMap<&str, Vec<Placed<'a>>> = BTreeMap::new();
        for p in &self.placed {
            by_model.entry(p.model).or_default().push(p.clone());
        }
        for m in &self.spec.models {
            let placed = by_model.remove(m.name.as_str()).unwrap_or_default();
            self.check_model(m, &placed);
        }
    }

    fn check_model(&mut self, m: &'a Model, placed: &[Placed<'a>]) {
        let at = format!("model `{}`", m.name);
        let per = m.gpus.unwrap_or(1).max(1);

        // Tenants → replicas, per (pool, resource) and per node.
        let mut tenants: BTreeMap<(&str, &str), u32> = BTreeMap::new();
        let mut per_node: BTreeMap<(&str, &str), u32> = BTreeMap::new();
        let mut per_gpu: BTreeMap<(&str, &str, u32), u32> = BTreeMap::new();
        let mut per_shared: BTreeMap<(&str, &str, &str), u32> = BTreeMap::new();
        for p in placed {
            *tenants.entry((p.pool, p.resource.as_str())).or_default() += 1;
            *per_node.entry((p.pool, p.node)).or_default() += 1;
            *per_gpu.entry((p.pool, p.node, p.gpu)).or_default() += 1;
            if p.shared.is_some() {
                *per_shared.entry((p.pool, p.node, p.resource.as_str())).or_default() += 1;
            }
        }
        for (&(pool, node), &n) in &per_node {
            if n % per != 0 {
                self.push(
                    Kind::Replicas,
                    at.clone(),
                    format!(
                        "{n} GPUs on node `{node}` of pool `{pool}` do not make whole replicas of {per} GPUs"
                    ),
                );
            }
        }
        let placed_replicas: u32 = tenants.values().sum::<u32>() / per;

        // Pools and GPU types.
        for &(pool, _) in tenants.keys() {
            self.check_pool_allowed(m, pool);
        }

        // Groups against the tenants.
        let Some(mp) = self.plan.models.iter().find(|p| p.name == m.name) else {
            self.push(Kind::Replicas, at, "the plan does not list the model");
            return;
        };
        let mut grouped: BTreeMap<(&str, &str), u32> = BTreeMap::new();
        let mut group_nodes: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
        for group in &mp.groups {
            self.check_pool_allowed(m, &group.pool);
            if group.per_replica != per {
                self.push(
                    Kind::Replicas,
                    at.clone(),
                    format!(
                        "group `{}` requests {} per replica, the model needs {per}",
                        group.resource, group.per_replica
                    ),
                );
            }
            *grouped.entry((group.pool.as_str(), group.resource.as_str())).or_default() += group.replicas;
            group_nodes
                .entry((group.pool.as_str(), group.resource.as_str()))
                .or_default()
                .extend(group.nodes.iter().map(String::as_str));
            for node in &group.nodes {
                let exposed = self
                    .nodes
                    .get(&(group.pool.as_str(), node.as_str()))
                    .is_some_and(|n| self.node_exposes(&group.pool, n, &group.resource));
                if !exposed {
                    self.push(
                        Kind::GroupResource,
                        at.clone(),
                        format!("node `{node}` of pool `{}` exposes no `{}`", group.pool, group.resource),
                    );
                }
            }
        }
        let tenant_replicas: BTreeMap<(&str, &str), u32> =
            tenants.iter().map(|(k, v)| (*k, v / per)).collect();
        grouped.retain(|_, n| *n > 0);
        if tenant_replicas != grouped {
            self.push(
                Kind::Replicas,
                at.clone(),
                format!("replicas on the GPUs {tenant_replicas:?} differ from the groups {grouped:?}"),
            );
        }
        for p in placed {
            let listed = group_nodes.get(&(p.pool, p.resource.as_str())).is_some_and(|n| n.contains(p.node));
            if !listed {
                self.push(
                    Kind::GroupResource,
                    at.clone(),
                    format!(
                        "a replica on node `{}` uses `{}` but no group lists the node",
                        p.node, p.resource
                    ),
                );
            }
        }

        // Demand.
        let group_replicas: u32 = mp.groups.iter().map(|g| g.replicas).sum();
        match &m.demand {
            Demand::Replicas(want) => {
                if placed_replicas != *want || group_replicas != *want {
                    self.push(
                        Kind::Replicas,
                        at.clone(),
                        format!("{want} replicas asked, {placed_replicas} placed on GPUs, {group_replicas} in groups"),
                    );
                }
            }
            Demand::Rate(rate) => {
                if group_replicas < rate.min_replicas {
                    self.push(
                        Kind::Replicas,
                        at.clone(),
                        format!("{group_replicas} replicas, at least {} asked", rate.min_replicas),
                    );
                }
                let mut covered = 0.0;
                // A time-sliced group covers nothing (no point was measured shared), also when
                // its resource keeps the exclusive name (`renameByDefault: false`).
                let shared: BTreeSet<(&str, &str)> = placed
                    .iter()
                    .filter(|p| p.shared.is_some())
                    .map(|p| (p.pool, p.resource.as_str()))
                    .collect();
                for group in &mp.groups {
                    let rps = if shared.contains(&(group.pool.as_str(), group.resource.as_str())) {
                        None
                    } else {
                        self.group_rps(m, group)
                    };
                    match rps {
                        Some(rps) => covered += rps * f64::from(group.replicas),
                        None => self.push(
                            Kind::Rate,
                            at.clone(),
                            format!(
                                "group `{}` in pool `{}` has no admissible measured point with {} process(es) per device",
                                group.resource, group.pool, group.processes
                            ),
                        ),
                    }
                }
                if covered + EPS * rate.rps.max(1.0) < rate.rps {
                    self.push(
                        Kind::Rate,
                        at.clone(),
                        format!("{covered:.1} requests/s covered, {} asked", rate.rps),
                    );
                }
            }
        }

        // Spread.
        match m.spread {
            Spread::None => {}
            Spread::Gpu => {
                for (&(pool, node, gpu), &n) in &per_gpu {
                    if n > 1 {
                        self.push(
                            Kind::Spread,
                            at.clone(),
                            format!("{n} replicas on gpu {gpu} of node `{node}` in pool `{pool}`"),
                        );
                    }
                }
                for (&(pool, node, resource), &n) in &per_shared {
                    if n > 1 {
                        self.push(
                            Kind::Spread,
                            at.clone(),
                            format!(
                                "{n} replicas on time-sliced `{resource}` of node `{node}` in pool `{pool}`: the device plugin may put them on one GPU"
                            ),
                        );
                    }
                }
                self.check_mig_spread(&at, placed);
            }
            Spread::Node => {
                for (&(pool, node), &n) in &per_node {
                    if n / per > 1 {
                        self.push(
                            Kind::Spread,
                            at.clone(),
                            format!("{} replicas on node `{node}` of pool `{pool}`", n / per),
                        );
                    }
                }
            }
        }
    }

    /// `spread: gpu` on MIG: the device plugin picks which instance of a resource (and so which
    /// GPU) a pod gets, so two replicas on one node may share a GPU when some GPU of the node
    /// has two distinct instances, one of each replica's resource (two of it when equal).
    fn check_mig_spread(&mut self, at: &str, placed: &[Placed<'a>]) {
        let mut by_node: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
        for p in placed.iter().filter(|p| p.shared.is_none() && p.resource.starts_with("nvidia.com/mig-")) {
            by_node.entry((p.pool, p.node)).or_default().push(p.resource.as_str());
        }
        for ((pool, node), resources) in by_node {
            let gpu = self.spec.pools.iter().find(|p| p.name == pool).and_then(|p| self.catalog.get(&p.gpu));
            let Some(node_plan) = self.nodes.get(&(pool, node)).copied() else { continue };
            let count = |g: &GpuPlan, r: &str| match &g.mode {
                GpuMode::Mig { instances } => instances
                    .iter()
                    .filter_map(|i| gpu.and_then(|gpu| gpu.profile(&i.profile)))
                    .filter(|p| p.resource_name() == r)
                    .count(),
                _ => 0,
            };
            for (i, a) in resources.iter().enumerate() {
                for b in &resources[i + 1..] {
                    let overlap = node_plan.gpus.iter().any(|g| {
                        if a == b { count(g, a) >= 2 } else { count(g, a) >= 1 && count(g, b) >= 1 }
                    });
                    if overlap {
                        self.push(
                            Kind::Spread,
                            at.to_owned(),
                            format!(
                                "replicas on `{a}` and `{b}` of node `{node}` in pool `{pool}`: the device plugin may put them on one GPU"
                            ),
                        );
                    }
                }
            }
        }
    }

    fn check_pool_allowed(&mut self, m: &Model, pool: &str) {
        let at = format!("model `{}`", m.name);
        if !m.pools.is_empty() && !m.pools.iter().any(|p| p == pool) {
            self.push(
                Kind::AllowedPools,
                at.clone(),
                format!("placed in pool `{pool}`, allowed {:?}", m.pools),
            );
        }
        if !m.gpu_types.is_empty() {
            let gpu = self.spec.pools.iter().find(|p| p.name == pool).and_then(|p| self.catalog.get(&p.gpu));
            let allowed = gpu.is_some_and(|g| {
                m.gpu_types.iter().any(|t| self.catalog.get(t).is_some_and(|a| a.id == g.id) || t == &g.id)
            });
            if !allowed {
                self.push(
                    Kind::AllowedPools,
                    at,
                    format!("pool `{pool}` has a GPU type outside {:?}", m.gpu_types),
                );
            }
        }
    }

    /// Whether some GPU of `node` exposes `resource` (as the device plugin would name it).
    fn node_exposes(&self, pool: &str, node: &NodePlan, resource: &str) -> bool {
        let Some(gpu) =
            self.spec.pools.iter().find(|p| p.name == pool).and_then(|p| self.catalog.get(&p.gpu))
        else {
            return false;
        };
        let sharing = self.plan.device_plugin_configs.get(&node.device_plugin_config).map(|c| c.shared());
        let shared = |base: &str| sharing.is_some_and(|s| s.contains_key(base));
        let name = |base: &str| if shared(base) { self.shared_name(base) } else { base.to_owned() };
        node.gpus.iter().any(|g| match &g.mode {
            GpuMode::Unused => false,
            GpuMode::Whole | GpuMode::TimeSliced { .. } | GpuMode::Mps { .. } => {
                name("nvidia.com/gpu") == resource
            }
            GpuMode::Mig { instances } => instances
                .iter()
                .filter_map(|i| gpu.profile(&i.profile))
                .any(|p| name(&p.resource_name()) == resource),
        })
    }

    /// Requests/s one replica of a group sustains: the best admissible measured point for the
    /// pool's GPU and the resource's profile, measured with the group's processes per device
    /// (their rps together). Several processes need measured-point MPS on the pool
    /// ([`rules::measured_mps`]), at most `policy.maxTimeSlicingReplicas` of them, each within
    /// its share of the device memory. Time-sliced groups have none.
    fn group_rps(&self, m: &Model, group: &ReplicaGroup) -> Option<f64> {
        let Demand::Rate(rate) = &m.demand else { return None };
        let pool = self.spec.pools.iter().find(|p| p.name == group.pool)?;
        let gpu = self.catalog.get(&pool.gpu)?;
        let (profile, mib) = if group.resource == "nvidia.com/gpu" {
            ("whole".to_owned(), gpu.memory_mib)
        } else {
            let p = gpu
                .mig
                .as_ref()?
                .profiles
                .iter()
                .find(|p: &&MigProfile| p.resource_name() == group.resource)?;
            (p.name.clone(), p.memory_mib)
        };
        let k = group.processes.max(1);
        let usable = rules::usable_mib(mib, self.spec.policy.memory_headroom);
        if k > 1 && !rules::mps_process_fits(m.memory_mib as f64, usable, k) {
            return None;
        }
        let max = rules::measured_mps_max(pool, m, &self.spec.policy);
        let whole = profile == "whole";
        rate.points
            .iter()
            .filter(|p| if whole { rules::whole_gpu_point(gpu, &p.profile) } else { p.profile == profile })
            .filter(|p| p.processes == k && rate.admits_processes(p, &gpu.id, max))
            .map(|p| p.rps * f64::from(k))
            .max_by(f64::total_cmp)
    }

    fn check_quality(&mut self) {
        let used = self
            .plan
            .pools
            .iter()
            .flat_map(|p| &p.nodes)
            .flat_map(|n| &n.gpus)
            .filter(|g| g.mode != GpuMode::Unused)
            .count();
        let q = &self.plan.quality;
        // Costs are compared with a tolerance relative to the plan's cost (solver rounding).
        let tolerance = |cost: f64| 1e-6 * cost.max(1.0);
        let mut wrong: Vec<String> = Vec::new();
        if q.gpus_used as usize != used {
            wrong.push(format!("quality says {} GPUs used, the plan uses {used}", q.gpus_used));
        }
        if let (Some(cost), Some(bound)) = (q.cost_per_hour, q.cost_lower_bound_per_hour)
            && bound > cost + tolerance(cost)
        {
            wrong.push(format!("cost lower bound {bound:.2}/h above the plan's {cost:.2}/h"));
        }
        if q.lower_bound > q.gpus_used {
            wrong.push(format!("lower bound {} above GPUs used {}", q.lower_bound, q.gpus_used));
        }
        // The model's bounds hold for the planner's own plans, which this plan claims to be.
        if q.model_lower_bound > q.gpus_used {
            wrong.push(format!(
                "the planner's model bound {} is above GPUs used {}",
                q.model_lower_bound, q.gpus_used
            ));
        }
        if let (Some(cost), Some(bound)) = (q.cost_per_hour, q.model_cost_lower_bound_per_hour)
            && bound > cost + tolerance(cost)
        {
            wrong
                .push(format!("the planner's model cost bound {bound:.2}/h is above the plan's {cost:.2}/h"));
        }
        // "Optimal" is claimed only when the plan meets the bound valid for every plan.
        if q.proof == crate::plan::Proof::Optimal {
            let met = match (q.cost_per_hour, q.cost_lower_bound_per_hour) {
                (Some(cost), Some(bound)) => cost <= bound + tolerance(cost),
                _ => q.gpus_used <= q.lower_bound,
            };
            if !met {
                wrong.push("the plan is called optimal but does not meet its lower bound".to_owned());
            }
        }
        // On priced pools the plan minimises cost: it may use more (cheaper) GPUs than FFD.
        if let (Some(cost), Some(ffd_cost)) = (q.cost_per_hour, q.first_fit_decreasing_cost_per_hour) {
            if cost > ffd_cost + 1e-6 {
                wrong.push(format!("the plan costs {cost:.2}/h, first-fit-decreasing only {ffd_cost:.2}/h"));
            }
        } else if let Some(ffd) = q.first_fit_decreasing
            && q.gpus_used > ffd
        {
            wrong.push(format!("{} GPUs used, first-fit-decreasing needs only {ffd}", q.gpus_used));
        }
        for message in wrong {
            self.push(Kind::Quality, "plan", message);
        }
    }
}

#[cfg(test)]
mod tests;
