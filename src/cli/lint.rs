//! `gpuplan validate-mig-config`: lint a mig-parted config file against the catalog.

use std::path::PathBuf;

use clap::Args;

use super::{Ctx, ExitStatus};

/// Lint a mig-parted config (`version: v1`, `mig-configs`): unknown profiles, invalid layouts,
/// device filters that match no GPU, GPUs a config leaves untouched.
#[derive(Debug, Args)]
pub struct LintArgs {
    /// The mig-parted config file, or a ConfigMap holding it under `config.yaml`.
    pub file: PathBuf,
    /// Extra catalog folder with GPU entries (YAML).
    #[arg(long, value_name = "DIR")]
    pub catalog: Vec<PathBuf>,
}

pub fn run(ctx: &Ctx, _args: &LintArgs) -> anyhow::Result<ExitStatus> {
    ctx.err("error: `validate-mig-config` is not implemented yet")?;
    Ok(ExitStatus::Problems)
}
