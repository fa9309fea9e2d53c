//! `gpuplan check`: compare a fresh compile with the committed output directory.

use super::compile::{CompileArgs, run_mode};
use super::{Ctx, ExitStatus};
use crate::emit::Mode;

/// Exit 1 when the committed output differs from a fresh compile (names the files); 0 when identical.
pub(super) fn run(ctx: &Ctx, args: &CompileArgs) -> anyhow::Result<ExitStatus> {
    run_mode(ctx, args, Mode::Check, false)
}
