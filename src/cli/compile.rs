//! `gpuplan compile`: manifest → plan → bundle → output directory.

use std::path::PathBuf;

use clap::Args;

use super::common::{load_spec, report};
use super::{Ctx, ExitStatus, ManifestArgs};

/// Plan a manifest and write the GitOps bundle into a directory.
///
/// The directory is written atomically; files gpuplan did not generate are never touched.
#[derive(Debug, Args)]
pub struct CompileArgs {
    #[command(flatten)]
    pub input: ManifestArgs,
    /// Output directory for the bundle.
    #[arg(long, short, value_name = "DIR")]
    pub out: PathBuf,
    /// Folder of templates that override the built-in ones, by file name.
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,
}

pub fn run(ctx: &Ctx, args: &CompileArgs) -> anyhow::Result<ExitStatus> {
    let Ok((sources, catalog, spec)) = load_spec(ctx, &args.input)? else {
        return Ok(ExitStatus::Problems);
    };
    match crate::plan::plan(&spec, &catalog) {
        Err(diags) => {
            report(ctx, &sources, &diags)?;
            Ok(ExitStatus::Problems)
        }
        Ok(_plan) => {
            ctx.err("error: rendering the bundle is not implemented yet; nothing was written")?;
            Ok(ExitStatus::Problems)
        }
    }
}
