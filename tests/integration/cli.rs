//! The command-line surface: help texts under snapshot, exit codes.

use std::process::Command;

pub(crate) fn gpuplan() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gpuplan"))
}

fn help(args: &[&str]) -> String {
    let out = gpuplan().args(args).arg("--help").env("COLUMNS", "100").output().expect("runs gpuplan");
    assert!(out.status.success(), "--help for {args:?} failed");
    String::from_utf8(out.stdout).expect("utf-8 help")
}

#[test]
fn every_help_text_is_reviewed() {
    let commands: &[&[&str]] = &[
        &[],
        &["compile"],
        &["check"],
        &["diff"],
        &["explain"],
        &["validate"],
        &["schema"],
        &["catalog"],
        &["catalog", "list"],
        &["catalog", "show"],
        &["current"],
        &["current", "import"],
        &["validate-mig-config"],
        &["latency"],
        &["measurements"],
        &["measurements", "import"],
        &["simulate"],
        &["completions"],
    ];
    for args in commands {
        let name = if args.is_empty() { "gpuplan".to_owned() } else { format!("gpuplan-{}", args.join("-")) };
        insta::assert_snapshot!(name, help(args));
    }
}

#[test]
fn every_subcommand_has_a_help_snapshot() {
    use clap::CommandFactory as _;
    let cli = gpuplan::cli::Cli::command();
    for sub in cli.get_subcommands() {
        let path = format!(
            "{}/tests/integration/snapshots/integration__cli__gpuplan-{}.snap",
            env!("CARGO_MANIFEST_DIR"),
            sub.get_name()
        );
        assert!(
            std::path::Path::new(&path).exists(),
            "no help snapshot for `{}`: add it to every_help_text_is_reviewed",
            sub.get_name()
        );
    }
}

#[test]
fn unknown_subcommand_is_a_usage_error() {
    let out = gpuplan().arg("frobnicate").output().expect("runs gpuplan");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn missing_manifest_file_is_a_tool_failure() {
    let out = gpuplan().args(["validate", "/nonexistent/gpuplan.yaml"]).output().expect("runs gpuplan");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
}

#[test]
fn broken_pipe_is_not_an_error() {
    use std::process::Stdio;
    let mut child =
        gpuplan().args(["completions", "bash"]).stdout(Stdio::piped()).spawn().expect("runs gpuplan");
    drop(child.stdout.take());
    let status = child.wait().expect("waits");
    assert_eq!(status.code(), Some(0));
}
