//! Whole CLI runs: exit codes, stdout and stderr. One test binary for the whole suite.

mod bundle;
mod cli;
mod docs;
mod profiles;
mod emit;
mod fixtures_plans;
mod tools;
