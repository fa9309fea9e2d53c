//! Node assignments: which mig-parted and device-plugin config every node is labelled with.
//!
//! In: the plan's nodes and the spec's pools. Out, under `nodes/`:
//! - `labels/node-labels.yaml`: for named nodes, label-only `Node` documents meant for server-side
//!   apply. Each carries the annotation [`LABEL_PATCH_ANNOTATION`] and the GitOps tools' "never
//!   prune or delete" annotations;
//! - `guard.yaml`: a `ValidatingAdmissionPolicy` (and its binding) that refuses to CREATE a Node
//!   carrying that annotation, so applying a patch for a node that does not exist fails loudly
//!   instead of creating a phantom Node (Argo CD applies it first, sync wave -2);
//! - `nodes.json`: the same assignments as a plain list for other tooling;
//! - `autoscaled/<pool>.yaml`: for autoscaled pools, the labels and taints the node template
//!   must carry (one entry per distinct layout), for a Karpenter NodePool or a node group.
//!
//! Guarantee: nothing here can create a Node once the guard is active; see `docs/bundle.md`.

use std::collections::BTreeMap;

use serde::Serialize;

use super::names::layout_name;
use super::nvidia::{Metadata, managed_labels, node_capacity};
use super::objects::{
    DEVICE_PLUGIN_LABEL, LABEL_PATCH_ANNOTATION, LAYOUT_LABEL, MIG_CONFIG_LABEL, POOL_LABEL, SYNC_WAVE,
};
use super::{join_documents, paths, to_yaml};
use crate::diagnostics::Diagnostic;
use crate::plan::{NodePlan, Plan, PoolPlan};
use crate::spec::Spec;

/// The name of the admission policy that refuses phantom Nodes.
pub(super) const GUARD_NAME: &str = "gpuplan-no-phantom-nodes";

/// The labels gpuplan puts on one node (or node template).
pub(crate) fn node_labels(pool: &PoolPlan, node: &NodePlan) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (MIG_CONFIG_LABEL.to_owned(), node.mig_config.clone()),
        (DEVICE_PLUGIN_LABEL.to_owned(), node.device_plugin_config.clone()),
        (LAYOUT_LABEL.to_owned(), layout_name(node)),
        (POOL_LABEL.to_owned(), pool.name.clone()),
    ]);
    labels.extend(super::dra::node_labels(node));
    labels
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct NodePatch {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeEntry<'a> {
    node: &'a str,
    pool: &'a str,
    gpu: &'a str,
    /// GPUs in the node.
    gpus: usize,
    autoscaled: bool,
    /// The labels gpuplan sets.
    labels: BTreeMap<String, String>,
    /// Labels the node already carries (the pool's `nodeSelector`); `""` means any value.
    node_selector: BTreeMap<String, String>,
    taints: Vec<TaintOut>,
    must_drain: bool,
    /// A node in transition: the two labels it carries now (what runs there until the
    /// cluster confirms its target; `gpuplan simulate` judges the synced part on them).
    #[serde(skip_serializing_if = "Option::is_none")]
    carries: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct AutoscaledPool<'a> {
    pool: &'a str,
    gpu: &'a str,
    /// One node group (or Karpenter NodePool) per distinct layout.
    node_groups: Vec<NodeGroup>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeGroup {
    /// How many of the planned nodes use this layout.
    nodes: usize,
    labels: BTreeMap<String, String>,
    taints: Vec<TaintOut>,
    /// Extended resources a node of this group advertises once the GPU Operator has applied
    /// its layout (what cluster-autoscaler must know to scale up from zero).
    resources: BTreeMap<String, u32>,
    /// The same as cluster-autoscaler node-template tags (AWS Auto Scaling group tags; other
    /// providers take the labels, taints and resources in their own node-group settings).
    cluster_autoscaler_tags: BTreeMap<String, String>,
}

/// cluster-autoscaler's node-template tags for a node group: labels, taints and resources.
fn autoscaler_tags(
    labels: &BTreeMap<String, String>,
    taints: &[TaintOut],
    resources: &BTreeMap<String, u32>,
) -> BTreeMap<String, String> {
    const PREFIX: &str = "k8s.io/cluster-autoscaler/node-template";
    let mut tags = BTreeMap::new();
    for (k, v) in labels {
        tags.insert(format!("{PREFIX}/label/{k}"), v.clone());
    }
    for t in taints {
        tags.insert(
            format!("{PREFIX}/taint/{}", t.key),
            format!("{}:{}", t.value.clone().unwrap_or_default(), t.effect),
        );
    }
    for (r, n) in resources {
        tags.insert(format!("{PREFIX}/resources/{r}"), n.to_string());
    }
    tags
}

#[derive(Clone, Debug, Serialize)]
struct TaintOut {
    key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    effect: String,
}

/// The label-only patch of one named node: never creates it (the guard), never pruned.
fn node_patch(spec: &Spec, node: &NodePlan, labels: BTreeMap<String, String>) -> Result<String, Diagnostic> {
    let mut annotations = BTreeMap::from([
        (LABEL_PATCH_ANNOTATION.to_owned(), "true".to_owned()),
        (SYNC_WAVE.to_owned(), "-1".to_owned()),
        (
            "argocd.argoproj.io/sync-options".to_owned(),
            "ServerSideApply=true,Prune=false,Delete=false".to_owned(),
        ),
        // Stays on the live Node when its patch leaves Git: Argo CD then ignores the
        // extraneous Node instead of reporting the app OutOfSync forever (issue 24).
        ("argocd.argoproj.io/compare-options".to_owned(), "IgnoreExtraneous".to_owned()),
        ("kustomize.toolkit.fluxcd.io/prune".to_owned(), "disabled".to_owned()),
    ]);
    if node.must_drain {
        annotations.insert("gpuplan.io/must-drain".to_owned(), "true".to_owned());
    }
    let mut all_labels = managed_labels(spec);
    all_labels.extend(labels);
    to_yaml(&NodePatch {
        api_version: "v1",
        kind: "Node",
        metadata: Metadata { name: node.name.clone(), namespace: None, labels: all_labels, annotations },
    })
}

/// Renders the files under `nodes/`.
pub(super) fn render(spec: &Spec, plan: &Plan) -> Result<BTreeMap<String, String>, Diagnostic> {
    let mut files = BTreeMap::new();
    files.insert(paths::NODES_GUARD.to_owned(), guard(spec)?);

    let mut patches = Vec::new();
    let mut held_back = Vec::new();
    let mut entries = Vec::new();
    for pool in &plan.pools {
        let pool_spec = spec.pool(&pool.name);
        let taints: Vec<TaintOut> = pool_spec
            .map(|p| {
                p.taints
                    .iter()
                    .map(|t| TaintOut {
                        key: t.key.clone(),
                        value: t.value.clone(),
                        effect: t.effect.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let node_selector: BTreeMap<String, String> =
            pool_spec.map(|p| p.node_selector.clone()).unwrap_or_default();
        let mut groups: BTreeMap<BTreeMap<String, String>, (usize, BTreeMap<String, u32>)> = BTreeMap::new();
        for node in &pool.nodes {
            let labels = node_labels(pool, node);
            entries.push(NodeEntry {
                node: &node.name,
                pool: &pool.name,
                gpu: &pool.gpu,
                gpus: node.gpus.len(),
                autoscaled: pool.autoscaled,
                labels: labels.clone(),
                node_selector: node_selector.clone(),
                taints: taints.clone(),
                must_drain: node.must_drain,
                carries: node.transition.as_ref().map(|t| {
                    BTreeMap::from([
                        (MIG_CONFIG_LABEL.to_owned(), t.carries.mig_config.clone()),
                        (DEVICE_PLUGIN_LABEL.to_owned(), t.carries.device_plugin_config.clone()),
                    ])
                }),
            });
            if pool.autoscaled {
                let group = groups.entry(labels).or_insert_with(|| (0, node_capacity(spec, plan, node)));
                group.0 += 1;
                continue;
            }
            let patch = node_patch(spec, node, labels)?;
            // A node whose layout changes is relabelled only after its drain (held back).
            if node.must_drain {
                held_back.push((node.name.clone(), patch));
            } else {
                patches.push(patch);
            }
        }
        if pool.autoscaled {
            let doc = AutoscaledPool {
                pool: &pool.name,
                gpu: &pool.gpu,
                node_groups: groups
                    .into_iter()
                    .map(|(labels, (nodes, resources))| {
                        let mut all = node_selector.clone();
                        all.retain(|_, v| !v.is_empty());
                        all.extend(labels.clone());
                        NodeGroup {
                            nodes,
                            cluster_autoscaler_tags: autoscaler_tags(&all, &taints, &resources),
                            labels,
                            taints: taints.clone(),
                            resources,
                        }
                    })
                    .collect(),
            };
            files.insert(
                format!("nodes/autoscaled/{}.yaml", pool.name),
                format!(
                    "# Labels and taints the node template of autoscaled pool `{}` must carry (see docs/bundle.md).\n# Not a Kubernetes object: copy them into the Karpenter NodePool or node group.\n{}",
                    pool.name,
                    to_yaml(&doc)?
                ),
            );
        }
    }
    if !patches.is_empty() {
        let header =
            "# Label-only Node patches, generated by gpuplan: server-side apply them; never create Nodes.\n";
        files.insert(paths::NODE_LABELS.to_owned(), format!("{header}{}", join_documents(&patches)));
    }
    for (node, patch) in held_back {
        let header = format!(
            "# The label patch of node `{node}`, whose MIG layout or sharing changes: held back until the node is\n# cordoned and drained; then apply it alone (docs/bundle.md, \"Nodes that must be drained\").\n"
        );
        files.insert(paths::node_drain(&node), format!("{header}{patch}"));
    }
    let mut json = serde_json::to_string_pretty(&entries)
        .map_err(|e| super::internal(format!("cannot serialise the node list: {e}")))?;
    json.push('\n');
    files.insert(paths::NODES_JSON.to_owned(), json);
    Ok(files)
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Policy {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: PolicySpec,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct PolicySpec {
    failure_policy: &'static str,
    match_constraints: MatchConstraints,
    validations: Vec<Validation>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct MatchConstraints {
    resource_rules: Vec<ResourceRule>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceRule {
    api_groups: Vec<&'static str>,
    api_versions: Vec<&'static str>,
    operations: Vec<&'static str>,
    resources: Vec<&'static str>,
}

#[derive(Debug, Serialize)]
struct Validation {
    expression: String,
    message: &'static str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Binding {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: BindingSpec,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct BindingSpec {
    policy_name: &'static str,
    validation_actions: Vec<&'static str>,
}

/// The admission policy that turns "apply a label patch for a missing node" into an error.
fn guard(spec: &Spec) -> Result<String, Diagnostic> {
    let metadata = || Metadata {
        name: GUARD_NAME.to_owned(),
        namespace: None,
        labels: managed_labels(spec),
        annotations: BTreeMap::from([(SYNC_WAVE.to_owned(), "-2".to_owned())]),
    };
    let policy = Policy {
        api_version: "admissionregistration.k8s.io/v1",
        kind: "ValidatingAdmissionPolicy",
        metadata: metadata(),
        spec: PolicySpec {
            failure_policy: "Fail",
            match_constraints: MatchConstraints {
                resource_rules: vec![ResourceRule {
                    api_groups: vec![""],
                    api_versions: vec!["v1"],
                    operations: vec!["CREATE"],
                    resources: vec!["nodes"],
                }],
            },
            validations: vec![Validation {
                expression: format!(
                    "!has(object.metadata.annotations) || !('{LABEL_PATCH_ANNOTATION}' in object.metadata.annotations)"
                ),
                message: "gpuplan only labels existing nodes: this node does not exist, so the label patch must not create it",
            }],
        },
    };
    let binding = Binding {
        api_version: "admissionregistration.k8s.io/v1",
        kind: "ValidatingAdmissionPolicyBinding",
        metadata: metadata(),
        spec: BindingSpec { policy_name: GUARD_NAME, validation_actions: vec!["Deny"] },
    };
    Ok(join_documents(&[to_yaml(&policy)?, to_yaml(&binding)?]))
}
