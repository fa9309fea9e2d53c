//! The latency model against the vendored H200 calibration runs (`tests/data/timeslicing/`):
//! the accuracy `docs/latency-model.md` states, on the fitted part and on the held-out part, and
//! `gpuplan latency` as users run it.

use gpuplan::plan::latency::{self, CalibrationFile, MemberPrediction, Sharing};

use super::cli::gpuplan;

fn data(file: &str) -> String {
    let dir = if file.contains("mps") { "mps" } else { "timeslicing" };
    format!("{}/tests/data/{dir}/{file}", env!("CARGO_MANIFEST_DIR"))
}

fn parse(file: &str) -> CalibrationFile {
    let text = std::fs::read_to_string(data(file)).expect("vendored calibration file");
    CalibrationFile::parse(&text).expect("calibration file parses")
}

fn rows(file: &str) -> Vec<MemberPrediction> {
    latency::evaluate(&parse(file))
}

/// (members, accepted, accepted within ±25% of the measured p99).
fn score<'a>(rows: impl IntoIterator<Item = &'a MemberPrediction>) -> (usize, usize, usize) {
    let (mut n, mut accepted, mut within) = (0, 0, 0);
    for r in rows {
        n += 1;
        if let Some(p) = r.predicted_p99_ms {
            accepted += 1;
            within += usize::from((0.75..=1.25).contains(&(p / r.measured_p99_ms)));
        }
    }
    (n, accepted, within)
}

/// The four vendored files: two time-slicing runs, two MPS-against-time-slicing pairs files.
const FILES: [&str; 4] = [
    "h200-2026-11-29.json",
    "h200-2026-11-30.json",
    "h200-mps-vs-ts-2026-12-01-a.json",
    "h200-mps-vs-ts-2026-12-01-b.json",
];

/// gpuplan's own harness (`tests/data/mps/measure.py`, `measure_cpus.py`), each file stating its
/// light-load factor and its host's cores: fitted on by the MPS law only (its time-slicing
/// halves are scored, not fitted on).
const MPS_FILES: [&str; 3] = [
    "h200-mps-vs-ts-2026-12-02.json",
    "h200-mps-vs-ts-2026-12-02-16cpu.json",
    "h200-mps-vs-ts-2026-12-02-4cpu.json",
];

/// Every vendored file: [`FILES`], then [`MPS_FILES`].
fn files() -> Vec<CalibrationFile> {
    FILES.iter().chain(MPS_FILES.iter()).map(|f| parse(f)).collect()
}

/// What the laws are fitted on, by index into [`files`]: every law on [`FILES`], the MPS laws
/// also on [`MPS_FILES`].
fn fitted(i: usize, sharing: Sharing) -> bool {
    sharing == Sharing::Mps || i < FILES.len()
}

fn of(rows: &[MemberPrediction], sharing: Sharing) -> Vec<&MemberPrediction> {
    rows.iter().filter(|r| r.sharing == sharing).collect()
}

/// The scenario families of `docs/latency-model.md` (by the runs' scenario names).
fn family(scenario: &str) -> &'static str {
    if scenario.contains("_rep") {
        "repeats"
    } else if scenario.contains("_x") {
        "copies"
    } else if scenario.contains("llm") {
        "noisy neighbour"
    } else if scenario.contains("closed") {
        "closed loop"
    } else if scenario.matches('_').count() == 0 {
        "alone"
    } else {
        "pairs"
    }
}

/// The held-out criterion of issue 14: ≥ 80% of the accepted members within ±25%, at least
/// half of all members accepted.
fn meets_criterion((n, accepted, within): (usize, usize, usize)) -> bool {
    within * 5 >= accepted * 4 && accepted * 2 >= n
}

#[test]
fn the_laws_are_the_documented_fit_over_the_four_files() {
    assert_eq!(
        latency::fit(&files(), &|i, sh, _| fitted(i, sh)),
        latency::LAWS,
        "update docs/latency-model.md"
    );
}

#[test]
fn in_sample_counts_are_as_documented() {
    let got: Vec<_> = FILES
        .iter()
        .chain(MPS_FILES.iter())
        .map(|f| {
            let r = rows(f);
            (score(of(&r, Sharing::TimeSlicing)), score(of(&r, Sharing::Mps)))
        })
        .collect();
    assert_eq!(
        got,
        [
            ((16, 12, 11), (0, 0, 0)),
            ((36, 33, 31), (0, 0, 0)),
            ((19, 19, 15), (19, 19, 16)),
            ((17, 14, 9), (17, 17, 16)),
            ((30, 26, 24), (30, 30, 27)),
            ((17, 9, 7), (17, 9, 9)),
            ((9, 9, 7), (9, 9, 7)),
        ],
        "update docs/latency-model.md"
    );
}

/// A second harness: gpuplan's own re-implementation of the method, run on 2026-12-02
/// (`tests/data/mps/measure.py`), held out of the time-slicing fits. Its open-loop p99 sits
/// about half as far above the closed-loop p99 alone as in the reference files, so the file
/// states its own light-load factor, the one that fits its time-slicing half best (below), and
/// its host's 16 cores. With them the time-slicing law carries over (24 of 26) and the MPS law,
/// fitted on it with the others, predicts 27 of 30 (docs/latency-model.md, "A second harness").
const SECOND_HARNESS: &str = "h200-mps-vs-ts-2026-12-02.json";

#[test]
fn a_second_harness_is_scored_with_its_own_light_load_factor_as_documented() {
    let r = rows(SECOND_HARNESS);
    assert_eq!(
        (score(of(&r, Sharing::TimeSlicing)), score(of(&r, Sharing::Mps))),
        ((30, 26, 24), (30, 30, 27)),
        "update docs/latency-model.md"
    );
    // The stated factor is the Huber fit (δ = 0.15) over the time-slicing half, on a 0.1 grid.
    let huber = |x: f64| if x.abs() <= 0.15 { x * x / 2.0 } else { 0.15 * (x.abs() - 0.075) };
    let loss = |factor: f64| -> f64 {
        let mut file = parse(SECOND_HARNESS);
        file.light_load_over_closed_loop = Some(factor);
        latency::evaluate(&file)
            .iter()
            .filter(|r| r.sharing == Sharing::TimeSlicing)
            .filter_map(|r| r.predicted_p99_ms.map(|p| huber((p / r.measured_p99_ms).ln())))
            .sum()
    };
    let grid: Vec<f64> = (8..=16).map(|i| f64::from(i) / 10.0).collect();
    let best = grid.iter().copied().min_by(|a, b| loss(*a).total_cmp(&loss(*b))).expect("a grid");
    assert_eq!(Some(best), parse(SECOND_HARNESS).light_load_over_closed_loop);
}

/// Time-slicing, leave one file out: the laws refitted on the other three files, scored on the
/// held-out file's time-slicing members (open and closed loop).
#[test]
fn time_slicing_leave_one_file_out_meets_the_held_out_criterion() {
    let all = files();
    let mut got = Vec::new();
    for held in 0..FILES.len() {
        let laws = latency::fit(&all, &|i, sh, _| fitted(i, sh) && i != held);
        let rows = latency::evaluate_with(&all[held], &laws);
        got.push(score(of(&rows, Sharing::TimeSlicing)));
    }
    let total = got.iter().fold((0, 0, 0), |a, s| (a.0 + s.0, a.1 + s.1, a.2 + s.2));
    assert!(meets_criterion(total), "{got:?}");
    assert_eq!(got, [(16, 12, 10), (36, 33, 31), (19, 19, 14), (17, 14, 9)], "update docs/latency-model.md");
}

/// MPS, leave one scenario out over every MPS file (a scenario is a file's: the same name on
/// another host is another run): the laws refitted without it, scored on its MPS members. One
/// reference file holds a single open-loop MPS run, so leaving a file out would fit on too
/// little; per file, the held-out scores are as documented.
#[test]
fn mps_leave_one_scenario_out_meets_the_held_out_criterion() {
    let all = files();
    let mut got = vec![(0, 0, 0); all.len()];
    for (i, f) in all.iter().enumerate().filter(|(i, _)| fitted(*i, Sharing::Mps)) {
        let names: std::collections::BTreeSet<&str> =
            f.scenarios.iter().filter(|s| s.sharing == Sharing::Mps).map(|s| s.scenario.as_str()).collect();
        for held in names {
            let laws = latency::fit(&all, &|j, sh, s| fitted(j, sh) && !(j == i && s == held));
            let rows = latency::evaluate_with(f, &laws);
            let s = score(of(&rows, Sharing::Mps).into_iter().filter(|r| r.scenario == held));
            got[i] = (got[i].0 + s.0, got[i].1 + s.1, got[i].2 + s.2);
        }
    }
    let total = got.iter().fold((0, 0, 0), |a, s| (a.0 + s.0, a.1 + s.1, a.2 + s.2));
    assert!(meets_criterion(total), "{got:?}");
    assert_eq!(
        got,
        [(0, 0, 0), (0, 0, 0), (19, 19, 15), (17, 17, 16), (30, 30, 27), (17, 9, 9), (9, 9, 7)],
        "update docs/latency-model.md"
    );
}

#[test]
fn time_slicing_leave_one_family_out_meets_the_held_out_criterion() {
    let all = files();
    let mut got = Vec::new();
    for held in ["alone", "pairs", "copies", "repeats", "closed loop"] {
        let laws = latency::fit(&all, &|i, sh, s| fitted(i, sh) && family(s) != held);
        let rows: Vec<MemberPrediction> =
            all[..FILES.len()].iter().flat_map(|f| latency::evaluate_with(f, &laws)).collect();
        let s = score(of(&rows, Sharing::TimeSlicing).into_iter().filter(|r| family(&r.scenario) == held));
        got.push((held, s));
    }
    let total = got.iter().fold((0, 0, 0), |a, (_, s)| (a.0 + s.0, a.1 + s.1, a.2 + s.2));
    assert!(meets_criterion(total), "{got:?}");
    assert_eq!(
        got,
        [
            ("alone", (11, 10, 8)),
            ("pairs", (26, 19, 16)),
            ("copies", (30, 30, 23)),
            ("repeats", (9, 9, 9)),
            ("closed loop", (10, 10, 9))
        ],
        "update docs/latency-model.md"
    );
}

#[test]
fn every_refusal_is_outside_the_documented_range() {
    use gpuplan::plan::latency::mps::{
        MPS_MAX_NEIGHBOURS, MPS_MAX_OWN_LOAD, MPS_MAX_TOTAL_LOAD, MPS_MIN_THREAD_CAP,
    };
    let mut refused = 0;
    for file in FILES.iter().chain(MPS_FILES.iter()) {
        let parsed = parse(file);
        let rows = latency::evaluate(&parsed);
        for s in &parsed.scenarios {
            let closed = s.members.iter().filter(|m| m.closed_loop).count();
            let mixed = closed > 0 && closed < s.members.len();
            let total: f64 = s.members.iter().filter_map(|m| m.load).sum();
            for (i, m) in s.members.iter().enumerate() {
                let neighbours: f64 =
                    s.members.iter().enumerate().filter(|&(j, _)| j != i).filter_map(|(_, o)| o.load).sum();
                let own = m.load.unwrap_or(0.0);
                let range = match s.sharing {
                    Sharing::TimeSlicing => {
                        total > latency::MAX_TOTAL_LOAD + 1e-9
                            || own + latency::NEIGHBOUR_WEIGHT * neighbours
                                > latency::MAX_EFFECTIVE_LOAD + 1e-9
                            || s.members.len() > latency::MAX_NEIGHBOURS + 1
                    }
                    Sharing::Mps => {
                        total > MPS_MAX_TOTAL_LOAD + 1e-9
                            || own > MPS_MAX_OWN_LOAD + 1e-9
                            || s.members.len() > MPS_MAX_NEIGHBOURS + 1
                            || m.thread_cap.is_some_and(|c| c < MPS_MIN_THREAD_CAP - 1e-9)
                    }
                };
                let outside = mixed || (closed == 0 && range) || !parsed.capacity.contains_key(&m.name);
                let predicted = rows
                    .iter()
                    .filter(|r| r.scenario == s.scenario && r.sharing == s.sharing)
                    .nth(i)
                    .and_then(|r| r.predicted_p99_ms);
                assert_eq!(predicted.is_none(), outside, "{file} {} {:?} {}", s.scenario, s.sharing, m.name);
                refused += usize::from(outside);
            }
        }
    }
    // Documented in docs/latency-model.md: 4 in the first time-slicing file, 3 in the second,
    // 3 time-slicing members of the reference pairs files, no MPS member there; in gpuplan's
    // own harness 4 time-slicing members of the first file and the 16 members (8 each way) of
    // the noisy-neighbour runs next to a saturating llm.
    assert_eq!(refused, 30, "update docs/latency-model.md");
}

#[test]
fn latency_command_prints_one_json_object_per_member() {
    let out = gpuplan()
        .args(["--format", "json", "latency"])
        .arg(data("h200-2026-11-29.json"))
        .output()
        .expect("runs gpuplan");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let list = value.as_array().expect("a list");
    assert_eq!(list.len(), 16);
    let refused = list
        .iter()
        .find(|o| o["scenario"] == "asr30_llmclosed" && o["member"] == "asr")
        .expect("the noisy-neighbour run");
    assert!(refused["predicted_p99_ms"].is_null());
    assert_eq!(refused["measured_p99_ms"], 23.617);
    assert!(list.iter().all(|o| o.get("predicted_p99_ms").is_some() && o["measured_p99_ms"].is_number()));
}

#[test]
fn latency_command_reads_the_pairs_format_with_one_row_per_member_and_sharing_mode() {
    let out =
        gpuplan().args(["--format", "json", "latency"]).arg(data(FILES[3])).output().expect("runs gpuplan");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("a JSON list");
    assert_eq!(rows.len(), 34, "17 members under each mode");
    let mps: Vec<&serde_json::Value> = rows.iter().filter(|r| r["sharing"] == "mps").collect();
    assert_eq!(mps.len(), 17);
    assert!(rows.iter().all(|r| r["sharing"] == "mps" || r["sharing"] == "time-slicing"));
    assert!(rows.iter().all(|r| r["measured_p99_ms"].is_number()));
    // asr at 45% next to emb at 45%: refused under time-slicing (90% of the GPU), predicted under MPS.
    let pick = |sharing: &str| {
        rows.iter().find(|r| r["scenario"] == "asr45_emb45" && r["sharing"] == sharing).expect("the member")
    };
    assert!(pick("time-slicing")["predicted_p99_ms"].is_null());
    assert!(pick("mps")["predicted_p99_ms"].is_number());
    let human = gpuplan().arg("latency").arg(data(FILES[3])).output().expect("runs gpuplan");
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("mps: 17 of 17 members predicted; 16 of 17 within"), "{text}");
}

#[test]
fn latency_command_rejects_a_file_that_is_not_a_calibration_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bad.json");
    std::fs::write(&path, "{\"scenarios\": 3}").expect("write");
    let out = gpuplan().arg("latency").arg(&path).output().expect("runs gpuplan");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("latency-file-invalid"));
}

// --- baselines across GPU types ------------------------------------------------------------------

/// A manifest with the `pools` lines and one dedicated model `asr` with `compute` and the
/// `latency` object's fields.
fn manifest(pools: &str, compute: &str, latency: &str) -> String {
    format!(
        r#"apiVersion: gpuplan.io/v1alpha1
kind: GpuPlan
metadata: {{ name: latency }}
inventory:
  pools:
{pools}
models:
  - name: asr
    image: example.com/asr:1
    memory: 4GB
    compute: {compute}
    replicas: 1
    isolation: dedicated
    latency: {{ {latency} }}
"#
    )
}

/// Two pools (L4 and H100) and a model with a 20 ms baseline; `baseline_gpu` is the
/// `latency.baselineGpu` field, if any.
fn two_pools(baseline_gpu: &str) -> String {
    let pools = "    - { name: l4, gpu: L4, gpusPerNode: 1, nodes: [l4-1] }\n    - { name: h100, gpu: H100-SXM5-80GB, gpusPerNode: 1, nodes: [h100-1] }";
    manifest(pools, "0.2", &format!("p99: 60ms, baseline: 20ms{baseline_gpu}"))
}

fn spec_of(text: &str) -> gpuplan::spec::Spec {
    let mut sources = gpuplan::diagnostics::Sources::new();
    let mut read = gpuplan::pipeline::no_measurement_files;
    let catalog = gpuplan::catalog::Catalog::builtin();
    gpuplan::pipeline::check_manifest(&mut sources, "baselines.yaml", text, &catalog, &mut read)
        .unwrap_or_else(|d| panic!("{d:?}"))
        .spec
}

fn baseline_on(spec: &gpuplan::spec::Spec, gpu: &str) -> Option<Result<f64, latency::Refusal>> {
    let catalog = gpuplan::catalog::Catalog::builtin();
    let latency = spec.models[0].latency.as_ref().expect("a latency objective");
    gpuplan::plan::rules::baseline_ms(latency, catalog.get(gpu).expect("in the catalog"))
}

#[test]
fn a_baseline_without_its_gpu_holds_on_every_gpu_type_with_a_warning() {
    let spec = spec_of(&two_pools(""));
    assert_eq!(baseline_on(&spec, "L4"), Some(Ok(20.0)));
    assert_eq!(baseline_on(&spec, "H100-SXM5-80GB"), Some(Ok(20.0)));
    let warned = |text: &str| {
        let mut sources = gpuplan::diagnostics::Sources::new();
        let mut read = gpuplan::pipeline::no_measurement_files;
        let catalog = gpuplan::catalog::Catalog::builtin();
        let checked = gpuplan::pipeline::check_manifest(&mut sources, "b.yaml", text, &catalog, &mut read)
            .map(|c| c.warnings)
            .unwrap_or_else(|d| panic!("{d:?}"));
        checked.0.iter().any(|d| d.code == "latency-baseline-gpu-unstated")
    };
    assert!(warned(&two_pools("")), "two GPU types, baseline GPU unstated");
    assert!(!warned(&two_pools(", baselineGpu: L4")));
    assert!(!warned(&whole_gpu_model("0.5")), "one GPU type: nothing to scale");
}

#[test]
fn a_baseline_measured_on_one_gpu_is_scaled_by_the_slower_of_bandwidth_and_tensor_throughput() {
    // Measured on an H100 SXM (3350 GB/s, 989 TFLOPS): on an L4 (300 GB/s, 121 TFLOPS) the
    // bandwidth ratio 11.17 is the larger of the two.
    let spec = spec_of(&two_pools(", baselineGpu: H100-80GB"));
    assert_eq!(baseline_on(&spec, "H100-SXM5-80GB"), Some(Ok(20.0)));
    let on_l4 = baseline_on(&spec, "L4").expect("a baseline").expect("scaled");
    assert!((on_l4 - 20.0 * 3350.0 / 300.0).abs() < 1e-9, "{on_l4}");
    // Measured on an L4: the H100 is faster by the smaller ratio, 989/121 = 8.17, not 11.17.
    let spec = spec_of(&two_pools(", baselineGpu: L4"));
    let on_h100 = baseline_on(&spec, "H100-SXM5-80GB").expect("a baseline").expect("scaled");
    assert!((on_h100 - 20.0 * 121.0 / 989.0).abs() < 1e-9, "{on_h100}");
    // A GPU without datasheet figures in the catalog: refused, not guessed.
    assert_eq!(
        baseline_on(&spec, "B200"),
        Some(Err(latency::Refusal::NoThroughput("L4".to_owned(), "B200".to_owned())))
    );
}

#[test]
fn the_planner_places_a_model_where_its_scaled_baseline_meets_the_objective() {
    let catalog = gpuplan::catalog::Catalog::builtin();
    // Measured on the H100: 223 ms predicted on the L4, above the 60 ms objective.
    let spec = spec_of(&two_pools(", baselineGpu: H100-SXM5-80GB"));
    let plan = gpuplan::plan::plan(&spec, &catalog).expect("a plan");
    let used: Vec<&str> = plan
        .pools
        .iter()
        .filter(|p| p.nodes.iter().flat_map(|n| &n.gpus).any(|g| !g.tenants.is_empty()))
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(used, ["h100"], "{:#?}", plan.pools);
    assert!(gpuplan::verify::check(&spec, &catalog, &plan).is_empty());
}

#[test]
fn an_unknown_baseline_gpu_is_one_unknown_gpu_diagnostic() {
    let mut sources = gpuplan::diagnostics::Sources::new();
    let mut read = gpuplan::pipeline::no_measurement_files;
    let catalog = gpuplan::catalog::Catalog::builtin();
    let text = two_pools(", baselineGpu: H1000");
    let err = gpuplan::pipeline::check_manifest(&mut sources, "b.yaml", &text, &catalog, &mut read)
        .map(|_| ())
        .expect_err("an error");
    let codes: Vec<String> = err.0.iter().map(|d| d.code.to_string()).collect();
    assert_eq!(codes, ["unknown-gpu"]);
}

// --- one range for every option -------------------------------------------------------------------

fn whole_gpu_model(compute: &str) -> String {
    let pools = "    - { name: h200, gpu: H200-SXM, gpusPerNode: 1, nodes: [h200-1] }";
    manifest(pools, compute, "p99: 1s, baseline: 20ms")
}

#[test]
fn an_exclusive_gpu_is_predicted_inside_the_range_and_placed_unverified_beyond_it() {
    let catalog = gpuplan::catalog::Catalog::builtin();
    // Own load 0.5, alone: the law predicts 20 / (1 − 0.5/0.75) = 60 ms; admitted.
    let spec = spec_of(&whole_gpu_model("0.5"));
    let plan = gpuplan::plan::plan(&spec, &catalog).expect("plans");
    assert!(plan.models[0].slo_unverified.is_empty());
    let p = gpuplan::plan::rules::whole_p99_ms(20.0, 0.5).expect("inside the range");
    assert!((p - 60.0).abs() < 1e-9, "{p}");
    // Own load 0.65 is beyond the calibrated 0.6 (alone, asr measured 15 ms at 60% and 147 ms at
    // 75%): no prediction, but nothing the planner could choose makes a replica alone on its
    // GPU faster, so it is placed, its SLO marked unverified with what to measure.
    let spec = spec_of(&whole_gpu_model("0.65"));
    let plan = gpuplan::plan::plan(&spec, &catalog).expect("placed, not refused");
    let why = plan.models[0].slo_unverified.join(" ");
    assert!(why.contains("above the calibrated 0.6"), "{why}");
    assert!(why.contains("gpuplan measurements import"), "{why}");
    // A `replicas` model has no points to record a measurement in: the sentence says so and
    // names the way to have it used (a `demand` with the sweep).
    assert!(why.contains("a `replicas` model has no measured points") && why.contains("`demand`"), "{why}");
    assert!(gpuplan::verify::check(&spec, &catalog, &plan).is_empty(), "the verifier agrees");
    // Inside the range and above the SLO, it is still refused: the prediction is an answer.
    let spec = spec_of(&whole_gpu_model("0.55").replace("p99: 1s", "p99: 30ms"));
    let err = gpuplan::plan::plan(&spec, &catalog).expect_err("refused");
    assert_eq!(err.0.first().map(|d| d.code.to_string()).as_deref(), Some("latency-slo-unreachable"));
}

#[test]
fn runs_outside_the_calibration_are_marked_uncalibrated() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("mig.json");
    std::fs::write(
        &path,
        r#"{"gpu": "A100-SXM4-80GB", "mig": "enabled", "capacity": {"asr": {"thr_rps": 500.0, "p99": 2.0}},
            "scenarios": [{"scenario": "asr30", "members": [{"name": "asr", "load": 0.3, "closed_loop": false, "p99": 6.0}]}]}"#,
    )
    .expect("write");
    let out = gpuplan().args(["--format", "json", "latency"]).arg(&path).output().expect("runs gpuplan");
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(value[0]["calibrated"], false);
    let out = gpuplan().arg("latency").arg(&path).output().expect("runs gpuplan");
    assert!(String::from_utf8_lossy(&out.stdout).contains("predictions are uncalibrated"));
    let out =
        gpuplan().args(["--format", "json", "latency"]).arg(data(FILES[1])).output().expect("runs gpuplan");
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(value.as_array().expect("a list").iter().all(|o| o["calibrated"] == true));
}

#[test]
fn the_verifier_judges_a_placement_by_the_scaled_baseline() {
    let catalog = gpuplan::catalog::Catalog::builtin();
    let l4 = "    - { name: l4, gpu: L4, gpusPerNode: 1, nodes: [l4-1] }";
    // Planned with the baseline taken as the L4's own: 20 ms / (1 − 0.2/0.75) = 27 ms, admitted.
    let unscaled = spec_of(&manifest(l4, "0.2", "p99: 60ms, baseline: 20ms"));
    let plan = gpuplan::plan::plan(&unscaled, &catalog).expect("a plan");
    assert!(gpuplan::verify::check(&unscaled, &catalog, &plan).is_empty());
    // The same placement, when the baseline was measured on an H100: 223 ms × 1.36 = 304.5 ms.
    let scaled = spec_of(&manifest(l4, "0.2", "p99: 60ms, baseline: 20ms, baselineGpu: H100-SXM5-80GB"));
    let violations = gpuplan::verify::check(&scaled, &catalog, &plan);
    assert!(
        violations.iter().any(|v| v.message.contains("predicted a p99 of 304.5 ms")),
        "the verifier must use the scaled baseline: {violations:?}"
    );
}
