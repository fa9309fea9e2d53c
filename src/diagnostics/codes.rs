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

    // --- planner ---------------------------------------------------------------------------
    /// No allowed pool can serve the model (its `pools` / `gpuTypes`, or there are no pools).
    NO_ELIGIBLE_POOL = "no-eligible-pool";
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
    /// More replicas on distinct nodes than the model's pools have nodes.
    SPREAD_UNSATISFIABLE = "spread-unsatisfiable";
    /// The models together need more GPUs than the pools have.
    CAPACITY_EXCEEDED = "capacity-exceeded";
    /// No plan satisfies every constraint together, even with more nodes.
    NO_FEASIBLE_PLAN = "no-feasible-plan";
    /// The planner itself failed (a solver error or an internal inconsistency).
    PLANNER_FAILED = "planner-failed";
}
