//! A GPU's checks: its tenants, then by mode — unused, an exclusive whole GPU, a whole GPU shared
//! by time-slicing or MPS (MIG GPUs are `mig.rs`'s) — and the memory, isolation and latency rules
//! every kind of device uses, each the one definition in `plan::rules`.

use std::collections::BTreeMap;

use super::{Checker, Device, EPS, Kind, Placed};
use crate::plan::latency::Refusal;
use crate::plan::{GpuMode, rules};
use crate::spec::{Demand, Isolation, Model};

impl<'a> Checker<'a> {
    pub(super) fn check_gpu(&mut self, device: Device<'a>, sharing: &BTreeMap<String, u32>) {
        let (at, g) = (device.at(), device.plan);
        for t in &g.tenants {
            if self.model(&t.model).is_none() {
                self.push(Kind::Unknown, at.clone(), format!("tenant `{}` is no model of the spec", t.model));
            }
            if !matches!(g.mode, GpuMode::Mig { .. }) && t.instance_start.is_some() {
                self.push(
                    Kind::Tenant,
                    at.clone(),
                    format!("tenant `{}` names a MIG instance on a non-MIG GPU", t.model),
                );
            }
        }
        let models: Vec<&'a Model> = g.tenants.iter().filter_map(|t| self.model(&t.model)).collect();
        match &g.mode {
            GpuMode::Unused => {
                if !g.tenants.is_empty() {
                    self.push(Kind::Tenant, at, "an unused GPU has tenants");
                }
            }
            GpuMode::Whole => self.check_whole_gpu(device, &models),
            GpuMode::TimeSliced { replicas } | GpuMode::Mps { replicas } => {
                self.check_shared_gpu(device, *replicas, &models);
            }
            GpuMode::Mig { instances } => self.check_mig_gpu(device, instances, sharing),
        }
    }

    /// An exclusive whole GPU: one tenant, its memory (`memory / gpus` for a multi-GPU replica)
    /// and compute, and its latency alone on the GPU.
    fn check_whole_gpu(&mut self, device: Device<'a>, models: &[&'a Model]) {
        let (at, gpu, g) = (device.at(), device.gpu, device.plan);
        let headroom = self.spec.policy.memory_headroom;
        if g.tenants.len() > 1 {
            self.push(
                Kind::Tenant,
                at.clone(),
                format!("{} tenants on an exclusive whole GPU", g.tenants.len()),
            );
        }
        for &m in models {
            let per_gpu = rules::per_gpu_mib(m.memory_mib, m.gpus.unwrap_or(1));
            self.check_memory(&at, m, per_gpu, rules::usable_mib(gpu.memory_mib, headroom), "the GPU");
            if m.compute > 1.0 + EPS {
                self.push(Kind::Compute, at.clone(), format!("`{}` needs compute {} > 1", m.name, m.compute));
            }
            // Multi-GPU replicas have no latency model (the planner predicts none).
            let p99 = m
                .latency
                .as_ref()
                .and_then(|l| rules::baseline_ms(l, gpu))
                .filter(|_| m.gpus.unwrap_or(1) <= 1)
                .map(|b| b.and_then(|b| rules::whole_p99_ms(b, m.compute)));
            self.check_alone_latency(&at, m, p99);
            self.record(m, device, "nvidia.com/gpu".to_owned(), None);
        }
    }

    /// A whole GPU shared by time-slicing or MPS with `replicas` slots: the slot count, the
    /// tenants' memory (`1/k` each) and compute, and for MPS the thread cap and `allowMps`.
    fn check_shared_gpu(&mut self, device: Device<'a>, replicas: u32, models: &[&'a Model]) {
        let (at, gpu, g) = (device.at(), device.gpu, device.plan);
        let headroom = self.spec.policy.memory_headroom;
        let efficiency = self.spec.policy.time_slicing_efficiency;
        let (k, mps) = (replicas, matches!(g.mode, GpuMode::Mps { .. }));
        if k < 2 || k > self.spec.policy.max_time_slicing_replicas {
            self.push(
                Kind::NodeSharing,
                at.clone(),
                format!(
                    "time-slicing replicas {k} outside 2..={}",
                    self.spec.policy.max_time_slicing_replicas
                ),
            );
        }
        if g.tenants.len() > k as usize {
            self.push(
                Kind::Tenant,
                at.clone(),
                format!("{} tenants on {k} time-slicing replicas", g.tenants.len()),
            );
        }
        let share = rules::slot_mib(rules::usable_mib(gpu.memory_mib, headroom), k);
        let computes: Vec<f64> = models.iter().map(|m| m.compute).collect();
        let total: f64 = computes.iter().sum();
        if !rules::shared_compute_fits(&computes, k, efficiency, 1.0) {
            self.push(
                Kind::Compute,
                at.clone(),
                format!("tenants need compute {total:.3} > time-slicing efficiency {efficiency}"),
            );
        }
        if mps && !rules::mps_compute_fits(&computes, k, efficiency, 1.0) {
            self.push(
                Kind::Compute,
                at.clone(),
                format!(
                    "an MPS client needs more compute than its thread cap {:.2}",
                    rules::mps_thread_cap(k)
                ),
            );
        }
        let resource = self.shared_name("nvidia.com/gpu");
        for &m in models {
            self.check_memory(&at, m, m.memory_mib, share, &format!("1/{k} of the GPU"));
            self.check_shareable(&at, m);
            if mps && !m.allow_mps {
                self.push(
                    Kind::Isolation,
                    at.clone(),
                    format!("`{}` refuses MPS (`allowMps: false`)", m.name),
                );
            }
            self.record(m, device, resource.clone(), Some(k));
        }
    }

    pub(super) fn check_memory(&mut self, at: &str, m: &Model, need_mib: u64, capacity_mib: f64, what: &str) {
        if need_mib as f64 > capacity_mib + EPS {
            self.push(
                Kind::Memory,
                at.to_owned(),
                format!("`{}` needs {need_mib} MiB, {what} offers {capacity_mib:.0} MiB", m.name),
            );
        }
    }

    /// A replica's predicted p99 (the planner's latency model, [`rules`]) within its SLO.
    /// Rate models are judged by their measured points instead.
    /// A latency SLO holds when the planner's model predicts a p99 within it; a refusal of the
    /// model (outside its calibrated range) is a violation too, since the planner refuses it.
    pub(super) fn check_latency(&mut self, at: &str, m: &Model, predicted: Option<Result<f64, Refusal>>) {
        let (Some(l), Some(predicted), Demand::Replicas(_)) = (&m.latency, predicted, &m.demand) else {
            return;
        };
        match predicted {
            Ok(p99) if p99.is_nan() || p99 > l.p99_ms + EPS => self.push(
                Kind::Latency,
                at.to_owned(),
                format!("`{}` is predicted a p99 of {p99:.1} ms, above its {:.1} ms SLO", m.name, l.p99_ms),
            ),
            Ok(_) => {}
            Err(why) => self.push(
                Kind::Latency,
                at.to_owned(),
                format!("`{}`: the latency model refuses to predict: {why}", m.name),
            ),
        }
    }

    /// A replica alone on its device is judged by [`rules::alone_slo`]: a prediction above the
    /// SLO is a violation, a refusal of the model is not (nothing the plan could choose would
    /// change its latency; the plan reports the SLO unverified).
    pub(super) fn check_alone_latency(
        &mut self,
        at: &str,
        m: &Model,
        predicted: Option<Result<f64, Refusal>>,
    ) {
        let (Some(l), Some(predicted)) = (&m.latency, predicted) else { return };
        if let rules::AloneSlo::Missed(_) = rules::alone_slo(predicted.clone(), l.p99_ms) {
            self.check_latency(at, m, Some(predicted));
        }
    }

    pub(super) fn check_shareable(&mut self, at: &str, m: &Model) {
        if m.isolation != Isolation::Shared {
            self.push(
                Kind::Isolation,
                at.to_owned(),
                format!("`{}` asks for isolation `{:?}` but is time-sliced", m.name, m.isolation)
                    .to_lowercase(),
            );
        }
        if m.llm && self.spec.policy.llm_never_time_sliced {
            self.push(
                Kind::Isolation,
                at.to_owned(),
                format!("LLM `{}` is time-sliced against policy", m.name),
            );
        }
        if m.gpus.is_some() {
            self.push(Kind::Isolation, at.to_owned(), format!("multi-GPU model `{}` is time-sliced", m.name));
        }
    }

    pub(super) fn check_mig_allowed(&mut self, at: &str, m: &Model) {
        if m.isolation == Isolation::Dedicated {
            self.push(
                Kind::Isolation,
                at.to_owned(),
                format!("dedicated `{}` runs on a MIG instance", m.name),
            );
        }
        if m.gpus.is_some() {
            self.push(
                Kind::Isolation,
                at.to_owned(),
                format!("multi-GPU model `{}` runs on a MIG instance", m.name),
            );
        }
    }

    /// Records a tenant for the node- and model-level checks.
    pub(super) fn record(&mut self, m: &'a Model, device: Device<'a>, resource: String, shared: Option<u32>) {
        self.placed.push(Placed {
            model: &m.name,
            pool: &device.pool.name,
            node: &device.node.name,
            gpu: device.plan.index,
            resource,
            shared,
        });
    }
}
