//! `gpuplan diff`: print what `compile` would change in the output directory.

use super::compile::{CompileArgs, run_mode};
use super::{Ctx, ExitStatus};
use crate::emit::Mode;

pub fn run(ctx: &Ctx, args: &CompileArgs) -> anyhow::Result<ExitStatus> {
    run_mode(ctx, args, Mode::Diff)
}
