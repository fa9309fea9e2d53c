//! `gpuplan diff`: print what `compile` would change in the output directory. Also the parts of
//! the change summary that `compile` prints too: the object-level summary
//! ([`crate::emit::summary`]) and the warning for user templates that no longer fit their view.

use super::compile::{CompileArgs, run_mode};
use super::{Ctx, ExitStatus, Format};
use crate::emit::Mode;
use crate::emit::summary::{self, ObjectSummary};
use crate::render::Templates;

/// The arguments of `diff`: those of `compile`, and how much of the file diffs to print.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub compile: CompileArgs,
    /// Limit the file diffs to the YAML that Kubernetes reads (no `PLAN.md`, `plan.json`, SVG).
    #[arg(long)]
    pub kubernetes_only: bool,
}

/// A summary of the plan's changes (models added, removed and moved, nodes re-partitioned, GPUs
/// and cost before and after, against the plan committed in the directory), then the objects a
/// sync adds, changes and destroys, by kind, with every disruption (`--format json` gives both
/// as `summary`, fit for a pull-request comment, docs/ci.md), then a unified diff.
pub(super) fn run(ctx: &Ctx, args: &DiffArgs) -> anyhow::Result<ExitStatus> {
    run_mode(ctx, &args.compile, Mode::Diff, args.kubernetes_only)
}

/// Prints the object-level summary: on stdout for `diff`, on stderr for `compile` (not for
/// `check`, whose stderr names the stale files, nor in JSON, where it is in `summary.objects`).
pub(super) fn print_objects(ctx: &Ctx, mode: Mode, objects: &ObjectSummary) -> anyhow::Result<()> {
    if ctx.format == Format::Json || mode == Mode::Check {
        return Ok(());
    }
    let text = summary::human(objects);
    if mode == Mode::Diff {
        ctx.out(&text)?
    } else {
        ctx.status(&text)?
    }
    Ok(())
}

/// `summary` of `diff --format json`: the plan's changes against the committed plan (their keys
/// absent when there is none) and, always, `objects`.
pub(super) fn summary_json(
    plan_changes: serde_json::Value,
    objects: &ObjectSummary,
) -> anyhow::Result<serde_json::Value> {
    let mut value = match plan_changes {
        serde_json::Value::Object(map) => serde_json::Value::Object(map),
        _ => serde_json::json!({}),
    };
    value["objects"] = serde_json::to_value(objects)?;
    Ok(value)
}

/// Warns, on stderr, about every `--templates` template that does not read names of its view
/// that the built-in one reads (docs/bundle.md, "Templates"). Never changes the exit code.
pub(super) fn warn_unfit_templates(ctx: &Ctx, templates: &Templates) -> std::io::Result<()> {
    for (name, unused) in templates.unused_view_fields() {
        let list: Vec<String> = unused.iter().map(|n| format!("`{n}`")).collect();
        ctx.status(&format!(
            "warning: template `{name}` from --templates does not read {} of its view, which the built-in one reads; compare it with gpuplan's templates/{name}",
            list.join(", ")
        ))?;
    }
    Ok(())
}
