//! The planner end to end on specs built in Rust: the seed voice pipeline, infeasible inputs,
//! time-slicing, spread, multi-GPU replicas, rate demand and determinism.

use std::collections::BTreeMap;

use gpuplan::catalog::layout;
use gpuplan::catalog::{Catalog, GpuModel};
use gpuplan::plan::{GpuMode, Plan, plan};
use gpuplan::spec::{
    ArgoCd, Cluster, CurrentNode, Demand, Isolation, Latency, MeasuredPoint, MigStrategy, Model, Nodes,
    OutputOptions, Policy, Pool, RateDemand, Spec, Spread, TimeSlicingOptions,
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
        span: None,
    }
}

fn named(names: &[&str]) -> Nodes {
    Nodes::Named(names.iter().map(|s| (*s).to_owned()).collect())
}

fn model(name: &str, memory_mib: u64, compute: f64, replicas: u32) -> Model {
    Model {
        name: name.into(),
        image: format!("registry.example/{name}:1"),
        command: Vec::new(),
        args: Vec::new(),
        env: Vec::new(),
        ports: Vec::new(),
        memory_mib,
        compute,
        demand: Demand::Replicas(replicas),
        isolation: Isolation::Hardware,
        gpus: None,
        latency: None,
        spread: Spread::None,
        pools: Vec::new(),
        gpu_types: Vec::new(),
        priority: 0,
        llm: false,
        span: None,
    }
}

fn spec(pools: Vec<Pool>, models: Vec<Model>) -> Spec {
    let _unused: Option<ArgoCd> = None;
    Spec {
        name: "test".into(),
        cluster: Cluster {
            namespace: "inference".into(),
            operator_namespace: "gpu-operator".into(),
            mig_strategy: MigStrategy::Mixed,
            time_slicing: TimeSlicingOptions {
                rename_by_default: true,
                fail_requests_greater_than_one: true,
            },
            output: OutputOptions { cluster_policy_patch: true, helm_values: true, argocd: None, flux: None },
        },
        pools,
        models,
        policy: Policy {
            llm_never_time_sliced: true,
            max_time_slicing_replicas: 8,
            memory_headroom: 0.0,
            time_slicing_efficiency: 0.9,
        },
    }
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
    assert_eq!(plan.quality.gpus_used, 2);
    assert_eq!(plan.quality.one_gpu_per_replica, 3);
    assert_eq!(plan.quality.lower_bound, 2);
    assert!(plan.quality.first_fit_decreasing.is_some_and(|f| f >= 2));
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
