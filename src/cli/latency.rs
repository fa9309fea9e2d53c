//! `gpuplan latency FILE`: the latency model against a calibration file.
//!
//! In: a JSON file in the format of `tests/data/timeslicing/` (capacities of services alone plus
//! scenarios of co-located members) or in the pairs format of `tests/data/mps/` (each scenario
//! under time-slicing and under MPS; a file may state its harness's `light_load_over_closed_loop`
//! and its host's `cpus`). Out: for every member of every scenario, its sharing mode
//! and the model's p99 (or why it refuses) beside the measured p99; with `--format json` a list
//! of objects `{scenario, member, sharing, load, active_thread_pct, predicted_p99_ms,
//! measured_p99_ms, refused, calibrated}` (`sharing` is `time-slicing` or `mps`,
//! `predicted_p99_ms` null when refused, `active_thread_pct` only where the run set a cap)
//! (`calibrated` is false for runs on another GPU than the H200 or with MIG enabled: the law's
//! answer there is unchecked, and the human output says so). The prediction itself
//! is [`crate::plan::latency::evaluate`]; this file only reads and prints.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

use super::common::read_text;
use super::{Ctx, ExitStatus, Format};
use crate::plan::latency::{self, CalibrationFile, MemberPrediction, Sharing};

/// Compare the latency model's predicted p99 with measured p99 in a calibration file.
///
/// The file holds each service's capacity alone (closed loop) and scenarios whose members run
/// together on one GPU (format: `tests/data/timeslicing/README.md`), or pairs of the same
/// scenario under time-slicing and under MPS (format: `tests/data/mps/README.md`). Members
/// outside the laws' calibrated ranges are refused with the reason, not predicted.
#[derive(Debug, Args)]
pub struct LatencyArgs {
    /// Calibration file (JSON): `capacity` and `scenarios`, or `capacity` and `pairs`.
    pub file: PathBuf,
}

pub(super) fn run(ctx: &Ctx, args: &LatencyArgs) -> anyhow::Result<ExitStatus> {
    let text = read_text(&args.file)?;
    let file = match CalibrationFile::parse(&text) {
        Ok(file) => file,
        Err(err) => {
            let text = format!("`{}` is not a calibration file: {err}", args.file.display());
            return ctx.problem(crate::diagnostics::codes::LATENCY_FILE_INVALID, &text);
        }
    };
    let rows = latency::evaluate(&file);
    match ctx.format {
        Format::Json => ctx.json(&rows).context("cannot write JSON")?,
        Format::Human => ctx.out(&human(&file, &rows))?,
    }
    Ok(ExitStatus::Success)
}

/// One line per member, then per sharing mode how many were predicted and how many of those
/// lie within ±25% of the measured p99.
fn human(file: &CalibrationFile, rows: &[MemberPrediction]) -> String {
    let mut text = format!(
        "{:<22} {:<12} {:<8} {:>5} {:>4} {:>11} {:>11} {:>6}\n",
        "SCENARIO", "SHARING", "MEMBER", "LOAD", "CAP", "PREDICTED", "MEASURED", "RATIO"
    );
    let mut counts: BTreeMap<Sharing, (usize, usize, usize)> = BTreeMap::new();
    for r in rows {
        let load = r.load.map_or_else(|| "closed".to_owned(), |l| format!("{:.0}%", l * 100.0));
        let cap = r.active_thread_pct.map_or_else(|| "-".to_owned(), |c| format!("{c:.0}%"));
        let head =
            format!("{:<22} {:<12} {:<8} {:>5} {:>4}", r.scenario, r.sharing.word(), r.member, load, cap);
        let count = counts.entry(r.sharing).or_default();
        count.0 += 1;
        match r.predicted_p99_ms {
            Some(p) => {
                let ratio = p / r.measured_p99_ms;
                count.1 += 1;
                count.2 += usize::from((0.75..=1.25).contains(&ratio));
                text.push_str(&format!("{head} {p:>8.2} ms {:>8.2} ms {ratio:>6.2}\n", r.measured_p99_ms));
            }
            None => text.push_str(&format!(
                "{head} {:>11} {:>8.2} ms  refused: {}\n",
                "-",
                r.measured_p99_ms,
                r.refused.as_deref().unwrap_or("")
            )),
        }
    }
    text.push('\n');
    for (sharing, (n, accepted, within)) in counts {
        text.push_str(&format!(
            "{}: {accepted} of {n} members predicted; {within} of {accepted} within ±25% of the measured p99\n",
            sharing.word()
        ));
    }
    if !file.calibrated() {
        text.push_str(&format!(
            "note: these runs are on `{}` with MIG `{}`; the laws are calibrated on {} with MIG disabled only, so these predictions are uncalibrated\n",
            file.gpu.as_deref().unwrap_or("?"),
            file.mig.as_deref().unwrap_or("?"),
            latency::CALIBRATED_GPU
        ));
    }
    text
}
