//! The `gpuplan` binary: parse arguments, run, exit. The only place that exits.

use std::process::ExitCode;

fn main() -> ExitCode {
    gpuplan::cli::main()
}
