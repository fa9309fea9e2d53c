//! A MIG GPU's checks: its instance multiset (`catalog::layout::validate`, the one judge), the
//! plan's own placements on the slice grid, and each instance's tenants — one on an exclusive
//! instance, up to `k` on an instance whose resource is time-sliced `k` ways.

use std::collections::{BTreeMap, BTreeSet};

use super::{Checker, Device, EPS, Kind};
use crate::catalog::{MigProfile, layout};
use crate::plan::rules;
use crate::spec::Model;

/// One MIG instance of a planned GPU: its profile, its place in violations and its tenants.
struct Instance<'a> {
    device: Device<'a>,
    profile: &'a MigProfile,
    at: String,
    tenants: Vec<&'a Model>,
}

impl Instance<'_> {
    /// The instance's SMs as a share of the whole GPU's.
    fn sm_share(&self) -> f64 {
        self.device.gpu.sm_share(self.profile)
    }
}

impl<'a> Checker<'a> {
    pub(super) fn check_mig_gpu(
        &mut self,
        device: Device<'a>,
        instances: &'a [layout::PlacedInstance],
        sharing: &BTreeMap<String, u32>,
    ) {
        let (at, gpu, g) = (device.at(), device.gpu, device.plan);
        let Some(mig) = &gpu.mig else {
            self.push(Kind::InvalidLayout, at, format!("`{}` does not support MIG", gpu.id));
            return;
        };
        let names: Vec<&str> = instances.iter().map(|i| i.profile.as_str()).collect();
        if let Err(e) = layout::validate(gpu, &names) {
            self.push(Kind::InvalidLayout, at.clone(), format!("layout {names:?}: {e}"));
        }
        self.check_slice_grid(device, usize::from(mig.memory_slices), instances);
        for t in &g.tenants {
            let found = t.instance_start.and_then(|s| instances.iter().find(|i| i.start == s));
            if found.is_none() {
                self.push(
                    Kind::Tenant,
                    at.clone(),
                    format!("tenant `{}` names no instance (start {:?})", t.model, t.instance_start),
                );
            }
        }
        for inst in instances {
            let Some(profile) = gpu.profile(&inst.profile) else { continue };
            let tenants: Vec<&'a Model> = g
                .tenants
                .iter()
                .filter(|t| t.instance_start == Some(inst.start))
                .filter_map(|t| self.model(&t.model))
                .collect();
            let at = format!("{at} instance `{}`@{}", profile.name, inst.start);
            let instance = Instance { device, profile, at, tenants };
            match sharing.get(&profile.resource_name()).copied() {
                Some(k) => self.check_shared_instance(&instance, k),
                None => self.check_exclusive_instance(&instance),
            }
        }
    }

    /// The plan's own placements, checked on the slice grid independently of `validate`:
    /// known profiles at allowed starts, inside the grid, not overlapping.
    fn check_slice_grid(&mut self, device: Device<'a>, slices: usize, instances: &[layout::PlacedInstance]) {
        let (at, gpu) = (device.at(), device.gpu);
        let mut used = vec![false; slices];
        let mut starts = BTreeSet::new();
        for inst in instances {
            let Some(p) = gpu.profile(&inst.profile) else {
                self.push(
                    Kind::InvalidLayout,
                    at.clone(),
                    format!("`{}` has no profile `{}`", gpu.id, inst.profile),
                );
                continue;
            };
            if !starts.insert(inst.start) {
                self.push(
                    Kind::InvalidLayout,
                    at.clone(),
                    format!("two instances start at slice {}", inst.start),
                );
            }
            if !p.starts.contains(&inst.start) {
                self.push(
                    Kind::InvalidLayout,
                    at.clone(),
                    format!("`{}` may not start at slice {} (allowed {:?})", p.name, inst.start, p.starts),
                );
            }
            let range = usize::from(inst.start)..usize::from(inst.start) + usize::from(p.size);
            if range.end > used.len() {
                self.push(
                    Kind::InvalidLayout,
                    at.clone(),
                    format!("`{}` at slice {} leaves the GPU", p.name, inst.start),
                );
                continue;
            }
            if used[range.clone()].iter().any(|&u| u) {
                self.push(
                    Kind::InvalidLayout,
                    at.clone(),
                    format!("`{}` at slice {} overlaps another instance", p.name, inst.start),
                );
            }
            used[range].iter_mut().for_each(|u| *u = true);
        }
    }

    /// An instance whose resource is time-sliced `k` ways: at most `k` tenants, any `k` of
    /// them within the instance's compute, each within `1/k` of its memory.
    fn check_shared_instance(&mut self, instance: &Instance<'a>, k: u32) {
        let (p, inst_at, here) = (instance.profile, instance.at.as_str(), &instance.tenants);
        let headroom = self.spec.policy.memory_headroom;
        let efficiency = self.spec.policy.time_slicing_efficiency;
        let sm_share = instance.sm_share();
        if here.len() > k as usize {
            self.push(
                Kind::Tenant,
                inst_at.to_owned(),
                format!("{} tenants on {k} time-slicing replicas", here.len()),
            );
        }
        let computes: Vec<f64> = here.iter().map(|m| m.compute).collect();
        let total: f64 = computes.iter().sum();
        if !rules::shared_compute_fits(&computes, k, efficiency, sm_share) {
            self.push(
                Kind::Compute,
                inst_at.to_owned(),
                format!(
                    "tenants need compute {total:.3} > {:.3} (efficiency × SM share)",
                    efficiency * sm_share
                ),
            );
        }
        let resource = self.shared_name(&p.resource_name());
        for &m in here {
            let share = rules::slot_mib(rules::usable_mib(p.memory_mib, headroom), k);
            self.check_memory(inst_at, m, m.memory_mib, share, &format!("1/{k} of the instance"));
            self.check_shareable(inst_at, m);
            self.check_mig_allowed(inst_at, m);
            self.record(m, instance.device, resource.clone(), Some(k));
        }
    }

    /// An instance whose resource is not time-sliced: one tenant, within the instance's memory
    /// and SM share, and its latency alone on the instance.
    fn check_exclusive_instance(&mut self, instance: &Instance<'a>) {
        let (p, inst_at, here) = (instance.profile, instance.at.as_str(), &instance.tenants);
        let (gpu, base) = (instance.device.gpu, p.resource_name());
        let headroom = self.spec.policy.memory_headroom;
        let sm_share = instance.sm_share();
        if here.len() > 1 {
            self.push(
                Kind::NodeSharing,
                inst_at.to_owned(),
                format!(
                    "{} tenants share an instance whose resource `{base}` is not time-sliced",
                    here.len()
                ),
            );
        }
        for &m in here {
            self.check_memory(
                inst_at,
                m,
                m.memory_mib,
                rules::usable_mib(p.memory_mib, headroom),
                "the instance",
            );
            if m.compute > sm_share + EPS {
                self.push(
                    Kind::Compute,
                    inst_at.to_owned(),
                    format!(
                        "`{}` needs compute {} > the instance's SM share {sm_share:.3}",
                        m.name, m.compute
                    ),
                );
            }
            self.check_mig_allowed(inst_at, m);
            let p99 = m
                .latency
                .as_ref()
                .and_then(|l| rules::baseline_ms(l, gpu))
                .map(|b| b.and_then(|b| rules::mig_p99_ms(b, gpu.sms, p.sms, m.compute)));
            self.check_alone_latency(inst_at, m, p99);
            self.record(m, instance.device, base.clone(), None);
        }
    }
}
