//! Day 2: a way down from the ratchet — the smallest bounded re-optimisation worth a drain.
//!
//! In: the running nodes a re-optimisation may re-partition, each with a cheap score (how much
//! of its GPUs its replicas leave idle), the price of stability to recover, a bound on the
//! nodes, and a function that re-plans a set of nodes honestly (the re-planner's sub-plan of
//! exactly those nodes and their replicas) and says what it saves. Out: the set of nodes, the
//! GPUs and cost it saves, and how many sub-plans were solved.
//!
//! The search is bounded by counts, never by a clock: the [`CANDIDATES`] best-scored nodes are
//! re-planned alone; when the best of them recovers at least half the price it is the advice,
//! else nodes are added to it one by one, each candidate tried once, while they add savings and
//! until half the price is recovered or the set has `max_nodes` nodes. So at most
//! `2 × CANDIDATES − 1` sub-plans of at most `max_nodes` nodes are solved, whatever the fleet.

/// How many nodes are re-planned alone, the best-scored first.
pub const CANDIDATES: usize = 6;

/// The largest set of nodes advised without a `changePolicy.maxRepartitions` bound.
pub const MAX_NODES: usize = 3;

/// What re-planning a set of nodes saves.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Saving {
    pub gpus: u32,
    pub cost_per_hour: Option<f64>,
}

/// The nodes found, what they save, and how many sub-plans the search solved.
#[derive(Clone, Debug, PartialEq)]
pub struct Found<N> {
    pub nodes: Vec<N>,
    pub saving: Saving,
    pub evaluated: u32,
}

/// Whether `a` saves more than `b` (GPUs, then cost).
fn better(a: &Saving, b: &Saving) -> bool {
    a.gpus > b.gpus
        || (a.gpus == b.gpus && a.cost_per_hour.unwrap_or(0.0) > b.cost_per_hour.unwrap_or(0.0) + 1e-9)
}

/// Searches the smallest set of at most `max_nodes` candidates whose re-plan recovers at least
/// half of `price_gpus` (see the module docs). `candidates` are (node, score); `evaluate`
/// re-plans a set and says what it saves (`None`: it does not plan). `None` when no set saves a
/// GPU or money.
pub fn search<N: Clone + Ord>(
    mut candidates: Vec<(N, f64)>,
    price_gpus: u32,
    max_nodes: usize,
    mut evaluate: impl FnMut(&[N]) -> Option<Saving>,
) -> Option<Found<N>> {
    candidates.retain(|(_, score)| *score > 1e-9);
    candidates.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    candidates.truncate(CANDIDATES);
    let target = price_gpus.div_ceil(2).max(1);
    let mut evaluated = 0u32;
    let mut alone: Vec<(N, Saving)> = Vec::new();
    for (n, _) in &candidates {
        evaluated += 1;
        if let Some(s) = evaluate(std::slice::from_ref(n)) {
            alone.push((n.clone(), s));
        }
    }
    // Best alone first (stable: ties keep the score order).
    alone.sort_by(|x, y| {
        if better(&x.1, &y.1) {
            std::cmp::Ordering::Less
        } else if better(&y.1, &x.1) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    });
    let (first, first_saving) = alone.first().cloned()?;
    let mut set = vec![first];
    let mut saving = first_saving;
    for (n, _) in alone.iter().skip(1) {
        if saving.gpus >= target || set.len() >= max_nodes.max(1) {
            break;
        }
        let mut trial = set.clone();
        trial.push(n.clone());
        trial.sort();
        evaluated += 1;
        if let Some(s) = evaluate(&trial)
            && better(&s, &saving)
        {
            set = trial;
            saving = s;
        }
    }
    let saves = saving.gpus > 0 || saving.cost_per_hour.is_some_and(|c| c > 1e-9);
    set.sort();
    saves.then_some(Found { nodes: set, saving, evaluated })
}

#[cfg(test)]
mod tests {
    use super::{CANDIDATES, Saving, search};

    fn gpus(n: u32) -> Option<Saving> {
        Some(Saving { gpus: n, cost_per_hour: None })
    }

    #[test]
    fn one_node_that_recovers_half_the_price_is_the_advice() {
        let cands = vec![("a", 3.0), ("b", 2.0), ("c", 1.0)];
        let f = search(cands, 5, 3, |s: &[&str]| match s {
            ["a"] => gpus(1),
            ["b"] => gpus(3),
            [_] => gpus(0),
            _ => gpus(4),
        })
        .expect("advice");
        assert_eq!(f.nodes, vec!["b"]);
        assert_eq!(f.saving.gpus, 3);
        assert_eq!(f.evaluated, 3, "each candidate alone, no set: the best alone is enough");
    }

    #[test]
    fn nodes_are_added_while_they_save_within_the_bound() {
        let cands: Vec<(String, f64)> = (0..10).map(|i| (format!("n{i}"), f64::from(10 - i))).collect();
        let mut calls = 0;
        let f = search(cands, 8, 2, |s: &[String]| {
            calls += 1;
            gpus(u32::try_from(s.len()).unwrap_or(0))
        })
        .expect("advice");
        assert_eq!(f.nodes.len(), 2, "bounded by max_nodes");
        assert_eq!(f.saving.gpus, 2);
        assert!(calls < 2 * CANDIDATES, "{calls} sub-plans");
        assert_eq!(u32::try_from(calls).ok(), Some(f.evaluated));
    }

    #[test]
    fn nothing_is_advised_when_no_set_saves() {
        assert!(search(vec![("a", 1.0), ("b", 1.0)], 3, 3, |_: &[&str]| gpus(0)).is_none());
        assert!(search(vec![("a", 0.0)], 3, 3, |_: &[&str]| gpus(5)).is_none(), "no waste, no candidate");
    }
}
