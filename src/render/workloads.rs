//! Workloads: one Deployment per replica group, a PodDisruptionBudget per Deployment with more
//! than one replica, and a Service per model with ports — rendered with minijinja templates.
//!
//! In: the plan's [`ModelPlan`]s, the spec's models and pools, and [`Templates`] (the built-in
//! ones under the top-level `templates/`, embedded, each replaceable by file name). Out:
//! `workloads/<model>.yaml` per model.
//!
//! Guarantees: templates see only the view types below ([`WorkloadView`], [`ServiceView`]),
//! never the manifest; undefined variables are errors (strict mode); every printed value goes
//! through [`yaml_escape`] — auto-escaping is on for every template, user templates included —
//! so a value is always one JSON-quoted scalar (or a JSON flow collection) on one line and can
//! neither add keys nor start a document; each rendered document is parsed again and must be a
//! mapping with `apiVersion` and `kind`; each Deployment's `limits` holds exactly the planned
//! resource and count.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use minijinja::{AutoEscape, Environment, UndefinedBehavior, Value};
use serde::Serialize;

use super::names::{layout_name, resource_slug, unit_name};
use super::nvidia::{managed_labels, node_capacity, node_usage};
use super::objects::{LAYOUT_LABEL, POOL_LABEL, SYNC_WAVE};
use crate::diagnostics::{Diagnostic, Diagnostics, codes};
use crate::plan::day2::previous::PrevGpu;
use crate::plan::{ModelPlan, NodePlan, Plan};
use crate::spec::deployment::{Budget, IntOrPercent, PodSettings, Strategy, ValueFrom};
use crate::spec::{Container, Port, Spec};

/// The built-in templates: (file name, source).
pub const BUILTIN: &[(&str, &str)] = &[
    ("deployment.yaml.j2", include_str!("../../templates/deployment.yaml.j2")),
    ("pod-disruption-budget.yaml.j2", include_str!("../../templates/pod-disruption-budget.yaml.j2")),
    ("service.yaml.j2", include_str!("../../templates/service.yaml.j2")),
];

/// The workload templates, by file name: the built-in ones, some maybe replaced by the user's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Templates {
    sources: BTreeMap<String, String>,
    /// The names the user replaced.
    replaced: std::collections::BTreeSet<String>,
}

impl Default for Templates {
    fn default() -> Self {
        Self::builtin()
    }
}

impl Templates {
    /// The templates embedded in the binary.
    pub fn builtin() -> Self {
        Self {
            sources: BUILTIN.iter().map(|(n, s)| ((*n).to_owned(), (*s).to_owned())).collect(),
            replaced: std::collections::BTreeSet::new(),
        }
    }

    /// Replaces the built-in template `name`. Unknown names are refused (a typo would otherwise
    /// be silently ignored); the error lists the known names.
    pub fn replace(&mut self, name: &str, source: String) -> Result<(), String> {
        match self.sources.get_mut(name) {
            Some(slot) => {
                *slot = source;
                self.replaced.insert(name.to_owned());
                Ok(())
            }
            None => Err(format!(
                "there is no built-in template `{name}`; templates are {}",
                self.sources.keys().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.sources.keys().map(String::as_str)
    }

    /// For each template the user replaced, the names of its view that the built-in template
    /// reads and it does not (sorted): a template written for an older view silently drops what
    /// gpuplan renders since, such as `shared_memory` or `progress_deadline_seconds`. A template
    /// that does not parse is left to the render, which reports it.
    pub fn unused_view_fields(&self) -> Vec<(String, Vec<String>)> {
        let reads = |name: &str, source: &str| {
            let mut env = Environment::new();
            env.add_template_owned(name.to_owned(), source.to_owned()).ok()?;
            let vars = env.get_template(name).ok()?.undeclared_variables(false);
            Some(vars.into_iter().collect::<std::collections::BTreeSet<String>>())
        };
        let mut out = Vec::new();
        for name in &self.replaced {
            let builtin = BUILTIN.iter().find(|(n, _)| n == name).and_then(|(n, s)| reads(n, s));
            let user = self.sources.get(name).and_then(|s| reads(name, s));
            if let (Some(builtin), Some(user)) = (builtin, user) {
                let unused: Vec<String> = builtin.difference(&user).cloned().collect();
                if !unused.is_empty() {
                    out.push((name.clone(), unused));
                }
            }
        }
        out
    }
}

/// What the Deployment template sees: one Deployment of a model.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadView {
    /// The Deployment name (see `docs/bundle.md`, "Workload identity").
    pub name: String,
    pub model: String,
    pub namespace: String,
    pub plan: String,
    /// `image`, `command` and `args`: the model's, as they are.
    #[serde(flatten)]
    pub container: Container,
    pub env: Vec<EnvView>,
    pub ports: Vec<Port>,
    pub replicas: u32,
    /// The extended resource each replica requests, exactly as planned.
    pub resource: String,
    pub per_replica: u32,
    pub pool: String,
    pub gpu: String,
    /// Nodes this Deployment's replicas run on: one named node, or the planned nodes of one
    /// layout of an autoscaled pool.
    pub nodes: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub selector: BTreeMap<String, String>,
    /// Annotations of the Deployment object (not of its pods): resource, pool, Argo CD wave.
    pub annotations: BTreeMap<String, String>,
    pub node_affinity: Vec<MatchExpression>,
    pub spread: Option<SpreadView>,
    pub tolerations: Vec<TolerationView>,
    pub strategy: StrategyView,
    /// Container requests (`cpu`, `memory`).
    pub requests: BTreeMap<String, String>,
    /// Container limits: `cpu`/`memory` as quantities, the planned GPU resource as a count.
    pub limits: BTreeMap<String, serde_json::Value>,
    /// Probes, image pull secrets, service account, model cache, `/dev/shm` size (`None`: not
    /// mounted), the pod's `runAsUser`, `runAsGroup` and `fsGroup` (`security.run_as_user`, …;
    /// each may be none), grace period and PriorityClass: the model's, as they are.
    #[serde(flatten)]
    pub pod: PodSettings,
    /// At least the startup probe's allowance plus an image pull (`docs/bundle.md`, "Every pod").
    pub progress_deadline_seconds: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct EnvView {
    pub name: String,
    /// A literal value, or `None` when the value comes from a Secret or ConfigMap.
    pub value: Option<String>,
    pub value_from: Option<ValueFrom>,
}

#[derive(Clone, Debug, Serialize)]
pub struct MatchExpression {
    pub key: String,
    pub operator: String,
    pub values: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SpreadView {
    pub topology_key: String,
    pub when_unsatisfiable: String,
    pub max_skew: u32,
    pub min_domains: Option<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TolerationView {
    pub key: String,
    pub operator: String,
    pub value: Option<String>,
    pub effect: String,
}

/// A rolling update's parameters: each a count (JSON number) or a percentage (JSON string).
#[derive(Clone, Debug, Serialize)]
pub struct StrategyView {
    pub max_surge: serde_json::Value,
    pub max_unavailable: serde_json::Value,
}

/// What the PodDisruptionBudget template sees: one budget over all of a model's pods.
#[derive(Clone, Debug, Serialize)]
pub struct BudgetView {
    pub name: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub selector: BTreeMap<String, String>,
    /// Exactly one of the two is set (count or percentage).
    pub max_unavailable: Option<serde_json::Value>,
    pub min_available: Option<serde_json::Value>,
}

/// What the Service template sees.
#[derive(Clone, Debug, Serialize)]
pub struct ServiceView {
    pub name: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub selector: BTreeMap<String, String>,
    pub ports: Vec<Port>,
}

/// Escapes any value as one line of YAML: strings JSON-quoted with every control, line-break
/// and invisible separator character written as `\uXXXX`; numbers, booleans and null as JSON;
/// lists and maps as JSON flow collections. JSON is a subset of YAML, and the result never
/// contains a line break, so it cannot add keys or documents wherever a scalar may stand.
pub fn yaml_escape(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_json(&mut out, value);
    out
}

fn write_json(out: &mut String, value: &serde_json::Value) {
    match value {
        serde_json::Value::String(s) => write_quoted(out, s),
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json(out, item);
            }
            out.push(']');
        }
        serde_json::Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_quoted(out, key);
                out.push_str(": ");
                write_json(out, item);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn write_quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{85}') => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn escape_value(value: &Value) -> Result<String, minijinja::Error> {
    let json = serde_json::to_value(value).map_err(|e| {
        minijinja::Error::new(minijinja::ErrorKind::BadSerialization, format!("cannot print value: {e}"))
    })?;
    Ok(yaml_escape(&json))
}

/// The template environment: strict undefined, trimmed blocks, YAML auto-escaping everywhere.
fn environment(templates: &Templates) -> Result<Environment<'static>, Diagnostics> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    if let Ok(syntax) = minijinja::syntax::SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(true)
        .build()
    {
        env.set_syntax(syntax);
    }
    env.set_auto_escape_callback(|_| AutoEscape::Custom("yaml".into()));
    env.set_formatter(|out, _state, value| {
        if value.is_safe() {
            write!(out, "{value}").map_err(minijinja::Error::from)
        } else {
            out.write_str(&escape_value(value)?).map_err(minijinja::Error::from)
        }
    });
    env.add_filter("yaml", |value: Value| -> Result<Value, minijinja::Error> {
        Ok(Value::from_safe_string(escape_value(&value)?))
    });
    let mut diags = Diagnostics::new();
    for (name, source) in &templates.sources {
        if let Err(e) = env.add_template_owned(name.clone(), source.clone()) {
            diags.push(template_error(name, &e));
        }
    }
    if diags.is_empty() { Ok(env) } else { Err(diags) }
}

fn template_error(name: &str, e: &minijinja::Error) -> Diagnostic {
    let line = e.line().map(|l| format!(" at line {l}")).unwrap_or_default();
    let detail = e.detail().map(|d| format!(": {d}")).unwrap_or_default();
    Diagnostic::error(codes::TEMPLATE_ERROR, format!("template `{name}` failed{line}: {}{detail}", e.kind()))
        .with_help("fix the template, or remove it from `--templates` to use the built-in one")
}

/// Renders one template and checks that the text is YAML mappings with `apiVersion` and `kind`.
fn render_checked(env: &Environment<'_>, name: &str, ctx: &impl Serialize) -> Result<String, Diagnostic> {
    let template = env.get_template(name).map_err(|e| template_error(name, &e))?;
    let text = template.render(minijinja::value::Serde(ctx)).map_err(|e| template_error(name, &e))?;
    check_documents(&text).map_err(|problem| {
        Diagnostic::error(
            codes::INVALID_RENDERED_YAML,
            format!("template `{name}` rendered invalid YAML: {problem}"),
        )
        .with_help("check the template's indentation; values are always printed escaped")
    })?;
    Ok(text)
}

/// Parses a rendered text: one or more YAML mappings, each with string `apiVersion` and `kind`.
pub fn check_documents(text: &str) -> Result<Vec<serde_json::Value>, String> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(text).map_err(|e| e.to_string())?;
    if docs.is_empty() {
        return Err("no document".to_owned());
    }
    for doc in &docs {
        let has = |k: &str| doc.get(k).is_some_and(serde_json::Value::is_string);
        if !doc.is_object() || !has("apiVersion") || !has("kind") {
            return Err("a document is not a mapping with `apiVersion` and `kind`".to_owned());
        }
    }
    Ok(docs)
}

/// One Deployment of a model: the replicas of one resource on one named node, or on the
/// planned nodes of one layout of an autoscaled pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    pub name: String,
    pub pool: String,
    pub autoscaled: bool,
    /// The node (named pools) or the planned nodes of the layout (autoscaled pools).
    pub nodes: Vec<String>,
    /// The `gpuplan.io/layout` value of those nodes (autoscaled pools only).
    pub layout: Option<String>,
    pub resource: String,
    pub per_replica: u32,
    pub replicas: u32,
    /// Units of `resource` the node advertises beyond what the plan uses (named nodes).
    pub spare: u32,
    /// Whether the node must be drained before its new labels apply.
    pub must_drain: bool,
}

/// Every Deployment of `model` in the synced part, in a stable order: named nodes (nodes
/// that must drain last), then autoscaled layouts. Per-node counts come from the plan's GPUs;
/// they are checked against the plan's replica groups. Nodes in transition run what they
/// carry ([`synced`]).
pub fn units(spec: &Spec, plan: &Plan, model: &ModelPlan) -> Result<Vec<Unit>, Diagnostic> {
    let mut out = Vec::new();
    let mut totals: BTreeMap<(String, String), u32> = BTreeMap::new();
    for pool in &plan.pools {
        // Autoscaled: (layout, resource, replicas per node, units per replica) → nodes.
        let mut classes: BTreeMap<(String, String, u32, u32), Vec<String>> = BTreeMap::new();
        for node in &pool.nodes {
            for unit in node_units(spec, plan, model, &pool.name, node) {
                *totals.entry((pool.name.clone(), unit.resource.clone())).or_default() += unit.replicas;
                if pool.autoscaled {
                    classes
                        .entry((layout_name(node), unit.resource, unit.replicas, unit.per_replica))
                        .or_default()
                        .push(node.name.clone());
                } else {
                    out.push(unit);
                }
            }
        }
        out.extend(autoscaled_units(model, &pool.name, &classes));
    }
    // The plan's groups and the GPUs must tell the same story.
    let mut planned: BTreeMap<(String, String), u32> = BTreeMap::new();
    for g in &model.groups {
        *planned.entry((g.pool.clone(), g.resource.clone())).or_default() += g.replicas;
    }
    if planned != totals {
        return Err(super::internal(format!(
            "model `{}`: the replica groups of the plan ({planned:?}) differ from its GPUs ({totals:?})",
            model.name
        )));
    }
    // Pools on the DRA backend: one Deployment per pinned replica or shared device instead.
    let out = super::dra::replace_units(spec, plan, model, out);
    let mut out = synced(spec, plan, model, out);
    // Nodes that must drain last: their Deployments wait for the drain, and Argo CD's waves
    // must not hold the other nodes' Deployments behind them.
    out.sort_by(|a, b| (a.autoscaled, a.must_drain, &a.nodes).cmp(&(b.autoscaled, b.must_drain, &b.nodes)));
    Ok(out)
}

/// The Deployments of `model` on one node as `node` describes it (one per resource).
fn node_units(spec: &Spec, plan: &Plan, model: &ModelPlan, pool: &str, node: &NodePlan) -> Vec<Unit> {
    let usage = node_usage(spec, plan, node);
    let capacity = node_capacity(spec, plan, node);
    let mine: Vec<(&String, &(u32, u32))> = usage
        .iter()
        .filter(|((m, _), (n, _))| *m == model.name && *n > 0)
        .map(|((_, r), v)| (r, v))
        .collect();
    let mut out = Vec::new();
    for &(resource, &(replicas, per)) in &mine {
        let used: u32 = usage.iter().filter(|((_, r), _)| r == resource).map(|(_, (n, p))| n * p).sum();
        let name = if mine.len() == 1 {
            unit_name(&[&model.name, &node.name])
        } else {
            unit_name(&[&model.name, &node.name, &resource_slug(resource)])
        };
        out.push(Unit {
            name,
            pool: pool.to_owned(),
            autoscaled: false,
            nodes: vec![node.name.clone()],
            layout: None,
            resource: resource.clone(),
            per_replica: per,
            replicas,
            spare: capacity.get(resource).copied().unwrap_or(0).saturating_sub(used),
            must_drain: node.must_drain,
        });
    }
    out
}

/// One Deployment per layout (and resource, and per-node count) of an autoscaled pool.
fn autoscaled_units(
    model: &ModelPlan,
    pool: &str,
    classes: &BTreeMap<(String, String, u32, u32), Vec<String>>,
) -> Vec<Unit> {
    let several_resources =
        classes.keys().map(|(l, r, _, _)| (l, r)).collect::<std::collections::BTreeSet<_>>().len()
            > classes.keys().map(|(l, ..)| l).collect::<std::collections::BTreeSet<_>>().len();
    let mut out = Vec::new();
    for ((layout, resource, replicas, per), nodes) in classes {
        let same_key = classes.keys().filter(|(l, r, ..)| l == layout && r == resource).count();
        let mut parts = vec![model.name.clone(), pool.to_owned(), layout.clone()];
        if several_resources {
            parts.push(resource_slug(resource));
        }
        if same_key > 1 {
            parts.push(format!("x{replicas}"));
        }
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        out.push(Unit {
            name: unit_name(&parts),
            pool: pool.to_owned(),
            autoscaled: true,
            nodes: nodes.clone(),
            layout: Some(layout.clone()),
            resource: resource.clone(),
            per_replica: *per,
            replicas: replicas * nodes.len() as u32,
            spare: 0,
            must_drain: false,
        });
    }
    out
}

/// A node in transition as the cluster runs it now: the layout, device-plugin config and
/// tenants its `transition.carries` records (`None`: the node is released and runs its plan).
fn carried_node(node: &NodePlan) -> Option<NodePlan> {
    let c = &node.transition.as_ref()?.carries;
    let gpus = c.gpus.iter().map(PrevGpu::as_planned).collect();
    Some(NodePlan {
        name: node.name.clone(),
        mig_config: c.mig_config.clone(),
        device_plugin_config: c.device_plugin_config.clone(),
        must_drain: node.must_drain,
        gpus,
        transition: None,
    })
}

/// The synced part (docs/bundle.md, "What the synced part is"): on a node in transition (held
/// for its drain, or re-laid out on idle GPUs and not yet confirmed), `model` keeps the
/// Deployments of what the node carries — its carried resource and count — instead of the
/// target's, which appear at the compile that releases the node. Carried replicas beyond what
/// the model still needs (the plan's total less what released named nodes run) are surplus
/// and dropped: the nodes drained later keep theirs first (name order), those of the first
/// wave (`plan.changes`) last — a PodDisruptionBudget counts every Deployment's scale, so
/// surplus pods pinned to a node would make its drain wait forever, and the waves count on
/// the replicas of the nodes drained later. DRA pools keep the target's Deployments (not
/// modelled here), and so does a node adopted through the manifest's `current`.
fn synced(spec: &Spec, plan: &Plan, model: &ModelPlan, units: Vec<Unit>) -> Vec<Unit> {
    let dra_pool = |pool: &str| spec.pool(pool).is_some_and(|p| p.dra.is_some());
    // What an adopted node (the manifest's `current`) runs is not gpuplan's: it keeps the
    // target's Deployments, Pending until it is drained and relabelled (they hold no pod that
    // a drain would evict).
    let unknown = |n: &NodePlan| n.gpus.iter().any(|g| g.tenants.iter().any(|t| t.model.is_empty()));
    let moving: BTreeMap<&str, (&str, NodePlan)> = plan
        .pools
        .iter()
        .filter(|p| !p.autoscaled && !dra_pool(&p.name))
        .flat_map(|p| p.nodes.iter().map(move |n| (p.name.as_str(), n)))
        .filter_map(|(pool, n)| Some((n.name.as_str(), (pool, carried_node(n).filter(|c| !unknown(c))?))))
        .collect();
    if moving.is_empty() {
        return units;
    }
    let in_transition: std::collections::BTreeSet<&str> =
        plan.nodes().filter(|n| n.transition.is_some()).map(|n| n.name.as_str()).collect();
    let total: u32 = model.groups.iter().map(|g| g.replicas).sum();
    let (mut out, _): (Vec<Unit>, Vec<Unit>) = units
        .into_iter()
        .partition(|u| u.autoscaled || !u.nodes.iter().any(|n| moving.contains_key(n.as_str())));
    // What runs where the cluster confirmed the layout (named nodes without a transition).
    let released: u32 = out
        .iter()
        .filter(|u| !u.autoscaled && !u.nodes.iter().any(|n| in_transition.contains(n.as_str())))
        .map(|u| u.replicas)
        .sum();
    let first_wave: Vec<&str> = plan
        .changes
        .iter()
        .flat_map(|c| c.waves.first())
        .flat_map(|w| w.nodes.iter().map(String::as_str))
        .collect();
    let mut order: Vec<(&str, &(&str, NodePlan))> = moving.iter().map(|(k, v)| (*k, v)).collect();
    order.sort_by_key(|(name, _)| (first_wave.contains(name), *name));
    let mut keep = total.saturating_sub(released);
    for (_, (pool, node)) in order {
        for mut unit in node_units(spec, plan, model, pool, node) {
            unit.replicas = unit.replicas.min(keep);
            keep -= unit.replicas;
            if unit.replicas > 0 {
                out.push(unit);
            }
        }
    }
    out
}

/// Renders `workloads/<model>.yaml` for every model of the plan.
pub fn render(
    spec: &Spec,
    plan: &Plan,
    templates: &Templates,
) -> Result<BTreeMap<String, String>, Diagnostics> {
    let env = environment(templates)?;
    let mut diags = Diagnostics::new();
    let mut files = BTreeMap::new();
    // Two models must never render the same Deployment (`a-b` on `c` and `a` on `b-c`).
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for model in &plan.models {
        for unit in units(spec, plan, model).unwrap_or_default() {
            if let Some(other) = seen.insert(unit.name.clone(), model.name.clone())
                && other != model.name
            {
                diags.push(
                    Diagnostic::error(
                        codes::UNSAFE_NAME,
                        format!(
                            "models `{other}` and `{}` would both render the Deployment `{}`",
                            model.name, unit.name
                        ),
                    )
                    .with_help("rename one of the models"),
                );
            }
        }
    }
    for model in &plan.models {
        match render_model(spec, plan, &env, model) {
            Ok(text) => {
                files.insert(format!("workloads/{}.yaml", model.name), text);
            }
            Err(d) => diags.extend(d),
        }
    }
    if diags.is_empty() { Ok(files) } else { Err(diags) }
}

fn render_model(
    spec: &Spec,
    plan: &Plan,
    env: &Environment<'_>,
    model: &ModelPlan,
) -> Result<String, Diagnostics> {
    let mut diags = Diagnostics::new();
    let mut docs = Vec::new();
    let Some(source) = spec.model(&model.name) else {
        diags.push(super::internal(format!("model `{}` of the plan is not in the spec", model.name)));
        return Err(diags);
    };
    let units = units(spec, plan, model).map_err(|d| {
        let mut ds = Diagnostics::new();
        ds.push(d);
        ds
    })?;
    let total: u32 = units.iter().map(|u| u.replicas).sum();
    let waves =
        sync_waves(&source.deployment.disruption_budget, source.deployment.strategy.as_ref(), &units, total);
    for (unit, wave) in units.iter().zip(waves) {
        let view = workload_view(spec, plan, source, unit, wave);
        match render_checked(env, "deployment.yaml.j2", &view) {
            Ok(text) => docs.push(text),
            Err(d) => diags.push(d),
        }
    }
    if total > 1 {
        let (max_unavailable, min_available) = match &source.deployment.disruption_budget {
            Budget::MaxUnavailable(v) => (Some(int_or_percent_json(v)), None),
            Budget::MinAvailable(v) => (None, Some(int_or_percent_json(v))),
        };
        let budget = BudgetView {
            name: model.name.clone(),
            namespace: spec.cluster.namespace.clone(),
            labels: model_labels(spec, &model.name),
            selector: model_selector(spec, &model.name),
            max_unavailable,
            min_available,
        };
        match render_checked(env, "pod-disruption-budget.yaml.j2", &budget) {
            Ok(text) => docs.push(text),
            Err(d) => diags.push(d),
        }
    }
    if !source.ports.is_empty() {
        let service = ServiceView {
            name: model.name.clone(),
            namespace: spec.cluster.namespace.clone(),
            labels: model_labels(spec, &model.name),
            selector: model_selector(spec, &model.name),
            ports: source.ports.clone(),
        };
        match render_checked(env, "service.yaml.j2", &service) {
            Ok(text) => docs.push(text),
            Err(d) => diags.push(d),
        }
    }
    if docs.is_empty() {
        return if diags.is_empty() { Ok(String::new()) } else { Err(diags) };
    }
    if diags.is_empty() { Ok(super::join_documents(&docs)) } else { Err(diags) }
}

fn model_labels(spec: &Spec, model: &str) -> BTreeMap<String, String> {
    let mut labels = managed_labels(spec);
    labels.insert("app.kubernetes.io/name".to_owned(), model.to_owned());
    labels
}

/// Selects every pod of a model, whatever Deployment runs it (Service, PodDisruptionBudget).
fn model_selector(spec: &Spec, model: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), model.to_owned()),
        ("gpuplan.io/plan".to_owned(), spec.name.clone()),
    ])
}

fn int_or_percent_json(v: &IntOrPercent) -> serde_json::Value {
    match v {
        IntOrPercent::Int(n) => serde_json::Value::from(*n),
        IntOrPercent::Percent(p) => serde_json::Value::from(format!("{p}%")),
    }
}

/// The Argo CD sync wave of each of a model's Deployments (`units`, in their order). Argo CD
/// applies a wave and waits until it is healthy before the next, so a wave takes Deployments,
/// in order, while the pods their rollouts may take down together ([`rollout_down`]) stay within
/// what the model's PodDisruptionBudget allows of its `total` replicas (at least one Deployment
/// a wave); a Deployment that takes nothing down joins the current wave. Nodes that must drain
/// and autoscaled pools start waves of their own, after the others (the order of `units`).
/// Under the default budget (`maxUnavailable: 1`) that is one Deployment a wave; a model with one
/// replica on each of 20 nodes and `maxUnavailable: 25%` rolls in 4 waves of 5.
fn sync_waves(budget: &Budget, strategy: Option<&Strategy>, units: &[Unit], total: u32) -> Vec<usize> {
    let allowed = total.saturating_sub(budget.min_ready(total)).max(1);
    let mut waves = Vec::with_capacity(units.len());
    let (mut wave, mut down) = (0usize, 0u32);
    let mut class = None;
    for (i, unit) in units.iter().enumerate() {
        let d = rollout_down(strategy, unit);
        let c = (unit.autoscaled, unit.must_drain);
        if i > 0 && (class != Some(c) || down + d > allowed) {
            wave += 1;
            down = 0;
        }
        class = Some(c);
        down += d;
        waves.push(wave);
    }
    waves
}

/// Pods a Deployment's rolling update may take down at once: its strategy's `maxUnavailable`
/// ([`strategy`]), rounded up (Kubernetes rounds it down: this never under-counts), at most its
/// replicas.
fn rollout_down(strategy: Option<&Strategy>, unit: &Unit) -> u32 {
    let max_unavailable = match strategy {
        Some(s) => s.max_unavailable.scaled(unit.replicas),
        None if surges(unit) => 0,
        None => 1,
    };
    max_unavailable.min(unit.replicas)
}

/// The rollout strategy: the manifest's, else surge where the node has spare units of the
/// resource, else replace one pod at a time without surge (a surge pod would find no GPU).
pub fn strategy(source: &crate::spec::Model, unit: &Unit) -> StrategyView {
    match &source.deployment.strategy {
        Some(s) => StrategyView {
            max_surge: int_or_percent_json(&s.max_surge),
            max_unavailable: int_or_percent_json(&s.max_unavailable),
        },
        None if surges(unit) => StrategyView { max_surge: 1.into(), max_unavailable: 0.into() },
        None => StrategyView { max_surge: 0.into(), max_unavailable: 1.into() },
    }
}

/// Whether a Deployment without a manifest strategy surges: a named node with a spare unit of
/// its resource for the new pod.
fn surges(unit: &Unit) -> bool {
    !unit.autoscaled && unit.spare >= unit.per_replica
}

/// Where a Deployment's pods may run: its node (named pools) or its pool and layout with an even
/// spread (autoscaled pools), and the pool's `nodeSelector`.
fn placement(
    pool_spec: Option<&crate::spec::Pool>,
    unit: &Unit,
) -> (Vec<MatchExpression>, Option<SpreadView>) {
    let mut node_affinity = Vec::new();
    let mut spread = None;
    match &unit.layout {
        Some(layout) => {
            // Node names of an autoscaled pool are placeholders: steer by the template's labels,
            // and spread evenly over the nodes of the layout (exact counts: see docs/bundle.md).
            node_affinity.push(MatchExpression {
                key: POOL_LABEL.to_owned(),
                operator: "In".to_owned(),
                values: vec![unit.pool.clone()],
            });
            node_affinity.push(MatchExpression {
                key: LAYOUT_LABEL.to_owned(),
                operator: "In".to_owned(),
                values: vec![layout.clone()],
            });
            if unit.replicas > 1 {
                let nodes = unit.nodes.len() as u32;
                spread = Some(SpreadView {
                    topology_key: "kubernetes.io/hostname".to_owned(),
                    when_unsatisfiable: "DoNotSchedule".to_owned(),
                    max_skew: 1,
                    min_domains: (nodes > 1).then_some(nodes),
                });
            }
        }
        None => node_affinity.push(MatchExpression {
            key: "kubernetes.io/hostname".to_owned(),
            operator: "In".to_owned(),
            values: unit.nodes.clone(),
        }),
    }
    for (key, value) in pool_spec.map(|p| &p.node_selector).into_iter().flatten() {
        node_affinity.push(if value.is_empty() {
            MatchExpression { key: key.clone(), operator: "Exists".to_owned(), values: Vec::new() }
        } else {
            MatchExpression { key: key.clone(), operator: "In".to_owned(), values: vec![value.clone()] }
        });
    }
    (node_affinity, spread)
}

/// The pool's taints, and `nvidia.com/gpu:NoSchedule` (the GPU Operator's usual taint).
fn tolerations(pool_spec: Option<&crate::spec::Pool>) -> Vec<TolerationView> {
    let mut tolerations: Vec<TolerationView> = pool_spec
        .map(|p| {
            p.taints
                .iter()
                .map(|t| TolerationView {
                    key: t.key.clone(),
                    operator: if t.value.is_some() { "Equal" } else { "Exists" }.to_owned(),
                    value: t.value.clone(),
                    effect: t.effect.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    if !tolerations.iter().any(|t| t.key == "nvidia.com/gpu") {
        tolerations.push(TolerationView {
            key: "nvidia.com/gpu".to_owned(),
            operator: "Exists".to_owned(),
            value: None,
            effect: "NoSchedule".to_owned(),
        });
    }
    tolerations
}

/// The view of one Deployment.
pub fn workload_view(
    spec: &Spec,
    plan: &Plan,
    source: &crate::spec::Model,
    unit: &Unit,
    wave: usize,
) -> WorkloadView {
    let name = unit.name.clone();
    let mut labels = model_labels(spec, &source.name);
    labels.insert("app.kubernetes.io/instance".to_owned(), name.clone());
    let selector = BTreeMap::from([("app.kubernetes.io/instance".to_owned(), name.clone())]);

    let pool_plan = plan.pools.iter().find(|p| p.name == unit.pool);
    let pool_spec = spec.pool(&unit.pool);
    let (node_affinity, spread) = placement(pool_spec, unit);
    let tolerations = tolerations(pool_spec);

    let d = &source.deployment;
    let mut env: Vec<EnvView> = source
        .env
        .iter()
        .filter(|(n, _)| !d.value_from.contains_key(n))
        .map(|(n, v)| EnvView { name: n.clone(), value: Some(v.clone()), value_from: None })
        .collect();
    for (n, v) in &d.value_from {
        env.push(EnvView { name: n.clone(), value: None, value_from: Some(v.clone()) });
    }
    let mut limits: BTreeMap<String, serde_json::Value> =
        d.limits.iter().map(|(k, v)| (k.clone(), serde_json::Value::from(v.clone()))).collect();
    limits.insert(unit.resource.clone(), unit.per_replica.into());
    let mut annotations = BTreeMap::from([
        ("gpuplan.io/resource".to_owned(), unit.resource.clone()),
        ("gpuplan.io/pool".to_owned(), unit.pool.clone()),
        // Argo CD syncs wave by wave and waits for each to be healthy: the Deployments of one
        // model roll out one after the other (see docs/bundle.md, "Rollouts").
        (SYNC_WAVE.to_owned(), wave.to_string()),
    ]);
    // A Deployment without probes says why, for scanners (checkov reads these annotations).
    let why = if source.ports.is_empty() {
        "the model has no port to probe"
    } else if !d.nim {
        "the manifest declares no such probe for this image (not an NVIDIA NIM)"
    } else {
        "probes are disabled in the manifest"
    };
    for (i, (check, probe)) in [("CKV_K8S_9", &d.pod.probes.readiness), ("CKV_K8S_8", &d.pod.probes.liveness)]
        .into_iter()
        .enumerate()
    {
        if probe.is_none() {
            annotations.insert(format!("checkov.io/skip{}", i + 1), format!("{check}={why}"));
        }
    }

    WorkloadView {
        name,
        model: source.name.clone(),
        namespace: spec.cluster.namespace.clone(),
        plan: spec.name.clone(),
        container: source.container.clone(),
        env,
        ports: source.ports.clone(),
        replicas: unit.replicas,
        resource: unit.resource.clone(),
        per_replica: unit.per_replica,
        pool: unit.pool.clone(),
        gpu: pool_plan.map(|p| p.gpu.clone()).unwrap_or_default(),
        nodes: unit.nodes.clone(),
        labels,
        selector,
        annotations,
        node_affinity,
        spread,
        tolerations,
        strategy: strategy(source, unit),
        requests: d.requests.clone(),
        limits,
        pod: d.pod.clone(),
        progress_deadline_seconds: d.pod.progress_deadline_seconds(),
    }
}

#[cfg(test)]
mod tests {
    use super::{BUILTIN, Templates, Unit, sync_waves, yaml_escape};
    use crate::spec::deployment::{Budget, IntOrPercent, Strategy};

    fn unit(node: usize, must_drain: bool) -> Unit {
        Unit {
            name: format!("m-n{node}"),
            pool: "p".to_owned(),
            autoscaled: false,
            nodes: vec![format!("n{node}")],
            layout: None,
            resource: "nvidia.com/mig-1g.10gb".to_owned(),
            per_replica: 1,
            replicas: 1,
            spare: 0,
            must_drain,
        }
    }

    #[test]
    fn sync_waves_roll_as_many_deployments_together_as_the_budget_allows() {
        let units: Vec<Unit> = (0..20).map(|i| unit(i, false)).collect();
        let one = sync_waves(&Budget::default(), None, &units, 20);
        assert_eq!(one, (0..20).collect::<Vec<_>>(), "maxUnavailable: 1 rolls one Deployment a wave");
        let quarter = sync_waves(&Budget::MaxUnavailable(IntOrPercent::Percent(25)), None, &units, 20);
        assert_eq!(quarter, (0..20).map(|i| i / 5).collect::<Vec<_>>(), "25% of 20: 4 waves of 5");
        let min_half = sync_waves(&Budget::MinAvailable(IntOrPercent::Percent(50)), None, &units, 20);
        assert_eq!(min_half.iter().max(), Some(&1), "minAvailable 50%: 2 waves of 10");
        // A strategy that takes two pods down per Deployment fills the budget twice as fast.
        let two = Strategy { max_surge: IntOrPercent::Int(0), max_unavailable: IntOrPercent::Int(2) };
        let mut wide = units.clone();
        for u in &mut wide {
            u.replicas = 2;
        }
        let w = sync_waves(&Budget::MaxUnavailable(IntOrPercent::Int(4)), Some(&two), &wide, 40);
        assert_eq!(w, (0..20).map(|i| i / 2).collect::<Vec<_>>());
    }

    #[test]
    fn sync_waves_start_anew_for_nodes_that_must_drain_and_surging_deployments_join() {
        let mut units: Vec<Unit> = (0..4).map(|i| unit(i, i >= 2)).collect();
        let budget = Budget::MaxUnavailable(IntOrPercent::Int(10));
        assert_eq!(sync_waves(&budget, None, &units, 4), [0, 0, 1, 1]);
        units[1].spare = 1; // it surges: nothing goes down
        assert_eq!(sync_waves(&Budget::default(), None, &units, 4), [0, 0, 1, 2]);
    }

    #[test]
    fn escaped_strings_stay_on_one_line_and_quote_everything() {
        let hostile = serde_json::json!("a\"\n---\nkind: Secret\u{2028}x\\");
        let out = yaml_escape(&hostile);
        assert!(!out.contains('\n') && !out.contains('\u{2028}'));
        assert_eq!(out, r#""a\"\u000a---\u000akind: Secret\u2028x\\""#);
        let back: String = serde_saphyr::from_str(&out).expect("escaped scalar parses");
        assert_eq!(back, "a\"\n---\nkind: Secret\u{2028}x\\");
    }

    #[test]
    fn yes_and_no_stay_strings() {
        let out = yaml_escape(&serde_json::json!(["yes", "no", "on"]));
        let back: Vec<serde_json::Value> = serde_saphyr::from_str(&out).expect("parses");
        assert!(back.iter().all(serde_json::Value::is_string));
    }

    #[test]
    fn unknown_template_names_are_refused() {
        let mut t = Templates::builtin();
        assert!(t.replace("deploymnet.yaml.j2", String::new()).is_err());
        assert!(t.replace("deployment.yaml.j2", String::new()).is_ok());
    }

    #[test]
    fn built_in_templates_read_their_whole_view() {
        let mut t = Templates::builtin();
        for (name, source) in BUILTIN {
            t.replace(name, (*source).to_owned()).expect("a built-in name");
        }
        assert_eq!(t.unused_view_fields(), Vec::<(String, Vec<String>)>::new());
        t.replace("service.yaml.j2", "apiVersion: v1\nkind: Service\nmetadata: {name: {{ name }}}\n".into())
            .expect("a built-in name");
        let unused = t.unused_view_fields();
        let expected = ["labels", "namespace", "ports", "selector"].map(str::to_owned).to_vec();
        assert_eq!(unused, vec![("service.yaml.j2".to_owned(), expected)]);
    }
}
