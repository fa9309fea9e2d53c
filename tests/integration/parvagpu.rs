//! The ParvaGPU SLO1 and SLO2 scenarios planned by the real planner and checked by the
//! independent verifier (the whole six-scenario run is `cargo bench --bench parvagpu`).
//!
//! Reads the vendored artifact (`tests/data/parvagpu/`) through `profiles::parvagpu_dataset`.

use gpuplan::bench::parvagpu::{ImportOptions, bounds};
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
