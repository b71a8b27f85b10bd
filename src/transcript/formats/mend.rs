//! Mending the blocks of a message that the Anthropic Messages API rejects (the rules of
//! `pairing::api`; TRUTH.md, "The API's rules"), in the content array of a line: only that array
//! changes, every block the mend does not touch is kept byte for byte.
//!
//! What each [`Mend`] does, and why that is what the agent would need (measured with Claude
//! Code 2.1.332, TRUTH.md "Repair and the agent"):
//!
//! - [`Mend::Images`]: an image over the API's limits, or with empty data, becomes a short text
//!   block saying what was there and that the original is in the rejects file: the agent sends
//!   images as they are (one whose base64 is over 5 MB it refuses to send at all), and the API
//!   refuses the whole request for one such image. Images in a `tool_result`'s content
//!   (screenshots a tool returned) are mended where they are, inside the result.
//! - [`Mend::DropUnsignedThinking`]: a `thinking` block without a signature (or with an empty
//!   one) is removed: the agent sends it as it is, the API refuses it, and no signature can be
//!   made for it. (The agent itself drops a thinking-only message with such a block, when no
//!   other line of its message has other content.)
//! - [`Mend::ThinkingFirst`]: the thinking blocks of the message move before its other blocks,
//!   in their order: every block is kept, and the API's rule is met.
//! - [`Mend::ResultsFirst`]: the `tool_result` blocks of a user message move before its other
//!   blocks, in their order: what the user added beside the results follows them, as the agent
//!   itself writes it.
//! - [`Mend::DropBlankText`]: empty and whitespace-only text blocks are removed (what Claude
//!   Code does itself on resume, so its files get no such edit: the finding is a warning there).
//!
//! A mend that leaves the content with no block says so ([`Edited::Gone`]): the line goes (to
//! the rejects file, as every changed line).

use super::edit::{self, Edited, Span, Unable};
use super::image;
use crate::transcript::scan::{self, Scanner};
use serde::Serialize;
use serde_json::Value;

/// What to mend in a line's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "mend", rename_all = "snake_case")]
pub enum Mend {
    /// Replace every image (in the content or in a `tool_result`'s content) whose base64 data
    /// is empty, longer than `max_base64` bytes, or whose longer side is over `max_px` pixels
    /// by a text placeholder.
    Images {
        /// The longest side kept.
        max_px: u32,
        /// The longest base64 data kept, in bytes.
        max_base64: u64,
    },
    /// Remove `thinking` blocks without a non-empty `signature`.
    DropUnsignedThinking,
    /// Move `thinking` and `redacted_thinking` blocks before the others.
    ThinkingFirst,
    /// Move `tool_result` blocks before the others.
    ResultsFirst,
    /// Remove empty and whitespace-only `text` blocks.
    DropBlankText,
}

/// What a content block is, as far as the mends need it.
#[derive(Default)]
struct Block {
    ty: Option<Vec<u8>>,
    /// A `thinking` block's `signature` is a non-empty string.
    signed: bool,
    /// A `text` block's text is absent or blank.
    blank: bool,
}

fn block(elem: &[u8]) -> Option<Block> {
    let mut b = Block { blank: true, ..Block::default() };
    let mut s = Scanner::new(elem);
    if s.peek() != Some(scan::Kind::Object) {
        return None;
    }
    s.object(|s, k| {
        match &*k.key() {
            b"type" => b.ty = s.opt_string()?.map(|t| t.key().into_owned()),
            b"signature" => b.signed = s.opt_string()?.is_some_and(|t| !t.raw().is_empty()),
            b"text" => b.blank = s.opt_string()?.is_none_or(|t| t.is_blank()),
            _ => s.skip()?,
        }
        Ok(())
    })
    .ok()?;
    Some(b)
}

fn is(b: &Option<Block>, ty: &[u8]) -> bool {
    b.as_ref().is_some_and(|b| b.ty.as_deref() == Some(ty))
}

/// Mends `line`'s content array at `content` (a path of object keys from the top level).
pub fn blocks(line: &[u8], content: &[&[u8]], mend: &Mend) -> Result<Edited, Unable> {
    let span = edit::value_span(line, content).ok_or(Unable("the message has no content"))?;
    let elems = edit::elements(line, &span).ok_or(Unable("the message content is not an array"))?;
    let kinds: Vec<Option<Block>> = elems.iter().map(|e| block(&line[e.clone()])).collect();
    let array = match mend {
        Mend::Images { max_px, max_base64 } => {
            let mut out = Vec::with_capacity(span.len());
            let mut changed = false;
            out.push(b'[');
            for (i, (e, k)) in elems.iter().zip(&kinds).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let elem = &line[e.clone()];
                let mended = if is(k, b"image") {
                    placeholder(elem, *max_px, *max_base64).map(|t| text_block(&t))
                } else if is(k, b"tool_result") {
                    nested_images(elem, *max_px, *max_base64)
                } else {
                    None
                };
                changed |= mended.is_some();
                out.extend_from_slice(mended.as_deref().unwrap_or(elem));
            }
            out.push(b']');
            if !changed {
                return Err(Unable("the line has no image over the limits"));
            }
            out
        }
        Mend::DropUnsignedThinking => keep(line, &elems, kinds.iter().map(|k| !(is(k, b"thinking") && !k.as_ref().is_some_and(|b| b.signed))))?,
        Mend::DropBlankText => keep(line, &elems, kinds.iter().map(|k| !(is(k, b"text") && k.as_ref().is_some_and(|b| b.blank))))?,
        Mend::ThinkingFirst => front(line, &elems, kinds.iter().map(|k| is(k, b"thinking") || is(k, b"redacted_thinking")))?,
        Mend::ResultsFirst => front(line, &elems, kinds.iter().map(|k| is(k, b"tool_result")))?,
    };
    if array == b"[]" {
        // Nothing is left of the message: the line goes.
        return Ok(Edited::Gone);
    }
    Ok(Edited::Line(edit::splice(line, &span, &array)))
}

/// The array of the elements `keep` says stay (empty when none does).
fn keep(line: &[u8], elems: &[Span], keep: impl Iterator<Item = bool>) -> Result<Vec<u8>, Unable> {
    let keep: Vec<bool> = keep.collect();
    if keep.iter().all(|k| *k) {
        return Err(Unable("the line has no such block"));
    }
    Ok(edit::array_of(line, elems, &keep))
}

/// The array with the elements `first` picks moved to the front, each side in its order.
fn front(line: &[u8], elems: &[Span], first: impl Iterator<Item = bool>) -> Result<Vec<u8>, Unable> {
    let first: Vec<bool> = first.collect();
    let order: Vec<usize> = (0..elems.len()).filter(|&i| first[i]).chain((0..elems.len()).filter(|&i| !first[i])).collect();
    if order.iter().enumerate().all(|(at, &i)| at == i) {
        return Err(Unable("the blocks are in order already"));
    }
    let mut out = vec![b'['];
    for (at, &i) in order.iter().enumerate() {
        if at > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&line[elems[i].clone()]);
    }
    out.push(b']');
    Ok(out)
}

/// A `tool_result` block with the images of its `content` array mended, if any is.
fn nested_images(elem: &[u8], max_px: u32, max_base64: u64) -> Option<Vec<u8>> {
    let span = edit::value_span(elem, &[b"content"])?;
    let inner = edit::elements(elem, &span)?;
    let mut out = vec![b'['];
    let mut changed = false;
    for (i, e) in inner.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let bytes = &elem[e.clone()];
        let mended = is(&block(bytes), b"image").then(|| placeholder(bytes, max_px, max_base64)).flatten().map(|t| text_block(&t));
        changed |= mended.is_some();
        out.extend_from_slice(mended.as_deref().unwrap_or(bytes));
    }
    out.push(b']');
    changed.then(|| edit::splice(elem, &span, &out))
}

fn text_block(text: &str) -> Vec<u8> {
    let mut out = br#"{"type":"text","text":"#.to_vec();
    scan::write_json_string(&mut out, text);
    out.push(b'}');
    out
}

/// A size in bytes as people read it (binary units, as the API's limits are).
fn size(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if f >= K * K {
        format!("{:.1} MB", f / K / K)
    } else if f >= K {
        format!("{:.1} KB", f / K)
    } else {
        format!("{n} bytes")
    }
}

/// The placeholder text for an image block, when it breaks a limit: what it was and why it went.
/// The same reading as the checker's (`formats::blocks`): inline base64 data only.
pub fn placeholder(elem: &[u8], max_px: u32, max_base64: u64) -> Option<String> {
    let v: Value = serde_json::from_slice(elem).ok()?;
    let src = v.get("source")?;
    if src.get("type").and_then(Value::as_str) != Some("base64") {
        return None;
    }
    let data = src.get("data")?.as_str()?;
    let media = src.get("media_type").and_then(Value::as_str).and_then(|m| m.strip_prefix("image/")).map(str::to_ascii_uppercase);
    let keep = "the original line is kept in the repair's rejects file";
    if data.is_empty() {
        let what = media.as_deref().map_or("an image".to_owned(), |m| format!("a {m} image"));
        return Some(format!("[image removed by transcriptd repair: {what} with no data, which the API rejects; {keep}]"));
    }
    let media = media.as_deref().unwrap_or("image");
    let b64 = data.len() as u64;
    let dims = image::dimensions(data.as_bytes());
    let side = dims.map_or(0, |(w, h)| w.max(h));
    let why = if b64 > max_base64 {
        format!("over the API's {} limit ({} as base64)", size(max_base64), size(b64))
    } else if side > max_px {
        format!("over the API's {max_px} px limit")
    } else {
        return None;
    };
    let what = match dims {
        Some((w, h)) => format!("{media} {w}\u{d7}{h} px, {}", size(image::decoded_len(data.as_bytes()))),
        None => format!("{media}, {}", size(image::decoded_len(data.as_bytes()))),
    };
    Some(format!("[image removed by transcriptd repair: {what}, {why}; {keep}]"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> String {
        use base64::Engine;
        let mut b = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        b.extend_from_slice(&w.to_be_bytes());
        b.extend_from_slice(&h.to_be_bytes());
        b.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    fn line(content: &str) -> Vec<u8> {
        format!(r#"{{"type":"user","message":{{"role":"user","content":{content}}},"uuid":"u"}}"#).into_bytes()
    }

    fn mended(content: &str, mend: Mend) -> Result<String, Unable> {
        match blocks(&line(content), &[b"message", b"content"], &mend)? {
            Edited::Line(b) => Ok(String::from_utf8(b).unwrap()),
            Edited::Gone => Ok("gone".into()),
        }
    }

    const IMAGES: Mend = Mend::Images { max_px: 8000, max_base64: 5 << 20 };

    #[test]
    fn an_image_over_the_limits_becomes_a_placeholder_in_place_and_the_rest_stays() {
        let big = format!(r#"{{"type":"image","source":{{"type":"base64","media_type":"image/png","data":"{}"}}}}"#, png(9000, 300));
        let small = format!(r#"{{"type":"image","source":{{"type":"base64","media_type":"image/png","data":"{}"}}}}"#, png(90, 30));
        let got = mended(&format!(r#"[{{"type":"text","text":"look"}}, {big},{small}]"#), IMAGES).unwrap();
        assert!(got.contains(r#"{"type":"text","text":"look"},{"type":"text","text":"[image removed by transcriptd repair: PNG 9000×300 px, 33 bytes, over the API's 8000 px limit; the original line is kept in the repair's rejects file]"},"#), "{got}");
        assert!(got.ends_with(&format!(r#",{small}]}},"uuid":"u"}}"#)), "{got}");
        // In a tool result's content, the image is mended inside the result.
        let got = mended(&format!(r#"[{{"type":"tool_result","tool_use_id":"t","content":[{{"type":"text","text":"shot"}},{big}]}}]"#), IMAGES).unwrap();
        assert!(
            got.contains(r#"{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"shot"},{"type":"text","text":"[image removed"#),
            "{got}"
        );
        // Empty data; nothing to mend.
        let empty = r#"[{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":""}}]"#;
        assert!(mended(empty, IMAGES).unwrap().contains("a JPEG image with no data"));
        assert!(mended(&format!("[{small}]"), IMAGES).is_err());
        assert!(mended(&format!("[{small}]"), Mend::Images { max_px: 80, max_base64: 5 << 20 }).unwrap().contains("over the API's 80 px limit"));
    }

    #[test]
    fn thinking_and_results_move_first_and_blank_or_unsigned_blocks_go() {
        let t = r#"{"type":"thinking","thinking":"x","signature":"c2ln"}"#;
        let u = r#"{"type":"thinking","thinking":"y","signature":""}"#;
        let got = mended(&format!(r#"[{{"type":"text","text":"a"}},{t},{{"type":"tool_use","id":"c"}}]"#), Mend::ThinkingFirst).unwrap();
        assert!(got.contains(&format!(r#"[{t},{{"type":"text","text":"a"}},{{"type":"tool_use","id":"c"}}]"#)), "{got}");
        assert!(mended(&format!("[{t}]"), Mend::ThinkingFirst).is_err());
        let got = mended(&format!(r#"[{u},{t},{{"type":"text","text":"a"}}]"#), Mend::DropUnsignedThinking).unwrap();
        assert!(got.contains(&format!(r#"[{t},{{"type":"text","text":"a"}}]"#)), "{got}");
        assert_eq!(mended(&format!("[{u}]"), Mend::DropUnsignedThinking).unwrap(), "gone");
        let r = r#"{"type":"tool_result","tool_use_id":"c","content":"ok"}"#;
        let got = mended(&format!(r#"[{{"type":"text","text":"here"}},{r}]"#), Mend::ResultsFirst).unwrap();
        assert!(got.contains(&format!(r#"[{r},{{"type":"text","text":"here"}}]"#)), "{got}");
        let got = mended(r#"[{"type":"text","text":" "},{"type":"text","text":"hi"}]"#, Mend::DropBlankText).unwrap();
        assert!(got.contains(r#"[{"type":"text","text":"hi"}]"#), "{got}");
        assert_eq!(mended(r#"[{"type":"text","text":""}]"#, Mend::DropBlankText).unwrap(), "gone");
    }
}
