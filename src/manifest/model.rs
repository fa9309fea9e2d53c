//! The raw manifest types: the file's structure, every value with its span.
//!
//! These types mirror `gpuplan.yaml` field by field. Quantities are still strings (`10GiB`,
//! `300ms`, `40rps`), integers are wide enough to hold any value the user typed, and optional
//! fields are `None` when absent. Doc comments here are the user reference: they become the JSON
//! Schema descriptions (`schemas/gpuplan.schema.json`) and are copied into `docs/manifest.md`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use super::words::{Backend, Isolation, MeasuredPoint, MigStrategy, Spread};
use crate::diagnostics::{FileId, Span};

/// The one `apiVersion` this gpuplan reads.
pub const API_VERSION: &str = "gpuplan.io/v1alpha1";
/// The one `kind` this gpuplan reads.
pub const KIND: &str = "GpuPlan";

/// A value with the place it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Sp<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Sp<T> {
    pub fn new(value: T, span: Span) -> Self {
        Self { value, span }
    }
}

impl<T: JsonSchema> JsonSchema for Sp<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
    fn inline_schema() -> bool {
        T::inline_schema()
    }
}

/// A mapping from names to values, in the order written, with the span of every key.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpMap<V>(pub Vec<(Sp<String>, V)>);

impl<V: JsonSchema> JsonSchema for SpMap<V> {
    fn schema_name() -> Cow<'static, str> {
        BTreeMap::<String, V>::schema_name()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        BTreeMap::<String, V>::json_schema(generator)
    }
    fn inline_schema() -> bool {
        true
    }
}

/// A gpuplan manifest: the models to serve and the GPUs they may use.
///
/// Start a YAML file with `# yaml-language-server: $schema=<path or URL of gpuplan.schema.json>`
/// for completion and checks in editors.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields, title = "GpuPlan")]
pub struct Manifest {
    /// Version of the manifest format: `gpuplan.io/v1alpha1`.
    #[schemars(schema_with = "api_version_schema")]
    pub api_version: Sp<String>,
    /// Always `GpuPlan`.
    #[schemars(schema_with = "kind_schema")]
    pub kind: Sp<String>,
    pub metadata: Metadata,
    /// Cluster-wide settings: namespaces, MIG strategy, time-slicing options, outputs.
    pub cluster: Option<Cluster>,
    /// The GPUs the models may use, as pools of identical nodes.
    pub inventory: Inventory,
    /// Values every model inherits unless it sets them itself.
    pub defaults: Option<ModelDefaults>,
    /// Planning policies.
    pub policy: Option<Policy>,
    /// Day 2: how a re-plan treats the plan committed in the output directory.
    pub change_policy: Option<ChangePolicy>,
    /// The models to serve. Each becomes one Kubernetes Deployment.
    pub models: Vec<Model>,
    /// The file the manifest was read from.
    #[schemars(skip)]
    pub file: Option<FileId>,
    /// Where the whole document is.
    #[schemars(skip)]
    pub span: Option<Span>,
    /// Measured points loaded from the files that models reference (`demand.measurements`),
    /// keyed by the path as written in the manifest. Filled by the command layer, never by the
    /// parser: stages do no IO.
    #[schemars(skip)]
    pub measurements: BTreeMap<String, Vec<MeasuredPoint>>,
}

/// Names the plan.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    /// Name of the plan: a DNS-1123 label (lowercase letters, digits and `-`, at most 63
    /// characters). It prefixes generated ConfigMap and layout names.
    #[schemars(extend("pattern" = DNS_LABEL_PATTERN), length(max = 63))]
    pub name: Sp<String>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// Cluster-wide settings.
#[derive(Clone, Debug, Default, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cluster {
    /// Namespace of the workloads (Deployments, PodDisruptionBudgets). Default `default`.
    #[schemars(extend("pattern" = DNS_LABEL_PATTERN), length(max = 63))]
    pub namespace: Option<Sp<String>>,
    /// Namespace where the NVIDIA GPU Operator runs; its ConfigMaps go there. Default
    /// `gpu-operator`.
    #[schemars(extend("pattern" = DNS_LABEL_PATTERN), length(max = 63))]
    pub operator_namespace: Option<Sp<String>>,
    /// How MIG devices are advertised: `mixed` (one resource per profile, the only strategy that
    /// allows different profiles on one node), `single` or `none`. Default `mixed`.
    pub mig_strategy: Option<Sp<MigStrategy>>,
    /// Options of the device plugin's time-slicing configuration.
    pub time_slicing: Option<TimeSlicing>,
    /// Which artefacts the bundle contains.
    pub output: Option<Output>,
    /// ISO 4217 code of the pools' `costPerGpuHour` (`USD`, `EUR`), printed with every cost.
    #[schemars(extend("pattern" = "^[A-Z]{3}$"))]
    pub currency: Option<Sp<String>>,
    /// How pods get their GPUs: `devicePlugin` (default: extended resources counted per node)
    /// or `dra` (Kubernetes DRA: each pod's claim selects its planned GPU or MIG instance; named
    /// pools with GPU UUIDs only, see docs/dra.md). A pool's own `backend` wins.
    pub backend: Option<Sp<Backend>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// Options of the device plugin's time-slicing configuration.
#[derive(Clone, Debug, Default, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeSlicing {
    /// Advertise time-sliced devices as `<resource>.shared` (for example `nvidia.com/gpu.shared`)
    /// so that a pod cannot mistake a share for a whole GPU. Default `true`.
    pub rename_by_default: Option<Sp<bool>>,
    /// Fail pods that request more than one share of a time-sliced resource (more shares buy no
    /// more compute). Default `true`.
    pub fail_requests_greater_than_one: Option<Sp<bool>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// Which artefacts the bundle contains beyond the always-present ones.
#[derive(Clone, Debug, Default, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Output {
    /// Write a ClusterPolicy patch that selects the generated ConfigMaps. Default `true`.
    pub cluster_policy_patch: Option<Sp<bool>>,
    /// Write GPU Operator Helm values that select the generated ConfigMaps. Default `true`.
    pub helm_values: Option<Sp<bool>>,
    /// Also write an Argo CD `Application` that syncs the bundle.
    pub argocd: Option<ArgoCd>,
    /// Also write a Flux `Kustomization` that syncs the bundle.
    pub flux: Option<Flux>,
    /// Write `Namespace` objects for the workload and GPU Operator namespaces, so that a first
    /// sync on an empty cluster succeeds. Turn off when another tool owns the namespaces.
    /// Default `true`.
    pub namespaces: Option<Sp<bool>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// An Argo CD `Application` for the bundle.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArgoCd {
    /// URL of the Git repository that holds the bundle.
    pub repo_url: Sp<String>,
    /// Path of the bundle inside the repository.
    pub path: Sp<String>,
    /// Branch, tag or commit to sync. Default `HEAD`.
    pub target_revision: Option<Sp<String>>,
    /// Namespace of Argo CD. Default `argocd`.
    #[schemars(extend("pattern" = DNS_LABEL_PATTERN), length(max = 63))]
    pub namespace: Option<Sp<String>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// A Flux `Kustomization` for the bundle.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Flux {
    /// Name of the Flux `GitRepository` source that holds the bundle.
    pub source_name: Sp<String>,
    /// Path of the bundle inside the source.
    pub path: Sp<String>,
    /// Namespace of Flux. Default `flux-system`.
    #[schemars(extend("pattern" = DNS_LABEL_PATTERN), length(max = 63))]
    pub namespace: Option<Sp<String>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// The GPUs the models may use.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Inventory {
    /// Pools of identical GPU nodes.
    pub pools: Vec<Pool>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// A pool of identical GPU nodes: existing named nodes, or an autoscaled group.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pool {
    /// Name of the pool: a DNS-1123 label, unique in the inventory.
    #[schemars(extend("pattern" = DNS_LABEL_PATTERN), length(max = 63))]
    pub name: Sp<String>,
    /// Catalog id of the pool's GPU, such as `A100-SXM4-80GB` (`gpuplan catalog list`).
    pub gpu: Sp<String>,
    /// GPUs in each node of the pool.
    #[schemars(range(min = 1, max = 16))]
    pub gpus_per_node: Sp<i128>,
    /// Kubernetes names of the pool's nodes. Give either `nodes` or `count`.
    pub nodes: Option<Vec<Sp<String>>>,
    /// Number of nodes of an autoscaled pool: a fixed number or `{min, max}`. Its nodes are
    /// labelled through their node template. Give either `nodes` or `count`.
    pub count: Option<NodeCount>,
    /// Labels that select the pool's nodes; workloads placed here get them as node affinity.
    pub node_selector: Option<SpMap<Sp<String>>>,
    /// Taints on the pool's nodes; workloads placed here tolerate them.
    pub taints: Option<Vec<Taint>>,
    /// Cost of one GPU for one hour, in any currency; used to prefer cheaper pools.
    #[schemars(range(min = 0.0))]
    pub cost_per_gpu_hour: Option<Sp<f64>>,
    /// The layout the pool runs today, per node, so that re-planning can avoid draining nodes.
    pub current: Option<Vec<CurrentNode>>,
    /// The mechanisms gpuplan may configure on the pool's nodes to share GPUs: `mig`,
    /// `timeSlicing`, `mps` (MPS on whole GPUs: clients run concurrently, each limited to
    /// memory ÷ replicas and ⌊100/replicas⌋% of the threads; a crashing client takes the others
    /// on its GPU down, so it is opt-in). Default `[mig, timeSlicing]`.
    pub sharing: Option<Vec<Sp<crate::manifest::words::SharingMechanism>>>,
    /// How pods get this pool's GPUs: `devicePlugin` or `dra`. Default `cluster.backend`.
    /// A `dra` pool needs named nodes and every GPU's UUID (`current[].uuids`, written by
    /// `gpuplan current import --resource-slices`).
    pub backend: Option<Sp<Backend>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// How many nodes an autoscaled pool has: a fixed number, or a range.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(untagged)]
pub enum NodeCount {
    /// Exactly this many nodes.
    Fixed(#[schemars(range(min = 1))] Sp<i128>),
    /// Between `min` and `max` nodes.
    Range(CountRange),
}

/// Between `min` and `max` nodes.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct CountRange {
    /// Fewest nodes. Default 0.
    #[schemars(range(min = 0))]
    pub min: Option<Sp<i128>>,
    /// Most nodes; the plan never uses more.
    #[schemars(range(min = 1))]
    pub max: Sp<i128>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// A Kubernetes taint.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Taint {
    pub key: Sp<String>,
    pub value: Option<Sp<String>>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    #[schemars(extend("enum" = ["NoSchedule", "PreferNoSchedule", "NoExecute"]))]
    pub effect: Sp<String>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// One node's layout today.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct CurrentNode {
    /// Kubernetes name of the node (one of the pool's `nodes`).
    pub node: Sp<String>,
    /// Per GPU, the MIG profiles it is cut into (NVML names such as `3g.40gb`); an empty list is
    /// a GPU with MIG disabled.
    pub gpus: Vec<Vec<Sp<String>>>,
    /// The node's GPU UUIDs by index (`GPU-…`, as NVML and the DRA driver's ResourceSlices
    /// report them), for pools on the `dra` backend. `gpuplan current import
    /// --resource-slices` writes them.
    pub uuids: Option<Vec<Sp<String>>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// Values every model inherits unless it sets them itself.
#[derive(Clone, Debug, Default, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelDefaults {
    /// Default isolation. Built-in default `hardware`.
    pub isolation: Option<Sp<Isolation>>,
    /// Default spread. Built-in default `none`.
    pub spread: Option<Sp<Spread>>,
    /// Default compute share. Built-in default `0.1`, or `1` for models with `gpus`.
    #[schemars(range(max = 1.0), extend("exclusiveMinimum" = 0.0))]
    pub compute: Option<Sp<f64>>,
    /// Default priority. Built-in default `0`.
    pub priority: Option<Sp<i128>>,
    /// Default pools.
    pub pools: Option<Vec<Sp<String>>>,
    /// Default GPU types.
    pub gpu_types: Option<Vec<Sp<String>>>,
    /// Environment variables every model gets (a model's own `env` wins per name).
    pub env: Option<SpMap<Sp<String>>>,
    /// Deployment settings every model inherits; a model's own `deployment` wins per field.
    pub deployment: Option<DeploymentSettings>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// Planning policies.
#[derive(Clone, Debug, Default, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    /// Models of class `llm` are never time-sliced (a shared LLM's latency follows its
    /// neighbours' load). Default `true`.
    pub llm_never_time_sliced: Option<Sp<bool>>,
    /// Most time-slicing replicas of one device. Default `4`.
    #[schemars(range(min = 1, max = 64))]
    pub max_time_slicing_replicas: Option<Sp<i128>>,
    /// Fraction of every device's memory kept free (allocator slack, fragmentation), from 0 to
    /// 0.5. Default `0.02`.
    #[schemars(range(min = 0.0, max = 0.5))]
    pub memory_headroom: Option<Sp<f64>>,
    /// Share of a GPU's compute that time-sliced tenants get together, the rest being lost to
    /// context switches. Default `0.76` (NVIDIA's voice-pipeline measurement: 0.76 requests/s per
    /// GPU with time-slicing against 1.00 with MIG).
    #[schemars(range(max = 1.0), extend("exclusiveMinimum" = 0.0))]
    pub time_slicing_efficiency: Option<Sp<f64>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// How a re-plan treats the plan already committed in the output directory (`plan.json`).
#[derive(Clone, Debug, Default, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangePolicy {
    /// `minimal` (default): keep every node's MIG layout and device-plugin config and every
    /// replica where it runs unless the new demand cannot be met otherwise, re-partitioning the
    /// fewest nodes; `full`: plan from scratch at every compile.
    pub mode: Option<Sp<crate::manifest::words::ChangeMode>>,
    /// Re-plan from scratch (re-partitioning what that takes) when it uses at least this many
    /// GPUs fewer than keeping today's layouts. Default: never re-partition only to save.
    #[schemars(range(min = 1))]
    pub reoptimize_when_saving_gpus: Option<Sp<i128>>,
    /// Re-plan from scratch when it costs at least this much less per hour than keeping
    /// today's layouts (pools with `costPerGpuHour`). Default: never.
    #[schemars(extend("exclusiveMinimum" = 0.0))]
    pub reoptimize_when_saving_cost_per_hour: Option<Sp<f64>>,
    /// At most this many running nodes re-partitioned (held for a drain) by one re-optimisation
    /// (`mode: full`, the thresholds above, `compile --from-scratch`): when a from-scratch plan
    /// would drain more, the compile re-plans the best such set of nodes instead, and the next
    /// step waits until the cluster confirms these (`--observed`). Default: no bound.
    #[schemars(range(min = 1))]
    pub max_repartitions: Option<Sp<i128>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// Whether a model counts as an LLM for policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(rename_all = "lowercase")]
pub enum ModelClass {
    /// A large language model: never time-sliced under `policy.llmNeverTimeSliced`.
    Llm,
    /// Any other model (ASR, TTS, embeddings, guardrails…).
    Small,
}

/// A model to serve: one Kubernetes Deployment.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Model {
    /// Name of the model: a DNS-1123 label, unique in the manifest. It names the Deployment.
    #[schemars(extend("pattern" = DNS_LABEL_PATTERN), length(max = 63))]
    pub name: Sp<String>,
    /// Container image, such as `nvcr.io/nim/nvidia/parakeet-1-1b-ctc-en-us:1.0.0`.
    pub image: Sp<String>,
    /// Container entrypoint, passed through to the Deployment.
    pub command: Option<Vec<Sp<String>>>,
    /// Container arguments, passed through to the Deployment.
    pub args: Option<Vec<Sp<String>>>,
    /// Environment variables, passed through to the Deployment.
    pub env: Option<SpMap<Sp<String>>>,
    /// Container ports, passed through to the Deployment.
    pub ports: Option<Vec<Port>>,
    /// `llm` or `small` (default): LLMs fall under `policy.llmNeverTimeSliced`.
    pub class: Option<Sp<ModelClass>>,
    /// Device memory one replica needs, CUDA context included: `10GiB`, `9600MiB`, `12GB`
    /// (`GB` and `MB` are decimal: 1GB = 10^9 bytes).
    #[schemars(extend("pattern" = MEMORY_PATTERN))]
    pub memory: Sp<String>,
    /// Share of one full GPU's SMs that one replica needs at its target load, above 0 and at most
    /// 1. Default from `defaults.compute`.
    #[schemars(range(max = 1.0), extend("exclusiveMinimum" = 0.0))]
    pub compute: Option<Sp<f64>>,
    /// Fixed number of replicas. Give either `replicas` or `demand`; default 1.
    #[schemars(range(min = 1, max = 100000))]
    pub replicas: Option<Sp<i128>>,
    /// A request rate to cover with measured throughput; gpuplan picks the replicas and their
    /// sizes. Give either `replicas` or `demand`.
    pub demand: Option<Demand>,
    /// `hardware` (a MIG instance or a whole GPU), `shared` (time-slicing allowed) or
    /// `dedicated` (whole GPUs only). Default from `defaults.isolation`, else `hardware`.
    pub isolation: Option<Sp<Isolation>>,
    /// Whole GPUs per replica, all on one node (tensor-parallel models). Absent: a fraction of one
    /// GPU is enough.
    #[schemars(range(min = 1, max = 16))]
    pub gpus: Option<Sp<i128>>,
    /// Latency objective and the latency measured on a whole, unshared GPU.
    pub latency: Option<Latency>,
    /// Put replicas on distinct GPUs (`gpu`) or nodes (`node`), or anywhere (`none`, default).
    pub spread: Option<Sp<Spread>>,
    /// Catalog GPU ids the model may use. Default: all.
    pub gpu_types: Option<Vec<Sp<String>>>,
    /// Pools the model may use. Default: all.
    pub pools: Option<Vec<Sp<String>>>,
    /// `false`: never share a GPU with this model by MPS (where one client's fatal error takes
    /// down the others on the GPU), even on pools that allow `mps`. Default `true`.
    pub allow_mps: Option<Sp<bool>>,
    /// Higher priority models are placed first when GPUs run short. Default 0.
    pub priority: Option<Sp<i128>>,
    /// How the model's Deployments run: cpu and memory, probes, secrets, service account, model
    /// cache, rollout strategy, disruption budget. Each field defaults to `defaults.deployment`,
    /// then to the built-in default documented in `docs/manifest.md`.
    pub deployment: Option<DeploymentSettings>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// A container port.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Port {
    /// Port name: an IANA service name (at most 15 lowercase letters, digits and `-`).
    #[schemars(length(max = 15))]
    pub name: Sp<String>,
    /// Port number, 1 to 65535.
    #[schemars(range(min = 1, max = 65535))]
    pub port: Sp<i128>,
    /// `TCP` (default), `UDP` or `SCTP`.
    #[schemars(extend("enum" = ["TCP", "UDP", "SCTP"]))]
    pub protocol: Option<Sp<String>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// A request-rate demand and the measurements that size it (the MIG-serving / ParvaGPU form).
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Demand {
    /// Requests per second to serve: `40rps` (or per minute: `600rpm`).
    #[schemars(extend("pattern" = RATE_PATTERN))]
    pub rate: Sp<String>,
    /// A measured point is usable only if its latency is below `admissionFactor × latency.p99`.
    /// Default `0.45` (ParvaGPU's rule).
    #[schemars(range(max = 1.0), extend("exclusiveMinimum" = 0.0))]
    pub admission_factor: Option<Sp<f64>>,
    /// Fewest replicas, whatever the rate. Default 1.
    #[schemars(range(min = 1, max = 100000))]
    pub min_replicas: Option<Sp<i128>>,
    /// Measured operating points, written inline.
    pub points: Option<Vec<Point>>,
    /// A CSV file of measured points, relative to the manifest (format: `docs/measurements.md`).
    pub measurements: Option<Sp<String>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// One measured operating point: the rate one replica sustains on one device size.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Point {
    /// Catalog GPU id the measurement was taken on.
    pub gpu: Sp<String>,
    /// MIG profile name as NVML prints it (`3g.40gb`), or `whole` for a whole GPU.
    pub profile: Sp<String>,
    /// Batch size of the measurement. Default 1.
    #[schemars(range(min = 1))]
    pub batch_size: Option<Sp<i128>>,
    /// Processes sharing the device during the measurement (MPS); default 1 (alone).
    #[schemars(range(min = 1))]
    pub processes: Option<Sp<i128>>,
    /// Requests per second one replica sustains (a plain number: the unit is in the name).
    #[schemars(extend("exclusiveMinimum" = 0.0))]
    pub rps: Sp<f64>,
    /// Latency of one batch, such as `120ms`.
    #[schemars(extend("pattern" = DURATION_PATTERN))]
    pub latency: Sp<String>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// A latency objective.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Latency {
    /// 99th-percentile latency objective of one request: `300ms`, `1.5s`.
    #[schemars(extend("pattern" = DURATION_PATTERN))]
    pub p99: Sp<String>,
    /// Latency of one request measured on a whole, unshared GPU: the floor any partition adds to.
    #[schemars(extend("pattern" = DURATION_PATTERN))]
    pub baseline: Option<Sp<String>>,
    /// The GPU type (catalog id, alias or product name) `baseline` was measured on; on other GPU
    /// types gpuplan scales it by the catalog's throughput figures. Absent: the baseline holds on
    /// every GPU type unchanged.
    pub baseline_gpu: Option<Sp<String>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// A DNS-1123 label (Kubernetes object names and label values).
pub const DNS_LABEL_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// A memory size: a decimal number and a unit.
pub const MEMORY_PATTERN: &str = r"^[0-9]+(\.[0-9]+)?(KiB|MiB|GiB|TiB|KB|MB|GB|TB)$";
/// A duration: a decimal number and a unit.
pub const DURATION_PATTERN: &str = r"^[0-9]+(\.[0-9]+)?(us|ms|s|m)$";
/// A request rate: a decimal number and a unit.
pub const RATE_PATTERN: &str = r"^[0-9]+(\.[0-9]+)?(rps|rpm)$";

fn api_version_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "const": API_VERSION })
}

fn kind_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "const": KIND })
}

/// The manifest's JSON Schema, pretty-printed with a trailing newline (what `gpuplan schema`
/// prints and `schemas/gpuplan.schema.json` holds).
pub fn schema_json() -> String {
    let mut schema = schemars::schema_for!(Manifest);
    schema.insert("$id".into(), "https://gpuplan.io/schemas/v1alpha1/gpuplan.schema.json".into());
    let mut value = schema.to_value();
    drop_integer_formats(&mut value);
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    text
}

/// Removes `"format": "int128"` (schemars' name for the raw integers' Rust type): it is no JSON
/// Schema format, and editors would show it to users.
fn drop_integer_formats(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            if map.get("format").and_then(|f| f.as_str()) == Some("int128") {
                map.remove("format");
            }
            map.values_mut().for_each(drop_integer_formats);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(drop_integer_formats),
        _ => {}
    }
}

/// How a model's Deployments run (the `deployment` block of a model or of `defaults`).
#[derive(Clone, Debug, Default, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeploymentSettings {
    /// Container cpu and memory. Default requests `cpu: "1"`, `memory: 8Gi` and limit
    /// `memory: 32Gi` (no cpu limit), so that no pod is BestEffort.
    pub resources: Option<ContainerResources>,
    /// Readiness, liveness and startup probes. Default: HTTP `GET /v1/health/ready` (readiness,
    /// startup) and `/v1/health/live` (liveness) on the port named `http` (the NVIDIA NIM
    /// endpoints); a TCP check of the first port when there is no `http` port; none without ports.
    pub probes: Option<Probes>,
    /// Names of Secrets that pull the image (for `nvcr.io`, a `docker-registry` Secret).
    pub image_pull_secrets: Option<Vec<Sp<String>>>,
    /// Environment variables read from Secrets or ConfigMaps (`valueFrom`), by variable name:
    /// `NGC_API_KEY: { secret: ngc-api, key: NGC_API_KEY }`. Secrets stay out of Git.
    pub value_from: Option<SpMap<ValueFrom>>,
    /// Service account of the pods. Default: the namespace's `default`, without a mounted token.
    pub service_account_name: Option<Sp<String>>,
    /// A volume for downloaded model weights.
    pub model_cache: Option<ModelCache>,
    /// Rolling-update strategy. Default derived from the plan: `maxSurge: 1, maxUnavailable: 0`
    /// where the node has planned spare capacity of the model's resource, else `maxSurge: 0,
    /// maxUnavailable: 1`.
    pub strategy: Option<Strategy>,
    /// The model's PodDisruptionBudget (one over all its pods, written when it has more than one
    /// replica). Default `maxUnavailable: 1`.
    pub disruption_budget: Option<DisruptionBudget>,
    /// Size of the memory-backed `/dev/shm` (counted in the memory limit); `"0"` mounts none.
    /// Default `16Gi` for NIM images (`nvcr.io/nim/`), else `1Gi`.
    #[schemars(schema_with = "quantity_schema", default)]
    pub shared_memory: Option<Sp<String>>,
    /// The pod's user, group and volume group. Default for NIM images: 1000 for all three (the
    /// NIM Helm chart's); else the image's user and no `fsGroup`.
    pub security_context: Option<PodSecurity>,
    /// Seconds a stopping pod has to finish its requests (streamed responses). Default `120`.
    #[schemars(range(min = 0, max = 3600))]
    pub termination_grace_period_seconds: Option<Sp<i128>>,
    /// An existing PriorityClass for the pods (a prerequisite; not the planner's `priority`).
    pub priority_class_name: Option<Sp<String>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// The pod's identity: user, group and the group that owns its volumes.
#[derive(Clone, Debug, Default, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodSecurity {
    /// User id of the container processes (not 0: pods run as non-root).
    #[schemars(range(min = 1, max = 2147483647))]
    pub run_as_user: Option<Sp<i128>>,
    /// Primary group id of the container processes.
    #[schemars(range(min = 0, max = 2147483647))]
    pub run_as_group: Option<Sp<i128>>,
    /// Group that owns mounted volumes, so a claim is writable without a pre-chown.
    #[schemars(range(min = 0, max = 2147483647))]
    pub fs_group: Option<Sp<i128>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// Container cpu and memory requests and limits.
#[derive(Clone, Debug, Default, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerResources {
    /// `cpu` and `memory` requests, as Kubernetes quantities (`500m`, `2`, `16Gi`).
    #[schemars(schema_with = "quantity_map_schema", default)]
    pub requests: Option<SpMap<Sp<String>>>,
    /// `cpu` and `memory` limits, as Kubernetes quantities.
    #[schemars(schema_with = "quantity_map_schema", default)]
    pub limits: Option<SpMap<Sp<String>>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// The three probes of the model's container.
#[derive(Clone, Debug, Default, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Probes {
    /// When the pod receives traffic.
    pub readiness: Option<Probe>,
    /// When the kubelet restarts the container.
    pub liveness: Option<Probe>,
    /// How long the model may take to load before liveness counts.
    pub startup: Option<Probe>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// One probe: an HTTP `GET` of `path`, or a TCP connection when `path` is absent.
#[derive(Clone, Debug, Default, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Probe {
    /// `false` removes the probe. Default `true`.
    pub enabled: Option<Sp<bool>>,
    /// HTTP path, such as `/v1/health/ready`.
    pub path: Option<Sp<String>>,
    /// Name (or number) of one of the model's `ports`. Default `http`, else the first port.
    #[schemars(schema_with = "int_or_name_schema", default)]
    pub port: Option<Sp<String>>,
    #[schemars(range(min = 0, max = 3600))]
    pub initial_delay_seconds: Option<Sp<i128>>,
    #[schemars(range(min = 1, max = 3600))]
    pub period_seconds: Option<Sp<i128>>,
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_seconds: Option<Sp<i128>>,
    #[schemars(range(min = 1, max = 10000))]
    pub failure_threshold: Option<Sp<i128>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// Where an environment variable's value comes from: one key of a Secret or of a ConfigMap.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValueFrom {
    /// Name of the Secret. Give either `secret` or `configMap`.
    pub secret: Option<Sp<String>>,
    /// Name of the ConfigMap. Give either `secret` or `configMap`.
    pub config_map: Option<Sp<String>>,
    /// The key inside the Secret or ConfigMap.
    pub key: Sp<String>,
    /// Start the pod even when the Secret, ConfigMap or key is missing. Default `false`.
    pub optional: Option<Sp<bool>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// A volume for model weights, mounted at `mountPath`: a PersistentVolumeClaim when
/// `claimName` is given, a node directory with `hostPath`, else an `emptyDir`.
#[derive(Clone, Debug, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelCache {
    /// Where the container sees the cache, such as `/opt/nim/.cache`.
    pub mount_path: Sp<String>,
    /// An existing PersistentVolumeClaim (ReadWriteMany when the model has several replicas).
    pub claim_name: Option<Sp<String>>,
    /// Size limit of the `emptyDir`, as a Kubernetes quantity (`100Gi`).
    #[schemars(schema_with = "quantity_schema", default)]
    pub size_limit: Option<Sp<String>>,
    /// A directory on the node (`hostPath`), kept across restarts of the node's pods. Give
    /// either `claimName` or `hostPath`, or neither (an `emptyDir`).
    pub host_path: Option<Sp<String>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// A Deployment's rolling-update parameters: a count or a percentage (`25%`).
#[derive(Clone, Debug, Default, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct Strategy {
    /// Extra pods started before old ones stop. Needs spare GPU capacity.
    #[schemars(schema_with = "int_or_percent_schema", default)]
    pub max_surge: Option<Sp<String>>,
    /// Pods that may be down during the update.
    #[schemars(schema_with = "int_or_percent_schema", default)]
    pub max_unavailable: Option<Sp<String>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// A PodDisruptionBudget: give `maxUnavailable` or `minAvailable` (a count or a percentage).
#[derive(Clone, Debug, Default, JsonSchema)]
#[schemars(rename_all = "camelCase", deny_unknown_fields)]
pub struct DisruptionBudget {
    /// Pods of the model that a voluntary disruption (drain) may take down at once.
    #[schemars(schema_with = "int_or_percent_schema", default)]
    pub max_unavailable: Option<Sp<String>>,
    /// Pods of the model that must stay up during a voluntary disruption.
    #[schemars(schema_with = "int_or_percent_schema", default)]
    pub min_available: Option<Sp<String>>,
    #[schemars(skip)]
    pub span: Option<Span>,
}

/// A count (`1`) or a percentage (`25%`), as Kubernetes' `IntOrString`.
fn int_or_percent_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "anyOf": [
            { "type": "integer", "minimum": 0 },
            { "type": "string", "pattern": "^[0-9]+%$" },
            { "type": "null" }
        ]
    })
}

/// A port number or name.
fn int_or_name_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "anyOf": [
            { "type": "integer", "minimum": 1, "maximum": 65535 },
            { "type": "string" },
            { "type": "null" }
        ]
    })
}

/// `cpu`, `memory`, `ephemeral-storage` → a Kubernetes quantity (a string, or a plain number).
fn quantity_map_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": ["object", "null"],
        "propertyNames": { "enum": ["cpu", "memory", "ephemeral-storage"] },
        "additionalProperties": { "anyOf": [{ "type": "string" }, { "type": "number", "exclusiveMinimum": 0 }] }
    })
}

/// A Kubernetes quantity: a string such as `100Gi`, or a plain number.
fn quantity_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "anyOf": [{ "type": "string" }, { "type": "number", "exclusiveMinimum": 0 }, { "type": "null" }] })
}
