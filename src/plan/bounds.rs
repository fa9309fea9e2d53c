//! Lower bounds valid for every plan the verifier accepts, not only for the planner's model.
//!
//! In: a [`Problem`] (for its spec, pools and models; the planner's options are not used).
//! Out: [`LowerBound`] — GPUs and, on priced pools, cost per hour that no accepted plan beats.
//!
//! The argument (a charging scheme, proved in `docs/planner.md`, "Bounds"): every replica is
//! charged part of the budget of the GPU it runs on (its price, plus a surcharge `μ` per pool
//! that the pool's capacity pays back) such that the charges on any one GPU stay within its
//! budget, whatever the verifier lets share that GPU. The budget is split by weights: one per
//! MIG profile (any weights whose sum over every layout the catalog admits stays within the
//! budget), and on a time-sliced device one for memory slots and one for compute. Any such
//! weights give a valid bound: Σ over demand of its least charge − Σ over pools of `μ` × the
//! pool's GPUs. A small linear program (the dual of a relaxed configuration program) picks the
//! weights that give the largest bound; the bound is then re-evaluated from the weights after
//! they are repaired to be exactly feasible, so a solver's tolerance cannot make it invalid.
//! The charges use only what the verifier checks (memory, compute, isolation, allowed pools,
//! slice grid, time-slicing replica counts), never the planner's own restrictions (usable
//! profiles, per-tenant time-slicing compute, homogeneous MIG time-slicing, latency
//! predictions), so plans outside the planner's model are covered too.

use std::collections::{BTreeMap, BTreeSet};

use good_lp::{
    Constraint, Expression, ProblemVariables, Solution, SolverModel, Variable, constraint, variable,
};

use crate::catalog::{GpuModel, layout};
use crate::plan::problem::Problem;
use crate::plan::rules;
use crate::spec::{Demand, Isolation, Model};

/// A lower bound on plans: GPUs and, when every pool has a price, cost per hour. [`valid_bound`]
/// gives the one valid for every plan the verifier accepts; the optimiser's relaxation gives
/// one for the plans of the planner's model ([`crate::plan::build::Figures::model`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct LowerBound {
    pub gpus: u32,
    /// Cost per hour, when every pool has a price.
    pub cost_per_hour: Option<f64>,
}

/// Slack for comparisons in floating point (memory in MiB, shares); the verifier's own.
const EPS: f64 = 1e-9;

/// Above this many ways in all (the program's rows), the program is not solved and the simple
/// weights stand: the benchmark's 10,000-GPU fleet has under 8,000.
const MAX_ROWS: usize = 40_000;

/// The largest surcharge per GPU, as a multiple of the dearest price (keeps the program bounded;
/// a surcharge beyond every charge it could raise gains nothing).
const MAX_SURCHARGE: f64 = 1e3;

/// A device one unit of demand may be served on, within one pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Device {
    /// A whole exclusive GPU (or `n` of them for a multi-GPU replica).
    Whole,
    /// A whole GPU time-sliced between tenants.
    WholeShared,
    /// An exclusive MIG instance of the catalog profile with this index.
    Mig(usize),
    /// A time-sliced MIG instance of the catalog profile with this index.
    MigShared(usize),
}

/// One way of serving a unit of demand (a replica, or one request per second of a rate):
/// on an exclusive device it is charged `a` × the device's weight; on a time-sliced one
/// `a` × the device's slot weight + `b` × its compute weight.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Way {
    pool: usize,
    device: Device,
    a: f64,
    b: f64,
}

/// Demand that shares its ways: units (replicas or requests per second) and the ways.
#[derive(Clone, Debug)]
struct Unit {
    units: f64,
    ways: Vec<Way>,
}

/// What the bound needs of one pool.
#[derive(Clone, Debug)]
struct PoolFacts {
    /// GPUs the pool has at most.
    gpus: f64,
    /// Catalog profiles of its GPU (empty without MIG).
    profiles: usize,
    /// Instances per profile of every maximal layout, when the catalog's enumeration is known to
    /// be complete; `None` otherwise (then only the generic shares are used).
    layouts: Option<Layouts>,
    /// The generic share of every profile (valid whatever the layouts).
    generic: Vec<f64>,
    /// Memory (MiB) and SMs of every profile: an instance at least as large in both holds
    /// whatever a smaller one holds.
    sizes: Vec<(u64, u32)>,
}

impl PoolFacts {
    /// Whether profile `small` is no larger than `large` in memory and SMs, and comes first
    /// among profiles of equal size (so that of two equal profiles exactly one is kept).
    fn dominated(&self, small: usize, large: usize) -> bool {
        let (Some(s), Some(l)) = (self.sizes.get(small), self.sizes.get(large)) else { return false };
        small != large && s.0 <= l.0 && s.1 <= l.1 && (s != l || small < large)
    }
}

/// Weights of one pool's GPU budget: the surcharge, per profile the instance weight, and per
/// time-sliced device (index 0 the whole GPU, `1 + q` profile `q`) the slot and compute weights.
#[derive(Clone, Debug, PartialEq)]
struct Weights {
    surcharge: f64,
    instance: Vec<f64>,
    slot: Vec<f64>,
    compute: Vec<f64>,
}

/// The bound: GPUs and, on priced pools, cost per hour.
pub(crate) fn valid_bound(problem: &Problem<'_>) -> LowerBound {
    let spec = problem.spec;
    let priced =
        !spec.pools.is_empty() && spec.pools.iter().all(|p| p.cost_per_gpu_hour.is_some_and(|c| c > 0.0));
    let units = demand_units(problem);
    let pools = pool_facts(problem);
    let gpus = best_bound(&units, &pools, &vec![1.0; pools.len()]);
    let gpu_bound = (gpus - 1e-6).ceil().max(0.0) as u32;
    let cost_per_hour = priced.then(|| {
        let prices: Vec<f64> =
            problem.pools.iter().map(|p| p.spec.cost_per_gpu_hour.unwrap_or(0.0).max(0.0)).collect();
        let cost = best_bound(&units, &pools, &prices);
        // Every GPU costs at least the cheapest pool's price, too.
        let cheapest = spec.pools.iter().filter_map(|p| p.cost_per_gpu_hour).fold(f64::INFINITY, f64::min);
        let by_gpus = if cheapest.is_finite() { f64::from(gpu_bound) * cheapest } else { 0.0 };
        // To a millionth, as the plan's cost is; figures closer than a millionth (relative) are
        // compared as equal (`Quality::judge`, the verifier).
        let bound = (cost.max(by_gpus) * 1e6).round().max(0.0) / 1e6;
        integral_cost(bound, &prices)
    });
    LowerBound { gpus: gpu_bound, cost_per_hour }
}

/// Amounts in cents above which [`integral_cost`] leaves a bound as it is (the table would
/// pass 20 million entries: $200,000 per hour).
const INTEGRAL_COST_MAX_CENTS: u64 = 20_000_000;

/// A cost bound raised by integrality: every plan costs `Σ_p price_p × G_p` with whole GPUs
/// `G_p ≥ 0`, so no plan costs less than the smallest such sum that reaches `bound` (a coin
/// problem, solved by a table over the prices in cents divided by their greatest common
/// divisor). Valid for any valid `bound`; unchanged when a price is not a whole number of
/// cents or the table would be too large ([`INTEGRAL_COST_MAX_CENTS`]).
pub(crate) fn integral_cost(bound: f64, prices: &[f64]) -> f64 {
    let Some(cents) = whole_cents(prices) else { return bound };
    if !bound.is_finite() || bound <= 0.0 {
        return bound;
    }
    // The bound in cents, less a thousandth of a cent for rounding (it is given to a millionth
    // of a dollar): no sum of whole cents below this reaches it.
    let target = (bound * 100.0 - 1e-3).ceil().max(0.0) as u64;
    let g = cents.iter().copied().fold(0, gcd);
    let coins: Vec<usize> = cents.iter().map(|&c| (c / g) as usize).collect();
    let goal = target.div_ceil(g) as usize;
    let top = goal + coins.iter().copied().max().unwrap_or(1);
    if (top as u64).saturating_mul(g) > INTEGRAL_COST_MAX_CENTS {
        return bound;
    }
    let mut reachable = vec![false; top + 1];
    reachable[0] = true;
    for amount in 1..=top {
        reachable[amount] = coins.iter().any(|&c| c <= amount && reachable[amount - c]);
        if amount >= goal && reachable[amount] {
            return bound.max((amount as u64 * g) as f64 / 100.0);
        }
    }
    bound
}

/// The prices per GPU-hour of the problem's priced pools, for [`integral_cost`] and
/// [`price_step`] (which ignore any not above zero).
pub(crate) fn pool_prices(problem: &Problem<'_>) -> Vec<f64> {
    problem.pools.iter().filter_map(|p| p.spec.cost_per_gpu_hour).collect()
}

/// A cost in the problem's relative weights (`unit` dollars each) as a bound in dollars per
/// hour: to a millionth, as the plan's cost is, and raised by integrality ([`integral_cost`]).
pub(crate) fn integral_dollars(problem: &Problem<'_>, weights: f64, unit: f64) -> f64 {
    integral_cost((weights.max(0.0) * unit * 1e6).round() / 1e6, &pool_prices(problem))
}

/// The prices (those above zero) in whole cents, or `None` when one is not a whole number of
/// cents or none is above zero.
fn whole_cents(prices: &[f64]) -> Option<Vec<u64>> {
    let cents: Option<Vec<u64>> = prices
        .iter()
        .filter(|&&p| p > 0.0)
        .map(|&p| {
            let c = p * 100.0;
            ((c - c.round()).abs() < 1e-6 && c.round() >= 1.0).then_some(c.round() as u64)
        })
        .collect();
    cents.filter(|c| !c.is_empty())
}

/// The step between two plans' costs, in dollars: the greatest common divisor of the prices
/// in cents (every plan costs `Σ price × GPUs`; $0.80, $2.40 and $4.00 give $0.80), `None` when
/// a price is not a whole number of cents.
pub(crate) fn price_step(prices: &[f64]) -> Option<f64> {
    whole_cents(prices).map(|c| c.into_iter().fold(0, gcd) as f64 / 100.0)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The larger of two valid bounds: the simple weights (generic shares, no surcharge, each
/// time-sliced tenant charged the smaller of its slot and compute shares) and the weights the
/// linear program chooses.
fn best_bound(units: &[Unit], pools: &[PoolFacts], prices: &[f64]) -> f64 {
    let simple = simple_bound(units, pools, prices);
    let chosen = solve_weights(units, pools, prices)
        .map(|w| evaluate(units, pools, prices, &repair(pools, prices, w)))
        .unwrap_or(0.0);
    simple.max(chosen).max(0.0)
}

/// The demand of every model as units with their ways; units with the same ways are merged
/// (the program then has one variable for all of them).
fn demand_units(problem: &Problem<'_>) -> Vec<Unit> {
    let mut merged: BTreeMap<Vec<(usize, Device, u64, u64)>, Unit> = BTreeMap::new();
    for mc in &problem.models {
        let m = mc.spec;
        let mut ways = Vec::new();
        for (pi, pool) in problem.pools.iter().enumerate() {
            if pool.capacity_gpus() == 0
                || !m.allows_pool(&pool.spec.name)
                || !m.allows_gpu(problem.catalog, &pool.gpu.id)
            {
                continue;
            }
            ways.extend(model_ways(problem, m, pi, pool.gpu));
        }
        let units = match &m.demand {
            Demand::Replicas(n) => f64::from(*n),
            Demand::Rate(rate) => rate.rps,
        };
        // A model no device can serve is the infeasibility diagnostics' business: no charge.
        if ways.is_empty() || units <= 0.0 || !units.is_finite() {
            continue;
        }
        let key = ways.iter().map(|w| (w.pool, w.device, w.a.to_bits(), w.b.to_bits())).collect();
        merged.entry(key).or_insert_with(|| Unit { units: 0.0, ways }).units += units;
    }
    merged.into_values().collect()
}

fn pool_facts(problem: &Problem<'_>) -> Vec<PoolFacts> {
    let mut by_gpu: BTreeMap<&str, (Option<Layouts>, Vec<f64>)> = BTreeMap::new();
    problem
        .pools
        .iter()
        .map(|pool| {
            let (layouts, generic) = by_gpu
                .entry(pool.gpu.id.as_str())
                .or_insert_with(|| (maximal_layouts(pool.gpu), generic(pool.gpu)));
            PoolFacts {
                gpus: pool.capacity_gpus() as f64,
                profiles: generic.len(),
                layouts: layouts.clone(),
                generic: generic.clone(),
                sizes: pool
                    .gpu
                    .mig
                    .as_ref()
                    .map_or_else(Vec::new, |m| m.profiles.iter().map(|p| (p.memory_mib, p.sms)).collect()),
            }
        })
        .collect()
}

/// Instances per catalog profile, one row per maximal layout.
type Layouts = Vec<Vec<u32>>;

/// Instances per catalog profile of every maximal layout of `gpu`, or `None` when the catalog's
/// enumeration might be incomplete (more candidate multisets than it examines).
fn maximal_layouts(gpu: &GpuModel) -> Option<Layouts> {
    let mig = gpu.mig.as_ref()?;
    // The enumeration examines at most this many count vectors: all of them when within its cap.
    mig.profiles
        .iter()
        .try_fold(1usize, |acc, p| acc.checked_mul(usize::from(p.max_count) + 1))
        .filter(|&n| n <= layout::MAX_CANDIDATES)?;
    let out: Vec<Vec<u32>> = layout::maximal(gpu)
        .iter()
        .map(|l| {
            mig.profiles
                .iter()
                .map(|p| l.instances.iter().filter(|i| i.profile == p.name).count() as u32)
                .collect()
        })
        .collect();
    (!out.is_empty()).then_some(out)
}

fn generic(gpu: &GpuModel) -> Vec<f64> {
    gpu.mig
        .as_ref()
        .map_or_else(Vec::new, |mig| mig.profiles.iter().map(|p| instance_share(gpu, p)).collect())
}

/// The largest `k ≥ 1` with `memory ≤ capacity / k` (within the verifier's slack), capped at
/// `cap`; 0 when the memory does not fit at all.
fn most_slots(memory: f64, capacity: f64, cap: u32) -> u32 {
    if memory > capacity + EPS {
        return 0;
    }
    if memory <= EPS {
        return cap;
    }
    let mut k = ((capacity / memory).floor().clamp(1.0, f64::from(cap))) as u32;
    while k > 1 && memory > capacity / f64::from(k) + EPS {
        k -= 1;
    }
    while k < cap && memory <= capacity / f64::from(k + 1) + EPS {
        k += 1;
    }
    k
}

/// The ways one unit of demand of `m` may be served on pool `pi` (GPU `gpu`).
fn model_ways(problem: &Problem<'_>, m: &Model, pi: usize, gpu: &GpuModel) -> Vec<Way> {
    let policy = &problem.spec.policy;
    let usable = rules::usable_mib(gpu.memory_mib, policy.memory_headroom);
    let mem = m.memory_mib as f64;
    let eff = policy.time_slicing_efficiency.max(EPS);
    let profiles = gpu.mig.as_ref().map_or(&[][..], |g| g.profiles.as_slice());
    let way = |device, a, b| Way { pool: pi, device, a, b };
    let mut out = Vec::new();
    if let Demand::Rate(rate) = &m.demand {
        // Only groups on a whole GPU or an exclusive MIG instance with a measured capacity
        // cover requests ([`crate::spec::RateDemand::capacity_with`]: a sweep interpolated up to
        // the limit); a request per second there costs 1 / capacity of the device (the capacity
        // of its processes together under measured-point MPS, each within its memory). A point
        // on the MIG profile spanning the GPU counts for the whole GPU and for that instance.
        let max_processes = rules::measured_mps_max(problem.pools[pi].spec, m, policy);
        let names: BTreeSet<&str> =
            rate.points.iter().filter(|p| p.gpu == gpu.id).map(|p| p.profile.as_str()).collect();
        for name in names {
            let mut devices = Vec::new();
            if rules::whole_gpu_point(gpu, name) {
                devices.push((Device::Whole, gpu.memory_mib));
            }
            if let Some(q) = profiles.iter().position(|p| p.name == name) {
                devices.push((Device::Mig(q), profiles[q].memory_mib));
            }
            for (device, mib) in devices {
                let usable = rules::usable_mib(mib, policy.memory_headroom);
                for k in 1..=max_processes {
                    if k > 1 && !rules::mps_process_fits(mem, usable, k) {
                        continue;
                    }
                    if let Some(c) = rate.capacity_with(&gpu.id, name, k) {
                        out.push(way(device, 1.0 / (c.rps * f64::from(k)), 0.0));
                    }
                }
            }
        }
        return out;
    }
    if let Some(n) = m.gpus {
        // Multi-GPU models only on whole exclusive GPUs: n of them, each holding memory / n.
        let n = n.max(1);
        if mem / f64::from(n) <= usable + EPS {
            out.push(way(Device::Whole, f64::from(n), 0.0));
        }
        return out;
    }
    if mem <= usable + EPS && m.compute <= 1.0 + EPS {
        out.push(way(Device::Whole, 1.0, 0.0));
    }
    let shared = m.isolation == Isolation::Shared && !(m.llm && policy.llm_never_time_sliced);
    // A whole GPU time-sliced k ways (2 ≤ k ≤ maxTimeSlicingReplicas): at most k tenants, each
    // within 1/k of the memory, so 1/k ≥ 1/(the most slots its memory allows); the largest k
    // tenants' compute within the efficiency, so every tenant's is.
    let k = most_slots(mem, usable, policy.max_time_slicing_replicas);
    if shared && k >= 2 && m.compute <= eff + EPS {
        out.push(way(Device::WholeShared, rules::slot_share(k), m.compute / eff));
    }
    if m.isolation == Isolation::Dedicated {
        return out;
    }
    for (q, p) in profiles.iter().enumerate() {
        let inst = rules::usable_mib(p.memory_mib, policy.memory_headroom);
        let sm_share = f64::from(p.sms) / f64::from(gpu.sms.max(1));
        // An exclusive instance: the memory and the compute fit.
        if mem <= inst + EPS && m.compute <= sm_share + EPS {
            out.push(way(Device::Mig(q), 1.0, 0.0));
        }
        // A time-sliced instance with k replicas (the verifier bounds k only by the tenants'
        // memory): at most k tenants, each within 1/k of the instance's memory; the largest k
        // tenants' compute within efficiency × SM share.
        let k = most_slots(mem, inst, u32::MAX);
        if shared && k >= 1 && sm_share > 0.0 && m.compute <= eff * sm_share + EPS {
            out.push(way(Device::MigShared(q), rules::slot_share(k), m.compute / (eff * sm_share)));
        }
    }
    out
}

/// A MIG instance's generic share of its GPU: the smaller of its compute slices and the width
/// it occupies on the memory-slice grid; the instances of a layout the verifier accepts sum to
/// at most 1 in both (compute slices within the total, placements without overlap).
fn instance_share(gpu: &GpuModel, p: &crate::catalog::MigProfile) -> f64 {
    let Some(mig) = &gpu.mig else { return 1.0 };
    let c = f64::from(p.compute_slices) / f64::from(mig.compute_slices.max(1));
    let w = f64::from(p.size) / f64::from(mig.memory_slices.max(1));
    c.min(w)
}

/// The charge of one unit served `way` under `weights` (of the way's pool) at `price`.
fn charge(way: &Way, w: &Weights, budget: f64) -> f64 {
    match way.device {
        Device::Whole => way.a * budget,
        Device::Mig(q) => way.a * w.instance.get(q).copied().unwrap_or(0.0),
        Device::WholeShared => way.a * w.slot[0] + way.b * w.compute[0],
        Device::MigShared(q) => way.a * w.slot[1 + q] + way.b * w.compute[1 + q],
    }
}

/// The bound the weights prove: Σ units × least charge − Σ surcharge × the pool's GPUs. The
/// weights must be feasible ([`repair`]).
fn evaluate(units: &[Unit], pools: &[PoolFacts], prices: &[f64], weights: &[Weights]) -> f64 {
    let charged: f64 = units
        .iter()
        .map(|u| {
            let least = u
                .ways
                .iter()
                .map(|way| charge(way, &weights[way.pool], prices[way.pool] + weights[way.pool].surcharge))
                .fold(f64::INFINITY, f64::min);
            if least.is_finite() { u.units * least } else { 0.0 }
        })
        .sum();
    let paid: f64 = pools.iter().zip(weights).map(|(p, w)| w.surcharge * p.gpus).sum();
    charged - paid
}

/// The simple scheme: no surcharge, generic instance shares, and every time-sliced tenant
/// charged the smaller of its slot and compute shares (a per-tenant choice, which a common pair
/// of weights cannot express).
fn simple_bound(units: &[Unit], pools: &[PoolFacts], prices: &[f64]) -> f64 {
    units
        .iter()
        .map(|u| {
            let least = u
                .ways
                .iter()
                .map(|way| {
                    let budget = prices[way.pool];
                    let generic = |q: usize| pools[way.pool].generic.get(q).copied().unwrap_or(1.0) * budget;
                    match way.device {
                        Device::Whole => way.a * budget,
                        Device::Mig(q) => way.a * generic(q),
                        Device::WholeShared => way.a.min(way.b) * budget,
                        Device::MigShared(q) => way.a.min(way.b) * generic(q),
                    }
                })
                .fold(f64::INFINITY, f64::min);
            if least.is_finite() { u.units * least } else { 0.0 }
        })
        .sum()
}

/// Makes weights exactly feasible: no negative weight, the surcharge within its range, every
/// layout's instance weights within the budget (or the generic shares when the layouts are not
/// known), and every time-sliced device's two weights within its own.
fn repair(pools: &[PoolFacts], prices: &[f64], mut weights: Vec<Weights>) -> Vec<Weights> {
    let dearest = prices.iter().copied().fold(0.0, f64::max);
    for ((p, &price), w) in pools.iter().zip(prices).zip(&mut weights) {
        let clean = |x: f64| if x.is_finite() { x.max(0.0) } else { 0.0 };
        w.surcharge = clean(w.surcharge).min(MAX_SURCHARGE * dearest);
        let budget = price + w.surcharge;
        w.instance.iter_mut().for_each(|x| *x = clean(*x).min(budget));
        match &p.layouts {
            Some(layouts) => {
                let most = layouts
                    .iter()
                    .map(|l| l.iter().zip(&w.instance).map(|(&n, &x)| f64::from(n) * x).sum::<f64>())
                    .fold(0.0, f64::max);
                if most > budget {
                    w.instance.iter_mut().for_each(|x| *x *= budget / most);
                }
            }
            None => w.instance = p.generic.iter().map(|g| g * budget).collect(),
        }
        for k in 0..w.slot.len() {
            let (a, b) = (clean(w.slot[k]), clean(w.compute[k]));
            let own = if k == 0 { budget } else { w.instance.get(k - 1).copied().unwrap_or(0.0) };
            let scale = if a + b > own && a + b > 0.0 { own / (a + b) } else { 1.0 };
            w.slot[k] = a * scale;
            w.compute[k] = b * scale;
        }
    }
    weights
}

/// The variables of one pool in [`solve_weights`]'s program.
struct PoolVars {
    surcharge: Variable,
    instance: Vec<Expression>,
    instance_vars: Vec<Option<Variable>>,
    shared: BTreeMap<usize, (Variable, Variable)>,
}

/// The weights that maximise the bound (a linear program: the dual of the configuration
/// program relaxed to these charges), or `None` when the solver fails (the simple bound stands).
fn solve_weights(units: &[Unit], pools: &[PoolFacts], prices: &[f64]) -> Option<Vec<Weights>> {
    let rows: usize = units.iter().map(|u| u.ways.len()).sum();
    if units.is_empty() || rows > MAX_ROWS {
        return None;
    }
    let dearest = prices.iter().copied().fold(0.0, f64::max);
    let mut vars = ProblemVariables::new();
    let mut cons = Vec::new();
    let mut pv: Vec<PoolVars> = Vec::new();
    for (pi, p) in pools.iter().enumerate() {
        pv.push(pool_vars(&mut vars, &mut cons, p, prices[pi], dearest));
    }
    // Slot and compute weights only for the time-sliced devices some way uses.
    for u in units {
        for way in &u.ways {
            let k = match way.device {
                Device::WholeShared => 0,
                Device::MigShared(q) => 1 + q,
                _ => continue,
            };
            let p = &mut pv[way.pool];
            if let std::collections::btree_map::Entry::Vacant(e) = p.shared.entry(k) {
                let (a, b) = (vars.add(variable().min(0.0)), vars.add(variable().min(0.0)));
                e.insert((a, b));
                let own = if k == 0 { p.surcharge + prices[way.pool] } else { p.instance[k - 1].clone() };
                cons.push(constraint!(a + b <= own));
            }
        }
    }
    let mut objective = Expression::from(0.0);
    for u in units {
        let z = vars.add(variable().min(0.0));
        objective += u.units * z;
        unit_rows(u, z, pools, &pv, prices, &mut cons);
    }
    for (p, v) in pools.iter().zip(&pv) {
        objective -= p.gpus * v.surcharge;
    }
    let mut model = vars.maximise(objective).using(good_lp::solvers::microlp::microlp);
    for c in cons {
        model.add_constraint(c);
    }
    let sol = model.solve().ok()?;
    Some(
        pools
            .iter()
            .zip(&pv)
            .map(|(p, v)| {
                let kinds = 1 + p.profiles;
                let mut w = Weights {
                    surcharge: sol.value(v.surcharge),
                    instance: v.instance_vars.iter().map(|x| x.map_or(0.0, |x| sol.value(x))).collect(),
                    slot: vec![0.0; kinds],
                    compute: vec![0.0; kinds],
                };
                for (&k, &(a, b)) in &v.shared {
                    w.slot[k] = sol.value(a);
                    w.compute[k] = sol.value(b);
                }
                w
            })
            .collect(),
    )
}

/// One pool's surcharge and instance weights in [`solve_weights`]'s program, with their rows
/// (every layout within the budget, larger instances weighing at least the smaller ones).
fn pool_vars(
    vars: &mut ProblemVariables,
    cons: &mut Vec<Constraint>,
    p: &PoolFacts,
    price: f64,
    dearest: f64,
) -> PoolVars {
    let surcharge = vars.add(variable().min(0.0).max(MAX_SURCHARGE * dearest));
    let budget: Expression = surcharge + price;
    let mut instance = Vec::new();
    let mut instance_vars = Vec::new();
    match &p.layouts {
        Some(layouts) => {
            let v: Vec<Variable> = (0..p.profiles).map(|_| vars.add(variable().min(0.0))).collect();
            // Within the budget even for a profile no layout holds (keeps the program bounded).
            for &x in &v {
                cons.push(constraint!(x <= budget.clone()));
            }
            for l in layouts {
                let sum: Expression = l.iter().zip(&v).map(|(&n, &x)| f64::from(n) * x).sum();
                cons.push(constraint!(sum <= budget.clone()));
            }
            // A larger instance weighs at least as much as a smaller one (no loss: lowering a
            // larger one's weight to the smaller's changes no least charge of an exclusive
            // replica), so an exclusive replica's rows for larger instances are implied.
            for large in 0..p.profiles {
                for small in 0..p.profiles {
                    if p.dominated(small, large) {
                        cons.push(constraint!(v[small] <= v[large]));
                    }
                }
            }
            instance.extend(v.iter().map(|&x| Expression::from(x)));
            instance_vars.extend(v.into_iter().map(Some));
        }
        None => {
            instance.extend(p.generic.iter().map(|&g| g * budget.clone()));
            instance_vars.extend(p.generic.iter().map(|_| None));
        }
    }
    PoolVars { surcharge, instance, instance_vars, shared: BTreeMap::new() }
}

/// A unit's charge `z` is at most what each of its ways charges (a way on a MIG instance
/// that a way on a smaller instance of the same pool dominates adds no row).
fn unit_rows(
    u: &Unit,
    z: Variable,
    pools: &[PoolFacts],
    pv: &[PoolVars],
    prices: &[f64],
    cons: &mut Vec<Constraint>,
) {
    for way in &u.ways {
        let p = &pv[way.pool];
        if let Device::Mig(q) = way.device
            && pools[way.pool].layouts.is_some()
            && u.ways.iter().any(|o| {
                o.pool == way.pool
                    && o.a == way.a
                    && matches!(o.device, Device::Mig(s) if pools[way.pool].dominated(s, q))
            })
        {
            continue;
        }
        let rhs: Expression = match way.device {
            Device::Whole => way.a * (p.surcharge + prices[way.pool]),
            Device::Mig(q) => way.a * p.instance[q].clone(),
            Device::WholeShared => {
                let (a, b) = p.shared[&0];
                way.a * a + way.b * b
            }
            Device::MigShared(q) => {
                let (a, b) = p.shared[&(1 + q)];
                way.a * a + way.b * b
            }
        };
        cons.push(constraint!(z <= rhs));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{self, A100, L4};
    use crate::catalog::Catalog;
    use crate::spec::Spec;

    fn bound(spec: &Spec) -> LowerBound {
        let catalog = Catalog::builtin();
        valid_bound(&crate::plan::problem::build(spec, &catalog))
    }

    fn nodes(prefix: &str, n: u32) -> Vec<String> {
        (1..=n).map(|i| format!("{prefix}-{i}")).collect()
    }

    fn shared(name: &str, gib: u64, compute: f64, replicas: u32) -> Model {
        let mut m = bench::model(name, gib * 1024, compute, replicas);
        m.isolation = Isolation::Shared;
        m
    }

    #[test]
    fn slots_are_whole_numbers_within_the_verifiers_slack() {
        assert_eq!(most_slots(8192.0, 23034.0, 8), 2);
        assert_eq!(most_slots(7678.0, 23034.0, 8), 3);
        assert_eq!(most_slots(7678.0 + 1e-12, 23034.0, 8), 3, "within the slack");
        assert_eq!(most_slots(100.0, 23034.0, 8), 8, "capped by maxTimeSlicingReplicas");
        assert_eq!(most_slots(30000.0, 23034.0, 8), 0);
        assert_eq!(most_slots(0.0, 100.0, 5), 5);
    }

    /// The GPU bound of `models` on one pool of `gpu` with `count` one-node nodes of `per_node`.
    fn gpus(gpu: &str, per_node: u32, count: u32, models: Vec<Model>) -> u32 {
        bound(&bench::spec("case", vec![bench::pool("p", gpu, per_node, nodes("n", count))], models)).gpus
    }

    #[test]
    fn time_sliced_tenants_pay_a_whole_slot() {
        // Four 9 GiB tenants of an L4 (22.5 GiB): two slots at most per GPU, so 2 GPUs,
        // although their memory is 0.4 of a GPU each and their compute 0.066 of the efficiency.
        assert_eq!(gpus(L4, 1, 4, vec![shared("m", 9, 0.05, 4)]), 2);
    }

    #[test]
    fn a_tenant_above_the_efficiency_is_not_time_sliced() {
        // Compute 0.8 > 0.76: no time-sliced device holds it, so each replica has a whole GPU.
        assert_eq!(gpus(L4, 1, 3, vec![shared("m", 2, 0.8, 3)]), 3);
    }

    #[test]
    fn combined_compute_tenants_keep_the_bound_at_one_gpu() {
        // Issue 13: 0.5 + 0.2 fit the efficiency together, 8 GiB each fit two slots: one GPU.
        assert_eq!(gpus(L4, 1, 2, vec![shared("a", 8, 0.5, 1), shared("b", 8, 0.2, 1)]), 1);
    }

    #[test]
    fn two_half_gpu_instances_per_gpu_at_most() {
        // 3g.40gb has 3 of 7 compute slices, but no layout holds three: seven replicas need 4
        // GPUs (the generic share 3/7 gave ⌈3⌉ = 3).
        assert_eq!(gpus(A100, 8, 1, vec![bench::model("m", 30 * 1024, 0.3, 7)]), 4);
    }

    #[test]
    fn a_mixed_layout_with_a_time_sliced_instance_stays_at_one_gpu() {
        // Issue 13: 3g.40gb + 4 × 1g.10gb, one 1g time-sliced by two, serves a 3g model and
        // five small shared ones on one A100: the bound must allow it.
        let mut models = vec![bench::model("big", 30 * 1024, 0.3, 1)];
        models.extend((0..5).map(|i| shared(&format!("s{i}"), 4, 0.05, 1)));
        assert_eq!(gpus(A100, 1, 2, models), 1);
    }

    #[test]
    fn a_small_cheap_pool_is_paid_for_by_its_capacity() {
        // Three dedicated 10 GiB replicas; one L4 at 0.8, A100s at 2.4: the best plan costs
        // 0.8 + 2 × 2.4 = 5.6. Without the pool's capacity the bound would be 3 × 0.8.
        let mut l4 = bench::pool("l4", L4, 1, nodes("l", 1));
        l4.cost_per_gpu_hour = Some(0.8);
        let mut a100 = bench::pool("a100", A100, 4, nodes("a", 1));
        a100.cost_per_gpu_hour = Some(2.4);
        let mut m = bench::model("m", 10 * 1024, 0.3, 3);
        m.isolation = Isolation::Dedicated;
        let b = bound(&bench::spec("capacity", vec![a100, l4], vec![m]));
        assert_eq!(b.gpus, 3);
        assert_eq!(b.cost_per_hour, Some(5.6));
    }

    #[test]
    fn weights_are_repaired_to_fit_every_layout() {
        let catalog = Catalog::builtin();
        let spec = bench::spec(
            "repair",
            vec![bench::pool("a100", A100, 8, nodes("n", 1))],
            vec![bench::model("m", 30 * 1024, 0.3, 7)],
        );
        let problem = crate::plan::problem::build(&spec, &catalog);
        let pools = pool_facts(&problem);
        let n = pools[0].profiles;
        let wild = vec![Weights {
            surcharge: -1.0,
            instance: vec![1.0; n],
            slot: vec![1.0; n + 1],
            compute: vec![1.0; n + 1],
        }];
        let fixed = repair(&pools, &[1.0], wild);
        assert_eq!(fixed[0].surcharge, 0.0);
        for l in pools[0].layouts.as_ref().expect("the A100's layouts are enumerable") {
            let sum: f64 = l.iter().zip(&fixed[0].instance).map(|(&c, &w)| f64::from(c) * w).sum();
            assert!(sum <= 1.0 + 1e-12, "{l:?}: {sum}");
        }
        for k in 0..=n {
            let own = if k == 0 { 1.0 } else { fixed[0].instance[k - 1] };
            assert!(fixed[0].slot[k] + fixed[0].compute[k] <= own + 1e-12);
        }
    }

    /// The cheapest cost of whole-GPU replicas (`memory GiB` each) on pools `(GPU, price,
    /// GPUs)`, by trying every assignment; `None` when none fits.
    fn brute_force_whole(models: &[(u64, u32)], pools: &[(&str, f64, u32)]) -> Option<(u32, f64)> {
        let catalog = Catalog::builtin();
        let replicas: Vec<u64> =
            models.iter().flat_map(|&(gib, n)| (0..n).map(move |_| gib * 1024)).collect();
        let mut best: Option<(u32, f64)> = None;
        let mut choice = vec![0usize; replicas.len()];
        loop {
            let mut used = vec![0u32; pools.len()];
            let fits = replicas.iter().zip(&choice).all(|(&mib, &p)| {
                used[p] += 1;
                catalog.get(pools[p].0).is_some_and(|g| mib <= g.memory_mib) && used[p] <= pools[p].2
            });
            if fits {
                let cost: f64 = used.iter().zip(pools).map(|(&u, p)| f64::from(u) * p.1).sum();
                let gpus = used.iter().sum();
                best = Some(best.map_or((gpus, cost), |(g, c)| (g.min(gpus), c.min(cost))));
            }
            // Next assignment, odometer style.
            let mut i = 0;
            loop {
                if i == choice.len() {
                    return best;
                }
                choice[i] += 1;
                if choice[i] < pools.len() {
                    break;
                }
                choice[i] = 0;
                i += 1;
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

        /// Pools of limited capacity and different prices: the bounds stay at or below the
        /// cheapest assignment and the fewest GPUs found by trying every assignment.
        #[test]
        fn capacity_bounds_stay_below_the_brute_force_optimum(
            models in proptest::collection::vec((1u64..=40, 1u32..=3), 1..=3),
            l4 in 0u32..=3,
            a100 in 1u32..=4,
            l4_price in 1u32..=30,
        ) {
            proptest::prop_assume!(models.iter().map(|m| m.1).sum::<u32>() <= 7);
            let table = [(L4, f64::from(l4_price) / 10.0, l4), (A100, 2.4, a100)];
            let Some((gpus, cost)) = brute_force_whole(&models, &table) else { return Ok(()) };
            let mut pools = Vec::new();
            for (name, (gpu, price, n)) in ["l4", "a100"].iter().zip(table) {
                if n > 0 {
                    let mut p = bench::pool(name, gpu, 1, nodes(name, n));
                    p.cost_per_gpu_hour = Some(price);
                    pools.push(p);
                }
            }
            let specs: Vec<Model> = models
                .iter()
                .enumerate()
                .map(|(i, &(gib, n))| {
                    let mut m = bench::model(&format!("m{i}"), gib * 1024, 0.5, n);
                    m.isolation = Isolation::Dedicated;
                    m
                })
                .collect();
            let b = bound(&bench::spec("brute", pools, specs));
            proptest::prop_assert!(b.gpus <= gpus, "GPU bound {} above {gpus}", b.gpus);
            let c = b.cost_per_hour.unwrap_or(0.0);
            proptest::prop_assert!(c <= cost * (1.0 + 1e-6), "cost bound {c} above {cost}");
        }
    }

    /// The smallest sum of whole GPUs at these prices that reaches `bound`, by enumeration.
    fn smallest_sum_at_least(bound: f64, prices: &[f64]) -> f64 {
        let mut best = f64::INFINITY;
        let mut counts = vec![0u32; prices.len()];
        loop {
            let sum: f64 = counts.iter().zip(prices).map(|(&n, &p)| f64::from(n) * p).sum();
            if sum >= bound - 1e-9 {
                best = best.min(sum);
            }
            // Next combination of counts 0..=40 (an odometer).
            let Some(i) = counts.iter().position(|&n| n < 40) else { break };
            counts[i] += 1;
            counts[..i].iter_mut().for_each(|n| *n = 0);
        }
        best
    }

    #[test]
    fn integral_cost_is_the_smallest_reachable_sum_by_brute_force() {
        let mut rng = bench::SplitMix64(23);
        // Prices of $0.30 or more and bounds up to $12: 40 GPUs of a pool reach every bound.
        for _ in 0..150 {
            let k = 1 + (rng.next_u64() % 3) as usize;
            let prices: Vec<f64> = (0..k).map(|_| (30 + rng.next_u64() % 571) as f64 / 100.0).collect();
            let bound = rng.range(0.0, 12.0);
            let want = smallest_sum_at_least(bound, &prices);
            let got = integral_cost(bound, &prices);
            assert!(got >= bound - 1e-9, "{got} below the bound {bound}");
            assert!((got - want).abs() < 1e-6, "prices {prices:?}, bound {bound}: {got} against {want}");
        }
        // Prices in fractions of a cent are left alone; so is a bound met exactly.
        assert_eq!(integral_cost(3.3, &[0.805, 2.4]), 3.3);
        assert!((integral_cost(4.8, &[0.8, 2.4]) - 4.8).abs() < 1e-9);
        assert!((integral_cost(86.23, &[0.8, 2.4, 4.0]) - 86.4).abs() < 1e-9);
    }
}
