//! The manifest as the user wrote it (`gpuplan.yaml` or `gpuplan.toml`).
//!
//! In: source text and its file name (`.toml` selects TOML, anything else YAML). Out: a raw
//! [`Manifest`] that mirrors the file, every value with its span and still unchecked (units are
//! strings), or every syntax and structural problem as diagnostics: unknown fields with the
//! nearest valid name, wrong types, missing fields. [`crate::spec::validate`] turns the raw
//! manifest into a checked [`crate::spec::Spec`].
//!
//! Both formats go through one spanned tree ([`tree`]) and one reader ([`read`]), so they accept
//! exactly the same documents and report the same problems. Input is capped
//! ([`tree::MAX_INPUT_BYTES`], [`tree::MAX_DEPTH`]) before values are built.
//!
//! Structural problems stop the pipeline before semantic validation, with one exception: unknown
//! fields (the commonest typo) leave a usable manifest ([`parse_recovering`]), so the command
//! layer reports them together with the semantic problems. A wrong type or a missing field leaves
//! no manifest to validate; the reader still reports all of them at once.

mod model;
mod read;
pub mod tree;
pub(crate) mod words;

pub use model::*;

use crate::diagnostics::{Diagnostics, Sources};

/// Parses a manifest. `name` is the file name shown in diagnostics and chooses the format.
pub fn parse(sources: &mut Sources, name: &str, text: &str) -> Result<Manifest, Diagnostics> {
    let file = sources.add(name, text);
    let root = tree::parse(file, sources.get(file), tree::Format::from_name(name))?;
    read::manifest(file, &root)
}

/// Parses a manifest, keeping it when only unknown fields are wrong (see
/// [`read::manifest_recovering`]): the caller validates it and reports both sets of problems.
pub fn parse_recovering(sources: &mut Sources, name: &str, text: &str) -> (Option<Manifest>, Diagnostics) {
    let file = sources.add(name, text);
    match tree::parse(file, sources.get(file), tree::Format::from_name(name)) {
        Ok(root) => read::manifest_recovering(file, &root),
        Err(diags) => (None, diags),
    }
}

/// Parses a manifest into its spanned tree only (for JSON Schema checks and tools).
pub fn parse_tree(sources: &mut Sources, name: &str, text: &str) -> Result<tree::Node, Diagnostics> {
    let file = sources.add(name, text);
    tree::parse(file, sources.get(file), tree::Format::from_name(name))
}
