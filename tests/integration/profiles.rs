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

// --- sweeps: p99 at several rates ----------------------------------------------------------------

/// One L4 node of four GPUs and a rate model `asr` (550 req/s, p99 40 ms, factor 1) with
/// these inline points on the L4.
fn rate_manifest(points: &[(f64, &str)]) -> String {
    let points: String = points
        .iter()
        .map(|(rps, latency)| {
            format!("\n        - {{ gpu: L4, profile: whole, rps: {rps}, latency: {latency} }}")
        })
        .collect();
    format!(
        r#"apiVersion: gpuplan.io/v1alpha1
kind: GpuPlan
metadata: {{ name: sweep }}
inventory: {{ pools: [{{ name: l4, gpu: L4, gpusPerNode: 4, nodes: [l4-1] }}] }}
models:
  - name: asr
    image: example.com/asr:1
    memory: 4GB
    latency: {{ p99: 40ms }}
    demand:
      rate: 550rps
      admissionFactor: 1
      points:{points}
"#
    )
}

fn rate_spec(text: &str) -> gpuplan::spec::Spec {
    let mut sources = Sources::new();
    let mut read = gpuplan::pipeline::no_measurement_files;
    gpuplan::pipeline::check_manifest(&mut sources, "sweep.yaml", text, &Catalog::builtin(), &mut read)
        .unwrap_or_else(|d| panic!("{}", render::human(&sources, &d.0, false)))
        .spec
}

/// Asserts that one of the (only) model's reasons, as `explain` shows them, contains `text`.
fn assert_reason(plan: &gpuplan::plan::Plan, text: &str) {
    let reasons = plan.models[0].reasons.join("\n");
    assert!(reasons.contains(text), "{reasons}");
}

fn replicas(plan: &gpuplan::plan::Plan) -> u32 {
    plan.models[0].groups.iter().map(|g| g.replicas).sum()
}

#[test]
fn a_sweep_sizes_by_the_rate_at_which_its_interpolated_p99_reaches_the_limit() {
    let catalog = Catalog::builtin();
    // One saturation point: 300 req/s at 30 ms, under the 40 ms limit: two replicas cover 550.
    let single = rate_spec(&rate_manifest(&[(300.0, "30ms")]));
    let plan = gpuplan::plan::plan(&single, &catalog).expect("plans");
    assert_eq!(replicas(&plan), 2);
    // The sweep says the p99 at 300 req/s is 60 ms: linear between 200 req/s (20 ms) and 300
    // (60 ms), 40 ms is reached at 250 req/s, so 550 req/s take three replicas.
    let sweep = rate_spec(&rate_manifest(&[(100.0, "8ms"), (200.0, "20ms"), (300.0, "60ms")]));
    let plan3 = gpuplan::plan::plan(&sweep, &catalog).expect("plans");
    assert_eq!(replicas(&plan3), 3);
    assert_reason(&plan3, "250.0 requests/s each (measured sweep on `L4` `whole` (batch 1, 3 points)");
    assert_reason(
        &plan3,
        "interpolated between 200.0 req/s (20.0 ms) and 300.0 req/s (60.0 ms) reaches the 40.0 ms limit",
    );
    assert!(gpuplan::verify::check(&sweep, &catalog, &plan3).is_empty());
    // The verifier applies the same rule: two replicas no longer cover the rate under the sweep.
    let short = gpuplan::verify::check(&sweep, &catalog, &plan);
    assert!(short.iter().any(|v| v.message.contains("500.0 requests/s covered, 550 asked")), "{short:?}");
}

#[test]
fn a_sweep_refuses_load_beyond_its_last_point_and_says_which() {
    let catalog = Catalog::builtin();
    // Both points are well under 40 ms, but nothing was measured above 200 req/s: a replica
    // carries at most 200, so 550 req/s take three (an extrapolation would have said two).
    let spec = rate_spec(&rate_manifest(&[(100.0, "8ms"), (200.0, "20ms")]));
    let plan = gpuplan::plan::plan(&spec, &catalog).expect("plans");
    assert_eq!(replicas(&plan), 3);
    assert_reason(
        &plan,
        "its last point (200.0 req/s, p99 20.0 ms, under the 40.0 ms limit): no load beyond the last measured point",
    );
    // A sweep whose lowest rate already misses the limit admits nothing: no extrapolation down.
    let spec = rate_spec(&rate_manifest(&[(100.0, "45ms"), (200.0, "90ms")]));
    let err = gpuplan::plan::plan(&spec, &catalog).expect_err("no admissible device");
    let text = format!("{err:?}");
    assert!(text.contains("no measured point on `L4` is admissible"), "{text}");
}

#[test]
fn measurements_import_sweep_takes_every_perf_analyzer_row() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("model.csv");
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/measurements/tools/perf-analyzer.csv");
    let run = super::cli::gpuplan()
        .args(["measurements", "import", file, "--gpu", "A100-SXM4-80GB", "--profile", "3g.40gb"])
        .args(["--batch-size", "8", "--sweep", "--out"])
        .arg(&out)
        .output()
        .expect("runs gpuplan");
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("added 3 points of A100-SXM4-80GB 3g.40gb batch 8")
    );
    let text = std::fs::read_to_string(&out).expect("written");
    let mut sources = Sources::new();
    let points = parse_csv_checked(&mut sources, "model.csv", &text, &Catalog::builtin()).expect("valid");
    let got: Vec<(f64, f64)> = points.iter().map(|p| (p.rps, p.latency_ms)).collect();
    assert_eq!(got, [(188.2, 5.602), (371.4, 5.893), (402.9, 11.007)]);
}
