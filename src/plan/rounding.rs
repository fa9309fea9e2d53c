//! The relaxation's replica choices rounded to whole replicas, as pins for a re-solve or a
//! lay-out ([`crate::plan::milp::Pins`]): every single-model column by largest remainder
//! ([`round_all`]), rate models by covering the rest with the cheapest device
//! ([`round_rates`]), exact per-model totals ([`exact_totals`]), and `spread: gpu` models on
//! one MIG profile per pool ([`one_spread_profile`]).

use std::collections::BTreeMap;

use crate::plan::milp::{MilpResult, Pins};
use crate::plan::problem::{Kind, Need, Problem};
use crate::spec::Spread;

/// Pins for a second solve when the optimiser gave a `spread: gpu` model (fixed demand) MIG
/// instances of several profiles in one pool: there, all its MIG replicas on the profile with
/// the most of them (ties: the first option); its other choices as they were. Other models
/// stay free. `None` when no model mixes profiles.
pub(crate) fn one_spread_profile(
    problem: &Problem<'_>,
    replicas: &BTreeMap<(usize, usize, Kind), u32>,
) -> Option<Pins> {
    let mut pins = Pins::new();
    let mut mixed = false;
    for (mi, mc) in problem.models.iter().enumerate() {
        if mc.spec.spread != Spread::Gpu || !matches!(mc.need, Need::Replicas(_)) {
            continue;
        }
        let mut mine: Vec<(usize, Kind, u32)> = mc
            .options
            .iter()
            .filter_map(|o| replicas.get(&(mi, o.pool, o.kind)).map(|&n| (o.pool, o.kind, n)))
            .filter(|x| x.2 > 0)
            .collect();
        let mut this = false;
        for pi in 0..problem.pools.len() {
            let mig: Vec<usize> =
                (0..mine.len()).filter(|&i| mine[i].0 == pi && matches!(mine[i].1, Kind::Mig(_))).collect();
            let Some(&best) = mig.iter().max_by(|&&a, &&b| mine[a].2.cmp(&mine[b].2).then(b.cmp(&a))) else {
                continue;
            };
            if mig.len() > 1 {
                this = true;
                let total = mig.iter().map(|&i| mine[i].2).sum();
                for &i in &mig {
                    mine[i].2 = if i == best { total } else { 0 };
                }
            }
        }
        if this {
            mixed = true;
            pins.extend(mine.into_iter().filter(|x| x.2 > 0).map(|(p, k, n)| ((mi, p, k), n)));
        }
    }
    mixed.then_some(pins)
}

/// Rounds the LP relaxation's replicas of every single-model column (rate and spread models):
/// fixed demand by largest remainder (floors, then one more to the largest fractions, ties to
/// the first option, until the count is met); rate models as in [`round_rates`]. Columns that
/// aggregate several models stay free.
pub(crate) fn round_all(problem: &Problem<'_>, relaxed: &MilpResult) -> Pins {
    let mut pins = round_rates(problem, relaxed);
    for (mi, mc) in problem.models.iter().enumerate() {
        let Need::Replicas(n) = mc.need else { continue };
        let xs: Vec<f64> = mc
            .options
            .iter()
            .map(|o| relaxed.fractional.get(&(mi, o.pool, o.kind)).copied().unwrap_or(f64::NAN))
            .collect();
        if xs.iter().any(|x| x.is_nan()) {
            continue; // an aggregated column: not in `fractional`
        }
        let mut counts: Vec<u32> = xs.iter().map(|x| (x + 1e-6).floor().max(0.0) as u32).collect();
        let mut order: Vec<usize> = (0..xs.len()).collect();
        order.sort_by(|&a, &b| {
            let fa = xs[a] - f64::from(counts[a]);
            let fb = xs[b] - f64::from(counts[b]);
            fb.total_cmp(&fa).then(a.cmp(&b))
        });
        let missing = n.saturating_sub(counts.iter().sum());
        for &oi in order.iter().cycle().take(missing as usize) {
            counts[oi] += 1;
        }
        for (o, c) in mc.options.iter().zip(counts) {
            if c > 0 {
                pins.insert((mi, o.pool, o.kind), c);
            }
        }
    }
    pins
}

/// Replica counts per (model, pool, kind) that serve exactly each fixed-demand model's
/// replicas: `preferred` trimmed from its least-used options, or topped up on its most-used
/// one (else its smallest option). Rate models keep their counts.
pub(crate) fn exact_totals(problem: &Problem<'_>, preferred: &Pins) -> Pins {
    let mut out = Pins::new();
    for (mi, mc) in problem.models.iter().enumerate() {
        let mut mine: Vec<((usize, Kind), u32)> = preferred
            .range((mi, 0, Kind::Whole(0))..)
            .take_while(|((m, ..), _)| *m == mi)
            .map(|(&(_, pi, kind), &n)| ((pi, kind), n))
            .filter(|&((pi, kind), n)| n > 0 && mc.options.iter().any(|o| o.pool == pi && o.kind == kind))
            .collect();
        if let Need::Replicas(n) = mc.need {
            mine.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
            let mut total: u32 = mine.iter().map(|x| x.1).sum();
            while total > n {
                if let Some(last) = mine.iter_mut().rev().find(|x| x.1 > 0) {
                    last.1 -= 1;
                    total -= 1;
                } else {
                    break;
                }
            }
            if total < n {
                match mine.first_mut() {
                    Some(first) => first.1 += n - total,
                    None => {
                        let smallest = mc
                            .options
                            .iter()
                            .filter(|o| !matches!(o.kind, Kind::MigTs(..)))
                            .min_by(|x, y| {
                                x.size.total_cmp(&y.size).then(x.pool.cmp(&y.pool)).then(x.kind.cmp(&y.kind))
                            });
                        if let Some(o) = smallest {
                            mine.push(((o.pool, o.kind), n - total));
                        }
                    }
                }
            }
        }
        for ((pi, kind), n) in mine {
            if n > 0 {
                out.insert((mi, pi, kind), n);
            }
        }
    }
    out
}

/// Rounds the LP relaxation's replicas of every rate model: each option's count rounded down,
/// then the uncovered rate (and any missing minimum replicas) served by the option that needs
/// the smallest total GPU share for it.
pub(crate) fn round_rates(problem: &Problem<'_>, relaxed: &MilpResult) -> Pins {
    let mut pins = Pins::new();
    for (mi, mc) in problem.models.iter().enumerate() {
        let Need::Rate { rps, min_replicas } = mc.need else { continue };
        let mut covered = 0.0;
        let mut count = 0u32;
        for o in &mc.options {
            let x = relaxed.fractional.get(&(mi, o.pool, o.kind)).copied().unwrap_or(0.0);
            let n = (x + 1e-6).floor().max(0.0) as u32;
            if n > 0 {
                pins.insert((mi, o.pool, o.kind), n);
                covered += o.rps.unwrap_or(0.0) * f64::from(n);
                count += n;
            }
        }
        let rest = (rps - covered).max(0.0);
        let best = mc
            .options
            .iter()
            .filter(|o| o.rps.is_some_and(|r| r > 0.0))
            .map(|o| {
                let per = o.rps.unwrap_or(1.0);
                let n = ((rest / per - 1e-9).ceil().max(0.0) as u32).max(min_replicas.saturating_sub(count));
                (o.size * f64::from(n), o, n)
            })
            .min_by(|x, y| x.0.total_cmp(&y.0).then(x.1.pool.cmp(&y.1.pool)).then(x.1.kind.cmp(&y.1.kind)));
        if let Some((_, o, n)) = best
            && n > 0
        {
            *pins.entry((mi, o.pool, o.kind)).or_insert(0) += n;
        }
        if !pins.keys().any(|k| k.0 == mi) {
            // Nothing to pin (no admissible option): leave the model free.
            continue;
        }
    }
    pins
}
