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
//!   of a model ≤ MIG GPUs, time-sliced ones ≤ `t_k`; `node` — replicas in a pool ≤ `u`,
//!   whole ≤ `zw`, time-sliced ≤ `zt_k`.
//! - objective, lexicographic through weights: cost (GPUs × relative price) × 1000, then one
//!   per distinct layout/sharing config in use, then GPUs whose current layout changes, then nodes.

use std::collections::{BTreeMap, HashMap};

use good_lp::{
    Constraint, Expression, ProblemVariables, Solution, SolverModel, Variable, constraint, variable,
};

use crate::plan::assign::PoolCounts;
use crate::plan::problem::{Kind, Need, Problem};
use crate::spec::Spread;

/// What to optimise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Goal {
    /// The real plan: integers, full objective, optional upper bound on the weighted cost.
    Plan { cost_bound: Option<f64> },
    /// The LP relaxation, minimising GPUs: a lower bound.
    Bound,
    /// Capacity relaxed by extra nodes per pool; minimise the GPUs added.
    Extend,
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
}

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
    u: Variable,
    extra: Option<Variable>,
}

/// Builds and solves the program.
pub(crate) fn solve(problem: &Problem<'_>, goal: Goal) -> Result<MilpResult, MilpError> {
    let integer = goal != Goal::Bound;
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
    for mc in &problem.models {
        let mut row = Vec::new();
        for o in &mc.options {
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
        let unbounded = goal == Goal::Extend;
        let gcap = if unbounded { f64::INFINITY } else { cap };
        let has = |f: &dyn Fn(Kind) -> bool| {
            problem.models.iter().any(|m| m.options.iter().any(|o| o.pool == pi && f(o.kind)))
        };
        let any_mig = has(&|k| matches!(k, Kind::Mig(_)));
        let g: Vec<Variable> = if any_mig {
            p.layouts.iter().map(|_| vars.add(int(variable().min(0).max(gcap)))).collect()
        } else {
            Vec::new()
        };
        let any_whole = has(&|k| matches!(k, Kind::Whole(_)));
        let w = any_whole.then(|| vars.add(int(variable().min(0).max(gcap))));
        let zw = any_whole.then(|| {
            vars.add(int(variable().min(0).max(if unbounded {
                f64::INFINITY
            } else {
                f64::from(p.max_nodes)
            })))
        });
        let mut t = BTreeMap::new();
        let mut zt = BTreeMap::new();
        for m in &problem.models {
            for o in &m.options {
                if o.pool == pi
                    && let Kind::TimeSliced(k) = o.kind
                    && !t.contains_key(&k)
                {
                    t.insert(k, vars.add(int(variable().min(0).max(gcap))));
                    zt.insert(
                        k,
                        vars.add(int(variable().min(0).max(if unbounded {
                            f64::INFINITY
                        } else {
                            f64::from(p.max_nodes)
                        }))),
                    );
                }
            }
        }
        let extra = unbounded.then(|| vars.add(int(variable().min(0))));
        let u = vars.add(int(variable().min(f64::from(p.min_nodes)).max(if unbounded {
            f64::INFINITY
        } else {
            f64::from(p.max_nodes)
        })));
        pv.push(PoolVars { g, w, t, zw, zt, u, extra });
    }

    // Demand.
    for (mi, mc) in problem.models.iter().enumerate() {
        if matches!(goal, Goal::Plan { .. }) {
            for (oi, o) in mc.options.iter().enumerate() {
                let shared = if matches!(o.kind, Kind::TimeSliced(_)) { 1.0 } else { 0.0 };
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
                for (mi, mc) in problem.models.iter().enumerate() {
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
            for (mi, mc) in problem.models.iter().enumerate() {
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
                for (mi, mc) in problem.models.iter().enumerate() {
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
            for (mi, mc) in problem.models.iter().enumerate() {
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
        let mut classes = Expression::from(0.0);
        if let Some(zw) = v.zw {
            classes += zw;
        }
        for &z in v.zt.values() {
            classes += z;
        }
        cons.push(constraint!(classes <= v.u));
        cons.push(constraint!(gpus.clone() <= gpn * v.u));
        if let Some(e) = v.extra {
            cons.push(constraint!(v.u <= f64::from(p.max_nodes) + e));
            objective += gpn * p.weight * e;
        }
        // Spread.
        for (mi, mc) in problem.models.iter().enumerate() {
            let in_pool: Vec<usize> = (0..mc.options.len()).filter(|&oi| mc.options[oi].pool == pi).collect();
            if in_pool.is_empty() {
                continue;
            }
            match mc.spec.spread {
                Spread::None => {}
                Spread::Gpu => {
                    let mut mig = Expression::from(0.0);
                    let mut any = false;
                    for &oi in &in_pool {
                        match mc.options[oi].kind {
                            Kind::Mig(_) => {
                                mig += y[mi][oi];
                                any = true;
                            }
                            Kind::TimeSliced(k) => {
                                if let Some(&t) = v.t.get(&k) {
                                    let yv = y[mi][oi];
                                    cons.push(constraint!(yv <= t));
                                }
                            }
                            Kind::Whole(_) => {}
                        }
                    }
                    if any {
                        let mut mig_gpus = Expression::from(0.0);
                        for &g in &v.g {
                            mig_gpus += g;
                        }
                        cons.push(constraint!(mig <= mig_gpus));
                    }
                }
                Spread::Node => {
                    let mut all = Expression::from(0.0);
                    for &oi in &in_pool {
                        all += y[mi][oi];
                        match mc.options[oi].kind {
                            Kind::TimeSliced(k) => {
                                if let Some(&z) = v.zt.get(&k) {
                                    let yv = y[mi][oi];
                                    cons.push(constraint!(yv <= z));
                                }
                            }
                            Kind::Whole(_) => {
                                if let Some(zw) = v.zw {
                                    let yv = y[mi][oi];
                                    cons.push(constraint!(yv <= zw));
                                }
                            }
                            Kind::Mig(_) => {}
                        }
                    }
                    cons.push(constraint!(all <= v.u));
                }
            }
        }
        bound_gpus += gpus.clone();
        cost_expr += p.weight * gpus.clone();
        match goal {
            Goal::Bound => {}
            Goal::Extend => {
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
                for &g in &v.g {
                    config(g, &mut vars, &mut cons, &mut objective);
                }
                if let Some(w) = v.w {
                    config(w, &mut vars, &mut cons, &mut objective);
                }
                for &t in v.t.values() {
                    config(t, &mut vars, &mut cons, &mut objective);
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
    if let Goal::Plan { cost_bound: Some(b) } = goal {
        cons.push(constraint!(cost_expr <= b + 1e-6));
    }
    if goal == Goal::Bound {
        objective = bound_gpus;
    }

    let mut all_vars: Vec<Variable> = Vec::new();
    for row in &y {
        all_vars.extend(row.iter().copied());
    }
    let values = run(vars, objective.clone(), cons, integer)?;
    let val = |v: Variable| values.get(&v).copied().unwrap_or(0.0);
    let round = |x: f64| if x <= 0.0 { 0 } else { x.round() as u64 };
    let mut res = MilpResult { optimal: true, ..Default::default() };
    res.objective = {
        let mut total = 0.0;
        for (pi, _) in problem.pools.iter().enumerate() {
            let v = &pv[pi];
            total += v.g.iter().map(|&g| val(g)).sum::<f64>();
            total += v.w.map_or(0.0, val);
            total += v.t.values().map(|&t| val(t)).sum::<f64>();
        }
        total
    };
    for (pi, _) in problem.pools.iter().enumerate() {
        let v = &pv[pi];
        res.counts.push(PoolCounts {
            layouts: v.g.iter().map(|&g| round(val(g))).collect(),
            whole: v.w.map_or(0, |w| round(val(w))),
            ts: v.t.iter().map(|(&k, &t)| (k, round(val(t)))).collect(),
            whole_nodes: v.zw.map_or(0, |z| round(val(z))),
            ts_nodes: v.zt.iter().map(|(&k, &z)| (k, round(val(z)))).collect(),
            nodes: round(val(v.u)),
        });
        res.extra_nodes.push(v.extra.map_or(0, |e| round(val(e))));
    }
    for (mi, mc) in problem.models.iter().enumerate() {
        for (oi, o) in mc.options.iter().enumerate() {
            let n = round(val(y[mi][oi]));
            if n > 0 {
                *res.replicas.entry((mi, o.pool, o.kind)).or_insert(0) +=
                    u32::try_from(n).unwrap_or(u32::MAX);
            }
        }
    }
    Ok(res)
}

/// Solves with the selected backend and returns every variable's value.
fn run(
    vars: ProblemVariables,
    objective: Expression,
    cons: Vec<Constraint>,
    integer: bool,
) -> Result<HashMap<Variable, f64>, MilpError> {
    let handles: Vec<Variable> = vars.iter_variables_with_def().map(|(v, _)| v).collect();
    let unsolved = vars.minimise(objective);
    let _ = integer;
    #[cfg(feature = "highs")]
    let model = {
        let mut m = unsolved.using(good_lp::solvers::highs::highs).set_threads(1);
        // Deterministic and exact: one thread, fixed seed, no time limit, zero relative gap;
        // a node limit (not a clock) bounds the search the same way on every machine.
        m.set_option("random_seed", 0);
        m.set_option("mip_rel_gap", 0.0);
        m.set_option("mip_max_nodes", 200_000);
        m.set_option("output_flag", false);
        for c in cons {
            m.add_constraint(c);
        }
        m
    };
    #[cfg(not(feature = "highs"))]
    let model = {
        let mut m = unsolved.using(good_lp::solvers::microlp::microlp);
        for c in cons {
            m.add_constraint(c);
        }
        m
    };
    match model.solve() {
        Ok(sol) => Ok(handles.into_iter().map(|v| (v, sol.value(v))).collect()),
        Err(good_lp::ResolutionError::Infeasible) => Err(MilpError::Infeasible),
        Err(e) => Err(MilpError::Solver(e.to_string())),
    }
}

/// Which solver this build uses, for reports.
pub(crate) fn solver_name() -> &'static str {
    if cfg!(feature = "highs") { "highs" } else { "microlp" }
}
