//! What the verbs over one transcript share: the file arguments, and reading a transcript
//! forward through the core's [`Forward`] reader.

use crate::sources::batch::{self, Input};
use crate::transcript::checker::Outcome;
use crate::transcript::forward::Forward;
use crate::transcript::Format;
use anyhow::Context as _;
use std::path::PathBuf;

/// The transcript a verb reads, and how.
#[derive(Debug, Clone, clap::Args)]
pub struct FileArgs {
    /// The transcript file, or `-` for stdin.
    pub file: PathBuf,
    /// The transcript format; detected from its lines when not given.
    #[arg(long)]
    pub format: Option<Format>,
    /// Lines longer than this are left out and reported (e.g. 64MiB).
    #[arg(long, default_value = "64MiB", value_parser = super::parse_size)]
    pub max_line_bytes: usize,
}

impl FileArgs {
    /// The input named by `file`.
    pub fn input(&self) -> Input {
        if self.file.as_os_str() == "-" {
            Input::Stdin
        } else {
            Input::File(self.file.clone())
        }
    }
}

/// Reads `input` to the end through `forward`, handing each line's outcome, bytes and the
/// format known at that line to `on_line`.
pub fn read_forward(input: &Input, forward: &mut Forward, mut on_line: impl FnMut(Outcome<'_>, &[u8], Option<Format>)) -> anyhow::Result<()> {
    let mut buf = Vec::with_capacity(1 << 20);
    batch::read_chunks(input, &mut buf, |chunk| {
        forward.feed(chunk, &mut on_line);
        true
    })
    .with_context(|| format!("{}: read failed", input.display()))?;
    forward.finish(&mut on_line);
    Ok(())
}
