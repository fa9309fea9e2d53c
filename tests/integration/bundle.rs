//! The rendered bundle: snapshots, re-parsing, planned resources, NVIDIA schemas, injection.

use std::collections::BTreeMap;

use gpuplan::catalog::layout;
use gpuplan::diagnostics::codes;
use gpuplan::render::nvidia::{self, DevicePluginConfig, MigPartedConfig};
use gpuplan::render::workloads::check_documents;
use gpuplan::render::{Bundle, Templates, render};
use serde_json::Value;

use crate::fixtures_plans::{self as fx, Fixture};

pub(crate) fn bundle(f: &Fixture) -> Bundle {
    render(&f.spec, &fx::catalog(), &f.plan, &Templates::builtin())
        .unwrap_or_else(|d| panic!("fixture `{}` does not render: {d:?}", f.name))
}

/// Every document of every YAML file of a bundle, with its file.
pub(crate) fn documents(bundle: &Bundle) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (path, text) in bundle.files.iter().filter(|(p, _)| p.ends_with(".yaml")) {
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("`{path}` does not parse: {e}"));
        assert!(!docs.is_empty(), "`{path}` has no document");
        out.extend(docs.into_iter().map(|d| (path.clone(), d)));
    }
    out
}

fn of_kind<'a>(docs: &'a [(String, Value)], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|(_, d)| d["kind"] == kind).map(|(_, d)| d).collect()
}

fn configmap_data(docs: &[(String, Value)], name: &str) -> BTreeMap<String, String> {
    let cm = of_kind(docs, "ConfigMap")
        .into_iter()
        .find(|d| d["metadata"]["name"] == name)
        .expect("configmap exists");
    serde_json::from_value(cm["data"].clone()).expect("string data")
}

fn mig_parted(docs: &[(String, Value)]) -> MigPartedConfig {
    let data = configmap_data(docs, "gpuplan-mig-parted-config");
    serde_saphyr::from_str(&data["config.yaml"]).expect("mig-parted config parses")
}

/// Hand-built fixtures have fixed plans; the examples' plans come from the solver, and HiGHS and
/// the pure-Rust microlp may pick different plans of equal cost, so those snapshots are
/// recorded per solver (`…@microlp.snap` for the pure-Rust build, `--no-default-features`).
#[test]
fn every_fixture_bundle_matches_its_snapshot() {
    for f in fx::all() {
        let text = bundle(&f).to_text();
        if f.name.starts_with("example-") {
            crate::per_solver(|| insta::assert_snapshot!(format!("bundle-{}", f.name), text));
        } else {
            insta::assert_snapshot!(format!("bundle-{}", f.name), text);
        }
    }
}

#[test]
fn rendering_twice_gives_identical_bytes() {
    for f in fx::all() {
        assert_eq!(bundle(&f), bundle(&f), "fixture `{}`", f.name);
    }
}

#[test]
fn every_document_parses_and_is_a_kubernetes_object_or_documented_data() {
    for f in fx::all() {
        let b = bundle(&f);
        for (path, text) in &b.files {
            if path.ends_with(".yaml")
                && !path.starts_with("nodes/autoscaled/")
                && !path.ends_with("helm-values.yaml")
                && path != gpuplan::render::dra::DRIVER_VALUES
            {
                check_documents(text).unwrap_or_else(|e| panic!("{}: `{path}`: {e}", f.name));
            }
        }
        let plan: Value = serde_json::from_str(&b.files["plan.json"]).expect("plan.json parses");
        assert_eq!(plan["name"], f.plan.name);
        assert!(b.files["plan.json"].ends_with("}\n"));
        let _: Value = serde_json::from_str(&b.files["nodes/nodes.json"]).expect("nodes.json parses");
    }
}

/// Per model and resource, the Deployments' replicas add up to the plan's groups; each
/// Deployment is pinned to one named node (or one layout of an autoscaled pool) and requests
/// exactly the planned resource, cpu and memory (never BestEffort).
#[test]
fn every_deployment_requests_exactly_its_planned_resource() {
    for f in fx::all() {
        let docs = documents(&bundle(&f));
        let deployments = of_kind(&docs, "Deployment");
        for model in &f.plan.models {
            for group in &model.groups {
                let total: u64 = deployments
                    .iter()
                    .filter(|d| d["metadata"]["labels"]["app.kubernetes.io/name"] == model.name.as_str())
                    .filter(|d| {
                        d["metadata"]["annotations"]["gpuplan.io/resource"] == group.resource.as_str()
                    })
                    .filter(|d| d["metadata"]["annotations"]["gpuplan.io/pool"] == group.pool.as_str())
                    .map(|d| d["spec"]["replicas"].as_u64().expect("replicas"))
                    .sum();
                assert_eq!(total, u64::from(group.replicas), "{}: {} {}", f.name, model.name, group.resource);
            }
        }
        for d in &deployments {
            let name = d["metadata"]["name"].as_str().expect("name");
            let resource = d["metadata"]["annotations"]["gpuplan.io/resource"].as_str().expect("resource");
            let pod = &d["spec"]["template"]["spec"];
            let containers = pod["containers"].as_array().expect("containers");
            assert_eq!(containers.len(), 1);
            let limits = containers[0]["resources"]["limits"].as_object().expect("limits");
            let gpu: Vec<&String> = limits.keys().filter(|k| k.contains('/')).collect();
            if d["metadata"]["annotations"]["gpuplan.io/backend"] == "dra" {
                // DRA: the device comes from the pod's one claim (tests/integration/dra.rs).
                assert!(gpu.is_empty(), "{name}: no extended resource next to a claim");
                assert_eq!(
                    containers[0]["resources"]["claims"],
                    serde_json::json!([{"name": "gpu"}]),
                    "{name}"
                );
                assert_eq!(pod["resourceClaims"].as_array().map(Vec::len), Some(1), "{name}");
            } else {
                assert_eq!(gpu, [resource], "{name}: only the planned GPU resource");
            }
            let requests = &containers[0]["resources"]["requests"];
            assert!(requests["cpu"].is_string() && requests["memory"].is_string(), "{name}: BestEffort");
            let hosts = &pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                [0]["matchExpressions"][0];
            if hosts["key"] == "kubernetes.io/hostname" {
                assert_eq!(hosts["values"].as_array().map(Vec::len), Some(1), "{name}: pinned to one node");
            } else {
                assert_eq!(hosts["key"], "gpuplan.io/pool", "{name}");
            }
            let rolling = &d["spec"]["strategy"]["rollingUpdate"];
            assert!(rolling["maxSurge"].is_number() && rolling["maxUnavailable"].is_number(), "{name}");
            let sc = &containers[0]["securityContext"];
            assert_eq!(sc["allowPrivilegeEscalation"], false);
            assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
            assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
        }
        // One PodDisruptionBudget per model with more than one replica, over all its pods.
        let pdbs = of_kind(&docs, "PodDisruptionBudget");
        let multi: Vec<&str> = f
            .plan
            .models
            .iter()
            .filter(|m| m.groups.iter().map(|g| g.replicas).sum::<u32>() > 1)
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(pdbs.len(), multi.len(), "{}: one PDB per model with replicas > 1", f.name);
        for pdb in pdbs {
            let model = pdb["metadata"]["name"].as_str().expect("name");
            assert!(multi.contains(&model), "{model}");
            assert_eq!(pdb["spec"]["maxUnavailable"], 1);
            assert_eq!(pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"], model);
        }
    }
}

/// Every namespace an object of the bundle lives in is created by the bundle.
#[test]
fn every_namespace_used_is_created_by_the_bundle() {
    for f in fx::all() {
        let docs = documents(&bundle(&f));
        let created: Vec<&str> =
            of_kind(&docs, "Namespace").iter().filter_map(|n| n["metadata"]["name"].as_str()).collect();
        for (path, d) in &docs {
            if path.starts_with("argocd/") || path.starts_with("flux/") {
                continue;
            }
            if let Some(ns) = d["metadata"]["namespace"].as_str() {
                assert!(created.contains(&ns), "{}: `{path}` uses namespace `{ns}`", f.name);
            }
        }
    }
}

/// A node whose layout changes is relabelled only after its drain: its patch is in
/// `nodes/drain/`, which no kustomization of the main sync lists.
#[test]
fn nodes_that_must_drain_are_held_back_from_the_main_sync() {
    let f = fx::voice_pipeline();
    assert!(f.plan.pools[0].nodes[0].must_drain);
    let b = bundle(&f);
    let drain = &b.files["nodes/drain/gpu-a-1.yaml"];
    assert!(drain.contains("name: gpu-a-1") && drain.contains("gpuplan.io/must-drain"));
    assert!(!b.files["nodes/labels/node-labels.yaml"].contains("name: gpu-a-1"));
    for (path, text) in &b.files {
        if path.ends_with("kustomization.yaml") && path != "nodes/drain/kustomization.yaml" {
            assert!(!text.contains("drain"), "`{path}` must not list the held-back patches");
        }
    }
}

#[test]
fn voice_pipeline_mig_layout_is_valid_and_hosts_asr_and_tts_resources() {
    let f = fx::voice_pipeline();
    let docs = documents(&bundle(&f));
    let config = mig_parted(&docs);
    let catalog = fx::catalog();
    let a100 = catalog.get(fx::A100).expect("A100-80GB");
    let node_config = &config.mig_configs["voice-prod-a100-l1"];
    let mut mig_resources = Vec::new();
    let mut whole_gpu = false;
    for entry in node_config {
        match &entry.mig_devices {
            Some(devices) if entry.mig_enabled => {
                let profiles: Vec<&str> =
                    devices.iter().flat_map(|(p, &n)| std::iter::repeat_n(p.as_str(), n as usize)).collect();
                layout::validate(a100, &profiles).expect("layout valid on A100-80GB");
                mig_resources
                    .extend(devices.keys().map(|p| format!("nvidia.com/mig-{}", p.replace('+', "."))));
            }
            _ => whole_gpu = true,
        }
    }
    assert!(whole_gpu, "the node exposes a whole GPU for the LLM");
    for d in of_kind(&docs, "Deployment") {
        let limits = d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
            .as_object()
            .expect("limits");
        let resource = limits.keys().find(|k| k.contains('/')).expect("one GPU resource");
        match d["metadata"]["name"].as_str() {
            Some("parakeet-asr-gpu-a-1" | "fastpitch-tts-gpu-a-1") => {
                assert!(
                    mig_resources.contains(resource),
                    "{resource} is not in the node's layout {mig_resources:?}"
                );
            }
            Some("nemotron-llm-gpu-a-1") => assert_eq!(limits["nvidia.com/gpu"], 1),
            other => panic!("unexpected deployment {other:?}"),
        }
    }
}

#[test]
fn mig_enabled_entries_are_filtered_to_the_planned_gpu_model() {
    for f in fx::all() {
        let config = mig_parted(&documents(&bundle(&f)));
        assert!(config.mig_configs.contains_key("all-disabled"), "{}", f.name);
        let catalog = fx::catalog();
        // The PCI ids of the GPU model of every pool whose nodes use a config.
        let mut expected: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for pool in &f.plan.pools {
            let pci_ids = catalog.get(&pool.gpu).expect("catalog GPU").pci_ids.clone();
            for node in &pool.nodes {
                expected.entry(node.mig_config.as_str()).or_default().extend(pci_ids.iter().cloned());
            }
        }
        for (name, entries) in &config.mig_configs {
            for e in entries.iter().filter(|e| e.mig_enabled) {
                let mut want = expected.get(name.as_str()).cloned().unwrap_or_default();
                want.sort();
                want.dedup();
                let got = match &e.device_filter {
                    Some(nvidia::DeviceFilter::Many(ids)) => ids.clone(),
                    Some(nvidia::DeviceFilter::One(id)) => vec![id.clone()],
                    None => Vec::new(),
                };
                let mut got_sorted = got.clone();
                got_sorted.sort();
                assert!(!got.is_empty(), "{}: `{name}` enables MIG without a device filter", f.name);
                assert_eq!(got_sorted, want, "{}: `{name}`", f.name);
            }
        }
        for node in f.plan.pools.iter().flat_map(|p| &p.nodes) {
            assert!(config.mig_configs.contains_key(&node.mig_config), "{}: {}", f.name, node.mig_config);
        }
    }
}

#[test]
fn nvidia_documents_validate_against_the_derived_schemas() {
    for f in fx::all() {
        let docs = documents(&bundle(&f));
        let mig = configmap_data(&docs, "gpuplan-mig-parted-config");
        let value: Value = serde_saphyr::from_str(&mig["config.yaml"]).expect("parses");
        assert_eq!(
            nvidia::schema_errors(nvidia::MIG_PARTED_SCHEMA, &value),
            Vec::<String>::new(),
            "{}",
            f.name
        );
        let dp = configmap_data(&docs, "gpuplan-device-plugin-config");
        assert!(dp.contains_key("default"));
        for node in f.plan.pools.iter().flat_map(|p| &p.nodes) {
            assert!(dp.contains_key(&node.device_plugin_config), "{}: {}", f.name, node.device_plugin_config);
        }
        for (key, text) in &dp {
            let value: Value = serde_saphyr::from_str(text).expect("parses");
            assert_eq!(
                nvidia::schema_errors(nvidia::DEVICE_PLUGIN_SCHEMA, &value),
                Vec::<String>::new(),
                "{key}"
            );
            let typed: DevicePluginConfig = serde_saphyr::from_str(text).expect("typed parse");
            let strategy = serde_json::to_value(f.spec.cluster.mig_strategy).expect("serialises");
            assert_eq!(typed.flags.and_then(|fl| fl.mig_strategy).as_deref(), strategy.as_str());
        }
    }
}

#[test]
fn time_sliced_config_names_replicas_and_renames() {
    let f = fx::time_sliced();
    let dp = configmap_data(&documents(&bundle(&f)), "gpuplan-device-plugin-config");
    let config: DevicePluginConfig = serde_saphyr::from_str(&dp["shared-small-ts4"]).expect("parses");
    let ts = config.sharing.and_then(|s| s.time_slicing).expect("time slicing");
    assert_eq!(ts.rename_by_default, Some(true));
    assert_eq!(ts.fail_requests_greater_than_one, Some(true));
    assert_eq!(ts.resources.len(), 1);
    assert_eq!((ts.resources[0].name.as_str(), ts.resources[0].replicas), ("nvidia.com/gpu", 4));
}

#[test]
fn schemas_reject_what_nvidia_rejects() {
    let bad_mig: Value = serde_json::json!({
        "version": "v2",
        "mig-configs": { "x": [{ "devices": "some", "mig-enabled": true, "device-filter": "20B2" }] }
    });
    assert!(nvidia::schema_errors(nvidia::MIG_PARTED_SCHEMA, &bad_mig).len() >= 3);
    let bad_dp: Value = serde_json::json!({
        "version": "v1",
        "flags": { "migStrategy": "mixed", "renameByDefault": true },
        "sharing": { "timeSlicing": { "resources": [{ "name": "nvidia.com/gpu", "replicas": 1 }] } }
    });
    assert_eq!(nvidia::schema_errors(nvidia::DEVICE_PLUGIN_SCHEMA, &bad_dp).len(), 2);
}

/// NVIDIA's own files, vendored in `tests/data/nvidia/` (provenance and licence in its `README.md`).
fn upstream_files() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/nvidia");
    let entries = std::fs::read_dir(&dir).expect("tests/data/nvidia is readable");
    let mut files: Vec<(String, String)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            (name, std::fs::read_to_string(&p).expect("readable"))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn upstream_nvidia_files_parse_and_validate_with_the_same_code() {
    let files = upstream_files();
    assert_eq!(files.len(), 10, "the vendored NVIDIA files");
    let mut mig_checked = 0;
    let mut dp_checked = 0;
    for (name, text) in files {
        let doc: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Bare mig-parted files, ConfigMaps, and Helm values with `migManager.config.data`.
        let mut configs: Vec<(String, String)> = Vec::new();
        if doc.get("mig-configs").is_some() {
            configs.push(("mig".to_owned(), text.clone()));
        }
        let data = doc.get("data").or_else(|| doc.pointer("/migManager/config/data"));
        for (key, value) in data.and_then(Value::as_object).into_iter().flatten() {
            let Some(s) = value.as_str() else { continue };
            let kind = if key == "config.yaml" {
                "mig"
            } else if key == "clients.yaml" {
                continue;
            } else {
                "dp"
            };
            configs.push((kind.to_owned(), s.to_owned()));
        }
        for (kind, config) in configs {
            let value: Value = serde_saphyr::from_str(&config).unwrap_or_else(|e| panic!("{name}: {e}"));
            if kind == "mig" {
                assert_eq!(
                    nvidia::schema_errors(nvidia::MIG_PARTED_SCHEMA, &value),
                    Vec::<String>::new(),
                    "{name}"
                );
                let _: MigPartedConfig =
                    serde_saphyr::from_str(&config).unwrap_or_else(|e| panic!("{name}: {e}"));
                mig_checked += 1;
            } else {
                assert_eq!(
                    nvidia::schema_errors(nvidia::DEVICE_PLUGIN_SCHEMA, &value),
                    Vec::<String>::new(),
                    "{name}"
                );
                let _: DevicePluginConfig =
                    serde_saphyr::from_str(&config).unwrap_or_else(|e| panic!("{name}: {e}"));
                dp_checked += 1;
            }
        }
    }
    assert!(mig_checked >= 5, "only {mig_checked} mig-parted configs found");
    assert!(dp_checked >= 4, "only {dp_checked} device-plugin configs found");
}

#[test]
fn plan_md_links_every_node_picture_and_every_picture_is_xml() {
    for f in fx::all() {
        let b = bundle(&f);
        let md = &b.files["PLAN.md"];
        for node in f.plan.pools.iter().flat_map(|p| &p.nodes) {
            let path = format!("plan/{}.svg", node.name);
            assert!(md.contains(&format!("]({path})")), "{}: PLAN.md does not link {path}", f.name);
            let svg = &b.files[&path];
            let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{path}: {e}"));
            assert_eq!(doc.root_element().tag_name().name(), "svg");
            let rects = doc.descendants().filter(|n| n.has_tag_name("rect")).count();
            assert!(rects > node.gpus.len(), "{path}: the slice grid is drawn");
        }
        assert!(md.contains("| used by this plan |"));
    }
}

#[test]
fn plan_md_names_the_nodes_to_drain() {
    let b = bundle(&fx::voice_pipeline());
    let md = &b.files["PLAN.md"];
    let drain = md.split("## Nodes to drain").nth(1).expect("drain section");
    assert!(drain.contains("`gpu-a-1`") && !drain.contains("`gpu-a-2`"));
    assert!(md.contains("$4.80/h"));
}

#[test]
fn hostile_values_are_escaped_and_round_trip() {
    let mut f = fx::voice_pipeline();
    let hostile = "x\"\n---\napiVersion: v1\nkind: Secret\n# \u{2028}'{{ name }}' \\ yes";
    let asr = f.spec.models.iter_mut().find(|m| m.name == "parakeet-asr").expect("asr");
    asr.env.push(("EVIL".to_owned(), hostile.to_owned()));
    asr.container.args = vec![hostile.to_owned(), "yes".to_owned(), "0o17".to_owned()];
    asr.container.command = vec!["sh".to_owned(), "-c".to_owned(), "echo ${HOME}: done".to_owned()];
    let b = bundle(&f);
    let docs = documents(&b);
    assert_eq!(of_kind(&docs, "Secret").len(), 0, "no injected document");
    let text = &b.files["workloads/parakeet-asr.yaml"];
    assert_eq!(check_documents(text).expect("parses").len(), 3, "deployment, pdb and service only");
    let d = of_kind(&docs, "Deployment")
        .into_iter()
        .find(|d| d["metadata"]["name"] == "parakeet-asr-gpu-a-1")
        .expect("asr");
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["args"], serde_json::json!([hostile, "yes", "0o17"]));
    assert_eq!(c["command"][2], "echo ${HOME}: done");
    let env = c["env"].as_array().expect("env");
    assert!(env.iter().any(|e| e["name"] == "EVIL" && e["value"] == hostile));
}

#[test]
fn hostile_names_are_rejected_not_rewritten() {
    type Breaker = Box<dyn Fn(&mut Fixture)>;
    let cases: Vec<(&str, Breaker)> = vec![
        ("model name with traversal", Box::new(|f| rename_model(f, "../../etc/evil"))),
        ("model name with newline", Box::new(|f| rename_model(f, "asr\nkind: Secret"))),
        (
            "image with newline",
            Box::new(|f| f.spec.models[0].container.image = "nginx\n---\nkind: Secret".to_owned()),
        ),
        ("env name with colon", Box::new(|f| f.spec.models[0].env.push(("A: b".to_owned(), "v".to_owned())))),
        ("namespace", Box::new(|f| f.spec.cluster.namespace = "inference\n  evil: true".to_owned())),
        ("node name", Box::new(|f| f.plan.pools[0].nodes[0].name = "../gpu-a-1".to_owned())),
        ("config name", Box::new(|f| f.plan.pools[0].nodes[0].mig_config = "x\"y".to_owned())),
        ("resource", Box::new(|f| f.plan.models[0].groups[0].resource = "nvidia.com/mig\n-x: 2".to_owned())),
        (
            "deployment clash",
            Box::new(|f| {
                // `fastpitch-tts` on node `a-b` and `fastpitch-tts-a` on node `b` would both
                // render `fastpitch-tts-a-b`.
                let rename = |n: &mut String| {
                    *n = match n.as_str() {
                        "gpu-a-1" => "a-b".to_owned(),
                        "gpu-a-2" => "b".to_owned(),
                        other => other.to_owned(),
                    }
                };
                for node in &mut f.plan.pools[0].nodes {
                    rename(&mut node.name);
                }
                let llm = f.plan.pools[0].nodes[0].gpus[1].tenants.remove(0);
                f.plan.pools[0].nodes[0].gpus[1].mode = gpuplan::plan::GpuMode::Unused;
                f.plan.pools[0].nodes[1].gpus[0]
                    .tenants
                    .push(gpuplan::plan::Tenant { model: "fastpitch-tts-a".into(), ..llm });
                f.plan.pools[0].nodes[1].gpus[0].mode = gpuplan::plan::GpuMode::Whole;
                for m in &mut f.plan.models {
                    for g in &mut m.groups {
                        g.nodes.iter_mut().for_each(rename);
                    }
                    if m.name == "nemotron-llm" {
                        m.name = "fastpitch-tts-a".into();
                        m.groups[0].nodes = vec!["b".into()];
                    }
                }
                if let Some(m) = f.spec.models.iter_mut().find(|m| m.name == "nemotron-llm") {
                    m.name = "fastpitch-tts-a".into();
                }
                if let gpuplan::spec::Nodes::Named(nodes) = &mut f.spec.pools[0].nodes {
                    nodes.iter_mut().for_each(rename);
                }
            }),
        ),
    ];
    for (what, break_it) in cases {
        let mut f = fx::voice_pipeline();
        break_it(&mut f);
        let err = render(&f.spec, &fx::catalog(), &f.plan, &Templates::builtin())
            .expect_err(&format!("{what}: rendered anyway"));
        assert!(err.iter().all(|d| d.code == codes::UNSAFE_NAME), "{what}: {err:?}");
        assert!(err.iter().all(|d| d.help.is_some()), "{what}: a hint");
    }
}

fn rename_model(f: &mut Fixture, name: &str) {
    let old = f.spec.models[0].name.clone();
    f.spec.models[0].name = name.to_owned();
    if let Some(m) = f.plan.models.iter_mut().find(|m| m.name == old) {
        m.name = name.to_owned();
    }
}

#[test]
fn user_templates_are_escaped_too_and_strict() {
    let f = fx::voice_pipeline();
    // A careless template that prints a value without any filter still cannot inject.
    let mut templates = Templates::builtin();
    templates
        .replace(
            "service.yaml.j2",
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ name }}\n  namespace: {{ namespace }}\n  annotations:\n    note: {{ ports[0].name ~ \"\\n---\\nkind: Secret\" }}\nspec:\n  ports:\n    - port: {{ ports[0].port }}\n".to_owned(),
        )
        .expect("known template");
    let b = render(&f.spec, &fx::catalog(), &f.plan, &templates).expect("renders");
    let docs = documents(&b);
    assert_eq!(of_kind(&docs, "Secret").len(), 0);
    let svc =
        of_kind(&docs, "Service").into_iter().find(|s| s["metadata"]["name"] == "parakeet-asr").expect("svc");
    assert_eq!(svc["metadata"]["annotations"]["note"], "grpc\n---\nkind: Secret");

    let mut strict = Templates::builtin();
    strict
        .replace(
            "service.yaml.j2",
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ nmae }}\n".to_owned(),
        )
        .expect("known");
    let err = render(&f.spec, &fx::catalog(), &f.plan, &strict).expect_err("undefined variable");
    assert!(err.iter().any(|d| d.code == codes::TEMPLATE_ERROR), "{err:?}");

    let mut broken = Templates::builtin();
    broken
        .replace("service.yaml.j2", "apiVersion: v1\nkind: Service\n  bad: indent\n".to_owned())
        .expect("known");
    let err = render(&f.spec, &fx::catalog(), &f.plan, &broken).expect_err("invalid yaml");
    assert!(err.iter().any(|d| d.code == codes::INVALID_RENDERED_YAML), "{err:?}");
}

#[test]
fn node_patches_never_carry_a_spec_and_are_guarded() {
    for f in fx::all() {
        let docs = documents(&bundle(&f));
        for node in of_kind(&docs, "Node") {
            let keys: Vec<&String> = node.as_object().expect("map").keys().collect();
            assert_eq!(keys, ["apiVersion", "kind", "metadata"], "label-only patch");
            let ann = &node["metadata"]["annotations"];
            assert_eq!(ann["gpuplan.io/label-patch"], "true");
            assert!(
                ann["argocd.argoproj.io/sync-options"].as_str().is_some_and(|s| s.contains("Prune=false"))
            );
            assert_eq!(ann["kustomize.toolkit.fluxcd.io/prune"], "disabled");
        }
        assert_eq!(of_kind(&docs, "ValidatingAdmissionPolicy").len(), 1);
        let named: usize = f.plan.pools.iter().filter(|p| !p.autoscaled).map(|p| p.nodes.len()).sum();
        assert_eq!(of_kind(&docs, "Node").len(), named, "{}", f.name);
    }
}

#[test]
fn autoscaled_pools_get_node_template_labels_instead_of_node_patches() {
    let f = fx::autoscaled();
    let b = bundle(&f);
    let text = &b.files["nodes/autoscaled/burst.yaml"];
    let doc: Value = serde_saphyr::from_str(text).expect("parses");
    let groups = doc["nodeGroups"].as_array().expect("groups");
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0]["labels"]["nvidia.com/mig.config"], "burst-1g10gb");
    assert_eq!(groups[0]["taints"][0]["key"], "nvidia.com/gpu");
    let tags = groups[0]["clusterAutoscalerTags"].as_object().expect("tags");
    assert!(
        tags.keys().any(|k| k.starts_with("k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/"))
    );
    assert!(tags.contains_key("k8s.io/cluster-autoscaler/node-template/label/nvidia.com/mig.config"));
    assert!(!b.files.contains_key("nodes/labels/node-labels.yaml"));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Whatever text a user puts in env values and args, it comes back byte for byte from the
    /// rendered YAML and adds no document.
    #[test]
    fn any_env_value_and_arg_round_trips(value in "\\PC*|[\\x00-\\x7f\\u{85}\\u{2028}\\u{2029}\\u{feff}]{0,40}", arg in ".*") {
        let mut f = fx::voice_pipeline();
        let asr = f.spec.models.iter_mut().find(|m| m.name == "parakeet-asr").expect("asr");
        asr.env = vec![("V".to_owned(), value.clone())];
        asr.container.args = vec![arg.clone()];
        let b = bundle(&f);
        let docs = check_documents(&b.files["workloads/parakeet-asr.yaml"]).expect("parses");
        proptest::prop_assert_eq!(docs.len(), 3);
        let c = &docs[0]["spec"]["template"]["spec"]["containers"][0];
        proptest::prop_assert_eq!(&c["env"][0]["value"], &Value::String(value));
        proptest::prop_assert_eq!(&c["args"][0], &Value::String(arg));
    }
}

/// For every plan: each Deployment's resource exists on every node it is steered to — a MIG
/// resource in a MIG-enabled entry (whose layout is valid on the pool's GPU) of the node's
/// mig-parted config, a whole GPU in a MIG-disabled entry, a `.shared` resource in the node's
/// time-slicing config.
#[test]
fn every_requested_resource_exists_in_its_nodes_configs() {
    let catalog = fx::catalog();
    for f in fx::all() {
        let docs = documents(&bundle(&f));
        let config = mig_parted(&docs);
        let dp = configmap_data(&docs, "gpuplan-device-plugin-config");
        for model in &f.plan.models {
            for group in &model.groups {
                let pool = f.plan.pools.iter().find(|p| p.name == group.pool).expect("pool");
                let gpu = catalog.get(&pool.gpu).expect("gpu in catalog");
                let (base, shared) = match group.resource.strip_suffix(".shared") {
                    Some(base) => (base, true),
                    None => (group.resource.as_str(), false),
                };
                for node in pool.nodes.iter().filter(|n| group.nodes.contains(&n.name)) {
                    let entries = &config.mig_configs[&node.mig_config];
                    let mut exposed = Vec::new();
                    for e in entries {
                        match (&e.mig_devices, e.mig_enabled) {
                            (Some(devices), true) => {
                                let profiles: Vec<&str> = devices
                                    .iter()
                                    .flat_map(|(p, &n)| std::iter::repeat_n(p.as_str(), n as usize))
                                    .collect();
                                layout::validate(gpu, &profiles)
                                    .unwrap_or_else(|e| panic!("{}: `{}`: {e}", f.name, node.mig_config));
                                exposed.extend(
                                    devices.keys().map(|p| format!("nvidia.com/mig-{}", p.replace('+', "."))),
                                );
                            }
                            _ => exposed.push("nvidia.com/gpu".to_owned()),
                        }
                    }
                    assert!(
                        exposed.iter().any(|r| r == base),
                        "{}: `{base}` not exposed on `{}`: {exposed:?}",
                        f.name,
                        node.name
                    );
                    if shared {
                        let text = &dp[&node.device_plugin_config];
                        let typed: DevicePluginConfig = serde_saphyr::from_str(text).expect("parses");
                        let ts = typed.sharing.and_then(|s| s.time_slicing).expect("time-slicing config");
                        assert!(
                            ts.rename_by_default == Some(true),
                            "{}: `.shared` needs renameByDefault",
                            f.name
                        );
                        assert!(
                            ts.resources.iter().any(|r| r.name == base),
                            "{}: `{base}` not time-sliced",
                            f.name
                        );
                    }
                }
            }
        }
    }
}

/// Workload identity: one replica less on a node keeps every
/// Deployment, Service and PodDisruptionBudget name and every file name; only counts change.
#[test]
fn names_survive_replica_changes() {
    let names = |f: &Fixture| -> (Vec<String>, Vec<String>) {
        let b = bundle(f);
        let docs = documents(&b);
        let mut objects: Vec<String> = docs
            .iter()
            .filter(|(p, _)| p.starts_with("workloads/"))
            .map(|(_, d)| {
                format!(
                    "{}/{}",
                    d["kind"].as_str().unwrap_or(""),
                    d["metadata"]["name"].as_str().unwrap_or("")
                )
            })
            .filter(|n| !n.starts_with("PodDisruptionBudget/"))
            .collect();
        objects.sort();
        (objects, b.files.keys().cloned().collect())
    };
    let before = fx::voice_pipeline();
    let mut after = fx::voice_pipeline();
    // parakeet-asr: 2 → 1 replica on gpu-a-1 (its second MIG instance left idle).
    let gpu0 = &mut after.plan.pools[0].nodes[0].gpus[0];
    let second = gpu0.tenants.iter().rposition(|t| t.model == "parakeet-asr").expect("two asr tenants");
    gpu0.tenants.remove(second);
    let asr = after.plan.models.iter_mut().find(|m| m.name == "parakeet-asr").expect("asr");
    asr.groups[0].replicas = 1;
    assert_eq!(names(&before), names(&after));
    let text = bundle(&after).files["workloads/parakeet-asr.yaml"].clone();
    assert!(text.contains("replicas: 1") && !text.contains("kind: PodDisruptionBudget"), "{text}");
}

/// A Kubernetes memory quantity in MiB (the units the bundle writes).
fn mib(q: &str) -> f64 {
    let (n, unit) = q.split_at(q.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(q.len()));
    let n: f64 = n.parse().unwrap_or_else(|_| panic!("`{q}` is a quantity"));
    n * match unit {
        "Mi" => 1.0,
        "Gi" => 1024.0,
        "Ti" => 1024.0 * 1024.0,
        other => panic!("unit `{other}` of `{q}`"),
    }
}

/// Issue 24: what a platform team expects on every Deployment of every example and fixture.
#[test]
fn every_deployment_carries_shared_memory_a_progress_deadline_and_probes_of_its_image_family() {
    for f in fx::all() {
        let docs = documents(&bundle(&f));
        for d in of_kind(&docs, "Deployment") {
            let name = format!("{}: {}", f.name, d["metadata"]["name"]);
            let pod = &d["spec"]["template"]["spec"];
            let c = &pod["containers"][0];
            let volumes = pod["volumes"].as_array().cloned().unwrap_or_default();
            let volume = |n: &str| volumes.iter().find(|v| v["name"] == n).cloned();
            let shm = volume("dshm").unwrap_or_else(|| panic!("{name}: no /dev/shm"));
            assert_eq!(shm["emptyDir"]["medium"], "Memory", "{name}");
            let mounts = c["volumeMounts"].as_array().cloned().unwrap_or_default();
            assert!(mounts.iter().any(|m| m["name"] == "dshm" && m["mountPath"] == "/dev/shm"), "{name}");
            // /dev/shm counts in the memory limit.
            let shm_mib = mib(shm["emptyDir"]["sizeLimit"].as_str().expect("sized"));
            let request = mib(c["resources"]["requests"]["memory"].as_str().expect("memory request"));
            let limit = mib(c["resources"]["limits"]["memory"].as_str().expect("memory limit"));
            assert!(limit >= request + shm_mib, "{name}: limit {limit} < {request} + {shm_mib}");
            // The rollout deadline covers the startup probe's whole allowance.
            let deadline = d["spec"]["progressDeadlineSeconds"].as_u64().expect("a progress deadline");
            let s = &c["startupProbe"];
            let allowance = s["initialDelaySeconds"].as_u64().unwrap_or(0)
                + s["periodSeconds"].as_u64().unwrap_or(0) * s["failureThreshold"].as_u64().unwrap_or(0);
            assert!(deadline >= allowance.max(600), "{name}: {deadline} < {allowance}");
            // An emptyDir cache is requested as ephemeral storage.
            if let Some(size) =
                volume("model-cache").and_then(|v| v["emptyDir"]["sizeLimit"].as_str().map(str::to_owned))
            {
                assert_eq!(c["resources"]["requests"]["ephemeral-storage"], size.as_str(), "{name}");
            }
            // NIM endpoints only on NIM images.
            let nim = c["image"].as_str().expect("image").starts_with("nvcr.io/nim/");
            for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
                let path = c[probe]["httpGet"]["path"].as_str().unwrap_or_default();
                assert!(nim || !path.starts_with("/v1/health/"), "{name}: NIM {probe} on a non-NIM image");
            }
            // Hand-built fixtures carry the built-in defaults of a non-NIM image; examples go
            // through the manifest's checks.
            if nim && f.name.starts_with("example-") {
                assert_eq!(pod["securityContext"]["fsGroup"], 1000, "{name}");
            }
            assert!(pod["terminationGracePeriodSeconds"].as_u64().is_some_and(|s| s > 30), "{name}");
        }
    }
}

/// Issue 24: a node that leaves the plan leaves Git cleanly. Per Argo CD's documented sync
/// options, `Prune=false` keeps the live Node when its patch is removed, `Delete=false` keeps it
/// when the Application is deleted, and the compare option `IgnoreExtraneous` (on the live
/// object, where the patch put it) keeps the now extraneous Node out of the sync status; per
/// Flux's kustomize-controller, `kustomize.toolkit.fluxcd.io/prune: disabled` exempts the object
/// from garbage collection. Neither tool then removes the labels the node still carries.
#[test]
fn node_patches_leave_git_without_pruning_or_perpetual_drift() {
    for f in fx::all() {
        let docs = documents(&bundle(&f));
        for node in of_kind(&docs, "Node") {
            let ann = &node["metadata"]["annotations"];
            let tokens = |key: &str| -> Vec<String> {
                ann[key].as_str().unwrap_or_default().split(',').map(|t| t.trim().to_owned()).collect()
            };
            let sync = tokens("argocd.argoproj.io/sync-options");
            for option in ["Prune=false", "Delete=false", "ServerSideApply=true"] {
                assert!(sync.iter().any(|t| t == option), "{}: {option} in {sync:?}", f.name);
            }
            assert_eq!(tokens("argocd.argoproj.io/compare-options"), ["IgnoreExtraneous"], "{}", f.name);
            assert_eq!(ann["kustomize.toolkit.fluxcd.io/prune"], "disabled", "{}", f.name);
        }
    }
}
