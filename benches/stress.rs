//! The stress sweep (issue 23): plans `gpuplan::bench::stress` fleets over many seeds and prints
//! one line per fleet and the distribution per family — median and max above the planner's
//! bound and above the bound valid for every plan, how many are within the quality target
//! (max(1 GPU, 2%), priced: max(the cheapest GPU-hour, 2%)), and the failures by code.
//!
//! With `--every-type`, each fleet has every GPU type of its family (six in the mixed one; issue
//! 23's realistic spread fleet). With `--monotone`, each planned fleet is planned again with one node more in one of its pools
//! (issue 23: more capacity never gives a dearer plan), and a second table counts the fleets
//! whose plan got dearer.
//!
//! With `--only KIND`, only that family runs (`--only "mixed, priced"`: the name without its
//! size), and with `--seed N` only seed N of it: to look at one fleet, with `GPUPLAN_TRACE=1` for the
//! planner's steps on stderr (and a failure's diagnostics in full).
//!
//! Run: `cargo bench --bench stress -- [--seeds N] [--sizes 8,128,1024] [--fill 0.7] [--every-type] [--monotone] [--only KIND] [--seed N]`
//! (release build, HiGHS; `--no-default-features` for the pure-Rust microlp). Nothing is
//! asserted: the numbers go to docs/benchmarks.md.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;

use gpuplan::bench::stress::{Shape, fleet, fleet_of_every_type};
use gpuplan::spec::Nodes;
use gpuplan::{plan, verify};

/// One planned fleet: (excess over the planner's bound, over the valid bound, the target, the
/// unit's cheapest step) in the objective's unit, or the failure code.
type Outcome = Result<(f64, f64, f64), String>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        let _ = writeln!(std::io::stdout(), "stress sweep: built; run it with `cargo bench --bench stress`");
        return;
    }
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let seeds: u64 = value("--seeds").and_then(|s| s.parse().ok()).unwrap_or(10);
    let fill: f64 = value("--fill").and_then(|s| s.parse().ok()).unwrap_or(0.7);
    let sizes: Vec<u32> = value("--sizes")
        .unwrap_or_else(|| "8,32,128,1024".to_owned())
        .split(',')
        .filter_map(|s| s.parse().ok())
        .collect();
    let monotone = args.iter().any(|a| a == "--monotone");
    let every_type = args.iter().any(|a| a == "--every-type");
    let only = value("--only");
    let one_seed: Option<u64> = value("--seed").and_then(|s| s.parse().ok());
    let generate = if every_type { fleet_of_every_type } else { fleet };
    let mut out = std::io::stdout().lock();
    let mut families: BTreeMap<String, Vec<Outcome>> = BTreeMap::new();
    // Per family: the objective with a node more minus the objective as generated.
    let mut growth: BTreeMap<String, Vec<Result<f64, String>>> = BTreeMap::new();
    for &gpus in &sizes {
        for (priced, compute, time_sliced) in [
            (false, false, false),
            (false, true, false),
            (true, false, false),
            (true, true, false),
            (false, true, true),
            (true, true, true),
        ] {
            let shape = Shape { gpus, priced, compute, fill, time_sliced };
            let kind = format!(
                "{}{}{}",
                if time_sliced { "time-sliced" } else { "mixed" },
                if priced { ", priced" } else { "" },
                if compute { ", compute" } else { "" }
            );
            if only.as_ref().is_some_and(|o| *o != kind) {
                continue;
            }
            let family = format!("{gpus} GPUs, {kind}");
            for seed in one_seed.map_or(0..seeds, |s| s..s + 1) {
                let (spec, catalog) = generate(shape, seed);
                let (outcome, line, used) = one(&spec, &catalog);
                let _ = writeln!(out, "{family}, seed {seed}: {line}");
                families.entry(family.clone()).or_default().push(outcome);
                if let (true, Some(before)) = (monotone, used) {
                    let mut larger = spec.clone();
                    let pi = (seed as usize) % larger.pools.len();
                    let pool = &mut larger.pools[pi];
                    if let Nodes::Named(names) = &mut pool.nodes {
                        names.push(format!("{}-added", pool.name));
                    }
                    let (_, line, after) = one(&larger, &catalog);
                    let _ = writeln!(out, "{family}, seed {seed}, a node more in pool {pi}: {line}");
                    let delta = after.map(|a| a - before).ok_or_else(|| line.clone());
                    growth.entry(family.clone()).or_default().push(delta);
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "\n| family | fleets | planned | within target (planner's bound) | median / max above the planner's bound | median / max above the bound valid for every plan | failures |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for (family, outcomes) in &families {
        let _ = writeln!(out, "{}", summary(family, outcomes));
    }
    if monotone {
        let _ = writeln!(
            out,
            "\n| family | fleets planned | dearer with a node more | max increase | cheaper with a node more | failed with a node more |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|");
        for (family, deltas) in &growth {
            let ok: Vec<f64> = deltas.iter().filter_map(|d| d.as_ref().ok().copied()).collect();
            let dearer = ok.iter().filter(|&&d| d > 1e-6).count();
            let cheaper = ok.iter().filter(|&&d| d < -1e-6).count();
            let max = ok.iter().copied().fold(0.0, f64::max);
            let failed = deltas.len() - ok.len();
            let _ =
                writeln!(out, "| {family} | {} | {dearer} | {max:.2} | {cheaper} | {failed} |", deltas.len());
        }
    }
}

/// Plans one fleet: its outcome, a line for the log and the plan's objective (cost when priced,
/// else GPUs).
fn one(spec: &gpuplan::spec::Spec, catalog: &gpuplan::catalog::Catalog) -> (Outcome, String, Option<f64>) {
    let t = Instant::now();
    let mut stderr = std::io::stderr();
    let trace: Option<&mut dyn Write> =
        std::env::var_os("GPUPLAN_TRACE").is_some().then_some(&mut stderr as &mut dyn Write);
    match plan::plan_traced(spec, catalog, trace) {
        Ok(p) => {
            let secs = t.elapsed().as_secs_f64();
            let violations = verify::check(spec, catalog, &p).len();
            let q = &p.quality;
            let cheapest =
                spec.pools.iter().filter_map(|p| p.cost_per_gpu_hour).fold(f64::INFINITY, f64::min);
            let (used, model, valid, step) = match (q.cost.used, q.cost.lower_bound) {
                (Some(c), Some(v)) => (c, q.cost.model_lower_bound.unwrap_or(v).max(v), v, cheapest),
                _ => (
                    f64::from(q.gpus.used),
                    f64::from(q.gpus.model_lower_bound.max(q.gpus.lower_bound)),
                    f64::from(q.gpus.lower_bound),
                    1.0,
                ),
            };
            let target = step.max(0.02 * model);
            let line = format!(
                "{used:.2} (model bound {model:.2}, valid bound {valid:.2}, {:?}, {} GPUs) {secs:.2} s, {violations} violation(s)",
                q.proof, q.gpus.used
            );
            (Ok((used - model, used - valid, target)), line, Some(used))
        }
        Err(d) => {
            if std::env::var_os("GPUPLAN_TRACE").is_some() {
                // Every diagnostic in full (the line below has the first message only): what
                // a failure names, e.g. the addition of nodes per pool.
                for x in d.iter() {
                    let _ = writeln!(stderr, "{}: {}", x.code, x.message);
                    for text in x.help.iter().chain(&x.notes) {
                        let _ = writeln!(stderr, "  {text}");
                    }
                }
            }
            let code = d.iter().next().map_or_else(|| "?".to_owned(), |x| x.code.to_owned());
            let msg = d.iter().next().map_or_else(String::new, |x| x.message.clone());
            (Err(code.clone()), format!("FAILED {code}: {msg}"), None)
        }
    }
}

/// A markdown row: the distribution of one family.
fn summary(family: &str, outcomes: &[Outcome]) -> String {
    let planned: Vec<(f64, f64, f64)> = outcomes.iter().filter_map(|o| o.as_ref().ok().copied()).collect();
    let mut failures: BTreeMap<&str, usize> = BTreeMap::new();
    for o in outcomes {
        if let Err(code) = o {
            *failures.entry(code.as_str()).or_default() += 1;
        }
    }
    let within = planned.iter().filter(|x| x.0 <= x.2 + 1e-6).count();
    let stats = |f: fn(&(f64, f64, f64)) -> f64| {
        let mut v: Vec<f64> = planned.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        match (v.get(v.len() / 2), v.last()) {
            (Some(m), Some(x)) => format!("{m:.2} / {x:.2}"),
            _ => "–".to_owned(),
        }
    };
    let failures = if failures.is_empty() {
        "none".to_owned()
    } else {
        failures.iter().map(|(c, n)| format!("{n} {c}")).collect::<Vec<_>>().join(", ")
    };
    format!(
        "| {family} | {} | {} | {within} | {} | {} | {failures} |",
        outcomes.len(),
        planned.len(),
        stats(|x| x.0),
        stats(|x| x.1)
    )
}
