//! `gpuplan schema`: print the manifest's JSON Schema.

use clap::Args;

use super::{Ctx, ExitStatus};

/// Print the JSON Schema of the manifest (for editors and yaml-language-server).
#[derive(Debug, Args)]
pub struct SchemaArgs {}

pub fn run(ctx: &Ctx, _args: &SchemaArgs) -> anyhow::Result<ExitStatus> {
    ctx.err("error: the manifest schema is not generated yet")?;
    Ok(ExitStatus::Problems)
}
