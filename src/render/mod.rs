//! Rendering: from a [`Plan`] (and the [`Spec`] it came from) to a [`Bundle`] of files.
//!
//! In: plan, spec, catalog and [`Templates`]. Out: relative path → file text, the GitOps bundle
//! laid out as `docs/bundle.md` describes — or diagnostics when a name would be unsafe in a
//! Kubernetes object or a file name, or when a (user) template fails or renders invalid YAML.
//!
//! Guarantees: deterministic (no timestamps, sorted keys, stable file names); no IO; templates
//! only ever see the view types of [`workloads`], never the manifest; every value a template
//! prints is escaped as a JSON-quoted YAML scalar (see [`workloads::yaml_escape`]), so no input
//! can inject YAML or start a second document; every rendered YAML document is parsed again
//! before it is returned. Names that end up in object names, label values and file names are
//! checked ([`names`]) and rejected with `unsafe-name` rather than escaped.

pub mod dra;
pub mod gitops;
pub(crate) mod names;
pub(crate) mod nodes;
pub mod nvidia;
pub(crate) mod report;
pub mod workloads;

use std::collections::BTreeMap;

use crate::catalog::Catalog;
use crate::diagnostics::{Diagnostic, Diagnostics, codes};
use crate::plan::Plan;
use crate::spec::Spec;

pub use workloads::Templates;

/// The generated files: relative path (with `/`) → contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bundle {
    pub files: BTreeMap<String, String>,
}

impl Bundle {
    /// The whole bundle as one text with a `==> path <==` header per file (snapshots, reviews).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (path, text) in &self.files {
            out.push_str("==> ");
            out.push_str(path);
            out.push_str(" <==\n");
            out.push_str(text);
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
        out
    }
}

/// Paths of the files every bundle has; the rest are named after nodes and workloads.
pub mod paths {
    pub const KUSTOMIZATION: &str = "kustomization.yaml";
    pub const PLAN_MD: &str = "PLAN.md";
    pub const PLAN_JSON: &str = "plan.json";
    pub const MIG_PARTED: &str = "gpu-operator/mig-parted-config.yaml";
    pub const DEVICE_PLUGIN: &str = "gpu-operator/device-plugin-config.yaml";
    pub const CLUSTER_POLICY: &str = "gpu-operator/cluster-policy-patch.yaml";
    pub const HELM_VALUES: &str = "gpu-operator/helm-values.yaml";
    pub const OPERATOR_KUSTOMIZATION: &str = "gpu-operator/kustomization.yaml";
    pub const OPERATOR_NAMESPACE: &str = "gpu-operator/namespace.yaml";
    pub const WORKLOADS_NAMESPACE: &str = "workloads/namespace.yaml";
    pub const NODES_GUARD: &str = "nodes/guard/guard.yaml";
    pub const NODES_GUARD_KUSTOMIZATION: &str = "nodes/guard/kustomization.yaml";
    pub const NODE_LABELS: &str = "nodes/labels/node-labels.yaml";
    pub const NODE_LABELS_KUSTOMIZATION: &str = "nodes/labels/kustomization.yaml";
    /// The label patch of a node held back for its drain (one file per node): not in the root
    /// kustomization.
    pub fn node_drain(node: &str) -> String {
        format!("nodes/drain/{node}.yaml")
    }
    pub const NODE_DRAIN_KUSTOMIZATION: &str = "nodes/drain/kustomization.yaml";
    pub const NODES_JSON: &str = "nodes/nodes.json";
    pub const NODES_KUSTOMIZATION: &str = "nodes/kustomization.yaml";
    pub const WORKLOADS_KUSTOMIZATION: &str = "workloads/kustomization.yaml";
    pub const ARGOCD: &str = "argocd/application.yaml";
    /// Argo CD's health check for Nodes on `nvidia.com/mig.config.state`: a merge patch for
    /// `argocd-cm`, outside the bundle's sync.
    pub const ARGOCD_NODE_HEALTH: &str = "argocd/argocd-cm-node-health.yaml";
    pub const FLUX: &str = "flux/kustomizations.yaml";
}

/// Names of the cluster-wide objects gpuplan owns.
pub mod objects {
    /// The mig-parted ConfigMap named by `migManager.config.name`.
    pub const MIG_PARTED_CONFIGMAP: &str = "gpuplan-mig-parted-config";
    /// The device-plugin ConfigMap named by `devicePlugin.config.name`.
    pub const DEVICE_PLUGIN_CONFIGMAP: &str = "gpuplan-device-plugin-config";
    /// Label naming a node's gpuplan layout (mig config + device-plugin config).
    pub const LAYOUT_LABEL: &str = "gpuplan.io/layout";
    /// Label naming the pool of a node (autoscaled node templates carry it).
    pub const POOL_LABEL: &str = "gpuplan.io/pool";
    pub const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";
    pub const DEVICE_PLUGIN_LABEL: &str = "nvidia.com/device-plugin.config";
    /// Annotation on label-only Node patches; the admission guard refuses to create a Node with it.
    pub const LABEL_PATCH_ANNOTATION: &str = "gpuplan.io/label-patch";
    pub const SYNC_WAVE: &str = "argocd.argoproj.io/sync-wave";
}

/// Renders the whole bundle. Collects every problem before failing.
pub fn render(
    spec: &Spec,
    catalog: &Catalog,
    plan: &Plan,
    templates: &Templates,
) -> Result<Bundle, Diagnostics> {
    let mut diags = Diagnostics::new();
    names::check(spec, plan, &mut diags);
    if diags.has_errors() {
        return Err(diags);
    }
    let mut files = Files { files: BTreeMap::new(), diags };
    operator_files(spec, catalog, plan, &mut files);
    node_files(spec, plan, &mut files);
    workload_files(spec, catalog, plan, templates, &mut files);
    files.put(
        paths::KUSTOMIZATION,
        gitops::kustomization(
            "",
            &[paths::OPERATOR_KUSTOMIZATION, paths::NODES_KUSTOMIZATION, paths::WORKLOADS_KUSTOMIZATION],
        ),
    );
    if let Some(argo) = &spec.cluster.output.argocd {
        files.put(paths::ARGOCD, gitops::argocd_application(spec, argo));
        files.files.insert(paths::ARGOCD_NODE_HEALTH.to_owned(), gitops::argocd_node_health(argo));
    }
    if let Some(flux) = &spec.cluster.output.flux {
        files.put(paths::FLUX, gitops::flux_kustomizations(spec, flux));
    }
    if dra::used(plan) {
        files.put(dra::DRIVER_VALUES, dra::driver_values(spec, catalog, plan));
        files.put(dra::EXPECTED_SLICES, dra::resource_slices(spec, catalog, plan));
    }
    match report::render(spec, catalog, plan) {
        Ok(report_files) => files.files.extend(report_files),
        Err(d) => files.diags.push(d),
    }
    files.put(paths::PLAN_JSON, plan_json(plan));
    let Files { files, diags } = files;
    if diags.has_errors() { Err(diags) } else { Ok(Bundle { files }) }
}

/// The files rendered so far and the problems found on the way.
struct Files {
    files: BTreeMap<String, String>,
    diags: Diagnostics,
}

impl Files {
    fn put(&mut self, path: &str, text: Result<String, Diagnostic>) {
        match text {
            Ok(text) => {
                self.files.insert(path.to_owned(), text);
            }
            Err(d) => self.diags.push(d),
        }
    }
}

/// `gpu-operator/`: the two ConfigMaps, the Namespace, the ClusterPolicy patch, Helm values.
fn operator_files(spec: &Spec, catalog: &Catalog, plan: &Plan, files: &mut Files) {
    files.put(paths::MIG_PARTED, nvidia::mig_parted_configmap(spec, catalog, plan));
    files.put(paths::DEVICE_PLUGIN, nvidia::device_plugin_configmap(spec, plan));
    let mut operator = vec![paths::MIG_PARTED, paths::DEVICE_PLUGIN];
    if spec.cluster.output.namespaces {
        files.put(paths::OPERATOR_NAMESPACE, gitops::namespace(spec, &spec.cluster.operator_namespace));
        operator.insert(0, paths::OPERATOR_NAMESPACE);
    }
    files.put(paths::OPERATOR_KUSTOMIZATION, gitops::kustomization("gpu-operator", &operator));
    if spec.cluster.output.cluster_policy_patch {
        files.put(paths::CLUSTER_POLICY, nvidia::cluster_policy_patch(spec));
    }
    if spec.cluster.output.helm_values {
        files.put(paths::HELM_VALUES, nvidia::helm_values(spec));
    }
}

/// `nodes/`: the guard, the auto-synced label patches, one held-back file per node to drain.
fn node_files(spec: &Spec, plan: &Plan, files: &mut Files) {
    let node_files = match nodes::render(spec, plan) {
        Ok(f) => f,
        Err(d) => return files.diags.push(d),
    };
    let listed = |path: &'static str| if node_files.contains_key(path) { vec![path] } else { Vec::new() };
    // Every held node's file; the pipeline narrows the list to the first wave.
    let drain_files: Vec<&str> =
        node_files.keys().map(String::as_str).filter(|p| p.starts_with("nodes/drain/")).collect();
    files.put(paths::NODES_GUARD_KUSTOMIZATION, gitops::kustomization("nodes/guard", &[paths::NODES_GUARD]));
    files.put(
        paths::NODE_LABELS_KUSTOMIZATION,
        gitops::kustomization("nodes/labels", &listed(paths::NODE_LABELS)),
    );
    files.put(paths::NODE_DRAIN_KUSTOMIZATION, gitops::kustomization("nodes/drain", &drain_files));
    // `nodes/drain` is deliberately not listed: it is synced by hand after the drain.
    files.put(
        paths::NODES_KUSTOMIZATION,
        gitops::kustomization("nodes", &[paths::NODES_GUARD_KUSTOMIZATION, paths::NODE_LABELS_KUSTOMIZATION]),
    );
    files.files.extend(node_files);
}

/// `workloads/`: the Deployments (with their DRA claims), budgets, Services and the Namespace.
fn workload_files(spec: &Spec, catalog: &Catalog, plan: &Plan, templates: &Templates, files: &mut Files) {
    let rendered = workloads::render(spec, plan, templates).and_then(|mut w| {
        dra::attach(spec, catalog, plan, &mut w)?;
        Ok(w)
    });
    let workload_files = match rendered {
        Ok(w) => w,
        Err(errors) => return files.diags.extend(errors),
    };
    let mut resources: Vec<&str> = Vec::new();
    let namespaces = spec.cluster.output.namespaces;
    if namespaces && spec.cluster.namespace != spec.cluster.operator_namespace {
        files.put(paths::WORKLOADS_NAMESPACE, gitops::namespace(spec, &spec.cluster.namespace));
        resources.push(paths::WORKLOADS_NAMESPACE);
    }
    resources.extend(workload_files.iter().filter(|(_, t)| !t.is_empty()).map(|(p, _)| p.as_str()));
    files.put(paths::WORKLOADS_KUSTOMIZATION, gitops::kustomization("workloads", &resources));
    files.files.extend(workload_files.into_iter().filter(|(_, t)| !t.is_empty()));
}

/// `plan.json`: the plan as pretty JSON with a trailing newline.
pub(crate) fn plan_json(plan: &Plan) -> Result<String, Diagnostic> {
    serde_json::to_string_pretty(plan)
        .map(|mut s| {
            s.push('\n');
            s
        })
        .map_err(|e| internal(format!("cannot serialise the plan: {e}")))
}

/// A failure of gpuplan itself found while rendering (a bug, not the user's mistake).
pub(crate) fn internal(message: impl Into<String>) -> Diagnostic {
    Diagnostic::error(codes::RENDER_FAILED, message)
        .with_help("this is a bug in gpuplan; please report it with the manifest that triggers it")
}

/// Serialises a document with serde-saphyr: no folded lines, so long values stay on one line.
pub(crate) fn to_yaml<T: serde::Serialize>(value: &T) -> Result<String, Diagnostic> {
    let options = serde_saphyr::ser_options! { folded_wrap_chars: usize::MAX, min_fold_chars: usize::MAX };
    serde_saphyr::to_string_with_options(value, options)
        .map_err(|e| internal(format!("cannot write YAML: {e}")))
}

/// Joins documents into one multi-document YAML file.
pub(crate) fn join_documents(docs: &[String]) -> String {
    let mut out = String::new();
    for (i, doc) in docs.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(doc);
        if !doc.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}
