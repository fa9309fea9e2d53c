//! Emitting a [`Bundle`]: write it to a directory, check a directory against it, or diff.
//!
//! This is the only module that touches the output directory. `compile`, `check` and `diff` are
//! one function with a [`Mode`].

use crate::render::Bundle;

/// What to do with a bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Write the bundle, pruning stale files gpuplan generated before.
    Write,
    /// Compare only; report the files that differ.
    Check,
    /// Compare and print a unified diff.
    Diff,
}

#[allow(dead_code)]
fn _uses(_: &Bundle) {}
