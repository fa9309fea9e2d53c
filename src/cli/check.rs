//! `gpuplan check`: compare a fresh compile with the committed output directory.

use std::path::PathBuf;

use clap::Args;

use super::compile::run_mode;
use super::{Ctx, ExitStatus, ManifestArgs};
use crate::emit::Mode;

/// Exit 1 when the committed output differs from a fresh compile (names the files); 0 when identical.
///
/// Check: compare the output directory with what `compile` would write. Writes nothing.
#[derive(Debug, Args)]
pub struct CheckArgs {
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
}

pub fn run(ctx: &Ctx, args: &CheckArgs) -> anyhow::Result<ExitStatus> {
    run_mode(ctx, &args.input, &args.out, args.templates.as_deref(), Mode::Check, &args.day2, false)
}
