//! `gpuplan compile`: manifest → plan → bundle → output directory. Also the shared body of
//! `check` and `diff` ([`run_mode`]): all three compile the same way and differ only in the
//! [`Mode`] handed to [`crate::emit::emit`].

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use super::common::{load_spec, read_text, report};
use super::{Ctx, ExitStatus, Format, ManifestArgs};
use crate::emit::{self, ChangeKind, Mode, Outcome};
use crate::render::Templates;

/// The arguments of `compile`, `check` and `diff`: they compile the same way and differ only in
/// what they do with the output directory (their help is on [`super::Command`]).
#[derive(Debug, Args)]
pub struct CompileArgs {
    #[command(flatten)]
    pub input: ManifestArgs,
    /// The output directory: written by `compile`, compared with a fresh compile by `check` and `diff`.
    #[arg(long, short, value_name = "DIR")]
    pub out: PathBuf,
    /// Folder of templates that override the built-in ones, by file name.
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,
    #[command(flatten)]
    pub day2: Day2Args,
}

/// How `compile`, `check` and `diff` treat the plan committed in the output directory.
#[derive(Clone, Debug, Default, Args)]
pub struct Day2Args {
    /// Plan from scratch, ignoring the plan committed in the output directory (`plan.json`).
    ///
    /// By default that plan is today's state: layouts and replicas are kept where the manifest
    /// allows (see `changePolicy` in docs/manifest.md).
    #[arg(long)]
    pub from_scratch: bool,
}

pub(super) fn run(ctx: &Ctx, args: &CompileArgs) -> anyhow::Result<ExitStatus> {
    run_mode(ctx, args, Mode::Write, false)
}

/// Reads the built-in templates, replaced by file name with those in `dir`.
pub(super) fn load_templates(dir: Option<&Path>) -> anyhow::Result<Templates> {
    let mut templates = Templates::builtin();
    let Some(dir) = dir else { return Ok(templates) };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the templates folder `{}`", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot read the templates folder `{}`", dir.display()))?;
    entries.sort();
    for path in entries.iter().filter(|p| p.is_file()) {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        templates
            .replace(&name, read_text(path)?)
            .map_err(|e| anyhow::anyhow!("`{}`: {e}", path.display()))?;
    }
    Ok(templates)
}

/// Compiles and then writes (`compile`), compares (`check`) or diffs (`diff`) the output directory.
pub(super) fn run_mode(
    ctx: &Ctx,
    args: &CompileArgs,
    mode: Mode,
    kubernetes_only: bool,
) -> anyhow::Result<ExitStatus> {
    let out = args.out.as_path();
    let templates = load_templates(args.templates.as_deref())?;
    let Ok((sources, catalog, spec)) = load_spec(ctx, &args.input)? else {
        return Ok(ExitStatus::Problems);
    };
    let previous = if args.day2.from_scratch { None } else { read_previous(ctx, out)? };
    let compiled = match crate::day2::compile(&spec, &catalog, &templates, previous.as_ref()) {
        Ok(c) => c,
        Err(diags) => {
            report(ctx, &sources, &diags)?;
            return Ok(ExitStatus::Problems);
        }
    };
    verified(&spec, &catalog, &compiled.plan)?;
    let mut outcome = emit::emit(&compiled.bundle, out, mode)?;
    if kubernetes_only {
        outcome.changes.retain(|c| c.path.ends_with(".yaml") || c.path.ends_with(".yml"));
    }
    print_summary(ctx, mode, compiled.changes.as_ref())?;
    print_outcome(ctx, out, mode, &outcome, compiled.changes.as_ref())?;
    if mode == Mode::Write && ctx.format == Format::Human {
        let plan = &compiled.plan;
        ctx.status(&plan.quality.summary(plan.drains()))?;
    }
    Ok(match mode {
        Mode::Write => ExitStatus::Success,
        Mode::Check | Mode::Diff if outcome.is_clean() => ExitStatus::Success,
        Mode::Check | Mode::Diff => ExitStatus::Problems,
    })
}

/// Runs the verifier on a plan the planner made: a violation is gpuplan's own bug (exit 2),
/// named in the error, never a user mistake.
pub(super) fn verified(
    spec: &crate::spec::Spec,
    catalog: &crate::catalog::Catalog,
    plan: &crate::plan::Plan,
) -> anyhow::Result<()> {
    let violations = crate::verify::check(spec, catalog, plan);
    if violations.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = violations.iter().take(10).map(|v| format!("  {v}")).collect();
    let more = violations.len().saturating_sub(10);
    anyhow::bail!(
        "internal: the plan breaks {} of gpuplan's own rules (a planner bug; please report it with the manifest):\n{}{}",
        violations.len(),
        list.join("\n"),
        if more > 0 { format!("\n  and {more} more") } else { String::new() }
    )
}

fn verb(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Added => "added",
        ChangeKind::Modified => "modified",
        ChangeKind::Removed => "removed",
    }
}

/// Reads the committed `plan.json` of the output directory, if there is one. A file that is not
/// a plan is reported as a warning and the compile plans from scratch.
fn read_previous(ctx: &Ctx, out: &Path) -> anyhow::Result<Option<crate::day2::PreviousInput>> {
    let path = out.join(crate::render::paths::PLAN_JSON);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read `{}`", path.display())),
    };
    if !meta.is_file() {
        ctx.status(&format!("warning: `{}` is not a regular file; planning from scratch", path.display()))?;
        return Ok(None);
    }
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read `{}`", path.display()))?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    match crate::day2::PreviousInput::parse(text) {
        Ok(p) => Ok(Some(p)),
        Err(why) => {
            ctx.status(&format!(
                "warning: `{}` is not a gpuplan plan ({why}); planning from scratch (use `--from-scratch` to say so)",
                path.display()
            ))?;
            Ok(None)
        }
    }
}

/// Day 2: the semantic summary (what is added, changed, moved, drained) before the files.
fn print_summary(
    ctx: &Ctx,
    mode: Mode,
    changes: Option<&crate::plan::rollout::Changes>,
) -> anyhow::Result<()> {
    if ctx.format == Format::Json || mode == Mode::Check {
        return Ok(());
    }
    let Some(ch) = changes else { return Ok(()) };
    let text = if ch.is_empty() {
        "Plan changes against the committed plan: none\n".to_owned()
    } else {
        format!("Plan changes against the committed plan:\n{}", crate::plan::rollout::summary_lines(ch))
    };
    if mode == Mode::Diff {
        ctx.out(&text)?;
    } else {
        ctx.status(&text)?;
    }
    Ok(())
}

fn print_outcome(
    ctx: &Ctx,
    out: &Path,
    mode: Mode,
    outcome: &Outcome,
    plan_changes: Option<&crate::plan::rollout::Changes>,
) -> anyhow::Result<()> {
    if ctx.format == Format::Json {
        let changes: Vec<serde_json::Value> = outcome
            .changes
            .iter()
            .map(|c| {
                let mut v = serde_json::json!({ "path": c.path, "kind": c.kind });
                if mode == Mode::Diff {
                    v["diff"] = serde_json::Value::String(emit::change_diff(c));
                }
                v
            })
            .collect();
        let mut doc = serde_json::json!({
            "directory": out.display().to_string(),
            "clean": outcome.is_clean(),
            "changes": changes,
        });
        if mode == Mode::Diff {
            // The semantic diff (null on a first compile): fit for a pull-request comment.
            doc["summary"] = serde_json::to_value(plan_changes)?;
        }
        return ctx.json(&doc);
    }
    match mode {
        Mode::Diff => {
            if !outcome.is_clean() {
                ctx.out(&emit::unified_diff(outcome))?;
            }
        }
        Mode::Write | Mode::Check => {
            let mut lines = String::new();
            for c in &outcome.changes {
                lines.push_str(&format!("  {:<8} {}\n", verb(c.kind), c.path));
            }
            let summary = match (mode, outcome.is_clean()) {
                (Mode::Write, true) => format!("`{}` is up to date", out.display()),
                (Mode::Write, false) => {
                    format!("wrote {} change(s) to `{}`:\n{lines}", outcome.changes.len(), out.display())
                }
                (_, true) => format!("`{}` is up to date", out.display()),
                (_, false) => format!(
                    "error: `{}` is stale: {} file(s) differ from a fresh compile:\n{lines}run `gpuplan compile` and commit the result",
                    out.display(),
                    outcome.changes.len()
                ),
            };
            if mode == Mode::Check && !outcome.is_clean() {
                ctx.err(&summary)?;
            } else {
                ctx.status(&summary)?;
            }
        }
    }
    Ok(())
}
