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
//! - MPS: only on pools whose `sharing` lists `mps`, on whole GPUs of a node that shares by MPS
//!   alone, each client within its thread cap, never a model with `allowMps: false`;
//! - latency: the planner's model predicts each replica's p99 within its SLO, a shared replica's
//!   with the largest `k − 1` tenants of its resource as neighbours; a replica alone on its
//!   device whose prediction the model refuses is not a violation (`rules::alone_slo`);
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
//!
//! The checks follow the plan's shape, a file each: `mod.rs` the pools and the quality figures,
//! `node.rs` a node's configs and sharing, `gpu.rs` whole and shared GPUs (and the memory,
//! isolation and latency rules every device kind uses), `mig.rs` MIG GPUs and their instances,
//! `model.rs` each model's replicas, groups, demand and spread. `figures.rs` judges nothing.

pub mod figures;
mod gpu;
mod mig;
mod model;
mod node;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use crate::catalog::{Catalog, GpuModel};
use crate::plan::{GpuMode, GpuPlan, NodePlan, Plan, PoolPlan};
use crate::spec::{Model, Nodes, Pool, Spec};

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

/// One planned GPU and where it sits: what the per-GPU checks are given.
#[derive(Clone, Copy)]
struct Device<'a> {
    pool: &'a Pool,
    gpu: &'a GpuModel,
    node: &'a NodePlan,
    plan: &'a GpuPlan,
}

impl Device<'_> {
    /// The place of a violation on this GPU, e.g. ``pool `a100` node `gpu-a-1` gpu 0``.
    fn at(&self) -> String {
        format!("pool `{}` node `{}` gpu {}", self.pool.name, self.node.name, self.plan.index)
    }
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

    /// The catalog GPU of the spec's pool `pool`.
    fn pool_gpu(&self, pool: &str) -> Option<&'a GpuModel> {
        self.spec.pools.iter().find(|p| p.name == pool).and_then(|p| self.catalog.get(&p.gpu))
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
        if q.gpus.used as usize != used {
            wrong.push(format!("quality says {} GPUs used, the plan uses {used}", q.gpus.used));
        }
        if let (Some(cost), Some(bound)) = (q.cost.used, q.cost.lower_bound)
            && bound > cost + tolerance(cost)
        {
            wrong.push(format!("cost lower bound {bound:.2}/h above the plan's {cost:.2}/h"));
        }
        if q.gpus.lower_bound > q.gpus.used {
            wrong.push(format!("lower bound {} above GPUs used {}", q.gpus.lower_bound, q.gpus.used));
        }
        // The model's bounds hold for the planner's own plans, which this plan claims to be.
        if q.gpus.model_lower_bound > q.gpus.used {
            wrong.push(format!(
                "the planner's model bound {} is above GPUs used {}",
                q.gpus.model_lower_bound, q.gpus.used
            ));
        }
        if let (Some(cost), Some(bound)) = (q.cost.used, q.cost.model_lower_bound)
            && bound > cost + tolerance(cost)
        {
            wrong
                .push(format!("the planner's model cost bound {bound:.2}/h is above the plan's {cost:.2}/h"));
        }
        // "Optimal" is claimed only when the plan meets the bound valid for every plan.
        if q.proof == crate::plan::Proof::Optimal {
            let met = match (q.cost.used, q.cost.lower_bound) {
                (Some(cost), Some(bound)) => cost <= bound + tolerance(cost),
                _ => q.gpus.used <= q.gpus.lower_bound,
            };
            if !met {
                wrong.push("the plan is called optimal but does not meet its lower bound".to_owned());
            }
        }
        // On priced pools the plan minimises cost: it may use more (cheaper) GPUs than FFD.
        if let (Some(cost), Some(ffd_cost)) = (q.cost.used, q.cost.first_fit_decreasing) {
            if cost > ffd_cost + 1e-6 {
                wrong.push(format!("the plan costs {cost:.2}/h, first-fit-decreasing only {ffd_cost:.2}/h"));
            }
        } else if let Some(ffd) = q.gpus.first_fit_decreasing
            && q.gpus.used > ffd
        {
            wrong.push(format!("{} GPUs used, first-fit-decreasing needs only {ffd}", q.gpus.used));
        }
        for message in wrong {
            self.push(Kind::Quality, "plan", message);
        }
    }
}

#[cfg(test)]
mod tests;
