//! The stages chained in one place: manifest text → spec → plan → bundle.
//!
//! In: a manifest's name and text, the catalog, the templates, and a reader for the measurement
//! files the manifest references (the caller's IO: the command line reads them relative to the
//! manifest, tests from fixtures). Out: the spec, plan and bundle with the warnings found on the
//! way, or the diagnostics of the stage that refused the input, with the [`Sources`] they point
//! into. `gpuplan compile`, `check`, `diff`, `validate` and the tests all go through here; the
//! command layer only reads files and hands the bundle to [`crate::emit`].
//!
//! Day 2 ([`plan_and_render_over`]): with the previous `plan.json`, the chain is re-plan →
//! render → changes (the rollout waves read the PodDisruptionBudgets of the rendered bundle) →
//! the report and `plan.json` rendered again when the changes section is new (no other file
//! shows it). Stability rule: when the new plan equals the
//! previous one in everything but its changes section, the previous changes section is kept, so
//! that recompiling an unchanged manifest over its own output writes the same bytes.

use crate::catalog::Catalog;
use crate::diagnostics::{Diagnostic, Diagnostics, Sources, codes};
use crate::manifest::Manifest;
use crate::plan::Plan;
use crate::plan::previous::PreviousInput;
use crate::plan::replan;
use crate::plan::rollout::{self, Changes, Facts};
use crate::spec::Spec;

use super::{Bundle, Templates};

/// Reads a measurements file named in the manifest (`demand.measurements`): the name to show
/// in diagnostics and the text, or why it cannot be read (`` `path`: reason ``).
pub type ReadMeasurements<'a> = dyn FnMut(&str) -> Result<(String, String), String> + 'a;

/// A reader for manifests that reference no measurement files (every reference is reported as
/// unreadable).
pub fn no_measurement_files(reference: &str) -> Result<(String, String), String> {
    Err(format!("`{reference}`: no measurement files are read here"))
}

/// A manifest checked into a spec.
#[derive(Debug)]
pub struct Checked {
    pub spec: Spec,
    /// Warnings of the manifest and spec stages (never errors).
    pub warnings: Diagnostics,
}

/// A compiled manifest.
#[derive(Debug)]
pub struct Compiled {
    pub spec: Spec,
    pub plan: Plan,
    pub bundle: Bundle,
    /// Warnings of every stage (never errors).
    pub warnings: Diagnostics,
}

/// Manifest text → spec. Unknown fields and wrong types do not hide semantic problems: the
/// parser recovers, and its problems are reported together with validation's, in source order.
/// `sources` receives every text read, so that the caller can render the diagnostics.
pub fn check_manifest(
    sources: &mut Sources,
    name: &str,
    text: &str,
    catalog: &Catalog,
    read: &mut ReadMeasurements<'_>,
) -> Result<Checked, Diagnostics> {
    let (manifest, mut problems) = crate::manifest::parse_recovering(sources, name, text);
    let Some(mut manifest) = manifest else { return Err(problems) };
    problems.extend(load_measurements(&mut manifest, sources, read));
    match crate::spec::validate(&manifest, catalog) {
        Ok((spec, warnings)) if !problems.has_errors() => Ok(Checked { spec, warnings }),
        Ok((_, diags)) | Err(diags) => {
            problems.extend(diags);
            // Advice about a plan (`memory-headroom-margin`) is noise next to errors.
            problems.0.retain(|d| d.code != codes::MEMORY_HEADROOM_MARGIN);
            problems.sort();
            Err(problems)
        }
    }
}

/// Spec → plan → bundle.
pub fn plan_and_render(
    spec: &Spec,
    catalog: &Catalog,
    templates: &Templates,
) -> Result<(Plan, Bundle), Diagnostics> {
    let plan = crate::plan::plan(spec, catalog)?;
    let bundle = super::render(spec, catalog, &plan, templates)?;
    Ok((plan, bundle))
}

/// A day-2 compile.
#[derive(Clone, Debug)]
pub struct Day2Compiled {
    pub plan: Plan,
    pub bundle: Bundle,
    /// The changes against the previous plan (`None` without one).
    pub changes: Option<Changes>,
}

/// Spec → plan → bundle over the previous plan when given (re-plan, render, changes, the report
/// and `plan.json` again when the changes section is new), else [`plan_and_render`].
pub fn plan_and_render_over(
    spec: &Spec,
    catalog: &Catalog,
    templates: &Templates,
    previous: Option<&PreviousInput>,
) -> Result<Day2Compiled, Diagnostics> {
    let Some(prev) = previous else {
        let (plan, bundle) = plan_and_render(spec, catalog, templates)?;
        return Ok(Day2Compiled { plan, bundle, changes: None });
    };
    let r = replan::replan(spec, catalog, &prev.plan)?;
    let mut plan = r.plan;
    let bundle = super::render(spec, catalog, &plan, templates)?;
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
    let mut bundle = bundle;
    if plan.changes.is_some() {
        // Only the report (`PLAN.md`, pictures) and `plan.json` show the changes section.
        let one = |d: Diagnostic| {
            let mut all = Diagnostics::new();
            all.push(d);
            all
        };
        bundle.files.extend(super::report::render(spec, catalog, &plan).map_err(one)?);
        bundle.files.insert(super::paths::PLAN_JSON.to_owned(), super::plan_json(&plan).map_err(one)?);
    }
    Ok(Day2Compiled { plan, bundle, changes: Some(fresh) })
}

/// Manifest text → spec → plan → bundle: [`check_manifest`], then [`plan_and_render`].
pub fn bundle_from_manifest(
    sources: &mut Sources,
    name: &str,
    text: &str,
    catalog: &Catalog,
    templates: &Templates,
    read: &mut ReadMeasurements<'_>,
) -> Result<Compiled, Diagnostics> {
    let Checked { spec, warnings } = check_manifest(sources, name, text, catalog, read)?;
    let (plan, bundle) = plan_and_render(&spec, catalog, templates)?;
    Ok(Compiled { spec, plan, bundle, warnings })
}

/// Reads every measurements file the manifest references into `manifest.measurements`.
fn load_measurements(
    manifest: &mut Manifest,
    sources: &mut Sources,
    read: &mut ReadMeasurements<'_>,
) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let references: Vec<_> =
        manifest.models.iter().filter_map(|m| m.demand.as_ref()?.measurements.clone()).collect();
    for reference in references {
        if manifest.measurements.contains_key(&reference.value) {
            continue;
        }
        let points = match read(&reference.value) {
            Ok((file, text)) => match crate::measurements::parse_csv(sources, &file, &text) {
                Ok(points) => points,
                Err(d) => {
                    diags.extend(d);
                    Vec::new()
                }
            },
            Err(err) => {
                diags.push(
                    Diagnostic::error(
                        codes::MISSING_MEASUREMENTS,
                        format!("cannot read measurements file {err}"),
                    )
                    .at(reference.span.clone(), "referenced here")
                    .with_help("the path is relative to the manifest's folder"),
                );
                Vec::new()
            }
        };
        manifest.measurements.insert(reference.value.clone(), points);
    }
    diags
}
