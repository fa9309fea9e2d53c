//! A model's checks, from the tenants recorded on the GPUs: whole replicas of multi-GPU models,
//! allowed pools and GPU types, the replica groups against the tenants and the nodes, the demand
//! (replicas, or a rate covered by admissible measured points) and the spread.

use std::collections::{BTreeMap, BTreeSet};

use super::{Checker, EPS, Kind, Placed};
use crate::catalog::MigProfile;
use crate::measurements::WHOLE;
use crate::plan::{GpuMode, GpuPlan, ModelPlan, NodePlan, ReplicaGroup, rules};
use crate::spec::{Demand, Model, RateDemand, Spread};

/// A model's tenants counted by where they sit (a tenant is one GPU of a replica).
#[derive(Default)]
struct Counts<'p> {
    /// (pool, resource) → tenants.
    by_resource: BTreeMap<(&'p str, &'p str), u32>,
    /// (pool, node) → tenants.
    per_node: BTreeMap<(&'p str, &'p str), u32>,
    /// (pool, node, gpu) → tenants.
    per_gpu: BTreeMap<(&'p str, &'p str, u32), u32>,
    /// (pool, node, resource) → tenants on time-sliced or MPS resources.
    per_shared: BTreeMap<(&'p str, &'p str, &'p str), u32>,
}

impl<'p> Counts<'p> {
    fn of(placed: &'p [Placed<'_>]) -> Self {
        let mut counts = Counts::default();
        for p in placed {
            *counts.by_resource.entry((p.pool, p.resource.as_str())).or_default() += 1;
            *counts.per_node.entry((p.pool, p.node)).or_default() += 1;
            *counts.per_gpu.entry((p.pool, p.node, p.gpu)).or_default() += 1;
            if p.shared.is_some() {
                *counts.per_shared.entry((p.pool, p.node, p.resource.as_str())).or_default() += 1;
            }
        }
        counts
    }
}

impl<'a> Checker<'a> {
    pub(super) fn check_models(&mut self) {
        for mp in &self.plan.models {
            if self.model(&mp.name).is_none() {
                self.push(Kind::Unknown, format!("model `{}`", mp.name), "the spec has no such model");
            }
        }
        let mut by_model: BTreeMap<&str, Vec<Placed<'a>>> = BTreeMap::new();
        for p in &self.placed {
            by_model.entry(p.model).or_default().push(p.clone());
        }
        for m in &self.spec.models {
            let placed = by_model.remove(m.name.as_str()).unwrap_or_default();
            self.check_model(m, &placed);
        }
    }

    fn check_model(&mut self, m: &'a Model, placed: &[Placed<'a>]) {
        let at = format!("model `{}`", m.name);
        let per = m.gpus.unwrap_or(1).max(1);
        let counts = Counts::of(placed);
        for (&(pool, node), &n) in &counts.per_node {
            if n % per != 0 {
                self.push(
                    Kind::Replicas,
                    at.clone(),
                    format!(
                        "{n} GPUs on node `{node}` of pool `{pool}` do not make whole replicas of {per} GPUs"
                    ),
                );
            }
        }
        for &(pool, _) in counts.by_resource.keys() {
            self.check_pool_allowed(m, pool);
        }
        let Some(mp) = self.plan.models.iter().find(|p| p.name == m.name) else {
            self.push(Kind::Replicas, at, "the plan does not list the model");
            return;
        };
        self.check_groups(m, mp, placed, &counts);
        let group_replicas: u32 = mp.groups.iter().map(|g| g.replicas).sum();
        match &m.demand {
            Demand::Replicas(want) => {
                let placed_replicas: u32 = counts.by_resource.values().sum::<u32>() / per;
                if placed_replicas != *want || group_replicas != *want {
                    self.push(
                        Kind::Replicas,
                        at,
                        format!("{want} replicas asked, {placed_replicas} placed on GPUs, {group_replicas} in groups"),
                    );
                }
            }
            Demand::Rate(rate) => self.check_rate(m, rate, mp, placed),
        }
        self.check_spread(m, placed, &counts);
    }

    /// The replica groups (the Deployments) against the tenants: the same replicas per pool and
    /// resource, each group's nodes exposing its resource, each tenant's node listed.
    fn check_groups(&mut self, m: &'a Model, mp: &'a ModelPlan, placed: &[Placed<'a>], counts: &Counts<'_>) {
        let at = format!("model `{}`", m.name);
        let per = m.gpus.unwrap_or(1).max(1);
        let mut grouped: BTreeMap<(&str, &str), u32> = BTreeMap::new();
        let mut group_nodes: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
        for group in &mp.groups {
            self.check_pool_allowed(m, &group.pool);
            if group.per_replica != per {
                self.push(
                    Kind::Replicas,
                    at.clone(),
                    format!(
                        "group `{}` requests {} per replica, the model needs {per}",
                        group.resource, group.per_replica
                    ),
                );
            }
            *grouped.entry((group.pool.as_str(), group.resource.as_str())).or_default() += group.replicas;
            group_nodes
                .entry((group.pool.as_str(), group.resource.as_str()))
                .or_default()
                .extend(group.nodes.iter().map(String::as_str));
            for node in &group.nodes {
                let exposed = self
                    .nodes
                    .get(&(group.pool.as_str(), node.as_str()))
                    .is_some_and(|n| self.node_exposes(&group.pool, n, &group.resource));
                if !exposed {
                    self.push(
                        Kind::GroupResource,
                        at.clone(),
                        format!("node `{node}` of pool `{}` exposes no `{}`", group.pool, group.resource),
                    );
                }
            }
        }
        let tenant_replicas: BTreeMap<(&str, &str), u32> =
            counts.by_resource.iter().map(|(k, v)| (*k, v / per)).collect();
        grouped.retain(|_, n| *n > 0);
        if tenant_replicas != grouped {
            self.push(
                Kind::Replicas,
                at.clone(),
                format!("replicas on the GPUs {tenant_replicas:?} differ from the groups {grouped:?}"),
            );
        }
        for p in placed {
            let listed = group_nodes.get(&(p.pool, p.resource.as_str())).is_some_and(|n| n.contains(p.node));
            if !listed {
                self.push(
                    Kind::GroupResource,
                    at.clone(),
                    format!(
                        "a replica on node `{}` uses `{}` but no group lists the node",
                        p.node, p.resource
                    ),
                );
            }
        }
    }

    /// A rate demand: enough replicas, each group's admissible measured point, the rate covered.
    fn check_rate(&mut self, m: &'a Model, rate: &RateDemand, mp: &'a ModelPlan, placed: &[Placed<'a>]) {
        let at = format!("model `{}`", m.name);
        let group_replicas: u32 = mp.groups.iter().map(|g| g.replicas).sum();
        if group_replicas < rate.min_replicas {
            self.push(
                Kind::Replicas,
                at.clone(),
                format!("{group_replicas} replicas, at least {} asked", rate.min_replicas),
            );
        }
        let mut covered = 0.0;
        // A time-sliced group covers nothing (no point was measured shared), also when
        // its resource keeps the exclusive name (`renameByDefault: false`).
        let shared: BTreeSet<(&str, &str)> =
            placed.iter().filter(|p| p.shared.is_some()).map(|p| (p.pool, p.resource.as_str())).collect();
        for group in &mp.groups {
            let rps = if shared.contains(&(group.pool.as_str(), group.resource.as_str())) {
                None
            } else {
                self.group_rps(m, group)
            };
            match rps {
                Some(rps) => covered += rps * f64::from(group.replicas),
                None => self.push(
                    Kind::Rate,
                    at.clone(),
                    format!(
                        "group `{}` in pool `{}` has no admissible measured point with {} process(es) per device",
                        group.resource, group.pool, group.processes
                    ),
                ),
            }
        }
        if covered + EPS * rate.rps.max(1.0) < rate.rps {
            self.push(Kind::Rate, at.clone(), format!("{covered:.1} requests/s covered, {} asked", rate.rps));
        }
    }

    /// `spread: gpu` (distinct GPUs, no two replicas on one shared resource of a node, nor on
    /// MIG resources the device plugin may serve from one GPU) and `spread: node`.
    fn check_spread(&mut self, m: &'a Model, placed: &[Placed<'a>], counts: &Counts<'_>) {
        let at = format!("model `{}`", m.name);
        let per = m.gpus.unwrap_or(1).max(1);
        match m.spread {
            Spread::None => {}
            Spread::Gpu => {
                for (&(pool, node, gpu), &n) in &counts.per_gpu {
                    if n > 1 {
                        self.push(
                            Kind::Spread,
                            at.clone(),
                            format!("{n} replicas on gpu {gpu} of node `{node}` in pool `{pool}`"),
                        );
                    }
                }
                for (&(pool, node, resource), &n) in &counts.per_shared {
                    if n > 1 {
                        self.push(
                            Kind::Spread,
                            at.clone(),
                            format!(
                                "{n} replicas on time-sliced `{resource}` of node `{node}` in pool `{pool}`: the device plugin may put them on one GPU"
                            ),
                        );
                    }
                }
                self.check_mig_spread(&at, placed);
            }
            Spread::Node => {
                for (&(pool, node), &n) in &counts.per_node {
                    if n / per > 1 {
                        self.push(
                            Kind::Spread,
                            at.clone(),
                            format!("{} replicas on node `{node}` of pool `{pool}`", n / per),
                        );
                    }
                }
            }
        }
    }

    /// `spread: gpu` on MIG: the device plugin picks which instance of a resource (and so which
    /// GPU) a pod gets, so two replicas on one node may share a GPU when some GPU of the node
    /// has two distinct instances, one of each replica's resource (two of it when equal).
    fn check_mig_spread(&mut self, at: &str, placed: &[Placed<'a>]) {
        let mut by_node: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
        for p in placed.iter().filter(|p| p.shared.is_none() && p.resource.starts_with("nvidia.com/mig-")) {
            by_node.entry((p.pool, p.node)).or_default().push(p.resource.as_str());
        }
        for ((pool, node), resources) in by_node {
            let gpu = self.pool_gpu(pool);
            let Some(node_plan) = self.nodes.get(&(pool, node)).copied() else { continue };
            let count = |g: &GpuPlan, r: &str| match &g.mode {
                GpuMode::Mig { instances } => instances
                    .iter()
                    .filter_map(|i| gpu.and_then(|gpu| gpu.profile(&i.profile)))
                    .filter(|p| p.resource_name() == r)
                    .count(),
                _ => 0,
            };
            for (i, a) in resources.iter().enumerate() {
                for b in &resources[i + 1..] {
                    let overlap = node_plan.gpus.iter().any(|g| {
                        if a == b { count(g, a) >= 2 } else { count(g, a) >= 1 && count(g, b) >= 1 }
                    });
                    if overlap {
                        self.push(
                            Kind::Spread,
                            at.to_owned(),
                            format!(
                                "replicas on `{a}` and `{b}` of node `{node}` in pool `{pool}`: the device plugin may put them on one GPU"
                            ),
                        );
                    }
                }
            }
        }
    }

    fn check_pool_allowed(&mut self, m: &Model, pool: &str) {
        let at = format!("model `{}`", m.name);
        if !m.allows_pool(pool) {
            self.push(
                Kind::AllowedPools,
                at.clone(),
                format!("placed in pool `{pool}`, allowed {:?}", m.pools),
            );
        }
        if !m.gpu_types.is_empty() {
            let allowed = self.pool_gpu(pool).is_some_and(|g| m.allows_gpu(self.catalog, &g.id));
            if !allowed {
                self.push(
                    Kind::AllowedPools,
                    at,
                    format!("pool `{pool}` has a GPU type outside {:?}", m.gpu_types),
                );
            }
        }
    }

    /// Whether some GPU of `node` exposes `resource` (as the device plugin would name it).
    fn node_exposes(&self, pool: &str, node: &NodePlan, resource: &str) -> bool {
        let Some(gpu) = self.pool_gpu(pool) else {
            return false;
        };
        let sharing = self.plan.device_plugin_configs.get(&node.device_plugin_config).map(|c| c.shared());
        let shared = |base: &str| sharing.is_some_and(|s| s.contains_key(base));
        let name = |base: &str| if shared(base) { self.shared_name(base) } else { base.to_owned() };
        node.gpus.iter().any(|g| match &g.mode {
            GpuMode::Unused => false,
            GpuMode::Whole | GpuMode::TimeSliced { .. } | GpuMode::Mps { .. } => {
                name("nvidia.com/gpu") == resource
            }
            GpuMode::Mig { instances } => instances
                .iter()
                .filter_map(|i| gpu.profile(&i.profile))
                .any(|p| name(&p.resource_name()) == resource),
        })
    }

    /// Requests/s one replica of a group sustains: the measured capacity
    /// ([`crate::spec::RateDemand::capacity_with`]) for the pool's GPU and the resource's
    /// profile, measured with the group's processes per device (their rps together). A whole
    /// GPU reads the points of `whole` and of the MIG profile spanning the GPU
    /// ([`rules::whole_gpu_point`]). Several processes need measured-point MPS on the pool
    /// ([`rules::measured_mps`]), at most `policy.maxTimeSlicingReplicas` of them, each within
    /// its share of the device memory. Time-sliced groups have none.
    fn group_rps(&self, m: &Model, group: &ReplicaGroup) -> Option<f64> {
        let Demand::Rate(rate) = &m.demand else { return None };
        let pool = self.spec.pools.iter().find(|p| p.name == group.pool)?;
        let gpu = self.pool_gpu(&group.pool)?;
        let (profile, mib) = if group.resource == "nvidia.com/gpu" {
            (WHOLE.to_owned(), gpu.memory_mib)
        } else {
            let p = gpu
                .mig
                .as_ref()?
                .profiles
                .iter()
                .find(|p: &&MigProfile| p.resource_name() == group.resource)?;
            (p.name.clone(), p.memory_mib)
        };
        let k = group.processes.max(1);
        let usable = rules::usable_mib(mib, self.spec.policy.memory_headroom);
        if k > rules::measured_mps_max(pool, m, &self.spec.policy)
            || (k > 1 && !rules::mps_process_fits(m.memory_mib as f64, usable, k))
        {
            return None;
        }
        let whole = profile == WHOLE;
        let names: BTreeSet<&str> = rate
            .points
            .iter()
            .map(|p| p.profile.as_str())
            .filter(|&n| if whole { rules::whole_gpu_point(gpu, n) } else { n == profile })
            .collect();
        names
            .into_iter()
            .filter_map(|n| rate.capacity_with(&gpu.id, n, k))
            .map(|c| c.rps * f64::from(k))
            .max_by(f64::total_cmp)
    }
}
