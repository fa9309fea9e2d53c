//! The rollout, through the CLI: waves drain nodes in parallel where the PodDisruptionBudgets
//! allow, a held node missing from the cluster blocks no other node, and a config name never
//! changes its contents over a long history.

use std::collections::BTreeMap;
use std::path::Path;

use super::day2::{Dir, compile, nodes, plan_json, random_edit, read_tree, sequence_cases, start_history};
use super::transition::{configmaps, held, run};

/// Twenty one-GPU A100 nodes, one replica of `embed` on each (`spread: node`), with `budget`
/// as its `disruptionBudget` (none: the default `maxUnavailable: 1`) and `memory` GiB.
fn twenty(budget: Option<&str>, memory: u32) -> String {
    let nodes: Vec<String> = (1..=20).map(|i| format!("gpu-{i:02}")).collect();
    let budget = budget.map_or_else(String::new, |b| {
        format!("    deployment:\n      disruptionBudget: {{ maxUnavailable: {b} }}\n")
    });
    format!(
        "apiVersion: gpuplan.io/v1alpha1\nkind: GpuPlan\nmetadata:\n  name: twenty\ninventory:\n  pools:\n    - name: a100\n      gpu: A100-SXM4-80GB\n      gpusPerNode: 1\n      nodes: [{}]\nmodels:\n  - name: embed\n    image: registry.example.com/embed:1.0\n    memory: {memory}GiB\n    compute: 0.1\n    replicas: 20\n    spread: node\n{budget}",
        nodes.join(", ")
    )
}

/// Compiles the twenty nodes, then a memory change that re-partitions every one of them.
fn twenty_repartitioned(dir: &Path, budget: Option<&str>) -> serde_json::Value {
    std::fs::write(dir.join("m.yaml"), twenty(budget, 9)).expect("write");
    assert_eq!(run(&["compile", "m.yaml", "-o", "out", "--quiet"], dir).0, 0);
    std::fs::write(dir.join("m.yaml"), twenty(budget, 18)).expect("write");
    assert_eq!(run(&["compile", "m.yaml", "-o", "out", "--quiet"], dir).0, 0);
    let plan = plan_json(&dir.join("out"));
    assert_eq!(held(&plan).len(), 20, "the memory change re-partitions every node");
    plan
}

/// (nodes per wave, whether any wave goes below a budget).
fn wave_sizes(plan: &serde_json::Value) -> (Vec<usize>, bool) {
    let waves = plan["changes"]["waves"].as_array().cloned().unwrap_or_default();
    let sizes = waves.iter().map(|w| w["nodes"].as_array().map_or(0, Vec::len)).collect();
    let below = waves.iter().any(|w| w["belowBudget"].as_array().is_some_and(|b| !b.is_empty()));
    (sizes, below)
}

/// The example: one replica on each of 20 nodes. With `maxUnavailable: 25%` five nodes
/// drain at once (4 waves, not 20); with 50%, ten. The default `maxUnavailable: 1` allows one
/// replica down at a time, so its waves are one node each: the budget's word, never broken.
#[test]
fn waves_drain_nodes_in_parallel_where_the_budgets_allow() {
    for (budget, sizes) in [(Some("25%"), vec![5; 4]), (Some("50%"), vec![10; 2]), (None, vec![1; 20])] {
        let d = Dir::new(&format!("waves-{}", budget.unwrap_or("default").trim_end_matches('%')));
        let plan = twenty_repartitioned(&d.0, budget);
        assert_eq!(wave_sizes(&plan), (sizes, false), "budget {budget:?}");
        // The drain part lists the first wave only.
        let first = std::fs::read_to_string(d.0.join("out/nodes/drain/kustomization.yaml")).expect("drain");
        let listed = first.lines().filter(|l| l.starts_with("- ")).count();
        assert_eq!(listed, wave_sizes(&plan).0[0], "{first}");
    }
}

/// `kubectl get nodes -o json` for a cluster whose nodes carry what `plan` says they carry
/// (held nodes: what they carry; `confirm_all`: their targets, applied), without `absent`.
fn observed(plan: &serde_json::Value, absent: &[&str], confirm_all: bool) -> String {
    let items: Vec<serde_json::Value> = nodes(plan)
        .iter()
        .filter(|(name, _)| !absent.contains(&name.as_str()))
        .map(|(name, n)| {
            let c = if n["transition"].is_object() && !confirm_all { &n["transition"]["carries"] } else { n };
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {
                    "nvidia.com/mig.config": c["migConfig"],
                    "nvidia.com/device-plugin.config": c["devicePluginConfig"],
                    "nvidia.com/mig.config.state": "success",
                }},
            })
        })
        .collect();
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// A held node absent from `--observed` (gone from the cluster) stays held, is in no wave and
/// not in the drain part, its replicas count against the budget, and the other nodes' waves go
/// on; an observation that lists it again puts it back in the waves.
#[test]
fn a_held_node_missing_from_the_cluster_blocks_no_other_node() {
    let d = Dir::new("waves-missing");
    let plan = twenty_repartitioned(&d.0, Some("25%"));
    std::fs::write(d.0.join("nodes.json"), observed(&plan, &["gpu-01"], false)).expect("write");
    let (code, _, err) = run(&["compile", "m.yaml", "-o", "out", "--observed", "nodes.json"], &d.0);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("`gpu-01` is not in the `--observed` file"), "{err}");
    let after = plan_json(&d.0.join("out"));
    assert_eq!(after["changes"]["nodesMissing"], serde_json::json!(["gpu-01"]));
    assert_eq!(held(&after).len(), 20, "nothing is released without a confirmation");
    let in_waves: Vec<String> = after["changes"]["waves"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|w| {
            w["nodes"].as_array().into_iter().flatten().map(|n| n.as_str().unwrap_or("").to_owned())
        })
        .collect();
    assert_eq!(in_waves.len(), 19, "every other held node is in a wave");
    assert!(!in_waves.contains(&"gpu-01".to_owned()));
    // Its replica is down already: four more of the 25% budget per wave.
    assert_eq!(wave_sizes(&after), (vec![4, 4, 4, 4, 3], false));
    let drain = std::fs::read_to_string(d.0.join("out/nodes/drain/kustomization.yaml")).expect("drain");
    assert!(!drain.contains("gpu-01") && drain.contains("gpu-02"), "{drain}");
    assert!(d.0.join("out/nodes/drain/gpu-01.yaml").is_file(), "its own file stays, for its turn");
    assert_eq!(run(&["check", "m.yaml", "-o", "out"], &d.0).0, 0, "check right after compile is clean");
    let files = read_tree(&d.0.join("out"));
    assert_eq!(run(&["compile", "m.yaml", "-o", "out", "--quiet"], &d.0).0, 0);
    assert_eq!(files, read_tree(&d.0.join("out")), "a second compile changes no byte");
    // Back in the cluster: back in the waves.
    std::fs::write(d.0.join("nodes.json"), observed(&after, &[], false)).expect("write");
    assert_eq!(run(&["compile", "m.yaml", "-o", "out", "--observed", "nodes.json", "--quiet"], &d.0).0, 0);
    let back = plan_json(&d.0.join("out"));
    assert!(back["changes"]["nodesMissing"].is_null(), "{}", back["changes"]);
    assert_eq!(wave_sizes(&back), (vec![5; 4], false));
}

/// Multi-week histories (every other week `--from-scratch`) where the cluster applies every held
/// change each week: no mig-parted or device-plugin config name ever comes back with other
/// contents, also after it left the ConfigMaps (no node carried it any more).
#[test]
fn config_names_never_change_their_contents_over_a_history() {
    let mut failures = Vec::new();
    let mut dropped = 0;
    for seed in 9100..9100 + sequence_cases() {
        let Some((d, mut fleet, mut r)) = start_history("names", seed, 0xA24B_AED4_963E_E407) else {
            continue;
        };
        let mut ever: (BTreeMap<String, String>, BTreeMap<String, String>) = Default::default();
        let record = |ever: &mut (BTreeMap<String, String>, BTreeMap<String, String>),
                      out: &Path,
                      tag: &str,
                      failures: &mut Vec<String>| {
            let (migs, dps) = configmaps(out);
            for (seen, now, kind) in [(&mut ever.0, migs, "mig-parted"), (&mut ever.1, dps, "device-plugin")]
            {
                for (name, text) in now {
                    match seen.get(&name) {
                        Some(then) if *then != text => failures
                            .push(format!("{tag}: {kind} config `{name}` came back with other contents")),
                        _ => {
                            seen.insert(name, text);
                        }
                    }
                }
            }
        };
        let out = d.0.join("out");
        record(&mut ever, &out, &format!("seed {seed}, start"), &mut failures);
        for week in 0..8 {
            let before = plan_json(&out);
            let names_before = configmaps(&out).0;
            let (what, _, edited) = random_edit(&fleet, &before, &mut r, week);
            // Every other week a re-optimisation: layouts change, so configs come and go.
            let flags: &[&str] = if week % 2 == 1 { &["--from-scratch"] } else { &[] };
            if compile(&d.0, &edited, "out", flags) != 0 {
                continue;
            }
            fleet = edited;
            let tag = format!("seed {seed}, week {week} ({what})");
            record(&mut ever, &out, &tag, &mut failures);
            // The cluster applies every held change: the next compile releases them all.
            let nodes_json = d.0.join("nodes.json");
            std::fs::write(&nodes_json, observed(&plan_json(&out), &[], true)).expect("write");
            if compile(&d.0, &fleet, "out", &["--observed", &nodes_json.display().to_string()]) != 0 {
                failures.push(format!("{tag}: compile --observed failed"));
                continue;
            }
            record(&mut ever, &out, &format!("{tag}, all confirmed"), &mut failures);
            let names_now = configmaps(&out).0;
            if names_before.keys().any(|n| !names_now.contains_key(n)) {
                dropped += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
    assert!(dropped > 0, "no history dropped a config: the test checked nothing it claims");
}
