//! Rate demands and their measured points.

use super::{CheckedPool, DEFAULT_ADMISSION_FACTOR, MAX_REPLICAS, Validator};
use crate::diagnostics::{Diagnostic, codes};
use crate::manifest::{self as raw, Manifest};
use crate::spec::{Demand, Latency, MeasuredPoint, RateDemand, error, units};

impl Validator<'_> {
    pub(super) fn demand(
        &mut self,
        m: &Manifest,
        d: &raw::Demand,
        name: &str,
        latency: Option<&Latency>,
        eligible: &[&CheckedPool],
        pools_complete: bool,
    ) -> Option<Demand> {
        let rps = self.unit(&d.rate, units::rate_rps(&d.rate.value));
        let admission_factor = match &d.admission_factor {
            Some(a) => self.fraction(a, "`admissionFactor`", 0.0, 1.0, false),
            None => Some(DEFAULT_ADMISSION_FACTOR),
        };
        let min_replicas = match &d.min_replicas {
            Some(n) => self.int_in(n, "`minReplicas`", 1, MAX_REPLICAS).map(|n| n as u32),
            None => Some(1),
        };
        let mut points = Vec::new();
        let mut ok = true;
        for p in d.points.iter().flatten() {
            match self.point(p) {
                Some(point) => points.push(point),
                None => ok = false,
            }
        }
        if let Some(path) = &d.measurements {
            match m.measurements.get(&path.value) {
                // A loaded file always has points (`measurement-empty` otherwise); an empty one
                // failed to parse and its own diagnostics say why: no second, vaguer error here.
                Some(loaded) if loaded.is_empty() => ok = false,
                Some(loaded) => points.extend(loaded.iter().cloned()),
                None => {
                    self.push(error(
                        codes::MISSING_MEASUREMENTS,
                        &path.span,
                        format!("the measurements file `{}` was not loaded", path.value),
                        "not loaded",
                        "run gpuplan on the manifest file so that it reads the files models reference",
                    ));
                    ok = false;
                }
            }
        }
        let span = d.span.clone().unwrap_or_else(|| d.rate.span.clone());
        if ok && points.is_empty() {
            self.push(error(codes::MISSING_MEASUREMENTS, &span, format!("model `{name}` has a rate demand but no measured points"), "no measurements", "add `points:` (gpu, profile, rps, latency) or `measurements: file.csv`, or give `replicas` instead"));
            ok = false;
        } else if ok
            && pools_complete
            && !eligible.is_empty()
            && !points.iter().any(|p| eligible.iter().any(|e| e.pool.gpu == p.gpu))
        {
            self.push(error(
                codes::MISSING_MEASUREMENTS,
                &span,
                format!("none of the measured points of model `{name}` is on a GPU it may use"),
                "no usable measurements",
                "measure the model on a GPU type of its pools",
            ));
            ok = false;
        }
        if ok && latency.is_none() {
            // Without an objective every point is admitted; say so, it is rarely intended.
            self.push(
                Diagnostic::warning(
                    codes::MISSING_MEASUREMENTS,
                    format!("model `{name}` has a rate demand but no `latency.p99`"),
                )
                .at(span, "every measured point will be admitted")
                .with_help("add `latency: {p99: 300ms}` so that only points within the objective are used"),
            );
        }
        let demand = RateDemand {
            rps: rps?,
            slo_ms: latency.map(|l| l.p99_ms),
            admission_factor: admission_factor?,
            min_replicas: min_replicas?,
            points,
        };
        ok.then_some(Demand::Rate(demand))
    }

    pub(super) fn point(&mut self, p: &raw::Point) -> Option<MeasuredPoint> {
        let gpu = self.gpu(&p.gpu);
        if let Some(gpu) = gpu
            && p.profile.value != "whole"
            && gpu.profile(&p.profile.value).is_none()
        {
            self.unknown_profile(gpu, &p.profile);
            return None;
        }
        let batch_size = match &p.batch_size {
            Some(b) => self.int_in(b, "`batchSize`", 1, 65_536).map(|b| b as u32),
            None => Some(1),
        };
        let processes = match &p.processes {
            Some(b) => self.int_in(b, "`processes`", 1, 64).map(|b| b as u32),
            None => Some(1),
        };
        let rps = if p.rps.value > 0.0 && p.rps.value <= units::MAX_RATE_RPS {
            Some(p.rps.value)
        } else {
            self.invalid(
                &p.rps.span,
                format!("`rps` is {}, not a positive rate", p.rps.value),
                "not a rate",
                "give the requests per second one replica sustains, such as `12.5`",
            );
            None
        };
        let latency_ms = self.duration(&p.latency);
        Some(MeasuredPoint {
            gpu: gpu?.id.clone(),
            profile: p.profile.value.clone(),
            batch_size: batch_size?,
            processes: processes?,
            rps: rps?,
            latency_ms: latency_ms?,
        })
    }
}
