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
    // --- manifest and spec ---------------------------------------------------------------------
    /// The input is larger or more deeply nested than gpuplan reads.
    INPUT_TOO_LARGE = "input-too-large";
    /// `apiVersion` or `kind` is not one this gpuplan reads.
    UNSUPPORTED_VERSION = "unsupported-version";
    /// A quantity (memory, duration, rate) without a unit, with an unknown unit, or malformed.
    BAD_UNIT = "bad-unit";
    /// Two pools, models, nodes or ports share a name.
    DUPLICATE_NAME = "duplicate-name";
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
    /// A model may use no pool at all (its pool and GPU-type filters exclude every pool).
    NO_ELIGIBLE_POOL = "no-eligible-pool";
    /// A model asks for more whole GPUs per replica than any node it may use has.
    GPUS_EXCEED_NODE = "gpus-exceed-node";
    /// Spread asks for more distinct nodes or GPUs than the model's pools can have.
    SPREAD_EXCEEDS_CAPACITY = "spread-exceeds-capacity";
    /// Isolation `hardware` where no pool has MIG: every replica takes a whole GPU.
    HARDWARE_ISOLATION_WHOLE_GPU = "hardware-isolation-whole-gpu";
    /// A model breaks a policy of the manifest (for example an LLM that may be time-sliced).
    POLICY_VIOLATION = "policy-violation";
    /// A rate demand without any usable measured point.
    MISSING_MEASUREMENTS = "missing-measurements";
    /// A current layout names a node that the pool does not have.
    UNKNOWN_NODE = "unknown-node";
}
