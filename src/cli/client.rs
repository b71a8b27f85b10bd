//! The HTTP client of the verbs that watch a running daemon (`tap`, `top`): one GET per
//! connection to the daemon's listener (the prometheus sink's address), as the listener
//! serves them.

use anyhow::Context;
use bytes::Bytes;
use http_body_util::BodyExt;
use std::time::Duration;

/// The default address: the prometheus sink's.
pub const DEFAULT_ADDR: &str = "127.0.0.1:9464";

/// `host:port`, or a URL `http://host:port[/]`, as `host:port`.
pub fn authority(addr: &str) -> &str {
    addr.strip_prefix("http://").unwrap_or(addr).trim_end_matches('/')
}

/// The bearer token in `file` (its first line), for a listener with a `token_file`.
pub fn read_token(file: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    let Some(file) = file else { return Ok(None) };
    let text = std::fs::read_to_string(file).with_context(|| format!("reading the token file {}", file.display()))?;
    let token = text.lines().next().unwrap_or("").trim().to_owned();
    anyhow::ensure!(!token.is_empty(), "the token file {} is empty", file.display());
    Ok(Some(token))
}

/// Sends `GET path` to `addr` (with `Authorization: Bearer <token>` when given) and returns the
/// response (its body unread).
pub async fn get(addr: &str, path: &str, token: Option<&str>) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
    let host = authority(addr);
    let stream = tokio::net::TcpStream::connect(host)
        .await
        .with_context(|| format!("cannot connect to {host}: is `transcriptd run` serving there (a prometheus sink, or --metrics-addr)?"))?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.context("HTTP handshake")?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = hyper::Request::get(path).header(hyper::header::HOST, host);
    if let Some(t) = token {
        req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let req = req.body(http_body_util::Empty::<Bytes>::new())?;
    let resp = send.send_request(req).await.with_context(|| format!("GET {path} from {host}"))?;
    if !resp.status().is_success() {
        let status = resp.status();
        let body = http_body_util::Limited::new(resp.into_body(), 64 << 10).collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        anyhow::bail!("GET {path} from {host}: {status}: {}", String::from_utf8_lossy(&body).trim());
    }
    Ok(resp)
}

/// The longest body [`get_text`] reads: the daemon's `/metrics` and `/stats` are KiB; a peer
/// that sends more is not the daemon.
pub const MAX_BODY_BYTES: usize = 16 << 20;

/// The whole body of `GET path`, within `timeout` and [`MAX_BODY_BYTES`].
pub async fn get_text(addr: &str, path: &str, token: Option<&str>, timeout: Duration) -> anyhow::Result<String> {
    let fetch = async {
        let resp = get(addr, path, token).await?;
        let body = http_body_util::Limited::new(resp.into_body(), MAX_BODY_BYTES);
        let body = body
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    anyhow::anyhow!("an answer of over {} MiB: not the daemon's", MAX_BODY_BYTES >> 20)
                } else {
                    anyhow::anyhow!("reading the answer: {e}")
                }
            })?
            .to_bytes();
        Ok::<_, anyhow::Error>(String::from_utf8_lossy(&body).into_owned())
    };
    tokio::time::timeout(timeout, fetch).await.with_context(|| format!("GET {path} from {}: no answer within {timeout:?}", authority(addr)))?
}

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Its `event:` type (`message` when none).
    pub kind: String,
    /// Its `data:` lines, joined by newlines.
    pub data: String,
}

/// The longest event [`SseParser`] holds: a longer one (no blank line ends it) is skipped, its
/// bytes let go as they come, and counted in [`SseParser::skipped`]. The daemon's records are
/// a few KiB; only a hostile or broken peer sends more.
pub const MAX_EVENT_BYTES: usize = 1 << 20;

/// Splits a stream of Server-Sent Events: bytes in, whole events out (comments and
/// heartbeats skipped). Holds at most [`MAX_EVENT_BYTES`] (and a chunk) of an unfinished
/// event, and looks for its end only in the bytes that came since it last looked.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    /// How much of `buf` holds no event end (`\n\n`), but for its last byte.
    searched: usize,
    /// Inside an over-long event: its bytes are dropped until its end.
    skipping: bool,
    /// Over-long events skipped.
    pub skipped: u64,
}

impl SseParser {
    /// Takes `chunk`; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Event> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        let mut start = 0;
        loop {
            // An end may straddle the chunks: look again from the last byte looked at.
            let from = self.searched.saturating_sub(1).max(start);
            let Some(i) = memchr::memmem::find(&self.buf[from..], b"\n\n") else { break };
            let end = from + i;
            let block = &self.buf[start..end];
            start = end + 2;
            self.searched = start;
            if std::mem::take(&mut self.skipping) {
                continue;
            }
            if let Some(e) = parse_event(block) {
                out.push(e);
            }
        }
        self.buf.drain(..start);
        self.searched = self.buf.len();
        if self.buf.len() > MAX_EVENT_BYTES && !self.skipping {
            self.skipping = true;
            self.skipped += 1;
        }
        if self.skipping && self.buf.len() > 1 {
            // Only the last byte matters: it may be the first `\n` of the end.
            let last = self.buf[self.buf.len() - 1];
            self.buf.clear();
            self.buf.push(last);
            self.searched = 1;
        }
        out
    }
}

fn parse_event(block: &[u8]) -> Option<Event> {
    let (mut kind, mut data): (Option<String>, Option<String>) = (None, None);
    for line in String::from_utf8_lossy(block).lines() {
        let (field, value) = line.split_once(':').map_or((line, ""), |(f, v)| (f, v.strip_prefix(' ').unwrap_or(v)));
        match field {
            "event" => kind = Some(value.to_owned()),
            "data" => match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
    data.map(|data| Event { kind: kind.unwrap_or_else(|| "message".into()), data })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_split_across_chunks() {
        let mut p = SseParser::default();
        assert!(p.push(b": transcriptd tap\n\ndata: {\"a\"").is_empty());
        let e = p.push(b":1}\n\nevent: missed\ndata: {\"missed\":3}\n\n:\n\n");
        assert_eq!(e, vec![Event { kind: "message".into(), data: "{\"a\":1}".into() }, Event { kind: "missed".into(), data: "{\"missed\":3}".into() }]);
        assert_eq!(authority("http://127.0.0.1:9464/"), "127.0.0.1:9464");
    }

    #[test]
    fn an_endless_event_is_skipped_and_the_next_one_read() {
        let mut p = SseParser::default();
        let big = vec![b'x'; 64 * 1024];
        assert!(p.push(b"data: ").is_empty());
        for _ in 0..40 {
            assert!(p.push(&big).is_empty());
            assert!(p.buf.len() <= MAX_EVENT_BYTES + big.len());
        }
        assert_eq!(p.skipped, 1);
        // Its end straddles two chunks; the next event is read.
        assert!(p.push(b"x\n").is_empty());
        assert_eq!(p.push(b"\ndata: 1\n\n"), vec![Event { kind: "message".into(), data: "1".into() }]);
        assert_eq!(p.skipped, 1);
        // Byte by byte, ends are found too.
        let mut q = SseParser::default();
        let events: Vec<Event> = b"data: a\n\ndata: b\n\n".iter().flat_map(|b| q.push(&[*b])).collect();
        assert_eq!(events.len(), 2);
    }
}
