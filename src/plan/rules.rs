//! Rules the planner and the verifier share, each defined once here (the latency model itself
//! is [`crate::plan::latency`]; the measurement admission rule is
//! [`crate::spec::RateDemand::admits`]).
//!
//! In: figures of a device and its tenants. Out: whether they fit, or a predicted p99.
//! The verifier calls these same functions, and its tests use hand-made counterexamples so
//! that a bug shared through them cannot hide.

use crate::catalog::GpuModel;
use crate::plan::latency::mps::Cpus;
use crate::plan::latency::{self, Refusal};
use crate::spec::{Isolation, Latency, Model, Policy, Pool};

/// Slack for comparisons of shares computed in floating point.
const EPS: f64 = 1e-9;

/// Memory a tenant may use on a device after `policy.memoryHeadroom`: defined with the headroom
/// in `spec` (which judges at validation whether a model fits any GPU, and cannot import the
/// planner), one rule for `spec`, the planner, the bounds and the verifier.
pub use crate::spec::usable_mib;

/// The memory each GPU of a replica spread over `gpus` whole GPUs must hold: its share of the
/// replica's memory, rounded up to a whole MiB (each GPU holds its own part; the whole memory for
/// `gpus` 0 or 1). A multi-GPU replica fits when this share fits one GPU's [`usable_mib`]; the
/// total over the GPUs is not enough.
pub fn per_gpu_mib(memory_mib: u64, gpus: u32) -> u64 {
    memory_mib.div_ceil(u64::from(gpus.max(1)))
}

/// The memory each of `k` replicas of a shared device may use: the device plugin, not
/// gpuplan, picks the physical device a shared replica lands on, so every replica must fit
/// `1/k` of the device's usable memory ([`usable_mib`]).
pub fn slot_mib(usable: f64, k: u32) -> f64 {
    usable / f64::from(k.max(1))
}

/// The share of a device one of its `k` shared replicas takes: `1/k`.
pub fn slot_share(k: u32) -> f64 {
    1.0 / f64::from(k.max(1))
}

/// Time-slicing compute: the device plugin picks the device, so any `k` tenants of a shared
/// resource may land together; they fit when the `k` largest computes together stay within
/// `efficiency × capacity` (capacity: 1 for a whole GPU, the instance's SM share for MIG).
pub fn shared_compute_fits(computes: &[f64], k: u32, efficiency: f64, capacity: f64) -> bool {
    let mut sorted: Vec<f64> = computes.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let top: f64 = sorted.iter().take(k as usize).sum();
    top <= efficiency * capacity + EPS
}

/// The latency baseline of `latency` on a whole `gpu`, `None` without a baseline: as written
/// when the manifest does not say which GPU it was measured on (`baselineGpu`) or names this
/// one; otherwise moved by [`latency::scale_baseline_ms`], refused when either GPU has no
/// throughput figures in the catalog.
pub fn baseline_ms(latency: &Latency, gpu: &GpuModel) -> Option<Result<f64, Refusal>> {
    let b = latency.baseline_ms?;
    Some(match &latency.baseline_gpu {
        None => Ok(b),
        Some(from) if from.id == gpu.id => Ok(b),
        Some(from) => match (&from.throughput, &gpu.throughput) {
            (Some(f), Some(t)) => Ok(latency::scale_baseline_ms(b, f, t)),
            _ => Err(Refusal::NoThroughput(from.id.clone(), gpu.id.clone())),
        },
    })
}

/// What a prediction on `gpu` rests on beyond the calibration (H200 runs, MIG off, baselines
/// measured on the GPU they are used on), for `explain`: `None` when nothing.
pub fn uncalibrated(latency: &Latency, gpu: &GpuModel, mig: bool) -> Option<String> {
    let mut why = Vec::new();
    if gpu.id != latency::CALIBRATED_GPU {
        why.push(format!("the law was fitted on `{}` runs only", latency::CALIBRATED_GPU));
    }
    if mig {
        why.push("no MIG runs, the SM stretch is assumed".to_owned());
    }
    if let Some(from) = latency.baseline_gpu.as_ref().filter(|from| from.id != gpu.id) {
        why.push(format!("the baseline is moved from `{}` by datasheet ratios, not measured", from.id));
    }
    (!why.is_empty()).then(|| format!("uncalibrated: {}", why.join("; ")))
}

/// What a latency prediction says about the SLO of a replica alone on its device.
#[derive(Clone, Debug, PartialEq)]
pub enum AloneSlo {
    /// Predicted within the SLO.
    Met(f64),
    /// Predicted above the SLO.
    Missed(f64),
    /// The model refuses to predict (outside its calibrated range): the SLO is unverified.
    Unverified(Refusal),
}

/// The rule for a replica alone on its device (a whole GPU, a MIG instance, n whole GPUs):
/// nothing the planner chooses makes it faster there, so a refusal of the latency model never
/// rejects it; its SLO is reported unverified, with what to measure. Only a prediction above
/// the SLO rejects it. Co-location options outside the range are refused instead (the
/// planner can choose another). The planner and the verifier both judge by this.
pub fn alone_slo(predicted: Result<f64, Refusal>, slo_ms: f64) -> AloneSlo {
    match predicted {
        Ok(p) if p.is_nan() || p > slo_ms + EPS => AloneSlo::Missed(p),
        Ok(p) => AloneSlo::Met(p),
        Err(why) => AloneSlo::Unverified(why),
    }
}

/// The sentence `plan.json`, `PLAN.md` and `explain` give for an unverified SLO: why, and what
/// to measure. A `replicas` model (`rate_demand` false) has no measured points to record the
/// measurement in, so its sentence says how to have it used: a `demand` with the sweep (on one
/// whole GPU or a MIG instance; points do not describe a replica over several GPUs).
pub fn unverified_slo(device: &str, gpu: &str, why: &Refusal, rate_demand: bool) -> String {
    let record = match (rate_demand, why) {
        (true, _) => "record it with `gpuplan measurements import`",
        (false, Refusal::MultiGpu) => {
            "compare it with the SLO yourself: a `replicas` model has no measured points for gpuplan to check it against"
        }
        (false, _) => {
            "compare it with the SLO: a `replicas` model has no measured points, so to have gpuplan check it give the model a `demand` (its request rate) with that sweep (`gpuplan measurements import --sweep`)"
        }
    };
    format!(
        "SLO unverified on {device} of `{gpu}`: the latency model refuses ({why}); measure the replica's p99 there at its load (genai-perf or perf_analyzer) and {record}"
    )
}

/// Predicted p99 of a replica alone on a whole GPU at its own load `compute`, from its p99
/// measured alone at light load ([`latency::predict_p99_ms`] with no neighbours).
pub fn whole_p99_ms(baseline_ms: f64, compute: f64) -> Result<f64, Refusal> {
    latency::predict_p99_ms(baseline_ms, compute, &[])
}

/// Predicted p99 of a replica alone on a MIG instance (`instance_sms` of `gpu_sms`) at its own
/// load `compute` (a share of the whole GPU), from its p99 measured on a whole GPU.
pub fn mig_p99_ms(baseline_ms: f64, gpu_sms: u32, instance_sms: u32, compute: f64) -> Result<f64, Refusal> {
    latency::predict_mig_p99_ms(baseline_ms, gpu_sms, instance_sms, compute)
}

/// Predicted p99 of a time-sliced tenant of a whole GPU with compute `own` whose co-tenants
/// have the computes `neighbours` (shares of the whole GPU).
pub fn time_sliced_p99_ms(baseline_ms: f64, own: f64, neighbours: &[f64]) -> Result<f64, Refusal> {
    latency::predict_p99_ms(baseline_ms, own, neighbours)
}

/// Predicted p99 of a tenant of a time-sliced MIG instance: computes are shares of the whole
/// GPU; the law sees them as loads of the instance.
pub fn mig_time_sliced_p99_ms(
    baseline_ms: f64,
    gpu_sms: u32,
    instance_sms: u32,
    own: f64,
    neighbours: &[f64],
) -> Result<f64, Refusal> {
    latency::predict_mig_time_sliced_p99_ms(baseline_ms, gpu_sms, instance_sms, own, neighbours)
}

/// Whether a tenant of compute `own` is *light* on `k` slots: `k` copies of it fit, so any `k`
/// light tenants fit together whatever the mix. A tenant that fits alone but not `k` times is
/// *heavy*: it may share only with co-tenants small enough for [`shared_compute_fits`], which the
/// planner checks against the real co-tenants where it places one ([`shared_tenants_fit`]).
pub fn light_tenant(own: f64, k: u32, efficiency: f64, capacity: f64) -> bool {
    shared_compute_fits(&vec![own; k as usize], k, efficiency, capacity)
}

/// The neighbours a tenant of compute `own` is admitted against on `k` slots: for a light
/// tenant [`worst_neighbours`]; for a heavy one, `k − 1` co-tenants sharing what the
/// efficiency leaves (any `k` tenants fit, so its `k − 1` largest co-tenants sum to at most
/// `efficiency × capacity − own`). The latency law grows with the neighbours' sum and count
/// only, so this is the worst case the verifier can see.
pub fn admission_neighbours(own: f64, k: u32, efficiency: f64, capacity: f64) -> Vec<f64> {
    if light_tenant(own, k, efficiency, capacity) {
        worst_neighbours(k, efficiency, capacity)
    } else {
        let rest = (efficiency * capacity - own).max(0.0);
        vec![rest / f64::from(k.saturating_sub(1).max(1)); k.saturating_sub(1) as usize]
    }
}

/// One tenant of a time-sliced resource, as [`shared_tenants_fit`] judges it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SharedTenant {
    /// Compute, a share of the whole GPU.
    pub compute: f64,
    /// `(p99 SLO, baseline)` in ms when the model has a latency baseline.
    pub latency: Option<(f64, f64)>,
}

/// Whether the tenants of one time-sliced resource of a node (`k` replicas per device) pass
/// what the verifier checks of them together: any `k` within `efficiency × capacity`, and each
/// tenant's predicted p99 with its `k − 1` largest co-tenants as neighbours within its SLO.
/// `mig` is `(GPU SMs, instance SMs)` for a MIG resource, `None` for whole GPUs (capacity 1).
pub fn shared_tenants_fit(
    tenants: &[SharedTenant],
    k: u32,
    efficiency: f64,
    capacity: f64,
    mig: Option<(u32, u32)>,
) -> bool {
    let computes: Vec<f64> = tenants.iter().map(|t| t.compute).collect();
    if !shared_compute_fits(&computes, k, efficiency, capacity) {
        return false;
    }
    tenants.iter().enumerate().all(|(i, t)| {
        let Some((slo, baseline)) = t.latency else { return true };
        let others = largest_others(&computes, i, k);
        let p99 = match mig {
            None => time_sliced_p99_ms(baseline, t.compute, &others),
            Some((gpu_sms, inst_sms)) => {
                mig_time_sliced_p99_ms(baseline, gpu_sms, inst_sms, t.compute, &others)
            }
        };
        p99.is_ok_and(|p| p <= slo)
    })
}

/// MPS: the thread cap of each of `k` replicas of a device, as the device plugin sets it
/// (`⌊100/k⌋%` of the SMs, `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`), as a fraction. Each client's
/// memory is [`slot_mib`] of the device, as for time-slicing (the control daemon pins
/// `total ÷ k` per client). Both hold for a whole GPU and, under DRA, for a MIG instance.
pub fn mps_thread_cap(k: u32) -> f64 {
    latency::mps::thread_cap(k)
}

/// MPS compute on a device of `capacity` (1 for a whole GPU, the SM share of a MIG instance)
/// shared by `k` clients: every client within its thread cap of the device, and any `k`
/// co-tenants within `efficiency × capacity` as under time-slicing (MPS adds capacity up
/// better, 1.2–2.4× in the runs, so the time-slicing rule is the conservative one to keep).
pub fn mps_compute_fits(computes: &[f64], k: u32, efficiency: f64, capacity: f64) -> bool {
    computes.iter().all(|&c| c <= mps_thread_cap(k) * capacity + EPS)
        && shared_compute_fits(computes, k, efficiency, capacity)
}

/// Predicted p99 of an MPS client of a device of `capacity` shared by `k` clients (thread cap
/// [`mps_thread_cap`]), with compute `own` and co-tenants `neighbours` (shares of the whole
/// GPU; on a MIG instance the baseline stretches and the loads grow by `1 / capacity`). Every
/// client is a pod that requests a CPU, so no client waits for a core ([`Cpus::Enough`]: the
/// law's host term is for calibration runs on hosts with fewer cores than processes).
pub fn mps_p99_ms(
    baseline_ms: f64,
    capacity: f64,
    own: f64,
    neighbours: &[f64],
    k: u32,
) -> Result<f64, Refusal> {
    if !(capacity > 0.0 && capacity <= 1.0 + EPS) {
        return Err(Refusal::NoSms);
    }
    let loads: Vec<f64> = neighbours.iter().map(|n| n / capacity).collect();
    latency::MPS_LAW.predict_p99_ms(
        baseline_ms / capacity,
        own / capacity,
        &loads,
        mps_thread_cap(k),
        Cpus::Enough,
    )
}

/// Whether the clients of one MPS resource of a node (`k` replicas per device) pass what the
/// verifier checks of them together: [`mps_compute_fits`], and each client's [`mps_p99_ms`]
/// with its `k − 1` largest co-tenants as neighbours within its SLO.
pub fn mps_tenants_fit(tenants: &[SharedTenant], k: u32, efficiency: f64, capacity: f64) -> bool {
    let computes: Vec<f64> = tenants.iter().map(|t| t.compute).collect();
    mps_compute_fits(&computes, k, efficiency, capacity)
        && tenants.iter().enumerate().all(|(i, t)| {
            let Some((slo, baseline)) = t.latency else { return true };
            let others = largest_others(&computes, i, k);
            mps_p99_ms(baseline, capacity, t.compute, &others, k).is_ok_and(|p| p <= slo)
        })
}

/// Whether a measured point's `profile` stands for a whole GPU of `gpu` with MIG off: `whole`,
/// or the MIG profile that spans the whole GPU (its measurement is a lower bound for the GPU
/// with MIG off, which has more SMs). The planner, the bounds and the verifier read points so.
pub fn whole_gpu_point(gpu: &GpuModel, profile: &str) -> bool {
    profile == "whole"
        || gpu.mig.as_ref().is_some_and(|g| {
            g.profiles.iter().any(|p| {
                p.name == profile
                    && p.compute_slices >= g.compute_slices
                    && p.memory_slices >= g.memory_slices
            })
        })
}

/// Measured-point MPS (ParvaGPU's formulation, made deployable through DRA): whether a replica
/// of rate model `m` on `pool` may be `k` MPS processes of the model inside one device (a MIG
/// instance through the driver's `MigDeviceConfig`, a whole GPU through `GpuConfig`, both
/// `sharing.strategy: MPS`), its throughput `k × rps` of a point measured with `k` processes.
/// Only on the DRA backend (the device plugin refuses MPS on MIG devices and pins no claim to a
/// device), where the pool lists `mps` in `sharing`, and for `shared` models with `allowMps`
/// (one process's fatal error takes the device's other processes down).
pub fn measured_mps(pool: &Pool, m: &Model) -> bool {
    pool.dra.is_some() && pool.sharing.mps && m.allow_mps && m.isolation == Isolation::Shared
}

/// The most processes a measured point of `m` on `pool` may have to be admitted there:
/// `policy.maxTimeSlicingReplicas` (the limit of every sharing mode) under [`measured_mps`],
/// else 1 (a point measured with several processes says nothing about one replica alone).
pub fn measured_mps_max(pool: &Pool, m: &Model, policy: &Policy) -> u32 {
    if measured_mps(pool, m) { policy.max_time_slicing_replicas.max(1) } else { 1 }
}

/// Whether one of `processes` MPS processes of a model needing `memory_mib` fits a device of
/// `usable_mib` ([`usable_mib`]): each process gets [`slot_mib`], as gpuplan pins it
/// ([`mps_pinned_mib`]). One process fits when the model fits the device.
pub fn mps_process_fits(memory_mib: f64, usable_mib: f64, processes: u32) -> bool {
    memory_mib <= slot_mib(usable_mib, processes) + EPS
}

/// The device memory gpuplan pins for each of `k` MPS clients of a device of `mib` NVML MiB:
/// `⌊mib / k⌋` MiB, written as the claim's `mpsConfig.defaultPinnedDeviceMemoryLimit`. NVIDIA's
/// DRA driver applies it as the MPS control daemon's default for every client process of the
/// claim's device (`set_default_device_pinned_mem_limit <uuid> <N>M`,
/// `cmd/gpu-kubelet-plugin/sharing.go`, `MpsControlDaemon.Start`); unset, a client may take the
/// whole device. The device plugin's MPS pins the same `total ÷ replicas`.
pub fn mps_pinned_mib(mib: u64, k: u32) -> u64 {
    mib / u64::from(k.max(1))
}

/// The `defaultActiveThreadPercentage` of a claim whose device the planner shares among `k` MPS
/// clients it sized by compute ([`mps_thread_cap`]: `⌊100/k⌋`); the driver sets it as the
/// daemon's `set_default_active_thread_percentage`, per client process. Measured-point MPS sets
/// none (`None`: 100%, MPS's default), since its throughput was measured without a cap.
pub fn mps_thread_percentage(k: u32, measured: bool) -> Option<u32> {
    (!measured).then(|| 100 / k.max(1))
}

/// The `k − 1` largest computes other than the `i`-th: the co-tenants a tenant of a shared
/// resource may find beside it (the device plugin picks the device).
fn largest_others(computes: &[f64], i: usize, k: u32) -> Vec<f64> {
    let mut others: Vec<f64> =
        computes.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, &c)| c).collect();
    others.sort_by(|x, y| y.total_cmp(x));
    others.truncate(k.saturating_sub(1) as usize);
    others
}

/// The neighbours a time-sliced tenant is admitted against: `k − 1` co-tenants, each at most
/// `efficiency × capacity / k` (the planner admits a tenant on k slots only when `k × compute`
/// fits the efficiency, so no co-tenant is larger). `capacity` is 1 for a whole GPU, the
/// instance's SM share for MIG; the result is in shares of the whole GPU.
pub fn worst_neighbours(k: u32, efficiency: f64, capacity: f64) -> Vec<f64> {
    vec![efficiency * capacity / f64::from(k.max(1)); k.saturating_sub(1) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_k_tenants_judged_by_their_combined_compute() {
        // 0.5 + 0.2 fit 0.76 together although 2 × 0.5 does not.
        assert!(shared_compute_fits(&[0.5, 0.2], 2, 0.76, 1.0));
        // Three tenants on two slots: the two largest decide.
        assert!(!shared_compute_fits(&[0.5, 0.3, 0.1], 2, 0.76, 1.0));
        assert!(shared_compute_fits(&[0.4, 0.3, 0.3], 2, 0.76, 1.0));
        // On a MIG instance with a 1/7 SM share.
        assert!(!shared_compute_fits(&[0.1, 0.1], 2, 0.76, 1.0 / 7.0));
    }

    #[test]
    fn mig_time_slicing_stretches_then_inflates() {
        let light = mig_p99_ms(10.0, 98, 14, 0.0).expect("in range");
        assert!((light - 70.0).abs() < 1e-9);
        let alone = mig_p99_ms(10.0, 98, 14, 0.01).expect("in range");
        assert!(alone > light, "the replica's own load counts");
        let sliced = mig_time_sliced_p99_ms(10.0, 98, 14, 0.01, &[0.02]).expect("in range");
        assert!(sliced > alone);
        assert!(mig_time_sliced_p99_ms(10.0, 98, 0, 0.01, &[]).is_err());
        // Compute 0.129 on a 14-of-108-SM instance loads it at 99.5%: refused, not 77 ms.
        assert!(mig_p99_ms(10.0, 108, 14, 0.129).is_err());
    }
}
