//! Every example under `examples/` compiles end to end through the real binary, and the seed's
//! voice pipeline compiles to the two-GPU bundle the product exists for.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cli::gpuplan;
use crate::emit::tree;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn examples() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs::read_dir(Path::new(ROOT).join("examples"))
        .expect("examples/ exists")
        .map(|e| e.expect("dir entry").path().join("gpuplan.yaml"))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    assert!(paths.len() >= 5, "expected at least five examples, found {paths:?}");
    paths
}

fn run(args: &[&str]) -> std::process::Output {
    gpuplan().args(args).current_dir(ROOT).output().expect("runs gpuplan")
}

fn compile(manifest: &Path, out: &Path) {
    let result = run(&["compile", &manifest.to_string_lossy(), "--out", &out.to_string_lossy()]);
    assert_eq!(
        result.status.code(),
        Some(0),
        "`gpuplan compile {}` failed:\n{}",
        manifest.display(),
        String::from_utf8_lossy(&result.stderr)
    );
}

#[test]
fn every_example_compiles_twice_to_identical_bytes_and_checks_clean() {
    for manifest in examples() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (first, second) = (dir.path().join("a"), dir.path().join("b"));
        compile(&manifest, &first);
        compile(&manifest, &second);
        let bundle = tree(&first);
        assert!(bundle.contains_key("kustomization.yaml") && bundle.contains_key("PLAN.md"));
        assert_eq!(bundle, tree(&second), "{} compiled to different bytes", manifest.display());

        let check =
            |out: &Path| run(&["check", &manifest.to_string_lossy(), "--out", &out.to_string_lossy()]);
        assert_eq!(check(&first).status.code(), Some(0), "check right after compile must pass");
        let edited = first.join("PLAN.md");
        let mut text = fs::read_to_string(&edited).expect("PLAN.md");
        text.push_str("\nA hand edit.\n");
        fs::write(&edited, text).expect("edit");
        let stale = check(&first);
        assert_eq!(stale.status.code(), Some(1), "check must fail after a hand edit");
        assert!(String::from_utf8_lossy(&stale.stderr).contains("PLAN.md"));
    }
}

#[test]
fn voice_pipeline_compiles_to_two_gpus_where_one_per_model_needs_three() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    compile(&Path::new(ROOT).join("examples/voice-pipeline/gpuplan.yaml"), &out);
    let plan: Value =
        serde_json::from_slice(&fs::read(out.join("plan.json")).expect("plan.json")).expect("json");
    assert_eq!(plan["quality"]["gpusUsed"], 2, "{:#}", plan["quality"]);
    assert_eq!(plan["quality"]["oneGpuPerReplica"], 3);

    // Which GPU hosts what: the LLM alone on a whole GPU, ASR and TTS on MIG instances of one GPU.
    let mut modes = Vec::new();
    for pool in plan["pools"].as_array().expect("pools") {
        for node in pool["nodes"].as_array().expect("nodes") {
            for gpu in node["gpus"].as_array().expect("gpus") {
                let tenants: Vec<&str> = gpu["tenants"]
                    .as_array()
                    .expect("tenants")
                    .iter()
                    .filter_map(|t| t["model"].as_str())
                    .collect();
                if !tenants.is_empty() {
                    modes.push((gpu["mode"]["mode"].as_str().expect("mode").to_owned(), tenants));
                }
            }
        }
    }
    modes.sort();
    assert_eq!(modes.len(), 2, "two GPUs in use: {modes:?}");
    let (mig, whole) = (&modes[0], &modes[1]);
    assert_eq!(mig.0, "mig");
    assert_eq!(whole.0, "whole");
    assert!(whole.1.iter().all(|m| m.contains("nemotron") || m.contains("llm")), "{whole:?}");
    assert!(mig.1.iter().any(|m| m.contains("asr")) && mig.1.iter().any(|m| m.contains("tts")), "{mig:?}");

    // The Deployments request exactly those resources: a whole GPU for the LLM, MIG for the rest.
    let mut deployments = 0;
    for (path, bytes) in
        tree(&out).iter().filter(|(p, _)| p.starts_with("workloads/") && p.ends_with(".yaml"))
    {
        let text = String::from_utf8_lossy(bytes);
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("rendered YAML parses");
        for doc in docs.iter().filter(|d| d["kind"] == "Deployment") {
            deployments += 1;
            let name = doc["metadata"]["name"].as_str().expect("name");
            let limits = doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
                .as_object()
                .expect("limits");
            let resources: Vec<&String> = limits.keys().filter(|k| k.starts_with("nvidia.com/")).collect();
            assert_eq!(resources.len(), 1, "{path}: {limits:?}");
            if name.contains("nemotron") {
                assert_eq!(limits["nvidia.com/gpu"], 1, "{path}");
            } else {
                assert!(resources[0].starts_with("nvidia.com/mig-"), "{path} requests {resources:?}");
            }
        }
    }
    assert_eq!(deployments, 3, "one Deployment per model");
}

#[test]
fn a_typo_in_a_field_name_is_reported_with_position_and_the_nearest_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = dir.path().join("gpuplan.yaml");
    let seed =
        fs::read_to_string(Path::new(ROOT).join("examples/voice-pipeline/gpuplan.yaml")).expect("seed");
    let typo = seed.replacen("replicas:", "replicsa:", 1);
    assert_ne!(seed, typo, "the seed manifest has a `replicas` field");
    fs::write(&manifest, &typo).expect("write");
    let out = dir.path().join("out");
    let result = run(&["compile", &manifest.to_string_lossy(), "--out", &out.to_string_lossy()]);
    assert_eq!(result.status.code(), Some(1));
    assert!(!out.exists(), "an invalid manifest wrote output");
    let stderr = String::from_utf8_lossy(&result.stderr);
    let line = typo.lines().position(|l| l.contains("replicsa:")).expect("typo line") + 1;
    let column = typo.lines().nth(line - 1).and_then(|l| l.find("replicsa")).expect("column") + 1;
    assert!(stderr.contains("unknown-field"), "{stderr}");
    assert!(stderr.contains(&format!("gpuplan.yaml:{line}:{column}")), "{stderr}");
    assert!(stderr.contains("`replicas`"), "no nearest-name hint:\n{stderr}");
}
