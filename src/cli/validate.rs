//! `gpuplan validate`: check a manifest without planning or writing anything.

use clap::Args;

use super::common::load_spec;
use super::{Ctx, ExitStatus, Format, ManifestArgs};

/// Check a manifest: syntax, fields, units, names, catalog GPUs. Writes nothing.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub input: ManifestArgs,
}

pub fn run(ctx: &Ctx, args: &ValidateArgs) -> anyhow::Result<ExitStatus> {
    match load_spec(ctx, &args.input)? {
        Err(_) => Ok(ExitStatus::Problems),
        Ok((_, _, spec)) => {
            match ctx.format {
                Format::Json => ctx.json(&serde_json::json!({ "valid": true, "diagnostics": [] }))?,
                Format::Human => ctx.status(&format!(
                    "`{}` is valid: {} model(s), {} pool(s)",
                    args.input.manifest.display(),
                    spec.models.len(),
                    spec.pools.len()
                ))?,
            }
            Ok(ExitStatus::Success)
        }
    }
}
