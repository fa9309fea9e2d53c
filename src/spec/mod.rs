//! The checked specification: what the planner and the renderer trust.
//!
//! In: a parsed [`crate::manifest::Manifest`] and the [`crate::catalog::Catalog`]. Out: a [`Spec`]
//! with names resolved (pool GPU ids are catalog ids), units parsed (memory in MiB, durations in
//! milliseconds), defaults applied, and every cross-reference checked — or all the problems found,
//! as diagnostics. A `Spec` is built in one place, [`Spec::from_parts`], which sorts pools and
//! models by name; [`validate`] calls it once everything checks out, and the hidden benchmark
//! harness (`crate::bench`) calls it with parts it generated (a test enforces that no other code
//! writes a `Spec` literal).

pub mod capacity;
mod change_policy;
pub mod deployment;
mod headroom;
pub(crate) mod names;
mod units;
mod validate;

use std::collections::BTreeMap;

use serde::Serialize;

pub use deployment::Deployment;
pub use validate::{
    DEFAULT_ADMISSION_FACTOR, DEFAULT_MAX_TIME_SLICING_REPLICAS, DEFAULT_MEMORY_HEADROOM, DEFAULT_NAMESPACE,
    DEFAULT_OPERATOR_NAMESPACE, DEFAULT_TIME_SLICING_EFFICIENCY, validate,
};

pub use change_policy::{ChangeMode, ChangePolicy};
pub use headroom::usable_mib;

use crate::catalog::Catalog;
use crate::diagnostics::{Code, Diagnostic, Span};
pub use crate::manifest::words::{Backend, Isolation, Keyword, MeasuredPoint, MigStrategy, Spread};

/// A checked manifest.
#[derive(Clone, Debug, Serialize)]
pub struct Spec {
    /// `metadata.name`: names the plan and prefixes generated config names.
    pub name: String,
    pub cluster: Cluster,
    /// Pools sorted by name.
    pub pools: Vec<Pool>,
    /// Models sorted by name.
    pub models: Vec<Model>,
    pub policy: Policy,
    /// Day 2: how a re-plan treats the previous plan (`changePolicy`).
    pub change_policy: ChangePolicy,
}

/// Cluster-wide settings.
#[derive(Clone, Debug, Serialize)]
pub struct Cluster {
    /// Namespace of the workloads.
    pub namespace: String,
    /// Namespace where the GPU Operator runs (its ConfigMaps go there).
    pub operator_namespace: String,
    pub mig_strategy: MigStrategy,
    pub time_slicing: TimeSlicingOptions,
    pub output: OutputOptions,
    /// ISO 4217 code of the costs, when the manifest gives one.
    pub currency: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimeSlicingOptions {
    pub rename_by_default: bool,
    pub fail_requests_greater_than_one: bool,
}

/// Which artefacts the bundle contains beyond the always-present ones.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputOptions {
    pub cluster_policy_patch: bool,
    pub helm_values: bool,
    pub argocd: Option<ArgoCd>,
    pub flux: Option<Flux>,
    /// Write `Namespace` objects for the workload and operator namespaces.
    pub namespaces: bool,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArgoCd {
    pub repo_url: String,
    pub path: String,
    pub target_revision: String,
    pub namespace: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Flux {
    pub source_name: String,
    pub path: String,
    pub namespace: String,
}

/// A pool of identical GPU nodes.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pool {
    pub name: String,
    /// Catalog id of the pool's GPU model.
    pub gpu: String,
    pub gpus_per_node: u32,
    pub nodes: Nodes,
    /// Cost of one GPU for one hour, if the user gave it.
    pub cost_per_gpu_hour: Option<f64>,
    /// Labels that select the pool's nodes (added to the workloads' node affinity).
    pub node_selector: BTreeMap<String, String>,
    /// Taints on the pool's nodes that workloads placed there must tolerate.
    pub taints: Vec<Taint>,
    /// The layout the pool runs today, per node, for disruption-aware re-planning.
    pub current: Vec<CurrentNode>,
    /// The sharing mechanisms the planner may configure on the pool's nodes.
    pub sharing: PoolSharing,
    /// The pool's GPUs on the DRA backend (`None`: the device plugin).
    pub dra: Option<DraPool>,
    #[serde(skip)]
    pub span: Option<Span>,
}

/// The sharing mechanisms a pool allows (`sharing`; default MIG and time-slicing, not MPS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolSharing {
    pub mig: bool,
    pub time_slicing: bool,
    pub mps: bool,
}

impl Default for PoolSharing {
    fn default() -> Self {
        PoolSharing { mig: true, time_slicing: true, mps: false }
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Nodes {
    /// Existing nodes, by Kubernetes node name.
    Named(Vec<String>),
    /// An autoscaled group labelled through its node template.
    Autoscaled { min: u32, max: u32 },
}

impl Nodes {
    /// The most nodes the pool can have.
    pub fn max_nodes(&self) -> u32 {
        match self {
            Nodes::Named(names) => u32::try_from(names.len()).unwrap_or(u32::MAX),
            Nodes::Autoscaled { max, .. } => *max,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Taint {
    pub key: String,
    pub value: Option<String>,
    pub effect: String,
}

/// A pool on the DRA backend: every GPU's UUID, by node and index (docs/dra.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DraPool {
    /// Node name → the UUID of each GPU, by index (exactly `gpusPerNode` of them).
    pub uuids: BTreeMap<String, Vec<String>>,
}

impl DraPool {
    /// The UUID of GPU `index` of `node`.
    pub fn uuid(&self, node: &str, index: u32) -> Option<&str> {
        self.uuids.get(node)?.get(index as usize).map(String::as_str)
    }
}

/// A node's layout today: MIG profile names per GPU (empty = MIG disabled).
#[derive(Clone, Debug, Serialize)]
pub struct CurrentNode {
    pub node: String,
    pub gpus: Vec<Vec<String>>,
}

/// A model to serve.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Model {
    pub name: String,
    /// The image and how it starts.
    #[serde(flatten)]
    pub container: Container,
    /// Environment variables, in the order given.
    pub env: Vec<(String, String)>,
    pub ports: Vec<Port>,
    /// Device memory one replica needs, in MiB (CUDA context included).
    pub memory_mib: u64,
    /// Share of one full GPU's SMs one replica needs at its target load (0 < compute ≤ 1).
    pub compute: f64,
    pub demand: Demand,
    pub isolation: Isolation,
    /// Whole GPUs per replica (multi-GPU on one node); `None` means a fraction of one GPU is enough.
    pub gpus: Option<u32>,
    pub latency: Option<Latency>,
    pub spread: Spread,
    /// Pools the model may use (all pools when empty).
    pub pools: Vec<String>,
    /// GPU catalog ids the model may use (all when empty).
    pub gpu_types: Vec<String>,
    pub priority: i32,
    /// Whether the model counts as an LLM for policies (`policy.llmNeverTimeSliced`).
    pub llm: bool,
    /// Whether the model may share a GPU by MPS (`allowMps`, default true).
    pub allow_mps: bool,
    /// How the model's Deployments run (defaults applied).
    pub deployment: Deployment,
    #[serde(skip)]
    pub span: Option<Span>,
}

impl Model {
    /// Whether the model's `pools` allow the pool named `pool`: see [`pools_allow`].
    pub fn allows_pool(&self, pool: &str) -> bool {
        pools_allow(&self.pools, pool)
    }

    /// Whether the model's `gpuTypes` allow GPUs of catalog id `gpu`: see [`gpu_types_allow`].
    pub fn allows_gpu(&self, catalog: &Catalog, gpu: &str) -> bool {
        gpu_types_allow(&self.gpu_types, catalog, gpu)
    }
}

/// A model's `pools` filter: every pool when empty, else the pools it names.
pub fn pools_allow(pools: &[String], pool: &str) -> bool {
    pools.is_empty() || pools.iter().any(|p| p == pool)
}

/// A model's `gpuTypes` filter: every GPU when empty, else the GPUs its names resolve to in the
/// catalog (an id in any case, or an alias), compared with the catalog id `gpu`. Validation, the
/// planner, the bounds and the verifier all ask this.
pub fn gpu_types_allow(gpu_types: &[String], catalog: &Catalog, gpu: &str) -> bool {
    gpu_types.is_empty() || gpu_types.iter().any(|t| catalog.get(t).is_some_and(|g| g.id == gpu))
}

/// A model's container as the manifest gives it; the Deployment template sees it as it is.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Container {
    pub image: String,
    /// Replaces the image's entrypoint when not empty.
    pub command: Vec<String>,
    pub args: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Port {
    pub name: String,
    pub port: u16,
    pub protocol: String,
}

/// How much of a model must run.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Demand {
    /// A fixed number of replicas.
    Replicas(u32),
    /// A request rate to cover with the user's measured per-profile throughput (the MIG-serving /
    /// ParvaGPU formulation): the planner picks sizes and replica counts.
    Rate(RateDemand),
}

/// A request-rate demand with the measurements that size it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RateDemand {
    /// Requests per second to serve.
    pub rps: f64,
    /// Latency objective for one request, in milliseconds, if any.
    pub slo_ms: Option<f64>,
    /// A point is admitted only if `latency_ms < admission_factor × slo_ms` (ParvaGPU: 0.45).
    pub admission_factor: f64,
    /// Lower bound on replicas (availability), default 1.
    pub min_replicas: u32,
    /// Measured operating points, in the order given.
    pub points: Vec<MeasuredPoint>,
}

impl RateDemand {
    /// The admission rule, defined once (the planner, the verifier and the measurements
    /// commands call it): a point counts for GPU `gpu_id` (a catalog id, as the spec holds them)
    /// when it was measured on that GPU with one process (the device plugin cannot run MPS on
    /// MIG), with a positive finite throughput, and, when there is an SLO, with
    /// `latency_ms < admission_factor × slo_ms`.
    pub fn admits(&self, point: &MeasuredPoint, gpu_id: &str) -> bool {
        self.admits_processes(point, gpu_id, 1)
    }

    /// [`RateDemand::admits`] on a device whose replica may be up to `max_processes` MPS
    /// processes of the model (a `dra` pool allowing `mps`: `plan::rules::measured_mps_max`):
    /// points measured with that many processes or fewer count too.
    pub fn admits_processes(&self, point: &MeasuredPoint, gpu_id: &str, max_processes: u32) -> bool {
        point.gpu == gpu_id
            && point.processes >= 1
            && point.processes <= max_processes.max(1)
            && point.rps.is_finite()
            && point.rps > 0.0
            && latency_admitted(point.latency_ms, self.slo_ms, self.admission_factor)
    }
}

/// The latency part of [`RateDemand::admits`]: `latency_ms < factor × slo_ms`, or no SLO.
pub fn latency_admitted(latency_ms: f64, slo_ms: Option<f64>, factor: f64) -> bool {
    slo_ms.is_none_or(|slo| latency_ms < factor * slo)
}

/// A latency objective and the latency measured on a whole, unshared GPU.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    pub p99_ms: f64,
    pub baseline_ms: Option<f64>,
    /// The GPU `baseline_ms` was measured on (`latency.baselineGpu`); `None`: every GPU type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_gpu: Option<BaselineGpu>,
}

/// The catalog GPU a latency baseline was measured on, with the figures that scale it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BaselineGpu {
    /// Catalog id.
    pub id: String,
    /// The catalog's datasheet figures for it, when it has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput: Option<crate::catalog::Throughput>,
}

/// Planning policies.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// Models marked `llm` are never time-sliced.
    pub llm_never_time_sliced: bool,
    /// Most time-slicing replicas per device.
    pub max_time_slicing_replicas: u32,
    /// Fraction of memory kept free on every device (0.0–0.5), default 0.02 (docs/manifest.md).
    pub memory_headroom: f64,
    /// Share of a GPU's compute that time-sliced tenants can use together (context switching costs the rest).
    pub time_slicing_efficiency: f64,
}

/// An error at `span` with its label and hint: the shape of every diagnostic the spec stage
/// reports.
fn error(
    code: Code,
    span: &Span,
    message: impl Into<String>,
    label: &str,
    help: impl Into<String>,
) -> Diagnostic {
    Diagnostic::error(code, message).at(span.clone(), label).with_help(help)
}

impl Spec {
    /// The one constructor: pools and models sorted by name, as every later stage expects.
    /// [`validate`] calls it with checked parts; the benchmark harness with generated ones.
    pub fn from_parts(
        name: &str,
        cluster: Cluster,
        mut pools: Vec<Pool>,
        mut models: Vec<Model>,
        policy: Policy,
        change_policy: ChangePolicy,
    ) -> Spec {
        pools.sort_by(|a, b| a.name.cmp(&b.name));
        models.sort_by(|a, b| a.name.cmp(&b.name));
        Spec { name: name.to_owned(), cluster, pools, models, policy, change_policy }
    }

    pub fn pool(&self, name: &str) -> Option<&Pool> {
        self.pools.iter().find(|p| p.name == name)
    }

    pub fn model(&self, name: &str) -> Option<&Model> {
        self.models.iter().find(|m| m.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::{gpu_types_allow, pools_allow};
    use crate::catalog::Catalog;

    #[test]
    fn a_models_filters_allow_everything_when_empty_and_resolve_gpu_names_by_the_catalog() {
        let catalog = Catalog::builtin();
        assert!(pools_allow(&[], "a") && pools_allow(&["a".to_owned()], "a"));
        assert!(!pools_allow(&["a".to_owned()], "A"), "pool names are exact");
        assert!(gpu_types_allow(&[], &catalog, "A100-SXM4-80GB"));
        for name in ["A100-SXM4-80GB", "a100-sxm4-80gb", "a100-80gb-sxm"] {
            assert!(gpu_types_allow(&[name.to_owned()], &catalog, "A100-SXM4-80GB"), "{name}");
        }
        assert!(!gpu_types_allow(&["H100-PCIE-80GB".to_owned()], &catalog, "A100-SXM4-80GB"));
        assert!(!gpu_types_allow(&["no-such-gpu".to_owned()], &catalog, "A100-SXM4-80GB"));
    }
}
