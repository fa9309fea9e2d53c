//! The cluster and the workloads as a bundle describes them, read from the bundle's files only.
//!
//! Nodes come from `nodes/nodes.json` (named nodes: GPUs, taints, the labels they already carry)
//! with the labels of the auto-synced Node patches applied (`nodes/labels/`; not the held-back
//! `nodes/drain/`: the cluster as it is now), a node in transition carrying the labels of its
//! `carries`, and from the node groups of
//! `nodes/autoscaled/<pool>.yaml` (one node per planned node of the group). Each node's
//! allocatable extended resources are derived as the NVIDIA GPU Operator would: the mig-parted
//! config named by `nvidia.com/mig.config` cuts its GPUs, and the device-plugin config named by
//! `nvidia.com/device-plugin.config` (else the key `default`) names and multiplies them
//! (`migStrategy: mixed`, time-slicing `replicas`, `renameByDefault`). Pods come from the
//! Deployments under `workloads/`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::catalog::migparted::{ALL_DISABLED, DEFAULT_DEVICE_PLUGIN_CONFIG};

/// A node as the scheduler sees it.
#[derive(Clone, Debug)]
pub(super) struct Node {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// Allocatable extended resources.
    pub allocatable: BTreeMap<String, u64>,
}

#[cfg(test)]
impl Node {
    /// A test node with `gpus` `nvidia.com/gpu`, labelled with its hostname, without taints.
    pub(super) fn with_gpus(name: &str, gpus: u64) -> Node {
        Node {
            name: name.to_owned(),
            labels: BTreeMap::from([("kubernetes.io/hostname".to_owned(), name.to_owned())]),
            taints: Vec::new(),
            allocatable: BTreeMap::from([("nvidia.com/gpu".to_owned(), gpus)]),
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

/// A Deployment's pod template, reduced to what the scheduler filters look at.
#[derive(Clone, Debug)]
pub(super) struct Workload {
    pub name: String,
    pub namespace: String,
    pub replicas: u32,
    /// Resolved rolling-update parameters: surge pods, unavailable pods.
    pub max_surge: u32,
    pub max_unavailable: u32,
    pub labels: BTreeMap<String, String>,
    /// Extended resources one pod requests (GPU and other `vendor/name` resources).
    pub requests: BTreeMap<String, u64>,
    pub template: Value,
}

fn docs(text: &str) -> Result<Vec<Value>, String> {
    serde_saphyr::from_multiple::<Value>(text).map_err(|e| e.to_string())
}

fn str_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
                .collect()
        })
        .unwrap_or_default()
}

fn taints(v: &Value) -> Vec<Taint> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|t| Taint {
                    key: t["key"].as_str().unwrap_or_default().to_owned(),
                    value: t["value"].as_str().unwrap_or_default().to_owned(),
                    effect: t["effect"].as_str().unwrap_or_default().to_owned(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The `data` of the ConfigMap in `path`, key → parsed YAML.
fn configmap_data(files: &BTreeMap<String, String>, path: &str) -> Result<BTreeMap<String, Value>, String> {
    let text = files.get(path).ok_or_else(|| format!("the bundle has no `{path}`"))?;
    let doc = docs(text)?.into_iter().next().ok_or_else(|| format!("`{path}` is empty"))?;
    let mut out = BTreeMap::new();
    for (k, v) in doc["data"].as_object().into_iter().flatten() {
        let text = v.as_str().unwrap_or_default();
        let parsed: Value = serde_saphyr::from_str(text).map_err(|e| format!("`{path}` key `{k}`: {e}"))?;
        out.insert(k.clone(), parsed);
    }
    Ok(out)
}

/// A MIG profile's resource name under the mixed strategy: `1g.10gb+me` → `nvidia.com/mig-1g.10gb.me`.
fn mig_resource(profile: &str) -> String {
    format!("nvidia.com/mig-{}", profile.replace('+', "."))
}

/// Allocatable extended resources of a node with `gpus` GPUs under the two configs.
fn allocatable(
    gpus: u32,
    mig_config: Option<&Value>,
    plugin_config: Option<&Value>,
) -> BTreeMap<String, u64> {
    // Per GPU: None = MIG disabled, Some(profiles) = MIG instances.
    let mut per_gpu: Vec<Option<BTreeMap<String, u64>>> = vec![None; gpus as usize];
    for entry in mig_config.and_then(Value::as_array).into_iter().flatten() {
        let indices: Vec<usize> = match &entry["devices"] {
            Value::Array(list) => list.iter().filter_map(Value::as_u64).map(|i| i as usize).collect(),
            _ => (0..gpus as usize).collect(),
        };
        let enabled = entry["mig-enabled"].as_bool().unwrap_or(false);
        let devices: BTreeMap<String, u64> = entry["mig-devices"]
            .as_object()
            .map(|m| m.iter().map(|(p, n)| (p.clone(), n.as_u64().unwrap_or(0))).collect())
            .unwrap_or_default();
        for i in indices {
            if let Some(slot) = per_gpu.get_mut(i) {
                *slot = enabled.then(|| devices.clone());
            }
        }
    }
    let strategy = plugin_config.and_then(|c| c["flags"]["migStrategy"].as_str()).unwrap_or("none");
    let mut physical: BTreeMap<String, u64> = BTreeMap::new();
    for gpu in &per_gpu {
        match gpu {
            None => *physical.entry("nvidia.com/gpu".to_owned()).or_default() += 1,
            Some(devices) => match strategy {
                "mixed" => {
                    for (p, n) in devices {
                        *physical.entry(mig_resource(p)).or_default() += n;
                    }
                }
                "single" => {
                    *physical.entry("nvidia.com/gpu".to_owned()).or_default() +=
                        devices.values().sum::<u64>();
                }
                // `none`: MIG devices are not advertised.
                _ => {}
            },
        }
    }
    // MPS advertises replicas exactly as time-slicing does (and wins where both are set).
    let sharing = plugin_config.map(|c| {
        let mps = &c["sharing"]["mps"];
        if mps.is_object() { mps } else { &c["sharing"]["timeSlicing"] }
    });
    let rename = sharing.and_then(|s| s["renameByDefault"].as_bool()).unwrap_or(false);
    for r in sharing.and_then(|s| s["resources"].as_array()).into_iter().flatten() {
        let (Some(name), Some(replicas)) = (r["name"].as_str(), r["replicas"].as_u64()) else { continue };
        if let Some(count) = physical.remove(name) {
            let advertised = if rename { format!("{name}.shared") } else { name.to_owned() };
            *physical.entry(advertised).or_default() += count * replicas;
        }
    }
    physical.retain(|_, n| *n > 0);
    physical
}

/// Every node the bundle describes.
pub(super) fn nodes(files: &BTreeMap<String, String>) -> Result<Vec<Node>, String> {
    let mig = configmap_data(files, "gpu-operator/mig-parted-config.yaml")?;
    let mig_configs = mig.get("config.yaml").map(|c| c["mig-configs"].clone()).unwrap_or(Value::Null);
    let plugin = configmap_data(files, "gpu-operator/device-plugin-config.yaml")?;
    let inventory: Vec<Value> =
        serde_json::from_str(files.get("nodes/nodes.json").ok_or("the bundle has no `nodes/nodes.json`")?)
            .map_err(|e| format!("`nodes/nodes.json`: {e}"))?;

    // Labels the auto-synced Node patches set, by node name, and those held back under
    // `nodes/drain/`, which apply only to a held node whose carried state the bundle does not
    // know (see [`known_carries`]).
    let patched = patch_labels(files, |p| p == "nodes/labels/node-labels.yaml")?;
    let held_back =
        patch_labels(files, |p| p.starts_with("nodes/drain/") && !p.ends_with("kustomization.yaml"))?;
    let make = |name: String, gpus: u32, mut labels: BTreeMap<String, String>, taints: Vec<Taint>| {
        labels.insert("kubernetes.io/hostname".to_owned(), name.clone());
        let mig_name = labels.get(MIG_LABEL).cloned().unwrap_or_else(|| ALL_DISABLED.to_owned());
        let plugin_name =
            labels.get(PLUGIN_LABEL).cloned().unwrap_or_else(|| DEFAULT_DEVICE_PLUGIN_CONFIG.to_owned());
        // The GPU Operator runs no device plugin on a node labelled off (DRA nodes): no
        // extended resources there (their devices come from `dra/resource-slices.json`).
        let allocatable =
            if labels.get("nvidia.com/gpu.deploy.device-plugin").map(String::as_str) == Some("false") {
                BTreeMap::new()
            } else {
                allocatable(gpus, mig_configs.get(&mig_name), plugin.get(&plugin_name))
            };
        Node { name, labels, taints, allocatable }
    };

    let mut nodes = Vec::new();
    let mut pool_gpus: BTreeMap<String, u32> = BTreeMap::new();
    for entry in &inventory {
        let gpus = entry["gpus"].as_u64().unwrap_or(0) as u32;
        let pool = entry["pool"].as_str().unwrap_or_default().to_owned();
        pool_gpus.insert(pool, gpus);
        if entry["autoscaled"].as_bool().unwrap_or(false) {
            continue;
        }
        let name = entry["node"].as_str().unwrap_or_default().to_owned();
        let mut labels = str_map(&entry["nodeSelector"]);
        // Only the patches label a named node: a node without a patch keeps the operator's default.
        labels.extend(patched.get(&name).cloned().unwrap_or_default());
        // A node in transition runs what it carries until the cluster confirms its target; a
        // held node whose carried state is unknown is judged on its target.
        match known_carries(entry) {
            Some(carried) => labels.extend(carried),
            None if entry["mustDrain"] == true => {
                labels.extend(held_back.get(&name).cloned().unwrap_or_default())
            }
            None => {}
        }
        nodes.push(make(name, gpus, labels, taints(&entry["taints"])));
    }
    for (path, text) in files.range("nodes/autoscaled/".to_owned()..) {
        if !path.starts_with("nodes/autoscaled/") {
            break;
        }
        let doc: Value = serde_saphyr::from_str(text).map_err(|e| format!("`{path}`: {e}"))?;
        let pool = doc["pool"].as_str().unwrap_or_default();
        let gpus = pool_gpus.get(pool).copied().unwrap_or(0);
        for (g, group) in doc["nodeGroups"].as_array().into_iter().flatten().enumerate() {
            let count = group["nodes"].as_u64().unwrap_or(0);
            let mut labels = BTreeMap::new();
            // The pool's selector labels are in the cluster-autoscaler tags.
            for (k, v) in group["clusterAutoscalerTags"].as_object().into_iter().flatten() {
                if let Some(label) = k.strip_prefix("k8s.io/cluster-autoscaler/node-template/label/") {
                    labels.insert(label.to_owned(), v.as_str().unwrap_or_default().to_owned());
                }
            }
            labels.extend(str_map(&group["labels"]));
            for i in 0..count {
                nodes.push(make(
                    format!("{pool}-group{g}-{i}"),
                    gpus,
                    labels.clone(),
                    taints(&group["taints"]),
                ));
            }
        }
    }
    Ok(nodes)
}

const MIG_LABEL: &str = "nvidia.com/mig.config";
const PLUGIN_LABEL: &str = "nvidia.com/device-plugin.config";

/// Node name → the labels the Node patches in the files `which` selects set.
fn patch_labels(
    files: &BTreeMap<String, String>,
    which: impl Fn(&str) -> bool,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, String> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (path, text) in files.iter().filter(|(p, _)| which(p)) {
        for doc in docs(text).map_err(|e| format!("`{path}`: {e}"))? {
            if doc["kind"] == "Node" {
                let name = doc["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                out.entry(name).or_default().extend(str_map(&doc["metadata"]["labels"]));
            }
        }
    }
    Ok(out)
}

/// The two labels a node in transition carries (its `carries` in `nodes/nodes.json`), when the
/// bundle knows them: not for a node adopted through the manifest's `current` (`""`: configs
/// gpuplan did not write), nor for a plan without transition state.
fn known_carries(entry: &Value) -> Option<BTreeMap<String, String>> {
    let carried = str_map(&entry["carries"]);
    let known = [MIG_LABEL, PLUGIN_LABEL].iter().all(|l| carried.get(*l).is_some_and(|v| !v.is_empty()));
    known.then_some(carried)
}

/// The nodes of the drain wave the bundle stages: those whose patch
/// `nodes/drain/kustomization.yaml` lists (empty when nothing is held back), less those whose
/// carried state the bundle does not know (what runs there is not gpuplan's to judge).
pub(super) fn staged_drain(files: &BTreeMap<String, String>) -> Result<Vec<String>, String> {
    let Some(text) = files.get("nodes/drain/kustomization.yaml") else { return Ok(Vec::new()) };
    let inventory: Vec<Value> =
        files.get("nodes/nodes.json").and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default();
    let known = |node: &str| inventory.iter().any(|e| e["node"] == node && known_carries(e).is_some());
    let doc = docs(text)?.into_iter().next().unwrap_or(Value::Null);
    let mut nodes = Vec::new();
    for r in doc["resources"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        let path = format!("nodes/drain/{}", r.trim_start_matches("./"));
        let text = files
            .get(&path)
            .ok_or_else(|| format!("`nodes/drain/kustomization.yaml` lists `{r}`, which the bundle lacks"))?;
        for doc in docs(text).map_err(|e| format!("`{path}`: {e}"))? {
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            if doc["kind"] == "Node" && known(name) {
                nodes.push(name.to_owned());
            }
        }
    }
    Ok(nodes)
}

/// A PodDisruptionBudget, as the eviction API and the disruption controller read it.
#[derive(Clone, Debug)]
pub(super) struct Budget {
    pub name: String,
    pub namespace: String,
    pub selector: Value,
    /// `minAvailable` (else `maxUnavailable`): an integer or a percentage, as written.
    pub min_available: Option<Value>,
    pub max_unavailable: Option<Value>,
}

/// Every PodDisruptionBudget under `workloads/`.
pub(super) fn budgets(files: &BTreeMap<String, String>) -> Result<Vec<Budget>, String> {
    let mut out = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| p.starts_with("workloads/") && p.ends_with(".yaml")) {
        for doc in docs(text).map_err(|e| format!("`{path}`: {e}"))? {
            if doc["kind"] != "PodDisruptionBudget" {
                continue;
            }
            let spec = &doc["spec"];
            let some = |v: &Value| (!v.is_null()).then(|| v.clone());
            out.push(Budget {
                name: doc["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                namespace: doc["metadata"]["namespace"].as_str().unwrap_or("default").to_owned(),
                selector: spec["selector"].clone(),
                min_available: some(&spec["minAvailable"]),
                max_unavailable: some(&spec["maxUnavailable"]),
            });
        }
    }
    Ok(out)
}

/// Resolves a rolling-update value against `replicas`: a count, or a percentage (surge rounds
/// up, unavailability down, as the Deployment controller does).
pub(super) fn resolve(v: &Value, replicas: u32, round_up: bool, default: &str) -> u32 {
    let text = match v {
        Value::Number(n) => return n.as_u64().unwrap_or(0) as u32,
        Value::String(s) => s.clone(),
        _ => default.to_owned(),
    };
    match text.strip_suffix('%').and_then(|p| p.parse::<u64>().ok()) {
        Some(p) => {
            let scaled = p * u64::from(replicas);
            (if round_up { scaled.div_ceil(100) } else { scaled / 100 }) as u32
        }
        None => text.parse().unwrap_or(0),
    }
}

/// Every Deployment under `workloads/`.
pub(super) fn workloads(files: &BTreeMap<String, String>) -> Result<Vec<Workload>, String> {
    let mut out = Vec::new();
    for (path, text) in files {
        if !path.starts_with("workloads/") || !path.ends_with(".yaml") {
            continue;
        }
        for doc in docs(text).map_err(|e| format!("`{path}`: {e}"))? {
            if doc["kind"] != "Deployment" {
                continue;
            }
            let replicas = doc["spec"]["replicas"].as_u64().unwrap_or(1) as u32;
            let rolling = &doc["spec"]["strategy"]["rollingUpdate"];
            let recreate = doc["spec"]["strategy"]["type"] == "Recreate";
            let (mut surge, mut unavailable) = if recreate {
                (0, replicas)
            } else {
                (
                    resolve(&rolling["maxSurge"], replicas, true, "25%"),
                    resolve(&rolling["maxUnavailable"], replicas, false, "25%"),
                )
            };
            if surge == 0 && unavailable == 0 {
                // The API server refuses both 0; a percentage that rounds to 0 becomes 1.
                unavailable = 1;
            }
            surge = surge.min(replicas.max(1));
            let template = doc["spec"]["template"].clone();
            let mut requests: BTreeMap<String, u64> = BTreeMap::new();
            for c in template["spec"]["containers"].as_array().into_iter().flatten() {
                let limits = str_map(&c["resources"]["limits"]);
                let mut reqs = str_map(&c["resources"]["requests"]);
                for (k, v) in limits {
                    reqs.entry(k).or_insert(v);
                }
                for (k, v) in reqs {
                    // Extended resources are integers named `domain/name`; cpu and memory
                    // are not checked (node capacity is not in the bundle).
                    if k.contains('/') {
                        *requests.entry(k).or_default() += v.parse::<u64>().unwrap_or(0);
                    }
                }
            }
            out.push(Workload {
                name: doc["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                namespace: doc["metadata"]["namespace"].as_str().unwrap_or("default").to_owned(),
                replicas,
                max_surge: surge,
                max_unavailable: unavailable,
                labels: str_map(&template["metadata"]["labels"]),
                requests,
                template,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_slicing_multiplies_and_renames() {
        let mig = serde_json::json!([{ "devices": [0], "mig-enabled": true, "mig-devices": { "1g.10gb": 7 } },
                                     { "devices": [1], "mig-enabled": false }]);
        let plugin = serde_json::json!({ "flags": { "migStrategy": "mixed" },
            "sharing": { "timeSlicing": { "renameByDefault": true,
                "resources": [{ "name": "nvidia.com/mig-1g.10gb", "replicas": 2 }] } } });
        let a = allocatable(2, Some(&mig), Some(&plugin));
        assert_eq!(a.get("nvidia.com/mig-1g.10gb.shared"), Some(&14));
        assert_eq!(a.get("nvidia.com/gpu"), Some(&1));
        assert!(!a.contains_key("nvidia.com/mig-1g.10gb"));
    }

    #[test]
    fn percentages_round_like_the_deployment_controller() {
        assert_eq!(resolve(&Value::from("25%"), 3, true, "25%"), 1);
        assert_eq!(resolve(&Value::from("25%"), 3, false, "25%"), 0);
        assert_eq!(resolve(&Value::Null, 8, false, "25%"), 2);
    }
}
