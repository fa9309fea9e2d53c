//! The pipeline: the stages chained in one place, one entry per question.
//!
//! - [`check_manifest`]: manifest text → spec (`validate`, and the first step of the others);
//! - [`plan`]: spec → plan, verified (`explain`);
//! - [`compile`]: spec → plan, verified → bundle, over the previous plan when there is one
//!   (`compile`, `check`, `diff`);
//! - [`bundle_from_manifest`]: the first and the last together (library users, tests).
//!
//! In: a manifest's name and text, the catalog, the templates, and a reader for the measurement
//! files the manifest references (the caller's IO: the command line reads them relative to the
//! manifest, tests from fixtures). Out: the spec, plan and bundle with the warnings found on the
//! way, or a [`Failure`]: the diagnostics of the stage that refused the input (with the
//! [`Sources`] they point into), or the verifier's violations when the planner broke its own
//! rules. The command layer only reads files and hands the bundle to [`crate::emit`].
//!
//! Day 2 ([`compile`] with a previous plan): the chain is re-plan → changes (the rollout waves
//! keep the spec's PodDisruptionBudgets) → render with the changes section (the report and
//! `plan.json` show it, and the synced part keeps carried replicas on the nodes drained after
//! the first wave). Stability rule: when the new plan equals the previous one in everything but its changes section, the previous changes section is kept, so
//! that recompiling an unchanged manifest over its own output writes the same bytes.

use crate::catalog::Catalog;
use crate::diagnostics::{Diagnostic, Diagnostics, Sources, codes};
use crate::manifest::Manifest;
use crate::plan::Plan;
use crate::plan::day2::changes::Changes;
use crate::plan::day2::previous::PreviousInput;
use crate::plan::day2::replan;
use crate::plan::day2::rollout::{self, Facts};
use crate::plan::day2::transition::{self, Observed, Report};
use crate::render::{Bundle, Templates, paths, render};
use crate::spec::Spec;
use crate::verify::Violation;

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

/// Why a compile produced no plan.
#[derive(Debug)]
pub enum Failure {
    /// The input is refused: the diagnostics say why (exit 1).
    Refused(Diagnostics),
    /// The planner's plan breaks rules the verifier checks: gpuplan's own bug, never a user
    /// mistake (exit 2).
    Unverified(Vec<Violation>),
}

impl From<Diagnostics> for Failure {
    fn from(d: Diagnostics) -> Self {
        Failure::Refused(d)
    }
}

impl Failure {
    /// The sentence for an unverified plan: the first ten violations and how many more.
    pub fn internal_message(violations: &[Violation]) -> String {
        let list: Vec<String> = violations.iter().take(10).map(|v| format!("  {v}")).collect();
        let more = violations.len().saturating_sub(10);
        format!(
            "internal: the plan breaks {} of gpuplan's own rules (a planner bug; please report it with the manifest):\n{}{}",
            violations.len(),
            list.join("\n"),
            if more > 0 { format!("\n  and {more} more") } else { String::new() }
        )
    }
}

/// Runs the verifier on a plan the planner made ([`crate::verify::check`]).
fn verified(spec: &Spec, catalog: &Catalog, plan: Plan) -> Result<Plan, Failure> {
    let violations = crate::verify::check(spec, catalog, &plan);
    if violations.is_empty() { Ok(plan) } else { Err(Failure::Unverified(violations)) }
}

/// Spec → plan, verified (`gpuplan explain`).
pub fn plan(spec: &Spec, catalog: &Catalog) -> Result<Plan, Failure> {
    let plan = crate::plan::plan(spec, catalog)?;
    verified(spec, catalog, plan)
}

/// A compile: the plan, the bundle and, over a previous plan, the changes.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub plan: Plan,
    pub bundle: Bundle,
    /// The changes against the previous plan (`None` without one).
    pub changes: Option<Changes>,
    /// What the cluster confirmed and what advanced (empty without a previous plan).
    pub advanced: Report,
}

/// What a compile starts from besides the manifest: the committed plan, and the cluster.
#[derive(Clone, Copy, Debug, Default)]
pub struct Over<'a> {
    /// The committed `plan.json` (`None`: a first compile).
    pub previous: Option<&'a PreviousInput>,
    /// `--from-scratch`: any plan may be chosen; running nodes that change are still held.
    pub from_scratch: bool,
    /// `--observed`: what the cluster reports, the only way a held node advances.
    pub observed: Option<&'a Observed>,
}

/// Spec → plan (verified) → bundle, over the previous plan when given (re-plan, changes, then
/// render with the changes section).
pub fn compile(
    spec: &Spec,
    catalog: &Catalog,
    templates: &Templates,
    over: Over<'_>,
) -> Result<Compiled, Failure> {
    let Some(prev) = over.previous else {
        let mut plan = plan(spec, catalog)?;
        transition::adopt(&mut plan, spec);
        let mut bundle = render(spec, catalog, &plan, templates)?;
        stage_first_wave(&mut bundle, &plan, None);
        return Ok(Compiled { plan, bundle, changes: None, advanced: Report::default() });
    };
    let options = replan::Options { from_scratch: over.from_scratch, observed: over.observed };
    let r = replan::replan(spec, catalog, &prev.plan, options)?;
    let mut plan = verified(spec, catalog, r.plan)?;
    let mut notes = r.notes;
    let gated = gated(&plan);
    if !gated.is_empty() {
        notes.push(format!(
            "{} re-laid out on idle GPUs: the workloads stay off the new instances until `compile --observed` sees `nvidia.com/mig.config.state=success`, and no drain wave is staged until then (the waves count on the new capacity)",
            gated.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    let facts = Facts {
        notes,
        repartition_lower_bound: r.repartition_lower_bound,
        from_scratch_gpus: r.from_scratch_gpus,
        from_scratch_cost_per_hour: r.from_scratch_cost_per_hour,
        advice: r.advice,
    };
    let fresh = rollout::changes(&prev.plan, &plan, &rollout::budgets(spec, &plan), &facts);
    let strip = |mut v: serde_json::Value| {
        if let Some(o) = v.as_object_mut() {
            o.remove("changes");
        }
        v
    };
    let unchanged = serde_json::to_value(&plan).ok().map(strip) == Some(strip(prev.value.clone()));
    plan.changes = if unchanged {
        prev.value.get("changes").and_then(|c| serde_json::from_value(c.clone()).ok())
    } else if fresh.is_empty() {
        None
    } else {
        Some(fresh.clone())
    };
    // Rendered once the changes section is known: the report (`PLAN.md`, pictures) and
    // `plan.json` show it, and the synced part keeps the carried replicas of the nodes drained
    // after the first wave (the rollout's waves read the spec's budgets, not the bundle).
    let mut bundle = render(spec, catalog, &plan, templates)?;
    stage_first_wave(&mut bundle, &plan, plan.changes.as_ref());
    Ok(Compiled { plan, bundle, changes: Some(fresh), advanced: r.advanced })
}

/// `nodes/drain/kustomization.yaml` lists the held nodes of the first wave only (every held
/// node has its own file), so that syncing it — Argo CD's drain Application, Flux's suspended
/// drain Kustomization, which cannot apply part of itself — applies exactly that wave. The
/// next wave is staged by the compile that sees this one confirmed.
///
/// While a node re-laid out on idle GPUs waits for the MIG manager ([`gated`]), no wave is
/// staged: the waves keep the budgets by counting on the replicas of nodes that are not
/// drained, and a gated node's new replicas do not run yet.
fn stage_first_wave(bundle: &mut Bundle, plan: &Plan, changes: Option<&Changes>) {
    let held: Vec<&str> = plan.nodes().filter(|n| n.must_drain).map(|n| n.name.as_str()).collect();
    // A held node missing from the cluster is in no wave: never listed (it would fail the sync).
    let missing = changes.map(|c| c.nodes_missing.as_slice()).unwrap_or_default();
    let first: Vec<&str> = match changes.and_then(|c| c.waves.first()) {
        _ if !gated(plan).is_empty() => Vec::new(),
        Some(w) => held.iter().copied().filter(|n| w.nodes.iter().any(|x| x == n)).collect(),
        None => held.into_iter().filter(|n| !missing.iter().any(|m| m == n)).collect(),
    };
    let files: Vec<String> = first.iter().map(|n| paths::node_drain(n)).collect();
    if bundle.files.contains_key(paths::NODE_DRAIN_KUSTOMIZATION) {
        let listed: Vec<&str> =
            files.iter().map(String::as_str).filter(|f| bundle.files.contains_key(*f)).collect();
        if let Ok(text) = crate::render::gitops::kustomization("nodes/drain", &listed) {
            bundle.files.insert(paths::NODE_DRAIN_KUSTOMIZATION.to_owned(), text);
        }
    }
}

/// Nodes in transition without a drain: re-laid out on idle GPUs, their labels synced, their
/// new instances not yet confirmed by the cluster (`applying` or `failed`).
fn gated(plan: &Plan) -> Vec<&str> {
    plan.nodes().filter(|n| n.transition.is_some() && !n.must_drain).map(|n| n.name.as_str()).collect()
}

/// A compiled manifest (the tests' and library users' one call).
#[derive(Debug)]
pub struct CompiledManifest {
    pub spec: Spec,
    pub plan: Plan,
    pub bundle: Bundle,
    /// Warnings of every stage (never errors).
    pub warnings: Diagnostics,
}

/// Manifest text → spec → plan (verified) → bundle: [`check_manifest`], then [`compile`]
/// without a previous plan.
pub fn bundle_from_manifest(
    sources: &mut Sources,
    name: &str,
    text: &str,
    catalog: &Catalog,
    templates: &Templates,
    read: &mut ReadMeasurements<'_>,
) -> Result<CompiledManifest, Failure> {
    let Checked { spec, warnings } = check_manifest(sources, name, text, catalog, read)?;
    let Compiled { plan, bundle, .. } = compile(&spec, catalog, templates, Over::default())?;
    Ok(CompiledManifest { spec, plan, bundle, warnings })
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
