//! The GPU catalog: what every GPU model offers, as data.
//!
//! In: the YAML files under the top-level `catalog/` folder (embedded in the binary) and, optionally,
//! the user's own files. Out: a [`Catalog`] keyed by stable GPU id. The catalog is the only place
//! that knows profile names, NVML memory sizes and placement rules; [`layout`] decides whether a
//! multiset of MIG profiles fits on a GPU, with the exact placement of every instance.
//!
//! Guarantee: every profile of a loaded catalog has allowed starts inside the GPU's memory slices,
//! and a maximum count of at least one.

pub mod layout;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Every GPU model gpuplan knows, by stable id.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    gpus: BTreeMap<String, GpuModel>,
}

/// One GPU model (a product such as the A100-SXM4-80GB).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuModel {
    /// Stable id used in manifests, e.g. `A100-SXM4-80GB`.
    pub id: String,
    /// Marketing name as `nvidia-smi` prints it, e.g. `NVIDIA A100-SXM4-80GB`.
    pub name: String,
    /// Other names users may write; matched case-insensitively.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Values of the `nvidia.com/gpu.product` node label for this model.
    #[serde(default)]
    pub product_labels: Vec<String>,
    /// PCI device ids as mig-parted writes them, `0xDDDD10DE`.
    #[serde(default)]
    pub pci_ids: Vec<String>,
    /// Total device memory in MiB as NVML reports it.
    pub memory_mib: u64,
    /// Streaming multiprocessors of the whole GPU.
    pub sms: u32,
    /// MIG geometry; absent for GPUs without MIG.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<MigGeometry>,
}

/// How a MIG-capable GPU is cut.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MigGeometry {
    pub compute_slices: u8,
    pub memory_slices: u8,
    pub profiles: Vec<MigProfile>,
}

/// One GPU-instance profile, exactly as NVML describes it on this GPU model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MigProfile {
    /// Name exactly as NVML prints it, e.g. `1g.10gb+me`.
    pub name: String,
    /// Profile id as `nvidia-smi mig -lgip` prints it.
    pub id: u32,
    pub compute_slices: u8,
    pub memory_slices: u8,
    /// Usable memory in MiB as NVML reports it (not the rounded number in the name).
    pub memory_mib: u64,
    pub sms: u32,
    /// Maximum number of instances of this profile on one GPU.
    pub max_count: u8,
    /// Memory-slice indices where an instance may start.
    pub starts: Vec<u8>,
    /// Memory slices one instance occupies from its start.
    pub size: u8,
}

impl GpuModel {
    pub fn is_mig_capable(&self) -> bool {
        self.mig.is_some()
    }

    /// The profile with this exact NVML name, if this GPU has it.
    pub fn profile(&self, name: &str) -> Option<&MigProfile> {
        self.mig.as_ref()?.profiles.iter().find(|p| p.name == name)
    }
}

impl MigProfile {
    /// The extended-resource name the device plugin advertises under the `mixed` strategy.
    pub fn resource_name(&self) -> String {
        format!("nvidia.com/mig-{}", self.name.replace('+', "."))
    }
}

impl Catalog {
    /// The catalog embedded in the binary.
    pub fn builtin() -> Self {
        let mut catalog = Self::default();
        for (_, text) in BUILTIN {
            if let Ok(gpu) = serde_saphyr::from_str::<GpuModel>(text) {
                catalog.insert(gpu);
            }
        }
        catalog
    }

    /// Adds or replaces a GPU model; returns the entry it replaced.
    pub fn insert(&mut self, gpu: GpuModel) -> Option<GpuModel> {
        self.gpus.insert(gpu.id.clone(), gpu)
    }

    /// Looks a GPU up by id or alias, case-insensitively.
    pub fn get(&self, id: &str) -> Option<&GpuModel> {
        self.gpus.get(id).or_else(|| {
            self.gpus.values().find(|g| {
                g.id.eq_ignore_ascii_case(id) || g.aliases.iter().any(|a| a.eq_ignore_ascii_case(id))
            })
        })
    }

    pub fn iter(&self) -> impl Iterator<Item = &GpuModel> {
        self.gpus.values()
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.gpus.keys().map(String::as_str)
    }
}

/// The embedded catalog files: (file name, text). A test checks that every file in `catalog/` is here.
pub const BUILTIN: &[(&str, &str)] =
    &[("a100-sxm4-80gb.yaml", include_str!("../../catalog/a100-sxm4-80gb.yaml"))];
