//! What several subcommands share: reading inputs and reporting diagnostics.

use std::path::Path;

use anyhow::Context as _;

use super::{Ctx, Format, ManifestArgs};
use crate::catalog::Catalog;
use crate::diagnostics::{Diagnostics, Sources, render};
use crate::spec::Spec;

/// A stage refused the input: the diagnostics are reported and the command exits 1.
#[derive(Debug)]
pub struct Rejected;

/// Reads a text file; failure is a tool error (exit 2), not a diagnostic.
pub fn read_text(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read `{}`", path.display()))
}

/// Prints diagnostics on stderr (human) or stdout (JSON).
pub fn report(ctx: &Ctx, sources: &Sources, diagnostics: &Diagnostics) -> anyhow::Result<()> {
    if diagnostics.is_empty() {
        return Ok(());
    }
    match ctx.format {
        Format::Human => {
            let shown: Vec<_> = diagnostics
                .iter()
                .filter(|d| !ctx.quiet || d.severity == crate::diagnostics::Severity::Error)
                .cloned()
                .collect();
            ctx.err(&render::human(sources, &shown, ctx.color))?;
        }
        Format::Json => {
            ctx.json(&serde_json::json!({ "diagnostics": render::json(sources, &diagnostics.0) }))?
        }
    }
    Ok(())
}

/// Loads the catalog: the built-in entries plus the user's folders.
pub fn load_catalog(_dirs: &[std::path::PathBuf]) -> anyhow::Result<Catalog> {
    Ok(Catalog::builtin())
}

/// Reads, parses and validates a manifest. On problems, reports them and returns `Err(Rejected)`
/// inside `Ok`; tool failures are `Err`.
pub fn load_spec(
    ctx: &Ctx,
    args: &ManifestArgs,
) -> anyhow::Result<Result<(Sources, Catalog, Spec), Rejected>> {
    let catalog = load_catalog(&args.catalog)?;
    let text = read_text(&args.manifest)?;
    let mut sources = Sources::new();
    let name = args.manifest.display().to_string();
    let manifest = match crate::manifest::parse(&mut sources, &name, &text) {
        Ok(m) => m,
        Err(diags) => {
            report(ctx, &sources, &diags)?;
            return Ok(Err(Rejected));
        }
    };
    match crate::spec::validate(&manifest, &catalog) {
        Ok((spec, warnings)) => {
            report(ctx, &sources, &warnings)?;
            Ok(Ok((sources, catalog, spec)))
        }
        Err(diags) => {
            report(ctx, &sources, &diags)?;
            Ok(Err(Rejected))
        }
    }
}
