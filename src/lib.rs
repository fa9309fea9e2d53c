//! gpuplan compiles a declarative manifest of inference models and GPU pools into MIG /
//! time-slicing partitions and the Kubernetes manifests that realise them.
//!
//! The pipeline, one module per stage: [`manifest`] (text → raw model) → [`spec`] (checked) →
//! [`plan`] (placements and reasons) → [`render`] (files) → [`emit`] (written, checked or diffed).
//! [`catalog`] holds the hardware knowledge; [`diagnostics`] every user-facing problem.
//! See `ARCHITECTURE.md`; its "API boundary" names what of this is the library's API. The rest is
//! `pub(crate)` (`unreachable_pub` keeps it so), or `#[doc(hidden)]` where the tests and
//! benchmarks need it.

/// The benchmark harness (scenario generators, the ParvaGPU importer): for this crate's tests and
/// benchmarks only, not a stable API.
#[doc(hidden)]
pub mod bench;
pub mod catalog;
/// The command layer: public for `src/main.rs` and the help snapshots only, not a library API.
#[doc(hidden)]
pub mod cli;
pub mod day2;
pub mod diagnostics;
pub mod emit;
pub mod manifest;
pub mod measurements;
pub mod pipeline;
pub mod plan;
pub mod render;
pub mod simulate;
pub mod spec;
pub mod verify;
