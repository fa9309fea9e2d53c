//! `catalog import`: a catalog entry from `nvidia-smi` text output.
//!
//! In: the text of `nvidia-smi mig -lgip` (profile table), of `nvidia-smi mig -lgipp` (allowed
//! placements), optionally of `nvidia-smi -q` (product name, total memory, PCI device id), and
//! [`DeviceInfo`] overrides from flags. Out: a [`GpuModel`] whose profile rows have trust `driver`,
//! or diagnostics (code `nvidia-smi-parse`) pointing at the line that could not be read.
//!
//! The parser is tolerant of spacing, box-drawing borders (`|`, `+---+`, `===`), the optional
//! `MIG` word before profile names and `N/A` cells. It reads GPU 0 only when several GPUs are
//! listed (all GPUs of one model print the same table). Compute-instance profiles
//! (`Nc.Mg.Xgb`) are skipped. Guarantee: never panics, whatever the text (a property test feeds
//! arbitrary strings); the result passes [`super::check_model`] or is an error.
//!
//! What the output does not say and is derived: a profile's compute slices are the `g` count of
//! its name, its memory slices the placement size; the GPU's compute and memory slices are the
//! largest of those. The whole GPU's SM count is not printed by `-lgip`: the largest profile's SM
//! count is used unless `--sms` is given (on A100 the 7g instance has 98 of 108 SMs).

use crate::diagnostics::{Diagnostic, Diagnostics, FileId, Sources, Span, codes};

use super::{GpuModel, MigGeometry, MigProfile, Trust, check_model, is_profile_name, name_attributes};

/// Facts about the device that `-lgip` does not print; flags win over `nvidia-smi -q`.
#[derive(Clone, Debug, Default)]
pub struct DeviceInfo {
    /// Stable catalog id; derived from the name when absent.
    pub id: Option<String>,
    /// Product name as `nvidia-smi` prints it, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: Option<String>,
    /// Total memory in MiB.
    pub memory_mib: Option<u64>,
    /// PCI device id, `0xDDDD10DE`.
    pub pci_id: Option<String>,
    /// SMs of the whole GPU.
    pub sms: Option<u32>,
}

/// One profile row of `-lgip`.
#[derive(Clone, Debug, PartialEq)]
pub struct LgipRow {
    pub gpu: u32,
    pub name: String,
    pub id: u32,
    pub total: u8,
    pub memory_gib: f64,
    pub sms: u32,
    /// Byte offset of the row in its text, for diagnostics.
    pub offset: usize,
}

/// One `-lgipp` line: profile id, allowed starts, size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placements {
    pub gpu: u32,
    pub id: u32,
    pub starts: Vec<u8>,
    pub size: u8,
}

fn lines_with_offsets(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    text.split_inclusive('\n').map(move |line| {
        let start = offset;
        offset += line.len();
        (start, line.trim_end_matches(['\n', '\r']))
    })
}

fn problem(file: FileId, offset: usize, len: usize, message: String, help: &str) -> Diagnostic {
    Diagnostic::error(codes::NVIDIA_SMI_PARSE, message)
        .at(Span::new(file, offset..offset + len), "here")
        .with_help(help)
}

/// Reads the profile rows of `nvidia-smi mig -lgip`. Header, border and second (`CE JPEG/OFA`)
/// lines are skipped; a line that starts like a profile row but cannot be read is an error.
pub fn parse_lgip(file: FileId, text: &str) -> Result<Vec<LgipRow>, Diagnostics> {
    let mut rows = Vec::new();
    let mut diagnostics = Diagnostics::new();
    for (offset, line) in lines_with_offsets(text) {
        let cells: Vec<&str> =
            line.split(|c: char| c.is_whitespace() || c == '|').filter(|t| !t.is_empty()).collect();
        // A profile row is: GPU index, optional `MIG`, a profile name, then numbers.
        let mut tokens = cells.as_slice();
        let Some((gpu, rest)) = tokens.split_first() else { continue };
        let Ok(gpu) = gpu.parse::<u32>() else { continue };
        tokens = rest;
        if tokens.first().is_some_and(|t| t.eq_ignore_ascii_case("MIG")) {
            tokens = &tokens[1..];
        }
        let Some((name, rest)) = tokens.split_first() else { continue };
        if name.chars().all(|c| c.is_ascii_digit()) {
            // The continuation line (`CE JPEG OFA`) starts with numbers only.
            continue;
        }
        let help = "expected `GPU MIG <name> <id> <free>/<total> <GiB> <P2P> <SM> <DEC> <ENC>`";
        let len = line.len();
        if name.split_once("g.").is_some_and(|(c, _)| c.contains('c')) {
            continue; // compute-instance profile: not a GPU-instance shape
        }
        if !is_profile_name(name) {
            diagnostics.push(problem(file, offset, len, format!("`{name}` is not a MIG profile name"), help));
            continue;
        }
        let parsed = (|| {
            let id = rest.first()?.parse::<u32>().ok()?;
            let (_, total) = rest.get(1)?.split_once('/')?;
            let total = total.parse::<u8>().ok()?;
            let memory_gib = rest.get(2)?.parse::<f64>().ok().filter(|g| g.is_finite() && *g >= 0.0)?;
            let sms = rest.get(4)?.parse::<u32>().ok()?;
            Some((id, total, memory_gib, sms))
        })();
        match parsed {
            Some((id, total, memory_gib, sms)) => {
                rows.push(LgipRow { gpu, name: (*name).to_owned(), id, total, memory_gib, sms, offset })
            }
            None => {
                diagnostics.push(problem(file, offset, len, format!("cannot read the row of `{name}`"), help))
            }
        }
    }
    if rows.is_empty() && diagnostics.is_empty() {
        diagnostics.push(problem(
            file,
            0,
            0,
            "no GPU-instance profile rows found".to_owned(),
            "pass the output of `nvidia-smi mig -lgip` on a GPU with MIG mode enabled",
        ));
    }
    if diagnostics.is_empty() { Ok(rows) } else { Err(diagnostics) }
}

/// Reads `nvidia-smi mig -lgipp` lines such as `GPU  0 Profile ID 19 Placements: {0,1,2}:1`.
pub fn parse_lgipp(file: FileId, text: &str) -> Result<Vec<Placements>, Diagnostics> {
    let mut out = Vec::new();
    let mut diagnostics = Diagnostics::new();
    let help = "expected `GPU <n> Profile ID <id> Placements: {<start>,...}:<size>`";
    for (offset, line) in lines_with_offsets(text) {
        let trimmed = line.trim();
        if trimmed.is_empty() || !trimmed.to_ascii_lowercase().contains("placements") {
            continue;
        }
        let parsed = (|| {
            let compact: String = trimmed.chars().filter(|c| !c.is_whitespace()).collect();
            let lower = compact.to_ascii_lowercase();
            let rest = lower.strip_prefix("gpu")?;
            let (gpu, rest) = rest.split_once("profileid")?;
            let gpu = gpu.parse::<u32>().ok()?;
            let (id, rest) = rest.split_once("placements:")?;
            let id = id.parse::<u32>().ok()?;
            let inner = rest.strip_prefix('{')?;
            let (list, size) = inner.split_once("}:")?;
            let size = size.parse::<u8>().ok().filter(|&s| s > 0)?;
            let starts = list
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.parse::<u8>().ok())
                .collect::<Option<Vec<u8>>>()?;
            (!starts.is_empty()).then_some(Placements { gpu, id, starts, size })
        })();
        match parsed {
            Some(p) => out.push(p),
            None => diagnostics.push(problem(
                file,
                offset,
                line.len(),
                "cannot read this placement line".to_owned(),
                help,
            )),
        }
    }
    if out.is_empty() && diagnostics.is_empty() {
        diagnostics.push(problem(
            file,
            0,
            0,
            "no placement lines found".to_owned(),
            "pass the output of `nvidia-smi mig -lgipp`",
        ));
    }
    if diagnostics.is_empty() { Ok(out) } else { Err(diagnostics) }
}

/// Reads product name, total memory and PCI device id from `nvidia-smi -q` (first GPU).
pub fn parse_query(text: &str) -> DeviceInfo {
    let mut info = DeviceInfo::default();
    let mut in_fb_memory = false;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            let heading = line.trim();
            if !heading.is_empty() {
                in_fb_memory = heading.eq_ignore_ascii_case("FB Memory Usage");
            }
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if value.is_empty() {
            in_fb_memory = key.eq_ignore_ascii_case("FB Memory Usage");
            continue;
        }
        if key.eq_ignore_ascii_case("Product Name") && info.name.is_none() {
            info.name = Some(value.to_owned());
        } else if key.eq_ignore_ascii_case("Device Id") && info.pci_id.is_none() {
            info.pci_id = Some(value.to_owned());
        } else if in_fb_memory && key.eq_ignore_ascii_case("Total") && info.memory_mib.is_none() {
            info.memory_mib = value.split_whitespace().next().and_then(|n| n.parse().ok());
        }
    }
    info
}

/// A catalog id derived from a product name: `NVIDIA H100 80GB HBM3` → `H100-80GB-HBM3`.
pub fn id_from_name(name: &str) -> String {
    let name = name.trim();
    let name = name.strip_prefix("NVIDIA ").unwrap_or(name);
    name.split_whitespace().collect::<Vec<_>>().join("-").to_ascii_uppercase()
}

/// The `nvidia.com/gpu.product` label GPU Feature Discovery derives from a product name.
pub fn product_label(name: &str) -> String {
    name.trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Builds a catalog entry. `lgip_name` / `lgipp_name` are shown in diagnostics.
pub fn import(
    sources: &mut Sources,
    (lgip_name, lgip): (&str, &str),
    (lgipp_name, lgipp): (&str, &str),
    info: &DeviceInfo,
) -> Result<GpuModel, Diagnostics> {
    let lgip_file = sources.add(lgip_name, lgip);
    let lgipp_file = sources.add(lgipp_name, lgipp);
    let rows = parse_lgip(lgip_file, lgip);
    let placements = parse_lgipp(lgipp_file, lgipp);
    let (rows, placements) = match (rows, placements) {
        (Ok(r), Ok(p)) => (r, p),
        (r, p) => {
            let mut all = Diagnostics::new();
            if let Err(d) = r {
                all.extend(d);
            }
            if let Err(d) = p {
                all.extend(d);
            }
            return Err(all);
        }
    };
    let mut diagnostics = Diagnostics::new();
    let first_gpu = rows.iter().map(|r| r.gpu).min().unwrap_or(0);
    let mut profiles: Vec<MigProfile> = Vec::new();
    for row in rows.iter().filter(|r| r.gpu == first_gpu) {
        if profiles.iter().any(|p| p.name == row.name) {
            continue;
        }
        let Some(place) = placements.iter().find(|p| p.gpu == first_gpu && p.id == row.id) else {
            diagnostics.push(problem(
                lgip_file,
                row.offset,
                0,
                format!("no placements for profile `{}` (id {})", row.name, row.id),
                "pass `nvidia-smi mig -lgipp` output from the same GPU",
            ));
            continue;
        };
        let compute = row.name.split_once('g').and_then(|(g, _)| g.parse::<u8>().ok()).unwrap_or(0);
        let memory_mib = (row.memory_gib * 1024.0).round();
        profiles.push(MigProfile {
            name: row.name.clone(),
            id: row.id,
            compute_slices: compute,
            memory_slices: place.size,
            memory_mib: if (0.0..1e15).contains(&memory_mib) { memory_mib as u64 } else { 0 },
            sms: row.sms,
            max_count: row.total,
            starts: place.starts.clone(),
            size: place.size,
            attributes: name_attributes(&row.name),
            trust: Trust::Driver,
            source: "imported from nvidia-smi mig -lgip / -lgipp".to_owned(),
        });
    }
    let Some(name) = info.name.clone() else {
        diagnostics.push(problem(
            lgip_file,
            0,
            0,
            "the GPU name is unknown".to_owned(),
            "pass `--query` with `nvidia-smi -q` output or `--name`",
        ));
        return Err(diagnostics);
    };
    if !diagnostics.is_empty() {
        return Err(diagnostics);
    }
    let compute_slices = profiles.iter().map(|p| p.compute_slices).max().unwrap_or(0);
    let memory_slices = profiles
        .iter()
        .flat_map(|p| p.starts.iter().map(move |&s| s.saturating_add(p.size)))
        .max()
        .unwrap_or(0);
    let largest_memory = profiles.iter().map(|p| p.memory_mib).max().unwrap_or(0);
    let sms = info.sms.unwrap_or_else(|| profiles.iter().map(|p| p.sms).max().unwrap_or(0));
    let gpu = GpuModel {
        id: info.id.clone().unwrap_or_else(|| id_from_name(&name)),
        aliases: vec![product_label(&name)],
        product_labels: vec![product_label(&name)],
        pci_ids: info
            .pci_id
            .iter()
            .filter_map(|id| super::normalize_pci_id(id).or(Some(id.clone())))
            .collect(),
        memory_mib: info.memory_mib.unwrap_or(largest_memory),
        sms,
        trust: if info.memory_mib.is_some() && info.sms.is_some() { Trust::Driver } else { Trust::Inferred },
        source: "imported from nvidia-smi output".to_owned(),
        name,
        mig: Some(MigGeometry { compute_slices, memory_slices, profiles }),
    };
    let problems = check_model(&gpu);
    if problems.is_empty() {
        Ok(gpu)
    } else {
        Err(problems
            .into_iter()
            .map(|m| {
                problem(
                    lgip_file,
                    0,
                    0,
                    m,
                    "check that `-lgip` and `-lgipp` come from the same GPU and driver",
                )
            })
            .collect())
    }
}
