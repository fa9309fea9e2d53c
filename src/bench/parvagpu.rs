//! The ParvaGPU (SC'24) artifact as gpuplan input, and the benchmark built on it.
//!
//! In: the texts of ParvaGPU's files (`prof_data/<model>.csv`, `SLO/SLO_req_rate.csv`,
//! `SLO/SLO_latency.csv`, `deployment/SLO<n>/SLO<n>_ParvaGPU_deploy.csv`, and the derived
//! `derived_results.csv` of gpuplan's reference folder), handed over as strings by the caller: this
//! module does no IO. Out: [`MeasuredPoint`]s per model, the six scenarios, one [`Spec`] per
//! scenario, ParvaGPU's committed deployments, the bounds computed from the profiles alone, and a
//! markdown table comparing a gpuplan plan (checked by [`crate::verify::check`], its figures from
//! [`crate::verify::figures`]) with them.
//!
//! Conversion (also in `docs/measurements.md`): `Mig instance` (GPCs) 1/2/3/4/7 becomes the
//! A100-80GB profile `1g.10gb`/`2g.20gb`/`3g.40gb`/`4g.40gb`/`7g.80gb` (ParvaGPU measured on MIG
//! instances, so `7` is the 7g instance by default; [`SevenGpc::Whole`] maps it to `whole`
//! instead), `Workload Number` becomes `processes`, `Throughput` (requests/s of one process) is
//! `rps` as is, `Latency` (seconds per batch) becomes milliseconds, and `0,0` rows (out of memory,
//! not measured) are dropped. SLOs are used exactly unless [`ImportOptions::truncate_slo`] asks
//! for ParvaGPU's own C `atoi` truncation to whole milliseconds.
//!
//! Guarantees: no panic on any input; every problem in the files is a coded diagnostic with a
//! position; the same texts give the same specs, in the same order.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::catalog::{Catalog, GpuModel};
use crate::diagnostics::{Diagnostic, Diagnostics, FileId, Sources, Span, codes};
use crate::spec::{Demand, DraPool, Isolation, MeasuredPoint, Model, Nodes, PoolSharing, RateDemand, Spec};

use crate::measurements::{DEFAULT_ADMISSION_FACTOR, WHOLE, best_admitted, fmt_num};
use crate::verify::{Figures, Violation};

/// ParvaGPU's models, in the column order of its SLO files (alphabetical file order).
pub const MODELS: [&str; 11] = [
    "bert",
    "densenet121",
    "densenet169",
    "densenet201",
    "inceptionv3",
    "mobilenetv2",
    "resnet101",
    "resnet152",
    "resnet50",
    "vgg16",
    "vgg19",
];

/// The GPU ParvaGPU measured on, as a catalog id.
pub const GPU: &str = "A100-SXM4-80GB";
/// GPUs per node in ParvaGPU's deployments (`Num instance` is the node).
pub const GPUS_PER_NODE: u32 = 8;
/// Nodes the benchmark pool may scale to: 80 GPUs, far above the largest scenario.
pub const MAX_NODES: u32 = 10;
/// The benchmark pool's name.
pub const POOL: &str = "a100";

const PROFILE_HEADER: [&str; 5] = ["Mig instance", "Batch size", "Workload Number", "Throughput", "Latency"];
const DEPLOY_HEADER: [&str; 7] =
    ["Num instance", "Num GPU", "Model", "Placement", "Instance size", "Batch size", "Num proc"];

/// What a 7-GPC measurement stands for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SevenGpc {
    /// The `7g.80gb` MIG instance ParvaGPU actually measured on (default).
    #[default]
    Mig7g,
    /// A whole GPU with MIG disabled (it has 108 SMs against the 7g instance's 98, so the
    /// measurement is a conservative estimate).
    Whole,
}

/// How to read ParvaGPU's files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImportOptions {
    pub seven_gpc: SevenGpc,
    /// Truncate SLOs to whole milliseconds as ParvaGPU's loader (`atoi`) does; default exact.
    pub truncate_slo: bool,
}

/// The A100-80GB profile for a ParvaGPU instance size in GPCs.
pub fn profile_for_gpcs(gpcs: u32, seven: SevenGpc) -> Option<&'static str> {
    match (gpcs, seven) {
        (1, _) => Some("1g.10gb"),
        (2, _) => Some("2g.20gb"),
        (3, _) => Some("3g.40gb"),
        (4, _) => Some("4g.40gb"),
        (7, SevenGpc::Mig7g) => Some("7g.80gb"),
        (7, SevenGpc::Whole) => Some(WHOLE),
        _ => None,
    }
}

/// One field of a line, with its byte range in the file.
struct Cell<'a> {
    text: &'a str,
    span: Span,
}

/// Content lines (line break and `\r` removed, blank lines skipped), each split into cells.
fn rows(file: FileId, text: &str) -> Vec<(Span, Vec<Cell<'_>>)> {
    let mut out = Vec::new();
    let mut offset = 0;
    for raw in text.split_inclusive('\n') {
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        let line = line.strip_suffix('\r').unwrap_or(line);
        let start = offset;
        offset += raw.len();
        if line.trim().is_empty() {
            continue;
        }
        let mut cells = Vec::new();
        let mut at = start;
        for part in line.split(',') {
            let lead = part.len() - part.trim_start().len();
            let t = part.trim();
            cells.push(Cell { text: t, span: Span::new(file, at + lead..at + lead + t.len()) });
            at += part.len() + 1;
        }
        out.push((Span::new(file, start..start + line.len()), cells));
    }
    out
}

/// The data rows of a ParvaGPU file whose first line must be `header`, or `None` (reported) when
/// it is not; rows with another number of fields are reported and left out.
fn data_rows<'t>(
    sources: &mut Sources,
    name: &str,
    text: &'t str,
    header: &[&str],
    diags: &mut Diagnostics,
) -> Option<Vec<(Span, Vec<Cell<'t>>)>> {
    let file = sources.add(name, text);
    let rows = rows(file, text);
    let found: Option<Vec<&str>> = rows.first().map(|(_, cells)| cells.iter().map(|c| c.text).collect());
    if found.as_deref() != Some(header) {
        let span = rows.first().map_or(Span::new(file, 0..0), |(s, _)| s.clone());
        diags.push(
            Diagnostic::error(codes::MEASUREMENT_HEADER, "this is not the header of a ParvaGPU file")
                .at(span, "unexpected header")
                .with_help(format!("the header is `{}`", header.join(","))),
        );
        return None;
    }
    Some(
        rows.into_iter()
            .skip(1)
            .filter(|(span, cells)| row_length(span, cells, header.len(), diags))
            .collect(),
    )
}

fn row_length(span: &Span, cells: &[Cell<'_>], expected: usize, diags: &mut Diagnostics) -> bool {
    if cells.len() == expected {
        return true;
    }
    diags.push(
        Diagnostic::error(
            codes::MEASUREMENT_ROW_LENGTH,
            format!("this row has {} fields instead of {expected}", cells.len()),
        )
        .at(span.clone(), "wrong number of fields")
        .with_help("each row needs one value per header column"),
    );
    false
}

fn count(cell: &Cell<'_>, min: u32, diags: &mut Diagnostics) -> Option<u32> {
    let n = cell.text.parse::<u32>().ok().filter(|n| *n >= min);
    let help = "write a non-negative integer";
    value(cell, n, &format!("a count of at least {min}"), "expected a whole number", help, diags)
}

fn number(cell: &Cell<'_>, diags: &mut Diagnostics) -> Option<f64> {
    let plain = !cell.text.is_empty()
        && cell.text.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    let v = cell.text.parse::<f64>().ok().filter(|v| plain && v.is_finite() && *v >= 0.0);
    let help = "write a decimal number such as `74.408`";
    value(cell, v, "a non-negative number", "expected a number", help, diags)
}

/// `parsed`, or a `measurement-value` error at the cell when it is `None`.
fn value<T>(
    cell: &Cell<'_>,
    parsed: Option<T>,
    expected: &str,
    label: &str,
    help: &str,
    diags: &mut Diagnostics,
) -> Option<T> {
    if parsed.is_none() {
        diags.push(
            Diagnostic::error(codes::MEASUREMENT_VALUE, format!("`{}` is not {expected}", cell.text))
                .at(cell.span.clone(), label)
                .with_help(help),
        );
    }
    parsed
}

/// Reads one `prof_data/<model>.csv` file into gpuplan measured points (conversion in the module docs).
pub fn parse_profile(
    sources: &mut Sources,
    name: &str,
    text: &str,
    options: ImportOptions,
) -> Result<Vec<MeasuredPoint>, Diagnostics> {
    let mut diags = Diagnostics::new();
    let Some(rows) = data_rows(sources, name, text, &PROFILE_HEADER, &mut diags) else {
        return Err(diags);
    };
    let mut points = Vec::new();
    let mut seen: BTreeMap<(&'static str, u32, u32), Span> = BTreeMap::new();
    for (span, cells) in &rows {
        let before = diags.0.len();
        let gpcs = count(&cells[0], 1, &mut diags);
        let profile = gpcs.and_then(|g| {
            let p = profile_for_gpcs(g, options.seven_gpc);
            if p.is_none() {
                diags.push(
                    Diagnostic::error(
                        codes::MEASUREMENT_PROFILE,
                        format!("no A100-80GB instance has {g} GPCs"),
                    )
                    .at(cells[0].span.clone(), "not 1, 2, 3, 4 or 7")
                    .with_help("ParvaGPU instance sizes are 1, 2, 3, 4 and 7 GPCs"),
                );
            }
            p
        });
        let batch_size = count(&cells[1], 1, &mut diags);
        let processes = count(&cells[2], 1, &mut diags);
        let throughput = number(&cells[3], &mut diags);
        let latency_s = number(&cells[4], &mut diags);
        if diags.0.len() != before {
            continue;
        }
        let (Some(profile), Some(batch_size), Some(processes), Some(rps), Some(latency_s)) =
            (profile, batch_size, processes, throughput, latency_s)
        else {
            continue;
        };
        if rps == 0.0 && latency_s == 0.0 {
            continue; // out of memory or not measured
        }
        if rps == 0.0 || latency_s == 0.0 {
            diags.push(
                Diagnostic::error(codes::MEASUREMENT_VALUE, "only one of throughput and latency is zero")
                    .at(span.clone(), "half a measurement")
                    .with_help("a point that did not run has both zero (`0,0`)"),
            );
            continue;
        }
        if let Some(first) = seen.insert((profile, batch_size, processes), span.clone()) {
            diags.push(
                Diagnostic::error(codes::MEASUREMENT_DUPLICATE, "this operating point is measured twice")
                    .at(span.clone(), "second measurement")
                    .with_label(first, "first measurement")
                    .with_help("keep one row per instance size, batch size and process count"),
            );
            continue;
        }
        points.push(MeasuredPoint {
            gpu: GPU.to_owned(),
            profile: profile.to_owned(),
            batch_size,
            processes,
            rps,
            // Seconds to milliseconds, rounded to the nanosecond so that `0.013` s is exactly 13 ms.
            latency_ms: (latency_s * 1e9).round() / 1e6,
        });
    }
    if diags.has_errors() { Err(diags) } else { Ok(points) }
}

/// One model of a scenario: its request rate and latency objective.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioModel {
    pub model: String,
    pub rps: f64,
    pub slo_ms: f64,
}

/// One of ParvaGPU's SLO scenarios (a row of its SLO files).
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// `SLO1` … `SLO6`.
    pub name: String,
    /// Models present (not `N/A`), in column order.
    pub models: Vec<ScenarioModel>,
}

/// Reads the two SLO files (rates in req/s, objectives in ms; one row per scenario, one column
/// per model of `models`, `N/A` for an absent model, no header).
pub fn parse_scenarios(
    sources: &mut Sources,
    rate: (&str, &str),
    latency: (&str, &str),
    models: &[&str],
    options: ImportOptions,
) -> Result<Vec<Scenario>, Diagnostics> {
    let rate_file = sources.add(rate.0, rate.1);
    let latency_file = sources.add(latency.0, latency.1);
    let rate_rows = rows(rate_file, rate.1);
    let latency_rows = rows(latency_file, latency.1);
    let mut diags = Diagnostics::new();
    if rate_rows.len() != latency_rows.len() {
        let span = Span::new(latency_file, 0..latency.1.len());
        diags.push(
            Diagnostic::error(
                codes::MEASUREMENT_ROW_LENGTH,
                format!("{} rate rows but {} latency rows", rate_rows.len(), latency_rows.len()),
            )
            .at(span, "this file")
            .with_help("both SLO files need one row per scenario"),
        );
        return Err(diags);
    }
    let mut scenarios = Vec::new();
    for (i, ((rate_span, rates), (latency_span, slos))) in rate_rows.iter().zip(&latency_rows).enumerate() {
        let ok_rate = row_length(rate_span, rates, models.len(), &mut diags);
        let ok_latency = row_length(latency_span, slos, models.len(), &mut diags);
        if !(ok_rate && ok_latency) {
            continue;
        }
        let mut scenario = Scenario { name: format!("SLO{}", i + 1), models: Vec::new() };
        for ((model, r), s) in models.iter().zip(rates).zip(slos) {
            match (r.text == "N/A", s.text == "N/A") {
                (true, true) => continue,
                (false, false) => {}
                _ => {
                    let cell = if r.text == "N/A" { s } else { r };
                    diags.push(
                        Diagnostic::error(
                            codes::MEASUREMENT_VALUE,
                            format!("`{model}` is absent from only one SLO file"),
                        )
                        .at(cell.span.clone(), "present here")
                        .with_help("write `N/A` in both files or in neither"),
                    );
                    continue;
                }
            }
            let (Some(rps), Some(slo_ms)) = (number(r, &mut diags), number(s, &mut diags)) else { continue };
            let slo_ms = if options.truncate_slo { slo_ms.trunc() } else { slo_ms };
            if rps <= 0.0 || slo_ms <= 0.0 {
                diags.push(
                    Diagnostic::error(
                        codes::MEASUREMENT_VALUE,
                        format!("`{model}` has a zero rate or objective"),
                    )
                    .at(if rps <= 0.0 { r.span.clone() } else { s.span.clone() }, "zero")
                    .with_help("write `N/A` in both files for an absent model"),
                );
                continue;
            }
            scenario.models.push(ScenarioModel { model: (*model).to_owned(), rps, slo_ms });
        }
        scenarios.push(scenario);
    }
    if diags.has_errors() { Err(diags) } else { Ok(scenarios) }
}

/// One segment of a ParvaGPU deployment: a model on a MIG instance of one GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Node index (`Num instance`).
    pub node: u32,
    /// GPU index in the node.
    pub gpu: u32,
    pub model: String,
    /// Start slot 0…6.
    pub start: u32,
    /// Instance size in GPCs.
    pub gpcs: u32,
    pub batch_size: u32,
    /// MPS processes on the instance.
    pub processes: u32,
}

/// ParvaGPU's committed output for one scenario.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deployment {
    pub segments: Vec<Segment>,
}

impl Deployment {
    /// Distinct (node, GPU) pairs.
    pub fn gpus(&self) -> u32 {
        let set: BTreeSet<(u32, u32)> = self.segments.iter().map(|s| (s.node, s.gpu)).collect();
        u32::try_from(set.len()).unwrap_or(u32::MAX)
    }

    /// GPCs of all segments.
    pub fn gpcs(&self) -> u32 {
        self.segments.iter().map(|s| s.gpcs).sum()
    }

    /// Segments that run more than one MPS process on a MIG instance (not deployable with the
    /// NVIDIA device plugin).
    pub fn multi_process_segments(&self) -> usize {
        self.segments.iter().filter(|s| s.processes > 1).count()
    }
}

/// Reads a `SLO<n>_ParvaGPU_deploy.csv` file.
pub fn parse_deployment(sources: &mut Sources, name: &str, text: &str) -> Result<Deployment, Diagnostics> {
    let mut diags = Diagnostics::new();
    let Some(rows) = data_rows(sources, name, text, &DEPLOY_HEADER, &mut diags) else {
        return Err(diags);
    };
    let mut deployment = Deployment::default();
    for (_, cells) in &rows {
        let ints: Vec<Option<u32>> =
            [0, 1, 3, 4, 5, 6].iter().map(|&i| count(&cells[i], u32::from(i >= 4), &mut diags)).collect();
        if let [Some(node), Some(gpu), Some(start), Some(gpcs), Some(batch_size), Some(processes)] = ints[..]
        {
            let model = cells[2].text.to_owned();
            deployment.segments.push(Segment { node, gpu, model, start, gpcs, batch_size, processes });
        }
    }
    if diags.has_errors() { Err(diags) } else { Ok(deployment) }
}

/// A CSV with a header and a first column naming the row, as `derived_results.csv`:
/// row name → column name → text.
pub fn parse_table(
    sources: &mut Sources,
    name: &str,
    text: &str,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, Diagnostics> {
    let file = sources.add(name, text);
    let rows = rows(file, text);
    let mut diags = Diagnostics::new();
    let Some((_, header)) = rows.first() else {
        diags.push(
            Diagnostic::error(codes::MEASUREMENT_EMPTY, "the table is empty")
                .at(Span::new(file, 0..0), "empty")
                .with_help("the first line names the columns"),
        );
        return Err(diags);
    };
    let mut table = BTreeMap::new();
    for (span, cells) in rows.iter().skip(1) {
        if !row_length(span, cells, header.len(), &mut diags) {
            continue;
        }
        let row = header.iter().zip(cells).map(|(h, c)| (h.text.to_owned(), c.text.to_owned())).collect();
        table.insert(cells[0].text.to_owned(), row);
    }
    if diags.has_errors() { Err(diags) } else { Ok(table) }
}

/// The texts of the ParvaGPU artifact, keyed as in its folder.
#[derive(Clone, Debug, Default)]
pub struct Files {
    /// Model name → text of `prof_data/<model>.csv`.
    pub profiles: BTreeMap<String, String>,
    pub req_rate: String,
    pub latency: String,
    /// Scenario name (`SLO1`) → text of `deployment/SLO1/SLO1_ParvaGPU_deploy.csv`.
    pub deployments: BTreeMap<String, String>,
    /// Text of `derived_results.csv`, if present.
    pub derived_results: Option<String>,
}

impl Files {
    /// The relative paths a caller reads, in the folder's layout: (key, path).
    pub fn paths() -> Vec<(String, String)> {
        let mut paths: Vec<(String, String)> =
            MODELS.iter().map(|m| (format!("profile:{m}"), format!("prof_data/{m}.csv"))).collect();
        paths.push(("req_rate".into(), "SLO/SLO_req_rate.csv".into()));
        paths.push(("latency".into(), "SLO/SLO_latency.csv".into()));
        for n in 1..=6 {
            paths.push((
                format!("deployment:SLO{n}"),
                format!("deployment/SLO{n}/SLO{n}_ParvaGPU_deploy.csv"),
            ));
        }
        paths.push(("derived_results".into(), "derived_results.csv".into()));
        paths
    }

    /// Files from (key, text) pairs as listed by [`Files::paths`]; unknown keys are ignored.
    pub fn from_texts(texts: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut files = Files::default();
        for (key, text) in texts {
            if let Some(model) = key.strip_prefix("profile:") {
                files.profiles.insert(model.to_owned(), text);
            } else if let Some(scenario) = key.strip_prefix("deployment:") {
                files.deployments.insert(scenario.to_owned(), text);
            } else if key == "req_rate" {
                files.req_rate = text;
            } else if key == "latency" {
                files.latency = text;
            } else if key == "derived_results" {
                files.derived_results = Some(text);
            }
        }
        files
    }
}

/// The whole artifact, read.
#[derive(Clone, Debug, Default)]
pub struct Dataset {
    pub scenarios: Vec<Scenario>,
    /// Model → measured points (all rows, MPS ones included; admission drops those).
    pub profiles: BTreeMap<String, Vec<MeasuredPoint>>,
    pub deployments: BTreeMap<String, Deployment>,
    /// `derived_results.csv`: scenario → column → text (empty when absent).
    pub reference: BTreeMap<String, BTreeMap<String, String>>,
}

impl Dataset {
    /// Reads every file; collects the problems of all of them.
    pub fn load(sources: &mut Sources, files: &Files, options: ImportOptions) -> Result<Self, Diagnostics> {
        let mut diags = Diagnostics::new();
        let mut dataset = Dataset::default();
        for (model, text) in &files.profiles {
            match parse_profile(sources, &format!("prof_data/{model}.csv"), text, options) {
                Ok(points) => {
                    dataset.profiles.insert(model.clone(), points);
                }
                Err(d) => diags.extend(d),
            }
        }
        match parse_scenarios(
            sources,
            ("SLO/SLO_req_rate.csv", &files.req_rate),
            ("SLO/SLO_latency.csv", &files.latency),
            &MODELS,
            options,
        ) {
            Ok(s) => dataset.scenarios = s,
            Err(d) => diags.extend(d),
        }
        for (scenario, text) in &files.deployments {
            match parse_deployment(
                sources,
                &format!("deployment/{scenario}/{scenario}_ParvaGPU_deploy.csv"),
                text,
            ) {
                Ok(d) => {
                    dataset.deployments.insert(scenario.clone(), d);
                }
                Err(d) => diags.extend(d),
            }
        }
        if let Some(text) = &files.derived_results {
            match parse_table(sources, "derived_results.csv", text) {
                Ok(t) => dataset.reference = t,
                Err(d) => diags.extend(d),
            }
        }
        for scenario in &dataset.scenarios {
            for m in &scenario.models {
                if !files.profiles.contains_key(&m.model) {
                    diags.push(Diagnostic::error(
                        codes::MEASUREMENT_EMPTY,
                        format!(
                            "scenario `{}` needs `{}` but there is no `prof_data/{}.csv`",
                            scenario.name, m.model, m.model
                        ),
                    ));
                }
            }
        }
        if diags.has_errors() { Err(diags) } else { Ok(dataset) }
    }

    pub fn scenario(&self, name: &str) -> Option<&Scenario> {
        self.scenarios.iter().find(|s| s.name == name)
    }

    /// The gpuplan spec of one scenario (see [`scenario_spec`]).
    pub fn spec(&self, scenario: &Scenario, catalog: &Catalog) -> Result<Spec, String> {
        scenario_spec(scenario, &self.profiles, catalog)
    }

    /// A number from `derived_results.csv`.
    pub fn reference_number(&self, scenario: &str, column: &str) -> Option<f64> {
        self.reference.get(scenario)?.get(column)?.parse().ok()
    }
}

/// A spec whose models all have rate demands, on one autoscaled pool of `gpu`: what the benchmark
/// and the verifier's tests plan. Models are `hardware` isolated and sorted by name.
pub fn rate_spec(
    name: &str,
    gpu: &GpuModel,
    gpus_per_node: u32,
    max_nodes: u32,
    demands: Vec<(String, RateDemand)>,
) -> Spec {
    let models: Vec<Model> = demands
        .into_iter()
        .map(|(model, demand)| {
            // The model ran on every device it was measured on, so it fits the smallest of them:
            // its memory, and its share of the GPU's SMs (the unit the verifier checks compute in).
            let smallest = demand
                .points
                .iter()
                .filter_map(|p| gpu.profile(&p.profile))
                .min_by_key(|p| (p.memory_mib, p.compute_slices));
            let (memory_mib, compute) = match (smallest, &gpu.mig) {
                (Some(p), Some(_)) if p.sms > 0 && gpu.sms > 0 => {
                    (p.memory_mib, f64::from(p.sms) / f64::from(gpu.sms))
                }
                (Some(p), Some(mig)) => {
                    (p.memory_mib, f64::from(p.compute_slices) / f64::from(mig.compute_slices))
                }
                _ => (gpu.memory_mib, 1.0),
            };
            let mut m = super::model(&model, memory_mib, compute, 1);
            m.container.image = format!("registry.example/parvagpu/{model}:sc24");
            m.demand = Demand::Rate(demand);
            m
        })
        .collect();
    let mut pool = super::pool(POOL, &gpu.id, gpus_per_node, Vec::new());
    pool.nodes = Nodes::Autoscaled { min: 0, max: max_nodes };
    let mut spec = super::spec(name, vec![pool], models);
    spec.policy.time_slicing_efficiency = 0.9;
    spec
}

/// The spec of one scenario: a pool of A100-SXM4-80GB nodes of 8 GPUs (autoscaled, 0 to
/// [`MAX_NODES`]), one `hardware` model per present model with its rate, its SLO, ParvaGPU's
/// admission factor 0.45 and all its measured points.
pub fn scenario_spec(
    scenario: &Scenario,
    profiles: &BTreeMap<String, Vec<MeasuredPoint>>,
    catalog: &Catalog,
) -> Result<Spec, String> {
    let gpu = catalog.get(GPU).ok_or_else(|| format!("the catalog has no `{GPU}`"))?;
    let mut demands = Vec::new();
    for m in &scenario.models {
        let points = profiles.get(&m.model).ok_or_else(|| format!("no profile for `{}`", m.model))?;
        demands.push((
            m.model.clone(),
            RateDemand {
                rps: m.rps,
                slo_ms: Some(m.slo_ms),
                admission_factor: DEFAULT_ADMISSION_FACTOR,
                min_replicas: 1,
                points: points.clone(),
            },
        ));
    }
    Ok(rate_spec(
        &format!("parvagpu-{}", scenario.name.to_ascii_lowercase()),
        gpu,
        GPUS_PER_NODE,
        MAX_NODES,
        demands,
    ))
}

/// The most MPS processes per MIG instance in ParvaGPU's profiles (`Workload Number` 1…5).
pub const MAX_PROCESSES: u32 = 5;

/// A scenario spec ([`scenario_spec`]) in ParvaGPU's MPS formulation, made deployable through
/// the DRA backend: the pool has `nodes` named nodes (`parvagpu-1`…; the benchmark gives it
/// [`MAX_NODES`], as many as the autoscaled pool may reach) with synthetic GPU
/// UUIDs (DRA pins every claim to a UUID; autoscaled pools are refused on `dra`), its sharing is
/// `[mig, mps]`, every model is `shared` with `allowMps` and may run up to [`MAX_PROCESSES`]
/// MPS processes per device (`policy.maxTimeSlicingReplicas`), and a model's memory is the
/// smallest share of device memory one of its processes was measured in (instance memory ÷
/// processes): each process then fits the share gpuplan pins for it.
pub fn dra_spec(spec: &Spec, catalog: &Catalog, nodes: u32) -> Spec {
    let mut spec = spec.clone();
    spec.policy.max_time_slicing_replicas = MAX_PROCESSES;
    let gpu = spec.pools.first().and_then(|p| catalog.get(&p.gpu));
    for pool in &mut spec.pools {
        let nodes: Vec<String> = (1..=nodes).map(|n| format!("parvagpu-{n}")).collect();
        let uuids = nodes
            .iter()
            .enumerate()
            .map(|(n, node)| {
                let gpus =
                    (0..pool.gpus_per_node).map(|g| format!("GPU-{:08x}-0000-4000-8000-{:012x}", n + 1, g));
                (node.clone(), gpus.collect())
            })
            .collect();
        pool.nodes = Nodes::Named(nodes);
        pool.sharing = PoolSharing { mig: true, time_slicing: false, mps: true };
        pool.dra = Some(DraPool { uuids });
    }
    for m in &mut spec.models {
        m.isolation = Isolation::Shared;
        m.allow_mps = true;
        let Demand::Rate(rate) = &m.demand else { continue };
        let per_process = rate
            .points
            .iter()
            .filter_map(|p| {
                let mib =
                    if p.profile == WHOLE { gpu?.memory_mib } else { gpu?.profile(&p.profile)?.memory_mib };
                Some(mib / u64::from(p.processes.max(1)))
            })
            .min();
        if let Some(mib) = per_process {
            m.memory_mib = m.memory_mib.min(mib);
        }
    }
    spec
}

/// What the profiles alone say about a spec's rate demands on its first pool's GPU.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    /// Σ over models of rate / best admitted one-process throughput per compute slice.
    pub fractional_slices: f64,
    /// `ceil(fractional_slices / compute slices per GPU)`: no one-process plan uses fewer GPUs.
    pub lower_bound: u32,
    /// One-process plan with whole (7-slice) devices only, each model on its own devices.
    pub whole_one_process: u32,
    /// ParvaGPU's baseline: whole devices per model with up to 3 MPS processes (not deployable
    /// on MIG, shown for comparison with the paper).
    pub whole_mps3: u32,
}

/// Computes [`Bounds`]; an error names a model with no admissible point.
pub fn bounds(spec: &Spec, catalog: &Catalog) -> Result<Bounds, String> {
    let pool = spec.pools.first().ok_or("the spec has no pool")?;
    let gpu = catalog.get(&pool.gpu).ok_or_else(|| format!("unknown GPU `{}`", pool.gpu))?;
    let slices_per_gpu = gpu.mig.as_ref().map_or(1, |m| u32::from(m.compute_slices));
    let slices = |profile: &str| -> Option<u32> {
        if profile == WHOLE {
            Some(slices_per_gpu)
        } else {
            gpu.profile(profile).map(|p| u32::from(p.compute_slices))
        }
    };
    let mut fractional = 0.0;
    let mut whole_one = 0u32;
    let mut whole_mps = 0u32;
    for model in &spec.models {
        let Demand::Rate(d) = &model.demand else { continue };
        let best = best_admitted(&d.points, d.slo_ms, d.admission_factor);
        let per_slice = best
            .values()
            .filter(|a| a.point.gpu == gpu.id)
            .filter_map(|a| slices(&a.point.profile).map(|s| a.point.rps / f64::from(s)))
            .fold(0.0_f64, f64::max);
        if per_slice <= 0.0 {
            return Err(format!("`{}` has no admissible one-process point", model.name));
        }
        fractional += d.rps / per_slice;
        let full = |max_processes: u32| -> Option<f64> {
            let limit = d.slo_ms.map(|s| s * d.admission_factor);
            d.points
                .iter()
                .filter(|p| p.gpu == gpu.id && slices(&p.profile) == Some(slices_per_gpu))
                .filter(|p| p.processes <= max_processes && limit.is_none_or(|l| p.latency_ms < l))
                .map(|p| p.rps * f64::from(p.processes))
                .reduce(f64::max)
        };
        let devices = |rate: Option<f64>| rate.map_or(u32::MAX, |r| ceil_u32(d.rps / r));
        whole_one = whole_one.saturating_add(devices(full(1)));
        whole_mps = whole_mps.saturating_add(devices(full(3)));
    }
    Ok(Bounds {
        fractional_slices: fractional,
        lower_bound: ceil_u32(fractional / f64::from(slices_per_gpu)),
        whole_one_process: whole_one,
        whole_mps3: whole_mps,
    })
}

/// Ceiling that forgives floating-point noise just above a whole number.
fn ceil_u32(x: f64) -> u32 {
    let c = (x - 1e-9).ceil();
    if c.is_finite() && c >= 0.0 { c.min(f64::from(u32::MAX)) as u32 } else { u32::MAX }
}

/// One line of the benchmark table.
#[derive(Clone, Debug)]
pub struct Row {
    pub scenario: String,
    pub models: usize,
    /// The gpuplan plan's figures and the verifier's violations, or why there is no plan
    /// (planner error).
    pub gpuplan: Result<(Figures, Vec<Violation>), String>,
    /// Median planning time in milliseconds, when measured.
    pub median_ms: Option<f64>,
    pub committed: Option<Deployment>,
    /// ParvaGPU rerun with one process per instance (`rerun_maxproc1_gpus`).
    pub parvagpu_one_process: Option<u32>,
    pub bounds: Result<Bounds, String>,
}

impl Row {
    /// A row without a gpuplan result yet; `gpuplan` and `median_ms` are filled in by the caller.
    pub fn new(dataset: &Dataset, scenario: &Scenario, spec: &Spec, catalog: &Catalog) -> Self {
        Row {
            scenario: scenario.name.clone(),
            models: scenario.models.len(),
            gpuplan: Err("not planned".into()),
            median_ms: None,
            committed: dataset.deployments.get(&scenario.name).cloned(),
            parvagpu_one_process: dataset
                .reference_number(&scenario.name, "rerun_maxproc1_gpus")
                .and_then(|v| (v >= 0.0 && v.fract() == 0.0).then_some(v as u32)),
            bounds: bounds(spec, catalog),
        }
    }
}

/// The benchmark table in markdown, one row per scenario.
pub fn markdown_table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| scenario | models | gpuplan GPUs | GPCs used | layouts | verified | ParvaGPU committed (GPUs / GPCs / MPS segments) | ParvaGPU 1-proc | LB 1-proc | 1:1 whole (≤3 MPS / 1-proc) | gap to LB | plan time (ms, median) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        let dash = || "–".to_owned();
        let (gpus, gpcs, layouts, verified, gap) = match &row.gpuplan {
            Ok((v, violations)) => {
                let gap = row.bounds.as_ref().map_or_else(
                    |_| dash(),
                    |b| format!("{:+}", i64::from(v.gpus_used) - i64::from(b.lower_bound)),
                );
                let verified = if violations.is_empty() {
                    "yes".to_owned()
                } else {
                    format!("NO ({} problems)", violations.len())
                };
                (v.gpus_used.to_string(), v.gpcs_used.to_string(), v.layouts_text(), verified, gap)
            }
            Err(e) => ("no plan".into(), dash(), dash(), format!("planner failed: {e}"), dash()),
        };
        let committed = row
            .committed
            .as_ref()
            .map_or_else(dash, |d| format!("{} / {} / {}", d.gpus(), d.gpcs(), d.multi_process_segments()));
        let one = row.parvagpu_one_process.map_or_else(dash, |n| n.to_string());
        let (lb, whole) = match &row.bounds {
            Ok(b) => (
                format!(
                    "{} ({} GPCs)",
                    b.lower_bound,
                    fmt_num((b.fractional_slices * 100.0).round() / 100.0)
                ),
                format!("{} / {}", b.whole_mps3, b.whole_one_process),
            ),
            Err(e) => (format!("error: {e}"), dash()),
        };
        let time = row.median_ms.map_or_else(dash, |t| format!("{t:.1}"));
        let _ = writeln!(
            out,
            "| {} | {} | {gpus} | {gpcs} | {layouts} | {verified} | {committed} | {one} | {lb} | {whole} | {gap} | {time} |",
            row.scenario, row.models
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{
        BTreeMap, Bounds, Catalog, Demand, GPU, ImportOptions, Row, Scenario, ScenarioModel, SevenGpc,
        Sources, WHOLE, bounds, codes, markdown_table, parse_deployment, parse_profile, parse_scenarios,
        scenario_spec,
    };
    use crate::spec::Isolation;

    const PROFILE: &str = "Mig instance,Batch size,Workload Number,Throughput,Latency\r\n\
                           1,1,1,74.408,0.013\r\n1,1,2,52.42,0.019\r\n1,1,5,0,0\r\n7,8,1,900.5,0.009\r\n";

    #[test]
    fn converts_profile_rows_and_drops_zero_rows() {
        let mut sources = Sources::new();
        let points =
            parse_profile(&mut sources, "bert.csv", PROFILE, ImportOptions::default()).expect("valid");
        let got: Vec<(&str, u32, u32, f64, f64)> = points
            .iter()
            .map(|p| (p.profile.as_str(), p.batch_size, p.processes, p.rps, p.latency_ms))
            .collect();
        assert_eq!(
            got,
            vec![
                ("1g.10gb", 1, 1, 74.408, 13.0),
                ("1g.10gb", 1, 2, 52.42, 19.0),
                ("7g.80gb", 8, 1, 900.5, 9.0)
            ]
        );
        assert!(points.iter().all(|p| p.gpu == GPU));
    }

    #[test]
    fn maps_seven_gpcs_to_whole_when_asked() {
        let mut sources = Sources::new();
        let options = ImportOptions { seven_gpc: SevenGpc::Whole, ..ImportOptions::default() };
        let points = parse_profile(&mut sources, "bert.csv", PROFILE, options).expect("valid");
        assert_eq!(points[2].profile, WHOLE);
    }

    #[test]
    fn rejects_unknown_instance_sizes_and_half_zero_rows() {
        let mut sources = Sources::new();
        let text = "Mig instance,Batch size,Workload Number,Throughput,Latency\n5,1,1,1,1\n1,1,1,0,0.5\n";
        let d = parse_profile(&mut sources, "x.csv", text, ImportOptions::default()).expect_err("invalid");
        let codes: Vec<_> = d.iter().map(|d| d.code).collect();
        assert_eq!(codes, vec![codes::MEASUREMENT_PROFILE, codes::MEASUREMENT_VALUE]);
    }

    #[test]
    fn reads_scenarios_skipping_absent_models_and_truncates_on_request() {
        let models = ["a", "b", "c"];
        let rate = ("r.csv", "10,N/A,30\n1,2,3");
        let latency = ("l.csv", "100.5,N/A,300\n1,2,3.9");
        let mut sources = Sources::new();
        let exact =
            parse_scenarios(&mut sources, rate, latency, &models, ImportOptions::default()).expect("valid");
        assert_eq!(exact.len(), 2);
        assert_eq!(exact[0].name, "SLO1");
        assert_eq!(exact[0].models.iter().map(|m| m.model.as_str()).collect::<Vec<_>>(), vec!["a", "c"]);
        assert_eq!(exact[0].models[0].slo_ms, 100.5);
        let options = ImportOptions { truncate_slo: true, ..ImportOptions::default() };
        let cut = parse_scenarios(&mut sources, rate, latency, &models, options).expect("valid");
        assert_eq!(cut[0].models[0].slo_ms, 100.0);
        assert_eq!(cut[1].models[2].slo_ms, 3.0);
    }

    #[test]
    fn rejects_a_model_absent_from_one_slo_file_only() {
        let mut sources = Sources::new();
        let d = parse_scenarios(
            &mut sources,
            ("r", "1,N/A"),
            ("l", "1,2"),
            &["a", "b"],
            ImportOptions::default(),
        )
        .expect_err("invalid");
        assert_eq!(d.0[0].code, codes::MEASUREMENT_VALUE);
    }

    #[test]
    fn counts_gpus_gpcs_and_mps_segments_of_a_deployment() {
        let text = "Num instance,Num GPU,Model,Placement,Instance size,Batch size,Num proc\n\
                    0,0,resnet50,4,3,64,2\n0,0,vgg19,2,2,32,1\n1,0,bert,0,7,128,1\n";
        let mut sources = Sources::new();
        let d = parse_deployment(&mut sources, "d.csv", text).expect("valid");
        assert_eq!((d.gpus(), d.gpcs(), d.multi_process_segments()), (2, 12, 1));
    }

    #[test]
    fn builds_one_hardware_rate_model_per_present_model() {
        let catalog = Catalog::builtin();
        let mut sources = Sources::new();
        let points =
            parse_profile(&mut sources, "bert.csv", PROFILE, ImportOptions::default()).expect("valid");
        let profiles = BTreeMap::from([("bert".to_owned(), points)]);
        let scenario = Scenario {
            name: "SLO1".into(),
            models: vec![ScenarioModel { model: "bert".into(), rps: 19.0, slo_ms: 6434.0 }],
        };
        let spec = scenario_spec(&scenario, &profiles, &catalog).expect("spec");
        assert_eq!(spec.name, "parvagpu-slo1");
        assert_eq!(spec.pools[0].gpus_per_node, 8);
        let model = &spec.models[0];
        assert_eq!(model.isolation, Isolation::Hardware);
        let smallest = catalog.get("A100-SXM4-80GB").and_then(|g| g.profile("1g.10gb")).expect("1g.10gb");
        assert_eq!(model.memory_mib, smallest.memory_mib);
        let Demand::Rate(d) = &model.demand else { panic!("rate demand expected") };
        assert_eq!((d.rps, d.slo_ms, d.admission_factor), (19.0, Some(6434.0), 0.45));
        let b = bounds(&spec, &catalog).expect("bounds");
        // Best per slice: 7g at 900.5 / 7 = 128.6 beats 1g at 74.408 → 19 / 128.64 slices.
        assert!((b.fractional_slices - 19.0 / (900.5 / 7.0)).abs() < 1e-9);
        assert_eq!((b.lower_bound, b.whole_one_process, b.whole_mps3), (1, 1, 1));
    }

    #[test]
    fn renders_pending_rows_while_the_planner_is_missing() {
        let row = Row {
            scenario: "SLO1".into(),
            models: 6,
            gpuplan: Err("planner error".into()),
            median_ms: None,
            committed: None,
            parvagpu_one_process: Some(2),
            bounds: Ok(Bounds {
                fractional_slices: 6.18,
                lower_bound: 1,
                whole_one_process: 6,
                whole_mps3: 6,
            }),
        };
        let table = markdown_table(&[row]);
        assert!(table.contains("| SLO1 | 6 | no plan |"), "{table}");
        assert!(table.contains("| 2 | 1 (6.18 GPCs) | 6 / 6 |"), "{table}");
    }

    mod props {
        use super::{ImportOptions, Sources, parse_deployment, parse_profile, parse_scenarios};
        use crate::bench::parvagpu::{MODELS, parse_table};
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn never_panics_on_any_parvagpu_text(text in "([0-9.,N/A \r\n-]|Mig instance|Latency){0,200}") {
                let mut sources = Sources::new();
                let _ = parse_profile(&mut sources, "p.csv", &text, ImportOptions::default());
                let _ = parse_deployment(&mut sources, "d.csv", &text);
                let _ = parse_table(&mut sources, "t.csv", &text);
                let _ = parse_scenarios(&mut sources, ("r", &text), ("l", &text), &MODELS, ImportOptions::default());
            }

            #[test]
            fn never_panics_on_unicode(text in "\\PC{0,200}") {
                let mut sources = Sources::new();
                let _ = parse_profile(&mut sources, "p.csv", &text, ImportOptions::default());
                let _ = parse_scenarios(&mut sources, ("r", &text), ("l", &text), &MODELS, ImportOptions::default());
            }
        }
    }
}
