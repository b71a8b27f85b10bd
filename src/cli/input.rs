//! What the verbs over one transcript share: the file arguments, and reading a transcript
//! forward through the core's [`Forward`] reader.

use super::args::{OutputArgs, ReadArgs};
use crate::sources::batch::{self, Input};
use crate::transcript::checker::Outcome;
use crate::transcript::forward::Forward;
use crate::transcript::Format;
use anyhow::Context as _;
use std::path::PathBuf;

/// The transcript a verb reads, how, and how its results are written.
#[derive(Debug, Clone, clap::Args)]
pub struct FileArgs {
    /// The transcript file, or `-` for stdin.
    pub file: PathBuf,
    /// How the transcript is read.
    #[command(flatten)]
    pub read: ReadArgs,
    /// How results are written (default: JSON records; -o text: readable lines).
    #[command(flatten)]
    pub out: OutputArgs,
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
