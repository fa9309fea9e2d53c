//! The words the manifest and the checked spec share: plain values that need no checking beyond
//! parsing (isolation levels, spreads, the MIG strategy, a measured point). They live here, in
//! the lower stage, so that the manifest never imports from [`crate::spec`]; the spec re-exports
//! them.
//!
//! Each keyword is spelled once, in the word list of its `keywords!` block: that word is
//! serde's and the JSON Schema's name of the value, the reader parses it ([`Keyword::ALL`]),
//! and messages name the value with [`Keyword::word`].

use serde::Serialize;

/// A closed set of keywords a string field may hold.
pub trait Keyword: Sized + Copy + PartialEq + 'static {
    /// What the field is called in messages (`isolation`).
    const WHAT: &'static str;
    /// Every value with its word, in the order messages list them.
    const ALL: &'static [(&'static str, Self)];

    /// The word of this value, as the manifest spells it.
    fn word(self) -> &'static str {
        Self::ALL.iter().find(|(_, v)| *v == self).map_or("", |(w, _)| w)
    }
}

/// Defines an enum of keywords and its [`Keyword`] table from one list: the words, in the order
/// of the variants, each given to serde (and so to schemars) as its variant's name.
macro_rules! keywords {
    ($(#[$meta:meta])* pub enum $name:ident ($what:literal, [$($word:literal),+]) {
        $($(#[$vmeta:meta])* $variant:ident,)+
    }) => {
        $(#[$meta])*
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $word)] $variant,)+
        }

        impl Keyword for $name {
            const WHAT: &'static str = $what;
            const ALL: &'static [(&'static str, Self)] = &[$(($word, $name::$variant)),+];
        }
    };
}

keywords! {
    /// How the device plugin advertises MIG devices.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
    pub enum MigStrategy ("MIG strategy", ["mixed", "single", "none"]) {
        /// One resource per MIG profile (`nvidia.com/mig-3g.40gb`); profiles may differ on a node.
        Mixed,
        /// All GPUs of a node cut alike and advertised as `nvidia.com/gpu`.
        Single,
        /// MIG devices are not advertised.
        None,
    }
}

keywords! {
    /// How pods get their GPUs (`cluster.backend`, per pool too): docs/dra.md.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
    pub enum Backend ("backend", ["devicePlugin", "dra"]) {
        /// NVIDIA's device plugin: extended resources counted per node (`nvidia.com/gpu`,
        /// `nvidia.com/mig-3g.40gb`); which device a pod gets inside a node is the plugin's choice.
        #[default]
        DevicePlugin,
        /// Kubernetes Dynamic Resource Allocation (`resource.k8s.io/v1`) with NVIDIA's DRA driver:
        /// every pod's claim selects its planned GPU by UUID or MIG instance by parent UUID, profile
        /// and placement.
        Dra,
    }
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

keywords! {
    /// A mechanism the planner may configure on a pool's nodes to share GPUs (`sharing`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
    pub enum SharingMechanism ("sharing mechanism", ["mig", "timeSlicing", "mps"]) {
        /// MIG instances (GPUs that support MIG).
        Mig,
        /// The device plugin's time-slicing, of whole GPUs or of MIG instances.
        TimeSlicing,
        /// The device plugin's MPS, on whole GPUs only: clients run concurrently, each with
        /// memory ÷ replicas and ⌊100/replicas⌋% of the threads, but a crashing client takes the
        /// others on its GPU down.
        Mps,
    }
}

keywords! {
    /// How a model's replicas may share a GPU.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
    pub enum Isolation ("isolation", ["hardware", "shared", "dedicated"]) {
        /// A MIG instance or a whole GPU: memory and fault isolation.
        Hardware,
        /// Time-slicing allowed.
        Shared,
        /// Whole GPUs only.
        Dedicated,
    }
}

keywords! {
    /// Where a model's replicas must not share.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
    pub enum Spread ("spread", ["none", "gpu", "node"]) {
        /// Anywhere.
        None,
        /// Every replica on a different GPU.
        Gpu,
        /// Every replica on a different node.
        Node,
    }
}

keywords! {
    /// How much a re-plan may change what runs today.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
    pub enum ChangeMode ("change mode", ["minimal", "full"]) {
        /// Keep every node's MIG layout and device-plugin config and every replica where it runs,
        /// unless the new demand cannot be met otherwise; then re-partition the fewest nodes.
        #[default]
        Minimal,
        /// Plan from scratch at every compile (the previous plan is only compared with).
        Full,
    }
}

#[cfg(test)]
mod tests {
    use super::{Isolation, Keyword, Spread};

    #[test]
    fn serde_writes_the_word_the_reader_reads() {
        for (word, value) in Isolation::ALL {
            assert_eq!(serde_json::to_value(value).expect("serialises"), serde_json::json!(word));
            assert_eq!(value.word(), *word);
        }
        assert_eq!(Spread::Gpu.word(), "gpu");
        assert_eq!(serde_json::to_value(Spread::Gpu).expect("serialises"), serde_json::json!("gpu"));
    }
}
