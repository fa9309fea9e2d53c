//! The manifest language: invalid corpus under snapshot, examples valid, YAML = TOML, JSON Schema
//! fresh and in agreement with the reader, robustness against hostile input.

use std::path::{Path, PathBuf};

use gpuplan::catalog::Catalog;
use gpuplan::diagnostics::{Diagnostics, Sources, codes, render};
use gpuplan::spec::Spec;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The built-in catalog: every GPU the examples and fixtures name is in it.
fn catalog() -> Catalog {
    Catalog::builtin()
}

fn check(name: &str, text: &str, catalog: &Catalog) -> (Sources, Result<(Spec, Diagnostics), Diagnostics>) {
    // The command line's own chain (`pipeline`): unknown fields do not hide semantic problems.
    let mut sources = Sources::new();
    let mut read = gpuplan::pipeline::no_measurement_files;
    let result = gpuplan::pipeline::check_manifest(&mut sources, name, text, catalog, &mut read)
        .map(|checked| (checked.spec, checked.warnings));
    (sources, result)
}

fn files(dir: &str, exts: &[&str]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join(dir))
        .expect("fixture folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| exts.iter().any(|x| e == *x)))
        .collect();
    out.sort();
    out
}

fn examples() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("examples"))
        .expect("examples/")
        .map(|e| e.expect("entry").path().join("gpuplan.yaml"))
        .filter(|p| p.exists())
        .collect();
    out.sort();
    out
}

fn valid_manifests() -> Vec<PathBuf> {
    let mut all = examples();
    all.extend(files("tests/fixtures/valid", &["yaml", "toml"]));
    all
}

#[test]
fn invalid_manifests_report_their_diagnostics() {
    let catalog = catalog();
    insta::glob!("../fixtures/invalid", "*.{yaml,toml}", |path| {
        let text = std::fs::read_to_string(path).expect("readable fixture");
        let name = path.file_name().expect("file name").to_string_lossy().into_owned();
        let (sources, result) = check(&name, &text, &catalog);
        let diags = match result {
            Ok((_, warnings)) => {
                panic!("`{name}` is in the invalid corpus but validates (warnings: {warnings:?})")
            }
            Err(diags) => diags,
        };
        assert!(diags.has_errors(), "`{name}`: rejected without an error");
        for d in diags.iter() {
            assert!(d.labels.iter().any(|l| l.primary), "`{name}`: `{}` has no primary label", d.code);
            assert!(d.help.is_some(), "`{name}`: `{}` has no help", d.code);
            assert!(codes::ALL.contains(&d.code), "`{name}`: unregistered code `{}`", d.code);
            assert!(!d.message.ends_with('.'), "`{name}`: message ends with a period: {}", d.message);
        }
        insta::assert_snapshot!(render::human(&sources, &diags.0, false));
    });
}

#[test]
fn the_invalid_corpus_has_at_least_fifty_cases() {
    assert!(files("tests/fixtures/invalid", &["yaml", "toml"]).len() >= 50);
}

#[test]
fn examples_and_valid_fixtures_validate_without_errors_or_warnings() {
    let catalog = catalog();
    let all = valid_manifests();
    assert!(all.len() >= 5, "expected the voice pipeline and four more examples");
    for path in all {
        let text = std::fs::read_to_string(&path).expect("readable");
        let (sources, result) = check(&path.display().to_string(), &text, &catalog);
        match result {
            Ok((_, warnings)) => {
                assert!(warnings.is_empty(), "{}", render::human(&sources, &warnings.0, false))
            }
            Err(diags) => panic!("{}", render::human(&sources, &diags.0, false)),
        }
    }
}

#[test]
fn voice_pipeline_spec_matches_the_seed() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("examples/voice-pipeline/gpuplan.yaml"))
        .expect("voice pipeline example");
    let (_, result) = check("gpuplan.yaml", &text, &Catalog::builtin());
    let (spec, _) = result.expect("valid against the built-in catalog");
    assert_eq!(spec.pools.len(), 1);
    assert_eq!(spec.pools[0].gpu, "A100-SXM4-80GB");
    assert_eq!(spec.pools[0].gpus_per_node, 2);
    let asr = spec.model("parakeet-asr").expect("asr");
    let tts = spec.model("magpie-tts").expect("tts");
    let llm = spec.model("nemotron-vl").expect("llm");
    assert_eq!(asr.memory_mib, 9156); // 9.6e9 bytes
    assert_eq!(tts.memory_mib, 12780);
    assert_eq!(asr.isolation, gpuplan::spec::Isolation::Hardware);
    assert_eq!(tts.isolation, gpuplan::spec::Isolation::Hardware);
    assert_eq!(llm.gpus, Some(1));
    assert!(llm.llm);
    assert!(asr.span.is_some() && spec.pools[0].span.is_some());
}

// --- YAML and TOML are one language ------------------------------------------------------------

/// The same document as TOML (keys sorted, which must not matter). `None` when TOML cannot say
/// it (nulls, a non-table root).
fn to_toml(yaml: &str) -> Option<String> {
    let mut sources = Sources::new();
    let tree = gpuplan::manifest::parse_tree(&mut sources, "m.yaml", yaml).ok()?;
    let json = tree.to_json();
    fn has_null(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::Null => true,
            serde_json::Value::Array(a) => a.iter().any(has_null),
            serde_json::Value::Object(o) => o.values().any(has_null),
            _ => false,
        }
    }
    if has_null(&json) || !json.is_object() {
        return None;
    }
    toml::to_string(&json).ok()
}

#[test]
fn every_valid_manifest_means_the_same_in_toml() {
    let catalog = catalog();
    for path in valid_manifests().into_iter().filter(|p| p.extension().is_some_and(|e| e == "yaml")) {
        let yaml = std::fs::read_to_string(&path).expect("readable");
        let toml = to_toml(&yaml).unwrap_or_else(|| panic!("{} converts to TOML", path.display()));
        let (_, y) = check("m.yaml", &yaml, &catalog);
        let (sources, t) = check("m.toml", &toml, &catalog);
        let (y, _) = y.expect("yaml valid");
        let (t, _) = t.unwrap_or_else(|d| panic!("{}\n{toml}", render::human(&sources, &d.0, false)));
        assert_eq!(
            serde_json::to_value(&y).expect("json"),
            serde_json::to_value(&t).expect("json"),
            "{} differs as TOML",
            path.display()
        );
    }
}

#[test]
fn every_invalid_manifest_fails_the_same_way_in_toml() {
    let catalog = catalog();
    let mut compared = 0;
    for path in files("tests/fixtures/invalid", &["yaml"]) {
        let yaml = std::fs::read_to_string(&path).expect("readable");
        let Some(toml) = to_toml(&yaml) else { continue };
        let problems = |name: &str, text: &str| -> Vec<(String, String)> {
            let (_, result) = check(name, text, &catalog);
            let diags = match result {
                Ok((_, w)) => w,
                Err(d) => d,
            };
            let mut v: Vec<_> = diags.iter().map(|d| (d.code.to_owned(), d.message.clone())).collect();
            v.sort();
            v
        };
        assert_eq!(
            problems("m.yaml", &yaml),
            problems("m.toml", &toml),
            "{} as TOML:\n{toml}",
            path.display()
        );
        compared += 1;
    }
    assert!(compared >= 50, "only {compared} invalid fixtures could be compared as TOML");
}

#[test]
fn yaml_and_toml_point_at_the_same_field() {
    let yaml = "apiVersion: gpuplan.io/v1alpha1\nkind: GpuPlan\nmetadata: {name: demo}\ninventory: {pools: []}\nmodels: []\nextra: 1\n";
    let toml = "apiVersion = \"gpuplan.io/v1alpha1\"\nkind = \"GpuPlan\"\nmodels = []\nextra = 1\n[metadata]\nname = \"demo\"\n[inventory]\npools = []\n";
    for (name, text) in [("m.yaml", yaml), ("m.toml", toml)] {
        let mut sources = Sources::new();
        let diags = gpuplan::manifest::parse(&mut sources, name, text).expect_err("unknown field");
        let d = diags.iter().find(|d| d.code == codes::UNKNOWN_FIELD).expect("unknown-field");
        let label = &d.labels[0];
        assert_eq!(&text[label.span.range.clone()], "extra", "{name}");
    }
}

// --- JSON Schema ---------------------------------------------------------------------------------

#[test]
fn checked_in_schema_is_fresh() {
    let path = Path::new(ROOT).join("schemas/gpuplan.schema.json");
    let fresh = gpuplan::manifest::schema_json();
    if std::env::var_os("GPUPLAN_UPDATE_SCHEMA").is_some() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("schemas/");
        std::fs::write(&path, &fresh).expect("writes the schema");
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == fresh,
        "schemas/gpuplan.schema.json is stale: refresh it with \
         `GPUPLAN_UPDATE_SCHEMA=1 cargo test --test integration manifest::checked_in_schema_is_fresh`"
    );
}

fn schema_validator() -> jsonschema::Validator {
    let schema: serde_json::Value =
        serde_json::from_str(&gpuplan::manifest::schema_json()).expect("schema JSON");
    jsonschema::validator_for(&schema).expect("the schema compiles")
}

fn tree_json(name: &str, text: &str) -> Option<serde_json::Value> {
    let mut sources = Sources::new();
    gpuplan::manifest::parse_tree(&mut sources, name, text).ok().map(|t| t.to_json())
}

#[test]
fn schema_accepts_every_example() {
    let validator = schema_validator();
    for path in valid_manifests() {
        let text = std::fs::read_to_string(&path).expect("readable");
        let json = tree_json(&path.display().to_string(), &text).expect("parses");
        let errors: Vec<String> =
            validator.iter_errors(&json).map(|e| format!("{}: {e}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
    }
}

#[test]
fn schema_rejects_every_invalid_manifest_whose_error_is_structural() {
    // Codes the schema can see: the shape of the document, enums, unit patterns, simple ranges.
    const SCHEMA_CODES: &[&str] = &[
        codes::UNKNOWN_FIELD,
        codes::WRONG_TYPE,
        codes::MISSING_FIELD,
        codes::BAD_UNIT,
        codes::UNSUPPORTED_VERSION,
    ];
    let validator = schema_validator();
    let catalog = catalog();
    let mut checked = 0;
    for path in files("tests/fixtures/invalid", &["yaml", "toml"]) {
        let text = std::fs::read_to_string(&path).expect("readable");
        let name = path.file_name().expect("name").to_string_lossy().into_owned();
        let Some(json) = tree_json(&name, &text) else { continue };
        let (_, result) = check(&name, &text, &catalog);
        let Err(diags) = result else { continue };
        // Pools without `nodes` or `count` are a cross-field rule, not a schema one.
        let structural = diags
            .iter()
            .any(|d| SCHEMA_CODES.contains(&d.code) && !d.message.contains("neither `nodes` nor `count`"));
        if structural {
            assert!(!validator.is_valid(&json), "the schema accepts `{name}`");
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} structural fixtures checked");
}

// --- robustness --------------------------------------------------------------------------------

#[test]
fn huge_input_is_refused_with_a_diagnostic() {
    let text = format!("apiVersion: gpuplan.io/v1alpha1\n# {}\n", "x".repeat(10 * 1024 * 1024));
    for name in ["m.yaml", "m.toml"] {
        let (_, result) = check(name, &text, &Catalog::builtin());
        let diags = result.expect_err("too large");
        assert_eq!(diags.0[0].code, codes::INPUT_TOO_LARGE);
    }
}

#[test]
fn deep_nesting_is_refused_in_both_formats() {
    let yaml = format!("models: {}{}\n", "[".repeat(10_000), "]".repeat(10_000));
    let toml = format!("models = {}{}\n", "[".repeat(10_000), "]".repeat(10_000));
    let yaml_maps = format!("models: {}1{}\n", "{a: ".repeat(5_000), "}".repeat(5_000));
    for (name, text) in [("m.yaml", &yaml), ("m.toml", &toml), ("m.yaml", &yaml_maps)] {
        let (_, result) = check(name, text, &Catalog::builtin());
        let diags = result.expect_err("too deep");
        assert_eq!(diags.0[0].code, codes::INPUT_TOO_LARGE, "{name}");
    }
}

#[test]
fn alias_bombs_are_refused() {
    let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        text.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    text.push_str("models: *a9\n");
    let (_, result) = check("m.yaml", &text, &Catalog::builtin());
    let diags = result.expect_err("refused");
    assert_eq!(diags.0[0].code, codes::INPUT_TOO_LARGE);
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    fn voice() -> String {
        std::fs::read_to_string(Path::new(ROOT).join("examples/voice-pipeline/gpuplan.yaml"))
            .expect("example")
    }

    fn run(name: &str, text: &str) {
        let (sources, result) = check(name, text, &Catalog::builtin());
        if let Err(diags) = &result {
            // Rendering must not panic either, whatever the spans.
            let _ = render::human(&sources, &diags.0, false);
            assert!(diags.has_errors());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
            run("m.yaml", &text);
            run("m.toml", &text);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let text = String::from_utf8_lossy(&bytes);
            run("m.yaml", &text);
            run("m.toml", &text);
        }

        #[test]
        fn mutated_examples_never_panic(edits in proptest::collection::vec((any::<prop::sample::Index>(), "[\\PC\\n ]{0,6}"), 1..6)) {
            let mut text = voice();
            for (at, insert) in edits {
                let mut i = at.index(text.len() + 1);
                while !text.is_char_boundary(i) { i -= 1; }
                text.insert_str(i, &insert);
            }
            run("m.yaml", &text);
        }

        #[test]
        fn any_replica_count_is_accepted_or_refused_cleanly(n in any::<i64>()) {
            let text = voice().replacen("replicas: 1", &format!("replicas: {n}"), 1);
            run("m.yaml", &text);
        }

        #[test]
        fn any_memory_string_is_accepted_or_refused_cleanly(mem in "[0-9.eE+-]{0,30}(GiB|MiB|GB|Gi|)") {
            let text = voice().replacen("memory: 9.6GB", &format!("memory: \"{mem}\""), 1);
            run("m.yaml", &text);
        }
    }
}

// --- the command line --------------------------------------------------------------------------

#[test]
fn validate_exits_one_and_writes_nothing_to_stdout_for_every_invalid_manifest() {
    for path in files("tests/fixtures/invalid", &["yaml", "toml"]) {
        let out = super::cli::gpuplan()
            .args(["validate", "--color", "never"])
            .arg(&path)
            .output()
            .expect("runs gpuplan");
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty(), "{} wrote to stdout", path.display());
        assert!(String::from_utf8_lossy(&out.stderr).contains("error["), "{}", path.display());
    }
}

#[test]
fn validate_reports_json_diagnostics_with_line_and_column() {
    let path = Path::new(ROOT).join("tests/fixtures/invalid/unknown-model-field-typo.yaml");
    let out = super::cli::gpuplan().args(["validate", "--format", "json"]).arg(&path).output().expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let d = &json["diagnostics"][0];
    assert_eq!(d["code"], "unknown-field");
    assert_eq!(d["labels"][0]["line"], 14);
    assert_eq!(d["labels"][0]["column"], 5);
    assert_eq!(d["help"], "did you mean `replicas`?");
}

#[test]
fn schema_command_prints_the_checked_in_schema() {
    let out = super::cli::gpuplan().arg("schema").output().expect("runs");
    assert_eq!(out.status.code(), Some(0));
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let fresh: serde_json::Value = serde_json::from_str(&gpuplan::manifest::schema_json()).expect("JSON");
    assert_eq!(printed, fresh);
}

#[test]
fn voice_pipeline_validates_from_the_command_line() {
    let path = Path::new(ROOT).join("examples/voice-pipeline/gpuplan.yaml");
    let out = super::cli::gpuplan().args(["validate"]).arg(&path).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn handwritten_toml_voice_pipeline_equals_the_yaml_one() {
    let read = |f: &str| {
        std::fs::read_to_string(Path::new(ROOT).join("examples/voice-pipeline").join(f)).expect("example")
    };
    let catalog = Catalog::builtin();
    let (_, y) = check("gpuplan.yaml", &read("gpuplan.yaml"), &catalog);
    let (sources, t) = check("gpuplan.toml", &read("gpuplan.toml"), &catalog);
    let (y, _) = y.expect("yaml valid");
    let (t, warnings) = t.unwrap_or_else(|d| panic!("{}", render::human(&sources, &d.0, false)));
    assert!(warnings.is_empty());
    assert_eq!(serde_json::to_value(&y).expect("json"), serde_json::to_value(&t).expect("json"));
    let validator = schema_validator();
    let json = tree_json("gpuplan.toml", &read("gpuplan.toml")).expect("parses");
    assert!(validator.is_valid(&json));
}

#[test]
fn validate_json_is_one_document_with_the_warnings() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("gpuplan.yaml");
    let text = std::fs::read_to_string(Path::new(ROOT).join("examples/voice-pipeline/gpuplan.yaml"))
        .expect("example")
        .replace("    latency: { p99: 300ms, baseline: 40ms }\n", "")
        .replacen(
            "    replicas: 1\n    isolation: hardware\n",
            "    isolation: hardware\n    demand:\n      rate: 40rps\n      points:\n        - { gpu: A100-SXM4-80GB, profile: 1g.10gb, rps: 20, latency: 50ms }\n",
            1,
        );
    std::fs::write(&path, text).expect("writes");
    let out = super::cli::gpuplan().args(["validate", "--format", "json"]).arg(&path).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(json["valid"], true);
    assert_eq!(json["diagnostics"][0]["code"], "missing-measurements");
    assert_eq!(json["diagnostics"][0]["severity"], "warning");
}

#[test]
fn a_manifest_that_is_not_utf8_is_a_user_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("gpuplan.yaml");
    std::fs::write(&path, b"apiVersion: gpuplan.io/v1alpha1\nkind: \xff\xfeGpuPlan\n").expect("writes");
    let out = super::cli::gpuplan().args(["validate", "--color", "never"]).arg(&path).output().expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error[syntax]: the manifest is not UTF-8 text"), "{stderr}");
    assert!(stderr.contains(":2:7"), "{stderr}");
}

#[test]
fn a_broken_measurements_file_reports_its_own_error_not_no_measured_points() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("gpuplan.yaml");
    std::fs::write(
        dir.path().join("asr.csv"),
        "gpu,profile,batch,processes,rps,latency_ms\nA100-SXM4-80GB,1g.10gb,8,1,20,50\n",
    )
    .expect("writes");
    let text = std::fs::read_to_string(Path::new(ROOT).join("examples/voice-pipeline/gpuplan.yaml"))
        .expect("example")
        .replace("    latency: { p99: 300ms, baseline: 40ms }\n", "")
        .replacen(
            "    replicas: 1\n    isolation: hardware\n",
            "    isolation: hardware\n    demand:\n      rate: 40rps\n      measurements: asr.csv\n",
            1,
        );
    std::fs::write(&path, text).expect("writes");
    let out = super::cli::gpuplan().args(["validate", "--format", "json"]).arg(&path).output().expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let codes: Vec<&str> =
        json["diagnostics"].as_array().expect("list").iter().filter_map(|d| d["code"].as_str()).collect();
    assert!(
        !codes.is_empty() && codes.iter().all(|c| *c == "measurement-header"),
        "the real error, and no vaguer one: {codes:?}"
    );
}

/// `spec::validate` judges whether one replica fits any GPU by the planner's own rule
/// (`plan::rules::usable_mib`, defined once in `spec`): a model of exactly the usable MiB of an
/// L4 is accepted and planned on it, one MiB more is `model-fits-no-gpu`.
#[test]
fn the_validator_and_the_planner_agree_where_a_model_stops_fitting() {
    let catalog = catalog();
    let l4 = catalog.get("L4").expect("L4 in the catalog");
    let usable = gpuplan::plan::rules::usable_mib(l4.memory_mib, 0.05);
    assert!(usable.fract() > 0.0, "the boundary lies between two MiB: {usable}");
    let most = usable.floor() as u64;
    let manifest = |mib: u64| {
        format!(
            "apiVersion: gpuplan.io/v1alpha1\nkind: GpuPlan\nmetadata: {{ name: edge }}\n\
             inventory:\n  pools:\n    - {{ name: l4, gpu: L4, gpusPerNode: 1, nodes: [n1] }}\n\
             policy: {{ memoryHeadroom: 0.05 }}\n\
             models:\n  - {{ name: big, image: example.com/big:1, memory: {mib}MiB }}\n"
        )
    };
    let (_, fits) = check("fits.yaml", &manifest(most), &catalog);
    let (spec, _) = fits.expect("exactly the usable memory is accepted");
    let plan = gpuplan::pipeline::plan(&spec, &catalog).expect("and planned (verified)");
    assert_eq!(plan.quality.gpus.used, 1);
    let (_, over) = check("over.yaml", &manifest(most + 1), &catalog);
    let diags = over.expect_err("one MiB more fits no GPU");
    assert!(
        diags.iter().any(|d| d.code == codes::MODEL_FITS_NO_GPU),
        "{:?}",
        diags.iter().map(|d| d.code).collect::<Vec<_>>()
    );
}

/// A replica over `gpus` whole GPUs needs its share of the memory on each of them
/// (`plan::rules::per_gpu_mib`, rounded up), in the planner as in the verifier: four L4s offer
/// more in all than the replica needs but less than its share on each GPU, so it runs on the
/// (dearer) H100s instead of failing the verifier (it did: exit 2).
#[test]
fn a_multi_gpu_replica_needs_its_share_of_the_memory_on_each_gpu() {
    let catalog = catalog();
    let l4 = catalog.get("L4").expect("L4 in the catalog");
    let usable = gpuplan::plan::rules::usable_mib(l4.memory_mib, 0.05);
    let mib = (usable * 4.0).floor() as u64;
    assert!(gpuplan::plan::rules::per_gpu_mib(mib, 4) as f64 > usable, "the share is just too large");
    let text = format!(
        "apiVersion: gpuplan.io/v1alpha1\nkind: GpuPlan\nmetadata: {{ name: edge }}\n\
         inventory:\n  pools:\n\
         \x20   - {{ name: l4, gpu: L4, gpusPerNode: 4, nodes: [l4-1], costPerGpuHour: 0.5 }}\n\
         \x20   - {{ name: h100, gpu: H100-SXM5-80GB, gpusPerNode: 4, nodes: [h-1], costPerGpuHour: 4 }}\n\
         policy: {{ memoryHeadroom: 0.05 }}\n\
         models:\n  - {{ name: big, image: example.com/big:1, memory: {mib}MiB, gpus: 4 }}\n"
    );
    let (_, checked) = check("multi.yaml", &text, &catalog);
    let (spec, _) = checked.expect("valid: the H100s hold it");
    let plan = gpuplan::pipeline::plan(&spec, &catalog).expect("planned and verified");
    let pools: Vec<&str> = plan.models[0].groups.iter().map(|g| g.pool.as_str()).collect();
    assert_eq!(pools, ["h100"]);
}
