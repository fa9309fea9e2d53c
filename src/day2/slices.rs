//! `gpuplan current import --resource-slices`: each node's GPUs as NVIDIA's DRA driver
//! publishes them, for the manifest's `current` entries (`node`, `gpus`, `uuids`).
//!
//! In: the JSON of `kubectl get resourceslices -o json` (a `ResourceSliceList`, a `List`, or
//! one `ResourceSlice`; `resource.k8s.io/v1`, or `v1beta1` with its `basic` device wrapper).
//! Only slices of the driver `gpu.nvidia.com` are read. Out: per node, its GPUs ordered as NVML
//! indexes them, each with its UUID and its static MIG instances' profiles — a full GPU from
//! a device of `type: gpu` (`uuid`, `productName`), a MIG instance from one of `type: mig`
//! (`parentUUID`, `profile`) — and what could not be read.
//!
//! Order: NVML numbers GPUs by PCI bus id, so GPUs are sorted by the standard attribute
//! `resource.kubernetes.io/pciBusID` when every GPU of the node has it, else by the minor
//! number in the driver's device name (`gpu-<minor>`, `gpu-<minor>-mig-…`), which matches the
//! index on the usual single-root systems (docs/dra.md, "Importing ResourceSlices").

use std::collections::BTreeMap;

use serde_json::Value;

use crate::catalog::Catalog;

/// The driver whose slices are read.
const DRIVER: &str = "gpu.nvidia.com";
const PCI_BUS_ID: &str = "resource.kubernetes.io/pciBusID";

/// One node's GPUs, as the driver published them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceNode {
    pub node: String,
    /// The GPUs' `productName` (the first one's).
    pub product: Option<String>,
    /// Catalog id of that product, when the catalog knows it.
    pub gpu: Option<String>,
    /// GPU UUIDs, by index.
    pub uuids: Vec<String>,
    /// MIG profiles per GPU, by index (empty: MIG disabled), sorted.
    pub gpus: Vec<Vec<String>>,
    /// What could not be read, one sentence each.
    pub notes: Vec<String>,
}

/// A GPU seen in the slices (whole, or as the parent of MIG devices).
#[derive(Default)]
struct SeenGpu {
    minor: Option<u32>,
    pci: Option<String>,
    product: Option<String>,
    profiles: Vec<String>,
}

fn string_attr<'v>(device: &'v Value, name: &str) -> Option<&'v str> {
    let attrs = device.get("basic").unwrap_or(device).get("attributes")?;
    let key = name.strip_prefix("gpu.nvidia.com/").unwrap_or(name);
    attrs.get(key).or_else(|| attrs.get(format!("{DRIVER}/{key}")))?.get("string")?.as_str()
}

/// `gpu-3` and `gpu-3-mig-1g10gb-19-0` → 3.
fn minor(name: &str) -> Option<u32> {
    name.strip_prefix("gpu-")?.split('-').next()?.parse().ok()
}

/// Reads `kubectl get resourceslices -o json`.
pub fn import_resource_slices(json: &str, catalog: &Catalog) -> Result<Vec<SliceNode>, String> {
    let doc: Value = serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
    let items: Vec<&Value> = match doc.get("items").and_then(Value::as_array) {
        Some(items) => items.iter().collect(),
        None if doc.get("kind").and_then(Value::as_str) == Some("ResourceSlice") => vec![&doc],
        None => {
            return Err(
                "expected `kubectl get resourceslices -o json` output (a list or a ResourceSlice)".to_owned()
            );
        }
    };
    let mut per_node: BTreeMap<String, (BTreeMap<String, SeenGpu>, Vec<String>)> = BTreeMap::new();
    for slice in
        items.into_iter().filter(|s| s.pointer("/spec/driver").and_then(Value::as_str) == Some(DRIVER))
    {
        let Some(node) = slice.pointer("/spec/nodeName").and_then(Value::as_str) else { continue };
        let (gpus, notes) = per_node.entry(node.to_owned()).or_default();
        for device in slice.pointer("/spec/devices").and_then(Value::as_array).into_iter().flatten() {
            read_device(device, gpus, notes);
        }
    }
    let mut out: Vec<SliceNode> =
        per_node.into_iter().map(|(node, (gpus, notes))| slice_node(node, gpus, notes, catalog)).collect();
    out.sort_by(|a, b| (&a.gpu, &a.node).cmp(&(&b.gpu, &b.node)));
    Ok(out)
}

fn read_device(device: &Value, gpus: &mut BTreeMap<String, SeenGpu>, notes: &mut Vec<String>) {
    let name = device.get("name").and_then(Value::as_str).unwrap_or_default();
    let (uuid_key, kind) = match string_attr(device, "type") {
        Some("gpu") => ("uuid", "gpu"),
        Some("mig") => ("parentUUID", "mig"),
        // vfio, compute domains and the rest hold no GPU of a layout.
        _ => return,
    };
    let Some(uuid) = string_attr(device, uuid_key) else {
        notes.push(format!("device `{name}` has no `{uuid_key}` attribute"));
        return;
    };
    let gpu = gpus.entry(uuid.to_owned()).or_default();
    gpu.minor = gpu.minor.or(minor(name));
    gpu.pci = gpu.pci.take().or(string_attr(device, PCI_BUS_ID).map(str::to_owned));
    gpu.product = gpu.product.take().or(string_attr(device, "productName").map(str::to_owned));
    if kind == "mig" {
        match string_attr(device, "profile") {
            Some(p) => gpu.profiles.push(p.to_owned()),
            None => notes.push(format!("MIG device `{name}` has no `profile` attribute")),
        }
    }
}

fn slice_node(
    node: String,
    gpus: BTreeMap<String, SeenGpu>,
    mut notes: Vec<String>,
    catalog: &Catalog,
) -> SliceNode {
    let mut list: Vec<(String, SeenGpu)> = gpus.into_iter().collect();
    let by_pci = list.iter().all(|(_, g)| g.pci.is_some());
    list.sort_by(|(ua, a), (ub, b)| {
        if by_pci { a.pci.cmp(&b.pci) } else { a.minor.cmp(&b.minor) }.then_with(|| ua.cmp(ub))
    });
    let product = list.iter().find_map(|(_, g)| g.product.clone());
    let gpu = product.as_deref().and_then(|p| catalog.get(p)).map(|g| g.id.clone());
    match &product {
        None => notes.push("no `productName` attribute".to_owned()),
        Some(p) if gpu.is_none() => notes.push(format!("GPU product `{p}` is not in the catalog")),
        Some(_) => {}
    }
    let products: Vec<&str> = list.iter().filter_map(|(_, g)| g.product.as_deref()).collect();
    if products.windows(2).any(|w| w[0] != w[1]) {
        notes.push(format!(
            "the node mixes GPU products ({}): split it over pools by GPU",
            products.join(", ")
        ));
    }
    if !by_pci {
        notes.push("no `resource.kubernetes.io/pciBusID` on every GPU: ordered by device minor".to_owned());
    }
    let uuids = list.iter().map(|(u, _)| u.clone()).collect();
    let gpus = list
        .into_iter()
        .map(|(_, mut g)| {
            g.profiles.sort();
            g.profiles
        })
        .collect();
    SliceNode { node, product, gpu, uuids, gpus, notes }
}

/// The comment lines before a node's `current` entry: a `# GPU <id>` line when the GPU differs
/// from the previous node's (`last`), then the node's notes.
pub(crate) fn comments<'n>(
    s: &mut String,
    last: &mut Option<&'n Option<String>>,
    gpu: &'n Option<String>,
    node: &str,
    notes: &[String],
) {
    if *last != Some(gpu) {
        s.push_str(&format!("# GPU {}\n", gpu.as_deref().unwrap_or("unknown")));
        *last = Some(gpu);
    }
    for note in notes {
        s.push_str(&format!("# {node}: {note}\n"));
    }
}

/// The nodes as YAML to paste under each pool's `current:`, grouped by GPU.
pub fn slices_yaml(nodes: &[SliceNode]) -> String {
    let quote = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    let mut s = String::from(
        "# gpuplan current import --resource-slices: paste each node under `current:` of the pool that\n\
         # holds it (a pool with `backend: dra` needs every node's `uuids`). A GPU with MIG mode on but\n\
         # no MIG devices is not published by the driver and is missing here.\n",
    );
    let mut last: Option<&Option<String>> = None;
    for n in nodes {
        comments(&mut s, &mut last, &n.gpu, &n.node, &n.notes);
        s.push_str(&format!("- node: {}\n  gpus:\n", quote(&n.node)));
        for g in &n.gpus {
            let list: Vec<String> = g.iter().map(|p| quote(p)).collect();
            s.push_str(&format!("    - [{}]\n", list.join(", ")));
        }
        s.push_str("  uuids:\n");
        for u in &n.uuids {
            s.push_str(&format!("    - {}\n", quote(u)));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::import_resource_slices;
    use crate::catalog::Catalog;

    /// A `v1beta1` slice (devices wrapped in `basic`), GPUs listed out of PCI order, one MIG
    /// GPU known only through its MIG devices, and a slice of another driver.
    const SLICES: &str = r#"{"items": [
      {"kind": "ResourceSlice", "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "devices": [
        {"name": "gpu-1", "basic": {"attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-bbbb0000"},
          "productName": {"string": "NVIDIA A100-SXM4-80GB"}, "resource.kubernetes.io/pciBusID": {"string": "0000:20:00.0"}}}},
        {"name": "gpu-0-mig-1g10gb-19-6", "basic": {"attributes": {"type": {"string": "mig"}, "parentUUID": {"string": "GPU-aaaa0000"},
          "profile": {"string": "1g.10gb"}, "productName": {"string": "NVIDIA A100-SXM4-80GB"},
          "resource.kubernetes.io/pciBusID": {"string": "0000:10:00.0"}}}},
        {"name": "gpu-0-mig-3g40gb-9-0", "basic": {"attributes": {"type": {"string": "mig"}, "parentUUID": {"string": "GPU-aaaa0000"},
          "profile": {"string": "3g.40gb"}, "productName": {"string": "NVIDIA A100-SXM4-80GB"},
          "resource.kubernetes.io/pciBusID": {"string": "0000:10:00.0"}}}}]}},
      {"kind": "ResourceSlice", "spec": {"driver": "example.com", "nodeName": "n2", "devices": [
        {"name": "x", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-cccc0000"}}}]}}]}"#;

    #[test]
    fn slices_become_ordered_gpus_with_their_mig_devices() {
        let nodes = import_resource_slices(SLICES, &Catalog::builtin()).expect("imports");
        assert_eq!(nodes.len(), 1, "other drivers are skipped");
        let n = &nodes[0];
        assert_eq!(n.uuids, ["GPU-aaaa0000", "GPU-bbbb0000"], "ordered by PCI bus id");
        assert_eq!(n.gpus, [vec!["1g.10gb".to_owned(), "3g.40gb".to_owned()], Vec::new()]);
        assert_eq!(n.gpu.as_deref(), Some("A100-SXM4-80GB"));
        assert!(n.notes.is_empty(), "{:?}", n.notes);
    }

    #[test]
    fn what_is_not_a_slice_list_is_refused() {
        assert!(import_resource_slices("[]", &Catalog::builtin()).is_err());
        assert!(import_resource_slices("not json", &Catalog::builtin()).is_err());
    }
}
