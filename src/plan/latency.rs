//! The latency model: predicted p99 of a replica on a whole GPU, a MIG instance or a time-sliced
//! device, from the latency the user measured and the loads of the tenants that share the device.
//!
//! In: a baseline p99 (alone, on a whole GPU, at light load), the replica's own load and its
//! neighbours' loads, as shares of the device. Out: a predicted p99 in milliseconds, or a
//! [`Refusal`] saying why the inputs are outside the calibrated range (the planner then rejects
//! the option with that reason). Guaranteed: pure, total (never panics, never NaN), monotone in
//! every load, and one law for every case ([`predict_p99_ms`]); the MIG and time-slicing
//! functions only translate their inputs into that law's loads.
//!
//! The law, its calibration on `tests/data/timeslicing/` and its limits: `docs/latency-model.md`.
//!
//! ```text
//! p99 = b × (1 − u / RHO_MAX)^(−EXPONENT) × (1 + PER_NEIGHBOUR × k)
//! u   = ρ_own + NEIGHBOUR_WEIGHT × Σ ρ_neighbours,   k = number of neighbours
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

/// Throughput that saturating time-sliced tenants deliver together, in GPU-equivalents (H200:
/// 1.07–1.16; `tests/data/timeslicing/`). Used by [`round_robin_ms`].
pub const TIME_SLICING_OVERLAP_GAIN: f64 = 1.1;

/// Share of a GPU's compute that time-sliced tenants can use together, when the manifest does not
/// say (`policy.timeSlicingEfficiency`): NVIDIA measured about 0.76 requests/s per GPU with
/// time-slicing against 1.00 with MIG on the same voice pipeline (A100).
pub const DEFAULT_TIME_SLICING_EFFICIENCY: f64 = 0.76;

/// The utilisation at which an open-loop service's queue diverges (H200 fit: 0.8, below 1 because
/// Poisson arrivals and context switches waste part of the closed-loop capacity).
pub const RHO_MAX: f64 = 0.8;
/// How steeply p99 grows as the effective load approaches [`RHO_MAX`] (fit: 1.5; M/M/1 would be 1).
pub const EXPONENT: f64 = 1.5;
/// Weight of a neighbour's load in the effective load: a time-sliced neighbour delays a request
/// while its own kernels run, but its queue is its own (fit: 0.4).
pub const NEIGHBOUR_WEIGHT: f64 = 0.4;
/// Extra p99 per time-sliced neighbour, whatever its load (context switches; fit: 0.2).
pub const PER_NEIGHBOUR: f64 = 0.2;
/// Open-loop p99 alone at light load over the closed-loop p99 alone (fit: 1.7): converts the
/// capacity runs of a calibration file into the law's baseline `b`.
pub const LIGHT_LOAD_OVER_CLOSED_LOOP: f64 = 1.7;

/// Calibrated range: the effective load `u` may not exceed this (above it the curve is steeper
/// than run-to-run noise lets one predict: asr at 60% + tts at 15% measured 5.6× asr alone at 60%).
pub const MAX_EFFECTIVE_LOAD: f64 = 0.6;
/// Calibrated range: the loads of all tenants of a device together.
pub const MAX_TOTAL_LOAD: f64 = 0.75;
/// Calibrated range: neighbours on one device (measured with one to three).
pub const MAX_NEIGHBOURS: usize = 3;

/// Why the model does not predict: the inputs are outside the range it was calibrated on.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    /// A load is negative, not finite, or the baseline is not a positive number.
    InvalidInput,
    /// A neighbour is saturating (closed loop, or load of 1 and more): no queueing law applies.
    SaturatingNeighbour,
    /// The effective load `ρ_own + 0.4 Σ ρ_n` is above [`MAX_EFFECTIVE_LOAD`].
    EffectiveLoadAboveRange(f64),
    /// All tenants' loads together exceed [`MAX_TOTAL_LOAD`].
    TotalLoadAboveRange(f64),
    /// More than [`MAX_NEIGHBOURS`] neighbours.
    TooManyNeighbours(usize),
    /// A MIG instance with no SMs.
    NoSms,
    /// A calibration-file member whose service has no capacity run (no baseline).
    NoCapacity(String),
    /// A closed-loop member next to open-loop tenants: neither law describes it.
    MixedLoops,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidInput => write!(f, "a load or the baseline is not a finite, non-negative number"),
            Self::SaturatingNeighbour => {
                write!(
                    f,
                    "a neighbour saturates the device (closed loop or load ≥ 1); the model has no range there"
                )
            }
            Self::EffectiveLoadAboveRange(u) => write!(
                f,
                "effective load {u:.2} (own + {NEIGHBOUR_WEIGHT} × neighbours) is above the calibrated {MAX_EFFECTIVE_LOAD}"
            ),
            Self::TotalLoadAboveRange(t) => {
                write!(f, "total load {t:.2} of the device is above the calibrated {MAX_TOTAL_LOAD}")
            }
            Self::TooManyNeighbours(k) => {
                write!(f, "{k} neighbours; the model is calibrated for at most {MAX_NEIGHBOURS}")
            }
            Self::NoSms => write!(f, "the instance has no SMs"),
            Self::NoCapacity(name) => write!(f, "no capacity run for `{name}`, so no baseline"),
            Self::MixedLoops => {
                write!(f, "a closed-loop member next to open-loop tenants; neither law describes it")
            }
        }
    }
}

/// The one law. `baseline_ms`: p99 alone on the device at light load; `own_load`: the replica's
/// share of the device; `neighbour_loads`: each time-sliced neighbour's share.
pub fn predict_p99_ms(baseline_ms: f64, own_load: f64, neighbour_loads: &[f64]) -> Result<f64, Refusal> {
    let ok = |x: f64| x.is_finite() && x >= 0.0;
    if !ok(baseline_ms) || !ok(own_load) || !neighbour_loads.iter().all(|&l| l.is_finite()) {
        return Err(Refusal::InvalidInput);
    }
    if neighbour_loads.iter().any(|&l| l >= 1.0) {
        return Err(Refusal::SaturatingNeighbour);
    }
    if neighbour_loads.iter().any(|&l| l < 0.0) {
        return Err(Refusal::InvalidInput);
    }
    let k = neighbour_loads.len();
    if k > MAX_NEIGHBOURS {
        return Err(Refusal::TooManyNeighbours(k));
    }
    let neighbours: f64 = neighbour_loads.iter().sum();
    let total = own_load + neighbours;
    if total > MAX_TOTAL_LOAD + 1e-9 {
        return Err(Refusal::TotalLoadAboveRange(total));
    }
    let u = own_load + NEIGHBOUR_WEIGHT * neighbours;
    if u > MAX_EFFECTIVE_LOAD + 1e-9 {
        return Err(Refusal::EffectiveLoadAboveRange(u));
    }
    Ok(baseline_ms * queue_factor(u) * (1.0 + PER_NEIGHBOUR * k as f64))
}

/// `(1 − u / RHO_MAX)^(−EXPONENT)`: 1 at no load, growing without bound towards [`RHO_MAX`].
fn queue_factor(u: f64) -> f64 {
    let u = u.clamp(0.0, MAX_EFFECTIVE_LOAD);
    (1.0 - u / RHO_MAX).powf(-EXPONENT)
}

/// A MIG instance with `instance_sms` of the GPU's `gpu_sms`, used by one replica whose `compute`
/// is a share of the whole GPU: the baseline's service time stretches by `gpu_sms / instance_sms`
/// and the replica's own load on the instance is `compute × gpu_sms / instance_sms` (the same law
/// as on a whole GPU; no neighbours can interfere).
pub fn predict_mig_p99_ms(
    baseline_ms: f64,
    gpu_sms: u32,
    instance_sms: u32,
    compute: f64,
) -> Result<f64, Refusal> {
    predict_mig_time_sliced_p99_ms(baseline_ms, gpu_sms, instance_sms, compute, &[])
}

/// A MIG instance time-sliced by several replicas: like [`predict_mig_p99_ms`], the neighbours'
/// `compute` (shares of the whole GPU) also expressed as loads of the instance.
pub fn predict_mig_time_sliced_p99_ms(
    baseline_ms: f64,
    gpu_sms: u32,
    instance_sms: u32,
    compute: f64,
    neighbour_computes: &[f64],
) -> Result<f64, Refusal> {
    if instance_sms == 0 {
        return Err(Refusal::NoSms);
    }
    // A slice never gets more SMs than the GPU has; never predict faster than the whole GPU.
    let ratio = (f64::from(gpu_sms) / f64::from(instance_sms)).max(1.0);
    let neighbours: Vec<f64> = neighbour_computes.iter().map(|c| c * ratio).collect();
    predict_p99_ms(baseline_ms * ratio, compute * ratio, &neighbours)
}

/// Former entry point, kept with its signature for callers: the MIG stretch at light own load
/// (`b × S / s`, the law with `ρ_own = 0`), infinity for a refusal. It cannot see the replica's
/// own load: a caller that knows the replica's `compute` must use [`predict_mig_p99_ms`]
/// (issue 13, item 8), as the planner does.
pub fn mig_p99_ms(baseline_ms: f64, gpu_sms: u32, instance_sms: u32) -> f64 {
    predict_mig_p99_ms(baseline_ms, gpu_sms, instance_sms, 0.0).unwrap_or(f64::INFINITY)
}

/// Former entry point, kept for callers: [`predict_p99_ms`] with the neighbours' load carried by
/// one neighbour (none when it is zero), infinity for a refusal. Prefer [`predict_p99_ms`], which
/// counts the neighbours.
pub fn time_sliced_p99_ms(baseline_ms: f64, own_load: f64, neighbour_load: f64) -> f64 {
    let neighbours: &[f64] = if neighbour_load == 0.0 { &[] } else { &[neighbour_load] };
    predict_p99_ms(baseline_ms, own_load, neighbours).unwrap_or(f64::INFINITY)
}

/// The p99 alone at `to_load` given the p99 alone at `from_load`, by the same law (the ratio of
/// its queue factors); infinity when either load is outside the calibrated range.
pub fn solo_p99_at_load_ms(p99_ms: f64, from_load: f64, to_load: f64) -> f64 {
    match (predict_p99_ms(1.0, from_load, &[]), predict_p99_ms(1.0, to_load, &[])) {
        (Ok(from), Ok(to)) if p99_ms.is_finite() && p99_ms >= 0.0 => p99_ms * to / from,
        _ => f64::INFINITY,
    }
}

/// Latency of one request of a saturated tenant that takes turns with saturated co-tenants:
/// its own service time plus one service time of every neighbour, shortened by the overlap gain.
/// Closed-loop (always busy) tenants only; open-loop services use [`predict_p99_ms`].
pub fn round_robin_ms(own_service_ms: f64, neighbour_service_ms: &[f64]) -> f64 {
    let neighbours: f64 = neighbour_service_ms.iter().map(|s| s.max(0.0)).sum();
    let own = own_service_ms.max(0.0);
    if neighbours == 0.0 {
        return own;
    }
    (own + neighbours) / TIME_SLICING_OVERLAP_GAIN
}

/// A calibration file (`tests/data/timeslicing/*.json`, format in its README): capacities of the
/// services alone in closed loop, and scenarios of co-located members.
#[derive(Clone, Debug, Deserialize)]
pub struct CalibrationFile {
    #[serde(default)]
    pub gpu: Option<String>,
    pub capacity: std::collections::BTreeMap<String, Capacity>,
    pub scenarios: Vec<Scenario>,
}

/// One service alone in closed loop.
#[derive(Clone, Debug, Deserialize)]
pub struct Capacity {
    pub thr_rps: f64,
    pub p99: f64,
}

/// Members run together on one device.
#[derive(Clone, Debug, Deserialize)]
pub struct Scenario {
    pub scenario: String,
    pub members: Vec<Member>,
}

/// One service process of a scenario.
#[derive(Clone, Debug, Deserialize)]
pub struct Member {
    pub name: String,
    pub load: Option<f64>,
    #[serde(default)]
    pub closed_loop: bool,
    pub p99: f64,
}

/// The model's answer for one member of a scenario, beside the measurement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemberPrediction {
    pub scenario: String,
    pub member: String,
    pub load: Option<f64>,
    pub predicted_p99_ms: Option<f64>,
    pub measured_p99_ms: f64,
    /// Why the model refused, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// Predicts every member of every scenario of a calibration file from the capacities alone.
/// Open-loop members: [`predict_p99_ms`] with `b = 1.7 ×` the service's closed-loop p99 alone.
/// Closed-loop members among closed-loop tenants only: [`round_robin_ms`] of the service times
/// (`1000 / thr_rps`). Everything else is refused with the reason.
pub fn evaluate(file: &CalibrationFile) -> Vec<MemberPrediction> {
    let mut out = Vec::new();
    for s in &file.scenarios {
        for (i, m) in s.members.iter().enumerate() {
            let others: Vec<&Member> =
                s.members.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, o)| o).collect();
            let predicted = predict_member(file, m, &others);
            out.push(MemberPrediction {
                scenario: s.scenario.clone(),
                member: m.name.clone(),
                load: m.load,
                predicted_p99_ms: predicted.as_ref().ok().copied(),
                measured_p99_ms: m.p99,
                refused: predicted.err().map(|r| r.to_string()),
            });
        }
    }
    out
}

fn predict_member(file: &CalibrationFile, m: &Member, others: &[&Member]) -> Result<f64, Refusal> {
    let capacity = |name: &str| file.capacity.get(name).ok_or_else(|| Refusal::NoCapacity(name.to_owned()));
    let service_ms = |name: &str| {
        capacity(name)
            .and_then(|c| if c.thr_rps > 0.0 { Ok(1000.0 / c.thr_rps) } else { Err(Refusal::InvalidInput) })
    };
    let closed = |o: &Member| o.closed_loop || o.load.is_none();
    if closed(m) {
        if others.iter().any(|o| !closed(o)) {
            return Err(Refusal::MixedLoops);
        }
        let own = service_ms(&m.name)?;
        let neighbours = others.iter().map(|o| service_ms(&o.name)).collect::<Result<Vec<_>, _>>()?;
        return Ok(round_robin_ms(own, &neighbours));
    }
    if others.iter().any(|o| closed(o)) {
        return Err(Refusal::SaturatingNeighbour);
    }
    let base = capacity(&m.name)?.p99 * LIGHT_LOAD_OVER_CLOSED_LOOP;
    let loads: Vec<f64> = others.iter().filter_map(|o| o.load).collect();
    predict_p99_ms(base, m.load.unwrap_or(0.0), &loads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_latency_counts_the_replicas_own_load_on_the_instance() {
        // A100: 1g.10gb has 14 of 108 SMs; compute 0.129 of the GPU is 99.5% of the instance.
        assert!(matches!(
            predict_mig_p99_ms(10.0, 108, 14, 0.129),
            Err(Refusal::TotalLoadAboveRange(_) | Refusal::EffectiveLoadAboveRange(_))
        ));
        assert!((mig_p99_ms(10.0, 108, 14) - 10.0 * 108.0 / 14.0).abs() < 1e-9, "stretch alone");
        // A light replica on 3g.40gb (42 SMs): the stretch plus its own queueing.
        let light = predict_mig_p99_ms(40.0, 108, 42, 0.05).expect("in range");
        let stretch = 40.0 * 108.0 / 42.0;
        assert!(light > stretch && light < 1.5 * stretch, "{light}");
        assert_eq!(predict_mig_p99_ms(40.0, 108, 0, 0.0), Err(Refusal::NoSms));
        // Never faster than the whole GPU.
        assert!((mig_p99_ms(40.0, 98, 108) - 40.0).abs() < 1e-9);
    }

    #[test]
    fn whole_gpu_and_mig_follow_the_same_law() {
        let whole = predict_p99_ms(10.0, 0.3, &[]).expect("in range");
        let mig = predict_mig_p99_ms(10.0, 100, 100, 0.3).expect("in range");
        assert!((whole - mig).abs() < 1e-9);
    }

    #[test]
    fn latency_grows_with_own_load_neighbour_load_and_neighbour_count() {
        let alone = predict_p99_ms(4.0, 0.2, &[]).expect("in range");
        let busier = predict_p99_ms(4.0, 0.3, &[]).expect("in range");
        let shared = predict_p99_ms(4.0, 0.2, &[0.2]).expect("in range");
        let more = predict_p99_ms(4.0, 0.2, &[0.1, 0.1]).expect("in range");
        assert!(alone < busier && alone < shared && shared < more);
        assert!((predict_p99_ms(4.0, 0.0, &[]).expect("in range") - 4.0).abs() < 1e-9);
    }

    #[test]
    fn refuses_outside_the_calibrated_range() {
        assert_eq!(predict_p99_ms(1.0, 0.3, &[1.0]), Err(Refusal::SaturatingNeighbour));
        assert!(matches!(predict_p99_ms(1.0, 0.65, &[]), Err(Refusal::EffectiveLoadAboveRange(_))));
        assert!(matches!(predict_p99_ms(1.0, 0.45, &[0.45]), Err(Refusal::TotalLoadAboveRange(_))));
        assert_eq!(predict_p99_ms(1.0, 0.1, &[0.1; 4]), Err(Refusal::TooManyNeighbours(4)));
        assert_eq!(predict_p99_ms(f64::NAN, 0.1, &[]), Err(Refusal::InvalidInput));
        assert_eq!(predict_p99_ms(1.0, 0.1, &[-0.1]), Err(Refusal::InvalidInput));
        assert_eq!(time_sliced_p99_ms(4.0, 0.3, f64::NAN), f64::INFINITY);
    }

    #[test]
    fn solo_p99_at_load_moves_a_measurement_along_the_law_in_both_directions() {
        let at_30 = solo_p99_at_load_ms(4.0, 0.1, 0.3);
        assert!(at_30 > 4.0);
        assert!((solo_p99_at_load_ms(at_30, 0.3, 0.1) - 4.0).abs() < 1e-9, "down as well as up");
        assert_eq!(solo_p99_at_load_ms(4.0, 0.1, 0.7), f64::INFINITY);
    }

    #[test]
    fn round_robin_adds_the_neighbours_service_times() {
        assert!((round_robin_ms(1.0, &[]) - 1.0).abs() < 1e-9);
        let two = round_robin_ms(1.0, &[1.0]);
        assert!((two - 2.0 / TIME_SLICING_OVERLAP_GAIN).abs() < 1e-9);
        assert!(round_robin_ms(1.0, &[1.0, 1.0, 1.0]) > two);
    }

    #[test]
    fn evaluate_refuses_a_member_next_to_a_closed_loop_neighbour_and_unknown_services() {
        let file: CalibrationFile = serde_json::from_str(
            r#"{"capacity": {"asr": {"thr_rps": 1000.0, "p99": 1.0}},
                "scenarios": [
                  {"scenario": "a", "members": [{"name": "asr", "load": 0.3, "closed_loop": false, "p99": 4.0},
                                                 {"name": "llm", "load": null, "closed_loop": true, "p99": 4.0}]},
                  {"scenario": "b", "members": [{"name": "asr", "load": 0.2, "closed_loop": false, "p99": 4.0}]}]}"#,
        )
        .expect("valid JSON");
        let rows = evaluate(&file);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].predicted_p99_ms, None);
        assert!(rows[0].refused.as_deref().is_some_and(|r| r.contains("saturates")));
        assert!(rows[1].refused.as_deref().is_some_and(|r| r.contains("closed-loop member next to")));
        assert!(rows[2].predicted_p99_ms.is_some_and(|p| p > 1.7));
    }
}
