//! Decomposition of the optimiser's per-pool counts to nodes and GPUs (see [`decompose`]).

use super::*;

/// Per-pool counts chosen by the optimiser.
#[derive(Clone, Debug, Default)]
pub(crate) struct PoolCounts {
    /// GPUs per candidate layout (same index as `PoolCtx::layouts`).
    pub layouts: Vec<u64>,
    /// Time-sliced GPUs per replica count k.
    pub ts: BTreeMap<u32, u64>,
    /// Nodes allowed to hold exclusive whole GPUs, and time-sliced GPUs per k.
    pub whole_nodes: u64,
    pub ts_nodes: BTreeMap<u32, u64>,
    /// GPUs on nodes whose instances of one profile are time-sliced with k, per (profile, k),
    /// per candidate layout (same index as `PoolCtx::layouts`), and their nodes.
    pub mig_ts: BTreeMap<(usize, u32), Vec<u64>>,
    pub mig_ts_nodes: BTreeMap<(usize, u32), u64>,
    pub nodes: u64,
}

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
    let mut a = empty(problem, |i| {
        let p = &problem.pools[i];
        if !p.autoscaled {
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
    for (pi, (pool, c)) in problem.pools.iter().zip(counts).enumerate() {
        let pa = &mut a.pools[pi];
        let used_nodes = (c.nodes as usize).min(pa.nodes.len());
        // Node classes: exclusive-whole nodes first, then time-sliced nodes per k.
        let mut class: Vec<Option<Option<u32>>> = vec![None; pa.nodes.len()];
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
                class[next] = Some(Some(0));
                next += 1;
            }
            // Round robin over the class's nodes, so that each holds one (`spread` needs them).
            let mut gi = 0;
            while want > 0 && first < next && gi < pool.gpn as usize {
                for node in &mut pa.nodes[first..next] {
                    if let Some(counts) = gpus.next() {
                        node.gpus[gi] = Dev::MigTs {
                            q,
                            k,
                            counts: counts.clone(),
                            tenants: Vec::new(),
                            excl: Vec::new(),
                        };
                        want -= 1;
                    }
                }
                gi += 1;
            }
            if want > 0 && !repair {
                return None;
            }
        }
        // Multi-GPU replicas first (largest first), on whole nodes, reserving their GPUs.
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
            let slot = (0..used_nodes).find(|&i| {
                class[i] == Some(None)
                    && !(by_node && pa.nodes[i].hosts(m))
                    && pa.nodes[i].gpus.iter().filter(|d| **d == Dev::Unused).count() >= g
            });
            let Some(slot) = slot else {
                if !repair {
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
        // The other MIG GPUs: spread over the used nodes, the node with the most free GPUs
        // first, so that spread models find distinct nodes.
        for (l, &g) in left.iter().enumerate() {
            let Some(layout) = pool.layouts.get(l) else { continue };
            for _ in 0..g {
                let dev = Dev::Mig { counts: layout.counts.clone(), tenants: Vec::new() };
                if !deal(&mut pa.nodes[..used_nodes], |i| !mig_ts_class[i], dev) {
                    if !repair {
                        return None;
                    }
                    break; // first fit opens MIG GPUs where replicas need them
                }
            }
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
    // Place the other replicas on the configured devices.
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
            .is_none_or(|x| crate::plan::rules::light_tenant(x.spec.compute, k, eff, 1.0)),
        _ => true,
    });
    for (m, pi, kind, n) in items {
        for _ in 0..n {
            if place(problem, &mut a, m, pi, kind, Mode::Fixed, usize::MAX) {
                *a.replicas.entry((m, pi, kind)).or_insert(0) += 1;
            } else if !repair {
                return None;
            } else {
                deferred.push((m, pi, kind));
            }
        }
    }
    // Repair: what found no configured room goes where first fit puts it: the optimiser's
    // choice or the model's other options (smallest first) on a configured device with room,
    // else on a grown one (extended layout, new GPU, new node).
    a.repaired = u32::try_from(deferred.len()).unwrap_or(u32::MAX);
    for (m, pi, kind) in deferred {
        let mc = problem.models.get(m)?;
        let mut others: Vec<&crate::plan::problem::Opt> =
            mc.options.iter().filter(|o| (o.pool, o.kind) != (pi, kind)).collect();
        others.sort_by(|x, y| x.size.total_cmp(&y.size).then(x.pool.cmp(&y.pool)).then(x.kind.cmp(&y.kind)));
        let choices: Vec<(usize, Kind)> =
            std::iter::once((pi, kind)).chain(others.iter().map(|o| (o.pool, o.kind))).collect();
        let attempts = [Mode::Fixed, Mode::Grow]
            .into_iter()
            .flat_map(|mode| choices.iter().map(move |&(p, k)| (p, k, mode)));
        if !place_first(problem, &mut a, m, attempts) {
            return None;
        }
    }
    trim(problem, &mut a);
    Some(a)
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
