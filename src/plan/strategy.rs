//! The optimiser's cascade as named steps: each step is one function that returns a
//! [`Candidate`] (an assignment, the [`Method`] that found it, whether the solver proved it);
//! [`keep_cheaper`] is the one rule for choosing between two; [`Method`] owns every sentence a
//! plan's reasons give about how it was found.
//!
//! In: a [`Problem`] with its relaxations ([`Inputs`]). Out: the plan's assignment and method,
//! or diagnostics when no plan exists. Deterministic: every step is bounded by counts (nodes,
//! placements), never by a clock.
//!
//! The cascade ([`run`]): on a large program the relaxation laid out ([`relaxation_laid_out`])
//! is kept when it is close to the relaxation; else the MILP ([`solve_milp`]), its counts laid
//! out ([`lay_out`], [`lay_out_one_profile`]) and compared with first fit ([`judge`]), then on
//! large programs the relaxation's guided plans ([`guided`]), then the exhaustive search of
//! small inputs ([`improved`]). When nothing gives a plan, the fallbacks ([`fallback`]).

use std::collections::BTreeSet;

use crate::diagnostics::{Diagnostic, Diagnostics, codes};
use crate::plan::Tracer;
use crate::plan::assign::{self, Assignment, COST_EPSILON};
use crate::plan::bounds::LowerBound;
use crate::plan::milp::{self, Goal, MilpError, MilpResult, Pins};
use crate::plan::per_node;
use crate::plan::problem::Problem;
use crate::plan::rounding::{exact_totals, one_spread_profile, round_all, round_rates};
use crate::spec::{Keyword, Spec};

/// Relative gap to the LP relaxation's cost within which a large program's relaxation laid out
/// on nodes is kept without running the optimiser (half the 2% quality target of DESIGN.md).
pub(crate) const RELAXATION_PLAN_GAP: f64 = 0.01;

/// How much more than the optimiser's counts a large program's lay-out may cost before the
/// assignment program ([`assign::decompose_program`]) is run on it, and then one capped
/// re-solve ([`lay_out_capped`]): half the 2% quality target, so that their time is spent
/// where the plan would otherwise be near the target's edge (issue 23: a 1,024-GPU stress
/// fleet, counts of 448 GPUs laid out on 458, 453 with the program, 26 s more; another's
/// $1,033.30 counts on $1,052.90, $1,039.60 after the capped re-solve; docs/benchmarks.md).
const LARGE_LAY_OUT_LOSS: f64 = 0.01;

/// A plan one step of the cascade found.
#[derive(Debug)]
pub(crate) struct Candidate {
    pub assignment: Assignment,
    pub method: Method,
    /// Whether the solver proved it optimal for the planner's model (the full program).
    pub proved: bool,
    /// Whether a first-fit search made it (it then stands for the first-fit figure).
    pub searched: bool,
    /// The full program's optimum (cost in relative weights: GPUs when unpriced) where the
    /// solver proved it (unpinned, uncapped, within a gap that keeps the cost exact), else the
    /// solver's lower bound on it (HiGHS's dual bound: [`MilpResult::proven`]), whether or not
    /// this plan reaches it: no plan of the planner's model does better.
    pub proven: Option<f64>,
    /// [`Candidate::proven`] from programs whose rows hold for every plan, a plan that trims a
    /// GPU included ([`MilpResult::sound_proven`]): the bound the plan reports. `proven` also
    /// steers the cascade.
    pub sound: Option<f64>,
}

impl Candidate {
    fn new(assignment: Assignment, method: Method) -> Self {
        Candidate { assignment, method, proved: false, searched: false, proven: None, sound: None }
    }

    /// Whether the plan is proven optimal for every plan of the planner's model: `proved`, by
    /// a program whose rows hold for plans that trim a GPU too (the method's own flag).
    pub(crate) fn sound_proved(&self) -> bool {
        self.proved
            && matches!(self.method, Method::Milp { proved: true, .. } | Method::PerNode { proved: true, .. })
    }
}

/// Whether cost `b` is below cost `a` by more than [`COST_EPSILON`]: the one rule for choosing
/// between two results of the cascade (ties keep `a`, the earlier one).
fn below(b: f64, a: f64) -> bool {
    b < a - COST_EPSILON
}

/// [`below`] for assignments.
fn cheaper(problem: &Problem<'_>, b: &Assignment, a: &Assignment) -> bool {
    below(b.cost(problem), a.cost(problem))
}

/// The cheaper of two optional results by [`cheaper`] (`of` gives each one's assignment); ties
/// and a missing `b` keep `a`.
fn keep_cheaper_by<T>(
    problem: &Problem<'_>,
    a: Option<T>,
    b: Option<T>,
    of: impl Fn(&T) -> &Assignment,
) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) if cheaper(problem, of(&b), of(&a)) => Some(b),
        (None, b) => b,
        (a, _) => a,
    }
}

/// [`keep_cheaper_by`] for assignments.
fn keep_cheaper(problem: &Problem<'_>, a: Option<Assignment>, b: Option<Assignment>) -> Option<Assignment> {
    keep_cheaper_by(problem, a, b, |x| x)
}

/// A step that improves on an earlier plan, or rescues the cascade when nothing gave one.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    /// The LP relaxation's device choices laid out on nodes.
    RelaxationLaidOut,
    /// First fit guided by the LP relaxation's device choices.
    FfdGuided,
    /// First fit in another order (named).
    FfdReordered(&'static str),
    /// First-fit-decreasing with backtracking.
    FfdSearch,
    /// The exhaustive search of a small input.
    Improve,
    /// The MILP again with [`milp::HARDER_WORK`] times its node limit, its counts laid out.
    HarderSolve,
    /// The same spec planned with `mps` removed from every pool's `sharing` ([`without_mps`]).
    WithoutMps,
    /// The optimiser's replica choices laid out by backtracking, on more GPUs than its counts.
    ChoicesSearched,
    /// The local search that empties GPUs ([`assign::empty_gpus`]).
    EmptyGpus,
    /// The pure-Rust build's program with every row ([`milp::solve_every_row`]), its counts
    /// laid out.
    EveryRow,
    /// The program written node by node with the exact rows ([`per_node_rescue`]), its
    /// counts laid out.
    PerNodeRescue,
    /// The optimiser's counts laid out as far as they go, the replicas left out placed by
    /// programs over one or two nodes ([`completion`]).
    Completed,
    /// The optimiser's replica choices laid out pool by pool, each pool's share solved by a
    /// program of its own with every row ([`pool_by_pool`]).
    PoolByPool,
    /// [`Step::EmptyGpus`] from the plan alone, with a few kicks where it stays outside the
    /// quality target (large programs, [`emptied`]).
    EmptyGpusOnce,
}

impl Step {
    fn what(&self) -> String {
        match self {
            Step::RelaxationLaidOut => "the LP relaxation's device choices laid out on nodes".to_owned(),
            Step::FfdGuided => "first fit guided by the LP relaxation's device choices".to_owned(),
            Step::FfdReordered(order) => format!("first fit in another order ({order})"),
            Step::FfdSearch => "first-fit-decreasing with backtracking".to_owned(),
            Step::Improve => "an exhaustive search of this small input".to_owned(),
            Step::WithoutMps => "planning the same manifest without MPS".to_owned(),
            Step::HarderSolve => {
                format!(
                    "the optimiser with {} times its node limit, its counts laid out on nodes,",
                    milp::HARDER_WORK
                )
            }
            Step::ChoicesSearched => {
                "a backtracking lay-out of the optimiser's replica choices on more GPUs than its counts"
                    .to_owned()
            }
            Step::EmptyGpus => {
                "a local search that empties GPUs, moving their replicas to room on the other GPUs in use (from this plan and from first fit's, with kicks that move several GPUs' replicas at once),"
                    .to_owned()
            }
            Step::EmptyGpusOnce => {
                "a local search that empties GPUs, moving their replicas to room on the other GPUs in use (from this plan, with a few kicks that move several GPUs' replicas at once where it stayed outside the quality target),"
                    .to_owned()
            }
            Step::EveryRow => "the optimiser with every spread row, its counts laid out on nodes,".to_owned(),
            Step::PerNodeRescue => {
                "the optimiser's program written node by node, its counts laid out on nodes,".to_owned()
            }
            Step::Completed => {
                "the optimiser's counts laid out as far as they go, with the replicas left out placed by programs over one or two nodes,"
                    .to_owned()
            }
            Step::PoolByPool => {
                "the optimiser's replica choices laid out pool by pool, each pool's share solved by a program of its own with every spread row (the replicas it could not hold placed by programs over one or two nodes),"
                    .to_owned()
            }
        }
    }
}

/// Why the optimiser's path gave no plan of its own.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Why {
    /// Its counts could not be decomposed to nodes.
    NotDecomposed,
    /// The solver failed (its message).
    SolverFailed(String),
}

impl Why {
    fn sentence(&self) -> String {
        match self {
            Why::NotDecomposed => "the optimiser's counts could not be decomposed to nodes".to_owned(),
            Why::SolverFailed(e) => format!("the solver failed ({e})"),
        }
    }
}

/// How a plan was found: the one place that words it for the plan's reasons.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Method {
    /// A large program's relaxation laid out, close enough that the optimiser was not run.
    RelaxationKept,
    /// The optimiser's counts laid out: `repaired` replicas placed by first fit, `proved`
    /// whether the solver proved it optimal for the planner's model.
    Milp { proved: bool, repaired: u32 },
    /// First fit's plan kept: it beat the optimiser's result.
    FfdBeatOptimiser,
    /// First fit's plan kept: the optimiser's path gave none.
    FfdKept(Why),
    /// First fit's plan kept: the optimiser reported no solution.
    FfdKeptNoSolution,
    /// The optimiser's path gave no plan; a fallback step found this one.
    Fallback { why: Why, by: Step },
    /// A later step found a cheaper plan than `first`'s.
    Then { first: Box<Method>, by: Step },
    /// The optimiser's program written per node ([`per_node`]) found a cheaper plan than
    /// `first`'s: `repaired` replicas placed by first fit, `proved` whether the solver proved
    /// it optimal for the planner's model.
    PerNode { first: Box<Method>, proved: bool, repaired: u32 },
}

impl Method {
    /// This method, then `by`, which found a cheaper plan ([`Method::Then`]).
    fn then(self, by: Step) -> Method {
        Method::Then { first: Box::new(self), by }
    }

    /// The sentence every model's reasons end with.
    pub(crate) fn sentence(&self) -> String {
        match self {
            Method::RelaxationKept => format!(
                "the LP relaxation's device choices laid out on nodes, within {:.0}% of the relaxation's cost, so the optimiser was not run (large program; not proven optimal)",
                RELAXATION_PLAN_GAP * 100.0
            ),
            Method::Milp { repaired, .. } if *repaired > 0 => format!(
                "placed by the MILP optimiser, except {repaired} replica(s) its counts could not lay out on nodes (spread and node sharing are only partly in its model), which first fit placed"
            ),
            Method::Milp { proved: true, .. } => {
                "placed by the MILP optimiser, which proved it optimal for the planner's model".to_owned()
            }
            Method::Milp { .. } => {
                format!(
                    "placed by the MILP optimiser, which did not prove it optimal ({})",
                    milp::UNPROVEN_WHY
                )
            }
            Method::FfdBeatOptimiser => {
                "first-fit-decreasing beat the optimiser's result, so its plan is kept".to_owned()
            }
            Method::FfdKept(why) => format!("{}; the first-fit-decreasing plan is kept", why.sentence()),
            Method::FfdKeptNoSolution => {
                "the optimiser reported no solution; the first-fit-decreasing plan is kept".to_owned()
            }
            Method::Fallback { why, by } => format!("{}; {} found this plan", why.sentence(), by.what()),
            Method::Then { first, by: Step::Improve } => {
                format!("{}; {} then found a cheaper plan, this one", first.sentence(), Step::Improve.what())
            }
            Method::Then { first, by } => format!(
                "{}; {} then gave a cheaper plan, this one (not proven optimal)",
                first.sentence(),
                by.what()
            ),
            Method::PerNode { first, proved, repaired } => {
                let how = if *repaired > 0 {
                    format!(
                        ", except {repaired} replica(s) its counts could not lay out on GPUs, which first fit placed"
                    )
                } else if *proved {
                    ", which it proved optimal for the planner's model".to_owned()
                } else {
                    format!(" (not proven optimal: {})", milp::UNPROVEN_WHY)
                };
                format!(
                    "{}; the optimiser's program written node by node (spread and sharing rules per node) then gave a cheaper plan, this one{how}",
                    first.sentence()
                )
            }
        }
    }
}

/// What the cascade starts from (computed once by the planner).
pub(crate) struct Inputs<'r> {
    pub goal: Goal,
    /// The relaxation that guides lay-outs: the cost relaxation on priced pools, else `relaxed`.
    pub guide: Option<&'r MilpResult>,
    /// The LP relaxation minimising GPUs.
    pub relaxed: Option<&'r MilpResult>,
    /// The relaxation's cost that bounds every plan (weights): the guide's, or where the pooled
    /// rows may cut a plan that trims a GPU, that of the problem widened to every layout a plan
    /// may trim to (`problem::widened`).
    pub bound: Option<f64>,
    /// Whether the program is large ([`problem::is_large`]).
    pub large: bool,
    /// The guide's replica choices rounded, on large programs.
    pub preferred: Option<Pins>,
    /// The bound valid for every plan.
    pub valid: &'r LowerBound,
    /// Whether the planner plans a fleet grown by an addition of nodes, which confirms the
    /// addition a failure names ([`crate::plan::infeasible::Planner`]).
    pub planner: crate::plan::infeasible::Planner<'r>,
    /// Whether the first plan found is improved (false in the planning of a grown fleet, which
    /// only asks whether a plan exists: [`run`] then returns the first plan it finds).
    pub improve: bool,
}

/// The cascade: the plan, how it was found, whether the solver proved it. Without
/// [`Inputs::improve`], the first plan found (the relaxation laid out or the optimiser's path).
pub(crate) fn run(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    ffd: Option<Assignment>,
    tracer: &mut Tracer<'_>,
) -> Result<Candidate, Diagnostics> {
    let laid_out = relaxation_laid_out(problem, inputs, tracer);
    let candidate = match laid_out {
        Some((a, lp)) if close(problem, &a, lp, ffd.as_ref()) => Candidate::new(a, Method::RelaxationKept),
        laid_out => {
            let o = optimise(problem, inputs, ffd, tracer)?;
            if o.proved || !inputs.improve {
                o
            } else {
                guided(problem, inputs, o, laid_out.map(|x| x.0), tracer)
            }
        }
    };
    if !inputs.improve {
        return Ok(candidate);
    }
    let candidate = per_node(problem, inputs, candidate, tracer);
    let candidate = emptied(problem, inputs, candidate, tracer);
    Ok(improved(problem, inputs, candidate, tracer))
}

/// The spec with `mps` removed from every pool's `sharing`, when some pool lists it: what
/// [`without_mps`] plans.
pub(crate) fn spec_without_mps(spec: &Spec) -> Option<Spec> {
    if !spec.pools.iter().any(|p| p.sharing.mps) {
        return None;
    }
    let mut plain = spec.clone();
    for p in &mut plain.pools {
        p.sharing.mps = false;
    }
    Some(plain)
}

/// Step: on a problem with pools allowing `mps`, the plan `c` unless it is proven (by the
/// solver on a program that is not large, or at the bound valid for every plan), compared with
/// `plain`'s: the cascade on the same spec with `mps` removed ([`spec_without_mps`]). The
/// cheaper is kept by [`cheaper`] (ties keep `c`). Without it the cascade's heuristics on the
/// larger problem could end above the plan without MPS; with it a plan never costs more for
/// allowing MPS. Both problems list pools and models in the same order and a time-slicing
/// device is the same state in both, so `plain`'s assignment is one of this problem's.
pub(crate) fn without_mps(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    c: Candidate,
    plain: impl FnOnce(&mut Tracer<'_>) -> Option<Candidate>,
    tracer: &mut Tracer<'_>,
) -> Candidate {
    let allows_mps = problem.pools.iter().any(|p| p.spec.sharing.mps);
    if !allows_mps || (c.proved && !inputs.large) || meets_valid_bound(problem, inputs, &c.assignment) {
        return c;
    }
    let Some(p) = plain(tracer) else { return c };
    tr!(
        tracer,
        "{}: {} GPUs, cost {:.3}",
        Step::WithoutMps.what(),
        p.assignment.gpus_used(),
        p.assignment.cost(problem)
    );
    if !cheaper(problem, &p.assignment, &c.assignment) {
        return c;
    }
    // `c.proven` stays: the optimum of this problem's program, not of the one without MPS.
    Candidate {
        assignment: p.assignment,
        method: c.method.then(Step::WithoutMps),
        proved: false,
        searched: p.searched,
        proven: c.proven,
        sound: c.sound,
    }
}

/// Whether a relaxation's lay-out is within [`RELAXATION_PLAN_GAP`] of the relaxation's cost
/// `lp` and no dearer than first fit.
fn close(problem: &Problem<'_>, a: &Assignment, lp: f64, ffd: Option<&Assignment>) -> bool {
    a.cost(problem) <= lp * (1.0 + RELAXATION_PLAN_GAP) + COST_EPSILON
        && ffd.is_none_or(|f| !cheaper(problem, f, a))
}

/// Step: a large program's relaxation laid out — its device counts rounded, each model's
/// replicas made whole on its most-used devices, what finds no room placed by first fit. With
/// the relaxation's cost.
fn relaxation_laid_out(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    tracer: &mut Tracer<'_>,
) -> Option<(Assignment, f64)> {
    let (lp, pref) = inputs.guide.zip(inputs.preferred.as_ref())?;
    let Some(a) = relaxation_lay_out(problem, lp, &exact_totals(problem, pref)) else {
        tr!(tracer, "relaxation laid out: no plan (first fit found no room for what its counts left)");
        return None;
    };
    tr!(
        tracer,
        "relaxation laid out: {} GPUs, cost {:.3}, {} replica(s) placed by first fit",
        a.gpus_used(),
        a.cost(problem),
        a.repaired
    );
    Some((a, lp.cost))
}

/// The relaxation `lp`'s counts laid out with the replica choices `totals`, first fit placing
/// the replicas that find no room: its counts rounded to the nearest whole number and rounded
/// up ([`MilpResult::counts_up`]), the cheaper kept. Rounded to the nearest, a node class the
/// relaxation gives less than half a node gets none, and its replicas all go to first fit
/// (issue 23: the pure-Rust build's 1,024-GPU stress fleet "mixed", seed 1, had no lay-out
/// that way, and one of 456 GPUs rounded up; docs/benchmarks.md).
pub(crate) fn relaxation_lay_out(
    problem: &Problem<'_>,
    lp: &MilpResult,
    totals: &Pins,
) -> Option<Assignment> {
    let near = assign::decompose(problem, &lp.counts, totals, true);
    let up = Some(&lp.counts_up)
        .filter(|c| !c.is_empty())
        .and_then(|c| assign::decompose(problem, c, totals, true));
    keep_cheaper(problem, near, up)
}

/// Step: on a large program whose solve stopped without a proof, the relaxation laid out or
/// first fit guided by its device choices, when cheaper than the optimiser's plan.
fn guided(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    mut o: Candidate,
    laid_out: Option<Assignment>,
    tracer: &mut Tracer<'_>,
) -> Candidate {
    let Some(pref) = &inputs.preferred else { return o };
    let ffd_guided = assign::ffd_guided(problem, pref).map(|a| (a, Step::FfdGuided));
    tr!(
        tracer,
        "{}: {:?}",
        Step::FfdGuided.what(),
        ffd_guided.as_ref().map(|(a, _)| format!("{} GPUs, cost {:.3}", a.gpus_used(), a.cost(problem)))
    );
    let best = keep_cheaper_by(problem, laid_out.map(|a| (a, Step::RelaxationLaidOut)), ffd_guided, |x| &x.0);
    if let Some((g, by)) = best
        && cheaper(problem, &g, &o.assignment)
    {
        tr!(tracer, "{}: {} GPUs, cost {:.3}", by.what(), g.gpus_used(), g.cost(problem));
        o.method = o.method.then(by);
        o.assignment = g;
    }
    o
}

/// Step: on a program that is not large, when the plan is neither proven nor within the
/// quality target of the planner's bound ([`within_target`]: the solver's proven optimum or
/// dual bound, else the relaxation), nor at the bound valid for every plan: the optimiser's
/// program written node by node ([`per_node::split`], [`milp::solve_per_node`]). First with
/// the pooled program's rows on each node ([`milp::NodeRows::Placed`]: its counts lay out as
/// the decomposition places replicas) from no start; then the same rows on every layout a
/// plan may trim a GPU to ([`milp::NodeRows::Exact`], [`per_node::Split::with_spread_layouts`])
/// from the plan so far ([`per_node::Split::cut`]), which they admit; when the plan is still
/// outside the target, with the rows necessary for every plan ([`milp::NodeRows::Trimmed`])
/// from the plan so far. The last two solves' optimum or dual bound raises
/// [`Candidate::proven`] (see [`crate::plan::per_node`]). Then, while still outside the
/// target, a large-neighbourhood search over the plan ([`neighbourhoods`]), and last the exact
/// rows from the plan so far with [`milp::HARDER_WORK`] times the node budget. Each result's
/// counts are laid out on the split problem and mapped back; the cheapest plan is kept. Issue
/// 23: the pooled program's counts of the 100-GPU six-type fleets with memory-only spread
/// models lay out up to 6% above them; per node, the rules bind where the replicas go.
pub(crate) fn per_node(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    c: Candidate,
    tracer: &mut Tracer<'_>,
) -> Candidate {
    // HiGHS only: microlp's branch and bound has no node budget in proportion to the columns,
    // and its 5,000 nodes on a program of thousands of columns would take minutes.
    if !cfg!(feature = "highs")
        || inputs.large
        || c.proved
        || meets_valid_bound(problem, inputs, &c.assignment)
    {
        return c;
    }
    let Some(plain) = per_node::split(problem) else { return c };
    let exact = plain.clone().with_spread_layouts();
    let mut c = c;
    // Three solves, each while the plan is still outside the target: the placed rows from no
    // start, the exact rows from the plan so far, the trimmed rows from the plan so far. The
    // start (the plan cut node by node) gives HiGHS an incumbent to improve and prune from;
    // it changes the search's path, and neither search dominates on the stress fleets (128
    // GPUs, "mixed, priced", seed 6: $113.60 free, $111.20 from the start; "mixed" seed 5: 59
    // GPUs free, 61 from the start; docs/benchmarks.md, "A start for the program per node"),
    // so both run and the cheaper plan is kept.
    let solves = [
        NodeSolve { rows: milp::NodeRows::Placed, split: &plain, from_plan: false, work: 1 },
        NodeSolve { rows: milp::NodeRows::Exact, split: &exact, from_plan: true, work: 1 },
        NodeSolve { rows: milp::NodeRows::Trimmed, split: &plain, from_plan: true, work: 1 },
    ];
    for solve in solves {
        if within_planners_target(problem, inputs, &c) {
            return c;
        }
        c = solve.run(problem, inputs, c, tracer);
    }
    let c = neighbourhoods(problem, inputs, &exact, c, tracer);
    if within_planners_target(problem, inputs, &c) {
        return c;
    }
    // Last, the exact rows again from the plan so far with [`milp::HARDER_WORK`] times the
    // node budget: where neither the plan nor the search moves, its dual floor still rises
    // (128 GPUs, "mixed, priced", seed 6: $106.31 → $106.93, a bound of $107.20 over the
    // prices' steps, and the plan, $108.80, is within the target; 100 GPUs of six types,
    // "mixed", seed 3: 42.90 → 43.08, a bound of 44 GPUs; docs/benchmarks.md). Only fleets
    // still outside the target pay for it (240–500 s on the stress fleets' four misses).
    let last =
        NodeSolve { rows: milp::NodeRows::Exact, split: &exact, from_plan: true, work: milp::HARDER_WORK };
    last.run(problem, inputs, c, tracer)
}

/// One solve of the program per node ([`milp::solve_per_node`]).
struct NodeSolve<'s, 'a> {
    rows: milp::NodeRows,
    /// The split problem it runs on (the exact rows need [`per_node::Split::with_spread_layouts`]).
    split: &'s per_node::Split<'a>,
    /// Whether it starts from the plan so far, cut node by node ([`per_node::Split::cut`]).
    from_plan: bool,
    /// The multiple of the node budget.
    work: u32,
}

impl NodeSolve<'_, '_> {
    /// The solve after the plan of `c`: its optimum or dual bound raises
    /// [`Candidate::proven`], its counts are kept when they lay out cheaper
    /// ([`keep_split_counts`]).
    fn run(
        &self,
        problem: &Problem<'_>,
        inputs: &Inputs<'_>,
        mut c: Candidate,
        tracer: &mut Tracer<'_>,
    ) -> Candidate {
        let Self { rows, split, from_plan, work } = *self;
        let start = if from_plan { split.cut(problem, &c.assignment) } else { Pins::new() };
        let goal = per_node_goal(inputs.goal);
        let solved = split.solve(goal, &Pins::new(), rows, start, work);
        tr!(
            tracer,
            "MILP per node ({rows:?} rows, {} pools, from the plan: {from_plan}, work {work}): {:?}",
            split.problem.pools.len(),
            solved
                .as_ref()
                .map(|r| format!("cost {:.3}, optimal {}, floor {:?}", r.cost, r.optimal, r.floor))
        );
        let Ok(r) = solved else { return c };
        c.proven = higher(c.proven, r.proven());
        c.sound = higher(c.sound, r.sound_proven());
        keep_split_counts(problem, split, &r, c, tracer)
    }
}

/// The goal of the program per node: the cascade's, with no cap at the plan's cost. HiGHS's
/// heuristics find the split program's plans more readily without it (the 100-GPU fleet
/// "mixed, priced", seed 1: $100.00 against $101.60 under the cap), and the cheaper plan is
/// kept either way.
fn per_node_goal(goal: Goal) -> Goal {
    match goal {
        Goal::Plan { gpu_floor, .. } => Goal::Plan { cost_bound: None, gpu_floor },
        g => g,
    }
}

/// Whether the plan of `c` is within the quality target of the planner's bound: the solver's
/// proven optimum or dual bound, else the relaxation's cost (weights).
fn within_planners_target(problem: &Problem<'_>, inputs: &Inputs<'_>, c: &Candidate) -> bool {
    within_target(c.assignment.cost(problem), planners_bound(inputs, c))
}

/// The planner's bound on the cost of `c`'s problem: the solver's proven optimum or dual
/// bound, else the relaxation's cost (weights; [`Inputs::bound`]).
fn planners_bound(inputs: &Inputs<'_>, c: &Candidate) -> f64 {
    c.proven.into_iter().chain(inputs.bound).fold(0.0, f64::max)
}

/// The counts `r` of the program per node laid out on the split problem and mapped back: the
/// plan of `c` unless that lay-out is cheaper.
fn keep_split_counts(
    problem: &Problem<'_>,
    split: &per_node::Split<'_>,
    r: &MilpResult,
    c: Candidate,
    tracer: &mut Tracer<'_>,
) -> Candidate {
    let laid = lay_out(&split.problem, r).map(|a| split.merge(problem.pools.len(), a));
    tr!(
        tracer,
        "MILP per node laid out: {:?}",
        laid.as_ref().map(|a| format!(
            "{} GPUs, cost {:.3}, {} re-placed",
            a.gpus_used(),
            a.cost(problem),
            a.repaired
        ))
    );
    match laid.filter(|a| cheaper(problem, a, &c.assignment)) {
        Some(a) => {
            let proved = reaches_optimum(problem, &a, r);
            let method = Method::PerNode {
                first: Box::new(c.method),
                proved: proved && !r.cuts_trims,
                repaired: a.repaired,
            };
            Candidate { assignment: a, method, proved, searched: false, proven: c.proven, sound: c.sound }
        }
        None => c,
    }
}

/// The per-node step's last part, while the plan stays outside the target: a
/// large-neighbourhood search over the plan. Each pool's nodes are freed in turn, then each
/// pair of pools' nodes, every other node holding the replicas the plan gives it
/// ([`milp::solve_neighbourhood`], from the plan so far, with the exact rows on `split`, a
/// split from [`per_node::Split::with_spread_layouts`]: every held node can keep what the plan
/// gives it, where on the maximal layouts most neighbourhoods were infeasible); a
/// neighbourhood's counts are kept when they lay out cheaper, and the next one starts from the
/// new plan. One pass, in pool order: deterministic. The search over all nodes at once stops
/// at its node budget; with most nodes held, presolve leaves a small program, searched much
/// further in the same budget (the 100-GPU six-type fleet "mixed", seed 3: 48 → 46 GPUs in
/// 21 neighbourhoods and about two minutes; docs/benchmarks.md).
fn neighbourhoods(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    split: &per_node::Split<'_>,
    mut c: Candidate,
    tracer: &mut Tracer<'_>,
) -> Candidate {
    let pools = problem.pools.len();
    let nodes_of = |pi: usize| -> BTreeSet<usize> {
        (0..split.origin.len()).filter(|&j| split.origin[j] == pi).collect()
    };
    let mut sets: Vec<BTreeSet<usize>> = (0..pools).map(nodes_of).collect();
    for a in 0..pools {
        for b in a + 1..pools {
            sets.push(nodes_of(a).union(&nodes_of(b)).copied().collect());
        }
    }
    let goal = per_node_goal(inputs.goal);
    for free in sets {
        if within_planners_target(problem, inputs, &c) {
            break;
        }
        let plan = split.cut(problem, &c.assignment);
        let solved = milp::solve_neighbourhood(&split.problem, goal, plan, &free);
        tr!(
            tracer,
            "MILP per node, {} node(s) free, the rest held: {:?}",
            free.len(),
            solved.as_ref().map(|r| format!("cost {:.3}", r.cost))
        );
        let Ok(r) = solved else { continue };
        c = keep_split_counts(problem, split, &r, c, tracer);
    }
    c
}

/// Step: on a program that is not large, when the plan is neither proven nor within the
/// quality target of the planner's bound: the local search that empties GPUs
/// ([`assign::empty_gpus`]) from the plan and from first fit in each of its orders
/// ([`assign::ffd_every_order`]), the cheapest result kept when cheaper than the plan. The
/// starts end in different places (100-GPU six-type stress fleet "mixed", seed 0, pure-Rust
/// build: the plan's 56 GPUs emptied to 49, first fit's to 44–46; docs/benchmarks.md). Then,
/// still outside the target, in the pure-Rust build, pairs of nodes re-packed by their own
/// programs ([`crate::plan::repack::repacked`]) from the cheapest of those; then the kicks
/// around it ([`assign::KickBudget::kicked`]) from that cheapest and from the re-packed plan,
/// within one budget, stopping once within the target (same fleet: 44 → 43 GPUs; seed 1: 56
/// → 48). A plan within the target already but above the planner's bound gets a short search
/// for the bound: the same starts, no pairs re-packed, a [`PAST_TARGET_KICK_SHARE`]th of the
/// kicks, stopping at the bound ([`at_bound`]). Not
/// where a pool runs layouts today (the program weighs keeping them, the search does not) nor
/// on a plan a first-fit search made (it stands for the first-fit figure). On a large
/// program, only the search from the plan and a few kicks from its result ([`emptied_once`]),
/// where it is outside the target and uses at most [`LARGE_EMPTY_MAX_GPUS`] GPUs.
pub(crate) fn emptied(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    c: Candidate,
    tracer: &mut Tracer<'_>,
) -> Candidate {
    let runs_today = problem.pools.iter().any(|p| !p.spec.current.is_empty());
    let bound = planners_bound(inputs, &c);
    let settled = c.proved || c.searched || runs_today;
    if inputs.large {
        let far = !within_target(c.assignment.cost(problem), bound);
        return if !settled && far && c.assignment.gpus_used() <= LARGE_EMPTY_MAX_GPUS {
            emptied_once(problem, c, bound, tracer)
        } else {
            c
        };
    }
    if settled
        || meets_valid_bound(problem, inputs, &c.assignment)
        || at_bound(problem, c.assignment.cost(problem), bound)
    {
        return c;
    }
    let past_target = within_target(c.assignment.cost(problem), bound);
    let mut best: Option<Assignment> = None;
    for start in std::iter::once(c.assignment.clone()).chain(assign::ffd_every_order(problem)) {
        let from = start.gpus_used();
        let emptied = assign::empty_gpus(problem, &start).unwrap_or(start);
        tr!(
            tracer,
            "GPUs emptied from a plan of {from}: {} GPUs, cost {:.3}",
            emptied.gpus_used(),
            emptied.cost(problem)
        );
        best = keep_cheaper(problem, best, Some(emptied));
    }
    let enough = |cost| if past_target { at_bound(problem, cost, bound) } else { within_target(cost, bound) };
    let from = best.clone().unwrap_or_else(|| c.assignment.clone());
    // The pure-Rust build's pairs of nodes re-packed, from the same plan as the kicks.
    let repacked = if cfg!(feature = "highs") || past_target || enough(from.cost(problem)) {
        None
    } else {
        crate::plan::repack::repacked(problem, &from, enough)
    };
    if let Some(r) = &repacked {
        tr!(tracer, "pairs of nodes re-packed: {} GPUs, cost {:.3}", r.gpus_used(), r.cost(problem));
    }
    // Kicks from both plans (one budget for both): neither start's walk wins everywhere (the
    // 100-GPU six-type "mixed" fleets: seed 0 ends a GPU lower from the re-packed plan, seed
    // 1 two GPUs higher).
    let mut budget = assign::KickBudget::new();
    for start in std::iter::once(&from).chain(repacked.as_ref()) {
        if best.as_ref().is_some_and(|b| enough(b.cost(problem))) {
            break;
        }
        let share = if past_target { PAST_TARGET_KICK_SHARE } else { 1 };
        if let Some(k) = budget.kicked(problem, start, assign::kicks_for(start.gpus_used()) / share, enough) {
            tr!(tracer, "GPUs emptied after kicks: {} GPUs, cost {:.3}", k.gpus_used(), k.cost(problem));
            best = keep_cheaper(problem, best, Some(k));
        }
    }
    best = keep_cheaper(problem, best, repacked);
    match best.filter(|b| cheaper(problem, b, &c.assignment)) {
        Some(b) => Candidate { assignment: b, method: c.method.then(Step::EmptyGpus), proved: false, ..c },
        None => c,
    }
}

/// Step on a large program ([`emptied`]): the search that empties GPUs from the plan alone,
/// no other starts; where its plan is still outside the quality target of `bound`, a few kicks
/// from it ([`assign::large_kicks_for`]), stopping once within. The cheapest plan kept when
/// cheaper than the candidate's (issue 23: the pure-Rust build's 1,024-GPU stress fleet
/// "mixed, priced", seed 0, $974.00 → $970.00 in one kick, within its target of $970.84;
/// docs/benchmarks.md).
fn emptied_once(problem: &Problem<'_>, c: Candidate, bound: f64, tracer: &mut Tracer<'_>) -> Candidate {
    let e = assign::empty_gpus(problem, &c.assignment).filter(|e| cheaper(problem, e, &c.assignment));
    if let Some(e) = &e {
        tr!(tracer, "GPUs emptied from the plan: {} GPUs, cost {:.3}", e.gpus_used(), e.cost(problem));
    }
    let start = e.as_ref().unwrap_or(&c.assignment);
    let enough = |cost| within_target(cost, bound);
    let kicked = if enough(start.cost(problem)) {
        None
    } else {
        assign::KickBudget::new().kicked(problem, start, assign::large_kicks_for(start.gpus_used()), enough)
    };
    if let Some(k) = &kicked {
        tr!(tracer, "GPUs emptied after kicks: {} GPUs, cost {:.3}", k.gpus_used(), k.cost(problem));
    }
    match keep_cheaper(problem, e, kicked) {
        Some(b) => {
            Candidate { assignment: b, method: c.method.then(Step::EmptyGpusOnce), proved: false, ..c }
        }
        None => c,
    }
}

/// Step: on small inputs, when the plan is neither proven nor at the bound valid for every
/// plan, an exhaustive search may find a cheaper plan than the optimiser's counts laid out
/// (their model aggregates some node-level rules).
fn improved(problem: &Problem<'_>, inputs: &Inputs<'_>, c: Candidate, tracer: &mut Tracer<'_>) -> Candidate {
    if c.proved || meets_valid_bound(problem, inputs, &c.assignment) {
        return c;
    }
    match assign::improve(problem, &c.assignment) {
        Some(b) => {
            tr!(tracer, "exhaustive search: {} GPUs, cost {:.3}", b.gpus_used(), b.cost(problem));
            Candidate { assignment: b, method: c.method.then(Step::Improve), ..c }
        }
        None => c,
    }
}

/// Whether the assignment meets the bound valid for every plan (cost on priced pools).
fn meets_valid_bound(problem: &Problem<'_>, inputs: &Inputs<'_>, a: &Assignment) -> bool {
    let valid = inputs.valid;
    match (valid.cost_per_hour, problem.unit_price) {
        (Some(bound), Some(unit)) => a.cost(problem) * unit <= bound * (1.0 + 1e-6),
        _ => a.gpus_used() <= u64::from(valid.gpus),
    }
}

/// The optimiser's path: the MILP (on large programs, first with the relaxation's replica
/// choices pinned), its counts laid out on nodes, first fit when that fails or costs more, and
/// the fallbacks when nothing gives a plan. `Err` when no plan exists (or the searches gave up).
fn optimise(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    ffd: Option<Assignment>,
    tracer: &mut Tracer<'_>,
) -> Result<Candidate, Diagnostics> {
    let (solved, second, skipped_full) = solve_milp(problem, inputs, tracer);
    match (solved, ffd) {
        (Ok(r), ffd) => {
            let (decomposed, spread_rows) = laid_out(problem, inputs, &r, second.as_ref(), tracer);
            let (r, decomposed) = match decomposed {
                None if skipped_full => full_laid_out(problem, inputs, r, tracer),
                d => (r, d),
            };
            let (proven, sound) = (r.proven(), r.sound_proven());
            let counts = Counts { plain: &r, spread_rows: spread_rows.as_ref() };
            judge(problem, inputs, counts, decomposed, ffd, tracer).map(|c| Candidate { proven, sound, ..c })
        }
        (Err(MilpError::Solver(e)), ffd) => {
            rescue(problem, inputs, Why::SolverFailed(e), ffd, None, None, tracer)
        }
        (Err(MilpError::Infeasible), Some(f)) => Ok(Candidate::new(f, Method::FfdKeptNoSolution)),
        (Err(err), None) => Err(crate::plan::infeasible::explain(problem, &err, inputs.planner)),
    }
}

/// Step: the optimiser's result `r` (and a `second` one) laid out, also with the rows of
/// [`milp::solve_with_profile_rows`] where that lost; the cheaper kept.
fn laid_out(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    r: &MilpResult,
    second: Option<&MilpResult>,
    tracer: &mut Tracer<'_>,
) -> (Option<Assignment>, Option<SpreadRows>) {
    let decomposed = lay_out_solved(problem, inputs, r, second, false, tracer);
    let rows = with_profile_rows(problem, inputs, r, decomposed.as_ref(), tracer);
    let decomposed = keep_cheaper(problem, decomposed, rows);
    let (relaxed, spread_rows) = with_relaxed_spread_rows(problem, inputs, r, decomposed.as_ref(), tracer);
    let decomposed = keep_cheaper(problem, decomposed, relaxed);
    tr!(
        tracer,
        "decomposition: {:?}",
        decomposed.as_ref().map(|a| format!(
            "{} GPUs, cost {:.3}, {} replica(s) re-placed by first fit",
            a.gpus_used(),
            a.cost(problem),
            a.repaired
        ))
    );
    (decomposed, spread_rows)
}

/// The result of the program with the `spread: gpu` rows on MIG, their node counts continuous
/// ([`with_relaxed_spread_rows`]), where it ran: what [`pool_by_pool`] lays out.
pub(crate) type SpreadRows = Result<MilpResult, MilpError>;

/// The optimiser's results that the rescue starts from: the plain program's counts, and the
/// program with the spread rows where it ran.
#[derive(Clone, Copy)]
pub(crate) struct Counts<'r> {
    pub plain: &'r MilpResult,
    pub spread_rows: Option<&'r SpreadRows>,
}

/// Step: a large program whose rounded counts lay out nowhere, the full program having been
/// skipped as no better: the full program solved and laid out (issue 23: a 10,000-GPU stress
/// fleet's rounded counts left time-sliced replicas without room even in repair, and first
/// fit's plan, 19% above the bound, was kept). The rounded result stays when that gives no
/// lay-out either.
fn full_laid_out(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    rounded: MilpResult,
    tracer: &mut Tracer<'_>,
) -> (MilpResult, Option<Assignment>) {
    let full = milp::solve(problem, inputs.goal, &Pins::new());
    tr!(
        tracer,
        "MILP, the full program (the rounded counts laid out nowhere): {:?}",
        full.as_ref().map(|r| format!("cost {:.3}, optimal {}", r.cost, r.optimal))
    );
    let Ok(full) = full else { return (rounded, None) };
    match laid_out(problem, inputs, &full, None, tracer).0 {
        Some(a) => (full, Some(a)),
        None => (rounded, None),
    }
}

/// The optimiser's laid-out counts against first fit: the candidate, with its method.
fn judge(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    counts: Counts<'_>,
    decomposed: Option<Assignment>,
    ffd: Option<Assignment>,
    tracer: &mut Tracer<'_>,
) -> Result<Candidate, Diagnostics> {
    let r = counts.plain;
    match (decomposed, ffd) {
        (Some(a), Some(f)) if cheaper(problem, &f, &a) => Ok(Candidate::new(f, Method::FfdBeatOptimiser)),
        (Some(a), _) => {
            let proved = reaches_optimum(problem, &a, r);
            let method = Method::Milp { proved: proved && !r.cuts_trims, repaired: a.repaired };
            Ok(Candidate { proved, ..Candidate::new(a, method) })
        }
        (None, ffd) => {
            let searched = searched_choices(problem, r).map(|a| (a, Step::ChoicesSearched));
            rescue(problem, inputs, Why::NotDecomposed, ffd, searched, Some(counts), tracer)
        }
    }
}

/// Step: the MILP. Large programs: first the relaxation's replica choices rounded (what remains
/// is packing, which the solver does fast); when that is within the large-program gap of the
/// relaxation's cost, the full program could not do better than its own stopping rule, so it
/// is skipped; otherwise both results are returned (counts that cost the same may lay out
/// differently well). When the search stopped early and rate models are involved, the LP
/// relaxation's rate counts rounded are tried too, and the cheaper kept. With whether the full
/// program was skipped.
fn solve_milp(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    tracer: &mut Tracer<'_>,
) -> (Result<MilpResult, MilpError>, Option<MilpResult>, bool) {
    let goal = inputs.goal;
    let no_pins = Pins::new();
    let rounded = inputs.guide.filter(|_| inputs.large).and_then(|lp| {
        let pins = round_all(problem, lp);
        let mut r = milp::solve(problem, goal, &pins)
            .inspect_err(|e| tr!(tracer, "MILP on the rounded relaxation: {e:?}"))
            .ok()?;
        r.restrict(); // pinned: proves nothing for the full program
        tr!(tracer, "MILP on the rounded relaxation: cost {:.3}", r.cost);
        Some((r, lp.cost))
    });
    let (mut solved, second, skipped) = match rounded {
        Some((r, lp)) if r.cost <= lp * (1.0 + milp::LARGE_RELATIVE_GAP) + COST_EPSILON => {
            (Ok(r), None, true)
        }
        Some((r, _)) => match milp::solve(problem, goal, &no_pins) {
            Ok(full) => (Ok(full), Some(r), false),
            Err(_) => (Ok(r), None, false),
        },
        None => (milp::solve(problem, goal, &no_pins), None, false),
    };
    tr!(tracer, "MILP: {:?}", solved.as_ref().map(|r| format!("cost {:.3}, optimal {}", r.cost, r.optimal)));
    if solved.as_ref().map_or(true, |r| !r.optimal)
        && let Some(relaxed) = inputs.relaxed
    {
        let pins = round_rates(problem, relaxed);
        if !pins.is_empty()
            && let Ok(mut alt) = milp::solve(problem, goal, &pins)
            && solved.as_ref().map_or(true, |r| below(alt.cost, r.cost))
        {
            alt.restrict(); // pinned: proves nothing for the full program
            solved = Ok(alt);
        }
    }
    (solved, second, skipped)
}

/// Step: the optimiser's counts laid out on nodes — exactly; else its replica choices by
/// backtracking (small inputs); else its counts with the replicas that find no room placed by
/// first fit. On problems with `spread: gpu` models that may run on MIG, also laid out without
/// that rule at placement and then made to pass it; the cheaper kept.
fn lay_out(problem: &Problem<'_>, r: &MilpResult) -> Option<Assignment> {
    let guarded = assign::decompose(problem, &r.counts, &r.replicas, false)
        .or_else(|| assign::decompose_search(problem, &r.replicas, r.cost))
        .or_else(|| assign::decompose(problem, &r.counts, &r.replicas, true));
    // Where that re-placed replicas by first fit, the MIG GPUs and replicas are assigned to
    // nodes by a small program per pool, with the per-node spread rules as rows (it may open
    // GPUs beyond the counts, each at its pool's price); on large programs, whose time
    // targets the solves would not keep, only where there is no lay-out or it lost more than
    // [`LARGE_LAY_OUT_LOSS`] against the counts.
    let at_risk = |a: &Assignment| !crate::plan::problem::is_large(problem) || lost_over_loss(problem, r, a);
    let guarded = if guarded.as_ref().is_none_or(|a| a.repaired > 0 && at_risk(a)) {
        let assigned = assign::decompose_program(problem, &r.counts, &r.replicas);
        keep_cheaper(problem, guarded, assigned)
    } else {
        guarded
    };
    // The `spread: gpu` rule on MIG is enforced at placement, against layouts not yet trimmed
    // (instances no replica will use count), so it defers replicas that the final layout would
    // take. The counts are laid out once more without it; where that layout breaks the rule,
    // replicas trade instances (same cost, each keeps an option of its model) until no node
    // does, and that plan is kept when it is cheaper and every node of its trimmed layout
    // passes the rule (the verifier's).
    keep_cheaper(problem, guarded, assign::decompose_unguarded(problem, &r.counts, &r.replicas))
}

/// Whether the optimiser's program on `problem` has counts that lay out on its nodes
/// ([`lay_out`], first fit repairing what finds no room): a plan of `problem` exists. What
/// confirms an addition of nodes on fleets too large for the whole cascade
/// (`plan::plans_grown`).
pub(crate) fn counts_lay_out(problem: &Problem<'_>) -> bool {
    let goal = Goal::Plan { cost_bound: None, gpu_floor: None };
    milp::solve(problem, goal, &Pins::new()).is_ok_and(|r| lay_out(problem, &r).is_some())
}

/// The optimiser's result `r` (and a `second` one of the same program) laid out: directly, then
/// with one profile per `spread: gpu` model when that lost, then capped re-solves (with the
/// rows of [`milp::solve_with_profile_rows`] when `profile_rows`) when replicas were re-placed
/// (on a large program: and the lay-out lost more than [`LARGE_LAY_OUT_LOSS`], one round).
fn lay_out_solved(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    r: &MilpResult,
    second: Option<&MilpResult>,
    profile_rows: bool,
    tracer: &mut Tracer<'_>,
) -> Option<Assignment> {
    let mut decomposed = lay_out(problem, r);
    decomposed = keep_cheaper(problem, decomposed, second.and_then(|s| lay_out(problem, s)));
    decomposed = lay_out_one_profile(problem, inputs, r, decomposed, tracer);
    let lost = if inputs.large { lost_much } else { lost_against };
    if lost(problem, r, decomposed.as_ref()) {
        let rounds = if inputs.large { LARGE_CAP_ROUNDS } else { CAP_ROUNDS };
        let capped = lay_out_capped(problem, inputs.goal, r, profile_rows, rounds, tracer);
        decomposed = keep_cheaper(problem, decomposed, capped);
    }
    decomposed
}

/// Whether the lay-out `decomposed` of the optimiser's counts `r` lost against them: none, or
/// with replicas re-placed by first fit, or dearer than the counts.
fn lost_against(problem: &Problem<'_>, r: &MilpResult, decomposed: Option<&Assignment>) -> bool {
    decomposed.is_none_or(|a| a.repaired > 0 || a.cost(problem) > r.cost + COST_EPSILON)
}

/// Whether a large program's lay-out lost much against its counts `r`: none, or with replicas
/// re-placed by first fit and more than [`LARGE_LAY_OUT_LOSS`] dearer.
fn lost_much(problem: &Problem<'_>, r: &MilpResult, decomposed: Option<&Assignment>) -> bool {
    decomposed.is_none_or(|a| a.repaired > 0 && lost_over_loss(problem, r, a))
}

/// Whether lay-out `a` costs more than [`LARGE_LAY_OUT_LOSS`] above its counts `r`.
fn lost_over_loss(problem: &Problem<'_>, r: &MilpResult, a: &Assignment) -> bool {
    a.cost(problem) > r.cost * (1.0 + LARGE_LAY_OUT_LOSS) + COST_EPSILON
}

/// Step: `spread: gpu` on MIG over several profiles — when the lay-out of the plain program's
/// counts `r` lost against them (programs that are not large, with such a model), the program
/// with the rows for a model on several profiles ([`milp::solve_with_profile_rows`]) laid out
/// the same way, its capped re-solves with those rows too. Run second, not instead: on the
/// 128-GPU stress fleet "mixed", seed 0, the counts of the program with the rows lay out on 93
/// GPUs, the plain program's on 90; on the 100-GPU six-type fleet, seed 1, 48 against 62.
fn with_profile_rows(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    r: &MilpResult,
    decomposed: Option<&Assignment>,
    tracer: &mut Tracer<'_>,
) -> Option<Assignment> {
    if !milp::has_profile_rows(problem) || inputs.large || !lost_against(problem, r, decomposed) {
        return None;
    }
    let rows = milp::solve_with_profile_rows(problem, inputs.goal, &Pins::new());
    tr!(
        tracer,
        "MILP with the rows of spread: gpu models on several profiles: {:?}",
        rows.as_ref().map(|a| format!("cost {:.3}", a.cost))
    );
    let mut alt = rows.ok()?;
    alt.restrict(); // judged against the plain program's result
    lay_out_solved(problem, inputs, &alt, None, true, tracer)
}

/// Step, pure-Rust build: `spread: gpu` on MIG — when the lay-out of the plain program's counts
/// `r` lost against them (programs that are neither small nor large, with such a model), the
/// program with those rows, their node counts continuous
/// ([`milp::solve_with_relaxed_spread_rows`]: microlp's branch and bound finds no solution with
/// them integer), laid out the same way; run second, not instead, as [`with_profile_rows`]
/// (HiGHS and small problems have the rows in the plain program already). On the 100-GPU
/// six-type stress fleets "mixed", seeds 2 and 6: 55 → 51 and 59 → 57 GPUs
/// (docs/benchmarks.md).
fn with_relaxed_spread_rows(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    r: &MilpResult,
    decomposed: Option<&Assignment>,
    tracer: &mut Tracer<'_>,
) -> (Option<Assignment>, Option<SpreadRows>) {
    let without = !cfg!(feature = "highs") && !problem.small && !inputs.large;
    if !without || !problem.mig_spread_models || !lost_against(problem, r, decomposed) {
        return (None, None);
    }
    let alt = milp::solve_with_relaxed_spread_rows(problem, inputs.goal, &Pins::new());
    tr!(
        tracer,
        "MILP with the spread: gpu rows, their node counts continuous: {:?}",
        alt.as_ref().map(|a| format!("cost {:.3}", a.cost))
    );
    let laid = alt.as_ref().ok().and_then(|r| lay_out_solved(problem, inputs, r, None, false, tracer));
    (laid, Some(alt))
}

/// Step: `spread: gpu` on MIG — the optimiser may give such a model instances of two profiles
/// that share GPUs, which no node can hold both of (its conditions are necessary only). When
/// the lay-out lost against the counts, the program is solved again with each such model's MIG
/// replicas of a pool on one profile, and that plan is kept when it lays out cheaper.
fn lay_out_one_profile(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    r: &MilpResult,
    decomposed: Option<Assignment>,
    tracer: &mut Tracer<'_>,
) -> Option<Assignment> {
    if !problem.mig_spread_models || inputs.large || !lost_against(problem, r, decomposed.as_ref()) {
        return decomposed;
    }
    let Some(pins) = one_spread_profile(problem, &r.replicas) else { return decomposed };
    let alt = milp::solve(problem, inputs.goal, &pins);
    tr!(
        tracer,
        "MILP with one profile per spread: gpu model and pool: {:?}",
        alt.as_ref().map(|a| a.cost).err()
    );
    let Ok(mut alt) = alt else { return decomposed };
    alt.restrict(); // pinned: proves nothing for the full program
    tr!(tracer, "MILP with one profile per spread: gpu model and pool: cost {:.3}", alt.cost);
    keep_cheaper(problem, decomposed, lay_out(problem, &alt))
}

/// Rounds of [`lay_out_capped`]: re-solves at most.
const CAP_ROUNDS: usize = 2;

/// Rounds of [`lay_out_capped`] on a large program (each re-solve takes as long as its solve),
/// run only where its lay-out lost more than [`LARGE_LAY_OUT_LOSS`] (issue 23).
const LARGE_CAP_ROUNDS: usize = 1;

/// Step: when the optimiser's counts `r` lay out only with replicas that first fit placed
/// (its node-level conditions are necessary only), the program again with each such replica's
/// model capped in its pool at what found room there (single-model columns: spread and rate
/// models), the caps kept from round to round, up to [`CAP_ROUNDS`] solves; the cheapest of
/// their lay-outs. A restriction of the program, so it proves nothing by itself; a lay-out at
/// the full program's proven cost is optimal all the same. The caller runs it on programs
/// that are not large, and on large ones only where the lay-out lost much ([`lost_much`]),
/// for fewer `rounds` (each solve takes as long as the full program's there).
fn lay_out_capped(
    problem: &Problem<'_>,
    goal: Goal,
    r: &MilpResult,
    profile_rows: bool,
    rounds: usize,
    tracer: &mut Tracer<'_>,
) -> Option<Assignment> {
    let mut best: Option<Assignment> = None;
    let mut caps = milp::Caps::new();
    let mut current = r.clone();
    for _ in 0..rounds {
        let Some((_, deferred)) =
            assign::decompose_deferred(problem, &current.counts, &current.replicas, true)
        else {
            break;
        };
        if !tighten(&mut caps, &current, &deferred) {
            break;
        }
        let Ok(mut alt) = milp::solve_capped(problem, goal, &caps, profile_rows) else { break };
        alt.restrict(); // capped: proves nothing for the full program
        let laid = lay_out(problem, &alt);
        tr!(
            tracer,
            "MILP with {} model(s) capped per pool: cost {:.3}, laid out {:?}",
            caps.len(),
            alt.cost,
            laid.as_ref().map(|a| format!(
                "{} GPUs, cost {:.3}, {} re-placed",
                a.gpus_used(),
                a.cost(problem),
                a.repaired
            ))
        );
        let done = !lost_against(problem, &alt, laid.as_ref());
        best = keep_cheaper(problem, best, laid);
        if done {
            break;
        }
        current = alt;
    }
    best
}

/// Lowers `caps` for the deferred replicas of `r`'s choices: each (model, pool) at most its
/// replicas there less those deferred, never above an earlier cap. Whether a cap changed.
fn tighten(
    caps: &mut milp::Caps,
    r: &MilpResult,
    deferred: &[(usize, usize, crate::plan::problem::Kind)],
) -> bool {
    let mut less: std::collections::BTreeMap<(usize, usize), u32> = std::collections::BTreeMap::new();
    for &(m, pi, _) in deferred {
        *less.entry((m, pi)).or_insert(0) += 1;
    }
    let mut changed = false;
    for ((m, pi), n) in less {
        let there: u32 = r.replicas.iter().filter(|(k, _)| k.0 == m && k.1 == pi).map(|(_, &c)| c).sum();
        let cap = there.saturating_sub(n);
        let old = caps.get(&(m, pi)).copied().unwrap_or(u32::MAX);
        if cap < old {
            caps.insert((m, pi), cap);
            changed = true;
        }
    }
    changed
}

/// Steps when the optimiser's path gave no plan of its own (its solve stopped without a
/// feasible solution, or its counts did not lay out): first fit's plan if any, the relaxation
/// laid out, first fit guided by it and first fit in other orders (all linear in the
/// replicas), the cheapest kept; when the solver stopped early on a program that is not large
/// and that is not within the quality target of the relaxation, the optimiser again with more
/// work; on a large program in that case instead, the counts (the optimiser's, else the
/// relaxation's) completed ([`completion`]); where nothing gave a plan,
/// first-fit-decreasing with backtracking. `found`: a plan an earlier step of the optimiser's
/// path found ([`searched_choices`]), among the candidates. `Err` names the true cause
/// ([`failure`]).
pub(crate) fn rescue(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    why: Why,
    ffd: Option<Assignment>,
    found_earlier: Option<(Assignment, Step)>,
    counts: Option<Counts<'_>>,
    tracer: &mut Tracer<'_>,
) -> Result<Candidate, Diagnostics> {
    let found = ffd.is_some();
    let pref = inputs.preferred.clone().or_else(|| {
        inputs.guide.map(|lp| {
            let mut p = lp.replicas.clone();
            p.extend(round_all(problem, lp));
            p
        })
    });
    // The relaxation's counts with its replica choices made whole: laid out among the steps
    // below, and completed by the last step where the solver gave no counts of its own.
    let relaxed =
        inputs.guide.zip(pref.as_ref()).map(|(lp, p)| (lp.counts.as_slice(), exact_totals(problem, p)));
    let laid = inputs
        .guide
        .zip(relaxed.as_ref())
        .and_then(|(lp, (_, totals))| relaxation_lay_out(problem, lp, totals));
    let steps = [
        laid.map(|a| (a, Some(Step::RelaxationLaidOut))),
        pref.as_ref().and_then(|p| assign::ffd_guided(problem, p)).map(|a| (a, Some(Step::FfdGuided))),
        assign::ffd_reordered(problem).map(|(a, order)| (a, Some(Step::FfdReordered(order)))),
        found_earlier.map(|(a, by)| (a, Some(by))),
    ];
    let mut best: Option<(Assignment, Option<Step>)> = ffd.map(|f| (f, None));
    for step in steps {
        best = keep_cheaper_by(problem, best, step, |x| &x.0);
    }
    let target = inputs.guide.map(|lp| lp.cost * (1.0 + QUALITY_TARGET));
    let far = best.as_ref().is_none_or(|(a, _)| target.is_none_or(|t| a.cost(problem) > t + COST_EPSILON));
    // Not on large programs: their solves already take seconds, eight times as many nodes
    // could take minutes, and the relaxation laid out is among the candidates above.
    if matches!(why, Why::SolverFailed(_)) && far && !inputs.large {
        let harder = harder_solve(problem, inputs, best.as_ref().map(|x| x.0.cost(problem)), tracer);
        best = keep_cheaper_by(problem, best, harder.map(|a| (a, Some(Step::HarderSolve))), |x| &x.0);
    }
    // Large programs instead: the counts laid out as far as they go and completed by programs
    // over one or two nodes (the 1,024-GPU stress fleets of the pure-Rust build, where microlp
    // found no solution and first fit's plan was kept: docs/benchmarks.md). Not where a grown
    // fleet only asks whether a plan exists (it has one).
    let from = counts
        .map(|c| (c.plain.counts.as_slice(), &c.plain.replicas))
        .or_else(|| relaxed.as_ref().map(|(c, totals)| (*c, totals)));
    if far && inputs.large && inputs.improve && best.is_some() {
        let done = completion(problem, from, tracer);
        best = keep_cheaper_by(problem, best, done.map(|a| (a, Some(Step::Completed))), |x| &x.0);
    }
    match best {
        Some((f, None)) => Ok(Candidate::new(f, Method::FfdKept(why))),
        Some((a, Some(by))) => {
            tr!(tracer, "{}: {} GPUs, cost {:.3}", by.what(), a.gpus_used(), a.cost(problem));
            let searched = !found && matches!(by, Step::FfdReordered(_));
            Ok(Candidate { searched, ..Candidate::new(a, Method::Fallback { why, by }) })
        }
        None => match assign::ffd_search(problem) {
            Ok(f) => Ok(Candidate {
                searched: true,
                ..Candidate::new(f, Method::Fallback { why, by: Step::FfdSearch })
            }),
            // An exhaustive search proved that no plan exists on these nodes: it says so.
            Err(stuck) if stuck.proven => {
                Err(failure(problem, &why, &stuck, !inputs.large, false, inputs.planner))
            }
            Err(stuck) => {
                let completes = from.is_some();
                let last = every_row(problem, inputs.planner, tracer)
                    .map(|r| r.map(|a| (a, Step::EveryRow)))
                    .or_else(|| {
                        per_node_rescue(problem, inputs.large, inputs.planner, tracer)
                            .map(|r| r.map(|a| (a, Step::PerNodeRescue)))
                    })
                    .or_else(|| {
                        let solved = counts.and_then(|c| c.spread_rows);
                        pool_by_pool(problem, inputs, solved, tracer).map(|a| Ok((a, Step::PoolByPool)))
                    })
                    .or_else(|| completion(problem, from, tracer).map(|a| Ok((a, Step::Completed))));
                match last {
                    Some(Ok((a, by))) => {
                        tr!(tracer, "{}: {} GPUs, cost {:.3}", by.what(), a.gpus_used(), a.cost(problem));
                        Ok(Candidate::new(a, Method::Fallback { why, by }))
                    }
                    Some(Err(d)) => Err(d),
                    None => Err(failure(problem, &why, &stuck, !inputs.large, completes, inputs.planner)),
                }
            }
        },
    }
}

/// The last step before a failure: the plain program leaves out rows (the pure-Rust build the
/// `spread: gpu` rows on MIG, either build those of several profiles), and with them
/// ([`milp::solve_every_row`]) the program may prove that no plan exists (the diagnostic then
/// says why) or find counts that lay out. `None` when it does neither, and with HiGHS where
/// the problem has no rows of several profiles (its plain program then has every row).
fn every_row(
    problem: &Problem<'_>,
    planner: crate::plan::infeasible::Planner<'_>,
    tracer: &mut Tracer<'_>,
) -> Option<Result<Assignment, Diagnostics>> {
    if !runs_every_row(problem) {
        return None;
    }
    let every = milp::solve_every_row(problem);
    tr!(tracer, "MILP with every row: {:?}", every.as_ref().map(|r| r.cost));
    match every {
        Err(MilpError::Infeasible) => {
            Some(Err(crate::plan::infeasible::explain(problem, &MilpError::Infeasible, planner)))
        }
        Ok(r) => lay_out(problem, &r).map(Ok),
        Err(_) => None,
    }
}

/// The very last step before a failure, in the HiGHS build, on programs that are not large:
/// the program written node by node with the exact rows on every layout a plan may trim a GPU
/// to ([`per_node::split`], [`per_node::Split::with_spread_layouts`], [`milp::NodeRows::Exact`]).
/// On one node those rows are the rules themselves, so its counts lay out where the pooled
/// program's (necessary conditions only) did not, and every plan cut node by node is one of
/// its solutions: proven infeasible, no plan exists (the diagnostic then says why). Issue 23:
/// a 100-GPU six-type priced stress fleet (fill 0.7, seed 2) that both builds ended in
/// `planner-failed` plans on 115 of its 116 GPUs this way, in about two minutes; on seed 3
/// the program found no solution within its node budget, and with [`milp::HARDER_WORK`]
/// times it one of 259.125 weights in 455 s. `None` where it does neither, where no split is
/// written (more than [`per_node::MAX_SPLIT_NODES`] nodes), and in the pure-Rust build, whose
/// branch and bound found no solution of that program within its node limit.
pub(crate) fn per_node_rescue(
    problem: &Problem<'_>,
    large: bool,
    planner: crate::plan::infeasible::Planner<'_>,
    tracer: &mut Tracer<'_>,
) -> Option<Result<Assignment, Diagnostics>> {
    if large || !cfg!(feature = "highs") {
        return None;
    }
    let split = per_node::split(problem)?.with_spread_layouts();
    let goal = Goal::Plan { cost_bound: None, gpu_floor: None };
    let mut solve = |work: u32| {
        let solved = split.solve(goal, &Pins::new(), milp::NodeRows::Exact, Pins::new(), work);
        tr!(
            tracer,
            "MILP per node with the exact rows, the last step (work {work}): {:?}",
            solved.as_ref().map(|r| format!("cost {:.3}", r.cost))
        );
        solved
    };
    let mut solved = solve(1);
    // Where its node budget ends without a solution, once more with [`milp::HARDER_WORK`]
    // times the budget — not in the planning of a grown fleet (no `planner`), which only
    // confirms an addition.
    if matches!(solved, Err(MilpError::Solver(_))) && planner.is_some() {
        solved = solve(milp::HARDER_WORK);
    }
    match solved {
        Err(MilpError::Infeasible) => {
            Some(Err(crate::plan::infeasible::explain(problem, &MilpError::Infeasible, planner)))
        }
        Ok(r) => lay_out(&split.problem, &r).map(|a| Ok(split.merge(problem.pools.len(), a))),
        Err(_) => None,
    }
}

/// The last step before a failure, in either build: `from` (the optimiser's counts and
/// replica choices, or the relaxation's where the solver gave none) laid out as far as they
/// go ([`assign::decompose_partial`]), and the replicas left out placed by programs over one
/// node or a pair ([`crate::plan::repack::completed`]), each small enough for either solver.
/// The pure-Rust build has no program per node ([`per_node_rescue`]) within microlp's reach on
/// the fleets that need it (issue 23: the 100-GPU six-type stress fleet "mixed, priced", seed
/// 2, filled to 65%, ended in `planner-failed` there and now plans; filled to 70% it still
/// fails, every GPU in use with replicas missing). `None` where something stays unplaced.
fn completion(
    problem: &Problem<'_>,
    from: Option<(&[milp::PoolCounts], &Pins)>,
    tracer: &mut Tracer<'_>,
) -> Option<Assignment> {
    let (counts, replicas) = from?;
    let (partial, left) = assign::decompose_partial(problem, counts, replicas)?;
    tr!(
        tracer,
        "counts laid out as far as they go: {} GPUs, {} replica(s) left out",
        partial.gpus_used(),
        left.len()
    );
    let done = crate::plan::repack::completed(problem, &partial, &left);
    tr!(
        tracer,
        "replicas left out placed by neighbourhood programs: {:?}",
        done.as_ref().map(|a| format!("{} GPUs, cost {:.3}", a.gpus_used(), a.cost(problem)))
    );
    done
}

/// The step before the completion of a failure: the optimiser's replica choices of the
/// program with the `spread: gpu` rows on MIG (their node counts continuous where the plain
/// program leaves them out: [`milp::solve_with_relaxed_spread_rows`]), laid out pool by pool
/// ([`crate::plan::repack::pool_by_pool`]). The program of a whole fleet with every row is
/// beyond microlp where the fleet needs nearly every GPU it has, the program of one pool's
/// nodes is not (issue 23: six-type stress fleets of 8 and 32 GPUs, fill 0.55, which HiGHS
/// plans on (nearly) every GPU of the fleet, ended in `planner-failed` in the pure-Rust build;
/// docs/benchmarks.md). `solved`: that program's result where [`with_relaxed_spread_rows`]
/// ran (with 8 times the node limit; not solved again), else it is solved here. Not on large
/// programs (their pools have hundreds of nodes), nor in the planning of a grown fleet, which
/// only asks whether a plan exists (the additions a failure names take no longer).
fn pool_by_pool(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    solved: Option<&SpreadRows>,
    tracer: &mut Tracer<'_>,
) -> Option<Assignment> {
    if inputs.large || !inputs.improve {
        return None;
    }
    let fresh;
    let r = match solved {
        Some(r) => r,
        None => {
            fresh = milp::solve_with_relaxed_spread_rows(problem, inputs.goal, &Pins::new());
            tr!(
                tracer,
                "MILP with the spread: gpu rows, for a lay-out pool by pool: {:?}",
                fresh.as_ref().map(|r| format!("cost {:.3}", r.cost))
            );
            &fresh
        }
    };
    let mut done = r.as_ref().ok().and_then(|r| crate::plan::repack::pool_by_pool(problem, &r.replicas));
    // Priced, where that gave no plan: the split of the program that counts GPUs (every GPU
    // weighing 1), whose shares the pools' programs then pack at their prices. On the priced
    // six-type stress fleets whose plans need nearly every GPU, the priced program stopped
    // without a solution or split replicas the pools could not hold where the unpriced one
    // did not (docs/benchmarks.md, "Laying out pool by pool").
    if done.is_none() && problem.unit_price.is_some() {
        let mut unpriced = problem.clone();
        unpriced.unit_price = None;
        for pool in &mut unpriced.pools {
            pool.weight = 1.0;
        }
        let gpu_floor = match inputs.goal {
            Goal::Plan { gpu_floor, .. } => gpu_floor,
            _ => None,
        };
        let goal = Goal::Plan { cost_bound: None, gpu_floor };
        let counted = milp::solve_with_relaxed_spread_rows(&unpriced, goal, &Pins::new());
        tr!(
            tracer,
            "MILP with the spread: gpu rows, unpriced, for a lay-out pool by pool: {:?}",
            counted.as_ref().map(|r| format!("{:.3} GPUs", r.cost))
        );
        done = counted.ok().and_then(|r| crate::plan::repack::pool_by_pool(problem, &r.replicas));
    }
    tr!(
        tracer,
        "laid out pool by pool: {:?}",
        done.as_ref().map(|a| format!("{} GPUs, cost {:.3}", a.gpus_used(), a.cost(problem)))
    );
    done
}

/// Whether [`every_row`] solves a program of its own on `problem`: always in the pure-Rust
/// build; with HiGHS where the problem has rows of several profiles.
fn runs_every_row(problem: &Problem<'_>) -> bool {
    !cfg!(feature = "highs") || milp::has_profile_rows(problem)
}

/// Step: when the optimiser's counts do not lay out (its node-level conditions are necessary
/// only), its replica choices laid out by backtracking with no cap on cost: each replica keeps
/// the pool and device kind the optimiser chose, the search opens the GPUs and MIG layouts
/// that the node rules allow. `None` when the search finds nothing within its step limit.
fn searched_choices(problem: &Problem<'_>, r: &MilpResult) -> Option<Assignment> {
    assign::decompose_search(problem, &r.replicas, f64::INFINITY)
}

/// The relative gap to the relaxation that DESIGN.md's quality target allows (2%).
const QUALITY_TARGET: f64 = 0.02;

/// Whether a plan of weighted cost `cost` is within the quality target of a bound `bound` (in
/// weights, where the cheapest GPU weighs 1): at most max(one cheapest GPU, 2% of the bound)
/// above it, issue 23's target.
fn within_target(cost: f64, bound: f64) -> bool {
    cost <= bound + (QUALITY_TARGET * bound).max(1.0) + COST_EPSILON
}

/// The share of the kicks ([`assign::kicks_for`]) that [`emptied`] gives a plan within the
/// target already, looking for the planner's bound: on the small stress fleets such a plan was
/// a GPU or a price step above a plan the kicks find in milliseconds (32 GPUs, "mixed,
/// compute", seed 4: 21 GPUs, and 20 after the kicks), while a full search on a 100-GPU fleet
/// takes minutes for a plan already within the target.
const PAST_TARGET_KICK_SHARE: usize = 20;

/// GPUs in use above which a large program's plan is not searched for GPUs to empty
/// ([`emptied`]): one search from a 1,024-GPU stress fleet's plan of 478 GPUs took 16 s
/// (pure-Rust build, docs/benchmarks.md); the 10,000-GPU fleets' plans use 3,000 to 6,000.
const LARGE_EMPTY_MAX_GPUS: u64 = 2_048;

/// Whether a plan of weighted cost `cost` is at the planner's `bound`: no plan of the
/// planner's model costs a whole step less (one GPU unpriced, the prices' step priced:
/// [`milp::cost_step`]).
fn at_bound(problem: &Problem<'_>, cost: f64, bound: f64) -> bool {
    let step = milp::cost_step(problem);
    if step > 0.0 { milp::proves(bound, cost, step) } else { cost <= bound + COST_EPSILON }
}

/// Step: the MILP with [`milp::HARDER_WORK`] times its node limit (below `cap`, the best cost
/// found so far), its counts laid out.
fn harder_solve(
    problem: &Problem<'_>,
    inputs: &Inputs<'_>,
    cap: Option<f64>,
    tracer: &mut Tracer<'_>,
) -> Option<Assignment> {
    let goal = match inputs.goal {
        Goal::Plan { cost_bound, gpu_floor } => Goal::Plan { cost_bound: cap.or(cost_bound), gpu_floor },
        g => g,
    };
    let r = milp::solve_harder(problem, goal, &Pins::new());
    tr!(tracer, "MILP with more work: {:?}", r.as_ref().map(|r| r.cost));
    lay_out(problem, &r.ok()?)
}

/// The diagnostic when no step found a plan: `no-feasible-plan` when the backtracking search
/// was exhaustive, else `planner-failed` with what failed (the solver's stop or the lay-out),
/// the steps tried (`harder`: whether the solve with more work and the program per node were
/// among them: the program is not large), and the model
/// whose replica the search could not place.
pub(crate) fn failure(
    problem: &Problem<'_>,
    why: &Why,
    stuck: &assign::Stuck,
    harder: bool,
    completes: bool,
    planner: crate::plan::infeasible::Planner<'_>,
) -> Diagnostics {
    // Whether the program written node by node applies ([`per_node_rescue`] on a program that
    // is not large, where a split is written): with HiGHS it was among the steps tried; the
    // pure-Rust build skips it, and its failure says that the default build has it.
    let node_by_node = harder && per_node::split(problem).is_some();
    let mut d = if stuck.proven {
        // The optimiser's conditions are necessary only; the search tried everything.
        Diagnostic::error(
            codes::NO_FEASIBLE_PLAN,
            "no plan satisfies every constraint together on these nodes: an exhaustive search found none",
        )
        .with_help("check spread, isolation and time-slicing settings; more nodes may help")
    } else {
        let cause = match why {
            Why::NotDecomposed => "the optimiser found counts that cannot be laid out on nodes".to_owned(),
            Why::SolverFailed(e) => format!("the solver stopped without a feasible solution ({e})"),
        };
        Diagnostic::error(
            codes::PLANNER_FAILED,
            format!(
                "{cause}, and no other strategy found a plan (the relaxation laid out, first fit in four orders, first-fit-decreasing with backtracking{}{}{}{}{})",
                match why {
                    Why::SolverFailed(_) if harder => ", the optimiser with more work",
                    Why::SolverFailed(_) => "",
                    Why::NotDecomposed => ", the optimiser's replica choices laid out by backtracking",
                },
                if runs_every_row(problem) { ", the optimiser with every spread row" } else { "" },
                if node_by_node && cfg!(feature = "highs") {
                    ", the optimiser's program written node by node"
                } else {
                    ""
                },
                if harder { ", the replica choices laid out pool by pool" } else { "" },
                if completes { ", the counts completed by programs over one or two nodes" } else { "" }
            ),
        )
        .with_help("this is a planner limitation; please report it with the manifest")
    };
    if let Some(mc) = stuck.model.and_then(|m| problem.models.get(m)) {
        d = d.with_note(format!(
            "the search found no place for a replica of `{}` (spread `{}`, isolation `{}`) once the others were placed; it stopped at its step limit",
            mc.name(),
            mc.spec.spread.word(),
            mc.spec.isolation.word()
        ));
    }
    // Nothing proved whether a plan exists (the solver stopped, or its counts did not lay out
    // and the program with every row stopped too): what the fleet would need.
    if !stuck.proven
        && let Some(note) = crate::plan::infeasible::addition_note(problem, planner)
    {
        d = d.with_note(note);
    }
    // Issue 23: the tightest 100-GPU stress fleets fail in the pure-Rust build and plan with
    // HiGHS this way.
    if !stuck.proven && node_by_node && !cfg!(feature = "highs") {
        d = d.with_note(
            "this build has no HiGHS (built with `--no-default-features`); the default build also solves the program written node by node, which plans tight fleets that this build's solver cannot",
        );
    }
    Diagnostics::from_iter([d])
}

/// Whether `a`, a lay-out of the counts `r`, is their proven optimum: `r` solved to optimality,
/// no replica re-placed, the same cost. (Its method also says whether that proof holds for
/// every plan: not where `r`'s rows may cut a plan that trims a GPU, [`MilpResult::cuts_trims`].)
fn reaches_optimum(problem: &Problem<'_>, a: &Assignment, r: &MilpResult) -> bool {
    a.repaired == 0 && r.optimal && (a.cost(problem) - r.cost).abs() <= 1e-6
}

/// The higher of two lower bounds, either of which may be missing.
pub(super) fn higher(x: Option<f64>, y: Option<f64>) -> Option<f64> {
    match (x, y) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}
