//! `gpuplan simulate`: replay the kube-scheduler on a written bundle.
//!
//! Reads only the bundle's files (`gpu-operator/`, `nodes/`, `workloads/`, `dra/` of the output
//! directory), never the manifest or the planner: it judges what was written. Exit 0 when every
//! pod found a node in every arrival order, every rolling update completed and the staged drain
//! wave can finish within the PodDisruptionBudgets, 1 otherwise.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use super::{Ctx, ExitStatus, Format};
use crate::simulate::{Options, simulate};

/// Replay kube-scheduler filters and rolling updates on a compiled bundle; exit 1 if a pod can be left Pending.
///
/// Derives every node's GPU resources from the bundle's mig-parted and device-plugin configs and
/// node labels as the cluster has them now (held-back labels not applied, nodes in transition
/// carrying what they carry), then places every pod in hundreds of adversarial arrival orders,
/// rolls out every Deployment, and drains the staged wave against the PodDisruptionBudgets.
/// Reads only the files in `--out`; the manifest argument is accepted so that the command line
/// matches `compile` and `check`, and is not read.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The manifest the bundle was compiled from (not read; see above).
    pub manifest: Option<PathBuf>,
    /// The output directory holding the bundle.
    #[arg(long, short, value_name = "DIR")]
    pub out: PathBuf,
    /// Random arrival orders on top of the structured ones.
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub orders: usize,
    /// Seed of the random orders.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Most bytes read from one bundle file.
const MAX_FILE: u64 = 16 * 1024 * 1024;

fn read_tree(root: &Path, dir: &Path, files: &mut BTreeMap<String, String>) -> anyhow::Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(std::fs::DirEntry::path);
    for entry in entries {
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            read_tree(root, &path, files)?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "yaml" || e == "json") {
            if entry.metadata()?.len() > MAX_FILE {
                anyhow::bail!("`{}` is larger than {MAX_FILE} bytes", path.display());
            }
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read `{}`", path.display()))?;
            let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
            files.insert(rel, text);
        }
    }
    Ok(())
}

pub(super) fn run(ctx: &Ctx, args: &SimulateArgs) -> anyhow::Result<ExitStatus> {
    if !args.out.is_dir() {
        anyhow::bail!("`{}` is not a directory; compile the manifest first", args.out.display());
    }
    let mut files = BTreeMap::new();
    for part in ["gpu-operator", "nodes", "workloads", "dra"] {
        read_tree(&args.out, &args.out.join(part), &mut files)?;
    }
    let report = simulate(&files, &Options { random_orders: args.orders, seed: args.seed });
    match ctx.format {
        Format::Json => ctx.json(&report)?,
        Format::Human => {
            for p in report.problems.iter().take(20) {
                ctx.err(&format!("error[{}]: {}\n  in: {}", p.kind, p.message, p.scenario))?;
            }
            if report.problems.len() > 20 {
                ctx.err(&format!("… and {} more problems", report.problems.len() - 20))?;
            }
            let verdict = match (report.ok(), report.drained.is_empty()) {
                (false, _) => "PROBLEMS FOUND",
                (true, true) => "every pod placed, every rollout completed",
                (true, false) => "every pod placed, every rollout and the staged drain completed",
            };
            let drain = if report.drained.is_empty() {
                String::new()
            } else {
                format!(", the drain of {}", report.drained.join(", "))
            };
            ctx.status(&format!(
                "simulated {} pods of {} Deployments on {} nodes: {} arrival orders, {} rollouts{drain}: {verdict}",
                report.pods, report.deployments, report.nodes, report.orders, report.rollouts
            ))?;
        }
    }
    Ok(if report.ok() { ExitStatus::Success } else { ExitStatus::Problems })
}
