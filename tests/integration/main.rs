//! Whole CLI runs: exit codes, stdout and stderr. One test binary for the whole suite.

mod bundle;
mod catalog;
mod cli;
mod day2;
mod docs;
mod emit;
mod examples;
mod fixtures_plans;
mod latency;
mod lint;
mod manifest;
mod parvagpu;
mod plan;
mod profiles;
mod properties;
mod simulate;
mod tools;
