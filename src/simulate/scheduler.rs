//! The kube-scheduler's filters that decide where a GPU pod may go, replayed on the bundle.
//!
//! Modelled on kubernetes/kubernetes `pkg/scheduler/framework/plugins/`:
//! - `noderesources` (Fit): each extended resource the pod requests fits in the node's
//!   allocatable minus what the pods placed there request;
//! - `nodeaffinity`: `nodeSelector` and the required node affinity (terms ORed, expressions
//!   ANDed; `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`);
//! - `tainttoleration`: every `NoSchedule` and `NoExecute` taint is tolerated;
//! - `podtopologyspread` (filtering.go): for each `DoNotSchedule` constraint, the domains are the
//!   values of the topology key on nodes that pass the pod's node affinity
//!   (`nodeAffinityPolicy: Honor`, the default) and, with `nodeTaintsPolicy: Honor`, its taints;
//!   a node passes when `matching pods in its domain + 1 - global minimum <= maxSkew`, the global
//!   minimum being 0 while there are fewer domains than `minDomains`;
//! - `interpodaffinity`: required pod affinity and anti-affinity, the anti-affinity of pods
//!   already placed included.

use std::collections::BTreeMap;

use serde_json::Value;

use super::cluster::{Node, Workload};

/// A placed pod.
#[derive(Clone, Debug)]
pub(super) struct Placed {
    pub workload: usize,
    pub node: usize,
    /// The pod's revision: 0 before a rollout, 1 after.
    pub revision: u8,
}

/// The cluster's state: which pods run where.
#[derive(Clone, Debug, Default)]
pub(super) struct State {
    pub placed: Vec<Placed>,
}

pub(super) fn labels_match_selector(labels: &BTreeMap<String, String>, selector: &Value) -> bool {
    for (k, v) in selector["matchLabels"].as_object().into_iter().flatten() {
        if labels.get(k).map(String::as_str) != v.as_str() {
            return false;
        }
    }
    for e in selector["matchExpressions"].as_array().into_iter().flatten() {
        if !expression_matches(labels, e) {
            return false;
        }
    }
    true
}

fn expression_matches(labels: &BTreeMap<String, String>, e: &Value) -> bool {
    let key = e["key"].as_str().unwrap_or_default();
    let values: Vec<&str> = e["values"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let value = labels.get(key);
    match e["operator"].as_str().unwrap_or_default() {
        "In" => value.is_some_and(|v| values.contains(&v.as_str())),
        "NotIn" => value.is_none_or(|v| !values.contains(&v.as_str())),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|b| b.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if e["operator"] == "Gt" { v > bound } else { v < bound }
        }
        _ => false,
    }
}

/// `nodeSelector` and required node affinity.
pub(super) fn node_affinity_matches(template: &Value, node: &Node) -> bool {
    let spec = &template["spec"];
    for (k, v) in spec["nodeSelector"].as_object().into_iter().flatten() {
        if node.labels.get(k).map(String::as_str) != v.as_str() {
            return false;
        }
    }
    let terms = &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    match terms.as_array() {
        Some(terms) if !terms.is_empty() => terms.iter().any(|t| {
            t["matchExpressions"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|e| expression_matches(&node.labels, e))
                && t["matchFields"].as_array().into_iter().flatten().all(|e| {
                    let fields = BTreeMap::from([("metadata.name".to_owned(), node.name.clone())]);
                    expression_matches(&fields, e)
                })
        }),
        _ => true,
    }
}

/// Whether the pod tolerates every `NoSchedule`/`NoExecute` taint of the node.
pub(super) fn tolerates(template: &Value, node: &Node) -> bool {
    let tolerations = template["spec"]["tolerations"].as_array().cloned().unwrap_or_default();
    node.taints.iter().filter(|t| t.effect != "PreferNoSchedule").all(|t| {
        tolerations.iter().any(|tol| {
            let effect_ok = tol["effect"].as_str().is_none_or(|e| e.is_empty() || e == t.effect);
            let key = tol["key"].as_str().unwrap_or_default();
            let exists = tol["operator"] == "Exists";
            let key_ok = (key.is_empty() && exists) || key == t.key;
            let value_ok = exists || tol["value"].as_str().unwrap_or_default() == t.value;
            effect_ok && key_ok && value_ok
        })
    })
}

/// Whether `workload`'s next pod may run on `node` given `state`.
pub(super) fn feasible(nodes: &[Node], workloads: &[Workload], state: &State, w: usize, n: usize) -> bool {
    let workload = &workloads[w];
    let node = &nodes[n];
    let template = &workload.template;
    // NodeResourcesFit (extended resources).
    for (resource, &want) in &workload.requests {
        let used: u64 = state
            .placed
            .iter()
            .filter(|p| p.node == n)
            .map(|p| workloads[p.workload].requests.get(resource).copied().unwrap_or(0))
            .sum();
        if used + want > node.allocatable.get(resource).copied().unwrap_or(0) {
            return false;
        }
    }
    if !node_affinity_matches(template, node) || !tolerates(template, node) {
        return false;
    }
    spread_ok(nodes, workloads, state, w, n) && pod_affinity_ok(nodes, workloads, state, w, n)
}

fn spread_ok(nodes: &[Node], workloads: &[Workload], state: &State, w: usize, n: usize) -> bool {
    let workload = &workloads[w];
    let template = &workload.template;
    for c in template["spec"]["topologySpreadConstraints"].as_array().into_iter().flatten() {
        if c["whenUnsatisfiable"].as_str().unwrap_or("DoNotSchedule") != "DoNotSchedule" {
            continue;
        }
        let key = c["topologyKey"].as_str().unwrap_or_default();
        let Some(value) = nodes[n].labels.get(key) else { return false };
        let max_skew = c["maxSkew"].as_u64().unwrap_or(1) as i64;
        let min_domains = c["minDomains"].as_u64().unwrap_or(1) as usize;
        let honor_affinity = c["nodeAffinityPolicy"].as_str().unwrap_or("Honor") == "Honor";
        let honor_taints = c["nodeTaintsPolicy"].as_str().unwrap_or("Ignore") == "Honor";
        let selector = &c["labelSelector"];
        let mut domains: BTreeMap<&str, i64> = BTreeMap::new();
        for (i, node) in nodes.iter().enumerate() {
            let Some(d) = node.labels.get(key) else { continue };
            if honor_affinity && !node_affinity_matches(template, node) {
                continue;
            }
            if honor_taints && !tolerates(template, node) {
                continue;
            }
            let count = state
                .placed
                .iter()
                .filter(|p| p.node == i)
                .filter(|p| workloads[p.workload].namespace == workload.namespace)
                .filter(|p| labels_match_selector(&workloads[p.workload].labels, selector))
                .count() as i64;
            *domains.entry(d.as_str()).or_default() += count;
        }
        let global_min =
            if domains.len() < min_domains { 0 } else { domains.values().copied().min().unwrap_or(0) };
        let self_match = i64::from(labels_match_selector(&workload.labels, selector));
        let here = domains.get(value.as_str()).copied().unwrap_or(0);
        if here + self_match - global_min > max_skew {
            return false;
        }
    }
    true
}

fn in_same_domain(nodes: &[Node], a: usize, b: usize, key: &str) -> bool {
    match (nodes[a].labels.get(key), nodes[b].labels.get(key)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

fn pod_affinity_ok(nodes: &[Node], workloads: &[Workload], state: &State, w: usize, n: usize) -> bool {
    let workload = &workloads[w];
    let spec = &workload.template["spec"]["affinity"];
    let required = |kind: &str, v: &Value| -> Vec<Value> {
        v[kind]["requiredDuringSchedulingIgnoredDuringExecution"].as_array().cloned().unwrap_or_default()
    };
    let matches_term = |term: &Value, other: &Workload, owner_ns: &str| {
        let namespaces: Vec<&str> =
            term["namespaces"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let ns_ok = if namespaces.is_empty() {
            other.namespace == owner_ns
        } else {
            namespaces.contains(&other.namespace.as_str())
        };
        ns_ok && labels_match_selector(&other.labels, &term["labelSelector"])
    };
    for term in required("podAffinity", spec) {
        let key = term["topologyKey"].as_str().unwrap_or_default();
        let any_match =
            state.placed.iter().any(|p| matches_term(&term, &workloads[p.workload], &workload.namespace));
        let near = state.placed.iter().any(|p| {
            in_same_domain(nodes, p.node, n, key)
                && matches_term(&term, &workloads[p.workload], &workload.namespace)
        });
        // The first pod of a group that selects itself may go anywhere (interpodaffinity).
        if !near && (any_match || !matches_term(&term, workload, &workload.namespace)) {
            return false;
        }
    }
    for term in required("podAntiAffinity", spec) {
        let key = term["topologyKey"].as_str().unwrap_or_default();
        if state.placed.iter().any(|p| {
            in_same_domain(nodes, p.node, n, key)
                && matches_term(&term, &workloads[p.workload], &workload.namespace)
        }) {
            return false;
        }
    }
    // Anti-affinity of the pods already placed (symmetry).
    for p in &state.placed {
        let other = &workloads[p.workload];
        for term in required("podAntiAffinity", &other.template["spec"]["affinity"]) {
            let key = term["topologyKey"].as_str().unwrap_or_default();
            if in_same_domain(nodes, p.node, n, key) && matches_term(&term, workload, &other.namespace) {
                return false;
            }
        }
    }
    true
}

/// Nodes where workload `w`'s next pod may run.
pub(super) fn feasible_nodes(nodes: &[Node], workloads: &[Workload], state: &State, w: usize) -> Vec<usize> {
    (0..nodes.len()).filter(|&n| feasible(nodes, workloads, state, w, n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::cluster::Taint;

    fn node(name: &str, gpus: u64) -> Node {
        let taint = Taint { key: "nvidia.com/gpu".into(), value: String::new(), effect: "NoSchedule".into() };
        Node { taints: vec![taint], ..Node::with_gpus(name, gpus) }
    }

    fn spread_workload(min_domains: Option<u64>) -> Workload {
        let mut spread = serde_json::json!({ "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": { "matchLabels": { "app": "a" } } });
        if let Some(m) = min_domains {
            spread["minDomains"] = m.into();
        }
        Workload {
            name: "a".into(),
            namespace: "ns".into(),
            replicas: 4,
            max_surge: 0,
            max_unavailable: 1,
            labels: BTreeMap::from([("app".to_owned(), "a".to_owned())]),
            requests: BTreeMap::from([("nvidia.com/gpu".to_owned(), 1)]),
            template: serde_json::json!({ "spec": {
                "tolerations": [{ "key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule" }],
                "topologySpreadConstraints": [spread] } }),
        }
    }

    #[test]
    fn untolerated_taints_and_full_nodes_are_refused() {
        let nodes = vec![node("n1", 1)];
        let mut w = spread_workload(None);
        assert!(feasible(&nodes, std::slice::from_ref(&w), &State::default(), 0, 0));
        let state = State { placed: vec![Placed { workload: 0, node: 0, revision: 0 }] };
        assert!(!feasible(&nodes, std::slice::from_ref(&w), &state, 0, 0), "no GPU left");
        w.template["spec"]["tolerations"] = serde_json::json!([]);
        assert!(!feasible(&nodes, &[w], &State::default(), 0, 0), "taint not tolerated");
    }

    #[test]
    fn spread_keeps_domains_within_max_skew() {
        let nodes = vec![node("n1", 4), node("n2", 4)];
        let w = vec![spread_workload(None)];
        assert_eq!(feasible_nodes(&nodes, &w, &State::default(), 0), vec![0, 1]);
        let state = State { placed: vec![Placed { workload: 0, node: 0, revision: 0 }] };
        assert_eq!(feasible_nodes(&nodes, &w, &state, 0), vec![1], "n1 would be 2 against 0");
    }

    #[test]
    fn min_domains_counts_missing_domains_as_zero() {
        let nodes = vec![node("n1", 4)];
        let w = vec![spread_workload(Some(2))];
        let state = State { placed: vec![Placed { workload: 0, node: 0, revision: 0 }] };
        assert!(feasible_nodes(&nodes, &w, &state, 0).is_empty(), "one domain of two: at most one pod");
    }
}
