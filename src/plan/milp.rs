//! The optimiser: a small mixed-integer program over counts, solved with good_lp.
//!
//! In: a [`Problem`] (and optionally an upper bound from first-fit-decreasing). Out: per-pool
//! counts ([`PoolCounts`]: GPUs per MIG layout, exclusive and time-sliced whole GPUs, node
//! classes) and replica counts per (model, pool, option), or why no solution was found.
//!
//! Formulation (identical GPUs of a pool are interchangeable, so nothing is indexed by GPU):
//! - `y[m,o]` integer replicas of model `m` served by option `o`; fixed demand: `Σ_o y = n`;
//!   rate demand: `Σ_o rps_o·y ≥ rate`, `Σ_o y ≥ min_replicas`.
//! - `g[p,l]` GPUs of pool `p` with MIG layout `l`; supply per profile `q`:
//!   `Σ_m y[m,(p,q)] ≤ Σ_l count(l,q)·g[p,l]`.
//! - `w[p]` exclusive whole GPUs: `Σ_m n_m·y[m,(p,whole n)] ≤ w[p]`.
//! - `t[p,k]` time-sliced GPUs with k replicas: `Σ_m y[m,(p,ts k)] ≤ k·t[p,k]`.
//! - node classes (device-plugin sharing is per node and resource): `w ≤ gpn·zw`,
//!   `t_k ≤ gpn·zt_k`, `zw + Σ_k zt_k ≤ u`, all GPUs `≤ gpn·u`, `min ≤ u ≤ max nodes`;
//!   multi-GPU replicas of size ≥ n: at most `⌊gpn/n⌋·zw` of them.
//! - spread (necessary conditions; the decomposition enforces the rest): `gpu` — MIG replicas
//!   of a model ≤ MIG GPUs, time-sliced ones ≤ `t_k` and ≤ `zt_k` (one per node and shared
//!   resource: the device plugin picks the GPU); `node` — replicas in a pool ≤ `u`,
//!   whole ≤ `zw`, time-sliced ≤ `zt_k` and ≤ `t_k`, MIG ≤ MIG GPUs.
//! - objective, lexicographic through weights: cost (GPUs × relative price) × 1000, then one
//!   per distinct layout/sharing config in use, then GPUs whose current layout changes, then nodes.

use std::collections::{BTreeMap, HashMap};

use good_lp::{Constraint, Expression, ProblemVariables, SolverModel, Variable, constraint, variable};

use crate::plan::assign::PoolCounts;
use crate::plan::problem::{Kind, Need, Opt, Problem};
use crate::spec::Spread;

/// Whether the objective counts distinct configs (needs binaries; HiGHS only).
const WITH_CONFIG_COUNT: bool = cfg!(feature = "highs");

/// Column groups above which a program is *large*: the distinct-configs level (a big-M binary
/// per config variable) is left out and the relative gap is [`LARGE_RELATIVE_GAP`]. On the
/// 1,000-GPU benchmark fleet (200 models) those binaries cost HiGHS most of its time in
/// root heuristics while the cost was settled at the first good incumbent.
const LARGE_ABOVE_COLUMNS: usize = 60;

/// Relative gap of large programs: the cost is within 0.2% of the proven bound (well inside
/// the 2% quality target) instead of within half of the cheapest GPU.
pub(crate) const LARGE_RELATIVE_GAP: f64 = 0.002;

/// Whether the program for this problem is *large* (see [`LARGE_ABOVE_COLUMNS`]).
pub(crate) fn is_large(problem: &Problem<'_>) -> bool {
    columns(problem).len() > LARGE_ABOVE_COLUMNS
}

/// What to optimise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Goal {
    /// The real plan: integers, full objective, optional upper bound on the weighted cost.
    Plan { cost_bound: Option<f64>, gpu_floor: Option<f64> },
    /// The LP relaxation, minimising GPUs: a lower bound.
    Bound,
    /// The LP relaxation, minimising the weighted cost (GPUs × relative price), with every
    /// plan's GPU lower bound as a cut: a lower bound on cost.
    CostBound { gpu_floor: Option<f64> },
    /// Capacity relaxed by extra nodes per pool; minimise the GPUs added (its LP relaxation
    /// when not `integer`: the fallback when the integer program stops without a solution).
    Extend { integer: bool },
}

#[derive(Clone, Debug, Default)]
pub(crate) struct MilpResult {
    pub counts: Vec<PoolCounts>,
    pub replicas: BTreeMap<(usize, usize, Kind), u32>,
    /// Objective value (GPUs for `Bound`).
    pub objective: f64,
    /// Extra nodes per pool (`Extend`).
    pub extra_nodes: Vec<u64>,
    /// Whether the solver proved optimality.
    pub optimal: bool,
    /// Unrounded replicas of single-model columns (rate and spread models), for LP rounding.
    pub fractional: BTreeMap<(usize, usize, Kind), f64>,
    /// The weighted cost (GPUs × relative price) of the solution.
    pub cost: f64,
}

/// Why a solve may end unproven, for the plan's reasons.
#[cfg(feature = "highs")]
pub(crate) const UNPROVEN_WHY: &str = "HiGHS stopped at its node limit or a relative gap, or solved a program with the relaxation's choices rounded and pinned";
#[cfg(not(feature = "highs"))]
pub(crate) const UNPROVEN_WHY: &str = "microlp stopped at its node limit or a relative gap, or solved a program with the relaxation's choices rounded and pinned";

/// Replica counts to impose, per (model, pool, kind); models absent are free.
pub(crate) type Pins = BTreeMap<(usize, usize, Kind), u32>;

#[derive(Debug)]
pub(crate) enum MilpError {
    Infeasible,
    Solver(String),
}

struct PoolVars {
    g: Vec<Variable>,
    w: Option<Variable>,
    t: BTreeMap<u32, Variable>,
    zw: Option<Variable>,
    zt: BTreeMap<u32, Variable>,
    /// GPUs cut into instances of one profile, time-sliced with k, and their nodes.
    tm: BTreeMap<(usize, u32), Variable>,
    zm: BTreeMap<(usize, u32), Variable>,
    u: Variable,
    extra: Option<Variable>,
}

/// A column group of the program: one rate model, one spread model, or all fixed-demand models
/// that share exactly the same options (their replicas are interchangeable, so one set of
/// integer variables serves them all; this keeps the program small for thousands of models).
struct Col<'p> {
    members: Vec<usize>,
    need: Need,
    options: &'p [Opt],
    spread: Spread,
}

fn columns<'p>(problem: &'p Problem<'_>) -> Vec<Col<'p>> {
    let mut cols: Vec<Col<'p>> = Vec::new();
    let mut by_key: BTreeMap<Vec<(usize, Kind)>, usize> = BTreeMap::new();
    for (mi, m) in problem.models.iter().enumerate() {
        // Only models that need a replica count and spread nothing share a column.
        let n = match m.need {
            Need::Replicas(n) if m.spec.spread == Spread::None => n,
            _ => {
                cols.push(Col {
                    members: vec![mi],
                    need: m.need.clone(),
                    options: &m.options,
                    spread: m.spec.spread,
                });
                continue;
            }
        };
        let key: Vec<(usize, Kind)> = m.options.iter().map(|o| (o.pool, o.kind)).collect();
        match by_key.get(&key) {
            Some(&ci) => {
                if let Some(c) = cols.get_mut(ci) {
                    c.members.push(mi);
                    if let Need::Replicas(total) = &mut c.need {
                        *total += n;
                    }
                }
            }
            None => {
                by_key.insert(key, cols.len());
                cols.push(Col {
                    members: vec![mi],
                    need: m.need.clone(),
                    options: &m.options,
                    spread: Spread::None,
                });
            }
        }
    }
    cols
}

/// Splits a column's replica counts per option among its member models: each model, largest
/// first, takes the option with the least room that still holds all its replicas (so that most
/// models get a single resource), else fills options in order.
fn disaggregate(problem: &Problem<'_>, col: &Col<'_>, counts: &[u32]) -> Vec<(usize, usize, u32)> {
    if col.members.len() == 1 {
        return col
            .members
            .iter()
            .flat_map(|&m| counts.iter().enumerate().map(move |(oi, &n)| (m, oi, n)))
            .collect();
    }
    let mut left = counts.to_vec();
    let mut members: Vec<(usize, u32)> = col
        .members
        .iter()
        .map(|&m| {
            (m, if let Some(Need::Replicas(n)) = problem.models.get(m).map(|x| &x.need) { *n } else { 0 })
        })
        .collect();
    members.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut out = Vec::new();
    for (m, need) in members {
        let fit = (0..left.len()).filter(|&oi| left[oi] >= need).min_by_key(|&oi| (left[oi], oi));
        if let Some(oi) = fit {
            left[oi] -= need;
            out.push((m, oi, need));
            continue;
        }
        let mut rest = need;
        for (oi, l) in left.iter_mut().enumerate() {
            if rest == 0 {
                break;
            }
            let take = rest.min(*l);
            if take > 0 {
                *l -= take;
                rest -= take;
                out.push((m, oi, take));
            }
        }
    }
    out
}

/// Builds and solves the program.
pub(crate) fn solve(problem: &Problem<'_>, goal: Goal, pins: &Pins) -> Result<MilpResult, MilpError> {
    let integer = match goal {
        Goal::Bound | Goal::CostBound { .. } => false,
        Goal::Extend { integer } => integer,
        Goal::Plan { .. } => true,
    };
    let cols = columns(problem);
    let large = cols.len() > LARGE_ABOVE_COLUMNS;
    let mut vars = ProblemVariables::new();
    let mut cons: Vec<Constraint> = Vec::new();
    let mut objective = Expression::from(0.0);
    let total_current: f64 =
        problem.pools.iter().map(|p| p.spec.current.iter().map(|n| n.gpus.len()).sum::<usize>() as f64).sum();
    let total_nodes: f64 = problem.pools.iter().map(|p| f64::from(p.max_nodes)).sum();
    let stability_w = 0.5 / (1.0 + total_current);
    let node_w = stability_w / (2.0 * (1.0 + total_nodes));
    // Last tie-break: the smallest device that serves a replica (it leaves room to grow), and a
    // MIG instance or whole GPU before a time-slice (isolation) when the cost is the same.
    let total_replicas: f64 = problem
        .models
        .iter()
        .map(|m| match m.need {
            Need::Replicas(n) => f64::from(n),
            Need::Rate { rps, min_replicas } => {
                let best = m.options.iter().filter_map(|o| o.rps).fold(0.0, f64::max);
                if best > 0.0 { (rps / best).ceil().max(f64::from(min_replicas)) } else { 0.0 }
            }
        })
        .sum();
    let tie_w = node_w / (4.0 * (1.0 + total_replicas));

    let int = |d: good_lp::VariableDefinition| if integer { d.integer() } else { d };

    // Replica variables.
    let mut y: Vec<Vec<Variable>> = Vec::new();
    for mc in &cols {
        let mut row = Vec::new();
        for o in mc.options {
            let ub = match mc.need {
                Need::Replicas(n) => f64::from(n),
                Need::Rate { rps, min_replicas } => {
                    let per = o.rps.unwrap_or(0.0);
                    if per > 0.0 { (rps / per).ceil() + f64::from(min_replicas) } else { 0.0 }
                }
            };
            row.push(vars.add(int(variable().min(0).max(ub))));
        }
        y.push(row);
    }

    // Pool variables.
    let mut pv: Vec<PoolVars> = Vec::new();
    for (pi, p) in problem.pools.iter().enumerate() {
        let cap = p.capacity_gpus() as f64;
        let unbounded = matches!(goal, Goal::Extend { .. });
        let gcap = if unbounded { f64::INFINITY } else { cap };
        let ncap = if unbounded { f64::INFINITY } else { f64::from(p.max_nodes) };
        let count = |max: f64| int(variable().min(0).max(max));
        let kinds: Vec<Kind> =
            cols.iter().flat_map(|m| m.options.iter()).filter(|o| o.pool == pi).map(|o| o.kind).collect();
        let any_mig = kinds.iter().any(|k| matches!(k, Kind::Mig(_)));
        let g: Vec<Variable> =
            if any_mig { p.layouts.iter().map(|_| vars.add(count(gcap))).collect() } else { Vec::new() };
        let any_whole = kinds.iter().any(|k| matches!(k, Kind::Whole(_)));
        let w = any_whole.then(|| vars.add(count(gcap)));
        let zw = any_whole.then(|| vars.add(count(ncap)));
        let mut t = BTreeMap::new();
        let mut zt = BTreeMap::new();
        for &kind in &kinds {
            if let Kind::TimeSliced(k) = kind
                && !t.contains_key(&k)
            {
                t.insert(k, vars.add(count(gcap)));
                zt.insert(k, vars.add(count(ncap)));
            }
        }
        let mut tm = BTreeMap::new();
        let mut zm = BTreeMap::new();
        for &kind in &kinds {
            if let Kind::MigTs(q, k) = kind
                && !tm.contains_key(&(q, k))
            {
                tm.insert((q, k), vars.add(count(gcap)));
                zm.insert((q, k), vars.add(count(ncap)));
            }
        }
        let extra = unbounded.then(|| vars.add(int(variable().min(0))));
        let u = vars.add(int(variable().min(f64::from(p.min_nodes)).max(ncap)));
        pv.push(PoolVars { g, w, t, zw, zt, tm, zm, u, extra });
    }

    // Pinned replica counts (LP rounding).
    for (ci, col) in cols.iter().enumerate() {
        if let [m] = col.members[..]
            && pins.keys().any(|k| k.0 == m)
        {
            for (oi, o) in col.options.iter().enumerate() {
                let n = f64::from(pins.get(&(m, o.pool, o.kind)).copied().unwrap_or(0));
                let yv = y[ci][oi];
                cons.push(constraint!(yv == n));
            }
        }
    }
    // Demand.
    for (mi, mc) in cols.iter().enumerate() {
        if matches!(goal, Goal::Plan { .. }) {
            for (oi, o) in mc.options.iter().enumerate() {
                // Exclusive devices first; among shared ones a MIG time-slice (memory isolated
                // from other instances) before a time-sliced whole GPU.
                let shared = match o.kind {
                    Kind::TimeSliced(_) => 1.0,
                    Kind::MigTs(..) => 0.5,
                    _ => 0.0,
                };
                objective += tie_w * (o.size + shared) * y[mi][oi];
            }
        }
        let sum: Expression = y[mi].iter().copied().sum();
        match mc.need {
            Need::Replicas(n) => cons.push(constraint!(sum == f64::from(n))),
            Need::Rate { rps, min_replicas } => {
                let mut cover = Expression::from(0.0);
                for (oi, o) in mc.options.iter().enumerate() {
                    cover += o.rps.unwrap_or(0.0) * y[mi][oi];
                }
                cons.push(constraint!(cover >= rps));
                cons.push(constraint!(sum >= f64::from(min_replicas)));
            }
        }
    }

    // Supply, node classes, spread, objective per pool.
    let mut bound_gpus = Expression::from(0.0);
    let mut cost_expr = Expression::from(0.0);
    for (pi, p) in problem.pools.iter().enumerate() {
        let v = &pv[pi];
        let gpn = f64::from(p.gpn);
        let big = p.capacity_gpus() as f64;
        let mut gpus = Expression::from(0.0);
        for &g in &v.g {
            gpus += g;
        }
        if let Some(w) = v.w {
            gpus += w;
        }
        for &t in v.t.values() {
            gpus += t;
        }
        // MIG supply per profile.
        if !v.g.is_empty() {
            for q in 0..p.profiles.len() {
                let mut demand = Expression::from(0.0);
                let mut any = false;
                for (mi, mc) in cols.iter().enumerate() {
                    for (oi, o) in mc.options.iter().enumerate() {
                        if o.pool == pi && o.kind == Kind::Mig(q) {
                            demand += y[mi][oi];
                            any = true;
                        }
                    }
                }
                if any {
                    let mut supply = Expression::from(0.0);
                    for (l, layout) in p.layouts.iter().enumerate() {
                        let c = layout.counts.get(q).copied().unwrap_or(0);
                        if c > 0 {
                            supply += f64::from(c) * v.g[l];
                        }
                    }
                    cons.push(constraint!(demand <= supply));
                }
            }
        }
        // Whole GPUs and multi-GPU packing.
        if let (Some(w), Some(zw)) = (v.w, v.zw) {
            let mut demand = Expression::from(0.0);
            let mut sizes: Vec<u32> = Vec::new();
            for (mi, mc) in cols.iter().enumerate() {
                for (oi, o) in mc.options.iter().enumerate() {
                    if o.pool == pi
                        && let Kind::Whole(n) = o.kind
                    {
                        demand += f64::from(n) * y[mi][oi];
                        if n > 1 && !sizes.contains(&n) {
                            sizes.push(n);
                        }
                    }
                }
            }
            cons.push(constraint!(demand <= w));
            cons.push(constraint!(w <= gpn * zw));
            for &n in &sizes {
                let mut big_ones = Expression::from(0.0);
                for (mi, mc) in cols.iter().enumerate() {
                    for (oi, o) in mc.options.iter().enumerate() {
                        if o.pool == pi && matches!(o.kind, Kind::Whole(s) if s >= n) {
                            big_ones += y[mi][oi];
                        }
                    }
                }
                cons.push(constraint!(big_ones <= f64::from(p.gpn / n) * zw));
            }
        }
        for (&k, &t) in &v.t {
            let mut demand = Expression::from(0.0);
            for (mi, mc) in cols.iter().enumerate() {
                for (oi, o) in mc.options.iter().enumerate() {
                    if o.pool == pi && o.kind == Kind::TimeSliced(k) {
                        demand += y[mi][oi];
                    }
                }
            }
            cons.push(constraint!(demand <= f64::from(k) * t));
            if let Some(&z) = v.zt.get(&k) {
                cons.push(constraint!(t <= gpn * z));
            }
        }
        // MIG time-slicing nodes hold only their own GPUs; every other GPU fits on the rest.
        let mut mig_ts_nodes = Expression::from(0.0);
        for (&(q, k), &tmv) in &v.tm {
            let mut demand = Expression::from(0.0);
            for (mi, mc) in cols.iter().enumerate() {
                for (oi, o) in mc.options.iter().enumerate() {
                    if o.pool == pi && o.kind == Kind::MigTs(q, k) {
                        demand += y[mi][oi];
                    }
                }
            }
            let slots = f64::from(k) * f64::from(p.homogeneous.get(q).copied().unwrap_or(0));
            cons.push(constraint!(demand <= slots * tmv));
            if let Some(&z) = v.zm.get(&(q, k)) {
                cons.push(constraint!(tmv <= gpn * z));
                mig_ts_nodes += z;
            }
        }
        let mut classes = Expression::from(0.0);
        if let Some(zw) = v.zw {
            classes += zw;
        }
        for &z in v.zt.values() {
            classes += z;
        }
        classes += mig_ts_nodes.clone();
        cons.push(constraint!(classes <= v.u));
        cons.push(constraint!(gpus.clone() <= gpn * v.u - gpn * mig_ts_nodes));
        for &tmv in v.tm.values() {
            gpus += tmv;
        }
        if let Some(e) = v.extra {
            cons.push(constraint!(v.u <= f64::from(p.max_nodes) + e));
            objective += gpn * p.weight * e;
        }
        // Spread.
        for (mi, mc) in cols.iter().enumerate() {
            let in_pool: Vec<usize> = (0..mc.options.len()).filter(|&oi| mc.options[oi].pool == pi).collect();
            if in_pool.is_empty() {
                continue;
            }
            match mc.spread {
                Spread::None => {}
                // Distinct GPUs (`gpu`) or nodes (`node`, which are distinct GPUs too).
                Spread::Gpu | Spread::Node => {
                    let by_node = mc.spread == Spread::Node;
                    let mut all = Expression::from(0.0);
                    let mut mig = Expression::from(0.0);
                    let mut mig_opts: Vec<(usize, Variable)> = Vec::new();
                    for &oi in &in_pool {
                        let yv = y[mi][oi];
                        all += yv;
                        // Time-sliced (whole or MIG): at most one replica per node of that
                        // class, as the device plugin picks the GPU behind a shared resource,
                        // and at most one per such GPU. Whole GPUs: one per node under `node`.
                        // Row order (GPUs then nodes for `gpu`, nodes then GPUs for `node`)
                        // is kept as it was: it steers HiGHS, and swapping it made the
                        // 1,000-GPU benchmark fleet three times slower.
                        let ordered = |gpus: Option<Variable>, nodes: Option<Variable>| {
                            if by_node { [nodes, gpus] } else { [gpus, nodes] }
                        };
                        let caps: [Option<Variable>; 2] = match mc.options[oi].kind {
                            Kind::Mig(q) => {
                                mig += yv;
                                mig_opts.push((q, yv));
                                [None, None]
                            }
                            Kind::TimeSliced(k) => ordered(v.t.get(&k).copied(), v.zt.get(&k).copied()),
                            Kind::MigTs(q, k) => {
                                ordered(v.tm.get(&(q, k)).copied(), v.zm.get(&(q, k)).copied())
                            }
                            Kind::Whole(_) => [if by_node { v.zw } else { None }, None],
                        };
                        for cap in caps.into_iter().flatten() {
                            cons.push(constraint!(yv <= cap));
                        }
                    }
                    if by_node {
                        cons.push(constraint!(all <= v.u));
                    }
                    if !mig_opts.is_empty() {
                        let mut mig_gpus = Expression::from(0.0);
                        for &g in &v.g {
                            mig_gpus += g;
                        }
                        cons.push(constraint!(mig <= mig_gpus));
                        cons.extend(distinct_gpu_cuts(&p.layouts, &v.g, &mig_opts, !large));
                    }
                }
            }
        }
        bound_gpus += gpus.clone();
        cost_expr += p.weight * gpus.clone();
        match goal {
            Goal::Bound | Goal::CostBound { .. } => {}
            Goal::Extend { .. } => {
                objective += 1e-3 * gpus.clone();
            }
            Goal::Plan { .. } => {
                objective += 1000.0 * p.weight * gpus.clone();
                objective += node_w * v.u;
                // Distinct configs in use.
                let config = |x: Variable,
                              vars: &mut ProblemVariables,
                              cons: &mut Vec<Constraint>,
                              obj: &mut Expression| {
                    let b = vars.add(variable().binary());
                    cons.push(constraint!(x <= big * b));
                    *obj += b;
                };
                // The pure-Rust fallback's branch and bound does not cope with these big-M
                // binaries; it plans without this objective level (documented in docs/planner.md).
                if WITH_CONFIG_COUNT && !large {
                    for &g in &v.g {
                        config(g, &mut vars, &mut cons, &mut objective);
                    }
                    if let Some(w) = v.w {
                        config(w, &mut vars, &mut cons, &mut objective);
                    }
                    for &t in v.t.values().chain(v.tm.values()) {
                        config(t, &mut vars, &mut cons, &mut objective);
                    }
                }
                // Stability: GPUs whose current MIG layout is no longer planned.
                if !v.g.is_empty() {
                    let mut current: BTreeMap<usize, u32> = BTreeMap::new();
                    for node in &p.spec.current {
                        for names in node.gpus.iter().filter(|n| !n.is_empty()) {
                            if let Some(l) = crate::plan::layouts::from_names(p.gpu, &p.profiles, names)
                                .and_then(|l| p.layouts.iter().position(|x| x.counts == l.counts))
                            {
                                *current.entry(l).or_insert(0) += 1;
                            }
                        }
                    }
                    for (l, c) in current {
                        let d = vars.add(variable().min(0));
                        let g = v.g[l];
                        cons.push(constraint!(d >= f64::from(c) - g));
                        objective += stability_w * d;
                    }
                }
            }
        }
    }
    if let Goal::Plan { cost_bound: Some(b), .. } = goal {
        cons.push(constraint!(cost_expr.clone() <= b + 1e-6));
    }
    // The rounded-up LP bound as a cut: the root relaxation then proves a plan with that many
    // GPUs optimal at once, instead of branching to close a fractional gap.
    if let Goal::Plan { gpu_floor: Some(f), .. } | Goal::CostBound { gpu_floor: Some(f) } = goal
        && f > 0.0
    {
        cons.push(constraint!(bound_gpus.clone() >= f));
    }
    match goal {
        Goal::Bound => objective = bound_gpus,
        Goal::CostBound { .. } => objective = cost_expr,
        Goal::Plan { .. } | Goal::Extend { .. } => {}
    }

    let mut all_vars: Vec<Variable> = Vec::new();
    for row in &y {
        all_vars.extend(row.iter().copied());
    }
    // Size of the objective in GPUs, so that a relative gap can be kept below one GPU.
    // The objective is at most 1000 × the cost bound (+1 for the lower levels).
    let scale = match goal {
        Goal::Plan { cost_bound: Some(b), .. } => b + 1.0,
        Goal::Plan { .. } => {
            problem.pools.iter().map(|p| p.capacity_gpus() as f64 * p.weight).sum::<f64>() + 1.0
        }
        Goal::Bound | Goal::CostBound { .. } | Goal::Extend { .. } => 0.0,
    };
    let (values, optimal, gap) = run(vars, objective, cons, scale, large)?;
    // Proven only for the program as solved (pinned programs prove nothing for the full model;
    // the caller knows). A gap below half a GPU's weight proves the GPU count, which is the cost
    // only when every GPU weighs the same (unpriced); on priced pools only a zero gap proves it.
    let widened = gap > relative_gap(scale);
    let optimal = optimal && !widened && (problem.unit_price.is_none() || gap == 0.0);
    let val = |v: Variable| values.get(&v).copied().unwrap_or(0.0);
    let round = |x: f64| if x <= 0.0 { 0 } else { x.round() as u64 };
    let mut res = MilpResult { optimal, ..Default::default() };
    res.objective = {
        let mut total = 0.0;
        for (pi, _) in problem.pools.iter().enumerate() {
            let v = &pv[pi];
            total += v.g.iter().map(|&g| val(g)).sum::<f64>();
            total += v.w.map_or(0.0, val);
            total += v.t.values().chain(v.tm.values()).map(|&t| val(t)).sum::<f64>();
        }
        total
    };
    for (pi, _) in problem.pools.iter().enumerate() {
        let v = &pv[pi];
        res.counts.push(PoolCounts {
            layouts: v.g.iter().map(|&g| round(val(g))).collect(),
            ts: v.t.iter().map(|(&k, &t)| (k, round(val(t)))).collect(),
            whole_nodes: v.zw.map_or(0, |z| round(val(z))),
            ts_nodes: v.zt.iter().map(|(&k, &z)| (k, round(val(z)))).collect(),
            mig_ts: v.tm.iter().map(|(&k, &t)| (k, round(val(t)))).collect(),
            mig_ts_nodes: v.zm.iter().map(|(&k, &z)| (k, round(val(z)))).collect(),
            nodes: round(val(v.u)),
        });
        // A relaxation's fractional nodes round up (the confirmation in `infeasible` grows them).
        let ceil = |x: f64| if x <= 1e-6 { 0 } else { (x - 1e-6).ceil() as u64 };
        res.extra_nodes.push(v.extra.map_or(0, |e| if integer { round(val(e)) } else { ceil(val(e)) }));
    }
    for (pi, p) in problem.pools.iter().enumerate() {
        let v = &pv[pi];
        let gpus = v.g.iter().map(|&g| val(g)).sum::<f64>()
            + v.w.map_or(0.0, val)
            + v.t.values().chain(v.tm.values()).map(|&t| val(t)).sum::<f64>();
        res.cost += p.weight * gpus;
    }
    for (ci, col) in cols.iter().enumerate() {
        if let [m] = col.members[..] {
            for (oi, o) in col.options.iter().enumerate() {
                *res.fractional.entry((m, o.pool, o.kind)).or_insert(0.0) += val(y[ci][oi]);
            }
        }
        let counts: Vec<u32> = (0..col.options.len())
            .map(|oi| u32::try_from(round(val(y[ci][oi]))).unwrap_or(u32::MAX))
            .collect();
        for (mi, oi, n) in disaggregate(problem, col, &counts) {
            if n > 0
                && let Some(o) = col.options.get(oi)
            {
                *res.replicas.entry((mi, o.pool, o.kind)).or_insert(0) += n;
            }
        }
    }
    Ok(res)
}

/// Profiles of one model's MIG options above which [`distinct_gpu_cuts`] keeps only single
/// profiles (2^n subsets would make the program too large). Large programs keep only single
/// profiles too: on the 1,000-GPU benchmark fleet every subset made HiGHS ten times slower.
const HALL_MAX_PROFILES: usize = 8;

/// Hall's condition for one model's MIG replicas that must sit on distinct GPUs (`spread: gpu`,
/// and `spread: node`, whose distinct nodes are distinct GPUs): for every set S of the profiles
/// it uses in the pool, its replicas on S are at most the GPUs whose layout has a profile of S.
/// Per-profile bounds alone let, say, ten GPUs with one `1g` and one `2g` instance each take
/// eighteen replicas. For one model alone these conditions are exact (Hall's theorem). Only
/// the largest S per set of holding layouts is kept: it implies the others.
fn distinct_gpu_cuts(
    layouts: &[crate::plan::layouts::Layout],
    g: &[Variable],
    opts: &[(usize, Variable)],
    all_subsets: bool,
) -> Vec<Constraint> {
    let n = opts.len();
    let subsets: Vec<u32> = if all_subsets && n <= HALL_MAX_PROFILES {
        (1..(1u32 << n)).collect()
    } else {
        (0..n).map(|i| 1u32 << i).collect()
    };
    let mut by_holders: BTreeMap<Vec<usize>, u32> = BTreeMap::new();
    for s in subsets {
        let holders: Vec<usize> = (0..layouts.len().min(g.len()))
            .filter(|&l| {
                opts.iter()
                    .enumerate()
                    .any(|(i, &(q, _))| s & (1 << i) != 0 && layouts[l].counts.get(q).is_some_and(|&c| c > 0))
            })
            .collect();
        *by_holders.entry(holders).or_insert(0) |= s;
    }
    by_holders
        .into_iter()
        .map(|(holders, s)| {
            let mut lhs = Expression::from(0.0);
            for (i, &(_, yv)) in opts.iter().enumerate() {
                if s & (1 << i) != 0 {
                    lhs += yv;
                }
            }
            let mut rhs = Expression::from(0.0);
            for l in holders {
                rhs += g[l];
            }
            constraint!(lhs <= rhs)
        })
        .collect()
}

/// Solves with the selected backend and returns every variable's value, whether the solver
/// proved optimality (within the relative gap) and that gap.
fn run(
    vars: ProblemVariables,
    objective: Expression,
    cons: Vec<Constraint>,
    scale: f64,
    large: bool,
) -> Result<(HashMap<Variable, f64>, bool, f64), MilpError> {
    let handles: Vec<Variable> = vars.iter_variables_with_def().map(|(v, _)| v).collect();
    // Small programs are solved exactly, tie-breaks included, so that both solvers agree on
    // them (the seed's plan is the same bytes with either).
    let gap = if handles.len() <= EXACT_BELOW_VARIABLES {
        0.0
    } else if large && scale > 0.0 {
        relative_gap(scale).max(LARGE_RELATIVE_GAP)
    } else {
        relative_gap(scale)
    };
    let unsolved = vars.minimise(objective);
    #[cfg(feature = "highs")]
    {
        use good_lp::Solution as _;
        // Deterministic: one thread, fixed seed, no time limit; a node limit (not a clock)
        // bounds the search the same way on every machine. The relative gap keeps the cost
        // exact (it is below half a GPU's weight) and lets the search stop before proving the
        // lower objective levels optimal.
        let mut m = unsolved
            .using(good_lp::solvers::highs::highs)
            .set_threads(1)
            .set_option("random_seed", 0)
            .set_option("mip_rel_gap", gap)
            .set_option("mip_abs_gap", 1e-6)
            .set_option("mip_max_nodes", HIGHS_NODE_LIMIT)
            .set_option("output_flag", false);
        for c in cons {
            m.add_constraint(c);
        }
        match m.solve() {
            Ok(sol) => {
                // `GapLimit` is HiGHS stopping with an optimal status inside the relative gap
                // asked for, not cut short by a limit: below half a GPU's weight the cost is
                // proven optimal; a large program's wider gap proves it only to that gap.
                let optimal = match sol.status() {
                    good_lp::solvers::SolutionStatus::Optimal => true,
                    good_lp::solvers::SolutionStatus::GapLimit => !large,
                    good_lp::solvers::SolutionStatus::TimeLimit => false,
                };
                Ok((handles.into_iter().map(|v| (v, sol.value(v))).collect(), optimal, gap))
            }
            Err(good_lp::ResolutionError::Infeasible) => Err(MilpError::Infeasible),
            Err(e) => Err(MilpError::Solver(e.to_string())),
        }
    }
    #[cfg(not(feature = "highs"))]
    {
        let mut m = unsolved.using(good_lp::solvers::microlp::microlp);
        for c in cons {
            m.add_constraint(c);
        }
        // microlp is called directly for its node limit (good_lp only exposes a clock limit).
        // The relative gap keeps the cost exact (one GPU weighs 1000 in an objective of about
        // 1000 × GPUs) and lets the solver stop before proving the tie-breaks optimal.
        let mut options = microlp::SolveOptions::default();
        options.node_limit = Some(MICROLP_NODE_LIMIT);
        options.mip_gap = gap;
        match m.as_inner().solve_with(options) {
            Ok(outcome) => {
                let optimal = outcome.is_optimal();
                match outcome.into_solution() {
                    Ok(sol) => {
                        let values: Vec<f64> = sol.iter().map(|(_, v)| v).collect();
                        let map = handles
                            .into_iter()
                            .enumerate()
                            .map(|(i, v)| (v, values.get(i).copied().unwrap_or(0.0)))
                            .collect();
                        Ok((map, optimal, gap))
                    }
                    Err(_) => {
                        Err(MilpError::Solver("node limit reached before a feasible solution".to_owned()))
                    }
                }
            }
            Err(microlp::Error::Infeasible) => Err(MilpError::Infeasible),
            Err(e) => Err(MilpError::Solver(e.to_string())),
        }
    }
}

/// A relative MIP gap below half a GPU's weight (1000 per GPU in an objective of at most
/// 1000 × `scale`), so that the number of GPUs is exact.
fn relative_gap(scale: f64) -> f64 {
    if scale > 0.0 { (0.4 / scale).min(0.01) } else { 0.0 }
}

/// Programs with at most this many variables are solved with a zero gap.
const EXACT_BELOW_VARIABLES: usize = 120;

/// Branch-and-bound nodes HiGHS may explore.
#[cfg(feature = "highs")]
const HIGHS_NODE_LIMIT: i32 = 50_000;

/// Branch-and-bound nodes the pure-Rust fallback may explore.
#[cfg(not(feature = "highs"))]
const MICROLP_NODE_LIMIT: u64 = 5_000;
