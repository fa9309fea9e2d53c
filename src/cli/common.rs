//! What several subcommands share: reading inputs and reporting diagnostics.

use std::path::Path;

use anyhow::Context as _;

use super::{Ctx, Format, ManifestArgs};
use crate::catalog::Catalog;
use crate::diagnostics::{Diagnostics, Sources, render};
use crate::spec::Spec;

/// A stage refused the input: the diagnostics are reported and the command exits 1.
#[derive(Debug)]
pub(super) struct Rejected;

/// Reads a text file; failure is a tool error (exit 2), not a diagnostic.
/// (The manifest is read as bytes instead: text that is not UTF-8 is a diagnostic there.)
pub(super) fn read_text(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read `{}`", path.display()))
}

/// Prints diagnostics on stderr (human) or stdout (JSON).
pub(super) fn report(ctx: &Ctx, sources: &Sources, diagnostics: &Diagnostics) -> anyhow::Result<()> {
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

/// `--catalog DIR` of the commands that read the catalog without a manifest (`compile` and its
/// kin document it with the replacement rule, `catalog` and `measurements` make it global).
#[derive(Debug, clap::Args)]
pub struct CatalogDirs {
    /// Extra catalog folder with GPU entries (YAML).
    #[arg(long = "catalog", value_name = "DIR")]
    pub dirs: Vec<std::path::PathBuf>,
}

/// Loads the catalog (built-in entries, then every `*.yaml` / `*.yml` of each folder in file-name
/// order, or the file itself when a path is a file). Diagnostics go to stderr as text, even with
/// `--format json`, so that stdout stays one JSON document; errors give `Err(Rejected)`.
pub(super) fn load_catalog_checked(
    ctx: &Ctx,
    dirs: &[std::path::PathBuf],
) -> anyhow::Result<Result<Catalog, Rejected>> {
    let mut files = Vec::new();
    for dir in dirs {
        if dir.is_file() {
            files.push((dir.display().to_string(), read_text(dir)?));
            continue;
        }
        let entries = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read catalog folder `{}`", dir.display()))?;
        let mut paths = Vec::new();
        for entry in entries {
            let path =
                entry.with_context(|| format!("cannot read catalog folder `{}`", dir.display()))?.path();
            if path.extension().is_some_and(|e| e == "yaml" || e == "yml") && path.is_file() {
                paths.push(path);
            }
        }
        paths.sort();
        for path in paths {
            files.push((path.display().to_string(), read_text(&path)?));
        }
    }
    let mut sources = Sources::new();
    let (catalog, diagnostics) = Catalog::load(&mut sources, &files);
    let text_ctx = Ctx { format: Format::Human, ..*ctx };
    report(&text_ctx, &sources, &diagnostics)?;
    if diagnostics.has_errors() { Ok(Err(Rejected)) } else { Ok(Ok(catalog)) }
}

/// Reads, parses and validates a manifest. On problems, reports them and returns `Err(Rejected)`
/// inside `Ok`; tool failures are `Err`.
///
/// Measured-point files that models reference (`demand.measurements`, relative to the manifest)
/// are read here and handed to [`crate::pipeline::check_manifest`], which parses them and
/// validates them with the manifest. An unreadable measurements file is the user's mistake (a diagnostic), an unreadable
/// manifest is a tool failure (exit 2).
pub(super) fn load_spec(
    ctx: &Ctx,
    args: &ManifestArgs,
) -> anyhow::Result<Result<(Sources, Catalog, Spec), Rejected>> {
    Ok(match load_spec_quietly(ctx, args)? {
        Ok((sources, catalog, spec, warnings)) => {
            report(ctx, &sources, &warnings)?;
            Ok((sources, catalog, spec))
        }
        Err(rejected) => Err(rejected),
    })
}

/// [`load_spec`], but the warnings of a valid manifest are returned instead of reported (errors
/// are still reported), for commands that print one combined result.
pub(super) fn load_spec_quietly(
    ctx: &Ctx,
    args: &ManifestArgs,
) -> anyhow::Result<Result<(Sources, Catalog, Spec, Diagnostics), Rejected>> {
    let Ok(catalog) = load_catalog_checked(ctx, &args.catalog)? else {
        return Ok(Err(Rejected));
    };
    let bytes = std::fs::read(&args.manifest)
        .with_context(|| format!("cannot read `{}`", args.manifest.display()))?;
    let mut sources = Sources::new();
    let name = args.manifest.display().to_string();
    // Text that is not UTF-8 is the user's mistake (exit 1), not the tool's.
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => {
            let offset = err.utf8_error().valid_up_to();
            let lossy = String::from_utf8_lossy(err.as_bytes()).into_owned();
            let file = sources.add(&name, lossy);
            let diag = crate::diagnostics::Diagnostic::error(
                crate::diagnostics::codes::SYNTAX,
                "the manifest is not UTF-8 text",
            )
            .at(crate::diagnostics::Span::new(file, offset..offset), "first byte that is not UTF-8")
            .with_help("save the file as UTF-8");
            report(ctx, &sources, &Diagnostics::from_iter([diag]))?;
            return Ok(Err(Rejected));
        }
    };
    let base = args.manifest.parent().unwrap_or_else(|| Path::new(".")).to_path_buf();
    let mut read = |reference: &str| {
        let file = base.join(reference);
        std::fs::read_to_string(&file)
            .map(|text| (file.display().to_string(), text))
            .map_err(|err| format!("`{}`: {err}", file.display()))
    };
    match crate::pipeline::check_manifest(&mut sources, &name, &text, &catalog, &mut read) {
        Ok(checked) => Ok(Ok((sources, catalog, checked.spec, checked.warnings))),
        Err(problems) => {
            report(ctx, &sources, &problems)?;
            Ok(Err(Rejected))
        }
    }
}
