//! `gpuplan schema`: print the manifest's JSON Schema.
//!
//! The schema is generated from the raw manifest types ([`crate::manifest::schema_json`]); the
//! copy checked in at `schemas/gpuplan.schema.json` is compared with it by a test.

use clap::Args;

use super::{Ctx, ExitStatus};

/// Print the JSON Schema of the manifest (for editors and yaml-language-server).
#[derive(Debug, Args)]
pub struct SchemaArgs {}

pub(super) fn run(ctx: &Ctx, _args: &SchemaArgs) -> anyhow::Result<ExitStatus> {
    ctx.out(crate::manifest::schema_json().trim_end())?;
    Ok(ExitStatus::Success)
}
