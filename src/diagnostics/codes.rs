//! The registry of diagnostic codes. A code, once published, never changes meaning.
//!
//! Each stage declares its codes here, in its own block, so that `docs/diagnostics.md` can be
//! checked against one list ([`ALL`]).

/// A stable kebab-case diagnostic code such as `unknown-field`.
pub type Code = &'static str;

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $code:literal;)*) => {
        $( $(#[$doc])* pub const $name: Code = $code; )*
        /// Every registered code, in declaration order.
        pub const ALL: &[Code] = &[$($code),*];
    };
}

codes! {
    // --- reading input (any stage that reads a file) -----------------------------------------
    /// The file is not valid YAML or TOML.
    SYNTAX = "syntax";
    /// A YAML stream with more than one document where one is expected.
    MULTIPLE_DOCUMENTS = "multiple-documents";
    /// A field that the format does not know.
    UNKNOWN_FIELD = "unknown-field";
    /// A value of the wrong type.
    WRONG_TYPE = "wrong-type";
    /// A required field is absent.
    MISSING_FIELD = "missing-field";
    /// A value outside its allowed set or range.
    INVALID_VALUE = "invalid-value";

    // --- measurements (measured-points CSV files, the ParvaGPU importer) ----------------------
    /// The header of a measurements file is missing a column, repeats one, or has an unknown one.
    MEASUREMENT_HEADER = "measurement-header";
    /// A row of a measurements file has more or fewer fields than the header.
    MEASUREMENT_ROW_LENGTH = "measurement-row-length";
    /// A field of a measurements file is not a valid number, count or id, or is out of range.
    MEASUREMENT_VALUE = "measurement-value";
    /// A profile that is neither `whole` nor a GPU-instance profile of the point's GPU.
    MEASUREMENT_PROFILE = "measurement-profile";
    /// A measured point names a GPU the catalog does not know.
    MEASUREMENT_GPU = "measurement-gpu";
    /// Two rows measure the same GPU, profile, batch size and process count.
    MEASUREMENT_DUPLICATE = "measurement-duplicate";
    /// A measurements file without any measured point.
    MEASUREMENT_EMPTY = "measurement-empty";
    // --- render (the GitOps bundle) ------------------------------------------------------------
    /// A name that Kubernetes or the file system would reject or misread.
    UNSAFE_NAME = "unsafe-name";
    /// A template failed to parse or render.
    TEMPLATE_ERROR = "template-error";
    /// A template rendered text that is not one or more YAML mappings.
    INVALID_RENDERED_YAML = "invalid-rendered-yaml";
    /// gpuplan could not render a file it generated itself (a bug).
    RENDER_FAILED = "render-failed";
    // --- catalog and mig-parted configs ------------------------------------------------------
    /// A user catalog entry replaces a built-in GPU with the same id.
    CATALOG_OVERRIDE = "catalog-override";
    /// Two user catalog files define the same GPU id.
    CATALOG_DUPLICATE_ID = "catalog-duplicate-id";
    /// A catalog entry breaks a rule (slices, starts, attributes, ids).
    CATALOG_INVALID_ENTRY = "catalog-invalid-entry";
    /// `nvidia-smi` output that `catalog import` cannot read.
    NVIDIA_SMI_PARSE = "nvidia-smi-parse";
    /// `catalog import` would shadow another catalog entry's id or alias, or matches several.
    CATALOG_IMPORT_CONFLICT = "catalog-import-conflict";
    /// A mig-parted config names a profile that the GPUs it targets do not have.
    MIG_CONFIG_UNKNOWN_PROFILE = "mig-config-unknown-profile";
    /// A mig-parted config asks for instances that cannot be placed on the GPUs it targets.
    MIG_CONFIG_INVALID_LAYOUT = "mig-config-invalid-layout";
    /// A mig-parted device filter matches no GPU in the catalog.
    MIG_CONFIG_UNMATCHED_FILTER = "mig-config-unmatched-filter";
    /// A mig-parted config leaves some catalog GPUs untouched although it targets others.
    MIG_CONFIG_UNTOUCHED_GPU = "mig-config-untouched-gpu";
    /// Two entries of one mig-parted config target the same GPUs.
    MIG_CONFIG_DUPLICATE_ENTRY = "mig-config-duplicate-entry";
    // --- manifest and spec ---------------------------------------------------------------------
    /// The input is larger or more deeply nested than gpuplan reads.
    INPUT_TOO_LARGE = "input-too-large";
    /// `apiVersion` or `kind` is not one this gpuplan reads.
    UNSUPPORTED_VERSION = "unsupported-version";
    /// A quantity (memory, duration, rate) without a unit, with an unknown unit, or malformed.
    BAD_UNIT = "bad-unit";
    /// Two pools, models, nodes or ports share a name.
    DUPLICATE_NAME = "duplicate-name";
    /// A pool allows `mps` while `cluster.migStrategy` is `mixed` (the device plugin refuses MPS
    /// under the mixed strategy, which the GPU Operator sets for every node).
    MPS_WITH_MIXED_MIG_STRATEGY = "mps-with-mixed-mig-strategy";
    /// A name that cannot become a Kubernetes object name or label.
    INVALID_NAME = "invalid-name";
    /// A GPU id that is not in the catalog.
    UNKNOWN_GPU = "unknown-gpu";
    /// A MIG profile name that the GPU does not have.
    UNKNOWN_PROFILE = "unknown-profile";
    /// A model names a pool that the inventory does not have.
    UNKNOWN_POOL = "unknown-pool";
    /// Two fields that exclude each other are both given.
    CONFLICTING_FIELDS = "conflicting-fields";
    /// No pool the model may use has a GPU (or MIG instance) with enough memory.
    MODEL_FITS_NO_GPU = "model-fits-no-gpu";
    /// The memory headroom excludes a device by less than a few percent of its usable memory.
    MEMORY_HEADROOM_MARGIN = "memory-headroom-margin";
    /// A model may use no pool at all (its pool and GPU-type filters exclude every pool).
    NO_ELIGIBLE_POOL = "no-eligible-pool";
    /// A model asks for more whole GPUs per replica than any node it may use has.
    GPUS_EXCEED_NODE = "gpus-exceed-node";
    /// Spread asks for more distinct nodes or GPUs than the model's pools can have.
    SPREAD_EXCEEDS_CAPACITY = "spread-exceeds-capacity";
    /// Isolation `hardware` where no pool has MIG: every replica takes a whole GPU.
    HARDWARE_ISOLATION_WHOLE_GPU = "hardware-isolation-whole-gpu";
    /// A latency baseline without `baselineGpu` on a model that may run on several GPU types.
    LATENCY_BASELINE_GPU_UNSTATED = "latency-baseline-gpu-unstated";
    /// A model breaks a policy of the manifest (for example an LLM that may be time-sliced).
    POLICY_VIOLATION = "policy-violation";
    /// A rate demand without any usable measured point.
    MISSING_MEASUREMENTS = "missing-measurements";
    /// A current layout names a node that the pool does not have.
    UNKNOWN_NODE = "unknown-node";
    /// A model with a Service but no readiness probe (a non-NIM image that declares none).
    NO_READINESS_PROBE = "no-readiness-probe";
    /// A model cache that is an `emptyDir` without `sizeLimit` (no ephemeral storage requested).
    CACHE_WITHOUT_SIZE = "cache-without-size";
    /// A memory limit the manifest gave that cannot hold the memory request and `/dev/shm`.
    MEMORY_LIMIT_TIGHT = "memory-limit-tight";
    /// A pool on the `dra` backend is autoscaled: its nodes and GPU UUIDs are unknown.
    DRA_AUTOSCALED_POOL = "dra-autoscaled-pool";
    /// A node of a pool on the `dra` backend has no GPU UUIDs.
    DRA_MISSING_UUIDS = "dra-missing-uuids";
    /// A GPU UUID is malformed, repeated, or the node lists the wrong number of them.
    INVALID_GPU_UUID = "invalid-gpu-uuid";
    // --- planner ---------------------------------------------------------------------------
    /// The model's isolation policy rules out every device that would fit it.
    ISOLATION_UNSATISFIABLE = "isolation-unsatisfiable";
    /// A multi-GPU replica needs more GPUs than any node of its pools has.
    REPLICA_EXCEEDS_NODE = "replica-exceeds-node";
    /// The model needs more memory than any allowed device offers.
    MODEL_EXCEEDS_MEMORY = "model-exceeds-memory";
    /// The model needs more compute than any allowed device offers.
    MODEL_EXCEEDS_COMPUTE = "model-exceeds-compute";
    /// A rate-demand model has no admissible measured point on any allowed device.
    NO_ADMISSIBLE_MEASUREMENT = "no-admissible-measurement";
    /// The predicted p99 latency exceeds the model's SLO on every device that fits.
    LATENCY_SLO_UNREACHABLE = "latency-slo-unreachable";
    /// `gpuplan latency FILE`: the file is not a calibration file.
    LATENCY_FILE_INVALID = "latency-file-invalid";
    /// More replicas on distinct nodes than the model's pools have nodes.
    SPREAD_UNSATISFIABLE = "spread-unsatisfiable";
    /// The models together need more GPUs than the pools have.
    CAPACITY_EXCEEDED = "capacity-exceeded";
    /// No plan satisfies every constraint together, even with more nodes.
    NO_FEASIBLE_PLAN = "no-feasible-plan";
    /// The planner itself failed (a solver error or an internal inconsistency).
    PLANNER_FAILED = "planner-failed";
    // --- day 2 (the committed plan, the observed cluster) ----------------------------------------
    /// The committed `plan.json` cannot be read as a plan of this manifest.
    PREVIOUS_PLAN_UNREADABLE = "previous-plan-unreadable";
    /// The `--observed` file is not `kubectl get nodes -o json` output of this cluster.
    OBSERVED_NODES_UNREADABLE = "observed-nodes-unreadable";
    /// A held node's MIG manager reported `nvidia.com/mig.config.state=failed`.
    MIG_CONFIG_FAILED = "mig-config-failed";
}
