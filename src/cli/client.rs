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

/// Sends `GET path` to `addr` and returns the response (its body unread).
pub async fn get(addr: &str, path: &str) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
    let host = authority(addr);
    let stream = tokio::net::TcpStream::connect(host)
        .await
        .with_context(|| format!("cannot connect to {host}: is `transcriptd run` serving there (a prometheus sink, or --metrics-addr)?"))?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.context("HTTP handshake")?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = hyper::Request::get(path).header(hyper::header::HOST, host).body(http_body_util::Empty::<Bytes>::new())?;
    let resp = send.send_request(req).await.with_context(|| format!("GET {path} from {host}"))?;
    if !resp.status().is_success() {
        let status = resp.status();
        let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        anyhow::bail!("GET {path} from {host}: {status}: {}", String::from_utf8_lossy(&body).trim());
    }
    Ok(resp)
}

/// The whole body of `GET path`, within `timeout`.
pub async fn get_text(addr: &str, path: &str, timeout: Duration) -> anyhow::Result<String> {
    let fetch = async {
        let resp = get(addr, path).await?;
        let body = resp.into_body().collect().await.context("reading the answer")?.to_bytes();
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

/// Splits a stream of Server-Sent Events: bytes in, whole events out (comments and
/// heartbeats skipped).
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
}

impl SseParser {
    /// Takes `chunk`; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Event> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(end) = memchr::memmem::find(&self.buf, b"\n\n") {
            let block: Vec<u8> = self.buf.drain(..end + 2).collect();
            let (mut kind, mut data): (Option<String>, Option<String>) = (None, None);
            for line in String::from_utf8_lossy(&block[..end]).lines() {
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
            if let Some(data) = data {
                out.push(Event { kind: kind.unwrap_or_else(|| "message".into()), data });
            }
        }
        out
    }
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
}
