//! The manifest as the user wrote it (`gpuplan.yaml` or `gpuplan.toml`).
//!
//! In: source text. Out: a raw [`Manifest`] that mirrors the file, values unchecked (units are
//! still strings), or diagnostics for syntax and structure. [`crate::spec::validate`] turns it into
//! a checked [`crate::spec::Spec`].
//!
//! WALKING SKELETON: the YAML front end parses with serde-saphyr and reports the first structural
//! error only; the full model, TOML, spans on every value and all-problems-at-once come with the
//! manifest issue.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::diagnostics::{Diagnostic, Diagnostics, FileId, Sources, Span, codes};

/// A parsed manifest.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest {
    pub api_version: String,
    pub kind: String,
    pub metadata: Metadata,
    #[serde(default)]
    pub cluster: RawCluster,
    pub inventory: RawInventory,
    pub models: Vec<RawModel>,
    #[serde(skip)]
    pub file: Option<FileId>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    pub name: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawCluster {
    pub namespace: Option<String>,
    pub operator_namespace: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawInventory {
    pub pools: Vec<RawPool>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawPool {
    pub name: String,
    pub gpu: String,
    pub gpus_per_node: u32,
    #[serde(default)]
    pub nodes: Vec<String>,
    pub cost_per_gpu_hour: Option<f64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawModel {
    pub name: String,
    pub image: String,
    pub memory: String,
    pub compute: Option<f64>,
    pub replicas: Option<u32>,
    pub isolation: Option<String>,
    pub spread: Option<String>,
    pub gpus: Option<u32>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// Parses a YAML manifest. `name` is the file name shown in diagnostics.
pub fn parse(sources: &mut Sources, name: &str, text: &str) -> Result<Manifest, Diagnostics> {
    let file = sources.add(name, text);
    let options = serde_saphyr::options! {
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
    };
    match serde_saphyr::from_str_with_options::<Manifest>(text, options) {
        Ok(mut manifest) => {
            manifest.file = Some(file);
            Ok(manifest)
        }
        Err(err) => {
            let source = sources.get(file);
            let offset = err.location().map_or(0, |l| {
                source
                    .offset(usize::try_from(l.line()).unwrap_or(1), usize::try_from(l.column()).unwrap_or(1))
            });
            let message = err.to_string();
            let first_line = message.lines().next().unwrap_or("invalid manifest").to_owned();
            Err(Diagnostics::from_iter([
                Diagnostic::error(codes::SYNTAX, first_line).at(Span::new(file, offset..offset), "here")
            ]))
        }
    }
}
