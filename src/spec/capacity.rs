//! What one replica of a rate-demand model sustains on one device, from its measured points:
//! the one rule the planner, its bounds and the verifier use ([`RateDemand::capacity`]).
//!
//! In: the demand's points measured on one (GPU, profile) with one process, and its latency
//! limit (`admission_factor × slo`). Out: the replica's capacity in requests per second and the
//! points it comes from ([`Basis`]), or `None` when no measured rate meets the limit.
//!
//! The points of one batch size form a **sweep**: the p99 latency at several request rates (a
//! perf_analyzer concurrency or request-rate range, or several genai-perf runs). Sorted by rate,
//! the latency is interpolated piecewise linearly in the rate between neighbouring points; the
//! capacity is the rate at which that line first reaches the limit. Nothing is extrapolated:
//! if the lowest measured rate is already at or above the limit the sweep admits nothing, and if
//! no point reaches the limit the capacity is the highest measured rate, never more (a replica
//! is refused any load beyond its last measured point). A sweep of one point is today's
//! measured point: admitted when its latency is under the limit, for its own rate. Across batch
//! sizes the highest capacity wins (ties: the smaller batch).
//!
//! Guarantees: deterministic; never panics; a returned capacity is positive, finite, at most the
//! highest measured rate of its sweep and at least the highest measured rate whose point and
//! all points below it are under the limit.

use crate::spec::{MeasuredPoint, RateDemand};

/// Where a capacity comes from: (rate in req/s, p99 latency in ms) of measured points.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Basis {
    /// The highest measured rate, under the limit (or no limit): not extrapolated beyond it.
    LastPoint { rps: f64, latency_ms: f64 },
    /// Between two measured points, where the interpolated latency reaches the limit.
    Interpolated { below: (f64, f64), above: (f64, f64) },
}

/// What one replica sustains on one device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Capacity {
    /// Requests per second.
    pub rps: f64,
    pub batch_size: u32,
    /// Points in the sweep it comes from (1: a single measured point).
    pub points: usize,
    /// The latency limit (`admission_factor × slo`), if the demand has an SLO.
    pub limit_ms: Option<f64>,
    pub basis: Basis,
}

impl Capacity {
    /// One sentence for `explain` when the capacity comes from a sweep (two points or more):
    /// which points, the interpolation or the last point; `None` for a single point.
    pub fn sweep_reason(&self, gpu: &str, profile: &str) -> Option<String> {
        if self.points < 2 {
            return None;
        }
        let head = format!(
            "measured sweep on `{gpu}` `{profile}` (batch {}, {} points): {:.1} requests/s",
            self.batch_size, self.points, self.rps
        );
        let limit = self
            .limit_ms
            .map_or_else(|| "no latency objective".to_owned(), |l| format!("the {l:.1} ms limit"));
        Some(match self.basis {
            Basis::Interpolated { below, above } => format!(
                "{head}, where the p99 interpolated between {:.1} req/s ({:.1} ms) and {:.1} req/s ({:.1} ms) reaches {limit}",
                below.0, below.1, above.0, above.1
            ),
            Basis::LastPoint { rps, latency_ms } => format!(
                "{head}, its last point ({rps:.1} req/s, p99 {latency_ms:.1} ms, under {limit}): no load beyond the last measured point"
            ),
        })
    }
}

impl RateDemand {
    /// The capacity of one replica on `gpu_id` (catalog id) `profile` (`whole` or a MIG
    /// profile name), by the module's rule; `None` when no one-process point there meets the
    /// limit.
    pub fn capacity(&self, gpu_id: &str, profile: &str) -> Option<Capacity> {
        self.capacity_with(gpu_id, profile, 1)
    }

    /// [`RateDemand::capacity`] of the points measured with `processes` MPS processes on the
    /// device (measured-point MPS through DRA, `plan::rules::measured_mps`): the capacity of one
    /// process, by the same rule; the device sustains `processes ×` that.
    pub fn capacity_with(&self, gpu_id: &str, profile: &str, processes: u32) -> Option<Capacity> {
        let limit_ms = self.slo_ms.map(|slo| self.admission_factor * slo);
        let mut batches: Vec<u32> = self
            .points
            .iter()
            .filter(|p| on_device(p, gpu_id, profile, processes))
            .map(|p| p.batch_size)
            .collect();
        batches.sort_unstable();
        batches.dedup();
        let mut best: Option<Capacity> = None;
        for batch_size in batches {
            let mut sweep: Vec<(f64, f64)> = self
                .points
                .iter()
                .filter(|p| on_device(p, gpu_id, profile, processes) && p.batch_size == batch_size)
                .map(|p| (p.rps, p.latency_ms))
                .collect();
            sweep.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
            let Some(basis) = sweep_capacity(&sweep, self) else { continue };
            let rps = match basis {
                Basis::LastPoint { rps, .. } => rps,
                Basis::Interpolated { below, above } => {
                    crossing(below, above, limit_ms.unwrap_or(f64::INFINITY))
                }
            };
            let c = Capacity { rps, batch_size, points: sweep.len(), limit_ms, basis };
            if best.is_none_or(|b| c.rps > b.rps) {
                best = Some(c);
            }
        }
        best
    }
}

/// A point with a usable rate, measured on this device with `processes` processes.
fn on_device(p: &MeasuredPoint, gpu_id: &str, profile: &str, processes: u32) -> bool {
    p.gpu == gpu_id && p.profile == profile && p.processes == processes && p.rps.is_finite() && p.rps > 0.0
}

/// The sweep's basis (points sorted by rate): `None` when its lowest rate misses the limit.
fn sweep_capacity(sweep: &[(f64, f64)], demand: &RateDemand) -> Option<Basis> {
    let under = |p: &(f64, f64)| crate::spec::latency_admitted(p.1, demand.slo_ms, demand.admission_factor);
    let first = sweep.first()?;
    if !under(first) {
        return None;
    }
    for pair in sweep.windows(2) {
        if !under(&pair[1]) {
            return Some(Basis::Interpolated { below: pair[0], above: pair[1] });
        }
    }
    let &(rps, latency_ms) = sweep.last()?;
    Some(Basis::LastPoint { rps, latency_ms })
}

/// The rate between `below` (under the limit) and `above` (at or over it) where the line
/// through them reaches `limit`.
fn crossing(below: (f64, f64), above: (f64, f64), limit: f64) -> f64 {
    let rise = above.1 - below.1;
    if rise <= 0.0 || !limit.is_finite() {
        return below.0;
    }
    let t = ((limit - below.1) / rise).clamp(0.0, 1.0);
    below.0 + t * (above.0 - below.0)
}

#[cfg(test)]
mod tests {
    use super::{Basis, Capacity};
    use crate::spec::{MeasuredPoint, RateDemand};

    fn point(batch_size: u32, rps: f64, latency_ms: f64) -> MeasuredPoint {
        MeasuredPoint { gpu: "L4".into(), profile: "whole".into(), batch_size, processes: 1, rps, latency_ms }
    }

    fn demand(slo_ms: Option<f64>, points: Vec<MeasuredPoint>) -> RateDemand {
        RateDemand { rps: 100.0, slo_ms, admission_factor: 1.0, min_replicas: 1, points }
    }

    fn capacity(slo_ms: Option<f64>, points: Vec<MeasuredPoint>) -> Option<Capacity> {
        demand(slo_ms, points).capacity("L4", "whole")
    }

    #[test]
    fn interpolates_linearly_in_the_rate_between_the_points_around_the_limit() {
        let sweep = vec![point(1, 50.0, 10.0), point(1, 100.0, 20.0), point(1, 150.0, 60.0)];
        let c = capacity(Some(40.0), sweep).expect("admitted");
        assert!((c.rps - 125.0).abs() < 1e-9, "{c:?}");
        assert_eq!(c.basis, Basis::Interpolated { below: (100.0, 20.0), above: (150.0, 60.0) });
        assert_eq!(c.points, 3);
    }

    #[test]
    fn never_goes_beyond_the_last_point_nor_below_the_first() {
        let sweep = vec![point(1, 100.0, 20.0), point(1, 50.0, 10.0)];
        let c = capacity(Some(1000.0), sweep.clone()).expect("admitted");
        assert_eq!((c.rps, c.basis), (100.0, Basis::LastPoint { rps: 100.0, latency_ms: 20.0 }));
        assert_eq!(capacity(None, sweep.clone()).map(|c| c.rps), Some(100.0));
        assert_eq!(capacity(Some(10.0), sweep), None, "the lowest rate is at the limit");
    }

    #[test]
    fn a_single_point_is_admitted_for_its_own_rate_when_under_the_limit() {
        assert_eq!(capacity(Some(21.0), vec![point(1, 100.0, 20.0)]).map(|c| c.rps), Some(100.0));
        assert_eq!(capacity(Some(20.0), vec![point(1, 100.0, 20.0)]), None);
        let one = capacity(Some(21.0), vec![point(1, 100.0, 20.0)]).expect("admitted");
        assert_eq!(one.sweep_reason("L4", "whole"), None);
    }

    #[test]
    fn the_first_crossing_counts_even_if_a_later_point_dips_under_the_limit() {
        let sweep = vec![point(1, 10.0, 5.0), point(1, 20.0, 15.0), point(1, 30.0, 8.0)];
        let c = capacity(Some(10.0), sweep).expect("admitted");
        assert!((c.rps - 15.0).abs() < 1e-9, "{c:?}");
    }

    #[test]
    fn the_best_batch_size_wins_and_other_devices_and_processes_are_ignored() {
        let mut other = point(1, 900.0, 1.0);
        other.profile = "1g.10gb".into();
        let mut mps = point(1, 800.0, 1.0);
        mps.processes = 2;
        let sweep = vec![point(1, 50.0, 10.0), point(8, 200.0, 30.0), point(8, 100.0, 10.0), other, mps];
        let c = capacity(Some(20.0), sweep).expect("admitted");
        assert_eq!(c.batch_size, 8);
        assert!((c.rps - 150.0).abs() < 1e-9, "{c:?}");
        let why = c.sweep_reason("L4", "whole").expect("a sweep");
        assert!(
            why.contains("between 100.0 req/s (10.0 ms) and 200.0 req/s (30.0 ms) reaches the 20.0 ms limit"),
            "{why}"
        );
    }
}
