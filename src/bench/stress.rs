//! Stress fleets for the planner (issue 23): fleets nobody tuned the planner for, drawn per
//! seed — two to four GPU types out of six (MIG-capable and whole-GPU), nodes of 4 or 8, with
//! or without prices and a `compute` share per replica, demand filling a chosen share of the
//! fleet — and a time-sliced family (shared models on whole-GPU pools).
//!
//! In: a [`Shape`] and a seed. Out: a [`Spec`] and the built-in [`Catalog`], deterministic
//! (splitmix64, no clock). Not every drawn fleet has a plan: demand is sized from a rough
//! per-replica estimate, so at a high fill some fleets are infeasible (the planner then says
//! so with `no-feasible-plan` or a capacity diagnostic; `planner-failed` is never right when a
//! plan exists).

use crate::bench::{SplitMix64, catalog, gib, gpu_equivalents, model, pool, spec};
use crate::catalog::Catalog;
use crate::spec::{Demand, Isolation, Spec, Spread};

/// What a stress fleet looks like.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// GPUs in the fleet (rounded down to whole nodes per pool).
    pub gpus: u32,
    /// Whether every pool has a price per GPU-hour (the planner then minimises cost).
    pub priced: bool,
    /// Whether replicas ask for a `compute` share (else 0: memory decides).
    pub compute: bool,
    /// Share of the fleet's GPU-equivalents the demand fills, roughly (0.55 in the benchmark).
    pub fill: f64,
    /// The time-sliced family: shared models only, on whole-GPU pools (L4, L40S, A10).
    pub time_sliced: bool,
}

/// GPU types the stress fleets draw from: catalog id, GPUs per node, price per GPU-hour.
const TYPES: &[(&str, u32, f64)] = &[
    ("A100-SXM4-80GB", 8, 2.4),
    ("H100-SXM5-80GB", 8, 4.0),
    ("A30", 4, 1.1),
    ("L4", 4, 0.8),
    ("L40S", 4, 1.6),
    ("H200-SXM", 8, 5.2),
];

/// Whole-GPU types of the time-sliced family.
const TS_TYPES: &[(&str, u32, f64)] = &[("L4", 4, 0.8), ("L40S", 4, 1.6), ("A10", 4, 1.0)];

/// A stress fleet of this shape for this seed.
pub fn fleet(shape: Shape, seed: u64) -> (Spec, Catalog) {
    generate(shape, seed, false)
}

/// A stress fleet of every GPU type of its family (six in the mixed one): issue 23's realistic
/// spread fleet is 100 GPUs of six types. Otherwise as [`fleet`].
pub fn fleet_of_every_type(shape: Shape, seed: u64) -> (Spec, Catalog) {
    generate(shape, seed, true)
}

fn generate(shape: Shape, seed: u64, every_type: bool) -> (Spec, Catalog) {
    let catalog = catalog();
    let mut rng = SplitMix64(seed ^ (u64::from(shape.gpus) << 24) ^ 0x5354_5245_5353);
    let types = if shape.time_sliced { TS_TYPES } else { TYPES };
    let mut chosen: Vec<&(&str, u32, f64)> = types.iter().filter(|_| rng.unit() < 0.6).collect();
    if every_type {
        chosen = types.iter().collect();
    } else if chosen.len() < 2 {
        chosen = types.iter().take(2).collect();
    }
    let mut pools = Vec::new();
    let mut left = shape.gpus;
    for (i, &&(gpu, per_node, price)) in chosen.iter().enumerate() {
        let share =
            if i + 1 == chosen.len() { left } else { (f64::from(shape.gpus) * rng.range(0.15, 0.5)) as u32 };
        let nodes = (share.min(left) / per_node).max(1);
        left = left.saturating_sub(nodes * per_node);
        let name = gpu.to_ascii_lowercase();
        let mut p = pool(&name, gpu, per_node, (1..=nodes).map(|n| format!("{name}-{n:04}")).collect());
        p.cost_per_gpu_hour = shape.priced.then_some(price);
        pools.push(p);
    }
    let gpus: u32 = pools.iter().map(|p| p.gpus_per_node * p.nodes.max_nodes()).sum();
    let nodes: u32 = pools.iter().map(|p| p.nodes.max_nodes()).sum();
    let models = (gpus / 5).clamp(3, 1_000);
    let budget = shape.fill * f64::from(gpus) / f64::from(models);
    let out = (0..models).map(|i| stress_model(&mut rng, shape, i, budget, nodes)).collect();
    let family = if shape.time_sliced { "ts" } else { "mix" };
    (spec(&format!("stress-{family}-{gpus}"), pools, out), catalog)
}

/// One model of a stress fleet: memory 2–40 GiB (a few up to 78 GiB), isolation and spread
/// mixed (shared only in the time-sliced family), replicas sized to the budget.
fn stress_model(rng: &mut SplitMix64, shape: Shape, i: u32, budget: f64, nodes: u32) -> crate::spec::Model {
    let name = format!("model-{i:04}");
    let memory = if rng.unit() < 0.1 { rng.range(30.0, 78.0) } else { 2.0 * (20.0f64).powf(rng.unit()) };
    let limit = if shape.time_sliced { 22.0 } else { 78.0 };
    let compute = if shape.compute { rng.range(0.05, 0.9) } else { 0.0 };
    let mut m = model(&name, gib(memory.min(limit)), compute, 1);
    m.isolation = if shape.time_sliced {
        Isolation::Shared
    } else {
        rng.pick(&[(0.35, Isolation::Shared), (0.8, Isolation::Hardware)], Isolation::Dedicated)
    };
    m.spread = rng.pick(&[(0.6, Spread::None), (0.8, Spread::Gpu)], Spread::Node);
    let mut replicas = (budget / gpu_equivalents(&m).max(0.05) * rng.range(0.5, 1.5)).round().max(1.0) as u32;
    if m.spread == Spread::Node {
        replicas = replicas.min((nodes / 2).max(1));
    }
    m.demand = Demand::Replicas(replicas);
    m
}

#[cfg(test)]
mod tests {
    use super::{Shape, fleet};

    #[test]
    fn stress_fleets_are_deterministic_sized_and_vary_with_the_seed() {
        let shape = Shape { gpus: 128, priced: true, compute: true, fill: 0.7, time_sliced: false };
        let json = |s: &crate::spec::Spec| serde_json::to_string(s).unwrap_or_default();
        let (a, catalog) = fleet(shape, 1);
        assert_eq!(json(&a), json(&fleet(shape, 1).0));
        assert_ne!(json(&a), json(&fleet(shape, 2).0));
        let gpus: u32 = a.pools.iter().map(|p| p.gpus_per_node * p.nodes.max_nodes()).sum();
        assert!((100..=128).contains(&gpus), "{gpus} GPUs");
        assert!(a.pools.len() >= 2 && a.pools.iter().all(|p| catalog.get(&p.gpu).is_some()));
        assert!(a.pools.iter().all(|p| p.cost_per_gpu_hour.is_some()));
        let ts = fleet(Shape { time_sliced: true, ..shape }, 1).0;
        assert!(ts.models.iter().all(|m| m.isolation == crate::spec::Isolation::Shared));
    }
}
