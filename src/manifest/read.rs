//! Walks a spanned [`Node`] tree into the raw [`Manifest`], collecting every structural problem.
//!
//! Every unknown field (with the nearest valid name), wrong type and missing required field is
//! reported, each at its own span; reading goes on after a problem so that one run shows them
//! all. The manifest is returned only when the structure is sound. Values are not judged here
//! (units, ranges and names are [`crate::spec::validate`]'s job) except where the type itself is
//! the question: an enum keyword, an integer that does not fit in 128 bits.

use std::ops::Range;

use super::model::*;
use super::tree::{Key, Node, Value};
use super::words::Keyword;
use crate::diagnostics::{Diagnostic, Diagnostics, FileId, Span, codes, nearest};

impl Keyword for ModelClass {
    const WHAT: &'static str = "model class";
    const ALL: &'static [(&'static str, Self)] = &[("llm", ModelClass::Llm), ("small", ModelClass::Small)];
}

const MEMORY_UNITS: &str = "`GiB`, `MiB`, `GB` or `MB`";
const DURATION_UNITS: &str = "`ms`, `s` or `us`";
const RATE_UNITS: &str = "`rps` or `rpm`";

pub(super) const MANIFEST_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "cluster",
    "inventory",
    "defaults",
    "policy",
    "changePolicy",
    "models",
];
pub(super) const METADATA_FIELDS: &[&str] = &["name"];
pub(super) const CLUSTER_FIELDS: &[&str] =
    &["namespace", "operatorNamespace", "migStrategy", "timeSlicing", "output", "currency", "backend"];
pub(super) const TIME_SLICING_FIELDS: &[&str] = &["renameByDefault", "failRequestsGreaterThanOne"];
pub(super) const OUTPUT_FIELDS: &[&str] =
    &["clusterPolicyPatch", "helmValues", "argocd", "flux", "namespaces"];
pub(super) const ARGOCD_FIELDS: &[&str] = &["repoUrl", "path", "targetRevision", "namespace"];
pub(super) const FLUX_FIELDS: &[&str] = &["sourceName", "path", "namespace"];
pub(super) const INVENTORY_FIELDS: &[&str] = &["pools"];
pub(super) const POOL_FIELDS: &[&str] = &[
    "name",
    "gpu",
    "gpusPerNode",
    "nodes",
    "count",
    "nodeSelector",
    "taints",
    "costPerGpuHour",
    "current",
    "sharing",
    "backend",
];
pub(super) const COUNT_FIELDS: &[&str] = &["min", "max"];
pub(super) const TAINT_FIELDS: &[&str] = &["key", "value", "effect"];
pub(super) const CURRENT_FIELDS: &[&str] = &["node", "gpus", "uuids"];
pub(super) const DEFAULTS_FIELDS: &[&str] =
    &["isolation", "spread", "compute", "priority", "pools", "gpuTypes", "env", "deployment"];
pub(super) const DEPLOYMENT_FIELDS: &[&str] = &[
    "resources",
    "probes",
    "imagePullSecrets",
    "valueFrom",
    "serviceAccountName",
    "modelCache",
    "strategy",
    "disruptionBudget",
    "sharedMemory",
    "securityContext",
    "terminationGracePeriodSeconds",
    "priorityClassName",
];
pub(super) const POD_SECURITY_FIELDS: &[&str] = &["runAsUser", "runAsGroup", "fsGroup"];
pub(super) const RESOURCES_FIELDS: &[&str] = &["requests", "limits"];
pub(super) const PROBES_FIELDS: &[&str] = &["readiness", "liveness", "startup"];
pub(super) const PROBE_FIELDS: &[&str] = &[
    "enabled",
    "path",
    "port",
    "initialDelaySeconds",
    "periodSeconds",
    "timeoutSeconds",
    "failureThreshold",
];
pub(super) const VALUE_FROM_FIELDS: &[&str] = &["secret", "configMap", "key", "optional"];
pub(super) const MODEL_CACHE_FIELDS: &[&str] = &["mountPath", "claimName", "sizeLimit", "hostPath"];
pub(super) const STRATEGY_FIELDS: &[&str] = &["maxSurge", "maxUnavailable"];
pub(super) const BUDGET_FIELDS: &[&str] = &["maxUnavailable", "minAvailable"];
pub(super) const POLICY_FIELDS: &[&str] =
    &["llmNeverTimeSliced", "maxTimeSlicingReplicas", "memoryHeadroom", "timeSlicingEfficiency"];
pub(super) const CHANGE_POLICY_FIELDS: &[&str] =
    &["mode", "reoptimizeWhenSavingGpus", "reoptimizeWhenSavingCostPerHour", "maxRepartitions"];
pub(super) const MODEL_FIELDS: &[&str] = &[
    "name",
    "image",
    "command",
    "args",
    "env",
    "ports",
    "class",
    "memory",
    "compute",
    "replicas",
    "demand",
    "isolation",
    "gpus",
    "latency",
    "spread",
    "gpuTypes",
    "pools",
    "priority",
    "deployment",
    "allowMps",
];
pub(super) const PORT_FIELDS: &[&str] = &["name", "port", "protocol"];
pub(super) const DEMAND_FIELDS: &[&str] =
    &["rate", "admissionFactor", "minReplicas", "points", "measurements"];
pub(super) const POINT_FIELDS: &[&str] = &["gpu", "profile", "batchSize", "processes", "rps", "latency"];
pub(super) const LATENCY_FIELDS: &[&str] = &["p99", "baseline", "baselineGpu"];

/// Where each field list lives, to tell a user who put a field at the wrong level.
const FIELD_HOMES: &[(&str, &[&str])] = &[
    ("the manifest", MANIFEST_FIELDS),
    ("`cluster`", CLUSTER_FIELDS),
    ("`cluster.timeSlicing`", TIME_SLICING_FIELDS),
    ("`cluster.output`", OUTPUT_FIELDS),
    ("a pool", POOL_FIELDS),
    ("a model", MODEL_FIELDS),
    ("`demand`", DEMAND_FIELDS),
    ("`policy`", POLICY_FIELDS),
    ("`changePolicy`", CHANGE_POLICY_FIELDS),
    ("`deployment`", DEPLOYMENT_FIELDS),
];

/// Reads the document root into a manifest, or returns every structural problem.
pub(super) fn manifest(file: FileId, root: &Node) -> Result<Manifest, Diagnostics> {
    match manifest_recovering(file, root) {
        (Some(m), diags) if !diags.has_errors() => Ok(m),
        (_, diags) => Err(diags),
    }
}

/// Reads the document root, returning the manifest whenever it could be built: unknown fields are
/// reported but do not stop reading, so that semantic validation can still run and every problem
/// reaches the user in one pass. Any other structural problem (wrong type, missing field) leaves
/// no manifest.
pub(super) fn manifest_recovering(file: FileId, root: &Node) -> (Option<Manifest>, Diagnostics) {
    let mut r = Reader { file, diags: Diagnostics::new() };
    let manifest = r.manifest(root);
    let mut diags = r.diags;
    diags.sort();
    let only_unknown_fields = diags.iter().all(|d| d.code == codes::UNKNOWN_FIELD);
    (manifest.filter(|_| only_unknown_fields), diags)
}

struct Reader {
    file: FileId,
    diags: Diagnostics,
}

/// The fields of one mapping, checked against the names it may have.
struct Obj<'n> {
    entries: &'n [(Key, Node)],
    span: Range<usize>,
    /// How messages name the mapping: `model \`asr\``, or `a model` before its name is known.
    what: String,
}

impl<'n> Obj<'n> {
    fn get(&self, name: &str) -> Option<&'n Node> {
        self.entries.iter().find(|(k, _)| k.name == name).map(|(_, v)| v)
    }
}

fn expected_found(expected: &str, node: &Node) -> String {
    format!("expected {expected}, found {}", node.value.kind())
}

impl Reader {
    fn span(&self, range: &Range<usize>) -> Span {
        Span::new(self.file, range.clone())
    }

    fn wrong_type(&mut self, node: &Node, expected: &str, help: impl Into<String>) {
        let d = Diagnostic::error(codes::WRONG_TYPE, expected_found(expected, node))
            .at(self.span(&node.span), format!("{} here", node.value.kind()))
            .with_help(help);
        self.diags.push(d);
    }

    /// Opens a mapping; reports unknown fields (with the nearest valid name).
    fn object<'n>(&mut self, node: &'n Node, what: &'static str, fields: &[&'static str]) -> Option<Obj<'n>> {
        let Value::Map(entries) = &node.value else {
            self.wrong_type(
                node,
                &format!("a mapping ({what})"),
                format!("write {what} as a mapping of field names to values"),
            );
            return None;
        };
        // Items of a list are named by their `name` field when they have one.
        let named = entries.iter().find(|(k, _)| k.name == "name").and_then(|(_, v)| match &v.value {
            Value::Str(s) if fields.contains(&"name") => {
                what.strip_prefix("a ").map(|kind| format!("{kind} `{s}`"))
            }
            _ => None,
        });
        let what = named.unwrap_or_else(|| what.to_owned());
        for (key, _) in entries {
            if fields.contains(&key.name.as_str()) {
                continue;
            }
            let mut d =
                Diagnostic::error(codes::UNKNOWN_FIELD, format!("unknown field `{}` in {what}", key.name))
                    .at(self.span(&key.span), "unknown field");
            let elsewhere = FIELD_HOMES
                .iter()
                .find(|(_, list)| list.contains(&key.name.as_str()) && !std::ptr::eq(*list, fields))
                .map(|(home, _)| *home);
            d = match (nearest(&key.name, fields.iter().copied()), elsewhere) {
                (Some(n), _) => d.with_help(format!("did you mean `{n}`?")),
                (None, Some(home)) => {
                    d.with_help(format!("`{}` is a field of {home}, not of {what}", key.name))
                }
                (None, None) => d.with_help(format!(
                    "the fields of {what} are {}",
                    fields.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
                )),
            };
            self.diags.push(d);
        }
        // A missing field is reported at the mapping's first key: a whole word, on the right line.
        let span = entries.first().map_or_else(|| node.span.clone(), |(k, _)| k.span.clone());
        Some(Obj { entries, span, what })
    }

    /// A required field: reports it missing at the mapping that lacks it.
    fn req<'n, T>(
        &mut self,
        obj: &Obj<'n>,
        name: &str,
        read: impl FnOnce(&mut Self, &'n Node) -> Option<T>,
    ) -> Option<T> {
        match obj.get(name) {
            Some(node) => read(self, node),
            None => {
                let span = self.span(&obj.span);
                self.diags.push(
                    Diagnostic::error(codes::MISSING_FIELD, format!("{} has no `{name}`", obj.what))
                        .at(span, format!("`{name}` is required here"))
                        .with_help(format!("add `{name}` to {}", obj.what)),
                );
                None
            }
        }
    }

    /// An optional field; an explicit null counts as absent.
    fn opt<'n, T>(
        &mut self,
        obj: &Obj<'n>,
        name: &str,
        read: impl FnOnce(&mut Self, &'n Node) -> Option<T>,
    ) -> Option<T> {
        match obj.get(name) {
            Some(Node { value: Value::Null, .. }) | None => None,
            Some(node) => read(self, node),
        }
    }

    fn string(&mut self, node: &Node) -> Option<Sp<String>> {
        match &node.value {
            Value::Str(s) => Some(Sp::new(s.clone(), self.span(&node.span))),
            Value::Int(_) | Value::Float(_) | Value::Bool(_) => {
                self.wrong_type(node, "a string", "put the value in quotes");
                None
            }
            _ => {
                self.wrong_type(node, "a string", "write a single string here");
                None
            }
        }
    }

    fn int(&mut self, node: &Node) -> Option<Sp<i128>> {
        match &node.value {
            Value::Int(i) => Some(Sp::new(*i, self.span(&node.span))),
            Value::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e30 => {
                Some(Sp::new(*f as i128, self.span(&node.span)))
            }
            Value::Float(f) if f.is_infinite() || (f.fract() == 0.0 && f.abs() >= 1e30) => {
                let why = ("this number is too large", "out of range");
                self.invalid_number(node, why, "write a whole number that fits the field's range")
            }
            _ => self.not_a_number(node, "an integer", "write a whole number, such as `2`"),
        }
    }

    fn number(&mut self, node: &Node) -> Option<Sp<f64>> {
        match &node.value {
            Value::Int(i) => Some(Sp::new(*i as f64, self.span(&node.span))),
            Value::Float(f) if f.is_finite() => Some(Sp::new(*f, self.span(&node.span))),
            Value::Float(_) => {
                let why = ("this number is not finite", "infinite or not a number");
                self.invalid_number(node, why, "write a finite number, such as `0.25`")
            }
            _ => self.not_a_number(node, "a number", "write a number, such as `0.25`"),
        }
    }

    /// A number the field cannot hold: `invalid-value`, with the message and label of `why`.
    fn invalid_number<T>(&mut self, node: &Node, (message, label): (&str, &str), help: &str) -> Option<T> {
        let d =
            Diagnostic::error(codes::INVALID_VALUE, message).at(self.span(&node.span), label).with_help(help);
        self.diags.push(d);
        None
    }

    /// Not a number where `expected` (a number, an integer) is: a number in quotes is told to
    /// lose them, anything else gets `example`.
    fn not_a_number<T>(&mut self, node: &Node, expected: &str, example: &str) -> Option<T> {
        let quoted = matches!(&node.value, Value::Str(s) if s.trim().parse::<f64>().is_ok());
        self.wrong_type(node, expected, if quoted { "remove the quotes" } else { example });
        None
    }

    fn boolean(&mut self, node: &Node) -> Option<Sp<bool>> {
        match &node.value {
            Value::Bool(b) => Some(Sp::new(*b, self.span(&node.span))),
            _ => {
                self.wrong_type(
                    node,
                    "`true` or `false`",
                    "write `true` or `false` (YAML 1.1 words like `yes` are strings)",
                );
                None
            }
        }
    }

    fn keyword<T: Keyword>(&mut self, node: &Node) -> Option<Sp<T>> {
        let s = self.string(node)?;
        if let Some((_, k)) = T::ALL.iter().find(|(name, _)| *name == s.value) {
            return Some(Sp::new(*k, s.span));
        }
        let names = T::ALL.iter().map(|(n, _)| format!("`{n}`")).collect::<Vec<_>>().join(", ");
        let mut d = Diagnostic::error(codes::INVALID_VALUE, format!("unknown {} `{}`", T::WHAT, s.value))
            .at(s.span, format!("not a known {}", T::WHAT));
        let lower = s.value.to_ascii_lowercase();
        let prefix = T::ALL
            .iter()
            .map(|(n, _)| *n)
            .find(|n| !lower.is_empty() && (n.starts_with(&lower) || lower.starts_with(n)));
        d = match prefix.or_else(|| nearest(&s.value, T::ALL.iter().map(|(n, _)| *n))) {
            Some(n) => d.with_help(format!("did you mean `{n}`? ({} is one of {names})", T::WHAT)),
            None => d.with_help(format!("{} is one of {names}", T::WHAT)),
        };
        self.diags.push(d);
        None
    }

    fn list<'n, T>(
        &mut self,
        node: &'n Node,
        what: &str,
        mut item: impl FnMut(&mut Self, &'n Node) -> Option<T>,
    ) -> Option<Vec<T>> {
        let Value::Seq(items) = &node.value else {
            let help = if matches!(node.value, Value::Str(_)) {
                format!(
                    "write a list of {what}, even for one: `[{}]`",
                    match &node.value {
                        Value::Str(s) => s.as_str(),
                        _ => "",
                    }
                )
            } else {
                format!("write a list of {what}")
            };
            self.wrong_type(node, &format!("a list of {what}"), help);
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for n in items {
            match item(self, n) {
                Some(v) => out.push(v),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn strings(&mut self, node: &Node, what: &str) -> Option<Vec<Sp<String>>> {
        self.list(node, what, |r, n| r.string(n))
    }

    fn string_map(&mut self, node: &Node, what: &str) -> Option<SpMap<Sp<String>>> {
        let Value::Map(entries) = &node.value else {
            self.wrong_type(
                node,
                &format!("a mapping ({what})"),
                format!("write {what} as `NAME: value` pairs"),
            );
            return None;
        };
        let mut out = Vec::with_capacity(entries.len());
        let mut ok = true;
        for (k, v) in entries {
            let key = Sp::new(k.name.clone(), self.span(&k.span));
            let value = match &v.value {
                Value::Str(s) => Some(Sp::new(s.clone(), self.span(&v.span))),
                Value::Int(_) | Value::Float(_) | Value::Bool(_) => {
                    self.wrong_type(
                        v,
                        "a string",
                        "put the value in quotes: Kubernetes takes only strings here",
                    );
                    None
                }
                _ => {
                    self.wrong_type(v, "a string", "write a single string here");
                    None
                }
            };
            match value {
                Some(v) => out.push((key, v)),
                None => ok = false,
            }
        }
        ok.then_some(SpMap(out))
    }

    fn doc_span(&self, node: &Node) -> Option<Span> {
        Some(self.span(&node.span))
    }

    // --- the manifest's structure ---------------------------------------------------------------

    fn manifest(&mut self, root: &Node) -> Option<Manifest> {
        let o = self.object(root, "the manifest", MANIFEST_FIELDS)?;
        let api_version = self.req(&o, "apiVersion", |r, n| r.string(n));
        let kind = self.req(&o, "kind", |r, n| r.string(n));
        let metadata = self.req(&o, "metadata", |r, n| r.metadata(n));
        let cluster = self.opt(&o, "cluster", |r, n| r.cluster(n));
        let inventory = self.req(&o, "inventory", |r, n| r.inventory(n));
        let defaults = self.opt(&o, "defaults", |r, n| r.defaults(n));
        let policy = self.opt(&o, "policy", |r, n| r.policy(n));
        let change_policy = self.opt(&o, "changePolicy", |r, n| r.change_policy(n));
        let models = self.req(&o, "models", |r, n| r.list(n, "models", |r, n| r.model(n)));
        Some(Manifest {
            api_version: api_version?,
            kind: kind?,
            metadata: metadata?,
            cluster,
            inventory: inventory?,
            defaults,
            policy,
            change_policy,
            models: models?,
            file: Some(self.file),
            span: self.doc_span(root),
            measurements: Default::default(),
        })
    }

    fn metadata(&mut self, node: &Node) -> Option<Metadata> {
        let o = self.object(node, "`metadata`", METADATA_FIELDS)?;
        let name = self.req(&o, "name", |r, n| r.string(n));
        Some(Metadata { name: name?, span: self.doc_span(node) })
    }

    fn cluster(&mut self, node: &Node) -> Option<Cluster> {
        let o = self.object(node, "`cluster`", CLUSTER_FIELDS)?;
        Some(Cluster {
            namespace: self.opt(&o, "namespace", |r, n| r.string(n)),
            operator_namespace: self.opt(&o, "operatorNamespace", |r, n| r.string(n)),
            mig_strategy: self.opt(&o, "migStrategy", |r, n| r.keyword(n)),
            time_slicing: self.opt(&o, "timeSlicing", |r, n| {
                let o = r.object(n, "`cluster.timeSlicing`", TIME_SLICING_FIELDS)?;
                Some(TimeSlicing {
                    rename_by_default: r.opt(&o, "renameByDefault", |r, n| r.boolean(n)),
                    fail_requests_greater_than_one: r
                        .opt(&o, "failRequestsGreaterThanOne", |r, n| r.boolean(n)),
                    span: r.doc_span(n),
                })
            }),
            output: self.opt(&o, "output", |r, n| r.output(n)),
            currency: self.opt(&o, "currency", |r, n| r.string(n)),
            backend: self.opt(&o, "backend", |r, n| r.keyword(n)),
            span: self.doc_span(node),
        })
    }

    fn output(&mut self, node: &Node) -> Option<Output> {
        let o = self.object(node, "`cluster.output`", OUTPUT_FIELDS)?;
        let argocd = self.opt(&o, "argocd", |r, n| {
            let o = r.object(n, "`cluster.output.argocd`", ARGOCD_FIELDS)?;
            let repo_url = r.req(&o, "repoUrl", |r, n| r.string(n));
            let path = r.req(&o, "path", |r, n| r.string(n));
            let target_revision = r.opt(&o, "targetRevision", |r, n| r.string(n));
            let namespace = r.opt(&o, "namespace", |r, n| r.string(n));
            Some(ArgoCd { repo_url: repo_url?, path: path?, target_revision, namespace, span: r.doc_span(n) })
        });
        let flux = self.opt(&o, "flux", |r, n| {
            let o = r.object(n, "`cluster.output.flux`", FLUX_FIELDS)?;
            let source_name = r.req(&o, "sourceName", |r, n| r.string(n));
            let path = r.req(&o, "path", |r, n| r.string(n));
            let namespace = r.opt(&o, "namespace", |r, n| r.string(n));
            Some(Flux { source_name: source_name?, path: path?, namespace, span: r.doc_span(n) })
        });
        Some(Output {
            cluster_policy_patch: self.opt(&o, "clusterPolicyPatch", |r, n| r.boolean(n)),
            helm_values: self.opt(&o, "helmValues", |r, n| r.boolean(n)),
            argocd,
            flux,
            namespaces: self.opt(&o, "namespaces", |r, n| r.boolean(n)),
            span: self.doc_span(node),
        })
    }

    fn inventory(&mut self, node: &Node) -> Option<Inventory> {
        let o = self.object(node, "`inventory`", INVENTORY_FIELDS)?;
        let pools = self.req(&o, "pools", |r, n| r.list(n, "pools", |r, n| r.pool(n)));
        Some(Inventory { pools: pools?, span: self.doc_span(node) })
    }

    fn pool(&mut self, node: &Node) -> Option<Pool> {
        let o = self.object(node, "a pool", POOL_FIELDS)?;
        let name = self.req(&o, "name", |r, n| r.string(n));
        let gpu = self.req(&o, "gpu", |r, n| r.string(n));
        let gpus_per_node = self.req(&o, "gpusPerNode", |r, n| r.int(n));
        let nodes = self.opt(&o, "nodes", |r, n| r.strings(n, "node names"));
        let count = self.opt(&o, "count", |r, n| r.count(n));
        let node_selector = self.opt(&o, "nodeSelector", |r, n| r.string_map(n, "`nodeSelector`"));
        let taints = self.opt(&o, "taints", |r, n| {
            r.list(n, "taints", |r, n| {
                let o = r.object(n, "a taint", TAINT_FIELDS)?;
                let key = r.req(&o, "key", |r, n| r.string(n));
                let value = r.opt(&o, "value", |r, n| r.string(n));
                let effect = r.req(&o, "effect", |r, n| r.string(n));
                Some(Taint { key: key?, value, effect: effect?, span: r.doc_span(n) })
            })
        });
        let cost_per_gpu_hour = self.opt(&o, "costPerGpuHour", |r, n| r.number(n));
        let sharing = self.opt(&o, "sharing", |r, n| r.list(n, "sharing mechanisms", |r, n| r.keyword(n)));
        let current = self.opt(&o, "current", |r, n| {
            r.list(n, "nodes", |r, n| {
                let o = r.object(n, "a current node", CURRENT_FIELDS)?;
                let node_name = r.req(&o, "node", |r, n| r.string(n));
                let gpus = r.req(&o, "gpus", |r, n| r.list(n, "GPUs", |r, n| r.strings(n, "MIG profiles")));
                let uuids = r.opt(&o, "uuids", |r, n| r.strings(n, "GPU UUIDs"));
                Some(CurrentNode { node: node_name?, gpus: gpus?, uuids, span: r.doc_span(n) })
            })
        });
        Some(Pool {
            name: name?,
            gpu: gpu?,
            gpus_per_node: gpus_per_node?,
            nodes,
            count,
            node_selector,
            taints,
            cost_per_gpu_hour,
            current,
            sharing,
            backend: self.opt(&o, "backend", |r, n| r.keyword(n)),
            span: self.doc_span(node),
        })
    }

    fn count(&mut self, node: &Node) -> Option<NodeCount> {
        match &node.value {
            Value::Int(_) | Value::Float(_) => self.int(node).map(NodeCount::Fixed),
            Value::Map(_) => {
                let o = self.object(node, "`count`", COUNT_FIELDS)?;
                let min = self.opt(&o, "min", |r, n| r.int(n));
                let max = self.req(&o, "max", |r, n| r.int(n));
                Some(NodeCount::Range(CountRange { min, max: max?, span: self.doc_span(node) }))
            }
            _ => {
                self.wrong_type(
                    node,
                    "a node count or `{min, max}`",
                    "write `count: 3` or `count: {min: 1, max: 4}`",
                );
                None
            }
        }
    }

    fn defaults(&mut self, node: &Node) -> Option<ModelDefaults> {
        let o = self.object(node, "`defaults`", DEFAULTS_FIELDS)?;
        Some(ModelDefaults {
            isolation: self.opt(&o, "isolation", |r, n| r.keyword(n)),
            spread: self.opt(&o, "spread", |r, n| r.keyword(n)),
            compute: self.opt(&o, "compute", |r, n| r.number(n)),
            priority: self.opt(&o, "priority", |r, n| r.int(n)),
            pools: self.opt(&o, "pools", |r, n| r.strings(n, "pool names")),
            gpu_types: self.opt(&o, "gpuTypes", |r, n| r.strings(n, "GPU ids")),
            env: self.opt(&o, "env", |r, n| r.string_map(n, "`env`")),
            deployment: self.opt(&o, "deployment", |r, n| r.deployment(n)),
            span: self.doc_span(node),
        })
    }

    fn policy(&mut self, node: &Node) -> Option<Policy> {
        let o = self.object(node, "`policy`", POLICY_FIELDS)?;
        Some(Policy {
            llm_never_time_sliced: self.opt(&o, "llmNeverTimeSliced", |r, n| r.boolean(n)),
            max_time_slicing_replicas: self.opt(&o, "maxTimeSlicingReplicas", |r, n| r.int(n)),
            memory_headroom: self.opt(&o, "memoryHeadroom", |r, n| r.number(n)),
            time_slicing_efficiency: self.opt(&o, "timeSlicingEfficiency", |r, n| r.number(n)),
            span: self.doc_span(node),
        })
    }

    fn change_policy(&mut self, node: &Node) -> Option<ChangePolicy> {
        let o = self.object(node, "`changePolicy`", CHANGE_POLICY_FIELDS)?;
        Some(ChangePolicy {
            mode: self.opt(&o, "mode", |r, n| r.keyword(n)),
            reoptimize_when_saving_gpus: self.opt(&o, "reoptimizeWhenSavingGpus", |r, n| r.int(n)),
            reoptimize_when_saving_cost_per_hour: self
                .opt(&o, "reoptimizeWhenSavingCostPerHour", |r, n| r.number(n)),
            max_repartitions: self.opt(&o, "maxRepartitions", |r, n| r.int(n)),
            span: self.doc_span(node),
        })
    }

    fn model(&mut self, node: &Node) -> Option<Model> {
        let o = self.object(node, "a model", MODEL_FIELDS)?;
        let name = self.req(&o, "name", |r, n| r.string(n));
        let image = self.req(&o, "image", |r, n| r.string(n));
        let command = self.opt(&o, "command", |r, n| r.strings(n, "strings"));
        let args = self.opt(&o, "args", |r, n| r.strings(n, "strings"));
        let env = self.opt(&o, "env", |r, n| r.string_map(n, "`env`"));
        let ports = self.opt(&o, "ports", |r, n| {
            r.list(n, "ports", |r, n| {
                let o = r.object(n, "a port", PORT_FIELDS)?;
                let name = r.req(&o, "name", |r, n| r.string(n));
                let port = r.req(&o, "port", |r, n| r.int(n));
                let protocol = r.opt(&o, "protocol", |r, n| r.string(n));
                Some(Port { name: name?, port: port?, protocol, span: r.doc_span(n) })
            })
        });
        let class = self.opt(&o, "class", |r, n| r.keyword(n));
        let memory = self.req(&o, "memory", |r, n| r.quantity(n, "memory", MEMORY_UNITS));
        let compute = self.opt(&o, "compute", |r, n| r.number(n));
        let replicas = self.opt(&o, "replicas", |r, n| r.int(n));
        let demand = self.opt(&o, "demand", |r, n| r.demand(n));
        let isolation = self.opt(&o, "isolation", |r, n| r.keyword(n));
        let gpus = self.opt(&o, "gpus", |r, n| r.int(n));
        let latency = self.opt(&o, "latency", |r, n| {
            let o = r.object(n, "`latency`", LATENCY_FIELDS)?;
            let p99 = r.req(&o, "p99", |r, n| r.quantity(n, "duration", DURATION_UNITS));
            let baseline = r.opt(&o, "baseline", |r, n| r.quantity(n, "duration", DURATION_UNITS));
            let baseline_gpu = r.opt(&o, "baselineGpu", |r, n| r.string(n));
            Some(Latency { p99: p99?, baseline, baseline_gpu, span: r.doc_span(n) })
        });
        let spread = self.opt(&o, "spread", |r, n| r.keyword(n));
        let gpu_types = self.opt(&o, "gpuTypes", |r, n| r.strings(n, "GPU ids"));
        let pools = self.opt(&o, "pools", |r, n| r.strings(n, "pool names"));
        let priority = self.opt(&o, "priority", |r, n| r.int(n));
        let deployment = self.opt(&o, "deployment", |r, n| r.deployment(n));
        let allow_mps = self.opt(&o, "allowMps", |r, n| r.boolean(n));
        Some(Model {
            allow_mps,
            name: name?,
            image: image?,
            command,
            args,
            env,
            ports,
            class,
            memory: memory?,
            compute,
            replicas,
            demand,
            isolation,
            gpus,
            latency,
            spread,
            gpu_types,
            pools,
            priority,
            deployment,
            span: self.doc_span(node),
        })
    }

    fn deployment(&mut self, node: &Node) -> Option<DeploymentSettings> {
        let o = self.object(node, "`deployment`", DEPLOYMENT_FIELDS)?;
        let resources = self.opt(&o, "resources", |r, n| {
            let o = r.object(n, "`resources`", RESOURCES_FIELDS)?;
            let requests = r.opt(&o, "requests", |r, n| r.quantity_map(n, "`requests`"));
            let limits = r.opt(&o, "limits", |r, n| r.quantity_map(n, "`limits`"));
            Some(ContainerResources { requests, limits, span: r.doc_span(n) })
        });
        let probes = self.opt(&o, "probes", |r, n| {
            let o = r.object(n, "`probes`", PROBES_FIELDS)?;
            let readiness = r.opt(&o, "readiness", |r, n| r.probe(n));
            let liveness = r.opt(&o, "liveness", |r, n| r.probe(n));
            let startup = r.opt(&o, "startup", |r, n| r.probe(n));
            Some(Probes { readiness, liveness, startup, span: r.doc_span(n) })
        });
        let image_pull_secrets = self.opt(&o, "imagePullSecrets", |r, n| r.strings(n, "Secret names"));
        let value_from = self.opt(&o, "valueFrom", |r, n| {
            let Value::Map(entries) = &n.value else {
                r.wrong_type(
                    n,
                    "a mapping (`valueFrom`)",
                    "write `NAME: { secret: SECRET, key: KEY }` pairs",
                );
                return None;
            };
            let mut out = Vec::new();
            let mut ok = true;
            for (k, v) in entries {
                let key = Sp::new(k.name.clone(), r.span(&k.span));
                let item = (|| {
                    let o = r.object(v, "`valueFrom` entry", VALUE_FROM_FIELDS)?;
                    let secret = r.opt(&o, "secret", |r, n| r.string(n));
                    let config_map = r.opt(&o, "configMap", |r, n| r.string(n));
                    let key = r.req(&o, "key", |r, n| r.string(n));
                    let optional = r.opt(&o, "optional", |r, n| r.boolean(n));
                    Some(ValueFrom { secret, config_map, key: key?, optional, span: r.doc_span(v) })
                })();
                match item {
                    Some(item) => out.push((key, item)),
                    None => ok = false,
                }
            }
            ok.then_some(SpMap(out))
        });
        let service_account_name = self.opt(&o, "serviceAccountName", |r, n| r.string(n));
        let model_cache = self.opt(&o, "modelCache", |r, n| {
            let o = r.object(n, "`modelCache`", MODEL_CACHE_FIELDS)?;
            let mount_path = r.req(&o, "mountPath", |r, n| r.string(n));
            let claim_name = r.opt(&o, "claimName", |r, n| r.string(n));
            let size_limit = r.opt(&o, "sizeLimit", |r, n| r.int_or_string(n));
            let host_path = r.opt(&o, "hostPath", |r, n| r.string(n));
            Some(ModelCache {
                mount_path: mount_path?,
                claim_name,
                size_limit,
                host_path,
                span: r.doc_span(n),
            })
        });
        let strategy = self.opt(&o, "strategy", |r, n| {
            let o = r.object(n, "`strategy`", STRATEGY_FIELDS)?;
            let max_surge = r.opt(&o, "maxSurge", |r, n| r.int_or_string(n));
            let max_unavailable = r.opt(&o, "maxUnavailable", |r, n| r.int_or_string(n));
            Some(Strategy { max_surge, max_unavailable, span: r.doc_span(n) })
        });
        let disruption_budget = self.opt(&o, "disruptionBudget", |r, n| {
            let o = r.object(n, "`disruptionBudget`", BUDGET_FIELDS)?;
            let max_unavailable = r.opt(&o, "maxUnavailable", |r, n| r.int_or_string(n));
            let min_available = r.opt(&o, "minAvailable", |r, n| r.int_or_string(n));
            Some(DisruptionBudget { max_unavailable, min_available, span: r.doc_span(n) })
        });
        let shared_memory = self.opt(&o, "sharedMemory", |r, n| r.int_or_string(n));
        let security_context = self.opt(&o, "securityContext", |r, n| {
            let o = r.object(n, "`securityContext`", POD_SECURITY_FIELDS)?;
            let run_as_user = r.opt(&o, "runAsUser", |r, n| r.int(n));
            let run_as_group = r.opt(&o, "runAsGroup", |r, n| r.int(n));
            let fs_group = r.opt(&o, "fsGroup", |r, n| r.int(n));
            Some(PodSecurity { run_as_user, run_as_group, fs_group, span: r.doc_span(n) })
        });
        let termination_grace_period_seconds = self.opt(&o, "terminationGracePeriodSeconds", |r, n| r.int(n));
        let priority_class_name = self.opt(&o, "priorityClassName", |r, n| r.string(n));
        Some(DeploymentSettings {
            resources,
            probes,
            image_pull_secrets,
            value_from,
            service_account_name,
            model_cache,
            strategy,
            disruption_budget,
            shared_memory,
            security_context,
            termination_grace_period_seconds,
            priority_class_name,
            span: self.doc_span(node),
        })
    }

    fn probe(&mut self, node: &Node) -> Option<Probe> {
        let o = self.object(node, "a probe", PROBE_FIELDS)?;
        Some(Probe {
            enabled: self.opt(&o, "enabled", |r, n| r.boolean(n)),
            path: self.opt(&o, "path", |r, n| r.string(n)),
            port: self.opt(&o, "port", |r, n| r.int_or_string(n)),
            initial_delay_seconds: self.opt(&o, "initialDelaySeconds", |r, n| r.int(n)),
            period_seconds: self.opt(&o, "periodSeconds", |r, n| r.int(n)),
            timeout_seconds: self.opt(&o, "timeoutSeconds", |r, n| r.int(n)),
            failure_threshold: self.opt(&o, "failureThreshold", |r, n| r.int(n)),
            span: self.doc_span(node),
        })
    }

    /// A Kubernetes `IntOrString` or quantity: an integer or a string, kept as text.
    fn int_or_string(&mut self, node: &Node) -> Option<Sp<String>> {
        match &node.value {
            Value::Int(i) => Some(Sp::new(i.to_string(), self.span(&node.span))),
            Value::Float(f) => Some(Sp::new(f.to_string(), self.span(&node.span))),
            _ => self.string(node),
        }
    }

    /// `cpu`/`memory` → quantity; numbers are kept as text (`cpu: 2`).
    fn quantity_map(&mut self, node: &Node, what: &str) -> Option<SpMap<Sp<String>>> {
        let Value::Map(entries) = &node.value else {
            self.wrong_type(
                node,
                &format!("a mapping ({what})"),
                format!("write {what} as `cpu: \"1\"`, `memory: 8Gi`"),
            );
            return None;
        };
        let mut out = Vec::new();
        let mut ok = true;
        for (k, v) in entries {
            let key = Sp::new(k.name.clone(), self.span(&k.span));
            match self.int_or_string(v) {
                Some(v) => out.push((key, v)),
                None => ok = false,
            }
        }
        ok.then_some(SpMap(out))
    }

    fn demand(&mut self, node: &Node) -> Option<Demand> {
        let o = self.object(node, "`demand`", DEMAND_FIELDS)?;
        let rate = self.req(&o, "rate", |r, n| r.quantity(n, "rate", RATE_UNITS));
        let admission_factor = self.opt(&o, "admissionFactor", |r, n| r.number(n));
        let min_replicas = self.opt(&o, "minReplicas", |r, n| r.int(n));
        let points = self.opt(&o, "points", |r, n| {
            r.list(n, "measured points", |r, n| {
                let o = r.object(n, "a measured point", POINT_FIELDS)?;
                let gpu = r.req(&o, "gpu", |r, n| r.string(n));
                let profile = r.req(&o, "profile", |r, n| r.string(n));
                let batch_size = r.opt(&o, "batchSize", |r, n| r.int(n));
                let processes = r.opt(&o, "processes", |r, n| r.int(n));
                let rps = r.req(&o, "rps", |r, n| r.number(n));
                let latency = r.req(&o, "latency", |r, n| r.quantity(n, "duration", DURATION_UNITS));
                Some(Point {
                    gpu: gpu?,
                    profile: profile?,
                    batch_size,
                    processes,
                    rps: rps?,
                    latency: latency?,
                    span: r.doc_span(n),
                })
            })
        });
        let measurements = self.opt(&o, "measurements", |r, n| r.string(n));
        Some(Demand {
            rate: rate?,
            admission_factor,
            min_replicas,
            points,
            measurements,
            span: self.doc_span(node),
        })
    }

    /// A quantity with a unit; a bare number gets its own hint (the unit is checked later).
    fn quantity(&mut self, node: &Node, what: &str, units: &str) -> Option<Sp<String>> {
        let number = match &node.value {
            Value::Int(i) => Some(i.to_string()),
            Value::Float(f) => Some(f.to_string()),
            _ => None,
        };
        match number {
            Some(n) => {
                self.diags.push(
                    Diagnostic::error(codes::BAD_UNIT, format!("{what} `{n}` has no unit"))
                        .at(self.span(&node.span), "a bare number")
                        .with_help(format!(
                            "write the unit after the number ({units}), for example `{n}{}`",
                            units.split('`').nth(1).unwrap_or("")
                        )),
                );
                None
            }
            _ => self.string(node),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        ARGOCD_FIELDS, BUDGET_FIELDS, CHANGE_POLICY_FIELDS, CLUSTER_FIELDS, COUNT_FIELDS, CURRENT_FIELDS,
        DEFAULTS_FIELDS, DEMAND_FIELDS, DEPLOYMENT_FIELDS, FLUX_FIELDS, INVENTORY_FIELDS, LATENCY_FIELDS,
        MANIFEST_FIELDS, METADATA_FIELDS, MODEL_CACHE_FIELDS, MODEL_FIELDS, OUTPUT_FIELDS,
        POD_SECURITY_FIELDS, POINT_FIELDS, POLICY_FIELDS, POOL_FIELDS, PORT_FIELDS, PROBE_FIELDS,
        PROBES_FIELDS, RESOURCES_FIELDS, STRATEGY_FIELDS, TAINT_FIELDS, TIME_SLICING_FIELDS,
        VALUE_FROM_FIELDS, schema_json,
    };

    /// The reader and the JSON Schema (derived from the raw types) agree on every field name.
    #[test]
    fn field_lists_match_the_schema() {
        let schema: serde_json::Value = serde_json::from_str(&schema_json()).expect("the schema is JSON");
        let props = |v: &serde_json::Value| -> Vec<String> {
            let mut keys: Vec<String> =
                v["properties"].as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
            keys.sort();
            keys
        };
        let sorted = |f: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = f.iter().map(|s| (*s).to_owned()).collect();
            v.sort();
            v
        };
        assert_eq!(props(&schema), sorted(MANIFEST_FIELDS));
        let defs = &schema["$defs"];
        for (def, fields) in [
            ("Metadata", METADATA_FIELDS),
            ("Cluster", CLUSTER_FIELDS),
            ("TimeSlicing", TIME_SLICING_FIELDS),
            ("Output", OUTPUT_FIELDS),
            ("ArgoCd", ARGOCD_FIELDS),
            ("Flux", FLUX_FIELDS),
            ("Inventory", INVENTORY_FIELDS),
            ("Pool", POOL_FIELDS),
            ("CountRange", COUNT_FIELDS),
            ("Taint", TAINT_FIELDS),
            ("CurrentNode", CURRENT_FIELDS),
            ("ModelDefaults", DEFAULTS_FIELDS),
            ("Policy", POLICY_FIELDS),
            ("ChangePolicy", CHANGE_POLICY_FIELDS),
            ("Model", MODEL_FIELDS),
            ("Port", PORT_FIELDS),
            ("Demand", DEMAND_FIELDS),
            ("Point", POINT_FIELDS),
            ("Latency", LATENCY_FIELDS),
            ("DeploymentSettings", DEPLOYMENT_FIELDS),
            ("ContainerResources", RESOURCES_FIELDS),
            ("Probes", PROBES_FIELDS),
            ("Probe", PROBE_FIELDS),
            ("ValueFrom", VALUE_FROM_FIELDS),
            ("ModelCache", MODEL_CACHE_FIELDS),
            ("PodSecurity", POD_SECURITY_FIELDS),
            ("Strategy", STRATEGY_FIELDS),
            ("DisruptionBudget", BUDGET_FIELDS),
        ] {
            assert_eq!(props(&defs[def]), sorted(fields), "fields of `{def}`");
        }
    }
}
