//! Builds a [`Spec`] from a raw [`Manifest`], collecting every problem.
//!
//! In: a structurally sound manifest (every value spanned) and the catalog. Out: the checked
//! spec and its warnings, or every error found. Checks, in file order: format version; names
//! (DNS-1123 and the other Kubernetes rules, uniqueness); units; ranges; catalog GPU ids and MIG
//! profile names (with the nearest id); cross references (pools, nodes, GPU types); conflicting
//! fields; whether each model can run at all on the pools it may use (memory, whole GPUs per
//! node, spread). Whether the whole demand fits together is the planner's question.

use std::collections::BTreeMap;

use super::names;
use super::units;
use super::*;
use crate::catalog::{Catalog, GpuModel};
use crate::diagnostics::{Diagnostic, Diagnostics, Span, codes, nearest};
use crate::manifest::{self as raw, API_VERSION, KIND, Manifest, ModelClass, Sp};

/// Default workload namespace.
pub const DEFAULT_NAMESPACE: &str = "default";
/// Default GPU Operator namespace.
pub const DEFAULT_OPERATOR_NAMESPACE: &str = "gpu-operator";
/// Default fraction of device memory kept free.
pub const DEFAULT_MEMORY_HEADROOM: f64 = 0.02;
/// Default cap on time-slicing replicas per device.
pub const DEFAULT_MAX_TIME_SLICING_REPLICAS: u32 = 4;
/// Default time-slicing efficiency (NVIDIA: 0.76 requests/s per GPU time-sliced vs 1.00 with MIG).
pub const DEFAULT_TIME_SLICING_EFFICIENCY: f64 = 0.76;
/// Default admission factor of measured points (ParvaGPU: latency < 0.45 × SLO).
pub const DEFAULT_ADMISSION_FACTOR: f64 = 0.45;
/// Default compute share of a model without `gpus`.
pub const DEFAULT_COMPUTE: f64 = 0.1;
/// Most replicas a model may ask for.
pub const MAX_REPLICAS: i128 = 100_000;
/// Most GPUs a node may have.
pub const MAX_GPUS_PER_NODE: i128 = 16;
/// Most nodes an autoscaled pool may have.
pub const MAX_POOL_NODES: i128 = 100_000;

/// Checks a manifest against the catalog. Returns the spec and any warnings, or every problem.
pub fn validate(manifest: &Manifest, catalog: &Catalog) -> Result<(Spec, Diagnostics), Diagnostics> {
    let mut v = Validator { catalog, diags: Diagnostics::new() };
    let spec = v.spec(manifest);
    let mut diags = v.diags;
    if diags.has_errors() {
        // A near miss of the memory headroom is advice about a plan; with errors there is none.
        diags.0.retain(|d| d.code != codes::MEMORY_HEADROOM_MARGIN);
    }
    diags.sort();
    match spec {
        Some(spec) if !diags.has_errors() => Ok((spec, diags)),
        _ => Err(diags),
    }
}

struct Validator<'c> {
    catalog: &'c Catalog,
    diags: Diagnostics,
}

fn error(
    code: crate::diagnostics::Code,
    span: &Span,
    message: impl Into<String>,
    label: &str,
    help: impl Into<String>,
) -> Diagnostic {
    Diagnostic::error(code, message).at(span.clone(), label).with_help(help)
}

fn ticks(names: &[&str]) -> String {
    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

impl<'c> Validator<'c> {
    fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn invalid(&mut self, span: &Span, message: impl Into<String>, label: &str, help: impl Into<String>) {
        self.push(error(codes::INVALID_VALUE, span, message, label, help));
    }

    fn dns_label(&mut self, name: &Sp<String>, what: &str) -> bool {
        match names::dns_label(&name.value) {
            Ok(()) => true,
            Err(rule) => {
                let suggestion = names::suggest_label(&name.value);
                let help = if suggestion.is_empty() || suggestion == name.value {
                    "use lowercase letters, digits and `-`, at most 63 characters".to_owned()
                } else {
                    format!("names like this become Kubernetes object names and labels; try `{suggestion}`")
                };
                self.push(error(
                    codes::INVALID_NAME,
                    &name.span,
                    format!("{what} `{}` is not a DNS-1123 label: {rule}", name.value),
                    "not a DNS-1123 label",
                    help,
                ));
                false
            }
        }
    }

    fn memory(&mut self, q: &Sp<String>) -> Option<u64> {
        self.unit(q, units::memory_mib(&q.value))
    }

    fn duration(&mut self, q: &Sp<String>) -> Option<f64> {
        self.unit(q, units::duration_ms(&q.value))
    }

    fn unit<T>(&mut self, q: &Sp<String>, result: Result<T, units::UnitError>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) if e.out_of_range => {
                self.push(error(codes::INVALID_VALUE, &q.span, e.message, "out of range", e.help));
                None
            }
            Err(e) => {
                self.push(error(codes::BAD_UNIT, &q.span, e.message, "bad quantity", e.help));
                None
            }
        }
    }

    /// An integer in `min..=max`, else a diagnostic naming the range.
    fn int_in(&mut self, n: &Sp<i128>, what: &str, min: i128, max: i128) -> Option<i128> {
        if (min..=max).contains(&n.value) {
            return Some(n.value);
        }
        let (message, help) = if n.value < min {
            (
                format!("{what} is {}, below the minimum of {min}", n.value),
                format!("give {what} at least {min}"),
            )
        } else {
            (
                format!("{what} is {}, above the maximum of {max}", n.value),
                format!("give {what} at most {max}"),
            )
        };
        self.invalid(&n.span, message, "out of range", help);
        None
    }

    fn fraction(&mut self, n: &Sp<f64>, what: &str, min: f64, max: f64, min_inclusive: bool) -> Option<f64> {
        let ok = n.value <= max && (n.value > min || (min_inclusive && n.value == min));
        if ok {
            return Some(n.value);
        }
        let bound = if min_inclusive {
            format!("from {min} to {max}")
        } else {
            format!("above {min} and at most {max}")
        };
        self.invalid(
            &n.span,
            format!("{what} is {}; it must be {bound}", n.value),
            "out of range",
            format!("give {what} a value {bound}"),
        );
        None
    }

    fn gpu(&mut self, id: &Sp<String>) -> Option<&'c GpuModel> {
        let catalog = self.catalog;
        catalog.get(&id.value).or_else(|| {
            let help = crate::catalog::suggestion_help(&catalog.suggest(&id.value));
            self.push(error(
                codes::UNKNOWN_GPU,
                &id.span,
                format!("unknown GPU `{}`", id.value),
                "not in the catalog",
                help,
            ));
            None
        })
    }

    fn spec(&mut self, m: &Manifest) -> Option<Spec> {
        if m.api_version.value != API_VERSION {
            self.push(error(
                codes::UNSUPPORTED_VERSION,
                &m.api_version.span,
                format!("unsupported `apiVersion` `{}`", m.api_version.value),
                "unknown version",
                format!("this gpuplan reads `apiVersion: {API_VERSION}`"),
            ));
        }
        if m.kind.value != KIND {
            self.push(error(
                codes::UNSUPPORTED_VERSION,
                &m.kind.span,
                format!("unsupported `kind` `{}`", m.kind.value),
                "unknown kind",
                format!("a gpuplan manifest has `kind: {KIND}`"),
            ));
        }
        self.dns_label(&m.metadata.name, "the plan name");
        let policy = self.policy(m.policy.as_ref());
        let cluster = self.cluster(m.cluster.as_ref());
        let pools = self.pools(m);
        let models = self.models(m, &pools, &policy);
        let mut pools: Vec<Pool> = pools.into_iter().map(|p| p.pool).collect();
        let mut models = models?;
        pools.sort_by(|a, b| a.name.cmp(&b.name));
        models.sort_by(|a, b| a.name.cmp(&b.name));
        let change_policy = super::change_policy::validate(m.change_policy.as_ref(), &mut self.diags);
        Some(Spec {
            name: m.metadata.name.value.clone(),
            cluster: cluster?,
            pools,
            models,
            policy,
            change_policy,
        })
    }

    fn policy(&mut self, p: Option<&raw::Policy>) -> Policy {
        let d = raw::Policy::default();
        let p = p.unwrap_or(&d);
        Policy {
            llm_never_time_sliced: p.llm_never_time_sliced.as_ref().is_none_or(|b| b.value),
            max_time_slicing_replicas: p
                .max_time_slicing_replicas
                .as_ref()
                .and_then(|n| self.int_in(n, "`maxTimeSlicingReplicas`", 1, 64))
                .map_or(DEFAULT_MAX_TIME_SLICING_REPLICAS, |n| n as u32),
            memory_headroom: p
                .memory_headroom
                .as_ref()
                .and_then(|n| self.fraction(n, "`memoryHeadroom`", 0.0, 0.5, true))
                .unwrap_or(DEFAULT_MEMORY_HEADROOM),
            time_slicing_efficiency: p
                .time_slicing_efficiency
                .as_ref()
                .and_then(|n| self.fraction(n, "`timeSlicingEfficiency`", 0.0, 1.0, false))
                .unwrap_or(DEFAULT_TIME_SLICING_EFFICIENCY),
        }
    }

    fn namespace(&mut self, ns: Option<&Sp<String>>, default: &str) -> String {
        match ns {
            Some(ns) => {
                self.dns_label(ns, "the namespace");
                ns.value.clone()
            }
            None => default.to_owned(),
        }
    }

    fn cluster(&mut self, c: Option<&raw::Cluster>) -> Option<Cluster> {
        let d = raw::Cluster::default();
        let c = c.unwrap_or(&d);
        let namespace = self.namespace(c.namespace.as_ref(), DEFAULT_NAMESPACE);
        let operator_namespace = self.namespace(c.operator_namespace.as_ref(), DEFAULT_OPERATOR_NAMESPACE);
        let ts = c.time_slicing.clone().unwrap_or_default();
        let out = c.output.clone().unwrap_or_default();
        let argocd = out.argocd.as_ref().map(|a| {
            self.non_empty(&a.repo_url, "`repoUrl`");
            self.non_empty(&a.path, "`path`");
            ArgoCd {
                repo_url: a.repo_url.value.clone(),
                path: a.path.value.clone(),
                target_revision: a
                    .target_revision
                    .as_ref()
                    .map_or_else(|| "HEAD".to_owned(), |r| r.value.clone()),
                namespace: self.namespace(a.namespace.as_ref(), "argocd"),
            }
        });
        let flux = out.flux.as_ref().map(|f| {
            self.dns_label(&f.source_name, "the Flux source name");
            self.non_empty(&f.path, "`path`");
            Flux {
                source_name: f.source_name.value.clone(),
                path: f.path.value.clone(),
                namespace: self.namespace(f.namespace.as_ref(), "flux-system"),
            }
        });
        Some(Cluster {
            namespace,
            operator_namespace,
            mig_strategy: c.mig_strategy.as_ref().map_or(MigStrategy::Mixed, |s| s.value),
            time_slicing: TimeSlicingOptions {
                rename_by_default: ts.rename_by_default.as_ref().is_none_or(|b| b.value),
                fail_requests_greater_than_one: ts
                    .fail_requests_greater_than_one
                    .as_ref()
                    .is_none_or(|b| b.value),
            },
            output: OutputOptions {
                cluster_policy_patch: out.cluster_policy_patch.as_ref().is_none_or(|b| b.value),
                helm_values: out.helm_values.as_ref().is_none_or(|b| b.value),
                argocd,
                flux,
                namespaces: out.namespaces.as_ref().is_none_or(|b| b.value),
            },
        })
    }

    fn non_empty(&mut self, s: &Sp<String>, what: &str) -> bool {
        if s.value.trim().is_empty() {
            self.invalid(&s.span, format!("{what} is empty"), "empty", format!("give {what} a value"));
            return false;
        }
        true
    }

    // --- pools ----------------------------------------------------------------------------------

    fn pools(&mut self, m: &Manifest) -> Vec<CheckedPool> {
        if m.inventory.pools.is_empty() {
            let span = m.inventory.span.clone().or_else(|| m.span.clone());
            if let Some(span) = span {
                self.invalid(
                    &span,
                    "the inventory has no pools",
                    "no pools",
                    "add a pool of GPU nodes under `inventory.pools`",
                );
            }
        }
        let mut seen: BTreeMap<String, Span> = BTreeMap::new();
        let mut nodes_seen: BTreeMap<String, Span> = BTreeMap::new();
        let mut out = Vec::new();
        for p in &m.inventory.pools {
            if self.dns_label(&p.name, "the pool name") {
                self.unique(&mut seen, &p.name, "pool");
            }
            let checked = self.pool(p, &mut nodes_seen);
            if let Some(c) = checked {
                out.push(c);
            }
        }
        out
    }

    fn unique(&mut self, seen: &mut BTreeMap<String, Span>, name: &Sp<String>, what: &str) {
        if let Some(first) = seen.get(&name.value) {
            let d =
                Diagnostic::error(codes::DUPLICATE_NAME, format!("two {what}s are named `{}`", name.value))
                    .at(name.span.clone(), "second use")
                    .with_label(first.clone(), "first use")
                    .with_help(format!("give every {what} its own name"));
            self.push(d);
        } else {
            seen.insert(name.value.clone(), name.span.clone());
        }
    }

    fn pool(&mut self, p: &raw::Pool, nodes_seen: &mut BTreeMap<String, Span>) -> Option<CheckedPool> {
        let gpu = self.gpu(&p.gpu);
        let gpus_per_node = self.int_in(&p.gpus_per_node, "`gpusPerNode`", 1, MAX_GPUS_PER_NODE);
        let nodes = match (&p.nodes, &p.count) {
            (Some(_), Some(count)) => {
                let count_span = match count {
                    raw::NodeCount::Fixed(n) => n.span.clone(),
                    raw::NodeCount::Range(r) => r.span.clone().unwrap_or_else(|| r.max.span.clone()),
                };
                let mut d = Diagnostic::error(
                    codes::CONFLICTING_FIELDS,
                    format!("pool `{}` has both `nodes` and `count`", p.name.value),
                )
                .at(count_span, "`count` here")
                .with_help(
                    "name the nodes of an existing pool, or give the count of an autoscaled one, not both",
                );
                if let Some(first) = p.nodes.as_ref().and_then(|n| n.first()) {
                    d = d.with_label(first.span.clone(), "`nodes` here");
                }
                self.push(d);
                None
            }
            (None, None) => {
                let span = p.span.clone().unwrap_or_else(|| p.name.span.clone());
                self.push(error(
                    codes::MISSING_FIELD,
                    &span,
                    format!("pool `{}` has neither `nodes` nor `count`", p.name.value),
                    "no nodes",
                    "add `nodes: [node-name, ...]` for existing nodes, or `count: {min: 0, max: 4}` for an autoscaled pool",
                ));
                None
            }
            (Some(names), None) => {
                if names.is_empty() {
                    self.invalid(
                        &p.name.span,
                        format!("pool `{}` has an empty `nodes` list", p.name.value),
                        "no nodes",
                        "name at least one node",
                    );
                }
                for n in names {
                    match names::dns_subdomain(&n.value) {
                        Ok(()) => self.unique(nodes_seen, n, "node"),
                        Err(rule) => self.push(error(
                            codes::INVALID_NAME,
                            &n.span,
                            format!("node name `{}` is not a DNS-1123 subdomain: {rule}", n.value),
                            "not a node name",
                            "write the node's name as `kubectl get nodes` shows it",
                        )),
                    }
                }
                Some(Nodes::Named(names.iter().map(|n| n.value.clone()).collect()))
            }
            (None, Some(raw::NodeCount::Fixed(n))) => self
                .int_in(n, "`count`", 1, MAX_POOL_NODES)
                .map(|n| Nodes::Autoscaled { min: n as u32, max: n as u32 }),
            (None, Some(raw::NodeCount::Range(r))) => {
                let max = self.int_in(&r.max, "`count.max`", 1, MAX_POOL_NODES);
                let min = match &r.min {
                    Some(min) => self.int_in(min, "`count.min`", 0, MAX_POOL_NODES),
                    None => Some(0),
                };
                match (min, max) {
                    (Some(min), Some(max)) if min > max => {
                        let span = r.min.as_ref().map_or_else(|| r.max.span.clone(), |m| m.span.clone());
                        self.invalid(
                            &span,
                            format!("`count.min` ({min}) is above `count.max` ({max})"),
                            "above max",
                            "make `min` at most `max`",
                        );
                        None
                    }
                    (Some(min), Some(max)) => Some(Nodes::Autoscaled { min: min as u32, max: max as u32 }),
                    _ => None,
                }
            }
        };
        let mut node_selector = BTreeMap::new();
        for (k, v) in p.node_selector.iter().flat_map(|m| m.0.iter()) {
            if let Err(rule) = names::label_key(&k.value) {
                self.push(error(
                    codes::INVALID_NAME,
                    &k.span,
                    format!("`{}` is not a label key: {rule}", k.value),
                    "not a label key",
                    "use a key such as `nvidia.com/gpu.product`",
                ));
            }
            if let Err(rule) = names::label_value(&v.value) {
                self.push(error(
                    codes::INVALID_NAME,
                    &v.span,
                    format!("`{}` is not a label value: {rule}", v.value),
                    "not a label value",
                    "label values have at most 63 letters, digits, `-`, `_` and `.`",
                ));
            }
            node_selector.insert(k.value.clone(), v.value.clone());
        }
        let mut taints = Vec::new();
        for t in p.taints.iter().flatten() {
            if let Err(rule) = names::label_key(&t.key.value) {
                self.push(error(
                    codes::INVALID_NAME,
                    &t.key.span,
                    format!("`{}` is not a taint key: {rule}", t.key.value),
                    "not a taint key",
                    "taint keys follow the label key syntax",
                ));
            }
            if let Some(v) = &t.value
                && let Err(rule) = names::label_value(&v.value)
            {
                self.push(error(
                    codes::INVALID_NAME,
                    &v.span,
                    format!("`{}` is not a taint value: {rule}", v.value),
                    "not a taint value",
                    "taint values follow the label value syntax",
                ));
            }
            const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];
            if !EFFECTS.contains(&t.effect.value.as_str()) {
                let help = match nearest(&t.effect.value, EFFECTS.iter().copied()) {
                    Some(n) => format!("did you mean `{n}`?"),
                    None => format!("the effect is one of {}", ticks(EFFECTS)),
                };
                self.invalid(
                    &t.effect.span,
                    format!("unknown taint effect `{}`", t.effect.value),
                    "not a taint effect",
                    help,
                );
            }
            taints.push(Taint {
                key: t.key.value.clone(),
                value: t.value.as_ref().map(|v| v.value.clone()),
                effect: t.effect.value.clone(),
            });
        }
        let cost = p.cost_per_gpu_hour.as_ref().and_then(|c| {
            if c.value < 0.0 {
                self.invalid(
                    &c.span,
                    format!("`costPerGpuHour` is {}, below zero", c.value),
                    "negative",
                    "give the price of one GPU for one hour, such as `2.4`",
                );
                None
            } else {
                Some(c.value)
            }
        });
        let mut current = Vec::new();
        for c in p.current.iter().flatten() {
            match &nodes {
                Some(Nodes::Named(names)) if names.contains(&c.node.value) => {}
                Some(Nodes::Named(names)) => {
                    let help = match nearest(&c.node.value, names.iter().map(String::as_str)) {
                        Some(n) => format!("did you mean `{n}`?"),
                        None => format!("the nodes of pool `{}` are listed in its `nodes`", p.name.value),
                    };
                    self.push(error(
                        codes::UNKNOWN_NODE,
                        &c.node.span,
                        format!("pool `{}` has no node `{}`", p.name.value, c.node.value),
                        "not in `nodes`",
                        help,
                    ));
                }
                Some(Nodes::Autoscaled { .. }) => self.push(error(
                    codes::UNKNOWN_NODE,
                    &c.node.span,
                    format!("pool `{}` is autoscaled and has no named node `{}`", p.name.value, c.node.value),
                    "not a named node",
                    "give `current` layouts only for pools with named `nodes`",
                )),
                None => {}
            }
            if let (Some(gpn), Some(gpu)) = (gpus_per_node, gpu) {
                if c.gpus.len() as i128 > gpn {
                    let span = c.span.clone().unwrap_or_else(|| c.node.span.clone());
                    self.invalid(
                        &span,
                        format!(
                            "node `{}` lists {} GPUs but the pool has {gpn} per node",
                            c.node.value,
                            c.gpus.len()
                        ),
                        "too many GPUs",
                        "give one list of MIG profiles per GPU of the node",
                    );
                }
                for (i, profiles) in c.gpus.iter().enumerate() {
                    self.current_gpu(gpu, &c.node.value, i, profiles);
                }
            }
            current.push(CurrentNode {
                node: c.node.value.clone(),
                gpus: c.gpus.iter().map(|g| g.iter().map(|p| p.value.clone()).collect()).collect(),
            });
        }
        Some(CheckedPool {
            pool: Pool {
                name: p.name.value.clone(),
                gpu: gpu?.id.clone(),
                gpus_per_node: gpus_per_node? as u32,
                nodes: nodes?,
                cost_per_gpu_hour: cost,
                node_selector,
                taints,
                current,
                // The pool's name: what a planner diagnostic about the pool should underline.
                span: Some(p.name.span.clone()),
            },
            gpu: gpu?.clone(),
        })
    }

    fn current_gpu(&mut self, gpu: &GpuModel, node: &str, index: usize, profiles: &[Sp<String>]) {
        let mut known = true;
        for p in profiles {
            if gpu.profile(&p.value).is_none() {
                known = false;
                self.unknown_profile(gpu, p);
            }
        }
        if !known || profiles.is_empty() {
            return;
        }
        let names: Vec<&str> = profiles.iter().map(|p| p.value.as_str()).collect();
        if let Err(e) = crate::catalog::layout::validate(gpu, &names) {
            let span = Span::new(
                profiles[0].span.file,
                profiles[0].span.range.start..profiles[profiles.len() - 1].span.range.end,
            );
            self.invalid(
                &span,
                format!("the current layout of GPU {index} on node `{node}` is impossible: {e}"),
                "not a valid MIG layout",
                format!("write the layout `nvidia-smi mig -lgi` shows on `{node}`"),
            );
        }
    }

    fn unknown_profile(&mut self, gpu: &GpuModel, p: &Sp<String>) {
        let names: Vec<&str> = gpu
            .mig
            .as_ref()
            .map(|m| m.profiles.iter().map(|p| p.name.as_str()).collect())
            .unwrap_or_default();
        let help = if names.is_empty() {
            format!("`{}` has no MIG; measure it as `whole`", gpu.id)
        } else {
            match nearest(&p.value, names.iter().copied()) {
                Some(n) => {
                    format!("did you mean `{n}`? `gpuplan catalog show {}` lists its profiles", gpu.id)
                }
                None => format!("the profiles of `{}` are {}", gpu.id, ticks(&names)),
            }
        };
        self.push(error(
            codes::UNKNOWN_PROFILE,
            &p.span,
            format!("`{}` has no MIG profile `{}`", gpu.id, p.value),
            "unknown profile",
            help,
        ));
    }

    // --- models ---------------------------------------------------------------------------------

    fn models(&mut self, m: &Manifest, pools: &[CheckedPool], policy: &Policy) -> Option<Vec<Model>> {
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

    fn pool_ref(&mut self, p: &Sp<String>, pool_names: &[&str]) -> bool {
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

    fn env_name(&mut self, k: &Sp<String>) {
        if let Err(rule) = names::env_name(&k.value) {
            self.push(error(
                codes::INVALID_NAME,
                &k.span,
                format!("`{}` is not an environment variable name: {rule}", k.value),
                "not a variable name",
                "use letters, digits and `_`, not starting with a digit",
            ));
        }
    }

    fn model(
        &mut self,
        m: &Manifest,
        raw: &raw::Model,
        defaults: &raw::ModelDefaults,
        pools: &[CheckedPool],
        pool_names: &[&str],
        policy: &Policy,
    ) -> Option<Model> {
        let name = &raw.name.value;
        let mut ok = true;
        if raw.image.value.trim().is_empty() || raw.image.value.chars().any(char::is_whitespace) {
            self.invalid(
                &raw.image.span,
                format!("image `{}` is not a container image reference", raw.image.value),
                "not an image",
                "write an image such as `nvcr.io/nim/nvidia/parakeet-1-1b-ctc-en-us:1.0.0`",
            );
            ok = false;
        }
        let memory_mib = self.memory(&raw.memory);
        let compute = match raw.compute.as_ref().or(defaults.compute.as_ref()) {
            Some(c) => self.fraction(c, "`compute`", 0.0, 1.0, false),
            None => Some(if raw.gpus.is_some() { 1.0 } else { DEFAULT_COMPUTE }),
        };
        let isolation =
            raw.isolation.as_ref().or(defaults.isolation.as_ref()).map_or(Isolation::Hardware, |i| i.value);
        let spread = raw.spread.as_ref().or(defaults.spread.as_ref()).map_or(Spread::None, |s| s.value);
        let llm = raw.class.as_ref().is_some_and(|c| c.value == ModelClass::Llm);
        let gpus =
            raw.gpus.as_ref().and_then(|g| self.int_in(g, "`gpus`", 1, MAX_GPUS_PER_NODE)).map(|g| g as u32);
        if raw.gpus.is_some() && gpus.is_none() {
            ok = false;
        }
        let priority = match raw.priority.as_ref().or(defaults.priority.as_ref()) {
            Some(p) => {
                self.int_in(p, "`priority`", i128::from(i32::MIN), i128::from(i32::MAX)).map(|p| p as i32)
            }
            None => Some(0),
        };
        // Ports.
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
        // Environment: defaults first, the model's own values win per name.
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
        // Latency.
        let latency = raw.latency.as_ref().and_then(|l| {
            let p99 = self.duration(&l.p99);
            let baseline = match &l.baseline {
                Some(b) => Some(self.duration(b)?),
                None => None,
            };
            if let (Some(p), Some(b)) = (p99, baseline)
                && b >= p {
                    if let Some(bs) = &l.baseline {
                        self.invalid(&bs.span, format!("the baseline latency ({b} ms) is not below the objective `p99` ({p} ms)"), "not below p99", "the baseline is the latency on a whole, idle GPU; the objective must leave room above it");
                    }
                    return None;
                }
            Some(Latency { p99_ms: p99?, baseline_ms: baseline })
        });
        if raw.latency.is_some() && latency.is_none() {
            ok = false;
        }
        // Pools the model may use.
        let pool_filter = raw.pools.as_ref().or(defaults.pools.as_ref());
        if let Some(list) = &raw.pools {
            for p in list {
                ok &= self.pool_ref(p, pool_names);
            }
        }
        let mut gpu_types = Vec::new();
        if let Some(list) = &raw.gpu_types {
            for g in list {
                match self.gpu(g) {
                    Some(gpu) => gpu_types.push(gpu.id.clone()),
                    None => ok = false,
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
        let eligible: Vec<&CheckedPool> = pools
            .iter()
            .filter(|p| model_pools.is_empty() || model_pools.contains(&p.pool.name))
            .filter(|p| gpu_types.is_empty() || gpu_types.contains(&p.pool.gpu))
            .collect();
        let model_span = raw.span.clone().unwrap_or_else(|| raw.name.span.clone());
        // Only judge eligibility when every pool and filter could be read.
        let pools_complete = pools.len() == m.inventory.pools.len() && ok;
        if pools_complete && eligible.is_empty() && !pools.is_empty() {
            let span = raw
                .gpu_types
                .as_ref()
                .and_then(|l| l.first())
                .or(raw.pools.as_ref().and_then(|l| l.first()))
                .map_or(model_span.clone(), |s| s.span.clone());
            self.push(error(codes::NO_ELIGIBLE_POOL, &span, format!("model `{name}` may use no pool of the inventory"), "excludes every pool", "its `pools` and `gpuTypes` together exclude every pool; widen one of them or add a matching pool"));
            ok = false;
        }
        // Conflicts.
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
        if llm && isolation == Isolation::Shared && policy.llm_never_time_sliced {
            let span = raw
                .isolation
                .as_ref()
                .or(defaults.isolation.as_ref())
                .map_or(model_span.clone(), |i| i.span.clone());
            self.push(error(codes::POLICY_VIOLATION, &span, format!("model `{name}` is an LLM and may be time-sliced, which `policy.llmNeverTimeSliced` forbids"), "time-slicing allowed here", "use `isolation: hardware` or `dedicated`, or set `policy.llmNeverTimeSliced: false`"));
            ok = false;
        }
        // Demand.
        let demand = match &raw.demand {
            None => match &raw.replicas {
                Some(r) => self.int_in(r, "`replicas`", 1, MAX_REPLICAS).map(|r| Demand::Replicas(r as u32)),
                None => Some(Demand::Replicas(1)),
            },
            Some(d) => self.demand(m, d, name, latency.as_ref(), &eligible, pools_complete),
        };
        let replicas_floor = match &demand {
            Some(Demand::Replicas(n)) => Some(*n),
            Some(Demand::Rate(r)) => Some(r.min_replicas),
            None => None,
        };
        // Can one replica run at all, on the pools it may use? Not judged when a pool or filter
        // could not be read (an unknown GPU is one diagnostic, not a cascade).
        if let Some(mem) = memory_mib.filter(|_| pools_complete) {
            self.fits(raw, name, mem, gpus, &eligible, policy);
            let gpu_models: Vec<&GpuModel> = eligible.iter().map(|p| &p.gpu).collect();
            self.diags.extend(
                super::headroom::near_misses(
                    name,
                    mem,
                    policy.memory_headroom,
                    &gpu_models,
                    &raw.memory.span,
                )
                .into_iter()
                .collect(),
            );
        }
        if let Some(n) = gpus {
            let most = eligible.iter().map(|p| p.pool.gpus_per_node).max().unwrap_or(0);
            if pools_complete && !eligible.is_empty() && n > most {
                if let Some(g) = &raw.gpus {
                    self.push(error(codes::GPUS_EXCEED_NODE, &g.span, format!("model `{name}` needs {n} GPUs on one node, but its pools have at most {most} per node"), "more than a node has", "lower `gpus`, or add a pool with bigger nodes"));
                }
                ok = false;
            }
        }
        if let Some(floor) = replicas_floor
            && !eligible.is_empty()
            && pools_complete
        {
            self.spread(raw, name, spread, floor, &eligible);
        }
        if isolation == Isolation::Hardware
            && gpus.is_none()
            && pools_complete
            && !eligible.is_empty()
            && eligible.iter().all(|p| !p.gpu.is_mig_capable())
        {
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
        let deployment = super::deployment::validate(
            &mut self.diags,
            raw.deployment.as_ref(),
            defaults.deployment.as_ref(),
            &ports,
        );
        Some(Model {
            name: name.clone(),
            image: raw.image.value.clone(),
            command: raw.command.iter().flatten().map(|s| s.value.clone()).collect(),
            args: raw.args.iter().flatten().map(|s| s.value.clone()).collect(),
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
            deployment,
            // The model's name: what a planner diagnostic about the model should underline.
            span: Some(raw.name.span.clone()),
        })
        .filter(|_| ok)
    }

    fn fits(
        &mut self,
        raw: &raw::Model,
        name: &str,
        mem: u64,
        gpus: Option<u32>,
        eligible: &[&CheckedPool],
        policy: &Policy,
    ) {
        let usable = |p: &CheckedPool| -> u64 {
            let per_gpu = (p.gpu.memory_mib as f64 * (1.0 - policy.memory_headroom)).floor() as u64;
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

    fn spread(
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

    fn demand(
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

    fn point(&mut self, p: &raw::Point) -> Option<MeasuredPoint> {
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

/// A checked pool with its catalog entry.
struct CheckedPool {
    pool: Pool,
    gpu: GpuModel,
}
