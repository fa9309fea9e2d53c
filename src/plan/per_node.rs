//! The optimiser's program written per node (issue 23, point 3): every named node of a pool
//! becomes a pool of its own, so that the per-pool rows of [`crate::plan::milp`] — node
//! classes, `spread: node` (one replica a node), `spread: gpu` on MIG (the device plugin picks
//! the instance), the rows of several profiles — hold node by node instead of for the pool's
//! nodes together.
//!
//! The optimiser counts a pool's layouts and replicas without saying which node holds what;
//! its spread rows are necessary conditions only, so counts near its optimum may lay out only
//! on more GPUs (issue 23: the 100-GPU six-type stress fleets with memory-only `spread`
//! models, counts of $99.90 laid out on $104.90). Written per node, the same rows bind each
//! node: the counts of one node lay out on that node (on one node the `spread: gpu` rows are
//! the rule itself, below), and the program's optimum is the optimum over every plan that
//! meets them.
//!
//! In: a [`Problem`]. Out: a [`Split`] — the same problem with each named pool's nodes as
//! one-node pools, the pairs of interchangeable nodes (for rows that break their symmetry),
//! and [`Split::merge`], which maps an assignment of the split problem back onto the problem.
//!
//! The candidate layouts for the pooled rows on each node ([`Split::with_spread_layouts`]): where a
//! `spread: gpu` model may run on MIG, every valid layout to which no instance of a profile that no
//! such model uses can be added, not only the maximal ones. The rule
//! (`assign::NodeA::mig_spread_ok`, the verifier's) reads the instances a GPU runs, and a plan
//! trims those no replica uses: a GPU whose maximal layout holds two `1g.10gb` may run one, so that
//! a model's two replicas on a node cannot be handed the same GPU. On the maximal layouts alone the
//! pooled rows of one node would cut that plan (a property test found one, `plan::tests`); among
//! these candidates each trimmed layout, grown by instances of the other profiles (which the rule
//! does not read), is one, so the rows of one node — the GPU with two `q` instances, the GPU with
//! instances of two profiles of one model — hold for every plan and are exactly the rule. On the
//! six-type stress fleets every usable profile is some spread model's: 76 candidate layouts of an
//! A100 or H100 instead of 27.
//!
//! Why its optimum bounds the planner's plans: every row of the per-pool program is a
//! necessary condition for any pool, a pool of one node included (its module header). A plan
//! of the planner's model, cut node by node, meets every one-node pool's rows, so it is a
//! solution of the split program at the same cost; the split program's optimum (or its dual
//! bound) is therefore at most the cost of every such plan. Interchangeable nodes (one pool,
//! no layout running today) can be renumbered so that their GPU counts decrease, so rows
//! asking for that order cut no optimum.

use std::collections::BTreeMap;

use crate::plan::assign::{Assignment, NodeA, PoolA};
use crate::plan::layouts::Layout;
use crate::plan::milp::{self, Goal, MilpError, MilpResult, NodeRows, Pins};
use crate::plan::problem::{Kind, Opt, PoolCtx, Problem, spread_layouts};

/// Nodes in all above which no split is written: the program grows with the nodes (each one
/// carries its pool's layout, sharing-class and spread variables).
pub(crate) const MAX_SPLIT_NODES: usize = 48;

/// A problem with its named pools split into one-node pools.
#[derive(Clone, Debug)]
pub(crate) struct Split<'a> {
    pub problem: Problem<'a>,
    /// Per pool of the split problem: the pool of the original problem it comes from.
    pub origin: Vec<usize>,
    /// Pairs (a, b) of one-node pools of the same pool whose nodes are interchangeable: any
    /// plan can be renumbered so that `a` uses at least as many GPUs as `b`.
    pub twins: Vec<(usize, usize)>,
    /// Whether each pool's candidates are [`spread_layouts`] ([`Split::with_spread_layouts`]):
    /// the exact rows (`milp::NodeRows::Exact`) bound every plan only on them.
    pub spread_layouts: bool,
}

/// `problem` with every pool of named nodes, none of which runs a layout today, split into
/// one pool per node (autoscaled pools and pools with layouts running today stay whole).
/// `None` when no pool splits or the split would have more than [`MAX_SPLIT_NODES`] nodes.
pub(crate) fn split<'a>(problem: &Problem<'a>) -> Option<Split<'a>> {
    let splits = |p: &PoolCtx<'_>| !p.autoscaled() && p.spec.current.is_empty();
    let nodes: usize = problem.pools.iter().filter(|p| splits(p)).map(|p| p.named.len()).sum();
    if nodes > MAX_SPLIT_NODES || !problem.pools.iter().any(|p| splits(p) && p.named.len() > 1) {
        return None;
    }
    let mut pools = Vec::new();
    let mut origin = Vec::new();
    let mut twins = Vec::new();
    // Per original pool, its pools in the split problem.
    let mut to: Vec<Vec<usize>> = Vec::new();
    for (pi, p) in problem.pools.iter().enumerate() {
        let mut mine = Vec::new();
        if splits(p) && !p.named.is_empty() {
            for name in &p.named {
                let one = one_node_pool(p, name.clone());
                if let Some(&last) = mine.last() {
                    twins.push((last, pools.len()));
                }
                mine.push(pools.len());
                pools.push(one);
                origin.push(pi);
            }
        } else {
            mine.push(pools.len());
            pools.push(p.clone());
            origin.push(pi);
        }
        to.push(mine);
    }
    let models = problem
        .models
        .iter()
        .map(|m| {
            let mut m = m.clone();
            m.options = m
                .options
                .iter()
                .flat_map(|o| to[o.pool].iter().map(move |&j| Opt { pool: j, ..o.clone() }))
                .collect();
            for r in &mut m.rejected {
                r.pool = to[r.pool].first().copied().unwrap_or(r.pool);
            }
            m
        })
        .collect();
    let problem = Problem { pools, models, ..problem.clone() };
    Some(Split { problem, origin, twins, spread_layouts: false })
}

/// Pool `p` narrowed to its node `name`: a pool of one node, which the plan may leave empty
/// (the split above, and the pairs of nodes of [`crate::plan::repack`]).
pub(crate) fn one_node_pool<'a>(p: &PoolCtx<'a>, name: String) -> PoolCtx<'a> {
    let mut one = p.clone();
    one.named = vec![name];
    one.max_nodes = 1;
    one.min_nodes = 0;
    one
}

impl Split<'_> {
    /// The split problem with [`spread_layouts`] as each pool's candidates, for the pooled
    /// rows of `spread: gpu` on each node (`milp::NodeRows::Exact`), which then are the rule
    /// itself. The trimmed rows (`milp::NodeRows::Trimmed`) keep the maximal layouts: they are
    /// necessary on them already (a trimmed layout lies inside a maximal one), and the program
    /// stays smaller.
    pub(crate) fn with_spread_layouts(mut self) -> Self {
        // The one-node pools of a pool have the same GPU, layouts and options: once per pool.
        let mut of: BTreeMap<usize, Option<Vec<Layout>>> = BTreeMap::new();
        for j in 0..self.problem.pools.len() {
            let origin = self.origin.get(j).copied().unwrap_or(j);
            let layouts = of.entry(origin).or_insert_with(|| spread_layouts(&self.problem, j));
            if let Some(l) = layouts {
                self.problem.pools[j].layouts = l.clone();
            }
        }
        self.spread_layouts = true;
        self
    }

    /// The program per node on this split ([`milp::solve_per_node`]): with the exact rows on
    /// candidates other than [`Split::with_spread_layouts`]', where they may cut a plan, a
    /// restriction (no optimum, no floor).
    pub(crate) fn solve(
        &self,
        goal: Goal,
        pins: &Pins,
        rows: NodeRows,
        start: Pins,
        work: u32,
    ) -> Result<MilpResult, MilpError> {
        let cuts = rows == NodeRows::Exact && !self.spread_layouts;
        milp::solve_per_node(&self.problem, goal, &self.twins, pins, rows, start, work, cuts)
    }

    /// `a`, a plan of the original problem, cut node by node: its replicas per (model, pool
    /// of the split problem, kind), each split pool's nodes renumbered by decreasing GPUs
    /// used, as the twins' rows ask. A start for the program per node (HiGHS completes and
    /// checks it; a start that meets no row set is dropped, so it is only a hint).
    pub(crate) fn cut(&self, problem: &Problem<'_>, a: &Assignment) -> Pins {
        let mut out = Pins::new();
        for (pi, pa) in a.pools.iter().enumerate() {
            let mine: Vec<usize> = (0..self.origin.len()).filter(|&j| self.origin[j] == pi).collect();
            if let [j] = mine[..] {
                // Kept whole (or a single node): its replicas as they are.
                for (&(m, p, kind), &n) in &a.replicas {
                    if p == pi {
                        *out.entry((m, j, kind)).or_insert(0) += n;
                    }
                }
                continue;
            }
            let mut nodes: Vec<&NodeA> = pa.nodes.iter().collect();
            nodes.sort_by_key(|n| std::cmp::Reverse(n.gpus_used()));
            for (&j, node) in mine.iter().zip(nodes) {
                for ((m, kind), n) in node.replicas(problem) {
                    *out.entry((m, j, kind)).or_insert(0) += n;
                }
            }
        }
        out
    }

    /// An assignment of the split problem as one of the original problem (`pools`: how many
    /// pools it has): each pool's nodes in order, its replicas summed per original pool.
    pub(crate) fn merge(&self, pools: usize, a: Assignment) -> Assignment {
        let mut out: Vec<PoolA> = (0..pools).map(|_| PoolA { nodes: Vec::new() }).collect();
        for (j, pa) in a.pools.into_iter().enumerate() {
            if let Some(p) = self.origin.get(j).and_then(|&pi| out.get_mut(pi)) {
                p.nodes.extend(pa.nodes);
            }
        }
        let mut replicas: BTreeMap<(usize, usize, Kind), u32> = BTreeMap::new();
        for ((m, j, kind), n) in a.replicas {
            let pi = self.origin.get(j).copied().unwrap_or(j);
            *replicas.entry((m, pi, kind)).or_insert(0) += n;
        }
        Assignment { pools: out, replicas, repaired: a.repaired }
    }
}
