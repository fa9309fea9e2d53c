//! Hand-built (spec, plan) pairs that the bundle, emit and tools tests iterate over.
//!
//! Hand-built plans cover shapes the examples may not (time-slicing, autoscaled pools, multi-GPU
//! with Argo CD and Flux wrappers); [`all`] adds the real plans of every example manifest, so
//! every test that iterates over it covers both.
//! MIG layouts here are placed with `catalog::layout::validate`, so they are valid by the same
//! rule the planner uses.

use std::collections::BTreeMap;

use gpuplan::catalog::{Catalog, layout};
use gpuplan::plan::{
    CostFigures, DevicePluginConfig, GpuFigures, GpuMode, GpuPlan, MigConfig, MigConfigEntry, ModelPlan,
    NodePlan, Plan, PoolPlan, Quality, ReplicaGroup, Tenant,
};
use gpuplan::spec::{
    ArgoCd, Container, Demand, Flux, Isolation, Model, Nodes, Policy, Pool, Port, Spec, Spread, Taint,
};

pub(crate) const A100: &str = "A100-SXM4-80GB";

/// One test case: a spec and the plan made for it.
#[derive(Debug)]
pub(crate) struct Fixture {
    pub name: String,
    pub spec: Spec,
    pub plan: Plan,
}

/// Every fixture plan: the hand-built ones, then every example manifest the pipeline compiles.
pub(crate) fn all() -> Vec<Fixture> {
    let mut all = vec![voice_pipeline(), time_sliced(), autoscaled(), multi_gpu()];
    all.extend(examples());
    all
}

/// `examples/*.yaml` and `examples/*/gpuplan.yaml`, compiled with the real front end and planner.
/// A manifest the pipeline refuses is left out here: whether every example compiles is the
/// examples test's job; these tests check the bundles of those that do.
pub(crate) fn examples() -> Vec<Fixture> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut paths: Vec<std::path::PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .map(|p| if p.is_dir() { p.join("gpuplan.yaml") } else { p })
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    paths.sort();
    let catalog = catalog();
    let templates = gpuplan::render::Templates::builtin();
    paths
        .into_iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            let rel = path.strip_prefix(&dir).ok()?.to_string_lossy().into_owned();
            let mut sources = gpuplan::diagnostics::Sources::new();
            let mut read = gpuplan::pipeline::no_measurement_files;
            let compiled = gpuplan::pipeline::bundle_from_manifest(
                &mut sources,
                &rel,
                &text,
                &catalog,
                &templates,
                &mut read,
            )
            .ok()?;
            let name = format!("example-{}", rel.trim_end_matches(".yaml").replace(['/', '.'], "-"));
            Some(Fixture { name, spec: compiled.spec, plan: compiled.plan })
        })
        .collect()
}

pub(crate) fn catalog() -> Catalog {
    Catalog::builtin()
}

/// The harness's spec ([`Spec::from_parts`]) with 5% memory headroom and 0.9 time-slicing
/// efficiency.
pub(crate) fn spec(name: &str, pools: Vec<Pool>, models: Vec<Model>) -> Spec {
    let policy = Policy { memory_headroom: 0.05, time_slicing_efficiency: 0.9, ..gpuplan::bench::policy() };
    gpuplan::bench::spec_with(name, pools, models, policy)
}

pub(crate) fn pool(name: &str, gpus_per_node: u32, nodes: Nodes) -> Pool {
    Pool {
        name: name.to_owned(),
        gpu: A100.to_owned(),
        gpus_per_node,
        nodes,
        cost_per_gpu_hour: Some(2.4),
        node_selector: BTreeMap::new(),
        taints: Vec::new(),
        current: Vec::new(),
        sharing: Default::default(),
        dra: None,
        span: None,
    }
}

pub(crate) fn model(name: &str, image: &str, replicas: u32) -> Model {
    Model {
        name: name.to_owned(),
        container: Container { image: image.to_owned(), command: Vec::new(), args: Vec::new() },
        env: Vec::new(),
        ports: Vec::new(),
        memory_mib: 10 * 1024,
        compute: 0.15,
        demand: Demand::Replicas(replicas),
        isolation: Isolation::Hardware,
        gpus: None,
        latency: None,
        spread: Spread::None,
        pools: Vec::new(),
        gpu_types: Vec::new(),
        priority: 0,
        llm: false,
        allow_mps: true,
        deployment: Default::default(),
        span: None,
    }
}

fn port(name: &str, port: u16) -> Port {
    Port { name: name.to_owned(), port, protocol: "TCP".to_owned() }
}

/// A MIG GPU whose instances are placed by the catalog's layout rule; `tenants` maps a profile
/// occurrence (in placement order) to a model.
pub(crate) fn mig_gpu(index: u32, profiles: &[&str], tenants: &[Option<&str>]) -> GpuPlan {
    let catalog = catalog();
    let gpu = catalog.get(A100).expect("the catalog has the A100-80GB");
    let instances = layout::validate(gpu, profiles).expect("fixture layouts are valid");
    let tenants = instances
        .iter()
        .zip(tenants.iter().chain(std::iter::repeat(&None)))
        .filter_map(|(inst, t)| t.map(|m| Tenant { model: m.to_owned(), instance_start: Some(inst.start) }))
        .collect();
    GpuPlan { index, uuid: None, mode: GpuMode::Mig { instances }, tenants }
}

pub(crate) fn whole_gpu(index: u32, model: Option<&str>) -> GpuPlan {
    match model {
        Some(m) => GpuPlan {
            index,
            uuid: None,
            mode: GpuMode::Whole,
            tenants: vec![Tenant { model: m.to_owned(), instance_start: None }],
        },
        None => GpuPlan { index, uuid: None, mode: GpuMode::Unused, tenants: Vec::new() },
    }
}

fn node(name: &str, mig: &str, dp: &str, must_drain: bool, gpus: Vec<GpuPlan>) -> NodePlan {
    NodePlan {
        name: name.to_owned(),
        mig_config: mig.to_owned(),
        device_plugin_config: dp.to_owned(),
        must_drain,
        transition: None,
        gpus,
    }
}

fn group(resource: &str, per_replica: u32, replicas: u32, pool: &str, nodes: &[&str]) -> ReplicaGroup {
    ReplicaGroup {
        resource: resource.to_owned(),
        per_replica,
        replicas,
        pool: pool.to_owned(),
        nodes: nodes.iter().map(|n| (*n).to_owned()).collect(),
        processes: 1,
    }
}

fn entry(devices: Option<Vec<u32>>, filter: &[&str], mig: &[(&str, u32)]) -> MigConfigEntry {
    MigConfigEntry {
        devices,
        device_filter: filter.iter().map(|f| (*f).to_owned()).collect(),
        mig_enabled: !mig.is_empty(),
        mig_devices: mig.iter().map(|(p, c)| ((*p).to_owned(), *c)).collect(),
    }
}

fn all_disabled() -> MigConfig {
    MigConfig { entries: vec![entry(None, &[], &[])] }
}

fn exclusive() -> DevicePluginConfig {
    DevicePluginConfig { time_slicing: BTreeMap::new(), ..Default::default() }
}

fn quality(used: u32, lower: u32, baseline: u32, cost: Option<f64>) -> Quality {
    Quality {
        gpus: GpuFigures {
            used,
            lower_bound: lower,
            model_lower_bound: lower,
            one_per_replica: baseline,
            first_fit_decreasing: Some(used),
        },
        cost: CostFigures {
            used: cost,
            lower_bound: cost,
            model_lower_bound: cost,
            first_fit_decreasing: cost,
        },
        proof: gpuplan::plan::Proof::Optimal,
    }
}

/// The seed's voice pipeline: ASR (2 replicas) and TTS share GPU 0 of `gpu-a-1` through MIG,
/// the LLM has GPU 1 whole; `gpu-a-2` stays unused. `gpu-a-1`'s layout changes (drain).
pub(crate) fn voice_pipeline() -> Fixture {
    let mut asr = model("parakeet-asr", "nvcr.io/nim/nvidia/parakeet-1-1b-ctc-en-us:1.0.0", 2);
    asr.ports = vec![port("grpc", 50051)];
    asr.env = vec![("NIM_TAGS_SELECTOR".to_owned(), "mode=ofl".to_owned())];
    let mut tts = model("fastpitch-tts", "nvcr.io/nim/nvidia/fastpitch-hifigan-tts:1.0.0", 1);
    tts.ports = vec![port("grpc", 50051)];
    let mut llm = model("nemotron-llm", "nvcr.io/nim/nvidia/nemotron-mini-4b-instruct:1.2.0", 1);
    llm.memory_mib = 70 * 1024;
    llm.gpus = Some(1);
    llm.llm = true;
    llm.ports = vec![port("http", 8000)];
    llm.container.args = vec!["--max-model-len".to_owned(), "8192".to_owned()];
    let pool = pool("a100", 2, Nodes::Named(vec!["gpu-a-1".to_owned(), "gpu-a-2".to_owned()]));
    let spec = spec("voice-prod", vec![pool], vec![asr, tts, llm]);

    let gpu0 = mig_gpu(
        0,
        &["2g.20gb", "2g.20gb", "3g.40gb"],
        &[Some("parakeet-asr"), Some("parakeet-asr"), Some("fastpitch-tts")],
    );
    let plan = Plan {
        name: "voice-prod".to_owned(),
        pools: vec![PoolPlan {
            name: "a100".to_owned(),
            gpu: A100.to_owned(),
            autoscaled: false,
            nodes: vec![
                node("gpu-a-1", "voice-prod-a100-l1", "voice-prod-exclusive", true, vec![gpu0, whole_gpu(1, Some("nemotron-llm"))]),
                node("gpu-a-2", "all-disabled", "voice-prod-exclusive", false, vec![whole_gpu(0, None), whole_gpu(1, None)]),
            ],
        }],
        models: vec![
            ModelPlan {
                name: "fastpitch-tts".to_owned(),
                groups: vec![group("nvidia.com/mig-3g.40gb", 1, 1, "a100", &["gpu-a-1"])],
                reasons: vec!["isolation `hardware` rules out time-slicing; 3g.40gb is the smallest instance with the compute it needs".to_owned()],
                slo_unverified: Vec::new(),
            },
            ModelPlan {
                name: "nemotron-llm".to_owned(),
                groups: vec![group("nvidia.com/gpu", 1, 1, "a100", &["gpu-a-1"])],
                reasons: vec!["needs 70 GiB: only a whole A100-80GB holds it".to_owned()],
                slo_unverified: Vec::new(),
            },
            ModelPlan {
                name: "parakeet-asr".to_owned(),
                groups: vec![group("nvidia.com/mig-2g.20gb", 1, 2, "a100", &["gpu-a-1"])],
                reasons: vec!["10 GiB and 15% compute fit a 2g.20gb; packed with the TTS on one GPU".to_owned()],
                slo_unverified: Vec::new(),
            },
        ],
        mig_configs: BTreeMap::from([
            ("all-disabled".to_owned(), all_disabled()),
            (
                "voice-prod-a100-l1".to_owned(),
                MigConfig {
                    entries: vec![
                        entry(Some(vec![0]), &[], &[("2g.20gb", 2), ("3g.40gb", 1)]),
                        entry(Some(vec![1]), &[], &[]),
                    ],
                },
            ),
        ]),
        device_plugin_configs: BTreeMap::from([("voice-prod-exclusive".to_owned(), exclusive())]),
        quality: quality(2, 2, 4, Some(4.8)),
        changes: None,
    };
    Fixture { name: "voice-pipeline".to_owned(), spec, plan }
}

/// Small shared models time-sliced on one whole GPU (4 slots), on a tainted pool with a node
/// selector.
pub(crate) fn time_sliced() -> Fixture {
    let mut embed = model("embedder", "ghcr.io/example/embedder:2.1", 3);
    embed.isolation = Isolation::Shared;
    embed.spread = Spread::Gpu;
    embed.ports = vec![port("http", 8080)];
    let mut guard = model("guardrails", "ghcr.io/example/guardrails:0.9", 1);
    guard.isolation = Isolation::Shared;
    let mut pool = pool("shared", 1, Nodes::Named(vec!["gpu-b-1".to_owned()]));
    pool.taints = vec![Taint {
        key: "gpu-shared".to_owned(),
        value: Some("true".to_owned()),
        effect: "NoSchedule".to_owned(),
    }];
    pool.node_selector =
        BTreeMap::from([("node.kubernetes.io/instance-type".to_owned(), "p4d.24xlarge".to_owned())]);
    pool.cost_per_gpu_hour = None;
    let spec = spec("shared-small", vec![pool], vec![embed, guard]);
    let tenants = ["embedder", "embedder", "embedder", "guardrails"]
        .iter()
        .map(|m| Tenant { model: (*m).to_owned(), instance_start: None })
        .collect();
    let plan = Plan {
        name: "shared-small".to_owned(),
        pools: vec![PoolPlan {
            name: "shared".to_owned(),
            gpu: A100.to_owned(),
            autoscaled: false,
            nodes: vec![node(
                "gpu-b-1",
                "all-disabled",
                "shared-small-ts4",
                false,
                vec![GpuPlan { index: 0, uuid: None, mode: GpuMode::TimeSliced { replicas: 4 }, tenants }],
            )],
        }],
        models: vec![
            ModelPlan {
                name: "embedder".to_owned(),
                groups: vec![group("nvidia.com/gpu.shared", 1, 3, "shared", &["gpu-b-1"])],
                reasons: vec![
                    "isolation `shared`: 3 replicas fit in 1/4 of the GPU's memory each".to_owned(),
                ],
                slo_unverified: Vec::new(),
            },
            ModelPlan {
                name: "guardrails".to_owned(),
                groups: vec![group("nvidia.com/gpu.shared", 1, 1, "shared", &["gpu-b-1"])],
                reasons: vec!["takes the fourth time-slicing slot".to_owned()],
                slo_unverified: Vec::new(),
            },
        ],
        mig_configs: BTreeMap::from([("all-disabled".to_owned(), all_disabled())]),
        device_plugin_configs: BTreeMap::from([(
            "shared-small-ts4".to_owned(),
            DevicePluginConfig {
                time_slicing: BTreeMap::from([("nvidia.com/gpu".to_owned(), 4)]),
                ..Default::default()
            },
        )]),
        quality: quality(1, 1, 4, None),
        changes: None,
    };
    Fixture { name: "time-sliced".to_owned(), spec, plan }
}

/// An autoscaled pool whose node template carries a 7 × 1g.10gb layout; the reranker's replicas
/// are spread over GPUs. The plan gives the device filter itself.
pub(crate) fn autoscaled() -> Fixture {
    let mut rerank = model("reranker", "ghcr.io/example/reranker:1.4", 10);
    rerank.spread = Spread::Gpu;
    let mut pool = pool("burst", 1, Nodes::Autoscaled { min: 0, max: 4 });
    pool.taints =
        vec![Taint { key: "nvidia.com/gpu".to_owned(), value: None, effect: "NoSchedule".to_owned() }];
    let spec = spec("burst", vec![pool], vec![rerank]);
    let seven = ["1g.10gb"; 7];
    let gpu = |tenants: usize| {
        let t: Vec<Option<&str>> = (0..7).map(|i| (i < tenants).then_some("reranker")).collect();
        mig_gpu(0, &seven, &t)
    };
    let plan = Plan {
        name: "burst".to_owned(),
        pools: vec![PoolPlan {
            name: "burst".to_owned(),
            gpu: A100.to_owned(),
            autoscaled: true,
            nodes: vec![
                node("burst-0", "burst-1g10gb", "burst-exclusive", false, vec![gpu(5)]),
                node("burst-1", "burst-1g10gb", "burst-exclusive", false, vec![gpu(5)]),
            ],
        }],
        models: vec![ModelPlan {
            name: "reranker".to_owned(),
            groups: vec![group("nvidia.com/mig-1g.10gb", 1, 10, "burst", &["burst-0", "burst-1"])],
            reasons: vec!["1g.10gb holds 10 GiB (9856 MiB NVML) with headroom; 7 per GPU".to_owned()],
            slo_unverified: Vec::new(),
        }],
        mig_configs: BTreeMap::from([
            ("all-disabled".to_owned(), all_disabled()),
            (
                "burst-1g10gb".to_owned(),
                MigConfig { entries: vec![entry(None, &["0x20B210DE"], &[("1g.10gb", 7)])] },
            ),
        ]),
        device_plugin_configs: BTreeMap::from([("burst-exclusive".to_owned(), exclusive())]),
        quality: quality(2, 2, 10, Some(4.8)),
        changes: None,
    };
    Fixture { name: "autoscaled".to_owned(), spec, plan }
}

/// A tensor-parallel model on 4 whole GPUs of one node, next to a model split over two groups
/// (MIG and whole GPU); Argo CD and Flux wrappers on.
pub(crate) fn multi_gpu() -> Fixture {
    let mut big = model("llama-405b", "nvcr.io/nim/meta/llama-3.1-405b-instruct:1.3.0", 1);
    big.gpus = Some(4);
    big.memory_mib = 300 * 1024;
    big.ports = vec![port("http", 8000)];
    let mut split = model("whisper", "ghcr.io/example/whisper:3", 3);
    split.spread = Spread::Gpu;
    let mut spec = spec(
        "big-models",
        vec![pool("hgx", 8, Nodes::Named(vec!["gpu-c-1".to_owned(), "gpu-c-2".to_owned()]))],
        vec![big, split],
    );
    spec.cluster.output.argocd = Some(ArgoCd {
        repo_url: "https://git.example.com/platform/gitops.git".to_owned(),
        path: "clusters/prod/gpu".to_owned(),
        target_revision: "main".to_owned(),
        namespace: "argocd".to_owned(),
    });
    spec.cluster.output.flux = Some(Flux {
        source_name: "platform".to_owned(),
        path: "./clusters/prod/gpu".to_owned(),
        namespace: "flux-system".to_owned(),
    });
    spec.cluster.output.helm_values = false;
    let c1: Vec<GpuPlan> = (0..8)
        .map(|i| match i {
            0..=3 => whole_gpu(i, Some("llama-405b")),
            4 => mig_gpu(4, &["3g.40gb", "3g.40gb"], &[Some("whisper"), Some("whisper")]),
            _ => whole_gpu(i, None),
        })
        .collect();
    let c2: Vec<GpuPlan> =
        (0..8).map(|i| if i == 0 { whole_gpu(0, Some("whisper")) } else { whole_gpu(i, None) }).collect();
    let plan = Plan {
        name: "big-models".to_owned(),
        pools: vec![PoolPlan {
            name: "hgx".to_owned(),
            gpu: A100.to_owned(),
            autoscaled: false,
            nodes: vec![
                node("gpu-c-1", "big-models-hgx-l1", "big-models-exclusive", false, c1),
                node("gpu-c-2", "all-disabled", "big-models-exclusive", false, c2),
            ],
        }],
        models: vec![
            ModelPlan {
                name: "llama-405b".to_owned(),
                groups: vec![group("nvidia.com/gpu", 4, 1, "hgx", &["gpu-c-1"])],
                reasons: vec!["needs 300 GiB: 4 whole GPUs on one node".to_owned()],
                slo_unverified: Vec::new(),
            },
            ModelPlan {
                name: "whisper".to_owned(),
                groups: vec![
                    group("nvidia.com/gpu", 1, 1, "hgx", &["gpu-c-2"]),
                    group("nvidia.com/mig-3g.40gb", 1, 2, "hgx", &["gpu-c-1"]),
                ],
                reasons: vec!["spread `gpu`: every replica on its own GPU; two MIG instances use the GPU left on `gpu-c-1`".to_owned()],
                slo_unverified: Vec::new(),
            },
        ],
        mig_configs: BTreeMap::from([
            ("all-disabled".to_owned(), all_disabled()),
            (
                "big-models-hgx-l1".to_owned(),
                MigConfig {
                    entries: vec![
                        entry(Some(vec![0, 1, 2, 3, 5, 6, 7]), &[], &[]),
                        entry(Some(vec![4]), &[], &[("3g.40gb", 2)]),
                    ],
                },
            ),
        ]),
        device_plugin_configs: BTreeMap::from([("big-models-exclusive".to_owned(), exclusive())]),
        quality: quality(6, 6, 7, Some(14.4)),
        changes: None,
    };
    Fixture { name: "multi-gpu".to_owned(), spec, plan }
}
