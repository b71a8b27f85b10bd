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
            let mut cmd = cmd.disable_help_subcommand(true);
            cmd.build();
            write_pages(&cmd, &dir).with_context(|| format!("writing manual pages into {}", dir.display()))?;
        }
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            render(cmd, &mut out)?;
            out.flush()?;
        }
    }
    Ok(Exit::Clean)
}

/// `cmd`'s page and one per (sub)verb, named as `clap_mangen::generate_to` names them
/// (`transcriptd.1`, `transcriptd-check.1`, `transcriptd-sessions-list.1`).
fn write_pages(cmd: &clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir)?;
    }
    let name = clap_mangen::Man::new(cmd.clone()).get_filename();
    let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join(name))?);
    render(cmd.clone(), &mut out)?;
    out.into_inner().map_err(|e| e.into_error())?.sync_all()
}

/// A manual page as `clap_mangen::Man::render` makes it, but with the verb's exit status and
/// examples (`help.rs`) as the sections `EXIT STATUS` and `EXAMPLES` that man pages have,
/// instead of one `EXTRA` section.
fn render(cmd: clap::Command, out: &mut dyn Write) -> std::io::Result<()> {
    let after = cmd.get_after_long_help().map(|h| h.to_string());
    let man = clap_mangen::Man::new(cmd.clone().after_long_help(None::<&str>).after_help(None::<&str>));
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(out)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(out)?;
    }
    if let Some(after) = after {
        let (codes, examples) = super::help::sections(&after);
        if !codes.is_empty() {
            writeln!(out, ".SH \"EXIT STATUS\"")?;
            for (code, meaning) in codes {
                writeln!(out, ".TP\n\\fB{code}\\fR\n{}", roff_text(&meaning))?;
            }
        }
        if !examples.is_empty() {
            writeln!(out, ".SH EXAMPLES")?;
            for e in examples {
                writeln!(out, ".PP\n.nf\n{}\n.fi", roff_text(&e))?;
            }
        }
    }
    if cmd.get_version().or(cmd.get_long_version()).is_some() {
        man.render_version_section(out)?;
    }
    Ok(())
}

/// Text as roff reads it literally: backslashes doubled, a leading `.` or `'` (a request)
/// and `-` (which roff may render as a hyphen) escaped.
fn roff_text(s: &str) -> String {
    let s = s.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with(['.', '\'']) {
        format!("\\&{s}")
    } else {
        s
    }
}
