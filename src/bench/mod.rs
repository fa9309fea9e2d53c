//! The benchmark harness, not part of the library's API (`#[doc(hidden)]`): generated scenarios
//! for tests and the scale benchmark (`benches/planner.rs`) here, the ParvaGPU artifact's importer
//! and table in [`parvagpu`] (`benches/parvagpu.rs`). Not used by the CLI; it sits above every
//! stage and no stage imports it (tests may).
//!
//! In: a scenario name or size and a seed. Out: a [`Spec`] built from generated parts through
//! [`Spec::from_parts`] (no manifest text, so `spec::validate`'s checks are kept by construction)
//! and the [`Catalog`] it refers to. Guaranteed: deterministic — the same arguments give the same
//! spec on any machine (a tiny splitmix64 generator, no platform randomness, no clock); pools and
//! models sorted by name, as `Spec::from_parts` always leaves them.
//!
//! Fleets mix three GPU types: `A100-SXM4-80GB` (built in), `H100-SXM5-80GB` and `L4`. The two
//! last are taken from the catalog when it has them and otherwise built here (H100: the memory GPU
//! feature discovery reports, `tests/data/nvidia/`; L4: 23034 MiB, 58 SMs as in `catalog/l4.yaml`).
//! Models have memory from 2 to 80 GiB, compute from 0.05 to 1.0, a few are multi-GPU, with
//! mixed isolation levels and spreads; replica counts are sized so the demand fills about 55% of
//! the fleet's GPU-equivalents, which leaves a feasible plan. Demand is in replicas only; the
//! rate formulation is exercised by the ParvaGPU benchmark.

pub mod parvagpu;
pub mod stress;

use std::collections::BTreeMap;

use crate::catalog::Catalog;
use crate::plan::latency::DEFAULT_TIME_SLICING_EFFICIENCY;
use crate::spec::{
    ChangePolicy, Cluster, Container, Demand, Isolation, MigStrategy, Model, Nodes, OutputOptions, Policy,
    Pool, Spec, Spread, TimeSlicingOptions,
};

/// Catalog id of the A100 80GB SXM4.
pub const A100: &str = "A100-SXM4-80GB";
/// Catalog id of the H100 80GB SXM5.
pub const H100: &str = "H100-SXM5-80GB";
/// Catalog id of the L4 (no MIG).
pub const L4: &str = "L4";

/// A named benchmark scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scenario {
    pub name: &'static str,
    /// GPUs in the fleet.
    pub gpus: u32,
    /// Models to serve.
    pub models: u32,
    /// How many times the benchmark plans it (fewer for the big ones).
    pub runs: u32,
    /// Whether the pools have prices (then the planner minimises $/h, not GPUs).
    pub priced: bool,
}

/// The benchmark suite: the seed voice pipeline, then fleets of 100, 1,000 and 10,000 GPUs.
/// The `-priced` fleets are the same fleets with prices per GPU-hour (L4 0.8, A100 2.4, H100
/// 4.0): the planner then minimises cost, and their gap is measured against the cost bound.
pub const SCENARIOS: &[Scenario] = &[
    Scenario { name: "seed-voice-pipeline", gpus: 2, models: 3, runs: 5, priced: false },
    Scenario { name: "fleet-100", gpus: 100, models: 20, runs: 5, priced: false },
    Scenario { name: "fleet-1000", gpus: 1_000, models: 200, runs: 5, priced: false },
    Scenario { name: "fleet-10000", gpus: 10_000, models: 1_000, runs: 3, priced: false },
    Scenario { name: "fleet-100-priced", gpus: 100, models: 20, runs: 5, priced: true },
    Scenario { name: "fleet-1000-priced", gpus: 1_000, models: 200, runs: 5, priced: true },
    Scenario { name: "fleet-10000-priced", gpus: 10_000, models: 1_000, runs: 3, priced: true },
];

/// The seed used for every generated fleet of the suite.
pub const SEED: u64 = 0x6770_7570_6c61_6e00;

/// Builds a scenario of [`SCENARIOS`] by name.
pub fn scenario(name: &str) -> Option<(Spec, Catalog)> {
    let s = SCENARIOS.iter().find(|s| s.name == name)?;
    if s.name == "seed-voice-pipeline" {
        return Some(voice_pipeline());
    }
    Some(fleet(s.gpus, s.models, SEED, s.priced))
}

/// The seed voice pipeline (NVIDIA's blog): ASR (9.6 GB, compute 0.15) and TTS (13.4 GB) with
/// hardware isolation, and a 73 GB LLM on a whole GPU, on one A100-SXM4-80GB node of 2 GPUs.
pub fn voice_pipeline() -> (Spec, Catalog) {
    let catalog = catalog();
    let pools = vec![pool("a100", A100, 2, vec!["gpu-a-1".to_owned()])];
    let mut llm = model("nemotron-llm", 69_620, 1.0, 1);
    llm.gpus = Some(1);
    llm.llm = true;
    let models = vec![model("parakeet-asr", 9_156, 0.15, 1), model("fastpitch-tts", 12_780, 0.1, 1), llm];
    (spec("voice-pipeline", pools, models), catalog)
}

/// The built-in catalog, which holds every GPU type the scenarios use.
pub fn catalog() -> Catalog {
    Catalog::builtin()
}

/// A generated fleet of `gpus` GPUs (a multiple of 4; half A100, 30% H100 in nodes of 8, the rest
/// L4 in nodes of 4) serving `models` models; `priced` gives the pools a cost per GPU-hour.
/// The models do not depend on `priced`.
pub fn fleet(gpus: u32, models: u32, seed: u64, priced: bool) -> (Spec, Catalog) {
    let catalog = catalog();
    let mut rng = SplitMix64(seed ^ u64::from(gpus) << 32 ^ u64::from(models));
    let gpus = gpus - gpus % 4;
    let a100_nodes = gpus / 2 / 8;
    let h100_nodes = gpus * 3 / 10 / 8;
    let l4_nodes = (gpus - 8 * (a100_nodes + h100_nodes)) / 4;
    let names = |prefix: &str, n: u32| (1..=n).map(|i| format!("{prefix}-{i:05}")).collect::<Vec<_>>();
    let mut pools = Vec::new();
    for (name, gpu, per_node, nodes) in
        [("a100", A100, 8, a100_nodes), ("h100", H100, 8, h100_nodes), ("l4", L4, 4, l4_nodes)]
    {
        if nodes > 0 {
            let mut p = pool(name, gpu, per_node, names(name, nodes));
            p.cost_per_gpu_hour = priced.then_some(match gpu {
                A100 => 2.4,
                H100 => 4.0,
                _ => 0.8,
            });
            pools.push(p);
        }
    }
    let total_nodes = a100_nodes + h100_nodes + l4_nodes;
    let node_spread_cap = (total_nodes / 3).max(2);
    let budget = 0.55 * f64::from(gpus) / f64::from(models.max(1));
    let mut out = Vec::new();
    for i in 0..models {
        let name = format!("model-{i:04}");
        let roll = rng.unit();
        let mut m = if roll < 0.05 {
            let n = if rng.unit() < 0.3 { 4 } else { 2 };
            let mut m = model(&name, u64::from(n) * gib(rng.range(40.0, 76.0)), 1.0, 1);
            m.gpus = Some(n);
            m.isolation = Isolation::Dedicated;
            m.llm = true;
            m.gpu_types = vec![A100.to_owned(), H100.to_owned()];
            m
        } else if roll < 0.2 {
            let mut m = model(&name, gib(rng.range(28.0, 78.0)), rng.range(0.4, 1.0), 1);
            m.isolation = rng.pick(&[(0.5, Isolation::Hardware)], Isolation::Dedicated);
            m.llm = m.memory_mib > gib(40.0);
            m
        } else {
            // Small models: memory 2–24 GiB, skewed towards the small end.
            let memory = 2.0 * (12.0f64).powf(rng.unit());
            let mut m = model(&name, gib(memory), rng.range(0.05, 0.5), 1);
            m.isolation =
                rng.pick(&[(0.5, Isolation::Shared), (0.9, Isolation::Hardware)], Isolation::Dedicated);
            m
        };
        let weight = gpu_equivalents(&m);
        let mut replicas = (budget / weight * rng.range(0.5, 1.5)).round().max(1.0) as u32;
        m.spread = rng.pick(&[(0.6, Spread::None), (0.8, Spread::Gpu)], Spread::Node);
        if m.spread == Spread::Node {
            replicas = replicas.min(node_spread_cap);
        }
        m.demand = Demand::Replicas(replicas);
        out.push(m);
    }
    (spec(&format!("fleet-{gpus}"), pools, out), catalog)
}

/// A model with defaults: hardware isolation, no spread, one GPU fraction, no latency target.
pub fn model(name: &str, memory_mib: u64, compute: f64, replicas: u32) -> Model {
    Model {
        name: name.to_owned(),
        container: Container { image: format!("registry.example.com/{name}:1.0"), ..Container::default() },
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
        allow_mps: true,
        deployment: Default::default(),
        span: None,
    }
}

/// A pool of named nodes.
pub fn pool(name: &str, gpu: &str, gpus_per_node: u32, nodes: Vec<String>) -> Pool {
    Pool {
        name: name.to_owned(),
        gpu: gpu.to_owned(),
        gpus_per_node,
        nodes: Nodes::Named(nodes),
        cost_per_gpu_hour: None,
        node_selector: BTreeMap::new(),
        taints: Vec::new(),
        current: Vec::new(),
        sharing: Default::default(),
        dra: None,
        span: None,
    }
}

/// A spec with the default cluster settings and [`policy`]; pools and models sorted by name.
pub fn spec(name: &str, pools: Vec<Pool>, models: Vec<Model>) -> Spec {
    spec_with(name, pools, models, policy())
}

/// A spec with the default cluster settings and the given policy ([`Spec::from_parts`]).
pub fn spec_with(name: &str, pools: Vec<Pool>, models: Vec<Model>, policy: Policy) -> Spec {
    let cluster = Cluster {
        namespace: "inference".to_owned(),
        operator_namespace: "gpu-operator".to_owned(),
        mig_strategy: MigStrategy::Mixed,
        time_slicing: TimeSlicingOptions { rename_by_default: true, fail_requests_greater_than_one: true },
        output: OutputOptions {
            cluster_policy_patch: true,
            helm_values: true,
            argocd: None,
            flux: None,
            namespaces: true,
        },
        currency: None,
    };
    Spec::from_parts(name, cluster, pools, models, policy, ChangePolicy::default())
}

/// The generators' policy: LLMs never time-sliced, up to 8 time-slicing replicas, no memory
/// headroom, the default time-slicing efficiency.
pub fn policy() -> Policy {
    Policy {
        llm_never_time_sliced: true,
        max_time_slicing_replicas: 8,
        memory_headroom: 0.0,
        time_slicing_efficiency: DEFAULT_TIME_SLICING_EFFICIENCY,
    }
}

/// What one replica costs in GPUs, roughly, for sizing demand: whole GPUs for dedicated and
/// multi-GPU models, the MIG slices an A100 would give a hardware-isolated one, the compute
/// share under time-slicing efficiency (or the memory share) for a shared one.
fn gpu_equivalents(m: &Model) -> f64 {
    let memory = m.memory_mib as f64 / gib(80.0) as f64;
    match (m.gpus, m.isolation) {
        (Some(n), _) => f64::from(n),
        (None, Isolation::Dedicated) => 1.0,
        (None, Isolation::Hardware) => {
            ((memory * 8.0).ceil() / 8.0).max((m.compute * 7.0).ceil() / 7.0).min(1.0)
        }
        (None, Isolation::Shared) => memory.max(m.compute / DEFAULT_TIME_SLICING_EFFICIENCY).min(1.0),
    }
}

fn gib(g: f64) -> u64 {
    (g * 1024.0).round() as u64
}

pub use crate::plan::SplitMix64;

#[cfg(test)]
mod tests {
    use super::{
        Demand, Isolation, SCENARIOS, SEED, Spec, SplitMix64, Spread, fleet, gpu_equivalents, scenario,
        voice_pipeline,
    };

    #[test]
    fn fleets_are_deterministic_and_sized_as_asked() {
        let (a, _) = fleet(1_000, 200, SEED, false);
        let (b, _) = fleet(1_000, 200, SEED, false);
        let json = |s: &Spec| serde_json::to_string(s).unwrap_or_default();
        assert_eq!(json(&a), json(&b));
        let gpus: u32 = a.pools.iter().map(|p| p.gpus_per_node * p.nodes.max_nodes()).sum();
        assert_eq!(gpus, 1_000);
        assert_eq!(a.models.len(), 200);
        let (c, _) = fleet(1_000, 200, SEED + 1, false);
        assert_ne!(json(&a), json(&c), "the seed changes the fleet");
    }

    #[test]
    fn fleets_mix_sizes_isolation_spread_and_gpu_types() {
        let (s, catalog) = fleet(10_000, 1_000, SEED, false);
        assert_eq!(s.pools.len(), 3);
        assert!(s.pools.iter().all(|p| catalog.get(&p.gpu).is_some()));
        let min = s.models.iter().map(|m| m.memory_mib).min().unwrap_or(0);
        let max = s.models.iter().map(|m| m.memory_mib / u64::from(m.gpus.unwrap_or(1))).max().unwrap_or(0);
        assert!(min >= 2 * 1024 && max <= 80 * 1024, "memory {min}..{max} MiB");
        assert!(s.models.iter().all(|m| (0.05..=1.0).contains(&m.compute)));
        assert!(s.models.iter().any(|m| m.gpus.is_some_and(|g| g > 1)));
        for iso in [Isolation::Shared, Isolation::Hardware, Isolation::Dedicated] {
            assert!(s.models.iter().any(|m| m.isolation == iso), "{iso:?}");
        }
        for spread in [Spread::None, Spread::Gpu, Spread::Node] {
            assert!(s.models.iter().any(|m| m.spread == spread), "{spread:?}");
        }
    }

    #[test]
    fn fleet_demand_fills_about_half_of_the_fleet() {
        for (gpus, models) in [(100, 20), (1_000, 200), (10_000, 1_000)] {
            let (s, _) = fleet(gpus, models, SEED, false);
            let demand: f64 = s
                .models
                .iter()
                .map(|m| match m.demand {
                    Demand::Replicas(n) => f64::from(n) * gpu_equivalents(m),
                    Demand::Rate(_) => 0.0,
                })
                .sum();
            let share = demand / f64::from(gpus);
            assert!((0.35..=0.75).contains(&share), "{gpus} GPUs: demand {share:.2} of the fleet");
        }
    }

    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        // First outputs for seed 0 of the reference implementation (Vigna's splitmix64.c).
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn every_scenario_builds_and_the_seed_is_the_voice_pipeline() {
        for s in SCENARIOS {
            let (spec, _) = scenario(s.name).unwrap_or_else(|| panic!("scenario {}", s.name));
            assert_eq!(spec.models.len(), s.models as usize, "{}", s.name);
        }
        let (seed, _) = voice_pipeline();
        assert_eq!(
            seed.models.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["fastpitch-tts", "nemotron-llm", "parakeet-asr"]
        );
    }
}
