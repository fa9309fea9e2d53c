//! The mig-parted linter: NVIDIA's own configs are valid, broken configs get precise diagnostics.

use std::collections::BTreeMap;

use gpuplan::catalog::Catalog;
use gpuplan::catalog::layout;
use gpuplan::catalog::migparted::{MigPartedConfig, lint};
use gpuplan::diagnostics::{Severity, Sources, render};
use proptest::prelude::*;
use serde::Deserialize;

use super::cli::gpuplan;

fn catalog() -> &'static Catalog {
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(Catalog::builtin)
}

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mig-parted");
const UPSTREAM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/reference/upstream");

#[derive(Debug, Deserialize)]
struct Case {
    config: String,
    mig: bool,
    gpus: Vec<String>,
    layout: BTreeMap<String, u32>,
}

#[test]
fn every_default_operator_config_is_valid_on_the_gpus_it_targets() {
    let text = std::fs::read_to_string(format!("{FIXTURES}/default-configs.yaml")).expect("fixture");
    let cases: Vec<Case> = serde_saphyr::from_str(&text).expect("fixture parses");
    let catalog = catalog();
    let configs: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.config.as_str()).collect();
    assert_eq!(configs.len(), 81);
    let mut checked = 0;
    for case in &cases {
        assert_eq!(case.mig, case.config != "all-disabled", "{}", case.config);
        assert!(case.layout.is_empty() || !case.gpus.is_empty(), "`{}` targets no GPU", case.config);
        for id in &case.gpus {
            let gpu = catalog.get(id).unwrap_or_else(|| panic!("`{id}` in the catalog"));
            let placed = layout::validate_counts(gpu, &case.layout)
                .unwrap_or_else(|e| panic!("`{}` on `{id}`: {e}", case.config));
            assert_eq!(placed.len() as u32, case.layout.values().sum::<u32>());
            checked += 1;
        }
    }
    assert!(checked > 120, "only {checked} (config, GPU) pairs checked");
}

fn lint_file(path: &str) -> (Sources, gpuplan::diagnostics::Diagnostics) {
    let text = std::fs::read_to_string(path).expect("readable");
    let name =
        std::path::Path::new(path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut sources = Sources::new();
    let diagnostics = lint(&mut sources, &name, &text, catalog());
    (sources, diagnostics)
}

/// NVIDIA's shipped files, read from `../shared` when the project sits next to it.
#[test]
fn nvidia_shipped_configs_have_no_errors_when_present() {
    let files = [
        "gpu-operator__assets__state-mig-manager__0400_configmap.yaml",
        "mig-parted__deployments__systemd__config-default.yaml",
        "mig-parted__examples__config.yaml",
        "mig-parted__examples__dgx-station-80gb-config.yaml",
        "cloud-native-docs__gpu-operator__manifests__input__custom-mig-config.yaml",
    ];
    for file in files {
        let path = format!("{UPSTREAM}/{file}");
        if !std::path::Path::new(&path).exists() {
            continue;
        }
        let (sources, diagnostics) = lint_file(&path);
        let errors: Vec<_> = diagnostics.iter().filter(|d| d.severity == Severity::Error).cloned().collect();
        assert!(errors.is_empty(), "{file}:\n{}", render::human(&sources, &errors, false));
    }
}

#[test]
fn operator_configmap_warns_about_the_known_silent_gaps_when_present() {
    let path = format!("{UPSTREAM}/gpu-operator__assets__state-mig-manager__0400_configmap.yaml");
    if !std::path::Path::new(&path).exists() {
        return;
    }
    let (sources, diagnostics) = lint_file(&path);
    let text = render::human(&sources, &diagnostics.0, false);
    // reference/domain.md §5.8: all-1g.35gb misses H200 NVL; all-balanced misses H100 SXM5 94GB,
    // A800 SXM4 40GB and the RTX PRO 6000 Workstation / Max-Q.
    for gap in
        ["`all-1g.35gb` leaves `H200-NVL`", "`H100-SXM5-94GB`", "`A800-SXM4-40GB`", "`RTX-PRO-6000-MAX-Q`"]
    {
        assert!(text.contains(gap), "no warning mentions {gap}:\n{text}");
    }
    // Positions point into the ConfigMap file itself (`all-balanced:` is on line 358 there).
    assert!(text.contains("0400_configmap.yaml:358:7"), "{text}");
}

#[test]
fn invalid_configs_get_coded_diagnostics() {
    insta::glob!("../fixtures/mig-parted/invalid", "*.yaml", |path| {
        let (sources, diagnostics) = lint_file(&path.to_string_lossy());
        assert!(diagnostics.has_errors(), "{} has no error", path.display());
        insta::assert_snapshot!(render::human(&sources, &diagnostics.0, false));
    });
}

#[test]
fn a_custom_per_model_config_is_clean() {
    let (sources, diagnostics) = lint_file(&format!("{FIXTURES}/valid-custom.yaml"));
    assert!(diagnostics.is_empty(), "{}", render::human(&sources, &diagnostics.0, false));
}

#[test]
fn typed_model_round_trips() {
    let text = std::fs::read_to_string(format!("{FIXTURES}/valid-custom.yaml")).expect("fixture");
    let config = MigPartedConfig::parse(&text).expect("parses");
    assert_eq!(config.mig_configs.len(), 2);
    let again = MigPartedConfig::parse(&config.to_yaml().expect("writes")).expect("parses again");
    assert_eq!(config, again);
    let (sources, diagnostics) = {
        let yaml = config.to_yaml().expect("writes");
        let mut sources = Sources::new();
        let d = lint(&mut sources, "generated.yaml", &yaml, catalog());
        (sources, d)
    };
    assert!(diagnostics.is_empty(), "{}", render::human(&sources, &diagnostics.0, false));
}

#[test]
fn command_exit_codes_follow_the_diagnostics() {
    let bad =
        gpuplan().args(["validate-mig-config", &format!("{FIXTURES}/invalid/invalid-layout.yaml")]).output();
    assert_eq!(bad.expect("runs").status.code(), Some(1));
    let good = gpuplan().args(["validate-mig-config", &format!("{FIXTURES}/valid-custom.yaml")]).output();
    assert_eq!(good.expect("runs").status.code(), Some(0));
    let json = gpuplan()
        .args([
            "validate-mig-config",
            "--format",
            "json",
            &format!("{FIXTURES}/invalid/unknown-profile.yaml"),
        ])
        .output()
        .expect("runs");
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert!(value["diagnostics"].as_array().is_some_and(|d| !d.is_empty()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn linter_never_panics_on_arbitrary_text(text in "(.|\n){0,300}") {
        let mut sources = Sources::new();
        let _ = lint(&mut sources, "any.yaml", &text, catalog());
    }

    #[test]
    fn linter_never_panics_on_damaged_configs(cut in 0usize..2000, junk in "[ \n:\\-\\[\\]{}\"a-z0-9|.+]{0,16}", which in 0usize..3) {
        let file = ["valid-custom.yaml", "invalid/configmap.yaml", "invalid/filters.yaml"][which];
        let text = std::fs::read_to_string(format!("{FIXTURES}/{file}")).expect("fixture");
        let at = (cut % (text.len() + 1)).min(text.len());
        let at = (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        let damaged = format!("{}{junk}{}", &text[..at], &text[at..]);
        let mut sources = Sources::new();
        let diagnostics = lint(&mut sources, file, &damaged, catalog());
        let _ = render::human(&sources, &diagnostics.0, false);
    }
}

#[test]
fn gpuplans_own_mig_config_passes_the_linter_without_warnings() {
    for example in ["voice-pipeline", "mixed-fleet", "h200-autoscaled"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let manifest = format!("{}/examples/{example}/gpuplan.yaml", env!("CARGO_MANIFEST_DIR"));
        let out =
            gpuplan().args(["compile", &manifest, "--out"]).arg(dir.path()).output().expect("runs gpuplan");
        assert_eq!(out.status.code(), Some(0), "{example}: {}", String::from_utf8_lossy(&out.stderr));
        let config = dir.path().join("gpu-operator/mig-parted-config.yaml");
        let text = std::fs::read_to_string(&config).expect("mig-parted config written");
        let mut sources = Sources::new();
        let diagnostics =
            gpuplan::catalog::migparted::lint(&mut sources, "config", &text, &Catalog::builtin());
        assert!(
            diagnostics.is_empty(),
            "{example}: {:?}",
            diagnostics.iter().map(|d| &d.message).collect::<Vec<_>>()
        );
    }
}
