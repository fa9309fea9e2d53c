//! The GitOps wiring: `kustomization.yaml` files and the optional Argo CD / Flux wrappers.
//!
//! In: the bundle's file paths and the spec's output options. Out: YAML text. The root
//! kustomization lists three sub-directories, each with its own kustomization, so that Flux can
//! apply them as `Kustomization`s chained with `dependsOn` (GPU Operator configs and
//! namespace → node guard → node labels → workloads) and Argo CD as one `Application` ordered by
//! sync waves on the objects (namespaces -3, guard -2, configs and node labels -1, workloads 0
//! and up). Label patches of nodes that must be drained first (`nodes/drain`) are in neither:
//! a second, manually synced Argo CD `Application` and a suspended Flux `Kustomization` carry
//! them (see `docs/bundle.md`, "Nodes that must be drained").

use std::collections::BTreeMap;

use serde::Serialize;

use super::nvidia::{Metadata, managed_labels};
use super::objects::SYNC_WAVE;
use super::to_yaml;
use crate::diagnostics::Diagnostic;
use crate::spec::{ArgoCd, Flux, Spec};

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Kustomization {
    api_version: &'static str,
    kind: &'static str,
    resources: Vec<String>,
}

/// A kustomization in `base` (a bundle directory, `""` for the root) listing `paths` (bundle
/// paths): files of the same directory by name, sub-kustomizations by directory.
pub(crate) fn kustomization(base: &str, paths: &[&str]) -> Result<String, Diagnostic> {
    let prefix = if base.is_empty() { String::new() } else { format!("{base}/") };
    let resources = paths
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(prefix.as_str()).unwrap_or(p);
            rel.strip_suffix("/kustomization.yaml").unwrap_or(rel).to_owned()
        })
        .collect();
    to_yaml(&Kustomization {
        api_version: "kustomize.config.k8s.io/v1beta1",
        kind: "Kustomization",
        resources,
    })
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Application {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: ApplicationSpec,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ApplicationSpec {
    project: &'static str,
    source: AppSource,
    destination: AppDestination,
    sync_policy: SyncPolicy,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct AppSource {
    #[serde(rename = "repoURL")]
    repo_url: String,
    path: String,
    target_revision: String,
}

#[derive(Debug, Serialize)]
struct AppDestination {
    server: &'static str,
    namespace: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SyncPolicy {
    #[serde(skip_serializing_if = "Option::is_none")]
    automated: Option<Automated>,
    sync_options: Vec<&'static str>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct NamespaceObject {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
}

/// A `Namespace` the bundle uses. Never pruned or deleted by Argo CD or Flux: removing the
/// bundle must not delete the namespace (and every object in it, the GPU Operator's included).
pub(super) fn namespace(spec: &Spec, name: &str) -> Result<String, Diagnostic> {
    to_yaml(&NamespaceObject {
        api_version: "v1",
        kind: "Namespace",
        metadata: Metadata {
            name: name.to_owned(),
            namespace: None,
            labels: managed_labels(spec),
            annotations: BTreeMap::from([
                (SYNC_WAVE.to_owned(), "-3".to_owned()),
                ("argocd.argoproj.io/sync-options".to_owned(), "Prune=false,Delete=false".to_owned()),
                ("kustomize.toolkit.fluxcd.io/prune".to_owned(), "disabled".to_owned()),
            ]),
        },
    })
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Automated {
    prune: bool,
    self_heal: bool,
}

/// Two Argo CD `Application`s: one syncing the bundle's root kustomization automatically, and
/// `gpuplan-<plan>-drain`, synced by hand, with the label patches of nodes to drain first.
pub(super) fn argocd_application(spec: &Spec, argo: &ArgoCd) -> Result<String, Diagnostic> {
    let base = argo.path.trim_end_matches('/');
    let app = |name: String, path: String, automated: bool| Application {
        api_version: "argoproj.io/v1alpha1",
        kind: "Application",
        metadata: Metadata {
            name,
            namespace: Some(argo.namespace.clone()),
            labels: managed_labels(spec),
            ..Metadata::default()
        },
        spec: ApplicationSpec {
            project: "default",
            source: AppSource {
                repo_url: argo.repo_url.clone(),
                path,
                target_revision: argo.target_revision.clone(),
            },
            destination: AppDestination {
                server: "https://kubernetes.default.svc",
                namespace: spec.cluster.namespace.clone(),
            },
            sync_policy: SyncPolicy {
                automated: automated.then_some(Automated { prune: true, self_heal: true }),
                sync_options: vec!["ServerSideApply=true", "CreateNamespace=true"],
            },
        },
    };
    let main = app(format!("gpuplan-{}", spec.name), argo.path.clone(), true);
    let drain = app(format!("gpuplan-{}-drain", spec.name), format!("{base}/nodes/drain"), false);
    Ok(super::join_documents(&[to_yaml(&main)?, to_yaml(&drain)?]))
}

/// Argo CD's resource health check for Nodes (`resource.customizations.health.Node` in
/// `argocd-cm`; core kinds take no group prefix, argoproj/argo-cd#29254): a Node is
/// Progressing while the MIG manager applies its `nvidia.com/mig.config` (`pending`,
/// `rebooting`), Degraded when it reports `failed`, Healthy on `success` or without the label
/// (no MIG manager there). With it, a sync waits for the Node patches of an earlier sync wave to
/// be applied before the workloads of a later wave, and `argocd app wait --health` on the drain
/// Application waits for a wave's nodes. The text is fixed: it is a file, not an object of the
/// bundle (`argocd-cm` lives in Argo CD's namespace, outside the bundle's sync).
pub fn argocd_node_health(argo: &ArgoCd) -> String {
    format!(
        r#"# Argo CD health check for Nodes on the MIG manager's `nvidia.com/mig.config.state` (docs/bundle.md).
# Not part of the bundle's sync: merge it into Argo CD's own ConfigMap once, for example
#   kubectl -n {ns} patch configmap argocd-cm --type merge --patch-file argocd/argocd-cm-node-health.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: {ns}
data:
  resource.customizations.health.Node: |
    hs = {{}}
    local labels = {{}}
    if obj.metadata ~= nil and obj.metadata.labels ~= nil then
      labels = obj.metadata.labels
    end
    local state = labels["nvidia.com/mig.config.state"]
    local config = labels["nvidia.com/mig.config"] or "(none)"
    if state == nil or state == "success" then
      hs.status = "Healthy"
      hs.message = "MIG config " .. config .. " applied"
    elseif state == "failed" then
      hs.status = "Degraded"
      hs.message = "the MIG manager failed to apply MIG config " .. config
    else
      hs.status = "Progressing"
      hs.message = "the MIG manager is applying MIG config " .. config .. " (" .. state .. ")"
    end
    return hs
"#,
        ns = argo.namespace
    )
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct FluxKustomization {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: FluxSpec,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct FluxSpec {
    interval: &'static str,
    path: String,
    prune: bool,
    wait: bool,
    /// How long `wait` waits for the objects to be ready (Flux's default is the interval): on
    /// the workloads, at least the longest startup allowance of a model's Deployments.
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<String>,
    /// Only the `drain` Kustomization is suspended: it is resumed by hand after the drain.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    suspend: bool,
    source_ref: SourceRef,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    depends_on: Vec<DependsOn>,
}

#[derive(Debug, Serialize)]
struct SourceRef {
    kind: &'static str,
    name: String,
}

#[derive(Debug, Serialize)]
struct DependsOn {
    name: String,
}

/// The Flux timeout of the workloads' Kustomization: the longest startup allowance of any
/// model's startup probe (`initialDelaySeconds + failureThreshold × periodSeconds`, the time the
/// kubelet gives a container to start), in whole minutes, and never under Flux's default of
/// the 10-minute interval: a slow model start must not fail the sync.
fn workloads_timeout(spec: &Spec) -> String {
    let allowance =
        spec.models.iter().map(|m| m.deployment.pod.startup_allowance_seconds()).max().unwrap_or(0);
    format!("{}m", allowance.div_ceil(60).max(10))
}

/// Five Flux `Kustomization`s: GPU Operator configs (and namespace), the node guard, node
/// labels, workloads — each waiting for the one before — and the suspended `drain`.
///
/// The guard has its own Kustomization because Flux applies only CRDs, Namespaces,
/// ClusterRoles and `*Class` kinds in an earlier stage: in one Kustomization, a Node patch could
/// reach the API server before the admission policy that refuses phantom Nodes.
pub(super) fn flux_kustomizations(spec: &Spec, flux: &Flux) -> Result<String, Diagnostic> {
    let base = flux.path.trim_end_matches('/');
    let name = |part: &str| format!("gpuplan-{}-{part}", spec.name);
    let mut docs = Vec::new();
    for (part, path, after, suspend) in [
        ("gpu-operator", "gpu-operator", None, false),
        ("node-guard", "nodes/guard", Some("gpu-operator"), false),
        ("node-labels", "nodes/labels", Some("node-guard"), false),
        ("workloads", "workloads", Some("node-labels"), false),
        ("drain", "nodes/drain", Some("node-guard"), true),
    ] {
        docs.push(to_yaml(&FluxKustomization {
            api_version: "kustomize.toolkit.fluxcd.io/v1",
            kind: "Kustomization",
            metadata: Metadata {
                name: name(part),
                namespace: Some(flux.namespace.clone()),
                labels: managed_labels(spec),
                ..Metadata::default()
            },
            spec: FluxSpec {
                interval: "10m",
                path: format!("{base}/{path}"),
                prune: true,
                wait: true,
                timeout: (part == "workloads").then(|| workloads_timeout(spec)),
                suspend,
                source_ref: SourceRef { kind: "GitRepository", name: flux.source_name.clone() },
                depends_on: after.map(|a| DependsOn { name: name(a) }).into_iter().collect(),
            },
        })?);
    }
    Ok(super::join_documents(&docs))
}
