//! The checked `deployment` block: how a model's Deployments run.
//!
//! In: a model's raw `deployment` block, the raw `defaults.deployment` block and the model's
//! checked ports. Out: a [`Deployment`] with every default applied (a model's field wins over
//! the defaults' field; `requests`, `limits` and `valueFrom` merge per key), or diagnostics
//! pushed for every invalid value. The built-in defaults are the constants below; they are
//! documented in `docs/manifest.md` and guarantee that no pod is BestEffort.

use std::collections::BTreeMap;

use serde::Serialize;

use super::names;
use super::{Port, error};
use crate::diagnostics::{Diagnostic, Diagnostics, Span, codes};
use crate::manifest::{self as raw, Sp};

/// Built-in container requests (no pod is BestEffort).
pub const DEFAULT_REQUESTS: &[(&str, &str)] = &[("cpu", "1"), ("memory", "8Gi")];
/// Built-in container limits: memory only (a cpu limit throttles tokenisers for no gain).
pub const DEFAULT_LIMITS: &[(&str, &str)] = &[("memory", "32Gi")];
/// The NVIDIA NIM readiness endpoint.
pub const NIM_READY_PATH: &str = "/v1/health/ready";
/// The NVIDIA NIM liveness endpoint.
pub const NIM_LIVE_PATH: &str = "/v1/health/live";

/// How a model's Deployments run, defaults applied. `Default` is the built-in default of a
/// model without ports (requests and limits set, no probes).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    /// Container requests (`cpu`, `memory`), as Kubernetes quantities.
    pub requests: BTreeMap<String, String>,
    /// Container limits (`cpu`, `memory`).
    pub limits: BTreeMap<String, String>,
    pub readiness: Option<Probe>,
    pub liveness: Option<Probe>,
    pub startup: Option<Probe>,
    pub image_pull_secrets: Vec<String>,
    /// Environment variables from Secrets and ConfigMaps, by variable name.
    pub value_from: BTreeMap<String, ValueFrom>,
    pub service_account_name: Option<String>,
    pub model_cache: Option<ModelCache>,
    /// Rolling-update override; `None` lets the renderer derive it from the plan.
    pub strategy: Option<Strategy>,
    pub disruption_budget: Budget,
}

impl Default for Deployment {
    fn default() -> Self {
        Self {
            requests: DEFAULT_REQUESTS.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            limits: DEFAULT_LIMITS.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            readiness: None,
            liveness: None,
            startup: None,
            image_pull_secrets: Vec::new(),
            value_from: BTreeMap::new(),
            service_account_name: None,
            model_cache: None,
            strategy: None,
            disruption_budget: Budget::default(),
        }
    }
}

/// A probe of the model's container. The Deployment template sees it as it is, so its field
/// names (`probe.initial_delay_seconds`) are part of the templates' interface.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// HTTP path; `None` is a TCP check.
    pub path: Option<String>,
    /// Name of one of the model's ports.
    pub port: String,
    pub initial_delay_seconds: u32,
    pub period_seconds: u32,
    pub timeout_seconds: u32,
    pub failure_threshold: u32,
}

/// Where an environment variable's value comes from; the Deployment template sees it as it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ValueFrom {
    pub kind: ValueSource,
    pub name: String,
    pub key: String,
    pub optional: bool,
}

/// Serialised as the container field that carries the reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ValueSource {
    #[serde(rename = "secretKeyRef")]
    Secret,
    #[serde(rename = "configMapKeyRef")]
    ConfigMap,
}

/// A volume for model weights; the Deployment template sees it as it is (`model_cache.mount_path`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ModelCache {
    pub mount_path: String,
    pub claim_name: Option<String>,
    pub size_limit: Option<String>,
}

/// A Kubernetes `IntOrString`: a count or a percentage (`Percent(25)` is `25%`, at most 100).
/// The one type for both the rendered budgets and the rollout's model of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(u32),
    Percent(u32),
}

impl IntOrPercent {
    /// The value scaled to `of` replicas, rounded up (as the disruption controller does).
    pub fn scaled(&self, of: u32) -> u32 {
        match *self {
            IntOrPercent::Int(n) => n,
            IntOrPercent::Percent(p) => (u64::from(p) * u64::from(of)).div_ceil(100) as u32,
        }
    }
}

impl Serialize for IntOrPercent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            IntOrPercent::Int(n) => serializer.serialize_u32(*n),
            IntOrPercent::Percent(p) => serializer.collect_str(&format_args!("{p}%")),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Strategy {
    pub max_surge: IntOrPercent,
    pub max_unavailable: IntOrPercent,
}

/// The model's PodDisruptionBudget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Budget {
    MaxUnavailable(IntOrPercent),
    MinAvailable(IntOrPercent),
}

impl Default for Budget {
    fn default() -> Self {
        Self::MaxUnavailable(IntOrPercent::Int(1))
    }
}

impl Budget {
    /// The fewest ready replicas the budget allows out of `desired`.
    pub fn min_ready(&self, desired: u32) -> u32 {
        match self {
            Budget::MinAvailable(v) => v.scaled(desired),
            Budget::MaxUnavailable(v) => desired.saturating_sub(v.scaled(desired)),
        }
    }
}

fn invalid_opt(diags: &mut Diagnostics, span: Option<&Span>, message: String, help: &str) {
    let d = Diagnostic::error(codes::INVALID_VALUE, message).with_help(help);
    diags.push(match span {
        Some(span) => d.at(span.clone(), "in this block"),
        None => d,
    });
}

fn invalid(diags: &mut Diagnostics, span: &Span, message: String, help: &str) {
    diags.push(error(codes::INVALID_VALUE, span, message, "invalid here", help));
}

/// Parses `1` or `25%`.
pub fn int_or_percent(text: &str) -> Option<IntOrPercent> {
    if let Some(number) = text.strip_suffix('%') {
        let n: u32 = number.parse().ok()?;
        return (n <= 100 && !number.starts_with('+')).then_some(IntOrPercent::Percent(n));
    }
    if text.starts_with('+') {
        return None;
    }
    text.parse().ok().map(IntOrPercent::Int)
}

/// A Kubernetes resource quantity: digits with an optional fraction and one of the suffixes
/// Kubernetes accepts (`m`, `k`, `M`, `G`, `T`, `P`, `E`, `Ki` … `Ei`).
pub fn is_quantity(text: &str) -> bool {
    let digits_end = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits_end);
    let number_ok = !number.is_empty()
        && number.chars().filter(|c| *c == '.').count() <= 1
        && number.chars().any(|c| c.is_ascii_digit())
        && !number.starts_with('.');
    number_ok
        && matches!(
            suffix,
            "" | "m" | "k" | "M" | "G" | "T" | "P" | "E" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei"
        )
}

fn quantities(
    diags: &mut Diagnostics,
    out: &mut BTreeMap<String, String>,
    map: Option<&raw::SpMap<Sp<String>>>,
    what: &str,
) {
    for (k, v) in map.iter().flat_map(|m| m.0.iter()) {
        if k.value != "cpu" && k.value != "memory" && k.value != "ephemeral-storage" {
            let message = format!("unknown resource `{}` in `{what}`", k.value);
            let help = "give `cpu`, `memory` or `ephemeral-storage`; GPUs come from the plan";
            diags.push(error(
                codes::UNKNOWN_FIELD,
                &k.span,
                message,
                "not a container resource gpuplan sets",
                help,
            ));
            continue;
        }
        if !is_quantity(&v.value) || v.value.trim_start_matches(['0', '.']).is_empty() {
            invalid(
                diags,
                &v.span,
                format!("`{}` is not a positive Kubernetes quantity", v.value),
                "write a quantity such as `500m`, `2`, `16Gi`",
            );
            continue;
        }
        out.insert(k.value.clone(), v.value.clone());
    }
}

fn count(diags: &mut Diagnostics, v: Option<&Sp<i128>>, default: u32, min: i128, max: i128) -> u32 {
    match v {
        None => default,
        Some(v) if (min..=max).contains(&v.value) => u32::try_from(v.value).unwrap_or(default),
        Some(v) => {
            invalid(
                diags,
                &v.span,
                format!("`{}` is out of range", v.value),
                &format!("give {min} to {max}"),
            );
            default
        }
    }
}

/// The probe of `kind` (`readiness`, `liveness`, `startup`): the model's, else the defaults',
/// else the built-in one (on the `http` port or the first port; none without ports).
/// The diagnostic for an environment variable name Kubernetes refuses, if `name` is one.
pub(crate) fn env_name_error(name: &Sp<String>) -> Option<Diagnostic> {
    let rule = names::env_name(&name.value).err()?;
    let message = format!("`{}` is not an environment variable name: {rule}", name.value);
    let help = "use letters, digits and `_`, not starting with a digit";
    Some(error(codes::INVALID_NAME, &name.span, message, "not a variable name", help))
}

fn probe(
    diags: &mut Diagnostics,
    kind: &str,
    model: Option<&raw::Probe>,
    defaults: Option<&raw::Probe>,
    ports: &[Port],
) -> Option<Probe> {
    let http = ports.iter().find(|p| p.name == "http" && p.protocol == "TCP");
    let first_tcp = ports.iter().find(|p| p.protocol == "TCP");
    let builtin_path = match kind {
        "liveness" => NIM_LIVE_PATH,
        _ => NIM_READY_PATH,
    };
    let pick = |f: fn(&raw::Probe) -> bool| model.filter(|p| f(p)).or_else(|| defaults.filter(|p| f(p)));
    let enabled = model
        .and_then(|p| p.enabled.as_ref())
        .or_else(|| defaults.and_then(|p| p.enabled.as_ref()))
        .is_none_or(|b| b.value);
    if !enabled {
        return None;
    }
    let port_sp = pick(|p| p.port.is_some()).and_then(|p| p.port.as_ref());
    let port = match port_sp {
        Some(sp) => match ports.iter().find(|p| p.name == sp.value || p.port.to_string() == sp.value) {
            Some(p) => p.name.clone(),
            None => {
                invalid(
                    diags,
                    &sp.span,
                    format!("the {kind} probe's port `{}` is not one of the model's ports", sp.value),
                    "name one of the model's `ports`",
                );
                return None;
            }
        },
        None => http.or(first_tcp)?.name.clone(),
    };
    let explicit_path = pick(|p| p.path.is_some()).and_then(|p| p.path.clone());
    if let Some(p) =
        explicit_path.as_ref().filter(|p| !p.value.starts_with('/') || p.value.contains(char::is_whitespace))
    {
        invalid(
            diags,
            &p.span,
            format!("`{}` is not an HTTP path", p.value),
            "start the path with `/`, no spaces",
        );
    }
    let path = match explicit_path {
        Some(p) => Some(p.value),
        // The built-in probe is HTTP only on the `http` port (the NIM endpoints); else TCP.
        None if http.is_some_and(|h| h.name == port) => Some(builtin_path.to_owned()),
        None => None,
    };
    let int = |f: fn(&raw::Probe) -> Option<&Sp<i128>>| model.and_then(f).or_else(|| defaults.and_then(f));
    let (period, failures) = match kind {
        // NIM containers download and load weights before they are ready: allow 30 minutes.
        "startup" => (10, 180),
        _ => (10, 3),
    };
    Some(Probe {
        path,
        port,
        initial_delay_seconds: count(diags, int(|p| p.initial_delay_seconds.as_ref()), 0, 0, 3600),
        period_seconds: count(diags, int(|p| p.period_seconds.as_ref()), period, 1, 3600),
        timeout_seconds: count(diags, int(|p| p.timeout_seconds.as_ref()), 5, 1, 3600),
        failure_threshold: count(diags, int(|p| p.failure_threshold.as_ref()), failures, 1, 10000),
    })
}

fn object_name(diags: &mut Diagnostics, name: &Sp<String>, what: &str) -> bool {
    match names::dns_subdomain(&name.value) {
        Ok(()) => true,
        Err(rule) => {
            let message = format!("`{}` is not a valid {what} name: {rule}", name.value);
            let help = "use lowercase letters, digits, `-` and `.`";
            diags.push(error(codes::INVALID_NAME, &name.span, message, "not a Kubernetes object name", help));
            false
        }
    }
}

fn int_or_percent_at(diags: &mut Diagnostics, v: &Sp<String>) -> Option<IntOrPercent> {
    let parsed = int_or_percent(&v.value);
    if parsed.is_none() {
        invalid(
            diags,
            &v.span,
            format!("`{}` is not a count or a percentage", v.value),
            "write `1` or `25%`",
        );
    }
    parsed
}

fn is_zero(v: &IntOrPercent) -> bool {
    match v {
        IntOrPercent::Int(n) => *n == 0,
        IntOrPercent::Percent(p) => *p == 0,
    }
}

/// Checks a model's `deployment` block against the defaults' and applies the built-in defaults.
pub fn validate(
    diags: &mut Diagnostics,
    model: Option<&raw::DeploymentSettings>,
    defaults: Option<&raw::DeploymentSettings>,
    ports: &[Port],
) -> Deployment {
    // Resources: built-in, then defaults, then the model's, per key.
    let mut out = Deployment::default();
    for layer in [defaults, model].into_iter().flatten() {
        if let Some(r) = &layer.resources {
            quantities(diags, &mut out.requests, r.requests.as_ref(), "requests");
            quantities(diags, &mut out.limits, r.limits.as_ref(), "limits");
        }
    }
    // A request above its limit is refused by the API server: raise the default limit instead.
    for (k, req) in &out.requests {
        if let Some(limit) = out.limits.get(k)
            && quantity_value(req) > quantity_value(limit)
        {
            out.limits.insert(k.clone(), req.clone());
        }
    }

    fn probes(l: Option<&raw::DeploymentSettings>) -> Option<&raw::Probes> {
        l.and_then(|d| d.probes.as_ref())
    }
    let (mp, dp) = (probes(model), probes(defaults));
    let mut merged = |kind: &str, pick: fn(&raw::Probes) -> Option<&raw::Probe>| {
        probe(diags, kind, mp.and_then(pick), dp.and_then(pick), ports)
    };
    out.readiness = merged("readiness", |p| p.readiness.as_ref());
    out.liveness = merged("liveness", |p| p.liveness.as_ref());
    out.startup = merged("startup", |p| p.startup.as_ref());

    let secrets = model
        .and_then(|d| d.image_pull_secrets.as_ref())
        .or_else(|| defaults.and_then(|d| d.image_pull_secrets.as_ref()));
    for s in secrets.into_iter().flatten() {
        if object_name(diags, s, "Secret") && !out.image_pull_secrets.contains(&s.value) {
            out.image_pull_secrets.push(s.value.clone());
        }
    }

    for layer in [defaults, model].into_iter().flatten() {
        for (env, v) in layer.value_from.iter().flat_map(|m| m.0.iter()) {
            if let Some(d) = env_name_error(env) {
                diags.push(d);
                continue;
            }
            let (kind, name) = match (&v.secret, &v.config_map) {
                (Some(s), None) => (ValueSource::Secret, s),
                (None, Some(c)) => (ValueSource::ConfigMap, c),
                _ => {
                    let span = v.span.clone().unwrap_or_else(|| env.span.clone());
                    invalid(
                        diags,
                        &span,
                        format!("`{}` needs exactly one of `secret` and `configMap`", env.value),
                        "give `secret: NAME` or `configMap: NAME`",
                    );
                    continue;
                }
            };
            if !object_name(diags, name, "Secret or ConfigMap") {
                continue;
            }
            if names::dns_subdomain(&v.key.value.to_ascii_lowercase()).is_err()
                && !v.key.value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                invalid(
                    diags,
                    &v.key.span,
                    format!("`{}` is not a valid key", v.key.value),
                    "use letters, digits, `-`, `_` and `.`",
                );
                continue;
            }
            out.value_from.insert(
                env.value.clone(),
                ValueFrom {
                    kind,
                    name: name.value.clone(),
                    key: v.key.value.clone(),
                    optional: v.optional.as_ref().is_some_and(|b| b.value),
                },
            );
        }
    }

    let account = model
        .and_then(|d| d.service_account_name.as_ref())
        .or_else(|| defaults.and_then(|d| d.service_account_name.as_ref()));
    if let Some(a) = account.filter(|a| object_name(diags, a, "ServiceAccount")) {
        out.service_account_name = Some(a.value.clone());
    }

    let cache =
        model.and_then(|d| d.model_cache.as_ref()).or_else(|| defaults.and_then(|d| d.model_cache.as_ref()));
    if let Some(c) = cache {
        let mut ok = true;
        if !c.mount_path.value.starts_with('/') || c.mount_path.value.contains(':') {
            invalid(
                diags,
                &c.mount_path.span,
                format!("`{}` is not an absolute path", c.mount_path.value),
                "write a path such as `/opt/nim/.cache`",
            );
            ok = false;
        }
        if let Some(claim) = &c.claim_name {
            ok &= object_name(diags, claim, "PersistentVolumeClaim");
        }
        if let Some(size) = &c.size_limit
            && !is_quantity(&size.value)
        {
            invalid(
                diags,
                &size.span,
                format!("`{}` is not a Kubernetes quantity", size.value),
                "write a size such as `100Gi`",
            );
            ok = false;
        }
        if ok {
            out.model_cache = Some(ModelCache {
                mount_path: c.mount_path.value.clone(),
                claim_name: c.claim_name.as_ref().map(|c| c.value.clone()),
                size_limit: c.size_limit.as_ref().map(|s| s.value.clone()),
            });
        }
    }

    let strategy =
        model.and_then(|d| d.strategy.as_ref()).or_else(|| defaults.and_then(|d| d.strategy.as_ref()));
    if let Some(s) = strategy {
        let surge = s.max_surge.as_ref().map(|v| int_or_percent_at(diags, v));
        let unavailable = s.max_unavailable.as_ref().map(|v| int_or_percent_at(diags, v));
        if let (Some(Some(surge)), Some(Some(unavailable))) = (surge.clone(), unavailable.clone()) {
            if is_zero(&surge) && is_zero(&unavailable) {
                invalid_opt(
                    diags,
                    s.span.as_ref(),
                    "`maxSurge` and `maxUnavailable` cannot both be 0".to_owned(),
                    "allow one pod of surge or of unavailability",
                );
            } else {
                out.strategy = Some(Strategy { max_surge: surge, max_unavailable: unavailable });
            }
        } else if surge.is_none() || unavailable.is_none() {
            invalid_opt(
                diags,
                s.span.as_ref(),
                "`strategy` needs both `maxSurge` and `maxUnavailable`".to_owned(),
                "give both, for example `maxSurge: 1, maxUnavailable: 0`",
            );
        }
    }

    let budget = model
        .and_then(|d| d.disruption_budget.as_ref())
        .or_else(|| defaults.and_then(|d| d.disruption_budget.as_ref()));
    if let Some(b) = budget {
        match (&b.max_unavailable, &b.min_available) {
            (Some(v), None) => {
                if let Some(v) = int_or_percent_at(diags, v) {
                    out.disruption_budget = Budget::MaxUnavailable(v);
                }
            }
            (None, Some(v)) => {
                if let Some(v) = int_or_percent_at(diags, v) {
                    out.disruption_budget = Budget::MinAvailable(v);
                }
            }
            _ => {
                invalid_opt(
                    diags,
                    b.span.as_ref(),
                    "`disruptionBudget` needs exactly one of `maxUnavailable` and `minAvailable`".to_owned(),
                    "give one of them",
                );
            }
        }
    }
    out
}

/// A quantity's value in base units (for comparing a request with its limit).
fn quantity_value(text: &str) -> f64 {
    let digits_end = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits_end);
    let n: f64 = number.parse().unwrap_or(0.0);
    let factor = match suffix {
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1_048_576.0,
        "Gi" => 1_073_741_824.0,
        "Ti" => 1_099_511_627_776.0,
        "Pi" => 1_125_899_906_842_624.0,
        "Ei" => 1_152_921_504_606_846_976.0,
        _ => 1.0,
    };
    n * factor
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_follow_kubernetes() {
        for ok in ["1", "500m", "8Gi", "1.5", "100M"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "Gi", "1GiB", "-1", ".5", "1..2", "8 Gi"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }

    #[test]
    fn counts_and_percentages() {
        assert_eq!(int_or_percent("1"), Some(IntOrPercent::Int(1)));
        assert_eq!(int_or_percent("25%"), Some(IntOrPercent::Percent(25)));
        assert_eq!(int_or_percent("125%"), None);
        assert_eq!(int_or_percent("x"), None);
    }

    #[test]
    fn defaults_are_never_best_effort() {
        let mut diags = Diagnostics::new();
        let d = validate(&mut diags, None, None, &[]);
        assert!(diags.is_empty());
        assert_eq!(d.requests.get("cpu").map(String::as_str), Some("1"));
        assert!(d.requests.contains_key("memory") && d.limits.contains_key("memory"));
        assert!(d.readiness.is_none(), "no ports, no probe");
    }

    #[test]
    fn nim_probes_on_the_http_port() {
        let mut diags = Diagnostics::new();
        let ports = [Port { name: "http".into(), port: 8000, protocol: "TCP".into() }];
        let d = validate(&mut diags, None, None, &ports);
        assert_eq!(d.readiness.as_ref().and_then(|p| p.path.as_deref()), Some(NIM_READY_PATH));
        assert_eq!(d.liveness.as_ref().and_then(|p| p.path.as_deref()), Some(NIM_LIVE_PATH));
        assert_eq!(d.startup.as_ref().map(|p| p.failure_threshold), Some(180));
    }
}
