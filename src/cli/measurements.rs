//! `gpuplan measurements import`: a measured point from a benchmark tool's export.
//!
//! In: a `perf_analyzer` CSV or a `genai-perf` JSON/CSV export, and the GPU, profile and batch
//! size from flags. Out: gpuplan's measured-points CSV (one point, or with `--sweep` one per
//! perf_analyzer row) on stdout (or appended to `--out`), checked
//! against the catalog. The reading itself is [`crate::measurements::import`].

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand};

use super::common::{load_catalog_checked, read_text, report};
use super::{Ctx, ExitStatus};
use crate::diagnostics::Sources;
use crate::measurements::import::{Context, import, import_sweep};
use crate::measurements::{parse_csv_checked, to_csv};

/// Work with measured-points files (`docs/measurements.md`).
#[derive(Debug, Args)]
pub struct MeasurementsArgs {
    #[command(subcommand)]
    pub command: MeasurementsCommand,
    /// Extra catalog folder with GPU entries (YAML).
    #[arg(long, value_name = "DIR", global = true)]
    pub catalog: Vec<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum MeasurementsCommand {
    /// Convert a Triton `perf_analyzer` CSV (`-f results.csv`) or a `genai-perf` JSON/CSV export
    /// into one measured point (`rps` = throughput, `latency_ms` = p99 latency), or with
    /// `--sweep` every perf_analyzer row into a sweep.
    Import(ImportArgs),
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The tool's export (format recognised from its content).
    pub file: PathBuf,
    /// GPU the benchmark ran on (catalog id, alias or product name).
    #[arg(long)]
    pub gpu: String,
    /// MIG profile the benchmark ran on (`3g.40gb`), or `whole`.
    #[arg(long, default_value = "whole")]
    pub profile: String,
    /// Requests per batch (default: what genai-perf recorded, else 1).
    #[arg(long)]
    pub batch_size: Option<u32>,
    /// perf_analyzer: the concurrency or request rate of the row to take (default: the row with
    /// the highest throughput).
    #[arg(long, value_name = "VALUE", conflicts_with = "sweep")]
    pub row: Option<String>,
    /// perf_analyzer: import every row (each concurrency or request rate) as one point of a
    /// sweep, p99 against rate, instead of one row.
    #[arg(long)]
    pub sweep: bool,
    /// Append the point to this measured-points file (created with a header when absent).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub(super) fn run(ctx: &Ctx, args: &MeasurementsArgs) -> anyhow::Result<ExitStatus> {
    let MeasurementsCommand::Import(a) = &args.command;
    let Ok(catalog) = load_catalog_checked(ctx, &args.catalog)? else {
        return Ok(ExitStatus::Problems);
    };
    let text = read_text(&a.file)?;
    let gpu = catalog.get(&a.gpu).map_or_else(|| a.gpu.clone(), |g| g.id.clone());
    let context = Context { gpu, profile: a.profile.clone(), batch_size: a.batch_size, row: a.row.clone() };
    let read = if a.sweep { import_sweep(&text, &context) } else { import(&text, &context).map(|p| vec![p]) };
    let points = match read {
        Ok(p) => p,
        Err(why) => {
            let text = format!("`{}`: {why}", a.file.display());
            return ctx.problem(crate::diagnostics::codes::MEASUREMENT_VALUE, &text);
        }
    };
    let existing = match &a.out {
        Some(path) if path.exists() => read_text(path)?,
        _ => String::new(),
    };
    let mut csv = if existing.trim().is_empty() { to_csv(&[]) } else { existing.clone() };
    if !csv.ends_with('\n') {
        csv.push('\n');
    }
    for row in to_csv(&points).lines().skip(1) {
        csv.push_str(row);
        csv.push('\n');
    }
    // The result must be a valid measurements file: GPU and profile known, no duplicate point.
    let mut sources = Sources::new();
    let name = a.out.as_ref().map_or_else(|| "<stdout>".to_owned(), |p| p.display().to_string());
    if let Err(diagnostics) = parse_csv_checked(&mut sources, &name, &csv, &catalog) {
        report(ctx, &sources, &diagnostics)?;
        return Ok(ExitStatus::Problems);
    }
    match &a.out {
        Some(path) => {
            std::fs::write(path, &csv).with_context(|| format!("cannot write `{}`", path.display()))?;
            let what = if points.len() == 1 { String::new() } else { format!("{} points of ", points.len()) };
            if let Some(first) = points.first() {
                ctx.status(&format!(
                    "added {what}{} {} batch {} to `{}`",
                    first.gpu,
                    first.profile,
                    first.batch_size,
                    path.display()
                ))?;
            }
        }
        None => ctx.out(&to_csv(&points))?,
    }
    Ok(ExitStatus::Success)
}
