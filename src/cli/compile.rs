//! `gpuplan compile`: manifest → plan → bundle → output directory. Also the shared body of
//! `check` and `diff` ([`run_mode`]): all three compile the same way and differ only in the
//! [`Mode`] handed to [`crate::emit::emit`].

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use super::common::{load_spec, read_text, report};
use super::{Ctx, ExitStatus, Format, ManifestArgs};
use crate::diagnostics::{Diagnostic, Diagnostics, Severity, Sources, Span, codes};
use crate::emit::{self, ChangeKind, Mode, Outcome};
use crate::pipeline::{Failure, Over};
use crate::plan::day2::changes::Changes;
use crate::plan::day2::previous::PreviousInput;
use crate::plan::day2::rollout::{advice_line, summary_lines};
use crate::plan::day2::transition::{Observed, Report};
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
    /// Plan from scratch: any layout may be chosen, but every running node of the committed
    /// plan (`plan.json`) whose layout or sharing changes is still held back for its drain.
    ///
    /// By default the committed plan is today's state: layouts and replicas are kept where the
    /// manifest allows (see `changePolicy` in docs/manifest.md).
    #[arg(long)]
    pub from_scratch: bool,
    /// What the cluster reports, as `kubectl get nodes -o json` writes it: a held-back node
    /// whose `nvidia.com/mig.config` and `nvidia.com/device-plugin.config` labels equal its
    /// target (and, where MIG is involved, `nvidia.com/mig.config.state=success`) is released.
    ///
    /// Without it nothing advances: a compile over its own output changes nothing.
    #[arg(long, value_name = "FILE")]
    pub observed: Option<PathBuf>,
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
    super::diff::warn_unfit_templates(ctx, &templates)?;
    let Ok((sources, catalog, spec)) = load_spec(ctx, &args.input)? else {
        return Ok(ExitStatus::Problems);
    };
    let mut sources = sources;
    let previous = match read_previous(&mut sources, out, &spec.name)? {
        Ok(p) => p,
        Err(d) => return refused(ctx, &sources, Failure::Refused(d)),
    };
    let observed = match &args.day2.observed {
        None => None,
        Some(path) => match read_observed(&mut sources, path, previous.as_ref())? {
            Ok(o) => Some(o),
            Err(d) => return refused(ctx, &sources, Failure::Refused(d)),
        },
    };
    let over = Over {
        previous: previous.as_ref(),
        from_scratch: args.day2.from_scratch,
        observed: observed.as_ref(),
    };
    let compiled = match crate::pipeline::compile(&spec, &catalog, &templates, over) {
        Ok(c) => c,
        Err(failure) => return refused(ctx, &sources, failure),
    };
    report_advance(ctx, &sources, mode, &compiled.advanced)?;
    let mut outcome = emit::emit(&compiled.bundle, out, mode)?;
    let objects = emit::summary::summarise(&outcome, spec.cluster.currency.as_deref());
    if kubernetes_only {
        outcome.changes.retain(|c| c.path.ends_with(".yaml") || c.path.ends_with(".yml"));
    }
    print_summary(ctx, mode, compiled.changes.as_ref())?;
    super::diff::print_objects(ctx, mode, &objects)?;
    print_outcome(ctx, out, mode, &outcome, (compiled.changes.as_ref(), &objects, &compiled.advanced))?;
    if mode == Mode::Write && ctx.format == Format::Human {
        let plan = &compiled.plan;
        ctx.status(&plan.quality.summary(plan.drains()))?;
    }
    Ok(match mode {
        Mode::Write => ExitStatus::Success,
        Mode::Check | Mode::Diff if outcome.is_clean() && compiled.advanced.confirmed.is_empty() => {
            ExitStatus::Success
        }
        Mode::Check | Mode::Diff => ExitStatus::Problems,
    })
}

/// A pipeline that produced no plan: diagnostics are the user's (exit 1); a plan the verifier
/// refuses is gpuplan's own bug (exit 2), named in the error.
pub(super) fn refused(ctx: &Ctx, sources: &Sources, failure: Failure) -> anyhow::Result<ExitStatus> {
    match failure {
        Failure::Refused(diags) => {
            report(ctx, sources, &diags)?;
            Ok(ExitStatus::Problems)
        }
        Failure::Unverified(violations) => anyhow::bail!(Failure::internal_message(&violations)),
    }
}

fn verb(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Added => "added",
        ChangeKind::Modified => "modified",
        ChangeKind::Removed => "removed",
    }
}

/// Reads the committed `plan.json` of the output directory, if there is one. A file that is not
/// a plan of this manifest (a merge conflict, another manifest's plan, not a regular file) is
/// refused with `previous-plan-unreadable`: nothing is written.
pub(super) fn read_previous(
    sources: &mut Sources,
    out: &Path,
    spec_name: &str,
) -> anyhow::Result<Result<Option<PreviousInput>, Diagnostics>> {
    let path = out.join(crate::render::paths::PLAN_JSON);
    let shown = path.display().to_string();
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Ok(None)),
        Err(e) => return Err(e).with_context(|| format!("cannot read `{shown}`")),
    };
    let way_out = format!(
        "`{shown}` is today's state: every held-back drain and every config a node carries is in it. Restore it from git (after a merge conflict, take one side whole: `git checkout --theirs -- {shown}`, then compile again), or, only if no node runs what it describes, delete it and compile again"
    );
    if !meta.is_file() {
        let d =
            Diagnostic::error(codes::PREVIOUS_PLAN_UNREADABLE, format!("`{shown}` is not a regular file"))
                .with_help(way_out);
        return Ok(Err(Diagnostics(vec![d])));
    }
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read `{shown}`"))?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let refuse = |sources: &mut Sources, why: String, at: Option<(usize, usize)>, text: &str| {
        let mut d = Diagnostic::error(
            codes::PREVIOUS_PLAN_UNREADABLE,
            format!("`{shown}` is not a gpuplan plan of this manifest: {why}"),
        );
        if let Some((line, column)) = at {
            let file = sources.add(shown.clone(), text.to_owned());
            let at = offset(text, line, column);
            d = d.at(Span::new(file, at..(at + 1).min(text.len()).max(at)), "here");
        }
        Diagnostics(vec![d.with_help(way_out.clone())])
    };
    if let Some(line) = text.lines().position(|l| l.starts_with("<<<<<<<") || l.starts_with(">>>>>>>")) {
        let why = "it has merge-conflict markers".to_owned();
        return Ok(Err(refuse(sources, why, Some((line + 1, 1)), &text)));
    }
    match PreviousInput::parse(text.clone()) {
        Ok(p) if !p.plan.name.is_empty() && p.plan.name != spec_name => {
            let why = format!("it is the plan of `{}`, and this manifest is `{spec_name}`", p.plan.name);
            Ok(Err(refuse(sources, why, None, &text)))
        }
        Ok(p) => Ok(Ok(Some(p))),
        Err(why) => Ok(Err(refuse(sources, why.message, why.at, &text))),
    }
}

/// The byte offset of a 1-based line and column (clamped to the text).
fn offset(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text.split_inclusive('\n').take(line.saturating_sub(1)).map(str::len).sum();
    (start + column.saturating_sub(1)).min(text.len())
}

/// Reads `--observed`: `kubectl get nodes -o json` of this cluster. A file that names none of
/// the committed plan's nodes is refused as foreign (`observed-nodes-unreadable`).
fn read_observed(
    sources: &mut Sources,
    path: &Path,
    previous: Option<&PreviousInput>,
) -> anyhow::Result<Result<Observed, Diagnostics>> {
    let text = read_text(path)?;
    let shown = path.display().to_string();
    let help = "give the output of `kubectl get nodes -o json` for the cluster this bundle is synced to, taken after the drain";
    let observed = match crate::day2::observed(&text) {
        Ok(o) => o,
        Err(e) => {
            let mut d =
                Diagnostic::error(codes::OBSERVED_NODES_UNREADABLE, format!("`{shown}`: {}", e.message));
            if let Some((line, column)) = e.at {
                let at = offset(&text, line, column);
                let file = sources.add(shown.clone(), text.clone());
                d = d.at(Span::new(file, at..(at + 1).min(text.len()).max(at)), "here");
            }
            return Ok(Err(Diagnostics(vec![d.with_help(help)])));
        }
    };
    let named: Vec<&str> = previous
        .map(|p| {
            p.plan
                .pools
                .iter()
                .filter(|pool| !pool.autoscaled)
                .flat_map(|pool| &pool.nodes)
                .map(|n| n.name.as_str())
                .collect()
        })
        .unwrap_or_default();
    if !named.is_empty() && !named.iter().any(|n| observed.nodes.contains_key(*n)) {
        let d = Diagnostic::error(
            codes::OBSERVED_NODES_UNREADABLE,
            format!(
                "`{shown}` names none of the {} node(s) of the committed plan: it is another cluster's file",
                named.len()
            ),
        )
        .with_help(help);
        return Ok(Err(Diagnostics(vec![d])));
    }
    Ok(Ok(observed))
}

/// What the cluster confirmed: released nodes ("ready to advance"), failed MIG reconfigurations
/// (loudly, as warnings), cancelled holds and what the observation did not explain.
fn report_advance(ctx: &Ctx, sources: &Sources, mode: Mode, r: &Report) -> anyhow::Result<()> {
    let mut diags = Diagnostics::new();
    for n in &r.failed {
        diags.push(
            Diagnostic::new(
                Severity::Warning,
                codes::MIG_CONFIG_FAILED,
                format!("node `{n}` reports `nvidia.com/mig.config.state=failed`: the MIG manager could not apply its new layout; it stays held"),
            )
            .with_help("read the MIG manager's log on that node (`kubectl logs -n gpu-operator -l app=nvidia-mig-manager`), fix the cause, and relabel or reboot the node; the next `--observed` compile sees the outcome"),
        );
    }
    report(ctx, sources, &diags)?;
    if ctx.format == Format::Json {
        return Ok(());
    }
    let list = |v: &[String]| v.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    if !r.confirmed.is_empty() {
        let text = match mode {
            Mode::Check | Mode::Diff => format!(
                "ready to advance: {} (the cluster confirmed the new labels); run `gpuplan compile --observed` and commit the result",
                list(&r.confirmed)
            ),
            Mode::Write => format!("released (the cluster confirmed the new labels): {}", list(&r.confirmed)),
        };
        ctx.err(&text)?;
    }
    if !r.cancelled.is_empty() {
        ctx.status(&format!(
            "held-back change cancelled (the manifest is back to what the node runs): {}",
            list(&r.cancelled)
        ))?;
    }
    for note in &r.notes {
        ctx.status(&format!("note: {note}"))?;
    }
    Ok(())
}

/// Day 2: the semantic summary (what is added, changed, moved, drained) before the files.
fn print_summary(ctx: &Ctx, mode: Mode, changes: Option<&Changes>) -> anyhow::Result<()> {
    if ctx.format == Format::Json || mode == Mode::Check {
        return Ok(());
    }
    let Some(ch) = changes else { return Ok(()) };
    let text = if ch.is_empty() {
        // The way down from the ratchet is worth saying also when nothing changes.
        let advice = ch.advice.as_ref().map_or_else(String::new, |a| advice_line(a, ch));
        format!("Plan changes against the committed plan: none\n{advice}")
    } else {
        format!("Plan changes against the committed plan:\n{}", summary_lines(ch))
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
    (plan_changes, objects, advanced): (Option<&Changes>, &emit::summary::ObjectSummary, &Report),
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
            // The semantic diff, fit for a pull-request comment (docs/ci.md).
            doc["summary"] = super::diff::summary_json(serde_json::to_value(plan_changes)?, objects)?;
        }
        // Held nodes the cluster confirmed (`--observed`): released by `compile`.
        doc["readyToAdvance"] = serde_json::to_value(&advanced.confirmed)?;
        doc["migConfigFailed"] = serde_json::to_value(&advanced.failed)?;
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
