//! The staged drain wave against the PodDisruptionBudgets, as `kubectl drain` and the eviction
//! API run it.
//!
//! In: the cluster as the synced part leaves it (one complete placement of every pod), the
//! bundle's PodDisruptionBudgets and the nodes of the wave `nodes/drain/kustomization.yaml`
//! stages. Out: the number of pods evicted, or why the drain can never finish.
//!
//! Modelled on kubernetes/kubernetes: `kubectl drain` (`staging/src/k8s.io/kubectl/pkg/drain/`)
//! cordons the wave's nodes, then evicts their pods, retrying a refused eviction every 5 s with
//! no timeout by default; the eviction subresource (`pkg/registry/core/pod/storage/eviction.go`)
//! evicts a Pending pod without looking at budgets, refuses a pod that more than one budget
//! selects, and refuses (429) while the budget's `disruptionsAllowed` is 0; the disruption
//! controller (`pkg/controller/disruption/disruption.go`) sets `disruptionsAllowed =
//! currentHealthy − desiredHealthy`, counting only Ready pods as healthy, with `desiredHealthy`
//! = `minAvailable` (an integer), or ⌈`minAvailable`% × expected⌉, or expected − ⌈
//! `maxUnavailable` (count or % of expected, rounded up)⌉, where expected is the sum of the
//! scales (`replicas`) of the controllers of the selected pods. An evicted pod's Deployment
//! creates a replacement at once; it counts as healthy when some node that is not cordoned
//! takes it (it becomes Ready in time), else it stays Pending — a replacement pinned to a
//! drained node always does. A drain that reaches a state where no pod left on its nodes may
//! be evicted can never finish.
//!
//! Not modelled: `unhealthyPodEvictionPolicy` (every placed pod is taken as Ready, so it does
//! not apply), the time pods take to become Ready, DaemonSets and pods outside the bundle.

use std::collections::BTreeSet;

use super::cluster::{Budget, Node, Workload, resolve};
use super::scheduler::{Placed, State, feasible_nodes, labels_match_selector};

/// Why one pod may not be evicted now.
enum Refusal {
    /// The budget allows no disruption: its figures.
    Budget { name: String, healthy: u32, desired: u32, expected: u32, pending: u32 },
    /// More than one budget selects the pod (the eviction API refuses such pods).
    Several(Vec<String>),
}

fn selects(b: &Budget, w: &Workload) -> bool {
    b.namespace == w.namespace && labels_match_selector(&w.labels, &b.selector)
}

/// The eviction API's verdict on a pod of `w`, `pending` being the workloads of the pods that
/// are Pending.
fn verdict(
    workloads: &[Workload],
    state: &State,
    pending: &[usize],
    budgets: &[Budget],
    w: usize,
) -> Option<Refusal> {
    let mine: Vec<&Budget> = budgets.iter().filter(|b| selects(b, &workloads[w])).collect();
    let b = match mine.as_slice() {
        [] => return None,
        [b] => *b,
        several => return Some(Refusal::Several(several.iter().map(|b| b.name.clone()).collect())),
    };
    let selected: BTreeSet<usize> = (0..workloads.len()).filter(|&i| selects(b, &workloads[i])).collect();
    let healthy = state.placed.iter().filter(|p| selected.contains(&p.workload)).count() as u32;
    let waiting = pending.iter().filter(|w| selected.contains(w)).count() as u32;
    let scale: u32 = selected.iter().map(|&i| workloads[i].replicas).sum();
    let (desired, expected) = match (&b.min_available, &b.max_unavailable) {
        (Some(v), _) if v.is_number() => (v.as_u64().unwrap_or(0) as u32, healthy + waiting),
        (Some(v), _) => (resolve(v, scale, true, "0"), scale),
        (None, Some(v)) => (scale.saturating_sub(resolve(v, scale, true, "0")), scale),
        // Neither field: nothing is desired.
        (None, None) => (0, scale),
    };
    (healthy <= desired).then(|| Refusal::Budget {
        name: b.name.clone(),
        healthy,
        desired,
        expected,
        pending: waiting,
    })
}

/// Drains `wave` (node names) from `state`; the pods evicted, or why the drain never finishes.
pub(super) fn drain(
    nodes: &[Node],
    workloads: &[Workload],
    mut state: State,
    budgets: &[Budget],
    wave: &[String],
) -> Result<usize, String> {
    let mut cordoned = BTreeSet::new();
    for name in wave {
        match nodes.iter().position(|n| &n.name == name) {
            Some(i) => cordoned.insert(i),
            None => return Err(format!("node `{name}` of the staged wave is not in `nodes/nodes.json`")),
        };
    }
    let mut pending: Vec<usize> = Vec::new();
    let mut evicted = 0;
    for name in wave {
        let Some(n) = nodes.iter().position(|x| &x.name == name) else { continue };
        loop {
            let on: Vec<usize> = (0..state.placed.len()).filter(|&i| state.placed[i].node == n).collect();
            if on.is_empty() {
                break;
            }
            let mut refusals = Vec::new();
            let mut next = None;
            for &i in &on {
                match verdict(workloads, &state, &pending, budgets, state.placed[i].workload) {
                    None => {
                        next = Some(i);
                        break;
                    }
                    Some(r) => refusals.push((state.placed[i].workload, r)),
                }
            }
            let Some(i) = next else { return Err(stuck(workloads, name, on.len(), &refusals)) };
            let w = state.placed.remove(i).workload;
            evicted += 1;
            // The Deployment replaces the pod; the scheduler skips cordoned nodes.
            let target =
                feasible_nodes(nodes, workloads, &state, w).into_iter().find(|x| !cordoned.contains(x));
            match target {
                Some(node) => state.placed.push(Placed { workload: w, node, revision: 0 }),
                None => pending.push(w),
            }
        }
    }
    Ok(evicted)
}

/// The sentence for a drain that can never finish.
fn stuck(workloads: &[Workload], node: &str, left: usize, refusals: &[(usize, Refusal)]) -> String {
    let (w, why) = &refusals[0];
    let reason = match why {
        Refusal::Budget { name, healthy, desired, expected, pending } => format!(
            "PodDisruptionBudget `{name}` allows no disruption: {healthy} healthy, {desired} desired of {expected} expected, {pending} pod(s) Pending (replacements pinned to drained nodes, or with no node to go to)"
        ),
        Refusal::Several(names) => format!(
            "PodDisruptionBudgets {} all select it (the eviction API refuses a pod under more than one budget)",
            names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        ),
    };
    format!(
        "the drain of node `{node}` can never finish: {left} pod(s) left on it; evicting a pod of `{}` is refused: {reason}",
        workloads[*w].name
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::{Value, json};

    use super::drain;
    use crate::simulate::cluster::{Budget, Node, Workload};
    use crate::simulate::scheduler::{Placed, State};

    fn node(name: &str, gpus: u64) -> Node {
        Node::with_gpus(name, gpus)
    }

    /// A Deployment of model `a` with `replicas` pods, pinned to `pin` when given.
    fn deployment(name: &str, replicas: u32, pin: Option<&str>) -> Workload {
        let selector = pin.map_or(Value::Null, |n| json!({ "kubernetes.io/hostname": n }));
        Workload {
            name: name.to_owned(),
            namespace: "ns".to_owned(),
            replicas,
            max_surge: 0,
            max_unavailable: 1,
            labels: BTreeMap::from([("app.kubernetes.io/name".to_owned(), "a".to_owned())]),
            requests: BTreeMap::from([("nvidia.com/gpu".to_owned(), 1)]),
            template: json!({ "spec": { "nodeSelector": selector } }),
        }
    }

    fn budget(name: &str, min: Option<Value>, max: Option<Value>) -> Budget {
        Budget {
            name: name.to_owned(),
            namespace: "ns".to_owned(),
            selector: json!({ "matchLabels": { "app.kubernetes.io/name": "a" } }),
            min_available: min,
            max_unavailable: max,
        }
    }

    /// Pods: (workload, node) each.
    fn state(pods: &[(usize, usize)]) -> State {
        State {
            placed: pods.iter().map(|&(workload, node)| Placed { workload, node, revision: 0 }).collect(),
        }
    }

    #[test]
    fn pinned_replacements_stay_pending_and_count_against_the_budget() {
        let nodes = [node("n1", 2), node("n2", 2)];
        let workloads = [deployment("a-n1", 2, Some("n1")), deployment("a-n2", 1, Some("n2"))];
        let pods = state(&[(0, 0), (0, 0), (1, 1)]);
        let max1 = budget("a", None, Some(json!(1)));
        let wave = ["n1".to_owned()];
        // The first eviction is allowed (3 healthy, 2 desired); its replacement is pinned to the
        // cordoned node, so the second is refused for ever.
        let err =
            drain(&nodes, &workloads, pods.clone(), std::slice::from_ref(&max1), &wave).expect_err("stuck");
        assert!(err.contains("`n1`") && err.contains("`a`") && err.contains("1 pod(s) Pending"), "{err}");
        // Two pods may go at once: the drain finishes.
        let max2 = budget("a", None, Some(json!("50%")));
        assert_eq!(drain(&nodes, &workloads, pods.clone(), &[max2], &wave), Ok(2));
        // `minAvailable: 1` counts pods, not the Deployments' scale: 3 healthy, then 2, then 1.
        let min1 = budget("a", Some(json!(1)), None);
        assert_eq!(drain(&nodes, &workloads, pods.clone(), &[min1], &wave), Ok(2));
        // A replacement that another node takes is healthy again: the drain goes on.
        let free = [deployment("a", 2, None), deployment("a-n2", 1, Some("n2"))];
        assert_eq!(
            drain(&nodes, &free, state(&[(0, 0), (0, 0), (1, 1)]), std::slice::from_ref(&max1), &wave),
            Ok(2)
        );
        // Under two budgets a pod is never evicted.
        let err = drain(&nodes, &free, state(&[(0, 0), (0, 0), (1, 1)]), &[max1.clone(), max1], &wave)
            .expect_err("two budgets");
        assert!(err.contains("more than one budget"), "{err}");
        // Nothing under a budget: everything goes.
        assert_eq!(drain(&nodes, &workloads, pods, &[], &wave), Ok(2));
    }
}
