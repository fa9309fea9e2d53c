//! `gpuplan completions`: shell completion scripts.

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::{Cli, Ctx, ExitStatus};

/// Print a shell completion script (for example `gpuplan completions bash > /etc/bash_completion.d/gpuplan`).
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to generate completions for.
    pub shell: Shell,
}

pub(super) fn run(_ctx: &Ctx, args: &CompletionsArgs) -> anyhow::Result<ExitStatus> {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "gpuplan", &mut out);
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&out)?;
    stdout.flush()?;
    Ok(ExitStatus::Success)
}
