//! The planner end to end on specs built in Rust: the seed voice pipeline, infeasible inputs,
//! time-slicing, spread, multi-GPU replicas, rate demand and determinism.

use std::collections::BTreeMap;

use gpuplan::catalog::Catalog;
use gpuplan::catalog::layout;
use gpuplan::plan::{GpuMode, Plan, plan};
use gpuplan::spec::{
    CurrentNode, Demand, Isolation, Latency, MeasuredPoint, Model, Nodes, Policy, Pool, RateDemand, Spec,
    Spread,
};

const A100: &str = "A100-SXM4-80GB";

fn pool(name: &str, gpu: &str, gpus_per_node: u32, nodes: Nodes) -> Pool {
    Pool {
        name: name.into(),
        gpu: gpu.into(),
        gpus_per_node,
        nodes,
        cost_per_gpu_hour: None,
        node_selector: BTreeMap::new(),
        taints: Vec::new(),
        current: Vec::new(),
        sharing: Default::default(),
        dra: None,
        span: None,
    }
}

fn named(names: &[&str]) -> Nodes {
    Nodes::Named(names.iter().map(|s| (*s).to_owned()).collect())
}

fn model(name: &str, memory_mib: u64, compute: f64, replicas: u32) -> Model {
    gpuplan::bench::model(name, memory_mib, compute, replicas)
}

/// The harness's spec ([`Spec::from_parts`]) with 0.9 time-slicing efficiency.
fn spec(pools: Vec<Pool>, models: Vec<Model>) -> Spec {
    let policy = Policy { time_slicing_efficiency: 0.9, ..gpuplan::bench::policy() };
    gpuplan::bench::spec_with("test", pools, models, policy)
}

/// The seed: ASR 9.6 GB, TTS 13.4 GB, LLM 73 GB whole GPU, one node of 2 × A100-SXM4-80GB.
fn voice() -> Spec {
    let mut llm = model("nemotron-llm", 69620, 1.0, 1);
    llm.gpus = Some(1);
    llm.llm = true;
    spec(
        vec![pool("a100", A100, 2, named(&["gpu-a-1"]))],
        vec![model("parakeet-asr", 9156, 0.15, 1), model("fastpitch-tts", 12780, 0.1, 1), llm],
    )
}

fn catalog() -> Catalog {
    Catalog::builtin()
}

/// Every MIG GPU of the plan re-validates with the catalog and matches its placements.
fn assert_valid_layouts(plan: &Plan, catalog: &Catalog) {
    for p in &plan.pools {
        let gpu = catalog.get(&p.gpu).expect("pool GPU in catalog");
        for n in &p.nodes {
            for g in &n.gpus {
                if let GpuMode::Mig { instances } = &g.mode {
                    let names: Vec<&str> = instances.iter().map(|i| i.profile.as_str()).collect();
                    assert_eq!(&layout::validate(gpu, &names).expect("valid layout"), instances);
                    for t in &g.tenants {
                        let start = t.instance_start.expect("MIG tenant has a start");
                        assert!(instances.iter().any(|i| i.start == start));
                    }
                }
            }
        }
    }
}

fn gpus_of<'a>(plan: &'a Plan, model: &str) -> Vec<(&'a str, u32, &'a GpuMode)> {
    let mut out = Vec::new();
    for p in &plan.pools {
        for n in &p.nodes {
            for g in &n.gpus {
                if g.tenants.iter().any(|t| t.model == model) {
                    out.push((n.name.as_str(), g.index, &g.mode));
                }
            }
        }
    }
    out
}

#[test]
fn packs_asr_and_tts_on_one_mig_gpu_beside_the_whole_gpu_llm() {
    let catalog = catalog();
    let plan = plan(&voice(), &catalog).expect("the seed plans");
    assert_eq!(plan.quality.gpus.used, 2);
    assert_eq!(plan.quality.gpus.one_per_replica, 3);
    assert_eq!(plan.quality.gpus.lower_bound, 2);
    assert!(plan.quality.gpus.first_fit_decreasing.is_some_and(|f| f >= 2));
    let llm = gpus_of(&plan, "nemotron-llm");
    assert_eq!(llm.len(), 1);
    assert_eq!(llm[0].2, &GpuMode::Whole);
    let asr = gpus_of(&plan, "parakeet-asr");
    let tts = gpus_of(&plan, "fastpitch-tts");
    assert_eq!(asr.len(), 1);
    assert_eq!((asr[0].0, asr[0].1), (tts[0].0, tts[0].1), "asr and tts share one GPU");
    assert!(matches!(asr[0].2, GpuMode::Mig { .. }));
    assert_valid_layouts(&plan, &catalog);
    let node = &plan.pools[0].nodes[0];
    assert!(plan.mig_configs.contains_key(&node.mig_config));
    assert!(plan.mig_configs.contains_key("all-disabled"));
    assert_eq!(node.device_plugin_config, "default");
    let resources: Vec<&str> =
        plan.models.iter().flat_map(|m| m.groups.iter().map(|g| g.resource.as_str())).collect();
    assert!(resources.contains(&"nvidia.com/gpu"));
    assert!(resources.iter().any(|r| r.starts_with("nvidia.com/mig-")));
}

#[test]
fn asr_needs_more_than_a_1g_slice_for_its_compute() {
    let plan = plan(&voice(), &catalog()).expect("plans");
    let asr = plan.models.iter().find(|m| m.name == "parakeet-asr").expect("asr planned");
    assert_eq!(asr.groups.len(), 1);
    assert_eq!(asr.groups[0].resource, "nvidia.com/mig-2g.20gb");
    assert!(asr.reasons.iter().any(|r| r.contains("1g.10gb") && r.contains("compute")), "{:?}", asr.reasons);
}

fn codes(result: Result<Plan, gpuplan::diagnostics::Diagnostics>) -> Vec<&'static str> {
    match result {
        Ok(p) => panic!("expected no plan, got {} GPUs", p.quality.gpus.used),
        Err(d) => d.iter().map(|d| d.code).collect(),
    }
}

fn shared(mut m: Model) -> Model {
    m.isolation = Isolation::Shared;
    m
}

#[test]
fn rejects_a_model_larger_than_any_gpu_with_the_memory_reason() {
    let s = spec(vec![pool("a100", A100, 2, named(&["n1"]))], vec![model("huge", 100 * 1024, 0.5, 1)]);
    let result = plan(&s, &catalog());
    let Err(diags) = result else { panic!("expected an error") };
    let d = diags.iter().next().expect("one diagnostic");
    assert_eq!(d.code, "model-exceeds-memory");
    assert!(d.message.contains("`huge`"));
    assert!(d.help.is_some());
}

#[test]
fn suggests_one_more_node_when_the_pool_is_too_small() {
    let s = spec(
        vec![pool("a100", A100, 1, named(&["n1"]))],
        vec![model("a", 40 * 1024, 0.5, 1), model("b", 50 * 1024, 0.5, 1)],
    );
    let result = plan(&s, &catalog());
    let Err(diags) = result else { panic!("expected an error") };
    let d = diags.iter().find(|d| d.code == "capacity-exceeded").expect("capacity diagnostic");
    let help = d.help.as_deref().unwrap_or_default();
    assert!(help.contains("add 1 × A100-SXM4-80GB node(s)") && help.contains("`a100`"), "{help}");
}

#[test]
fn time_slices_a_whole_gpu_when_instances_run_out() {
    // Eight small shared replicas: MIG offers at most seven instances per GPU.
    // 10,100 MiB: MIG time-slices hold at most 6 of them per GPU, a 1/8 whole-GPU slice fits.
    let s = spec(vec![pool("a100", A100, 1, named(&["n1"]))], vec![shared(model("embed", 10_100, 0.05, 8))]);
    let plan = plan(&s, &catalog()).expect("plans");
    assert_eq!(plan.quality.gpus.used, 1);
    let node = &plan.pools[0].nodes[0];
    assert_eq!(node.gpus[0].mode, GpuMode::TimeSliced { replicas: 8 });
    assert_eq!(node.device_plugin_config, "gpuplan-ts-gpu-8");
    assert_eq!(plan.device_plugin_configs["gpuplan-ts-gpu-8"].time_slicing["nvidia.com/gpu"], 8);
    assert_eq!(plan.models[0].groups[0].resource, "nvidia.com/gpu.shared");
}

#[test]
fn never_time_slices_hardware_isolated_models() {
    let s = spec(vec![pool("a100", A100, 2, named(&["n1"]))], vec![model("embed", 9000, 0.05, 8)]);
    let plan = plan(&s, &catalog()).expect("plans");
    assert_eq!(plan.quality.gpus.used, 2);
    for n in &plan.pools[0].nodes {
        assert!(n.gpus.iter().all(|g| !matches!(g.mode, GpuMode::TimeSliced { .. })));
    }
    assert_valid_layouts(&plan, &catalog());
}

#[test]
fn never_time_slices_llms_under_the_policy() {
    let mut m = shared(model("chat", 9000, 0.05, 8));
    m.llm = true;
    let s = spec(vec![pool("a100", A100, 1, named(&["n1"]))], vec![m]);
    assert_eq!(codes(plan(&s, &catalog())), ["capacity-exceeded"]);
}

#[test]
fn time_slicing_respects_memory_per_slot() {
    // 30 GiB replicas: at most two per time-sliced 80 GB GPU.
    let s = spec(vec![pool("a100", A100, 2, named(&["n1"]))], vec![shared(model("mid", 30 * 1024, 0.3, 4))]);
    let plan = plan(&s, &catalog()).expect("plans");
    for n in &plan.pools[0].nodes {
        for g in &n.gpus {
            if let GpuMode::TimeSliced { replicas } = g.mode {
                assert!(replicas <= 2, "{replicas} slots of 80 GB cannot hold 30 GiB each");
            }
        }
    }
    assert_eq!(plan.quality.gpus.used, 2);
}

#[test]
fn spread_gpu_puts_replicas_on_distinct_gpus() {
    let mut m = model("asr", 9000, 0.1, 2);
    m.spread = Spread::Gpu;
    let s = spec(vec![pool("a100", A100, 2, named(&["n1"]))], vec![m.clone()]);
    let plan_spread = plan(&s, &catalog()).expect("plans");
    let gpus = gpus_of(&plan_spread, "asr");
    assert_eq!(gpus.len(), 2);
    m.spread = Spread::None;
    let s = spec(vec![pool("a100", A100, 2, named(&["n1"]))], vec![m]);
    assert_eq!(plan(&s, &catalog()).expect("plans").quality.gpus.used, 1);
}

#[test]
fn spread_node_puts_replicas_on_distinct_nodes() {
    let mut m = model("asr", 9000, 0.1, 3);
    m.spread = Spread::Node;
    let s = spec(vec![pool("a100", A100, 2, named(&["n3", "n1", "n2"]))], vec![m]);
    let plan = plan(&s, &catalog()).expect("plans");
    let mut nodes: Vec<&str> = gpus_of(&plan, "asr").into_iter().map(|g| g.0).collect();
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2", "n3"]);
    assert_eq!(plan.models[0].groups[0].nodes, ["n1", "n2", "n3"]);
}

#[test]
fn rejects_spread_node_with_fewer_nodes_than_replicas() {
    let mut m = model("asr", 9000, 0.1, 3);
    m.spread = Spread::Node;
    let s = spec(vec![pool("a100", A100, 8, named(&["n1", "n2"]))], vec![m]);
    assert_eq!(codes(plan(&s, &catalog())), ["spread-unsatisfiable"]);
}

#[test]
fn multi_gpu_replicas_get_whole_gpus_on_one_node() {
    let mut m = model("big-llm", 140 * 1024, 1.0, 2);
    m.gpus = Some(2);
    m.llm = true;
    let s = spec(vec![pool("a100", A100, 4, named(&["n1", "n2"]))], vec![m, model("asr", 9000, 0.1, 1)]);
    let plan = plan(&s, &catalog()).expect("plans");
    let g = &plan.models.iter().find(|m| m.name == "big-llm").expect("planned").groups;
    assert_eq!(g.len(), 1);
    assert_eq!((g[0].per_replica, g[0].replicas), (2, 2));
    for n in &plan.pools[0].nodes {
        let count = n.gpus.iter().filter(|g| g.tenants.iter().any(|t| t.model == "big-llm")).count();
        assert!(count % 2 == 0, "node {} holds {count} GPUs of the 2-GPU model", n.name);
        for g in n.gpus.iter().filter(|g| g.tenants.iter().any(|t| t.model == "big-llm")) {
            assert_eq!(g.mode, GpuMode::Whole);
        }
    }
    assert_eq!(plan.quality.gpus.used, 5);
}

#[test]
fn rejects_multi_gpu_replicas_larger_than_a_node() {
    let mut m = model("big-llm", 140 * 1024, 1.0, 1);
    m.gpus = Some(4);
    let s = spec(vec![pool("a100", A100, 2, named(&["n1", "n2"]))], vec![m]);
    assert_eq!(codes(plan(&s, &catalog())), ["replica-exceeds-node"]);
}

fn point(profile: &str, processes: u32, rps: f64, latency_ms: f64) -> MeasuredPoint {
    MeasuredPoint { gpu: A100.into(), profile: profile.into(), batch_size: 8, processes, rps, latency_ms }
}

fn rate_model(name: &str, rps: f64, points: Vec<MeasuredPoint>) -> Model {
    let mut m = model(name, 8000, 0.1, 1);
    m.demand = Demand::Rate(RateDemand {
        rps,
        slo_ms: Some(100.0),
        admission_factor: 0.45,
        min_replicas: 1,
        points,
    });
    m
}

#[test]
fn rate_demand_is_covered_by_measured_replicas() {
    let points = vec![
        point("1g.10gb", 1, 100.0, 20.0),
        point("2g.20gb", 1, 210.0, 20.0),
        point("3g.40gb", 1, 330.0, 20.0),
        point("7g.80gb", 1, 800.0, 20.0),
        // MPS and SLO-violating points must be ignored (the latter at another batch size: at the
        // same one it would be the next point of a sweep, interpolated up to the limit).
        point("1g.10gb", 4, 10_000.0, 20.0),
        MeasuredPoint { batch_size: 16, ..point("2g.20gb", 1, 10_000.0, 60.0) },
    ];
    let s = spec(vec![pool("a100", A100, 8, named(&["n1"]))], vec![rate_model("det", 1000.0, points)]);
    let plan = plan(&s, &catalog()).expect("plans");
    let m = &plan.models[0];
    let rps_of = |r: &str| match r {
        "nvidia.com/mig-1g.10gb" => 100.0,
        "nvidia.com/mig-2g.20gb" => 210.0,
        "nvidia.com/mig-3g.40gb" => 330.0,
        "nvidia.com/gpu" => 800.0,
        other => panic!("unexpected resource {other}"),
    };
    let covered: f64 = m.groups.iter().map(|g| rps_of(&g.resource) * f64::from(g.replicas)).sum();
    assert!(covered >= 1000.0, "covers {covered}");
    let resources: std::collections::BTreeSet<&str> = m.groups.iter().map(|g| g.resource.as_str()).collect();
    assert_eq!(resources.len(), m.groups.len(), "one group per resource");
    // 1g gives 700 rps per GPU: 1000 rps need 2 GPUs; nothing fits in one.
    assert_eq!(plan.quality.gpus.used, 2);
    assert!(m.reasons.iter().any(|r| r.contains("throughput")));
}

#[test]
fn rate_demand_without_admissible_points_is_explained() {
    let points = vec![point("1g.10gb", 2, 100.0, 20.0), point("2g.20gb", 1, 210.0, 90.0)];
    let s = spec(vec![pool("a100", A100, 8, named(&["n1"]))], vec![rate_model("det", 1000.0, points)]);
    assert_eq!(codes(plan(&s, &catalog())), ["no-admissible-measurement"]);
}

#[test]
fn latency_slo_excludes_slices_that_are_too_slow() {
    let mut m = model("asr", 9000, 0.05, 1);
    // docs/latency-model.md: 1g (14 of 108 SMs) stretches 10 ms to 77 ms at 39% own load (113 ms);
    // 2g (28 SMs) to 39 ms at 19% (58 ms); 3g (42 SMs) to 26 ms at 13% (33 ms).
    m.latency = Some(Latency { p99_ms: 40.0, baseline_ms: Some(10.0), baseline_gpu: None });
    let s = spec(vec![pool("a100", A100, 1, named(&["n1"]))], vec![m.clone()]);
    let plan = plan(&s, &catalog()).expect("plans");
    assert_eq!(plan.models[0].groups[0].resource, "nvidia.com/mig-3g.40gb");
    m.latency = Some(Latency { p99_ms: 5.0, baseline_ms: Some(10.0), baseline_gpu: None });
    let s = spec(vec![pool("a100", A100, 1, named(&["n1"]))], vec![m]);
    assert_eq!(codes(gpuplan::plan::plan(&s, &catalog())), ["latency-slo-unreachable"]);
}

#[test]
fn dedicated_models_get_whole_gpus_only() {
    let mut m = model("secure", 9000, 0.1, 2);
    m.isolation = Isolation::Dedicated;
    let s = spec(vec![pool("a100", A100, 2, named(&["n1"]))], vec![m]);
    let plan = plan(&s, &catalog()).expect("plans");
    assert_eq!(plan.quality.gpus.used, 2);
    assert!(plan.pools[0].nodes[0].gpus.iter().all(|g| g.mode == GpuMode::Whole));
}

#[test]
fn autoscaled_pools_get_numbered_node_templates() {
    let s = spec(
        vec![pool("l", A100, 2, Nodes::Autoscaled { min: 1, max: 10 })],
        vec![model("a", 30 * 1024, 0.3, 5)],
    );
    let plan = plan(&s, &catalog()).expect("plans");
    let p = &plan.pools[0];
    assert!(p.autoscaled);
    let names: Vec<&str> = p.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["l-1", "l-2"]);
    assert_eq!(plan.quality.gpus.used, 3);
}

#[test]
fn keeps_the_current_layout_when_it_costs_nothing() {
    let mut p = pool("a100", A100, 1, named(&["n1"]));
    p.current = vec![CurrentNode { node: "n1".into(), gpus: vec![vec!["4g.40gb".into(), "3g.40gb".into()]] }];
    let s = spec(vec![p], vec![model("a", 30 * 1024, 0.3, 2)]);
    let plan = plan(&s, &catalog()).expect("plans");
    let node = &plan.pools[0].nodes[0];
    assert!(!node.must_drain);
    let GpuMode::Mig { instances } = &node.gpus[0].mode else { panic!("MIG expected") };
    let mut names: Vec<&str> = instances.iter().map(|i| i.profile.as_str()).collect();
    names.sort();
    assert_eq!(names, ["3g.40gb", "4g.40gb"]);
}

#[test]
fn marks_nodes_whose_layout_changes_for_draining() {
    let mut p = pool("a100", A100, 1, named(&["n1"]));
    p.current = vec![CurrentNode { node: "n1".into(), gpus: vec![vec!["7g.80gb".into()]] }];
    let s = spec(vec![p], vec![model("a", 30 * 1024, 0.3, 2)]);
    let plan = plan(&s, &catalog()).expect("plans");
    assert!(plan.pools[0].nodes[0].must_drain);
}

fn mixed_spec(order: &[usize], pool_order: &[usize]) -> Spec {
    let mut v = voice();
    let mut llm2 = model("reranker", 20 * 1024, 0.3, 3);
    llm2.spread = Spread::Gpu;
    let extra = vec![
        llm2,
        shared(model("embed", 5000, 0.05, 9)),
        model("guard", 15000, 0.2, 2),
        rate_model("det", 500.0, vec![point("1g.10gb", 1, 100.0, 20.0), point("3g.40gb", 1, 330.0, 20.0)]),
    ];
    v.models.extend(extra);
    let mut p2 = pool("b-pool", A100, 4, Nodes::Autoscaled { min: 0, max: 3 });
    p2.cost_per_gpu_hour = Some(2.0);
    v.pools[0].cost_per_gpu_hour = Some(2.0);
    v.pools[0].gpus_per_node = 4;
    v.pools.push(p2);
    let models = v.models.clone();
    v.models = order.iter().map(|&i| models[i].clone()).collect();
    let pools = v.pools.clone();
    v.pools = pool_order.iter().map(|&i| pools[i].clone()).collect();
    v
}

#[test]
fn same_plan_bytes_whatever_the_input_order() {
    let catalog = catalog();
    let a =
        serde_json::to_string(&plan(&mixed_spec(&[0, 1, 2, 3, 4, 5, 6], &[0, 1]), &catalog).expect("plans"))
            .expect("json");
    for (order, pools) in [([6, 5, 4, 3, 2, 1, 0], [1, 0]), ([3, 0, 6, 1, 5, 2, 4], [0, 1])] {
        let b = serde_json::to_string(&plan(&mixed_spec(&order, &pools), &catalog).expect("plans"))
            .expect("json");
        assert_eq!(a, b, "order {order:?} pools {pools:?}");
    }
}

#[test]
fn never_uses_more_gpus_than_first_fit_decreasing_nor_fewer_than_the_bound() {
    let catalog = catalog();
    let p = plan(&mixed_spec(&[0, 1, 2, 3, 4, 5, 6], &[0, 1]), &catalog).expect("plans");
    let q = &p.quality;
    assert!(q.gpus.lower_bound <= q.gpus.used);
    assert!(q.gpus.first_fit_decreasing.is_none_or(|f| q.gpus.used <= f), "{q:?}");
    assert!(q.gpus.used <= q.gpus.one_per_replica);
    assert_valid_layouts(&p, &catalog);
}

/// A deterministic synthetic fleet: `models` models of mixed sizes over two A100 pools.
pub(crate) fn synthetic(models: usize, nodes_per_pool: usize) -> Spec {
    synthetic_seeded(models, nodes_per_pool, 0x9E37_79B9_7F4A_7C15)
}

fn synthetic_seeded(models: usize, nodes_per_pool: usize, seed: u64) -> Spec {
    let mut state: u64 = seed;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let memories = [4000, 9000, 15000, 19000, 30000, 38000, 60000];
    let mut out = Vec::new();
    for i in 0..models {
        let mem = memories[next(memories.len() as u64) as usize];
        let compute = 0.05 + next(40) as f64 / 100.0;
        let mut m = model(&format!("m{i:04}"), mem, compute, 1 + next(6) as u32);
        if next(3) == 0 {
            m.isolation = Isolation::Shared;
        }
        if next(10) == 0 {
            m.spread = Spread::Gpu;
        }
        out.push(m);
    }
    let names = |p: &str| Nodes::Named((0..nodes_per_pool).map(|i| format!("{p}-node-{i:03}")).collect());
    spec(vec![pool("east", A100, 8, names("east")), pool("west", A100, 8, names("west"))], out)
}

#[test]
fn mid_size_plan_is_near_the_bound_and_never_worse_than_first_fit() {
    let catalog = catalog();
    let p = plan(&synthetic(40, 8), &catalog).expect("plans");
    let q = &p.quality;
    assert!(q.gpus.first_fit_decreasing.is_none_or(|f| q.gpus.used <= f), "{q:?}");
    assert!(q.gpus.used <= q.gpus.model_lower_bound + (q.gpus.model_lower_bound / 50).max(1) + 1, "{q:?}");
    assert!(q.gpus.lower_bound <= q.gpus.used, "{q:?}");
    assert_valid_layouts(&p, &catalog);
    let planned: u32 = p.models.iter().flat_map(|m| &m.groups).map(|g| g.replicas).sum();
    let asked: u32 =
        synthetic(40, 8).models.iter().map(|m| if let Demand::Replicas(n) = m.demand { n } else { 0 }).sum();
    assert_eq!(planned, asked, "every replica is placed");
}

#[test]
fn keeps_each_gpu_on_the_node_that_runs_its_layout_today() {
    let mut p = pool("a100", A100, 2, named(&["n1", "n2"]));
    p.current = vec![
        CurrentNode { node: "n1".into(), gpus: vec![vec![], vec![]] },
        CurrentNode { node: "n2".into(), gpus: vec![vec![], vec!["4g.40gb".into(), "3g.40gb".into()]] },
    ];
    let s = spec(vec![p], vec![model("a", 30 * 1024, 0.3, 2)]);
    let plan = plan(&s, &catalog()).expect("plans");
    assert_eq!(plan.quality.gpus.used, 1);
    assert!(plan.pools[0].nodes.iter().all(|n| !n.must_drain), "{:?}", plan.pools[0].nodes);
    let n2 = &plan.pools[0].nodes[1];
    assert_eq!(n2.name, "n2");
    assert!(matches!(n2.gpus[1].mode, GpuMode::Mig { .. }));
}

#[test]
fn a_node_never_mixes_exclusive_and_time_sliced_whole_gpus() {
    let mut exclusive = model("secure", 9000, 0.1, 1);
    exclusive.isolation = Isolation::Dedicated;
    let small = shared(model("embed", 9000, 0.05, 8));
    // One node: the exclusive GPU forbids time-slicing the other, and 7 MIG instances are too few.
    let s = spec(vec![pool("a100", A100, 2, named(&["n1"]))], vec![exclusive.clone(), small.clone()]);
    assert_eq!(codes(plan(&s, &catalog())), ["capacity-exceeded"]);
    let s = spec(vec![pool("a100", A100, 2, named(&["n1", "n2"]))], vec![exclusive, small]);
    let plan = plan(&s, &catalog()).expect("plans");
    assert_eq!(plan.quality.gpus.used, 2);
    for n in &plan.pools[0].nodes {
        let whole = n.gpus.iter().any(|g| g.mode == GpuMode::Whole);
        let sliced = n.gpus.iter().any(|g| matches!(g.mode, GpuMode::TimeSliced { .. }));
        assert!(!(whole && sliced), "node {} mixes exclusive and time-sliced GPUs", n.name);
    }
}

#[test]
fn prefers_the_cheaper_pool() {
    let mut cheap = pool("cheap", A100, 2, named(&["c1"]));
    cheap.cost_per_gpu_hour = Some(1.0);
    let mut dear = pool("dear", A100, 2, named(&["d1"]));
    dear.cost_per_gpu_hour = Some(3.0);
    let s = spec(vec![dear, cheap], vec![model("a", 30 * 1024, 0.3, 3)]);
    let plan = plan(&s, &catalog()).expect("plans");
    assert!(plan.models[0].groups.iter().all(|g| g.pool == "cheap"));
    assert_eq!(plan.quality.cost.used, Some(2.0));
}

#[test]
fn a_huge_autoscaled_pool_only_grows_the_nodes_it_needs() {
    let s = spec(
        vec![pool("auto", A100, 8, Nodes::Autoscaled { min: 2, max: 100_000 })],
        vec![model("a", 30 * 1024, 0.3, 40), model("b", 9000, 0.1, 30)],
    );
    let plan = plan(&s, &catalog()).expect("plans");
    let p = &plan.pools[0];
    let q = &plan.quality;
    assert!(
        q.gpus.used <= q.gpus.model_lower_bound + 1
            && q.gpus.first_fit_decreasing.is_some_and(|f| q.gpus.used <= f),
        "{q:?}"
    );
    assert_eq!(p.nodes.len(), (plan.quality.gpus.used as usize).div_ceil(8).max(2));
    assert!(p.nodes.iter().enumerate().all(|(i, n)| n.name == format!("auto-{}", i + 1)));
}

#[test]
fn seed_plan_json_is_reviewed() {
    let plan = plan(&voice(), &catalog()).expect("the seed plans");
    insta::assert_snapshot!("seed-plan", serde_json::to_string_pretty(&plan).expect("json"));
}

#[test]
fn an_empty_spec_plans_nothing() {
    let s = spec(vec![pool("a100", A100, 2, named(&["n1"]))], Vec::new());
    let plan = plan(&s, &catalog()).expect("plans");
    assert_eq!(plan.quality.gpus.used, 0);
    assert!(plan.pools[0].nodes.iter().all(|n| n.mig_config == "all-disabled"));
    let no_pools = spec(Vec::new(), vec![model("a", 1000, 0.1, 1)]);
    assert_eq!(codes(gpuplan::plan::plan(&no_pools, &catalog())), ["no-eligible-pool"]);
}

#[test]
fn gpus_without_mig_are_whole_or_time_sliced() {
    let catalog = catalog();
    assert!(catalog.get("L4").is_some_and(|g| g.mig.is_none()), "the catalog has the L4 without MIG");
    let s = spec(
        vec![pool("l4", "L4", 1, named(&["n1", "n2"]))],
        vec![shared(model("embed", 5000, 0.1, 4)), model("asr", 9000, 0.2, 1)],
    );
    let plan = plan(&s, &catalog).expect("plans");
    assert_eq!(plan.quality.gpus.used, 2);
    let modes: Vec<&GpuMode> = plan.pools[0].nodes.iter().map(|n| &n.gpus[0].mode).collect();
    assert!(modes.contains(&&GpuMode::Whole));
    assert!(modes.contains(&&GpuMode::TimeSliced { replicas: 4 }));
    assert!(plan.pools[0].nodes.iter().all(|n| n.mig_config == "all-disabled"));
    // On one node the exclusive GPU forbids time-slicing the other: more capacity is needed.
    let one_node = spec(
        vec![pool("l4", "L4", 2, named(&["n1"]))],
        vec![shared(model("embed", 5000, 0.1, 4)), model("asr", 9000, 0.2, 1)],
    );
    assert_eq!(codes(gpuplan::plan::plan(&one_node, &catalog)), ["capacity-exceeded"]);
}

#[test]
fn spread_node_applies_to_whole_gpu_replicas() {
    let mut m = model("secure", 9000, 0.1, 2);
    m.isolation = Isolation::Dedicated;
    m.spread = Spread::Node;
    let s = spec(vec![pool("a100", A100, 2, named(&["n1", "n2"]))], vec![m]);
    let plan = plan(&s, &catalog()).expect("plans");
    let mut nodes: Vec<&str> = gpus_of(&plan, "secure").into_iter().map(|g| g.0).collect();
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2"]);
}

#[test]
fn random_fleets_respect_every_hard_rule() {
    let catalog = catalog();
    let mut planned = 0;
    for seed in 1..=6u64 {
        let mut s = synthetic_seeded(12, 3, seed.wrapping_mul(0x2545_F491_4F6C_DD1D));
        if seed % 2 == 0 {
            s.models[0].spread = Spread::Node;
            s.models[0].demand = Demand::Replicas(2);
        }
        let Ok(p) = plan(&s, &catalog) else { continue };
        planned += 1;
        assert_valid_layouts(&p, &catalog);
        let q = &p.quality;
        assert!(q.gpus.first_fit_decreasing.is_none_or(|f| q.gpus.used <= f), "seed {seed}: {q:?}");
        assert!(q.gpus.lower_bound <= q.gpus.used);
        for m in &s.models {
            let Demand::Replicas(n) = m.demand else { continue };
            let mp = p.models.iter().find(|x| x.name == m.name).expect("model planned");
            assert_eq!(mp.groups.iter().map(|g| g.replicas).sum::<u32>(), n, "seed {seed}: {}", m.name);
            let hosts = gpus_of(&p, &m.name);
            if m.spread == Spread::Node {
                let mut nodes: Vec<&str> = hosts.iter().map(|h| h.0).collect();
                nodes.sort();
                nodes.dedup();
                assert_eq!(nodes.len() as u32, n, "seed {seed}: {} not spread over nodes", m.name);
            }
            if m.spread == Spread::Gpu {
                assert_eq!(hosts.len() as u32, n, "seed {seed}: {} not spread over GPUs", m.name);
            }
            if m.isolation != Isolation::Shared {
                assert!(
                    hosts.iter().all(|h| !matches!(h.2, GpuMode::TimeSliced { .. })),
                    "seed {seed}: {}",
                    m.name
                );
            }
        }
        for pool in &p.pools {
            for n in &pool.nodes {
                let whole = n.gpus.iter().any(|g| g.mode == GpuMode::Whole);
                let ks: std::collections::BTreeSet<u32> = n
                    .gpus
                    .iter()
                    .filter_map(|g| {
                        if let GpuMode::TimeSliced { replicas } = g.mode { Some(replicas) } else { None }
                    })
                    .collect();
                assert!(
                    ks.len() <= 1 && (!whole || ks.is_empty()),
                    "seed {seed}: node {} mixes sharing",
                    n.name
                );
                for g in &n.gpus {
                    if let GpuMode::TimeSliced { replicas } = g.mode {
                        assert!(g.tenants.len() as u32 <= replicas);
                    }
                }
            }
        }
    }
    assert!(planned >= 4, "only {planned} of 6 random fleets planned");
}

#[test]
fn time_slices_mig_instances_when_that_packs_more_replicas() {
    // 14 small shared replicas: 7 × 1g.10gb shared 2 ways (or 2 × 3g.40gb shared 7 ways) hold
    // them on one GPU; a time-sliced whole GPU holds at most 8.
    let s = spec(vec![pool("a100", A100, 1, named(&["n1"]))], vec![shared(model("embed", 4000, 0.05, 14))]);
    let plan = plan(&s, &catalog()).expect("plans");
    assert_eq!(plan.quality.gpus.used, 1);
    let node = &plan.pools[0].nodes[0];
    let GpuMode::Mig { instances } = &node.gpus[0].mode else {
        panic!("MIG expected: {:?}", node.gpus[0].mode)
    };
    assert_eq!(node.gpus[0].tenants.len(), 14);
    let profile = &instances[0].profile;
    assert!(instances.iter().all(|i| &i.profile == profile), "one profile per time-sliced MIG GPU");
    let config = &plan.device_plugin_configs[&node.device_plugin_config];
    let k = config.time_slicing[&format!("nvidia.com/mig-{profile}")];
    assert!(k as usize * instances.len() >= 14 && k <= 8);
    assert_eq!(plan.models[0].groups[0].resource, format!("nvidia.com/mig-{profile}.shared"));
    assert_valid_layouts(&plan, &catalog());
}

#[test]
fn mig_is_planned_only_under_the_mixed_strategy() {
    let (mut spec, catalog) = gpuplan::bench::voice_pipeline();
    let mixed = plan(&spec, &catalog).expect("plans");
    assert!(
        mixed
            .pools
            .iter()
            .flat_map(|p| &p.nodes)
            .flat_map(|n| &n.gpus)
            .any(|g| matches!(g.mode, GpuMode::Mig { .. }))
    );
    for strategy in [gpuplan::spec::MigStrategy::None, gpuplan::spec::MigStrategy::Single] {
        spec.cluster.mig_strategy = strategy;
        match plan(&spec, &catalog) {
            Ok(p) => assert!(
                p.pools
                    .iter()
                    .flat_map(|p| &p.nodes)
                    .flat_map(|n| &n.gpus)
                    .all(|g| !matches!(g.mode, GpuMode::Mig { .. })),
                "{strategy:?} planned MIG"
            ),
            Err(diags) => assert!(diags.has_errors()),
        }
    }
}

/// The plan passes the independent verifier.
fn assert_verified(s: &Spec, p: &Plan) {
    let violations = gpuplan::verify::check(s, &catalog(), p);
    assert!(violations.is_empty(), "violations: {violations:#?}");
}

#[test]
fn spread_node_beyond_the_free_nodes_is_reported_naming_the_models() {
    // Three single-GPU nodes. `m0` needs compute 0.55: more than a 4g.40gb instance's 56 of 108
    // SMs, so it takes a whole GPU (exclusive) and its node; the three replicas of `m1` need
    // three distinct nodes: only two are left. No plan exists, and the error says why.
    let big = model("m0", 1024, 0.55, 1);
    let mut spread = shared(model("m1", 1024, 0.05, 3));
    spread.spread = Spread::Node;
    let s = spec(vec![pool("p0", A100, 1, named(&["n1", "n2", "n3"]))], vec![big, spread]);
    let Err(diags) = plan(&s, &catalog()) else { panic!("no plan exists") };
    let text: String = diags.iter().map(|d| format!("{} {:?} {:?}", d.message, d.help, d.notes)).collect();
    assert!(text.contains("`m1`"), "{text}");
    assert_eq!(codes(Err(diags)), ["capacity-exceeded"]);
    // With compute 0.5 a 4g.40gb instance serves `m0`, and a 1g.10gb beside it the third `m1`.
    let mut s = s;
    s.models[0].compute = 0.5;
    let p = plan(&s, &catalog()).expect("a plan exists");
    assert_verified(&s, &p);
    let mut nodes: Vec<&str> = gpus_of(&p, "m1").into_iter().map(|g| g.0).collect();
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2", "n3"]);
}

#[test]
fn spread_node_replicas_avoid_nodes_whose_gpus_are_exclusive() {
    // A two-GPU node and two three-GPU nodes; two dedicated replicas need exclusive whole GPUs,
    // and three spread replicas need three distinct nodes, so one of them sits on a MIG
    // instance of a node that also holds exclusive whole GPUs.
    let mut spread = shared(model("m0", 1024, 0.05, 3));
    spread.spread = Spread::Node;
    let mut dedicated = model("m1", 1024, 0.05, 2);
    dedicated.isolation = Isolation::Dedicated;
    let s = spec(
        vec![pool("p0", A100, 2, named(&["p0-n1"])), pool("p1", A100, 3, named(&["p1-n1", "p1-n2"]))],
        vec![spread, dedicated],
    );
    let p = plan(&s, &catalog()).expect("a plan exists");
    assert_verified(&s, &p);
    assert_eq!(p.quality.gpus.used, 5);
}

#[test]
fn spread_gpu_puts_at_most_one_time_sliced_replica_on_a_node() {
    // The device plugin picks the physical GPU behind `nvidia.com/gpu.shared`, so two replicas
    // on one node may share a GPU whatever the plan says (domain.md §3).
    let mut m = shared(model("embed", 1024, 0.05, 3));
    m.spread = Spread::Gpu;
    let s = spec(vec![pool("l4", "L4", 4, named(&["n1", "n2", "n3"]))], vec![m]);
    let p = plan(&s, &catalog()).expect("plans");
    assert_verified(&s, &p);
    for pool in &p.pools {
        for n in &pool.nodes {
            let shared = n
                .gpus
                .iter()
                .filter(|g| matches!(g.mode, GpuMode::TimeSliced { .. }))
                .flat_map(|g| &g.tenants)
                .filter(|t| t.model == "embed")
                .count();
            assert!(shared <= 1, "{shared} time-sliced replicas on node {}", n.name);
        }
    }
    // With one node only exclusive whole GPUs keep the replicas apart.
    let mut one = s.clone();
    one.pools[0].nodes = named(&["n1"]);
    let p = plan(&one, &catalog()).expect("plans");
    assert_verified(&one, &p);
    assert!(p.pools[0].nodes[0].gpus.iter().all(|g| !matches!(g.mode, GpuMode::TimeSliced { .. })));
}

#[test]
fn spread_node_without_enough_free_nodes_is_proven_infeasible_and_named() {
    // Two 2-GPU replicas fill two of the three 2-GPU nodes with exclusive GPUs; the three
    // `spread: node` replicas of `m1` then have two nodes left (the third and the 1-GPU pool).
    // The optimiser's per-pool conditions cannot see that; the exhaustive search does.
    let mut wide = model("m2", 4096 * 2, 1.0, 2);
    wide.gpus = Some(2);
    wide.pools = vec!["p0".into()];
    let mut spread = shared(model("m1", 25 * 1024, 0.05, 3));
    spread.spread = Spread::Node;
    let s = spec(
        vec![pool("p0", A100, 2, named(&["a", "b", "c"])), pool("p1", A100, 1, named(&["d"]))],
        vec![shared(model("m0", 8192, 0.4, 2)), spread, wide],
    );
    let Err(diags) = plan(&s, &catalog()) else { panic!("no plan exists") };
    let text: String = diags.iter().map(|d| format!("{} {:?}", d.message, d.notes)).collect();
    assert!(text.contains("`m1`"), "{text}");
    assert_eq!(codes(Err(diags)), ["no-feasible-plan"]);
}

/// Two replicas of a small hardware-isolated model: one A100 (MIG, $2.4/h) or two L4s (whole,
/// $0.8/h each). On priced pools the planner minimises cost, so it takes two GPUs where one
/// would do, and reports the cost bound next to the GPU bound.
#[test]
fn priced_pools_minimise_cost_and_report_the_cost_bound() {
    let mut a100 = pool("a100", A100, 1, named(&["a1"]));
    a100.cost_per_gpu_hour = Some(2.4);
    let mut l4 = pool("l4", "L4", 2, named(&["l1"]));
    l4.cost_per_gpu_hour = Some(0.8);
    let s = spec(vec![a100, l4], vec![model("guard", 9000, 0.1, 2)]);
    let catalog = catalog();
    let p = plan(&s, &catalog).expect("plans");
    let q = &p.quality;
    assert_eq!((q.gpus.used, q.gpus.lower_bound), (2, 1), "{q:?}");
    assert_eq!(p.models[0].groups[0].pool, "l4");
    assert_eq!(q.cost.used, Some(1.6));
    let bound = q.cost.model_lower_bound.expect("priced pools have a cost bound");
    assert!(bound > 0.8 && bound <= 1.6, "cost bound {bound}");
    // Valid for every plan: one `1g` instance per replica on the A100 costs 2 × $0.30/h, but
    // every plan uses a GPU, at least an L4's $0.80/h.
    assert_eq!(q.cost.lower_bound, Some(0.8), "{q:?}");
    assert!(q.cost.first_fit_decreasing.is_some_and(|f| f >= 1.6), "{q:?}");
    assert!(gpuplan::verify::check(&s, &catalog, &p).is_empty());
    // Without prices the same spec minimises GPUs: one A100 cut into MIG instances.
    let unpriced = spec(
        vec![pool("a100", A100, 1, named(&["a1"])), pool("l4", "L4", 2, named(&["l1"]))],
        vec![model("guard", 9000, 0.1, 2)],
    );
    let p = plan(&unpriced, &catalog).expect("plans");
    assert_eq!(p.quality.gpus.used, 1);
    assert_eq!(p.quality.cost.lower_bound, None);
}

fn shared_model(name: &str, memory_mib: u64, compute: f64, replicas: u32) -> Model {
    let mut m = model(name, memory_mib, compute, replicas);
    m.isolation = Isolation::Shared;
    m
}

/// Issue 13: two shared tenants on an L4 (compute 0.5 + 0.2, 8 GiB each) fit one GPU
/// time-sliced two ways: the tenants are judged by their combined compute (0.7 ≤ 0.9), not
/// each by efficiency / k. The planner finds that plan, it meets the bound valid for every
/// plan, and the verifier accepts it and the same plan made by hand.
#[test]
fn time_sliced_tenants_are_judged_by_their_combined_compute() {
    use gpuplan::plan::{DevicePluginConfig, GpuPlan, NodePlan, Proof, ReplicaGroup, Tenant};
    let catalog = catalog();
    let s = spec(
        vec![pool("l4", "L4", 1, named(&["n1", "n2"]))],
        vec![shared_model("a", 8 * 1024, 0.5, 1), shared_model("b", 8 * 1024, 0.2, 1)],
    );
    let p = plan(&s, &catalog).expect("plans");
    assert!(gpuplan::verify::check(&s, &catalog, &p).is_empty());
    assert_eq!(p.quality.gpus.lower_bound, 1, "{:?}", p.quality);
    assert_eq!(p.quality.gpus.used, 1, "one GPU time-sliced two ways: {:?}", p.pools);
    assert_eq!(p.quality.proof, Proof::Optimal);
    assert!(matches!(p.pools[0].nodes[0].gpus[0].mode, GpuMode::TimeSliced { replicas: 2 }), "{:?}", p.pools);

    // The one-GPU plan the verifier accepts, by hand.
    let mut one = p.clone();
    let node = NodePlan {
        name: "n1".into(),
        mig_config: "all-disabled".into(),
        device_plugin_config: "ts-2".into(),
        must_drain: false,
        transition: None,
        gpus: vec![GpuPlan {
            index: 0,
            uuid: None,
            mode: GpuMode::TimeSliced { replicas: 2 },
            tenants: vec![
                Tenant { model: "a".into(), instance_start: None },
                Tenant { model: "b".into(), instance_start: None },
            ],
        }],
    };
    one.pools[0].nodes = vec![node];
    one.device_plugin_configs.insert(
        "ts-2".into(),
        DevicePluginConfig {
            time_slicing: BTreeMap::from([("nvidia.com/gpu".to_owned(), 2)]),
            ..Default::default()
        },
    );
    for m in &mut one.models {
        m.groups = vec![ReplicaGroup {
            resource: "nvidia.com/gpu.shared".into(),
            per_replica: 1,
            replicas: 1,
            pool: "l4".into(),
            nodes: vec!["n1".into()],
            processes: 1,
        }];
    }
    one.quality.gpus.used = 1;
    one.quality.gpus.model_lower_bound = 1;
    one.quality.gpus.first_fit_decreasing = None;
    assert_eq!(gpuplan::verify::check(&s, &catalog, &one), vec![], "the hand-made plan is valid");
    assert!(one.quality.gpus.lower_bound <= 1);
}

/// Issue 13: one A100 with a model needing more SMs than `3g.40gb` has (compute 0.4: a
/// `4g.40gb`) and four small shared models: `4g.40gb` + 3 × `1g.10gb`, the `1g` instances
/// time-sliced two ways on that node, serves everything on one GPU — MIG time-slicing of some
/// instances of a mixed layout. The planner finds one such GPU; the bound and the verifier
/// agree.
#[test]
fn time_slicing_some_instances_of_a_mixed_mig_layout() {
    let catalog = catalog();
    let mut big = model("big", 35 * 1024, 0.4, 1);
    big.isolation = Isolation::Hardware;
    let mut models = vec![big];
    for i in 0..4 {
        models.push(shared_model(&format!("s{i}"), 4 * 1024, 0.05, 1));
    }
    let s = spec(vec![pool("a100", A100, 1, named(&["n1", "n2"]))], models);
    let p = plan(&s, &catalog).expect("plans");
    assert!(gpuplan::verify::check(&s, &catalog, &p).is_empty());
    assert_eq!(p.quality.gpus.lower_bound, 1, "{:?}", p.quality);
    assert_eq!(p.quality.gpus.used, 1, "{:?}", p.pools);
    assert_eq!(p.quality.proof, gpuplan::plan::Proof::Optimal);
    let GpuMode::Mig { instances } = &p.pools[0].nodes[0].gpus[0].mode else { panic!("{:?}", p.pools) };
    let names: Vec<&str> = instances.iter().map(|i| i.profile.as_str()).collect();
    // `4g.40gb` for the big model, the small ones on the other instances, some time-sliced
    // (`1g.10gb` × 3 shared, or `2g.20gb` shared next to an exclusive `1g.10gb`: both fit).
    assert!(names.contains(&"4g.40gb") && names.len() >= 2, "{names:?}");
    let config = &p.device_plugin_configs[&p.pools[0].nodes[0].device_plugin_config];
    assert!(config.time_slicing.keys().any(|r| r.starts_with("nvidia.com/mig-")), "{config:?}");
}

/// A bound equal to the cost up to rounding (350.9999999 against 351.00) is equal: the plan
/// is then called optimal, never "not proven optimal".
#[test]
fn cost_equal_to_its_bound_up_to_rounding_is_optimal() {
    use gpuplan::plan::Proof;
    let catalog = catalog();
    let mut l4 = pool("l4", "L4", 1, Nodes::Autoscaled { min: 0, max: 400 });
    l4.cost_per_gpu_hour = Some(0.7);
    let p = plan(&spec(vec![l4], vec![model("whole", 20 * 1024, 0.9, 7)]), &catalog).expect("plans");
    let q = &p.quality;
    assert_eq!(q.cost.used, Some(4.9), "{q:?}");
    assert_eq!(q.proof, Proof::Optimal, "{q:?}");
    assert!(q.verdict().starts_with("optimal: no plan costs less than $4.90/h"), "{}", q.verdict());
}

/// Issue 12/13: inside a node the device plugin picks which MIG instance of a resource a pod
/// gets, so two `spread: gpu` replicas on MIG resources of one node share a GPU when some GPU
/// has an instance of each (two of one resource). Seven `1g` instances per GPU would allow
/// that; the planner keeps the replicas apart and the verifier (which checks the rule) agrees.
#[test]
fn spread_gpu_replicas_on_mig_cannot_be_stacked_by_the_device_plugin() {
    let catalog = catalog();
    let mut guard = model("guard", 9000, 0.1, 2);
    guard.spread = Spread::Gpu;
    let filler = model("filler", 9000, 0.1, 12);
    let s = spec(vec![pool("a100", A100, 2, named(&["n1", "n2"]))], vec![guard, filler]);
    let p = plan(&s, &catalog).expect("plans");
    assert_eq!(gpuplan::verify::check(&s, &catalog, &p), vec![]);
    for n in &p.pools[0].nodes {
        let guards: Vec<(u32, u8)> = n
            .gpus
            .iter()
            .flat_map(|g| {
                g.tenants
                    .iter()
                    .filter(|t| t.model == "guard")
                    .map(move |t| (g.index, t.instance_start.unwrap_or(0)))
            })
            .collect();
        if guards.len() < 2 {
            continue;
        }
        // Both on this node: no GPU may hold two instances of the profile(s) they use.
        let profile = |gi: u32, start: u8| -> String {
            match &n.gpus[gi as usize].mode {
                GpuMode::Mig { instances } => {
                    instances.iter().find(|i| i.start == start).map(|i| i.profile.clone()).unwrap_or_default()
                }
                _ => String::new(),
            }
        };
        let (a, b) = (profile(guards[0].0, guards[0].1), profile(guards[1].0, guards[1].1));
        for g in &n.gpus {
            let GpuMode::Mig { instances } = &g.mode else { continue };
            let count = |p: &str| instances.iter().filter(|i| i.profile == p).count();
            let clash = if a == b { count(&a) >= 2 } else { count(&a) >= 1 && count(&b) >= 1 };
            assert!(!clash, "node {} gpu {}: `guard` on `{a}` and `{b}` may be stacked", n.name, g.index);
        }
    }
}
