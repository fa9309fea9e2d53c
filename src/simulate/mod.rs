//! Scheduling simulation: does the kube-scheduler reproduce the plan whatever the order?
//!
//! In: the files of a written bundle (relative path → text), nothing else — not the manifest,
//! not the plan, no planner code. Out: a [`Report`] of every arrival order in which a pod found
//! no node, every rolling update that could not progress, and the drain of the staged wave if
//! it can never finish.
//!
//! What is judged is the synced part on the cluster as it is now: the auto-synced Node patches
//! applied, the held-back ones under `nodes/drain/` not, and every node in transition (its
//! `carries` in `nodes/nodes.json`) advertising what it carries. Then the wave that
//! `nodes/drain/kustomization.yaml` stages is drained against the PodDisruptionBudgets
//! ([`drain`]); later waves are staged, and judged, by the bundles that follow.
//!
//! The cluster (nodes, their labels, taints and allocatable GPU resources) and the pods are
//! derived from the bundle by [`cluster`]; [`scheduler`] replays the scheduler's filters. Pods
//! arrive in many orders — the files' order, reversed, interleaved by Deployment, each
//! Deployment and each model first, and seeded random permutations — and each pod goes to a
//! feasible node chosen adversarially (the first, the last, a random one, or the one that
//! leaves the fewest pending pods a feasible node). Then every Deployment rolls out a new
//! revision under its strategy, all at once (a GitOps sync that bumps every image) and each
//! alone, replacing pods as the Deployment controller does: new pods while the total stays
//! within `replicas + maxSurge`, old pods deleted while available pods stay at least
//! `replicas - maxUnavailable`.
//!
//! Guarantees: deterministic for a seed; no IO; never panics on a malformed bundle (it is
//! reported as a problem).

pub(crate) mod cluster;
pub mod dra;
mod drain;
pub(crate) mod scheduler;

use std::collections::BTreeMap;

use serde::Serialize;

use cluster::{Node, Workload};
use scheduler::{Placed, State, feasible_nodes};

/// How much to try.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Random arrival orders on top of the structured ones.
    pub random_orders: usize,
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self { random_orders: 200, seed: 1 }
    }
}

/// What the simulation found.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub nodes: usize,
    pub deployments: usize,
    pub pods: usize,
    /// Arrival orders replayed.
    pub orders: usize,
    /// Rolling updates replayed (each Deployment alone, then all at once).
    pub rollouts: usize,
    /// The nodes of the staged drain wave whose drain was replayed (empty: nothing held back).
    pub drained: Vec<String>,
    pub problems: Vec<Problem>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// `bundle`, `unschedulable`, `rollout-stuck` or `drain-stuck`.
    pub kind: &'static str,
    /// The arrival order or rollout that shows it.
    pub scenario: String,
    pub message: String,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// A small deterministic generator (xorshift64*), enough to shuffle.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// How the adversary picks among feasible nodes.
#[derive(Clone, Copy, Debug)]
enum Choice {
    First,
    Last,
    Random,
    /// The node after which the fewest other pending pods still have a feasible node.
    Hurtful,
}

/// The bundle as the simulation reads it.
struct Loaded {
    nodes: Vec<Node>,
    workloads: Vec<Workload>,
    budgets: Vec<cluster::Budget>,
    /// The nodes of the staged drain wave.
    wave: Vec<String>,
}

fn load(files: &BTreeMap<String, String>) -> Result<Loaded, String> {
    let mut nodes = cluster::nodes(files)?;
    let mut workloads = cluster::workloads(files)?;
    dra::attach(files, &mut nodes, &mut workloads)?;
    Ok(Loaded { nodes, workloads, budgets: cluster::budgets(files)?, wave: cluster::staged_drain(files)? })
}

/// Simulates a bundle: the synced part on the cluster as it is now (every arrival order, every
/// rollout), then the drain of the wave it stages.
pub fn simulate(files: &BTreeMap<String, String>, options: &Options) -> Report {
    let mut report = Report::default();
    let Loaded { nodes, workloads, budgets, wave } = match load(files) {
        Ok(x) => x,
        Err(message) => {
            report.problems.push(Problem { kind: "bundle", scenario: "reading the bundle".into(), message });
            return report;
        }
    };
    report.nodes = nodes.len();
    report.deployments = workloads.len();
    let (orders, structured) = arrival_orders(&workloads, options);
    report.pods = orders.first().map_or(0, |(_, o)| o.len());
    let Some(state) = place_in_every_order(&nodes, &workloads, &orders, structured, options, &mut report)
    else {
        return report;
    };
    rollouts(&nodes, &workloads, &state, options, &mut report);
    if !wave.is_empty() {
        report.drained.clone_from(&wave);
        if let Err(message) = drain::drain(&nodes, &workloads, state, &budgets, &wave) {
            report.problems.push(Problem {
                kind: "drain-stuck",
                scenario: format!("drain of the staged wave ({})", wave.join(", ")),
                message,
            });
        }
    }
    report
}

/// The arrival orders (pods as indices of their Deployment), and how many are structured.
fn arrival_orders(workloads: &[Workload], options: &Options) -> (Vec<(String, Vec<usize>)>, usize) {
    let pods: Vec<usize> =
        workloads.iter().enumerate().flat_map(|(i, w)| std::iter::repeat_n(i, w.replicas as usize)).collect();
    let mut orders: Vec<(String, Vec<usize>)> = Vec::new();
    orders.push(("files".into(), pods.clone()));
    orders.push(("reversed".into(), pods.iter().rev().copied().collect()));
    let mut interleaved = Vec::new();
    let max = workloads.iter().map(|w| w.replicas).max().unwrap_or(0);
    for round in 0..max {
        interleaved.extend((0..workloads.len()).filter(|&i| workloads[i].replicas > round));
    }
    orders.push(("interleaved".into(), interleaved.clone()));
    for (i, w) in workloads.iter().enumerate() {
        let mut first: Vec<usize> = pods.iter().copied().filter(|&p| p == i).collect();
        first.extend(pods.iter().rev().copied().filter(|&p| p != i));
        orders.push((format!("`{}` first", w.name), first));
    }
    let mut models: Vec<&str> =
        workloads.iter().filter_map(|w| w.labels.get("app.kubernetes.io/name")).map(String::as_str).collect();
    models.sort_unstable();
    models.dedup();
    for m in &models {
        let of =
            |p: &usize| workloads[*p].labels.get("app.kubernetes.io/name").map(String::as_str) == Some(*m);
        let mut first: Vec<usize> = interleaved.iter().copied().filter(of).collect();
        first.extend(interleaved.iter().copied().filter(|p| !of(p)));
        orders.push((format!("model `{m}` first"), first));
    }
    let structured = orders.len();
    let mut rng = Rng::new(options.seed);
    for k in 0..options.random_orders {
        let mut order = pods.clone();
        rng.shuffle(&mut order);
        orders.push((format!("random order {k} (seed {})", options.seed), order));
    }
    (orders, structured)
}

/// Places every order against the adversaries; one complete placement, if any order completed.
fn place_in_every_order(
    nodes: &[Node],
    workloads: &[Workload],
    orders: &[(String, Vec<usize>)],
    structured: usize,
    options: &Options,
    report: &mut Report,
) -> Option<State> {
    // The adversary's look-ahead is quadratic: keep it for clusters of a reviewable size.
    let hurtful = report.pods * nodes.len() <= 20_000;
    let choices: &[Choice] = if hurtful {
        &[Choice::First, Choice::Last, Choice::Random, Choice::Hurtful]
    } else {
        &[Choice::First, Choice::Last, Choice::Random]
    };
    let mut placed_once: Option<State> = None;
    for (i, (name, order)) in orders.iter().enumerate() {
        for (c, &choice) in choices.iter().enumerate() {
            // Structured orders meet every adversary; random ones one each, in turn.
            if i >= structured && c != i % choices.len() {
                continue;
            }
            report.orders += 1;
            let mut rng = Rng::new(options.seed ^ (i as u64) << 8 ^ c as u64);
            match place(nodes, workloads, order, choice, &mut rng) {
                Err((w, state)) => report.problems.push(Problem {
                    kind: "unschedulable",
                    scenario: format!("{name}, nodes chosen {choice:?}"),
                    message: format!(
                        "a pod of `{}` fits no node after {} pods were placed ({})",
                        workloads[w].name,
                        state.placed.len(),
                        describe(nodes, workloads, &state)
                    ),
                }),
                Ok(state) if placed_once.is_none() => placed_once = Some(state),
                Ok(_) => {}
            }
        }
    }
    placed_once
}

/// One arrival order against one adversary: the placement, or the pod that found no node.
fn place(
    nodes: &[Node],
    workloads: &[Workload],
    order: &[usize],
    choice: Choice,
    rng: &mut Rng,
) -> Result<State, (usize, State)> {
    let mut state = State::default();
    for (k, &w) in order.iter().enumerate() {
        let feasible = feasible_nodes(nodes, workloads, &state, w);
        if feasible.is_empty() {
            return Err((w, state));
        }
        let n = pick(nodes, workloads, &state, w, &feasible, &order[k + 1..], choice, rng);
        state.placed.push(Placed { workload: w, node: n, revision: 0 });
    }
    Ok(state)
}

/// Every Deployment rolled out alone, then all at once, from one complete placement.
fn rollouts(nodes: &[Node], workloads: &[Workload], state: &State, options: &Options, report: &mut Report) {
    for (i, w) in workloads.iter().enumerate() {
        report.rollouts += 1;
        if let Err(message) = rollout(nodes, workloads, state.clone(), &[i], options.seed) {
            report.problems.push(Problem {
                kind: "rollout-stuck",
                scenario: format!("rollout of `{}`", w.name),
                message,
            });
        }
    }
    report.rollouts += 1;
    let all: Vec<usize> = (0..workloads.len()).collect();
    if let Err(message) = rollout(nodes, workloads, state.clone(), &all, options.seed) {
        report.problems.push(Problem {
            kind: "rollout-stuck",
            scenario: "every Deployment rolled out at once".into(),
            message,
        });
    }
}

#[allow(clippy::too_many_arguments)]
fn pick(
    nodes: &[Node],
    workloads: &[Workload],
    state: &State,
    w: usize,
    feasible: &[usize],
    pending: &[usize],
    choice: Choice,
    rng: &mut Rng,
) -> usize {
    match choice {
        Choice::First => feasible[0],
        Choice::Last => feasible[feasible.len() - 1],
        Choice::Random => feasible[rng.below(feasible.len())],
        Choice::Hurtful => {
            let mut distinct: Vec<usize> = pending.to_vec();
            distinct.sort_unstable();
            distinct.dedup();
            let mut worst = (usize::MAX, feasible[0]);
            for &n in feasible {
                let mut trial = state.clone();
                trial.placed.push(Placed { workload: w, node: n, revision: 0 });
                let alive = distinct
                    .iter()
                    .filter(|&&p| !feasible_nodes(nodes, workloads, &trial, p).is_empty())
                    .count();
                if alive < worst.0 {
                    worst = (alive, n);
                }
            }
            worst.1
        }
    }
}

/// Where each Deployment's pods are, for a failure message.
fn describe(nodes: &[Node], workloads: &[Workload], state: &State) -> String {
    let mut per: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    for p in &state.placed {
        *per.entry((workloads[p.workload].name.as_str(), nodes[p.node].name.as_str())).or_default() += 1;
    }
    per.iter().map(|((w, n), c)| format!("{w}×{c} on {n}")).collect::<Vec<_>>().join(", ")
}

/// Rolls `which` Deployments to a new revision at once, as the Deployment controller does;
/// fails when no Deployment can take a step and some are not done.
fn rollout(
    nodes: &[Node],
    workloads: &[Workload],
    mut state: State,
    which: &[usize],
    seed: u64,
) -> Result<(), String> {
    let mut rng = Rng::new(seed ^ 0xA5A5);
    let mut pending: BTreeMap<usize, u32> = which.iter().map(|&w| (w, 0)).collect();
    let count = |state: &State, w: usize, revision: u8| {
        state.placed.iter().filter(|p| p.workload == w && p.revision == revision).count() as u32
    };
    loop {
        let mut progress = false;
        let mut done = true;
        for &w in which {
            let d = &workloads[w];
            let (old, new) = (count(&state, w, 0), count(&state, w, 1));
            let waiting = pending.get(&w).copied().unwrap_or(0);
            if old == 0 && new == d.replicas {
                continue;
            }
            done = false;
            // Scale the new ReplicaSet up within replicas + maxSurge.
            if old + new + waiting < d.replicas + d.max_surge && new + waiting < d.replicas {
                pending.insert(w, waiting + 1);
                progress = true;
            }
            // Schedule one waiting new pod.
            if pending.get(&w).copied().unwrap_or(0) > 0 {
                let feasible = feasible_nodes(nodes, workloads, &state, w);
                if !feasible.is_empty() {
                    let n = feasible[rng.below(feasible.len())];
                    state.placed.push(Placed { workload: w, node: n, revision: 1 });
                    if let Some(p) = pending.get_mut(&w) {
                        *p -= 1;
                    }
                    progress = true;
                }
            }
            // Scale the old ReplicaSet down while enough pods stay available.
            let (old, new) = (count(&state, w, 0), count(&state, w, 1));
            if old > 0 && old + new > d.replicas.saturating_sub(d.max_unavailable) {
                let olds: Vec<usize> = (0..state.placed.len())
                    .filter(|&i| state.placed[i].workload == w && state.placed[i].revision == 0)
                    .collect();
                let victim = olds[rng.below(olds.len())];
                state.placed.remove(victim);
                progress = true;
            }
        }
        if done {
            return Ok(());
        }
        if !progress {
            let stuck: Vec<String> = which
                .iter()
                .filter(|&&w| count(&state, w, 0) > 0 || count(&state, w, 1) < workloads[w].replicas)
                .map(|&w| {
                    format!(
                        "`{}` ({} old, {} new of {}, {} pending)",
                        workloads[w].name,
                        count(&state, w, 0),
                        count(&state, w, 1),
                        workloads[w].replicas,
                        pending.get(&w).copied().unwrap_or(0)
                    )
                })
                .collect();
            return Err(format!("no Deployment can progress: {}", stuck.join(", ")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_deterministic() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        assert_eq!(
            (0..5).map(|_| a.next()).collect::<Vec<_>>(),
            (0..5).map(|_| b.next()).collect::<Vec<_>>()
        );
    }
}
