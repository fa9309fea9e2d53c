//! Each model: its container, latency objective, the pools it may use, conflicting fields, and
//! whether one replica can run at all on them (memory, whole GPUs per node, spread).

use std::collections::BTreeMap;

use super::{CheckedPool, DEFAULT_COMPUTE, MAX_GPUS_PER_NODE, MAX_REPLICAS, Validator, ticks};
use crate::catalog::GpuModel;
use crate::diagnostics::{Diagnostic, Span, codes, nearest};
use crate::manifest::{self as raw, Manifest, ModelClass, Sp};
use crate::spec::{
    BaselineGpu, Container, Demand, Isolation, Latency, Model, Policy, Port, Spread, error, gpu_types_allow,
    names, pools_allow, usable_mib,
};

impl Validator<'_> {
    pub(super) fn models(
        &mut self,
        m: &Manifest,
        pools: &[CheckedPool],
        policy: &Policy,
    ) -> Option<Vec<Model>> {
        if m.models.is_empty()
            && let Some(span) = m.span.clone()
        {
            self.invalid(&span, "the manifest has no models", "no models", "add a model under `models`");
        }
        let defaults = m.defaults.clone().unwrap_or_default();
        let pool_names: Vec<&str> = m.inventory.pools.iter().map(|p| p.name.value.as_str()).collect();
        for p in defaults.pools.iter().flatten() {
            self.pool_ref(p, &pool_names);
        }
        for g in defaults.gpu_types.iter().flatten() {
            self.gpu(g);
        }
        if let Some(c) = &defaults.compute {
            self.fraction(c, "`defaults.compute`", 0.0, 1.0, false);
        }
        if let Some(p) = &defaults.priority {
            self.int_in(p, "`defaults.priority`", i128::from(i32::MIN), i128::from(i32::MAX));
        }
        for (k, _) in defaults.env.iter().flat_map(|e| e.0.iter()) {
            self.env_name(k);
        }
        let mut seen = BTreeMap::new();
        let mut out = Vec::new();
        let mut ok = true;
        for raw in &m.models {
            if self.dns_label(&raw.name, "the model name") {
                self.unique(&mut seen, &raw.name, "model");
            }
            match self.model(m, raw, &defaults, pools, &pool_names, policy) {
                Some(model) => out.push(model),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    pub(super) fn pool_ref(&mut self, p: &Sp<String>, pool_names: &[&str]) -> bool {
        if pool_names.contains(&p.value.as_str()) {
            return true;
        }
        let help = match nearest(&p.value, pool_names.iter().copied()) {
            Some(n) => format!("did you mean `{n}`?"),
            None => format!("the pools are {}", ticks(pool_names)),
        };
        self.push(error(
            codes::UNKNOWN_POOL,
            &p.span,
            format!("no pool is named `{}`", p.value),
            "unknown pool",
            help,
        ));
        false
    }

    pub(super) fn env_name(&mut self, k: &Sp<String>) {
        if let Some(d) = crate::spec::deployment::env_name_error(k) {
            self.push(d);
        }
    }

    pub(super) fn model(
        &mut self,
        m: &Manifest,
        raw: &raw::Model,
        defaults: &raw::ModelDefaults,
        pools: &[CheckedPool],
        pool_names: &[&str],
        policy: &Policy,
    ) -> Option<Model> {
        let name = &raw.name.value;
        let mut ok = self.image(raw);
        let memory_mib = self.memory(&raw.memory);
        let compute = self.compute(raw, defaults);
        let isolation =
            raw.isolation.as_ref().or(defaults.isolation.as_ref()).map_or(Isolation::Hardware, |i| i.value);
        let spread = raw.spread.as_ref().or(defaults.spread.as_ref()).map_or(Spread::None, |s| s.value);
        let llm = raw.class.as_ref().is_some_and(|c| c.value == ModelClass::Llm);
        let gpus =
            raw.gpus.as_ref().and_then(|g| self.int_in(g, "`gpus`", 1, MAX_GPUS_PER_NODE)).map(|g| g as u32);
        ok &= raw.gpus.is_none() || gpus.is_some();
        let priority = self.priority(raw, defaults);
        let ports = self.ports(name, raw);
        let env = self.env(raw, defaults);
        let latency = raw.latency.as_ref().and_then(|l| self.latency(l));
        ok &= raw.latency.is_none() || latency.is_some();
        let (model_pools, gpu_types) = self.pool_filters(raw, defaults, pool_names, &mut ok);
        // The pools the model may use: those its `pools` and `gpuTypes` name (all when empty).
        let eligible: Vec<&CheckedPool> = pools
            .iter()
            .filter(|p| pools_allow(&model_pools, &p.pool.name))
            .filter(|p| gpu_types_allow(&gpu_types, self.catalog, &p.pool.gpu))
            .collect();
        let model_span = raw.span.clone().unwrap_or_else(|| raw.name.span.clone());
        // Only judge eligibility when every pool and filter could be read.
        let pools_complete = pools.len() == m.inventory.pools.len() && ok;
        if pools_complete && eligible.is_empty() && !pools.is_empty() {
            self.no_eligible_pool(raw, name, &model_span);
            ok = false;
        }
        ok &= self.conflicts(raw, defaults, name, llm && isolation == Isolation::Shared, policy, &model_span);
        let demand = match &raw.demand {
            None => self.replicas(raw),
            Some(d) => self.demand(m, d, name, latency.as_ref(), &eligible, pools_complete),
        };
        let replicas_floor = demand.as_ref().map(|d| match d {
            Demand::Replicas(n) => *n,
            Demand::Rate(r) => r.min_replicas,
        });
        // Can one replica run at all, on the pools it may use? Not judged when a pool or filter
        // could not be read (an unknown GPU is one diagnostic, not a cascade).
        if let Some(mem) = memory_mib.filter(|_| pools_complete) {
            self.fits(raw, name, mem, gpus, &eligible, policy);
            self.headroom_near_misses(name, mem, &raw.memory.span, &eligible, policy.memory_headroom);
        }
        ok &= !pools_complete || gpus.is_none_or(|n| self.gpus_within_a_node(raw, name, n, &eligible));
        if let Some(floor) = replicas_floor.filter(|_| pools_complete && !eligible.is_empty()) {
            self.spread(raw, name, spread, floor, &eligible);
        }
        if isolation == Isolation::Hardware
            && gpus.is_none()
            && pools_complete
            && !eligible.is_empty()
            && eligible.iter().all(|p| !p.gpu.is_mig_capable())
        {
            self.hardware_without_mig(raw, name, &model_span);
        }
        self.baseline_gpu_unstated(raw, name, latency.as_ref(), gpus, &eligible, pools_complete);
        let (own, default) = (raw.deployment.as_ref(), defaults.deployment.as_ref());
        let deployment = crate::spec::deployment::validate(&mut self.diags, own, default, &ports, &raw.image);
        Some(Model {
            name: name.clone(),
            container: Container {
                image: raw.image.value.clone(),
                command: raw.command.iter().flatten().map(|s| s.value.clone()).collect(),
                args: raw.args.iter().flatten().map(|s| s.value.clone()).collect(),
            },
            env,
            ports,
            memory_mib: memory_mib?,
            compute: compute?,
            demand: demand?,
            isolation,
            gpus,
            latency,
            spread,
            pools: model_pools,
            gpu_types,
            priority: priority?,
            llm,
            allow_mps: raw.allow_mps.as_ref().is_none_or(|b| b.value),
            deployment,
            // The model's name: what a planner diagnostic about the model should underline.
            span: Some(raw.name.span.clone()),
        })
        .filter(|_| ok)
    }

    /// `compute`, the model's or the defaults'; a multi-GPU model takes its GPUs whole.
    fn compute(&mut self, raw: &raw::Model, defaults: &raw::ModelDefaults) -> Option<f64> {
        match raw.compute.as_ref().or(defaults.compute.as_ref()) {
            Some(c) => self.fraction(c, "`compute`", 0.0, 1.0, false),
            None => Some(if raw.gpus.is_some() { 1.0 } else { DEFAULT_COMPUTE }),
        }
    }

    /// `priority`, the model's or the defaults', as a Kubernetes priority (an `i32`); 0 by default.
    fn priority(&mut self, raw: &raw::Model, defaults: &raw::ModelDefaults) -> Option<i32> {
        match raw.priority.as_ref().or(defaults.priority.as_ref()) {
            Some(p) => {
                self.int_in(p, "`priority`", i128::from(i32::MIN), i128::from(i32::MAX)).map(|p| p as i32)
            }
            None => Some(0),
        }
    }

    /// The demand of a model without a `demand` block: `replicas`, 1 by default.
    fn replicas(&mut self, raw: &raw::Model) -> Option<Demand> {
        match &raw.replicas {
            Some(r) => self.int_in(r, "`replicas`", 1, MAX_REPLICAS).map(|r| Demand::Replicas(r as u32)),
            None => Some(Demand::Replicas(1)),
        }
    }

    /// The image is a reference without spaces; false (after a diagnostic) when it is not.
    fn image(&mut self, raw: &raw::Model) -> bool {
        if raw.image.value.trim().is_empty() || raw.image.value.chars().any(char::is_whitespace) {
            self.invalid(
                &raw.image.span,
                format!("image `{}` is not a container image reference", raw.image.value),
                "not an image",
                "write an image such as `nvcr.io/nim/nvidia/parakeet-1-1b-ctc-en-us:1.0.0`",
            );
            return false;
        }
        true
    }

    fn no_eligible_pool(&mut self, raw: &raw::Model, name: &str, model_span: &Span) {
        let span = raw
            .gpu_types
            .as_ref()
            .and_then(|l| l.first())
            .or(raw.pools.as_ref().and_then(|l| l.first()))
            .map_or(model_span.clone(), |s| s.span.clone());
        self.push(error(codes::NO_ELIGIBLE_POOL, &span, format!("model `{name}` may use no pool of the inventory"), "excludes every pool", "its `pools` and `gpuTypes` together exclude every pool; widen one of them or add a matching pool"));
    }

    /// The devices that the memory headroom alone keeps the model from (`spec::headroom`).
    fn headroom_near_misses(
        &mut self,
        name: &str,
        mem: u64,
        at: &Span,
        eligible: &[&CheckedPool],
        headroom: f64,
    ) {
        let gpu_models: Vec<&GpuModel> = eligible.iter().map(|p| &p.gpu).collect();
        let near = crate::spec::headroom::near_misses(name, mem, headroom, &gpu_models, at);
        self.diags.extend(near.into_iter().collect());
    }

    /// A multi-GPU replica's `gpus` fit on one node of a pool it may use; false (after a
    /// diagnostic) when they do not.
    fn gpus_within_a_node(
        &mut self,
        raw: &raw::Model,
        name: &str,
        n: u32,
        eligible: &[&CheckedPool],
    ) -> bool {
        let most = eligible.iter().map(|p| p.pool.gpus_per_node).max().unwrap_or(0);
        if eligible.is_empty() || n <= most {
            return true;
        }
        if let Some(g) = &raw.gpus {
            self.push(error(
                codes::GPUS_EXCEED_NODE,
                &g.span,
                format!(
                    "model `{name}` needs {n} GPUs on one node, but its pools have at most {most} per node"
                ),
                "more than a node has",
                "lower `gpus`, or add a pool with bigger nodes",
            ));
        }
        false
    }

    fn hardware_without_mig(&mut self, raw: &raw::Model, name: &str, model_span: &Span) {
        let span = raw.isolation.as_ref().map_or(model_span.clone(), |i| i.span.clone());
        self.push(
            Diagnostic::warning(
                codes::HARDWARE_ISOLATION_WHOLE_GPU,
                format!("model `{name}` asks for hardware isolation but none of its GPUs has MIG"),
            )
            .at(span, "each replica will take a whole GPU")
            .with_help("allow time-slicing with `isolation: shared`, or add a MIG-capable pool"),
        );
    }

    /// The container's ports: IANA names, unique names and numbers, known protocols.
    fn ports(&mut self, name: &str, raw: &raw::Model) -> Vec<Port> {
        let mut ports = Vec::new();
        let mut port_names = BTreeMap::new();
        let mut port_numbers: BTreeMap<String, Span> = BTreeMap::new();
        for p in raw.ports.iter().flatten() {
            match names::port_name(&p.name.value) {
                Ok(()) => self.unique(&mut port_names, &p.name, "port"),
                Err(rule) => self.push(error(
                    codes::INVALID_NAME,
                    &p.name.span,
                    format!("port name `{}` is not an IANA service name: {rule}", p.name.value),
                    "not a port name",
                    "use at most 15 lowercase letters, digits and `-`, such as `http` or `grpc`",
                )),
            }
            let number = self.int_in(&p.port, "the port", 1, 65535);
            if let Some(n) = number {
                let key = n.to_string();
                match port_numbers.get(&key) {
                    Some(first) => self.push(
                        Diagnostic::error(
                            codes::DUPLICATE_NAME,
                            format!("two ports of model `{name}` use the number {n}"),
                        )
                        .at(p.port.span.clone(), "second use")
                        .with_label(first.clone(), "first use")
                        .with_help("give every port of a container its own number"),
                    ),
                    None => {
                        port_numbers.insert(key, p.port.span.clone());
                    }
                }
            }
            let protocol = p.protocol.as_ref().map_or("TCP", |p| p.value.as_str());
            const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];
            if !PROTOCOLS.contains(&protocol)
                && let Some(pr) = &p.protocol
            {
                let help = match PROTOCOLS.iter().find(|x| x.eq_ignore_ascii_case(protocol)) {
                    Some(x) => format!("did you mean `{x}`? protocols are upper case"),
                    None => format!("the protocol is one of {}", ticks(PROTOCOLS)),
                };
                self.invalid(&pr.span, format!("unknown protocol `{protocol}`"), "not a protocol", help);
            }
            if let Some(n) = number {
                ports.push(Port {
                    name: p.name.value.clone(),
                    port: n as u16,
                    protocol: protocol.to_owned(),
                });
            }
        }
        ports
    }

    /// Environment: defaults first, the model's own values win per name.
    fn env(&mut self, raw: &raw::Model, defaults: &raw::ModelDefaults) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = Vec::new();
        for (k, v) in defaults.env.iter().flat_map(|e| e.0.iter()) {
            env.push((k.value.clone(), v.value.clone()));
        }
        for (k, v) in raw.env.iter().flat_map(|e| e.0.iter()) {
            self.env_name(k);
            match env.iter_mut().find(|(name, _)| *name == k.value) {
                Some(slot) => slot.1 = v.value.clone(),
                None => env.push((k.value.clone(), v.value.clone())),
            }
        }
        env
    }

    /// Warns when a single-GPU model's baseline does not say its GPU and the model may run on
    /// several GPU types: the baseline is then used unchanged on each.
    fn baseline_gpu_unstated(
        &mut self,
        raw: &raw::Model,
        name: &str,
        latency: Option<&Latency>,
        gpus: Option<u32>,
        eligible: &[&CheckedPool],
        pools_complete: bool,
    ) {
        let Some(span) = raw.latency.as_ref().and_then(|l| l.baseline.as_ref()).map(|b| b.span.clone())
        else {
            return;
        };
        if !pools_complete || gpus.is_some() || latency.is_none_or(|l| l.baseline_gpu.is_some()) {
            return;
        }
        let mut types: Vec<&str> = eligible.iter().map(|p| p.gpu.id.as_str()).collect();
        types.sort_unstable();
        types.dedup();
        if types.len() > 1 {
            self.push(
                Diagnostic::warning(
                    codes::LATENCY_BASELINE_GPU_UNSTATED,
                    format!(
                        "model `{name}` may run on {} but its latency baseline does not say which GPU it was measured on; it is used unchanged on each",
                        types.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ")
                    ),
                )
                .at(span, "measured on which GPU?")
                .with_help("add `baselineGpu: <the GPU you measured on>` to scale it by the catalog's throughput figures, or restrict the model with `gpuTypes`"),
            );
        }
    }

    /// The latency objective: `p99` and `baseline` parse, and the baseline is below `p99`.
    fn latency(&mut self, l: &raw::Latency) -> Option<Latency> {
        let p99 = self.duration(&l.p99);
        let baseline = match &l.baseline {
            Some(b) => Some(self.duration(b)?),
            None => None,
        };
        if let (Some(p), Some(b)) = (p99, baseline)
            && b >= p
        {
            if let Some(bs) = &l.baseline {
                self.invalid(&bs.span, format!("the baseline latency ({b} ms) is not below the objective `p99` ({p} ms)"), "not below p99", "the baseline is the latency on a whole, idle GPU; the objective must leave room above it");
            }
            return None;
        }
        let baseline_gpu = match &l.baseline_gpu {
            Some(g) => Some(
                self.gpu(g).map(|g| BaselineGpu { id: g.id.clone(), throughput: g.throughput.clone() })?,
            ),
            None => None,
        };
        Some(Latency { p99_ms: p99?, baseline_ms: baseline, baseline_gpu })
    }

    /// The model's `pools` and `gpuTypes`, checked, sorted and deduplicated; `ok` turns false when
    /// one does not exist.
    fn pool_filters(
        &mut self,
        raw: &raw::Model,
        defaults: &raw::ModelDefaults,
        pool_names: &[&str],
        ok: &mut bool,
    ) -> (Vec<String>, Vec<String>) {
        // Pools the model may use.
        let pool_filter = raw.pools.as_ref().or(defaults.pools.as_ref());
        if let Some(list) = &raw.pools {
            for p in list {
                *ok &= self.pool_ref(p, pool_names);
            }
        }
        let mut gpu_types = Vec::new();
        if let Some(list) = &raw.gpu_types {
            for g in list {
                match self.gpu(g) {
                    Some(gpu) => gpu_types.push(gpu.id.clone()),
                    None => *ok = false,
                }
            }
        } else if let Some(list) = &defaults.gpu_types {
            gpu_types =
                list.iter().filter_map(|g| self.catalog.get(&g.value).map(|g| g.id.clone())).collect();
        }
        let mut model_pools: Vec<String> =
            pool_filter.map(|l| l.iter().map(|p| p.value.clone()).collect()).unwrap_or_default();
        // Filters are sets: sorted and deduplicated so that their order never reaches the plan.
        model_pools.sort();
        model_pools.dedup();
        gpu_types.sort();
        gpu_types.dedup();
        (model_pools, gpu_types)
    }

    /// Fields that contradict each other or the policy; false when there is one.
    fn conflicts(
        &mut self,
        raw: &raw::Model,
        defaults: &raw::ModelDefaults,
        name: &str,
        llm_time_sliced: bool,
        policy: &Policy,
        model_span: &Span,
    ) -> bool {
        let mut ok = true;
        if let (Some(r), Some(d)) = (&raw.replicas, &raw.demand) {
            let span = d.span.clone().unwrap_or_else(|| d.rate.span.clone());
            self.push(
                Diagnostic::error(codes::CONFLICTING_FIELDS, format!("model `{name}` has both `replicas` and `demand`"))
                    .at(span, "`demand` here")
                    .with_label(r.span.clone(), "`replicas` here")
                    .with_help("give a fixed `replicas` count, or a `demand` that gpuplan sizes, not both (use `demand.minReplicas` for a floor)"),
            );
            ok = false;
        }
        if let (Some(g), Some(i)) = (&raw.gpus, &raw.isolation)
            && i.value == Isolation::Shared
        {
            self.push(
                Diagnostic::error(
                    codes::CONFLICTING_FIELDS,
                    format!(
                        "model `{name}` asks for whole GPUs (`gpus`) and time-slicing (`isolation: shared`)"
                    ),
                )
                .at(i.span.clone(), "`shared` here")
                .with_label(g.span.clone(), "`gpus` here")
                .with_help("a multi-GPU replica owns its GPUs: drop `isolation: shared`, or drop `gpus`"),
            );
            ok = false;
        }
        if llm_time_sliced && policy.llm_never_time_sliced {
            let span = raw
                .isolation
                .as_ref()
                .or(defaults.isolation.as_ref())
                .map_or(model_span.clone(), |i| i.span.clone());
            self.push(error(codes::POLICY_VIOLATION, &span, format!("model `{name}` is an LLM and may be time-sliced, which `policy.llmNeverTimeSliced` forbids"), "time-slicing allowed here", "use `isolation: hardware` or `dedicated`, or set `policy.llmNeverTimeSliced: false`"));
            ok = false;
        }
        ok
    }

    pub(super) fn fits(
        &mut self,
        raw: &raw::Model,
        name: &str,
        mem: u64,
        gpus: Option<u32>,
        eligible: &[&CheckedPool],
        policy: &Policy,
    ) {
        let usable = |p: &CheckedPool| -> u64 {
            let per_gpu = usable_mib(p.gpu.memory_mib, policy.memory_headroom).floor() as u64;
            match gpus {
                Some(n) => per_gpu * u64::from(n.min(p.pool.gpus_per_node)),
                None => per_gpu,
            }
        };
        let Some(best) = eligible.iter().max_by_key(|p| (usable(p), std::cmp::Reverse(p.pool.name.clone())))
        else {
            return;
        };
        let most = usable(best);
        if mem <= most {
            return;
        }
        let what = match gpus {
            Some(n) => format!("{n} × `{}`", best.gpu.id),
            None => format!("one `{}`", best.gpu.id),
        };
        let help = if gpus.is_none() {
            "give the model `gpus: 2` (or more) to spread one replica over several GPUs of a node, or add a pool with larger GPUs"
        } else {
            "raise `gpus`, or add a pool with larger GPUs"
        };
        self.push(
            error(
                codes::MODEL_FITS_NO_GPU,
                &raw.memory.span,
                format!("model `{name}` needs {mem} MiB per replica, more than any GPU it may use"),
                "too large",
                help,
            )
            .with_note(format!(
                "the most it can get is {most} MiB on {what} (pool `{}`, {}% memory headroom)",
                best.pool.name,
                (policy.memory_headroom * 100.0).round()
            )),
        );
    }

    pub(super) fn spread(
        &mut self,
        raw: &raw::Model,
        name: &str,
        spread: Spread,
        replicas: u32,
        eligible: &[&CheckedPool],
    ) {
        let (capacity, unit) = match spread {
            Spread::None => return,
            Spread::Node => {
                (eligible.iter().map(|p| u64::from(p.pool.nodes.max_nodes())).sum::<u64>(), "node")
            }
            Spread::Gpu => (
                eligible
                    .iter()
                    .map(|p| u64::from(p.pool.nodes.max_nodes()) * u64::from(p.pool.gpus_per_node))
                    .sum::<u64>(),
                "GPU",
            ),
        };
        if u64::from(replicas) <= capacity {
            return;
        }
        let span = raw
            .spread
            .as_ref()
            .map_or_else(|| raw.span.clone().unwrap_or_else(|| raw.name.span.clone()), |s| s.span.clone());
        let mut d = error(
            codes::SPREAD_EXCEEDS_CAPACITY,
            &span,
            format!(
                "model `{name}` spreads {replicas} replicas over distinct {unit}s, but its pools have only {capacity}"
            ),
            "cannot spread that far",
            format!("lower the replicas to {capacity}, use a weaker `spread`, or add {unit}s"),
        );
        if let Some(r) = &raw.replicas {
            d = d.with_label(r.span.clone(), "replicas here");
        }
        self.push(d);
    }
}
