//! `measurements import`: measured points from the benchmark tools users already run.
//!
//! In: the text of a Triton `perf_analyzer` CSV report (`-f results.csv`), a `genai-perf` JSON
//! export (`profile_export_genai_perf.json`) or CSV export (`profile_export_genai_perf.csv`), and
//! what the file does not record ([`Context`]: GPU, profile, batch size, which row). Out: one
//! [`MeasuredPoint`] in gpuplan's format, or the reason the file cannot be read.
//!
//! Mapping (`docs/measurements.md`): `rps` is the tool's throughput (perf_analyzer
//! `Inferences/Second`, genai-perf request throughput); `latency_ms` its p99 request latency
//! (perf_analyzer reports microseconds). perf_analyzer writes one row per concurrency or request
//! rate: the row given by [`Context::row`] (its first cell), else the row with the highest
//! throughput; [`import_sweep`] takes every row, a sweep of p99 against rate. Never panics,
//! whatever the text.

use crate::spec::MeasuredPoint;

/// What the tool's output does not say, from the command line.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// Catalog GPU id the benchmark ran on.
    pub gpu: String,
    /// MIG profile, or `whole`.
    pub profile: String,
    /// Batch size; genai-perf JSON records it (`input_config.batch_size`) when not given.
    pub batch_size: Option<u32>,
    /// perf_analyzer: the concurrency or request rate of the row to take (its first cell).
    pub row: Option<String>,
}

/// The tools whose exports are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    PerfAnalyzer,
    GenaiPerfJson,
    GenaiPerfCsv,
}

/// Recognises the export by its content.
pub fn detect(text: &str) -> Option<Tool> {
    let head = text.trim_start_matches('\u{feff}').trim_start();
    if head.starts_with('{') {
        return Some(Tool::GenaiPerfJson);
    }
    let first = head.lines().next().unwrap_or_default();
    if first.contains("Inferences/Second") {
        Some(Tool::PerfAnalyzer)
    } else if first.starts_with("Metric,") {
        Some(Tool::GenaiPerfCsv)
    } else {
        None
    }
}

/// Reads one export into one measured point.
pub fn import(text: &str, ctx: &Context) -> Result<MeasuredPoint, String> {
    let (rps, latency_ms, recorded_batch) = match detect(text) {
        Some(Tool::PerfAnalyzer) => perf_analyzer(text, ctx.row.as_deref())?,
        Some(Tool::GenaiPerfJson) => genai_perf_json(text)?,
        Some(Tool::GenaiPerfCsv) => genai_perf_csv(text)?,
        None => {
            return Err("not a perf_analyzer CSV (header with `Inferences/Second`), nor a genai-perf JSON or CSV export (`Metric,` header)".to_owned());
        }
    };
    point(ctx, ctx.batch_size.or(recorded_batch).unwrap_or(1), rps, latency_ms)
}

/// One checked point of one process alone on the device.
fn point(ctx: &Context, batch_size: u32, rps: f64, latency_ms: f64) -> Result<MeasuredPoint, String> {
    if batch_size == 0 {
        return Err("the batch size must be at least 1".to_owned());
    }
    for (what, v) in [("throughput", rps), ("p99 latency", latency_ms)] {
        if !(v.is_finite() && v > 0.0) {
            return Err(format!("the {what} read from the file is {v}, not a positive number"));
        }
    }
    Ok(MeasuredPoint {
        gpu: ctx.gpu.clone(),
        profile: ctx.profile.clone(),
        batch_size,
        processes: 1,
        rps,
        latency_ms,
    })
}

fn cells(line: &str) -> Vec<&str> {
    line.split(',').map(str::trim).collect()
}

fn number(cell: Option<&&str>, what: &str, line: usize) -> Result<f64, String> {
    let cell = cell.ok_or_else(|| format!("line {line}: no `{what}` value"))?;
    cell.parse::<f64>().map_err(|_| format!("line {line}: `{what}` is `{cell}`, not a number"))
}

/// Every data row of a perf_analyzer CSV: (its first cell, throughput, p99 latency in ms).
fn perf_analyzer_rows(text: &str) -> Result<Vec<(String, f64, f64)>, String> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or("empty file")?;
    let header = cells(header.trim_start_matches('\u{feff}'));
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name))
            .ok_or_else(|| format!("the header has no `{name}` column"))
    };
    let (thr, p99) = (col("Inferences/Second")?, col("p99 latency")?);
    let mut rows = Vec::new();
    for (i, line) in lines {
        let c = cells(line);
        if c.len() != header.len() {
            return Err(format!("line {}: {} fields, the header has {}", i + 1, c.len(), header.len()));
        }
        let (t, l) =
            (number(c.get(thr), "Inferences/Second", i + 1)?, number(c.get(p99), "p99 latency", i + 1)?);
        rows.push((c.first().copied().unwrap_or_default().to_owned(), t, l / 1000.0));
    }
    if rows.is_empty() {
        return Err("no data rows under the header".to_owned());
    }
    Ok(rows)
}

fn perf_analyzer(text: &str, row: Option<&str>) -> Result<(f64, f64, Option<u32>), String> {
    let rows = perf_analyzer_rows(text)?;
    let chosen = match row {
        Some(r) => rows
            .iter()
            .find(|(first, _, _)| first == r)
            .ok_or_else(|| format!("no row whose first cell (concurrency or request rate) is `{r}`"))?,
        // The first row with the highest throughput.
        None => rows.iter().fold(&rows[0], |best, x| if x.1 > best.1 { x } else { best }),
    };
    Ok((chosen.1, chosen.2, None))
}

/// Reads a perf_analyzer CSV as a sweep: one point per row (concurrency or request rate), in
/// file order. Other tools' exports hold one run each: their one point (several runs imported
/// one after the other form the sweep).
pub fn import_sweep(text: &str, ctx: &Context) -> Result<Vec<MeasuredPoint>, String> {
    if detect(text) != Some(Tool::PerfAnalyzer) {
        return import(text, ctx).map(|p| vec![p]);
    }
    let batch_size = ctx.batch_size.unwrap_or(1);
    let mut points = Vec::new();
    for (first, rps, latency_ms) in perf_analyzer_rows(text)? {
        let one =
            point(ctx, batch_size, rps, latency_ms).map_err(|why| format!("the row `{first}`: {why}"))?;
        points.push(one);
    }
    Ok(points)
}

fn genai_perf_json(text: &str) -> Result<(f64, f64, Option<u32>), String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let metric = |name: &str, stat: &str| {
        v.get(name)
            .and_then(|m| m.get(stat))
            .and_then(serde_json::Value::as_f64)
            .ok_or_else(|| format!("no `{name}.{stat}` number"))
    };
    let rps = metric("request_throughput", "avg")?;
    let unit = v.pointer("/request_latency/unit").and_then(|u| u.as_str()).unwrap_or("ms");
    let p99 = metric("request_latency", "p99")?;
    let p99_ms = match unit {
        "ms" => p99,
        "us" | "usec" => p99 / 1000.0,
        "ns" => p99 / 1e6,
        "s" | "sec" => p99 * 1000.0,
        other => return Err(format!("`request_latency.unit` is `{other}`, not ms, us, ns or s")),
    };
    let batch = v
        .pointer("/input_config/batch_size")
        .or_else(|| v.pointer("/input_config/batch_size_text"))
        .and_then(serde_json::Value::as_u64)
        .and_then(|b| u32::try_from(b).ok());
    Ok((rps, p99_ms, batch))
}

fn genai_perf_csv(text: &str) -> Result<(f64, f64, Option<u32>), String> {
    let mut latency = None;
    let mut throughput = None;
    let mut header: Vec<&str> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let c = cells(line.trim_start_matches('\u{feff}'));
        if c.first().is_some_and(|f| *f == "Metric") {
            header = c;
            continue;
        }
        match c.first().copied() {
            Some("Request Latency (ms)") => {
                let at =
                    header.iter().position(|h| *h == "p99").ok_or("the latency table has no `p99` column")?;
                latency = Some(number(c.get(at), "Request Latency p99", i + 1)?);
            }
            Some("Request Throughput (per sec)") => {
                let at = header.iter().position(|h| *h == "Value" || *h == "avg").unwrap_or(1);
                throughput = Some(number(c.get(at), "Request Throughput", i + 1)?);
            }
            _ => {}
        }
    }
    match (throughput, latency) {
        (Some(t), Some(l)) => Ok((t, l, None)),
        (None, _) => Err("no `Request Throughput (per sec)` row".to_owned()),
        (_, None) => Err("no `Request Latency (ms)` row".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context { gpu: "A100-SXM4-80GB".into(), profile: "3g.40gb".into(), batch_size: Some(8), row: None }
    }

    #[test]
    fn perf_analyzer_takes_the_best_row_or_the_one_asked_for() {
        let csv = "Concurrency,Inferences/Second,Client Send,p50 latency,p99 latency\n1,100.5,10,9000,12000\n4,380.0,12,10000,21000\n";
        let p = import(csv, &ctx()).expect("reads");
        assert_eq!((p.rps, p.latency_ms, p.batch_size), (380.0, 21.0, 8));
        let one = import(csv, &Context { row: Some("1".into()), ..ctx() }).expect("reads row 1");
        assert_eq!((one.rps, one.latency_ms), (100.5, 12.0));
        assert!(import(csv, &Context { row: Some("2".into()), ..ctx() }).is_err());
        assert!(import("Concurrency,Inferences/Second\n1,x\n", &ctx()).is_err());
    }

    #[test]
    fn perf_analyzer_sweeps_give_one_point_per_row() {
        let csv = "Request Rate,Inferences/Second,p99 latency,Avg GPU Utilization\n\
                   10,10.0,4000,0.1\n20,19.9,6500,0.2\n40,39.2,21000,0.4\n";
        let points = import_sweep(csv, &ctx()).expect("reads");
        let read: Vec<(f64, f64)> = points.iter().map(|p| (p.rps, p.latency_ms)).collect();
        assert_eq!(read, vec![(10.0, 4.0), (19.9, 6.5), (39.2, 21.0)]);
        assert!(points.iter().all(|p| p.batch_size == 8 && p.processes == 1));
        let bad = "Concurrency,Inferences/Second,p99 latency\n1,10,4000\n2,0,5000\n";
        assert_eq!(
            import_sweep(bad, &ctx()).map(|_| ()),
            Err("the row `2`: the throughput read from the file is 0, not a positive number".to_owned())
        );
        let json =
            r#"{"request_throughput": {"avg": 12.5}, "request_latency": {"unit": "ms", "p99": 910.0}}"#;
        assert_eq!(import_sweep(json, &ctx()).map(|p| p.len()), Ok(1));
    }

    #[test]
    fn genai_perf_exports_give_request_throughput_and_p99() {
        let json = r#"{"request_throughput": {"unit": "requests/sec", "avg": 12.5},
                       "request_latency": {"unit": "ms", "avg": 700.0, "p99": 910.0},
                       "input_config": {"batch_size": 1}}"#;
        let p = import(json, &Context { batch_size: None, ..ctx() }).expect("reads");
        assert_eq!((p.rps, p.latency_ms, p.batch_size), (12.5, 910.0, 1));
        let csv = "Metric,avg,min,max,p99,p95,p90,p75,p50,p25\nRequest Latency (ms),700,500,950,910,900,850,800,700,600\n\nMetric,Value\nRequest Throughput (per sec),12.5\n";
        let p = import(csv, &ctx()).expect("reads");
        assert_eq!((p.rps, p.latency_ms), (12.5, 910.0));
        assert!(import("{}", &ctx()).is_err());
        assert!(import("hello", &ctx()).is_err());
    }
}
