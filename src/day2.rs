//! Day 2 at the command layer's edge: what a running cluster says.
//!
//! In: a live cluster's exported state (`kubectl get nodes -o json` and the mig-parted
//! ConfigMap). Out: the manifest's `current` layouts for adopting a cluster
//! ([`import_current`], [`current_yaml`]), and the labels the transition gate reads
//! (`--observed`, [`observed`]).
//! The day-2 compile itself — re-plan from the committed plan, render, attach the changes — is a
//! chain of stages and lives with the others in [`crate::pipeline`].

pub mod slices;

use crate::catalog::Catalog;
use crate::plan::day2::transition::{Observed, ObservedNode};
use crate::render::dra::DEPLOY_DEVICE_PLUGIN_LABEL;
use crate::render::objects::{DEVICE_PLUGIN_LABEL, MIG_CONFIG_LABEL};

/// The label the MIG manager sets when it has applied (or failed to apply) a node's
/// `nvidia.com/mig.config` (NVIDIA mig-parted's `k8s-mig-manager`: `pending`, `rebooting`,
/// `success`, `failed`).
pub const MIG_CONFIG_STATE_LABEL: &str = "nvidia.com/mig.config.state";

/// Why an `--observed` file was refused: the sentence, and where (1-based line and column)
/// when the file is not JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedError {
    pub message: String,
    pub at: Option<(usize, usize)>,
}

/// The Nodes of `kubectl get nodes -o json` output: a `List`/`NodeList`'s items, or one `Node`.
fn node_items(doc: &serde_json::Value) -> Result<Vec<&serde_json::Value>, String> {
    match doc.get("items").and_then(|i| i.as_array()) {
        Some(items) => Ok(items.iter().collect()),
        None if doc.get("kind").and_then(|k| k.as_str()) == Some("Node") => Ok(vec![doc]),
        None => Err("expected `kubectl get nodes -o json` output (a NodeList or a Node)".to_owned()),
    }
}

/// A label of a Node object, if it has it.
fn node_label(item: &serde_json::Value, key: &str) -> Option<String> {
    item.pointer("/metadata/labels")?.get(key)?.as_str().map(str::to_owned)
}

/// Reads `kubectl get nodes -o json` (a `List`/`NodeList`, or one `Node`) into the labels the
/// transition gate reads ([`Observed`]). A node without a name is refused; a node without
/// the labels is kept (it carries none of them).
pub fn observed(text: &str) -> Result<Observed, ObservedError> {
    let doc: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| ObservedError { message: format!("not JSON: {e}"), at: Some((e.line(), e.column())) })?;
    let refuse = |m: &str| ObservedError { message: m.to_owned(), at: None };
    let items = node_items(&doc).map_err(|m| refuse(&m))?;
    let mut out = Observed::default();
    for item in items {
        if item.get("kind").and_then(|k| k.as_str()).is_some_and(|k| k != "Node") {
            return Err(refuse("an item of the list is not a Node"));
        }
        let Some(name) = item.pointer("/metadata/name").and_then(|n| n.as_str()) else {
            return Err(refuse("a Node without `metadata.name`"));
        };
        let label = |k: &str| node_label(item, k);
        out.nodes.insert(
            name.to_owned(),
            ObservedNode {
                mig_config: label(MIG_CONFIG_LABEL),
                device_plugin_config: label(DEVICE_PLUGIN_LABEL),
                mig_config_state: label(MIG_CONFIG_STATE_LABEL),
                device_plugin_deploy: label(DEPLOY_DEVICE_PLUGIN_LABEL),
            },
        );
    }
    Ok(out)
}

/// One node's layout today, imported from a live cluster's exported state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportedNode {
    pub node: String,
    /// Catalog id of the node's GPU, when its `nvidia.com/gpu.product` label is known.
    pub gpu: Option<String>,
    /// MIG profile names per GPU (empty = MIG disabled), sorted.
    pub gpus: Vec<Vec<String>>,
    /// The node's `nvidia.com/device-plugin.config` label, if any.
    pub device_plugin_config: Option<String>,
    /// What could not be read, one sentence each.
    pub notes: Vec<String>,
}

/// Builds the manifest's `current` layouts from `kubectl get nodes -o json` (a `NodeList` or one
/// `Node`) and the mig-parted config (the ConfigMap as YAML, or its `config.yaml` alone), from the
/// NVIDIA labels: `nvidia.com/gpu.product` (the GPU, `-MIG-…` and `-SHARED` suffixes removed),
/// `nvidia.com/gpu.count`, `nvidia.com/mig.config` (a key of the mig-parted config) and
/// `nvidia.com/mig.config.state`. Nodes without `nvidia.com/gpu.product` are skipped.
pub fn import_current(
    nodes_json: &str,
    mig_config: Option<&str>,
    catalog: &Catalog,
) -> Result<Vec<ImportedNode>, String> {
    use crate::catalog::migparted::{Devices, MigPartedConfig, deciding_entry};
    let doc: serde_json::Value = serde_json::from_str(nodes_json).map_err(|e| format!("not JSON: {e}"))?;
    let items = node_items(&doc)?;
    let parted = match mig_config {
        None => None,
        Some(text) => {
            // A ConfigMap carries the config under `data`, usually as `config.yaml`.
            let inner = serde_saphyr::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|v| {
                    let data = v.get("data")?.as_object()?;
                    data.get("config.yaml").or_else(|| data.values().next())?.as_str().map(str::to_owned)
                })
                .unwrap_or_else(|| text.to_owned());
            Some(MigPartedConfig::parse(&inner).map_err(|e| format!("the mig-parted config: {e}"))?)
        }
    };
    let mut out = Vec::new();
    for item in items {
        let name = item.pointer("/metadata/name").and_then(|n| n.as_str()).unwrap_or_default().to_owned();
        let label = |k: &str| node_label(item, k);
        let Some(product) = label("nvidia.com/gpu.product") else { continue };
        let mut notes = Vec::new();
        let base = product.split("-MIG-").next().unwrap_or(&product).trim_end_matches("-SHARED").to_owned();
        let gpu = catalog.get(&base);
        if gpu.is_none() {
            notes.push(format!("GPU product `{product}` is not in the catalog"));
        }
        let count: u32 = label("nvidia.com/gpu.count").and_then(|c| c.parse().ok()).unwrap_or(0);
        if count == 0 {
            notes.push("no `nvidia.com/gpu.count` label".to_owned());
        }
        if let Some(state) = label("nvidia.com/mig.config.state")
            && state != "success"
        {
            notes.push(format!(
                "`nvidia.com/mig.config.state` is `{state}`: the layout may not be applied yet"
            ));
        }
        let config = label("nvidia.com/mig.config");
        let mut gpus = vec![Vec::new(); count as usize];
        match (config.as_deref(), &parted) {
            (None | Some(crate::catalog::migparted::ALL_DISABLED), _) => {}
            (Some(c), None) => {
                notes.push(format!("`nvidia.com/mig.config` is `{c}`, but no mig-parted config was given"))
            }
            (Some(c), Some(p)) => match p.mig_configs.get(c) {
                None => notes.push(format!("mig-parted config `{c}` is not in the given ConfigMap")),
                Some(entries) => {
                    for (i, slot) in gpus.iter_mut().enumerate() {
                        let matches = deciding_entry(entries, |e| {
                            let dev = match &e.devices {
                                Devices::All => true,
                                Devices::Indices(ix) => ix.contains(&(i as u32)),
                            };
                            let filter = e.device_filter.as_ref().is_none_or(|f| {
                                gpu.is_none_or(|g| f.ids().iter().any(|id| g.matches_pci_id(id)))
                            });
                            dev && filter
                        });
                        if let Some(e) = matches.filter(|e| e.mig_enabled) {
                            for (profile, n) in e.mig_devices.iter().flatten() {
                                slot.extend(std::iter::repeat_n(profile.clone(), *n as usize));
                            }
                            slot.sort();
                        }
                    }
                }
            },
        }
        out.push(ImportedNode {
            node: name,
            gpu: gpu.map(|g| g.id.clone()),
            gpus,
            device_plugin_config: label("nvidia.com/device-plugin.config"),
            notes,
        });
    }
    out.sort_by(|a, b| (&a.gpu, &a.node).cmp(&(&b.gpu, &b.node)));
    Ok(out)
}

/// The imported layouts as YAML to paste under each pool's `current:`, grouped by GPU.
pub fn current_yaml(nodes: &[ImportedNode]) -> String {
    let mut s = String::from(
        "# gpuplan current import: paste each node under `current:` of the pool that holds it.\n",
    );
    let mut last: Option<&Option<String>> = None;
    for n in nodes {
        slices::comments(&mut s, &mut last, &n.gpu, &n.node, &n.notes);
        if let Some(dp) = &n.device_plugin_config {
            s.push_str(&format!("# {}: nvidia.com/device-plugin.config={dp}\n", n.node));
        }
        s.push_str(&format!("- node: {}\n  gpus:\n", serde_json::Value::String(n.node.clone())));
        for g in &n.gpus {
            let list: Vec<String> =
                g.iter().map(|p| serde_json::Value::String(p.clone()).to_string()).collect();
            s.push_str(&format!("    - [{}]\n", list.join(", ")));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::import_current;
    use crate::catalog::Catalog;

    #[test]
    fn the_last_matching_mig_parted_entry_decides_a_gpus_layout() {
        let nodes = r#"{"items":[{"metadata":{"name":"n1","labels":{
            "nvidia.com/gpu.product":"NVIDIA-A100-SXM4-80GB","nvidia.com/gpu.count":"2",
            "nvidia.com/mig.config":"mixed","nvidia.com/mig.config.state":"success"}}}]}"#;
        // mig-parted applies both entries to GPU 0, in order: it ends with one 7g.80gb.
        let config = "version: v1\nmig-configs:\n  mixed:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n        3g.40gb: 2\n    - devices: [0]\n      mig-enabled: true\n      mig-devices:\n        7g.80gb: 1\n";
        let imported = import_current(nodes, Some(config), &Catalog::builtin()).expect("imports");
        assert_eq!(imported.len(), 1);
        assert_eq!(imported[0].gpus, vec![vec!["7g.80gb".to_owned()], vec!["3g.40gb".to_owned(); 2]]);
    }
}
