//! The NVIDIA side of the bundle: the mig-parted and device-plugin ConfigMaps and the GPU
//! Operator settings that select them (a ClusterPolicy patch and Helm values).
//!
//! In: the plan's named configs (`Plan::mig_configs`, `Plan::device_plugin_configs`), the spec's
//! cluster options and the catalog (PCI ids). Out: YAML text built from typed structs with
//! serde-saphyr (keys in declaration order, `apiVersion`/`kind`/`metadata` first).
//!
//! Guarantees: the mig-parted config always has `all-disabled` and every config a node is
//! labelled with; a MIG-enabled entry carries a `device-filter` with the PCI ids of the GPU model
//! it was planned for (taken from the catalog when the plan left it empty), so it cannot apply
//! a geometry to another GPU model; the device-plugin ConfigMap always has a `default` key. The
//! same types parse NVIDIA's own files ([`MigPartedConfig`], the one mig-parted type, from
//! [`crate::catalog::migparted`]; [`DevicePluginConfig`]), and
//! [`schema_errors`] checks a document against the JSON schemas in `schemas/nvidia/`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::objects::{DEVICE_PLUGIN_CONFIGMAP, MIG_PARTED_CONFIGMAP, SYNC_WAVE};
use super::{internal, to_yaml};
use crate::catalog::Catalog;
use crate::catalog::migparted::{ALL_DISABLED, DEFAULT_DEVICE_PLUGIN_CONFIG};
pub use crate::catalog::migparted::{DeviceFilter, Devices, MigConfigEntry, MigPartedConfig};
use crate::diagnostics::Diagnostic;
use crate::plan::Plan;
use crate::spec::{Keyword, Spec};

/// A device-plugin / GFD config file (one key of the device-plugin ConfigMap).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DevicePluginConfig {
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<DevicePluginFlags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<Sharing>,
    /// Keys gpuplan does not write (`resources`, `imex`), kept when parsing.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DevicePluginFlags {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_strategy: Option<String>,
    /// Flags gpuplan does not write, kept when parsing.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sharing {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_slicing: Option<SharingStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mps: Option<SharingStrategy>,
}

/// `sharing.timeSlicing` / `sharing.mps`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SharingStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rename_by_default: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_requests_greater_than_one: Option<bool>,
    pub resources: Vec<SharedResource>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SharedResource {
    pub name: String,
    pub replicas: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rename: Option<String>,
}

/// A ConfigMap as gpuplan writes it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ConfigMap {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    data: BTreeMap<String, String>,
}

/// Object metadata (only the fields gpuplan sets).
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Metadata {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Labels every object gpuplan generates carries.
pub(crate) fn managed_labels(spec: &Spec) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/managed-by".to_owned(), "gpuplan".to_owned()),
        ("gpuplan.io/plan".to_owned(), spec.name.clone()),
    ])
}

fn mig_strategy(spec: &Spec) -> &'static str {
    spec.cluster.mig_strategy.word()
}

/// The mig-parted config text (the `config.yaml` key) for a plan.
pub fn mig_parted_config(catalog: &Catalog, plan: &Plan) -> Result<MigPartedConfig, Diagnostic> {
    // PCI ids of the GPU models whose nodes are labelled with each config.
    let mut models_by_config: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for pool in &plan.pools {
        for node in &pool.nodes {
            models_by_config.entry(node.mig_config.as_str()).or_default().insert(pool.gpu.as_str());
        }
    }
    let mut configs = BTreeMap::new();
    for (name, config) in &plan.mig_configs {
        let filter_ids: Vec<String> = match models_by_config.get(name.as_str()) {
            Some(models) if models.len() == 1 => models
                .iter()
                .filter_map(|id| catalog.get(id))
                .flat_map(|gpu| gpu.pci_ids.iter().cloned())
                .collect(),
            _ => Vec::new(),
        };
        let entries = config
            .entries
            .iter()
            .map(|e| {
                let filter = if !e.device_filter.is_empty() {
                    e.device_filter.clone()
                } else if e.mig_enabled {
                    filter_ids.clone()
                } else {
                    Vec::new()
                };
                MigConfigEntry {
                    devices: match &e.devices {
                        Some(indices) => Devices::Indices(indices.clone()),
                        None => Devices::All,
                    },
                    device_filter: (!filter.is_empty()).then_some(DeviceFilter::Many(filter)),
                    mig_enabled: e.mig_enabled,
                    mig_devices: e.mig_enabled.then(|| e.mig_devices.clone()),
                }
            })
            .collect();
        configs.insert(name.clone(), entries);
    }
    configs.entry(ALL_DISABLED.to_owned()).or_insert_with(|| {
        vec![MigConfigEntry {
            devices: Devices::All,
            device_filter: None,
            mig_enabled: false,
            mig_devices: None,
        }]
    });
    for name in models_by_config.keys() {
        if !configs.contains_key(*name) {
            return Err(internal(format!(
                "a node is labelled with mig config `{name}` that the plan does not define"
            )));
        }
    }
    Ok(MigPartedConfig { version: "v1".to_owned(), mig_configs: configs })
}

/// The mig-parted ConfigMap for the GPU Operator's MIG manager.
pub fn mig_parted_configmap(spec: &Spec, catalog: &Catalog, plan: &Plan) -> Result<String, Diagnostic> {
    let config = to_yaml(&mig_parted_config(catalog, plan)?)?;
    configmap(spec, MIG_PARTED_CONFIGMAP, BTreeMap::from([("config.yaml".to_owned(), config)]))
}

/// The device-plugin configs, by ConfigMap key, including `default` for unlabelled nodes.
pub fn device_plugin_configs(
    spec: &Spec,
    plan: &Plan,
) -> Result<BTreeMap<String, DevicePluginConfig>, Diagnostic> {
    let flags =
        || DevicePluginFlags { mig_strategy: Some(mig_strategy(spec).to_owned()), other: BTreeMap::new() };
    let mut out = BTreeMap::new();
    for (name, config) in &plan.device_plugin_configs {
        // One sharing mode per config: MPS for MPS nodes (its `failRequestsGreaterThanOne` is
        // always true, the device plugin's default for MPS: a replica asking for two shares
        // gets no more memory or threads), time-slicing otherwise.
        let strategy = |shared: &BTreeMap<String, u32>, fail: bool| SharingStrategy {
            rename_by_default: Some(spec.cluster.time_slicing.rename_by_default),
            fail_requests_greater_than_one: Some(fail),
            resources: shared
                .iter()
                .map(|(resource, &replicas)| SharedResource {
                    name: resource.clone(),
                    replicas,
                    devices: None,
                    rename: None,
                })
                .collect(),
        };
        let sharing = if !config.mps.is_empty() {
            Some(Sharing { time_slicing: None, mps: Some(strategy(&config.mps, true)) })
        } else {
            (!config.time_slicing.is_empty()).then(|| Sharing {
                time_slicing: Some(strategy(
                    &config.time_slicing,
                    spec.cluster.time_slicing.fail_requests_greater_than_one,
                )),
                mps: None,
            })
        };
        out.insert(
            name.clone(),
            DevicePluginConfig {
                version: "v1".to_owned(),
                flags: Some(flags()),
                sharing,
                other: BTreeMap::new(),
            },
        );
    }
    out.entry(DEFAULT_DEVICE_PLUGIN_CONFIG.to_owned()).or_insert_with(|| DevicePluginConfig {
        version: "v1".to_owned(),
        flags: Some(flags()),
        sharing: None,
        other: BTreeMap::new(),
    });
    for pool in &plan.pools {
        for node in &pool.nodes {
            if !out.contains_key(&node.device_plugin_config) {
                return Err(internal(format!(
                    "node `{}` is labelled with device-plugin config `{}` that the plan does not define",
                    node.name, node.device_plugin_config
                )));
            }
        }
    }
    Ok(out)
}

/// The device-plugin ConfigMap: one key per distinct node sharing config.
pub fn device_plugin_configmap(spec: &Spec, plan: &Plan) -> Result<String, Diagnostic> {
    let mut data = BTreeMap::new();
    for (name, config) in device_plugin_configs(spec, plan)? {
        data.insert(name, to_yaml(&config)?);
    }
    configmap(spec, DEVICE_PLUGIN_CONFIGMAP, data)
}

fn configmap(spec: &Spec, name: &str, data: BTreeMap<String, String>) -> Result<String, Diagnostic> {
    let cm = ConfigMap {
        api_version: "v1",
        kind: "ConfigMap",
        metadata: Metadata {
            name: name.to_owned(),
            namespace: Some(spec.cluster.operator_namespace.clone()),
            labels: managed_labels(spec),
            annotations: BTreeMap::from([(SYNC_WAVE.to_owned(), "-1".to_owned())]),
        },
        data,
    };
    to_yaml(&cm)
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct OperatorSettings {
    mig: MigSettings,
    mig_manager: ComponentSettings,
    device_plugin: ComponentSettings,
}

#[derive(Debug, Serialize)]
struct MigSettings {
    strategy: &'static str,
}

#[derive(Debug, Serialize)]
struct ComponentSettings {
    config: ConfigRef,
}

#[derive(Debug, Serialize)]
struct ConfigRef {
    /// Helm only: `false`, the bundle carries the ConfigMap.
    #[serde(skip_serializing_if = "Option::is_none")]
    create: Option<bool>,
    name: &'static str,
    default: &'static str,
}

fn operator_settings(spec: &Spec, helm: bool) -> OperatorSettings {
    let create = helm.then_some(false);
    OperatorSettings {
        mig: MigSettings { strategy: mig_strategy(spec) },
        mig_manager: ComponentSettings {
            config: ConfigRef { create, name: MIG_PARTED_CONFIGMAP, default: ALL_DISABLED },
        },
        device_plugin: ComponentSettings {
            config: ConfigRef {
                create,
                name: DEVICE_PLUGIN_CONFIGMAP,
                default: DEFAULT_DEVICE_PLUGIN_CONFIG,
            },
        },
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterPolicyPatch {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: OperatorSettings,
}

/// A merge patch for the operator's `ClusterPolicy` that selects both ConfigMaps.
pub fn cluster_policy_patch(spec: &Spec) -> Result<String, Diagnostic> {
    let patch = ClusterPolicyPatch {
        api_version: "nvidia.com/v1",
        kind: "ClusterPolicy",
        metadata: Metadata { name: "cluster-policy".to_owned(), ..Metadata::default() },
        spec: operator_settings(spec, false),
    };
    Ok(format!(
        "# Merge patch for the GPU Operator's ClusterPolicy, generated by gpuplan; apply with\n\
         # kubectl patch clusterpolicies.nvidia.com/cluster-policy --type merge --patch-file {}\n{}",
        super::paths::CLUSTER_POLICY,
        to_yaml(&patch)?
    ))
}

/// Helm values for the `gpu-operator` chart that select both ConfigMaps.
pub fn helm_values(spec: &Spec) -> Result<String, Diagnostic> {
    Ok(format!(
        "# Values for the gpu-operator Helm chart, generated by gpuplan; the bundle carries both ConfigMaps.\n{}",
        to_yaml(&operator_settings(spec, true))?
    ))
}

/// The JSON schema of mig-parted config files, derived from NVIDIA's documented format.
pub const MIG_PARTED_SCHEMA: &str = include_str!("../../schemas/nvidia/mig-parted.schema.json");
/// The JSON schema of device-plugin config files, derived from NVIDIA's documented format.
pub const DEVICE_PLUGIN_SCHEMA: &str = include_str!("../../schemas/nvidia/device-plugin.schema.json");

/// Validates a document against one of the schemas above; returns one line per problem.
pub fn schema_errors(schema: &str, document: &serde_json::Value) -> Vec<String> {
    let schema: serde_json::Value = match serde_json::from_str(schema) {
        Ok(s) => s,
        Err(e) => return vec![format!("the schema is not JSON: {e}")],
    };
    match jsonschema::validator_for(&schema) {
        Ok(validator) => {
            validator.iter_errors(document).map(|e| format!("at `{}`: {e}", e.instance_path())).collect()
        }
        Err(e) => vec![format!("the schema does not compile: {e}")],
    }
}

/// The name under which the device plugin advertises `base` on a node whose sharing config is
/// `config`: `<base>.shared` when the resource is time-sliced and renamed, else `base`.
pub(crate) fn advertised(
    spec: &Spec,
    config: Option<&crate::plan::DevicePluginConfig>,
    base: &str,
) -> (String, u32) {
    match config.and_then(|c| c.shared().get(base)) {
        Some(&k) if spec.cluster.time_slicing.rename_by_default => (format!("{base}.shared"), k),
        Some(&k) => (base.to_owned(), k),
        None => (base.to_owned(), 1),
    }
}

/// The extended resources a planned node advertises once its labels are applied, as the
/// device plugin computes them (mixed strategy): a MIG-disabled GPU (used or not) is one
/// `nvidia.com/gpu`, a MIG instance one `nvidia.com/mig-<profile>`; a time-sliced resource
/// counts `replicas` per device and is renamed `<name>.shared` under `renameByDefault`.
pub fn node_capacity(spec: &Spec, plan: &Plan, node: &crate::plan::NodePlan) -> BTreeMap<String, u32> {
    let config = plan.device_plugin_configs.get(&node.device_plugin_config);
    let mut out: BTreeMap<String, u32> = BTreeMap::new();
    for gpu in &node.gpus {
        match &gpu.mode {
            crate::plan::GpuMode::Mig { instances } => {
                for i in instances {
                    let (name, k) = advertised(spec, config, &mig_resource(&i.profile));
                    *out.entry(name).or_default() += k;
                }
            }
            _ => {
                let (name, k) = advertised(spec, config, GPU_RESOURCE);
                *out.entry(name).or_default() += k;
            }
        }
    }
    out
}

/// What the plan runs on a node: (model, resource) → replicas, with each replica's units of
/// the resource (whole GPUs of a multi-GPU model; else 1).
pub fn node_usage(
    spec: &Spec,
    plan: &Plan,
    node: &crate::plan::NodePlan,
) -> BTreeMap<(String, String), (u32, u32)> {
    let config = plan.device_plugin_configs.get(&node.device_plugin_config);
    let mut units: BTreeMap<(String, String), u32> = BTreeMap::new();
    for gpu in &node.gpus {
        for t in &gpu.tenants {
            let base = match &gpu.mode {
                crate::plan::GpuMode::Mig { instances } => {
                    match instances.iter().find(|i| Some(i.start) == t.instance_start) {
                        Some(i) => mig_resource(&i.profile),
                        None => continue,
                    }
                }
                crate::plan::GpuMode::Unused => continue,
                _ => GPU_RESOURCE.to_owned(),
            };
            let (name, _) = advertised(spec, config, &base);
            *units.entry((t.model.clone(), name)).or_default() += 1;
        }
    }
    units
        .into_iter()
        .map(|((model, resource), n)| {
            let per = if resource == GPU_RESOURCE {
                spec.model(&model).and_then(|m| m.gpus).unwrap_or(1).max(1)
            } else {
                1
            };
            ((model, resource), (n / per, per))
        })
        .collect()
}

/// `nvidia.com/gpu`: a whole GPU.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// `3g.40gb` → `nvidia.com/mig-3g.40gb`; `1g.10gb+me` → `nvidia.com/mig-1g.10gb.me`.
pub fn mig_resource(profile: &str) -> String {
    format!("nvidia.com/mig-{}", profile.replace('+', "."))
}
