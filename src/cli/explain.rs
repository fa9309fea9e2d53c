//! `gpuplan explain`: why the plan is what it is.

use clap::Args;

use super::common::{load_spec, report};
use super::{Ctx, ExitStatus, Format, ManifestArgs};

/// Plan a manifest and print, per model, where it runs and why. Writes nothing.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub input: ManifestArgs,
    /// Explain only this model.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
}

pub fn run(ctx: &Ctx, args: &ExplainArgs) -> anyhow::Result<ExitStatus> {
    let Ok((sources, catalog, spec)) = load_spec(ctx, &args.input)? else {
        return Ok(ExitStatus::Problems);
    };
    let plan = match crate::plan::plan(&spec, &catalog) {
        Ok(plan) => plan,
        Err(diags) => {
            report(ctx, &sources, &diags)?;
            return Ok(ExitStatus::Problems);
        }
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
            for model in models {
                text.push_str(&format!("{}\n", model.name));
                for group in &model.groups {
                    text.push_str(&format!(
                        "  {} × {} in pool `{}` on {}\n",
                        group.replicas,
                        group.resource,
                        group.pool,
                        group.nodes.join(", ")
                    ));
                }
                for reason in &model.reasons {
                    text.push_str(&format!("  - {reason}\n"));
                }
            }
            ctx.out(&text)?;
        }
    }
    Ok(ExitStatus::Success)
}
