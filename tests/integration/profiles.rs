//! Measured-points files and the ParvaGPU artifact, read as the benchmark reads them.
//!
//! The ParvaGPU tests read the artifact's data vendored in `tests/data/parvagpu/` (provenance and
//! licence in its `README.md`).

use std::path::PathBuf;

use gpuplan::bench::parvagpu::{Dataset, Files, ImportOptions, bounds};
use gpuplan::catalog::Catalog;
use gpuplan::diagnostics::{Sources, render};
use gpuplan::measurements::{parse_csv_checked, to_csv};

#[test]
fn valid_measurement_files_parse() {
    let catalog = Catalog::builtin();
    insta::glob!("../fixtures/measurements/valid", "*.csv", |path| {
        let text = std::fs::read_to_string(path).expect("fixture is readable");
        let mut sources = Sources::new();
        match parse_csv_checked(&mut sources, "points.csv", &text, &catalog) {
            Ok(points) => insta::assert_snapshot!(to_csv(&points)),
            Err(d) => panic!("{}", render::human(&sources, &d.0, false)),
        }
    });
}

#[test]
fn invalid_measurement_files_are_reported_with_positions() {
    let catalog = Catalog::builtin();
    insta::glob!("../fixtures/measurements/invalid", "*.csv", |path| {
        let text = std::fs::read_to_string(path).expect("fixture is readable");
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut sources = Sources::new();
        let diags = parse_csv_checked(&mut sources, &name, &text, &catalog).expect_err("fixture is invalid");
        insta::assert_snapshot!(render::human(&sources, &diags.0, false));
    });
}

/// The folder of the vendored ParvaGPU artifact.
pub(crate) fn parvagpu_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/parvagpu")
}

/// The vendored ParvaGPU artifact, loaded as the benchmark loads it.
pub(crate) fn parvagpu_dataset(options: ImportOptions) -> Dataset {
    let dir = parvagpu_dir();
    let texts = Files::paths().into_iter().map(|(key, path)| {
        let text =
            std::fs::read_to_string(dir.join(&path)).unwrap_or_else(|e| panic!("cannot read `{path}`: {e}"));
        (key, text)
    });
    let mut sources = Sources::new();
    match Dataset::load(&mut sources, &Files::from_texts(texts), options) {
        Ok(d) => d,
        Err(diags) => panic!("{}", render::human(&sources, &diags.0, false)),
    }
}

const SCENARIOS: [&str; 6] = ["SLO1", "SLO2", "SLO3", "SLO4", "SLO5", "SLO6"];

#[test]
fn parvagpu_scenarios_have_the_published_model_counts() {
    let dataset = parvagpu_dataset(ImportOptions::default());
    let names: Vec<&str> = dataset.scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, SCENARIOS);
    let models: Vec<usize> = dataset.scenarios.iter().map(|s| s.models.len()).collect();
    assert_eq!(models, vec![6, 11, 11, 11, 11, 11]);
    let bert = &dataset.scenarios[0].models[0];
    assert_eq!((bert.model.as_str(), bert.rps, bert.slo_ms), ("bert", 19.0, 6434.0));
    // 11 files of 225 rows; 1,747 are measured (not `0,0`), 420 of them with one process.
    let points: Vec<_> = dataset.profiles.values().flatten().collect();
    assert_eq!(points.len(), 1747);
    assert_eq!(points.iter().filter(|p| p.processes == 1).count(), 420);
}

#[test]
fn parvagpu_one_process_lower_bounds_are_reproduced_from_the_profiles() {
    let catalog = Catalog::builtin();
    for truncate_slo in [false, true] {
        let dataset = parvagpu_dataset(ImportOptions { truncate_slo, ..ImportOptions::default() });
        let mut lower = Vec::new();
        let mut whole_mps3 = Vec::new();
        let mut whole_one = Vec::new();
        for scenario in &dataset.scenarios {
            let spec = dataset.spec(scenario, &catalog).expect("spec");
            let b = bounds(&spec, &catalog).expect("bounds");
            lower.push(b.lower_bound);
            whole_mps3.push(b.whole_mps3);
            whole_one.push(b.whole_one_process);
        }
        assert_eq!(lower, vec![1, 2, 4, 6, 12, 16], "truncate_slo = {truncate_slo}");
        assert_eq!(whole_mps3, vec![6, 11, 11, 11, 22, 22], "truncate_slo = {truncate_slo}");
        assert_eq!(whole_one, vec![6, 11, 11, 11, 24, 26], "truncate_slo = {truncate_slo}");
    }
}

#[test]
fn parvagpu_committed_plans_and_reruns_are_read() {
    let dataset = parvagpu_dataset(ImportOptions::default());
    let committed: Vec<u32> = SCENARIOS.iter().map(|s| dataset.deployments[*s].gpus()).collect();
    assert_eq!(committed, vec![2, 3, 5, 7, 13, 16]);
    let gpcs: Vec<u32> = SCENARIOS.iter().map(|s| dataset.deployments[*s].gpcs()).collect();
    assert_eq!(gpcs, vec![10, 20, 33, 48, 90, 112]);
    // ParvaGPU's committed plans rely on MPS inside MIG instances, which the device plugin refuses.
    assert!(SCENARIOS.iter().all(|s| dataset.deployments[*s].multi_process_segments() > 0));
    let one_process: Vec<Option<f64>> =
        SCENARIOS.iter().map(|s| dataset.reference_number(s, "rerun_maxproc1_gpus")).collect();
    assert_eq!(one_process, [2.0, 3.0, 5.0, 7.0, 14.0, 18.0].map(Some).to_vec());
}

#[test]
fn truncated_slos_reject_exactly_the_eight_rows_parvagpu_rejects() {
    let exact = parvagpu_dataset(ImportOptions::default());
    let cut = parvagpu_dataset(ImportOptions { truncate_slo: true, ..ImportOptions::default() });
    let mut differing = 0;
    for (e, c) in exact.scenarios.iter().zip(&cut.scenarios) {
        for (em, cm) in e.models.iter().zip(&c.models) {
            for p in &exact.profiles[&em.model] {
                if p.latency_ms < 0.45 * em.slo_ms && p.latency_ms >= 0.45 * cm.slo_ms {
                    differing += 1;
                }
            }
        }
    }
    assert_eq!(differing, 8);
}

#[test]
fn measurements_import_converts_tool_exports_into_points_that_load_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("model.csv");
    let tools = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/measurements/tools");
    for (file, profile, extra) in [
        ("perf-analyzer.csv", "3g.40gb", vec!["--batch-size", "8"]),
        ("genai-perf.json", "whole", vec![]),
        ("genai-perf.csv", "4g.40gb", vec![]),
    ] {
        let run = super::cli::gpuplan()
            .args([
                "measurements",
                "import",
                &format!("{tools}/{file}"),
                "--gpu",
                "NVIDIA A100-SXM4-80GB",
                "--profile",
                profile,
            ])
            .args(extra)
            .arg("--out")
            .arg(&out)
            .output()
            .expect("runs gpuplan");
        assert_eq!(run.status.code(), Some(0), "{file}: {}", String::from_utf8_lossy(&run.stderr));
    }
    let text = std::fs::read_to_string(&out).expect("written");
    let mut sources = gpuplan::diagnostics::Sources::new();
    let points =
        gpuplan::measurements::parse_csv_checked(&mut sources, "model.csv", &text, &Catalog::builtin())
            .expect("a valid measurements file");
    let got: Vec<(&str, u32, f64, f64)> =
        points.iter().map(|p| (p.profile.as_str(), p.batch_size, p.rps, p.latency_ms)).collect();
    assert_eq!(
        got,
        [("3g.40gb", 8, 402.9, 11.007), ("whole", 1, 6.41, 1655.3), ("4g.40gb", 1, 6.41, 1655.3)]
    );
    // The same point again is a duplicate: refused, the file unchanged.
    let again = super::cli::gpuplan()
        .args([
            "measurements",
            "import",
            &format!("{tools}/genai-perf.json"),
            "--gpu",
            "A100-SXM4-80GB",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("runs gpuplan");
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&out).expect("still there"), text);
}
