//! `gpuplan diff`: print what `compile` would change in the output directory.

use super::compile::{CompileArgs, run_mode};
use super::{Ctx, ExitStatus};
use crate::emit::Mode;

/// The arguments of `diff`: those of `compile`, and how much of the file diffs to print.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub compile: CompileArgs,
    /// Limit the file diffs to the YAML that Kubernetes reads (no `PLAN.md`, `plan.json`, SVG).
    #[arg(long)]
    pub kubernetes_only: bool,
}

/// A summary of the plan's changes (models added, removed and moved, nodes re-partitioned, GPUs
/// and cost before and after, against the plan committed in the directory; `--format json` gives
/// it as `summary`, fit for a pull-request comment, docs/ci.md), then a unified diff.
pub(super) fn run(ctx: &Ctx, args: &DiffArgs) -> anyhow::Result<ExitStatus> {
    run_mode(ctx, &args.compile, Mode::Diff, args.kubernetes_only)
}
