//! The figures of a plan for reports and benchmarks: GPUs and GPCs used, the distinct layouts,
//! and per rate-demand model the rate its replicas cover.
//!
//! In: the [`Spec`], the [`Catalog`] and a [`Plan`]. Out: [`Figures`]. This judges nothing:
//! whether the plan is sound is [`super::check`]'s job (the one verifier, with one
//! [`super::Violation`] type); MIG placements are judged by [`crate::catalog::layout`] there.
//!
//! Known limit: a [`Plan`] does not record which measured point (batch size) the planner chose
//! for a replica, so each replica is credited with the best admitted point of its device.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::catalog::layout::PlacedInstance;
use crate::catalog::{Catalog, GpuModel};
use crate::measurements::{WHOLE, best_admitted};
use crate::plan::{GpuMode, Plan};
use crate::spec::{Demand, Spec};

/// What a plan uses and serves.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    /// GPUs whose mode is not `Unused`.
    pub gpus_used: u32,
    /// Compute slices (GPCs) of occupied MIG instances, plus all of a used non-MIG GPU's.
    pub gpcs_used: u32,
    /// Layout (profiles joined by `+`, largest first; `whole`; `time-sliced`) → GPUs with it.
    pub layouts: BTreeMap<String, u32>,
    /// Rate-demand models, sorted by name.
    pub models: Vec<Coverage>,
}

/// How well one rate-demand model is served.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Coverage {
    pub model: String,
    pub required_rps: f64,
    /// Σ over replicas (not time-sliced) of the best admitted throughput on the replica's device.
    pub capacity_rps: f64,
    /// Device (profile or `whole`) → replicas on it.
    pub replicas: BTreeMap<String, u32>,
    /// The admitted points the capacity counts, as `explain` sentences.
    pub points: Vec<String>,
}

impl Figures {
    /// The layouts for a table cell: `4g.40gb+3g.40gb ×3, 7g.80gb ×1`, most frequent first.
    pub fn layouts_text(&self) -> String {
        let mut list: Vec<(&String, &u32)> = self.layouts.iter().collect();
        list.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        list.iter().map(|(l, n)| format!("{l} ×{n}")).collect::<Vec<_>>().join(", ")
    }
}

/// The figures of `plan` (see the module docs).
pub fn figures(spec: &Spec, catalog: &Catalog, plan: &Plan) -> Figures {
    let mut f = Figures::default();
    // Model → (GPU id, device) of each replica not time-sliced (a shared replica covers nothing:
    // its points were measured alone).
    let mut replicas: BTreeMap<&str, Vec<(&str, String)>> = BTreeMap::new();
    for pool_plan in &plan.pools {
        let Some(gpu) = catalog.get(&pool_plan.gpu) else { continue };
        let whole_slices = gpu.mig.as_ref().map_or(0, |m| u32::from(m.compute_slices));
        for g in pool_plan.nodes.iter().flat_map(|n| &n.gpus) {
            match &g.mode {
                GpuMode::Unused => continue,
                GpuMode::Whole => {
                    *f.layouts.entry(WHOLE.to_owned()).or_default() += 1;
                    f.gpcs_used += whole_slices;
                    for t in &g.tenants {
                        replicas.entry(&t.model).or_default().push((&gpu.id, WHOLE.to_owned()));
                    }
                }
                GpuMode::TimeSliced { .. } | GpuMode::Mps { .. } => {
                    *f.layouts.entry("time-sliced".to_owned()).or_default() += 1;
                    f.gpcs_used += whole_slices;
                }
                GpuMode::Mig { instances } => {
                    *f.layouts.entry(layout_key(gpu, instances)).or_default() += 1;
                    let mut occupied = BTreeSet::new();
                    for t in &g.tenants {
                        let Some(i) = t.instance_start.and_then(|s| instances.iter().find(|i| i.start == s))
                        else {
                            continue;
                        };
                        if occupied.insert(i.start) {
                            f.gpcs_used += gpu.profile(&i.profile).map_or(0, |p| u32::from(p.compute_slices));
                        }
                        replicas.entry(&t.model).or_default().push((&gpu.id, i.profile.clone()));
                    }
                }
            }
            f.gpus_used += 1;
        }
    }
    for model in &spec.models {
        let Demand::Rate(demand) = &model.demand else { continue };
        let best = best_admitted(&demand.points, demand.slo_ms, demand.admission_factor);
        let mut coverage =
            Coverage { model: model.name.clone(), required_rps: demand.rps, ..Coverage::default() };
        let mut points = BTreeSet::new();
        for (gpu_id, device) in replicas.get(model.name.as_str()).into_iter().flatten() {
            *coverage.replicas.entry(device.clone()).or_default() += 1;
            // The capacity of the planner's rule; a sweep explains itself, a single point as before.
            let Some(c) = demand.capacity(gpu_id, device) else { continue };
            coverage.capacity_rps += c.rps;
            match c.sweep_reason(gpu_id, device) {
                Some(why) => points.insert(why),
                None => best
                    .get(&((*gpu_id).to_owned(), device.clone()))
                    .is_some_and(|a| points.insert(a.reason())),
            };
        }
        coverage.points = points.into_iter().collect();
        f.models.push(coverage);
    }
    f
}

/// Profiles joined by `+`, most compute slices first (`mig-empty` for no instance).
fn layout_key(gpu: &GpuModel, instances: &[PlacedInstance]) -> String {
    let mut names: Vec<&PlacedInstance> = instances.iter().collect();
    let slices = |p: &PlacedInstance| gpu.profile(&p.profile).map_or(0, |m| m.compute_slices);
    names.sort_by(|a, b| slices(b).cmp(&slices(a)).then(a.profile.cmp(&b.profile)));
    let key = names.iter().map(|p| p.profile.as_str()).collect::<Vec<_>>().join("+");
    if key.is_empty() { "mig-empty".to_owned() } else { key }
}

#[cfg(test)]
mod tests {
    //! The figures of hand-made plans, and hand-made counterexamples for the one verifier
    //! ([`super::super::check`]) on plans with rate demands.
    use std::collections::{BTreeMap, BTreeSet};

    use super::figures;
    use crate::bench::parvagpu::rate_spec;
    use crate::catalog::migparted::{ALL_DISABLED, DEFAULT_DEVICE_PLUGIN_CONFIG};
    use crate::catalog::{Catalog, GpuModel, layout};
    use crate::measurements::best_admitted;
    use crate::plan::{
        CostFigures, DevicePluginConfig, GpuFigures, GpuMode, GpuPlan, MigConfig, MigConfigEntry, ModelPlan,
        NodePlan, Plan, PoolPlan, Quality, ReplicaGroup, Tenant,
    };
    use crate::spec::{Demand, MeasuredPoint, Pool, RateDemand, Spec};
    use crate::verify::{Kind, check};

    /// The kinds of the violations `check` finds.
    fn kinds(spec: &Spec, catalog: &Catalog, plan: &Plan) -> Vec<Kind> {
        let mut kinds: Vec<Kind> = check(spec, catalog, plan).into_iter().map(|v| v.kind).collect();
        kinds.dedup();
        kinds
    }

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
        let gpus = first_fit(gpu, reference_devices(spec, gpu));
        let (nodes, mig_configs, groups) = reference_nodes(pool, gpu, &gpus);
        let models = spec
            .models
            .iter()
            .map(|m| ModelPlan {
                name: m.name.clone(),
                groups: groups
                    .iter()
                    .filter(|((model, _), _)| *model == m.name)
                    .map(|((_, resource), (replicas, nodes))| ReplicaGroup {
                        resource: resource.clone(),
                        per_replica: 1,
                        replicas: *replicas,
                        pool: pool.name.clone(),
                        nodes: nodes.iter().cloned().collect(),
                        processes: 1,
                    })
                    .collect(),
                reasons: Vec::new(),
                slo_unverified: Vec::new(),
            })
            .collect();
        Plan {
            name: spec.name.clone(),
            pools: vec![PoolPlan { name: pool.name.clone(), gpu: gpu.id.clone(), autoscaled: true, nodes }],
            models,
            mig_configs,
            device_plugin_configs: BTreeMap::from([(
                DEFAULT_DEVICE_PLUGIN_CONFIG.to_owned(),
                DevicePluginConfig::default(),
            )]),
            quality: Quality {
                gpus: GpuFigures {
                    used: gpus.len() as u32,
                    lower_bound: 0,
                    model_lower_bound: 0,
                    one_per_replica: 0,
                    first_fit_decreasing: None,
                },
                cost: CostFigures {
                    used: None,
                    lower_bound: None,
                    model_lower_bound: None,
                    first_fit_decreasing: None,
                },
                proof: crate::plan::Proof::Unproven,
            },
            changes: None,
        }
    }

    /// The reference planner's devices, (model, profile) per replica: the best device per
    /// compute slice for whole replicas, the smallest that covers the remainder.
    fn reference_devices(spec: &Spec, gpu: &GpuModel) -> Vec<(String, String)> {
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
        wanted
    }

    /// First-fit decreasing (by compute slices) of the devices onto GPUs, by the one layout judge.
    fn first_fit(gpu: &GpuModel, mut wanted: Vec<(String, String)>) -> Vec<Vec<(String, String)>> {
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
        gpus
    }

    /// Replica groups of the reference plan: (model, resource) → (replicas, nodes).
    type Groups = BTreeMap<(String, String), (u32, BTreeSet<String>)>;

    /// The GPUs cut into nodes of the pool, with a mig config per node and the replica groups.
    fn reference_nodes(
        pool: &Pool,
        gpu: &GpuModel,
        gpus: &[Vec<(String, String)>],
    ) -> (Vec<NodePlan>, BTreeMap<String, MigConfig>, Groups) {
        let mut nodes = Vec::new();
        let mut mig_configs = BTreeMap::from([(ALL_DISABLED.to_owned(), MigConfig::disabled())]);
        let mut groups = Groups::new();
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
                        let group =
                            groups.entry((model.clone(), format!("nvidia.com/mig-{profile}"))).or_default();
                        group.0 += 1;
                        group.1.insert(name.clone());
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
                gpu_plans.push(GpuPlan {
                    index: index as u32,
                    uuid: None,
                    mode: GpuMode::Mig { instances },
                    tenants,
                });
            }
            mig_configs.insert(name.clone(), MigConfig { entries });
            nodes.push(NodePlan {
                name: name.clone(),
                mig_config: name,
                device_plugin_config: DEFAULT_DEVICE_PLUGIN_CONFIG.into(),
                must_drain: false,
                transition: None,
                gpus: gpu_plans,
            });
        }
        (nodes, mig_configs, groups)
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
        assert_eq!(check(&spec, &catalog, &plan), Vec::new());
        let f = figures(&spec, &catalog, &plan);
        // a: 3 × 3g (360 req/s); b: 3 × 1g (120 req/s; the 2g point is too slow, the MPS one ignored).
        assert_eq!(f.gpus_used, 2);
        assert_eq!(f.gpcs_used, 12);
        assert_eq!(f.models[0].capacity_rps, 360.0);
        assert_eq!(f.models[1].capacity_rps, 120.0);
        assert_eq!(f.layouts_text(), "3g.40gb+1g.10gb+1g.10gb+1g.10gb ×1, 3g.40gb+3g.40gb ×1");
        assert!(
            f.models[1].points[0].contains("admitted, 15 ms under the limit"),
            "{:?}",
            f.models[1].points
        );
    }

    #[test]
    fn finds_an_uncovered_rate_when_a_replica_is_missing() {
        let (catalog, spec, mut plan) = setup();
        let gpu = mig_gpu(&mut plan);
        gpu.tenants.pop().expect("a tenant");
        // The groups still claim the replica: the verifier finds them disagreeing with the GPUs, and
        // the figures (counted on the GPUs) show the rate no longer covered.
        assert_eq!(kinds(&spec, &catalog, &plan), vec![Kind::Replicas]);
        assert!(figures(&spec, &catalog, &plan).models.iter().any(|m| m.capacity_rps < m.required_rps));
    }

    #[test]
    fn finds_overlapping_and_misplaced_instances() {
        let (catalog, spec, mut plan) = setup();
        if let GpuMode::Mig { instances } = &mut mig_gpu(&mut plan).mode {
            instances[1].start = 2;
        }
        assert!(kinds(&spec, &catalog, &plan).contains(&Kind::InvalidLayout));
    }

    #[test]
    fn finds_two_hardware_replicas_on_one_instance() {
        let (catalog, spec, mut plan) = setup();
        let gpu = mig_gpu(&mut plan);
        let first = gpu.tenants[0].clone();
        gpu.tenants.push(first);
        assert!(
            kinds(&spec, &catalog, &plan).contains(&Kind::NodeSharing),
            "{:?}",
            check(&spec, &catalog, &plan)
        );
    }

    #[test]
    fn finds_a_mig_config_that_does_not_create_the_layout() {
        let (catalog, spec, mut plan) = setup();
        let name = plan.pools[0].nodes[0].mig_config.clone();
        let config = plan.mig_configs.get_mut(&name).expect("config");
        config.entries[0].mig_devices.insert("7g.80gb".into(), 1);
        assert!(kinds(&spec, &catalog, &plan).contains(&Kind::MigConfig));
    }

    #[test]
    fn finds_replicas_on_devices_without_an_admitted_point() {
        let (catalog, mut spec, plan) = setup();
        if let Demand::Rate(d) = &mut spec.models[0].demand {
            d.slo_ms = Some(50.0); // limit 22.5 ms: the 40 ms points no longer pass
        }
        assert!(kinds(&spec, &catalog, &plan).contains(&Kind::Rate));
        assert_eq!(figures(&spec, &catalog, &plan).models[0].capacity_rps, 0.0);
    }

    #[test]
    fn finds_hardware_models_on_time_sliced_resources() {
        let (catalog, spec, mut plan) = setup();
        plan.device_plugin_configs
            .get_mut(DEFAULT_DEVICE_PLUGIN_CONFIG)
            .expect("config")
            .time_slicing
            .insert("nvidia.com/mig-3g.40gb".into(), 2);
        let kinds = kinds(&spec, &catalog, &plan);
        assert!(kinds.contains(&Kind::Isolation) || kinds.contains(&Kind::DevicePluginConfig), "{kinds:?}");
    }

    #[test]
    fn finds_a_misreported_gpu_count() {
        let (catalog, spec, mut plan) = setup();
        plan.quality.gpus.used = 1;
        assert_eq!(kinds(&spec, &catalog, &plan), vec![Kind::Quality]);
    }

    /// The verifier on real data: the reference plan of every ParvaGPU scenario passes it.
    /// Reads the artifact vendored in `tests/data/parvagpu/`.
    #[test]
    fn accepts_reference_plans_of_every_parvagpu_scenario() {
        use crate::bench::parvagpu::{Dataset, Files, ImportOptions, bounds};
        use crate::diagnostics::Sources;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/parvagpu");
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
            assert_eq!(check(&spec, &catalog, &plan), Vec::new(), "{}", scenario.name);
            let f = figures(&spec, &catalog, &plan);
            assert_eq!(f.models.len(), scenario.models.len());
            assert!(f.models.iter().all(|m| m.capacity_rps >= m.required_rps));
            let lower = bounds(&spec, &catalog).expect("bounds").lower_bound;
            assert!(f.gpus_used >= lower, "{}: {} GPUs below the bound {lower}", scenario.name, f.gpus_used);
        }
    }
}
