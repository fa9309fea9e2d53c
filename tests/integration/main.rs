//! Whole CLI runs: exit codes, stdout and stderr. One test binary for the whole suite.

mod bundle;
mod catalog;
mod cli;
mod docs;
mod emit;
mod fixtures_plans;
mod lint;
mod manifest;
mod profiles;
mod tools;
