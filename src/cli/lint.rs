//! `gpuplan validate-mig-config`: lint a mig-parted config file against the catalog.
//!
//! In: a mig-parted config file (or a ConfigMap holding one) and the catalog. Out: diagnostics on
//! stderr (or JSON on stdout); exit 1 when any is an error. The rules live in
//! [`crate::catalog::migparted`].

use std::path::PathBuf;

use clap::Args;

use super::common::{CatalogDirs, load_catalog_checked, read_text, report};
use super::{Ctx, ExitStatus, Format};
use crate::diagnostics::Sources;

/// Lint a mig-parted config (`version: v1`, `mig-configs`): unknown profiles, invalid layouts,
/// device filters that match no GPU, GPUs a config leaves untouched.
#[derive(Debug, Args)]
pub struct LintArgs {
    /// The mig-parted config file, or a ConfigMap holding it under `config.yaml`.
    pub file: PathBuf,
    #[command(flatten)]
    pub catalog: CatalogDirs,
}

pub(super) fn run(ctx: &Ctx, args: &LintArgs) -> anyhow::Result<ExitStatus> {
    let Ok(catalog) = load_catalog_checked(ctx, &args.catalog.dirs)? else {
        return Ok(ExitStatus::Problems);
    };
    let text = read_text(&args.file)?;
    let mut sources = Sources::new();
    let name = args.file.display().to_string();
    let diagnostics = crate::catalog::migparted::lint(&mut sources, &name, &text, &catalog);
    match ctx.format {
        Format::Json if diagnostics.is_empty() => ctx.json(&serde_json::json!({ "diagnostics": [] }))?,
        _ => report(ctx, &sources, &diagnostics)?,
    }
    if diagnostics.has_errors() {
        return Ok(ExitStatus::Problems);
    }
    if ctx.format == Format::Human {
        let warnings = diagnostics.iter().count();
        ctx.status(&format!("`{name}`: no errors ({warnings} warning(s))"))?;
    }
    Ok(ExitStatus::Success)
}
