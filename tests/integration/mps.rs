//! MPS on whole GPUs (issue 22): the planner benchmark of small latency-bound models on L4s
//! (`tests/fixtures/mps/small-models.yaml`) plans with MPS, realises in the scheduling
//! simulation and uses fewer GPUs than with time-slicing only; the bundle configures
//! `sharing.mps`; `allowMps: false` and `migStrategy: mixed` behave as documented.

use std::path::Path;

use super::cli::gpuplan;

fn fixture() -> String {
    let path = format!("{}/tests/fixtures/mps/small-models.yaml", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).expect("the MPS fixture")
}

/// Compiles `manifest` into `dir/out` and returns `plan.json`.
fn compile(dir: &Path, manifest: &str) -> serde_json::Value {
    let path = dir.join("gpuplan.yaml");
    std::fs::write(&path, manifest).expect("write the manifest");
    let out = gpuplan().arg("compile").arg(&path).arg("-o").arg(dir.join("out")).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let plan = std::fs::read_to_string(dir.join("out/plan.json")).expect("plan.json");
    serde_json::from_str(&plan).expect("plan.json parses")
}

fn modes(plan: &serde_json::Value) -> Vec<String> {
    plan["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["nodes"].as_array().into_iter().flatten())
        .flat_map(|n| n["gpus"].as_array().into_iter().flatten())
        .map(|g| g["mode"]["mode"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn small_latency_bound_models_plan_with_mps_on_fewer_gpus_than_time_slicing_and_realise() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mps = compile(dir.path(), &fixture());
    assert!(modes(&mps).iter().any(|m| m == "mps"), "{:?}", modes(&mps));
    let sim = gpuplan()
        .arg("simulate")
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg(dir.path().join("gpuplan.yaml"))
        .output()
        .expect("runs");
    assert_eq!(sim.status.code(), Some(0), "{}", String::from_utf8_lossy(&sim.stdout));
    let config = std::fs::read_to_string(dir.path().join("out/gpu-operator/device-plugin-config.yaml"))
        .expect("device-plugin config");
    assert!(config.contains("mps:") && config.contains("failRequestsGreaterThanOne: true"), "{config}");
    let ts_dir = tempfile::tempdir().expect("temp dir");
    let ts =
        compile(ts_dir.path(), &fixture().replace("sharing: [mps, timeSlicing]", "sharing: [timeSlicing]"));
    assert!(!modes(&ts).iter().any(|m| m == "mps"));
    let used = |p: &serde_json::Value| p["quality"]["gpusUsed"].as_u64().expect("gpusUsed");
    // 12 replicas of compute 0.12–0.15 with a 25 ms SLO over a 10 ms baseline: time-slicing's
    // law admits three tenants a GPU (a fourth predicts 28 ms), MPS four (14 ms).
    assert_eq!((used(&mps), used(&ts)), (3, 4));
}

#[test]
fn a_model_that_refuses_mps_is_not_shared_by_mps() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manifest = fixture().replace(
        "- { name: asr, image: example.com/asr:1,",
        "- { name: asr, allowMps: false, image: example.com/asr:1,",
    );
    let plan = compile(dir.path(), &manifest);
    let asr_on_mps = plan["pools"][0]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|n| n["gpus"].as_array().into_iter().flatten())
        .filter(|g| g["mode"]["mode"] == "mps")
        .any(|g| g["tenants"].as_array().into_iter().flatten().any(|t| t["model"] == "asr"));
    assert!(!asr_on_mps, "{plan:#}");
}

#[test]
fn mps_with_the_mixed_mig_strategy_is_a_diagnostic() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("gpuplan.yaml");
    let manifest = fixture().replace("inventory:", "cluster: { migStrategy: mixed }\ninventory:");
    std::fs::write(&path, manifest).expect("write");
    let out = gpuplan().arg("validate").arg(&path).output().expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mps-with-mixed-mig-strategy") && err.contains("gpuplan.yaml:"), "{err}");
}
