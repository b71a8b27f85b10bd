//! The provider API's own rules on the request the agent sends on resume, besides pairing
//! (which [`super::validator`] applies): what the Anthropic Messages API rejects in a history
//! of Claude Code or of the `anthropic` format, each finding at the line its block came from
//! and quoting the API's own error text (TRUTH.md, "The API's rules", says where each text was
//! seen and which are unconfirmed).
//!
//! Per line (from [`ApiFacts`], read with the blocks): an empty or whitespace-only `text`
//! block, a `thinking` block without its `signature`, a `thinking` block after another block of
//! the same assistant message line, a `tool_result`
//! after a block that is not one, an image over 5 MB or 8000 px, an image with empty data. Over
//! the request (the main conversation since its last compaction, what the agent sends): more
//! than 32 MiB of content, and more than 20 images with one over 2000 px. The request findings
//! are made when the stream ends ([`ApiRules::end`]), since a later compaction takes them back.
//!
//! Severity follows what the agent does: Claude Code drops empty and whitespace-only text blocks
//! of assistant messages (TRUTH.md, difference 4), so they are no finding in its files, and of
//! user messages too, filling in "(no content)" for a user message left without content
//! (measured with 2.1.332: TRUTH.md, "Repair and the agent"), so a blank user text block is a
//! warning there; every other rule is an error in both formats.

use crate::transcript::finding::{Finding, Kind, Severity};
use crate::transcript::formats::Format;
use crate::transcript::model::{ApiFacts, Message, Role};

/// The Messages API's limit on one image's base64 data, in bytes (its error: "image exceeds 5
/// MB maximum: N bytes > 5242880 bytes"; Claude Code 2.1.332 refuses to send a request with
/// an image whose `source.data` is longer, "Image base64 size (8MB) exceeds API limit (5MB)").
pub const IMAGE_MAX_BYTES: u64 = 5 * 1024 * 1024;
/// The longest side of an image the API takes.
pub const IMAGE_MAX_PX: u32 = 8000;
/// The longest side of an image when the request has more than [`MANY_IMAGES`] images.
pub const MANY_IMAGE_MAX_PX: u32 = 2000;
/// More images than this make a "many-image request".
pub const MANY_IMAGES: u64 = 20;
/// The Messages API's request size limit (32 MB, taken as MiB as its 5 MB image limit is).
pub const REQUEST_MAX_BYTES: u64 = 32 * 1024 * 1024;
/// How many images between 2000 and 8000 px are remembered for the many-image rule.
const MID_IMAGES_KEPT: usize = 64;

/// The API rules over one stream. Feed the main conversation's messages in order
/// ([`ApiRules::message`]), its compactions ([`ApiRules::compaction`]), then [`ApiRules::end`].
#[derive(Debug, Default)]
pub struct ApiRules {
    agent: bool,
    /// Whether blank text blocks are checked: known to be Anthropic's rule, not OpenAI's.
    text_rule: bool,
    /// Content bytes since the last compaction, and the line where they went over the limit.
    bytes: u64,
    over: Option<(u64, u64)>,
    images: u64,
    /// Images over 2000 px (and within 8000 px): line, block, width, height.
    mid: Vec<(u64, u16, u32, u32)>,
}

fn api_says(agent: bool) -> &'static str {
    if agent {
        "the API rejects the request Claude Code sends on resume"
    } else {
        "the API rejects the request"
    }
}

impl ApiRules {
    /// The rules for a file of `format`, or `None` when its provider's API has none here.
    pub fn new(format: Format) -> Option<Self> {
        match format {
            Format::ClaudeCode => Some(ApiRules { agent: true, text_rule: true, ..Default::default() }),
            // The two chat flavours share one reader, and a file is first taken for OpenAI's
            // until a line shows it is Anthropic's: the block rules are the same for both (OpenAI
            // chat content has none of these blocks), but a blank string content, which an
            // OpenAI assistant message with tool calls has, is only checked as a block.
            Format::Anthropic | Format::OpenAiChat => Some(ApiRules::default()),
            // Pi: pi-ai rebuilds every message in its provider's own shape before sending
            // (`convertMessages` of each provider, after `transformMessages`), so the stored
            // blocks are not what the provider's rules judge.
            // Qwen Code: its OpenAI converter builds the Chat Completions messages from Gemini
            // `Content`s (an OpenAI message has none of these blocks).
            // Gemini CLI: the Gemini API's rule on calls and responses is the pairing's own (a
            // second response, a call left without one); its blocks are parts, not these.
            // Copilot: the agent builds each request from its events in the shape of the
            // provider it is configured with (the Copilot API, or a BYOK OpenAI, Azure or
            // Anthropic one); the events hold no provider blocks to judge.
            Format::Codex | Format::Pi | Format::Qwen | Format::Gemini | Format::Copilot | Format::Dataset(_) => None,
        }
    }

    /// A compaction: the request starts again after it.
    pub fn compaction(&mut self) {
        self.bytes = 0;
        self.over = None;
        self.images = 0;
        self.mid.clear();
    }

    /// A message of the main conversation at `line`.
    pub fn message(&mut self, line: u64, m: &Message<'_>, out: &mut impl FnMut(Finding)) {
        let a: &ApiFacts = &m.api;
        let says = api_says(self.agent);
        self.bytes += a.bytes;
        if self.bytes > REQUEST_MAX_BYTES && self.over.is_none() {
            self.over = Some((line, self.bytes));
        }
        // Claude Code drops empty and whitespace-only text blocks of assistant messages
        // (TRUTH.md, difference 4): they are not in the request, so there is nothing to say.
        let dropped = !self.text_rule || (self.agent && m.role == Role::Assistant) || (!self.agent && a.string);
        if let Some((i, whitespace)) = a.empty_text.filter(|_| !dropped) {
            let api =
                if whitespace { "messages: text content blocks must contain non-whitespace text" } else { "messages: text content blocks must be non-empty" };
            let what = if whitespace { "only whitespace" } else { "empty" };
            let mut f = Finding::new(line, Kind::EmptyText, format!("text block content.{i} is {what}: {says} (\"{api}\")"));
            if self.agent {
                f.severity = Severity::Warning;
                f.message = format!(
                    "text block content.{i} of a user message is {what}: the API rejects such a block (\"{api}\"), but Claude Code drops blank text blocks of user messages on resume, and sends \"(no content)\" for one left without content (measured with 2.1.332), so the request it sends has none; repair leaves it"
                );
            }
            out(f);
        }
        if m.role == Role::Assistant {
            // Within the line only. Across the lines of one `message.id` (Claude Code writes one
            // block per line) the rule would also hold, but repair joins turns by giving a line
            // another's id, and would then make the finding itself: not checked yet.
            // Claude Code only: in the chat formats repair merges consecutive assistant
            // messages into one line, and would make the finding itself (not handled yet).
            if let Some(i) = a.thinking_after.filter(|_| self.agent) {
                out(Finding::new(
                    line,
                    Kind::ThinkingNotFirst,
                    format!("thinking block content.{i} comes after a text or tool_use block of its assistant message: {says} (\"messages.N.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`\")"),
                ));
            }
            if let Some(i) = a.unsigned_thinking {
                out(Finding::new(
                    line,
                    Kind::UnsignedThinking,
                    format!("thinking block content.{i} has no signature: {says} (\"messages.N.content.{i}.thinking.signature: Field required\")"),
                ));
            }
        }
        if let Some(i) = a.result_after {
            out(Finding::new(
                line,
                Kind::ResultNotFirst,
                format!("tool_result block content.{i} follows a block that is not a tool_result: {says} (\"messages.N: Did not find 1 `tool_result` block(s) at the beginning of this message. Messages following `tool_use` blocks must begin with a matching number of `tool_result` blocks.\")"),
            ));
        }
        if let Some(i) = a.empty_image {
            out(Finding::new(line, Kind::EmptyImage, format!("image in content.{i} has empty base64 data: {says}")));
        }
        if let Some((i, n)) = a.image_bytes.filter(|&(_, n)| n > IMAGE_MAX_BYTES) {
            out(Finding::new(
                line,
                Kind::ImageTooLarge,
                format!("image in content.{i} is {n} bytes of base64: {says} (\"messages.N.content.{i}.image.source.base64: image exceeds 5 MB maximum: {n} bytes > {IMAGE_MAX_BYTES} bytes\")"),
            ));
        }
        self.images += a.images as u64;
        if let Some((i, w, h)) = a.image_px {
            if w.max(h) > IMAGE_MAX_PX {
                out(Finding::new(
                    line,
                    Kind::ImageTooLarge,
                    format!("image in content.{i} is {w}x{h} pixels: {says} (\"messages.N.content.{i}.image.source.base64.data: At least one of the image dimensions exceed max allowed size: {IMAGE_MAX_PX} pixels\")"),
                ));
            } else if w.max(h) > MANY_IMAGE_MAX_PX && self.mid.len() < MID_IMAGES_KEPT {
                self.mid.push((line, i, w, h));
            }
        }
    }

    /// What the request as a whole breaks, once the stream ended (or as if it ended now).
    pub fn end(&self, out: &mut impl FnMut(Finding)) {
        let says = api_says(self.agent);
        if self.images > MANY_IMAGES {
            for &(line, i, w, h) in &self.mid {
                out(Finding::new(
                    line,
                    Kind::ImageTooLarge,
                    format!(
                        "image in content.{i} is {w}x{h} pixels and the request has {} images: {says} (\"messages.N.content.{i}.image.source.base64.data: At least one of the image dimensions exceed max allowed size for many-image requests: {MANY_IMAGE_MAX_PX} pixels\")",
                        self.images
                    ),
                ));
            }
        }
        if let Some((line, _)) = self.over {
            out(Finding::new(
                line,
                Kind::RequestTooLarge,
                format!(
                    "the history since the last compaction goes over the API's 32 MB request limit at this line ({} bytes of content in all): {says} (413 request_too_large: \"Request exceeds the maximum size\")",
                    self.bytes
                ),
            ));
        }
    }
}
