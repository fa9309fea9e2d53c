//! The CI recipes of docs/ci.md are files of the repository (`docs/ci/`), and they work: every
//! fenced block of docs/ci.md is one of them, byte for byte; the GitHub workflows pass
//! actionlint (found through `GPUPLAN_ACTIONLINT`, else on `PATH`; a missing tool fails in CI,
//! as in `tools.rs`); the GitLab job's script, the pre-commit hook and the Git hook run against a
//! compiled example, clean and then stale; the comment's jq program runs on a real diff.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(path)).unwrap_or_else(|e| panic!("`{path}`: {e}"))
}

/// The fenced blocks of docs/ci.md with the marker line above each.
fn blocks() -> Vec<(String, String)> {
    let doc = read("docs/ci.md");
    let lines: Vec<&str> = doc.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with("```") && lines[i].len() > 3 {
            let marker = if i > 0 { lines[i - 1].to_owned() } else { String::new() };
            let end = (i + 1..lines.len()).find(|&j| lines[j] == "```").expect("closed block");
            let body: String = lines[i + 1..end].iter().map(|l| format!("{l}\n")).collect();
            out.push((marker, body));
            i = end;
        }
        i += 1;
    }
    out
}

#[test]
fn every_snippet_of_docs_ci_is_a_file_of_the_repository() {
    let blocks = blocks();
    let mut files = 0;
    for (marker, body) in &blocks {
        if let Some(path) = marker.strip_prefix("<!-- file: ").and_then(|m| m.strip_suffix(" -->")) {
            assert_eq!(body, &read(path), "docs/ci.md's block differs from `{path}`");
            files += 1;
        } else {
            assert!(
                marker.starts_with("<!-- not a recipe:"),
                "a block of docs/ci.md comes from no file (marker {marker:?}):\n{body}"
            );
        }
    }
    let on_disk = std::fs::read_dir(Path::new(ROOT).join("docs/ci")).expect("docs/ci/").count();
    assert_eq!(files, on_disk, "every file of docs/ci/ is shown once in docs/ci.md");
}

#[allow(clippy::print_stderr)]
fn actionlint() -> Option<PathBuf> {
    let path =
        std::env::var_os("GPUPLAN_ACTIONLINT").map_or_else(|| PathBuf::from("actionlint"), PathBuf::from);
    if Command::new(&path).arg("-version").output().is_ok_and(|o| o.status.success()) {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "`{}` is not installed, and CI must run this test",
        path.display()
    );
    eprintln!("note: `{}` is not installed; skipping (this test fails in CI instead)", path.display());
    None
}

#[test]
fn the_github_workflows_pass_actionlint() {
    let Some(actionlint) = actionlint() else { return };
    for file in ["docs/ci/github-check.yml", "docs/ci/github-comment.yml"] {
        let run =
            Command::new(&actionlint).arg(Path::new(ROOT).join(file)).output().expect("actionlint runs");
        let text = String::from_utf8_lossy(&run.stdout);
        assert!(run.status.success(), "{file}: {text}{}", String::from_utf8_lossy(&run.stderr));
    }
    // And actionlint does find mistakes: a workflow whose step runs an undefined expression.
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.yml");
    let text = read("docs/ci/github-check.yml").replace("\"$BUNDLE\"", "${{ env.NO_SUCH.field.x( }}");
    std::fs::write(&bad, text).expect("write");
    let run = Command::new(&actionlint).arg(&bad).output().expect("actionlint runs");
    assert!(!run.status.success(), "actionlint accepts a broken expression");
}

/// A repository as the recipes expect it: the mixed-fleet example as `gpuplan.yaml`, a user
/// template (the built-in one), an empty catalog folder, and the bundle compiled with the same
/// options as the recipes pass.
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    std::fs::copy(Path::new(ROOT).join("examples/mixed-fleet/gpuplan.yaml"), root.join("gpuplan.yaml"))
        .expect("copy");
    std::fs::create_dir_all(root.join("templates")).expect("mkdir");
    std::fs::copy(Path::new(ROOT).join("templates/service.yaml.j2"), root.join("templates/service.yaml.j2"))
        .expect("copy");
    std::fs::create_dir_all(root.join("catalog")).expect("mkdir");
    let args = "gpuplan.yaml --out clusters/prod/gpu --templates templates --catalog catalog";
    let compiled = shell(root, &format!("gpuplan compile {args}"), &[]);
    assert!(compiled.status.success(), "{}", String::from_utf8_lossy(&compiled.stderr));
    dir
}

/// Runs `script` with `sh -e` in `dir`, with the gpuplan under test first on `PATH`.
fn shell(dir: &Path, script: &str, env: &[(&str, &str)]) -> Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_gpuplan")).parent().expect("bin dir").to_owned();
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("PATH");
    let mut cmd = Command::new("sh");
    cmd.arg("-ec").arg(script).current_dir(dir).env("PATH", path);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("sh runs")
}

fn bump_an_image(dir: &Path) {
    let manifest = dir.join("gpuplan.yaml");
    let text = std::fs::read_to_string(&manifest).expect("read");
    let bumped = text.replacen("llama-3.2-nv-embedqa-1b-v2:1.5.0", "llama-3.2-nv-embedqa-1b-v2:1.6.0", 1);
    assert_ne!(text, bumped, "the example has the image");
    std::fs::write(&manifest, bumped).expect("write");
}

fn yaml(path: &str) -> Value {
    serde_saphyr::from_str(&read(path)).unwrap_or_else(|e| panic!("`{path}`: {e}"))
}

#[test]
fn the_gitlab_job_checks_and_always_writes_its_artefact() {
    let job = &yaml("docs/ci/gitlab-ci.yml")["gpu-plan"];
    let vars: Vec<(String, String)> = job["variables"]
        .as_object()
        .expect("variables")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("string").to_owned()))
        .collect();
    let env: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let lines: Vec<&str> =
        job["script"].as_array().expect("script").iter().map(|l| l.as_str().expect("line")).collect();
    // The install needs only gpuplan's repository (CI here has no network: it is not run).
    assert!(
        lines[0].starts_with("cargo install $GPUPLAN_INSTALL --git \"$GPUPLAN_GIT\" gpuplan"),
        "{}",
        lines[0]
    );
    assert!(env.iter().any(|(k, v)| *k == "GPUPLAN_INSTALL" && v.contains("--locked")));
    assert_eq!(job["artifacts"]["when"], "always");
    let script = lines[1..].join("\n");
    let repo = repository();
    let clean = shell(repo.path(), &script, &env);
    assert!(clean.status.success(), "{}", String::from_utf8_lossy(&clean.stderr));
    let artefact: Value = serde_json::from_str(
        &std::fs::read_to_string(repo.path().join("gpuplan-diff.json")).expect("artefact"),
    )
    .expect("json");
    assert_eq!(artefact["clean"], true);
    bump_an_image(repo.path());
    std::fs::remove_file(repo.path().join("gpuplan-diff.json")).expect("rm");
    let stale = shell(repo.path(), &script, &env);
    assert_eq!(stale.status.code(), Some(1), "{}", String::from_utf8_lossy(&stale.stderr));
    let artefact: Value = serde_json::from_str(
        &std::fs::read_to_string(repo.path().join("gpuplan-diff.json")).expect("artefact written when stale"),
    )
    .expect("json");
    assert_eq!(artefact["clean"], false);
    assert!(artefact["summary"]["objects"]["change"].as_u64().is_some_and(|n| n >= 1), "{artefact}");
}

#[test]
fn the_pre_commit_hooks_pass_a_clean_bundle_and_stop_a_stale_one() {
    let hook = &yaml("docs/ci/pre-commit-config.yaml")["repos"][0]["hooks"][0];
    assert_eq!(hook["language"], "system");
    assert_eq!(hook["pass_filenames"], false);
    let entry = hook["entry"].as_str().expect("entry").to_owned();
    let git_hook = read("docs/ci/pre-commit-hook.sh");
    assert!(git_hook.contains(&format!("exec {entry}\n")), "both hooks run the same check");
    let repo = repository();
    assert_eq!(shell(repo.path(), &entry, &[]).status.code(), Some(0));
    assert_eq!(shell(repo.path(), &git_hook, &[]).status.code(), Some(0));
    bump_an_image(repo.path());
    assert_eq!(shell(repo.path(), &entry, &[]).status.code(), Some(1));
    assert_eq!(shell(repo.path(), &git_hook, &[]).status.code(), Some(1));
}

#[test]
#[allow(clippy::print_stderr)]
fn the_comment_program_reads_a_real_diff() {
    if Command::new("jq").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "jq is not installed, and CI must run this test");
        eprintln!("note: jq is not installed; skipping");
        return;
    }
    let repo = repository();
    bump_an_image(repo.path());
    let args = "gpuplan.yaml --out clusters/prod/gpu --templates templates --catalog catalog";
    let script = format!("gpuplan --format json diff {args} --kubernetes-only > diff.json || test $? -eq 1");
    assert!(shell(repo.path(), &script, &[]).status.success());
    let program = Path::new(ROOT).join("docs/ci/gpuplan-comment.jq");
    let run = Command::new("jq")
        .arg("-r")
        .arg("-f")
        .arg(program)
        .arg(repo.path().join("diff.json"))
        .output()
        .expect("jq");
    let comment = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(comment.starts_with("### gpuplan: 0 to add, "), "{comment}");
    assert!(
        comment.contains("- Deployment: +0 ~") && comment.contains("**restart: Deployment `embedqa-"),
        "{comment}"
    );
    assert!(comment.contains("- GPUs: "), "{comment}");
}
