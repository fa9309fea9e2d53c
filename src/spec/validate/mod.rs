//! Builds a [`Spec`] from a raw [`Manifest`], collecting every problem.
//!
//! In: a structurally sound manifest (every value spanned) and the catalog. Out: the checked
//! spec and its warnings, or every error found. Checks, in file order: format version; names
//! (DNS-1123 and the other Kubernetes rules, uniqueness); units; ranges; catalog GPU ids and MIG
//! profile names (with the nearest id); cross references (pools, nodes, GPU types); conflicting
//! fields; whether each model can run at all on the pools it may use (memory, whole GPUs per
//! node, spread). Whether the whole demand fits together is the planner's question.
//!
//! The checks are split along those seams: this file holds the entry point, the shared helpers
//! (units, ranges, names, catalog ids) and the cluster-wide settings; [`pools`] the inventory,
//! [`models`] each model (its container, latency, eligible pools, conflicts, fit and spread),
//! [`demand`] rate demands and measured points. A new manifest block gets its own file and one
//! call from here.

mod backend;
mod demand;
mod models;
mod pools;

use super::names;
use super::units;
use crate::catalog::{Catalog, GpuModel};
use crate::diagnostics::{Diagnostic, Diagnostics, Span, codes};
use crate::manifest::{self as raw, API_VERSION, KIND, Manifest, Sp};
use crate::spec::{
    ArgoCd, Cluster, Flux, MigStrategy, OutputOptions, Policy, Pool, Spec, TimeSlicingOptions, error,
};

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
pub(super) const DEFAULT_COMPUTE: f64 = 0.1;
/// Most replicas a model may ask for.
pub(super) const MAX_REPLICAS: i128 = 100_000;
/// Most GPUs a node may have.
pub(super) const MAX_GPUS_PER_NODE: i128 = 16;
/// Most nodes an autoscaled pool may have.
pub(super) const MAX_POOL_NODES: i128 = 100_000;

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

    /// An `invalid-name` error when `name` breaks `rule` (a [`names`] check): "`x` is not a {what}".
    fn name_rule(&mut self, name: &Sp<String>, rule: fn(&str) -> Result<(), String>, what: &str, help: &str) {
        if let Err(why) = rule(&name.value) {
            let message = format!("`{}` is not a {what}: {why}", name.value);
            self.push(error(codes::INVALID_NAME, &name.span, message, &format!("not a {what}"), help));
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

    /// `apiVersion` and `kind` must name the format this gpuplan reads, word for word.
    fn header_field(&mut self, field: &str, value: &Sp<String>, expected: &str, label: &str, help: String) {
        if value.value != expected {
            let message = format!("unsupported `{field}` `{}`", value.value);
            self.push(error(codes::UNSUPPORTED_VERSION, &value.span, message, label, help));
        }
    }

    fn spec(&mut self, m: &Manifest) -> Option<Spec> {
        let version_help = format!("this gpuplan reads `apiVersion: {API_VERSION}`");
        self.header_field("apiVersion", &m.api_version, API_VERSION, "unknown version", version_help);
        let kind_help = format!("a gpuplan manifest has `kind: {KIND}`");
        self.header_field("kind", &m.kind, KIND, "unknown kind", kind_help);
        self.dns_label(&m.metadata.name, "the plan name");
        let policy = self.policy(m.policy.as_ref());
        let mut cluster = self.cluster(m.cluster.as_ref());
        self.mps_mig_strategy(m, cluster.as_mut());
        let mut pools = self.pools(m);
        self.backends(m, &mut pools);
        let models = self.models(m, &pools, &policy);
        let pools: Vec<Pool> = pools.into_iter().map(|p| p.pool).collect();
        let models = models?;
        let change_policy = super::change_policy::validate(m.change_policy.as_ref(), &mut self.diags);
        Some(Spec::from_parts(&m.metadata.name.value, cluster?, pools, models, policy, change_policy))
    }

    /// The device plugin refuses MPS under `migStrategy: mixed` (an error at start-up), and the
    /// GPU Operator gives every node the cluster's strategy. So where a pool on the device
    /// plugin allows `mps`, the default strategy is `none` instead of `mixed`, and an explicit
    /// `mixed` is an error. Pools on `dra` run no device plugin: their `mps` is no conflict.
    fn mps_mig_strategy(&mut self, m: &Manifest, cluster: Option<&mut Cluster>) {
        let default = m.cluster.as_ref().and_then(|c| c.backend.as_ref()).map(|b| b.value);
        let Some(mps) = m
            .inventory
            .pools
            .iter()
            .filter(|p| {
                p.backend.as_ref().map(|b| b.value).or(default) != Some(crate::manifest::words::Backend::Dra)
            })
            .find_map(|p| {
                p.sharing.iter().flatten().find(|s| s.value == crate::manifest::words::SharingMechanism::Mps)
            })
        else {
            return;
        };
        let explicit = m.cluster.as_ref().and_then(|c| c.mig_strategy.as_ref());
        match explicit {
            Some(s) if s.value == MigStrategy::Mixed => self.push(
                Diagnostic::error(
                    codes::MPS_WITH_MIXED_MIG_STRATEGY,
                    "a pool allows `mps` but `cluster.migStrategy` is `mixed`",
                )
                .at(mps.span.clone(), "MPS allowed here")
                .with_label(s.span.clone(), "the device plugin refuses MPS under this strategy")
                .with_help("set `migStrategy: none` (MIG is then not planned), or drop `mps` from the pool's `sharing`"),
            ),
            Some(_) => {}
            None => {
                if let Some(c) = cluster {
                    c.mig_strategy = MigStrategy::None;
                }
            }
        }
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
                target_revision: a.target_revision.as_ref().map_or("HEAD", |r| &r.value).to_owned(),
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
            currency: c.currency.as_ref().map(|cur| self.currency(cur)),
        })
    }

    /// An ISO 4217 code: three capital letters.
    fn currency(&mut self, c: &Sp<String>) -> String {
        if c.value.len() != 3 || !c.value.bytes().all(|b| b.is_ascii_uppercase()) {
            self.diags.push(error(
                codes::INVALID_VALUE,
                &c.span,
                format!("`{}` is not an ISO 4217 currency code", c.value),
                "not three capital letters",
                "write a code such as `USD` or `EUR`",
            ));
        }
        c.value.clone()
    }

    fn non_empty(&mut self, s: &Sp<String>, what: &str) -> bool {
        if s.value.trim().is_empty() {
            self.invalid(&s.span, format!("{what} is empty"), "empty", format!("give {what} a value"));
            return false;
        }
        true
    }
}

/// A checked pool with its catalog entry.
struct CheckedPool {
    pool: Pool,
    gpu: GpuModel,
}
