//! `gpuplan diff`: print what `compile` would change in the output directory.

use std::path::PathBuf;

use clap::Args;

use super::compile::run_mode;
use super::{Ctx, ExitStatus, ManifestArgs};
use crate::emit::Mode;

/// Print what `compile` would change: a summary of the plan's changes, then a unified diff.
///
/// The summary (models added, removed and moved, nodes re-partitioned, GPUs and cost before and
/// after) compares with the plan committed in the directory; `--format json` gives it as
/// `summary`, fit for a pull-request comment (docs/ci.md). Diff: compare the output directory with what `compile` would write. Writes nothing.
#[derive(Debug, Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub input: ManifestArgs,
    /// The committed output directory.
    #[arg(long, short, value_name = "DIR")]
    pub out: PathBuf,
    /// Folder of templates that override the built-in ones, by file name.
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,
    #[command(flatten)]
    pub day2: super::compile::Day2Args,
    /// Limit the file diffs to the YAML that Kubernetes reads (no `PLAN.md`, `plan.json`, SVG).
    #[arg(long)]
    pub kubernetes_only: bool,
}

pub fn run(ctx: &Ctx, args: &DiffArgs) -> anyhow::Result<ExitStatus> {
    run_mode(
        ctx,
        &args.input,
        &args.out,
        args.templates.as_deref(),
        Mode::Diff,
        &args.day2,
        args.kubernetes_only,
    )
}
