//! Kubernetes name rules, each returning the rule a name breaks in words.
//!
//! Model, pool and plan names become object names and label values, so they must be DNS-1123
//! labels; node names are DNS-1123 subdomains; node-selector keys and values follow the label
//! syntax; port names are IANA service names; environment variable names follow Kubernetes'
//! relaxed C-identifier rule.

/// Checks a DNS-1123 label: at most 63 lowercase letters, digits and `-`, starting and ending with a
/// letter or digit.
pub fn dns_label(name: &str) -> Result<(), String> {
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

/// A DNS-1123 label suggestion for a name that is not one: lowercase, other characters as `-`.
pub fn suggest_label(name: &str) -> String {
    let mut s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    s = s.trim_matches('-').to_owned();
    s.truncate(63);
    s.trim_end_matches('-').to_owned()
}

/// Checks a DNS-1123 subdomain: dot-separated labels, at most 253 characters.
pub fn dns_subdomain(name: &str) -> Result<(), String> {
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

fn label_name(name: &str) -> Result<(), String> {
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
pub fn label_key(key: &str) -> Result<(), String> {
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
pub fn label_value(value: &str) -> Result<(), String> {
    if value.is_empty() { Ok(()) } else { label_name(value) }
}

/// Checks an IANA service name (container port names).
pub fn port_name(name: &str) -> Result<(), String> {
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
pub fn env_name(name: &str) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels_say_which_rule_they_break() {
        assert!(dns_label("parakeet-asr").is_ok());
        assert!(dns_label("Parakeet").expect_err("uppercase").contains("uppercase"));
        assert!(dns_label("asr_1").expect_err("underscore").contains("`_`"));
        assert!(dns_label("-asr").expect_err("dash").contains("starts or ends"));
        assert!(dns_label(&"a".repeat(64)).expect_err("long").contains("63"));
        assert_eq!(suggest_label("Parakeet_ASR"), "parakeet-asr");
    }

    #[test]
    fn other_kubernetes_names() {
        assert!(dns_subdomain("gpu-a-1.example.com").is_ok());
        assert!(dns_subdomain("gpu..a").is_err());
        assert!(label_key("nvidia.com/gpu.product").is_ok());
        assert!(label_key("bad key").is_err());
        assert!(label_value("NVIDIA-A100-SXM4-80GB").is_ok());
        assert!(port_name("http").is_ok());
        assert!(port_name("8000").is_err());
        assert!(env_name("NIM_CACHE_PATH").is_ok());
        assert!(env_name("1X").is_err());
    }
}
