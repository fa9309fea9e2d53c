//! The latency model: predicted p99 latency of a replica on a MIG slice or a time-sliced GPU.
//!
//! PROVISIONAL: a first model (compute-proportional scaling on MIG; queueing inflation with the
//! tenants' total load under time-slicing); calibration against `reference/timeslicing-h200.md`
//! and its tests come with the planner issue.

/// Predicted p99 on a MIG instance with `instance_sms` of the GPU's `gpu_sms`, given the p99
/// measured on the whole, unshared GPU. Fewer SMs stretch compute-bound work proportionally.
pub fn mig_p99_ms(baseline_ms: f64, gpu_sms: u32, instance_sms: u32) -> f64 {
    if instance_sms == 0 {
        return f64::INFINITY;
    }
    baseline_ms * f64::from(gpu_sms) / f64::from(instance_sms)
}

/// Predicted p99 of a replica whose own load is `own_load` (share of the GPU) on a time-sliced GPU
/// whose other tenants add `neighbour_load`, given its p99 `solo_ms` when alone at `own_load`.
pub fn time_sliced_p99_ms(solo_ms: f64, own_load: f64, neighbour_load: f64) -> f64 {
    let total = own_load + neighbour_load;
    if total >= 1.0 {
        return f64::INFINITY;
    }
    solo_ms * (1.0 - own_load) / (1.0 - total)
}
