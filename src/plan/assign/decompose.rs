//! Decomposition of the optimiser's per-pool counts to nodes and GPUs (see [`decompose`]).

use std::collections::BTreeMap;

use crate::plan::assign::program::Profiles;
use crate::plan::assign::{
    Assignment, Dev, Mode, NodeA, PoolA, dev_hosts, empty, model_order, place, place_first, place_in,
    program, trim,
};
use crate::plan::layouts;
use crate::plan::milp::PoolCounts;
use crate::plan::problem::{Kind, Need, PoolCtx, Problem, Share};
use crate::spec::Spread;

/// Turns the optimiser's counts into concrete nodes and GPUs, then places every replica.
///
/// Devices are configured first: node classes (exclusive whole GPUs, time-sliced per k, MIG
/// time-slicing per profile and k), then multi-GPU and whole replicas, time-sliced GPUs and
/// MIG GPUs spread round robin over their eligible nodes (so that `spread` replicas find
/// distinct nodes). Then replicas go to configured devices with room, spread models first and,
/// within a model, time-sliced replicas before MIG ones.
///
/// Without `repair`, returns `None` as soon as a device or replica finds no room (the caller
/// then tries [`decompose_search`]). With `repair`, what finds no room is placed at the end by
/// first fit (any option of its model, configured room first, else a grown device), so the
/// result may cost more than the counts; `None` only if that fails too. The optimiser's spread
/// conditions are necessary, not sufficient, which is why repair exists.
pub(crate) fn decompose(
    problem: &Problem<'_>,
    counts: &[PoolCounts],
    replicas: &BTreeMap<(usize, usize, Kind), u32>,
    repair: bool,
) -> Option<Assignment> {
    decompose_deferred(problem, counts, replicas, repair).map(|x| x.0)
}

/// [`decompose`], with the replicas (model, pool, kind of the optimiser's choice), one entry
/// each, that found no room on the configured devices and were placed by first fit (repair
/// mode; empty otherwise).
///
/// Whole-GPU replicas go to the first exclusive-whole node with room; when that leaves some
/// replica without a place, the counts are laid out again with each whole-GPU replica on the
/// exclusive-whole node with the most unused GPUs (so that MIG GPUs still find a place on every
/// node, which `spread: node` models on MIG need), and that lay-out is kept when it has no
/// more such replicas and costs less, or as much with fewer of them.
pub(crate) fn decompose_deferred(
    problem: &Problem<'_>,
    counts: &[PoolCounts],
    replicas: &BTreeMap<(usize, usize, Kind), u32>,
    repair: bool,
) -> Option<(Assignment, Deferred)> {
    decompose_best(problem, counts, replicas, repair, MigLay::Dealt)
}

/// [`decompose`] in repair mode, with every pool's MIG GPUs and MIG replicas assigned to nodes
/// by a small integer program ([`program::assign_mig`]) instead of dealt round robin and placed
/// greedily: the program writes the per-node rules of `spread: node` and of `spread: gpu` on
/// MIG as rows, and may open GPUs beyond the counts where they have no lay-out. A pool whose
/// program is too large, or finds no solution within its node limit, is dealt as before.
/// Costs a solve per pool with MIG replicas, so the planner calls it only where the dealt
/// lay-out lost replicas (on large programs only where that lost more than 1% of the
/// counts' cost, or found no lay-out).
pub(crate) fn decompose_program(
    problem: &Problem<'_>,
    counts: &[PoolCounts],
    replicas: &BTreeMap<(usize, usize, Kind), u32>,
) -> Option<Assignment> {
    decompose_best(problem, counts, replicas, true, MigLay::Program).map(|x| x.0)
}

/// How [`decompose_with`] lays MIG GPUs and replicas out on nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MigLay {
    /// GPUs dealt round robin ([`deal_layouts`]), replicas placed greedily.
    Dealt,
    /// Both by [`program::assign_mig`].
    Program,
}

/// [`decompose_deferred`] with `lay`: whole-GPU replicas packed, then balanced when that left
/// some replica without a place.
fn decompose_best(
    problem: &Problem<'_>,
    counts: &[PoolCounts],
    replicas: &BTreeMap<(usize, usize, Kind), u32>,
    repair: bool,
    lay: MigLay,
) -> Option<(Assignment, Deferred)> {
    let packed = decompose_with(problem, counts, replicas, repair, false, lay, false);
    if packed.as_ref().is_some_and(|x| x.1.is_empty()) {
        return packed;
    }
    let balanced = decompose_with(problem, counts, replicas, repair, true, lay, false);
    match (packed, balanced) {
        (Some(p), Some(b)) => {
            let (pc, bc) = (p.0.cost(problem), b.0.cost(problem));
            let better = bc < pc - 1e-9 || (bc <= pc + 1e-9 && b.1.len() < p.1.len());
            Some(if better && b.1.len() <= p.1.len() { b } else { p })
        }
        (p, b) => p.or(b),
    }
}

/// The counts laid out as far as the configured devices take them: the assignment, and the
/// replicas (model, pool, kind of the optimiser's choice, one entry each) that found no room,
/// left out instead of placed by first fit (the start of [`crate::plan::repack::completed`],
/// which needs the room first fit would spend). Of the lay-outs with whole-GPU replicas packed
/// and balanced, the one that leaves fewer out, the cheaper among equals. `None` where a node
/// class finds no node.
pub(crate) fn decompose_partial(
    problem: &Problem<'_>,
    counts: &[PoolCounts],
    replicas: &BTreeMap<(usize, usize, Kind), u32>,
) -> Option<(Assignment, Deferred)> {
    [false, true]
        .into_iter()
        .filter_map(|balanced| decompose_with(problem, counts, replicas, true, balanced, MigLay::Dealt, true))
        .reduce(|p, b| {
            let better = b.1.len() < p.1.len()
                || (b.1.len() == p.1.len() && b.0.cost(problem) < p.0.cost(problem) - 1e-9);
            if better { b } else { p }
        })
}

/// [`decompose_deferred`] with whole-GPU replicas packed (first node with room) or
/// `balanced` (the node with the most unused GPUs); with `leave_out`, the deferred replicas
/// are not placed by first fit but returned ([`decompose_partial`]).
fn decompose_with(
    problem: &Problem<'_>,
    counts: &[PoolCounts],
    replicas: &BTreeMap<(usize, usize, Kind), u32>,
    repair: bool,
    balanced: bool,
    lay: MigLay,
    leave_out: bool,
) -> Option<(Assignment, Deferred)> {
    let mut a = empty(problem, |i| {
        let p = &problem.pools[i];
        if !p.autoscaled() {
            p.named.len()
        } else if repair {
            p.max_nodes as usize
        } else {
            counts.get(i).map_or(0, |c| c.nodes as usize).max(p.min_nodes as usize)
        }
    });
    // Replicas (model, pool, kind) the configured devices could not take, placed at the end
    // by first fit (repair mode only).
    let mut deferred: Vec<(usize, usize, Kind)> = Vec::new();
    // Per pool (`MigLay::Program`): what its MIG lay-out starts from.
    let mut mig_left: Vec<(usize, MigLeft)> = Vec::new();
    for (pi, (pool, c)) in problem.pools.iter().zip(counts).enumerate() {
        let pa = &mut a.pools[pi];
        let used_nodes = (c.nodes as usize).min(pa.nodes.len());
        let (class, mig_ts_class) = node_classes(pool, c, pa, used_nodes, repair)?;
        let whole = ClassedPool { problem, pi, class: &class, used_nodes, repair, balanced };
        whole.multi_gpu(pa, replicas, &mut deferred)?;
        let left =
            configure_gpus(pool, c, pa, &class, &mig_ts_class, used_nodes, repair, lay == MigLay::Dealt)?;
        if lay == MigLay::Program {
            // The used nodes outside the MIG time-slicing class, and the pool's unused nodes.
            let nodes = (0..pa.nodes.len())
                .filter(|&i| {
                    if i < used_nodes {
                        !mig_ts_class[i]
                    } else {
                        pa.nodes[i].gpus.iter().all(|d| *d == Dev::Unused)
                    }
                })
                .collect();
            mig_left.push((pi, MigLeft { nodes, used_nodes, mig_ts_class, left }));
        }
    }
    // Whole-GPU replicas are on their GPUs, except the deferred ones.
    a.replicas =
        replicas.iter().filter(|(k, _)| matches!(k.2, Kind::Whole(_))).map(|(&k, &n)| (k, n)).collect();
    for key in &deferred {
        if let Some(n) = a.replicas.get_mut(key) {
            *n -= 1;
        }
    }
    a.replicas.retain(|_, n| *n > 0);
    if lay == MigLay::Dealt {
        place_on_configured(problem, &mut a, replicas, repair, &mut deferred)?;
    } else {
        let (mig, rest): (BTreeMap<_, _>, BTreeMap<_, _>) =
            replicas.iter().map(|(&k, &n)| (k, n)).partition(|(k, _)| matches!(k.2, Kind::Mig(_)));
        place_on_configured(problem, &mut a, &rest, repair, &mut deferred)?;
        for (pi, lay) in mig_left {
            let mine: BTreeMap<(usize, usize, Kind), u32> =
                mig.iter().filter(|(k, _)| k.1 == pi).map(|(&k, &n)| (k, n)).collect();
            if mine.is_empty() {
                continue;
            }
            lay_out_mig(problem, &mut a, pi, &lay, &mine, &mut deferred)?;
        }
    }
    // Repair: what found no configured room goes where first fit puts it: the optimiser's
    // choice or the model's other options (smallest first) on a configured device with room,
    // else on a grown one (extended layout, new GPU, new node).
    a.repaired = u32::try_from(deferred.len()).unwrap_or(u32::MAX);
    if !leave_out && !place_deferred(problem, &mut a, deferred.clone()) {
        return None;
    }
    trim(problem, &mut a);
    Some((a, deferred))
}

/// Replicas placed by first fit in repair mode, one (model, pool, kind) entry each.
pub(crate) type Deferred = Vec<(usize, usize, Kind)>;

/// A node's class in [`decompose`]: `None` unclassed, `Some(None)` exclusive whole GPUs,
/// `Some(Some(share))` whole GPUs shared by time-slicing or MPS (`Some(Some(Share::ts(0)))`:
/// MIG time-slicing).
type NodeClass = Option<Option<Share>>;

/// One replica of a model moved from one option to another: ((model, from), (model, to)).
type OptionChange = ((usize, Kind), (usize, Kind));

/// Node classes of one pool's first `used_nodes` nodes: exclusive-whole nodes first (`Some(None)`),
/// then time-sliced nodes per k (`Some(Some(k))`), then MIG time-slicing nodes (`Some(Some(0))`,
/// flagged in the second vector), which get their GPUs of one profile and k here, round robin.
/// `None` when a MIG time-slicing GPU finds no node and `repair` is off.
fn node_classes(
    pool: &PoolCtx<'_>,
    c: &PoolCounts,
    pa: &mut PoolA,
    used_nodes: usize,
    repair: bool,
) -> Option<(Vec<NodeClass>, Vec<bool>)> {
    let mut class: Vec<NodeClass> = vec![None; pa.nodes.len()];
    let mut next = 0usize;
    for _ in 0..c.whole_nodes {
        if next < used_nodes {
            class[next] = Some(None);
            next += 1;
        }
    }
    for (&k, &z) in &c.ts_nodes {
        for _ in 0..z {
            if next < used_nodes {
                class[next] = Some(Some(k));
                next += 1;
            }
        }
    }
    // MIG time-slicing nodes next: they hold only their GPUs of one profile and k.
    let mut mig_ts_class: Vec<bool> = vec![false; pa.nodes.len()];
    for (&(q, k), &z) in &c.mig_ts_nodes {
        // The layouts' GPUs, one by one, largest count of `q` first.
        let mut gpus: Vec<&Vec<u8>> = Vec::new();
        for (l, &g) in c.mig_ts.get(&(q, k)).into_iter().flatten().enumerate() {
            if let Some(layout) = pool.layouts.get(l) {
                gpus.extend(std::iter::repeat_n(&layout.counts, g as usize));
            }
        }
        gpus.sort_by_key(|c| std::cmp::Reverse(c.get(q).copied().unwrap_or(0)));
        let mut gpus = gpus.into_iter();
        let mut want = gpus.len();
        let first = next;
        for _ in 0..z {
            if next >= used_nodes {
                break;
            }
            mig_ts_class[next] = true;
            class[next] = Some(Some(Share::ts(0)));
            next += 1;
        }
        // Round robin over the class's nodes, so that each holds one (`spread` needs them).
        let mut gi = 0;
        while want > 0 && first < next && gi < pool.gpn() as usize {
            for node in &mut pa.nodes[first..next] {
                if let Some(counts) = gpus.next() {
                    node.gpus[gi] =
                        Dev::MigTs { q, k, counts: counts.clone(), tenants: Vec::new(), excl: Vec::new() };
                    want -= 1;
                }
            }
            gi += 1;
        }
        if want > 0 && !repair {
            return None;
        }
    }
    Some((class, mig_ts_class))
}

/// One pool's node classes, as [`decompose`] places whole-GPU replicas on them.
struct ClassedPool<'p, 'a> {
    problem: &'p Problem<'a>,
    pi: usize,
    class: &'p [NodeClass],
    used_nodes: usize,
    repair: bool,
    /// Whole-GPU replicas on the node with the most unused GPUs (else the first with room).
    balanced: bool,
}

impl ClassedPool<'_, '_> {
    /// Multi-GPU (and whole) replicas of the pool, largest first, on exclusive-whole nodes,
    /// reserving their GPUs. What finds no node is `deferred` (repair) or ends it (`None`).
    fn multi_gpu(
        &self,
        pa: &mut PoolA,
        replicas: &BTreeMap<(usize, usize, Kind), u32>,
        deferred: &mut Vec<(usize, usize, Kind)>,
    ) -> Option<()> {
        let (problem, pi, class, used_nodes) = (self.problem, self.pi, self.class, self.used_nodes);
        let mut multi: Vec<(u32, usize)> = Vec::new();
        for (&(m, p, kind), &n) in replicas {
            if p == pi
                && let Kind::Whole(g) = kind
            {
                for _ in 0..n {
                    multi.push((g, m));
                }
            }
        }
        // Largest first; among equal sizes `spread: node` models first (they need distinct
        // nodes, which the others would fill).
        let spread_of = |m: usize| problem.models.get(m).map_or(Spread::None, |x| x.spec.spread);
        multi.sort_by(|x, y| y.0.cmp(&x.0).then(spread_of(y.1).cmp(&spread_of(x.1))).then(x.1.cmp(&y.1)));
        for (g, m) in multi {
            let g = g as usize;
            let by_node = problem.models.get(m).is_some_and(|x| x.spec.spread == Spread::Node);
            let free = |i: usize| pa.nodes[i].gpus.iter().filter(|d| **d == Dev::Unused).count();
            let mut fits = (0..used_nodes)
                .filter(|&i| class[i] == Some(None) && !(by_node && pa.nodes[i].hosts(m)) && free(i) >= g);
            let slot = if self.balanced {
                fits.max_by(|&x, &y| free(x).cmp(&free(y)).then(y.cmp(&x)))
            } else {
                fits.next()
            };
            let Some(slot) = slot else {
                if !self.repair {
                    return None;
                }
                deferred.push((m, pi, Kind::Whole(g as u32)));
                continue;
            };
            let node = &mut pa.nodes[slot];
            let mut left = g;
            for d in node.gpus.iter_mut() {
                if left > 0 && *d == Dev::Unused {
                    *d = Dev::Whole { tenant: Some(m) };
                    left -= 1;
                }
            }
        }
        Some(())
    }
}

/// Where one pool's MIG lay-out by the assignment program starts: the nodes that may take MIG
/// GPUs, the nodes the counts use and those of the MIG time-slicing class (for the dealt
/// fallback), and the counted MIG GPUs per layout not yet configured.
struct MigLeft {
    nodes: Vec<usize>,
    used_nodes: usize,
    mig_ts_class: Vec<bool>,
    left: Vec<u64>,
}

/// Pool `pi`'s MIG GPUs (`lay.left` per layout) and MIG replicas (`mine`) laid out by the
/// assignment program: its GPUs configured on its nodes' unused GPUs, its replicas placed on
/// their nodes; what it leaves out is `deferred`. A pool without a program solution is dealt
/// and placed greedily instead. `None` only where that greedy fallback ends it.
fn lay_out_mig(
    problem: &Problem<'_>,
    a: &mut Assignment,
    pi: usize,
    lay: &MigLeft,
    mine: &BTreeMap<(usize, usize, Kind), u32>,
    deferred: &mut Vec<(usize, usize, Kind)>,
) -> Option<()> {
    let demand: BTreeMap<(usize, usize), u32> = mine
        .iter()
        .filter_map(|(&(m, _, kind), &n)| if let Kind::Mig(q) = kind { Some(((m, q), n)) } else { None })
        .collect();
    let pool = problem.pools.get(pi)?;
    let assign =
        |profiles| program::assign_mig(problem, pi, &a.pools[pi], &lay.nodes, &lay.left, &demand, profiles);
    let mut plan = assign(Profiles::Counted);
    // Where the optimiser's profiles leave replicas out or need GPUs beyond the counts, the
    // models may move to other profiles.
    let total: u64 = demand.values().map(|&n| u64::from(n)).sum();
    if plan.as_ref().is_none_or(|p| p.placed < total || p.opened > 0)
        && let Some(any) = assign(Profiles::Any)
        && plan.as_ref().is_none_or(|p| any.beats(p))
    {
        plan = Some(any);
    }
    let Some(plan) = plan else {
        deal_layouts(pool, &mut a.pools[pi], &lay.left, lay.used_nodes, &lay.mig_ts_class, true)?;
        return place_on_configured(problem, a, mine, true, deferred);
    };
    for &(n, l, g) in &plan.gpus {
        let (Some(layout), Some(node)) = (pool.layouts.get(l), a.pools[pi].nodes.get_mut(n)) else {
            continue;
        };
        for d in node.gpus.iter_mut().filter(|d| **d == Dev::Unused).take(g as usize) {
            *d = Dev::Mig { counts: layout.counts.clone(), tenants: Vec::new() };
        }
    }
    let mut unplaced = demand;
    for &(n, m, q, r) in &plan.replicas {
        for _ in 0..r {
            if place_in(problem, a, m, pi, Kind::Mig(q), Mode::Fixed, n..n + 1) {
                *a.replicas.entry((m, pi, Kind::Mig(q))).or_insert(0) += 1;
                // A replica moved to another profile counts against one of its model's others.
                let key = if unplaced.get(&(m, q)).is_some_and(|&x| x > 0) {
                    Some((m, q))
                } else {
                    unplaced.iter().find(|(k, x)| k.0 == m && **x > 0).map(|(&k, _)| k)
                };
                if let Some(x) = key.and_then(|k| unplaced.get_mut(&k)) {
                    *x -= 1;
                }
            }
        }
    }
    for ((m, q), n) in unplaced {
        deferred.extend(std::iter::repeat_n((m, pi, Kind::Mig(q)), n as usize));
    }
    Some(())
}

/// Configures one pool's time-sliced GPUs (dealt over their class's nodes) and MIG GPUs (those
/// whose layout a node runs today stay there, the others dealt over the nodes outside the MIG
/// time-slicing class, when `deal_mig`). Returns the MIG GPUs per layout not yet configured
/// (all of them are, when `deal_mig`). `None` when one finds no room and `repair` is off; with
/// `repair`, first fit later opens what replicas still need.
#[allow(clippy::too_many_arguments)]
fn configure_gpus(
    pool: &PoolCtx<'_>,
    c: &PoolCounts,
    pa: &mut PoolA,
    class: &[NodeClass],
    mig_ts_class: &[bool],
    used_nodes: usize,
    repair: bool,
    deal_mig: bool,
) -> Option<Vec<u64>> {
    for (&k, &t) in &c.ts {
        for _ in 0..t {
            // Round robin over the nodes of the class, so that every such node holds one,
            // as `spread: node` replicas need.
            let dev = Dev::Ts { k, tenants: Vec::new() };
            if !deal(&mut pa.nodes[..used_nodes], |i| class[i] == Some(Some(k)), dev) {
                if !repair {
                    return None;
                }
                break; // first fit opens time-sliced GPUs where replicas need them
            }
        }
    }
    // MIG GPUs whose layout a node runs today stay where they are (no drain).
    let mut left: Vec<u64> = c.layouts.clone();
    for (ni, node) in pa.nodes.iter_mut().enumerate() {
        if mig_ts_class.get(ni).copied().unwrap_or(false) {
            continue;
        }
        let name = pool.node_name(ni);
        let Some(current) = pool.spec.current.iter().find(|n| n.node == name) else { continue };
        for (gi, names) in current.gpus.iter().enumerate() {
            if names.is_empty() || node.gpus.get(gi) != Some(&Dev::Unused) {
                continue;
            }
            let Some(now) = layouts::from_names(pool.gpu, &pool.profiles, names) else { continue };
            if let Some(l) = pool.layouts.iter().position(|x| x.counts == now.counts)
                && left.get(l).is_some_and(|&n| n > 0)
            {
                left[l] -= 1;
                node.gpus[gi] = Dev::Mig { counts: now.counts, tenants: Vec::new() };
            }
        }
    }
    if !deal_mig {
        return Some(left);
    }
    deal_layouts(pool, pa, &left, used_nodes, mig_ts_class, repair)?;
    Some(vec![0; left.len()])
}

/// Deals `left[l]` MIG GPUs of each layout `l` over the first `used_nodes` nodes outside the
/// MIG time-slicing class, the node with the most free GPUs first, so that spread models find
/// distinct nodes. `None` when one finds no room and `repair` is off.
fn deal_layouts(
    pool: &PoolCtx<'_>,
    pa: &mut PoolA,
    left: &[u64],
    used_nodes: usize,
    mig_ts_class: &[bool],
    repair: bool,
) -> Option<()> {
    let used_nodes = used_nodes.min(pa.nodes.len());
    for (l, &g) in left.iter().enumerate() {
        let Some(layout) = pool.layouts.get(l) else { continue };
        for _ in 0..g {
            let dev = Dev::Mig { counts: layout.counts.clone(), tenants: Vec::new() };
            if !deal(&mut pa.nodes[..used_nodes], |i| !mig_ts_class.get(i).copied().unwrap_or(true), dev) {
                if !repair {
                    return None;
                }
                break; // first fit opens MIG GPUs where replicas need them
            }
        }
    }
    Some(())
}

/// Places the replicas that are not whole-GPU ones on the configured devices, spread models
/// first (the model order), time-sliced before MIG within a model, heavy time-sliced tenants
/// before all. What finds no room is `deferred` (repair) or ends it (`None`).
fn place_on_configured(
    problem: &Problem<'_>,
    a: &mut Assignment,
    replicas: &BTreeMap<(usize, usize, Kind), u32>,
    repair: bool,
    deferred: &mut Vec<(usize, usize, Kind)>,
) -> Option<()> {
    let mut items: Vec<(usize, usize, Kind, u32)> = Vec::new();
    for m in model_order(problem) {
        // Time-sliced replicas first: they fit only on the few nodes of their sharing class,
        // which a `spread: node` model's MIG replicas (fitting almost anywhere) must not take.
        let mut mine: Vec<(usize, Kind, u32)> = replicas
            .range((m, 0, Kind::Whole(0))..)
            .take_while(|(k, _)| k.0 == m)
            .filter(|(k, _)| !matches!(k.2, Kind::Whole(_))) // already placed above
            .map(|(&(_, pi, kind), &n)| (pi, kind, n))
            .collect();
        mine.sort_by_key(|&(pi, kind, _)| (matches!(kind, Kind::Mig(_)), pi, kind));
        items.extend(mine.into_iter().map(|(pi, kind, n)| (m, pi, kind, n)));
    }
    // Heavy time-sliced tenants (they fit only next to small enough co-tenants) before all
    // others, so that the light ones fill the room they leave.
    let eff = problem.spec.policy.time_slicing_efficiency;
    items.sort_by_key(|&(m, _, kind, _)| match kind {
        Kind::TimeSliced(k) => problem
            .models
            .get(m)
            .is_none_or(|x| crate::plan::rules::light_tenant(x.spec.compute, k.k, eff, 1.0)),
        _ => true,
    });
    for (m, pi, kind, n) in items {
        for _ in 0..n {
            if place(problem, a, m, pi, kind, Mode::Fixed, usize::MAX) {
                *a.replicas.entry((m, pi, kind)).or_insert(0) += 1;
            } else if !repair {
                return None;
            } else {
                deferred.push((m, pi, kind));
            }
        }
    }
    Some(())
}

/// Places each of `deferred` (model, pool, kind) where first fit puts it: that choice or the
/// model's other options (smallest first) on a configured device with room, else on a grown
/// one (extended layout, new GPU, new node). Returns whether every one found a place.
fn place_deferred(problem: &Problem<'_>, a: &mut Assignment, deferred: Vec<(usize, usize, Kind)>) -> bool {
    for (m, pi, kind) in deferred {
        let Some(mc) = problem.models.get(m) else { return false };
        let mut others: Vec<&crate::plan::problem::Opt> =
            mc.options.iter().filter(|o| (o.pool, o.kind) != (pi, kind)).collect();
        others.sort_by(|x, y| x.size.total_cmp(&y.size).then(x.pool.cmp(&y.pool)).then(x.kind.cmp(&y.kind)));
        let choices: Vec<(usize, Kind)> =
            std::iter::once((pi, kind)).chain(others.iter().map(|o| (o.pool, o.kind))).collect();
        let attempts = [Mode::Fixed, Mode::Grow]
            .into_iter()
            .flat_map(|mode| choices.iter().map(move |&(p, k)| (p, k, mode)));
        if !place_first(problem, a, m, attempts) {
            return false;
        }
    }
    true
}

/// Puts `dev` on the first unused GPU of the eligible node with the most unused GPUs (the
/// lowest index among equals): dealing devices one by one this way spreads them round robin.
/// Returns whether some eligible node had room.
fn deal(nodes: &mut [NodeA], eligible: impl Fn(usize) -> bool, dev: Dev) -> bool {
    let free = |n: &NodeA| n.gpus.iter().filter(|d| **d == Dev::Unused).count();
    let slot = (0..nodes.len())
        .filter(|&i| eligible(i) && free(&nodes[i]) > 0)
        .max_by(|&x, &y| free(&nodes[x]).cmp(&free(&nodes[y])).then(y.cmp(&x)));
    let Some(d) = slot.and_then(|i| nodes[i].gpus.iter_mut().find(|d| **d == Dev::Unused)) else {
        return false;
    };
    *d = dev;
    true
}

/// Trades places between replicas so that no node breaks the `spread: gpu` rule on MIG (the
/// device plugin could hand two replicas of such a model instances of one GPU:
/// [`NodeA::mig_spread_ok`]), for an assignment whose layouts are final (trimmed). A replica of
/// a `spread: gpu` model on a node that breaks the rule trades its instance with a replica of a
/// model without `spread: gpu`: on an instance of the same profile on another node of the pool,
/// or, when both models have fixed replica counts and each has the other's profile among its
/// options, on an instance of another profile of any node of the pool (the spread replica then
/// asks for another resource, which may clash with none of its model's others). Every GPU keeps
/// its layout, so the cost does not change; every replica keeps an admissible option of its
/// model. A trade is made only when it lowers the pool's count of clashing pairs, so this ends.
/// Returns whether every node passes the rule afterwards.
pub(crate) fn untangle_mig_spread(problem: &Problem<'_>, a: &mut Assignment) -> bool {
    let mut ok = true;
    for (pi, pa) in a.pools.iter_mut().enumerate() {
        let mut clashes: Vec<usize> = pa.nodes.iter().map(|n| n.mig_spread_clashes(problem)).collect();
        let mut trades: Vec<OptionChange> = Vec::new();
        while let Some(made) = next_trade(problem, pi, pa, &mut clashes) {
            trades.extend(made);
        }
        for ((m, from), (_, to)) in trades {
            if let Some(c) = a.replicas.get_mut(&(m, pi, from)) {
                *c -= 1;
            }
            *a.replicas.entry((m, pi, to)).or_insert(0) += 1;
        }
        a.replicas.retain(|_, c| *c > 0);
        ok &= clashes.iter().all(|&c| c == 0);
    }
    ok
}

/// The first trade of [`untangle_mig_spread`] that lowers pool `pi`'s count of clashing pairs,
/// made (`pa` and `clashes` updated); returns the option changes it implies (none for a trade
/// within one profile), or `None` when no trade helps.
fn next_trade(
    problem: &Problem<'_>,
    pi: usize,
    pa: &mut PoolA,
    clashes: &mut [usize],
) -> Option<Vec<OptionChange>> {
    let spread_of = |m: usize| problem.models.get(m).map_or(Spread::None, |x| x.spec.spread);
    for n in 0..pa.nodes.len() {
        if clashes[n] == 0 {
            continue;
        }
        // Each `spread: gpu` replica of the node, in GPU and instance order.
        let mine: Vec<(usize, usize, usize, usize)> = pa.nodes[n]
            .gpus
            .iter()
            .enumerate()
            .flat_map(|(gi, d)| match d {
                Dev::Mig { tenants, .. } => tenants
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| spread_of(t.1) == Spread::Gpu)
                    .map(|(ti, &(q, m))| (gi, ti, q, m))
                    .collect(),
                _ => Vec::new(),
            })
            .collect();
        // Same profile first (no option changes), then other profiles.
        for same in [true, false] {
            for &(gi, ti, q, m) in &mine {
                // The node itself first (another profile only), then the others.
                let order = std::iter::once(n).chain((0..pa.nodes.len()).filter(|&x| x != n));
                for n2 in order {
                    if same && n2 == n {
                        continue;
                    }
                    for gj in 0..pa.nodes[n2].gpus.len() {
                        let d = &pa.nodes[n2].gpus[gj];
                        let Dev::Mig { tenants, .. } = d else { continue };
                        // `m` must not get a second instance of one GPU.
                        if (n2, gj) != (n, gi) && dev_hosts(d, m) {
                            continue;
                        }
                        for tj in 0..tenants.len() {
                            let trade = Trade { from: (n, gi, ti, q, m), to: (n2, gj, tj), same };
                            if let Some(made) = trade.try_make(problem, pi, pa, clashes) {
                                return Some(made);
                            }
                        }
                    }
                }
            }
        }
    }
    None
}

/// A trade [`untangle_mig_spread`] may make: the `spread: gpu` replica `from` (node, GPU,
/// tenant index, profile, model) changes places with the tenant `to` (node, GPU, tenant index).
struct Trade {
    from: (usize, usize, usize, usize, usize),
    to: (usize, usize, usize),
    /// Whether only a tenant of the same profile may be taken.
    same: bool,
}

impl Trade {
    /// Makes the trade if it is admissible and lowers the clashing pairs of the two nodes;
    /// returns the option changes it implies.
    fn try_make(
        &self,
        problem: &Problem<'_>,
        pi: usize,
        pa: &mut PoolA,
        clashes: &mut [usize],
    ) -> Option<Vec<OptionChange>> {
        let (n, gi, ti, q, m) = self.from;
        let (n2, gj, tj) = self.to;
        let spread_of = |m: usize| problem.models.get(m).map_or(Spread::None, |x| x.spec.spread);
        // Whether model `m` may be served by a `q` instance of pool `pi` (fixed demand only: a
        // rate model's coverage depends on its options).
        let may = |m: usize, pi: usize, q: usize| {
            problem.models.get(m).is_some_and(|x| {
                matches!(x.need, Need::Replicas(_))
                    && x.options.iter().any(|o| o.pool == pi && o.kind == Kind::Mig(q))
            })
        };
        let Some(Dev::Mig { tenants, .. }) = pa.nodes[n2].gpus.get(gj) else { return None };
        let &(q2, x) = tenants.get(tj)?;
        // `x` goes to GPU `gi` of node `n`.
        let movable = match spread_of(x) {
            Spread::None => true,
            Spread::Node => n2 == n || !pa.nodes[n].hosts(x),
            Spread::Gpu => (n2, gj) == (n, gi) || !dev_hosts(&pa.nodes[n].gpus[gi], x),
        };
        let fits = if self.same { q2 == q } else { q2 != q && may(m, pi, q2) && may(x, pi, q) };
        if x == m || !movable || !fits {
            return None;
        }
        let mut nodes = vec![pa.nodes[n].clone()];
        if n2 != n {
            nodes.push(pa.nodes[n2].clone());
        }
        let set = |nodes: &mut Vec<NodeA>, k: usize, g: usize, t: usize, v: (usize, usize)| {
            if let Some(Dev::Mig { tenants, .. }) = nodes[k].gpus.get_mut(g) {
                tenants[t] = v;
            }
        };
        let k2 = usize::from(n2 != n);
        set(&mut nodes, 0, gi, ti, (q, x));
        set(&mut nodes, k2, gj, tj, (q2, m));
        let before = clashes[n] + if n2 != n { clashes[n2] } else { 0 };
        let after: usize = nodes.iter().map(|x| x.mig_spread_clashes(problem)).sum();
        if after >= before {
            return None;
        }
        clashes[n] = nodes[0].mig_spread_clashes(problem);
        if n2 != n {
            clashes[n2] = nodes[1].mig_spread_clashes(problem);
        }
        let mut it = nodes.into_iter();
        if let Some(x) = it.next() {
            pa.nodes[n] = x;
        }
        if let Some(x) = it.next() {
            pa.nodes[n2] = x;
        }
        Some(if q2 != q {
            vec![((m, Kind::Mig(q)), (m, Kind::Mig(q2))), ((x, Kind::Mig(q2)), (x, Kind::Mig(q)))]
        } else {
            Vec::new()
        })
    }
}

/// For an assignment that [`untangle_mig_spread`] left with nodes breaking the `spread: gpu`
/// rule on MIG: on each such node, replicas of `spread: gpu` models are taken off (the one
/// whose removal ends the most clashing pairs first) until the node passes, then placed again
/// as the repair of [`decompose`] places what finds no room, with the rule enforced (configured
/// room first, else a grown device or node of the pool). The cost may grow; [`Assignment::
/// repaired`] counts them. Returns whether every one found a place.
pub(crate) fn replace_mig_spread(problem: &Problem<'_>, a: &mut Assignment) -> bool {
    let mut deferred: Vec<(usize, usize, Kind)> = Vec::new();
    for (pi, pa) in a.pools.iter_mut().enumerate() {
        for node in &mut pa.nodes {
            let mut clashes = node.mig_spread_clashes(problem);
            while clashes > 0 {
                let mut best: Option<(usize, usize, usize)> = None;
                for (gi, d) in node.gpus.iter().enumerate() {
                    let Dev::Mig { tenants, .. } = d else { continue };
                    for (ti, &(_, m)) in tenants.iter().enumerate() {
                        if problem.models.get(m).is_none_or(|x| x.spec.spread != Spread::Gpu) {
                            continue;
                        }
                        let mut without = node.clone();
                        if let Dev::Mig { tenants, .. } = &mut without.gpus[gi] {
                            tenants.remove(ti);
                        }
                        let left = without.mig_spread_clashes(problem);
                        if best.is_none_or(|b| left < b.2) {
                            best = Some((gi, ti, left));
                        }
                    }
                }
                let Some((gi, ti, left)) = best else { return false };
                if let Dev::Mig { tenants, .. } = &mut node.gpus[gi] {
                    let (q, m) = tenants.remove(ti);
                    deferred.push((m, pi, Kind::Mig(q)));
                }
                clashes = left;
            }
        }
    }
    for key in &deferred {
        if let Some(n) = a.replicas.get_mut(key) {
            *n -= 1;
        }
    }
    a.replicas.retain(|_, n| *n > 0);
    // Autoscaled pools may grow again up to their maximum (trim drops what stays unused).
    for (pa, p) in a.pools.iter_mut().zip(&problem.pools) {
        if p.autoscaled() {
            while pa.nodes.len() < p.max_nodes as usize {
                pa.nodes.push(NodeA::new(p.gpn()));
            }
        }
    }
    a.repaired = a.repaired.saturating_add(u32::try_from(deferred.len()).unwrap_or(u32::MAX));
    let placed = place_deferred(problem, a, deferred);
    trim(problem, a);
    placed
}

/// The counts laid out without the `spread: gpu` rule on MIG at placement (exact, else with
/// first fit for what finds no room), then made to pass it by trades of instances
/// ([`untangle_mig_spread`]) or re-placement ([`replace_mig_spread`]); `None` where that fails
/// or no such model may run on MIG. The rule at placement reads layouts not yet trimmed, so it
/// defers replicas that the trimmed layout would take.
pub(crate) fn decompose_unguarded(
    problem: &Problem<'_>,
    counts: &[PoolCounts],
    replicas: &BTreeMap<(usize, usize, Kind), u32>,
) -> Option<Assignment> {
    let p = problem.mig_spread_models.then(|| Problem { mig_spread_models: false, ..problem.clone() })?;
    let mut a = decompose(&p, counts, replicas, false).or_else(|| decompose(&p, counts, replicas, true))?;
    let ok = untangle_mig_spread(problem, &mut a) || replace_mig_spread(problem, &mut a);
    ok.then_some(a)
}
