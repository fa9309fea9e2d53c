//! The verifier on hand-built plans: a sound plan passes, and every rule it enforces is caught.

use std::collections::{BTreeMap, BTreeSet};

use super::{Kind, check};
use crate::bench::{self, A100};
use crate::catalog::{Catalog, layout};
use crate::plan::{
    CostFigures, DevicePluginConfig, GpuFigures, GpuMode, GpuPlan, MigConfig, MigConfigEntry, ModelPlan,
    NodePlan, Plan, PoolPlan, Quality, ReplicaGroup, Tenant,
};
use crate::spec::{Demand, Isolation, Latency, MeasuredPoint, Model, RateDemand, Spec, Spread};

const PCI: &str = "0x20B210DE";

fn tenant(model: &str, start: Option<u8>) -> Tenant {
    Tenant { model: model.to_owned(), instance_start: start }
}

fn group(resource: &str, replicas: u32, nodes: &[&str]) -> ReplicaGroup {
    ReplicaGroup {
        resource: resource.to_owned(),
        per_replica: 1,
        replicas,
        pool: "a100".to_owned(),
        nodes: nodes.iter().map(|n| (*n).to_owned()).collect(),
        processes: 1,
    }
}

fn model_plan(name: &str, groups: Vec<ReplicaGroup>) -> ModelPlan {
    ModelPlan { name: name.to_owned(), groups, reasons: Vec::new(), slo_unverified: Vec::new() }
}

fn entry(devices: Option<Vec<u32>>, mig: &[(&str, u32)]) -> MigConfigEntry {
    MigConfigEntry {
        devices,
        device_filter: vec![PCI.to_owned()],
        mig_enabled: !mig.is_empty(),
        mig_devices: mig.iter().map(|(p, n)| ((*p).to_owned(), *n)).collect(),
    }
}

fn placed(profiles: &[&str]) -> Vec<layout::PlacedInstance> {
    let (_, catalog) = bench::voice_pipeline();
    let gpu = catalog.get(A100).cloned().expect("the catalog has the A100-SXM4-80GB");
    layout::validate(&gpu, profiles).unwrap_or_default()
}

/// Instances at the given starts, as a planner bug might place them (not validated).
fn at_starts(instances: &[(&str, u8)]) -> Vec<layout::PlacedInstance> {
    instances
        .iter()
        .map(|&(profile, start)| layout::PlacedInstance { profile: profile.to_owned(), start })
        .collect()
}

fn start_of(instances: &[layout::PlacedInstance], profile: &str) -> Option<u8> {
    instances.iter().find(|i| i.profile == profile).map(|i| i.start)
}

fn plan_with(
    nodes: Vec<NodePlan>,
    models: Vec<ModelPlan>,
    configs: Vec<(&str, MigConfig)>,
    sharing: Vec<(&str, &[(&str, u32)])>,
) -> Plan {
    let mut mig_configs = BTreeMap::from([("all-disabled".to_owned(), MigConfig::disabled())]);
    mig_configs.extend(configs.into_iter().map(|(n, c)| (n.to_owned(), c)));
    let mut device_plugin_configs = BTreeMap::from([(
        "default".to_owned(),
        DevicePluginConfig { time_slicing: BTreeMap::new(), ..Default::default() },
    )]);
    for (name, entries) in sharing {
        device_plugin_configs.insert(
            name.to_owned(),
            DevicePluginConfig {
                time_slicing: entries.iter().map(|(r, k)| ((*r).to_owned(), *k)).collect(),
                ..Default::default()
            },
        );
    }
    let used = nodes.iter().flat_map(|n| &n.gpus).filter(|g| g.mode != GpuMode::Unused).count() as u32;
    Plan {
        name: "test".to_owned(),
        pools: vec![PoolPlan { name: "a100".to_owned(), gpu: A100.to_owned(), autoscaled: false, nodes }],
        models,
        mig_configs,
        device_plugin_configs,
        quality: Quality {
            gpus: GpuFigures {
                used,
                lower_bound: used,
                model_lower_bound: used,
                one_per_replica: 3,
                first_fit_decreasing: Some(used),
            },
            cost: CostFigures {
                used: None,
                lower_bound: None,
                model_lower_bound: None,
                first_fit_decreasing: None,
            },
            proof: crate::plan::Proof::Optimal,
        },
        changes: None,
    }
}

/// The voice pipeline planned by hand: the LLM on GPU 0, ASR on a 2g.20gb and TTS on a 1g.20gb of GPU 1.
fn voice() -> (Spec, Catalog, Plan) {
    let (spec, catalog) = bench::voice_pipeline();
    let instances = placed(&["2g.20gb", "1g.20gb"]);
    let node = NodePlan {
        name: "gpu-a-1".to_owned(),
        mig_config: "gpuplan-a100-1".to_owned(),
        device_plugin_config: "default".to_owned(),
        must_drain: false,
        transition: None,
        gpus: vec![
            GpuPlan {
                index: 0,
                uuid: None,
                mode: GpuMode::Whole,
                tenants: vec![tenant("nemotron-llm", None)],
            },
            GpuPlan {
                index: 1,
                uuid: None,
                tenants: vec![
                    tenant("parakeet-asr", start_of(&instances, "2g.20gb")),
                    tenant("fastpitch-tts", start_of(&instances, "1g.20gb")),
                ],
                mode: GpuMode::Mig { instances },
            },
        ],
    };
    let config = MigConfig {
        entries: vec![entry(Some(vec![0]), &[]), entry(Some(vec![1]), &[("2g.20gb", 1), ("1g.20gb", 1)])],
    };
    let models = vec![
        model_plan("fastpitch-tts", vec![group("nvidia.com/mig-1g.20gb", 1, &["gpu-a-1"])]),
        model_plan("nemotron-llm", vec![group("nvidia.com/gpu", 1, &["gpu-a-1"])]),
        model_plan("parakeet-asr", vec![group("nvidia.com/mig-2g.20gb", 1, &["gpu-a-1"])]),
    ];
    let plan = plan_with(vec![node], models, vec![("gpuplan-a100-1", config)], Vec::new());
    (spec, catalog, plan)
}

/// Four shared models time-sliced 2 ways on both GPUs of one node.
fn time_sliced(computes: [f64; 4]) -> (Spec, Catalog, Plan) {
    let (_, catalog) = bench::voice_pipeline();
    let names = ["a", "b", "c", "d"];
    let models = names
        .iter()
        .zip(computes)
        .map(|(n, c)| {
            let mut m = bench::model(n, 8_000, c, 1);
            m.isolation = Isolation::Shared;
            m
        })
        .collect();
    let spec = bench::spec("ts", vec![bench::pool("a100", A100, 2, vec!["gpu-a-1".to_owned()])], models);
    let gpu = |index, a: &str, b: &str| GpuPlan {
        index,
        uuid: None,
        mode: GpuMode::TimeSliced { replicas: 2 },
        tenants: vec![tenant(a, None), tenant(b, None)],
    };
    let node = NodePlan {
        name: "gpu-a-1".to_owned(),
        mig_config: "all-disabled".to_owned(),
        device_plugin_config: "gpuplan-ts-gpu-2".to_owned(),
        must_drain: false,
        transition: None,
        gpus: vec![gpu(0, "a", "b"), gpu(1, "c", "d")],
    };
    let models =
        names.iter().map(|n| model_plan(n, vec![group("nvidia.com/gpu.shared", 1, &["gpu-a-1"])])).collect();
    let plan =
        plan_with(vec![node], models, Vec::new(), vec![("gpuplan-ts-gpu-2", &[("nvidia.com/gpu", 2)])]);
    (spec, catalog, plan)
}

fn kinds(spec: &Spec, catalog: &Catalog, plan: &Plan) -> BTreeSet<Kind> {
    check(spec, catalog, plan).into_iter().map(|v| v.kind).collect()
}

fn assert_finds(spec: &Spec, catalog: &Catalog, plan: &Plan, kind: Kind) {
    let found = check(spec, catalog, plan);
    assert!(found.iter().any(|v| v.kind == kind), "expected {kind:?}, found {found:#?}");
}

/// The verifier finds nothing wrong with a hand-made sound plan.
fn assert_sound((spec, catalog, plan): (Spec, Catalog, Plan)) {
    assert_eq!(check(&spec, &catalog, &plan), Vec::new());
}

fn mig_gpu(plan: &mut Plan) -> &mut GpuPlan {
    &mut plan.pools[0].nodes[0].gpus[1]
}

fn model_mut<'a>(spec: &'a mut Spec, name: &str) -> &'a mut Model {
    spec.models.iter_mut().find(|m| m.name == name).unwrap_or_else(|| panic!("model {name}"))
}

#[test]
fn accepts_the_hand_planned_voice_pipeline() {
    assert_sound(voice());
}

#[test]
fn accepts_a_sound_time_sliced_node() {
    assert_sound(time_sliced([0.3, 0.3, 0.3, 0.3]));
}

#[test]
fn rejects_instances_at_starts_the_profile_does_not_allow() {
    let (spec, catalog, mut plan) = voice();
    // {4g, 3g} is a valid multiset, but 4g.40gb may only start at slice 0.
    let instances = at_starts(&[("3g.40gb", 0), ("4g.40gb", 4)]);
    let g = mig_gpu(&mut plan);
    g.tenants = vec![tenant("parakeet-asr", Some(0)), tenant("fastpitch-tts", Some(4))];
    g.mode = GpuMode::Mig { instances };
    assert_finds(&spec, &catalog, &plan, Kind::InvalidLayout);
}

#[test]
fn rejects_overlapping_mig_instances_and_layouts_validate_refuses() {
    let (spec, catalog, mut plan) = voice();
    let overlapping = at_starts(&[("2g.20gb", 0), ("1g.10gb", 1)]);
    mig_gpu(&mut plan).mode = GpuMode::Mig { instances: overlapping };
    assert_finds(&spec, &catalog, &plan, Kind::InvalidLayout);

    let too_many = at_starts(&[("2g.20gb", 0), ("2g.20gb", 2), ("2g.20gb", 4), ("2g.20gb", 6)]);
    mig_gpu(&mut plan).mode = GpuMode::Mig { instances: too_many };
    let found = check(&spec, &catalog, &plan);
    assert!(
        found.iter().any(|v| v.kind == Kind::InvalidLayout && v.message.contains("maximum")),
        "{found:#?}"
    );
}

#[test]
fn rejects_a_tenant_larger_than_its_instance_nvml_memory() {
    let (mut spec, catalog, plan) = voice();
    // 2g.20gb offers 19968 MiB, not the 20 GiB of its name.
    model_mut(&mut spec, "parakeet-asr").memory_mib = 20 * 1024;
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Memory]));
}

#[test]
fn rejects_a_tenant_needing_more_compute_than_its_sm_share() {
    let (mut spec, catalog, plan) = voice();
    model_mut(&mut spec, "parakeet-asr").compute = 0.3; // 2g.20gb has 28 of 108 SMs.
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Compute]));
}

#[test]
fn rejects_time_sliced_tenants_over_one_kth_of_the_memory() {
    let (mut spec, catalog, plan) = time_sliced([0.3; 4]);
    spec.models[0].memory_mib = 81_920 / 2 + 1;
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Memory]));
}

#[test]
fn rejects_time_sliced_tenants_over_the_efficiency_on_one_gpu() {
    let (spec, catalog, plan) = time_sliced([0.5, 0.4, 0.1, 0.1]);
    let found = check(&spec, &catalog, &plan);
    assert!(found.iter().any(|v| v.kind == Kind::Compute && v.at.contains("gpu 0")), "{found:#?}");
}

#[test]
fn rejects_any_k_cotenants_that_would_not_fit_together() {
    // Per GPU 0.7 ≤ 0.76, but the device plugin may pair `a` and `c`: 1.0.
    let (spec, catalog, plan) = time_sliced([0.5, 0.2, 0.5, 0.2]);
    let found = check(&spec, &catalog, &plan);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].kind == Kind::Compute && found[0].message.contains("any 2 tenants"));
}

#[test]
fn rejects_hardware_isolation_on_a_time_sliced_gpu_and_dedicated_on_mig() {
    let (mut spec, catalog, plan) = time_sliced([0.3; 4]);
    spec.models[0].isolation = Isolation::Hardware;
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Isolation]));

    let (mut spec, catalog, plan) = voice();
    model_mut(&mut spec, "parakeet-asr").isolation = Isolation::Dedicated;
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Isolation]));
}

#[test]
fn rejects_a_time_sliced_llm_under_the_llm_policy() {
    let (mut spec, catalog, plan) = time_sliced([0.3; 4]);
    spec.models[1].llm = true;
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Isolation]));
    spec.policy.llm_never_time_sliced = false;
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::new());
}

#[test]
fn rejects_missing_replicas() {
    let (mut spec, catalog, plan) = voice();
    model_mut(&mut spec, "parakeet-asr").demand = Demand::Replicas(2);
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Replicas]));
}

#[test]
fn rejects_groups_that_disagree_with_the_tenants() {
    let (spec, catalog, mut plan) = voice();
    plan.models[2].groups[0].replicas = 2;
    assert_finds(&spec, &catalog, &plan, Kind::Replicas);
}

#[test]
fn checks_rate_coverage_with_admissible_points_only() {
    let (mut spec, catalog, plan) = voice();
    let point = |profile: &str, rps, latency_ms| MeasuredPoint {
        gpu: A100.to_owned(),
        profile: profile.to_owned(),
        batch_size: 1,
        processes: 1,
        rps,
        latency_ms,
    };
    let rate = |rps| {
        Demand::Rate(RateDemand {
            rps,
            slo_ms: Some(100.0),
            admission_factor: 0.45,
            min_replicas: 1,
            // A sweep: the 90 rps point misses 0.45 × 100 ms, so the capacity is where the line
            // from 60 rps (30 ms) to 90 rps (50 ms) reaches 45 ms, 82.5 rps; a 1g point does not
            // apply to a 2g group.
            points: vec![
                point("2g.20gb", 60.0, 30.0),
                point("2g.20gb", 90.0, 50.0),
                point("1g.20gb", 200.0, 10.0),
            ],
        })
    };
    model_mut(&mut spec, "parakeet-asr").demand = rate(82.5);
    assert_eq!(check(&spec, &catalog, &plan), Vec::new());
    model_mut(&mut spec, "parakeet-asr").demand = rate(83.0);
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Rate]));
}

#[test]
fn accepts_mps_processes_of_a_measured_point_only_on_a_dra_pool_allowing_mps() {
    let (mut spec, catalog, mut plan) = voice();
    let point = |processes, rps| MeasuredPoint {
        gpu: A100.to_owned(),
        profile: "2g.20gb".to_owned(),
        batch_size: 1,
        processes,
        rps,
        latency_ms: 10.0,
    };
    // One process serves 60 rps; three MPS processes 3 × 30 = 90 rps on the instance.
    let demand = Demand::Rate(RateDemand {
        rps: 90.0,
        slo_ms: Some(100.0),
        admission_factor: 0.45,
        min_replicas: 1,
        points: vec![point(1, 60.0), point(3, 30.0)],
    });
    let m = model_mut(&mut spec, "parakeet-asr");
    m.demand = demand;
    m.isolation = crate::spec::Isolation::Shared;
    m.memory_mib = 6 * 1024;
    plan.models[2].groups[0].processes = 3;
    // On the device plugin a 3-process point is not admissible: nothing is covered.
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Rate]));
    spec.pools[0].dra = Some(crate::spec::DraPool::default());
    spec.pools[0].sharing.mps = true;
    assert_eq!(check(&spec, &catalog, &plan), Vec::new());
    // Each of 3 processes gets a third of the 2g.20gb instance's memory: 7 GiB does not fit.
    model_mut(&mut spec, "parakeet-asr").memory_mib = 7 * 1024;
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Rate]));
    // `allowMps: false` keeps the model off MPS.
    let m = model_mut(&mut spec, "parakeet-asr");
    m.memory_mib = 6 * 1024;
    m.allow_mps = false;
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Rate]));
}

#[test]
fn rejects_two_replicas_on_one_gpu_under_gpu_spread() {
    let (mut spec, catalog, mut plan) = voice();
    let instances = placed(&["2g.20gb", "2g.20gb", "1g.20gb"]);
    let asr: Vec<u8> = instances.iter().filter(|i| i.profile == "2g.20gb").map(|i| i.start).collect();
    let g = mig_gpu(&mut plan);
    g.tenants = vec![
        tenant("parakeet-asr", Some(asr[0])),
        tenant("parakeet-asr", Some(asr[1])),
        tenant("fastpitch-tts", start_of(&instances, "1g.20gb")),
    ];
    g.mode = GpuMode::Mig { instances };
    plan.mig_configs.insert(
        "gpuplan-a100-1".to_owned(),
        MigConfig {
            entries: vec![entry(Some(vec![0]), &[]), entry(Some(vec![1]), &[("2g.20gb", 2), ("1g.20gb", 1)])],
        },
    );
    plan.models[2].groups[0].replicas = 2;
    let asr_model = model_mut(&mut spec, "parakeet-asr");
    asr_model.demand = Demand::Replicas(2);
    assert_eq!(check(&spec, &catalog, &plan), Vec::new());
    model_mut(&mut spec, "parakeet-asr").spread = Spread::Gpu;
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Spread]));
    model_mut(&mut spec, "parakeet-asr").spread = Spread::Node;
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Spread]));
}

#[test]
fn rejects_replicas_stacked_on_one_time_sliced_resource_under_gpu_spread() {
    let (mut spec, catalog, mut plan) = time_sliced([0.2; 4]);
    // `a` twice, on distinct GPUs of the node: the device plugin may still pick one GPU for both.
    plan.pools[0].nodes[0].gpus[1].tenants[0] = tenant("a", None);
    spec.models[0].demand = Demand::Replicas(2);
    spec.models[2].demand = Demand::Replicas(0);
    plan.models[0].groups[0].replicas = 2;
    plan.models[2].groups.clear();
    assert_eq!(check(&spec, &catalog, &plan), Vec::new());
    spec.models[0].spread = Spread::Gpu;
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Spread]));
}

#[test]
fn rejects_pools_and_gpu_types_the_model_may_not_use() {
    let (mut spec, catalog, plan) = voice();
    model_mut(&mut spec, "parakeet-asr").pools = vec!["h100".to_owned()];
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::AllowedPools]));
    let (mut spec, catalog, plan) = voice();
    model_mut(&mut spec, "parakeet-asr").gpu_types = vec![bench::H100.to_owned()];
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::AllowedPools]));
    model_mut(&mut spec, "parakeet-asr").gpu_types = vec!["a100-80gb-sxm".to_owned()];
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::new(), "aliases name the same GPU");
}

#[test]
fn rejects_nodes_and_gpus_beyond_the_pool() {
    let (spec, catalog, mut plan) = voice();
    let mut extra = plan.pools[0].nodes[0].clone();
    extra.name = "gpu-a-9".to_owned();
    extra.gpus.iter_mut().for_each(|g| {
        g.mode = GpuMode::Unused;
        g.tenants.clear();
    });
    extra.mig_config = "all-disabled".to_owned();
    plan.pools[0].nodes.push(extra);
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::NodeCapacity]));

    let (spec, catalog, mut plan) = voice();
    plan.pools[0].nodes[0].gpus.push(GpuPlan {
        index: 2,
        uuid: None,
        mode: GpuMode::Unused,
        tenants: Vec::new(),
    });
    assert_finds(&spec, &catalog, &plan, Kind::NodeCapacity);
}

#[test]
fn rejects_a_node_with_exclusive_and_time_sliced_whole_gpus() {
    let (spec, catalog, mut plan) = time_sliced([0.3; 4]);
    let g = &mut plan.pools[0].nodes[0].gpus[1];
    g.mode = GpuMode::Whole;
    g.tenants.truncate(1);
    let found = kinds(&spec, &catalog, &plan);
    assert!(found.contains(&Kind::NodeSharing) && found.contains(&Kind::DevicePluginConfig), "{found:?}");
}

#[test]
fn rejects_time_slicing_that_the_node_config_does_not_configure() {
    let (spec, catalog, mut plan) = time_sliced([0.3; 4]);
    plan.pools[0].nodes[0].device_plugin_config = "default".to_owned();
    assert_finds(&spec, &catalog, &plan, Kind::DevicePluginConfig);
    plan.pools[0].nodes[0].device_plugin_config = "nowhere".to_owned();
    assert_finds(&spec, &catalog, &plan, Kind::DevicePluginConfig);
}

#[test]
fn rejects_an_instance_shared_without_time_slicing_its_resource() {
    let (mut spec, catalog, mut plan) = voice();
    for name in ["parakeet-asr", "fastpitch-tts"] {
        let m = model_mut(&mut spec, name);
        m.isolation = Isolation::Shared;
        m.compute = 0.05;
    }
    let start = start_of(&placed(&["2g.20gb", "1g.20gb"]), "2g.20gb");
    mig_gpu(&mut plan).tenants[1] = tenant("fastpitch-tts", start);
    plan.models[0].groups[0].resource = "nvidia.com/mig-2g.20gb".to_owned();
    assert_finds(&spec, &catalog, &plan, Kind::NodeSharing);
    // Time-slicing the 2g.20gb resource 2 ways makes it sound (each tenant ≤ 9984 MiB).
    plan.device_plugin_configs.insert(
        "ts".to_owned(),
        DevicePluginConfig {
            time_slicing: BTreeMap::from([("nvidia.com/mig-2g.20gb".to_owned(), 2)]),
            ..Default::default()
        },
    );
    plan.pools[0].nodes[0].device_plugin_config = "ts".to_owned();
    for m in &mut plan.models {
        if m.name != "nemotron-llm" {
            m.groups[0].resource = "nvidia.com/mig-2g.20gb.shared".to_owned();
        }
    }
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Memory]), "tts needs 12780 MiB > 9984");
}

#[test]
fn rejects_mig_configs_that_disagree_with_the_gpus() {
    let (spec, catalog, mut plan) = voice();
    plan.mig_configs.insert(
        "gpuplan-a100-1".to_owned(),
        MigConfig { entries: vec![entry(Some(vec![0]), &[]), entry(Some(vec![1]), &[("3g.40gb", 1)])] },
    );
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::MigConfig]));

    let (spec, catalog, mut plan) = voice();
    plan.mig_configs.remove("all-disabled");
    plan.pools[0].nodes[0].mig_config = "unknown".to_owned();
    let found = check(&spec, &catalog, &plan);
    assert!(found.iter().filter(|v| v.kind == Kind::MigConfig).count() >= 2, "{found:#?}");

    let (spec, catalog, mut plan) = voice();
    plan.pools[0].nodes[0].mig_config = "all-disabled".to_owned();
    assert_eq!(
        kinds(&spec, &catalog, &plan),
        BTreeSet::from([Kind::MigConfig]),
        "MIG GPU under all-disabled"
    );
}

#[test]
fn rejects_a_group_whose_resource_the_node_does_not_expose() {
    let (spec, catalog, mut plan) = voice();
    plan.models[2].groups.push(group("nvidia.com/mig-3g.40gb", 0, &["gpu-a-1"]));
    assert_eq!(
        kinds(&spec, &catalog, &plan),
        BTreeSet::from([Kind::GroupResource]),
        "{:#?}",
        check(&spec, &catalog, &plan)
    );
}

#[test]
fn rejects_quality_figures_that_disagree_with_the_plan() {
    let (spec, catalog, mut plan) = voice();
    plan.quality.gpus.first_fit_decreasing = Some(1);
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Quality]));
    plan.quality.gpus.first_fit_decreasing = None;
    plan.quality.gpus.used = 1;
    assert_finds(&spec, &catalog, &plan, Kind::Quality);
}

#[test]
fn priced_quality_is_judged_in_cost() {
    let (spec, catalog, mut plan) = voice();
    plan.quality.cost.used = Some(4.8);
    plan.quality.cost.lower_bound = Some(4.8);
    plan.quality.cost.first_fit_decreasing = Some(4.8);
    // Priced: more GPUs than first fit is fine when the cost is not higher.
    plan.quality.gpus.first_fit_decreasing = Some(1);
    assert!(check(&spec, &catalog, &plan).is_empty(), "{:?}", check(&spec, &catalog, &plan));
    plan.quality.cost.first_fit_decreasing = Some(2.4);
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Quality]));
    plan.quality.cost.first_fit_decreasing = Some(4.8);
    plan.quality.cost.lower_bound = Some(5.0);
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Quality]));
}

#[test]
fn rejects_tenants_and_pools_the_spec_does_not_know() {
    let (spec, catalog, mut plan) = voice();
    mig_gpu(&mut plan).tenants.push(tenant("ghost", Some(7)));
    let found = kinds(&spec, &catalog, &plan);
    assert!(found.contains(&Kind::Unknown) && found.contains(&Kind::Tenant), "{found:?}");

    let (spec, catalog, mut plan) = voice();
    plan.pools[0].name = "elsewhere".to_owned();
    assert_finds(&spec, &catalog, &plan, Kind::Unknown);
}

#[test]
fn reports_are_sorted_and_free_of_duplicates() {
    let (mut spec, catalog, plan) = voice();
    model_mut(&mut spec, "parakeet-asr").memory_mib = 90_000;
    model_mut(&mut spec, "fastpitch-tts").memory_mib = 90_000;
    let found = check(&spec, &catalog, &plan);
    let mut sorted = found.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(found, sorted);
    assert_eq!(found.len(), 2);
}

/// A tensor-parallel model (2 whole GPUs per replica, 70 GiB on each) on a pool of 2 nodes × 2 GPUs.
fn tensor_parallel(gpus_on: [(&str, u32); 2]) -> (Spec, Catalog, Plan) {
    let (_, catalog) = bench::voice_pipeline();
    let mut m = bench::model("tp", 2 * 70 * 1024, 1.0, 1);
    m.gpus = Some(2);
    m.isolation = Isolation::Dedicated;
    let nodes = vec!["n1".to_owned(), "n2".to_owned()];
    let spec = bench::spec("tp", vec![bench::pool("a100", A100, 2, nodes)], vec![m]);
    let node = |name: &str| NodePlan {
        name: name.to_owned(),
        mig_config: "all-disabled".to_owned(),
        device_plugin_config: "default".to_owned(),
        must_drain: false,
        transition: None,
        gpus: (0..2)
            .map(|index| {
                let used = gpus_on.contains(&(name, index));
                GpuPlan {
                    index,
                    uuid: None,
                    mode: if used { GpuMode::Whole } else { GpuMode::Unused },
                    tenants: if used { vec![tenant("tp", None)] } else { Vec::new() },
                }
            })
            .collect(),
    };
    let mut nodes_used: Vec<&str> = gpus_on.iter().map(|(n, _)| *n).collect();
    nodes_used.dedup();
    let mut g = group("nvidia.com/gpu", 1, &nodes_used);
    g.per_replica = 2;
    let plan =
        plan_with(vec![node("n1"), node("n2")], vec![model_plan("tp", vec![g])], Vec::new(), Vec::new());
    (spec, catalog, plan)
}

#[test]
fn accepts_a_multi_gpu_replica_on_whole_gpus_of_one_node() {
    assert_sound(tensor_parallel([("n1", 0), ("n1", 1)]));
}

#[test]
fn rejects_a_multi_gpu_replica_split_across_nodes_or_on_mig() {
    let (spec, catalog, plan) = tensor_parallel([("n1", 0), ("n2", 0)]);
    assert_finds(&spec, &catalog, &plan, Kind::Replicas);

    let (spec, catalog, mut plan) = tensor_parallel([("n1", 0), ("n1", 1)]);
    plan.models[0].groups[0].per_replica = 1;
    assert_eq!(kinds(&spec, &catalog, &plan), BTreeSet::from([Kind::Replicas]));

    let (mut spec, catalog, mut plan) = tensor_parallel([("n1", 0), ("n1", 1)]);
    spec.models[0].memory_mib = 2 * 9_000;
    spec.models[0].compute = 0.1;
    let instances = placed(&["1g.10gb"]);
    plan.pools[0].nodes[0].gpus[1] = GpuPlan {
        index: 1,
        uuid: None,
        tenants: vec![tenant("tp", Some(instances[0].start))],
        mode: GpuMode::Mig { instances },
    };
    plan.pools[0].nodes[0].mig_config = "gpuplan-a100-1".to_owned();
    plan.mig_configs.insert(
        "gpuplan-a100-1".to_owned(),
        MigConfig { entries: vec![entry(Some(vec![0]), &[]), entry(Some(vec![1]), &[("1g.10gb", 1)])] },
    );
    assert_finds(&spec, &catalog, &plan, Kind::Isolation);
}

#[test]
fn accepts_a_replica_alone_on_its_device_outside_the_latency_range_but_not_one_predicted_too_slow() {
    let (mut spec, catalog, plan) = voice();
    // Alone on whole GPU 0 at own load 0.65: the law refuses (above 0.6); nothing the plan could
    // choose changes that replica's latency, so its SLO is unverified, not violated.
    let llm = model_mut(&mut spec, "nemotron-llm");
    llm.compute = 0.65;
    llm.latency = Some(Latency { p99_ms: 100.0, baseline_ms: Some(10.0), baseline_gpu: None });
    assert!(!kinds(&spec, &catalog, &plan).contains(&Kind::Latency));
    // Inside the range and predicted above the SLO (10 / (1 − 0.5/0.75) = 30 ms > 20 ms).
    let llm = model_mut(&mut spec, "nemotron-llm");
    llm.compute = 0.5;
    llm.latency = Some(Latency { p99_ms: 20.0, baseline_ms: Some(10.0), baseline_gpu: None });
    assert_finds(&spec, &catalog, &plan, Kind::Latency);
}

/// [`time_sliced`], turned into MPS: the pool allows `mps`, the GPUs are MPS clients two ways,
/// the node's config shares `nvidia.com/gpu` by MPS.
fn mps(computes: [f64; 4]) -> (Spec, Catalog, Plan) {
    let (mut spec, catalog, mut plan) = time_sliced(computes);
    spec.pools[0].sharing.mps = true;
    for g in &mut plan.pools[0].nodes[0].gpus {
        g.mode = GpuMode::Mps { replicas: 2 };
    }
    plan.pools[0].nodes[0].device_plugin_config = "gpuplan-mps-gpu-2".to_owned();
    let config =
        DevicePluginConfig { mps: BTreeMap::from([("nvidia.com/gpu".to_owned(), 2)]), ..Default::default() };
    plan.device_plugin_configs.insert("gpuplan-mps-gpu-2".to_owned(), config);
    (spec, catalog, plan)
}

#[test]
fn accepts_a_sound_mps_node() {
    assert_sound(mps([0.2, 0.2, 0.2, 0.2]));
}

#[test]
fn rejects_mps_clients_over_their_thread_cap_refusing_mps_or_on_a_pool_without_mps() {
    // 0.55 + 0.2 fit the time-slicing efficiency together, but 0.55 is above the 50% cap.
    let (spec, catalog, plan) = mps([0.55, 0.2, 0.2, 0.2]);
    assert_finds(&spec, &catalog, &plan, Kind::Compute);
    let (mut spec, catalog, plan) = mps([0.2, 0.2, 0.2, 0.2]);
    model_mut(&mut spec, "a").allow_mps = false;
    assert_finds(&spec, &catalog, &plan, Kind::Isolation);
    let (mut spec, catalog, plan) = mps([0.2, 0.2, 0.2, 0.2]);
    spec.pools[0].sharing.mps = false;
    assert_finds(&spec, &catalog, &plan, Kind::NodeSharing);
    // MPS GPUs behind a time-slicing config.
    let (spec, catalog, mut plan) = mps([0.2, 0.2, 0.2, 0.2]);
    plan.pools[0].nodes[0].device_plugin_config = "gpuplan-ts-gpu-2".to_owned();
    assert_finds(&spec, &catalog, &plan, Kind::DevicePluginConfig);
}

#[test]
fn rejects_a_node_mixing_mps_and_time_slicing_or_time_slicing_on_a_pool_allowing_only_mps() {
    // Per node: one GPU an MPS client, the other time-sliced, behind either config.
    for config in ["gpuplan-mps-gpu-2", "gpuplan-ts-gpu-2"] {
        let (spec, catalog, mut plan) = mps([0.2, 0.2, 0.2, 0.2]);
        plan.pools[0].nodes[0].gpus[1].mode = GpuMode::TimeSliced { replicas: 2 };
        plan.pools[0].nodes[0].device_plugin_config = config.to_owned();
        assert!(!kinds(&spec, &catalog, &plan).is_empty(), "{config}");
    }
    let (spec, catalog, mut plan) = mps([0.2, 0.2, 0.2, 0.2]);
    plan.pools[0].nodes[0].gpus[1].mode = GpuMode::TimeSliced { replicas: 2 };
    assert_finds(&spec, &catalog, &plan, Kind::NodeSharing);
    // A time-sliced node is sound where the pool allows both modes, not where it allows `mps`
    // alone.
    let (mut spec, catalog, plan) = time_sliced([0.2, 0.2, 0.2, 0.2]);
    spec.pools[0].sharing.mps = true;
    assert_sound((spec.clone(), catalog.clone(), plan.clone()));
    spec.pools[0].sharing.time_slicing = false;
    assert_finds(&spec, &catalog, &plan, Kind::NodeSharing);
}

#[test]
fn refuses_a_mig_gpu_beside_mps_ones_on_a_device_plugin_node_but_not_on_a_dra_node() {
    let (mut spec, catalog, mut plan) = mps([0.2, 0.2, 0.2, 0.2]);
    let instances = placed(&["1g.10gb"]);
    let node = &mut plan.pools[0].nodes[0];
    node.gpus[1] = GpuPlan { index: 1, uuid: None, tenants: Vec::new(), mode: GpuMode::Mig { instances } };
    node.mig_config = "gpuplan-a100-1".to_owned();
    plan.mig_configs.insert(
        "gpuplan-a100-1".to_owned(),
        MigConfig { entries: vec![entry(Some(vec![0]), &[]), entry(Some(vec![1]), &[("1g.10gb", 1)])] },
    );
    assert!(kinds(&spec, &catalog, &plan).contains(&Kind::NodeSharing));
    // The DRA driver runs one MPS daemon per claim: MIG beside MPS is its node's business.
    spec.pools[0].dra = Some(crate::spec::DraPool::default());
    assert!(
        !kinds(&spec, &catalog, &plan).contains(&Kind::NodeSharing),
        "{:#?}",
        check(&spec, &catalog, &plan)
    );
}
