//! Rendering: from a [`Plan`] (and the [`Spec`] it came from) to a [`Bundle`] of files.
//!
//! In: plan, spec, catalog and templates. Out: relative path → file text, deterministic
//! (no timestamps, sorted keys). Templates only ever see view types built here, never the raw
//! manifest; every value is escaped so no input can inject YAML.

use std::collections::BTreeMap;

/// The generated files: relative path (with `/`) → contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bundle {
    pub files: BTreeMap<String, String>,
}
