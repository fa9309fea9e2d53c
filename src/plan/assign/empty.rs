//! A local search that empties GPUs ([`empty_gpus`]): each GPU in use, the dearest and least
//! loaded first, has its replicas moved to free room on the other GPUs in use (a free MIG
//! instance or time-slicing slot, or an instance added to a layout that still fits), with the
//! same rules as every placement ([`place_in`]: spread, node sharing classes, co-tenants'
//! latency), or where another model's replica makes room by moving itself ([`eject`]), or, on
//! priced pools, on a GPU it opens in a cheaper pool ([`open_cheaper`]). When every replica
//! finds room and the plan got cheaper, the GPU is left unused; otherwise it keeps them. Pure
//! Rust, so both builds have it; bounded by counts of tries, so deterministic.
//!
//! Why (issue 23): where the optimiser's counts cannot be laid out under the spread rules,
//! first fit places what they leave, and the lay-out ends up to a third above the counts (the
//! 100-GPU six-type stress fleets of memory-only `spread` models in the pure-Rust build). The
//! spare room that lay-out leaves on GPUs in use is what this search fills.

use crate::plan::assign::{Assignment, COST_EPSILON, Dev, Mode, place_first, place_in, trim, trim_instances};
use crate::plan::problem::{Kind, Need, Opt, Problem};
use crate::plan::splitmix::SplitMix64;

/// GPUs one run of the search tries to empty at most, over all its passes (a count, not a
/// clock).
const EMPTY_TRIES: usize = 20_000;

/// Replicas one run of the search takes off other GPUs to make room ([`eject`]) at most, over
/// all its passes (a count, not a clock).
const EJECT_TRIES: usize = 200_000;

/// Kicks [`KickBudget::kicked`] gives a plan at most (a count, not a clock). On the 100-GPU six-type
/// stress fleets a kick costs 40–170 ms (opt-level 3); the plans kept improving up to about
/// kick 1,600 (docs/benchmarks.md).
const KICKS: usize = 2_000;

/// Kicks times GPUs in use that [`kicks_for`] gives a plan: a kick costs more with every GPU
/// (each descent tries every GPU in use, each try looks at every node), so larger plans get
/// fewer kicks.
const KICK_GPUS: usize = 200_000;

/// GPUs in use above which [`kicks_for`] gives a plan no kicks: a kick there costs seconds;
/// large programs' plans get a few of their own instead ([`large_kicks_for`]).
const KICK_MAX_GPUS: usize = 256;

/// Kicks times GPUs in use that [`large_kicks_for`] gives a large program's plan: each kick
/// there spends its descent's whole ejection budget ([`EJECT_TRIES`]), about 9 s at 465 GPUs
/// (pure-Rust build, the 1,024-GPU stress fleet "mixed", seed 1, dev opt3 build), so 17 kicks
/// there and 3 at 2,048 GPUs.
const LARGE_KICK_GPUS: usize = 8_000;

/// GPUs [`KickBudget::kicked`]'s descents try to empty at most, over all its kicks (a count, not a
/// clock). Each descent keeps a run's own budget too ([`EMPTY_TRIES`], [`EJECT_TRIES`]), so
/// without this one the kicks' work could grow to the number of kicks times that budget. The
/// 100-GPU six-type stress fleets' kicks spend 117,000–279,000 (docs/benchmarks.md).
const KICK_TRIES: usize = 1_000_000;

/// Replicas [`KickBudget::kicked`]'s descents take off other GPUs to make room ([`eject`]) at most, over
/// all its kicks: most of the kicks' cost. The 100-GPU six-type stress fleets' kicks spend 8
/// to 35 million, a 256-GPU one 64 million (HiGHS build, "mixed", seed 0).
const KICK_EJECTIONS: usize = 100_000_000;

/// The seed of [`KickBudget::kicked`]'s choices: the same on every machine and every run.
const KICK_SEED: u64 = 0x6770_7570_6c61_6e00;

/// One replica to move: its model and where it ran.
#[derive(Clone, Copy, Debug)]
struct Moved {
    m: usize,
    pool: usize,
    kind: Kind,
}

/// A cheaper assignment than `a` with the same replicas (each on an option of its model that
/// serves at least as many requests per second), found by emptying GPUs one at a time; `None`
/// when no GPU could be emptied. Skips GPUs of multi-GPU replicas and of time-sliced MIG
/// instances (their nodes hold one profile's instances only).
pub(crate) fn empty_gpus(problem: &Problem<'_>, a: &Assignment) -> Option<Assignment> {
    let interleaved = searched(problem, a, false);
    let moves_first = searched(problem, a, true);
    match (interleaved, moves_first) {
        (Some(x), Some(y)) if y.cost(problem) < x.cost(problem) - COST_EPSILON => Some(y),
        (x, y) => x.or(y),
    }
}

/// One run of the search from `a`. Each pass tries every GPU in use; where a pool is cheaper
/// than another, a replica may also open a GPU there. With `moves_first`, passes that only
/// move replicas to GPUs in use repeat until none empties a GPU, then one pass may open
/// cheaper GPUs, and the moves resume while it empties one; without, every pass may open
/// them. Neither is greedy in the right way everywhere (100-GPU six-type "mixed, priced",
/// pure-Rust build: seeds 0 and 1 end cheaper opening at once, seed 2 moving first), so
/// [`empty_gpus`] runs both.
fn searched(problem: &Problem<'_>, a: &Assignment, moves_first: bool) -> Option<Assignment> {
    searched_within(problem, a, moves_first, &mut Search::new(EMPTY_TRIES, EJECT_TRIES))
}

/// [`searched`] spending `search`'s budget, which says afterwards what is left.
fn searched_within(
    problem: &Problem<'_>,
    a: &Assignment,
    moves_first: bool,
    search: &mut Search,
) -> Option<Assignment> {
    let mut best = a.clone();
    loop {
        if moves_first {
            while search.pass(problem, &mut best, false) {}
        }
        if !search.pass(problem, &mut best, true) {
            break;
        }
    }
    if !search.emptied {
        return None;
    }
    trim(problem, &mut best);
    Some(best)
}

/// What the search has left to spend, and whether it emptied a GPU.
#[derive(Debug)]
struct Search {
    /// GPUs it may still try to empty.
    tries: usize,
    /// Replicas it may still take off other GPUs to make room ([`eject`]).
    ejections: usize,
    emptied: bool,
}

impl Search {
    fn new(tries: usize, ejections: usize) -> Self {
        Self { tries, ejections, emptied: false }
    }

    /// One pass over the GPUs in use ([`order`]), each emptied when its replicas find room
    /// (`open`: also on GPUs opened in cheaper pools). Whether one was emptied.
    fn pass(&mut self, problem: &Problem<'_>, best: &mut Assignment, open: bool) -> bool {
        let mut progress = false;
        for at in order(problem, best) {
            if self.tries == 0 {
                break;
            }
            self.tries -= 1;
            if let Some(b) = emptied_one(problem, best, at, open, &mut self.ejections) {
                *best = b;
                progress = true;
                self.emptied = true;
            }
        }
        progress
    }
}

/// The GPUs in use, in the order the search tries them: the dearest pool first, then the least
/// loaded GPU (the smallest sum of its replicas' shares), then the last position first (so
/// that, as in first fit, the plan keeps the first GPUs of each node).
fn order(problem: &Problem<'_>, a: &Assignment) -> Vec<(usize, usize, usize)> {
    let mut gpus: Vec<(f64, f64, (usize, usize, usize))> = Vec::new();
    for (pi, pa) in a.pools.iter().enumerate() {
        let weight = problem.pools.get(pi).map_or(0.0, |p| p.weight);
        for (ni, n) in pa.nodes.iter().enumerate() {
            for (gi, d) in n.gpus.iter().enumerate() {
                if let Some(moved) = tenants(problem, d, pi) {
                    let load: f64 = moved.iter().map(|x| size(problem, x)).sum();
                    gpus.push((weight, load, (pi, ni, gi)));
                }
            }
        }
    }
    gpus.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.total_cmp(&y.1)).then(y.2.cmp(&x.2)));
    gpus.into_iter().map(|(.., at)| at).collect()
}

/// The replicas on GPU `d` of pool `pi`, largest first, when the search may move them (none on
/// a whole GPU with no tenant): `None` for an unused GPU, a GPU of a multi-GPU replica, or a
/// time-sliced MIG GPU.
fn tenants(problem: &Problem<'_>, d: &Dev, pi: usize) -> Option<Vec<Moved>> {
    let at = |m: usize, kind: Kind| Moved { m, pool: pi, kind };
    let mut moved: Vec<Moved> = match d {
        Dev::Unused | Dev::MigTs { .. } => return None,
        // A whole GPU switched on for nobody is emptied by moving nothing.
        Dev::Whole { tenant: None } => Vec::new(),
        Dev::Whole { tenant: Some(m) } => {
            let per = problem.models.get(*m).and_then(|x| x.spec.gpus).unwrap_or(1);
            if per > 1 {
                return None;
            }
            vec![at(*m, Kind::Whole(1))]
        }
        Dev::Ts { k, tenants } => tenants.iter().map(|&m| at(m, Kind::TimeSliced(*k))).collect(),
        Dev::Mig { tenants, .. } => tenants.iter().map(|&(q, m)| at(m, Kind::Mig(q))).collect(),
    };
    moved.sort_by(|x, y| size(problem, y).total_cmp(&size(problem, x)).then(x.m.cmp(&y.m)));
    Some(moved)
}

/// The share of a GPU a replica's option occupies.
fn size(problem: &Problem<'_>, x: &Moved) -> f64 {
    problem
        .models
        .get(x.m)
        .and_then(|mc| mc.options.iter().find(|o| o.pool == x.pool && o.kind == x.kind))
        .map_or(1.0, |o| o.size)
}

/// `a` with GPU `gi` of node `ni` of pool `pi` emptied and its replicas placed elsewhere on
/// GPUs in use (`open`: or on GPUs opened in cheaper pools), or `None` when one of them finds
/// no room or the plan is not cheaper.
fn emptied_one(
    problem: &Problem<'_>,
    a: &Assignment,
    (pi, ni, gi): (usize, usize, usize),
    open: bool,
    budget: &mut usize,
) -> Option<Assignment> {
    let d = a.pools.get(pi)?.nodes.get(ni)?.gpus.get(gi)?;
    let moved = tenants(problem, d, pi)?;
    let mut b = a.clone();
    *b.pools.get_mut(pi)?.nodes.get_mut(ni)?.gpus.get_mut(gi)? = Dev::Unused;
    for x in &moved {
        uncount(&mut b, x)?;
    }
    let weight = problem.pools.get(pi)?.weight;
    for x in &moved {
        let placed = re_place(problem, &mut b, x, None).is_some()
            || eject(problem, &mut b, x, budget)
            || (open && open_cheaper(problem, &mut b, x, weight));
        if !placed {
            return None;
        }
    }
    (b.cost(problem) < a.cost(problem) - COST_EPSILON).then_some(b)
}

/// Places replica `x` on a GPU it opens in a pool whose GPUs weigh less than `weight` (priced
/// pools: cost less per hour than the GPU being emptied), first fit over its model's options
/// there, smallest first. The caller keeps the result only when the plan got cheaper.
fn open_cheaper(problem: &Problem<'_>, b: &mut Assignment, x: &Moved, weight: f64) -> bool {
    let cheaper = |o: &Opt| problem.pools.get(o.pool).is_some_and(|p| p.weight < weight - COST_EPSILON);
    let attempts: Vec<_> =
        options(problem, x, cheaper).iter().map(|o| (o.pool, o.kind, Mode::Grow)).collect();
    place_first(problem, b, x.m, attempts)
}

/// The options of replica `x`'s model that `keep` admits, smallest share first (ties by pool
/// and kind): those that serve fewer requests per second than the one it had are left out for
/// a rate model (its capacity stays).
fn options<'p>(problem: &'p Problem<'_>, x: &Moved, keep: impl Fn(&Opt) -> bool) -> Vec<&'p Opt> {
    let Some(mc) = problem.models.get(x.m) else { return Vec::new() };
    let had = mc.options.iter().find(|o| o.pool == x.pool && o.kind == x.kind).and_then(|o| o.rps);
    let serves = |o: &Opt| match (&mc.need, had) {
        (Need::Rate { .. }, Some(had)) => o.rps.is_some_and(|r| r >= had),
        (Need::Rate { .. }, None) => false,
        (Need::Replicas(_), _) => true,
    };
    let mut options: Vec<&Opt> = mc.options.iter().filter(|o| keep(o) && serves(o)).collect();
    options.sort_by(|p, q| p.size.total_cmp(&q.size).then(p.pool.cmp(&q.pool)).then(p.kind.cmp(&q.kind)));
    options
}

/// Takes one replica `x` off `b`'s counts; `None` when it has none there.
fn uncount(b: &mut Assignment, x: &Moved) -> Option<()> {
    let key = (x.m, x.pool, x.kind);
    let left = b.replicas.get(&key).copied().unwrap_or(0).checked_sub(1)?;
    if left == 0 {
        b.replicas.remove(&key);
    } else {
        b.replicas.insert(key, left);
    }
    Some(())
}

/// Places replica `x` on a GPU in use (of node `only` = (pool, node), when given): a free
/// instance or slot of any of its model's options first, then an extended layout; the options
/// that serve fewer requests per second than the one it had are left out (its model's capacity
/// stays), as are whole GPUs (they would open one). Where it went: `None` when nowhere.
fn re_place(
    problem: &Problem<'_>,
    b: &mut Assignment,
    x: &Moved,
    only: Option<(usize, usize)>,
) -> Option<Moved> {
    let in_use = |o: &Opt| !matches!(o.kind, Kind::Whole(_)) && only.is_none_or(|(pi, _)| o.pool == pi);
    let options = options(problem, x, in_use);
    for mode in [Mode::Fixed, Mode::Extend] {
        for o in &options {
            let nodes = match only {
                Some((_, ni)) => ni..ni + 1,
                None => 0..b.pools.get(o.pool).map_or(0, |p| p.nodes.len()),
            };
            if place_in(problem, b, x.m, o.pool, o.kind, mode, nodes) {
                *b.replicas.entry((x.m, o.pool, o.kind)).or_insert(0) += 1;
                return Some(Moved { m: x.m, pool: o.pool, kind: o.kind });
            }
        }
    }
    None
}

/// Places replica `x` where another model's replica makes room by moving: for each GPU in use
/// of a pool where `x` may run, each of its replicas of another model is taken off, `x` placed
/// on that node, and the one taken off placed on a GPU in use anywhere. The first that works is
/// kept. Each try spends one of `budget`.
fn eject(problem: &Problem<'_>, b: &mut Assignment, x: &Moved, budget: &mut usize) -> bool {
    let Some(mc) = problem.models.get(x.m) else { return false };
    let pools: std::collections::BTreeSet<usize> =
        mc.options.iter().filter(|o| !matches!(o.kind, Kind::Whole(_))).map(|o| o.pool).collect();
    for &pi in &pools {
        let nodes = b.pools.get(pi).map_or(0, |p| p.nodes.len());
        for ni in 0..nodes {
            let gpus = b.pools[pi].nodes[ni].gpus.len();
            for gi in 0..gpus {
                let d = &b.pools[pi].nodes[ni].gpus[gi];
                // A whole GPU's replica leaves no room a replica of `x` could take.
                if matches!(d, Dev::Whole { .. }) {
                    continue;
                }
                let Some(others) = tenants(problem, d, pi) else { continue };
                for (ti, t) in others.iter().enumerate() {
                    if t.m == x.m || others[..ti].iter().any(|o| o.m == t.m && o.kind == t.kind) {
                        continue;
                    }
                    if *budget == 0 {
                        return false;
                    }
                    *budget -= 1;
                    // The try works on `b` itself and undoes what it did: taking `t` off and
                    // placing `x` change only this node and the counts; a copy of the whole
                    // assignment is made only where `x` found room, for placing `t` anywhere.
                    let node = b.pools[pi].nodes[ni].clone();
                    let taken = take_off(b, (pi, ni, gi), t).is_some();
                    let placed = if taken { re_place(problem, b, x, Some((pi, ni))) } else { None };
                    if placed.is_some() {
                        let mut c = b.clone();
                        if re_place(problem, &mut c, t, None).is_some() {
                            *b = c;
                            return true;
                        }
                    }
                    b.pools[pi].nodes[ni] = node;
                    if let Some(at) = placed {
                        let _ = uncount(b, &at);
                    }
                    if taken {
                        *b.replicas.entry((t.m, t.pool, t.kind)).or_insert(0) += 1;
                    }
                }
            }
        }
    }
    false
}

/// Takes replica `t` off GPU `at` of `b` (its instance or slot stays free) and off the counts.
fn take_off(b: &mut Assignment, (pi, ni, gi): (usize, usize, usize), t: &Moved) -> Option<()> {
    let d = b.pools.get_mut(pi)?.nodes.get_mut(ni)?.gpus.get_mut(gi)?;
    match (d, t.kind) {
        (Dev::Mig { tenants, .. }, Kind::Mig(q)) => {
            let i = tenants.iter().position(|&(p, m)| p == q && m == t.m)?;
            tenants.remove(i);
        }
        (Dev::Ts { tenants, .. }, Kind::TimeSliced(_)) => {
            let i = tenants.iter().position(|&m| m == t.m)?;
            tenants.remove(i);
        }
        _ => return None,
    }
    uncount(b, t)
}

/// The kicks [`KickBudget::kicked`] gives a plan of `gpus` GPUs in use: [`KICKS`] up to 100 GPUs, fewer
/// above ([`KICK_GPUS`] ÷ the GPUs), none above [`KICK_MAX_GPUS`].
pub(crate) fn kicks_for(gpus: u64) -> usize {
    match usize::try_from(gpus) {
        Ok(g) if g <= KICK_MAX_GPUS => KICKS.min(KICK_GPUS / g.max(1)),
        _ => 0,
    }
}

/// The kicks [`KickBudget::kicked`] gives a large program's plan of `gpus` GPUs in use
/// (`strategy::emptied`): [`LARGE_KICK_GPUS`] ÷ the GPUs, at least one.
pub(crate) fn large_kicks_for(gpus: u64) -> usize {
    usize::try_from(gpus).map_or(1, |g| (LARGE_KICK_GPUS / g.max(1)).max(1))
}

/// What the kicks' descents may still spend ([`KICK_TRIES`], [`KICK_EJECTIONS`]), shared by
/// the kicks from several starts so that their work together stays within one budget.
#[derive(Debug)]
pub(crate) struct KickBudget(Search);

impl KickBudget {
    pub(crate) fn new() -> Self {
        Self(Search::new(KICK_TRIES, KICK_EJECTIONS))
    }

    /// An iterated local search around [`empty_gpus`]: a cheaper assignment than `a` with the same
    /// replicas, or `None`. Each of `kicks` kicks (the planner gives [`kicks_for`]) takes replicas
    /// off ([`ruin_recreate`]: every replica of one node, of three GPUs, or of one model), places
    /// them again (room on GPUs in use first, else first fit, which may open a GPU) and empties
    /// GPUs from there. The result becomes the current plan when it costs no more, so the search
    /// walks across plans of equal cost; the cheapest plan seen is kept. It stops early once
    /// `enough` says a cost is good enough (the planner's target), or when the descents of this
    /// budget's kicks, from every start, have spent [`KICK_TRIES`] tries or [`KICK_EJECTIONS`]
    /// ejections in all. The descent stops at a plan no
    /// single GPU can leave; a kick moves several GPUs' or a whole model's replicas at once. Its
    /// choices come from a fixed seed, and its budgets are counts: deterministic (`SplitMix64`).
    pub(crate) fn kicked(
        &mut self,
        problem: &Problem<'_>,
        a: &Assignment,
        kicks: usize,
        enough: impl Fn(f64) -> bool,
    ) -> Option<Assignment> {
        kicked_within(problem, a, kicks, enough, &mut self.0)
    }
}

/// [`KickBudget::kicked`] spending `left`; each descent also keeps a run's own budget.
fn kicked_within(
    problem: &Problem<'_>,
    a: &Assignment,
    kicks: usize,
    enough: impl Fn(f64) -> bool,
    left: &mut Search,
) -> Option<Assignment> {
    let mut mix = SplitMix64(KICK_SEED);
    let mut current = a.clone();
    let mut best: Option<Assignment> = None;
    for k in 0..kicks {
        let least = best.as_ref().unwrap_or(a).cost(problem);
        if enough(least) || left.tries == 0 || left.ejections == 0 {
            break;
        }
        let Some(ruined) = ruin_recreate(problem, &current, k, &mut mix) else { continue };
        let mut search = Search::new(EMPTY_TRIES.min(left.tries), EJECT_TRIES.min(left.ejections));
        let (tries, ejections) = (search.tries, search.ejections);
        let next = searched_within(problem, &ruined, false, &mut search).unwrap_or(ruined);
        left.tries -= tries - search.tries;
        left.ejections -= ejections - search.ejections;
        let cost = next.cost(problem);
        if cost < least - COST_EPSILON {
            best = Some(next.clone());
        }
        if cost <= current.cost(problem) + COST_EPSILON {
            current = next;
        }
    }
    let mut best = best?;
    trim(problem, &mut best);
    Some(best)
}

/// `a` with some replicas taken off and placed again (kick `k` of [`KickBudget::kicked`]); `None` when a
/// replica finds no place. A GPU is drawn from `mix`; one kick in three takes every replica of
/// a model it runs ([`model_kick`]), the others every replica of its node's GPUs or of it and
/// two more GPUs drawn. Half the kicks place the replicas largest first, the rest in an order
/// drawn from `mix`.
fn ruin_recreate(
    problem: &Problem<'_>,
    a: &Assignment,
    k: usize,
    mix: &mut SplitMix64,
) -> Option<Assignment> {
    let mut gpus = Vec::new();
    for (pi, pa) in a.pools.iter().enumerate() {
        for (ni, n) in pa.nodes.iter().enumerate() {
            for (gi, d) in n.gpus.iter().enumerate() {
                if tenants(problem, d, pi).is_some() {
                    gpus.push((pi, ni, gi));
                }
            }
        }
    }
    let pick = *gpus.get(mix.below(gpus.len())?)?;
    if k % 3 == 2 {
        return model_kick(problem, a, &gpus, pick, mix);
    }
    let ruined: Vec<(usize, usize, usize)> = if k.is_multiple_of(2) {
        gpus.iter().copied().filter(|g| g.0 == pick.0 && g.1 == pick.1).collect()
    } else {
        let mut v = vec![pick];
        for _ in 0..2 {
            let g = *gpus.get(mix.below(gpus.len())?)?;
            if !v.contains(&g) {
                v.push(g);
            }
        }
        v
    };
    let mut b = a.clone();
    let mut moved = Vec::new();
    for (pi, ni, gi) in ruined {
        let d = b.pools.get_mut(pi)?.nodes.get_mut(ni)?.gpus.get_mut(gi)?;
        moved.extend(tenants(problem, d, pi)?);
        *d = Dev::Unused;
    }
    for x in &moved {
        uncount(&mut b, x)?;
    }
    trim_instances(problem, &mut b);
    recreate(problem, b, moved, k % 4 < 2, mix)
}

/// Every replica of one model (one that `pick` runs) taken off and placed again.
fn model_kick(
    problem: &Problem<'_>,
    a: &Assignment,
    gpus: &[(usize, usize, usize)],
    (pi, ni, gi): (usize, usize, usize),
    mix: &mut SplitMix64,
) -> Option<Assignment> {
    let on = tenants(problem, a.pools.get(pi)?.nodes.get(ni)?.gpus.get(gi)?, pi)?;
    let m = on.get(mix.below(on.len())?)?.m;
    let mut b = a.clone();
    let mut moved = Vec::new();
    for &(pi, ni, gi) in gpus {
        let d = b.pools.get_mut(pi)?.nodes.get_mut(ni)?.gpus.get_mut(gi)?;
        let Some(on) = tenants(problem, d, pi) else { continue };
        let whole = matches!(d, Dev::Whole { .. });
        for t in on.into_iter().filter(|t| t.m == m) {
            if whole {
                *b.pools.get_mut(pi)?.nodes.get_mut(ni)?.gpus.get_mut(gi)? = Dev::Unused;
                uncount(&mut b, &t)?;
            } else {
                take_off(&mut b, (pi, ni, gi), &t)?;
            }
            moved.push(t);
        }
    }
    trim_instances(problem, &mut b);
    recreate(problem, b, moved, true, mix)
}

/// The replicas `moved` placed on `b`: largest first (`by_size`) or in an order drawn from
/// `mix`, each on room of a GPU in use, else by first fit.
fn recreate(
    problem: &Problem<'_>,
    mut b: Assignment,
    mut moved: Vec<Moved>,
    by_size: bool,
    mix: &mut SplitMix64,
) -> Option<Assignment> {
    if by_size {
        moved.sort_by(|x, y| size(problem, y).total_cmp(&size(problem, x)).then(x.m.cmp(&y.m)));
    } else {
        for i in (1..moved.len()).rev() {
            let j = mix.below(i + 1)?;
            moved.swap(i, j);
        }
    }
    for x in &moved {
        if !(re_place(problem, &mut b, x, None).is_some() || opened(problem, &mut b, x)) {
            return None;
        }
    }
    Some(b)
}

/// Places replica `x` by first fit over its model's options (those that serve as many requests
/// per second as the one it had), smallest share first, opening a GPU where none has room.
fn opened(problem: &Problem<'_>, b: &mut Assignment, x: &Moved) -> bool {
    let attempts: Vec<_> =
        options(problem, x, |_| true).iter().map(|o| (o.pool, o.kind, Mode::Grow)).collect();
    place_first(problem, b, x.m, attempts)
}
