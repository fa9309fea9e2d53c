//! Lower bounds valid for every plan the verifier accepts, not only for the planner's model.
//!
//! In: a [`Problem`] (for its spec, pools and models; the planner's options are not used).
//! Out: [`ValidBound`] — GPUs and, on priced pools, cost per hour that no accepted plan beats.
//!
//! The argument (a charging scheme, proved in `docs/planner.md`, "Bounds"): every replica is
//! charged a share of the GPU it runs on such that the shares on any one GPU sum to at most 1,
//! whatever the verifier lets share that GPU. A replica's charge is never below the least
//! charge of any device it may use, so the GPUs of a plan are at least the sum of those least
//! charges. The charges use only what the verifier checks (memory, compute, isolation, allowed
//! pools, slice grid), never the planner's own restrictions (usable profiles, per-tenant
//! time-slicing compute, homogeneous MIG time-slicing, latency predictions), so plans outside
//! the planner's model are covered too.

use crate::catalog::GpuModel;
use crate::plan::problem::Problem;
use crate::spec::{Demand, Isolation, Model, Pool};

/// Bounds valid for every plan the verifier accepts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ValidBound {
    pub gpus: u32,
    /// Cost per hour, when every pool has a price.
    pub cost_per_hour: Option<f64>,
}

/// Slack for comparisons in floating point (memory in MiB, shares).
const EPS: f64 = 1e-9;

/// The bound: ⌈Σ over replicas of the least charge⌉ GPUs, and Σ of the least charge × price.
pub(crate) fn valid_bound(problem: &Problem<'_>) -> ValidBound {
    let spec = problem.spec;
    let priced =
        !spec.pools.is_empty() && spec.pools.iter().all(|p| p.cost_per_gpu_hour.is_some_and(|c| c > 0.0));
    let mut gpus = 0.0;
    let mut cost = 0.0;
    for mc in &problem.models {
        let m = mc.spec;
        let mut least = f64::INFINITY;
        let mut least_cost = f64::INFINITY;
        for pool in &problem.pools {
            if !allowed(m, pool.spec, pool.gpu) {
                continue;
            }
            let Some(charge) = charge(problem, m, pool.gpu) else { continue };
            least = least.min(charge);
            least_cost = least_cost.min(charge * pool.spec.cost_per_gpu_hour.unwrap_or(0.0));
        }
        if least.is_finite() {
            gpus += least;
            cost += least_cost;
        }
    }
    let gpu_bound = (gpus - 1e-6).ceil().max(0.0) as u32;
    let cost_per_hour = priced.then(|| {
        // Every GPU costs at least the cheapest pool's price, too.
        let cheapest = spec.pools.iter().filter_map(|p| p.cost_per_gpu_hour).fold(f64::INFINITY, f64::min);
        let by_gpus = if cheapest.is_finite() { f64::from(gpu_bound) * cheapest } else { 0.0 };
        // To a millionth, as the plan's cost is; figures closer than a millionth (relative) are
        // compared as equal (`Quality::judge`, the verifier).
        (cost.max(by_gpus) * 1e6).round().max(0.0) / 1e6
    });
    ValidBound { gpus: gpu_bound, cost_per_hour }
}

/// Whether the verifier lets `m` use this pool: its `pools` and `gpuTypes` (the spec holds
/// catalog ids; a case-insensitive match is looser, so the bound stays valid).
fn allowed(m: &Model, pool: &Pool, gpu: &GpuModel) -> bool {
    (m.pools.is_empty() || m.pools.iter().any(|p| p == &pool.name))
        && (m.gpu_types.is_empty()
            || m.gpu_types
                .iter()
                .any(|t| t.eq_ignore_ascii_case(&gpu.id) || t.eq_ignore_ascii_case(&pool.gpu)))
}

/// The least charge of one unit of demand of `m` on `gpu`: per replica for fixed demand, for
/// the whole rate for rate demand; `None` when no device of this GPU can serve it.
fn charge(problem: &Problem<'_>, m: &Model, gpu: &GpuModel) -> Option<f64> {
    let policy = &problem.spec.policy;
    let headroom = 1.0 - policy.memory_headroom.clamp(0.0, 1.0);
    let usable = gpu.memory_mib as f64 * headroom;
    let mem = m.memory_mib as f64;
    let eff = policy.time_slicing_efficiency.max(EPS);
    match &m.demand {
        Demand::Replicas(n) => {
            let per = replica_charge(m, gpu, usable, mem, eff, headroom, policy)?;
            Some(per * f64::from(*n))
        }
        Demand::Rate(rate) => {
            // Only groups on a whole GPU or an exclusive MIG instance with an admissible measured
            // point cover requests; each replica there is charged 1 or the instance's share.
            let mut per_rps = f64::INFINITY;
            for point in rate.points.iter().filter(|p| rate.admits(p, &gpu.id)) {
                let share = if point.profile == "whole" {
                    1.0
                } else {
                    match gpu.mig.as_ref().and_then(|g| g.profiles.iter().find(|p| p.name == point.profile)) {
                        Some(p) => instance_share(gpu, p),
                        None => continue,
                    }
                };
                per_rps = per_rps.min(share / point.rps);
            }
            per_rps.is_finite().then_some(per_rps * rate.rps)
        }
    }
}

/// The least charge of one replica of a fixed-demand model on this GPU type.
fn replica_charge(
    m: &Model,
    gpu: &GpuModel,
    usable: f64,
    mem: f64,
    eff: f64,
    headroom: f64,
    policy: &crate::spec::Policy,
) -> Option<f64> {
    if let Some(n) = m.gpus {
        // Multi-GPU models only on whole GPUs: n of them, each holding memory / n.
        let n = n.max(1);
        return (mem / f64::from(n) <= usable + EPS).then_some(f64::from(n));
    }
    let mut least = f64::INFINITY;
    // A whole exclusive GPU: charge 1.
    if mem <= usable + EPS && m.compute <= 1.0 + EPS {
        least = 1.0;
    }
    let shared = m.isolation == Isolation::Shared && !(m.llm && policy.llm_never_time_sliced);
    // A time-sliced whole GPU with k replicas: every tenant's memory fits in 1/k and there are
    // at most k tenants, so 1/k per tenant sums to at most 1 and 1/k ≥ memory / usable and
    // ≥ 1 / maxTimeSlicingReplicas; the tenants' compute sums to at most the efficiency.
    if shared && mem <= usable / 2.0 + EPS {
        let slot = (mem / usable).max(1.0 / f64::from(policy.max_time_slicing_replicas.max(2)));
        least = least.min(slot.min(m.compute / eff));
    }
    if m.isolation != Isolation::Dedicated
        && let Some(mig) = &gpu.mig
    {
        for p in &mig.profiles {
            let inst = p.memory_mib as f64 * headroom;
            let sm_share = f64::from(p.sms) / f64::from(gpu.sms.max(1));
            let share = instance_share(gpu, p);
            // An exclusive instance: its share of the slice grid (instances' shares sum to ≤ 1).
            if mem <= inst + EPS && m.compute <= sm_share + EPS {
                least = least.min(share);
            }
            // A time-sliced instance with k replicas: 1/k of the instance's share per tenant,
            // 1/k ≥ memory / instance memory; tenants' compute ≤ efficiency × its SM share.
            if shared && mem <= inst / 2.0 + EPS && sm_share > 0.0 {
                let slot = mem / inst;
                let compute = m.compute / (eff * sm_share);
                least = least.min(share * slot.min(compute));
            }
        }
    }
    least.is_finite().then_some(least)
}

/// A MIG instance's share of its GPU: the smaller of its compute slices and the width it
/// occupies on the memory-slice grid; the instances of a layout the verifier accepts sum to at
/// most 1 in both (compute slices within the total, placements without overlap).
fn instance_share(gpu: &GpuModel, p: &crate::catalog::MigProfile) -> f64 {
    let Some(mig) = &gpu.mig else { return 1.0 };
    let c = f64::from(p.compute_slices) / f64::from(mig.compute_slices.max(1));
    let w = f64::from(p.size) / f64::from(mig.memory_slices.max(1));
    c.min(w)
}
