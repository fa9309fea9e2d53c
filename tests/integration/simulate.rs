//! `gpuplan simulate`: the bundle of every example and fixture plan survives hundreds of
//! adversarial arrival orders and a rolling update of every Deployment; a bundle that does not
//! pin its pods, or that surges without spare capacity, is caught.

use gpuplan::simulate::{Options, simulate};

use crate::bundle::bundle;
use crate::fixtures_plans as fx;

fn options() -> Options {
    Options { random_orders: 100, seed: 7 }
}

#[test]
fn every_fixture_bundle_places_every_pod_in_every_order_and_rolls_out() {
    for f in fx::all() {
        let b = bundle(&f);
        let report = simulate(&b.files, &options());
        assert!(report.ok(), "{}: {:#?}", f.name, report.problems);
        let planned: u32 = f.plan.models.iter().flat_map(|m| &m.groups).map(|g| g.replicas).sum();
        assert_eq!(report.pods, planned as usize, "{}: every planned replica is a pod", f.name);
        assert!(report.orders >= 100, "{}", f.name);
        assert_eq!(report.rollouts, report.deployments + 1, "{}", f.name);
    }
}

fn mixed_fleet() -> fx::Fixture {
    fx::all().into_iter().find(|f| f.name == "example-mixed-fleet-gpuplan").expect("mixed-fleet example")
}

/// The issue's failure: a Deployment whose node affinity lists several nodes lets the
/// scheduler put two replicas where the plan put one, and another model's pod stays Pending.
#[test]
fn unpinned_replicas_are_found_unschedulable_in_some_order() {
    let f = mixed_fleet();
    let mut b = bundle(&f);
    let text = b.files["workloads/rerank.yaml"]
        .replace(r#"values: ["a100-node-1"]"#, r#"values: ["a100-node-1", "a100-node-2"]"#)
        .replace(r#"values: ["a100-node-2"]"#, r#"values: ["a100-node-1", "a100-node-2"]"#);
    assert_ne!(text, b.files["workloads/rerank.yaml"], "the example changed: adapt this test");
    b.files.insert("workloads/rerank.yaml".into(), text);
    let report = simulate(&b.files, &options());
    assert!(report.problems.iter().any(|p| p.kind == "unschedulable"), "{report:#?}");
}

/// A surge where the node has no spare GPU never completes.
#[test]
fn a_surge_without_spare_capacity_is_a_stuck_rollout() {
    let f = mixed_fleet();
    let mut b = bundle(&f);
    let text = b.files["workloads/guardrails.yaml"]
        .replace("maxSurge: 0\n      maxUnavailable: 1", "maxSurge: 1\n      maxUnavailable: 0");
    assert_ne!(text, b.files["workloads/guardrails.yaml"], "the example changed: adapt this test");
    b.files.insert("workloads/guardrails.yaml".into(), text);
    let report = simulate(&b.files, &options());
    assert!(report.problems.iter().any(|p| p.kind == "rollout-stuck"), "{report:#?}");
    assert!(!report.problems.iter().any(|p| p.kind == "unschedulable"));
}

#[test]
fn a_bundle_without_its_configs_is_a_problem_not_a_panic() {
    let mut b = bundle(&mixed_fleet());
    b.files.remove("gpu-operator/mig-parted-config.yaml");
    let report = simulate(&b.files, &options());
    assert_eq!(report.problems.len(), 1);
    assert_eq!(report.problems[0].kind, "bundle");
    b.files.insert("gpu-operator/mig-parted-config.yaml".into(), "data: [".into());
    assert!(!simulate(&b.files, &options()).ok());
}
