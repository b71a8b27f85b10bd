//! `transcriptd completions SHELL`: the shell's completion script, generated from the same clap
//! definitions as the parser (so it never lists a flag the parser lacks).

use super::{Cli, Exit};
use clap::CommandFactory;
use std::io::Write;

/// Arguments of `transcriptd completions`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Writes the script to standard output.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    clap_complete::generate(args.shell, &mut Cli::command(), "transcriptd", &mut out);
    out.flush()?;
    Ok(Exit::Clean)
}
