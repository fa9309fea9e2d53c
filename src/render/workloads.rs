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

use super::names::{deployment_name, layout_name};
use super::nvidia::managed_labels;
use super::objects::{LAYOUT_LABEL, POOL_LABEL};
use crate::diagnostics::{Diagnostic, Diagnostics, codes};
use crate::plan::{ModelPlan, Plan, ReplicaGroup};
use crate::spec::{Spec, Spread};

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
}

impl Default for Templates {
    fn default() -> Self {
        Self::builtin()
    }
}

impl Templates {
    /// The templates embedded in the binary.
    pub fn builtin() -> Self {
        Self { sources: BUILTIN.iter().map(|(n, s)| ((*n).to_owned(), (*s).to_owned())).collect() }
    }

    /// Replaces the built-in template `name`. Unknown names are refused (a typo would otherwise
    /// be silently ignored); the error lists the known names.
    pub fn replace(&mut self, name: &str, source: String) -> Result<(), String> {
        match self.sources.get_mut(name) {
            Some(slot) => {
                *slot = source;
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
}

/// What the Deployment and PodDisruptionBudget templates see.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadView {
    /// The Deployment (and PodDisruptionBudget) name.
    pub name: String,
    pub model: String,
    pub namespace: String,
    pub plan: String,
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub env: Vec<EnvView>,
    pub ports: Vec<PortView>,
    pub replicas: u32,
    /// The extended resource each replica requests, exactly as planned.
    pub resource: String,
    pub per_replica: u32,
    pub pool: String,
    pub gpu: String,
    /// Nodes the plan put this group on.
    pub nodes: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub selector: BTreeMap<String, String>,
    pub node_affinity: Vec<MatchExpression>,
    pub spread: Option<SpreadView>,
    pub tolerations: Vec<TolerationView>,
}

#[derive(Clone, Debug, Serialize)]
pub struct EnvView {
    pub name: String,
    pub value: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct PortView {
    pub name: String,
    pub port: u16,
    pub protocol: String,
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
}

#[derive(Clone, Debug, Serialize)]
pub struct TolerationView {
    pub key: String,
    pub operator: String,
    pub value: Option<String>,
    pub effect: String,
}

/// What the Service template sees.
#[derive(Clone, Debug, Serialize)]
pub struct ServiceView {
    pub name: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub selector: BTreeMap<String, String>,
    pub ports: Vec<PortView>,
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

/// Renders `workloads/<model>.yaml` for every model of the plan.
pub fn render(
    spec: &Spec,
    plan: &Plan,
    templates: &Templates,
) -> Result<BTreeMap<String, String>, Diagnostics> {
    let env = environment(templates)?;
    let mut diags = Diagnostics::new();
    let mut files = BTreeMap::new();
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
    let views: Vec<WorkloadView> =
        (0..model.groups.len()).filter_map(|i| workload_view(spec, plan, model, i)).collect();
    if views.len() != model.groups.len() {
        diags.push(super::internal(format!("model `{}` of the plan is not in the spec", model.name)));
    }
    for view in &views {
        for (template, wanted) in
            [("deployment.yaml.j2", true), ("pod-disruption-budget.yaml.j2", view.replicas > 1)]
        {
            if wanted {
                match render_checked(env, template, view) {
                    Ok(text) => docs.push(text),
                    Err(d) => diags.push(d),
                }
            }
        }
    }
    if let Some(view) = views.first().filter(|v| !v.ports.is_empty()) {
        let service = ServiceView {
            name: view.model.clone(),
            namespace: view.namespace.clone(),
            labels: model_labels(spec, &view.model),
            selector: model_labels(spec, &view.model),
            ports: view.ports.clone(),
        };
        match render_checked(env, "service.yaml.j2", &service) {
            Ok(text) => docs.push(text),
            Err(d) => diags.push(d),
        }
    }
    if diags.is_empty() { Ok(super::join_documents(&docs)) } else { Err(diags) }
}

fn model_labels(spec: &Spec, model: &str) -> BTreeMap<String, String> {
    let mut labels = managed_labels(spec);
    labels.insert("app.kubernetes.io/name".to_owned(), model.to_owned());
    labels
}

/// The view of one replica group; `None` when the model is not in the spec.
pub fn workload_view(spec: &Spec, plan: &Plan, model: &ModelPlan, index: usize) -> Option<WorkloadView> {
    let source = spec.model(&model.name)?;
    let group: &ReplicaGroup = model.groups.get(index)?;
    let name = deployment_name(&model.name, &model.groups, index);
    let mut labels = model_labels(spec, &model.name);
    labels.insert("app.kubernetes.io/instance".to_owned(), name.clone());
    let selector = BTreeMap::from([("app.kubernetes.io/instance".to_owned(), name.clone())]);

    let pool_plan = plan.pools.iter().find(|p| p.name == group.pool);
    let pool_spec = spec.pool(&group.pool);
    let autoscaled = pool_plan.is_some_and(|p| p.autoscaled);
    let mut node_affinity = Vec::new();
    if autoscaled {
        // Node names of an autoscaled pool are placeholders: steer by the template's labels.
        let mut layouts: Vec<String> = pool_plan
            .map(|p| p.nodes.iter().filter(|n| group.nodes.contains(&n.name)).map(layout_name).collect())
            .unwrap_or_default();
        layouts.sort();
        layouts.dedup();
        node_affinity.push(MatchExpression {
            key: POOL_LABEL.to_owned(),
            operator: "In".to_owned(),
            values: vec![group.pool.clone()],
        });
        node_affinity.push(MatchExpression {
            key: LAYOUT_LABEL.to_owned(),
            operator: "In".to_owned(),
            values: layouts,
        });
    } else {
        node_affinity.push(MatchExpression {
            key: "kubernetes.io/hostname".to_owned(),
            operator: "In".to_owned(),
            values: group.nodes.clone(),
        });
    }
    for (key, value) in pool_spec.map(|p| &p.node_selector).into_iter().flatten() {
        node_affinity.push(if value.is_empty() {
            MatchExpression { key: key.clone(), operator: "Exists".to_owned(), values: Vec::new() }
        } else {
            MatchExpression { key: key.clone(), operator: "In".to_owned(), values: vec![value.clone()] }
        });
    }

    let spread = match source.spread {
        _ if group.replicas < 2 => None,
        Spread::None => None,
        Spread::Node => Some(SpreadView {
            topology_key: "kubernetes.io/hostname".to_owned(),
            when_unsatisfiable: "DoNotSchedule".to_owned(),
        }),
        // Kubernetes has no GPU topology key: the plan already put the replicas on distinct
        // GPUs; spreading over nodes where possible is the best the scheduler can add.
        Spread::Gpu => Some(SpreadView {
            topology_key: "kubernetes.io/hostname".to_owned(),
            when_unsatisfiable: "ScheduleAnyway".to_owned(),
        }),
    };

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

    Some(WorkloadView {
        name,
        model: model.name.clone(),
        namespace: spec.cluster.namespace.clone(),
        plan: spec.name.clone(),
        image: source.image.clone(),
        command: source.command.clone(),
        args: source.args.clone(),
        env: source.env.iter().map(|(n, v)| EnvView { name: n.clone(), value: v.clone() }).collect(),
        ports: source
            .ports
            .iter()
            .map(|p| PortView { name: p.name.clone(), port: p.port, protocol: p.protocol.clone() })
            .collect(),
        replicas: group.replicas,
        resource: group.resource.clone(),
        per_replica: group.per_replica,
        pool: group.pool.clone(),
        gpu: pool_plan.map(|p| p.gpu.clone()).unwrap_or_default(),
        nodes: group.nodes.clone(),
        labels,
        selector,
        node_affinity,
        spread,
        tolerations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
