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
    /// Driver version the output was printed by (`nvidia-smi -q`, or `--driver`).
    pub driver: Option<String>,
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

/// What a parser read, or its problems; output with nothing to read is a problem too (`nothing`).
fn read_or_problems<T>(
    file: FileId,
    read: Vec<T>,
    mut diagnostics: Diagnostics,
    nothing: &str,
    help: &str,
) -> Result<Vec<T>, Diagnostics> {
    if read.is_empty() && diagnostics.is_empty() {
        diagnostics.push(problem(file, 0, 0, nothing.to_owned(), help));
    }
    if diagnostics.is_empty() { Ok(read) } else { Err(diagnostics) }
}

/// What one line of `-lgip` output is.
enum LgipLine<'a> {
    /// Blank, a border (`+---+`, `|===|`) or a header of the table.
    Furniture,
    /// The second line of a profile (`CE JPEG OFA` counts): numbers only.
    Continuation,
    /// A profile row: GPU index, profile name, the remaining cells.
    Row(u32, &'a str, Vec<&'a str>),
    /// Anything else.
    Unknown,
}

const LGIP_HEADER_WORDS: &[&str] = &[
    "gpu",
    "instance",
    "profiles:",
    "name",
    "id",
    "instances",
    "memory",
    "p2p",
    "sm",
    "dec",
    "enc",
    "free/total",
    "gib",
    "ce",
    "jpeg",
    "ofa",
];

fn classify_lgip(line: &str) -> LgipLine<'_> {
    let cells: Vec<&str> =
        line.split(|c: char| c.is_whitespace() || c == '|').filter(|t| !t.is_empty()).collect();
    if cells.is_empty() || cells.iter().all(|c| c.chars().all(|ch| matches!(ch, '+' | '-' | '=' | '|'))) {
        return LgipLine::Furniture;
    }
    if cells.iter().all(|c| LGIP_HEADER_WORDS.contains(&c.to_ascii_lowercase().as_str())) {
        return LgipLine::Furniture;
    }
    if cells.iter().all(|c| c.parse::<u32>().is_ok() || c.eq_ignore_ascii_case("N/A")) && cells.len() <= 4 {
        return LgipLine::Continuation;
    }
    let Some((gpu, rest)) = cells.split_first() else { return LgipLine::Unknown };
    let Ok(gpu) = gpu.parse::<u32>() else { return LgipLine::Unknown };
    let rest = match rest.split_first() {
        Some((mig, rest)) if mig.eq_ignore_ascii_case("MIG") => rest,
        _ => rest,
    };
    match rest.split_first() {
        Some((name, rest)) => LgipLine::Row(gpu, name, rest.to_vec()),
        None => LgipLine::Unknown,
    }
}

/// Reads the profile rows of `nvidia-smi mig -lgip`. Borders, headers and the second line of each
/// profile (`CE JPEG OFA`) are recognised; every other line that is not a readable profile row is
/// an error, never skipped.
pub fn parse_lgip(file: FileId, text: &str) -> Result<Vec<LgipRow>, Diagnostics> {
    let mut rows = Vec::new();
    let mut diagnostics = Diagnostics::new();
    let help = "expected `GPU MIG <name> <id> <free>/<total> <GiB> <P2P> <SM> <DEC> <ENC>`";
    for (offset, line) in lines_with_offsets(text) {
        let len = line.len();
        let (gpu, name, rest) = match classify_lgip(line) {
            LgipLine::Furniture | LgipLine::Continuation => continue,
            LgipLine::Unknown if line.trim().to_ascii_lowercase().starts_with("no mig") => {
                diagnostics.push(problem(
                    file,
                    offset,
                    len,
                    format!("no GPU-instance profile rows found: nvidia-smi says `{}`", line.trim()),
                    "enable MIG mode (`nvidia-smi -i 0 -mig 1`) and run `nvidia-smi mig -lgip` again",
                ));
                continue;
            }
            LgipLine::Unknown => {
                diagnostics.push(problem(
                    file,
                    offset,
                    len,
                    "this line is not part of `nvidia-smi mig -lgip` output".to_owned(),
                    "pass the unedited output of `nvidia-smi mig -lgip` on a GPU with MIG mode enabled",
                ));
                continue;
            }
            LgipLine::Row(gpu, name, rest) => (gpu, name, rest),
        };
        if name.split_once("g.").is_some_and(|(c, _)| c.contains('c')) {
            diagnostics.push(problem(
                file,
                offset,
                len,
                format!("`{name}` is a compute-instance profile, not a GPU-instance profile"),
                "pass `nvidia-smi mig -lgip` (GPU-instance profiles), not `-lcip`",
            ));
            continue;
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
                rows.push(LgipRow { gpu, name: name.to_owned(), id, total, memory_gib, sms, offset })
            }
            None => {
                diagnostics.push(problem(file, offset, len, format!("cannot read the row of `{name}`"), help))
            }
        }
    }
    read_or_problems(
        file,
        rows,
        diagnostics,
        "no GPU-instance profile rows found",
        "pass the output of `nvidia-smi mig -lgip` on a GPU with MIG mode enabled",
    )
}

/// Reads one `-lgipp` line. The driver prints `Placements: {0,1,2}:1` for several placements and
/// `Placement : {0}:4` (singular, a space before the colon) for one; spacing varies.
fn parse_placement_line(line: &str) -> Option<Placements> {
    let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    let lower = compact.to_ascii_lowercase();
    let rest = lower.strip_prefix("gpu")?;
    let (gpu, rest) = rest.split_once("profileid")?;
    let gpu = gpu.parse::<u32>().ok()?;
    let (id, rest) = rest.split_once("placement")?;
    let id = id.parse::<u32>().ok()?;
    let rest = rest.strip_prefix('s').unwrap_or(rest);
    let rest = rest.strip_prefix(':')?;
    let inner = rest.strip_prefix('{')?;
    let (list, size) = inner.split_once("}:")?;
    let size = size.parse::<u8>().ok().filter(|&s| s > 0)?;
    let starts = list.split(',').map(|s| s.parse::<u8>().ok()).collect::<Option<Vec<u8>>>()?;
    (!starts.is_empty()).then_some(Placements { gpu, id, starts, size })
}

/// Reads `nvidia-smi mig -lgipp` output: one placement line per profile and GPU. Blank lines are
/// allowed; every other line that is not a placement line is an error, never skipped.
pub fn parse_lgipp(file: FileId, text: &str) -> Result<Vec<Placements>, Diagnostics> {
    let mut out = Vec::new();
    let mut diagnostics = Diagnostics::new();
    let help = "expected `GPU <n> Profile ID <id> Placements: {<start>,...}:<size>` (or `Placement : {<start>}:<size>`)";
    for (offset, line) in lines_with_offsets(text) {
        if line.trim().is_empty() {
            continue;
        }
        match parse_placement_line(line) {
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
    read_or_problems(
        file,
        out,
        diagnostics,
        "no placement lines found",
        "pass the output of `nvidia-smi mig -lgipp`",
    )
}

/// Reads product name, total memory, PCI device id and driver version of the first GPU from
/// `nvidia-smi -q`, as text or as XML (`nvidia-smi -q -x`, recognised by its `<` start). What is
/// absent stays `None`; [`import`] refuses to guess the total memory.
pub fn parse_query(file: FileId, text: &str) -> Result<DeviceInfo, Diagnostics> {
    if text.trim_start().starts_with('<') { parse_query_xml(file, text) } else { Ok(parse_query_text(text)) }
}

fn parse_query_text(text: &str) -> DeviceInfo {
    let mut info = DeviceInfo::default();
    let mut section = String::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            let heading = line.trim();
            if !heading.is_empty() {
                section = heading.to_ascii_lowercase();
            }
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if value.is_empty() {
            section = key.to_ascii_lowercase();
            continue;
        }
        if key.eq_ignore_ascii_case("Driver Version") && info.driver.is_none() {
            info.driver = Some(value.to_owned());
        } else if key.eq_ignore_ascii_case("Product Name") && info.name.is_none() {
            info.name = Some(value.to_owned());
        } else if key.eq_ignore_ascii_case("Device Id") && info.pci_id.is_none() {
            info.pci_id = Some(value.to_owned());
        } else if section == "fb memory usage"
            && key.eq_ignore_ascii_case("Total")
            && info.memory_mib.is_none()
        {
            info.memory_mib = parse_mib(value);
        }
    }
    info
}

/// `143771 MiB` → 143771.
fn parse_mib(value: &str) -> Option<u64> {
    let mut words = value.split_whitespace();
    let n = words.next()?.parse().ok()?;
    words.next().is_none_or(|u| u.eq_ignore_ascii_case("MiB")).then_some(n)
}

fn child<'a, 'input>(node: roxmltree::Node<'a, 'input>, name: &str) -> Option<roxmltree::Node<'a, 'input>> {
    node.children().find(|n| n.has_tag_name(name))
}

fn text_of(node: Option<roxmltree::Node<'_, '_>>) -> Option<String> {
    node.and_then(|n| n.text()).map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned)
}

fn parse_query_xml(file: FileId, text: &str) -> Result<DeviceInfo, Diagnostics> {
    // nvidia-smi prints a DOCTYPE line (`nvsmi_device_v12.dtd`); its entities are not needed.
    let options = roxmltree::ParsingOptions { allow_dtd: true, ..roxmltree::ParsingOptions::default() };
    let doc = match roxmltree::Document::parse_with_options(text, options) {
        Ok(doc) => doc,
        Err(err) => {
            return Err(Diagnostics::from_iter([problem(
                file,
                0,
                0,
                format!("not readable as `nvidia-smi -q -x` XML: {err}"),
                "pass the unedited output of `nvidia-smi -q -x`",
            )]));
        }
    };
    let root = doc.root_element();
    let mut info = DeviceInfo { driver: text_of(child(root, "driver_version")), ..DeviceInfo::default() };
    if let Some(gpu) = child(root, "gpu") {
        info.name = text_of(child(gpu, "product_name"));
        // The XML prints the device id without `0x` (`233510DE`); the text output with it.
        info.pci_id = text_of(child(gpu, "pci").and_then(|p| child(p, "pci_device_id")))
            .map(|id| if id.starts_with("0x") || id.starts_with("0X") { id } else { format!("0x{id}") });
        info.memory_mib = text_of(child(gpu, "fb_memory_usage").and_then(|m| child(m, "total")))
            .and_then(|t| parse_mib(&t));
    }
    Ok(info)
}

fn driver_note(info: &DeviceInfo) -> String {
    info.driver.as_ref().map_or_else(String::new, |d| format!(", driver {d}"))
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
    query_file: Option<FileId>,
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
    let profiles = profiles_of(&rows, &placements, lgip_file, info, &mut diagnostics);
    let Some(memory_mib) = info.memory_mib else {
        diagnostics.push(problem(
            query_file.unwrap_or(lgip_file),
            0,
            0,
            "the GPU's total memory is unknown: no `FB Memory Usage` total (`<fb_memory_usage><total>` in XML)".to_owned(),
            "pass the complete output of `nvidia-smi -q` or `nvidia-smi -q -x` with `--query`, or give `--memory-mib`",
        ));
        return Err(diagnostics);
    };
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
    let gpu = entry(info, name, memory_mib, profiles);
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

/// The MIG profiles of the first GPU in the `-lgip` rows, with their placements from `-lgipp`;
/// a profile without placements is a diagnostic.
fn profiles_of(
    rows: &[LgipRow],
    placements: &[Placements],
    lgip_file: FileId,
    info: &DeviceInfo,
    diagnostics: &mut Diagnostics,
) -> Vec<MigProfile> {
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
            source: format!("nvidia-smi mig -lgip / -lgipp{}", driver_note(info)),
            driver: info.driver.clone(),
        });
    }
    profiles
}

/// The catalog entry of an imported GPU: its geometry from the profiles, its identity and
/// memory from `nvidia-smi -q` (or the flags).
fn entry(info: &DeviceInfo, name: String, memory_mib: u64, profiles: Vec<MigProfile>) -> GpuModel {
    let compute_slices = profiles.iter().map(|p| p.compute_slices).max().unwrap_or(0);
    let memory_slices = profiles
        .iter()
        .flat_map(|p| p.starts.iter().map(move |&s| s.saturating_add(p.size)))
        .max()
        .unwrap_or(0);
    let sms = info.sms.unwrap_or_else(|| profiles.iter().map(|p| p.sms).max().unwrap_or(0));
    GpuModel {
        id: info.id.clone().unwrap_or_else(|| id_from_name(&name)),
        aliases: vec![product_label(&name)],
        product_labels: vec![product_label(&name)],
        pci_ids: info
            .pci_id
            .iter()
            .filter_map(|id| super::normalize_pci_id(id).or(Some(id.clone())))
            .collect(),
        memory_mib,
        sms,
        trust: if info.sms.is_some() { Trust::Driver } else { Trust::Inferred },
        source: format!(
            "memory: nvidia-smi -q{}; SMs: {}",
            driver_note(info),
            if info.sms.is_some() { "given" } else { "the largest profile's SMs (inferred)" }
        ),
        driver: info.driver.clone(),
        name,
        // The driver does not print datasheet figures; a merge keeps the existing entry's.
        throughput: None,
        mig: Some(MigGeometry { compute_slices, memory_slices, profiles }),
    }
}

/// Where an imported GPU goes in an existing catalog.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// No entry has this GPU: a new entry with the imported id.
    New,
    /// The entry with this id is this GPU (same id, or same PCI id and no `--id`): merge into it.
    Merge(String),
}

/// Decides where `imported` goes. `explicit_id`: the id the user asked for (`--id`). Refuses (the
/// message says why and what to do) when the import would shadow another entry's id, alias or
/// product label, or when its PCI id matches several entries, or an entry other than `--id`.
pub fn target(
    catalog: &super::Catalog,
    imported: &GpuModel,
    explicit_id: Option<&str>,
) -> Result<Target, String> {
    let by_pci: Vec<&GpuModel> =
        catalog.iter().filter(|g| imported.pci_ids.iter().any(|p| g.matches_pci_id(p))).collect();
    if let Some(id) = explicit_id {
        if let Some(existing) = catalog.get(id) {
            if !by_pci.is_empty() && !by_pci.iter().any(|g| g.id == existing.id) {
                return Err(format!(
                    "`{id}` is `{}`, but the imported GPU's PCI id {} belongs to `{}`; import with `--id {}` to merge into it",
                    existing.id,
                    imported.pci_ids.join(", "),
                    by_pci.iter().map(|g| g.id.as_str()).collect::<Vec<_>>().join("`, `"),
                    by_pci[0].id
                ));
            }
            return Ok(Target::Merge(existing.id.clone()));
        }
    } else if let [one] = by_pci.as_slice() {
        return Ok(Target::Merge(one.id.clone()));
    } else if by_pci.len() > 1 {
        return Err(format!(
            "the imported GPU's PCI id {} matches `{}`; choose one with `--id`",
            imported.pci_ids.join(", "),
            by_pci.iter().map(|g| g.id.as_str()).collect::<Vec<_>>().join("`, `")
        ));
    } else {
        // No PCI id to go by: the same product name, label or id is the same GPU.
        let mut same: Vec<&str> = std::iter::once(&imported.id)
            .chain(&imported.product_labels)
            .chain(std::iter::once(&imported.name))
            .filter_map(|n| {
                catalog.get(n).or_else(|| catalog.iter().find(|g| g.name.eq_ignore_ascii_case(n)))
            })
            .map(|g| g.id.as_str())
            .collect();
        same.sort_unstable();
        same.dedup();
        match same.as_slice() {
            [] => {}
            [one] => return Ok(Target::Merge((*one).to_owned())),
            many => {
                return Err(format!(
                    "the imported GPU's names match `{}`; choose one with `--id`",
                    many.join("`, `")
                ));
            }
        }
    }
    // A new entry: none of its names may already name another GPU.
    let names = std::iter::once(&imported.id).chain(&imported.aliases).chain(&imported.product_labels);
    for name in names {
        if let Some(other) = catalog.get(name) {
            return Err(format!(
                "`{name}` already names `{}` in the catalog; import with `--id {}` to merge into it, or give a new `--id` and remove `{name}` from the new entry's aliases",
                other.id, other.id
            ));
        }
    }
    Ok(Target::New)
}

/// Merges an import into the existing entry: the entry keeps its id, aliases, product labels and
/// notes (its former `source` is kept after the new one); PCI ids are united; the profile table,
/// total memory and driver version are the driver's. The SM count is kept unless the import was
/// given one (`-lgip` does not print the whole GPU's SMs). Returns the merged entry and the
/// names of profiles the catalog had but this driver does not print (dropped).
pub fn merge(existing: &GpuModel, imported: GpuModel) -> (GpuModel, Vec<String>) {
    let mut merged = existing.clone();
    for id in &imported.pci_ids {
        if !merged.pci_ids.iter().any(|p| p.eq_ignore_ascii_case(id)) {
            merged.pci_ids.push(id.clone());
        }
    }
    for label in &imported.product_labels {
        if !merged.product_labels.iter().any(|p| p.eq_ignore_ascii_case(label))
            && !merged.aliases.iter().any(|a| a.eq_ignore_ascii_case(label))
        {
            merged.aliases.push(label.clone());
        }
    }
    merged.memory_mib = imported.memory_mib;
    merged.driver = imported.driver.clone();
    if imported.trust == Trust::Driver {
        merged.sms = imported.sms;
    }
    let earlier = existing.source.split(" | before import: ").next().unwrap_or_default();
    merged.source = if earlier.is_empty() || earlier == imported.source {
        imported.source.clone()
    } else {
        format!("{} | before import: {earlier}", imported.source)
    };
    if imported.trust == Trust::Driver {
        merged.trust = Trust::Driver;
    }
    let dropped =
        existing.profile_names().filter(|n| imported.profile(n).is_none()).map(str::to_owned).collect();
    merged.mig = imported.mig;
    (merged, dropped)
}
