//! The way down from the ratchet, through the CLI: under `changePolicy: minimal` additions land
//! on whatever is configured, and the price of stability grows; `PLAN.md`, `diff` and `plan.json`
//! name the smallest bounded re-optimisation that recovers most of it, and
//! `changePolicy.maxRepartitions` bounds how many running nodes one re-optimisation drains.

use std::path::Path;

use super::day2::{Dir, plan_json, read_tree};
use super::transition::{held, run};

/// `examples/mixed-fleet` with seven small replicas of a new model added (the issue's
/// measurement), the manifest's text.
fn mixed_fleet_with_seven_small_replicas(policy: &str) -> String {
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/mixed-fleet/gpuplan.yaml"))
            .expect("example");
    assert!(example.contains("\ndefaults:\n"), "the example changed: update this test");
    let with_policy = example.replacen("\ndefaults:\n", &format!("\n{policy}defaults:\n"), 1);
    format!(
        "{with_policy}  - name: asr\n    image: nvcr.io/nim/nvidia/parakeet-1-1b-ctc-en-us:1.0.0\n    ports: [{{ name: http, port: 8000 }}]\n    memory: 6GiB\n    compute: 0.1\n    replicas: 7\n"
    )
}

/// Compiles the example, then the example with seven small replicas added, into `dir/out`.
fn ratcheted(dir: &Path) {
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/mixed-fleet/gpuplan.yaml"))
            .expect("example");
    std::fs::write(dir.join("m.yaml"), example).expect("write");
    assert_eq!(run(&["compile", "m.yaml", "-o", "out", "--quiet"], dir).0, 0);
    std::fs::write(dir.join("m.yaml"), mixed_fleet_with_seven_small_replicas("")).expect("write");
    assert_eq!(run(&["compile", "m.yaml", "-o", "out", "--quiet"], dir).0, 0);
}

fn gpus(plan: &serde_json::Value) -> u64 {
    plan["quality"]["gpusUsed"].as_u64().expect("gpusUsed")
}

/// The advice is in `plan.json`, `PLAN.md`, `diff` and `diff --format json`; following it (a
/// bound of as many nodes as it names, a threshold of what it saves) saves exactly what it said,
/// holds exactly its nodes for a drain, and is a fixed point (`check` clean, same bytes).
#[test]
fn the_advice_names_a_bounded_reoptimisation_and_following_it_saves_what_it_said() {
    let d = Dir::new("ratchet-advice");
    ratcheted(&d.0);
    let out = d.0.join("out");
    let plan = plan_json(&out);
    let ch = &plan["changes"];
    let price = gpus(&plan) - ch["fromScratchGpus"].as_u64().expect("fromScratchGpus");
    assert!(price > 0, "additions on kept layouts cost more than a fresh plan");
    let advice = &ch["advice"];
    let nodes: Vec<String> = advice["nodes"]
        .as_array()
        .expect("advice")
        .iter()
        .map(|n| n.as_str().unwrap_or("").to_owned())
        .collect();
    let saved = advice["gpusSaved"].as_u64().expect("gpusSaved");
    assert!(!nodes.is_empty() && nodes.len() <= 3, "{nodes:?}");
    assert!(2 * saved >= price, "the advice recovers most of the price: {saved} of {price}");
    let plan_md = std::fs::read_to_string(out.join("PLAN.md")).expect("PLAN.md");
    assert!(plan_md.contains("way down: re-partition") && plan_md.contains(&format!("`{}`", nodes[0])));
    // `diff` over the committed bundle of the edit before (the manifest changed since).
    let (code, text, _) = run(&["diff", "m.yaml", "-o", "out"], &d.0);
    assert_eq!(code, 0);
    assert!(text.contains("Plan changes against the committed plan: none"), "{text}");
    assert!(text.contains(&format!("way down: re-partition `{}`", nodes[0])), "{text}");
    let (_, text, _) = run(&["--format", "json", "diff", "m.yaml", "-o", "out"], &d.0);
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(json["summary"]["advice"], *advice, "`diff --format json` has the advice");
    std::fs::write(
        d.0.join("m.yaml"),
        mixed_fleet_with_seven_small_replicas(&format!(
            "changePolicy: {{ maxRepartitions: {}, reoptimizeWhenSavingGpus: {saved} }}\n",
            nodes.len()
        )),
    )
    .expect("write");
    let (code, text, _) = run(&["--format", "json", "diff", "m.yaml", "-o", "out"], &d.0);
    assert_eq!(code, 1, "diff exits 1 when there is a change to apply");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(json["summary"]["gpusAfter"].as_u64(), Some(gpus(&plan) - saved), "{}", json["summary"]);
    assert_eq!(run(&["compile", "m.yaml", "-o", "out", "--quiet"], &d.0).0, 0);
    let after = plan_json(&out);
    assert_eq!(gpus(&after), gpus(&plan) - saved, "following the advice saves what it said");
    assert_eq!(held(&after).into_keys().collect::<Vec<_>>(), nodes, "exactly the advised nodes are held");
    assert_eq!(run(&["check", "m.yaml", "-o", "out"], &d.0).0, 0, "check right after compile is clean");
    let files = read_tree(&out);
    assert_eq!(run(&["compile", "m.yaml", "-o", "out", "--quiet"], &d.0).0, 0);
    assert_eq!(files, read_tree(&out), "a second compile changes no byte: the next step waits");
}

/// `--from-scratch` re-partitions as many running nodes as a fresh plan needs; with
/// `maxRepartitions: 1` it holds one, and still saves.
#[test]
fn max_repartitions_bounds_the_running_nodes_a_reoptimisation_drains() {
    let d = Dir::new("ratchet-bound");
    ratcheted(&d.0);
    let before = plan_json(&d.0.join("out"));
    let copy = |to: &str| super::day2::copy_dir(&d.0.join("out"), &d.0.join(to));
    copy("free");
    assert_eq!(run(&["compile", "m.yaml", "-o", "free", "--from-scratch", "--quiet"], &d.0).0, 0);
    let free = held(&plan_json(&d.0.join("free"))).len();
    assert!(free > 1, "the fresh plan drains {free} running node(s): the bound has nothing to bound");
    std::fs::write(
        d.0.join("m.yaml"),
        mixed_fleet_with_seven_small_replicas("changePolicy: { maxRepartitions: 1 }\n"),
    )
    .expect("write");
    assert_eq!(run(&["compile", "m.yaml", "-o", "out", "--from-scratch", "--quiet"], &d.0).0, 0);
    let bounded = plan_json(&d.0.join("out"));
    assert_eq!(held(&bounded).len(), 1, "one running node re-partitioned");
    assert!(gpus(&bounded) < gpus(&before), "and it saves");
}
