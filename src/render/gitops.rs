//! The GitOps wiring: `kustomization.yaml` files and the optional Argo CD / Flux wrappers.
//!
//! In: the bundle's file paths and the spec's output options. Out: YAML text. The root
//! kustomization lists three sub-directories, each with its own kustomization, so that Flux can
//! apply them as three `Kustomization`s chained with `dependsOn` (GPU Operator configs → node
//! labels → workloads) and Argo CD as one `Application` ordered by sync waves on the objects
//! (guard -2, configs and node labels -1, workloads 0).

use serde::Serialize;

use super::nvidia::{Metadata, managed_labels};
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
pub fn kustomization(base: &str, paths: &[&str]) -> Result<String, Diagnostic> {
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
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SyncPolicy {
    automated: Automated,
    sync_options: Vec<&'static str>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Automated {
    prune: bool,
    self_heal: bool,
}

/// An Argo CD `Application` syncing the bundle's root kustomization.
pub fn argocd_application(spec: &Spec, argo: &ArgoCd) -> Result<String, Diagnostic> {
    let app = Application {
        api_version: "argoproj.io/v1alpha1",
        kind: "Application",
        metadata: Metadata {
            name: format!("gpuplan-{}", spec.name),
            namespace: Some(argo.namespace.clone()),
            labels: managed_labels(spec),
            ..Metadata::default()
        },
        spec: ApplicationSpec {
            project: "default",
            source: AppSource {
                repo_url: argo.repo_url.clone(),
                path: argo.path.clone(),
                target_revision: argo.target_revision.clone(),
            },
            destination: AppDestination { server: "https://kubernetes.default.svc" },
            sync_policy: SyncPolicy {
                automated: Automated { prune: true, self_heal: true },
                sync_options: vec!["ServerSideApply=true"],
            },
        },
    };
    to_yaml(&app)
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

/// Three Flux `Kustomization`s: GPU Operator configs, then node labels, then workloads.
pub fn flux_kustomizations(spec: &Spec, flux: &Flux) -> Result<String, Diagnostic> {
    let base = flux.path.trim_end_matches('/');
    let mut docs = Vec::new();
    let mut previous: Option<String> = None;
    for part in ["gpu-operator", "nodes", "workloads"] {
        let name = format!("gpuplan-{}-{part}", spec.name);
        docs.push(to_yaml(&FluxKustomization {
            api_version: "kustomize.toolkit.fluxcd.io/v1",
            kind: "Kustomization",
            metadata: Metadata {
                name: name.clone(),
                namespace: Some(flux.namespace.clone()),
                labels: managed_labels(spec),
                ..Metadata::default()
            },
            spec: FluxSpec {
                interval: "10m",
                path: format!("{base}/{part}"),
                prune: true,
                wait: true,
                source_ref: SourceRef { kind: "GitRepository", name: flux.source_name.clone() },
                depends_on: previous.take().map(|name| DependsOn { name }).into_iter().collect(),
            },
        })?);
        previous = Some(name);
    }
    Ok(super::join_documents(&docs))
}
