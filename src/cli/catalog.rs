//! `gpuplan catalog`: list, show and import GPU models.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::common::load_catalog;
use super::{Ctx, ExitStatus, Format};

/// List the GPU models gpuplan knows, show one, or import one from `nvidia-smi` output.
#[derive(Debug, Args)]
pub struct CatalogArgs {
    #[command(subcommand)]
    pub command: CatalogCommand,
    /// Extra catalog folder with GPU entries (YAML).
    #[arg(long, value_name = "DIR", global = true)]
    pub catalog: Vec<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Table of every GPU model.
    List,
    /// One GPU model: its MIG profiles and maximal layouts.
    Show {
        /// GPU id or alias.
        gpu: String,
    },
}

pub fn run(ctx: &Ctx, args: &CatalogArgs) -> anyhow::Result<ExitStatus> {
    let catalog = load_catalog(&args.catalog)?;
    match &args.command {
        CatalogCommand::List => {
            let gpus: Vec<_> = catalog.iter().collect();
            match ctx.format {
                Format::Json => ctx.json(&gpus)?,
                Format::Human => {
                    let mut text = format!("{:<24} {:>10} {:>5}  MIG\n", "ID", "MEMORY", "SMS");
                    for gpu in gpus {
                        let mig = gpu.mig.as_ref().map_or(0, |m| m.profiles.len());
                        text.push_str(&format!(
                            "{:<24} {:>7}MiB {:>5}  {mig} profiles\n",
                            gpu.id, gpu.memory_mib, gpu.sms
                        ));
                    }
                    ctx.out(&text)?;
                }
            }
            Ok(ExitStatus::Success)
        }
        CatalogCommand::Show { gpu } => {
            let Some(model) = catalog.get(gpu) else {
                ctx.err(&format!("error: no GPU `{gpu}` in the catalog"))?;
                return Ok(ExitStatus::Problems);
            };
            match ctx.format {
                Format::Json => ctx.json(model)?,
                Format::Human => ctx.out(&serde_saphyr::to_string(model)?)?,
            }
            Ok(ExitStatus::Success)
        }
    }
}
