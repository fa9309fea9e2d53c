//! The object-level change summary: what a sync of the new bundle adds, changes and deletes, by
//! kind, and every change that disrupts something — `terraform plan`'s "N to add, M to change,
//! K to destroy" for a GitOps bundle.
//!
//! In: an [`Outcome`] (the committed and the new contents of every changed file) and the
//! currency of the manifest's costs. Out: an [`ObjectSummary`]. It is computed from the files
//! alone, so it exists in every mode (`--from-scratch` and a first compile included) and says
//! nothing the files do not.
//!
//! Objects are the documents a GitOps tool applies: every document of a `.yaml` file with
//! `apiVersion` and `kind`, except the files applied by hand or read by other tools
//! ([`is_applied`]). An object is identified by kind, namespace and name; it changes when its
//! parsed contents differ (formatting never counts).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::Outcome;

/// Add, change and destroy counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub add: usize,
    pub change: usize,
    pub destroy: usize,
}

impl Counts {
    fn total(self) -> usize {
        self.add + self.change + self.destroy
    }
}

/// The cost per hour before and after, from the committed and the new `plan.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CostDelta {
    pub before_per_hour: f64,
    pub after_per_hour: f64,
    pub delta_per_hour: f64,
    /// The manifest's currency (`cluster.currency`), when it gives one.
    pub currency: Option<String>,
}

/// What a sync of the new bundle does to the cluster's objects (`diff --format json`:
/// `summary.objects`; keys documented in docs/ci.md).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectSummary {
    #[serde(flatten)]
    pub total: Counts,
    /// Counts per object kind (`Deployment`, `Node`, `ConfigMap`, …).
    pub by_kind: BTreeMap<String, Counts>,
    /// One sentence per change that restarts, stops, drains or takes a model down.
    pub disruptions: Vec<String>,
    /// Present when `plan.json` changes and both plans have a cost.
    pub cost: Option<CostDelta>,
}

/// Whether a file holds objects that the GitOps sync applies: YAML outside the kustomizations,
/// `nodes/autoscaled/` (node-group data), `helm-values.yaml` and `cluster-policy-patch.yaml`
/// (applied by hand). The held-back `nodes/drain/` patches count: they are applied after a drain.
pub fn is_applied(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    (path.ends_with(".yaml") || path.ends_with(".yml"))
        && file != "kustomization.yaml"
        && file != "helm-values.yaml"
        && file != "cluster-policy-patch.yaml"
        && !path.starts_with("nodes/autoscaled/")
}

type Key = (String, String, String);

/// The objects of one side of the changed files, by (kind, namespace, name).
fn objects<'a>(
    outcome: &'a Outcome,
    side: impl Fn(&'a super::Change) -> Option<&'a String>,
) -> BTreeMap<Key, Value> {
    let mut out = BTreeMap::new();
    for change in outcome.changes.iter().filter(|c| is_applied(&c.path)) {
        let Some(text) = side(change) else { continue };
        // A committed file that no longer parses counts as no objects (the new one replaces it).
        let docs: Vec<Value> = serde_saphyr::from_multiple(text).unwrap_or_default();
        for doc in docs {
            let field = |p: &str| doc.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
            let kind = field("/kind");
            if kind.is_empty() {
                continue;
            }
            out.insert((kind, field("/metadata/namespace"), field("/metadata/name")), doc);
        }
    }
    out
}

/// The summary of `outcome` (see the module docs).
pub fn summarise(outcome: &Outcome, currency: Option<&str>) -> ObjectSummary {
    let old = objects(outcome, |c| c.old.as_ref());
    let new = objects(outcome, |c| c.new.as_ref());
    let mut summary = ObjectSummary::default();
    let mut count = |kind: &str, f: fn(&mut Counts)| {
        f(&mut summary.total);
        f(summary.by_kind.entry(kind.to_owned()).or_default());
    };
    for (key, doc) in &new {
        match old.get(key) {
            None => count(&key.0, |c| c.add += 1),
            Some(before) if before != doc => count(&key.0, |c| c.change += 1),
            Some(_) => {}
        }
    }
    for key in old.keys().filter(|k| !new.contains_key(*k)) {
        count(&key.0, |c| c.destroy += 1);
    }
    summary.disruptions = disruptions(&old, &new);
    summary.cost = cost(outcome, currency);
    summary
}

fn text(v: &Value, pointer: &str) -> String {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned()
}

fn number(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// Pods of each model across the new Deployments (by `app.kubernetes.io/name`).
fn replicas_per_model(new: &BTreeMap<Key, Value>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for ((kind, ..), doc) in new {
        if kind == "Deployment" {
            *out.entry(text(doc, "/metadata/labels/app.kubernetes.io~1name")).or_default() +=
                number(doc, "/spec/replicas");
        }
    }
    out
}

/// One line per disruptive change, in the order of the objects' keys.
fn disruptions(old: &BTreeMap<Key, Value>, new: &BTreeMap<Key, Value>) -> Vec<String> {
    let per_model = replicas_per_model(new);
    let mut out = Vec::new();
    for (key, doc) in new {
        let before = old.get(key);
        match key.0.as_str() {
            "Deployment" => {
                if let Some(before) = before {
                    deployment_change(&mut out, &key.2, before, doc, &per_model);
                }
            }
            "Node"
                if doc.pointer("/metadata/annotations/gpuplan.io~1must-drain").is_some() && before != Some(doc) =>
            {
                out.push(format!(
                    "drain: node `{}` must be drained before its new MIG layout applies (held back in nodes/drain/)",
                    key.2
                ));
            }
            "Node" if doc.pointer("/metadata/annotations/gpuplan.io~1must-drain").is_some() => {}
            "Node" if before.is_some_and(|b| b != doc) => out.push(format!(
                "reconfigure: node `{}` gets new GPU labels; the MIG manager changes only GPUs that ran nothing",
                key.2
            )),
            "ConfigMap" if key.2 == "gpuplan-device-plugin-config" && before.is_some_and(|b| b != doc) => {
                out.push(format!(
                    "restart: the device plugin reads `{}` only at start: `kubectl -n {} rollout restart daemonset/nvidia-device-plugin-daemonset`",
                    key.2, key.1
                ));
            }
            _ => {}
        }
    }
    for (key, doc) in old.iter().filter(|(k, _)| !new.contains_key(*k)) {
        match key.0.as_str() {
            "Deployment" => out.push(format!(
                "stop: Deployment `{}` is deleted, its {} pod(s) stop",
                key.2,
                number(doc, "/spec/replicas")
            )),
            "Node" => out.push(format!(
                "keep: node `{}` leaves the bundle; its labels stay on the node (never pruned, docs/bundle.md)",
                key.2
            )),
            _ => {}
        }
    }
    out
}

fn deployment_change(
    out: &mut Vec<String>,
    name: &str,
    before: &Value,
    after: &Value,
    per_model: &BTreeMap<String, u64>,
) {
    let (was, is) = (number(before, "/spec/replicas"), number(after, "/spec/replicas"));
    if was > is {
        out.push(format!("scale down: Deployment `{name}` stops {} of its {was} pod(s)", was - is));
    }
    if before.pointer("/spec/template") == after.pointer("/spec/template") {
        return;
    }
    let image = "/spec/template/spec/containers/0/image";
    let what = if text(before, image) != text(after, image) {
        format!("image {} → {}", text(before, image), text(after, image))
    } else {
        "its pod template changes".to_owned()
    };
    out.push(format!("restart: Deployment `{name}` replaces its {is} pod(s): {what}"));
    let model = text(after, "/metadata/labels/app.kubernetes.io~1name");
    let surge = after.pointer("/spec/strategy/rollingUpdate/maxSurge");
    let no_surge = surge.is_none_or(|s| s.as_u64() == Some(0) || s.as_str() == Some("0%"));
    if per_model.get(&model).copied().unwrap_or(0) == 1 && no_surge {
        out.push(format!(
            "downtime: model `{model}` has one replica and no spare GPU (maxSurge 0): it is down while `{name}` restarts"
        ));
    }
}

fn cost(outcome: &Outcome, currency: Option<&str>) -> Option<CostDelta> {
    let plan = outcome.changes.iter().find(|c| c.path == crate::render::paths::PLAN_JSON)?;
    let per_hour = |text: Option<&String>| -> Option<f64> {
        let v: Value = serde_json::from_str(text?).ok()?;
        v.pointer("/quality/costPerHour")?.as_f64()
    };
    let (before, after) = (per_hour(plan.old.as_ref())?, per_hour(plan.new.as_ref())?);
    Some(CostDelta {
        before_per_hour: before,
        after_per_hour: after,
        delta_per_hour: after - before,
        currency: currency.map(str::to_owned),
    })
}

/// The human form: counts first, then counts per kind, disruptions and cost, one line each.
/// Every line states facts of the files only, so the same change prints the same lines.
pub fn human(summary: &ObjectSummary) -> String {
    let t = summary.total;
    let mut s = format!("Objects: {} to add, {} to change, {} to destroy", t.add, t.change, t.destroy);
    s.push_str(if t.total() == 0 { " (the sync applies nothing new)\n" } else { "\n" });
    for (kind, c) in &summary.by_kind {
        s.push_str(&format!("  {kind}: +{} ~{} -{}\n", c.add, c.change, c.destroy));
    }
    for d in &summary.disruptions {
        s.push_str(&format!("  ! {d}\n"));
    }
    if let Some(c) = &summary.cost {
        let unit = c.currency.as_deref().map_or_else(String::new, |c| format!(" {c}"));
        s.push_str(&format!(
            "  cost: {:.2}{unit}/h → {:.2}{unit}/h ({:+.2}{unit}/h)\n",
            c.before_per_hour, c.after_per_hour, c.delta_per_hour
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::{Outcome, human, summarise};
    use crate::emit::{Change, ChangeKind};

    fn deployment(name: &str, model: &str, image: &str, replicas: u32, surge: u32) -> String {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: ml\n  labels:\n    app.kubernetes.io/name: {model}\nspec:\n  replicas: {replicas}\n  strategy:\n    rollingUpdate:\n      maxSurge: {surge}\n  template:\n    spec:\n      containers:\n        - name: {model}\n          image: {image}\n"
        )
    }

    fn change(path: &str, old: Option<String>, new: Option<String>) -> Change {
        let kind = match (&old, &new) {
            (None, _) => ChangeKind::Added,
            (_, None) => ChangeKind::Removed,
            _ => ChangeKind::Modified,
        };
        Change { path: path.to_owned(), kind, old, new }
    }

    #[test]
    fn an_image_bump_of_a_lone_replica_is_a_change_a_restart_and_downtime() {
        let old = deployment("llm-a", "llm", "r/llm:1", 1, 0);
        let new = deployment("llm-a", "llm", "r/llm:2", 1, 0);
        let outcome = Outcome { changes: vec![change("workloads/llm.yaml", Some(old), Some(new))] };
        let s = summarise(&outcome, Some("EUR"));
        assert_eq!((s.total.add, s.total.change, s.total.destroy), (0, 1, 0));
        assert_eq!(s.disruptions.len(), 2, "{:?}", s.disruptions);
        assert!(
            s.disruptions[0]
                .starts_with("restart: Deployment `llm-a` replaces its 1 pod(s): image r/llm:1 → r/llm:2")
        );
        assert!(s.disruptions[1].starts_with("downtime: model `llm`"));
        assert!(
            human(&s).starts_with("Objects: 0 to add, 1 to change, 0 to destroy\n  Deployment: +0 ~1 -0\n")
        );
    }

    #[test]
    fn surge_or_a_second_replica_means_no_downtime_and_formatting_is_no_change() {
        let old = format!(
            "{}---\n{}",
            deployment("m-a", "m", "r/m:1", 1, 0),
            deployment("m-b", "m", "r/m:1", 1, 0)
        );
        let new = format!(
            "{}---\n{}",
            deployment("m-a", "m", "r/m:2", 1, 0),
            deployment("m-b", "m", "r/m:1", 1, 0)
        );
        let other = deployment("n-a", "n", "r/n:1", 1, 1);
        let reformatted = other.replace("replicas: 1", "replicas:   1");
        let outcome = Outcome {
            changes: vec![
                change("workloads/m.yaml", Some(old), Some(new)),
                change("workloads/n.yaml", Some(reformatted), Some(other)),
            ],
        };
        let s = summarise(&outcome, None);
        assert_eq!(s.total.change, 1, "only m-a changes; n.yaml differs only in formatting");
        assert!(!s.disruptions.iter().any(|d| d.starts_with("downtime")), "{:?}", s.disruptions);
    }

    #[test]
    fn added_and_destroyed_objects_are_counted_by_kind_and_plan_costs_compared() {
        let node = "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-2\n  labels:\n    nvidia.com/mig.config: all-disabled\n";
        let plan = |cost: f64| format!("{{\"quality\": {{\"costPerHour\": {cost}}}}}");
        let outcome = Outcome {
            changes: vec![
                change("nodes/labels/node-labels.yaml", None, Some(node.to_owned())),
                change("workloads/old.yaml", Some(deployment("old-a", "old", "r/o:1", 2, 0)), None),
                change("plan.json", Some(plan(10.0)), Some(plan(12.5))),
                change("nodes/drain/node-labels.yaml", Some(node.replace("gpu-2", "gpu-9")), None),
                change(
                    "kustomization.yaml",
                    None,
                    Some("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n".into()),
                ),
            ],
        };
        let s = summarise(&outcome, Some("USD"));
        assert_eq!((s.total.add, s.total.change, s.total.destroy), (1, 0, 2));
        assert_eq!(s.by_kind.keys().collect::<Vec<_>>(), ["Deployment", "Node"], "no Kustomization");
        assert_eq!(s.disruptions[0], "stop: Deployment `old-a` is deleted, its 2 pod(s) stop");
        assert!(
            s.disruptions[1].starts_with("keep: node `gpu-9` leaves the bundle; its labels stay"),
            "{:?}",
            s.disruptions
        );
        assert!(human(&s).contains("  cost: 10.00 USD/h → 12.50 USD/h (+2.50 USD/h)\n"), "{}", human(&s));
    }
}
