//! The GPU catalog: what every GPU model offers, as data.
//!
//! In: the YAML files under the top-level `catalog/` folder (embedded in the binary, [`BUILTIN`])
//! and, optionally, the user's own files as (name, text) pairs ([`Catalog::load`]). Out: a
//! [`Catalog`] keyed by stable GPU id, plus diagnostics for files that do not parse or break a
//! rule. The catalog is the only place that knows profile names, NVML memory sizes and placement
//! rules; [`layout`] decides whether a multiset of MIG profiles fits on a GPU, with the exact
//! placement of every instance; [`import`] turns `nvidia-smi` output into a new entry and
//! [`migparted`] lints mig-parted config files against the catalog.
//!
//! Guarantee: every GPU in a loaded catalog passed [`check_model`]: profile names are unique,
//! every instance fits inside the slice grid at every allowed start, maximum counts are at least
//! one, and slice counts are small enough (at most 32) for the exhaustive layout search to stay
//! fast. The loader does no IO; `cli::common::load_catalog_checked` reads the folders.

pub mod import;
pub mod layout;
pub mod migparted;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::diagnostics::{Diagnostic, Diagnostics, FileId, Sources, Span, codes};

/// Every GPU model gpuplan knows, by stable id.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    gpus: BTreeMap<String, GpuModel>,
}

/// How far a catalog value can be trusted, from best to worst.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trust {
    /// Copied from real `nvidia-smi` / NVML output.
    Driver,
    /// Taken from NVIDIA's shipped configuration (names and counts) or documentation.
    NvidiaConfig,
    /// Derived by gpuplan's authors from related data; replace with `catalog import` output.
    #[default]
    Inferred,
}

/// One GPU model (a product such as the A100-SXM4-80GB).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuModel {
    /// Stable id used in manifests, e.g. `A100-SXM4-80GB`.
    pub id: String,
    /// Marketing name as `nvidia-smi` prints it, e.g. `NVIDIA A100-SXM4-80GB`.
    pub name: String,
    /// Other names users may write; matched case-insensitively.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Values of the `nvidia.com/gpu.product` node label for this model.
    #[serde(default)]
    pub product_labels: Vec<String>,
    /// PCI device ids as mig-parted writes them, `0xDDDD10DE`.
    #[serde(default)]
    pub pci_ids: Vec<String>,
    /// Total device memory in MiB as NVML reports it.
    pub memory_mib: u64,
    /// Streaming multiprocessors of the whole GPU.
    pub sms: u32,
    /// How far `memoryMib` and `sms` can be trusted.
    #[serde(default)]
    pub trust: Trust,
    /// Where `memoryMib` and `sms` come from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// Driver version `memoryMib` was read from, when known (memory sizes change between drivers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// Datasheet throughput figures, used to move a latency baseline measured on another GPU to
    /// this one (`plan::latency::scale_baseline_ms`); absent when the catalog has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<Throughput>,
    /// MIG geometry; absent for GPUs without MIG.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<MigGeometry>,
}

/// A GPU's peak figures as its vendor's datasheet states them (not measured by gpuplan).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Throughput {
    /// Peak memory bandwidth, GB/s.
    pub memory_bandwidth_gbps: f64,
    /// Peak dense FP16 Tensor Core throughput, TFLOPS (the datasheet's "with sparsity" figure
    /// halved where it only prints that one).
    pub fp16_dense_tflops: f64,
    /// The public document the two figures come from.
    pub source: String,
}

/// How a MIG-capable GPU is cut.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MigGeometry {
    pub compute_slices: u8,
    pub memory_slices: u8,
    pub profiles: Vec<MigProfile>,
}

/// One GPU-instance profile, exactly as NVML describes it on this GPU model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MigProfile {
    /// Name exactly as NVML prints it, e.g. `1g.10gb+me`.
    pub name: String,
    /// Profile id as `nvidia-smi mig -lgip` prints it.
    pub id: u32,
    pub compute_slices: u8,
    pub memory_slices: u8,
    /// Usable memory in MiB as NVML reports it (not the rounded number in the name).
    pub memory_mib: u64,
    pub sms: u32,
    /// Maximum number of instances of this profile on one GPU.
    pub max_count: u8,
    /// Memory-slice indices where an instance may start.
    pub starts: Vec<u8>,
    /// Memory slices one instance occupies from its start.
    pub size: u8,
    /// Media and graphics attributes of the name: `+me`, `-me`, `+me.all`, `+gfx` (derived from
    /// the name when left out of a catalog file).
    #[serde(default)]
    pub attributes: Vec<String>,
    /// How far this row can be trusted.
    #[serde(default)]
    pub trust: Trust,
    /// Where this row comes from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// Driver version this row was read from, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
}

/// The attributes a profile name may carry (go-nvlib's grammar).
pub const ATTRIBUTES: &[&str] = &["+me", "-me", "+me.all", "+gfx"];

/// Upper bound on slice counts, so that layout search stays small.
pub const MAX_SLICES: u8 = 32;

impl GpuModel {
    pub fn is_mig_capable(&self) -> bool {
        self.mig.is_some()
    }

    /// The profile with this exact NVML name, if this GPU has it.
    pub fn profile(&self, name: &str) -> Option<&MigProfile> {
        self.mig.as_ref()?.profiles.iter().find(|p| p.name == name)
    }

    /// The share of this GPU's SMs that an instance of `profile` has (its compute capacity as a
    /// fraction of the whole GPU).
    pub fn sm_share(&self, profile: &MigProfile) -> f64 {
        f64::from(profile.sms) / f64::from(self.sms.max(1))
    }

    /// Profile names of this GPU, in catalog order (empty without MIG).
    pub fn profile_names(&self) -> impl Iterator<Item = &str> {
        self.mig.iter().flat_map(|m| m.profiles.iter().map(|p| p.name.as_str()))
    }

    /// Whether a mig-parted device filter (`0xDDDD10DE`, optionally `:0xSSSSVVVV`) names this GPU.
    pub fn matches_pci_id(&self, filter: &str) -> bool {
        let Some(device) = normalize_pci_id(filter) else { return false };
        self.pci_ids.iter().any(|id| normalize_pci_id(id).as_deref() == Some(device.as_str()))
    }
}

/// The device part of a PCI id (`0x20B210DE`, any case, optional `:subsystem` suffix), upper-cased
/// as `0xDDDDVVVV`; `None` when it is not such an id.
pub fn normalize_pci_id(id: &str) -> Option<String> {
    let device = id.trim().split(':').next()?;
    let hex = device.strip_prefix("0x").or_else(|| device.strip_prefix("0X"))?;
    if hex.len() != 8 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    Some(format!("0x{}", hex.to_ascii_uppercase()))
}

impl MigProfile {
    /// The extended-resource name the device plugin advertises under the `mixed` strategy.
    pub fn resource_name(&self) -> String {
        format!("nvidia.com/mig-{}", self.name.replace('+', "."))
    }

    /// Whether this profile takes media extensions (`+me` or `+me.all`), which a GPU has once.
    pub fn takes_media_extensions(&self) -> bool {
        self.attributes.iter().any(|a| a == "+me" || a == "+me.all")
    }
}

/// The attributes written in a profile name, e.g. `["+me"]` for `1g.10gb+me`.
pub fn name_attributes(name: &str) -> Vec<String> {
    if let Some((_, attrs)) = name.split_once('+') {
        attrs.split(',').map(|a| format!("+{a}")).collect()
    } else if let Some((_, attr)) = name.split_once('-') {
        vec![format!("-{attr}")]
    } else {
        Vec::new()
    }
}

/// Every rule a GPU entry must keep, as messages (empty when the entry is sound).
pub fn check_model(gpu: &GpuModel) -> Vec<String> {
    let mut problems = Vec::new();
    if gpu.id.trim().is_empty() || gpu.id.chars().any(char::is_whitespace) {
        problems.push(format!("GPU id `{}` must be non-empty and without spaces", gpu.id));
    }
    for id in &gpu.pci_ids {
        if normalize_pci_id(id).is_none() {
            problems.push(format!("PCI id `{id}` is not of the form `0xDDDD10DE`"));
        }
    }
    if gpu.memory_mib == 0 {
        problems.push("`memoryMib` must be positive".to_owned());
    }
    if let Some(t) = &gpu.throughput {
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if !positive(t.memory_bandwidth_gbps) || !positive(t.fp16_dense_tflops) {
            problems.push("`throughput` figures must be positive numbers".to_owned());
        }
        if t.source.trim().is_empty() {
            problems
                .push("`throughput.source` must name the public document the figures come from".to_owned());
        }
    }
    let Some(mig) = &gpu.mig else { return problems };
    if mig.compute_slices == 0 || mig.memory_slices == 0 {
        problems.push("`computeSlices` and `memorySlices` must be positive".to_owned());
    }
    if mig.compute_slices > MAX_SLICES || mig.memory_slices > MAX_SLICES {
        problems.push(format!("slice counts above {MAX_SLICES} are not supported"));
    }
    let mut seen = std::collections::BTreeSet::new();
    for p in &mig.profiles {
        let name = &p.name;
        if !seen.insert(name.as_str()) {
            problems.push(format!("profile `{name}` is listed twice"));
        }
        if !is_profile_name(name) {
            problems.push(format!("profile `{name}` is not of the form `<g>g.<gb>gb[+attr|-attr]`"));
        }
        for a in &p.attributes {
            if !ATTRIBUTES.contains(&a.as_str()) {
                problems.push(format!("profile `{name}` has unknown attribute `{a}`"));
            }
        }
        let mut declared = p.attributes.clone();
        declared.sort();
        let mut written = name_attributes(name);
        written.sort();
        if declared != written {
            problems.push(format!("profile `{name}`: `attributes` must list the attributes of its name"));
        }
        if p.size == 0 || p.max_count == 0 || p.compute_slices == 0 {
            problems
                .push(format!("profile `{name}`: `size`, `maxCount` and `computeSlices` must be positive"));
        }
        if p.size != p.memory_slices {
            problems.push(format!("profile `{name}`: `size` must equal `memorySlices`"));
        }
        if p.compute_slices > mig.compute_slices {
            problems.push(format!("profile `{name}` needs more compute slices than the GPU has"));
        }
        if p.starts.is_empty() {
            problems.push(format!("profile `{name}` has no allowed start"));
        }
        for &s in &p.starts {
            if u16::from(s) + u16::from(p.size) > u16::from(mig.memory_slices) {
                problems.push(format!(
                    "profile `{name}` starting at {s} would end past memory slice {}",
                    mig.memory_slices
                ));
            }
        }
        if p.memory_mib > gpu.memory_mib {
            problems.push(format!("profile `{name}` has more memory than the whole GPU"));
        }
        if p.name.starts_with(|c: char| c.is_ascii_digit()) && p.name.contains("c.") {
            problems.push(format!("`{name}` is a compute-instance profile; list GPU-instance profiles only"));
        }
    }
    problems
}

/// Whether `name` follows go-nvlib's GPU-instance profile grammar `<g>g.<gb>gb[+attr[,attr]|-attr]`.
pub fn is_profile_name(name: &str) -> bool {
    let (base, _) = match name.find(['+', '-']) {
        Some(i) => name.split_at(i),
        None => (name, ""),
    };
    let Some((g, gb)) = base.split_once("g.") else { return false };
    let Some(gb) = gb.strip_suffix("gb") else { return false };
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let attrs = name_attributes(name);
    digits(g) && digits(gb) && attrs.iter().all(|a| ATTRIBUTES.contains(&a.as_str()))
}

impl Catalog {
    /// The catalog embedded in the binary. Built-in files are checked by tests, so problems are
    /// not expected here; an entry that fails its checks is left out rather than trusted.
    pub fn builtin() -> Self {
        static BUILT: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
        BUILT
            .get_or_init(|| {
                let mut sources = Sources::new();
                Self::load(&mut sources, &[]).0
            })
            .clone()
    }

    /// Loads the built-in entries, then the user's files (name, YAML text) in the given order.
    /// A user entry with an existing id replaces it (warning `catalog-override`); an id given by two
    /// user files is an error (`catalog-duplicate-id`, the later file loses). Every file is
    /// registered in `sources` so diagnostics carry line and column.
    pub fn load(sources: &mut Sources, user_files: &[(String, String)]) -> (Self, Diagnostics) {
        let mut catalog = Self::default();
        let mut diagnostics = Diagnostics::new();
        for (name, text) in BUILTIN {
            if let Ok(gpu) = parse_entry(sources, &format!("catalog/{name}"), text) {
                catalog.insert(gpu);
            }
        }
        let mut user_ids: BTreeMap<String, (FileId, usize)> = BTreeMap::new();
        for (name, text) in user_files {
            let file = sources.add(name.clone(), text.clone());
            match parse_entry_in(sources, file, text) {
                Err(diags) => diagnostics.extend(diags),
                Ok(gpu) => {
                    let at = span_of(text, &gpu.id);
                    if let Some((other, other_at)) = user_ids.get(&gpu.id) {
                        diagnostics.push(
                            Diagnostic::error(
                                codes::CATALOG_DUPLICATE_ID,
                                format!("GPU id `{}` is defined by two catalog files", gpu.id),
                            )
                            .at(Span::new(file, at.clone()), "defined again here")
                            .with_label(Span::new(*other, *other_at..*other_at), "first defined here")
                            .with_help("give each GPU entry its own id"),
                        );
                        continue;
                    }
                    if catalog.gpus.contains_key(&gpu.id) {
                        diagnostics.push(
                            Diagnostic::warning(
                                codes::CATALOG_OVERRIDE,
                                format!("`{}` replaces the built-in catalog entry", gpu.id),
                            )
                            .at(Span::new(file, at.clone()), "this entry wins")
                            .with_help(
                                "rename the id to add a new GPU instead of replacing the built-in one",
                            ),
                        );
                    }
                    user_ids.insert(gpu.id.clone(), (file, at.start));
                    catalog.insert(gpu);
                }
            }
        }
        (catalog, diagnostics)
    }

    /// Adds or replaces a GPU model; returns the entry it replaced.
    pub fn insert(&mut self, gpu: GpuModel) -> Option<GpuModel> {
        self.gpus.insert(gpu.id.clone(), gpu)
    }

    /// Looks a GPU up by id, alias, product label (`nvidia.com/gpu.product`) or product name as
    /// `nvidia-smi` prints it, compared by [`normalize_gpu_name`]: case, spaces, dashes,
    /// underscores, a leading `NVIDIA` and the spelling of memory sizes (`80G`, `80GB`, `80GiB`)
    /// do not matter. A name that two GPUs share resolves to neither.
    pub fn get(&self, id: &str) -> Option<&GpuModel> {
        if let Some(g) = self.gpus.get(id) {
            return Some(g);
        }
        let wanted = normalize_gpu_name(id);
        if wanted.is_empty() {
            return None;
        }
        let mut found = self.gpus.values().filter(|g| gpu_names(g).any(|n| normalize_gpu_name(n) == wanted));
        match (found.next(), found.next()) {
            (Some(g), None) => Some(g),
            _ => None,
        }
    }

    /// The GPUs a name that does not resolve most likely means, best first (at most five): those
    /// whose names contain every word of it (`H100 SXM` → both H100 SXM5 entries; `H100-80G-SXM`
    /// → `H100-SXM5-80GB`), else the nearest id or alias by edit distance.
    pub fn suggest(&self, name: &str) -> Vec<&str> {
        let words = gpu_name_words(name);
        if !words.is_empty() {
            let mut hits: Vec<(usize, &str)> = self
                .gpus
                .values()
                .filter_map(|g| {
                    gpu_names(g)
                        .map(gpu_name_words)
                        .filter(|have| {
                            words.iter().all(|w| {
                                have.iter().any(|h| h == w || (h.starts_with(w.as_str()) && w.len() >= 3))
                            })
                        })
                        .map(|have| have.len())
                        .min()
                        .map(|extra| (extra, g.id.as_str()))
                })
                .collect();
            hits.sort_unstable();
            if !hits.is_empty() {
                return hits.into_iter().take(5).map(|(_, id)| id).collect();
            }
        }
        let candidates: Vec<(&str, &str)> =
            self.gpus.values().flat_map(|g| gpu_names(g).map(move |n| (n, g.id.as_str()))).collect();
        crate::diagnostics::nearest(name, candidates.iter().map(|(n, _)| *n))
            .and_then(|n| candidates.iter().find(|(c, _)| *c == n).map(|(_, id)| vec![*id]))
            .unwrap_or_default()
    }

    /// The GPUs a mig-parted device filter names (by PCI device id).
    pub fn by_pci_id(&self, filter: &str) -> Vec<&GpuModel> {
        self.gpus.values().filter(|g| g.matches_pci_id(filter)).collect()
    }

    pub fn iter(&self) -> impl Iterator<Item = &GpuModel> {
        self.gpus.values()
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.gpus.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.gpus.len()
    }

    pub fn is_empty(&self) -> bool {
        self.gpus.is_empty()
    }
}

/// Every name a GPU answers to: id, aliases, product labels and product name.
fn gpu_names(g: &GpuModel) -> impl Iterator<Item = &str> {
    std::iter::once(g.id.as_str())
        .chain(g.aliases.iter().map(String::as_str))
        .chain(g.product_labels.iter().map(String::as_str))
        .chain(std::iter::once(g.name.as_str()))
}

/// The words of a GPU name, lowercase: split at spaces, dashes and underscores, without a leading
/// `nvidia`, memory sizes spelt `<n>gb` (`80G`, `80GB`, `80GiB` alike).
pub fn gpu_name_words(name: &str) -> Vec<String> {
    let mut words: Vec<String> = name
        .split(|c: char| c.is_whitespace() || matches!(c, '-' | '_' | '/'))
        .filter(|w| !w.is_empty())
        .map(|w| {
            let w = w.to_ascii_lowercase();
            let digits = w.chars().take_while(char::is_ascii_digit).count();
            match &w[digits..] {
                "g" | "gb" | "gib" if digits > 0 => format!("{}gb", &w[..digits]),
                _ => w,
            }
        })
        .collect();
    if words.first().is_some_and(|w| w == "nvidia") {
        words.remove(0);
    }
    words
}

/// A GPU name reduced for comparison: its [`gpu_name_words`] joined.
pub fn normalize_gpu_name(name: &str) -> String {
    gpu_name_words(name).concat()
}

/// The help line of an unknown-GPU diagnostic, from [`Catalog::suggest`]'s answer.
pub fn suggestion_help(suggestions: &[&str]) -> String {
    match suggestions {
        [] => "`gpuplan catalog list` shows every id; add new hardware with `--catalog DIR`".to_owned(),
        [one] => format!("did you mean `{one}`? `gpuplan catalog list` shows every id"),
        many => format!("did you mean one of `{}`? `gpuplan catalog list` shows every id", many.join("`, `")),
    }
}

/// Parses and checks one catalog file; `name` is shown in diagnostics.
pub fn parse_entry(sources: &mut Sources, name: &str, text: &str) -> Result<GpuModel, Diagnostics> {
    let file = sources.add(name, text);
    parse_entry_in(sources, file, text)
}

fn parse_entry_in(sources: &Sources, file: FileId, text: &str) -> Result<GpuModel, Diagnostics> {
    let options = serde_saphyr::options! {
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
    };
    let mut gpu = match serde_saphyr::from_str_with_options::<GpuModel>(text, options) {
        Ok(gpu) => gpu,
        Err(err) => return Err(Diagnostics::from_iter([serde_diagnostic(sources, file, &err)])),
    };
    // `attributes` may be left out: they follow from the name.
    for p in gpu.mig.iter_mut().flat_map(|m| m.profiles.iter_mut()) {
        if p.attributes.is_empty() {
            p.attributes = name_attributes(&p.name);
        }
    }
    let problems = check_model(&gpu);
    if problems.is_empty() {
        return Ok(gpu);
    }
    Err(problems
        .into_iter()
        .map(|message| {
            let at = first_backticked(&message).map_or(0..0, |n| span_of(text, n));
            Diagnostic::error(codes::CATALOG_INVALID_ENTRY, message)
                .at(Span::new(file, at), "in this entry")
                .with_help("see docs/catalog.md for the rules of a catalog entry")
        })
        .collect())
}

/// Turns a serde-saphyr error into a coded diagnostic at its line and column.
pub(crate) fn serde_diagnostic(sources: &Sources, file: FileId, err: &serde_saphyr::Error) -> Diagnostic {
    let text = sources.get(file).text.clone();
    serde_diagnostic_in(file, err, |o| o, &text)
}

/// [`serde_diagnostic`] for text embedded in `file`: `map` turns offsets in `text` into offsets
/// in the file.
pub(crate) fn serde_diagnostic_in(
    file: FileId,
    err: &serde_saphyr::Error,
    map: impl Fn(usize) -> usize,
    text: &str,
) -> Diagnostic {
    let offset = err.location().map_or(0, |l| {
        offset_of(text, usize::try_from(l.line()).unwrap_or(1), usize::try_from(l.column()).unwrap_or(1))
    });
    let offset = map(offset);
    let message = err.to_string();
    let first = message.lines().next().unwrap_or("invalid YAML").trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    // The position is in the label; drop serde-saphyr's `line N column M: ` prefix.
    let first = match first.split_once(": ") {
        Some((head, rest)) if head.starts_with("line ") && head.contains(" column ") => rest,
        _ => first,
    };
    let code = if first.contains("unknown field") {
        codes::UNKNOWN_FIELD
    } else if first.contains("missing field") {
        codes::MISSING_FIELD
    } else if first.contains("invalid type")
        || (first.starts_with("expected ") && first.contains("scalar"))
        || (first.starts_with("invalid ")
            && !first.contains("invalid value")
            && first.split_whitespace().count() <= 3)
    {
        codes::WRONG_TYPE
    } else if first.contains("invalid value") || first.contains("unknown variant") {
        codes::INVALID_VALUE
    } else {
        codes::SYNTAX
    };
    Diagnostic::error(code, first.to_owned())
        .at(Span::new(file, offset..offset), "here")
        .with_help("see docs/catalog.md and docs/diagnostics.md for the expected structure")
}

/// Byte offset of a 1-based line and column (in characters) in `text`, clamped to the text.
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let mut start = 0;
    for _ in 1..line.max(1) {
        match text.get(start..).and_then(|rest| rest.find('\n')) {
            Some(i) => start += i + 1,
            None => return text.len(),
        }
    }
    let rest = text.get(start..).unwrap_or("");
    let end = rest.find('\n').unwrap_or(rest.len());
    rest[..end].char_indices().nth(column.saturating_sub(1)).map_or(start + end, |(i, _)| start + i)
}

fn first_backticked(message: &str) -> Option<&str> {
    let rest = message.split_once('`')?.1;
    Some(rest.split_once('`')?.0)
}

/// The byte range of the first occurrence of `needle` in `text` (empty range at 0 when absent).
fn span_of(text: &str, needle: &str) -> std::ops::Range<usize> {
    if needle.is_empty() {
        return 0..0;
    }
    text.find(needle).map_or(0..0, |i| i..i + needle.len())
}

/// The embedded catalog files: (file name, text). A test checks that every file in `catalog/` is here.
pub const BUILTIN: &[(&str, &str)] = &[
    ("a100-sxm4-40gb.yaml", include_str!("../../catalog/a100-sxm4-40gb.yaml")),
    ("a100-pcie-40gb.yaml", include_str!("../../catalog/a100-pcie-40gb.yaml")),
    ("a800-sxm4-40gb.yaml", include_str!("../../catalog/a800-sxm4-40gb.yaml")),
    ("a800-pcie-40gb.yaml", include_str!("../../catalog/a800-pcie-40gb.yaml")),
    ("a100-sxm4-80gb.yaml", include_str!("../../catalog/a100-sxm4-80gb.yaml")),
    ("a100-pcie-80gb.yaml", include_str!("../../catalog/a100-pcie-80gb.yaml")),
    ("a800-sxm4-80gb.yaml", include_str!("../../catalog/a800-sxm4-80gb.yaml")),
    ("a800-pcie-80gb.yaml", include_str!("../../catalog/a800-pcie-80gb.yaml")),
    ("a30.yaml", include_str!("../../catalog/a30.yaml")),
    ("h100-sxm5-80gb.yaml", include_str!("../../catalog/h100-sxm5-80gb.yaml")),
    ("h100-pcie-80gb.yaml", include_str!("../../catalog/h100-pcie-80gb.yaml")),
    ("h800-sxm5-80gb.yaml", include_str!("../../catalog/h800-sxm5-80gb.yaml")),
    ("h800-pcie-80gb.yaml", include_str!("../../catalog/h800-pcie-80gb.yaml")),
    ("h100-nvl.yaml", include_str!("../../catalog/h100-nvl.yaml")),
    ("h800-nvl.yaml", include_str!("../../catalog/h800-nvl.yaml")),
    ("h100-sxm5-94gb.yaml", include_str!("../../catalog/h100-sxm5-94gb.yaml")),
    ("h100-96gb.yaml", include_str!("../../catalog/h100-96gb.yaml")),
    ("gh200-96gb.yaml", include_str!("../../catalog/gh200-96gb.yaml")),
    ("pg506-96gb.yaml", include_str!("../../catalog/pg506-96gb.yaml")),
    ("h20.yaml", include_str!("../../catalog/h20.yaml")),
    ("gh200-144gb.yaml", include_str!("../../catalog/gh200-144gb.yaml")),
    ("h200-sxm.yaml", include_str!("../../catalog/h200-sxm.yaml")),
    ("h200-nvl.yaml", include_str!("../../catalog/h200-nvl.yaml")),
    ("b200.yaml", include_str!("../../catalog/b200.yaml")),
    ("gb200.yaml", include_str!("../../catalog/gb200.yaml")),
    ("gb200-189gb.yaml", include_str!("../../catalog/gb200-189gb.yaml")),
    ("b300.yaml", include_str!("../../catalog/b300.yaml")),
    ("gb300.yaml", include_str!("../../catalog/gb300.yaml")),
    ("rtx-pro-6000-server.yaml", include_str!("../../catalog/rtx-pro-6000-server.yaml")),
    ("rtx-pro-6000-workstation.yaml", include_str!("../../catalog/rtx-pro-6000-workstation.yaml")),
    ("rtx-pro-6000-max-q.yaml", include_str!("../../catalog/rtx-pro-6000-max-q.yaml")),
    ("l4.yaml", include_str!("../../catalog/l4.yaml")),
    ("l40.yaml", include_str!("../../catalog/l40.yaml")),
    ("l40s.yaml", include_str!("../../catalog/l40s.yaml")),
    ("a10.yaml", include_str!("../../catalog/a10.yaml")),
    ("a10g.yaml", include_str!("../../catalog/a10g.yaml")),
    ("t4.yaml", include_str!("../../catalog/t4.yaml")),
    ("rtx-6000-ada.yaml", include_str!("../../catalog/rtx-6000-ada.yaml")),
    ("a40.yaml", include_str!("../../catalog/a40.yaml")),
];
