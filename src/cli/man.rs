//! `transcriptd man`: manual pages in roff, generated from the clap definitions: the main page
//! on standard output, or (with `--dir`) one page per verb too (`transcriptd-check.1`, ...).

use super::{Cli, Exit};
use anyhow::Context;
use clap::CommandFactory;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `transcriptd man`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write transcriptd.1 and a page per verb (transcriptd-check.1, ...) into DIR instead of
    /// printing the main page.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Writes the pages.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let cmd = Cli::command();
    match args.dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            clap_mangen::generate_to(cmd, &dir).with_context(|| format!("writing manual pages into {}", dir.display()))?;
        }
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            clap_mangen::Man::new(cmd).render(&mut out)?;
            out.flush()?;
        }
    }
    Ok(Exit::Clean)
}
