//! The DRA backend (`backend: dra`, docs/dra.md): every planned device of a pool on Kubernetes
//! Dynamic Resource Allocation, the claims that pin pods to them, and the driver's settings.
//!
//! In: the plan (every GPU of a `dra` pool carries its `uuid`), the spec and the catalog. Out:
//! - [`devices`]: each planned device — a whole GPU, or a MIG instance by parent UUID, profile
//!   and placement — with the models it serves, and whether its tenants share it;
//! - [`units`]: the Deployments of a model on `dra` pools, one per pinned replica (exclusive
//!   devices) or one per model and shared device, in place of the device plugin's per-node ones;
//! - [`attach`]: the claims put on the Deployments the templates rendered (`resourceClaims`,
//!   `resources.claims`, the GPU extended resource removed, no surge), each model's
//!   ResourceClaimTemplates, and one shared ResourceClaim per shared device
//!   (`workloads/dra/resource-claims.yaml`, with the driver's `GpuConfig` / `MigDeviceConfig`);
//! - [`driver_values`]: Helm values for NVIDIA's `dra-driver-nvidia-gpu` chart, restricted to the
//!   nodes gpuplan labels [`node_labels`] (which also turn the operator's device plugin off there);
//! - [`resource_slices`]: the ResourceSlices the driver is expected to publish once every node
//!   carries its planned layout, in the driver's attribute shapes (for review and `simulate`);
//! - [`plan_md`]: the `PLAN.md` section (feature gates, kubelet-plugin restarts).
//!
//! Guarantees: every selector is a conjunction of attribute equalities and one capacity-key
//! membership test (`'memorySlice4' in device.capacity['gpu.nvidia.com']`), so any CEL
//! implementation evaluates it; no selector reads an attribute the driver does not publish for
//! that device type (a missing attribute aborts allocation). Object names carry the device's
//! identity (node, GPU index, profile, placement): claim specs are immutable, so a new pin is a
//! new object, never an update.
//!
//! Shared devices are time-sliced (`TimeSlicing`) or shared by MPS (`MPS`, [`MpsShare`]: the
//! planner's whole-GPU MPS clients, or a rate model's `k` measured MPS processes on one device,
//! `ReplicaGroup::processes`), one claim per device either way.
//!
//! Not covered (docs/dra.md): ConsumableShares, DynamicMIG (placements are not visible to CEL
//! there), MPS shared by several models inside a MIG instance, autoscaled pools (refused by the
//! spec stage).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::names::{resource_slug, unit_name};
use super::nvidia::{GPU_RESOURCE, advertised, managed_labels, mig_resource};
use super::workloads::Unit;
use super::{internal, join_documents, to_yaml};
use crate::catalog::Catalog;
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::plan::{GpuMode, ModelPlan, NodePlan, Plan, rules};
use crate::spec::Spec;

/// The driver's name, its attribute domain and the `driver` of its opaque parameters.
pub const DRIVER: &str = "gpu.nvidia.com";
/// The driver's DeviceClass of whole GPUs (Helm `templates/deviceclass-gpu.yaml`).
pub const GPU_CLASS: &str = "gpu.nvidia.com";
/// The driver's DeviceClass of MIG devices (Helm `templates/deviceclass-mig.yaml`).
pub const MIG_CLASS: &str = "mig.nvidia.com";
/// The API group and version of the driver's opaque configs.
pub const CONFIG_API_VERSION: &str = "resource.nvidia.com/v1beta1";
/// Label gpuplan puts on DRA nodes; the driver's kubelet plugin is scheduled by it.
pub const BACKEND_LABEL: &str = "gpuplan.io/backend";
/// The GPU Operator's operand label that keeps its device plugin off a node.
pub const DEPLOY_DEVICE_PLUGIN_LABEL: &str = "nvidia.com/gpu.deploy.device-plugin";
/// The label of the driver's kubelet-plugin pods (Helm `_helpers.tpl`, `selectorLabels`).
pub const KUBELET_PLUGIN_SELECTOR: &str = "dra-driver-nvidia-gpu-component=kubelet-plugin";
/// The shared claims of every model, in the workloads folder.
pub const SHARED_CLAIMS: &str = "workloads/dra/resource-claims.yaml";
/// Helm values for the DRA driver's chart (not an object: not in any kustomization).
pub const DRIVER_VALUES: &str = "dra/driver-values.yaml";
/// The ResourceSlices the driver should publish (for review and `simulate`; never applied).
pub const EXPECTED_SLICES: &str = "dra/resource-slices.json";
/// The driver's feature gate for `sharing.strategy: TimeSlicing` (alpha, off by default).
pub const TIME_SLICING_GATE: &str = "TimeSlicingSettings";
/// The driver's feature gate for `sharing.strategy: MPS` (alpha, off by default).
pub const MPS_GATE: &str = "MPSSupport";

/// How the clients of a device shared by MPS are limited, as the claim's `mpsConfig` sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpsShare {
    /// Client processes (pods) on the device.
    pub clients: u32,
    /// `defaultPinnedDeviceMemoryLimit` of each client, in MiB ([`rules::mps_pinned_mib`]).
    pub pinned_mib: u64,
    /// `defaultActiveThreadPercentage` of each client, when gpuplan caps it
    /// ([`rules::mps_thread_percentage`]).
    pub thread_percentage: Option<u32>,
}

/// A MIG instance as the driver publishes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigDevice {
    pub profile: String,
    /// NVML GPU-instance profile id (part of the driver's device name).
    pub profile_id: u32,
    pub start: u8,
    pub size: u8,
    pub memory_mib: u64,
    pub sms: u32,
}

/// One device of a `dra` pool: a whole GPU, or one MIG instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub pool: String,
    pub node: String,
    /// The GPU's index on the node.
    pub gpu: u32,
    /// The GPU's UUID (the parent's, for a MIG instance).
    pub uuid: String,
    /// The GPU's product name, as NVML (and the driver's `productName`) reports it.
    pub product: String,
    pub memory_mib: u64,
    pub mig: Option<MigDevice>,
    /// The models the plan puts on this device, one entry per replica (sorted).
    pub tenants: Vec<String>,
    /// Shared (time-sliced, or by MPS): its tenants share it through one ResourceClaim.
    pub shared: bool,
    /// Shared by MPS (`sharing.strategy: MPS`), with its clients' limits; `None`: time-sliced
    /// when shared.
    pub mps: Option<MpsShare>,
    /// The extended resource the device plugin would advertise for it (`nvidia.com/gpu.shared`,
    /// `nvidia.com/mig-3g.40gb`): kept as the Deployment's `gpuplan.io/resource` annotation.
    pub resource: String,
}

impl Device {
    /// The driver's device name (`gpu-<minor>`, `gpu-<minor>-mig-<profile>-<id>-<start>`), the
    /// minor taken to be the index. CEL cannot read it; it only names the expected slices.
    pub fn driver_name(&self) -> String {
        match &self.mig {
            None => format!("gpu-{}", self.gpu),
            Some(m) => {
                let profile: String = m
                    .profile
                    .chars()
                    .filter(|c| *c != '.')
                    .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
                    .collect();
                format!("gpu-{}-mig-{profile}-{}-{}", self.gpu, m.profile_id, m.start)
            }
        }
    }

    /// The DeviceClass a request for this device names.
    pub fn class(&self) -> &'static str {
        if self.mig.is_some() { MIG_CLASS } else { GPU_CLASS }
    }

    /// The CEL selector that matches this device and no other: the UUID of a whole GPU; the
    /// parent UUID, profile and first memory slice of a MIG instance.
    pub fn selector(&self) -> String {
        let attr = |name: &str, value: &str| format!("device.attributes['{DRIVER}'].{name} == '{value}'");
        match &self.mig {
            None => attr("uuid", &self.uuid),
            Some(m) => format!(
                "{} && {} && 'memorySlice{}' in device.capacity['{DRIVER}']",
                attr("parentUUID", &self.uuid),
                attr("profile", &m.profile),
                m.start
            ),
        }
    }

    /// A name part for the device: `g<index>`, or `g<index>-<profile>-s<start>`.
    fn slug(&self) -> String {
        match &self.mig {
            None => format!("g{}", self.gpu),
            Some(m) => format!("g{}-{}-s{}", self.gpu, resource_slug(&m.profile), m.start),
        }
    }
}

/// Every device of every `dra` pool, by pool, node, GPU and placement.
/// Without a catalog, MIG profile ids, sizes and memory are left 0 (enough for names and counts).
pub fn devices(spec: &Spec, catalog: Option<&Catalog>, plan: &Plan) -> Vec<Device> {
    let mut out = Vec::new();
    for pool in &plan.pools {
        if spec.pool(&pool.name).is_none_or(|p| p.dra.is_none()) {
            continue;
        }
        let gpu = catalog.and_then(|c| c.get(&pool.gpu));
        let product = gpu.map_or_else(|| pool.gpu.clone(), |g| g.name.clone());
        for node in &pool.nodes {
            let shared_profiles = time_sliced_resources(plan, node);
            let config = plan.device_plugin_configs.get(&node.device_plugin_config);
            let resource = |base: &str| advertised(spec, config, base).0;
            for g in &node.gpus {
                let Some(uuid) = &g.uuid else { continue };
                let base = Device {
                    pool: pool.name.clone(),
                    node: node.name.clone(),
                    gpu: g.index,
                    uuid: uuid.clone(),
                    product: product.clone(),
                    memory_mib: gpu.map_or(0, |g| g.memory_mib),
                    mig: None,
                    tenants: Vec::new(),
                    shared: false,
                    mps: None,
                    resource: resource(GPU_RESOURCE),
                };
                let GpuMode::Mig { instances } = &g.mode else {
                    let tenants: Vec<String> = g.tenants.iter().map(|t| t.model.clone()).collect();
                    let shared = matches!(g.mode, GpuMode::TimeSliced { .. });
                    let mps = match g.mode {
                        GpuMode::Mps { replicas } => Some(MpsShare {
                            clients: replicas,
                            pinned_mib: rules::mps_pinned_mib(base.memory_mib, replicas),
                            thread_percentage: rules::mps_thread_percentage(replicas, false),
                        }),
                        _ => None,
                    };
                    let d = Device { tenants, shared: shared || mps.is_some(), mps, ..base };
                    out.push(with_processes(plan, d, GPU_RESOURCE));
                    continue;
                };
                for i in instances {
                    let profile = gpu.and_then(|g| g.profile(&i.profile));
                    let tenants: Vec<String> = g
                        .tenants
                        .iter()
                        .filter(|t| t.instance_start == Some(i.start))
                        .map(|t| t.model.clone())
                        .collect();
                    let d = Device {
                        memory_mib: profile.map_or(0, |p| p.memory_mib),
                        mig: Some(MigDevice {
                            profile: i.profile.clone(),
                            profile_id: profile.map_or(0, |p| p.id),
                            start: i.start,
                            size: profile.map_or(1, |p| p.size),
                            memory_mib: profile.map_or(0, |p| p.memory_mib),
                            sms: profile.map_or(0, |p| p.sms),
                        }),
                        tenants,
                        shared: shared_profiles.contains(&mig_resource(&i.profile)),
                        resource: resource(&mig_resource(&i.profile)),
                        ..base.clone()
                    };
                    out.push(with_processes(plan, d, &mig_resource(&i.profile)));
                }
            }
        }
    }
    out
}

/// A device with its tenants sorted; a lone tenant whose replica group runs `k > 1` MPS
/// processes per device (measured-point MPS, [`rules::measured_mps`]) becomes `k` tenants, one
/// per pod, sharing the device through one claim with MPS (memory pinned per client, no
/// thread cap: the point's throughput was measured without one). `base` is the device's
/// resource as the planner names it (`nvidia.com/gpu`, `nvidia.com/mig-3g.40gb`).
fn with_processes(plan: &Plan, mut d: Device, base: &str) -> Device {
    d.tenants.sort();
    let [model] = d.tenants.as_slice() else { return d };
    let k = plan
        .models
        .iter()
        .filter(|m| m.name == *model)
        .flat_map(|m| &m.groups)
        .find(|g| g.pool == d.pool && g.resource == base && g.per_replica == 1)
        .map_or(1, |g| g.processes);
    if k > 1 && !d.shared {
        let mib = d.mig.as_ref().map_or(d.memory_mib, |m| m.memory_mib);
        d.tenants = vec![model.clone(); k as usize];
        d.shared = true;
        d.mps = Some(MpsShare {
            clients: k,
            pinned_mib: rules::mps_pinned_mib(mib, k),
            thread_percentage: rules::mps_thread_percentage(k, true),
        });
    }
    d
}

/// The MIG resources the node's device-plugin config time-slices (`nvidia.com/mig-1g.10gb`).
fn time_sliced_resources(plan: &Plan, node: &NodePlan) -> Vec<String> {
    plan.device_plugin_configs
        .get(&node.device_plugin_config)
        .map(|c| c.time_slicing.iter().filter(|(_, k)| **k > 1).map(|(r, _)| r.clone()).collect())
        .unwrap_or_default()
}

/// How one Deployment's pods get their devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Each pod gets its own claim from the ResourceClaimTemplate named like the Deployment,
    /// with one request per device (a multi-GPU replica has several).
    Template { devices: Vec<Device> },
    /// Every pod references the one ResourceClaim of the shared device.
    Shared { claim: String, device: Box<Device> },
}

/// A Deployment on a `dra` pool and its claim.
#[derive(Clone, Debug)]
pub struct DraUnit {
    pub unit: Unit,
    pub claim: Claim,
}

/// The name of the shared ResourceClaim of a device: `<plan>-<node>-<device>`.
pub fn shared_claim_name(spec: &Spec, device: &Device) -> String {
    unit_name(&[&spec.name, &device.node, &device.slug()])
}

/// The Deployments of `model` on `dra` pools: one per exclusive replica, pinned to its device(s);
/// one per shared device the model uses, with as many replicas as it has there.
pub fn units(spec: &Spec, catalog: Option<&Catalog>, plan: &Plan, model: &ModelPlan) -> Vec<DraUnit> {
    let per_replica = spec.model(&model.name).and_then(|m| m.gpus).unwrap_or(1).max(1) as usize;
    let mut out = Vec::new();
    let all = devices(spec, catalog, plan);
    let mut exclusive: BTreeMap<(String, String), Vec<Device>> = BTreeMap::new();
    for d in all.iter().filter(|d| d.tenants.contains(&model.name)) {
        if d.shared {
            let replicas = d.tenants.iter().filter(|t| **t == model.name).count() as u32;
            let unit = dra_unit(&d.pool, &d.node, &[&model.name, &d.node, &d.slug()], d, replicas, 1);
            out.push(DraUnit {
                unit,
                claim: Claim::Shared { claim: shared_claim_name(spec, d), device: Box::new(d.clone()) },
            });
        } else {
            exclusive.entry((d.pool.clone(), d.node.clone())).or_default().push(d.clone());
        }
    }
    for ((pool, node), devs) in exclusive {
        // Whole GPUs of a multi-GPU replica: consecutive planned GPUs of the node, by index.
        let chunk = if devs.iter().all(|d| d.mig.is_none()) { per_replica } else { 1 };
        for group in devs.chunks(chunk) {
            let first = &group[0];
            let unit =
                dra_unit(&pool, &node, &[&model.name, &node, &first.slug()], first, 1, group.len() as u32);
            out.push(DraUnit { unit, claim: Claim::Template { devices: group.to_vec() } });
        }
    }
    out.sort_by(|a, b| (&a.unit.nodes, &a.unit.name).cmp(&(&b.unit.nodes, &b.unit.name)));
    out
}

fn dra_unit(pool: &str, node: &str, parts: &[&str], d: &Device, replicas: u32, per_replica: u32) -> Unit {
    Unit {
        name: unit_name(parts),
        pool: pool.to_owned(),
        autoscaled: false,
        nodes: vec![node.to_owned()],
        layout: None,
        resource: d.resource.clone(),
        per_replica,
        replicas,
        // A pinned device has no spare twin: a surge pod would wait for the device forever.
        spare: 0,
        must_drain: false,
    }
}

/// Replaces the device-plugin Deployments of `model` on `dra` pools by the DRA ones (the
/// hook of [`super::workloads::units`]). Keeps `must_drain` from the node's unit.
pub fn replace_units(spec: &Spec, plan: &Plan, model: &ModelPlan, units: Vec<Unit>) -> Vec<Unit> {
    let dra_pool = |pool: &str| spec.pool(pool).is_some_and(|p| p.dra.is_some());
    if !units.iter().any(|u| dra_pool(&u.pool)) {
        return units;
    }
    let drain: BTreeMap<&str, bool> = plan.nodes().map(|n| (n.name.as_str(), n.must_drain)).collect();
    let mut out: Vec<Unit> = units.iter().filter(|u| !dra_pool(&u.pool)).cloned().collect();
    for d in self::units(spec, None, plan, model) {
        let mut unit = d.unit;
        unit.must_drain = unit.nodes.iter().any(|n| drain.get(n.as_str()).copied().unwrap_or(false));
        out.push(unit);
    }
    out
}

/// The labels gpuplan adds to a node of a `dra` pool (its GPUs have UUIDs): the backend, for the
/// driver's kubelet plugin to select, and the GPU Operator's operand label that keeps its
/// device plugin off the node (a node's GPUs are served by one of the two, never both).
pub fn node_labels(node: &NodePlan) -> BTreeMap<String, String> {
    if node.gpus.iter().all(|g| g.uuid.is_none()) {
        return BTreeMap::new();
    }
    BTreeMap::from([
        (BACKEND_LABEL.to_owned(), "dra".to_owned()),
        (DEPLOY_DEVICE_PLUGIN_LABEL.to_owned(), "false".to_owned()),
    ])
}

/// Whether the plan has any device on the DRA backend.
pub fn used(plan: &Plan) -> bool {
    plan.nodes().flat_map(|n| &n.gpus).any(|g| g.uuid.is_some())
}

/// One request of a claim: `gpu`/`mig`, numbered when a claim has several.
fn request(name: &str, d: &Device) -> Value {
    json!({
        "name": name,
        "exactly": {
            "deviceClassName": d.class(),
            "allocationMode": "ExactCount",
            "count": 1,
            "selectors": [{"cel": {"expression": d.selector()}}],
        },
    })
}

fn request_names(devices: &[Device]) -> Vec<String> {
    let base = |d: &Device| if d.mig.is_some() { "mig" } else { "gpu" };
    if devices.len() == 1 {
        vec![base(&devices[0]).to_owned()]
    } else {
        devices.iter().enumerate().map(|(i, d)| format!("{}-{i}", base(d))).collect()
    }
}

/// The opaque sharing config of a shared device: MPS (driver gate `MPSSupport`) with its
/// clients' limits, or time-slicing (gate `TimeSlicingSettings`).
fn sharing_config(d: &Device, request: &str) -> Value {
    let kind = if d.mig.is_some() { "MigDeviceConfig" } else { "GpuConfig" };
    let parameters = match (&d.mig, d.mps) {
        (_, Some(mps)) => {
            let mut config = json!({"defaultPinnedDeviceMemoryLimit": format!("{}Mi", mps.pinned_mib)});
            if let Some(pct) = mps.thread_percentage {
                config["defaultActiveThreadPercentage"] = json!(pct);
            }
            json!({
                "apiVersion": CONFIG_API_VERSION,
                "kind": kind,
                "sharing": {"strategy": "MPS", "mpsConfig": config},
            })
        }
        (None, None) => json!({
            "apiVersion": CONFIG_API_VERSION,
            "kind": "GpuConfig",
            "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}},
        }),
        (Some(_), None) => json!({
            "apiVersion": CONFIG_API_VERSION,
            "kind": kind,
            "sharing": {"strategy": "TimeSlicing"},
        }),
    };
    json!({"requests": [request], "opaque": {"driver": DRIVER, "parameters": parameters}})
}

/// The `spec.devices` of a claim for these devices (shared: with the sharing config).
fn claim_devices(devices: &[Device], shared: bool) -> Value {
    let names = request_names(devices);
    let requests: Vec<Value> = names.iter().zip(devices).map(|(n, d)| request(n, d)).collect();
    let mut out = json!({"requests": requests});
    if shared {
        out["config"] = json!([sharing_config(&devices[0], &names[0])]);
    }
    out
}

fn metadata(spec: &Spec, name: &str, annotations: BTreeMap<String, String>) -> Value {
    let mut m = json!({"name": name, "namespace": spec.cluster.namespace, "labels": managed_labels(spec)});
    if !annotations.is_empty() {
        m["annotations"] = json!(annotations);
    }
    m
}

fn pin_annotations(devices: &[Device]) -> BTreeMap<String, String> {
    let node = devices.first().map(|d| d.node.clone()).unwrap_or_default();
    let pins: Vec<String> = devices
        .iter()
        .map(|d| match &d.mig {
            None => format!("{} gpu {} ({})", d.node, d.gpu, d.uuid),
            Some(m) => format!("{} gpu {} ({}) {} at slice {}", d.node, d.gpu, d.uuid, m.profile, m.start),
        })
        .collect();
    BTreeMap::from([("gpuplan.io/node".to_owned(), node), ("gpuplan.io/devices".to_owned(), pins.join("; "))])
}

/// A model's ResourceClaimTemplate for one pinned Deployment (one claim per pod).
fn claim_template(spec: &Spec, name: &str, devices: &[Device]) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": metadata(spec, name, pin_annotations(devices)),
        "spec": {
            "metadata": {"labels": managed_labels(spec)},
            "spec": {"devices": claim_devices(devices, false)},
        },
    })
}

/// The ResourceClaim every pod on a shared device references.
fn shared_claim(spec: &Spec, name: &str, device: &Device) -> Value {
    let devices = std::slice::from_ref(device);
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": metadata(spec, name, pin_annotations(devices)),
        "spec": {"devices": claim_devices(devices, true)},
    })
}

/// Puts the claims on the rendered Deployments of `dra` pools and adds the claim objects: each
/// model's ResourceClaimTemplates at the head of its file, the shared ResourceClaims in
/// [`SHARED_CLAIMS`]. A (user) template whose Deployment lacks a container is an error.
pub fn attach(
    spec: &Spec,
    catalog: &Catalog,
    plan: &Plan,
    files: &mut BTreeMap<String, String>,
) -> Result<(), Diagnostics> {
    let mut diags = Diagnostics::new();
    let mut shared: BTreeMap<String, Device> = BTreeMap::new();
    for model in &plan.models {
        let units = units(spec, Some(catalog), plan, model);
        if units.is_empty() {
            continue;
        }
        let path = format!("workloads/{}.yaml", model.name);
        let Some(text) = files.get(&path) else {
            diags.push(internal(format!("model `{}` has DRA Deployments but no file", model.name)));
            continue;
        };
        match patch_file(spec, text, &units) {
            Ok(patched) => {
                files.insert(path, patched);
            }
            Err(d) => diags.push(d),
        }
        for u in units {
            if let Claim::Shared { claim, device } = u.claim {
                shared.insert(claim, *device);
            }
        }
    }
    if !shared.is_empty() {
        let docs: Result<Vec<String>, Diagnostic> =
            shared.iter().map(|(name, d)| to_yaml(&shared_claim(spec, name, d))).collect();
        match docs {
            Ok(docs) => {
                files.insert(SHARED_CLAIMS.to_owned(), join_documents(&docs));
            }
            Err(d) => diags.push(d),
        }
    }
    if diags.is_empty() { Ok(()) } else { Err(diags) }
}

/// One model's file with its DRA Deployments patched and their templates put first.
fn patch_file(spec: &Spec, text: &str, units: &[DraUnit]) -> Result<String, Diagnostic> {
    let by_name: BTreeMap<&str, &DraUnit> = units.iter().map(|u| (u.unit.name.as_str(), u)).collect();
    let mut templates = Vec::new();
    for u in units {
        if let Claim::Template { devices } = &u.claim {
            templates.push(to_yaml(&claim_template(spec, &u.unit.name, devices))?);
        }
    }
    let mut docs = templates;
    for doc in split_documents(text) {
        let value: Value =
            serde_saphyr::from_str(&doc).map_err(|e| internal(format!("rendered YAML: {e}")))?;
        let name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        match by_name.get(name) {
            Some(u) if value["kind"] == "Deployment" => {
                docs.push(to_yaml(&patch_deployment(value.clone(), u)?)?)
            }
            _ => docs.push(doc),
        }
    }
    Ok(join_documents(&docs))
}

/// The documents of a multi-document YAML file, split at `---` lines (rendered values never
/// span lines, so such a line is always a separator).
fn split_documents(text: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    for line in text.split_inclusive('\n') {
        if line.trim_end() == "---" {
            out.push(String::new());
        } else if let Some(last) = out.last_mut() {
            last.push_str(line);
        }
    }
    out.retain(|d| !d.trim().is_empty());
    out
}

/// A Deployment the template rendered, with its pods' claims: `resourceClaims` (a template or
/// the shared claim), every container's `resources.claims`, the extended resource removed from
/// the limits, and no surge (a surge pod would find its pinned device taken).
fn patch_deployment(mut doc: Value, u: &DraUnit) -> Result<Value, Diagnostic> {
    let claim_ref = match &u.claim {
        Claim::Template { .. } => json!({"name": "gpu", "resourceClaimTemplateName": u.unit.name}),
        Claim::Shared { claim, .. } => json!({"name": "gpu", "resourceClaimName": claim}),
    };
    let pod = doc
        .pointer_mut("/spec/template/spec")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| template_problem(&u.unit.name, "no `spec.template.spec`"))?;
    pod.insert("resourceClaims".to_owned(), json!([claim_ref]));
    let containers = pod
        .get_mut("containers")
        .and_then(Value::as_array_mut)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| template_problem(&u.unit.name, "no container"))?;
    for c in containers.iter_mut() {
        let resources = c
            .as_object_mut()
            .ok_or_else(|| template_problem(&u.unit.name, "a container is not a mapping"))?
            .entry("resources")
            .or_insert_with(|| json!({}));
        if let Some(limits) = resources.get_mut("limits").and_then(Value::as_object_mut) {
            limits.remove(&u.unit.resource);
            if limits.is_empty() {
                resources.as_object_mut().map(|r| r.remove("limits"));
            }
        }
        resources["claims"] = json!([{"name": "gpu"}]);
    }
    doc["spec"]["strategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}});
    if let Some(a) = doc.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) {
        a.insert("gpuplan.io/backend".to_owned(), json!("dra"));
    }
    Ok(doc)
}

fn template_problem(name: &str, what: &str) -> Diagnostic {
    Diagnostic::error(
        crate::diagnostics::codes::INVALID_RENDERED_YAML,
        format!("the Deployment `{name}` (backend `dra`) has {what}: its claims cannot be attached"),
    )
    .with_help("keep `spec.template.spec.containers` in the Deployment template")
}

/// The driver's feature gates the claims on these devices need: `TimeSlicingSettings` for a
/// time-sliced device, `MPSSupport` for one shared by MPS (both alpha, off by default; the
/// driver's admission webhook refuses a claim whose strategy's gate is off, `validate.go`).
pub fn gates(devices: &[Device]) -> Vec<&'static str> {
    let mut out = Vec::new();
    if devices.iter().any(|d| d.shared && d.mps.is_none() && !d.tenants.is_empty()) {
        out.push(TIME_SLICING_GATE);
    }
    if devices.iter().any(|d| d.mps.is_some() && !d.tenants.is_empty()) {
        out.push(MPS_GATE);
    }
    out
}

/// Helm values for NVIDIA's `dra-driver-nvidia-gpu` chart: GPUs on (the chart refuses them
/// unless told the device plugin is off on those nodes: gpuplan labels them so), compute domains
/// off, the kubelet plugin only on gpuplan's DRA nodes, and the feature gates the claims need.
pub fn driver_values(spec: &Spec, catalog: &Catalog, plan: &Plan) -> Result<String, Diagnostic> {
    let gates: BTreeMap<&str, bool> =
        gates(&devices(spec, Some(catalog), plan)).into_iter().map(|g| (g, true)).collect();
    let values = json!({
        "gpuResourcesEnabledOverride": true,
        "resources": {"gpus": {"enabled": true}, "computeDomains": {"enabled": false}},
        "featureGates": gates,
        "kubeletPlugin": {"nodeSelector": {BACKEND_LABEL: "dra"}},
    });
    let mut out = String::from(
        "# Helm values for NVIDIA's DRA driver (chart dra-driver-nvidia-gpu, v25.12.0 / v0.4 or later),\n\
         # written by gpuplan: docs/dra.md. Install with\n\
         #   helm upgrade --install nvidia-dra-driver-gpu <chart> -n nvidia-dra-driver-gpu --create-namespace -f driver-values.yaml\n",
    );
    out.push_str(&to_yaml(&values)?);
    Ok(out)
}

/// The ResourceSlices the driver publishes for every planned node of a `dra` pool, one per node,
/// in the `resource.k8s.io/v1` shape and the driver's attributes (`cmd/gpu-kubelet-plugin/
/// deviceinfo.go`): for review, and for `gpuplan simulate` to allocate claims against.
pub fn resource_slices(spec: &Spec, catalog: &Catalog, plan: &Plan) -> Result<String, Diagnostic> {
    let mut by_node: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for d in devices(spec, Some(catalog), plan) {
        by_node.entry(d.node.clone()).or_default().push(slice_device(&d));
    }
    let items: Vec<Value> = by_node
        .into_iter()
        .map(|(node, devices)| {
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": format!("{node}-{DRIVER}")},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            })
        })
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    serde_json::to_string_pretty(&list).map(|s| s + "\n").map_err(|e| internal(format!("slices: {e}")))
}

/// One device of a ResourceSlice, with the attributes and capacities the driver publishes.
pub fn slice_device(d: &Device) -> Value {
    let s = |v: &str| json!({"string": v});
    let bytes = |mib: u64| json!({"value": (mib * 1024 * 1024).to_string()});
    match &d.mig {
        None => json!({
            "name": d.driver_name(),
            "attributes": {"type": s("gpu"), "uuid": s(&d.uuid), "productName": s(&d.product)},
            "capacity": {"memory": bytes(d.memory_mib)},
        }),
        Some(m) => {
            let mut capacity =
                json!({"memory": bytes(m.memory_mib), "multiprocessors": {"value": m.sms.to_string()}});
            for slice in m.start..m.start.saturating_add(m.size) {
                capacity[format!("memorySlice{slice}")] = json!({"value": "1"});
            }
            json!({
                "name": d.driver_name(),
                "attributes": {
                    "type": s("mig"),
                    "parentUUID": s(&d.uuid),
                    "profile": s(&m.profile),
                    "productName": s(&d.product),
                },
                "capacity": capacity,
            })
        }
    }
}

/// The `PLAN.md` section of the DRA backend: what runs on it, the feature gates, and the
/// kubelet-plugin restart every re-partitioned DRA node needs.
pub fn plan_md(spec: &Spec, catalog: &Catalog, plan: &Plan) -> String {
    let devices = devices(spec, Some(catalog), plan);
    if devices.is_empty() {
        return String::new();
    }
    let mut md = String::from("## DRA backend\n\n");
    let pools: Vec<String> =
        spec.pools.iter().filter(|p| p.dra.is_some()).map(|p| format!("`{}`", p.name)).collect();
    let _ = writeln!(
        md,
        "Pools {} hand out devices through Kubernetes DRA (`resource.k8s.io/v1`, GA in 1.34) and NVIDIA's\n\
         DRA driver (`{DRIVER}`): each claim selects its planned GPU by UUID, or its MIG instance by parent\n\
         UUID, profile and first memory slice. Driver settings: `{DRIVER_VALUES}`; the devices it should\n\
         publish: `{EXPECTED_SLICES}`. Their nodes carry `{DEPLOY_DEVICE_PLUGIN_LABEL}=false` and\n\
         `{BACKEND_LABEL}=dra`. See docs/dra.md.\n",
        pools.join(", ")
    );
    let used = devices.iter().filter(|d| !d.tenants.is_empty()).count();
    let shared = devices.iter().filter(|d| d.shared && !d.tenants.is_empty()).count();
    let _ = writeln!(
        md,
        "- devices: {} published, {used} claimed, {shared} shared through one claim",
        devices.len()
    );
    md.push_str("- Kubernetes: 1.34 or later (DRA is GA; no Kubernetes feature gate is needed)\n");
    for gate in gates(&devices) {
        let strategy = if gate == MPS_GATE { "MPS" } else { "TimeSlicing" };
        let _ = writeln!(
            md,
            "- driver feature gate `{gate}` (alpha, off by default): the shared claims carry \
             `sharing.strategy: {strategy}`; it is on in `{DRIVER_VALUES}`"
        );
    }
    let mps: Vec<&Device> = devices.iter().filter(|d| d.mps.is_some() && !d.tenants.is_empty()).collect();
    if !mps.is_empty() {
        let _ = writeln!(
            md,
            "- MPS: {} device(s), each client pinned to its share of the device memory:",
            mps.len()
        );
        for d in mps {
            let Some(share) = d.mps else { continue };
            let what = d
                .mig
                .as_ref()
                .map_or_else(|| "whole GPU".to_owned(), |m| format!("`{}` at slice {}", m.profile, m.start));
            let threads = share.thread_percentage.map_or_else(
                || "no thread cap (measured without one)".to_owned(),
                |p| format!("{p}% of the threads"),
            );
            let _ = writeln!(
                md,
                "  - `{}` GPU {} {what}: {} × `{}`, {} MiB pinned and {threads} each",
                d.node, d.gpu, share.clients, d.tenants[0], share.pinned_mib
            );
        }
    }
    let drain: Vec<&NodePlan> = plan
        .pools
        .iter()
        .filter(|p| spec.pool(&p.name).is_some_and(|s| s.dra.is_some()))
        .flat_map(|p| &p.nodes)
        .filter(|n| n.must_drain)
        .collect();
    if !drain.is_empty() {
        md.push_str(
            "\nThe driver discovers static MIG devices only when its kubelet plugin starts: after the MIG\n\
             manager reports `nvidia.com/mig.config.state=success` on a re-partitioned node, restart it\n\
             there before uncordoning:\n\n",
        );
        for n in drain {
            let _ = writeln!(
                md,
                "- `kubectl delete pod -A -l {KUBELET_PLUGIN_SELECTOR} --field-selector spec.nodeName={}`",
                n.name
            );
        }
    }
    md.push('\n');
    md
}
