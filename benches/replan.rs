//! The day-2 benchmark: on generated fleets (`gpuplan::bench::fleet`), a sequence of random
//! edits (replicas up and down, models added and removed, a node added and removed, a model's
//! memory changed), each re-planned from the previous plan and planned from scratch. Prints a
//! markdown table: per edit, nodes re-partitioned and replicas moved (median, max), GPUs and
//! $/h above the from-scratch plan of the same spec, and re-plan time against from-scratch time.
//!
//! Run: `cargo bench --bench replan` (HiGHS, the default feature; `--no-default-features` for
//! the pure-Rust microlp; optionally `-- <scenario>…` to run the named scenarios only). Edits
//! that make the spec infeasible are undone and counted. The re-plan time includes the
//! from-scratch solve the re-planner runs (on a second thread, alongside the re-plan) to report
//! the price of stability (docs/planner.md, "Day 2").

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use gpuplan::bench::{SplitMix64, fleet};
use gpuplan::plan;
use gpuplan::plan::day2::{previous, replan, rollout};
use gpuplan::spec::{Demand, Nodes, Spec};

struct Case {
    name: &'static str,
    gpus: u32,
    models: u32,
    priced: bool,
    edits: usize,
}

const CASES: &[Case] = &[
    Case { name: "fleet-100", gpus: 100, models: 20, priced: false, edits: 24 },
    Case { name: "fleet-100-priced", gpus: 100, models: 20, priced: true, edits: 24 },
    Case { name: "fleet-200-priced", gpus: 200, models: 40, priced: true, edits: 24 },
    Case { name: "fleet-1000", gpus: 1000, models: 200, priced: false, edits: 20 },
    Case { name: "fleet-1000-priced", gpus: 1000, models: 200, priced: true, edits: 20 },
];

/// A uniform draw below `n` (0 when `n` is 0, a draw consumed either way, so that the edits stay
/// the sequence earlier rounds measured).
fn below(rng: &mut SplitMix64, n: usize) -> usize {
    (rng.next_u64() % n.max(1) as u64) as usize
}

/// Applies one random edit; returns its description.
fn edit(spec: &mut Spec, rng: &mut SplitMix64, step: usize) -> String {
    let kind = below(rng, 7);
    let mi = below(rng, spec.models.len());
    match kind {
        0 | 1 => {
            let m = &mut spec.models[mi];
            if let Demand::Replicas(n) = &mut m.demand {
                if kind == 0 || *n <= 1 {
                    *n += 1;
                    return format!("{}: replicas +1", m.name);
                }
                *n -= 1;
                return format!("{}: replicas -1", m.name);
            }
            format!("{}: rate model, unchanged", m.name)
        }
        2 => {
            let mut m = spec.models[mi].clone();
            m.name = format!("added-{step:02}");
            spec.models.push(m);
            spec.models.sort_by(|a, b| a.name.cmp(&b.name));
            format!("model added-{step:02} added (like {})", spec.models[mi].name)
        }
        3 if spec.models.len() > 2 => {
            let m = spec.models.remove(mi);
            format!("{}: removed", m.name)
        }
        4 => {
            let pi = below(rng, spec.pools.len());
            let p = &mut spec.pools[pi];
            if let Nodes::Named(names) = &mut p.nodes {
                names.push(format!("{}-new-{step:02}", p.name));
            }
            format!("pool {}: node added", p.name)
        }
        5 => {
            let pi = below(rng, spec.pools.len());
            let p = &mut spec.pools[pi];
            if let Nodes::Named(names) = &mut p.nodes
                && names.len() > 1
            {
                let n = names.remove(below(rng, names.len()));
                return format!("pool {}: node {n} removed", p.name);
            }
            format!("pool {}: unchanged", p.name)
        }
        _ => {
            let m = &mut spec.models[mi];
            let up = below(rng, 2) == 0;
            m.memory_mib = if up { m.memory_mib * 5 / 4 } else { m.memory_mib * 4 / 5 };
            format!("{}: memory {}", m.name, if up { "×1.25" } else { "×0.8" })
        }
    }
}

/// The manifest text of a generated spec (the fields `gpuplan::bench::fleet` sets), for the
/// command-line timing.
fn manifest_yaml(spec: &Spec) -> String {
    use gpuplan::spec::{Isolation, Spread};
    let mut s = format!(
        "apiVersion: gpuplan.io/v1alpha1\nkind: GpuPlan\nmetadata:\n  name: {}\ninventory:\n  pools:\n",
        spec.name
    );
    for p in &spec.pools {
        s.push_str(&format!(
            "    - name: {}\n      gpu: {}\n      gpusPerNode: {}\n",
            p.name, p.gpu, p.gpus_per_node
        ));
        if let Nodes::Named(names) = &p.nodes {
            s.push_str(&format!("      nodes: [{}]\n", names.join(", ")));
        }
        if let Some(c) = p.cost_per_gpu_hour {
            s.push_str(&format!("      costPerGpuHour: {c}\n"));
        }
    }
    s.push_str("models:\n");
    for m in &spec.models {
        let Demand::Replicas(n) = m.demand else { continue };
        s.push_str(&format!(
            "  - name: {}\n    image: {}\n    memory: {}MiB\n    compute: {}\n    replicas: {n}\n    isolation: {}\n    spread: {}\n",
            m.name,
            m.container.image,
            m.memory_mib,
            m.compute,
            match m.isolation {
                Isolation::Shared => "shared",
                Isolation::Hardware => "hardware",
                Isolation::Dedicated => "dedicated",
            },
            match m.spread {
                Spread::None => "none",
                Spread::Gpu => "gpu",
                Spread::Node => "node",
            },
        ));
        if let Some(g) = m.gpus {
            s.push_str(&format!("    gpus: {g}\n"));
        }
        if m.llm {
            s.push_str("    class: llm\n");
        }
        if !m.gpu_types.is_empty() {
            s.push_str(&format!("    gpuTypes: [{}]\n", m.gpu_types.join(", ")));
        }
    }
    s
}

/// Runs `gpuplan compile` (the binary in `GPUPLAN_BIN`, else `target/release/gpuplan`) and
/// returns its wall-clock time and exit code.
fn cli_compile(manifest: &std::path::Path, out: &std::path::Path, scratch: bool) -> (Duration, i32) {
    let bin = std::env::var("GPUPLAN_BIN").unwrap_or_else(|_| "target/release/gpuplan".to_owned());
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("compile").arg(manifest).arg("-o").arg(out).arg("--quiet");
    if scratch {
        cmd.arg("--from-scratch");
    }
    let t = Instant::now();
    let code = cmd.output().map_or(-1, |o| o.status.code().unwrap_or(-1));
    (t.elapsed(), code)
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        let _ =
            writeln!(std::io::stdout(), "replan benchmark: built; run it with `cargo bench --bench replan`");
        return ExitCode::SUCCESS;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    // `--cli`: time `gpuplan compile` over the previous output against `--from-scratch`, per
    // edit, through the binary (process start, reading, rendering and writing included).
    let cli = args.iter().any(|a| a == "--cli");
    let work = std::env::temp_dir().join(format!("gpuplan-replan-bench-{}", std::process::id()));
    let verbose = std::env::var_os("GPUPLAN_TRACE").is_some();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "| scenario | edits (infeasible, undone) | nodes re-partitioned per edit (median / max) | replicas moved (median / max) | GPUs above from-scratch (median / max) | $/h above from-scratch (median / max) | GPUs above from-scratch right after a node removal (max) | re-plan ÷ from-scratch time (median / max) | from-scratch (median) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for case in CASES.iter().filter(|c| filters.is_empty() || filters.iter().any(|f| c.name == f.as_str())) {
        let (mut spec, catalog) = fleet(case.gpus, case.models, 0x6461_7932, case.priced);
        let Ok(first) = plan::plan(&spec, &catalog) else {
            let _ = writeln!(out, "| {} | first plan failed | | | | | | | |", case.name);
            continue;
        };
        let mut prev_text = serde_json::to_string(&first).unwrap_or_default();
        let (manifest, out_dir, fresh_dir) =
            (work.join(format!("{}.yaml", case.name)), work.join(case.name), work.join("fresh"));
        if cli {
            let _ = std::fs::remove_dir_all(&work);
            let _ = std::fs::create_dir_all(&work);
            let _ = std::fs::write(&manifest, manifest_yaml(&spec));
            let (_, code) = cli_compile(&manifest, &out_dir, true);
            if code != 0 {
                let _ = writeln!(out, "| {} | first compile exited {code} | | | | | | | |", case.name);
                continue;
            }
        }
        let mut cli_ratio: Vec<f64> = Vec::new();
        let mut rng = SplitMix64(0x5eed ^ u64::from(case.gpus));
        let (mut nodes, mut moved, mut gpus, mut cost, mut ratio, mut scratch_t) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut after_removal: Vec<f64> = Vec::new();
        let mut undone = 0;
        let mut done = 0;
        let mut step = 0;
        while done < case.edits && step < case.edits * 3 {
            step += 1;
            let before = spec.clone();
            let what = edit(&mut spec, &mut rng, step);
            let t = Instant::now();
            let scratch = plan::plan(&spec, &catalog);
            let t_scratch = t.elapsed();
            let Ok(scratch) = scratch else {
                spec = before;
                undone += 1;
                continue;
            };
            let Ok(prev) = previous::parse(&prev_text) else { break };
            let t = Instant::now();
            let r = replan::replan(&spec, &catalog, &prev, replan::Options::default());
            let t_replan = t.elapsed();
            let Ok(r) = r else {
                spec = before;
                undone += 1;
                continue;
            };
            let facts = rollout::Facts::default();
            let ch = rollout::changes(&prev, &r.plan, &Default::default(), &facts);
            let drained = r.plan.pools.iter().flat_map(|p| &p.nodes).filter(|n| n.must_drain).count();
            nodes.push(drained as f64);
            moved.push(f64::from(ch.replicas_moved));
            let above = f64::from(r.plan.quality.gpus.used) - f64::from(scratch.quality.gpus.used);
            gpus.push(above);
            if what.contains(" removed") && what.starts_with("pool ") {
                after_removal.push(above);
            }
            if let (Some(a), Some(b)) = (r.plan.quality.cost.used, scratch.quality.cost.used) {
                cost.push(a - b);
            }
            ratio.push(t_replan.as_secs_f64() / t_scratch.as_secs_f64().max(1e-6));
            scratch_t.push(t_scratch.as_secs_f64());
            if verbose {
                let _ = writeln!(
                    std::io::stderr(),
                    "{} #{done}: {what}: {drained} node(s) re-partitioned, {} moved, {} vs {} GPUs, {:?} vs {:?}, {:?} vs {:?} per hour",
                    case.name,
                    ch.replicas_moved,
                    r.plan.quality.gpus.used,
                    scratch.quality.gpus.used,
                    t_replan,
                    t_scratch,
                    r.plan.quality.cost.used,
                    scratch.quality.cost.used
                );
            }
            if cli {
                let _ = std::fs::write(&manifest, manifest_yaml(&spec));
                let (t_re, c_re) = cli_compile(&manifest, &out_dir, false);
                let _ = std::fs::remove_dir_all(&fresh_dir);
                let (t_fs, c_fs) = cli_compile(&manifest, &fresh_dir, true);
                if c_re == 0 && c_fs == 0 {
                    cli_ratio.push(t_re.as_secs_f64() / t_fs.as_secs_f64().max(1e-6));
                }
                if verbose {
                    let _ = writeln!(
                        std::io::stderr(),
                        "{} #{done} cli: compile {t_re:?} (exit {c_re}) vs --from-scratch {t_fs:?} (exit {c_fs})",
                        case.name
                    );
                }
                // The CLI's own plan is the next edit's previous plan, as for a user.
                if let Ok(text) = std::fs::read_to_string(out_dir.join("plan.json")) {
                    prev_text = text;
                }
            } else {
                prev_text = serde_json::to_string(&r.plan).unwrap_or_default();
            }
            done += 1;
        }
        let pair = |v: &mut Vec<f64>, digits: usize| {
            let mx = max(v);
            format!("{:.d$} / {:.d$}", median(v), mx, d = digits)
        };
        let _ = writeln!(
            out,
            "| {} | {done} ({undone}) | {} | {} | {} | {} | {} | {} | {:?} |",
            case.name,
            pair(&mut nodes, 0),
            pair(&mut moved, 0),
            pair(&mut gpus, 0),
            if cost.is_empty() { "–".to_owned() } else { pair(&mut cost, 2) },
            if after_removal.is_empty() { "–".to_owned() } else { format!("{:.0}", max(&after_removal)) },
            pair(&mut ratio, 2),
            Duration::from_secs_f64(median(&mut scratch_t)),
        );
        if cli {
            let _ = writeln!(
                out,
                "| {} (CLI) | {} edits | `gpuplan compile` over the previous output ÷ `--from-scratch` (median / max): {} |",
                case.name,
                cli_ratio.len(),
                pair(&mut cli_ratio, 2)
            );
            let _ = std::fs::remove_dir_all(&work);
        }
        let _ = out.flush();
    }
    ExitCode::SUCCESS
}
