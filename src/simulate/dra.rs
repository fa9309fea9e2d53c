//! DRA claims in the simulation, from the bundle's files only: the devices in
//! `dra/resource-slices.json` (the ResourceSlices the driver publishes once each node carries
//! its planned layout), the ResourceClaimTemplates and ResourceClaims under `workloads/`, and the
//! Deployments' `resourceClaims`.
//!
//! The scheduler's DRA allocation is replayed as extended resources, which the resource filter
//! already counts: every published device is one unit of `dra.gpuplan.io/<node>/<device>` on its
//! node; a pod's claim from a template asks for one unit of each device its requests' selectors
//! match; a shared ResourceClaim is allocated once and its device serves up to 256 pods (the
//! API's limit on a claim's `reservedFor`), counted as `dra.gpuplan.io/claim/<name>`.
//!
//! Limits (reported as bundle problems, never guessed): a selector must be a conjunction of
//! `device.attributes['<domain>'].<name> == '<value>'` and `'<key>' in
//! device.capacity['<domain>']` terms (what gpuplan writes), and select exactly one device — a
//! claim that could take one of several devices would need the allocator's search, which this
//! simulation does not do. A device given both to a shared claim and to a template claim is not
//! detected.

use std::collections::BTreeMap;

use serde_json::Value;

use super::cluster::{Node, Workload};

/// Pods one shared ResourceClaim may serve (`status.reservedFor` holds at most 256 entries).
pub const MAX_SHARED_PODS: u64 = 256;
/// Where the bundle lists the devices the driver should publish.
const SLICES: &str = "dra/resource-slices.json";
/// Prefix of the pseudo-resources that stand for DRA devices and shared claims.
const PREFIX: &str = "dra.gpuplan.io/";

/// One published device: its node and name, string attributes and capacity keys (by domain).
#[derive(Clone, Debug)]
pub struct SliceDevice {
    pub node: String,
    pub name: String,
    pub driver: String,
    pub attributes: BTreeMap<String, String>,
    pub capacity: Vec<String>,
}

/// The devices of `dra/resource-slices.json` (none when the bundle has no DRA pool).
pub fn devices(files: &BTreeMap<String, String>) -> Result<Vec<SliceDevice>, String> {
    let Some(text) = files.get(SLICES) else { return Ok(Vec::new()) };
    let list: Value = serde_json::from_str(text).map_err(|e| format!("`{SLICES}`: {e}"))?;
    let mut out = Vec::new();
    for slice in list["items"].as_array().into_iter().flatten() {
        let node = slice["spec"]["nodeName"].as_str().unwrap_or_default();
        let driver = slice["spec"]["driver"].as_str().unwrap_or_default();
        for d in slice["spec"]["devices"].as_array().into_iter().flatten() {
            let attributes = d["attributes"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v["string"].as_str()?.to_owned())))
                .collect();
            let capacity = d["capacity"].as_object().into_iter().flatten().map(|(k, _)| k.clone()).collect();
            out.push(SliceDevice {
                node: node.to_owned(),
                name: d["name"].as_str().unwrap_or_default().to_owned(),
                driver: driver.to_owned(),
                attributes,
                capacity,
            });
        }
    }
    Ok(out)
}

/// Adds the bundle's DRA devices to the nodes and its claims to the workloads.
pub(super) fn attach(
    files: &BTreeMap<String, String>,
    nodes: &mut [Node],
    workloads: &mut [Workload],
) -> Result<(), String> {
    let devices = devices(files)?;
    add_devices(nodes, &devices);
    claims(files, &devices, nodes, workloads)
}

/// Gives every node its published devices as one unit each, and every node with a shared
/// device the capacity of its shared claims (added by [`claims`]).
pub(super) fn add_devices(nodes: &mut [Node], devices: &[SliceDevice]) {
    for d in devices {
        if let Some(node) = nodes.iter_mut().find(|n| n.name == d.node) {
            node.allocatable.insert(device_resource(d), 1);
        }
    }
}

fn device_resource(d: &SliceDevice) -> String {
    format!("{PREFIX}{}/{}", d.node, d.name)
}

/// A term of a selector gpuplan writes.
enum Term {
    Attribute { domain: String, name: String, value: String },
    Capacity { domain: String, key: String },
}

/// Parses a selector of the form gpuplan writes, or says why not.
fn parse(expression: &str) -> Result<Vec<Term>, String> {
    let quoted = |s: &str| s.strip_prefix('\'')?.strip_suffix('\'').map(str::to_owned);
    let mut terms = Vec::new();
    for raw in expression.split("&&").map(str::trim) {
        let term = if let Some((lhs, rhs)) = raw.split_once(" == ") {
            let rest = lhs.strip_prefix("device.attributes[").and_then(|r| r.split_once("]."));
            let (domain, name) = rest.ok_or_else(|| format!("unsupported term `{raw}`"))?;
            Term::Attribute {
                domain: quoted(domain).ok_or_else(|| format!("unsupported term `{raw}`"))?,
                name: name.to_owned(),
                value: quoted(rhs.trim()).ok_or_else(|| format!("unsupported term `{raw}`"))?,
            }
        } else if let Some((key, map)) = raw.split_once(" in ") {
            let domain = map.trim().strip_prefix("device.capacity[").and_then(|r| r.strip_suffix(']'));
            Term::Capacity {
                domain: domain.and_then(quoted).ok_or_else(|| format!("unsupported term `{raw}`"))?,
                key: quoted(key.trim()).ok_or_else(|| format!("unsupported term `{raw}`"))?,
            }
        } else {
            return Err(format!("unsupported term `{raw}`"));
        };
        terms.push(term);
    }
    Ok(terms)
}

/// Whether a device of the class (the driver's `gpu.nvidia.com` / `mig.nvidia.com`) matches
/// every term. Attributes and capacities of the driver's own domain are the device's.
fn matches(d: &SliceDevice, class: &str, terms: &[Term]) -> bool {
    let kind = match class {
        "gpu.nvidia.com" => "gpu",
        "mig.nvidia.com" => "mig",
        _ => return false,
    };
    d.attributes.get("type").map(String::as_str) == Some(kind)
        && terms.iter().all(|t| match t {
            Term::Attribute { domain, name, value } => {
                *domain == d.driver && d.attributes.get(name) == Some(value)
            }
            Term::Capacity { domain, key } => *domain == d.driver && d.capacity.contains(key),
        })
}

/// The one device each request of a claim's `spec.devices` selects.
fn allocate<'d>(
    spec: &Value,
    devices: &'d [SliceDevice],
    what: &str,
) -> Result<Vec<&'d SliceDevice>, String> {
    let mut out = Vec::new();
    for r in spec["requests"].as_array().into_iter().flatten() {
        let exactly = &r["exactly"];
        let class = exactly["deviceClassName"].as_str().unwrap_or_default();
        let mut terms = Vec::new();
        for s in exactly["selectors"].as_array().into_iter().flatten() {
            let expression = s["cel"]["expression"].as_str().unwrap_or_default();
            terms.extend(parse(expression).map_err(|e| format!("{what}: {e}"))?);
        }
        let found: Vec<&SliceDevice> = devices.iter().filter(|d| matches(d, class, &terms)).collect();
        if found.len() > 1 {
            let names: Vec<&str> = found.iter().map(|d| d.name.as_str()).collect();
            return Err(format!(
                "{what}: request `{}` selects {} devices ({}); the simulation needs one",
                r["name"].as_str().unwrap_or_default(),
                found.len(),
                names.join(", ")
            ));
        }
        // None found: the pod can never be scheduled; it asks for a device no node has.
        out.extend(found);
    }
    Ok(out)
}

/// Turns every Deployment's `resourceClaims` into requests of the devices they select, and gives
/// the node of each shared claim's device its capacity of pods.
pub(super) fn claims(
    files: &BTreeMap<String, String>,
    devices: &[SliceDevice],
    nodes: &mut [Node],
    workloads: &mut [Workload],
) -> Result<(), String> {
    let mut templates: BTreeMap<(String, String), Value> = BTreeMap::new();
    let mut shared: BTreeMap<(String, String), Value> = BTreeMap::new();
    for (path, text) in files.iter().filter(|(p, _)| p.starts_with("workloads/") && p.ends_with(".yaml")) {
        for doc in serde_saphyr::from_multiple::<Value>(text).map_err(|e| format!("`{path}`: {e}"))? {
            let key = (
                doc["metadata"]["namespace"].as_str().unwrap_or("default").to_owned(),
                doc["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
            );
            match doc["kind"].as_str() {
                Some("ResourceClaimTemplate") => {
                    templates.insert(key, doc["spec"]["spec"]["devices"].clone())
                }
                Some("ResourceClaim") => shared.insert(key, doc["spec"]["devices"].clone()),
                _ => None,
            };
        }
    }
    for w in workloads.iter_mut() {
        for c in w.template["spec"]["resourceClaims"].as_array().cloned().unwrap_or_default() {
            let what = format!("Deployment `{}`", w.name);
            if let Some(t) = c["resourceClaimTemplateName"].as_str() {
                let spec = templates
                    .get(&(w.namespace.clone(), t.to_owned()))
                    .ok_or_else(|| format!("{what}: no ResourceClaimTemplate `{t}`"))?;
                let found = allocate(spec, devices, &what)?;
                if found.is_empty() {
                    w.requests.insert(format!("{PREFIX}unmatched/{t}"), 1);
                }
                for d in found {
                    *w.requests.entry(device_resource(d)).or_default() += 1;
                }
            } else if let Some(name) = c["resourceClaimName"].as_str() {
                let spec = shared
                    .get(&(w.namespace.clone(), name.to_owned()))
                    .ok_or_else(|| format!("{what}: no ResourceClaim `{name}`"))?;
                let resource = format!("{PREFIX}claim/{}/{name}", w.namespace);
                for d in allocate(spec, devices, &what)? {
                    if let Some(node) = nodes.iter_mut().find(|n| n.name == d.node) {
                        node.allocatable.insert(resource.clone(), MAX_SHARED_PODS);
                    }
                }
                w.requests.insert(resource, 1);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{SliceDevice, matches, parse};
    use std::collections::BTreeMap;

    fn mig(start: u8) -> SliceDevice {
        SliceDevice {
            node: "n".into(),
            name: format!("gpu-0-mig-3g40gb-9-{start}"),
            driver: "gpu.nvidia.com".into(),
            attributes: BTreeMap::from([
                ("type".into(), "mig".into()),
                ("parentUUID".into(), "GPU-1234abcd".into()),
                ("profile".into(), "3g.40gb".into()),
            ]),
            capacity: (start..start + 4).map(|s| format!("memorySlice{s}")).collect(),
        }
    }

    #[test]
    fn selectors_match_by_attribute_and_placement() {
        let terms = parse(
            "device.attributes['gpu.nvidia.com'].parentUUID == 'GPU-1234abcd' && \
             device.attributes['gpu.nvidia.com'].profile == '3g.40gb' && \
             'memorySlice4' in device.capacity['gpu.nvidia.com']",
        )
        .expect("parses");
        assert!(matches(&mig(4), "mig.nvidia.com", &terms));
        assert!(!matches(&mig(0), "mig.nvidia.com", &terms));
        assert!(!matches(&mig(4), "gpu.nvidia.com", &terms));
        assert!(parse("device.attributes['gpu.nvidia.com'].index == 0 || true").is_err());
    }
}
