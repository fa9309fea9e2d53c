//! Whole CLI runs: exit codes, stdout and stderr. One test binary for the whole suite.

mod architecture;
mod bundle;
mod catalog;
mod ci;
mod cli;
mod day2;
mod docs;
mod dra;
mod emit;
mod examples;
mod fixtures_plans;
mod latency;
mod lint;
mod manifest;
mod mps;
mod parvagpu;
mod plan;
mod profiles;
mod properties;
mod ratchet;
mod rollout;
mod simulate;
mod tools;
mod transition;

/// Runs `f` with the snapshot suffix of the solver this build plans with: none for HiGHS (the
/// default build), `microlp` for the pure-Rust build (`--no-default-features`). For
/// snapshots of solver-chosen plans, where two optimal plans of equal cost may differ.
pub fn per_solver<R>(f: impl FnOnce() -> R) -> R {
    let mut settings = insta::Settings::clone_current();
    if !cfg!(feature = "highs") {
        settings.set_snapshot_suffix("microlp");
    }
    settings.bind(f)
}
