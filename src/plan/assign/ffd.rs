//! First-fit-decreasing, gpuplan's own baseline and floor: replicas largest first, each to the
//! first device with room (see [`ffd`]).

use std::collections::BTreeMap;

use crate::plan::assign::{Assignment, Mode, empty, model_order, place_first, trim};
use crate::plan::problem::{Kind, Need, Problem};

/// One replica to place: its size, its model and the (pool, kind) choices in order.
type Item = (f64, usize, Vec<(usize, Kind)>);

/// The replicas first-fit-decreasing places, in model order (sorted by size afterwards): each
/// model's options smallest first (rate models: as many replicas as the option with the most
/// requests per second per GPU share needs, on any option at least as fast). With `mig_ts`,
/// time-slices of MIG instances follow as last resorts (the backtracking search uses them; the
/// greedy pass does not). `None` when a model has no option.
pub(super) fn ffd_items(problem: &Problem<'_>, mig_ts: bool) -> Option<Vec<Item>> {
    let mut items: Vec<Item> = Vec::new();
    let by_size = |x: &&crate::plan::problem::Opt, y: &&crate::plan::problem::Opt| {
        x.size.total_cmp(&y.size).then(x.pool.cmp(&y.pool)).then(x.kind.cmp(&y.kind))
    };
    for m in model_order(problem) {
        let mc = &problem.models[m];
        let mut opts: Vec<&crate::plan::problem::Opt> =
            mc.options.iter().filter(|o| !matches!(o.kind, Kind::MigTs(..))).collect();
        let mut last: Vec<&crate::plan::problem::Opt> =
            mc.options.iter().filter(|o| mig_ts && matches!(o.kind, Kind::MigTs(..))).collect();
        last.sort_by(by_size);
        if opts.is_empty() && last.is_empty() {
            return None;
        }
        match mc.need {
            Need::Replicas(n) => {
                opts.sort_by(by_size);
                let size = opts.first().or(last.first()).map_or(0.0, |o| o.size);
                let choices: Vec<(usize, Kind)> =
                    opts.iter().chain(&last).map(|o| (o.pool, o.kind)).collect();
                for _ in 0..n {
                    items.push((size, m, choices.clone()));
                }
            }
            Need::Rate { rps, min_replicas } => {
                let best = opts.iter().filter(|o| o.rps.is_some()).max_by(|x, y| {
                    let ex = x.rps.unwrap_or(0.0) / x.size;
                    let ey = y.rps.unwrap_or(0.0) / y.size;
                    ex.total_cmp(&ey)
                        .then(y.size.total_cmp(&x.size))
                        .then(y.pool.cmp(&x.pool))
                        .then(y.kind.cmp(&x.kind))
                })?;
                let per = best.rps.unwrap_or(0.0);
                if per <= 0.0 {
                    return None;
                }
                let n = ((rps / per - 1e-9).ceil().max(0.0) as u32).max(min_replicas);
                // Any device at least as fast will do for these replicas, smallest first.
                let mut alts: Vec<&crate::plan::problem::Opt> =
                    opts.iter().copied().filter(|o| o.rps.is_some_and(|r| r >= per)).collect();
                alts.sort_by(by_size);
                let choices: Vec<(usize, Kind)> = alts.iter().map(|o| (o.pool, o.kind)).collect();
                for _ in 0..n {
                    items.push((best.size, m, choices.clone()));
                }
            }
        }
    }
    // Stable: larger first; equal sizes keep the model order above.
    items.sort_by(|x, y| y.0.total_cmp(&x.0));
    Some(items)
}

/// First-fit-decreasing: each model takes its smallest option (rate models: the option with the
/// most requests per second per GPU share, as many replicas as the rate needs); replicas,
/// largest first, go to the first device with room, opening GPUs and nodes in order. A replica
/// that fits nowhere with its preferred option tries the model's other options, smallest first.
/// Returns `None` when some replica fits nowhere.
pub(crate) fn ffd(problem: &Problem<'_>) -> Option<Assignment> {
    ffd_in(problem, &ffd_items(problem, false)?, &larger_first)
}

/// A comparison of replicas for [`ffd_reordered`].
type ItemOrder<'a> = dyn Fn(&Item, &Item) -> std::cmp::Ordering + 'a;

/// First fit in other orders, for when the greedy pass and the optimiser's decomposition both
/// fail (spread and node sharing classes can make the size order paint itself into a corner):
/// spread models first (then larger replicas), replicas with the fewest choices first, and
/// replicas by device class (whole GPUs, then time-slices, then MIG instances). Deterministic
/// and linear in the replicas, so it scales where the backtracking searches stop. Returns the
/// first order that places everything, and its name for the plan's reasons.
pub(crate) fn ffd_reordered(problem: &Problem<'_>) -> Option<(Assignment, &'static str)> {
    let base = ffd_items(problem, false)?;
    orders(problem).into_iter().find_map(|(name, cmp)| ffd_in(problem, &base, &*cmp).map(|a| (a, name)))
}

/// First fit in every order of [`ffd_reordered`] that places everything, and in the size order
/// of [`ffd`] first: the starts of the search that empties GPUs ([`super::empty_gpus`]).
pub(crate) fn ffd_every_order(problem: &Problem<'_>) -> Vec<Assignment> {
    let Some(base) = ffd_items(problem, false) else { return Vec::new() };
    let size: Box<ItemOrder<'_>> = Box::new(larger_first);
    std::iter::once(size)
        .chain(orders(problem).into_iter().map(|(_, cmp)| cmp))
        .filter_map(|cmp| ffd_in(problem, &base, &*cmp))
        .collect()
}

/// The orders of [`ffd_reordered`], named.
fn orders<'p>(problem: &'p Problem<'_>) -> [(&'static str, Box<ItemOrder<'p>>); 3] {
    let spread = |m: usize| problem.models.get(m).map_or(crate::spec::Spread::None, |x| x.spec.spread);
    let class = |c: &[(usize, Kind)]| match c.first().map(|x| x.1) {
        Some(Kind::Whole(_)) => 0,
        Some(Kind::TimeSliced(_)) => 1,
        Some(Kind::MigTs(..)) => 2,
        _ => 3,
    };
    [
        (
            "spread models first",
            Box::new(move |x: &Item, y: &Item| spread(y.1).cmp(&spread(x.1)).then(y.0.total_cmp(&x.0))),
        ),
        (
            "fewest choices first",
            Box::new(|x: &Item, y: &Item| x.2.len().cmp(&y.2.len()).then(y.0.total_cmp(&x.0))),
        ),
        (
            "whole GPUs, then time-slices, then MIG instances",
            Box::new(move |x: &Item, y: &Item| class(&x.2).cmp(&class(&y.2)).then(y.0.total_cmp(&x.0))),
        ),
    ]
}

/// First fit of the replicas `base` sorted by `cmp` (stable), or `None` when one fits nowhere.
fn ffd_in(problem: &Problem<'_>, base: &[Item], cmp: &ItemOrder<'_>) -> Option<Assignment> {
    let mut items = base.to_vec();
    items.sort_by(|x, y| cmp(x, y));
    let mut a = empty(problem, |i| problem.pools[i].max_nodes as usize);
    for (_, m, choices) in items {
        if !place_first(problem, &mut a, m, choices.iter().map(|&(pi, kind)| (pi, kind, Mode::Grow))) {
            return None;
        }
    }
    trim(problem, &mut a);
    Some(a)
}

/// A preferred (pool, kind) and the replicas still to give it.
type Preferred = ((usize, Kind), u32);

/// First fit guided by device choices (the LP relaxation's, rounded): each model's replicas
/// take the preferred (pool, kind) counts in `preferred` first, the most-used option first,
/// then any replica left over takes the model's own first-fit choices. Each replica falls back
/// to the model's other options, so this places whatever [`ffd`] places when the preferred
/// devices are full. Replicas go largest first (by their first choice's GPU share), to the
/// first device with room. For large programs whose solve stops without a plan: the
/// relaxation knows which GPU types are worth their price, first fit then only packs.
pub(crate) fn ffd_guided(
    problem: &Problem<'_>,
    preferred: &BTreeMap<(usize, usize, Kind), u32>,
) -> Option<Assignment> {
    let base = ffd_items(problem, false)?;
    let size_of = |m: usize, pi: usize, kind: Kind| {
        problem
            .models
            .get(m)
            .and_then(|mc| mc.options.iter().find(|o| o.pool == pi && o.kind == kind))
            .map(|o| o.size)
    };
    // Per model: its preferred options, most replicas first (ties in option order).
    let mut wanted: BTreeMap<usize, Vec<Preferred>> = BTreeMap::new();
    for (&(m, pi, kind), &n) in preferred {
        // Rate models keep their own replica count and devices (a slower preferred device
        // would leave requests unserved).
        let fixed = problem.models.get(m).is_some_and(|mc| matches!(mc.need, Need::Replicas(_)));
        if n > 0 && fixed && size_of(m, pi, kind).is_some() {
            wanted.entry(m).or_default().push(((pi, kind), n));
        }
    }
    for v in wanted.values_mut() {
        v.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    }
    let mut items: Vec<Item> = Vec::with_capacity(base.len());
    for (size, m, choices) in base {
        let first = wanted.get_mut(&m).and_then(|v| {
            let slot = v.iter_mut().find(|(_, n)| *n > 0)?;
            slot.1 -= 1;
            Some(slot.0)
        });
        match first {
            Some((pi, kind)) => {
                let mut c = vec![(pi, kind)];
                c.extend(choices.iter().copied().filter(|&x| x != (pi, kind)));
                items.push((size_of(m, pi, kind).unwrap_or(size), m, c));
            }
            None => items.push((size, m, choices)),
        }
    }
    // Stable: larger first; equal sizes keep the model order.
    ffd_in(problem, &items, &larger_first)
}

/// Larger replicas first (by their first choice's GPU share).
fn larger_first(x: &Item, y: &Item) -> std::cmp::Ordering {
    y.0.total_cmp(&x.0)
}
