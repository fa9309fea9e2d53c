//! The words the manifest and the checked spec share: plain values that need no checking beyond
//! parsing (isolation levels, spreads, the MIG strategy, a measured point). They live here, in
//! the lower stage, so that the manifest never imports from [`crate::spec`]; the spec re-exports
//! them.

use serde::Serialize;

/// How the device plugin advertises MIG devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MigStrategy {
    /// One resource per MIG profile (`nvidia.com/mig-3g.40gb`); profiles may differ on a node.
    Mixed,
    /// All GPUs of a node cut alike and advertised as `nvidia.com/gpu`.
    Single,
    /// MIG devices are not advertised.
    None,
}

/// How pods get their GPUs (`cluster.backend`, per pool too): docs/dra.md.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Backend {
    /// NVIDIA's device plugin: extended resources counted per node (`nvidia.com/gpu`,
    /// `nvidia.com/mig-3g.40gb`); which device a pod gets inside a node is the plugin's choice.
    #[default]
    DevicePlugin,
    /// Kubernetes Dynamic Resource Allocation (`resource.k8s.io/v1`) with NVIDIA's DRA driver:
    /// every pod's claim selects its planned GPU by UUID or MIG instance by parent UUID, profile
    /// and placement.
    Dra,
}

/// One measured operating point of a model on one device size.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MeasuredPoint {
    /// Catalog GPU id the measurement was taken on.
    pub gpu: String,
    /// MIG profile name as NVML prints it, or `whole` for a whole GPU.
    pub profile: String,
    pub batch_size: u32,
    /// Concurrent processes sharing the device during the measurement (MPS); 1 = alone.
    pub processes: u32,
    /// Requests per second one replica (one process) sustains.
    pub rps: f64,
    /// Latency of one batch in milliseconds.
    pub latency_ms: f64,
}

/// How a model's replicas may share a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// A MIG instance or a whole GPU: memory and fault isolation.
    Hardware,
    /// Time-slicing allowed.
    Shared,
    /// Whole GPUs only.
    Dedicated,
}

/// Where a model's replicas must not share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Spread {
    /// Anywhere.
    None,
    /// Every replica on a different GPU.
    Gpu,
    /// Every replica on a different node.
    Node,
}

/// How much a re-plan may change what runs today.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChangeMode {
    /// Keep every node's MIG layout and device-plugin config and every replica where it runs,
    /// unless the new demand cannot be met otherwise; then re-partition the fewest nodes.
    #[default]
    Minimal,
    /// Plan from scratch at every compile (the previous plan is only compared with).
    Full,
}
