//! Whole CLI runs: exit codes, stdout and stderr. One test binary for the whole suite.

mod cli;
mod docs;
mod plan;
