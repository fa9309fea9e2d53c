//! gpuplan compiles a declarative manifest of inference models and GPU pools into MIG /
//! time-slicing partitions and the Kubernetes manifests that realise them.
//!
//! The pipeline, one module per stage: [`manifest`] (text → raw model) → [`spec`] (checked) →
//! [`plan`] (placements and reasons) → [`render`] (files) → [`emit`] (written, checked or diffed).
//! [`catalog`] holds the hardware knowledge; [`diagnostics`] every user-facing problem.
//! See `ARCHITECTURE.md`.

pub mod bench;
pub mod catalog;
pub mod cli;
pub mod day2;
pub mod diagnostics;
pub mod emit;
pub mod manifest;
pub mod measurements;
pub mod plan;
/// Published-profile importers and the independent rate-plan verifier (their own home is being
/// settled; the measurement format itself lives in [`measurements`]).
pub mod profiles {
    pub mod parvagpu;
    pub mod verify;
}
pub mod render;
pub mod simulate;
pub mod spec;
pub mod verify;
