//! The DRA backend judged by real implementations (docs/dra.md, "How it is verified"):
//!
//! - every claim selector is compiled and evaluated by the `cel` crate (an independent CEL
//!   implementation) against ResourceSlices built here from `plan.json` and the catalog in the
//!   driver's published shape (attribute and capacity names of `dra-driver-nvidia-gpu`'s
//!   `cmd/gpu-kubelet-plugin/deviceinfo.go` and `mig.go`), together with the selector of the
//!   driver's DeviceClass: each request selects exactly its planned device, and no exclusive
//!   device is selected twice;
//! - `kubernetes-validate --strict` accepts every object of the DRA bundles at Kubernetes 1.34
//!   and 1.36, with no warning (a warning there means a kind or version it does not know);
//! - `gpuplan simulate` places every pod in hundreds of arrival orders, and fails when a claim
//!   selects a device no node has;
//! - `current import --resource-slices` reads the driver's shape, and the examples carry what it
//!   writes.
//!
//! The bundles: every example whose plan has a DRA device, and held-out fleets generated here
//! (the benchmark's random fleets with every pool on DRA and made-up UUIDs).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use gpuplan::catalog::Catalog;
use gpuplan::plan::{GpuMode, Plan};
use gpuplan::render::Bundle;
use gpuplan::simulate::{Options, simulate};
use gpuplan::spec::DraPool;
use serde_json::{Value, json};

use crate::bundle::{bundle, documents};
use crate::fixtures_plans::{self as fx, Fixture};

/// The DeviceClass selectors of the driver's Helm chart (`templates/deviceclass-*.yaml`).
fn class_selector(class: &str) -> &'static str {
    match class {
        "gpu.nvidia.com" => {
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
        }
        "mig.nvidia.com" => {
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
        }
        other => panic!("unexpected DeviceClass `{other}`"),
    }
}

/// A device as CEL sees it, with what the plan says about it.
struct PlannedDevice {
    node: String,
    label: String,
    /// The models the plan puts on it, one per pod: a replica group with `processes: k` (MPS
    /// processes of a measured point) runs k pods per device.
    tenants: Vec<String>,
    /// NVML memory of the device, MiB.
    memory_mib: u64,
    cel: Value,
}

/// The MPS processes per device of `model`'s replica group on `pool` and `resource` in
/// `plan.json` (1 when absent).
fn processes(plan: &Value, model: &str, pool: &str, resource: &str) -> usize {
    plan["models"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["name"] == model)
        .flat_map(|m| m["groups"].as_array().into_iter().flatten())
        .find(|g| g["pool"] == pool && g["resource"] == resource)
        .and_then(|g| g["processes"].as_u64())
        .map_or(1, |k| k as usize)
}

/// The devices the driver publishes for the plan's DRA GPUs, built from `plan.json` (not from
/// the bundle's own `dra/resource-slices.json`) and the catalog's MIG geometry.
fn planned_devices(plan: &Value, catalog: &Catalog) -> Vec<PlannedDevice> {
    let mut out = Vec::new();
    for pool in plan["pools"].as_array().into_iter().flatten() {
        let gpu = catalog.get(pool["gpu"].as_str().expect("gpu")).expect("catalog GPU");
        for node in pool["nodes"].as_array().into_iter().flatten() {
            let node_name = node["name"].as_str().expect("node").to_owned();
            for g in node["gpus"].as_array().into_iter().flatten() {
                let Some(uuid) = g["uuid"].as_str() else { continue };
                let pool_name = pool["name"].as_str().expect("pool");
                let tenants = |start: Option<u64>, resource: &str| -> Vec<String> {
                    let models: Vec<&str> = g["tenants"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|t| t["instanceStart"].as_u64() == start)
                        .map(|t| t["model"].as_str().expect("model"))
                        .collect();
                    let k = match models.as_slice() {
                        [one] => processes(plan, one, pool_name, resource),
                        _ => 1,
                    };
                    models.iter().flat_map(|m| std::iter::repeat_n((*m).to_owned(), k)).collect()
                };
                let attrs = |extra: Value| {
                    let mut a = json!({"productName": gpu.name, "brand": "Nvidia"});
                    for (k, v) in extra.as_object().expect("object") {
                        a[k] = v.clone();
                    }
                    a
                };
                // `mode` is `{"mode": "mig", "instances": [...]}` (an internally tagged enum).
                if g["mode"]["mode"] == "mig" {
                    for i in g["mode"]["instances"].as_array().into_iter().flatten() {
                        let profile = i["profile"].as_str().expect("profile");
                        let start = i["start"].as_u64().expect("start");
                        let size = u64::from(gpu.profile(profile).expect("profile").size);
                        let mut capacity = json!({"memory": 1, "multiprocessors": 1});
                        for s in start..start + size {
                            capacity[format!("memorySlice{s}")] = json!(1);
                        }
                        let a = attrs(json!({"type": "mig", "parentUUID": uuid, "profile": profile}));
                        out.push(PlannedDevice {
                            node: node_name.clone(),
                            label: format!("{node_name} {uuid} {profile}@{start}"),
                            tenants: tenants(Some(start), &format!("nvidia.com/mig-{profile}")),
                            memory_mib: gpu.profile(profile).expect("profile").memory_mib,
                            cel: json!({"driver": "gpu.nvidia.com", "attributes": {"gpu.nvidia.com": a}, "capacity": {"gpu.nvidia.com": capacity}}),
                        });
                    }
                } else {
                    let a = attrs(json!({"type": "gpu", "uuid": uuid}));
                    out.push(PlannedDevice {
                        node: node_name.clone(),
                        label: format!("{node_name} {uuid}"),
                        tenants: tenants(None, "nvidia.com/gpu"),
                        memory_mib: gpu.memory_mib,
                        cel: json!({"driver": "gpu.nvidia.com", "attributes": {"gpu.nvidia.com": a}, "capacity": {"gpu.nvidia.com": {"memory": 1}}}),
                    });
                }
            }
        }
    }
    out
}

fn cel_true(expression: &str, device: &Value) -> bool {
    let program = cel::Program::compile(expression)
        .unwrap_or_else(|e| panic!("`{expression}` does not compile: {e:?}"));
    let mut context = cel::Context::default();
    context.add_variable("device", cel::to_value(device).expect("device value")).expect("variable");
    match program.execute(&context) {
        Ok(cel::Value::Bool(b)) => b,
        other => panic!("`{expression}` evaluated to {other:?}"),
    }
}

/// The devices one request of a claim selects.
fn selected<'d>(request: &Value, devices: &'d [PlannedDevice]) -> Vec<&'d PlannedDevice> {
    let exactly = &request["exactly"];
    let class = class_selector(exactly["deviceClassName"].as_str().expect("class"));
    let selectors: Vec<&str> = exactly["selectors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["cel"]["expression"].as_str().expect("expression"))
        .collect();
    assert!(!selectors.is_empty(), "a request without a selector would take any device");
    devices
        .iter()
        .filter(|d| cel_true(class, &d.cel) && selectors.iter().all(|s| cel_true(s, &d.cel)))
        .collect()
}

/// The model and node of a Deployment (its pods' `app.kubernetes.io/name` and hostname).
fn model_and_node(d: &Value) -> (String, String) {
    let model =
        d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"].as_str().expect("model");
    let host = &d["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchExpressions"][0];
    assert_eq!(host["key"], "kubernetes.io/hostname");
    (model.to_owned(), host["values"][0].as_str().expect("node").to_owned())
}

/// Every claim of a DRA bundle selects exactly the planned devices: one per request, on the
/// Deployment's node, serving its model; each exclusive device is claimed once per replica
/// the plan puts there, and shared devices only through their one ResourceClaim.
fn check_claims(name: &str, b: &Bundle, catalog: &Catalog) {
    let plan: Value = serde_json::from_str(&b.files["plan.json"]).expect("plan.json");
    let devices = planned_devices(&plan, catalog);
    let docs = documents(b);
    let by_kind = |kind: &str| -> BTreeMap<String, Value> {
        docs.iter()
            .filter(|(_, d)| d["kind"] == kind)
            .map(|(_, d)| (d["metadata"]["name"].as_str().expect("name").to_owned(), d.clone()))
            .collect()
    };
    let (templates, claims) = (by_kind("ResourceClaimTemplate"), by_kind("ResourceClaim"));
    let mut exclusive: BTreeMap<String, usize> = BTreeMap::new();
    let mut shared_models: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for d in
        by_kind("Deployment").values().filter(|d| d["metadata"]["annotations"]["gpuplan.io/backend"] == "dra")
    {
        let (model, node) = model_and_node(d);
        let replicas = d["spec"]["replicas"].as_u64().expect("replicas") as usize;
        let reference = &d["spec"]["template"]["spec"]["resourceClaims"][0];
        let (spec, shared) = match (
            reference["resourceClaimTemplateName"].as_str(),
            reference["resourceClaimName"].as_str(),
        ) {
            (Some(t), None) => (&templates[t]["spec"]["spec"]["devices"], false),
            (None, Some(c)) => (&claims[c]["spec"]["devices"], true),
            other => panic!("{name}: bad claim reference {other:?}"),
        };
        for request in spec["requests"].as_array().expect("requests") {
            let found = selected(request, &devices);
            assert_eq!(found.len(), 1, "{name}: a request of `{model}` selects {} devices", found.len());
            let device = found[0];
            assert_eq!(device.node, node, "{name}: `{model}`'s device is on its node");
            assert!(device.tenants.contains(&model), "{name}: {} is not planned for `{model}`", device.label);
            if shared {
                check_sharing(name, &spec["config"][0]["opaque"]["parameters"], device);
                shared_models
                    .entry(device.label.clone())
                    .or_default()
                    .extend(std::iter::repeat_n(model.clone(), replicas));
            } else {
                *exclusive.entry(device.label.clone()).or_default() += replicas;
            }
        }
    }
    for d in &devices {
        let claimed = exclusive.get(&d.label).copied().unwrap_or(0);
        let mut sharing = shared_models.get(&d.label).cloned().unwrap_or_default();
        sharing.sort();
        let mut tenants = d.tenants.clone();
        tenants.sort();
        if sharing.is_empty() {
            assert!(claimed <= 1, "{name}: {} is claimed by {claimed} pods", d.label);
            assert_eq!(claimed, usize::from(!tenants.is_empty()), "{name}: {} claimed as planned", d.label);
        } else {
            assert_eq!(claimed, 0, "{name}: {} is both shared and claimed alone", d.label);
            assert_eq!(sharing, tenants, "{name}: {} shared by its planned tenants", d.label);
        }
    }
}

/// A shared claim's opaque config: time-slicing, or MPS whose clients' pinned memory together
/// stays within the device (the driver pins `defaultPinnedDeviceMemoryLimit` per client) and
/// whose thread percentage, when set, is one the driver's webhook accepts (0–100).
fn check_sharing(name: &str, parameters: &Value, device: &PlannedDevice) {
    let is_mig = device.cel["attributes"]["gpu.nvidia.com"]["type"] == "mig";
    assert_eq!(parameters["kind"], if is_mig { "MigDeviceConfig" } else { "GpuConfig" }, "{name}");
    match parameters["sharing"]["strategy"].as_str() {
        Some("TimeSlicing") => {}
        Some("MPS") => {
            let mps = &parameters["sharing"]["mpsConfig"];
            let pinned = mps["defaultPinnedDeviceMemoryLimit"].as_str().expect("pinned memory");
            let mib: u64 = pinned.strip_suffix("Mi").and_then(|n| n.parse().ok()).expect("`<n>Mi`");
            let clients = device.tenants.len() as u64;
            assert!(
                mib > 0 && mib * clients <= device.memory_mib,
                "{name}: {clients} MPS clients of {} pinned {mib} MiB each",
                device.label
            );
            if let Some(pct) = mps.get("defaultActiveThreadPercentage") {
                assert!(pct.as_u64().is_some_and(|p| (1..=100).contains(&p)), "{name}: {pct}");
            }
        }
        other => panic!("{name}: sharing strategy {other:?}"),
    }
}

/// Example fixtures with DRA devices, and held-out random fleets moved onto DRA.
fn dra_fixtures() -> Vec<Fixture> {
    let mut out: Vec<Fixture> = fx::examples().into_iter().filter(|f| uses_dra(&f.plan)).collect();
    assert!(out.len() >= 2, "expected at least two DRA examples");
    out.extend(held_out());
    out.extend(parvagpu_mps());
    out.push(mps_whole_gpus());
    out
}

/// The MPS benchmark fixture (`tests/fixtures/mps/small-models.yaml`: small latency-bound models
/// sharing L4s by MPS) with its pool on DRA: whole GPUs shared through one claim each with
/// `GpuConfig` `sharing.strategy: MPS`, the thread cap and pinned memory per client set.
fn mps_whole_gpus() -> Fixture {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("tests/fixtures/mps/small-models.yaml")).expect("fixture");
    let uuids =
        |n: u32| (0..4).map(|g| format!("GPU-5e1e{n:04x}-0000-4000-8000-{g:012x}")).collect::<Vec<_>>();
    let current: String = (1..=2)
        .map(|n| {
            format!(
                "\n        - {{ node: l4-{n}, gpus: [[], [], [], []], uuids: [{}] }}",
                uuids(n).join(", ")
            )
        })
        .collect();
    let pool = "sharing: [mps, timeSlicing]";
    assert!(text.contains(pool), "the fixture's pool allows MPS");
    let text = text.replace(pool, &format!("{pool}\n      backend: dra\n      current:{current}"));
    let mut sources = gpuplan::diagnostics::Sources::new();
    let mut read = gpuplan::pipeline::no_measurement_files;
    let compiled = gpuplan::pipeline::bundle_from_manifest(
        &mut sources,
        "small-models-dra.yaml",
        &text,
        &fx::catalog(),
        &gpuplan::render::Templates::builtin(),
        &mut read,
    )
    .unwrap_or_else(|f| panic!("the MPS fixture on DRA compiles: {f:?}"));
    let plan = compiled.plan;
    let mps = plan.pools.iter().flat_map(|p| &p.nodes).flat_map(|n| &n.gpus);
    assert!(
        mps.clone().any(|g| matches!(g.mode, GpuMode::Mps { .. }) && g.uuid.is_some()),
        "MPS on DRA GPUs"
    );
    Fixture { name: "mps-whole-gpus-dra".to_owned(), spec: compiled.spec, plan }
}

/// ParvaGPU's SLO1 and SLO2 in its MPS formulation through DRA (`bench::parvagpu::dra_spec`):
/// MIG instances and whole GPUs running several MPS processes of one model on one claim.
fn parvagpu_mps() -> Vec<Fixture> {
    let dataset = crate::profiles::parvagpu_dataset(gpuplan::bench::parvagpu::ImportOptions::default());
    let catalog = fx::catalog();
    let mut out = Vec::new();
    for name in ["SLO1", "SLO2"] {
        let scenario = dataset.scenario(name).expect("scenario");
        // One node of 8 GPUs is enough for SLO1 and SLO2 (ParvaGPU uses 2 and 3 GPUs).
        let spec =
            gpuplan::bench::parvagpu::dra_spec(&dataset.spec(scenario, &catalog).expect("spec"), &catalog, 1);
        let plan = gpuplan::plan::plan(&spec, &catalog).expect("plans");
        assert!(plan.models.iter().flat_map(|m| &m.groups).any(|g| g.processes > 1), "{name}: MPS used");
        out.push(Fixture { name: format!("parvagpu-mps-{}", name.to_ascii_lowercase()), spec, plan });
    }
    out
}

fn uses_dra(plan: &Plan) -> bool {
    plan.pools.iter().flat_map(|p| &p.nodes).flat_map(|n| &n.gpus).any(|g| g.uuid.is_some())
}

/// The benchmark's random fleets, with every named pool on DRA and a made-up UUID per GPU.
fn held_out() -> Vec<Fixture> {
    let mut out = Vec::new();
    for seed in [3u64, 11, 29] {
        let (mut spec, catalog) = gpuplan::bench::fleet(48, 12, seed, seed % 2 == 1);
        for (p, pool) in spec.pools.iter_mut().enumerate() {
            let gpuplan::spec::Nodes::Named(names) = &pool.nodes else { continue };
            let uuids = names
                .iter()
                .enumerate()
                .map(|(n, node)| {
                    let list = (0..pool.gpus_per_node)
                        .map(|g| format!("GPU-{seed:08x}-{p:04x}-{n:04x}-{g:04x}-000000000000"))
                        .collect();
                    (node.clone(), list)
                })
                .collect();
            pool.dra = Some(DraPool { uuids });
        }
        let Ok(plan) = gpuplan::plan::plan(&spec, &catalog) else { continue };
        if uses_dra(&plan) {
            out.push(Fixture { name: format!("held-out-{seed}"), spec, plan });
        }
    }
    assert!(!out.is_empty(), "no held-out fleet planned");
    out
}

#[test]
fn every_claim_selects_exactly_its_planned_device_in_an_independent_cel_implementation() {
    let catalog = fx::catalog();
    for f in dra_fixtures() {
        check_claims(&f.name, &bundle(&f), &catalog);
    }
}

#[test]
fn a_selector_with_a_wrong_uuid_is_caught_by_the_cel_check() {
    let f = fx::examples().into_iter().find(|f| f.name.contains("voice-pipeline-dra")).expect("example");
    let mut b = bundle(&f);
    let path = "workloads/nemotron-vl.yaml";
    let uuid = f.plan.pools[0].nodes[0].gpus[0].uuid.clone().expect("uuid");
    let text = b.files[path].replace(&uuid, "GPU-00000000-0000-0000-0000-000000000000");
    b.files.insert(path.to_owned(), text);
    let caught = std::panic::catch_unwind(|| check_claims("tampered", &b, &fx::catalog()));
    assert!(caught.is_err(), "a claim that selects no planned device must fail the check");
}

#[test]
fn the_simulation_places_every_pod_of_every_dra_bundle_and_catches_an_unmatched_claim() {
    for f in dra_fixtures() {
        let b = bundle(&f);
        let report = simulate(&b.files, &Options::default());
        assert!(report.ok(), "{}: {:?}", f.name, report.problems);
        assert!(report.orders >= 100, "{}: only {} orders", f.name, report.orders);
        // Pods reach only their devices: take away the devices of a node that hosts replicas,
        // and some pod must stay Pending.
        let mut slices: Value = serde_json::from_str(&b.files["dra/resource-slices.json"]).expect("slices");
        let items = slices["items"].as_array_mut().expect("items");
        let busy = |node: &str| {
            f.plan
                .pools
                .iter()
                .flat_map(|p| &p.nodes)
                .any(|n| n.name == node && n.gpus.iter().any(|g| !g.tenants.is_empty()))
        };
        let slice = items
            .iter_mut()
            .find(|s| busy(s["spec"]["nodeName"].as_str().unwrap_or_default()))
            .expect("a busy node");
        slice["spec"]["devices"] = json!([]);
        let mut files = b.files.clone();
        files.insert("dra/resource-slices.json".to_owned(), slices.to_string());
        assert!(!simulate(&files, &Options::default()).ok(), "{}: pods placed without their devices", f.name);
    }
}

/// Files of a bundle that are Kubernetes objects of the core API (CRDs — ClusterPolicy, Argo CD,
/// Flux — and kustomizations, Helm values and data files are not).
fn api_objects(b: &Bundle) -> Vec<&str> {
    b.files
        .keys()
        .map(String::as_str)
        .filter(|p| p.ends_with(".yaml"))
        .filter(|p| !p.ends_with("kustomization.yaml") && !p.ends_with("values.yaml"))
        .filter(|p| {
            !p.starts_with("nodes/autoscaled/") && !p.starts_with("argocd/") && !p.starts_with("flux/")
        })
        .filter(|p| *p != "gpu-operator/cluster-policy-patch.yaml")
        .collect()
}

#[test]
fn dra_bundles_validate_strictly_at_kubernetes_1_34_and_1_36_without_warnings() {
    let Some(validator) = crate::tools::tool("kubernetes-validate", Some("GPUPLAN_KUBERNETES_VALIDATE"))
    else {
        return;
    };
    let root = tempfile::tempdir().expect("temp dir");
    let mut files = Vec::new();
    for f in dra_fixtures() {
        let b = bundle(&f);
        let out = root.path().join(&f.name);
        gpuplan::emit::emit(&b, &out, gpuplan::emit::Mode::Write).expect("written");
        files.extend(api_objects(&b).into_iter().map(|p| out.join(p)));
    }
    assert!(
        files.iter().any(|p| p.ends_with("workloads/dra/resource-claims.yaml")),
        "a shared claim is validated"
    );
    for version in ["1.34.0", "1.36.0"] {
        let run =
            Command::new(&validator).args(["--strict", "-k", version]).args(&files).output().expect("runs");
        let text =
            format!("{}{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
        assert!(run.status.success(), "kubernetes-validate -k {version}:\n{text}");
        assert!(
            !text.contains("ERROR") && !text.contains("WARN"),
            "kubernetes-validate -k {version}:\n{text}"
        );
        assert!(text.contains("resourceclaimtemplate/"), "{version}: the templates were validated:\n{text}");
    }
}

#[test]
fn resource_slices_import_reads_the_drivers_shape() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/resourceslices/voice-pipeline.json"),
    )
    .expect("fixture");
    let nodes = gpuplan::day2::slices::import_resource_slices(&text, &fx::catalog()).expect("imports");
    assert_eq!(nodes.len(), 1, "the compute-domain slice is not a GPU node");
    let n = &nodes[0];
    assert_eq!(n.gpu.as_deref(), Some("A100-SXM4-80GB"));
    assert_eq!(n.gpus, vec![Vec::<String>::new(), vec!["3g.40gb".to_owned(), "4g.40gb".to_owned()]]);
    assert_eq!(n.uuids.len(), 2);
    assert!(n.notes.is_empty(), "{:?}", n.notes);
    assert!(gpuplan::day2::slices::import_resource_slices("{\"kind\": \"Node\"}", &fx::catalog()).is_err());
}

/// The DRA examples' `current` entries are exactly what the import writes from the fixtures.
#[test]
fn the_dra_examples_carry_what_the_import_writes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (example, slices) in [("voice-pipeline-dra", "voice-pipeline"), ("mixed-fleet-dra", "mixed-fleet")] {
        let text = std::fs::read_to_string(root.join(format!("tests/data/resourceslices/{slices}.json")))
            .expect("fixture");
        let imported = gpuplan::day2::slices::import_resource_slices(&text, &fx::catalog()).expect("imports");
        let f = fx::examples()
            .into_iter()
            .find(|f| f.name == format!("example-{example}-gpuplan"))
            .expect("example");
        for n in &imported {
            let pool = f
                .spec
                .pools
                .iter()
                .find(|p| p.current.iter().any(|c| c.node == n.node))
                .expect("node in a pool");
            let current = pool.current.iter().find(|c| c.node == n.node).expect("current");
            assert_eq!(current.gpus, n.gpus, "{example}: {}", n.node);
            assert_eq!(
                pool.dra.as_ref().and_then(|d| d.uuids.get(&n.node)),
                Some(&n.uuids),
                "{example}: {}",
                n.node
            );
            assert_eq!(Some(&pool.gpu), n.gpu.as_ref(), "{example}: {}", n.node);
        }
    }
}

#[test]
fn device_plugin_plans_name_no_uuid() {
    for f in fx::all().into_iter().filter(|f| !f.name.contains("-dra")) {
        let b = bundle(&f);
        assert!(!b.files["plan.json"].contains("\"uuid\""), "{}", f.name);
        assert!(!b.files.contains_key(gpuplan::render::dra::DRIVER_VALUES), "{}", f.name);
        assert!(
            f.plan
                .pools
                .iter()
                .flat_map(|p| &p.nodes)
                .flat_map(|n| &n.gpus)
                .all(|g| g.uuid.is_none() || matches!(g.mode, GpuMode::Unused))
        );
    }
}

#[test]
fn a_backend_change_on_a_running_node_is_held_for_its_drain_both_ways() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dra =
        std::fs::read_to_string(root.join("examples/voice-pipeline-dra/gpuplan.yaml")).expect("example");
    assert!(dra.contains("\n  backend: dra\n"));
    let plugin = dra.replace("\n  backend: dra\n", "\n  backend: devicePlugin\n");
    let dir = tempfile::tempdir().expect("temp dir");
    for (first, second) in [(&plugin, &dra), (&dra, &plugin)] {
        let (a, b) = (dir.path().join("first.yaml"), dir.path().join("second.yaml"));
        std::fs::write(&a, first).expect("written");
        std::fs::write(&b, second).expect("written");
        let out = dir.path().join("out");
        let _ = std::fs::remove_dir_all(&out);
        let compile = |manifest: &Path| {
            let run = crate::cli::gpuplan()
                .arg("compile")
                .arg(manifest)
                .arg("--out")
                .arg(&out)
                .output()
                .expect("runs");
            assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        };
        compile(&a);
        assert!(!out.join("nodes/drain/gpu-a100-1.yaml").exists(), "nothing to drain at first");
        // Same layouts and configs, the other backend: the node runs pods, so it is drained
        // first and its label patch (device plugin off or on) waits under `nodes/drain/`.
        compile(&b);
        let plan: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("plan.json")).expect("plan"))
                .expect("json");
        let node = &plan["pools"][0]["nodes"][0];
        assert_eq!(node["mustDrain"], true);
        assert_eq!(node["transition"]["phase"], "held");
        assert!(out.join("nodes/drain/gpu-a100-1.yaml").exists());
        // The cluster shows both config labels (they did not change) and MIG `success`: the
        // change is not applied until the operator's deploy label follows the backend.
        let to_dra = second.contains("backend: dra");
        let observe = |deploy: Option<&str>| {
            let mut labels = serde_json::json!({
                "nvidia.com/mig.config": node["migConfig"],
                "nvidia.com/device-plugin.config": node["devicePluginConfig"],
                "nvidia.com/mig.config.state": "success",
            });
            if let Some(d) = deploy {
                labels["nvidia.com/gpu.deploy.device-plugin"] = d.into();
            }
            let nodes =
                serde_json::json!({"items": [{"metadata": {"name": "gpu-a100-1", "labels": labels}}]});
            let file = dir.path().join("nodes.json");
            std::fs::write(&file, nodes.to_string()).expect("written");
            let run = crate::cli::gpuplan()
                .arg("compile")
                .arg(&b)
                .arg("--out")
                .arg(&out)
                .arg("--observed")
                .arg(&file)
                .output()
                .expect("runs");
            assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
            let plan: Value =
                serde_json::from_str(&std::fs::read_to_string(out.join("plan.json")).expect("plan"))
                    .expect("json");
            plan["pools"][0]["nodes"][0]["mustDrain"] == true
        };
        let (old, new) = if to_dra { (None, Some("false")) } else { (Some("false"), None) };
        assert!(observe(old), "the old backend still runs: held");
        assert!(!observe(new), "the new backend is applied: released");
    }
}
