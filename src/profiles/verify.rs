//! An independent check of a finished plan against the spec's measured points.
//!
//! In: the [`Spec`], the [`Catalog`] and a [`Plan`] from any planner. Out: a [`Verification`] —
//! GPUs and GPCs used, the distinct MIG layouts, per rate-demand model the rate its replicas
//! cover with the best admitted point of their device, and every problem found, as sentences.
//!
//! It shares no code with the planner: it reads only the plan's public data and re-derives
//! everything from the catalog's profile table and the measured points. It checks
//! - layout validity: every MIG instance exists on the pool's GPU, starts at an allowed start,
//!   stays inside the memory slices without overlapping another, counts stay under each
//!   profile's maximum and compute slices under the GPU's;
//! - realisability by the GPU Operator: the node's mig-parted config, applied as mig-parted does
//!   (entries in order, by device filter and index), produces exactly each GPU's instances and
//!   disables MIG on whole GPUs; a `hardware` model never lands on a time-sliced device or
//!   resource, and never shares a MIG instance or a GPU; each model's replica groups request the
//!   resources its replicas actually sit on;
//! - coverage and latency: every replica of a rate-demand model sits on a device with an admitted
//!   point (one process, `latency_ms < factor × slo_ms`), and the replicas together serve at
//!   least the demanded rate, each at its device's best admitted point.
//!
//! Known limit: a [`Plan`] does not record which measured point (batch size) the planner chose
//! for a replica, so the verifier credits each replica with the best admitted point of its
//! device — a plan is accepted when some admissible choice of points covers every rate.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::catalog::layout::PlacedInstance;
use crate::catalog::{Catalog, GpuModel};
use crate::plan::{GpuMode, MigConfig, MigConfigEntry, Plan};
use crate::spec::{Demand, Isolation, Spec};

use crate::measurements::{WHOLE, best_admitted, fmt_num};

/// The resource a whole GPU is requested with.
const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// What the verifier found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// GPUs whose mode is not `Unused`.
    pub gpus_used: u32,
    /// Compute slices (GPCs) of occupied MIG instances, plus all of a used non-MIG GPU's.
    pub gpcs_used: u32,
    /// Layout (profiles joined by `+`, largest first; `whole`; `time-sliced`) → GPUs with it.
    pub layouts: BTreeMap<String, u32>,
    /// Rate-demand models, sorted by name.
    pub models: Vec<Coverage>,
    /// Every violated rule, one lowercase sentence each.
    pub problems: Vec<String>,
}

/// How well one rate-demand model is served.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Coverage {
    pub model: String,
    pub required_rps: f64,
    /// Σ over replicas of the best admitted throughput on the replica's device.
    pub capacity_rps: f64,
    /// Device (profile or `whole`) → replicas on it.
    pub replicas: BTreeMap<String, u32>,
    /// The admitted points the capacity counts, as `explain` sentences.
    pub points: Vec<String>,
}

impl Verification {
    /// No rule is violated.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// The layouts for a table cell: `4g.40gb+3g.40gb ×3, 7g.80gb ×1`, most frequent first.
    pub fn layouts_text(&self) -> String {
        let mut list: Vec<(&String, &u32)> = self.layouts.iter().collect();
        list.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        list.iter().map(|(l, n)| format!("{l} ×{n}")).collect::<Vec<_>>().join(", ")
    }
}

/// Where one replica of a model runs.
struct Replica {
    gpu_id: String,
    /// Profile name, [`WHOLE`], or `None` for a time-sliced share.
    device: Option<String>,
    place: String,
}

/// Checks `plan` against `spec` and `catalog` (see the module docs for the rules).
pub fn verify(spec: &Spec, catalog: &Catalog, plan: &Plan) -> Verification {
    let mut v = Verification::default();
    let mut replicas: BTreeMap<String, Vec<Replica>> = BTreeMap::new();
    let isolation_of = |name: &str| spec.model(name).map(|m| m.isolation);
    for pool_plan in &plan.pools {
        let Some(pool) = spec.pool(&pool_plan.name) else {
            v.problems.push(format!("the plan uses pool `{}` that the spec does not have", pool_plan.name));
            continue;
        };
        let Some(gpu) = catalog.get(&pool.gpu) else {
            v.problems
                .push(format!("pool `{}` has GPU `{}` that the catalog does not know", pool.name, pool.gpu));
            continue;
        };
        if pool_plan.gpu != gpu.id {
            v.problems.push(format!(
                "the plan says pool `{}` has `{}` but it has `{}`",
                pool.name, pool_plan.gpu, gpu.id
            ));
        }
        let used_nodes =
            pool_plan.nodes.iter().filter(|n| n.gpus.iter().any(|g| g.mode != GpuMode::Unused)).count();
        if used_nodes > usize::try_from(pool.nodes.max_nodes()).unwrap_or(usize::MAX) {
            v.problems.push(format!(
                "pool `{}` uses {used_nodes} nodes but has at most {}",
                pool.name,
                pool.nodes.max_nodes()
            ));
        }
        let mut node_names = BTreeSet::new();
        for node in &pool_plan.nodes {
            if !node_names.insert(node.name.as_str()) {
                v.problems.push(format!("node `{}` appears twice in pool `{}`", node.name, pool.name));
            }
            let mig_config = plan.mig_configs.get(&node.mig_config);
            if mig_config.is_none() {
                v.problems.push(format!(
                    "node `{}` is labelled with mig config `{}` that the plan does not define",
                    node.name, node.mig_config
                ));
            }
            let sharing = plan.device_plugin_configs.get(&node.device_plugin_config);
            if sharing.is_none() {
                v.problems.push(format!(
                    "node `{}` is labelled with device-plugin config `{}` that the plan does not define",
                    node.name, node.device_plugin_config
                ));
            }
            let sliced =
                |resource: &str| sharing.and_then(|s| s.time_slicing.get(resource)).is_some_and(|&r| r > 1);
            let mut indices = BTreeSet::new();
            for g in &node.gpus {
                let place = format!("node `{}` GPU {}", node.name, g.index);
                if g.index >= pool.gpus_per_node || !indices.insert(g.index) {
                    v.problems
                        .push(format!("{place} is not a distinct GPU index below {}", pool.gpus_per_node));
                }
                if g.mode != GpuMode::Unused {
                    v.gpus_used += 1;
                }
                if let Some(config) = mig_config {
                    check_mig_config(config, gpu, g.index, &g.mode, &place, &mut v.problems);
                }
                let whole_slices = gpu.mig.as_ref().map_or(0, |m| u32::from(m.compute_slices));
                match &g.mode {
                    GpuMode::Unused => {
                        if !g.tenants.is_empty() {
                            v.problems.push(format!("{place} is unused but has tenants"));
                        }
                    }
                    GpuMode::Whole => {
                        *v.layouts.entry(WHOLE.to_owned()).or_default() += 1;
                        v.gpcs_used += whole_slices;
                        if g.tenants.len() > 1 {
                            v.problems
                                .push(format!("{place} is a whole GPU with {} tenants", g.tenants.len()));
                        }
                        for t in &g.tenants {
                            if t.instance_start.is_some() {
                                v.problems.push(format!(
                                    "{place} is a whole GPU but `{}` names a MIG instance",
                                    t.model
                                ));
                            }
                            if isolation_of(&t.model) != Some(Isolation::Shared) && sliced(GPU_RESOURCE) {
                                v.problems.push(format!(
                                    "{place}: `{}` needs an exclusive GPU but the node time-slices `{GPU_RESOURCE}`",
                                    t.model
                                ));
                            }
                            replicas.entry(t.model.clone()).or_default().push(Replica {
                                gpu_id: gpu.id.clone(),
                                device: Some(WHOLE.to_owned()),
                                place: place.clone(),
                            });
                        }
                    }
                    GpuMode::TimeSliced { replicas: slots } => {
                        *v.layouts.entry("time-sliced".to_owned()).or_default() += 1;
                        v.gpcs_used += whole_slices;
                        if g.tenants.len() > usize::try_from(*slots).unwrap_or(usize::MAX) {
                            v.problems.push(format!(
                                "{place} has {} tenants on {slots} time-slicing replicas",
                                g.tenants.len()
                            ));
                        }
                        for t in &g.tenants {
                            if isolation_of(&t.model) != Some(Isolation::Shared) {
                                v.problems.push(format!(
                                    "{place} is time-sliced but `{}` does not allow sharing",
                                    t.model
                                ));
                            }
                            replicas.entry(t.model.clone()).or_default().push(Replica {
                                gpu_id: gpu.id.clone(),
                                device: None,
                                place: place.clone(),
                            });
                        }
                    }
                    GpuMode::Mig { instances } => {
                        v.problems.extend(
                            check_layout(gpu, instances).into_iter().map(|p| format!("{place}: {p}")),
                        );
                        let mut names: Vec<&PlacedInstance> = instances.iter().collect();
                        names.sort_by(|a, b| {
                            let slices =
                                |p: &PlacedInstance| gpu.profile(&p.profile).map_or(0, |m| m.compute_slices);
                            slices(b).cmp(&slices(a)).then(a.profile.cmp(&b.profile))
                        });
                        let key = names.iter().map(|p| p.profile.as_str()).collect::<Vec<_>>().join("+");
                        *v.layouts
                            .entry(if key.is_empty() { "mig-empty".to_owned() } else { key })
                            .or_default() += 1;
                        let mut on_instance: BTreeMap<u8, Vec<&str>> = BTreeMap::new();
                        for t in &g.tenants {
                            let Some(instance) =
                                t.instance_start.and_then(|s| instances.iter().find(|i| i.start == s))
                            else {
                                v.problems
                                    .push(format!("{place}: `{}` is on no instance of this GPU", t.model));
                                continue;
                            };
                            on_instance.entry(instance.start).or_default().push(&t.model);
                            let resource = format!("nvidia.com/mig-{}", instance.profile.replace('+', "."));
                            let shared = isolation_of(&t.model) == Some(Isolation::Shared);
                            if !shared && sliced(&resource) {
                                v.problems.push(format!(
                                    "{place}: `{}` needs a whole instance but the node time-slices `{resource}`",
                                    t.model
                                ));
                            }
                            replicas.entry(t.model.clone()).or_default().push(Replica {
                                gpu_id: gpu.id.clone(),
                                device: Some(instance.profile.clone()),
                                place: format!("{place} instance `{}`@{}", instance.profile, instance.start),
                            });
                        }
                        for (start, tenants) in &on_instance {
                            let all_shared =
                                tenants.iter().all(|m| isolation_of(m) == Some(Isolation::Shared));
                            if tenants.len() > 1 && !all_shared {
                                v.problems.push(format!(
                                    "{place}: {} replicas share the instance at {start} without time-slicing allowed",
                                    tenants.len()
                                ));
                            }
                            if let Some(i) = instances.iter().find(|i| i.start == *start) {
                                v.gpcs_used +=
                                    gpu.profile(&i.profile).map_or(0, |p| u32::from(p.compute_slices));
                            }
                        }
                    }
                }
            }
        }
    }
    check_coverage(spec, plan, &replicas, &mut v);
    if plan.quality.gpus_used != v.gpus_used {
        v.problems
            .push(format!("the plan reports {} GPUs used but uses {}", plan.quality.gpus_used, v.gpus_used));
    }
    v
}

fn check_coverage(spec: &Spec, plan: &Plan, replicas: &BTreeMap<String, Vec<Replica>>, v: &mut Verification) {
    let none = Vec::new();
    for model in &spec.models {
        let Demand::Rate(demand) = &model.demand else { continue };
        let placed = replicas.get(&model.name).unwrap_or(&none);
        let best = best_admitted(&demand.points, demand.slo_ms, demand.admission_factor);
        let mut coverage =
            Coverage { model: model.name.clone(), required_rps: demand.rps, ..Coverage::default() };
        let mut points = BTreeSet::new();
        let mut by_resource: BTreeMap<String, u32> = BTreeMap::new();
        for r in placed {
            let Some(device) = &r.device else {
                v.problems.push(format!(
                    "a replica of `{}` on {} is time-sliced: its measurements were taken alone",
                    model.name, r.place
                ));
                continue;
            };
            *coverage.replicas.entry(device.clone()).or_default() += 1;
            let resource = if device == WHOLE {
                GPU_RESOURCE.to_owned()
            } else {
                format!("nvidia.com/mig-{}", device.replace('+', "."))
            };
            *by_resource.entry(resource).or_default() += 1;
            match best.get(&(r.gpu_id.clone(), device.clone())) {
                Some(a) => {
                    coverage.capacity_rps += a.point.rps;
                    points.insert(a.reason());
                }
                None => v.problems.push(format!(
                    "a replica of `{}` on {} has no admitted measured point for `{device}` (one process, latency under {})",
                    model.name,
                    r.place,
                    demand.slo_ms.map_or_else(|| "any limit".to_owned(), |s| format!("{} ms", fmt_num(s * demand.admission_factor)))
                )),
            }
        }
        coverage.points = points.into_iter().collect();
        let count = u32::try_from(placed.len()).unwrap_or(u32::MAX);
        if count < demand.min_replicas {
            v.problems.push(format!(
                "`{}` has {count} replicas, fewer than its minimum {}",
                model.name, demand.min_replicas
            ));
        }
        if coverage.capacity_rps < demand.rps * (1.0 - 1e-12) {
            v.problems.push(format!(
                "`{}` is served at {} req/s but needs {}",
                model.name,
                fmt_num(coverage.capacity_rps),
                fmt_num(demand.rps)
            ));
        }
        let grouped: BTreeMap<String, u32> =
            plan.models.iter().filter(|m| m.name == model.name).flat_map(|m| &m.groups).fold(
                BTreeMap::new(),
                |mut acc, g| {
                    *acc.entry(g.resource.clone()).or_default() += g.replicas * g.per_replica.max(1);
                    acc
                },
            );
        if model.isolation != Isolation::Shared && grouped != by_resource {
            v.problems.push(format!(
                "the replica groups of `{}` request {} but its replicas sit on {}",
                model.name,
                describe(&grouped),
                describe(&by_resource)
            ));
        }
        v.models.push(coverage);
    }
}

fn describe(map: &BTreeMap<String, u32>) -> String {
    if map.is_empty() {
        return "nothing".to_owned();
    }
    map.iter().map(|(r, n)| format!("{n} × `{r}`")).collect::<Vec<_>>().join(", ")
}

/// Layout validity from the catalog's profile table alone; returns the violated rules.
fn check_layout(gpu: &GpuModel, instances: &[PlacedInstance]) -> Vec<String> {
    let Some(mig) = &gpu.mig else {
        return vec![format!("`{}` has no MIG but the plan cuts it into instances", gpu.id)];
    };
    let mut problems = Vec::new();
    let mut owner: Vec<Option<&str>> = vec![None; usize::from(mig.memory_slices)];
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    let mut compute = 0u32;
    for instance in instances {
        let Some(profile) = mig.profiles.iter().find(|p| p.name == instance.profile) else {
            problems.push(format!("`{}` has no profile `{}`", gpu.id, instance.profile));
            continue;
        };
        *counts.entry(profile.name.as_str()).or_default() += 1;
        compute += u32::from(profile.compute_slices);
        if !profile.starts.contains(&instance.start) {
            problems.push(format!("`{}` may not start at memory slice {}", profile.name, instance.start));
        }
        let (start, end) =
            (usize::from(instance.start), usize::from(instance.start) + usize::from(profile.size));
        if end > owner.len() {
            problems.push(format!("`{}` at {start} runs past the last memory slice", profile.name));
            continue;
        }
        for slot in &mut owner[start..end] {
            match slot {
                Some(other) => problems.push(format!("`{}` at {start} overlaps `{other}`", profile.name)),
                None => *slot = Some(profile.name.as_str()),
            }
        }
    }
    for (name, count) in counts {
        let max = mig.profiles.iter().find(|p| p.name == name).map_or(0, |p| u32::from(p.max_count));
        if count > max {
            problems.push(format!("{count} × `{name}` exceeds its maximum of {max}"));
        }
    }
    if compute > u32::from(mig.compute_slices) {
        problems.push(format!(
            "the instances need {compute} compute slices but the GPU has {}",
            mig.compute_slices
        ));
    }
    problems.dedup();
    problems
}

/// The entry mig-parted leaves in force on GPU `index`: entries apply in order to every GPU
/// their device filter and device list match, so the last match wins.
fn applied_entry<'a>(config: &'a MigConfig, gpu: &GpuModel, index: u32) -> Option<&'a MigConfigEntry> {
    config.entries.iter().rfind(|e| {
        e.devices.as_ref().is_none_or(|d| d.contains(&index))
            && (e.device_filter.is_empty()
                || e.device_filter.iter().any(|f| gpu.pci_ids.iter().any(|p| p.eq_ignore_ascii_case(f))))
    })
}

fn check_mig_config(
    config: &MigConfig,
    gpu: &GpuModel,
    index: u32,
    mode: &GpuMode,
    place: &str,
    problems: &mut Vec<String>,
) {
    let entry = applied_entry(config, gpu, index);
    match mode {
        GpuMode::Unused => {}
        GpuMode::Whole | GpuMode::TimeSliced { .. } => {
            if gpu.is_mig_capable() && entry.is_none_or(|e| e.mig_enabled) {
                problems
                    .push(format!("{place} runs without MIG but its mig-parted config does not disable MIG"));
            }
        }
        GpuMode::Mig { instances } => {
            let mut wanted: BTreeMap<String, u32> = BTreeMap::new();
            for i in instances {
                *wanted.entry(i.profile.clone()).or_default() += 1;
            }
            match entry {
                Some(e) if e.mig_enabled => {
                    let given: BTreeMap<String, u32> =
                        e.mig_devices.iter().filter(|(_, n)| **n > 0).map(|(k, n)| (k.clone(), *n)).collect();
                    if given != wanted {
                        problems.push(format!(
                            "{place}: its mig-parted config creates {} but the plan places {}",
                            describe(&given),
                            describe(&wanted)
                        ));
                    }
                }
                _ => problems.push(format!("{place} needs MIG but its mig-parted config does not enable it")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::layout;
    use crate::plan::{
        DevicePluginConfig, GpuPlan, ModelPlan, NodePlan, PoolPlan, Quality, ReplicaGroup, Tenant,
    };
    use crate::profiles::parvagpu::rate_spec;
    use crate::spec::{MeasuredPoint, RateDemand};

    const GPU: &str = "A100-SXM4-80GB";

    fn point(profile: &str, processes: u32, rps: f64, latency_ms: f64) -> MeasuredPoint {
        MeasuredPoint { gpu: GPU.into(), profile: profile.into(), batch_size: 8, processes, rps, latency_ms }
    }

    fn demand(rps: f64, points: Vec<MeasuredPoint>) -> RateDemand {
        RateDemand { rps, slo_ms: Some(100.0), admission_factor: 0.45, min_replicas: 1, points }
    }

    /// Two models: `a` is best on 3g (120 req/s per instance), `b` on 1g; `b`'s 2g point is too slow.
    fn spec(catalog: &Catalog) -> Spec {
        let gpu = catalog.get(GPU).expect("catalog has the A100");
        rate_spec(
            "test",
            gpu,
            2,
            2,
            vec![
                (
                    "a".into(),
                    demand(300.0, vec![point("3g.40gb", 1, 120.0, 40.0), point("1g.10gb", 1, 30.0, 40.0)]),
                ),
                (
                    "b".into(),
                    demand(
                        100.0,
                        vec![
                            point("1g.10gb", 1, 40.0, 30.0),
                            point("2g.20gb", 1, 90.0, 60.0),
                            point("1g.10gb", 3, 80.0, 10.0),
                        ],
                    ),
                ),
            ],
        )
    }

    /// A deliberately simple planner for these tests only: per model the device with the most
    /// admitted throughput per compute slice, replicas to cover the rate, first-fit onto GPUs.
    fn reference_plan(spec: &Spec, catalog: &Catalog) -> Plan {
        let pool = &spec.pools[0];
        let gpu = catalog.get(&pool.gpu).expect("gpu");
        let mut wanted: Vec<(String, String)> = Vec::new();
        for model in &spec.models {
            let Demand::Rate(d) = &model.demand else { continue };
            let best = best_admitted(&d.points, d.slo_ms, d.admission_factor);
            let slices = |profile: &str| u32::from(gpu.profile(profile).expect("profile").compute_slices);
            let options: Vec<(String, f64)> =
                best.values().map(|a| (a.point.profile.clone(), a.point.rps)).collect();
            let (profile, rps) = options
                .iter()
                .max_by(|x, y| (x.1 / f64::from(slices(&x.0))).total_cmp(&(y.1 / f64::from(slices(&y.0)))))
                .expect("an admitted point");
            let full = (d.rps / rps).floor() as u32;
            for _ in 0..full {
                wanted.push((model.name.clone(), profile.clone()));
            }
            // The remainder on the smallest device that covers it.
            let rest = d.rps - f64::from(full) * rps;
            if rest > 1e-9 {
                let small = options
                    .iter()
                    .filter(|(_, r)| *r >= rest)
                    .min_by(|x, y| slices(&x.0).cmp(&slices(&y.0)).then(y.1.total_cmp(&x.1)))
                    .map_or_else(|| profile.clone(), |(p, _)| p.clone());
                wanted.push((model.name.clone(), small));
            }
        }
        wanted.sort_by_key(|(_, p)| std::cmp::Reverse(gpu.profile(p).expect("profile").compute_slices));
        let mut gpus: Vec<Vec<(String, String)>> = Vec::new();
        for item in wanted {
            let fits = |g: &Vec<(String, String)>| {
                let mut names: Vec<&str> = g.iter().map(|(_, p)| p.as_str()).collect();
                names.push(&item.1);
                layout::validate(gpu, &names).is_ok()
            };
            match gpus.iter_mut().find(|g| fits(g)) {
                Some(g) => g.push(item),
                None => gpus.push(vec![item]),
            }
        }
        let mut nodes = Vec::new();
        let mut mig_configs = BTreeMap::from([(
            "all-disabled".to_owned(),
            MigConfig {
                entries: vec![MigConfigEntry {
                    devices: None,
                    device_filter: Vec::new(),
                    mig_enabled: false,
                    mig_devices: BTreeMap::new(),
                }],
            },
        )]);
        let mut groups: BTreeMap<(String, String), u32> = BTreeMap::new();
        for (n, chunk) in gpus.chunks(pool.gpus_per_node as usize).enumerate() {
            let name = format!("{}-{n}", pool.name);
            let mut entries = Vec::new();
            let mut gpu_plans = Vec::new();
            for (index, items) in chunk.iter().enumerate() {
                let names: Vec<&str> = items.iter().map(|(_, p)| p.as_str()).collect();
                let instances = layout::validate(gpu, &names).expect("fits");
                let mut taken = BTreeSet::new();
                let tenants = items
                    .iter()
                    .map(|(model, profile)| {
                        let i = instances
                            .iter()
                            .find(|i| &i.profile == profile && taken.insert(i.start))
                            .expect("an instance per item");
                        *groups.entry((model.clone(), format!("nvidia.com/mig-{profile}"))).or_default() += 1;
                        Tenant { model: model.clone(), instance_start: Some(i.start) }
                    })
                    .collect();
                let mut mig_devices = BTreeMap::new();
                for p in &names {
                    *mig_devices.entry((*p).to_owned()).or_default() += 1;
                }
                entries.push(MigConfigEntry {
                    devices: Some(vec![index as u32]),
                    device_filter: Vec::new(),
                    mig_enabled: true,
                    mig_devices,
                });
                gpu_plans.push(GpuPlan { index: index as u32, mode: GpuMode::Mig { instances }, tenants });
            }
            mig_configs.insert(name.clone(), MigConfig { entries });
            nodes.push(NodePlan {
                name: name.clone(),
                mig_config: name,
                device_plugin_config: "default".into(),
                must_drain: false,
                gpus: gpu_plans,
            });
        }
        let models = spec
            .models
            .iter()
            .map(|m| ModelPlan {
                name: m.name.clone(),
                groups: groups
                    .iter()
                    .filter(|((model, _), _)| *model == m.name)
                    .map(|((_, resource), &replicas)| ReplicaGroup {
                        resource: resource.clone(),
                        per_replica: 1,
                        replicas,
                        pool: pool.name.clone(),
                        nodes: Vec::new(),
                    })
                    .collect(),
                reasons: Vec::new(),
            })
            .collect();
        Plan {
            name: spec.name.clone(),
            pools: vec![PoolPlan { name: pool.name.clone(), gpu: gpu.id.clone(), autoscaled: true, nodes }],
            models,
            mig_configs,
            device_plugin_configs: BTreeMap::from([(
                "default".to_owned(),
                DevicePluginConfig { time_slicing: BTreeMap::new() },
            )]),
            quality: Quality {
                gpus_used: gpus.len() as u32,
                lower_bound: 0,
                one_gpu_per_replica: 0,
                first_fit_decreasing: None,
                cost_per_hour: None,
                cost_lower_bound_per_hour: None,
                first_fit_decreasing_cost_per_hour: None,
            },
            changes: None,
        }
    }

    fn setup() -> (Catalog, Spec, Plan) {
        let catalog = Catalog::builtin();
        let spec = spec(&catalog);
        let plan = reference_plan(&spec, &catalog);
        (catalog, spec, plan)
    }

    fn mig_gpu(plan: &mut Plan) -> &mut GpuPlan {
        &mut plan.pools[0].nodes[0].gpus[0]
    }

    #[test]
    fn accepts_a_plan_that_covers_every_rate_with_admitted_points() {
        let (catalog, spec, plan) = setup();
        let v = verify(&spec, &catalog, &plan);
        assert_eq!(v.problems, Vec::<String>::new());
        // a: 3 × 3g (360 req/s); b: 3 × 1g (120 req/s; the 2g point is too slow, the MPS one ignored).
        assert_eq!(v.gpus_used, 2);
        assert_eq!(v.gpcs_used, 12);
        assert_eq!(v.models[0].capacity_rps, 360.0);
        assert_eq!(v.models[1].capacity_rps, 120.0);
        assert_eq!(v.layouts_text(), "3g.40gb+1g.10gb+1g.10gb+1g.10gb ×1, 3g.40gb+3g.40gb ×1");
        assert!(
            v.models[1].points[0].contains("admitted, 15 ms under the limit"),
            "{:?}",
            v.models[1].points
        );
    }

    #[test]
    fn finds_an_uncovered_rate_when_a_replica_is_missing() {
        let (catalog, spec, mut plan) = setup();
        let gpu = mig_gpu(&mut plan);
        let model = gpu.tenants.pop().expect("a tenant").model;
        let v = verify(&spec, &catalog, &plan);
        assert!(
            v.problems.iter().any(|p| p.contains(&format!("`{model}` is served at"))),
            "{:?}",
            v.problems
        );
        assert!(v.problems.iter().any(|p| p.contains("replica groups")), "{:?}", v.problems);
    }

    #[test]
    fn finds_overlapping_and_misplaced_instances() {
        let (catalog, spec, mut plan) = setup();
        if let GpuMode::Mig { instances } = &mut mig_gpu(&mut plan).mode {
            instances[1].start = 2;
        }
        let v = verify(&spec, &catalog, &plan);
        assert!(v.problems.iter().any(|p| p.contains("may not start at memory slice 2")), "{:?}", v.problems);
        assert!(v.problems.iter().any(|p| p.contains("overlaps")), "{:?}", v.problems);
    }

    #[test]
    fn finds_two_hardware_replicas_on_one_instance() {
        let (catalog, spec, mut plan) = setup();
        let gpu = mig_gpu(&mut plan);
        let first = gpu.tenants[0].clone();
        gpu.tenants.push(first);
        let v = verify(&spec, &catalog, &plan);
        assert!(v.problems.iter().any(|p| p.contains("share the instance")), "{:?}", v.problems);
    }

    #[test]
    fn finds_a_mig_config_that_does_not_create_the_layout() {
        let (catalog, spec, mut plan) = setup();
        let name = plan.pools[0].nodes[0].mig_config.clone();
        let config = plan.mig_configs.get_mut(&name).expect("config");
        config.entries[0].mig_devices.insert("7g.80gb".into(), 1);
        let v = verify(&spec, &catalog, &plan);
        assert!(v.problems.iter().any(|p| p.contains("its mig-parted config creates")), "{:?}", v.problems);
    }

    #[test]
    fn finds_replicas_on_devices_without_an_admitted_point() {
        let (catalog, mut spec, plan) = setup();
        if let Demand::Rate(d) = &mut spec.models[0].demand {
            d.slo_ms = Some(50.0); // limit 22.5 ms: the 40 ms points no longer pass
        }
        let v = verify(&spec, &catalog, &plan);
        assert!(
            v.problems.iter().any(|p| p.contains("has no admitted measured point for `3g.40gb`")),
            "{:?}",
            v.problems
        );
    }

    #[test]
    fn finds_hardware_models_on_time_sliced_resources() {
        let (catalog, spec, mut plan) = setup();
        plan.device_plugin_configs
            .get_mut("default")
            .expect("config")
            .time_slicing
            .insert("nvidia.com/mig-3g.40gb".into(), 2);
        let v = verify(&spec, &catalog, &plan);
        assert!(
            v.problems.iter().any(|p| p.contains("time-slices `nvidia.com/mig-3g.40gb`")),
            "{:?}",
            v.problems
        );
    }

    #[test]
    fn finds_a_misreported_gpu_count() {
        let (catalog, spec, mut plan) = setup();
        plan.quality.gpus_used = 1;
        let v = verify(&spec, &catalog, &plan);
        assert_eq!(v.problems, vec!["the plan reports 1 GPUs used but uses 2".to_owned()]);
    }

    /// The verifier on real data: the reference plan of every ParvaGPU scenario passes it.
    /// Reads `../shared/reference/papers/parvagpu` (skipped when absent, unless `CI` is set).
    #[test]
    fn accepts_reference_plans_of_every_parvagpu_scenario() {
        use crate::diagnostics::Sources;
        use crate::profiles::parvagpu::{Dataset, Files, ImportOptions, bounds};
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference/papers/parvagpu");
        if !dir.is_dir() {
            assert!(std::env::var_os("CI").is_none(), "CI needs the ParvaGPU artifact at {}", dir.display());
            return;
        }
        let texts = Files::paths()
            .into_iter()
            .map(|(key, path)| (key, std::fs::read_to_string(dir.join(path)).expect("readable")));
        let mut sources = Sources::new();
        let dataset = Dataset::load(&mut sources, &Files::from_texts(texts), ImportOptions::default())
            .unwrap_or_else(|d| panic!("{d:?}"));
        let catalog = Catalog::builtin();
        assert_eq!(dataset.scenarios.len(), 6);
        for scenario in &dataset.scenarios {
            let spec = dataset.spec(scenario, &catalog).expect("spec");
            let plan = reference_plan(&spec, &catalog);
            let v = verify(&spec, &catalog, &plan);
            assert_eq!(v.problems, Vec::<String>::new(), "{}", scenario.name);
            assert_eq!(v.models.len(), scenario.models.len());
            assert!(v.models.iter().all(|m| m.capacity_rps >= m.required_rps));
            let lower = bounds(&spec, &catalog).expect("bounds").lower_bound;
            assert!(v.gpus_used >= lower, "{}: {} GPUs below the bound {lower}", scenario.name, v.gpus_used);
        }
    }
}
