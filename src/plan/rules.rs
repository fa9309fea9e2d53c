//! Rules the planner and the verifier share, each defined once here (the latency model itself
//! is [`crate::plan::latency`]; the measurement admission rule is
//! [`crate::spec::RateDemand::admits`]).
//!
//! In: figures of a device and its tenants. Out: whether they fit, or a predicted p99.
//! The verifier calls these same functions, and its tests use hand-made counterexamples so
//! that a bug shared through them cannot hide.

use crate::plan::latency;

/// Slack for comparisons of shares computed in floating point.
const EPS: f64 = 1e-9;

/// Time-slicing compute: the device plugin picks the device, so any `k` tenants of a shared
/// resource may land together; they fit when the `k` largest computes together stay within
/// `efficiency × capacity` (capacity: 1 for a whole GPU, the instance's SM share for MIG).
pub fn shared_compute_fits(computes: &[f64], k: u32, efficiency: f64, capacity: f64) -> bool {
    let mut sorted: Vec<f64> = computes.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let top: f64 = sorted.iter().take(k as usize).sum();
    top <= efficiency * capacity + EPS
}

/// Predicted p99 of a replica alone on a MIG instance (`instance_sms` of `gpu_sms`), from its
/// p99 measured on a whole GPU.
pub fn mig_p99_ms(baseline_ms: f64, gpu_sms: u32, instance_sms: u32) -> f64 {
    latency::mig_p99_ms(baseline_ms, gpu_sms, instance_sms)
}

/// Predicted p99 of a time-sliced tenant with compute `own` (share of the whole GPU) whose
/// co-tenants add `neighbours`, from its p99 measured alone on a whole GPU.
pub fn time_sliced_p99_ms(baseline_ms: f64, own: f64, neighbours: f64) -> f64 {
    latency::time_sliced_p99_ms(baseline_ms, own, neighbours)
}

/// Predicted p99 of a tenant of a time-sliced MIG instance: the MIG stretch, then the
/// time-slicing inflation with loads relative to the instance (`sm_share` of the GPU).
pub fn mig_time_sliced_p99_ms(
    baseline_ms: f64,
    gpu_sms: u32,
    instance_sms: u32,
    own: f64,
    neighbours: f64,
) -> f64 {
    let sm_share = f64::from(instance_sms) / f64::from(gpu_sms.max(1));
    if sm_share <= 0.0 {
        return f64::INFINITY;
    }
    let on_slice = mig_p99_ms(baseline_ms, gpu_sms, instance_sms);
    latency::time_sliced_p99_ms(on_slice, (own / sm_share).min(1.0), neighbours)
}

/// The neighbours' load a time-sliced tenant is admitted against: `k − 1` co-tenants, each
/// at most `efficiency / k` (the planner admits a tenant on k slots only when `k × compute`
/// fits the efficiency, so no co-tenant is larger).
pub fn worst_neighbours(k: u32, efficiency: f64) -> f64 {
    f64::from(k.saturating_sub(1)) * efficiency / f64::from(k.max(1))
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
        let alone = mig_p99_ms(10.0, 98, 14);
        assert!((alone - 70.0).abs() < 1e-9);
        assert!(mig_time_sliced_p99_ms(10.0, 98, 14, 0.01, 0.3) > alone);
        assert!(mig_time_sliced_p99_ms(10.0, 98, 0, 0.01, 0.0).is_infinite());
    }
}
