//! The MPS latency law: predicted p99 of a replica that shares a device with other MPS clients
//! (NVIDIA's Multi-Process Service: the clients' kernels run at the same time, each client
//! limited to a share of the SMs, its *thread cap*), and the law for saturating (closed-loop)
//! tenants under either sharing mode.
//!
//! In: the replica's baseline `b` (p99 alone at light load, as for [`super::predict_p99_ms`]),
//! its own load and its neighbours' loads as shares of the device, and its thread cap as a
//! fraction (the device plugin gives each of `k` replicas `⌊100/k⌋%`). Out: a p99 in ms, or a
//! [`Refusal`] outside the calibrated range. Pure, total, monotone in the own load, the number
//! of neighbours and a lower thread cap.
//!
//! ```text
//! p99 = b × ALONE × cap^(−CAP_EXPONENT) × (1 − ρ_own / RHO_MAX)^(−EXPONENT) + PER_NEIGHBOUR_MS × k
//! ```
//!
//! Unlike time-slicing, a neighbour's *load* barely moves the tail under MPS (its kernels run
//! beside the replica's, not instead of them); what the runs show is the replica's own queue
//! plus a fixed delay per co-running client. Fitted on `tests/data/mps/` (H200), stated in load
//! fractions; the per-neighbour delay is in milliseconds of the H200 and is flagged
//! uncalibrated on other GPU types with the rest of the law. `docs/latency-model.md`, "MPS".

use serde::Serialize;

use super::Refusal;

/// The MPS law's five fitted parameters ([`MPS_LAW`]; [`super::fit`] is how they were chosen).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MpsLaw {
    /// p99 alone under MPS at light load over the baseline `b` (the MPS server's own cost and
    /// the shape of the queue below, together).
    pub alone: f64,
    /// The own load at which the replica's queue diverges.
    pub rho_max: f64,
    /// How steeply p99 grows as the own load approaches `rho_max`.
    pub exponent: f64,
    /// How much a thread cap `c < 1` stretches the service time: `c^(−cap_exponent)`.
    pub cap_exponent: f64,
    /// Extra p99 per co-running client, in milliseconds (H200).
    pub per_neighbour_ms: f64,
}

/// The MPS law gpuplan predicts with: [`super::fit`] over the MPS halves of both vendored
/// files (18 open-loop members; `docs/latency-model.md`, "MPS").
pub const MPS_LAW: MpsLaw =
    MpsLaw { alone: 0.6, rho_max: 1.0, exponent: 2.0, cap_exponent: 0.2, per_neighbour_ms: 1.0 };

/// Calibrated range of [`MpsLaw`]: the replica's own load (measured up to 0.6).
pub const MPS_MAX_OWN_LOAD: f64 = 0.6;
/// Calibrated range of [`MpsLaw`]: all clients' loads together (measured up to 0.9).
pub const MPS_MAX_TOTAL_LOAD: f64 = 0.9;
/// Calibrated range of [`MpsLaw`]: co-running clients (measured with one to three).
pub const MPS_MAX_NEIGHBOURS: usize = 3;
/// Calibrated range of [`MpsLaw`]: the lowest thread cap measured (25%, four clients).
pub const MPS_MIN_THREAD_CAP: f64 = 0.25;

impl MpsLaw {
    /// Predicted p99 of an open-loop MPS client. `thread_cap`: the client's share of the SMs
    /// (1 when not capped).
    pub fn predict_p99_ms(
        &self,
        baseline_ms: f64,
        own_load: f64,
        neighbour_loads: &[f64],
        thread_cap: f64,
    ) -> Result<f64, Refusal> {
        super::check_loads(baseline_ms, own_load, neighbour_loads)?;
        if !(thread_cap.is_finite() && thread_cap > 0.0 && thread_cap <= 1.0 + 1e-9) {
            return Err(Refusal::InvalidInput);
        }
        let k = neighbour_loads.len();
        if k > MPS_MAX_NEIGHBOURS {
            return Err(Refusal::TooManyMpsClients(k));
        }
        if thread_cap + 1e-9 < MPS_MIN_THREAD_CAP {
            return Err(Refusal::ThreadCapBelowRange(thread_cap));
        }
        let total = own_load + neighbour_loads.iter().sum::<f64>();
        if total > MPS_MAX_TOTAL_LOAD + 1e-9 {
            return Err(Refusal::MpsTotalLoadAboveRange(total));
        }
        if own_load > MPS_MAX_OWN_LOAD + 1e-9 {
            return Err(Refusal::MpsOwnLoadAboveRange(own_load));
        }
        let stretch = thread_cap.min(1.0).powf(-self.cap_exponent);
        let queue = (1.0 - own_load.min(MPS_MAX_OWN_LOAD) / self.rho_max).max(f64::MIN_POSITIVE);
        Ok(baseline_ms * self.alone * stretch * queue.powf(-self.exponent) + self.per_neighbour_ms * k as f64)
    }
}

/// The law of saturating (closed-loop) tenants among saturating tenants, one per sharing mode:
/// a tenant's p99 is its closed-loop p99 alone, inflated by every neighbour in proportion to the
/// neighbour's service time over its own (`(s_n / s_own)^exponent`; exponent 0 counts
/// neighbours, 1 weighs them by how long they hold the device).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ClosedLaw {
    /// Inflation per neighbour of equal service time.
    pub per_neighbour: f64,
    /// How much a neighbour's service time relative to the tenant's own matters.
    pub exponent: f64,
}

/// Closed-loop tenants under time-slicing: [`super::fit`] over both time-slicing sources
/// (26 closed-loop members).
pub const TIME_SLICING_CLOSED_LAW: ClosedLaw = ClosedLaw { per_neighbour: 0.4, exponent: 1.0 };
/// Closed-loop tenants under MPS: [`super::fit`] over the MPS halves (18 closed-loop members).
pub const MPS_CLOSED_LAW: ClosedLaw = ClosedLaw { per_neighbour: 0.2, exponent: 0.25 };

impl ClosedLaw {
    /// `own_p99_ms`: the tenant's closed-loop p99 alone; `own_service_ms` and
    /// `neighbour_service_ms`: mean service times alone (`1000 / requests per second`).
    pub fn predict_p99_ms(
        &self,
        own_p99_ms: f64,
        own_service_ms: f64,
        neighbour_service_ms: &[f64],
    ) -> Result<f64, Refusal> {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !ok(own_p99_ms) || !ok(own_service_ms) || !neighbour_service_ms.iter().all(|&s| ok(s)) {
            return Err(Refusal::InvalidInput);
        }
        let inflation: f64 = neighbour_service_ms
            .iter()
            .map(|s| self.per_neighbour * (s / own_service_ms).powf(self.exponent))
            .sum();
        Ok(own_p99_ms * (1.0 + inflation))
    }
}

/// The device plugin's thread cap of each of `k` MPS replicas: `⌊100/k⌋%`, as a fraction.
pub fn thread_cap(k: u32) -> f64 {
    f64::from(100 / k.max(1)) / 100.0
}

#[cfg(test)]
mod tests {
    use super::{MPS_CLOSED_LAW, MPS_LAW, MPS_MIN_THREAD_CAP, Refusal, TIME_SLICING_CLOSED_LAW, thread_cap};

    #[test]
    fn the_device_plugin_rounds_the_thread_cap_down() {
        assert!((thread_cap(1) - 1.0).abs() < 1e-12);
        assert!((thread_cap(3) - 0.33).abs() < 1e-12);
        assert!((thread_cap(7) - 0.14).abs() < 1e-12);
    }

    #[test]
    fn mps_latency_grows_with_own_load_clients_and_a_lower_cap() {
        let alone = MPS_LAW.predict_p99_ms(4.0, 0.2, &[], 1.0).expect("in range");
        let busier = MPS_LAW.predict_p99_ms(4.0, 0.4, &[], 1.0).expect("in range");
        let shared = MPS_LAW.predict_p99_ms(4.0, 0.2, &[0.2], 1.0).expect("in range");
        let capped = MPS_LAW.predict_p99_ms(4.0, 0.2, &[0.2], 0.5).expect("in range");
        assert!(alone < busier && alone < shared && shared < capped);
        // A neighbour's load stays out of the tail; only its presence counts.
        let heavier = MPS_LAW.predict_p99_ms(4.0, 0.2, &[0.5], 1.0).expect("in range");
        assert!((heavier - shared).abs() < 1e-9);
    }

    #[test]
    fn mps_refuses_outside_its_range_and_names_it() {
        assert_eq!(MPS_LAW.predict_p99_ms(1.0, 0.1, &[1.0], 1.0), Err(Refusal::SaturatingNeighbour));
        assert_eq!(MPS_LAW.predict_p99_ms(1.0, 0.1, &[0.1; 4], 0.2), Err(Refusal::TooManyMpsClients(4)));
        assert!(matches!(MPS_LAW.predict_p99_ms(1.0, 0.65, &[], 1.0), Err(Refusal::MpsOwnLoadAboveRange(_))));
        assert!(matches!(
            MPS_LAW.predict_p99_ms(1.0, 0.5, &[0.5], 1.0),
            Err(Refusal::MpsTotalLoadAboveRange(_))
        ));
        let low = MPS_MIN_THREAD_CAP / 2.0;
        assert_eq!(MPS_LAW.predict_p99_ms(1.0, 0.1, &[0.1], low), Err(Refusal::ThreadCapBelowRange(low)));
        assert_eq!(MPS_LAW.predict_p99_ms(1.0, 0.1, &[], 0.0), Err(Refusal::InvalidInput));
        let text = Refusal::ThreadCapBelowRange(low).to_string();
        assert!(text.contains("25%"), "{text}");
    }

    #[test]
    fn closed_loop_tenants_inflate_with_their_neighbours_service_times() {
        let alone = TIME_SLICING_CLOSED_LAW.predict_p99_ms(1.0, 1.0, &[]).expect("valid");
        assert!((alone - 1.0).abs() < 1e-12);
        let short = TIME_SLICING_CLOSED_LAW.predict_p99_ms(1.0, 1.0, &[0.5]).expect("valid");
        let long = TIME_SLICING_CLOSED_LAW.predict_p99_ms(1.0, 1.0, &[2.0]).expect("valid");
        assert!(alone < short && short < long);
        let mps = MPS_CLOSED_LAW.predict_p99_ms(1.0, 1.0, &[1.0; 3]).expect("valid");
        let ts = TIME_SLICING_CLOSED_LAW.predict_p99_ms(1.0, 1.0, &[1.0; 3]).expect("valid");
        assert!(mps < ts, "capacity adds up better under MPS");
        assert_eq!(MPS_CLOSED_LAW.predict_p99_ms(1.0, 0.0, &[]), Err(Refusal::InvalidInput));
    }
}
