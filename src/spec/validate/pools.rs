//! The inventory: pools, their GPUs and nodes, the MIG layouts nodes run today.

use std::collections::BTreeMap;

use super::{CheckedPool, MAX_GPUS_PER_NODE, MAX_POOL_NODES, Validator, ticks};
use crate::catalog::GpuModel;
use crate::diagnostics::{Diagnostic, Span, codes, nearest};
use crate::manifest::{self as raw, Manifest, Sp};
use crate::spec::{CurrentNode, Nodes, Pool, Taint, error, names};

impl Validator<'_> {
    pub(super) fn pools(&mut self, m: &Manifest) -> Vec<CheckedPool> {
        if m.inventory.pools.is_empty() {
            let span = m.inventory.span.clone().or_else(|| m.span.clone());
            if let Some(span) = span {
                self.invalid(
                    &span,
                    "the inventory has no pools",
                    "no pools",
                    "add a pool of GPU nodes under `inventory.pools`",
                );
            }
        }
        let mut seen: BTreeMap<String, Span> = BTreeMap::new();
        let mut nodes_seen: BTreeMap<String, Span> = BTreeMap::new();
        let mut out = Vec::new();
        for p in &m.inventory.pools {
            if self.dns_label(&p.name, "the pool name") {
                self.unique(&mut seen, &p.name, "pool");
            }
            let checked = self.pool(p, &mut nodes_seen);
            if let Some(c) = checked {
                out.push(c);
            }
        }
        out
    }

    pub(super) fn unique(&mut self, seen: &mut BTreeMap<String, Span>, name: &Sp<String>, what: &str) {
        if let Some(first) = seen.get(&name.value) {
            let d =
                Diagnostic::error(codes::DUPLICATE_NAME, format!("two {what}s are named `{}`", name.value))
                    .at(name.span.clone(), "second use")
                    .with_label(first.clone(), "first use")
                    .with_help(format!("give every {what} its own name"));
            self.push(d);
        } else {
            seen.insert(name.value.clone(), name.span.clone());
        }
    }

    pub(super) fn pool(
        &mut self,
        p: &raw::Pool,
        nodes_seen: &mut BTreeMap<String, Span>,
    ) -> Option<CheckedPool> {
        let gpu = self.gpu(&p.gpu);
        let gpus_per_node = self.int_in(&p.gpus_per_node, "`gpusPerNode`", 1, MAX_GPUS_PER_NODE);
        let nodes = self.pool_nodes(p, nodes_seen);
        let node_selector = self.node_selector(p);
        let taints = self.taints(p);
        let cost = p.cost_per_gpu_hour.as_ref().and_then(|c| {
            if c.value < 0.0 {
                self.invalid(
                    &c.span,
                    format!("`costPerGpuHour` is {}, below zero", c.value),
                    "negative",
                    "give the price of one GPU for one hour, such as `2.4`",
                );
                None
            } else {
                Some(c.value)
            }
        });
        let current = self.current_nodes(p, nodes.as_ref(), gpus_per_node.zip(gpu));
        Some(CheckedPool {
            pool: Pool {
                name: p.name.value.clone(),
                gpu: gpu?.id.clone(),
                gpus_per_node: gpus_per_node? as u32,
                nodes: nodes?,
                cost_per_gpu_hour: cost,
                node_selector,
                taints,
                current,
                sharing: p.sharing.as_ref().map_or_else(crate::spec::PoolSharing::default, |list| {
                    crate::spec::PoolSharing {
                        mig: list.iter().any(|m| m.value == crate::manifest::words::SharingMechanism::Mig),
                        time_slicing: list
                            .iter()
                            .any(|m| m.value == crate::manifest::words::SharingMechanism::TimeSlicing),
                        mps: list.iter().any(|m| m.value == crate::manifest::words::SharingMechanism::Mps),
                    }
                }),
                dra: None,
                // The pool's name: what a planner diagnostic about the pool should underline.
                span: Some(p.name.span.clone()),
            },
            gpu: gpu?.clone(),
        })
    }

    /// The pool's nodes: named (each a DNS subdomain, unique across pools) or a count.
    fn pool_nodes(&mut self, p: &raw::Pool, nodes_seen: &mut BTreeMap<String, Span>) -> Option<Nodes> {
        match (&p.nodes, &p.count) {
            (Some(_), Some(count)) => {
                self.both_nodes_and_count(p, count);
                None
            }
            (None, None) => {
                let span = p.span.clone().unwrap_or_else(|| p.name.span.clone());
                self.push(error(
                    codes::MISSING_FIELD,
                    &span,
                    format!("pool `{}` has neither `nodes` nor `count`", p.name.value),
                    "no nodes",
                    "add `nodes: [node-name, ...]` for existing nodes, or `count: {min: 0, max: 4}` for an autoscaled pool",
                ));
                None
            }
            (Some(names), None) => Some(self.named_nodes(p, names, nodes_seen)),
            (None, Some(raw::NodeCount::Fixed(n))) => self
                .int_in(n, "`count`", 1, MAX_POOL_NODES)
                .map(|n| Nodes::Autoscaled { min: n as u32, max: n as u32 }),
            (None, Some(raw::NodeCount::Range(r))) => self.node_range(r),
        }
    }

    fn both_nodes_and_count(&mut self, p: &raw::Pool, count: &raw::NodeCount) {
        let count_span = match count {
            raw::NodeCount::Fixed(n) => n.span.clone(),
            raw::NodeCount::Range(r) => r.span.clone().unwrap_or_else(|| r.max.span.clone()),
        };
        let mut d = Diagnostic::error(
            codes::CONFLICTING_FIELDS,
            format!("pool `{}` has both `nodes` and `count`", p.name.value),
        )
        .at(count_span, "`count` here")
        .with_help("name the nodes of an existing pool, or give the count of an autoscaled one, not both");
        if let Some(first) = p.nodes.as_ref().and_then(|n| n.first()) {
            d = d.with_label(first.span.clone(), "`nodes` here");
        }
        self.push(d);
    }

    fn named_nodes(
        &mut self,
        p: &raw::Pool,
        names: &[Sp<String>],
        nodes_seen: &mut BTreeMap<String, Span>,
    ) -> Nodes {
        if names.is_empty() {
            self.invalid(
                &p.name.span,
                format!("pool `{}` has an empty `nodes` list", p.name.value),
                "no nodes",
                "name at least one node",
            );
        }
        for n in names {
            match names::dns_subdomain(&n.value) {
                Ok(()) => self.unique(nodes_seen, n, "node"),
                Err(rule) => self.push(error(
                    codes::INVALID_NAME,
                    &n.span,
                    format!("node name `{}` is not a DNS-1123 subdomain: {rule}", n.value),
                    "not a node name",
                    "write the node's name as `kubectl get nodes` shows it",
                )),
            }
        }
        Nodes::Named(names.iter().map(|n| n.value.clone()).collect())
    }

    /// An autoscaled pool's `count: {min, max}`.
    fn node_range(&mut self, r: &raw::CountRange) -> Option<Nodes> {
        let max = self.int_in(&r.max, "`count.max`", 1, MAX_POOL_NODES);
        let min = match &r.min {
            Some(min) => self.int_in(min, "`count.min`", 0, MAX_POOL_NODES),
            None => Some(0),
        };
        match (min, max) {
            (Some(min), Some(max)) if min > max => {
                let span = r.min.as_ref().map_or_else(|| r.max.span.clone(), |m| m.span.clone());
                self.invalid(
                    &span,
                    format!("`count.min` ({min}) is above `count.max` ({max})"),
                    "above max",
                    "make `min` at most `max`",
                );
                None
            }
            (Some(min), Some(max)) => Some(Nodes::Autoscaled { min: min as u32, max: max as u32 }),
            _ => None,
        }
    }

    fn node_selector(&mut self, p: &raw::Pool) -> BTreeMap<String, String> {
        let mut node_selector = BTreeMap::new();
        for (k, v) in p.node_selector.iter().flat_map(|m| m.0.iter()) {
            self.name_rule(k, names::label_key, "label key", "use a key such as `nvidia.com/gpu.product`");
            let value_help = "label values have at most 63 letters, digits, `-`, `_` and `.`";
            self.name_rule(v, names::label_value, "label value", value_help);
            node_selector.insert(k.value.clone(), v.value.clone());
        }
        node_selector
    }

    fn taints(&mut self, p: &raw::Pool) -> Vec<Taint> {
        let mut taints = Vec::new();
        for t in p.taints.iter().flatten() {
            self.name_rule(&t.key, names::label_key, "taint key", "taint keys follow the label key syntax");
            if let Some(v) = &t.value {
                self.name_rule(
                    v,
                    names::label_value,
                    "taint value",
                    "taint values follow the label value syntax",
                );
            }
            const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];
            if !EFFECTS.contains(&t.effect.value.as_str()) {
                let help = match nearest(&t.effect.value, EFFECTS.iter().copied()) {
                    Some(n) => format!("did you mean `{n}`?"),
                    None => format!("the effect is one of {}", ticks(EFFECTS)),
                };
                self.invalid(
                    &t.effect.span,
                    format!("unknown taint effect `{}`", t.effect.value),
                    "not a taint effect",
                    help,
                );
            }
            taints.push(Taint {
                key: t.key.value.clone(),
                value: t.value.as_ref().map(|v| v.value.clone()),
                effect: t.effect.value.clone(),
            });
        }
        taints
    }

    /// The MIG layouts the pool's named nodes run today; `per_node` is the pool's GPUs per node
    /// and GPU model, when both are known.
    fn current_nodes(
        &mut self,
        p: &raw::Pool,
        nodes: Option<&Nodes>,
        per_node: Option<(i128, &GpuModel)>,
    ) -> Vec<CurrentNode> {
        let mut current = Vec::new();
        for c in p.current.iter().flatten() {
            match nodes {
                Some(Nodes::Named(names)) if names.contains(&c.node.value) => {}
                Some(Nodes::Named(names)) => {
                    let help = match nearest(&c.node.value, names.iter().map(String::as_str)) {
                        Some(n) => format!("did you mean `{n}`?"),
                        None => format!("the nodes of pool `{}` are listed in its `nodes`", p.name.value),
                    };
                    self.push(error(
                        codes::UNKNOWN_NODE,
                        &c.node.span,
                        format!("pool `{}` has no node `{}`", p.name.value, c.node.value),
                        "not in `nodes`",
                        help,
                    ));
                }
                Some(Nodes::Autoscaled { .. }) => self.push(error(
                    codes::UNKNOWN_NODE,
                    &c.node.span,
                    format!("pool `{}` is autoscaled and has no named node `{}`", p.name.value, c.node.value),
                    "not a named node",
                    "give `current` layouts only for pools with named `nodes`",
                )),
                None => {}
            }
            if let Some((gpn, gpu)) = per_node {
                if c.gpus.len() as i128 > gpn {
                    let span = c.span.clone().unwrap_or_else(|| c.node.span.clone());
                    self.invalid(
                        &span,
                        format!(
                            "node `{}` lists {} GPUs but the pool has {gpn} per node",
                            c.node.value,
                            c.gpus.len()
                        ),
                        "too many GPUs",
                        "give one list of MIG profiles per GPU of the node",
                    );
                }
                for (i, profiles) in c.gpus.iter().enumerate() {
                    self.current_gpu(gpu, &c.node.value, i, profiles);
                }
            }
            current.push(CurrentNode {
                node: c.node.value.clone(),
                gpus: c.gpus.iter().map(|g| g.iter().map(|p| p.value.clone()).collect()).collect(),
            });
        }
        current
    }

    pub(super) fn current_gpu(&mut self, gpu: &GpuModel, node: &str, index: usize, profiles: &[Sp<String>]) {
        let mut known = true;
        for p in profiles {
            if gpu.profile(&p.value).is_none() {
                known = false;
                self.unknown_profile(gpu, p);
            }
        }
        if !known || profiles.is_empty() {
            return;
        }
        let names: Vec<&str> = profiles.iter().map(|p| p.value.as_str()).collect();
        if let Err(e) = crate::catalog::layout::validate(gpu, &names) {
            let span = Span::new(
                profiles[0].span.file,
                profiles[0].span.range.start..profiles[profiles.len() - 1].span.range.end,
            );
            self.invalid(
                &span,
                format!("the current layout of GPU {index} on node `{node}` is impossible: {e}"),
                "not a valid MIG layout",
                format!("write the layout `nvidia-smi mig -lgi` shows on `{node}`"),
            );
        }
    }

    pub(super) fn unknown_profile(&mut self, gpu: &GpuModel, p: &Sp<String>) {
        let names: Vec<&str> = gpu
            .mig
            .as_ref()
            .map(|m| m.profiles.iter().map(|p| p.name.as_str()).collect())
            .unwrap_or_default();
        let help = if names.is_empty() {
            format!("`{}` has no MIG; measure it as `whole`", gpu.id)
        } else {
            match nearest(&p.value, names.iter().copied()) {
                Some(n) => {
                    format!("did you mean `{n}`? `gpuplan catalog show {}` lists its profiles", gpu.id)
                }
                None => format!("the profiles of `{}` are {}", gpu.id, ticks(&names)),
            }
        };
        self.push(error(
            codes::UNKNOWN_PROFILE,
            &p.span,
            format!("`{}` has no MIG profile `{}`", gpu.id, p.value),
            "unknown profile",
            help,
        ));
    }
}
