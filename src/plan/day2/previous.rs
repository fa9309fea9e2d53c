//! The previous plan: the `plan.json` committed in the output directory, read as today's state.
//!
//! In: the text of a `plan.json` written by this or another gpuplan version. Out: a [`Previous`]
//! with, per node, each GPU's mode (MIG instances, time-slicing, whole) and tenants, the node's
//! configs — or a one-line reason why the text is not a
//! plan. Unknown fields are ignored and missing ones take defaults, so that a plan written by an
//! older or newer gpuplan still reads; what no longer matches the manifest is judged by
//! [`super::replan`], which turns it into notes, never into a failure.

use std::collections::BTreeMap;

use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::plan::{DevicePluginConfig, GpuMode, GpuPlan, MigConfig, Tenant};

/// A previous plan, as far as re-planning needs it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Previous {
    pub name: String,
    pub pools: Vec<PrevPool>,
    pub models: Vec<PrevModel>,
    /// The plan's own configs, read back as it wrote them.
    pub mig_configs: BTreeMap<String, MigConfig>,
    pub device_plugin_configs: BTreeMap<String, DevicePluginConfig>,
    pub quality: PrevQuality,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PrevPool {
    pub name: String,
    pub gpu: String,
    pub autoscaled: bool,
    pub nodes: Vec<PrevNode>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PrevNode {
    pub name: String,
    pub mig_config: String,
    pub device_plugin_config: String,
    pub gpus: Vec<PrevGpu>,
    /// Whether its change waited for a drain (a node in transition without it was gated: its
    /// labels synced, its workloads waiting for the MIG manager).
    pub must_drain: bool,
    /// The node's change in progress; absent (a plan of an earlier gpuplan, or a released
    /// node): the cluster carries the node's labels.
    pub transition: Option<Transition>,
}

/// A node's change that waits for the cluster: its new labels are held back under
/// `nodes/drain/` until `--observed` shows them applied (`docs/planner.md`, "Day 2").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Transition {
    pub phase: Phase,
    /// What the cluster carries now: the labels last released, with the layout and tenants
    /// they stand for.
    pub carries: Carried,
    /// The labels the node moves to (the node's own `migConfig` and `devicePluginConfig`).
    pub target: Labels,
}

/// Where a held node stands, as far as the last `--observed` file said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// The new labels wait for the node's drain (not yet seen on the node).
    #[default]
    Held,
    /// The node carries the new labels; the MIG manager has not reported `success` yet.
    Applying,
    /// The MIG manager reported `nvidia.com/mig.config.state=failed` for the new labels.
    Failed,
    /// The last `--observed` file did not list the node (gone from the cluster, or not yet
    /// back): it stays held and is in no rollout wave until an observation shows it again.
    Missing,
}

/// The two labels gpuplan sets that the GPU Operator acts on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Labels {
    pub mig_config: String,
    pub device_plugin_config: String,
}

/// What a held node runs today: its labels, and per GPU the mode and tenants.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Carried {
    pub mig_config: String,
    pub device_plugin_config: String,
    pub gpus: Vec<PrevGpu>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PrevGpu {
    pub index: u32,
    /// The GPU's UUID on the DRA backend (`None`: the device plugin served it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    pub mode: PrevMode,
    pub tenants: Vec<Tenant>,
}

/// A GPU's mode as read back: the plan's own [`GpuMode`] (written and read as `plan.json` has
/// it), or `Unknown` for a mode this gpuplan cannot read (the node is then planned afresh).
#[derive(Clone, Debug, PartialEq)]
pub enum PrevMode {
    Known(GpuMode),
    Unknown,
}

impl PrevMode {
    /// The mode, when this gpuplan knows it.
    pub fn known(&self) -> Option<&GpuMode> {
        match self {
            PrevMode::Known(mode) => Some(mode),
            PrevMode::Unknown => None,
        }
    }
}

impl Default for PrevMode {
    fn default() -> Self {
        PrevMode::Known(GpuMode::Unused)
    }
}

impl<'de> Deserialize<'de> for PrevMode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        Ok(GpuMode::deserialize(value).map_or(PrevMode::Unknown, PrevMode::Known))
    }
}

impl Serialize for PrevMode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PrevMode::Known(mode) => mode.serialize(s),
            PrevMode::Unknown => {
                let mut out = s.serialize_struct("PrevMode", 1)?;
                out.serialize_field("mode", "unknown")?;
                out.end()
            }
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PrevModel {
    pub name: String,
    pub groups: Vec<PrevGroup>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PrevGroup {
    pub resource: String,
    pub per_replica: u32,
    pub replicas: u32,
    pub pool: String,
    pub nodes: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PrevQuality {
    pub gpus_used: u32,
    pub cost_per_hour: Option<f64>,
}

impl PrevGpu {
    /// A plan's GPU as the next compile reads it back from `plan.json` (the inverse of
    /// [`PrevGpu::as_planned`], UUID kept).
    pub fn from_planned(g: &GpuPlan) -> PrevGpu {
        PrevGpu {
            index: g.index,
            uuid: g.uuid.clone(),
            mode: PrevMode::Known(g.mode.clone()),
            tenants: g.tenants.clone(),
        }
    }

    /// The GPU as a plan's GPU (what a node in transition carries, for rendering what runs
    /// there now): an unknown mode reads as unused.
    pub fn as_planned(&self) -> GpuPlan {
        GpuPlan {
            index: self.index,
            uuid: None,
            mode: self.mode.known().cloned().unwrap_or(GpuMode::Unused),
            tenants: self.tenants.clone(),
        }
    }
}

impl Previous {
    /// Every node of the previous plan with its pool, by node name.
    pub fn nodes(&self) -> BTreeMap<&str, (&PrevPool, &PrevNode)> {
        self.pools.iter().flat_map(|p| p.nodes.iter().map(move |n| (n.name.as_str(), (p, n)))).collect()
    }

    /// Replicas per (model, node) running today: a held node's carried tenants, else the
    /// node's own (a multi-GPU replica counts once per GPU; callers divide by the model's GPUs
    /// per replica).
    pub fn tenants(&self) -> BTreeMap<(String, String), u32> {
        let mut out = BTreeMap::new();
        for p in &self.pools {
            for n in &p.nodes {
                let gpus = n.transition.as_ref().map_or(&n.gpus, |t| &t.carries.gpus);
                for g in gpus {
                    // An adopted node's tenants are unknown (`""`).
                    for t in g.tenants.iter().filter(|t| !t.model.is_empty()) {
                        *out.entry((t.model.clone(), n.name.clone())).or_insert(0) += 1;
                    }
                }
            }
        }
        out
    }
}

/// Why a text is not a plan: the sentence, and where (1-based line and column) when known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    pub message: String,
    pub at: Option<(usize, usize)>,
}

impl From<serde_json::Error> for Unreadable {
    fn from(e: serde_json::Error) -> Self {
        Unreadable { message: e.to_string(), at: Some((e.line(), e.column())).filter(|(l, _)| *l > 0) }
    }
}

/// Reads a `plan.json`. Unknown fields are ignored, missing ones default; only text that is not
/// JSON of the plan's shape is refused, with the reason.
pub fn parse(text: &str) -> Result<Previous, Unreadable> {
    if text.len() > 256 * 1024 * 1024 {
        return Err(Unreadable { message: "the file is larger than 256 MiB".to_owned(), at: None });
    }
    Ok(serde_json::from_str(text)?)
}

/// A previous `plan.json`: parsed, and as a JSON value for the stability rule
/// (`pipeline::compile`), which also reads the changes section it carried from there.
#[derive(Clone, Debug)]
pub struct PreviousInput {
    pub plan: Previous,
    pub(crate) value: serde_json::Value,
}

impl PreviousInput {
    /// Parses the text of a `plan.json`; the reason when it is not a plan.
    pub fn parse(text: String) -> Result<Self, Unreadable> {
        let plan = parse(&text)?;
        let value = serde_json::from_str(&text)?;
        Ok(Self { plan, value })
    }
}

#[cfg(test)]
mod tests {
    use super::{PrevGpu, PrevMode, parse};
    use crate::catalog::layout::PlacedInstance;
    use crate::plan::GpuMode;

    #[test]
    fn reads_a_plan_with_unknown_and_missing_fields() {
        let text = r#"{"name":"x","future":1,"pools":[{"name":"a","gpu":"A100-SXM4-80GB","nodes":[
            {"name":"n1","gpus":[{"index":0,"mode":{"mode":"mig","instances":[{"profile":"3g.40gb","start":0,"extra":2}]},
              "tenants":[{"model":"m","instanceStart":0}]},{"index":1,"mode":{"mode":"quantum"}}]}]}]}"#;
        let p = parse(text).expect("parses");
        let n = &p.pools[0].nodes[0];
        assert_eq!(n.gpus.len(), 2);
        let mig =
            GpuMode::Mig { instances: vec![PlacedInstance { profile: "3g.40gb".to_owned(), start: 0 }] };
        assert_eq!(n.gpus[0].mode, PrevMode::Known(mig));
        assert_eq!(n.gpus[1].mode, PrevMode::Unknown);
        assert_eq!(p.tenants().get(&("m".to_owned(), "n1".to_owned())), Some(&1));
    }

    #[test]
    fn refuses_text_that_is_not_a_plan() {
        assert!(parse("not json").is_err());
        assert!(parse("[1,2]").is_err());
        assert!(parse("{}").is_ok());
    }

    #[test]
    fn a_gpu_mode_reads_back_as_the_plan_wrote_it() {
        let mig =
            GpuMode::Mig { instances: vec![PlacedInstance { profile: "1g.10gb".to_owned(), start: 6 }] };
        for mode in [
            GpuMode::Unused,
            GpuMode::Whole,
            GpuMode::TimeSliced { replicas: 3 },
            GpuMode::Mps { replicas: 2 },
            mig,
        ] {
            let gpu = PrevGpu { mode: PrevMode::Known(mode), ..PrevGpu::default() };
            let text = serde_json::to_string(&gpu).expect("json");
            assert_eq!(serde_json::from_str::<PrevGpu>(&text).expect("reads"), gpu, "{text}");
        }
        let unknown = PrevGpu { mode: PrevMode::Unknown, ..PrevGpu::default() };
        let text = serde_json::to_string(&unknown).expect("json");
        assert!(text.contains(r#""mode":{"mode":"unknown"}"#), "{text}");
        assert_eq!(serde_json::from_str::<PrevGpu>(&text).expect("reads").mode, PrevMode::Unknown);
        let old = serde_json::from_str::<PrevGpu>(r#"{"mode":{"mode":"timeSliced"}}"#).expect("reads");
        assert_eq!(
            old.mode,
            PrevMode::Known(GpuMode::TimeSliced { replicas: 0 }),
            "a missing field defaults"
        );
    }
}
