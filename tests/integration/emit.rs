//! Writing, checking and diffing the output directory.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use gpuplan::emit::{ChangeKind, EmitError, INDEX, Mode, emit, unified_diff};
use gpuplan::render::Bundle;

use crate::bundle::bundle;
use crate::fixtures_plans as fx;

/// Every file under `dir` (relative path → bytes), for before/after comparisons.
pub(crate) fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).expect("readable dir") {
            let path = e.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).expect("inside").to_string_lossy().into_owned();
                out.insert(rel, fs::read(&path).expect("readable"));
            }
        }
    }
    out
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

#[test]
fn compiling_twice_gives_identical_bytes_and_the_second_run_writes_nothing() {
    for f in fx::all() {
        let root = tmp();
        let out = root.path().join("out");
        let b = bundle(&f);
        let first = emit(&b, &out, Mode::Write).expect("writes");
        assert!(first.changes.iter().all(|c| c.kind == ChangeKind::Added));
        let before = tree(&out);
        let second = emit(&bundle(&f), &out, Mode::Write).expect("writes");
        assert!(second.is_clean(), "{}: {:?}", f.name, second.changes);
        assert_eq!(before, tree(&out));
        for (path, text) in &b.files {
            assert_eq!(before[path], text.as_bytes(), "{path}");
        }
        assert!(before.contains_key(INDEX));
        assert!(!before.keys().any(|k| k.contains(".gpuplan-staging")), "staging directory removed");
    }
}

#[test]
fn check_is_clean_after_compile_and_names_a_hand_edit_without_writing() {
    let f = fx::voice_pipeline();
    let root = tmp();
    let out = root.path().join("out");
    emit(&bundle(&f), &out, Mode::Write).expect("writes");
    assert!(emit(&bundle(&f), &out, Mode::Check).expect("checks").is_clean());

    let edited = out.join("workloads/parakeet-asr.yaml");
    let mut text = fs::read_to_string(&edited).expect("exists");
    text = text.replace("replicas: 2", "replicas: 3");
    fs::write(&edited, &text).expect("edit");
    fs::remove_file(out.join("PLAN.md")).expect("delete");
    let before = tree(&out);
    for mode in [Mode::Check, Mode::Diff] {
        let outcome = emit(&bundle(&f), &out, mode).expect("checks");
        let changed: Vec<(&str, ChangeKind)> =
            outcome.changes.iter().map(|c| (c.path.as_str(), c.kind)).collect();
        assert_eq!(
            changed,
            vec![("PLAN.md", ChangeKind::Added), ("workloads/parakeet-asr.yaml", ChangeKind::Modified)]
        );
        assert_eq!(before, tree(&out), "{mode:?} wrote something");
    }
    let diff = unified_diff(&emit(&bundle(&f), &out, Mode::Diff).expect("diffs"));
    assert!(
        diff.contains("--- a/workloads/parakeet-asr.yaml\n+++ b/workloads/parakeet-asr.yaml\n"),
        "{diff}"
    );
    assert!(diff.contains("-  replicas: 3\n+  replicas: 2\n"), "{diff}");
    assert!(diff.contains("--- /dev/null\n+++ b/PLAN.md\n"), "{diff}");
}

#[test]
fn unrelated_files_survive_and_stale_generated_files_are_pruned() {
    let root = tmp();
    let out = root.path().join("out");
    fs::create_dir_all(out.join("workloads")).expect("mkdir");
    fs::write(out.join("README.md"), "mine\n").expect("write");
    fs::write(out.join("workloads/handmade.yaml"), "kind: ConfigMap\n").expect("write");
    let multi = bundle(&fx::multi_gpu());
    emit(&multi, &out, Mode::Write).expect("writes");
    assert!(out.join("argocd/application.yaml").exists());

    // A plan without the Argo CD wrapper and with other workloads: the old files go, mine stay.
    let voice = bundle(&fx::voice_pipeline());
    let outcome = emit(&voice, &out, Mode::Write).expect("writes");
    assert!(
        outcome.changes.iter().any(|c| c.path == "argocd/application.yaml" && c.kind == ChangeKind::Removed)
    );
    assert!(!out.join("argocd").exists(), "the emptied directory is removed");
    assert!(!out.join("workloads/llama-405b.yaml").exists());
    assert_eq!(fs::read_to_string(out.join("README.md")).expect("kept"), "mine\n");
    assert_eq!(fs::read_to_string(out.join("workloads/handmade.yaml")).expect("kept"), "kind: ConfigMap\n");
    assert!(emit(&voice, &out, Mode::Check).expect("checks").is_clean());
}

#[test]
fn a_file_gpuplan_did_not_generate_is_never_overwritten() {
    let root = tmp();
    let out = root.path().join("out");
    fs::create_dir_all(&out).expect("mkdir");
    fs::write(out.join("PLAN.md"), "my own notes\n").expect("write");
    let before = tree(&out);
    let err = emit(&bundle(&fx::voice_pipeline()), &out, Mode::Write).expect_err("refuses");
    assert!(matches!(err, EmitError::NotOurs { ref path } if path == "PLAN.md"), "{err}");
    assert_eq!(before, tree(&out), "nothing written");
}

#[test]
fn bundle_paths_that_escape_are_refused_and_nothing_is_written_anywhere() {
    for bad in
        ["../escape.yaml", "/tmp/abs.yaml", "a/../../b.yaml", ".gpuplan-index", "a\\b.yaml", "x/\n.yaml"]
    {
        let root = tmp();
        let out = root.path().join("out");
        let mut b = bundle(&fx::time_sliced());
        b.files.insert(bad.to_owned(), "kind: Secret\n".to_owned());
        let err = emit(&b, &out, Mode::Write).expect_err("refuses");
        assert!(matches!(err, EmitError::UnsafePath { .. }), "{bad}: {err}");
        assert!(tree(root.path()).is_empty(), "{bad}: something was written");
    }
}

#[test]
fn a_tampered_index_cannot_delete_outside_the_directory() {
    let root = tmp();
    let out = root.path().join("out");
    let outside = root.path().join("precious.txt");
    fs::write(&outside, "keep\n").expect("write");
    emit(&bundle(&fx::time_sliced()), &out, Mode::Write).expect("writes");
    let index = out.join(INDEX);
    let mut text = fs::read_to_string(&index).expect("index");
    text.push_str("../precious.txt\n/etc/hostname\n");
    fs::write(&index, text).expect("tamper");
    emit(&bundle(&fx::voice_pipeline()), &out, Mode::Write).expect("writes");
    assert_eq!(fs::read_to_string(&outside).expect("kept"), "keep\n");
}

#[cfg(unix)]
#[test]
fn symbolic_links_inside_the_directory_are_not_followed() {
    let root = tmp();
    let out = root.path().join("out");
    let elsewhere = root.path().join("elsewhere");
    fs::create_dir_all(&out).expect("mkdir");
    fs::create_dir_all(&elsewhere).expect("mkdir");
    std::os::unix::fs::symlink(&elsewhere, out.join("workloads")).expect("symlink");
    let err = emit(&bundle(&fx::voice_pipeline()), &out, Mode::Write).expect_err("refuses");
    assert!(matches!(err, EmitError::NotAFile { .. }), "{err}");
    assert!(tree(&elsewhere).is_empty());
    assert!(!out.join(INDEX).exists());
}

#[test]
fn an_empty_bundle_only_writes_the_index_and_the_git_attributes() {
    let root = tmp();
    let out = root.path().join("out");
    emit(&Bundle::default(), &out, Mode::Write).expect("writes");
    assert_eq!(tree(&out).keys().collect::<Vec<_>>(), vec![gpuplan::emit::GITATTRIBUTES, INDEX]);
}

/// Generated files are marked for GitHub and GitLab, and a `.gitattributes` of the user's wins.
#[test]
fn generated_files_are_marked_and_a_users_git_attributes_are_left_alone() {
    let root = tmp();
    let out = root.path().join("out");
    emit(&Bundle::default(), &out, Mode::Write).expect("writes");
    let attributes = fs::read_to_string(out.join(".gitattributes")).expect("written");
    for path in ["PLAN.md", "plan.json", "plan/*.svg"] {
        assert!(
            attributes.contains(&format!("\n{path} linguist-generated=true gitlab-generated=true\n")),
            "{path}"
        );
    }
    assert!(!attributes.contains(".yaml"), "the Kubernetes YAML is reviewed, not folded");
    let again = emit(&Bundle::default(), &out, Mode::Check).expect("checks");
    assert!(again.is_clean(), "{:?}", again.changes);
    let theirs = root.path().join("theirs");
    fs::create_dir_all(&theirs).expect("mkdir");
    fs::write(theirs.join(".gitattributes"), "*.yaml diff\n").expect("write");
    emit(&Bundle::default(), &theirs, Mode::Write).expect("writes, does not refuse");
    assert_eq!(fs::read_to_string(theirs.join(".gitattributes")).expect("read"), "*.yaml diff\n");
    assert!(emit(&Bundle::default(), &theirs, Mode::Check).expect("checks").is_clean());
}

const SEED_MANIFEST: &str = "\
apiVersion: gpuplan.io/v1alpha1
kind: GpuPlan
metadata: { name: voice-prod }
cluster:
  namespace: inference
  operatorNamespace: gpu-operator
inventory:
  pools:
    - name: a100
      gpu: A100-SXM4-80GB
      gpusPerNode: 2
      nodes: [gpu-a-1]
      costPerGpuHour: 2.4
models:
  - name: parakeet-asr
    image: nvcr.io/nim/nvidia/parakeet-1-1b-ctc-en-us:1.0.0
    memory: 10GiB
    compute: 0.15
    replicas: 2
    isolation: hardware
  - name: nemotron-llm
    image: nvcr.io/nim/nvidia/nemotron-mini-4b-instruct:1.2.0
    memory: 70GiB
    gpus: 1
    replicas: 1
";

fn cli(args: &[&str], dir: &Path) -> std::process::Output {
    crate::cli::gpuplan().args(args).current_dir(dir).output().expect("runs gpuplan")
}

/// The whole CLI loop: compile → check (0) → hand edit → check (1, names the file) → diff.
#[test]
fn cli_compile_check_and_diff_agree() {
    let root = tmp();
    fs::write(root.path().join("gpuplan.yaml"), SEED_MANIFEST).expect("write manifest");
    let compile = cli(&["compile", "gpuplan.yaml", "--out", "out"], root.path());
    let check = |dir: &Path| cli(&["check", "gpuplan.yaml", "--out", "out"], dir);
    assert_eq!(compile.status.code(), Some(0), "{}", String::from_utf8_lossy(&compile.stderr));
    let out = root.path().join("out");
    assert!(out.join("kustomization.yaml").exists());
    assert_eq!(check(root.path()).status.code(), Some(0));
    let again = cli(&["compile", "gpuplan.yaml", "--out", "out"], root.path());
    assert_eq!(again.status.code(), Some(0));

    fs::write(out.join("PLAN.md"), "edited by hand\n").expect("edit");
    let before = tree(&out);
    let stale = check(root.path());
    assert_eq!(stale.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&stale.stderr).contains("PLAN.md"));
    let diff = cli(&["diff", "gpuplan.yaml", "--out", "out"], root.path());
    assert_eq!(diff.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&diff.stdout).contains("+++ b/PLAN.md"));
    let json = cli(&["diff", "gpuplan.yaml", "--out", "out", "--format", "json"], root.path());
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(value["changes"][0]["path"], "PLAN.md");
    assert_eq!(value["changes"][0]["kind"], "modified");
    assert_eq!(before, tree(&out), "check and diff wrote nothing");
}

#[test]
fn cli_refuses_an_unknown_template_override() {
    let root = tmp();
    fs::write(root.path().join("gpuplan.yaml"), SEED_MANIFEST).expect("write manifest");
    fs::create_dir_all(root.path().join("tpl")).expect("mkdir");
    fs::write(root.path().join("tpl/deploymnet.yaml.j2"), "x").expect("write");
    let run = cli(&["compile", "gpuplan.yaml", "--out", "out", "--templates", "tpl"], root.path());
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("`deployment.yaml.j2`"));
    assert!(!root.path().join("out").exists());
}

/// Issue 24's review: `gpuplan diff` after an image bump, a new node and a `--from-scratch`
/// recompile each prints the object summary with its counts, and `--format json` has them.
#[test]
fn diff_summarises_objects_after_an_image_bump_a_new_node_and_from_scratch() {
    let root = tmp();
    let manifest = root.path().join("gpuplan.yaml");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mixed-fleet/gpuplan.yaml");
    let original = fs::read_to_string(example).expect("example");
    fs::write(&manifest, &original).expect("write");
    assert_eq!(cli(&["compile", "gpuplan.yaml", "--out", "out"], root.path()).status.code(), Some(0));
    let diff = |extra: &[&str]| {
        let mut args = vec!["diff", "gpuplan.yaml", "--out", "out"];
        args.extend_from_slice(extra);
        let o = cli(&args, root.path());
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let counts = |text: &str| -> (u32, u32, u32) {
        let line = text
            .lines()
            .find(|l| l.starts_with("Objects: "))
            .unwrap_or_else(|| panic!("no summary:\n{text}"));
        let n: Vec<u32> = line.split(' ').filter_map(|w| w.parse().ok()).collect();
        (n[0], n[1], n[2])
    };
    // An image bump: the model's Deployments change and restart.
    let bumped = original.replacen("llama-3.2-nv-embedqa-1b-v2:1.5.0", "llama-3.2-nv-embedqa-1b-v2:1.6.0", 1);
    fs::write(&manifest, &bumped).expect("write");
    let (code, text) = diff(&[]);
    assert_eq!(code, Some(1));
    let (add, change, destroy) = counts(&text);
    assert!(add == 0 && change >= 1 && destroy == 0, "{text}");
    assert!(
        text.contains("  Deployment: +0 ~") && text.contains("! restart: Deployment `embedqa-"),
        "{text}"
    );
    let o = cli(&["--format", "json", "diff", "gpuplan.yaml", "--out", "out"], root.path());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["summary"]["objects"]["change"].as_u64(), Some(u64::from(change)), "{v}");
    assert!(v["summary"]["objects"]["byKind"]["Deployment"]["change"].as_u64().is_some_and(|n| n >= 1));
    // A new node: the summary is there, with counts, whatever the plan does with the node.
    let grown = bumped.replacen(
        "nodes: [a100-node-1, a100-node-2]",
        "nodes: [a100-node-1, a100-node-2, a100-node-3]",
        1,
    );
    assert_ne!(grown, bumped);
    fs::write(&manifest, &grown).expect("write");
    let (_, text) = diff(&[]);
    counts(&text);
    // From scratch: still compared with the committed plan (its running nodes are held for a
    // drain, issue 21), and the object summary is there too.
    let (_, text) = diff(&["--from-scratch"]);
    counts(&text);
    assert!(text.contains("Plan changes against the committed plan"), "{text}");
    let o = cli(&["--format", "json", "diff", "gpuplan.yaml", "--out", "out", "--from-scratch"], root.path());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert!(v["summary"]["objects"]["add"].is_u64() && v["summary"]["gpusBefore"].is_u64(), "{v}");
}

/// `explain --out DIR` explains the plan `compile --out DIR` writes: re-planned over the
/// committed `plan.json`, not from scratch; a committed file that is not a plan is refused.
#[test]
fn explain_out_reads_the_committed_plan() {
    let root = tmp();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mixed-fleet/gpuplan.yaml");
    let original = fs::read_to_string(example).expect("example");
    fs::write(root.path().join("gpuplan.yaml"), &original).expect("write");
    assert_eq!(cli(&["compile", "gpuplan.yaml", "--out", "out"], root.path()).status.code(), Some(0));
    let edited = original.replacen("replicas: 4", "replicas: 5", 1);
    assert_ne!(edited, original);
    fs::write(root.path().join("gpuplan.yaml"), &edited).expect("write");
    let explained = cli(&["--format", "json", "explain", "gpuplan.yaml", "--out", "out"], root.path());
    assert_eq!(explained.status.code(), Some(0), "{}", String::from_utf8_lossy(&explained.stderr));
    let models: serde_json::Value = serde_json::from_slice(&explained.stdout).expect("json");
    assert_eq!(cli(&["compile", "gpuplan.yaml", "--out", "out"], root.path()).status.code(), Some(0));
    let plan: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(root.path().join("out/plan.json")).expect("plan"))
            .expect("json");
    assert_eq!(models, plan["models"], "explain --out shows the models compile --out wrote");
    fs::write(root.path().join("out/plan.json"), "[not a plan").expect("write");
    // Refused as `compile` refuses it (previous-plan-unreadable, exit 1).
    let o = cli(&["explain", "gpuplan.yaml", "--out", "out"], root.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a gpuplan plan"));
}
