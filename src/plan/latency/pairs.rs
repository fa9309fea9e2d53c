//! The pairs format of MPS calibration runs (`tests/data/mps/`, README there): every scenario run
//! once under time-slicing and once under MPS, back to back, with each service's closed-loop
//! capacity alone at the top of the file.
//!
//! In: the file's JSON text. Out: the same runs as a [`CalibrationFile`] (both halves of every
//! pair as scenarios of their sharing mode, capacities by service name), so that one evaluation
//! ([`super::evaluate`]) and one fit ([`super::fit`]) serve both formats. Guaranteed: nothing is
//! dropped; a scenario whose lists disagree in length is an error, not a guess. A pair may hold
//! one half only (a file of MPS runs alone, or of time-slicing runs alone). A member of an
//! open-loop scenario whose load is `null` or `0` is a closed-loop member (the harness writes
//! `0` for a saturating neighbour: it has no arrival rate).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{CalibrationFile, Capacity, Member, Scenario, Sharing};

#[derive(Debug, Deserialize)]
struct PairsFile {
    #[serde(default)]
    gpu: Option<String>,
    capacity: Vec<Run>,
    pairs: Vec<Pair>,
    #[serde(default)]
    light_load_over_closed_loop: Option<f64>,
    #[serde(default)]
    cpus: Option<u32>,
}

#[derive(Debug, Deserialize)]
struct Pair {
    #[serde(rename = "time-slicing", default)]
    time_slicing: Option<Run>,
    #[serde(default)]
    mps: Option<Run>,
}

#[derive(Debug, Deserialize)]
struct Run {
    scenario: String,
    sharing: Sharing,
    /// Absent: closed when no member has a load.
    #[serde(default)]
    closed: Option<bool>,
    #[serde(default)]
    load_fraction: Option<Vec<Option<f64>>>,
    #[serde(default)]
    active_thread_pct: Option<Vec<Option<f64>>>,
    members: Vec<RunMember>,
}

#[derive(Debug, Deserialize)]
struct RunMember {
    name: String,
    /// Needed in the capacity runs only.
    #[serde(default)]
    thr_rps: Option<f64>,
    p99: f64,
}

/// Whether `text` is in the pairs format (a top-level `pairs` list) rather than the
/// time-slicing format of `tests/data/timeslicing/`.
pub fn is_pairs(value: &serde_json::Value) -> bool {
    value.get("pairs").is_some_and(serde_json::Value::is_array)
}

/// Reads a pairs file into a [`CalibrationFile`]: the capacity runs become the capacities (the
/// first run of a service wins), each pair's two halves become two scenarios.
pub fn parse(text: &str) -> Result<CalibrationFile, String> {
    let file: PairsFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut capacity = BTreeMap::new();
    for run in &file.capacity {
        for m in &run.members {
            let thr_rps = m.thr_rps.ok_or_else(|| {
                format!("capacity run `{}`: member `{}` has no `thr_rps`", run.scenario, m.name)
            })?;
            capacity.entry(m.name.clone()).or_insert(Capacity { thr_rps, p99: m.p99 });
        }
    }
    let mut scenarios = Vec::new();
    for (i, pair) in file.pairs.into_iter().enumerate() {
        if pair.time_slicing.is_none() && pair.mps.is_none() {
            return Err(format!("pair {} has neither a `time-slicing` nor an `mps` run", i + 1));
        }
        for run in [pair.time_slicing, pair.mps].into_iter().flatten() {
            scenarios.push(scenario(run)?);
        }
    }
    let light_load_over_closed_loop = file.light_load_over_closed_loop;
    let cpus = file.cpus;
    Ok(CalibrationFile { gpu: file.gpu, mig: None, capacity, scenarios, light_load_over_closed_loop, cpus })
}

fn scenario(run: Run) -> Result<Scenario, String> {
    let n = run.members.len();
    let loads = run.load_fraction.unwrap_or_default();
    let caps = run.active_thread_pct.unwrap_or_default();
    // A load of null or 0 is a closed-loop member (no arrival rate); a closed run has no loads.
    let open_loads: Vec<Option<f64>> = loads.iter().map(|l| l.filter(|&l| l != 0.0)).collect();
    let closed = run.closed.unwrap_or_else(|| open_loads.iter().all(Option::is_none));
    if (!closed && loads.len() != n) || (!caps.is_empty() && caps.len() != n) {
        return Err(format!(
            "scenario `{}` ({}) has {n} members but {} loads and {} thread caps",
            run.scenario,
            run.sharing.word(),
            loads.len(),
            caps.len()
        ));
    }
    let members = run
        .members
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let load = if closed { None } else { open_loads.get(i).copied().flatten() };
            Member {
                name: m.name,
                load,
                closed_loop: load.is_none(),
                p99: m.p99,
                // Under time-slicing the MPS variable has no effect; the cap is kept for the record.
                thread_cap: caps.get(i).copied().flatten().map(|pct| pct / 100.0),
            }
        })
        .collect();
    Ok(Scenario { scenario: run.scenario, sharing: run.sharing, members })
}

#[cfg(test)]
mod tests {
    use super::{Sharing, parse};

    #[test]
    fn both_halves_of_a_pair_become_scenarios_with_their_loads_and_caps() {
        let text = r#"{"capacity": [{"scenario": "asr_alone_closed", "sharing": "time-slicing", "closed": true,
              "members": [{"name": "asr", "thr_rps": 800.0, "p99": 1.5}], "active_thread_pct": [null]}],
            "pairs": [{"time-slicing": {"scenario": "asr30_x2", "sharing": "time-slicing", "closed": false,
                         "load_fraction": [0.3, 0.3], "active_thread_pct": [50, 50],
                         "members": [{"name": "asr", "thr_rps": 1.0, "p99": 4.0}, {"name": "asr", "thr_rps": 1.0, "p99": 4.5}]},
                       "mps": {"scenario": "asr30_x2", "sharing": "mps", "closed": false,
                         "load_fraction": [0.3, 0.3], "active_thread_pct": [50, 50],
                         "members": [{"name": "asr", "thr_rps": 1.0, "p99": 3.0}, {"name": "asr", "thr_rps": 1.0, "p99": 3.5}]}}]}"#;
        let file = parse(text).expect("valid pairs file");
        assert_eq!(file.capacity.len(), 1);
        assert_eq!(file.scenarios.len(), 2);
        assert_eq!(file.scenarios[1].sharing, Sharing::Mps);
        assert_eq!(file.scenarios[1].members[1].load, Some(0.3));
        assert_eq!(file.scenarios[1].members[1].thread_cap, Some(0.5));
        assert!((file.scenarios[1].members[1].p99 - 3.5).abs() < 1e-12);
    }

    /// The reference shape in full: members with `n`, `p50`, `p90`, `mean`; caps `null` or a
    /// number; a saturating neighbour written with load `0` (or `null`) in an open-loop run; a
    /// pair with one half only.
    #[test]
    fn every_field_of_the_reference_shape_reads_and_a_pair_may_hold_one_half() {
        let member = |name: &str, p99: f64| {
            format!(
                r#"{{"name": "{name}", "n": 100, "thr_rps": 500.0, "p50": 1.0, "p90": 2.0, "p99": {p99}, "mean": 1.2}}"#
            )
        };
        let text = format!(
            r#"{{"capacity": [{{"scenario": "asr_alone_closed", "sharing": "time-slicing", "closed": true,
                  "load_fraction": [0], "active_thread_pct": [null], "members": [{asr}]}}],
                "pairs": [{{"mps": {{"scenario": "asr30_llmclosed", "sharing": "mps", "closed": false,
                             "load_fraction": [0.3, 0], "active_thread_pct": [50, null], "members": [{asr}, {llm}]}}}},
                          {{"time-slicing": {{"scenario": "asr30_llmnull", "sharing": "time-slicing",
                             "load_fraction": [0.3, null], "active_thread_pct": null, "members": [{asr}, {llm}]}}}}]}}"#,
            asr = member("asr", 4.0),
            llm = member("llm", 9.0)
        );
        let file = parse(&text).expect("valid pairs file");
        assert_eq!(file.scenarios.len(), 2, "one half per pair");
        for s in &file.scenarios {
            assert_eq!((s.members[0].load, s.members[0].closed_loop), (Some(0.3), false), "{}", s.scenario);
            assert_eq!((s.members[1].load, s.members[1].closed_loop), (None, true), "{}", s.scenario);
        }
        assert_eq!(file.scenarios[0].sharing, Sharing::Mps);
        assert_eq!(file.scenarios[0].members[0].thread_cap, Some(0.5));
        assert_eq!(file.scenarios[0].members[1].thread_cap, None);
        assert_eq!(file.scenarios[1].sharing, Sharing::TimeSlicing);
        let neither = r#"{"capacity": [], "pairs": [{}]}"#;
        assert!(parse(neither).expect_err("an empty pair").contains("neither"));
    }

    #[test]
    fn a_scenario_with_lists_of_different_lengths_is_an_error() {
        let text = r#"{"capacity": [], "pairs": [{"time-slicing": {"scenario": "s", "sharing": "time-slicing",
              "closed": false, "load_fraction": [0.3], "members": [{"name": "a", "thr_rps": 1.0, "p99": 1.0},
              {"name": "b", "thr_rps": 1.0, "p99": 1.0}]}, "mps": {"scenario": "s", "sharing": "mps", "closed": true,
              "members": []}}]}"#;
        let err = parse(text).expect_err("two members, one load");
        assert!(err.contains("2 members but 1 loads"), "{err}");
    }
}
