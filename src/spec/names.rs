//! Kubernetes name rules, each returning the rule a name breaks in words: the one place they are
//! written (the spec checks the manifest with them, `render::names` the names a bundle uses).
//!
//! Model, pool and plan names become object names and label values, so they must be DNS-1123
//! labels; node names are DNS-1123 subdomains; node-selector keys and values follow the label
//! syntax; port names are IANA service names; environment variable names follow Kubernetes'
//! relaxed C-identifier rule; ConfigMap keys, extended resource names and image references have
//! rules of their own.

/// Checks a DNS-1123 label: at most 63 lowercase letters, digits and `-`, starting and ending with a
/// letter or digit.
pub(crate) fn dns_label(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.len() > 63 {
        return Err(format!("it is {} characters long, more than 63", name.len()));
    }
    if let Some(c) = name.chars().find(|c| c.is_ascii_uppercase()) {
        return Err(format!("it has the uppercase letter `{c}` (only lowercase is allowed)"));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')) {
        return Err(format!("it has the character `{c}` (only `a-z`, `0-9` and `-` are allowed)"));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err("it starts or ends with `-`".into());
    }
    Ok(())
}

/// A DNS-1123 label made of any name: lowercase, other characters as `-`, at most 63 characters.
/// The one label sanitiser: suggestions for bad names, and `render::names::resource_slug`.
pub(crate) fn suggest_label(name: &str) -> String {
    let mut s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    s = s.trim_matches('-').to_owned();
    s.truncate(63);
    s.trim_end_matches('-').to_owned()
}

/// Checks a DNS-1123 subdomain: dot-separated labels, at most 253 characters.
pub(crate) fn dns_subdomain(name: &str) -> Result<(), String> {
    if name.len() > 253 {
        return Err(format!("it is {} characters long, more than 253", name.len()));
    }
    for part in name.split('.') {
        dns_label(part).map_err(|e| {
            if part.is_empty() {
                "it has an empty part between dots".to_owned()
            } else {
                format!("in `{part}`, {e}")
            }
        })?;
    }
    Ok(())
}

/// Checks a label name: a label key's name part, or a label value that may not be empty (at most
/// 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit).
pub(crate) fn label_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name part is empty".into());
    }
    if name.len() > 63 {
        return Err(format!("the name part is {} characters long, more than 63", name.len()));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))) {
        return Err(format!(
            "it has the character `{c}` (only letters, digits, `-`, `_` and `.` are allowed)"
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric())
        || !name.ends_with(|c: char| c.is_ascii_alphanumeric())
    {
        return Err("it must start and end with a letter or digit".into());
    }
    Ok(())
}

/// Checks a label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters.
pub(crate) fn label_key(key: &str) -> Result<(), String> {
    match key.split_once('/') {
        Some((prefix, name)) => {
            dns_subdomain(prefix)
                .map_err(|e| format!("its prefix `{prefix}` is not a DNS subdomain: {e}"))?;
            label_name(name)
        }
        None => label_name(key),
    }
}

/// Checks a label value: empty, or a label name.
pub(crate) fn label_value(value: &str) -> Result<(), String> {
    if value.is_empty() { Ok(()) } else { label_name(value) }
}

/// Checks an IANA service name (container port names).
pub(crate) fn port_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 15 {
        return Err(format!("it has {} characters; a port name has 1 to 15", name.len()));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')) {
        return Err(format!("it has the character `{c}` (only `a-z`, `0-9` and `-` are allowed)"));
    }
    if !name.chars().any(|c| c.is_ascii_lowercase()) {
        return Err("it has no letter".into());
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return Err("it starts or ends with `-`, or has `--`".into());
    }
    Ok(())
}

/// Checks an environment variable name.
pub(crate) fn env_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("it starts with a digit".into());
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))) {
        return Err(format!(
            "it has the character `{c}` (only letters, digits, `_`, `-` and `.` are allowed)"
        ));
    }
    Ok(())
}

/// Checks a ConfigMap key: at most 253 letters, digits, `-`, `_` and `.`, and not `.` or `..`.
pub(crate) fn configmap_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > 253 {
        return Err(format!("it has {} characters; a ConfigMap key has 1 to 253", key.len()));
    }
    if key == "." || key == ".." {
        return Err(format!("it is `{key}`"));
    }
    if let Some(c) = key.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))) {
        return Err(format!(
            "it has the character `{c}` (only letters, digits, `-`, `_` and `.` are allowed)"
        ));
    }
    Ok(())
}

/// Checks an extended resource name: a DNS-subdomain domain, `/`, and a label name
/// (`nvidia.com/mig-3g.40gb`).
pub(crate) fn extended_resource(name: &str) -> Result<(), String> {
    let Some((domain, rest)) = name.split_once('/') else {
        return Err("it has no `<domain>/` prefix".into());
    };
    dns_subdomain(domain).map_err(|e| format!("its domain `{domain}` is not a DNS subdomain: {e}"))?;
    label_name(rest)
}

/// Checks an image reference: printable ASCII without spaces (the kubelet rejects the rest anyway).
pub(crate) fn image(reference: &str) -> Result<(), String> {
    if reference.is_empty() {
        return Err("it is empty".into());
    }
    match reference.chars().find(|c| !c.is_ascii_graphic()) {
        Some(c) => Err(format!("it has the character {c:?} (only printable ASCII without spaces)")),
        None => Ok(()),
    }
}

/// The 32-bit FNV-1a hash of `bytes`: the one stable hash behind the names gpuplan derives
/// from contents (shortened object names, content-addressed config names). Never changes:
/// names made with it are committed in users' bundles.
pub(crate) fn stable_hash(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}

#[cfg(test)]
mod tests {
    use super::{
        configmap_key, dns_label, dns_subdomain, env_name, extended_resource, image, label_key, label_name,
        label_value, port_name, suggest_label,
    };

    #[test]
    fn dns_labels_say_which_rule_they_break() {
        assert!(dns_label("parakeet-asr").is_ok());
        assert!(dns_label("Parakeet").expect_err("uppercase").contains("uppercase"));
        assert!(dns_label("asr_1").expect_err("underscore").contains("`_`"));
        assert!(dns_label("-asr").expect_err("dash").contains("starts or ends"));
        assert!(dns_label(&"a".repeat(64)).expect_err("long").contains("63"));
        assert_eq!(suggest_label("Parakeet_ASR"), "parakeet-asr");
    }

    type Rule = fn(&str) -> Result<(), String>;

    #[test]
    fn each_rule_accepts_and_refuses() {
        let too_long = "a".repeat(64);
        let cases: &[(Rule, &str, bool)] = &[
            (dns_label, "voice-asr", true),
            (dns_label, "..", false),
            (dns_label, "a/b", false),
            (dns_subdomain, "gpu-a-1.example.com", true),
            (dns_subdomain, "gpu..a", false),
            (dns_subdomain, "", false),
            (label_key, "nvidia.com/gpu.product", true),
            (label_key, "bad key", false),
            (label_value, "NVIDIA-A100-SXM4-80GB", true),
            (label_value, "", true),
            (label_name, "a100-l1", true),
            (label_name, "a\nb", false),
            (label_name, "a\"b", false),
            (label_name, "-a", false),
            (label_name, &too_long, false),
            (label_name, "", false),
            (port_name, "http", true),
            (port_name, "8000", false),
            (port_name, "a--b", false),
            (env_name, "NIM_CACHE_PATH", true),
            (env_name, "1X", false),
            (configmap_key, "a100-80gb.balanced_2", true),
            (configmap_key, "", false),
            (configmap_key, ".", false),
            (configmap_key, "..", false),
            (configmap_key, "a/b", false),
            (extended_resource, "nvidia.com/mig-1g.10gb.me", true),
            (extended_resource, "nvidia.com/gpu.shared", true),
            (extended_resource, "gpu", false),
            (extended_resource, "nvidia.com/\n", false),
            (extended_resource, "Nvidia.com/gpu", false),
            (image, "nvcr.io/nim/parakeet:1.0", true),
            (image, "a b", false),
            (image, "", false),
        ];
        for (i, (rule, name, ok)) in cases.iter().enumerate() {
            assert_eq!(rule(name).is_ok(), *ok, "case {i}: {name:?}");
        }
    }
}
