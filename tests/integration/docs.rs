//! The docs stay true to the code.

#[test]
fn every_diagnostic_code_has_a_heading_in_docs() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/diagnostics.md"))
        .expect("docs/diagnostics.md exists");
    let headings: Vec<&str> = docs.lines().filter_map(|l| l.strip_prefix("## ")).map(str::trim).collect();
    let missing: Vec<&str> =
        gpuplan::diagnostics::codes::ALL.iter().copied().filter(|c| !headings.contains(c)).collect();
    assert!(missing.is_empty(), "codes without a `## code` heading in docs/diagnostics.md: {missing:?}");
    let unknown: Vec<&str> =
        headings.iter().copied().filter(|h| !gpuplan::diagnostics::codes::ALL.contains(h)).collect();
    assert!(unknown.is_empty(), "headings in docs/diagnostics.md that are no code: {unknown:?}");
}

#[test]
fn diagnostic_codes_are_unique_kebab_case() {
    let all = gpuplan::diagnostics::codes::ALL;
    let mut seen = std::collections::BTreeSet::new();
    for code in all {
        assert!(seen.insert(code), "duplicate code `{code}`");
        assert!(
            code.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !code.starts_with('-')
                && !code.ends_with('-'),
            "`{code}` is not kebab-case"
        );
    }
}

#[test]
fn every_builtin_catalog_file_is_embedded() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/catalog");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .expect("catalog/ exists")
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    on_disk.sort();
    let mut embedded: Vec<String> = gpuplan::catalog::BUILTIN.iter().map(|(n, _)| (*n).to_owned()).collect();
    embedded.sort();
    assert_eq!(on_disk, embedded, "catalog/ and catalog::BUILTIN disagree");
}
