//! `gpuplan diff`: compare a fresh compile with the committed output directory.

use std::path::PathBuf;

use clap::Args;

use super::{Ctx, ExitStatus, ManifestArgs};

/// Print a unified diff of what `compile` would change in the output directory.
///
/// Diff: compare the output directory with what `compile` would write. Writes nothing.
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
}

pub fn run(ctx: &Ctx, _args: &DiffArgs) -> anyhow::Result<ExitStatus> {
    ctx.err("error: `diff` is not implemented yet")?;
    Ok(ExitStatus::Problems)
}
