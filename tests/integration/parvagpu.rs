//! The ParvaGPU SLO1 and SLO2 scenarios planned by the real planner and checked by the
//! independent verifier (the whole six-scenario run is `cargo bench --bench parvagpu`).
//!
//! Reads the vendored artifact (`tests/data/parvagpu/`) through `profiles::parvagpu_dataset`.

use gpuplan::bench::parvagpu::{ImportOptions, MAX_NODES, bounds, dra_spec};
use gpuplan::catalog::Catalog;
use gpuplan::verify::{check, figures};

use super::profiles::parvagpu_dataset;

fn plans_and_verifies(scenario: &str) {
    let dataset = parvagpu_dataset(ImportOptions::default());
    let catalog = Catalog::builtin();
    let scenario = dataset.scenario(scenario).expect("scenario exists");
    let spec = dataset.spec(scenario, &catalog).expect("spec");
    let plan = match gpuplan::plan::plan(&spec, &catalog) {
        Ok(plan) => plan,
        Err(d) => {
            panic!("no plan for {}: {:?}", scenario.name, d.iter().map(|d| &d.message).collect::<Vec<_>>())
        }
    };
    let violations = check(&spec, &catalog, &plan);
    assert!(violations.is_empty(), "{} fails verification: {violations:#?}", scenario.name);
    let v = figures(&spec, &catalog, &plan);
    assert_eq!(v.models.len(), scenario.models.len());
    let lower = bounds(&spec, &catalog).expect("bounds").lower_bound;
    let parvagpu_one_process =
        dataset.reference_number(&scenario.name, "rerun_maxproc1_gpus").expect("reference row") as u32;
    assert!(v.gpus_used >= lower, "{} GPUs is below the lower bound {lower}", v.gpus_used);
    assert!(
        v.gpus_used <= parvagpu_one_process,
        "{} uses {} GPUs, more than ParvaGPU with one process ({parvagpu_one_process})",
        scenario.name,
        v.gpus_used
    );
    // Same input, same plan.
    let again = gpuplan::plan::plan(&spec, &catalog).expect("plans twice");
    assert_eq!(
        serde_json::to_string(&plan).expect("plan serializes"),
        serde_json::to_string(&again).expect("plan serializes")
    );
}

#[test]
fn plans_parvagpu_slo1_within_the_one_process_baseline() {
    plans_and_verifies("SLO1");
}

#[test]
fn plans_parvagpu_slo2_within_the_one_process_baseline() {
    plans_and_verifies("SLO2");
}

/// ParvaGPU's MPS formulation through the DRA backend (`bench::parvagpu::dra_spec`): the plan
/// is verified, uses no more GPUs than ParvaGPU's committed plans (which run up to five MPS
/// processes per MIG instance), never fewer than the bound valid for every plan, and some device
/// runs several MPS processes. The six scenarios: `cargo bench --bench parvagpu -- --dra`.
fn dra_plans_within_parvagpu_with_mps(scenario: &str) {
    let dataset = parvagpu_dataset(ImportOptions::default());
    let catalog = Catalog::builtin();
    let scenario = dataset.scenario(scenario).expect("scenario exists");
    let spec = dra_spec(&dataset.spec(scenario, &catalog).expect("spec"), &catalog, MAX_NODES);
    let plan = gpuplan::plan::plan(&spec, &catalog).unwrap_or_else(|d| {
        panic!("no plan for {}: {:?}", scenario.name, d.iter().map(|d| &d.message).collect::<Vec<_>>())
    });
    let violations = check(&spec, &catalog, &plan);
    assert!(violations.is_empty(), "{} fails verification: {violations:#?}", scenario.name);
    let committed = dataset.deployments.get(&scenario.name).expect("committed deployment").gpus();
    let used = figures(&spec, &catalog, &plan).gpus_used;
    assert!(
        used <= committed,
        "{} uses {used} GPUs, more than ParvaGPU with MPS ({committed})",
        scenario.name
    );
    assert!(used >= plan.quality.gpus.lower_bound, "{}: below its own valid bound", scenario.name);
    assert!(
        plan.models.iter().flat_map(|m| &m.groups).any(|g| g.processes > 1),
        "{}: no device runs several MPS processes",
        scenario.name
    );
}

#[test]
fn dra_mps_plans_parvagpu_slo1_within_parvagpu_with_mps() {
    dra_plans_within_parvagpu_with_mps("SLO1");
}

#[test]
fn dra_mps_plans_parvagpu_slo2_within_parvagpu_with_mps() {
    dra_plans_within_parvagpu_with_mps("SLO2");
}

#[test]
fn without_dra_the_mps_points_stay_unused() {
    // The same scenario on the device plugin (autoscaled, `hardware`): one-process points only.
    let dataset = parvagpu_dataset(ImportOptions::default());
    let catalog = Catalog::builtin();
    let spec = dataset.spec(dataset.scenario("SLO1").expect("scenario"), &catalog).expect("spec");
    let plan = gpuplan::plan::plan(&spec, &catalog).expect("plans");
    assert!(plan.models.iter().flat_map(|m| &m.groups).all(|g| g.processes == 1));
}

/// Held-out variants (`tests/data/parvagpu/held-out/`: each published scenario's rates × 0.6,
/// 1.4 and 2.0, SLOs in whole ms) with the GPUs ParvaGPU's own scheduler (upstream C code,
/// five processes per instance) uses on each: `(name, spec, ParvaGPU GPUs)`.
fn held_out_variants() -> Vec<(String, gpuplan::spec::Spec, u32)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/parvagpu/held-out");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    let (rate, latency, results) =
        (read("SLO_req_rate.csv"), read("SLO_latency.csv"), read("parvagpu_results.csv"));
    let mut sources = gpuplan::diagnostics::Sources::new();
    let scenarios = gpuplan::bench::parvagpu::parse_scenarios(
        &mut sources,
        ("SLO_req_rate.csv", &rate),
        ("SLO_latency.csv", &latency),
        &gpuplan::bench::parvagpu::MODELS,
        ImportOptions::default(),
    )
    .expect("held-out SLO files");
    let dataset = parvagpu_dataset(ImportOptions::default());
    let catalog = Catalog::builtin();
    let gpus: Vec<u32> = results
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').next().and_then(|n| n.parse().ok()).expect("count"))
        .collect();
    assert_eq!(gpus.len(), scenarios.len(), "one ParvaGPU result per variant");
    scenarios
        .iter()
        .zip(gpus)
        .enumerate()
        .map(|(i, (s, n))| {
            let spec = gpuplan::bench::parvagpu::scenario_spec(s, &dataset.profiles, &catalog).expect("spec");
            (format!("H{}", i + 1), dra_spec(&spec, &catalog, MAX_NODES), n)
        })
        .collect()
}

/// Plans the held-out variants named (all when `None`) through DRA: each verified, none using
/// more GPUs than ParvaGPU's scheduler on the same variant.
fn held_out_within_parvagpu(only: Option<&[&str]>) {
    let catalog = Catalog::builtin();
    for (name, spec, parvagpu) in held_out_variants() {
        if only.is_some_and(|o| !o.contains(&name.as_str())) {
            continue;
        }
        let plan = gpuplan::plan::plan(&spec, &catalog).unwrap_or_else(|_| panic!("{name} plans"));
        let violations = check(&spec, &catalog, &plan);
        assert!(violations.is_empty(), "{name} fails verification: {violations:#?}");
        let used = figures(&spec, &catalog, &plan).gpus_used;
        assert!(used <= parvagpu, "{name}: {used} GPUs, ParvaGPU {parvagpu}");
    }
}

#[test]
fn held_out_small_variants_within_parvagpu_with_mps() {
    held_out_within_parvagpu(Some(&["H1", "H2", "H7", "H13"]));
}

/// All 18 variants (minutes in a debug build):
/// `cargo test --release --test integration held_out_all -- --ignored`.
#[test]
#[ignore = "minutes; run with --ignored (docs/dra.md)"]
fn held_out_all_variants_within_parvagpu_with_mps() {
    held_out_within_parvagpu(None);
}
