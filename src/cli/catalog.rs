//! `gpuplan catalog`: list, show and import GPU models.
//!
//! In: the built-in catalog plus `--catalog` folders; for `import`, `nvidia-smi` text from files or
//! stdin. Out: a table or JSON on stdout; `import` writes one catalog entry as YAML to stdout or
//! `--out FILE`. Unreadable `nvidia-smi` output is reported as diagnostics (exit 1).

use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde::Serialize;

use super::common::{load_catalog_checked, read_text, report};
use super::{Ctx, ExitStatus, Format};
use crate::catalog::import::{DeviceInfo, Target, import, merge, parse_query, target};
use crate::catalog::layout::{self, Layout};
use crate::catalog::{Catalog, GpuModel};
use crate::diagnostics::Sources;

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
    /// Write a catalog entry from `nvidia-smi mig -lgip` and `nvidia-smi mig -lgipp` output.
    ///
    /// When the catalog already has the GPU (same PCI id, or the id given by `--id`), the entry is
    /// merged: it keeps its id, aliases, labels and notes and takes the driver's profile table and
    /// memory. An import that would take over another entry's id or alias is refused.
    Import(ImportArgs),
}

/// Inputs of `catalog import`. Use `-` for one of the files to read it from stdin.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Output of `nvidia-smi mig -lgip` (GPU-instance profiles).
    #[arg(long, value_name = "FILE")]
    pub lgip: PathBuf,
    /// Output of `nvidia-smi mig -lgipp` (allowed placements).
    #[arg(long, value_name = "FILE")]
    pub lgipp: PathBuf,
    /// Output of `nvidia-smi -q` or `nvidia-smi -q -x` (XML), for the product name, total memory,
    /// PCI device id and driver version.
    #[arg(long, value_name = "FILE")]
    pub query: Option<PathBuf>,
    /// Catalog id of the new entry (default: derived from the product name).
    #[arg(long)]
    pub id: Option<String>,
    /// Product name as `nvidia-smi` prints it, e.g. "NVIDIA H100 80GB HBM3".
    #[arg(long)]
    pub name: Option<String>,
    /// Total GPU memory in MiB.
    #[arg(long, value_name = "MIB")]
    pub memory_mib: Option<u64>,
    /// PCI device id, `0xDDDD10DE`.
    #[arg(long, value_name = "ID")]
    pub pci_id: Option<String>,
    /// SMs of the whole GPU (default: the largest profile's SMs; kept from the catalog on a merge).
    #[arg(long)]
    pub sms: Option<u32>,
    /// Driver version the outputs were printed by (default: read from `--query`).
    #[arg(long, value_name = "VERSION")]
    pub driver: Option<String>,
    /// Write the entry to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub(super) fn run(ctx: &Ctx, args: &CatalogArgs) -> anyhow::Result<ExitStatus> {
    if let CatalogCommand::Import(import_args) = &args.command {
        return run_import(ctx, import_args, &args.catalog);
    }
    let Ok(catalog) = load_catalog_checked(ctx, &args.catalog)? else {
        return Ok(ExitStatus::Problems);
    };
    match &args.command {
        CatalogCommand::List => list(ctx, &catalog),
        CatalogCommand::Show { gpu } => show(ctx, &catalog, gpu),
        CatalogCommand::Import(_) => Ok(ExitStatus::Success),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ListRow<'a> {
    id: &'a str,
    name: &'a str,
    memory_mib: u64,
    sms: u32,
    pci_ids: &'a [String],
    product_labels: &'a [String],
    mig: bool,
    profiles: Vec<&'a str>,
}

fn list(ctx: &Ctx, catalog: &Catalog) -> anyhow::Result<ExitStatus> {
    match ctx.format {
        Format::Json => {
            let rows: Vec<ListRow<'_>> = catalog
                .iter()
                .map(|g| ListRow {
                    id: &g.id,
                    name: &g.name,
                    memory_mib: g.memory_mib,
                    sms: g.sms,
                    pci_ids: &g.pci_ids,
                    product_labels: &g.product_labels,
                    mig: g.is_mig_capable(),
                    profiles: g.profile_names().collect(),
                })
                .collect();
            ctx.json(&rows)?;
        }
        Format::Human => {
            let mut text =
                format!("{:<26} {:>11} {:>5}  {:<11} {:<8}  NAME\n", "ID", "MEMORY", "SMS", "PCI", "MIG");
            for g in catalog.iter() {
                let mig = g.mig.as_ref().map_or_else(
                    || "-".to_owned(),
                    |m| format!("{}/{} {}p", m.compute_slices, m.memory_slices, m.profiles.len()),
                );
                let pci = g.pci_ids.first().map_or("-", String::as_str);
                text.push_str(&format!(
                    "{:<26} {:>8}MiB {:>5}  {:<11} {:<8}  {}\n",
                    g.id, g.memory_mib, g.sms, pci, mig, g.name
                ));
            }
            ctx.out(&text)?;
        }
    }
    Ok(ExitStatus::Success)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ShownLayout {
    counts: std::collections::BTreeMap<String, u32>,
    placement: Vec<layout::PlacedInstance>,
    compute_slices: u32,
    picture: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown<'a> {
    gpu: &'a GpuModel,
    maximal_layouts: Vec<ShownLayout>,
}

fn show(ctx: &Ctx, catalog: &Catalog, wanted: &str) -> anyhow::Result<ExitStatus> {
    let Some(gpu) = catalog.get(wanted) else {
        let hint = format!("\nhelp: {}", crate::catalog::suggestion_help(&catalog.suggest(wanted)));
        ctx.err(&format!("error: no GPU `{wanted}` in the catalog{hint}"))?;
        return Ok(ExitStatus::Problems);
    };
    let maximal: Vec<Layout> = layout::maximal(gpu);
    match ctx.format {
        Format::Json => {
            let maximal_layouts = maximal
                .iter()
                .map(|l| ShownLayout {
                    counts: l.counts(),
                    placement: l.instances.clone(),
                    compute_slices: l.compute_slices(gpu),
                    picture: l.picture(gpu),
                })
                .collect();
            ctx.json(&Shown { gpu, maximal_layouts })?;
        }
        Format::Human => ctx.out(&describe(gpu, &maximal))?,
    }
    Ok(ExitStatus::Success)
}

/// (trust, driver, source) of a profile row.
type Provenance<'a> = (&'a str, &'a str, &'a str);

/// The human description of one GPU: facts, profile table, maximal layouts.
fn describe(gpu: &GpuModel, maximal: &[Layout]) -> String {
    let mut text = format!("{}  ({})\n", gpu.id, gpu.name);
    text.push_str(&format!(
        "memory {} MiB, {} SMs, PCI {}, label {} (trust: {})\n",
        gpu.memory_mib,
        gpu.sms,
        if gpu.pci_ids.is_empty() { "-".to_owned() } else { gpu.pci_ids.join(", ") },
        gpu.product_labels.first().map_or("-", String::as_str),
        trust_word(gpu.trust),
    ));
    if !gpu.aliases.is_empty() {
        text.push_str(&format!("aliases: {}\n", gpu.aliases.join(", ")));
    }
    text.push_str(&format!(
        "source: {}{}\n",
        if gpu.source.is_empty() { "-" } else { &gpu.source },
        gpu.driver.as_ref().map_or_else(String::new, |d| format!(" (driver {d})"))
    ));
    match &gpu.throughput {
        Some(t) => text.push_str(&format!(
            "throughput: {} GB/s, {} dense FP16 TFLOPS (source: {})\n",
            t.memory_bandwidth_gbps, t.fp16_dense_tflops, t.source
        )),
        None => text.push_str(
            "throughput: - (no datasheet figures; latency baselines are not moved to or from it)\n",
        ),
    }
    let Some(mig) = &gpu.mig else {
        text.push_str("no MIG: use it whole or time-sliced\n");
        return text;
    };
    text.push_str(&format!(
        "MIG: {} compute slices, {} memory slices\n\n",
        mig.compute_slices, mig.memory_slices
    ));
    text.push_str(&format!(
        "{:<16} {:>3} {:>3} {:>3} {:>9} {:>4} {:>4}  {:<15} {}\n",
        "PROFILE", "ID", "CS", "MS", "MIB", "SMS", "MAX", "STARTS", "TRUST"
    ));
    for p in &mig.profiles {
        let starts = p.starts.iter().map(u8::to_string).collect::<Vec<_>>().join(",");
        text.push_str(&format!(
            "{:<16} {:>3} {:>3} {:>3} {:>9} {:>4} {:>4}  {:<15} {}\n",
            p.name,
            p.id,
            p.compute_slices,
            p.memory_slices,
            p.memory_mib,
            p.sms,
            p.max_count,
            starts,
            trust_word(p.trust)
        ));
    }
    // Provenance: one line per distinct (trust, driver, source), naming the rows it covers.
    let mut groups: Vec<(Provenance<'_>, Vec<&str>)> = Vec::new();
    for p in &mig.profiles {
        let key = (trust_word(p.trust), p.driver.as_deref().unwrap_or("-"), p.source.as_str());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, names)) => names.push(&p.name),
            None => groups.push((key, vec![&p.name])),
        }
    }
    text.push_str("\nprovenance (trust, driver, source):\n");
    for ((trust, driver, source), names) in &groups {
        text.push_str(&format!(
            "  {}: {trust}, driver {driver}, {}\n",
            names.join(" "),
            if source.is_empty() { "-" } else { source }
        ));
    }
    text.push_str(&format!("\nmaximal layouts ({}), one cell per memory slice:\n", maximal.len()));
    for l in maximal {
        text.push_str(&format!(
            "{}  {}/{} compute\n",
            l.picture(gpu),
            l.compute_slices(gpu),
            mig.compute_slices
        ));
    }
    text
}

fn trust_word(trust: crate::catalog::Trust) -> &'static str {
    match trust {
        crate::catalog::Trust::Driver => "driver",
        crate::catalog::Trust::NvidiaConfig => "nvidia-config",
        crate::catalog::Trust::Inferred => "inferred",
    }
}

fn read_input(path: &Path, stdin_used: &mut bool) -> anyhow::Result<String> {
    if path == Path::new("-") {
        anyhow::ensure!(!*stdin_used, "only one input can be read from stdin (`-`)");
        *stdin_used = true;
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("cannot read stdin")?;
        return Ok(text);
    }
    read_text(path)
}

fn run_import(ctx: &Ctx, args: &ImportArgs, catalog_dirs: &[PathBuf]) -> anyhow::Result<ExitStatus> {
    let Ok(catalog) = load_catalog_checked(ctx, catalog_dirs)? else {
        return Ok(ExitStatus::Problems);
    };
    let mut stdin_used = false;
    let lgip = read_input(&args.lgip, &mut stdin_used)?;
    let lgipp = read_input(&args.lgipp, &mut stdin_used)?;
    let mut sources = Sources::new();
    let (mut info, query_file) = match &args.query {
        Some(path) => {
            let text = read_input(path, &mut stdin_used)?;
            let file = sources.add(path.display().to_string(), text.clone());
            match parse_query(file, &text) {
                Ok(info) => (info, Some(file)),
                Err(diagnostics) => {
                    report(ctx, &sources, &diagnostics)?;
                    return Ok(ExitStatus::Problems);
                }
            }
        }
        None => (DeviceInfo::default(), None),
    };
    info.id = args.id.clone().or(info.id);
    info.name = args.name.clone().or(info.name);
    info.memory_mib = args.memory_mib.or(info.memory_mib);
    info.pci_id = args.pci_id.clone().or(info.pci_id);
    info.sms = args.sms.or(info.sms);
    info.driver = args.driver.clone().or(info.driver);
    let lgip_name = args.lgip.display().to_string();
    let lgipp_name = args.lgipp.display().to_string();
    let gpu = match import(&mut sources, (&lgip_name, &lgip), (&lgipp_name, &lgipp), &info, query_file) {
        Ok(gpu) => gpu,
        Err(diagnostics) => {
            report(ctx, &sources, &diagnostics)?;
            return Ok(ExitStatus::Problems);
        }
    };
    let gpu = match target(&catalog, &gpu, args.id.as_deref()) {
        Err(why) => return ctx.problem(crate::diagnostics::codes::CATALOG_IMPORT_CONFLICT, &why),
        Ok(Target::New) => gpu,
        Ok(Target::Merge(id)) => {
            let existing = catalog.get(&id).context("merge target vanished")?;
            let (merged, dropped) = merge(existing, gpu);
            let mut note = format!("merged into the catalog entry `{id}` (its id, aliases and notes kept)");
            if !dropped.is_empty() {
                note.push_str(&format!(
                    "; profiles this driver does not print were dropped: {}",
                    dropped.join(", ")
                ));
            }
            ctx.status(&note)?;
            merged
        }
    };
    let yaml = format!(
        "# Imported by `gpuplan catalog import`. Review `id` and `aliases`, and `sms` (without `--sms` it is\n# the largest profile's SMs, fewer than the whole GPU on A100).\n{}",
        serde_saphyr::to_string(&gpu)?
    );
    match &args.out {
        Some(path) => {
            std::fs::write(path, &yaml).with_context(|| format!("cannot write `{}`", path.display()))?;
            ctx.status(&format!("wrote `{}` ({})", path.display(), gpu.id))?;
        }
        None => ctx.out(&yaml)?,
    }
    Ok(ExitStatus::Success)
}
