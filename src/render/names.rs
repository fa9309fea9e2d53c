//! Name checks: every name that ends up in a Kubernetes object name, a label value or a file name.
//!
//! In: the spec and the plan. Out: `unsafe-name` diagnostics for each name that Kubernetes would
//! reject or that could escape the output directory or inject YAML; names are never rewritten
//! silently. Free-text values (env values, args) are not checked here: they are escaped when
//! printed. Also gives the stable derived names ([`layout_name`]; Deployment names come from `workloads::units`).

use crate::diagnostics::{Diagnostic, Diagnostics, Span, codes};
use crate::plan::{NodePlan, Plan};
use crate::spec::Spec;

/// RFC 1123 label: lowercase alphanumerics and `-`, alphanumeric at both ends, at most 63.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// RFC 1123 subdomain: dot-separated labels, at most 253 characters (node names).
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// A Kubernetes label value: at most 63 of `[A-Za-z0-9._-]`, alphanumeric at both ends.
pub fn is_label_value(s: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && alnum(s.chars().next())
        && alnum(s.chars().last())
}

/// A ConfigMap key: `[-._a-zA-Z0-9]+`, not `.` or `..`, at most 253.
pub fn is_configmap_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s != "."
        && s != ".."
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// An environment variable name as Kubernetes accepts it: `[-._a-zA-Z][-._a-zA-Z0-9]*`.
pub fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '-' | '.' | '_'))
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
}

/// An image reference: printable ASCII without spaces (kubelet rejects the rest anyway).
pub fn is_image(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic())
}

/// The value of the `gpuplan.io/layout` label: the node's mig config, plus its device-plugin
/// config when that has another name. Shortened with a stable hash to fit 63 characters.
pub fn layout_name(node: &NodePlan) -> String {
    let full = if node.mig_config == node.device_plugin_config {
        node.mig_config.clone()
    } else {
        format!("{}.{}", node.mig_config, node.device_plugin_config)
    };
    shorten(&full, 63)
}

/// A Deployment name from its parts (`<model>-<node>`, `<model>-<node>-<resource>`,
/// `<model>-<pool>-<layout>`), joined with `-` and kept within 63 characters by [`shorten`].
pub fn unit_name(parts: &[&str]) -> String {
    shorten(&parts.join("-"), 63)
}

/// `nvidia.com/mig-3g.40gb` → `mig-3g-40gb`; `nvidia.com/gpu.shared` → `gpu-shared`.
pub fn resource_slug(resource: &str) -> String {
    let short = resource.rsplit('/').next().unwrap_or(resource);
    let slug: String =
        short.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    slug.trim_matches('-').to_owned()
}

/// Keeps names within `max` characters: a long name keeps its head and gets an 8-hex-digit FNV
/// hash of the whole name, so distinct long names stay distinct and the result is stable.
pub fn shorten(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_owned();
    }
    let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
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
pub fn check(spec: &Spec, plan: &Plan, diags: &mut Diagnostics) {
    for (what, value) in
        [("namespace", &spec.cluster.namespace), ("operator namespace", &spec.cluster.operator_namespace)]
    {
        if !is_dns_label(value) {
            diags.push(unsafe_name(None, what, value, DNS_LABEL));
        }
    }
    // The plan name prefixes object names (`gpuplan-<name>`) and is a label value.
    if !is_dns_label(&spec.name) || spec.name.len() > 40 {
        diags.push(unsafe_name(
            None,
            "plan name",
            &spec.name,
            "lowercase letters, digits and `-`, at most 40 characters",
        ));
    }
    if let Some(argo) = spec.cluster.output.argocd.as_ref().filter(|a| !is_dns_label(&a.namespace)) {
        diags.push(unsafe_name(None, "Argo CD namespace", &argo.namespace, DNS_LABEL));
    }
    if let Some(flux) = &spec.cluster.output.flux {
        if !is_dns_label(&flux.namespace) {
            diags.push(unsafe_name(None, "Flux namespace", &flux.namespace, DNS_LABEL));
        }
        if !is_dns_subdomain(&flux.source_name) {
            diags.push(unsafe_name(None, "Flux source name", &flux.source_name, DNS_LABEL));
        }
    }
    for model in &spec.models {
        let span = model.span.as_ref();
        // A model name becomes a Deployment, a Service (RFC 1035: starts with a letter), a
        // container and a file name.
        if !is_dns_label(&model.name) || !model.name.starts_with(|c: char| c.is_ascii_lowercase()) {
            diags.push(unsafe_name(
                span,
                "model name",
                &model.name,
                &format!("{DNS_LABEL}, starting with a letter"),
            ));
        }
        if !is_image(&model.image) {
            diags.push(unsafe_name(
                span,
                "image",
                &model.image,
                "an image reference without spaces or control characters",
            ));
        }
        for (name, _) in &model.env {
            if !is_env_name(name) {
                diags.push(unsafe_name(
                    span,
                    "environment variable name",
                    name,
                    "letters, digits, `-`, `.` and `_`, not starting with a digit",
                ));
            }
        }
        for port in &model.ports {
            if !is_dns_label(&port.name)
                || port.name.len() > 15
                || !port.name.bytes().any(|b| b.is_ascii_lowercase())
            {
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
    for pool in &spec.pools {
        let span = pool.span.as_ref();
        if !is_label_value(&pool.name) || !is_dns_label(&pool.name) {
            diags.push(unsafe_name(span, "pool name", &pool.name, DNS_LABEL));
        }
        for (key, value) in &pool.node_selector {
            if !is_label_key(key) || !(value.is_empty() || is_label_value(value)) {
                diags.push(unsafe_name(
                    span,
                    "node selector",
                    &format!("{key}={value}"),
                    "a label key and value Kubernetes accepts",
                ));
            }
        }
        for taint in &pool.taints {
            let value_ok = taint.value.as_deref().is_none_or(|v| v.is_empty() || is_label_value(v));
            if !is_label_key(&taint.key)
                || !value_ok
                || !matches!(taint.effect.as_str(), "NoSchedule" | "PreferNoSchedule" | "NoExecute")
            {
                diags.push(unsafe_name(span, "taint", &taint.key, "a label key, a label value and the effect `NoSchedule`, `PreferNoSchedule` or `NoExecute`"));
            }
        }
    }
    for pool in &plan.pools {
        for node in &pool.nodes {
            if !is_dns_subdomain(&node.name) {
                diags.push(unsafe_name(None, "node name", &node.name, DNS_SUBDOMAIN));
            }
            for (what, value) in [
                ("mig config name", &node.mig_config),
                ("device-plugin config name", &node.device_plugin_config),
            ] {
                if !is_label_value(value) {
                    diags.push(unsafe_name(None, what, value, LABEL_VALUE));
                }
            }
        }
    }
    for model in &plan.models {
        for group in &model.groups {
            if !is_extended_resource(&group.resource) {
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
        if !is_configmap_key(name) || !is_label_value(name) {
            diags.push(unsafe_name(None, "config name", name, LABEL_VALUE));
        }
    }
}

/// An extended resource name: `<domain>/<name>` with a label-value name, e.g. `nvidia.com/gpu.shared`.
pub fn is_extended_resource(s: &str) -> bool {
    s.split_once('/').is_some_and(|(prefix, name)| is_dns_subdomain(prefix) && is_label_value(name))
}

/// A label key: optional DNS-subdomain prefix and `/`, then a name part like a label value.
pub fn is_label_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_label_value(name),
        None => is_label_value(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_refuse_newlines_and_quotes() {
        let too_long = "a".repeat(64);
        for (value, ok) in
            [("a100-l1", true), ("a\nb", false), ("a\"b", false), ("-a", false), (&too_long, false)]
        {
            assert_eq!(is_label_value(value), ok, "{value:?}");
        }
    }

    #[test]
    fn dns_labels_refuse_traversal_and_uppercase() {
        for (name, ok) in [("voice-asr", true), ("..", false), ("a/b", false), ("Voice", false)] {
            assert_eq!(is_dns_label(name), ok, "{name:?}");
        }
        assert!(!is_dns_subdomain("a..b"));
        assert!(is_dns_subdomain("gpu-a-1.example.com"));
    }

    #[test]
    fn shortened_names_are_stable_distinct_and_short() {
        let a = shorten(&"x".repeat(80), 63);
        let b = shorten(&format!("{}y", "x".repeat(79)), 63);
        assert!(a.len() <= 63 && b.len() <= 63);
        assert_ne!(a, b);
        assert_eq!(a, shorten(&"x".repeat(80), 63));
    }

    #[test]
    fn extended_resources_need_a_domain() {
        assert!(is_extended_resource("nvidia.com/mig-1g.10gb.me"));
        assert!(is_extended_resource("nvidia.com/gpu.shared"));
        assert!(!is_extended_resource("gpu"));
        assert!(!is_extended_resource("nvidia.com/\n"));
    }

    #[test]
    fn resource_slugs_are_dns_labels() {
        assert_eq!(resource_slug("nvidia.com/mig-3g.40gb"), "mig-3g-40gb");
        assert_eq!(resource_slug("nvidia.com/gpu.shared"), "gpu-shared");
        assert_eq!(resource_slug("nvidia.com/mig-1g.10gb+me"), "mig-1g-10gb-me");
    }
}
