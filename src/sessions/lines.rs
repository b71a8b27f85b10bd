//! Reading a transcript line by line for the session verbs, and picking one top-level string
//! field out of a line.
//!
//! Framing is the core's [`LineSplitter`](crate::transcript::lines::LineSplitter), so lines and their numbers are exactly the ones
//! `check` reports: 1-based physical lines, `\r\n` accepted, blank lines skipped but counted,
//! lines over the limit skipped, a last line without a newline (an interrupted write) not
//! handed out.

use crate::sources::batch::{read_chunks, Input};
use crate::transcript::lines::{Framed, Line, Numbered, DEFAULT_MAX_LINE_BYTES};
use crate::transcript::scan;
use std::borrow::Cow;
use std::io;
use std::path::Path;

/// The top-level string field `key` of a JSON object line, decoded; `None` when the line is not
/// a UTF-8 JSON object or the field is absent or not a string. Pure.
pub fn top_level_string<'a>(line: &'a [u8], key: &str) -> Option<Cow<'a, str>> {
    simdutf8::basic::from_utf8(line).ok()?;
    let mut found = None;
    scan::object_line(line, |s, k| {
        if found.is_none() && k.is(key) {
            found = s.opt_string()?.map(|v| v.decode());
        } else {
            s.skip()?;
        }
        Ok(())
    })
    .ok()?;
    found
}

/// Calls `f` with every complete, non-blank line of `path`, in order. Errors reading the file
/// name the path (and keep their kind); errors from `f` (a closed stdout) are returned as they
/// are.
pub fn for_each_line(path: &Path, mut f: impl FnMut(Line<'_>) -> io::Result<()>) -> io::Result<()> {
    let mut numbered = Numbered::new(DEFAULT_MAX_LINE_BYTES);
    let mut failed: Option<io::Error> = None;
    let mut buf = Vec::with_capacity(1 << 20);
    let read = read_chunks(&Input::File(path.to_path_buf()), &mut buf, |chunk| {
        numbered.feed(chunk, &mut |framed| {
            if let (None, Framed::Line(line)) = (&failed, framed) {
                if let Err(e) = f(line) {
                    failed = Some(e);
                }
            }
        });
        failed.is_none()
    });
    if let Some(e) = failed {
        return Err(e);
    }
    read.map(|_| ()).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_top_level_field() {
        assert_eq!(top_level_string(br#"{"a":{"uuid":"in"},"uuid":"out"}"#, "uuid").as_deref(), Some("out"));
        assert_eq!(top_level_string(br#"{"uuid":"a\u0062"}"#, "uuid").as_deref(), Some("ab"));
        assert_eq!(top_level_string(br#"{"uuid":7}"#, "uuid"), None);
        assert_eq!(top_level_string(br#"{"uuid":"x""#, "uuid"), None);
        assert_eq!(top_level_string(b"[\"uuid\"]", "uuid"), None);
    }

    #[test]
    fn lines_are_numbered_like_check_numbers_them() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.jsonl");
        std::fs::write(&p, "{\"a\":1}\r\n\n{\"b\":2}\n{\"torn\"").unwrap();
        let mut got = Vec::new();
        for_each_line(&p, |l| {
            got.push((l.number, l.offset, String::from_utf8(l.bytes.to_vec()).unwrap()));
            Ok(())
        })
        .unwrap();
        assert_eq!(got, [(1, 0, "{\"a\":1}".to_owned()), (3, 10, "{\"b\":2}".to_owned())]);
        let err = for_each_line(&d.path().join("nope.jsonl"), |_| Ok(())).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().contains("nope.jsonl"), "{err}");
        // An error from the callback stops the walk and is returned unchanged.
        let err = for_each_line(&p, |_| Err(io::Error::from(io::ErrorKind::BrokenPipe))).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }
}
