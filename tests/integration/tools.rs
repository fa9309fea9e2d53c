//! Every bundle checked by the real Kubernetes tools: `kubectl kustomize` builds it and
//! `kubernetes-validate --strict` accepts every document for two Kubernetes versions.
//!
//! When a tool is missing, these tests FAIL if the environment variable `CI` is set (CI must
//! install them; `.ci/run` does) and otherwise print a note and pass, so that a developer
//! without the tools can still run `cargo test`. `kubernetes-validate` is found through
//! `GPUPLAN_KUBERNETES_VALIDATE` (set by `.ci/run`), else on `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;

use gpuplan::emit::{Mode, emit};

use crate::bundle::bundle;
use crate::fixtures_plans as fx;

/// Kubernetes versions every document must validate against.
const KUBERNETES_VERSIONS: &[&str] = &["1.33.0", "1.35.0"];

/// The tool, or `None` after printing a note (outside CI) — inside CI a missing tool fails.
#[allow(clippy::print_stderr)]
pub(crate) fn tool(program: &str, env_var: Option<&str>) -> Option<PathBuf> {
    let path =
        env_var.and_then(std::env::var_os).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(program));
    let found = Command::new(&path).arg("--help").output().is_ok_and(|o| o.status.success());
    if found {
        return Some(path);
    }
    if std::env::var_os("CI").is_some() {
        panic!("`{}` is not installed, and CI must run this test", path.display());
    }
    eprintln!("note: `{}` is not installed; skipping (this test fails in CI instead)", path.display());
    None
}

fn write_bundle(f: &fx::Fixture, dir: &Path) {
    emit(&bundle(f), dir, Mode::Write).expect("bundle written");
}

#[test]
fn every_bundle_builds_with_kubectl_kustomize() {
    let Some(kubectl) = tool("kubectl", None) else { return };
    for f in fx::all() {
        let root = tempfile::tempdir().expect("temp dir");
        let out = root.path().join("bundle");
        write_bundle(&f, &out);
        let run = Command::new(&kubectl).arg("kustomize").arg(&out).output().expect("kubectl runs");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{}: kubectl kustomize failed: {stderr}", f.name);
        let built = String::from_utf8_lossy(&run.stdout);
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(&built).expect("kustomize output parses");
        let built_deployments = docs.iter().filter(|d| d["kind"] == "Deployment").count();
        let rendered = crate::bundle::documents(&bundle(&f));
        let deployments = rendered.iter().filter(|(_, d)| d["kind"] == "Deployment").count();
        assert_eq!(built_deployments, deployments, "{}: kustomize output has every Deployment", f.name);
        assert!(deployments > 0 || f.plan.models.is_empty(), "{}", f.name);
        assert!(
            docs.iter()
                .any(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "gpuplan-mig-parted-config")
        );
    }
}

#[test]
fn every_document_validates_with_kubernetes_validate_strict() {
    let Some(validator) = tool("kubernetes-validate", Some("GPUPLAN_KUBERNETES_VALIDATE")) else { return };
    let root = tempfile::tempdir().expect("temp dir");
    let mut files = Vec::new();
    for f in fx::all() {
        let out = root.path().join(&f.name);
        write_bundle(&f, &out);
        for (path, text) in &bundle(&f).files {
            // Kubernetes objects only: kustomization files, Helm values and the autoscaled-pool
            // notes are not objects of the API (ClusterPolicy, Application and Flux
            // Kustomization are CRDs: the validator only warns about them).
            let object = path.ends_with(".yaml")
                && !path.ends_with("kustomization.yaml")
                && !path.ends_with("helm-values.yaml")
                && path != gpuplan::render::dra::DRIVER_VALUES
                && !path.starts_with("nodes/autoscaled/");
            if object {
                assert!(text.contains("apiVersion:"), "{path}");
                files.push(out.join(path));
            }
        }
    }
    assert!(files.len() >= 12, "only {} files to validate", files.len());
    for version in KUBERNETES_VERSIONS {
        let run = Command::new(&validator)
            .args(["--strict", "-k", version])
            .args(&files)
            .output()
            .expect("kubernetes-validate runs");
        let stdout = String::from_utf8_lossy(&run.stdout);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "kubernetes-validate -k {version} failed:\n{stdout}\n{stderr}");
        assert!(!stdout.contains("ERROR") && !stderr.contains("ERROR"), "{version}:\n{stdout}\n{stderr}");
    }
}

/// checkov finds nothing in the workloads of any bundle, beyond the checks `.checkov.yaml`
/// skips with a documented reason (docs/bundle.md, "Security scan").
#[test]
fn checkov_finds_nothing_left_in_the_workloads() {
    let Some(checkov) = tool("checkov", Some("GPUPLAN_CHECKOV")) else { return };
    // The workloads of every bundle, one folder each, scanned in one run (checkov skips
    // hidden folders, so not tempfile's default `.tmp` name).
    let root = tempfile::Builder::new().prefix("gpuplan-checkov-").tempdir().expect("temp dir");
    for f in fx::all() {
        for (path, text) in bundle(&f).files.iter().filter(|(p, _)| p.starts_with("workloads/")) {
            let file = root.path().join(&f.name).join(path);
            std::fs::create_dir_all(file.parent().expect("parent")).expect("folder");
            std::fs::write(file, text).expect("written");
        }
    }
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join(".checkov.yaml");
    let run = Command::new(&checkov)
        .arg("--config-file")
        .arg(&config)
        .args(["-o", "json", "-d"])
        .arg(root.path())
        .output()
        .expect("checkov runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("checkov output is not JSON ({e}): {stdout}\n{}", String::from_utf8_lossy(&run.stderr))
    });
    let reports = match report {
        serde_json::Value::Array(list) => list,
        one => vec![one],
    };
    let mut passed = 0;
    for r in &reports {
        let failed: Vec<String> = r["results"]["failed_checks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| format!("{} {} in {}", c["check_id"], c["check_name"], c["resource"]))
            .collect();
        assert!(failed.is_empty(), "checkov findings:\n{}", failed.join("\n"));
        passed += r["summary"]["passed"].as_u64().unwrap_or(0);
    }
    assert!(passed > 100, "checkov checked almost nothing: {passed} passed");
    assert!(run.status.success(), "checkov failed: {}", String::from_utf8_lossy(&run.stderr));
}

#[test]
fn an_empty_plan_still_builds() {
    let Some(kubectl) = tool("kubectl", None) else { return };
    let mut f = fx::time_sliced();
    f.spec.models.clear();
    f.plan.models.clear();
    f.plan.pools.clear();
    f.plan.device_plugin_configs.clear();
    let root = tempfile::tempdir().expect("temp dir");
    let out = root.path().join("bundle");
    write_bundle(&f, &out);
    assert!(!out.join("nodes/labels/node-labels.yaml").exists());
    let run = Command::new(&kubectl).arg("kustomize").arg(&out).output().expect("kubectl runs");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
}
