//! The checked `deployment` block: how a model's Deployments run.
//!
//! In: a model's raw `deployment` block, the raw `defaults.deployment` block and the model's
//! checked ports. Out: a [`Deployment`] with every default applied (a model's field wins over
//! the defaults' field; `requests`, `limits` and `valueFrom` merge per key), or diagnostics
//! pushed for every invalid value. The built-in defaults are the constants below; they are
//! documented in `docs/manifest.md` and guarantee that no pod is BestEffort. Some defaults
//! depend on the image family: NVIDIA NIM images (`nvcr.io/nim/…`) get the NIM health probes
//! and the NIM Helm chart's user, group and `fsGroup`; other images get only the probes the
//! manifest declares (a model with a Service and no readiness probe is warned about).

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
/// Images of this registry path are NVIDIA NIM containers.
pub const NIM_IMAGE_PREFIX: &str = "nvcr.io/nim/";
/// `/dev/shm` of a NIM pod: NIM's documentation asks for at least 16 GB (more for multi-GPU
/// models without NVLink); the container runtime's default is 64 MiB.
pub const NIM_SHARED_MEMORY: &str = "16Gi";
/// `/dev/shm` of any other GPU pod (PyTorch workers and NCCL use it).
pub const DEFAULT_SHARED_MEMORY: &str = "1Gi";
/// User, group and `fsGroup` of NIM pods (the NIM Helm chart's `podSecurityContext`).
pub const NIM_USER: u32 = 1000;
/// Seconds a stopping pod has to finish streamed responses (Kubernetes' default is 30).
pub const DEFAULT_GRACE_SECONDS: u32 = 120;
/// What a Deployment's progress deadline allows beyond the startup probe, for pulling an
/// inference image of many GB: with NIM's 30-minute startup allowance the deadline is 3600 s,
/// the NIM Helm chart's `progressDeadlineSeconds`.
pub const IMAGE_PULL_ALLOWANCE_SECONDS: u32 = 1800;

/// Whether `image` is an NVIDIA NIM container (its defaults follow the NIM chart).
pub fn is_nim_image(image: &str) -> bool {
    image.starts_with(NIM_IMAGE_PREFIX)
}

/// How a model's Deployments run, defaults applied. `Default` is the built-in default of a
/// model without ports (requests and limits set, no probes).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    /// Container requests (`cpu`, `memory`), as Kubernetes quantities.
    pub requests: BTreeMap<String, String>,
    /// Container limits (`cpu`, `memory`).
    pub limits: BTreeMap<String, String>,
    /// Environment variables from Secrets and ConfigMaps, by variable name.
    pub value_from: BTreeMap<String, ValueFrom>,
    /// Rolling-update override; `None` lets the renderer derive it from the plan.
    pub strategy: Option<Strategy>,
    pub disruption_budget: Budget,
    /// The image is an NVIDIA NIM container ([`NIM_IMAGE_PREFIX`]).
    pub nim: bool,
    /// What every pod of the model's Deployments carries as it is.
    #[serde(flatten)]
    pub pod: PodSettings,
}

/// The settings of a model's pods that the Deployment template sees as they are, under these
/// names (`readiness`, `security.fs_group`, …): the template's view flattens this value.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PodSettings {
    /// The container's probes; the template sees them as `readiness`, `liveness`, `startup`.
    #[serde(flatten)]
    pub probes: Probes,
    pub image_pull_secrets: Vec<String>,
    pub service_account_name: Option<String>,
    pub model_cache: Option<ModelCache>,
    /// Size of the memory-backed `/dev/shm`; `None` mounts none.
    pub shared_memory: Option<String>,
    /// The pod's user, group and `fsGroup`; unset fields are the image's.
    pub security: PodSecurity,
    pub termination_grace_period_seconds: u32,
    /// An existing PriorityClass (a prerequisite of the bundle).
    pub priority_class_name: Option<String>,
}

/// The container's readiness, liveness and startup probes (`probes` in the manifest).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Probes {
    pub readiness: Option<Probe>,
    pub liveness: Option<Probe>,
    pub startup: Option<Probe>,
}

/// The pod's identity; the Deployment template sees it as it is (`security.fs_group`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PodSecurity {
    pub run_as_user: Option<u32>,
    pub run_as_group: Option<u32>,
    pub fs_group: Option<u32>,
}

impl PodSettings {
    /// Seconds the startup probe allows before the kubelet restarts the container: the initial
    /// delay plus `periodSeconds × failureThreshold` (0 without a startup probe).
    pub fn startup_allowance_seconds(&self) -> u32 {
        self.probes.startup.as_ref().map_or(0, |p| {
            p.initial_delay_seconds.saturating_add(p.period_seconds.saturating_mul(p.failure_threshold))
        })
    }

    /// The Deployment's `progressDeadlineSeconds`: the startup allowance plus
    /// [`IMAGE_PULL_ALLOWANCE_SECONDS`], so a rollout is never reported failed while a pod may
    /// still legitimately be pulling or loading (at least Kubernetes' default of 600 s).
    pub fn progress_deadline_seconds(&self) -> u32 {
        self.startup_allowance_seconds().saturating_add(IMAGE_PULL_ALLOWANCE_SECONDS).max(600)
    }
}

impl Default for Deployment {
    fn default() -> Self {
        Self {
            requests: DEFAULT_REQUESTS.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            limits: DEFAULT_LIMITS.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            value_from: BTreeMap::new(),
            strategy: None,
            disruption_budget: Budget::default(),
            nim: false,
            pod: PodSettings::default(),
        }
    }
}

impl Default for PodSettings {
    fn default() -> Self {
        Self {
            probes: Probes::default(),
            image_pull_secrets: Vec::new(),
            service_account_name: None,
            model_cache: None,
            shared_memory: Some(DEFAULT_SHARED_MEMORY.to_owned()),
            security: PodSecurity::default(),
            termination_grace_period_seconds: DEFAULT_GRACE_SECONDS,
            priority_class_name: None,
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
    /// A directory on the node (`hostPath`, `DirectoryOrCreate`).
    pub host_path: Option<String>,
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

/// The diagnostic for an environment variable name Kubernetes refuses, if `name` is one.
pub(crate) fn env_name_error(name: &Sp<String>) -> Option<Diagnostic> {
    let rule = names::env_name(&name.value).err()?;
    let message = format!("`{}` is not an environment variable name: {rule}", name.value);
    let help = "use letters, digits and `_`, not starting with a digit";
    Some(error(codes::INVALID_NAME, &name.span, message, "not a variable name", help))
}

/// The probe of `kind` (`readiness`, `liveness`, `startup`), field by field the model's, else
/// the defaults'. A NIM image without a declared probe gets the built-in one (on the `http` port
/// or the first port; none without ports); any other image only the probes declared.
fn probe(
    diags: &mut Diagnostics,
    kind: &str,
    model: Option<&raw::Probe>,
    defaults: Option<&raw::Probe>,
    ports: &[Port],
    nim: bool,
) -> Option<Probe> {
    if !nim && model.is_none() && defaults.is_none() {
        return None;
    }
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
        // The built-in probe is HTTP only on a NIM's `http` port (the NIM endpoints); else TCP.
        None if nim && http.is_some_and(|h| h.name == port) => Some(builtin_path.to_owned()),
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

/// The raw deployment blocks of a model: its own, then the defaults'.
#[derive(Clone, Copy)]
struct Layers<'a> {
    model: Option<&'a raw::DeploymentSettings>,
    defaults: Option<&'a raw::DeploymentSettings>,
}

impl<'a> Layers<'a> {
    /// The model's field, else the defaults'.
    fn pick<T>(self, f: impl Fn(&'a raw::DeploymentSettings) -> Option<&'a T>) -> Option<&'a T> {
        self.model.and_then(&f).or_else(|| self.defaults.and_then(&f))
    }

    /// Defaults first, then the model (for fields merged per key).
    fn in_order(self) -> impl Iterator<Item = &'a raw::DeploymentSettings> {
        [self.defaults, self.model].into_iter().flatten()
    }
}

/// Checks a model's `deployment` block against the defaults' and applies the built-in defaults,
/// some of which depend on the model's `image` (NIM or not).
pub fn validate(
    diags: &mut Diagnostics,
    model: Option<&raw::DeploymentSettings>,
    defaults: Option<&raw::DeploymentSettings>,
    ports: &[Port],
    image: &Sp<String>,
) -> Deployment {
    let layers = Layers { model, defaults };
    let nim = is_nim_image(&image.value);
    let mut out = Deployment { nim, ..Deployment::default() };
    let explicit_memory_limit = resources(diags, &mut out, layers);
    probes(diags, &mut out, layers, ports);
    // Only on an otherwise valid manifest: an invalid port or probe is its own error.
    if !ports.is_empty() && out.pod.probes.readiness.is_none() && !diags.has_errors() {
        diags.push(no_readiness_warning(image, nim));
    }
    for s in layers.pick(|d| d.image_pull_secrets.as_ref()).into_iter().flatten() {
        if object_name(diags, s, "Secret") && !out.pod.image_pull_secrets.contains(&s.value) {
            out.pod.image_pull_secrets.push(s.value.clone());
        }
    }
    value_from(diags, &mut out, layers);
    if let Some(a) =
        layers.pick(|d| d.service_account_name.as_ref()).filter(|a| object_name(diags, a, "ServiceAccount"))
    {
        out.pod.service_account_name = Some(a.value.clone());
    }
    if let Some(c) = layers.pick(|d| d.model_cache.as_ref()) {
        out.pod.model_cache = model_cache(diags, c);
    }
    cache_storage(diags, &mut out, layers);
    pod(diags, &mut out, layers, explicit_memory_limit);
    if let Some(s) = layers.pick(|d| d.strategy.as_ref()) {
        out.strategy = strategy(diags, s);
    }
    if let Some(b) = layers.pick(|d| d.disruption_budget.as_ref()) {
        budget(diags, &mut out, b);
    }
    out
}

fn no_readiness_warning(image: &Sp<String>, nim: bool) -> Diagnostic {
    let (why, label) = if nim {
        ("its readiness probe is disabled", "an NVIDIA NIM image whose readiness probe is disabled")
    } else {
        (
            "the manifest declares no readiness probe",
            "not an NVIDIA NIM image: gpuplan knows no health endpoint for it",
        )
    };
    Diagnostic::warning(
        codes::NO_READINESS_PROBE,
        format!("the model's Service sends traffic to pods that may not be ready: {why}"),
    )
    .at(image.span.clone(), label)
    .with_help("declare `deployment.probes.readiness` (an HTTP `path`, or none for a TCP check)")
}

/// Requests and limits, built-in then defaults then the model's, per key; a request above its
/// limit raises the limit (the API server refuses it otherwise). Returns the span of the memory
/// limit the manifest gave, if it gave one.
fn resources(diags: &mut Diagnostics, out: &mut Deployment, layers: Layers<'_>) -> Option<Span> {
    let mut explicit = None;
    for layer in layers.in_order() {
        if let Some(r) = &layer.resources {
            quantities(diags, &mut out.requests, r.requests.as_ref(), "requests");
            quantities(diags, &mut out.limits, r.limits.as_ref(), "limits");
            let memory = r.limits.iter().flat_map(|m| m.0.iter()).find(|(k, _)| k.value == "memory");
            if let Some((_, v)) = memory {
                explicit = Some(v.span.clone());
            }
        }
    }
    for (k, req) in &out.requests {
        if let Some(limit) = out.limits.get(k)
            && quantity_value(req) > quantity_value(limit)
        {
            out.limits.insert(k.clone(), req.clone());
        }
    }
    explicit
}

fn probes(diags: &mut Diagnostics, out: &mut Deployment, layers: Layers<'_>, ports: &[Port]) {
    fn of(l: Option<&raw::DeploymentSettings>) -> Option<&raw::Probes> {
        l.and_then(|d| d.probes.as_ref())
    }
    let (mp, dp) = (of(layers.model), of(layers.defaults));
    let nim = out.nim;
    let mut merged = |kind: &str, pick: fn(&raw::Probes) -> Option<&raw::Probe>| {
        probe(diags, kind, mp.and_then(pick), dp.and_then(pick), ports, nim)
    };
    out.pod.probes.readiness = merged("readiness", |p| p.readiness.as_ref());
    out.pod.probes.liveness = merged("liveness", |p| p.liveness.as_ref());
    out.pod.probes.startup = merged("startup", |p| p.startup.as_ref());
}

fn value_from(diags: &mut Diagnostics, out: &mut Deployment, layers: Layers<'_>) {
    for layer in layers.in_order() {
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
            let optional = v.optional.as_ref().is_some_and(|b| b.value);
            let value = ValueFrom { kind, name: name.value.clone(), key: v.key.value.clone(), optional };
            out.value_from.insert(env.value.clone(), value);
        }
    }
}

fn absolute_path(diags: &mut Diagnostics, path: &Sp<String>, example: &str) -> bool {
    let ok =
        path.value.starts_with('/') && !path.value.contains(':') && !path.value.contains(char::is_whitespace);
    if !ok {
        invalid(
            diags,
            &path.span,
            format!("`{}` is not an absolute path", path.value),
            &format!("write a path such as `{example}`"),
        );
    }
    ok
}

fn model_cache(diags: &mut Diagnostics, c: &raw::ModelCache) -> Option<ModelCache> {
    let mut ok = absolute_path(diags, &c.mount_path, "/opt/nim/.cache");
    if let Some(claim) = &c.claim_name {
        ok &= object_name(diags, claim, "PersistentVolumeClaim");
    }
    if let Some(host) = &c.host_path {
        ok &= absolute_path(diags, host, "/var/lib/nim-cache");
    }
    if let Some(size) = c.size_limit.as_ref().filter(|s| !is_quantity(&s.value)) {
        invalid(
            diags,
            &size.span,
            format!("`{}` is not a Kubernetes quantity", size.value),
            "write a size such as `100Gi`",
        );
        ok = false;
    }
    let kinds = [
        c.claim_name.as_ref().map(|s| &s.span),
        c.host_path.as_ref().map(|s| &s.span),
        c.size_limit.as_ref().map(|s| &s.span),
    ];
    if let Some(second) = kinds.iter().flatten().nth(1) {
        diags.push(error(
            codes::CONFLICTING_FIELDS,
            second,
            "`modelCache` takes one of `claimName`, `hostPath` and `sizeLimit`",
            "a second kind of volume",
            "a claim, a node directory, or an `emptyDir` of `sizeLimit`",
        ));
        ok = false;
    }
    ok.then(|| ModelCache {
        mount_path: c.mount_path.value.clone(),
        claim_name: c.claim_name.as_ref().map(|c| c.value.clone()),
        size_limit: c.size_limit.as_ref().map(|s| s.value.clone()),
        host_path: c.host_path.as_ref().map(|s| s.value.clone()),
    })
}

/// An `emptyDir` cache lives on the node's ephemeral storage: the pod requests its size, so the
/// scheduler never places it where the weights do not fit.
fn cache_storage(diags: &mut Diagnostics, out: &mut Deployment, layers: Layers<'_>) {
    let Some(cache) = &out.pod.model_cache else { return };
    if cache.claim_name.is_some() || cache.host_path.is_some() {
        return;
    }
    match &cache.size_limit {
        Some(size) => {
            let key = "ephemeral-storage".to_owned();
            let below = out.requests.get(&key).is_none_or(|r| quantity_value(r) < quantity_value(size));
            if below {
                out.requests.insert(key, size.clone());
            }
        }
        None => {
            let span = layers.pick(|d| d.model_cache.as_ref()).and_then(|c| c.span.clone());
            let d = Diagnostic::warning(
                codes::CACHE_WITHOUT_SIZE,
                "the model cache is an `emptyDir` without `sizeLimit`: the pods request no ephemeral storage for the weights",
            )
            .with_help("give `sizeLimit` (the weights' size), a `claimName` or a `hostPath`");
            diags.push(match span {
                Some(span) => d.at(span, "an emptyDir of unknown size"),
                None => d,
            });
        }
    }
}

/// Shared memory, pod identity, grace period and priority class.
fn pod(diags: &mut Diagnostics, out: &mut Deployment, layers: Layers<'_>, explicit_limit: Option<Span>) {
    let nim = out.nim;
    if let Some(shm) = layers.pick(|d| d.shared_memory.as_ref()) {
        if !is_quantity(&shm.value) {
            invalid(
                diags,
                &shm.span,
                format!("`{}` is not a Kubernetes quantity", shm.value),
                "write a size such as `16Gi`, or `0` for none",
            );
        } else if quantity_value(&shm.value) == 0.0 {
            out.pod.shared_memory = None;
        } else {
            out.pod.shared_memory = Some(shm.value.clone());
        }
    } else if nim {
        out.pod.shared_memory = Some(NIM_SHARED_MEMORY.to_owned());
    }
    shared_memory_in_limit(diags, out, explicit_limit);
    let field = |f: fn(&raw::PodSecurity) -> Option<&Sp<i128>>| {
        layers
            .model
            .and_then(|d| d.security_context.as_ref())
            .and_then(f)
            .or_else(|| layers.defaults.and_then(|d| d.security_context.as_ref()).and_then(f))
    };
    let nim_default = nim.then_some(NIM_USER);
    let id = |diags: &mut Diagnostics, v: Option<&Sp<i128>>, min: i128| {
        v.map(|v| count(diags, Some(v), 0, min, i128::from(i32::MAX))).or(nim_default)
    };
    out.pod.security = PodSecurity {
        run_as_user: id(diags, field(|s| s.run_as_user.as_ref()), 1),
        run_as_group: id(diags, field(|s| s.run_as_group.as_ref()), 0),
        fs_group: id(diags, field(|s| s.fs_group.as_ref()), 0),
    };
    let grace = layers.pick(|d| d.termination_grace_period_seconds.as_ref());
    out.pod.termination_grace_period_seconds = count(diags, grace, DEFAULT_GRACE_SECONDS, 0, 3600);
    if let Some(p) =
        layers.pick(|d| d.priority_class_name.as_ref()).filter(|p| object_name(diags, p, "PriorityClass"))
    {
        out.pod.priority_class_name = Some(p.value.clone());
    }
}

/// `/dev/shm` pages count against the pod's memory limit: a built-in limit is raised to hold
/// the memory request and the shared memory; a limit the manifest gave that cannot is warned about.
fn shared_memory_in_limit(diags: &mut Diagnostics, out: &mut Deployment, explicit_limit: Option<Span>) {
    let Some(shm) = &out.pod.shared_memory else { return };
    let request = out.requests.get("memory").map_or(0.0, |r| quantity_value(r));
    let needed = request + quantity_value(shm);
    let limit = out.limits.get("memory").map_or(f64::INFINITY, |l| quantity_value(l));
    if limit >= needed {
        return;
    }
    let needed_text = mebibytes(needed);
    match explicit_limit {
        None => {
            out.limits.insert("memory".to_owned(), needed_text);
        }
        Some(span) => diags.push(
            Diagnostic::warning(
                codes::MEMORY_LIMIT_TIGHT,
                format!("the memory limit cannot hold the memory request and `/dev/shm` ({shm}) together"),
            )
            .at(span, "the container is killed when shared memory fills")
            .with_help(format!("raise the limit to at least `{needed_text}`, or lower `sharedMemory`")),
        ),
    }
}

/// A byte count as a whole number of `Gi`, else of `Mi`, rounded up.
fn mebibytes(bytes: f64) -> String {
    let mib = (bytes / 1_048_576.0).ceil() as u64;
    if mib.is_multiple_of(1024) { format!("{}Gi", mib / 1024) } else { format!("{mib}Mi") }
}

fn strategy(diags: &mut Diagnostics, s: &raw::Strategy) -> Option<Strategy> {
    let surge = s.max_surge.as_ref().map(|v| int_or_percent_at(diags, v));
    let unavailable = s.max_unavailable.as_ref().map(|v| int_or_percent_at(diags, v));
    match (surge, unavailable) {
        (Some(Some(surge)), Some(Some(unavailable))) if is_zero(&surge) && is_zero(&unavailable) => {
            invalid_opt(
                diags,
                s.span.as_ref(),
                "`maxSurge` and `maxUnavailable` cannot both be 0".to_owned(),
                "allow one pod of surge or of unavailability",
            );
            None
        }
        (Some(Some(surge)), Some(Some(unavailable))) => {
            Some(Strategy { max_surge: surge, max_unavailable: unavailable })
        }
        (None, _) | (_, None) => {
            invalid_opt(
                diags,
                s.span.as_ref(),
                "`strategy` needs both `maxSurge` and `maxUnavailable`".to_owned(),
                "give both, for example `maxSurge: 1, maxUnavailable: 0`",
            );
            None
        }
        _ => None,
    }
}

fn budget(diags: &mut Diagnostics, out: &mut Deployment, b: &raw::DisruptionBudget) {
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
        _ => invalid_opt(
            diags,
            b.span.as_ref(),
            "`disruptionBudget` needs exactly one of `maxUnavailable` and `minAvailable`".to_owned(),
            "give one of them",
        ),
    }
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
    use super::{
        Deployment, IntOrPercent, NIM_LIVE_PATH, NIM_READY_PATH, NIM_SHARED_MEMORY, NIM_USER, Port,
        int_or_percent, is_quantity, validate,
    };
    use crate::diagnostics::{Diagnostics, Span, codes};
    use crate::manifest::{self as raw, Sp};

    fn sp<T>(value: T) -> Sp<T> {
        let mut sources = crate::diagnostics::Sources::new();
        Sp::new(value, Span::new(sources.add("m.yaml", "x"), 0..1))
    }

    fn http() -> [Port; 1] {
        [Port { name: "http".into(), port: 8000, protocol: "TCP".into() }]
    }

    fn checked(
        d: Option<&raw::DeploymentSettings>,
        ports: &[Port],
        image: &str,
    ) -> (Deployment, Diagnostics) {
        let mut diags = Diagnostics::new();
        let out = validate(&mut diags, d, None, ports, &sp(image.to_owned()));
        (out, diags)
    }

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
        let (d, diags) = checked(None, &[], "ghcr.io/x/y:1");
        assert!(diags.is_empty());
        assert_eq!(d.requests.get("cpu").map(String::as_str), Some("1"));
        assert!(d.requests.contains_key("memory") && d.limits.contains_key("memory"));
        assert!(d.pod.probes.readiness.is_none(), "no ports, no probe");
    }

    #[test]
    fn nim_images_get_the_nim_probes_user_and_shared_memory() {
        let (d, diags) = checked(None, &http(), "nvcr.io/nim/meta/llama:1");
        assert!(diags.is_empty());
        assert_eq!(d.pod.probes.readiness.as_ref().and_then(|p| p.path.as_deref()), Some(NIM_READY_PATH));
        assert_eq!(d.pod.probes.liveness.as_ref().and_then(|p| p.path.as_deref()), Some(NIM_LIVE_PATH));
        assert_eq!(d.pod.probes.startup.as_ref().map(|p| p.failure_threshold), Some(180));
        assert_eq!(d.pod.shared_memory.as_deref(), Some(NIM_SHARED_MEMORY));
        assert_eq!(d.pod.security.fs_group, Some(NIM_USER));
        // 30 minutes of startup probe plus 30 minutes of image pull: the NIM chart's 3600 s.
        assert_eq!((d.pod.startup_allowance_seconds(), d.pod.progress_deadline_seconds()), (1800, 3600));
    }

    #[test]
    fn other_images_get_only_declared_probes_and_a_warning_without_readiness() {
        let (d, diags) = checked(None, &http(), "ghcr.io/example/pii:3");
        assert!(
            d.pod.probes.readiness.is_none()
                && d.pod.probes.liveness.is_none()
                && d.pod.probes.startup.is_none()
        );
        assert!(d.pod.security.run_as_user.is_none());
        assert_eq!(diags.iter().map(|d| d.code).collect::<Vec<_>>(), vec![codes::NO_READINESS_PROBE]);
        let probes = raw::Probes {
            readiness: Some(raw::Probe { path: Some(sp("/ready".to_owned())), ..raw::Probe::default() }),
            ..raw::Probes::default()
        };
        let block = raw::DeploymentSettings { probes: Some(probes), ..raw::DeploymentSettings::default() };
        let (d, diags) = checked(Some(&block), &http(), "ghcr.io/example/pii:3");
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(d.pod.probes.readiness.as_ref().and_then(|p| p.path.as_deref()), Some("/ready"));
        assert!(d.pod.probes.liveness.is_none(), "not declared, not invented");
        assert_eq!(d.pod.progress_deadline_seconds(), 1800);
    }

    #[test]
    fn shared_memory_counts_in_the_memory_limit() {
        let requests = raw::SpMap(vec![(sp("memory".to_owned()), sp("24Gi".to_owned()))]);
        let resources =
            raw::ContainerResources { requests: Some(requests), ..raw::ContainerResources::default() };
        let block = raw::DeploymentSettings {
            resources: Some(resources.clone()),
            ..raw::DeploymentSettings::default()
        };
        let (d, diags) = checked(Some(&block), &http(), "nvcr.io/nim/meta/llama:1");
        assert!(diags.is_empty());
        assert_eq!(d.limits.get("memory").map(String::as_str), Some("40Gi"), "24Gi + 16Gi of /dev/shm");
        let limits = raw::SpMap(vec![(sp("memory".to_owned()), sp("30Gi".to_owned()))]);
        let tight = raw::ContainerResources { limits: Some(limits), ..resources };
        let block = raw::DeploymentSettings { resources: Some(tight), ..raw::DeploymentSettings::default() };
        let (d, diags) = checked(Some(&block), &http(), "nvcr.io/nim/meta/llama:1");
        assert_eq!(d.limits.get("memory").map(String::as_str), Some("30Gi"), "the manifest's limit stays");
        assert_eq!(diags.iter().map(|d| d.code).collect::<Vec<_>>(), vec![codes::MEMORY_LIMIT_TIGHT]);
    }

    #[test]
    fn an_empty_dir_cache_requests_its_ephemeral_storage() {
        let cache = |size: Option<&str>, host: Option<&str>| raw::ModelCache {
            mount_path: sp("/opt/nim/.cache".to_owned()),
            claim_name: None,
            size_limit: size.map(|s| sp(s.to_owned())),
            host_path: host.map(|s| sp(s.to_owned())),
            span: None,
        };
        let block =
            |c| raw::DeploymentSettings { model_cache: Some(c), ..raw::DeploymentSettings::default() };
        let (d, diags) = checked(Some(&block(cache(Some("300Gi"), None))), &http(), "nvcr.io/nim/a/b:1");
        assert!(diags.is_empty());
        assert_eq!(d.requests.get("ephemeral-storage").map(String::as_str), Some("300Gi"));
        let (d, diags) =
            checked(Some(&block(cache(None, Some("/var/lib/nim")))), &http(), "nvcr.io/nim/a/b:1");
        assert!(diags.is_empty() && !d.requests.contains_key("ephemeral-storage"), "a node directory");
        let (_, diags) = checked(Some(&block(cache(None, None))), &http(), "nvcr.io/nim/a/b:1");
        assert_eq!(diags.iter().map(|d| d.code).collect::<Vec<_>>(), vec![codes::CACHE_WITHOUT_SIZE]);
        let (d, diags) = checked(Some(&block(cache(Some("1Gi"), Some("/x")))), &http(), "nvcr.io/nim/a/b:1");
        assert!(d.pod.model_cache.is_none() && diags.has_errors(), "two kinds of volume");
    }
}
