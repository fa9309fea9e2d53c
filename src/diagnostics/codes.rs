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

    // --- catalog and mig-parted configs ------------------------------------------------------
    /// A user catalog entry replaces a built-in GPU with the same id.
    CATALOG_OVERRIDE = "catalog-override";
    /// Two user catalog files define the same GPU id.
    CATALOG_DUPLICATE_ID = "catalog-duplicate-id";
    /// A catalog entry breaks a rule (slices, starts, attributes, ids).
    CATALOG_INVALID_ENTRY = "catalog-invalid-entry";
    /// `nvidia-smi` output that `catalog import` cannot read.
    NVIDIA_SMI_PARSE = "nvidia-smi-parse";
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
}
