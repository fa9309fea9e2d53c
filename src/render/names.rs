//! Name checks: every name that ends up in a Kubernetes object name, a label value or a file name.
//!
//! In: the spec and the plan. Out: `unsafe-name` diagnostics for each name that Kubernetes would
//! reject or that could escape the output directory or inject YAML; names are never rewritten
//! silently. Free-text values (env values, args) are not checked here: they are escaped when
//! printed. The rules themselves are [`crate::spec::names`]'s (one definition for the manifest's
//! checks and these). Also gives the stable derived names ([`layout_name`]; Deployment names come
//! from `workloads::units`).

use crate::diagnostics::{Diagnostic, Diagnostics, Span, codes};
use crate::plan::{NodePlan, Plan};
use crate::spec::names::{
    configmap_key, dns_label, dns_subdomain, env_name, extended_resource, image, label_key, label_name,
    label_value, port_name, suggest_label,
};
use crate::spec::{Model, Pool, Spec};

/// The value of the `gpuplan.io/layout` label: the node's mig config, plus its device-plugin
/// config when that has another name. Shortened with a stable hash to fit 63 characters.
pub(super) fn layout_name(node: &NodePlan) -> String {
    let full = if node.mig_config == node.device_plugin_config {
        node.mig_config.clone()
    } else {
        format!("{}.{}", node.mig_config, node.device_plugin_config)
    };
    shorten(&full, 63)
}

/// A Deployment name from its parts (`<model>-<node>`, `<model>-<node>-<resource>`,
/// `<model>-<pool>-<layout>`), joined with `-` and kept within 63 characters by [`shorten`].
pub(super) fn unit_name(parts: &[&str]) -> String {
    shorten(&parts.join("-"), 63)
}

/// The resource's name part made a DNS label by the one label sanitiser, [`suggest_label`]:
/// `nvidia.com/mig-3g.40gb` → `mig-3g-40gb`; `nvidia.com/gpu.shared` → `gpu-shared`.
pub(super) fn resource_slug(resource: &str) -> String {
    suggest_label(resource.rsplit('/').next().unwrap_or(resource))
}

/// Keeps names within `max` characters: a long name keeps its head and gets an 8-hex-digit FNV
/// hash of the whole name, so distinct long names stay distinct and the result is stable.
pub(super) fn shorten(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_owned();
    }
    let hash = crate::spec::names::stable_hash(name.as_bytes());
    let head: String = name.chars().take(max.saturating_sub(9)).collect();
    format!("{}-{hash:08x}", head.trim_end_matches(['-', '.', '_']))
}

fn unsafe_name(span: Option<&Span>, what: &str, name: &str, rule: &str) -> Diagnostic {
    let d = Diagnostic::error(
        codes::UNSAFE_NAME,
        format!("{what} `{}` cannot be used in Kubernetes", name.escape_debug()),
    )
    .with_help(format!("use {rule}"));
    match span {
        Some(span) => d.at(span.clone(), format!("this {what} is unsafe")),
        None => d,
    }
}

const DNS_LABEL: &str =
    "lowercase letters, digits and `-`, starting and ending with a letter or digit, at most 63 characters";
const LABEL_VALUE: &str =
    "letters, digits, `.`, `_` and `-`, starting and ending with a letter or digit, at most 63 characters";
const DNS_SUBDOMAIN: &str = "a DNS subdomain: lowercase letters, digits, `-` and `.`";
const EXTENDED_RESOURCE: &str = "an extended resource name such as `nvidia.com/mig-3g.40gb`";

/// Pushes an `unsafe-name` diagnostic for every name the bundle would use and Kubernetes or the
/// file system would misread.
pub(super) fn check(spec: &Spec, plan: &Plan, diags: &mut Diagnostics) {
    check_cluster(spec, diags);
    for model in &spec.models {
        check_model(model, diags);
    }
    for pool in &spec.pools {
        check_pool(pool, diags);
    }
    check_plan(plan, diags);
}

/// The namespaces, the plan name and the GitOps wrappers' names.
fn check_cluster(spec: &Spec, diags: &mut Diagnostics) {
    for (what, value) in
        [("namespace", &spec.cluster.namespace), ("operator namespace", &spec.cluster.operator_namespace)]
    {
        if dns_label(value).is_err() {
            diags.push(unsafe_name(None, what, value, DNS_LABEL));
        }
    }
    // The plan name prefixes object names (`gpuplan-<name>`) and is a label value.
    if dns_label(&spec.name).is_err() || spec.name.len() > 40 {
        diags.push(unsafe_name(
            None,
            "plan name",
            &spec.name,
            "lowercase letters, digits and `-`, at most 40 characters",
        ));
    }
    if let Some(argo) = spec.cluster.output.argocd.as_ref().filter(|a| dns_label(&a.namespace).is_err()) {
        diags.push(unsafe_name(None, "Argo CD namespace", &argo.namespace, DNS_LABEL));
    }
    if let Some(flux) = &spec.cluster.output.flux {
        if dns_label(&flux.namespace).is_err() {
            diags.push(unsafe_name(None, "Flux namespace", &flux.namespace, DNS_LABEL));
        }
        if dns_subdomain(&flux.source_name).is_err() {
            diags.push(unsafe_name(None, "Flux source name", &flux.source_name, DNS_LABEL));
        }
    }
}

/// A model's name, image, environment variable names and ports.
fn check_model(model: &Model, diags: &mut Diagnostics) {
    let span = model.span.as_ref();
    // A model name becomes a Deployment, a Service (RFC 1035: starts with a letter), a
    // container and a file name.
    if dns_label(&model.name).is_err() || !model.name.starts_with(|c: char| c.is_ascii_lowercase()) {
        diags.push(unsafe_name(
            span,
            "model name",
            &model.name,
            &format!("{DNS_LABEL}, starting with a letter"),
        ));
    }
    if image(&model.container.image).is_err() {
        diags.push(unsafe_name(
            span,
            "image",
            &model.container.image,
            "an image reference without spaces or control characters",
        ));
    }
    for (name, _) in &model.env {
        if env_name(name).is_err() {
            diags.push(unsafe_name(
                span,
                "environment variable name",
                name,
                "letters, digits, `-`, `.` and `_`, not starting with a digit",
            ));
        }
    }
    for port in &model.ports {
        if port_name(&port.name).is_err() {
            diags.push(unsafe_name(
                span,
                "port name",
                &port.name,
                "at most 15 lowercase letters, digits and `-`, with at least one letter",
            ));
        }
        if !matches!(port.protocol.as_str(), "TCP" | "UDP" | "SCTP") {
            diags.push(unsafe_name(span, "port protocol", &port.protocol, "`TCP`, `UDP` or `SCTP`"));
        }
    }
}

/// A pool's name, node selector and taints.
fn check_pool(pool: &Pool, diags: &mut Diagnostics) {
    let span = pool.span.as_ref();
    if dns_label(&pool.name).is_err() {
        diags.push(unsafe_name(span, "pool name", &pool.name, DNS_LABEL));
    }
    for (key, value) in &pool.node_selector {
        if label_key(key).is_err() || label_value(value).is_err() {
            diags.push(unsafe_name(
                span,
                "node selector",
                &format!("{key}={value}"),
                "a label key and value Kubernetes accepts",
            ));
        }
    }
    for taint in &pool.taints {
        let value_ok = taint.value.as_deref().is_none_or(|v| label_value(v).is_ok());
        if label_key(&taint.key).is_err()
            || !value_ok
            || !matches!(taint.effect.as_str(), "NoSchedule" | "PreferNoSchedule" | "NoExecute")
        {
            diags.push(unsafe_name(
                span,
                "taint",
                &taint.key,
                "a label key, a label value and the effect `NoSchedule`, `PreferNoSchedule` or `NoExecute`",
            ));
        }
    }
}

/// The names the plan adds: nodes, config names and resources.
fn check_plan(plan: &Plan, diags: &mut Diagnostics) {
    for node in plan.pools.iter().flat_map(|pool| &pool.nodes) {
        if dns_subdomain(&node.name).is_err() {
            diags.push(unsafe_name(None, "node name", &node.name, DNS_SUBDOMAIN));
        }
        for (what, value) in
            [("mig config name", &node.mig_config), ("device-plugin config name", &node.device_plugin_config)]
        {
            if label_name(value).is_err() {
                diags.push(unsafe_name(None, what, value, LABEL_VALUE));
            }
        }
    }
    for model in &plan.models {
        for group in &model.groups {
            if extended_resource(&group.resource).is_err() {
                diags.push(unsafe_name(None, "resource", &group.resource, EXTENDED_RESOURCE));
            }
            if group.resource.ends_with(".shared") && group.per_replica != 1 {
                diags.push(super::internal(format!(
                    "model `{}` asks for {} replicas of the shared resource `{}`; a time-sliced request is always 1",
                    model.name, group.per_replica, group.resource
                )));
            }
        }
    }
    for name in plan.mig_configs.keys().chain(plan.device_plugin_configs.keys()) {
        if configmap_key(name).is_err() || label_name(name).is_err() {
            diags.push(unsafe_name(None, "config name", name, LABEL_VALUE));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{resource_slug, shorten};

    #[test]
    fn shortened_names_are_stable_distinct_and_short() {
        let a = shorten(&"x".repeat(80), 63);
        let b = shorten(&format!("{}y", "x".repeat(79)), 63);
        assert!(a.len() <= 63 && b.len() <= 63);
        assert_ne!(a, b);
        assert_eq!(a, shorten(&"x".repeat(80), 63));
    }

    #[test]
    fn resource_slugs_are_dns_labels() {
        assert_eq!(resource_slug("nvidia.com/mig-3g.40gb"), "mig-3g-40gb");
        assert_eq!(resource_slug("nvidia.com/gpu.shared"), "gpu-shared");
        assert_eq!(resource_slug("nvidia.com/mig-1g.10gb+me"), "mig-1g-10gb-me");
    }
}
