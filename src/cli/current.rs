//! `gpuplan current import`: the manifest's `current` layouts from a running cluster.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::common::{CatalogDirs, load_catalog_checked, read_text};
use super::{Ctx, ExitStatus, Format};

/// Today's layouts of a cluster gpuplan did not plan, for the manifest's `current`.
#[derive(Debug, Args)]
pub struct CurrentArgs {
    #[command(subcommand)]
    pub command: CurrentCommand,
}

#[derive(Debug, Subcommand)]
pub enum CurrentCommand {
    Import(ImportArgs),
}

/// Print `current` entries per node from `kubectl get nodes -o json` and the mig-parted
/// ConfigMap, or from the DRA driver's ResourceSlices.
///
/// With `--nodes`: reads the NVIDIA labels (`nvidia.com/gpu.product`, `nvidia.com/gpu.count`,
/// `nvidia.com/mig.config`, `nvidia.com/mig.config.state`, `nvidia.com/device-plugin.config`)
/// and resolves each node's `nvidia.com/mig.config` in the mig-parted config. With
/// `--resource-slices`: reads each GPU's UUID, product and static MIG devices as NVIDIA's DRA
/// driver publishes them, and writes `uuids` too (pools on `backend: dra` need them). Writes
/// YAML to paste under each pool's `current:` (or JSON with `--format json`).
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Output of `kubectl get nodes -o json`.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "resource_slices",
        conflicts_with = "resource_slices"
    )]
    pub nodes: Option<PathBuf>,
    /// Output of `kubectl get resourceslices -o json` (NVIDIA's DRA driver, `gpu.nvidia.com`).
    #[arg(long, value_name = "FILE", conflicts_with = "mig_config")]
    pub resource_slices: Option<PathBuf>,
    /// The mig-parted config: `kubectl get configmap NAME -n gpu-operator -o yaml`, or its `config.yaml`.
    #[arg(long, value_name = "FILE")]
    pub mig_config: Option<PathBuf>,
    #[command(flatten)]
    pub catalog: CatalogDirs,
}

pub(super) fn run(ctx: &Ctx, args: &CurrentArgs) -> anyhow::Result<ExitStatus> {
    let CurrentCommand::Import(args) = &args.command;
    let Ok(catalog) = load_catalog_checked(ctx, &args.catalog.dirs)? else {
        return Ok(ExitStatus::Problems);
    };
    let Some(nodes) = &args.nodes else {
        return import_slices(ctx, args.resource_slices.as_deref(), &catalog);
    };
    let nodes = read_text(nodes)?;
    let mig = args.mig_config.as_deref().map(read_text).transpose()?;
    match crate::day2::import_current(&nodes, mig.as_deref(), &catalog) {
        Ok(imported) => {
            if ctx.format == Format::Json {
                let v: Vec<serde_json::Value> = imported
                    .iter()
                    .map(|n| {
                        serde_json::json!({"node": n.node, "gpu": n.gpu, "gpus": n.gpus,
                            "devicePluginConfig": n.device_plugin_config, "notes": n.notes})
                    })
                    .collect();
                ctx.json(&v)?;
            } else {
                ctx.out(&crate::day2::current_yaml(&imported))?;
            }
            // Notes (an unknown product, a pending MIG state) are comments in the output.
            Ok(ExitStatus::Success)
        }
        Err(e) => {
            ctx.err(&format!("error: {e}"))?;
            Ok(ExitStatus::Problems)
        }
    }
}

/// `current import --resource-slices FILE`.
fn import_slices(
    ctx: &Ctx,
    path: Option<&std::path::Path>,
    catalog: &crate::catalog::Catalog,
) -> anyhow::Result<ExitStatus> {
    let Some(path) = path else { anyhow::bail!("give `--nodes FILE` or `--resource-slices FILE`") };
    let text = read_text(path)?;
    let imported = match crate::day2::slices::import_resource_slices(&text, catalog) {
        Ok(imported) => imported,
        Err(e) => {
            ctx.err(&format!("error: {}: {e}", path.display()))?;
            return Ok(ExitStatus::Problems);
        }
    };
    if ctx.format == Format::Json {
        let v: Vec<serde_json::Value> = imported
            .iter()
            .map(|n| serde_json::json!({"node": n.node, "gpu": n.gpu, "product": n.product, "gpus": n.gpus, "uuids": n.uuids, "notes": n.notes}))
            .collect();
        ctx.json(&v)?;
    } else {
        ctx.out(&crate::day2::slices::slices_yaml(&imported))?;
    }
    Ok(ExitStatus::Success)
}
