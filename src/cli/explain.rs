//! `gpuplan explain`: why the plan is what it is.

use std::fmt::Write as _;

use clap::Args;

use super::common::load_spec;
use super::{Ctx, ExitStatus, Format, ManifestArgs};
use crate::plan::{GpuMode, GpuPlan, ModelPlan};

/// Plan a manifest and print, per model, where it runs and why. Writes nothing.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub input: ManifestArgs,
    /// Explain only this model.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// List every alternative a model could have used, not only the closest few.
    #[arg(long)]
    pub all: bool,
    /// Explain the plan that `compile --out DIR` makes: re-planned over the plan committed in
    /// DIR (`plan.json`), as on day 2. Without it the plan is made from scratch.
    #[arg(long, short, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
}

/// Alternatives shown per model without `--all`.
const CLOSEST_ALTERNATIVES: usize = 3;

pub(super) fn run(ctx: &Ctx, args: &ExplainArgs) -> anyhow::Result<ExitStatus> {
    let Ok((sources, catalog, spec)) = load_spec(ctx, &args.input)? else {
        return Ok(ExitStatus::Problems);
    };
    let mut sources = sources;
    let previous = match &args.out {
        Some(dir) => match super::compile::read_previous(&mut sources, dir, &spec.name)? {
            Ok(p) => p,
            Err(d) => return super::compile::refused(ctx, &sources, crate::pipeline::Failure::Refused(d)),
        },
        None => None,
    };
    let planned = match &previous {
        // The day-2 compile: the plan that `compile --out DIR` writes (templates do not matter).
        Some(prev) => {
            let over = crate::pipeline::Over { previous: Some(prev), from_scratch: false, observed: None };
            crate::pipeline::compile(&spec, &catalog, &crate::render::Templates::builtin(), over)
                .map(|c| c.plan)
        }
        None => crate::pipeline::plan(&spec, &catalog),
    };
    let plan = match planned {
        Ok(plan) => plan,
        Err(failure) => return super::compile::refused(ctx, &sources, failure),
    };
    let models: Vec<_> =
        plan.models.iter().filter(|m| args.model.as_deref().is_none_or(|name| m.name == name)).collect();
    if let Some(name) = &args.model
        && models.is_empty()
    {
        ctx.err(&format!("error: no model `{name}` in the plan"))?;
        return Ok(ExitStatus::Problems);
    }
    match ctx.format {
        Format::Json => ctx.json(&models)?,
        Format::Human => {
            let mut text = String::new();
            if args.model.is_none() {
                text.push_str(&plan_header(&plan));
            }
            for model in models {
                text.push_str(&model_text(model, args.all));
            }
            ctx.out(&text)?;
        }
    }
    Ok(ExitStatus::Success)
}

/// One model: its replica groups, then the planner's reasons (the closest alternatives only,
/// unless `all`).
fn model_text(model: &ModelPlan, all: bool) -> String {
    let mut text = format!("{}\n", model.name);
    for group in &model.groups {
        let nodes = group.nodes.join(", ");
        let _ =
            writeln!(text, "  {} × {} in pool `{}` on {nodes}", group.replicas, group.resource, group.pool);
    }
    let is_alternative = |r: &String| r.starts_with(crate::plan::ALTERNATIVE_PREFIX);
    let alternatives = model.reasons.iter().filter(|r| is_alternative(r)).count();
    let mut shown = 0;
    for reason in &model.reasons {
        if is_alternative(reason) {
            shown += 1;
            if !all && shown > CLOSEST_ALTERNATIVES {
                continue;
            }
        }
        let _ = writeln!(text, "  - {reason}");
    }
    if !all && alternatives > CLOSEST_ALTERNATIVES {
        let more = alternatives - CLOSEST_ALTERNATIVES;
        let _ = writeln!(text, "  - and {more} more alternative(s) (`--all` lists them)");
    }
    text
}

/// The plan's quality and every used node's GPUs (the part of `explain` without `--model`).
fn plan_header(plan: &crate::plan::Plan) -> String {
    let mut text = String::new();
    let q = &plan.quality;
    text.push_str(&format!(
        "plan `{}`: {} GPU(s) used; lower bound {} (valid for every plan), {} (the planner's model); first-fit-decreasing {}; one GPU per replica {}\n",
        plan.name,
        q.gpus.used,
        q.gpus.lower_bound,
        q.gpus.model_lower_bound,
        q.gpus.first_fit_decreasing.map_or_else(|| "found no plan".to_owned(), |f| f.to_string()),
        q.gpus.one_per_replica
    ));
    if let (Some(cost), Some(bound)) = (q.cost.used, q.cost.lower_bound) {
        text.push_str(&format!(
            "  cost ${cost:.2}/h (minimised); lower bound ${bound:.2}/h (valid for every plan), {} (the planner's model); first-fit-decreasing {}\n",
            q.cost.model_lower_bound.map_or_else(|| "none".to_owned(), |b| format!("${b:.2}/h")),
            q.cost.first_fit_decreasing
                .map_or_else(|| "found no plan".to_owned(), |f| format!("${f:.2}/h"))
        ));
    }
    text.push_str(&format!("  {}\n", q.verdict()));
    for pool in &plan.pools {
        for node in pool.nodes.iter().filter(|n| n.gpus.iter().any(|g| g.mode != GpuMode::Unused)) {
            text.push_str(&format!(
                "  node {} (pool `{}`): mig config `{}`, device-plugin config `{}`{}\n",
                node.name,
                pool.name,
                node.mig_config,
                node.device_plugin_config,
                if node.must_drain { ", must be drained" } else { "" }
            ));
            for gpu in &node.gpus {
                text.push_str(&format!("    GPU {}: {}\n", gpu.index, describe_gpu(gpu)));
            }
        }
    }
    text
}

/// One line per GPU: its mode and who runs where.
fn describe_gpu(gpu: &GpuPlan) -> String {
    let tenants = |starts: bool| -> String {
        gpu.tenants
            .iter()
            .map(|t| match (starts, t.instance_start) {
                (true, Some(s)) => format!("{}@{s}", t.model),
                _ => t.model.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    match &gpu.mode {
        GpuMode::Unused => "unused".to_owned(),
        GpuMode::Whole => format!("whole, {}", tenants(false)),
        GpuMode::TimeSliced { replicas } => format!("time-sliced ×{replicas}, {}", tenants(false)),
        GpuMode::Mps { replicas } => {
            format!("MPS ×{replicas} (threads {}% each), {}", 100 / (*replicas).max(1), tenants(false))
        }
        GpuMode::Mig { instances } => {
            let layout: Vec<String> =
                instances.iter().map(|i| format!("{}@{}", i.profile, i.start)).collect();
            format!("MIG [{}], {}", layout.join(" "), tenants(true))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CLOSEST_ALTERNATIVES, model_text};
    use crate::plan::{ALTERNATIVE_PREFIX, ModelPlan, ReplicaGroup};

    #[test]
    fn a_model_shows_its_groups_and_only_the_closest_alternatives_unless_all() {
        let mut reasons = vec!["the cheapest option".to_owned()];
        reasons.extend((1..=5).map(|i| format!("{ALTERNATIVE_PREFIX} option {i}")));
        let group = ReplicaGroup {
            resource: "nvidia.com/mig-3g.40gb".to_owned(),
            per_replica: 1,
            replicas: 2,
            pool: "a100".to_owned(),
            nodes: vec!["n1".to_owned(), "n2".to_owned()],
            processes: 1,
        };
        let model =
            ModelPlan { name: "asr".to_owned(), groups: vec![group], reasons, slo_unverified: Vec::new() };
        let short = model_text(&model, false);
        assert!(short.starts_with("asr\n  2 × nvidia.com/mig-3g.40gb in pool `a100` on n1, n2\n"), "{short}");
        assert!(short.contains("  - the cheapest option\n"), "{short}");
        assert_eq!(short.matches(ALTERNATIVE_PREFIX).count(), CLOSEST_ALTERNATIVES, "{short}");
        assert!(short.ends_with("  - and 2 more alternative(s) (`--all` lists them)\n"), "{short}");
        let all = model_text(&model, true);
        assert_eq!(all.matches(ALTERNATIVE_PREFIX).count(), 5, "{all}");
        assert!(!all.contains("more alternative"), "{all}");
    }
}
