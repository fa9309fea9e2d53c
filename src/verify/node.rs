//! A node's checks: its GPU count and indices, its device-plugin and mig-parted configs, and the
//! sharing the device plugin applies per node (one time-slicing count for `nvidia.com/gpu`, MPS
//! one mode per node, any `k` co-tenants of a shared resource together).

use std::collections::{BTreeMap, BTreeSet};

use super::{Checker, Device, Kind, node_at};
use crate::catalog::{GpuModel, migparted};
use crate::plan::{DevicePluginConfig, GpuMode, MigConfig, NodePlan, rules};
use crate::spec::{Model, Pool};

/// The sharing of a node whose device-plugin config is missing (reported once, then checked as
/// if nothing were shared).
static NO_SHARING: BTreeMap<String, u32> = BTreeMap::new();

impl<'a> Checker<'a> {
    pub(super) fn check_node(&mut self, pool: &'a Pool, gpu: &'a GpuModel, node: &'a NodePlan) {
        let at = node_at(&pool.name, &node.name);
        self.check_node_capacity(pool, node);
        let config = self.plan.device_plugin_configs.get(&node.device_plugin_config);
        if config.is_none() {
            self.push(
                Kind::DevicePluginConfig,
                at.clone(),
                format!("device-plugin config `{}` does not exist", node.device_plugin_config),
            );
        }
        let sharing = config.map_or(&NO_SHARING, DevicePluginConfig::shared);
        let mig_config = self.plan.mig_configs.get(&node.mig_config);
        if mig_config.is_none() {
            self.push(Kind::MigConfig, at, format!("mig config `{}` does not exist", node.mig_config));
        }
        self.check_mps_node(pool, node, config.is_some_and(|c| !c.mps.is_empty()));
        self.check_time_slicing_allowed(pool, node, config.is_some_and(|c| !c.time_slicing.is_empty()));
        self.check_whole_gpu_sharing(pool, node, sharing);

        let first_placed = self.placed.len();
        for g in &node.gpus {
            let device = Device { pool, gpu, node, plan: g };
            self.check_gpu(device, sharing);
            if let Some(config) = mig_config {
                self.check_mig_entry(device, config);
            }
        }
        self.check_any_k_cotenants(pool, gpu, node, sharing, first_placed);
    }

    /// No more GPUs than a node of the pool has, each index once and in range.
    fn check_node_capacity(&mut self, pool: &Pool, node: &NodePlan) {
        let at = node_at(&pool.name, &node.name);
        if node.gpus.len() > pool.gpus_per_node as usize {
            self.push(
                Kind::NodeCapacity,
                at.clone(),
                format!("{} GPUs planned, nodes have {}", node.gpus.len(), pool.gpus_per_node),
            );
        }
        let mut indices = BTreeSet::new();
        for g in &node.gpus {
            if g.index >= pool.gpus_per_node || !indices.insert(g.index) {
                self.push(
                    Kind::NodeCapacity,
                    at.clone(),
                    format!("gpu index {} is out of range or repeated", g.index),
                );
            }
        }
    }

    /// Node-level sharing of `nvidia.com/gpu`: the device plugin shares it per node, so a node
    /// has exclusive or shared whole GPUs, one replica count, and a config that says so.
    fn check_whole_gpu_sharing(&mut self, pool: &Pool, node: &NodePlan, sharing: &BTreeMap<String, u32>) {
        let at = node_at(&pool.name, &node.name);
        let exclusive = node.gpus.iter().any(|g| g.mode == GpuMode::Whole && !g.tenants.is_empty());
        let counts: BTreeSet<u32> = node
            .gpus
            .iter()
            .filter_map(|g| match g.mode {
                GpuMode::TimeSliced { replicas } | GpuMode::Mps { replicas } => Some(replicas),
                _ => None,
            })
            .collect();
        if exclusive && !counts.is_empty() {
            self.push(
                Kind::NodeSharing,
                at.clone(),
                "the node exposes both exclusive and time-sliced `nvidia.com/gpu`",
            );
        }
        if counts.len() > 1 {
            self.push(
                Kind::NodeSharing,
                at.clone(),
                format!("time-sliced GPUs use different replica counts {counts:?}; sharing is per node"),
            );
        }
        let whole_shared = sharing.get("nvidia.com/gpu").copied();
        if let Some(&k) = counts.iter().next()
            && whole_shared != Some(k)
        {
            self.push(
                Kind::DevicePluginConfig,
                at.clone(),
                format!(
                    "config `{}` must time-slice `nvidia.com/gpu` with {k} replicas, it has {whole_shared:?}",
                    node.device_plugin_config
                ),
            );
        }
        if exclusive && whole_shared.is_some() {
            self.push(
                Kind::DevicePluginConfig,
                at,
                format!(
                    "config `{}` time-slices `nvidia.com/gpu` but the node has exclusive whole GPUs",
                    node.device_plugin_config
                ),
            );
        }
    }

    /// MPS is one sharing mode per node, on whole GPUs only, where the pool allows it: a node
    /// whose config shares by MPS has no time-sliced GPU, nor a MIG GPU on the device plugin
    /// (which refuses MPS beside MIG; the DRA driver runs one MPS daemon per claim, so a `dra`
    /// node may hold MIG GPUs beside MPS ones), and its GPUs are MPS GPUs only if it does.
    fn check_mps_node(&mut self, pool: &Pool, node: &NodePlan, config_mps: bool) {
        let at = node_at(&pool.name, &node.name);
        let mps_gpus = node.gpus.iter().any(|g| matches!(g.mode, GpuMode::Mps { .. }));
        if mps_gpus && !pool.sharing.mps {
            self.push(Kind::NodeSharing, at.clone(), "MPS on a pool whose `sharing` does not list `mps`");
        }
        if mps_gpus != config_mps {
            self.push(
                Kind::DevicePluginConfig,
                at.clone(),
                format!(
                    "config `{}` {} MPS but the node's GPUs {}",
                    node.device_plugin_config,
                    if config_mps { "configures" } else { "does not configure" },
                    if mps_gpus { "are MPS clients" } else { "are not" }
                ),
            );
        }
        let mig_refused = pool.dra.is_none();
        if config_mps
            && node.gpus.iter().any(|g| {
                matches!(g.mode, GpuMode::TimeSliced { .. })
                    || (mig_refused && matches!(g.mode, GpuMode::Mig { .. }))
            })
        {
            self.push(
                Kind::NodeSharing,
                at,
                "an MPS node with time-sliced or MIG GPUs (MPS is one mode per node, on whole GPUs)",
            );
        }
    }

    /// Time-slicing only where the pool's `sharing` lists `timeSlicing`: on a pool allowing
    /// `mps` alone every shared node is an MPS node (a pool allowing both chooses per node).
    fn check_time_slicing_allowed(&mut self, pool: &Pool, node: &NodePlan, config_ts: bool) {
        let ts_gpus = node.gpus.iter().any(|g| matches!(g.mode, GpuMode::TimeSliced { .. }));
        if (ts_gpus || config_ts) && !pool.sharing.time_slicing {
            self.push(
                Kind::NodeSharing,
                node_at(&pool.name, &node.name),
                "time-slicing on a pool whose `sharing` does not list `timeSlicing`",
            );
        }
    }

    /// Under time-slicing the device plugin picks the device: any k tenants of one shared resource
    /// on the node may land together, so the k largest must fit.
    fn check_any_k_cotenants(
        &mut self,
        pool: &'a Pool,
        gpu: &'a GpuModel,
        node: &'a NodePlan,
        sharing: &BTreeMap<String, u32>,
        first_placed: usize,
    ) {
        let efficiency = self.spec.policy.time_slicing_efficiency;
        let mps = node.gpus.iter().any(|g| matches!(g.mode, GpuMode::Mps { .. }));
        let mut by_resource: BTreeMap<String, Vec<&'a Model>> = BTreeMap::new();
        // This node's tenants were recorded last, from `first_placed` on.
        for p in self.placed.iter().skip(first_placed).filter(|p| p.shared.is_some()) {
            if let Some(m) = self.model(p.model) {
                by_resource.entry(p.resource.clone()).or_default().push(m);
            }
        }
        for (resource, tenants) in by_resource {
            let base = resource.strip_suffix(".shared").unwrap_or(&resource);
            let Some(&k) = sharing.get(base) else { continue };
            let instance = if base == "nvidia.com/gpu" {
                None
            } else {
                match gpu.mig.as_ref().and_then(|m| m.profiles.iter().find(|p| p.resource_name() == base)) {
                    Some(p) => Some(p),
                    None => continue,
                }
            };
            let capacity = instance.map_or(1.0, |p| gpu.sm_share(p));
            let computes: Vec<f64> = tenants.iter().map(|m| m.compute).collect();
            // Latency with the largest k − 1 other tenants of the resource as neighbours (the
            // device plugin may put any of them next to this one), in the planner's model.
            for (i, m) in tenants.iter().enumerate() {
                let Some(b) = m.latency.as_ref().and_then(|l| rules::baseline_ms(l, gpu)) else { continue };
                let mut others: Vec<f64> =
                    computes.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, &c)| c).collect();
                others.sort_by(|x, y| y.total_cmp(x));
                others.truncate(k.saturating_sub(1) as usize);
                let p99 = b.and_then(|b| match instance {
                    None if mps => rules::mps_p99_ms(b, 1.0, m.compute, &others, k),
                    None => rules::time_sliced_p99_ms(b, m.compute, &others),
                    Some(p) => rules::mig_time_sliced_p99_ms(b, gpu.sms, p.sms, m.compute, &others),
                });
                self.check_latency(
                    &format!("{} resource `{resource}`", node_at(&pool.name, &node.name)),
                    m,
                    Some(p99),
                );
            }
            let mut sorted = computes.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            let top: f64 = sorted.iter().take(k as usize).sum();
            if !rules::shared_compute_fits(&computes, k, efficiency, capacity) {
                self.push(
                    Kind::Compute,
                    node_at(&pool.name, &node.name),
                    format!(
                        "any {k} tenants of `{resource}` may share one device: the largest need {top:.3} > {:.3}",
                        efficiency * capacity
                    ),
                );
            }
        }
    }

    /// The mig-parted config entry that applies to the GPU gives it exactly its planned layout
    /// (or leaves MIG off).
    fn check_mig_entry(&mut self, device: Device<'_>, config: &MigConfig) {
        let (gpu, node, g) = (device.gpu, device.node, device.plan);
        let at = device.at();
        let entry = migparted::deciding_entry(&config.entries, |e| {
            e.devices.as_ref().is_none_or(|d| d.contains(&g.index))
                && (e.device_filter.is_empty() || e.device_filter.iter().any(|f| gpu.matches_pci_id(f)))
        });
        let Some(entry) = entry else {
            self.push(
                Kind::MigConfig,
                at,
                format!("no entry of mig config `{}` applies to this GPU", node.mig_config),
            );
            return;
        };
        match &g.mode {
            GpuMode::Mig { instances } => {
                let mut want: BTreeMap<String, u32> = BTreeMap::new();
                for i in instances {
                    *want.entry(i.profile.clone()).or_default() += 1;
                }
                if !entry.mig_enabled || entry.mig_devices != want {
                    self.push(
                        Kind::MigConfig,
                        at,
                        format!(
                            "mig config `{}` gives {:?} (enabled {}), the GPU needs {want:?}",
                            node.mig_config, entry.mig_devices, entry.mig_enabled
                        ),
                    );
                }
            }
            _ => {
                if entry.mig_enabled {
                    self.push(
                        Kind::MigConfig,
                        at,
                        format!("mig config `{}` enables MIG on a GPU planned without MIG", node.mig_config),
                    );
                }
            }
        }
    }
}
