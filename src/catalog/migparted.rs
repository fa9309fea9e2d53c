//! mig-parted config files: a typed model ([`MigPartedConfig`]) and a linter ([`lint`]).
//!
//! In: the text of a mig-parted config (`version: v1`, `mig-configs`), or of a ConfigMap whose
//! `data."config.yaml"` holds one, and the [`Catalog`]. Out: diagnostics with line and column
//! (inside a ConfigMap, positions point into the ConfigMap file when the config is a literal
//! block, `config.yaml: |`; otherwise into the embedded text, shown as its own source).
//!
//! What the linter checks, per config and entry (format: `reference/domain.md` §2.1):
//! - schema: `version` is `v1`, `mig-configs` and every entry list are non-empty, `devices` is
//!   `all` or indices, `device-filter` ids look like `0xDDDD10DE[:0xSSSSVVVV]`, `mig-devices` is
//!   given exactly when MIG is enabled, counts are ≥ 0 and not all zero (first serde error only
//!   for structural problems: unknown keys, wrong types, missing fields);
//! - profile names exist on every GPU the entry targets (by `device-filter`; without a filter, on
//!   at least one catalog GPU, and together on one GPU) — `mig-config-unknown-profile`;
//! - the counts form a valid layout ([`super::layout::validate_counts`]) on every targeted GPU
//!   (without a filter: on every catalog GPU that has all the names) — `mig-config-invalid-layout`;
//! - device filters that match no catalog GPU (warning, the GPU may simply be missing from the
//!   catalog: add it with `--catalog`) — `mig-config-unmatched-filter`;
//! - GPUs that a filtered config silently leaves untouched: catalog GPUs on which the layout of
//!   one of the config's entries is valid but that no entry matches (warning; mig-parted reports
//!   success on them and changes nothing) — `mig-config-untouched-gpu`;
//! - two entries of one config with the same filter and devices (warning; mig-parted applies both
//!   in turn, so the first is overwritten) — `mig-config-duplicate-entry`.
//!
//! Pure: no IO; never panics on any input (a property test feeds arbitrary text).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;

use super::{Catalog, GpuModel, layout, normalize_pci_id};
use crate::diagnostics::{Diagnostic, Diagnostics, FileId, Sources, Span, codes, nearest};

/// Mig-parted's name for "MIG off on every GPU": every custom mig-parted ConfigMap must carry
/// it, and the GPU Operator applies it to nodes without a `nvidia.com/mig.config` label.
pub const ALL_DISABLED: &str = "all-disabled";

/// The entry of a mig-parted config that decides one GPU's layout, given which entries apply
/// to the GPU (its index in `devices`, its PCI id in `device-filter`). mig-parted walks a
/// config's entries in order and applies every one that matches the GPU, each in turn
/// (NVIDIA mig-parted, `cmd/nvidia-mig-parted/assert`), so the GPU ends with the last match.
/// `None`: no entry matches, and mig-parted leaves the GPU as it is.
pub fn deciding_entry<E>(entries: &[E], applies: impl Fn(&E) -> bool) -> Option<&E> {
    entries.iter().rev().find(|e| applies(e))
}

/// The device plugin's config for nodes without a `nvidia.com/device-plugin.config` label (no
/// sharing), named here beside its mig-parted counterpart.
pub const DEFAULT_DEVICE_PLUGIN_CONFIG: &str = "default";

/// A mig-parted v1 config file, as mig-parted and the GPU Operator read it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigPartedConfig {
    /// Always `v1`.
    pub version: String,
    /// Named configs; a node selects one with the `nvidia.com/mig.config` label.
    #[serde(rename = "mig-configs")]
    pub mig_configs: BTreeMap<String, Vec<MigConfigEntry>>,
}

/// One entry of a named config: which GPUs, and what to make of them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct MigConfigEntry {
    /// `all`, or the indices of the GPUs the entry applies to (written first, as NVIDIA's files do).
    pub devices: Devices,
    /// PCI device ids (`0xDDDD10DE`) the entry applies to; every GPU when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_filter: Option<DeviceFilter>,
    pub mig_enabled: bool,
    /// Profile name → count; required when MIG is enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_devices: Option<BTreeMap<String, u32>>,
}

/// `device-filter`: one id or a list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DeviceFilter {
    One(String),
    Many(Vec<String>),
}

impl DeviceFilter {
    pub fn ids(&self) -> Vec<&str> {
        match self {
            Self::One(id) => vec![id.as_str()],
            Self::Many(ids) => ids.iter().map(String::as_str).collect(),
        }
    }
}

/// `devices`: `all` or GPU indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Devices {
    All,
    Indices(Vec<u32>),
}

impl Serialize for Devices {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::All => serializer.serialize_str("all"),
            Self::Indices(i) => i.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Devices {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Word(String),
            List(Vec<u32>),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Word(w) if w == "all" => Ok(Self::All),
            Raw::Word(w) => {
                Err(de::Error::custom(format!("`devices` must be `all` or a list of indices, not `{w}`")))
            }
            Raw::List(l) => Ok(Self::Indices(l)),
        }
    }
}

impl MigPartedConfig {
    /// Parses a mig-parted config (structure only; [`lint`] checks the meaning).
    pub fn parse(text: &str) -> Result<Self, String> {
        serde_saphyr::from_str(text).map_err(|e| e.to_string().lines().next().unwrap_or("invalid").to_owned())
    }

    /// Writes the config as YAML.
    pub fn to_yaml(&self) -> Result<String, String> {
        serde_saphyr::to_string(self).map_err(|e| e.to_string())
    }
}

// --- the spanned model the linter reads --------------------------------------------------------

/// A YAML mapping kept in file order (so diagnostics follow the file and keys keep their spans).
#[derive(Debug)]
struct Ordered<K, V>(Vec<(K, V)>);

impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Deserialize<'de> for Ordered<K, V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V2<K, V>(PhantomData<(K, V)>);
        impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Visitor<'de> for V2<K, V> {
            type Value = Ordered<K, V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry()? {
                    out.push((k, v));
                }
                Ok(Ordered(out))
            }
        }
        deserializer.deserialize_map(V2(PhantomData))
    }
}

/// `mig-devices`: profile name → count, with spans.
type RawDevicesMap = Spanned<Ordered<Spanned<String>, Spanned<i64>>>;
/// `mig-configs`: config name → entries, with spans.
type RawConfigs = Spanned<Ordered<Spanned<String>, Spanned<Vec<Spanned<RawEntry>>>>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    version: Spanned<String>,
    #[serde(rename = "mig-configs")]
    mig_configs: RawConfigs,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawFilter {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawDevices {
    Word(String),
    List(Vec<i64>),
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct RawEntry {
    #[serde(default)]
    device_filter: Option<Spanned<RawFilter>>,
    devices: Spanned<RawDevices>,
    mig_enabled: Spanned<bool>,
    #[serde(default)]
    mig_devices: Option<RawDevicesMap>,
}

// --- linting ----------------------------------------------------------------------------------

/// Maps byte offsets of the linted text to spans in a registered file.
struct Locator {
    file: FileId,
    /// For a config embedded in a ConfigMap block scalar: (start offset of each inner line, the
    /// outer offset it maps to).
    lines: Option<Vec<(usize, usize)>>,
}

impl Locator {
    fn span<T>(&self, s: &Spanned<T>) -> Span {
        let span = s.referenced.span();
        let start = span.byte_offset().and_then(|o| usize::try_from(o).ok()).unwrap_or(0);
        let len = span.byte_len().and_then(|o| usize::try_from(o).ok()).unwrap_or(0);
        let start = self.map(start);
        Span::new(self.file, start..start + len)
    }

    /// From the first key to the last value of a mapping (its own span is only its start).
    fn map_span<V>(&self, m: &Spanned<Ordered<Spanned<String>, Spanned<V>>>) -> Span {
        let (Some((first, _)), Some((_, last))) = (m.value.0.first(), m.value.0.last()) else {
            return self.span(m);
        };
        let (start, end) = (self.span(first), self.span(last));
        Span::new(self.file, start.range.start..end.range.end.max(start.range.start))
    }

    fn map(&self, offset: usize) -> usize {
        let Some(lines) = &self.lines else { return offset };
        let i = lines.partition_point(|&(inner, _)| inner <= offset).saturating_sub(1);
        lines.get(i).map_or(offset, |&(inner, outer)| outer + (offset - inner))
    }
}

/// Lints a mig-parted config file or a ConfigMap holding one. `name` is shown in diagnostics.
pub fn lint(sources: &mut Sources, name: &str, text: &str, catalog: &Catalog) -> Diagnostics {
    let file = sources.add(name, text);
    let value: Result<serde_json::Value, _> = serde_saphyr::from_str(text);
    let is_config_map =
        value.as_ref().is_ok_and(|v| v.get("kind").and_then(|k| k.as_str()) == Some("ConfigMap"));
    // gpuplan's own ConfigMap holds one config per node layout, filtered to the pool's GPU and
    // selected per node by label: GPUs it does not name are not meant to be touched.
    let node_specific = is_config_map
        && value
            .as_ref()
            .ok()
            .and_then(|v| v.pointer("/metadata/labels/app.kubernetes.io~1managed-by"))
            .and_then(|v| v.as_str())
            == Some("gpuplan");
    let mut diagnostics = if is_config_map {
        let inner = value.as_ref().ok().and_then(|v| v.pointer("/data/config.yaml")).and_then(|v| v.as_str());
        match inner {
            None => Diagnostics::from_iter([Diagnostic::error(
                codes::MISSING_FIELD,
                "the ConfigMap has no `data.\"config.yaml\"` key",
            )
            .at(Span::new(file, 0..0), "in this ConfigMap")
            .with_help("the MIG manager reads its config from the `config.yaml` key")]),
            Some(inner) => match block_lines(text, inner) {
                Some(lines) => {
                    lint_text(&Locator { file, lines: Some(lines) }, inner, catalog, node_specific)
                }
                None => {
                    let inner_file = sources.add(format!("{name} (data.\"config.yaml\")"), inner);
                    lint_text(&Locator { file: inner_file, lines: None }, inner, catalog, node_specific)
                }
            },
        }
    } else {
        lint_text(&Locator { file, lines: None }, text, catalog, false)
    };
    diagnostics.sort();
    diagnostics
}

/// Finds `config.yaml: |` in `outer` and maps each line of `inner` to its place in `outer`, when
/// the block reproduces `inner` exactly after removing its indentation.
fn block_lines(outer: &str, inner: &str) -> Option<Vec<(usize, usize)>> {
    let key = outer.find("config.yaml:")?;
    let after_key = outer.get(key..)?;
    let line_end = key + after_key.find('\n')? + 1;
    let header = outer.get(key..line_end)?.trim_end();
    if !(header.ends_with('|') || header.ends_with("|-") || header.ends_with("|+")) {
        return None;
    }
    let body = outer.get(line_end..)?;
    let indent = body.lines().find(|l| !l.trim().is_empty())?.chars().take_while(|&c| c == ' ').count();
    let mut mapped = Vec::new();
    let mut rebuilt = String::new();
    let mut outer_offset = line_end;
    for line in body.split_inclusive('\n') {
        if rebuilt.len() >= inner.len() {
            break;
        }
        let spaces = line.chars().take_while(|&c| c == ' ').count();
        let content =
            if line.trim().is_empty() { line.get(spaces.min(indent)..)? } else { line.get(indent..)? };
        mapped.push((rebuilt.len(), outer_offset + (line.len() - content.len())));
        rebuilt.push_str(content);
        outer_offset += line.len();
    }
    (rebuilt.trim_end() == inner.trim_end()).then_some(mapped)
}

fn lint_text(at: &Locator, text: &str, catalog: &Catalog, node_specific: bool) -> Diagnostics {
    let mut out = Diagnostics::new();
    let raw: RawConfig = match serde_saphyr::from_str(text) {
        Ok(raw) => raw,
        Err(err) => {
            let mut d = super::serde_diagnostic_in(at.file, &err, |o| at.map(o), text);
            d.help = Some("see the mig-parted v1 format in docs/catalog.md".to_owned());
            out.push(d);
            return out;
        }
    };
    if raw.version.value != "v1" {
        out.push(
            Diagnostic::error(
                codes::INVALID_VALUE,
                format!("`version` must be `v1`, not `{}`", raw.version.value),
            )
            .at(at.span(&raw.version), "unsupported version")
            .with_help("mig-parted reads `version: v1` only"),
        );
    }
    if raw.mig_configs.value.0.is_empty() {
        out.push(
            Diagnostic::error(codes::INVALID_VALUE, "`mig-configs` is empty")
                .at(at.span(&raw.mig_configs), "no config here")
                .with_help(format!("add at least `{ALL_DISABLED}`")),
        );
    }
    for (name, entries) in &raw.mig_configs.value.0 {
        lint_config(at, catalog, name, entries, node_specific, &mut out);
    }
    out
}

fn lint_config(
    at: &Locator,
    catalog: &Catalog,
    name: &Spanned<String>,
    entries: &Spanned<Vec<Spanned<RawEntry>>>,
    node_specific: bool,
    out: &mut Diagnostics,
) {
    let config = &name.value;
    if entries.value.is_empty() {
        out.push(
            Diagnostic::error(codes::INVALID_VALUE, format!("config `{config}` has no entries"))
                .at(at.span(name), "empty config")
                .with_help(
                    "give the config at least one entry, e.g. `devices: all` with `mig-enabled: false`",
                ),
        );
    }
    let mut seen: Vec<(String, &Spanned<RawEntry>)> = Vec::new();
    let mut matched: BTreeSet<&str> = BTreeSet::new();
    let mut any_unfiltered = false;
    let mut layouts: Vec<BTreeMap<String, u32>> = Vec::new();
    for entry in &entries.value {
        let e = &entry.value;
        // Which GPUs the entry targets.
        let targets: Option<Vec<&GpuModel>> =
            e.device_filter.as_ref().map(|filter| filter_targets(at, catalog, filter, out));
        match &targets {
            Some(gpus) => matched.extend(gpus.iter().map(|g| g.id.as_str())),
            None => any_unfiltered = true,
        }
        lint_devices(at, &e.devices, out);
        // Duplicate entries: same filter (as a set) and same devices.
        let key = format!("{:?}|{:?}", filter_key(e), devices_key(&e.devices.value));
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
            out.push(
                Diagnostic::warning(
                    codes::MIG_CONFIG_DUPLICATE_ENTRY,
                    format!("config `{config}` has two entries for the same GPUs"),
                )
                .at(at.span(entry), "this entry is applied after the first and replaces it")
                .with_label(at.span(first), "first entry")
                .with_help("merge the two entries into one"),
            );
        } else {
            seen.push((key, entry));
        }
        // MIG devices.
        let enabled = e.mig_enabled.value;
        let devices = e.mig_devices.as_ref();
        match (enabled, devices) {
            (true, None) => out.push(
                Diagnostic::error(
                    codes::MISSING_FIELD,
                    "`mig-devices` is required when `mig-enabled` is true",
                )
                .at(at.span(entry), "this entry")
                .with_help("write `mig-devices: {}` to enable MIG without instances"),
            ),
            (false, Some(d)) if !d.value.0.is_empty() => out.push(
                Diagnostic::error(
                    codes::INVALID_VALUE,
                    "`mig-devices` must be empty when `mig-enabled` is false",
                )
                .at(at.map_span(d), "instances on a GPU with MIG disabled")
                .with_help("set `mig-enabled: true` or remove `mig-devices`"),
            ),
            (true, Some(d)) if !d.value.0.is_empty() => {
                if let Some(counts) = mig_counts(at, d, out) {
                    check_layout(at, catalog, config, targets.as_deref(), d, &counts, out);
                    layouts.push(counts);
                }
            }
            _ => {}
        }
    }
    if !any_unfiltered && !node_specific && !layouts.is_empty() {
        untouched_gpus(at, catalog, name, &matched, &layouts, out);
    }
}

/// The catalog GPUs a `device-filter` targets, with a diagnostic for each id that is not a PCI
/// device id or matches no catalog GPU.
fn filter_targets<'c>(
    at: &Locator,
    catalog: &'c Catalog,
    filter: &Spanned<RawFilter>,
    out: &mut Diagnostics,
) -> Vec<&'c GpuModel> {
    let ids: Vec<&str> = match &filter.value {
        RawFilter::One(id) => vec![id.as_str()],
        RawFilter::Many(ids) => ids.iter().map(String::as_str).collect(),
    };
    if ids.is_empty() {
        out.push(
            Diagnostic::error(codes::INVALID_VALUE, "`device-filter` is an empty list")
                .at(at.span(filter), "no device id")
                .with_help("list PCI device ids such as `0x233010DE`, or drop the filter to match every GPU"),
        );
    }
    let mut gpus: Vec<&GpuModel> = Vec::new();
    for id in ids {
        if normalize_pci_id(id).is_none() {
            out.push(
                Diagnostic::error(codes::INVALID_VALUE, format!("`{id}` is not a PCI device id"))
                    .at(at.span(filter), "in this filter")
                    .with_help("write device ids as `0xDDDD10DE` (device id, then NVIDIA's vendor id 10DE)"),
            );
            continue;
        }
        let found = catalog.by_pci_id(id);
        if found.is_empty() {
            out.push(
                Diagnostic::warning(
                    codes::MIG_CONFIG_UNMATCHED_FILTER,
                    format!("device filter `{id}` matches no GPU in the catalog"),
                )
                .at(at.span(filter), "in this filter")
                .with_help(
                    "check the id, or add the GPU with `--catalog DIR` (see `gpuplan catalog import`)",
                ),
            );
        }
        gpus.extend(found);
    }
    gpus.sort_by(|a, b| a.id.cmp(&b.id));
    gpus.dedup_by(|a, b| a.id == b.id);
    gpus
}

/// `devices` is `all` or a list of indices from 0.
fn lint_devices(at: &Locator, devices: &Spanned<RawDevices>, out: &mut Diagnostics) {
    match &devices.value {
        RawDevices::Word(w) if w == "all" => {}
        RawDevices::Word(w) => out.push(
            Diagnostic::error(
                codes::INVALID_VALUE,
                format!("`devices` must be `all` or a list of indices, not `{w}`"),
            )
            .at(at.span(devices), "here")
            .with_help("write `devices: all` or `devices: [0, 1]`"),
        ),
        RawDevices::List(list) => {
            if list.iter().any(|&i| i < 0) {
                out.push(
                    Diagnostic::error(codes::INVALID_VALUE, "GPU indices in `devices` must not be negative")
                        .at(at.span(devices), "here")
                        .with_help("indices count GPUs from 0 in NVML order"),
                );
            }
        }
    }
}

/// The instance counts of an entry's `mig-devices` (zero counts left out), or `None` after a
/// diagnostic when a count is out of range or every count is zero.
fn mig_counts(at: &Locator, d: &RawDevicesMap, out: &mut Diagnostics) -> Option<BTreeMap<String, u32>> {
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    let mut ok = true;
    for (profile, count) in &d.value.0 {
        if count.value < 0 || count.value > i64::from(u16::MAX) {
            out.push(
                Diagnostic::error(codes::INVALID_VALUE, format!("count {} is out of range", count.value))
                    .at(at.span(count), "here")
                    .with_help("counts are instances per GPU, from 0 to the profile's maximum"),
            );
            ok = false;
        } else if count.value > 0 {
            *counts.entry(profile.value.clone()).or_insert(0) += u32::try_from(count.value).unwrap_or(0);
        }
    }
    if ok && counts.is_empty() {
        out.push(
            Diagnostic::error(codes::INVALID_VALUE, "every count in `mig-devices` is zero")
                .at(at.map_span(d), "here")
                .with_help("give at least one profile a positive count, or write `mig-devices: {}`"),
        );
    }
    (ok && !counts.is_empty()).then_some(counts)
}

/// Warns about catalog GPUs that no entry of a filtered config matches although one of its
/// layouts fits them (mig-parted reports success on them and changes nothing).
fn untouched_gpus(
    at: &Locator,
    catalog: &Catalog,
    name: &Spanned<String>,
    matched: &BTreeSet<&str>,
    layouts: &[BTreeMap<String, u32>],
    out: &mut Diagnostics,
) {
    let config = &name.value;
    let untouched: Vec<&str> = catalog
        .iter()
        .filter(|g| !matched.contains(g.id.as_str()))
        .filter(|g| layouts.iter().any(|l| layout::validate_counts(g, l).is_ok()))
        .map(|g| g.id.as_str())
        .collect();
    if !untouched.is_empty() {
        out.push(
            Diagnostic::warning(
                codes::MIG_CONFIG_UNTOUCHED_GPU,
                format!(
                    "config `{config}` leaves {} untouched although one of its layouts fits {}",
                    list(&untouched),
                    if untouched.len() == 1 { "it" } else { "them" }
                ),
            )
            .at(at.span(name), "no entry of this config matches them")
            .with_help("add their PCI device ids to a `device-filter`; mig-parted reports success for GPUs no entry matches"),
        );
    }
}

fn filter_key(e: &RawEntry) -> Option<BTreeSet<String>> {
    e.device_filter.as_ref().map(|f| {
        let ids: Vec<&String> = match &f.value {
            RawFilter::One(id) => vec![id],
            RawFilter::Many(ids) => ids.iter().collect(),
        };
        ids.into_iter().map(|id| normalize_pci_id(id).unwrap_or_else(|| id.clone())).collect()
    })
}

fn devices_key(d: &RawDevices) -> String {
    match d {
        RawDevices::Word(w) => w.clone(),
        RawDevices::List(l) => {
            let set: BTreeSet<i64> = l.iter().copied().collect();
            format!("{set:?}")
        }
    }
}

fn list(ids: &[&str]) -> String {
    ids.iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", ")
}

fn check_layout(
    at: &Locator,
    catalog: &Catalog,
    config: &str,
    targets: Option<&[&GpuModel]>,
    devices: &RawDevicesMap,
    counts: &BTreeMap<String, u32>,
    out: &mut Diagnostics,
) {
    let mig_gpus: Vec<&GpuModel> = match targets {
        // A filter that matches nothing already has its warning; there is nothing to check.
        Some([]) => return,
        Some(gpus) => gpus.iter().copied().filter(|g| g.is_mig_capable()).collect(),
        None => catalog.iter().filter(|g| g.is_mig_capable()).collect(),
    };
    if let (Some(gpus), true) = (targets, mig_gpus.is_empty()) {
        let ids: Vec<&str> = gpus.iter().map(|g| g.id.as_str()).collect();
        out.push(
            Diagnostic::error(
                codes::MIG_CONFIG_INVALID_LAYOUT,
                format!(
                    "config `{config}` asks for MIG instances on {}, which do not support MIG",
                    list(&ids)
                ),
            )
            .at(at.map_span(devices), "no MIG on these GPUs")
            .with_help("use `mig-enabled: false` for GPUs without MIG, or fix the `device-filter`"),
        );
        return;
    }
    // Names: each must exist on every targeted GPU (with a filter) or on some GPU (without).
    let mut names_ok = true;
    for (profile, _) in &devices.value.0 {
        let name = profile.value.as_str();
        let lacking: Vec<&str> =
            mig_gpus.iter().filter(|g| g.profile(name).is_none()).map(|g| g.id.as_str()).collect();
        let unknown = if targets.is_some() { !lacking.is_empty() } else { lacking.len() == mig_gpus.len() };
        if !unknown {
            continue;
        }
        names_ok = false;
        let candidates: BTreeSet<&str> = mig_gpus.iter().flat_map(|g| g.profile_names()).collect();
        let mut d = Diagnostic::error(
            codes::MIG_CONFIG_UNKNOWN_PROFILE,
            if targets.is_some() {
                format!(
                    "{} {} no MIG profile `{name}`",
                    list(&lacking),
                    if lacking.len() == 1 { "has" } else { "have" }
                )
            } else {
                format!("no GPU in the catalog has a MIG profile `{name}`")
            },
        )
        .at(at.span(profile), "unknown profile");
        let same_shape =
            mig_gpus.iter().find_map(|g| layout::suggest_profile(g, name).filter(|_| targets.is_some()));
        d = match same_shape.or_else(|| nearest(name, candidates.iter().copied())) {
            Some(n) => d.with_help(format!("did you mean `{n}`? names must match NVML exactly")),
            None => d.with_help("profile names must match NVML exactly; see `gpuplan catalog show GPU`"),
        };
        out.push(d);
    }
    if !names_ok {
        return;
    }
    let candidates: Vec<&GpuModel> =
        mig_gpus.into_iter().filter(|g| counts.keys().all(|n| g.profile(n).is_some())).collect();
    if candidates.is_empty() {
        out.push(
            Diagnostic::error(
                codes::MIG_CONFIG_UNKNOWN_PROFILE,
                format!("no GPU in the catalog has all the profiles of config `{config}`"),
            )
            .at(at.map_span(devices), "these profiles belong to different GPUs")
            .with_help("use the profile names of one GPU model; see `gpuplan catalog show GPU`"),
        );
        return;
    }
    // Group GPUs by the reason they reject the layout, for one diagnostic per reason.
    let mut failures: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for gpu in &candidates {
        if let Err(err) = layout::validate_counts(gpu, counts) {
            failures.entry(err.to_string()).or_default().push(gpu.id.as_str());
        }
    }
    for (reason, gpus) in failures {
        out.push(
            Diagnostic::error(
                codes::MIG_CONFIG_INVALID_LAYOUT,
                format!("config `{config}` is not a valid layout on {}: {reason}", list(&gpus)),
            )
            .at(at.map_span(devices), "these instances do not fit")
            .with_help("`gpuplan catalog show GPU` lists the maximal layouts of a GPU"),
        );
    }
}
