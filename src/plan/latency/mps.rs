//! The MPS latency law: predicted p99 of a replica that shares a device with other MPS clients
//! (NVIDIA's Multi-Process Service: the clients' kernels run at the same time, each client
//! limited to a share of the SMs, its *thread cap*), and the law for saturating (closed-loop)
//! tenants under either sharing mode.
//!
//! In: the replica's baseline `b` (p99 alone at light load, as for [`super::predict_p99_ms`]),
//! its own load and its neighbours' loads as shares of the device, and its thread cap as a
//! fraction (the device plugin gives each of `k` replicas `⌊100/k⌋%`), and the CPU cores of the
//! host the clients run on when they are fewer than the processes. Out: a p99 in ms, or a
//! [`Refusal`] outside the calibrated range. Pure, total, monotone in the own load, the number
//! of neighbours and a lower thread cap.
//!
//! ```text
//! p99 = b × ALONE × cap^(−CAP_EXPONENT) × (1 − ρ_own / RHO_MAX)^(−EXPONENT)
//!     + PER_PROCESS_OVER_CPUS_MS × max(0, (k + 1) + 1 − cpus)
//! ```
//!
//! Unlike time-slicing, a neighbour's *load* barely moves the tail under MPS (its kernels run
//! beside the replica's, not instead of them): the GPU part is the replica's own queue, its
//! service time stretched by the thread cap, stated in load fractions. The second term is the
//! host's, not the GPU's: the `k + 1` clients and the MPS server each keep a CPU core busy, and
//! where they outnumber the cores, the OS scheduler's delays (milliseconds) reach the tail.
//! Measured on one H200 (`tests/data/mps/`, `h200-2026-12-02-c-*`): four guard clients at 25%
//! threads, MPS p99 1.2–1.3 ms on 16 cores and 2.7–3.9 ms on 4 (time-sliced 1.4–1.7 ms on
//! either). The reference files state no core count; their host's, [`MpsLaw::host_cpus`], is
//! fitted (four: three clients do not show it, four do). The planner assumes every client and
//! the MPS server have a core ([`Cpus::Enough`]). `docs/latency-model.md`, "MPS".

use serde::Serialize;

use super::Refusal;

/// The CPU cores the MPS clients and the MPS server share, as the law sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cpus {
    /// A core for every client and for the MPS server (the planner's assumption: each client is
    /// a pod that requests at least one CPU, the built-in default).
    Enough,
    /// This many cores for all of them (a calibration run's host).
    Host(u32),
}

/// The MPS law's six fitted parameters ([`MPS_LAW`]; [`super::fit`] is how they were chosen).
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
    /// The cores of the reference files' host (they state none): the [`Cpus`] of a calibration
    /// file without `cpus`.
    pub host_cpus: u32,
    /// Extra p99 per process (clients and the MPS server) beyond the host's cores, in ms: the
    /// OS scheduler's delay, a property of the host, not of the GPU.
    pub per_process_over_cpus_ms: f64,
}

/// The MPS law gpuplan predicts with: [`super::fit`] over the MPS halves of the vendored pairs
/// files, both harnesses (66 open-loop members; `docs/latency-model.md`, "MPS").
pub const MPS_LAW: MpsLaw = MpsLaw {
    alone: 1.2,
    rho_max: 0.9,
    exponent: 1.0,
    cap_exponent: 0.2,
    host_cpus: 4,
    per_process_over_cpus_ms: 2.0,
};

/// Calibrated range of [`MpsLaw`]: the replica's own load (measured up to 0.6).
pub const MPS_MAX_OWN_LOAD: f64 = 0.6;
/// Calibrated range of [`MpsLaw`]: all clients' loads together (measured up to 0.9).
pub const MPS_MAX_TOTAL_LOAD: f64 = 0.9;
/// Calibrated range of [`MpsLaw`]: co-running clients (measured with one to three).
pub const MPS_MAX_NEIGHBOURS: usize = 3;
/// Calibrated range of [`MpsLaw`]: the lowest thread cap measured (25%, four clients).
pub const MPS_MIN_THREAD_CAP: f64 = 0.25;

impl MpsLaw {
    /// The cores of a calibration run's host: those its file states, else the reference
    /// host's ([`MpsLaw::host_cpus`]).
    pub fn cpus_of(&self, stated: Option<u32>) -> Cpus {
        Cpus::Host(stated.unwrap_or(self.host_cpus))
    }

    /// Predicted p99 of an open-loop MPS client. `thread_cap`: the client's share of the SMs
    /// (1 when not capped); `cpus`: the cores the clients and the MPS server share.
    pub fn predict_p99_ms(
        &self,
        baseline_ms: f64,
        own_load: f64,
        neighbour_loads: &[f64],
        thread_cap: f64,
        cpus: Cpus,
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
        // The k + 1 clients and the MPS server, each busy on a core.
        let over = match cpus {
            Cpus::Enough => 0,
            Cpus::Host(n) => (k as u32 + 2).saturating_sub(n),
        };
        Ok(baseline_ms * self.alone * stretch * queue.powf(-self.exponent)
            + self.per_process_over_cpus_ms * f64::from(over))
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
    use super::{
        Cpus, MPS_CLOSED_LAW, MPS_LAW, MPS_MIN_THREAD_CAP, Refusal, TIME_SLICING_CLOSED_LAW, thread_cap,
    };

    #[test]
    fn the_device_plugin_rounds_the_thread_cap_down() {
        assert!((thread_cap(1) - 1.0).abs() < 1e-12);
        assert!((thread_cap(3) - 0.33).abs() < 1e-12);
        assert!((thread_cap(7) - 0.14).abs() < 1e-12);
    }

    #[test]
    fn mps_latency_grows_with_own_load_a_lower_cap_and_processes_beyond_the_cores() {
        let p = |own: f64, neighbours: &[f64], cap: f64, cpus: Cpus| {
            MPS_LAW.predict_p99_ms(4.0, own, neighbours, cap, cpus).expect("in range")
        };
        let alone = p(0.2, &[], 1.0, Cpus::Enough);
        assert!(alone < p(0.4, &[], 1.0, Cpus::Enough));
        assert!(alone < p(0.2, &[], 0.5, Cpus::Enough));
        // A neighbour's load stays out of the tail, and with a core for every process so does
        // its presence.
        assert!((p(0.2, &[0.2], 1.0, Cpus::Enough) - alone).abs() < 1e-9);
        assert!((p(0.2, &[0.5], 1.0, Cpus::Enough) - alone).abs() < 1e-9);
        // Four clients and the MPS server on four cores: one process too many.
        let three = p(0.1, &[0.1; 2], 1.0, Cpus::Host(4));
        let four = p(0.1, &[0.1; 3], 1.0, Cpus::Host(4));
        assert!((three - p(0.1, &[], 1.0, Cpus::Enough)).abs() < 1e-9, "three clients and the server fit");
        assert!((four - three - MPS_LAW.per_process_over_cpus_ms).abs() < 1e-9);
        assert!((p(0.1, &[0.1; 3], 1.0, Cpus::Host(16)) - three).abs() < 1e-9);
    }

    #[test]
    fn mps_refuses_outside_its_range_and_names_it() {
        assert_eq!(
            MPS_LAW.predict_p99_ms(1.0, 0.1, &[1.0], 1.0, Cpus::Enough),
            Err(Refusal::SaturatingNeighbour)
        );
        assert_eq!(
            MPS_LAW.predict_p99_ms(1.0, 0.1, &[0.1; 4], 0.2, Cpus::Enough),
            Err(Refusal::TooManyMpsClients(4))
        );
        assert!(matches!(
            MPS_LAW.predict_p99_ms(1.0, 0.65, &[], 1.0, Cpus::Enough),
            Err(Refusal::MpsOwnLoadAboveRange(_))
        ));
        assert!(matches!(
            MPS_LAW.predict_p99_ms(1.0, 0.5, &[0.5], 1.0, Cpus::Enough),
            Err(Refusal::MpsTotalLoadAboveRange(_))
        ));
        let low = MPS_MIN_THREAD_CAP / 2.0;
        assert_eq!(
            MPS_LAW.predict_p99_ms(1.0, 0.1, &[0.1], low, Cpus::Enough),
            Err(Refusal::ThreadCapBelowRange(low))
        );
        assert_eq!(MPS_LAW.predict_p99_ms(1.0, 0.1, &[], 0.0, Cpus::Enough), Err(Refusal::InvalidInput));
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
