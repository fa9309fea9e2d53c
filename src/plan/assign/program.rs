//! The assignment program of one pool's MIG GPUs: which node gets how many GPUs of each layout
//! the optimiser counted, and which node serves each MIG replica (see [`assign_mig`]).
//!
//! The optimiser counts layouts and replicas per pool; it does not say which node holds what.
//! Dealing the GPUs round robin and placing replicas greedily ([`super::decompose`]) loses
//! replicas of `spread` models whenever the per-node rules bite: `spread: node` wants distinct
//! nodes with a free instance of its profile, and `spread: gpu` on MIG wants nodes where the
//! device plugin cannot hand two of its replicas instances of one GPU
//! ([`super::NodeA::mig_spread_ok`]). This program writes both rules as rows over the nodes,
//! so that which node holds which layout is chosen with the rules in view. Where the counts
//! have no lay-out (the optimiser's model counts nodes per profile, not which node holds
//! which layout), it may open GPUs of any layout of the pool on the nodes' unused GPUs, each
//! at the pool's price: it places every replica it can, then opens as few GPUs beyond the
//! counts as it can. Its node limit may stop it short of that optimum; what it leaves out is
//! the caller's to place.

use std::collections::BTreeMap;

use good_lp::{Constraint, Expression, ProblemVariables, Variable, variable};

use crate::plan::assign::{Dev, PoolA};
use crate::plan::milp;
use crate::plan::problem::{Kind, Need, PoolCtx, Problem};
use crate::spec::Spread;

/// What [`assign_mig`] decided for one pool.
#[derive(Debug, Default)]
pub(super) struct MigPlan {
    /// (node, layout index, GPUs): GPUs of a layout to configure on a node's unused GPUs.
    pub gpus: Vec<(usize, usize, u64)>,
    /// (node, model, profile, replicas): MIG replicas to place on a node.
    pub replicas: Vec<(usize, usize, usize, u32)>,
    /// Replicas placed, and GPUs opened beyond the counts (the program's two objectives).
    pub placed: u64,
    pub opened: u64,
}

impl MigPlan {
    /// Whether this plan beats `other`: more replicas placed, or as many on fewer GPUs opened.
    pub(super) fn beats(&self, other: &MigPlan) -> bool {
        (self.placed, std::cmp::Reverse(self.opened)) > (other.placed, std::cmp::Reverse(other.opened))
    }
}

/// Which profiles [`assign_mig`] may give a model's MIG replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Profiles {
    /// The optimiser's: each (model, profile) of the demand keeps its replicas.
    Counted,
    /// Any MIG profile of the pool among the model's options, for models with a fixed number
    /// of replicas (a rate model's replicas depend on the option, so it keeps the optimiser's).
    Any,
}

/// Programs with more variables than this are not written (the decomposition deals instead).
const MAX_VARIABLES: usize = 4_000;

/// Branch-and-bound nodes one assignment program may explore (deterministic, either solver).
const NODE_LIMIT: u64 = 2_000;

/// Assigns pool `pi`'s MIG GPUs (`left[l]` GPUs of layout `l`, and GPUs of any of its layouts
/// beyond those at the pool's price) to the unused GPUs of the `eligible` nodes of `pa`, and
/// its MIG replicas (`demand`: (model, profile) → replicas) to those nodes. The objective
/// places as many replicas as the rules allow (each weighs more than every GPU the pool could
/// open), then opens the fewest GPUs beyond the counts. The rules:
///
/// - a node's replicas of a profile fit in the instances of that profile its GPUs hold (the
///   layouts opened here and the MIG GPUs it already has);
/// - a `spread: node` model has at most one replica per node, none on a node that already
///   serves it (whole or time-sliced);
/// - a `spread: gpu` model has two replicas of profile `q` on a node only if no MIG GPU of the
///   node holds two `q` instances, and replicas on `q` and `q′` only if none holds both (the
///   rule of [`super::NodeA::mig_spread_ok`], on the layouts as configured).
///
/// With [`Profiles::Any`] a fixed-demand model's replicas of the pool may take any of its MIG
/// options there (each is admitted for the model: memory, compute, latency), so that a
/// `spread` model the counts put on a profile its nodes cannot hold apart moves to another.
///
/// `None` when the program is too large or the solver gives no solution; the caller then
/// deals the GPUs as before. Replicas the returned plan leaves out are the caller's to place.
pub(super) fn assign_mig(
    problem: &Problem<'_>,
    pi: usize,
    pa: &PoolA,
    eligible: &[usize],
    left: &[u64],
    demand: &BTreeMap<(usize, usize), u32>,
    profiles: Profiles,
) -> Option<MigPlan> {
    let pool = problem.pools.get(pi)?;
    let (keys, group, totals) = demand_groups(problem, pi, demand, profiles);
    // Every layout that holds a profile some replica may use.
    let layouts: Vec<usize> = (0..pool.layouts.len())
        .filter(|&l| keys.iter().any(|&(_, q)| pool.layouts[l].counts.get(q).is_some_and(|&c| c > 0)))
        .collect();
    if eligible.len() * (2 * layouts.len() + 2 * keys.len()) + layouts.len() > MAX_VARIABLES {
        return None;
    }
    let at = Pool {
        problem,
        pool,
        pa,
        eligible,
        left,
        keys,
        group,
        totals,
        free: eligible
            .iter()
            .map(|&n| pa.nodes[n].gpus.iter().filter(|d| **d == Dev::Unused).count() as u64)
            .collect(),
        fixed: eligible
            .iter()
            .map(|&n| {
                pa.nodes[n]
                    .gpus
                    .iter()
                    .filter_map(|d| if let Dev::Mig { counts, .. } = d { Some(counts) } else { None })
                    .collect()
            })
            .collect(),
        layouts,
    };
    let mut p = Written { vars: ProblemVariables::new(), cons: Vec::new(), y: Vec::new(), x: Vec::new() };
    let placed = at.variables(&mut p);
    let opened = at.opened(&mut p);
    let moved = at.moved(&mut p, demand);
    // One replica placed outweighs every GPU the pool's nodes could open; one GPU outweighs
    // every replica moved off its counted profile.
    let weight = pool.weight.max(f64::MIN_POSITIVE);
    let replica = weight * (at.free.iter().sum::<u64>() as f64 + 1.0);
    let shift = weight / (f64::from(at.totals.iter().sum::<u32>()) + 1.0);
    at.instance_rows(&mut p);
    at.spread_node_rows(&mut p);
    for i in 0..eligible.len() {
        at.spread_gpu_rows(&mut p, i);
    }
    let Written { vars, cons, y, x } = p;
    let values =
        milp::run_small(vars, weight * opened + shift * moved - replica * placed, cons, NODE_LIMIT).ok()?;
    let read = |v: &Variable| values.get(v).map_or(0, |x| x.round().max(0.0) as u64);
    let mut plan = MigPlan::default();
    let mut configured = vec![0u64; at.layouts.len()];
    for (i, &n) in eligible.iter().enumerate() {
        for (j, &l) in at.layouts.iter().enumerate() {
            let g = read(&y[i][j]);
            if g > 0 {
                plan.gpus.push((n, l, g));
                configured[j] += g;
            }
        }
        for (k, &(m, q)) in at.keys.iter().enumerate() {
            let r = read(&x[i][k]);
            if r > 0 {
                plan.replicas.push((n, m, q, u32::try_from(r).unwrap_or(u32::MAX)));
                plan.placed += r;
            }
        }
    }
    plan.opened = at.layouts.iter().zip(configured).map(|(&l, g)| g.saturating_sub(at.left[l])).sum();
    Some(plan)
}

/// The program's (model, profile) keys, each key's demand group, and each group's replicas:
/// with [`Profiles::Counted`] one group a key; with [`Profiles::Any`] a fixed-demand model's
/// keys are all its MIG options in pool `pi`, in one group holding its replicas there.
fn demand_groups(
    problem: &Problem<'_>,
    pi: usize,
    demand: &BTreeMap<(usize, usize), u32>,
    profiles: Profiles,
) -> (Vec<(usize, usize)>, Vec<usize>, Vec<u32>) {
    let mut keys: Vec<(usize, usize)> = Vec::new();
    let mut group: Vec<usize> = Vec::new();
    let mut totals: Vec<u32> = Vec::new();
    let mut of_model: BTreeMap<usize, usize> = BTreeMap::new();
    for (&(m, q), &n) in demand {
        let flexible = profiles == Profiles::Any
            && problem.models.get(m).is_some_and(|x| matches!(x.need, Need::Replicas(_)));
        if !flexible {
            keys.push((m, q));
            group.push(totals.len());
            totals.push(n);
            continue;
        }
        if let Some(&g) = of_model.get(&m) {
            totals[g] += n;
            continue;
        }
        let g = totals.len();
        of_model.insert(m, g);
        totals.push(n);
        for o in problem.models[m].options.iter().filter(|o| o.pool == pi) {
            if let Kind::Mig(q2) = o.kind
                && !keys.contains(&(m, q2))
            {
                keys.push((m, q2));
                group.push(g);
            }
        }
        if !keys.contains(&(m, q)) {
            keys.push((m, q));
            group.push(g);
        }
    }
    (keys, group, totals)
}

/// One pool's data for [`assign_mig`]; node `i` is `eligible[i]`.
struct Pool<'a, 'p> {
    problem: &'a Problem<'p>,
    pool: &'a PoolCtx<'p>,
    pa: &'a PoolA,
    eligible: &'a [usize],
    left: &'a [u64],
    /// The layouts with GPUs left, the (model, profile) keys, each key's demand group and each
    /// group's replicas ([`demand_groups`]).
    layouts: Vec<usize>,
    keys: Vec<(usize, usize)>,
    group: Vec<usize>,
    totals: Vec<u32>,
    /// Per node: unused GPUs, and the counts of the MIG GPUs it already holds.
    free: Vec<u64>,
    fixed: Vec<Vec<&'a Vec<u8>>>,
}

/// The program as written so far: `y[i][j]` GPUs of layout `layouts[j]` on node `i`,
/// `x[i][k]` replicas of `keys[k]` on node `i`.
struct Written {
    vars: ProblemVariables,
    cons: Vec<Constraint>,
    y: Vec<Vec<Variable>>,
    x: Vec<Vec<Variable>>,
}

impl Pool<'_, '_> {
    /// Instances of profile `q` in layout `l`.
    fn count(&self, l: usize, q: usize) -> u64 {
        u64::from(self.pool.layouts.get(l).and_then(|x| x.counts.get(q).copied()).unwrap_or(0))
    }

    /// Instances of profile `q` on the MIG GPUs node `i` already holds.
    fn fixed_count(&self, i: usize, q: usize) -> u64 {
        self.fixed[i].iter().map(|c| u64::from(c.get(q).copied().unwrap_or(0))).sum()
    }

    fn spread(&self, m: usize) -> Spread {
        self.problem.models.get(m).map_or(Spread::None, |x| x.spec.spread)
    }

    /// The replicas key `k` may take: its group's.
    fn replicas(&self, k: usize) -> f64 {
        f64::from(self.totals[self.group[k]])
    }

    /// The variables `y` and `x` with their bounds (a node's free GPUs, a key's replicas; a
    /// `spread: node` model at most once a node and not where the node already serves it);
    /// returns the replicas placed.
    fn variables(&self, p: &mut Written) -> Expression {
        for &f in &self.free {
            let row: Vec<Variable> =
                self.layouts.iter().map(|_| p.vars.add(variable().integer().min(0).max(f as f64))).collect();
            p.cons.push(row.iter().copied().sum::<Expression>().leq(f as f64));
            p.y.push(row);
        }
        for &n in self.eligible {
            let node = &self.pa.nodes[n];
            let row = (0..self.keys.len())
                .map(|k| {
                    let m = self.keys[k].0;
                    let cap = match self.spread(m) {
                        Spread::Node if node.hosts(m) => 0.0,
                        Spread::Node => 1.0,
                        _ => self.replicas(k),
                    };
                    p.vars.add(variable().integer().min(0).max(cap))
                })
                .collect();
            p.x.push(row);
        }
        let mut placed = Expression::from(0.0);
        for (g, &total) in self.totals.iter().enumerate() {
            let sum: Expression = (0..self.keys.len())
                .filter(|&k| self.group[k] == g)
                .flat_map(|k| p.x.iter().map(move |row| row[k]))
                .sum();
            p.cons.push(sum.clone().leq(f64::from(total)));
            placed += sum;
        }
        placed
    }

    /// The GPUs opened beyond the counts: per layout, `e ≥ Σ_i y[i][j] − left[l]`, `e ≥ 0`.
    fn opened(&self, p: &mut Written) -> Expression {
        let mut opened = Expression::from(0.0);
        for (j, &l) in self.layouts.iter().enumerate() {
            let e = p.vars.add(variable().min(0));
            let sum: Expression = p.y.iter().map(|row| row[j]).sum();
            p.cons.push((sum - e).leq(self.left.get(l).copied().unwrap_or(0) as f64));
            opened += e;
        }
        opened
    }

    /// The replicas beyond the optimiser's on a key of a group with several keys: per key,
    /// `e ≥ Σ_i x[i][k] − demand(k)`, `e ≥ 0` (so that a model leaves its counted profile
    /// only where that saves a GPU or places a replica).
    fn moved(&self, p: &mut Written, demand: &BTreeMap<(usize, usize), u32>) -> Expression {
        let mut moved = Expression::from(0.0);
        for (k, key) in self.keys.iter().enumerate() {
            if self.group.iter().filter(|&&g| g == self.group[k]).count() < 2 {
                continue;
            }
            let e = p.vars.add(variable().min(0));
            let sum: Expression = p.x.iter().map(|row| row[k]).sum();
            p.cons.push((sum - e).leq(f64::from(demand.get(key).copied().unwrap_or(0))));
            moved += e;
        }
        moved
    }

    /// A node's replicas of a profile within the instances its GPUs hold.
    fn instance_rows(&self, p: &mut Written) {
        let mut profiles: Vec<usize> = self.keys.iter().map(|k| k.1).collect();
        profiles.sort_unstable();
        profiles.dedup();
        for i in 0..self.eligible.len() {
            for &q in &profiles {
                let used: Expression =
                    self.keys.iter().enumerate().filter(|(_, k)| k.1 == q).map(|(k, _)| p.x[i][k]).sum();
                let mut have = Expression::from(self.fixed_count(i, q) as f64);
                for (j, &l) in self.layouts.iter().enumerate() {
                    have += self.count(l, q) as f64 * p.y[i][j];
                }
                p.cons.push(used.leq(have));
            }
        }
    }

    /// `spread: node`: one replica a node over the model's profiles.
    fn spread_node_rows(&self, p: &mut Written) {
        let mut models: Vec<usize> = self.keys.iter().map(|k| k.0).collect();
        models.dedup();
        for &m in models.iter().filter(|&&m| self.spread(m) == Spread::Node) {
            for row in &p.x {
                let sum: Expression =
                    self.keys.iter().enumerate().filter(|(_, k)| k.0 == m).map(|(k, _)| row[k]).sum();
                p.cons.push(sum.leq(1.0));
            }
        }
    }

    /// `spread: gpu` on node `i`: the device plugin's choice of instances may not put two of
    /// the model's replicas on one GPU. `b` (node `i` holds a GPU of layout `j`) and `z` (node
    /// `i` serves key `k`) are binaries written where a row needs them.
    fn spread_gpu_rows(&self, p: &mut Written, i: usize) {
        let gpu_keys: Vec<usize> =
            (0..self.keys.len()).filter(|&k| self.spread(self.keys[k].0) == Spread::Gpu).collect();
        let mut b: BTreeMap<usize, Variable> = BTreeMap::new();
        let mut present = |p: &mut Written, j: usize| -> Variable {
            *b.entry(j).or_insert_with(|| {
                let v = p.vars.add(variable().binary());
                p.cons.push((Expression::from(p.y[i][j]) - self.free[i] as f64 * v).leq(0.0));
                v
            })
        };
        let mut z: BTreeMap<usize, Variable> = BTreeMap::new();
        for &k in &gpu_keys {
            let (m, q) = self.keys[k];
            let r = self.replicas(k);
            // Two replicas on q: no GPU with two q instances.
            if r >= 2.0 {
                if self.fixed[i].iter().any(|c| c.get(q).copied().unwrap_or(0) >= 2) {
                    p.cons.push(Expression::from(p.x[i][k]).leq(1.0));
                } else {
                    for (j, &l) in self.layouts.iter().enumerate() {
                        if self.count(l, q) >= 2 {
                            let v = present(p, j);
                            p.cons.push((p.x[i][k] + (r - 1.0) * v).leq(r));
                        }
                    }
                }
            }
            if self.keys.iter().any(|&(m2, q2)| m2 == m && q2 != q) {
                let v = p.vars.add(variable().binary());
                p.cons.push((Expression::from(p.x[i][k]) - r * v).leq(0.0));
                z.insert(k, v);
            }
        }
        // Replicas on q and q′: no GPU holding both.
        for (a, &ka) in gpu_keys.iter().enumerate() {
            for &kb in &gpu_keys[a + 1..] {
                let ((ma, qa), (mb, qb)) = (self.keys[ka], self.keys[kb]);
                let (Some(&za), Some(&zb)) = (z.get(&ka), z.get(&kb)) else { continue };
                if ma != mb || qa == qb {
                    continue;
                }
                let both = |c: &&Vec<u8>| {
                    c.get(qa).copied().unwrap_or(0) >= 1 && c.get(qb).copied().unwrap_or(0) >= 1
                };
                if self.fixed[i].iter().any(both) {
                    p.cons.push((za + zb).leq(1.0));
                    continue;
                }
                for (j, &l) in self.layouts.iter().enumerate() {
                    if self.count(l, qa) >= 1 && self.count(l, qb) >= 1 {
                        let v = present(p, j);
                        p.cons.push((za + zb + v).leq(2.0));
                    }
                }
            }
        }
    }
}
