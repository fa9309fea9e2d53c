//! The command line: argument definitions (clap derive; doc comments are the help) and dispatch.
//!
//! Every subcommand lives in its own file and returns an [`ExitStatus`] or an error; only
//! [`main`] turns them into a process exit code. Exit codes: 0 ok, 1 problems found (invalid
//! input, infeasible plan, drift), 2 the tool itself failed. A closed pipe is not a failure.

mod catalog;
mod check;
mod common;
mod compile;
mod completions;
mod current;
mod diff;
mod explain;
mod latency;
mod lint;
mod measurements;
mod schema;
mod simulate;
mod validate;

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Compile a GPU manifest into MIG / time-slicing partitions and GitOps-ready Kubernetes manifests.
///
/// Exit codes: 0 success; 1 problems found (invalid input, infeasible plan, stale output);
/// 2 gpuplan itself failed (for example an unreadable file).
#[derive(Debug, Parser)]
#[command(name = "gpuplan", version, max_term_width = 100, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Output format: text for people, or JSON for tools.
    #[arg(long, global = true, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// When to color human output.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// Print only errors.
    #[arg(long, short, global = true)]
    pub quiet: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan a manifest and write the GitOps bundle into a directory.
    ///
    /// The directory is written atomically; files gpuplan did not generate are never touched.
    Compile(compile::CompileArgs),
    /// Exit 1 when the committed output differs from a fresh compile (names the files); 0 when identical.
    ///
    /// Check: compare the output directory with what `compile` would write. Writes nothing.
    Check(compile::CompileArgs),
    /// Print what `compile` would change: a summary of the plan's changes, then a unified diff.
    ///
    /// The summary (models added, removed and moved, nodes re-partitioned, GPUs and cost before
    /// and after) compares with the plan committed in the directory; `--format json` gives it as
    /// `summary`, fit for a pull-request comment (docs/ci.md). Writes nothing.
    Diff(diff::DiffArgs),
    Explain(explain::ExplainArgs),
    Validate(validate::ValidateArgs),
    Schema(schema::SchemaArgs),
    Simulate(simulate::SimulateArgs),
    Catalog(catalog::CatalogArgs),
    Current(current::CurrentArgs),
    #[command(name = "validate-mig-config")]
    ValidateMigConfig(lint::LintArgs),
    Latency(latency::LatencyArgs),
    Measurements(measurements::MeasurementsArgs),
    Completions(completions::CompletionsArgs),
}

/// Inputs shared by the commands that read a manifest.
#[derive(Debug, Args)]
pub struct ManifestArgs {
    /// The manifest (`gpuplan.yaml`, or `.toml`).
    pub manifest: PathBuf,
    /// Extra catalog folder with GPU entries (YAML); entries with an existing id replace it.
    #[arg(long, value_name = "DIR")]
    pub catalog: Vec<PathBuf>,
}

/// How a command ended, when gpuplan itself did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// Everything is fine.
    Success,
    /// Problems were found in the input or the output directory.
    Problems,
}

/// What a command needs to print: the global options, resolved.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub format: Format,
    pub color: bool,
    pub quiet: bool,
}

/// Writes `text` and a newline unless it already ends with one, then flushes.
fn write_line(mut w: impl Write, text: &str) -> io::Result<()> {
    w.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        w.write_all(b"\n")?;
    }
    w.flush()
}

impl Ctx {
    /// Writes a line to stdout (errors, including a closed pipe, propagate).
    pub fn out(&self, text: &str) -> io::Result<()> {
        write_line(io::stdout().lock(), text)
    }

    /// Writes to stderr unless `--quiet`.
    pub fn status(&self, text: &str) -> io::Result<()> {
        if self.quiet {
            return Ok(());
        }
        self.err(text)
    }

    /// Writes to stderr, even with `--quiet` (diagnostics, errors).
    pub fn err(&self, text: &str) -> io::Result<()> {
        write_line(io::stderr().lock(), text)
    }

    /// Reports a mistake in the user's input as `error[CODE]: text` on stderr, even with
    /// `--quiet`; the command then ends with [`ExitStatus::Problems`].
    pub fn problem(&self, code: crate::diagnostics::codes::Code, text: &str) -> anyhow::Result<ExitStatus> {
        self.err(&format!("error[{code}]: {text}"))?;
        Ok(ExitStatus::Problems)
    }

    /// Writes a JSON value to stdout, pretty-printed.
    pub fn json(&self, value: &impl serde::Serialize) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(value)?;
        self.out(&text)?;
        Ok(())
    }
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitStatus> {
    let color = match cli.global.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let ctx = Ctx { format: cli.global.format, color, quiet: cli.global.quiet };
    match cli.command {
        Command::Compile(args) => compile::run(&ctx, &args),
        Command::Check(args) => check::run(&ctx, &args),
        Command::Diff(args) => diff::run(&ctx, &args),
        Command::Explain(args) => explain::run(&ctx, &args),
        Command::Validate(args) => validate::run(&ctx, &args),
        Command::Schema(args) => schema::run(&ctx, &args),
        Command::Simulate(args) => simulate::run(&ctx, &args),
        Command::Catalog(args) => catalog::run(&ctx, &args),
        Command::Current(args) => current::run(&ctx, &args),
        Command::ValidateMigConfig(args) => lint::run(&ctx, &args),
        Command::Latency(args) => latency::run(&ctx, &args),
        Command::Measurements(args) => measurements::run(&ctx, &args),
        Command::Completions(args) => completions::run(&ctx, &args),
    }
}

/// The process entry point: parses arguments, runs, maps the outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() { 2 } else { 0 };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    match run(cli) {
        Ok(ExitStatus::Success) => ExitCode::SUCCESS,
        Ok(ExitStatus::Problems) => ExitCode::from(1),
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            let _ = writeln!(io::stderr(), "error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().filter_map(|e| e.downcast_ref::<io::Error>()).any(|e| e.kind() == io::ErrorKind::BrokenPipe)
}
