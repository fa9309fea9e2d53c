//! MPS on whole GPUs (issue 22): the planner benchmark of small latency-bound models on L4s
//! (`tests/fixtures/mps/small-models.yaml`) plans with MPS, realises in the scheduling
//! simulation and uses fewer GPUs than with time-slicing only; the bundle configures
//! `sharing.mps`; `allowMps: false` and `migStrategy: mixed` behave as documented. MPS is
//! chosen per node (`tests/fixtures/mps/per-node.yaml`): MPS nodes beside time-sliced ones in
//! one pool, never more GPUs than time-slicing alone, and a node leaving MPS drains.

use std::path::Path;

use super::cli::gpuplan;

fn fixture() -> String {
    fixture_named("small-models")
}

fn fixture_named(name: &str) -> String {
    let path = format!("{}/tests/fixtures/mps/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).expect("the MPS fixture")
}

/// A node of a plan: its name, device-plugin config, each GPU's mode and tenants' models.
type NodeView = (String, String, Vec<(String, Vec<String>)>);

/// Every node of `plan`.
fn nodes(plan: &serde_json::Value) -> Vec<NodeView> {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("").to_owned();
    plan["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["nodes"].as_array().into_iter().flatten())
        .map(|n| {
            let gpus = n["gpus"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|g| {
                    let tenants = g["tenants"].as_array().into_iter().flatten().map(|t| text(&t["model"]));
                    (text(&g["mode"]["mode"]), tenants.collect())
                })
                .collect();
            (text(&n["name"]), text(&n["devicePluginConfig"]), gpus)
        })
        .collect()
}

fn simulate(dir: &Path) {
    let sim = gpuplan()
        .arg("simulate")
        .arg("--out")
        .arg(dir.join("out"))
        .arg(dir.join("gpuplan.yaml"))
        .output()
        .expect("runs");
    assert_eq!(sim.status.code(), Some(0), "{}", String::from_utf8_lossy(&sim.stdout));
}

fn gpus_used(plan: &serde_json::Value) -> u64 {
    plan["quality"]["gpusUsed"].as_u64().expect("gpusUsed")
}

#[test]
fn mps_is_chosen_per_node_beside_time_sliced_nodes_and_uses_fewer_gpus_than_time_slicing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let plan = compile(dir.path(), &fixture_named("per-node"));
    simulate(dir.path());
    let nodes = nodes(&plan);
    let has = |mode: &str| nodes.iter().any(|(_, _, gpus)| gpus.iter().any(|(m, _)| m == mode));
    assert!(has("mps") && has("timeSliced"), "{nodes:?}");
    for (name, config, gpus) in &nodes {
        let modes: std::collections::BTreeSet<&str> =
            gpus.iter().map(|(m, _)| m.as_str()).filter(|m| *m != "unused").collect();
        assert!(modes.len() <= 1, "{name} mixes {modes:?}");
        // The node's device-plugin config is its mode's.
        if modes.contains("mps") {
            assert!(config.starts_with("gpuplan-mps-gpu-"), "{name}: {config}");
        }
        if modes.contains("timeSliced") {
            assert!(config.starts_with("gpuplan-ts-gpu-"), "{name}: {config}");
        }
        // `allowMps: false` keeps guardrails off MPS.
        assert!(!gpus.iter().any(|(m, t)| m == "mps" && t.iter().any(|x| x == "guardrails")), "{name}");
    }
    // The bundle: one device-plugin config per mode, each node labelled with its own, and
    // PLAN.md marking the MPS nodes only.
    let out = dir.path().join("out");
    let config = std::fs::read_to_string(out.join("gpu-operator/device-plugin-config.yaml")).expect("config");
    assert!(config.contains("mps:") && config.contains("timeSlicing:"), "{config}");
    let labels = std::fs::read_to_string(out.join("nodes/labels/node-labels.yaml")).expect("labels");
    let report = std::fs::read_to_string(out.join("PLAN.md")).expect("PLAN.md");
    for (name, config, gpus) in &nodes {
        let section = report.split("### ").find(|s| s.starts_with(&format!("`{name}`"))).unwrap_or("");
        let mps = gpus.iter().any(|(m, _)| m == "mps");
        assert_eq!(section.contains("**MPS node**"), mps, "{section}");
        if config != "default" {
            let patch = labels.split("---").find(|d| d.contains(&format!("name: {name}\n"))).unwrap_or("");
            assert!(patch.contains(&format!("nvidia.com/device-plugin.config: {config}")), "{patch}");
        }
    }
    let ts_dir = tempfile::tempdir().expect("temp dir");
    let ts_manifest =
        fixture_named("per-node").replace("sharing: [mps, timeSlicing]", "sharing: [timeSlicing]");
    let ts = compile(ts_dir.path(), &ts_manifest);
    assert!(!modes(&ts).iter().any(|m| m == "mps"));
    // MPS packs asr and tts four to a GPU (time-slicing's law three); the others time-slice.
    assert!(gpus_used(&plan) < gpus_used(&ts), "{} vs {}", gpus_used(&plan), gpus_used(&ts));
    assert_eq!(plan["quality"]["lowerBound"], plan["quality"]["gpusUsed"], "{:#}", plan["quality"]);
}

#[test]
fn an_autoscaled_pool_gets_mps_and_time_sliced_node_templates_that_realise() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manifest = fixture_named("per-node")
        .replace("nodes: [l4-1, l4-2, l4-3, l4-4, l4-5, l4-6]", "count: { min: 0, max: 6 }");
    let plan = compile(dir.path(), &manifest);
    simulate(dir.path());
    let configs: std::collections::BTreeSet<String> = nodes(&plan)
        .into_iter()
        .filter(|(_, _, gpus)| gpus.iter().any(|(m, _)| m != "unused"))
        .map(|(_, c, _)| c.split("-gpu-").next().unwrap_or("").to_owned())
        .collect();
    assert_eq!(configs, ["gpuplan-mps".to_owned(), "gpuplan-ts".to_owned()].into(), "{:?}", nodes(&plan));
}

#[test]
fn a_node_leaving_mps_is_a_sharing_change_held_for_its_drain_and_others_stay() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Three nodes: time-slicing alone needs the MPS node's GPUs too.
    let manifest = fixture_named("per-node").replace("l4-3, l4-4, l4-5, l4-6]", "l4-3]");
    let before = compile(dir.path(), &manifest);
    let on = |plan: &serde_json::Value, mode: &str| -> Vec<String> {
        nodes(plan)
            .into_iter()
            .filter(|(_, _, gpus)| gpus.iter().any(|(m, _)| m == mode))
            .map(|(n, _, _)| n)
            .collect()
    };
    let (mps_nodes, ts_nodes) = (on(&before, "mps"), on(&before, "timeSliced"));
    assert!(!mps_nodes.is_empty() && !ts_nodes.is_empty(), "{:?}", nodes(&before));
    // The same demand without `mps`: the MPS nodes change their sharing, the time-sliced
    // ones are kept as they are.
    let after =
        compile(dir.path(), &manifest.replace("sharing: [mps, timeSlicing]", "sharing: [timeSlicing]"));
    let pool_nodes = after["pools"][0]["nodes"].as_array().cloned().unwrap_or_default();
    let drained: Vec<String> = pool_nodes
        .iter()
        .filter(|n| n["mustDrain"] == true)
        .map(|n| n["name"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(drained, mps_nodes, "{:#}", after["changes"]);
    // Held back: each such node carries its MPS config until the drain is confirmed.
    for n in pool_nodes.iter().filter(|n| n["mustDrain"] == true) {
        assert_eq!(n["transition"]["phase"], "held", "{n:#}");
        let carried = n["transition"]["carries"]["devicePluginConfig"].as_str().unwrap_or("");
        assert!(carried.starts_with("gpuplan-mps-gpu-"), "{n:#}");
        let file = dir.path().join(format!("out/nodes/drain/{}.yaml", n["name"].as_str().unwrap_or("")));
        assert!(file.exists(), "{}", file.display());
    }
    let still = nodes(&after);
    for n in &ts_nodes {
        let was = nodes(&before).into_iter().find(|x| &x.0 == n);
        assert_eq!(still.iter().find(|x| &x.0 == n), was.as_ref(), "{n} was kept");
    }
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

/// A generated fleet of small shared models on one L4 pool allowing `mps` and `timeSlicing`
/// (seeded: some refuse MPS, some have a latency SLO, some are light enough for many tenants).
fn generated_fleet(seed: u64) -> gpuplan::spec::Spec {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    let mut next = |n: u64| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % n
    };
    let count = 4 + next(4);
    let mut models = Vec::new();
    let mut replicas = 0;
    for i in 0..count {
        let memory = 1_024 * (1 + next(6));
        let compute = 0.03 + 0.03 * next(5) as f64;
        let n = 1 + next(4) as u32;
        replicas += n;
        let mut m = gpuplan::bench::model(&format!("m{i}"), memory, compute, n);
        m.isolation = gpuplan::spec::Isolation::Shared;
        m.allow_mps = next(3) != 0;
        if next(2) == 0 {
            m.latency =
                Some(gpuplan::spec::Latency { p99_ms: 25.0, baseline_ms: Some(10.0), baseline_gpu: None });
        }
        models.push(m);
    }
    let gpn = 2 + next(3) as u32;
    let nodes = (1..=replicas.div_ceil(gpn)).map(|n| format!("l4-{n}")).collect();
    let mut pool = gpuplan::bench::pool("l4", gpuplan::bench::L4, gpn, nodes);
    pool.sharing.mps = true;
    gpuplan::bench::spec(&format!("fleet-{seed}"), vec![pool], models)
}

#[test]
fn allowing_mps_never_costs_more_gpus_than_time_slicing_alone_on_generated_fleets() {
    let catalog = gpuplan::bench::catalog();
    let mut any_mps = false;
    for seed in 0..6 {
        let with = generated_fleet(seed);
        let mut without = with.clone();
        without.pools[0].sharing.mps = false;
        let (a, b) = match (gpuplan::plan::plan(&with, &catalog), gpuplan::plan::plan(&without, &catalog)) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => panic!("seed {seed}: {:?} / {:?}", a.err(), b.err()),
        };
        assert!(gpuplan::verify::check(&with, &catalog, &a).is_empty(), "seed {seed}");
        assert!(
            a.quality.gpus.used <= b.quality.gpus.used,
            "seed {seed}: {} GPUs with MPS, {} without",
            a.quality.gpus.used,
            b.quality.gpus.used
        );
        any_mps |= a
            .pools
            .iter()
            .flat_map(|p| &p.nodes)
            .flat_map(|n| &n.gpus)
            .any(|g| matches!(g.mode, gpuplan::plan::GpuMode::Mps { .. }));
    }
    assert!(any_mps, "no generated fleet used MPS: the generator tests nothing");
}

#[test]
fn a_dra_pool_plans_a_mig_gpu_beside_mps_ones_on_one_node_and_realises() {
    // The DRA driver runs one MPS daemon per claim, so MIG and MPS GPUs may share a node there
    // (the device plugin's one-mode-per-node rule made this an internal error before).
    let uuids = |n: u32| {
        format!("[GPU-5e1e{n:04x}-0000-4000-8000-000000000000, GPU-5e1e{n:04x}-0000-4000-8000-000000000001]")
    };
    let manifest = format!(
        "apiVersion: gpuplan.io/v1alpha1
kind: GpuPlan
metadata: {{ name: dra-mig-mps }}
inventory:
  pools:
    - name: a100
      gpu: A100-SXM4-80GB
      gpusPerNode: 2
      nodes: [a-1, a-2]
      sharing: [mig, mps, timeSlicing]
      backend: dra
      current:
        - {{ node: a-1, gpus: [[], []], uuids: {} }}
        - {{ node: a-2, gpus: [[], []], uuids: {} }}
models:
  - {{ name: asr, isolation: shared, image: example.com/asr:1, memory: 4GiB, compute: 0.15, replicas: 4, latency: {{ p99: 25ms, baseline: 10ms }} }}
  - {{ name: big, image: example.com/big:1, memory: 30GiB, compute: 0.4, replicas: 2 }}
",
        uuids(1),
        uuids(2)
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let plan = compile(dir.path(), &manifest);
    simulate(dir.path());
    assert!(
        modes(&plan).iter().any(|m| m == "mps") && modes(&plan).iter().any(|m| m == "mig"),
        "{:?}",
        modes(&plan)
    );
}
