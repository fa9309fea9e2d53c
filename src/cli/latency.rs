//! `gpuplan latency FILE`: the latency model against a calibration file.
//!
//! In: a JSON file in the format of `tests/data/timeslicing/` (capacities of services alone plus
//! scenarios of co-located members). Out: for every member of every scenario, the model's p99
//! (or why it refuses) beside the measured p99; with `--format json` a list of objects
//! `{scenario, member, load, predicted_p99_ms, measured_p99_ms, refused, calibrated}`
//! (`calibrated` is false for runs on another GPU than the H200 or with MIG enabled: the law's
//! answer there is unchecked, and the human output says so). The prediction itself
//! is [`crate::plan::latency::evaluate`]; this file only reads and prints.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

use super::common::read_text;
use super::{Ctx, ExitStatus, Format};
use crate::plan::latency::{self, CalibrationFile};

/// Compare the latency model's predicted p99 with measured p99 in a calibration file.
///
/// The file holds each service's capacity alone (closed loop) and scenarios whose members run
/// together on one GPU (format: `tests/data/timeslicing/README.md`). Members outside the model's
/// calibrated range are refused with the reason, not predicted.
#[derive(Debug, Args)]
pub struct LatencyArgs {
    /// Calibration file (JSON): `capacity` and `scenarios`.
    pub file: PathBuf,
}

pub(super) fn run(ctx: &Ctx, args: &LatencyArgs) -> anyhow::Result<ExitStatus> {
    let text = read_text(&args.file)?;
    let file: CalibrationFile = match serde_json::from_str(&text) {
        Ok(file) => file,
        Err(err) => {
            let text = format!("`{}` is not a calibration file: {err}", args.file.display());
            return ctx.problem(crate::diagnostics::codes::LATENCY_FILE_INVALID, &text);
        }
    };
    let rows = latency::evaluate(&file);
    match ctx.format {
        Format::Json => ctx.json(&rows).context("cannot write JSON")?,
        Format::Human => {
            let mut text = format!(
                "{:<22} {:<8} {:>5} {:>11} {:>11} {:>6}\n",
                "SCENARIO", "MEMBER", "LOAD", "PREDICTED", "MEASURED", "RATIO"
            );
            let (mut accepted, mut within) = (0usize, 0usize);
            for r in &rows {
                let load = r.load.map_or_else(|| "closed".to_owned(), |l| format!("{:.0}%", l * 100.0));
                match r.predicted_p99_ms {
                    Some(p) => {
                        let ratio = p / r.measured_p99_ms;
                        accepted += 1;
                        within += usize::from((0.75..=1.25).contains(&ratio));
                        text.push_str(&format!(
                            "{:<22} {:<8} {:>5} {:>8.2} ms {:>8.2} ms {:>6.2}\n",
                            r.scenario, r.member, load, p, r.measured_p99_ms, ratio
                        ));
                    }
                    None => text.push_str(&format!(
                        "{:<22} {:<8} {:>5} {:>11} {:>8.2} ms  refused: {}\n",
                        r.scenario,
                        r.member,
                        load,
                        "-",
                        r.measured_p99_ms,
                        r.refused.as_deref().unwrap_or("")
                    )),
                }
            }
            text.push_str(&format!(
                "\n{accepted} of {} members predicted; {within} of {accepted} within ±25% of the measured p99\n",
                rows.len()
            ));
            if !file.calibrated() {
                text.push_str(&format!(
                    "note: these runs are on `{}` with MIG `{}`; the law is calibrated on {} with MIG disabled only, so these predictions are uncalibrated\n",
                    file.gpu.as_deref().unwrap_or("?"),
                    file.mig.as_deref().unwrap_or("?"),
                    latency::CALIBRATED_GPU
                ));
            }
            ctx.out(&text)?;
        }
    }
    Ok(ExitStatus::Success)
}
