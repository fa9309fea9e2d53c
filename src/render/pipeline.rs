//! The whole pipeline as one library call: manifest text → spec → plan → bundle.
//!
//! In: a manifest's name and text, the catalog and the templates. Out: the plan and its bundle
//! (with the warnings found on the way), or every diagnostic of the first stage that refused
//! the input, with the [`Sources`] they point into. No IO: `gpuplan compile`, `check` and `diff`
//! read the files and hand the bundle to [`crate::emit`].

use crate::catalog::Catalog;
use crate::diagnostics::{Diagnostics, Sources};
use crate::plan::Plan;
use crate::spec::Spec;

use super::{Bundle, Templates};

/// A compiled manifest.
#[derive(Debug)]
pub struct Compiled {
    pub spec: Spec,
    pub plan: Plan,
    pub bundle: Bundle,
    /// Warnings of every stage (never errors).
    pub warnings: Diagnostics,
}

/// Compiles manifest text into a bundle. `sources` receives the manifest text so that the
/// caller can render the diagnostics either way.
pub fn bundle_from_manifest(
    sources: &mut Sources,
    name: &str,
    text: &str,
    catalog: &Catalog,
    templates: &Templates,
) -> Result<Compiled, Diagnostics> {
    let manifest = crate::manifest::parse(sources, name, text)?;
    let (spec, warnings) = crate::spec::validate(&manifest, catalog)?;
    let plan = crate::plan::plan(&spec, catalog)?;
    let bundle = super::render(&spec, catalog, &plan, templates)?;
    Ok(Compiled { spec, plan, bundle, warnings })
}
