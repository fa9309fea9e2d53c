//! Day 2 as one library call: re-plan from the committed plan, render, and attach the changes.
//!
//! In: a checked spec, the catalog, the templates and, when the output directory holds one, the
//! previous `plan.json` ([`PreviousInput`]). Out: the plan, its bundle and the changes against
//! the previous plan ([`crate::plan::rollout::Changes`]) — the rollout waves are computed from
//! the PodDisruptionBudgets of the rendered bundle, so the bundle is rendered twice when the
//! changes section is new. No IO: the command layer reads `plan.json` and hands its text here.
//!
//! Stability rule: when the new plan equals the previous one in everything but its changes
//! section, the previous changes section is kept, so that recompiling an unchanged manifest over
//! its own output writes the same bytes.

use crate::catalog::Catalog;
use crate::diagnostics::Diagnostics;
use crate::plan::previous::{self, Previous};
use crate::plan::rollout::{self, Changes, Facts};
use crate::plan::{Plan, replan};
use crate::render::{Bundle, Templates};
use crate::spec::Spec;

/// A previous `plan.json`: parsed, and as a JSON value for the stability rule.
#[derive(Clone, Debug)]
pub struct PreviousInput {
    pub plan: Previous,
    value: serde_json::Value,
}

impl PreviousInput {
    /// Parses the text of a `plan.json`; the reason when it is not a plan.
    pub fn parse(text: String) -> Result<Self, String> {
        let plan = previous::parse(&text)?;
        let value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        Ok(Self { plan, value })
    }
}

/// A day-2 compile.
#[derive(Clone, Debug)]
pub struct Day2Compiled {
    pub plan: Plan,
    pub bundle: Bundle,
    /// The changes against the previous plan (`None` without one).
    pub changes: Option<Changes>,
}

/// Plans (from `previous` when given), renders, and attaches the changes section.
pub fn compile(
    spec: &Spec,
    catalog: &Catalog,
    templates: &Templates,
    previous: Option<&PreviousInput>,
) -> Result<Day2Compiled, Diagnostics> {
    let Some(prev) = previous else {
        let plan = crate::plan::plan(spec, catalog)?;
        let bundle = crate::render::render(spec, catalog, &plan, templates)?;
        return Ok(Day2Compiled { plan, bundle, changes: None });
    };
    let r = replan::replan(spec, catalog, &prev.plan)?;
    let mut plan = r.plan;
    let bundle = crate::render::render(spec, catalog, &plan, templates)?;
    let facts = Facts {
        notes: r.notes,
        repartition_lower_bound: r.repartition_lower_bound,
        from_scratch_gpus: r.from_scratch_gpus,
        from_scratch_cost_per_hour: r.from_scratch_cost_per_hour,
    };
    let fresh = rollout::changes(&prev.plan, &plan, &rollout::budgets(&bundle.files), &facts);
    let strip = |mut v: serde_json::Value| {
        if let Some(o) = v.as_object_mut() {
            o.remove("changes");
        }
        v
    };
    let unchanged = serde_json::to_value(&plan).ok().map(strip) == Some(strip(prev.value.clone()));
    plan.changes = if unchanged {
        prev.plan.changes.clone()
    } else if fresh.is_empty() {
        None
    } else {
        Some(fresh.clone())
    };
    let bundle =
        if plan.changes.is_some() { crate::render::render(spec, catalog, &plan, templates)? } else { bundle };
    Ok(Day2Compiled { plan, bundle, changes: Some(fresh) })
}
