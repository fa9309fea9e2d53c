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

pub mod mps;
pub mod pairs;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::catalog::Throughput;
pub use mps::{ClosedLaw, Cpus, MPS_CLOSED_LAW, MPS_LAW, MpsLaw, TIME_SLICING_CLOSED_LAW};

/// Share of a GPU's compute that time-sliced tenants can use together, when the manifest does not
/// say (`policy.timeSlicingEfficiency`): NVIDIA measured about 0.76 requests/s per GPU with
/// time-slicing against 1.00 with MIG on the same voice pipeline (A100).
pub const DEFAULT_TIME_SLICING_EFFICIENCY: f64 = 0.76;

/// The law's five fitted parameters ([`LAW`] is the one gpuplan uses; [`fit`] is how it was
/// chosen, and the cross-validation in `tests/integration/latency.rs` refits it on subsets).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Law {
    /// Open-loop p99 alone at light load over the closed-loop p99 alone: converts the capacity
    /// runs of a calibration file into the law's baseline `b`.
    pub light_load_over_closed_loop: f64,
    /// The utilisation at which an open-loop service's queue diverges (below 1: Poisson arrivals
    /// and context switches waste part of the closed-loop capacity).
    pub rho_max: f64,
    /// How steeply p99 grows as the effective load approaches `rho_max` (1 is M/M/1's shape).
    pub exponent: f64,
    /// Weight of a neighbour's load in the effective load: a time-sliced neighbour delays a
    /// request while its own kernels run, but its queue is its own.
    pub neighbour_weight: f64,
    /// Extra p99 per time-sliced neighbour, whatever its load (context switches).
    pub per_neighbour: f64,
}

/// The law gpuplan predicts with: [`fit`] over both vendored H200 files (37 open-loop members
/// inside the range; `docs/latency-model.md`, "Calibration and cross-validation").
pub const LAW: Law = Law {
    light_load_over_closed_loop: 2.1,
    rho_max: 0.75,
    exponent: 1.0,
    neighbour_weight: 0.3,
    per_neighbour: 0.2,
};

/// [`LAW`]'s divergence point.
pub const RHO_MAX: f64 = LAW.rho_max;
/// [`LAW`]'s exponent.
pub const EXPONENT: f64 = LAW.exponent;
/// [`LAW`]'s weight of a neighbour's load.
pub const NEIGHBOUR_WEIGHT: f64 = LAW.neighbour_weight;
/// [`LAW`]'s extra p99 per neighbour.
pub const PER_NEIGHBOUR: f64 = LAW.per_neighbour;
/// [`LAW`]'s light-load factor.
pub const LIGHT_LOAD_OVER_CLOSED_LOOP: f64 = LAW.light_load_over_closed_loop;

/// Calibrated range, for every option (exclusive or shared): the effective load `u` may not exceed
/// this (above it the curve is steeper than run-to-run noise lets one predict: alone, asr measured
/// 14.9 ms at 60% and 147 ms at 75%; asr at 60% + tts at 15% measured 5.6× asr alone at 60%).
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
    /// The baseline was measured on another GPU type and one of the two has no throughput
    /// figures in the catalog to scale it by: (measured on, wanted on).
    NoThroughput(String, String),
    /// A replica over several whole GPUs (tensor parallel): the law has no such runs.
    MultiGpu,
    /// MPS: the replica's own load is above [`mps::MPS_MAX_OWN_LOAD`].
    MpsOwnLoadAboveRange(f64),
    /// MPS: all clients' loads together exceed [`mps::MPS_MAX_TOTAL_LOAD`].
    MpsTotalLoadAboveRange(f64),
    /// MPS: more than [`mps::MPS_MAX_NEIGHBOURS`] co-running clients.
    TooManyMpsClients(usize),
    /// MPS: a thread cap below [`mps::MPS_MIN_THREAD_CAP`].
    ThreadCapBelowRange(f64),
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
            Self::NoThroughput(from, to) => write!(
                f,
                "the baseline was measured on `{from}` and the catalog has no throughput figures to move it to `{to}`"
            ),
            Self::MultiGpu => write!(f, "no runs of a replica over several GPUs"),
            Self::MpsOwnLoadAboveRange(u) => {
                write!(f, "MPS: own load {u:.2} is above the calibrated {}", mps::MPS_MAX_OWN_LOAD)
            }
            Self::MpsTotalLoadAboveRange(t) => {
                write!(
                    f,
                    "MPS: total load {t:.2} of the device is above the calibrated {}",
                    mps::MPS_MAX_TOTAL_LOAD
                )
            }
            Self::TooManyMpsClients(k) => {
                write!(
                    f,
                    "MPS: {k} neighbours; the law is calibrated for at most {}",
                    mps::MPS_MAX_NEIGHBOURS
                )
            }
            Self::ThreadCapBelowRange(c) => write!(
                f,
                "MPS: a thread cap of {:.0}% is below the calibrated {:.0}%",
                c * 100.0,
                mps::MPS_MIN_THREAD_CAP * 100.0
            ),
        }
    }
}

/// The one law ([`LAW`]). `baseline_ms`: p99 alone on the device at light load; `own_load`: the
/// replica's share of the device; `neighbour_loads`: each time-sliced neighbour's share.
pub fn predict_p99_ms(baseline_ms: f64, own_load: f64, neighbour_loads: &[f64]) -> Result<f64, Refusal> {
    LAW.predict_p99_ms(baseline_ms, own_load, neighbour_loads)
}

impl Law {
    /// [`predict_p99_ms`] with this law's parameters; the range (the `MAX_*` constants) is the
    /// same for every law.
    pub fn predict_p99_ms(
        &self,
        baseline_ms: f64,
        own_load: f64,
        neighbour_loads: &[f64],
    ) -> Result<f64, Refusal> {
        check_loads(baseline_ms, own_load, neighbour_loads)?;
        let k = neighbour_loads.len();
        if k > MAX_NEIGHBOURS {
            return Err(Refusal::TooManyNeighbours(k));
        }
        let neighbours: f64 = neighbour_loads.iter().sum();
        let total = own_load + neighbours;
        if total > MAX_TOTAL_LOAD + 1e-9 {
            return Err(Refusal::TotalLoadAboveRange(total));
        }
        let u = own_load + self.neighbour_weight * neighbours;
        if u > MAX_EFFECTIVE_LOAD + 1e-9 {
            return Err(Refusal::EffectiveLoadAboveRange(u));
        }
        // `(1 − u / rho_max)^(−exponent)`: 1 at no load, growing without bound towards rho_max.
        let headroom = (1.0 - u.clamp(0.0, MAX_EFFECTIVE_LOAD) / self.rho_max).max(f64::MIN_POSITIVE);
        Ok(baseline_ms * headroom.powf(-self.exponent) * (1.0 + self.per_neighbour * k as f64))
    }
}

/// The inputs every law refuses: a baseline or load that is not a finite, non-negative number
/// ([`Refusal::InvalidInput`]), a saturating neighbour ([`Refusal::SaturatingNeighbour`]).
pub(crate) fn check_loads(baseline_ms: f64, own_load: f64, neighbour_loads: &[f64]) -> Result<(), Refusal> {
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
    Ok(())
}

/// A baseline p99 measured alone on a whole GPU with the datasheet figures `from`, moved to a
/// whole GPU with the figures `to`: multiplied by the larger of the two ratios (memory bandwidth,
/// dense FP16 Tensor Core TFLOPS). A small model's request is bound by one or the other and the
/// baseline does not say which, so the slower of the two speeds is assumed: moving to a slower
/// GPU takes the larger slowdown, moving to a faster one the smaller speed-up. Not calibrated
/// against measurements on two GPU types (`docs/latency-model.md`).
pub fn scale_baseline_ms(baseline_ms: f64, from: &Throughput, to: &Throughput) -> f64 {
    let ratio = |a: f64, b: f64| if a > 0.0 && b > 0.0 { a / b } else { f64::INFINITY };
    let bandwidth = ratio(from.memory_bandwidth_gbps, to.memory_bandwidth_gbps);
    let tensor = ratio(from.fp16_dense_tflops, to.fp16_dense_tflops);
    baseline_ms * bandwidth.max(tensor)
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

/// How the members of a calibration run shared the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
pub enum Sharing {
    /// The driver's default time-slicing.
    #[default]
    #[serde(rename = "time-slicing")]
    TimeSlicing,
    /// NVIDIA MPS (an MPS control daemon for the scenario).
    #[serde(rename = "mps")]
    Mps,
}

impl Sharing {
    /// The word the calibration files and `gpuplan latency` use.
    pub fn word(self) -> &'static str {
        match self {
            Sharing::TimeSlicing => "time-slicing",
            Sharing::Mps => "mps",
        }
    }
}

/// A calibration file (`tests/data/timeslicing/*.json`, format in its README): capacities of the
/// services alone in closed loop, and scenarios of co-located members. The pairs format of
/// `tests/data/mps/` is read by [`pairs::parse`] into this same shape.
#[derive(Clone, Debug, Deserialize)]
pub struct CalibrationFile {
    #[serde(default)]
    pub gpu: Option<String>,
    /// `disabled` for the runs the law is calibrated on; anything else (MIG instances) is outside
    /// the calibration.
    #[serde(default)]
    pub mig: Option<String>,
    pub capacity: std::collections::BTreeMap<String, Capacity>,
    pub scenarios: Vec<Scenario>,
    /// The harness's own light-load p99 over closed-loop p99 alone, when the file states it:
    /// another load generator on the same GPU gives another ratio (`tests/data/mps/README.md`);
    /// absent, the time-slicing law's fitted [`Law::light_load_over_closed_loop`].
    #[serde(default)]
    pub light_load_over_closed_loop: Option<f64>,
    /// The CPU cores the runs' processes shared, when the file states it (MPS clients and the
    /// MPS server beyond them wait for a core); absent, the reference host's
    /// ([`MpsLaw::host_cpus`]).
    #[serde(default)]
    pub cpus: Option<u32>,
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
    /// Time-slicing unless the file says otherwise.
    #[serde(default)]
    pub sharing: Sharing,
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
    /// The MPS thread cap the client ran with, as a fraction (`None`: not capped).
    #[serde(default)]
    pub thread_cap: Option<f64>,
}

/// The model's answer for one member of a scenario, beside the measurement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemberPrediction {
    pub scenario: String,
    pub member: String,
    /// `time-slicing` or `mps`, as in the files.
    pub sharing: Sharing,
    pub load: Option<f64>,
    /// The MPS thread cap in percent, when the run set one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_thread_pct: Option<f64>,
    pub predicted_p99_ms: Option<f64>,
    pub measured_p99_ms: f64,
    /// Why the model refused, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// False when the file's runs are outside what the law was calibrated on (another GPU than
    /// [`CALIBRATED_GPU`], or MIG enabled): the prediction is the law's, unchecked there.
    pub calibrated: bool,
}

/// The GPU the law was calibrated on (catalog id); MIG disabled.
pub const CALIBRATED_GPU: &str = "H200-SXM";

impl CalibrationFile {
    /// Reads either calibration format: the time-slicing one (`capacity` by name, `scenarios`)
    /// or the pairs format of MPS runs ([`pairs`]).
    pub fn parse(text: &str) -> Result<Self, String> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let file: Self = if pairs::is_pairs(&value) {
            pairs::parse(text)?
        } else {
            serde_json::from_value(value).map_err(|e| e.to_string())?
        };
        if file.light_load_over_closed_loop.is_some_and(|f| !(f.is_finite() && f > 0.0)) {
            return Err("`light_load_over_closed_loop` must be a positive number".to_owned());
        }
        if file.cpus == Some(0) {
            return Err("`cpus` must be at least 1".to_owned());
        }
        Ok(file)
    }

    /// Whether the runs are of the kind the law was calibrated on: [`CALIBRATED_GPU`] (or no GPU
    /// named) with MIG disabled (or not said).
    pub fn calibrated(&self) -> bool {
        self.gpu.as_deref().is_none_or(|g| g == CALIBRATED_GPU)
            && self.mig.as_deref().is_none_or(|m| m.eq_ignore_ascii_case("disabled"))
    }
}

/// Every law gpuplan predicts with, one per sharing mode and loop ([`LAWS`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Laws {
    /// Open-loop tenants, alone or time-sliced ([`LAW`]).
    pub time_slicing: Law,
    /// Closed-loop tenants among closed-loop tenants, time-sliced.
    pub time_slicing_closed: ClosedLaw,
    /// Open-loop MPS clients.
    pub mps: MpsLaw,
    /// Closed-loop MPS clients among closed-loop clients.
    pub mps_closed: ClosedLaw,
}

/// The laws gpuplan uses: [`fit`] over the four vendored files (`tests/data/timeslicing/`,
/// `tests/data/mps/`).
pub const LAWS: Laws = Laws {
    time_slicing: LAW,
    time_slicing_closed: TIME_SLICING_CLOSED_LAW,
    mps: MPS_LAW,
    mps_closed: MPS_CLOSED_LAW,
};

/// Predicts every member of every scenario of a calibration file from the capacities alone, with
/// [`LAWS`]. Open-loop members: `b =` [`LIGHT_LOAD_OVER_CLOSED_LOOP`] `×` the service's
/// closed-loop p99 alone, then [`predict_p99_ms`] (time-slicing) or [`MpsLaw::predict_p99_ms`]
/// (MPS, with the member's thread cap). Closed-loop members among closed-loop tenants only:
/// [`ClosedLaw::predict_p99_ms`] of the mode. Everything else is refused with the reason.
pub fn evaluate(file: &CalibrationFile) -> Vec<MemberPrediction> {
    evaluate_with(file, &LAWS)
}

/// [`evaluate`] with other laws' parameters (the cross-validation refits them).
pub fn evaluate_with(file: &CalibrationFile, laws: &Laws) -> Vec<MemberPrediction> {
    let calibrated = file.calibrated();
    let mut out = Vec::new();
    for s in &file.scenarios {
        for (i, m) in s.members.iter().enumerate() {
            let others: Vec<&Member> =
                s.members.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, o)| o).collect();
            let predicted = predict_member(file, laws, s.sharing, m, &others);
            out.push(MemberPrediction {
                scenario: s.scenario.clone(),
                member: m.name.clone(),
                sharing: s.sharing,
                load: m.load,
                active_thread_pct: m.thread_cap.map(|c| (c * 100.0).round()),
                predicted_p99_ms: predicted.as_ref().ok().copied(),
                measured_p99_ms: m.p99,
                refused: predicted.err().map(|r| r.to_string()),
                calibrated,
            });
        }
    }
    out
}

fn predict_member(
    file: &CalibrationFile,
    laws: &Laws,
    sharing: Sharing,
    m: &Member,
    others: &[&Member],
) -> Result<f64, Refusal> {
    if closed_member(m) {
        if others.iter().any(|o| !closed_member(o)) {
            return Err(Refusal::MixedLoops);
        }
        let own = service_ms(file, &m.name)?;
        let neighbours = others.iter().map(|o| service_ms(file, &o.name)).collect::<Result<Vec<_>, _>>()?;
        let law = match sharing {
            Sharing::TimeSlicing => laws.time_slicing_closed,
            Sharing::Mps => laws.mps_closed,
        };
        return law.predict_p99_ms(capacity_of(file, &m.name)?.p99, own, &neighbours);
    }
    let (base, own, loads) = open_inputs(file, &laws.time_slicing, m, others)?;
    match sharing {
        Sharing::TimeSlicing => laws.time_slicing.predict_p99_ms(base, own, &loads),
        Sharing::Mps => {
            let cpus = laws.mps.cpus_of(file.cpus);
            laws.mps.predict_p99_ms(base, own, &loads, m.thread_cap.unwrap_or(1.0), cpus)
        }
    }
}

fn closed_member(m: &Member) -> bool {
    m.closed_loop || m.load.is_none()
}

fn capacity_of<'f>(file: &'f CalibrationFile, name: &str) -> Result<&'f Capacity, Refusal> {
    file.capacity.get(name).ok_or_else(|| Refusal::NoCapacity(name.to_owned()))
}

fn service_ms(file: &CalibrationFile, name: &str) -> Result<f64, Refusal> {
    capacity_of(file, name)
        .and_then(|c| if c.thr_rps > 0.0 { Ok(1000.0 / c.thr_rps) } else { Err(Refusal::InvalidInput) })
}

/// An open-loop member's inputs to either open-loop law: the baseline `b` (the closed-loop p99
/// alone × the file's light-load factor, else `ts`'s), its own load, its neighbours' loads.
fn open_inputs(
    file: &CalibrationFile,
    ts: &Law,
    m: &Member,
    others: &[&Member],
) -> Result<(f64, f64, Vec<f64>), Refusal> {
    if others.iter().any(|o| closed_member(o)) {
        return Err(Refusal::SaturatingNeighbour);
    }
    let light = file.light_load_over_closed_loop.unwrap_or(ts.light_load_over_closed_loop);
    let base = capacity_of(file, &m.name)?.p99 * light;
    let loads: Vec<f64> = others.iter().filter_map(|o| o.load).collect();
    Ok((base, m.load.unwrap_or(0.0), loads))
}

/// An open-loop MPS member as the MPS law sees it ([`open_inputs`], the thread cap, the file's
/// cores) beside its measured p99: the fit scores thousands of candidate laws on these.
struct MpsCase {
    base: f64,
    own: f64,
    loads: Vec<f64>,
    cap: f64,
    cpus: Option<u32>,
    measured: f64,
}

fn mps_cases(
    files: &[CalibrationFile],
    ts: &Law,
    keep: &dyn Fn(usize, Sharing, &str) -> bool,
) -> Vec<MpsCase> {
    let mut out = Vec::new();
    for (i, f) in files.iter().enumerate() {
        for s in f.scenarios.iter().filter(|s| s.sharing == Sharing::Mps && keep(i, s.sharing, &s.scenario)) {
            for (j, m) in s.members.iter().enumerate().filter(|(_, m)| !closed_member(m)) {
                let others: Vec<&Member> =
                    s.members.iter().enumerate().filter(|&(o, _)| o != j).map(|(_, o)| o).collect();
                if let Ok((base, own, loads)) = open_inputs(f, ts, m, &others) {
                    let cap = m.thread_cap.unwrap_or(1.0);
                    out.push(MpsCase { base, own, loads, cap, cpus: f.cpus, measured: m.p99 });
                }
            }
        }
    }
    out
}

/// How [`LAWS`] were chosen: per law, the grid below minimising a robust (Huber, δ = 0.15) loss
/// on `ln(predicted / measured)` over the members that law predicts (open- or closed-loop, of
/// its sharing mode). The ranges (the `MAX_*` constants) are fixed, not fitted; the MPS law takes
/// `b` as the time-slicing law defines it (one definition of the baseline), so the time-slicing
/// open-loop law is fitted first. `keep` selects the members fitted on (by file index, sharing
/// mode and scenario name), so that cross-validation can hold some out and the laws of one mode
/// can be fitted on more files than the other's.
pub fn fit(files: &[CalibrationFile], keep: &dyn Fn(usize, Sharing, &str) -> bool) -> Laws {
    let loss = |laws: &Laws, sharing: Sharing, closed: bool| -> f64 {
        files
            .iter()
            .enumerate()
            .flat_map(|(i, f)| evaluate_with(f, laws).into_iter().map(move |r| (i, r)))
            .filter(|(i, r)| {
                r.sharing == sharing && r.load.is_none() == closed && keep(*i, sharing, &r.scenario)
            })
            .filter_map(|(_, r)| r.predicted_p99_ms.map(|p| huber((p / r.measured_p99_ms).ln())))
            .sum()
    };
    let mut laws = LAWS;
    laws.time_slicing =
        best(time_slicing_grid(), |l| loss(&Laws { time_slicing: *l, ..laws }, Sharing::TimeSlicing, false));
    laws.time_slicing_closed =
        best(closed_grid(), |l| loss(&Laws { time_slicing_closed: *l, ..laws }, Sharing::TimeSlicing, true));
    let cases = mps_cases(files, &laws.time_slicing, keep);
    laws.mps = best(mps_grid(), |l| {
        cases
            .iter()
            .filter_map(|c| {
                let cpus = l.cpus_of(c.cpus);
                l.predict_p99_ms(c.base, c.own, &c.loads, c.cap, cpus)
                    .ok()
                    .map(|p| huber((p / c.measured).ln()))
            })
            .sum()
    });
    laws.mps_closed = best(closed_grid(), |l| loss(&Laws { mps_closed: *l, ..laws }, Sharing::Mps, true));
    laws
}

/// The fit's robust loss of one member: Huber (δ = 0.15) on `ln(predicted / measured)`.
fn huber(x: f64) -> f64 {
    if x.abs() <= 0.15 { x * x / 2.0 } else { 0.15 * (x.abs() - 0.075) }
}

/// The candidate with the least loss; ties keep the first (the smallest values), so that the fit
/// is deterministic. A grid with no candidate never happens (the grids below are constants).
fn best<L: Copy>(candidates: Vec<L>, loss: impl Fn(&L) -> f64) -> L {
    let mut out: Option<(f64, L)> = None;
    for c in candidates {
        let l = loss(&c);
        if out.as_ref().is_none_or(|(b, _)| l < b - 1e-12) {
            out = Some((l, c));
        }
    }
    out.map(|(_, c)| c).unwrap_or_else(|| unreachable!("the grids are not empty"))
}

fn time_slicing_grid() -> Vec<Law> {
    const LIGHT: [f64; 6] = [1.3, 1.5, 1.7, 1.9, 2.1, 2.3];
    const RHO: [f64; 6] = [0.7, 0.75, 0.8, 0.85, 0.9, 1.0];
    const EXP: [f64; 5] = [1.0, 1.25, 1.5, 1.75, 2.0];
    const WEIGHT: [f64; 5] = [0.2, 0.3, 0.4, 0.5, 0.6];
    const PER: [f64; 4] = [0.0, 0.1, 0.2, 0.3];
    let mut out = Vec::new();
    for &light_load_over_closed_loop in &LIGHT {
        for &rho_max in &RHO {
            for &exponent in &EXP {
                for &neighbour_weight in &WEIGHT {
                    for &per_neighbour in &PER {
                        out.push(Law {
                            light_load_over_closed_loop,
                            rho_max,
                            exponent,
                            neighbour_weight,
                            per_neighbour,
                        });
                    }
                }
            }
        }
    }
    out
}

fn closed_grid() -> Vec<ClosedLaw> {
    const PER: [f64; 10] = [0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6];
    const EXP: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];
    PER.iter()
        .flat_map(|&per_neighbour| EXP.iter().map(move |&exponent| ClosedLaw { per_neighbour, exponent }))
        .collect()
}

fn mps_grid() -> Vec<MpsLaw> {
    const ALONE: [f64; 5] = [0.8, 0.9, 1.0, 1.1, 1.2];
    const RHO: [f64; 3] = [0.9, 1.0, 1.1];
    const EXP: [f64; 4] = [1.0, 1.5, 2.0, 2.5];
    const CAP: [f64; 4] = [0.1, 0.2, 0.3, 0.4];
    const CPUS: [u32; 4] = [3, 4, 5, 6];
    const PER_MS: [f64; 5] = [0.0, 1.0, 2.0, 3.0, 4.0];
    // The host's part (cores, ms per process beyond them) for every GPU part, in grid order.
    let host: Vec<(u32, f64)> = CPUS.iter().flat_map(|&n| PER_MS.iter().map(move |&ms| (n, ms))).collect();
    let mut out = Vec::new();
    for &alone in &ALONE {
        for &rho_max in &RHO {
            for &exponent in &EXP {
                for &cap_exponent in &CAP {
                    out.extend(host.iter().map(|&(host_cpus, per_process_over_cpus_ms)| MpsLaw {
                        alone,
                        rho_max,
                        exponent,
                        cap_exponent,
                        host_cpus,
                        per_process_over_cpus_ms,
                    }));
                }
            }
        }
    }
    out
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
