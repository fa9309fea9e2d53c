//! Measured per-profile throughput: the file format users benchmark their models into, the
//! latency admission rule (the ParvaGPU importer is benchmark harness: `crate::bench::parvagpu`).
//!
//! In: the text of a measured-points CSV file (format: `docs/measurements.md`), one file per model.
//! Out: [`MeasuredPoint`]s in file order, or every problem found as coded diagnostics whose
//! primary label points at the offending header cell, row or field (line and column).
//! [`admit`] then judges every point against a latency objective and says why each point is
//! admitted or not; [`best_admitted`] is the best single point per (GPU, profile). What a
//! replica sustains there, sweeps included, is [`crate::spec::RateDemand::capacity`].
//! `crate::verify::check` judges a finished plan against the measurements, independently of the
//! planner; `crate::verify::figures` reports the rate its replicas cover.
//!
//! Guarantees: parsing never panics, whatever the input; every returned point has a non-empty
//! GPU id, a profile that is `whole` or a GPU-instance profile name, a batch size and a process
//! count of at least one, and finite, positive `rps` and `latency_ms`; no two points share
//! (GPU, profile, batch size, processes, rps): rows that differ only in `rps` (and latency) are
//! a sweep, p99 at several rates, which [`crate::spec::RateDemand::capacity`] interpolates. Admission only ever admits points measured with one
//! process (MPS does not run on MIG devices, see `docs/measurements.md`).

pub mod import;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Range;

use serde::Serialize;

use crate::catalog::Catalog;
use crate::diagnostics::{Diagnostic, Diagnostics, FileId, Sources, Span, codes, nearest};
use crate::spec::{MeasuredPoint, RateDemand};

/// The profile name of a measurement taken on a whole GPU with MIG disabled.
pub const WHOLE: &str = "whole";

/// ParvaGPU's admission factor: a point is admitted when `latency_ms < 0.45 × slo_ms`. A batch
/// waits up to one batch time to fill and one to run, so half the SLO per batch, less 10 % margin.
pub const DEFAULT_ADMISSION_FACTOR: f64 = 0.45;

/// The columns of a measured-points file, in the documented order.
pub const COLUMNS: [&str; 6] = ["gpu", "profile", "batch_size", "processes", "rps", "latency_ms"];

/// Parses a measured-points CSV file (format: `docs/measurements.md`).
///
/// Checks the syntax and the ranges only; [`parse_csv_checked`] also checks GPU ids and profile
/// names against the catalog.
pub fn parse_csv(sources: &mut Sources, name: &str, text: &str) -> Result<Vec<MeasuredPoint>, Diagnostics> {
    let file = sources.add(name, text);
    let (points, diags) = parse_points(file, text, None);
    if diags.has_errors() { Err(diags) } else { Ok(points.into_iter().map(|(p, _)| p).collect()) }
}

/// Parses a measured-points CSV file and checks every GPU id and profile against `catalog`.
/// GPU ids written as aliases come back as the catalog id.
pub fn parse_csv_checked(
    sources: &mut Sources,
    name: &str,
    text: &str,
    catalog: &Catalog,
) -> Result<Vec<MeasuredPoint>, Diagnostics> {
    let file = sources.add(name, text);
    let (points, diags) = parse_points(file, text, Some(catalog));
    if diags.has_errors() { Err(diags) } else { Ok(points.into_iter().map(|(p, _)| p).collect()) }
}

/// Writes points in the measured-points format that [`parse_csv`] reads back unchanged.
pub fn to_csv(points: &[MeasuredPoint]) -> String {
    let mut out = COLUMNS.join(",");
    out.push('\n');
    for p in points {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{}",
            p.gpu, p.profile, p.batch_size, p.processes, p.rps, p.latency_ms
        );
    }
    out
}

/// One comma-separated field: its text with surrounding blanks removed, and where it is.
struct Field<'a> {
    text: &'a str,
    range: Range<usize>,
}

/// Splits one line (without its line break) that starts at byte `start` into trimmed fields.
fn split_fields(line: &str, start: usize) -> Vec<Field<'_>> {
    let mut fields = Vec::new();
    let mut offset = 0;
    for raw in line.split(',') {
        let lead = raw.len() - raw.trim_start().len();
        let text = raw.trim();
        let from = start + offset + lead;
        fields.push(Field { text, range: from..from + text.len() });
        offset += raw.len() + 1;
    }
    fields
}

/// The lines that carry content: (byte offset of the line, line text without `\r\n`), skipping
/// blank lines and `#` comments.
fn content_lines(text: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut offset = 0;
    for raw in text.split_inclusive('\n') {
        let mut line = raw.strip_suffix('\n').unwrap_or(raw);
        line = line.strip_suffix('\r').unwrap_or(line);
        let mut start = offset;
        if offset == 0
            && let Some(rest) = line.strip_prefix('\u{feff}')
        {
            start += line.len() - rest.len();
            line = rest;
        }
        offset += raw.len();
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        lines.push((start, line));
    }
    lines
}

/// Parses points; returns each with the span of its row, and every problem found.
fn parse_points(
    file: FileId,
    text: &str,
    catalog: Option<&Catalog>,
) -> (Vec<(MeasuredPoint, Span)>, Diagnostics) {
    let mut diags = Diagnostics::new();
    let lines = content_lines(text);
    let Some(&(header_start, header_line)) = lines.first() else {
        diags.push(
            Diagnostic::error(codes::MEASUREMENT_EMPTY, "the measurements file has no header and no points")
                .at(Span::new(file, 0..text.len().min(1)), "empty file")
                .with_help(format!("start the file with the header `{}`", COLUMNS.join(","))),
        );
        return (Vec::new(), diags);
    };
    let Some(columns) = parse_header(file, header_start, header_line, &mut diags) else {
        return (Vec::new(), diags);
    };
    let mut points: Vec<(MeasuredPoint, Span)> = Vec::new();
    // Rows of one (GPU, profile, batch size, processes) at different rates are a sweep; the
    // same rate twice is a duplicate.
    let mut seen: BTreeMap<(String, String, u32, u32, u64), Span> = BTreeMap::new();
    for &(start, line) in &lines[1..] {
        let row = Span::new(file, start..start + line.len());
        let fields = split_fields(line, start);
        if fields.len() != columns.len() {
            diags.push(
                Diagnostic::error(
                    codes::MEASUREMENT_ROW_LENGTH,
                    format!("this row has {} fields but the header has {}", fields.len(), columns.len()),
                )
                .at(row, format!("{} fields", fields.len()))
                .with_help(format!("write one value per column: {}", COLUMNS.join(","))),
            );
            continue;
        }
        let cell = |name: &str| -> &Field<'_> {
            // `parse_header` guarantees that every column is present exactly once.
            let index = columns.iter().position(|c| *c == name).unwrap_or(0);
            &fields[index]
        };
        let before = diags.0.len();
        let gpu = parse_gpu(file, cell("gpu"), catalog, &mut diags);
        let profile = parse_profile(file, cell("profile"), gpu.as_deref(), catalog, &mut diags);
        let batch_size = parse_count(file, cell("batch_size"), "batch_size", &mut diags);
        let processes = parse_count(file, cell("processes"), "processes", &mut diags);
        let rps = parse_positive(file, cell("rps"), "rps", "requests per second", &mut diags);
        let latency_ms = parse_positive(file, cell("latency_ms"), "latency_ms", "milliseconds", &mut diags);
        if diags.0.len() != before {
            continue;
        }
        let (Some(gpu), Some(profile), Some(batch_size), Some(processes), Some(rps), Some(latency_ms)) =
            (gpu, profile, batch_size, processes, rps, latency_ms)
        else {
            continue;
        };
        let key = (gpu.clone(), profile.clone(), batch_size, processes, rps.to_bits());
        if let Some(first) = seen.get(&key) {
            diags.push(
                Diagnostic::error(
                    codes::MEASUREMENT_DUPLICATE,
                    format!(
                        "`{gpu}` `{profile}` at batch size {batch_size} with {processes} {} and {} req/s is measured twice",
                        if processes == 1 { "process" } else { "processes" },
                        fmt_num(rps)
                    ),
                )
                .at(row, "second measurement")
                .with_label(first.clone(), "first measurement")
                .with_help("keep one row per operating point, for example the median of your runs; rows at different rates form a sweep"),
            );
            continue;
        }
        seen.insert(key, row.clone());
        points.push((MeasuredPoint { gpu, profile, batch_size, processes, rps, latency_ms }, row));
    }
    if points.is_empty() && !diags.has_errors() {
        diags.push(
            Diagnostic::error(codes::MEASUREMENT_EMPTY, "the measurements file has a header but no points")
                .at(Span::new(file, header_start..header_start + header_line.len()), "only a header")
                .with_help("add one row per measured operating point"),
        );
    }
    (points, diags)
}

/// Checks the header; returns the column names in file order when they are exactly [`COLUMNS`].
fn parse_header<'a>(
    file: FileId,
    start: usize,
    line: &'a str,
    diags: &mut Diagnostics,
) -> Option<Vec<&'a str>> {
    let fields = split_fields(line, start);
    let before = diags.0.len();
    let mut names: Vec<&str> = Vec::new();
    for field in &fields {
        let span = Span::new(file, field.range.clone());
        if field.text == "model" {
            diags.push(
                Diagnostic::error(
                    codes::MEASUREMENT_HEADER,
                    "a measurements file holds one model: no `model` column",
                )
                .at(span, "not a column of this format")
                .with_help("drop the column and reference one file per model from the manifest"),
            );
        } else if !COLUMNS.contains(&field.text) {
            let mut d =
                Diagnostic::error(codes::MEASUREMENT_HEADER, format!("unknown column `{}`", field.text))
                    .at(span, "unknown column");
            d = match nearest(field.text, COLUMNS) {
                Some(n) => d.with_help(format!("did you mean `{n}`?")),
                None => d.with_help(format!("the columns are {}", COLUMNS.join(","))),
            };
            diags.push(d);
        } else if names.contains(&field.text) {
            diags.push(
                Diagnostic::error(
                    codes::MEASUREMENT_HEADER,
                    format!("column `{}` appears twice", field.text),
                )
                .at(span, "second time")
                .with_help("name each column once"),
            );
        }
        names.push(field.text);
    }
    let missing: Vec<&str> = COLUMNS.iter().copied().filter(|c| !names.contains(c)).collect();
    if !missing.is_empty() {
        let list = missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ");
        diags.push(
            Diagnostic::error(codes::MEASUREMENT_HEADER, format!("the header lacks {list}"))
                .at(Span::new(file, start..start + line.len()), "header")
                .with_help(format!("the header is `{}` (any order)", COLUMNS.join(","))),
        );
    }
    (diags.0.len() == before).then_some(names)
}

fn parse_gpu(
    file: FileId,
    field: &Field<'_>,
    catalog: Option<&Catalog>,
    diags: &mut Diagnostics,
) -> Option<String> {
    let span = Span::new(file, field.range.clone());
    if field.text.is_empty() || field.text.contains(char::is_whitespace) || field.text.contains('"') {
        diags.push(
            Diagnostic::error(codes::MEASUREMENT_VALUE, "`gpu` must be a catalog GPU id")
                .at(span, "not a GPU id")
                .with_help("write the GPU as `gpuplan catalog list` names it, such as `A100-SXM4-80GB`"),
        );
        return None;
    }
    let Some(catalog) = catalog else { return Some(field.text.to_owned()) };
    match catalog.get(field.text) {
        Some(gpu) => Some(gpu.id.clone()),
        None => {
            let mut d = Diagnostic::error(codes::MEASUREMENT_GPU, format!("unknown GPU `{}`", field.text))
                .at(span, "not in the catalog");
            d = d.with_help(crate::catalog::suggestion_help(&catalog.suggest(field.text)));
            diags.push(d);
            None
        }
    }
}

/// Whether `name` has the shape of a GPU-instance profile name (`<g>g.<m>gb[+attr|-attr]`).
/// Compute-instance profiles (`<c>c.<g>g.<m>gb`) are refused: the device plugin does not serve them.
fn profile_shape(name: &str) -> Result<(), &'static str> {
    let base = name.split(['+', '-']).next().unwrap_or(name);
    let attributes = &name[base.len()..];
    let parts: Vec<&str> = base.split('.').collect();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if parts.len() == 3 && parts[0].strip_suffix('c').is_some_and(digits) {
        return Err("compute-instance profiles are not deployable: measure on a GPU-instance profile");
    }
    let shape_ok = parts.len() == 2
        && parts[0].strip_suffix('g').is_some_and(digits)
        && parts[1].strip_suffix("gb").is_some_and(digits);
    let attributes_ok = attributes.is_empty()
        || (attributes.len() > 1
            && attributes[1..].bytes().all(|b| b.is_ascii_lowercase() || b == b'.' || b == b','));
    if shape_ok && attributes_ok {
        Ok(())
    } else {
        Err("write `whole` or a MIG profile name as NVML prints it, such as `3g.40gb`")
    }
}

fn parse_profile(
    file: FileId,
    field: &Field<'_>,
    gpu: Option<&str>,
    catalog: Option<&Catalog>,
    diags: &mut Diagnostics,
) -> Option<String> {
    let span = Span::new(file, field.range.clone());
    if field.text == WHOLE {
        return Some(WHOLE.to_owned());
    }
    if let Err(help) = profile_shape(field.text) {
        diags.push(
            Diagnostic::error(codes::MEASUREMENT_PROFILE, format!("`{}` is not a profile", field.text))
                .at(span, "not `whole` nor a MIG profile")
                .with_help(help),
        );
        return None;
    }
    let (Some(catalog), Some(gpu_id)) = (catalog, gpu) else { return Some(field.text.to_owned()) };
    let gpu = catalog.get(gpu_id)?;
    if gpu.profile(field.text).is_some() {
        return Some(field.text.to_owned());
    }
    let names: Vec<&str> = gpu.mig.iter().flat_map(|m| m.profiles.iter().map(|p| p.name.as_str())).collect();
    let mut d = Diagnostic::error(
        codes::MEASUREMENT_PROFILE,
        format!("`{}` has no profile `{}`", gpu.id, field.text),
    )
    .at(span, "unknown on this GPU");
    d = if names.is_empty() {
        d.with_help(format!("`{}` has no MIG: write `whole`", gpu.id))
    } else if let Some(n) = nearest(field.text, names.iter().copied()) {
        d.with_help(format!("did you mean `{n}`?"))
    } else {
        d.with_help(format!("`{}` offers `whole`, {}", gpu.id, names.join(", ")))
    };
    diags.push(d);
    None
}

fn parse_count(file: FileId, field: &Field<'_>, column: &str, diags: &mut Diagnostics) -> Option<u32> {
    match field.text.parse::<u32>() {
        Ok(n) if n >= 1 => Some(n),
        _ => {
            diags.push(
                Diagnostic::error(
                    codes::MEASUREMENT_VALUE,
                    format!("`{column}` must be a whole number of at least 1"),
                )
                .at(Span::new(file, field.range.clone()), format!("`{}` is not a count", field.text))
                .with_help(format!("write `{column}` as a positive integer, such as `8`")),
            );
            None
        }
    }
}

fn parse_positive(
    file: FileId,
    field: &Field<'_>,
    column: &str,
    unit: &str,
    diags: &mut Diagnostics,
) -> Option<f64> {
    let plain = !field.text.is_empty()
        && field.text.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    match field.text.parse::<f64>() {
        Ok(v) if plain && v.is_finite() && v > 0.0 => Some(v),
        Ok(v) if plain && v == 0.0 => {
            diags.push(
                Diagnostic::error(codes::MEASUREMENT_VALUE, format!("`{column}` is zero"))
                    .at(Span::new(file, field.range.clone()), "zero")
                    .with_help(
                        "a point that did not run (out of memory) is not a measurement: delete the row",
                    ),
            );
            None
        }
        _ => {
            diags.push(
                Diagnostic::error(codes::MEASUREMENT_VALUE, format!("`{column}` must be a positive number"))
                    .at(
                        Span::new(file, field.range.clone()),
                        format!("`{}` is not a positive number", field.text),
                    )
                    .with_help(format!("write `{column}` in {unit} as a decimal number, such as `12.5`")),
            );
            None
        }
    }
}

/// The latency admission rule: a point is admitted when `latency_ms < factor × slo_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRule {
    /// The latency objective of one request; without it every one-process point is admitted.
    pub slo_ms: Option<f64>,
    pub factor: f64,
}

impl AdmissionRule {
    pub fn new(slo_ms: Option<f64>, factor: f64) -> Self {
        Self { slo_ms, factor }
    }

    /// The rule of a rate demand.
    pub fn of(demand: &RateDemand) -> Self {
        Self { slo_ms: demand.slo_ms, factor: demand.admission_factor }
    }

    /// The batch latency a point must stay under, if there is an objective.
    pub fn limit_ms(&self) -> Option<f64> {
        self.slo_ms.map(|slo| self.factor * slo)
    }

    /// Judges one point.
    pub fn judge(&self, point: &MeasuredPoint) -> Verdict {
        if point.processes != 1 {
            return Verdict::MultiProcess { processes: point.processes };
        }
        if !(point.rps.is_finite() && point.rps > 0.0) {
            return Verdict::NoThroughput;
        }
        match self.limit_ms() {
            None => Verdict::Admitted { margin_ms: None },
            Some(limit) if crate::spec::latency_admitted(point.latency_ms, self.slo_ms, self.factor) => {
                Verdict::Admitted { margin_ms: Some(limit - point.latency_ms) }
            }
            Some(limit) => Verdict::TooSlow { limit_ms: limit },
        }
    }
}

/// Whether a point may be used, and why.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "verdict")]
pub enum Verdict {
    /// Usable; `margin_ms` is how far the batch latency stays under the limit.
    Admitted { margin_ms: Option<f64> },
    /// Measured with several MPS processes sharing the device: not deployable on MIG and not
    /// what a lone replica sees on a whole GPU, so never used.
    MultiProcess { processes: u32 },
    /// The batch latency is not under `limit_ms`.
    TooSlow { limit_ms: f64 },
    /// No positive, finite throughput (only possible for points not read by [`parse_csv`]).
    NoThroughput,
}

impl Verdict {
    pub fn is_admitted(&self) -> bool {
        matches!(self, Verdict::Admitted { .. })
    }
}

/// A point with its verdict.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Assessment<'a> {
    pub point: &'a MeasuredPoint,
    pub verdict: Verdict,
}

impl Assessment<'_> {
    /// One lowercase sentence for `explain`: which point, its throughput, its latency margin.
    pub fn reason(&self) -> String {
        let p = self.point;
        let what = format!(
            "batch {} on `{}` `{}` ({} req/s, {} ms per batch)",
            p.batch_size,
            p.gpu,
            p.profile,
            fmt_num(p.rps),
            fmt_num(p.latency_ms)
        );
        match self.verdict {
            Verdict::Admitted { margin_ms: Some(m) } => {
                format!("{what} is admitted, {} ms under the limit", fmt_num(m))
            }
            Verdict::Admitted { margin_ms: None } => format!("{what} is admitted (no latency objective)"),
            Verdict::MultiProcess { processes } => {
                format!(
                    "{what} is ignored: measured with {processes} MPS processes, which MIG devices do not run"
                )
            }
            Verdict::TooSlow { limit_ms } => {
                format!("{what} is too slow: the limit is {} ms", fmt_num(limit_ms))
            }
            Verdict::NoThroughput => format!("{what} is ignored: no throughput"),
        }
    }
}

/// Judges every point against `latency_ms < factor × slo_ms`; keeps the input order.
pub fn admit(points: &[MeasuredPoint], slo_ms: Option<f64>, factor: f64) -> Vec<Assessment<'_>> {
    let rule = AdmissionRule::new(slo_ms, factor);
    points.iter().map(|point| Assessment { point, verdict: rule.judge(point) }).collect()
}

/// The best admitted point per (GPU id, profile): the highest throughput, then the lowest
/// latency, then the smallest batch. A replica on that device serves at most its `rps`.
pub fn best_admitted(
    points: &[MeasuredPoint],
    slo_ms: Option<f64>,
    factor: f64,
) -> BTreeMap<(String, String), Assessment<'_>> {
    let mut best: BTreeMap<(String, String), Assessment<'_>> = BTreeMap::new();
    for a in admit(points, slo_ms, factor).into_iter().filter(|a| a.verdict.is_admitted()) {
        let key = (a.point.gpu.clone(), a.point.profile.clone());
        match best.get(&key) {
            Some(current) if !better(a.point, current.point) => {}
            _ => {
                best.insert(key, a);
            }
        }
    }
    best
}

/// Whether `a` is a better operating point than `b` for the same device (a total order).
fn better(a: &MeasuredPoint, b: &MeasuredPoint) -> bool {
    b.rps
        .total_cmp(&a.rps)
        .then(a.latency_ms.total_cmp(&b.latency_ms))
        .then(a.batch_size.cmp(&b.batch_size))
        .is_lt()
}

/// A number for people: up to three decimals, no trailing zeros.
pub fn fmt_num(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_owned() } else { s };
    if s == "-0" { "0".to_owned() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::render;

    fn parse(text: &str) -> Result<Vec<MeasuredPoint>, (Sources, Diagnostics)> {
        let mut sources = Sources::new();
        parse_csv(&mut sources, "m.csv", text).map_err(|d| (sources, d))
    }

    fn codes_of(text: &str) -> Vec<&'static str> {
        match parse(text) {
            Ok(_) => Vec::new(),
            Err((_, d)) => d.iter().map(|d| d.code).collect(),
        }
    }

    fn point(profile: &str, batch: u32, processes: u32, rps: f64, latency_ms: f64) -> MeasuredPoint {
        MeasuredPoint {
            gpu: "A100-SXM4-80GB".into(),
            profile: profile.into(),
            batch_size: batch,
            processes,
            rps,
            latency_ms,
        }
    }

    #[test]
    fn reads_points_in_file_order_with_comments_blank_lines_and_crlf() {
        let text = "# bert on A100\r\ngpu,profile,batch_size,processes,rps,latency_ms\r\n\r\n\
                    A100-SXM4-80GB, 1g.10gb ,8,1,101.9,79\r\nA100-SXM4-80GB,whole,16,1,900,17.5\r\n";
        let points = parse(text).map_err(|(_, d)| d).expect("valid");
        assert_eq!(points, vec![point("1g.10gb", 8, 1, 101.9, 79.0), point("whole", 16, 1, 900.0, 17.5)]);
    }

    #[test]
    fn accepts_columns_in_any_order() {
        let text = "rps,latency_ms,gpu,profile,processes,batch_size\n10,5,A100-SXM4-80GB,3g.40gb,1,4\n";
        let points = parse(text).map_err(|(_, d)| d).expect("valid");
        assert_eq!(points, vec![point("3g.40gb", 4, 1, 10.0, 5.0)]);
    }

    #[test]
    fn rejects_a_model_column_with_a_hint() {
        let (_, d) = parse("model,gpu,profile,batch_size,processes,rps,latency_ms\n").expect_err("invalid");
        assert_eq!(d.0[0].code, codes::MEASUREMENT_HEADER);
        assert!(d.0[0].help.as_deref().is_some_and(|h| h.contains("one file per model")));
    }

    #[test]
    fn suggests_the_nearest_column_for_a_typo() {
        let (_, d) = parse("gpu,profile,batch_sise,processes,rps,latency_ms\n").expect_err("invalid");
        let helps: Vec<_> = d.iter().filter_map(|d| d.help.clone()).collect();
        assert!(helps.iter().any(|h| h.contains("`batch_size`")), "{helps:?}");
    }

    #[test]
    fn reports_every_bad_field_with_its_line_and_column() {
        let text = "gpu,profile,batch_size,processes,rps,latency_ms\n\
                    A100-SXM4-80GB,1g.10gb,0,1,10,5\n\
                    A100-SXM4-80GB,2c.3g.40gb,1,1,NaN,5\n\
                    A100-SXM4-80GB,1g.10gb,1,1\n";
        let (sources, d) = parse(text).expect_err("invalid");
        let found: Vec<_> = d
            .iter()
            .map(|d| {
                let label = d.labels.iter().find(|l| l.primary).expect("primary label");
                (d.code, sources.get(label.span.file).line_col(label.span.range.start))
            })
            .collect();
        assert_eq!(
            found,
            vec![
                (codes::MEASUREMENT_VALUE, (2, 24)),
                (codes::MEASUREMENT_PROFILE, (3, 16)),
                (codes::MEASUREMENT_VALUE, (3, 31)),
                (codes::MEASUREMENT_ROW_LENGTH, (4, 1)),
            ]
        );
    }

    #[test]
    fn rejects_zero_rows_as_not_measured() {
        let text = "gpu,profile,batch_size,processes,rps,latency_ms\nA100-SXM4-80GB,1g.10gb,256,1,0,0\n";
        let (_, d) = parse(text).expect_err("invalid");
        assert!(d.iter().all(|d| d.code == codes::MEASUREMENT_VALUE));
        assert!(d.0[0].help.as_deref().is_some_and(|h| h.contains("delete the row")));
    }

    #[test]
    fn rejects_duplicate_points_and_points_to_both() {
        let text = "gpu,profile,batch_size,processes,rps,latency_ms\n\
                    A100-SXM4-80GB,1g.10gb,8,1,10,5\nA100-SXM4-80GB,1g.10gb,8,1,10,6\n";
        let (_, d) = parse(text).expect_err("invalid");
        assert_eq!(d.0.len(), 1);
        assert_eq!(d.0[0].code, codes::MEASUREMENT_DUPLICATE);
        assert_eq!(d.0[0].labels.len(), 2);
    }

    #[test]
    fn reads_rows_at_several_rates_as_a_sweep() {
        let text = "gpu,profile,batch_size,processes,rps,latency_ms\n\
                    A100-SXM4-80GB,whole,1,1,100,12\nA100-SXM4-80GB,whole,1,1,200,30\n";
        let points = parse(text).map_err(|(_, d)| d).expect("a sweep");
        assert_eq!(points, vec![point("whole", 1, 1, 100.0, 12.0), point("whole", 1, 1, 200.0, 30.0)]);
    }

    #[test]
    fn rejects_empty_files_and_header_only_files() {
        assert_eq!(codes_of(""), vec![codes::MEASUREMENT_EMPTY]);
        assert_eq!(codes_of("# nothing\n"), vec![codes::MEASUREMENT_EMPTY]);
        assert_eq!(
            codes_of("gpu,profile,batch_size,processes,rps,latency_ms\n"),
            vec![codes::MEASUREMENT_EMPTY]
        );
    }

    #[test]
    fn checked_parse_resolves_aliases_and_rejects_unknown_gpus_and_profiles() {
        let catalog = Catalog::builtin();
        let text = "gpu,profile,batch_size,processes,rps,latency_ms\n\
                    a100-80gb-sxm,3g.40gb,8,1,10,5\nZ100-SXM9-40GB,3g.20gb,8,1,10,5\nA100-SXM4-80GB,3g.20gb,8,1,10,5\n";
        let mut sources = Sources::new();
        let d = parse_csv_checked(&mut sources, "m.csv", text, &catalog).expect_err("invalid");
        let codes: Vec<_> = d.iter().map(|d| d.code).collect();
        assert_eq!(codes, vec![codes::MEASUREMENT_GPU, codes::MEASUREMENT_PROFILE]);
        let ok = "gpu,profile,batch_size,processes,rps,latency_ms\na100-80gb-sxm,3g.40gb,8,1,10,5\n";
        let points = parse_csv_checked(&mut sources, "ok.csv", ok, &catalog).expect("valid");
        assert_eq!(points[0].gpu, "A100-SXM4-80GB");
    }

    #[test]
    fn renders_diagnostics_with_the_file_name_and_position() {
        let (sources, d) = parse("gpu,profile,batch_size,processes,rps,latency_ms\nX,1g.10gb,1,1,-3,5\n")
            .expect_err("invalid");
        let text = render::human(&sources, &d.0, false);
        assert!(text.contains("m.csv:2:"), "{text}");
        assert!(text.contains("measurement-value"), "{text}");
    }

    #[test]
    fn writes_csv_that_reads_back_unchanged() {
        let points = vec![point("1g.10gb", 8, 1, 101.907, 79.0), point("whole", 1, 2, 0.125, 1e-3)];
        assert_eq!(parse(&to_csv(&points)).map_err(|(_, d)| d).expect("valid"), points);
    }

    #[test]
    fn admits_only_one_process_points_strictly_under_the_limit() {
        let points = vec![
            point("1g.10gb", 1, 1, 74.0, 44.0),
            point("1g.10gb", 2, 1, 85.0, 45.0),
            point("1g.10gb", 1, 2, 52.0, 19.0),
        ];
        let verdicts: Vec<Verdict> = admit(&points, Some(100.0), 0.45).iter().map(|a| a.verdict).collect();
        assert!(matches!(verdicts[0], Verdict::Admitted { margin_ms: Some(m) } if (m - 1.0).abs() < 1e-9));
        assert_eq!(verdicts[1], Verdict::TooSlow { limit_ms: 45.0 });
        assert_eq!(verdicts[2], Verdict::MultiProcess { processes: 2 });
    }

    #[test]
    fn admits_every_one_process_point_without_an_objective() {
        let points = vec![point("1g.10gb", 1, 1, 74.0, 1e6), point("1g.10gb", 1, 3, 74.0, 1.0)];
        let admitted: Vec<bool> =
            admit(&points, None, 0.45).iter().map(|a| a.verdict.is_admitted()).collect();
        assert_eq!(admitted, vec![true, false]);
    }

    #[test]
    fn best_admitted_takes_the_fastest_admissible_point_per_device() {
        let points = vec![
            point("1g.10gb", 8, 1, 100.0, 40.0),
            point("1g.10gb", 16, 1, 120.0, 44.0),
            point("1g.10gb", 32, 1, 150.0, 80.0),
            point("1g.10gb", 64, 2, 500.0, 10.0),
            point("2g.20gb", 16, 1, 120.0, 30.0),
            point("2g.20gb", 8, 1, 120.0, 30.0),
        ];
        let best = best_admitted(&points, Some(100.0), 0.45);
        let chosen: Vec<(&str, u32)> =
            best.values().map(|a| (a.point.profile.as_str(), a.point.batch_size)).collect();
        assert_eq!(chosen, vec![("1g.10gb", 16), ("2g.20gb", 8)]);
    }

    #[test]
    fn explains_a_point_with_its_throughput_and_margin() {
        let points = vec![point("3g.40gb", 32, 1, 450.5, 41.0)];
        let a = admit(&points, Some(200.0), 0.45);
        assert_eq!(
            a[0].reason(),
            "batch 32 on `A100-SXM4-80GB` `3g.40gb` (450.5 req/s, 41 ms per batch) is admitted, 49 ms under the limit"
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn never_panics_on_any_text(text in "\\PC{0,300}") {
                let mut sources = Sources::new();
                let _ = parse_csv(&mut sources, "x.csv", &text);
            }

            #[test]
            fn never_panics_on_csv_like_text(text in "([a-z0-9_.,# \"\r\n\u{feff}+-]|gpu|profile|batch_size|processes|rps|latency_ms){0,120}") {
                let mut sources = Sources::new();
                let _ = parse_csv_checked(&mut sources, "x.csv", &text, &Catalog::builtin());
            }

            #[test]
            fn round_trips_generated_points(
                rows in proptest::collection::btree_map(
                    (prop_oneof![Just("1g.10gb"), Just("3g.40gb"), Just("whole")], 1u32..512, 1u32..6),
                    (0.001f64..1e6, 0.001f64..1e6),
                    1..20,
                )
            ) {
                let points: Vec<MeasuredPoint> = rows
                    .iter()
                    .map(|(&(profile, batch, processes), &(rps, latency))| point(profile, batch, processes, rps, latency))
                    .collect();
                let back = parse(&to_csv(&points)).map_err(|(_, d)| d);
                prop_assert_eq!(back, Ok(points));
            }
        }
    }
}
