//! `gpuplan validate`: check a manifest without planning or writing anything.
//!
//! Exit 0 when the manifest is valid (warnings may be printed), 1 with every problem reported
//! otherwise. In JSON mode stdout holds exactly one document: `{valid, diagnostics}`.

use clap::Args;

use super::common::load_spec_quietly;
use super::{Ctx, ExitStatus, Format, ManifestArgs};
use crate::diagnostics::render;

/// Check a manifest: syntax, fields, units, names, catalog GPUs. Writes nothing.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub input: ManifestArgs,
}

pub(super) fn run(ctx: &Ctx, args: &ValidateArgs) -> anyhow::Result<ExitStatus> {
    match load_spec_quietly(ctx, &args.input)? {
        Err(_) => Ok(ExitStatus::Problems),
        Ok((sources, _, spec, warnings)) => {
            match ctx.format {
                Format::Json => ctx.json(&serde_json::json!({
                    "valid": true,
                    "diagnostics": render::json(&sources, &warnings.0),
                }))?,
                Format::Human => {
                    super::common::report(ctx, &sources, &warnings)?;
                    ctx.status(&format!(
                        "`{}` is valid: {} model(s), {} pool(s)",
                        args.input.manifest.display(),
                        spec.models.len(),
                        spec.pools.len()
                    ))?;
                }
            }
            Ok(ExitStatus::Success)
        }
    }
}
