//! The prometheus sink's listener: `/metrics`, `/health`, `/stats` and `/tap` over HTTP/1.1.
//!
//! It runs on a thread of its own (with its own small runtime), so that it answers while the
//! daemon's loop is busy or stuck — that is when `/health` matters — and it outlives
//! configuration reloads (a reload that keeps the address keeps the listener). Hostile clients
//! cannot take it down or starve the daemon:
//! - at most `max_connections` connections are served at once; a new one beyond that closes the
//!   oldest (an idle or slow one: a scrape takes milliseconds), so a probe gets through a flood;
//! - a connection lives at most `request_timeout`: its request head must arrive, and its
//!   response be sent, within it (no keep-alive: one request per connection);
//! - when `accept` fails for want of descriptors, a descriptor held in reserve is released so
//!   that the waiting connection is served (and gets its 503), instead of spinning;
//! - a `/tap` client (a stream of Server-Sent Events, see [`super::tap`]) leaves the
//!   connections above once its request is read: at most `tap_clients` are served at once
//!   (one more gets 503), a scrape never closes one, and one that leaves what waits for it
//!   untaken for `request_timeout` (it stopped reading) is closed. A comment line every
//!   [`HEARTBEAT`] finds the clients that went away while no record came.

use super::health::Health;
use super::tap::{Subscription, Tap, TapFilter};
use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use metrics_exporter_prometheus::PrometheusHandle;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// How often a `/tap` stream says it is alive when no record comes.
pub const HEARTBEAT: Duration = Duration::from_secs(5);

/// Connection limits, changeable while serving (a reload).
#[derive(Debug)]
struct Limits {
    max_connections: AtomicUsize,
    request_timeout_ms: AtomicU64,
    tap_clients: AtomicUsize,
    tap_buffer: AtomicUsize,
    token: Mutex<Option<Arc<str>>>,
}

/// The limits of a listener (`[[sinks]] type = "prometheus"`).
#[derive(Debug, Clone)]
pub struct ServerLimits {
    /// Connections at once, `/tap` clients aside; one more closes the oldest.
    pub max_connections: usize,
    /// Time a connection has for its request and answer; a `/tap` client, to take what waits.
    pub request_timeout: Duration,
    /// `/tap` clients at once.
    pub tap_clients: usize,
    /// Records a `/tap` client's queue holds.
    pub tap_buffer: usize,
    /// The bearer token every path but `/health` asks for, if any.
    pub token: Option<Arc<str>>,
}

impl Limits {
    fn store(&self, l: &ServerLimits) {
        self.max_connections.store(l.max_connections.max(1), Ordering::Relaxed);
        self.request_timeout_ms.store(l.request_timeout.as_millis() as u64, Ordering::Relaxed);
        self.tap_clients.store(l.tap_clients, Ordering::Relaxed);
        self.tap_buffer.store(l.tap_buffer.max(1), Ordering::Relaxed);
        *self.token.lock().unwrap_or_else(|e| e.into_inner()) = l.token.clone();
    }

    /// Whether `req` may see what is behind the token: no token is set, or it carries it.
    fn admits(&self, req: &Request<Incoming>) -> bool {
        let Some(token) = self.token.lock().unwrap_or_else(|e| e.into_inner()).clone() else { return true };
        let given = req.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("");
        // The same time whatever the guess: every byte compared, lengths included.
        let (a, b) = (given.as_bytes(), token.as_bytes());
        let mut diff = a.len() ^ b.len();
        for i in 0..a.len().max(b.len()) {
            diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0));
        }
        diff == 0
    }
}

/// A running listener. Dropping it stops it.
#[derive(Debug)]
pub struct MetricsServer {
    configured: SocketAddr,
    local: SocketAddr,
    limits: Arc<Limits>,
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` now (so that a port in use is an error here) and serves on a thread.
    pub fn bind(addr: SocketAddr, l: ServerLimits, health: Arc<Health>, handle: PrometheusHandle, tap: Arc<Tap>) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        if !addr.ip().is_loopback() {
            warn!(%addr, "the metrics listener is not on a loopback address: /metrics, /health, /stats and /tap are reachable from the network; restrict access (firewall, NetworkPolicy) or bind 127.0.0.1");
        }
        let limits = Arc::new(Limits {
            max_connections: AtomicUsize::new(0),
            request_timeout_ms: AtomicU64::new(0),
            tap_clients: AtomicUsize::new(0),
            tap_buffer: AtomicUsize::new(0),
            token: Mutex::new(None),
        });
        limits.store(&l);
        let stop = CancellationToken::new();
        let thread = {
            let (limits, stop) = (limits.clone(), stop.clone());
            std::thread::Builder::new().name("metrics".into()).spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => return warn!(error = %e, "cannot start the metrics listener's runtime"),
                };
                rt.block_on(serve(listener, limits, health, handle, tap, stop));
            })?
        };
        info!(addr = %local, max_connections = l.max_connections, request_timeout = ?l.request_timeout, tap_clients = l.tap_clients, token = l.token.is_some(), "serving /metrics and /health, /stats and /tap");
        Ok(MetricsServer { configured: addr, local, limits, stop, thread: Some(thread) })
    }

    /// The address as configured (port 0 stays 0).
    pub fn configured(&self) -> SocketAddr {
        self.configured
    }

    /// The address it listens on.
    pub fn local(&self) -> SocketAddr {
        self.local
    }

    /// New limits for the connections accepted from now on.
    pub fn set_limits(&self, l: ServerLimits) {
        self.limits.store(&l);
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

type Live = Arc<Mutex<VecDeque<(u64, CancellationToken)>>>;

/// A descriptor held in reserve (`/dev/null`): when `accept` fails for want of descriptors, it
/// is traded for the waiting connection.
type Reserve = Arc<Mutex<Option<std::fs::File>>>;

/// Takes a reserve descriptor again if there is none (under the gate, so that no file open
/// takes the slot first).
fn refill(reserve: &Reserve) {
    if reserve.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
        return;
    }
    let _gate = super::fds::gate();
    let mut r = reserve.lock().unwrap_or_else(|e| e.into_inner());
    if r.is_none() {
        *r = std::fs::File::open("/dev/null").ok();
    }
}

/// What a connection task needs.
#[derive(Clone)]
struct Shared {
    live: Live,
    reserve: Reserve,
    health: Arc<Health>,
    handle: PrometheusHandle,
    tap: Arc<Tap>,
    limits: Arc<Limits>,
    /// `/tap` connections (out of `live`: a scrape never closes one), closed when the listener
    /// stops.
    taps: Live,
}

async fn serve(listener: std::net::TcpListener, limits: Arc<Limits>, health: Arc<Health>, handle: PrometheusHandle, tap: Arc<Tap>, stop: CancellationToken) {
    // The same socket, for the one accept made while holding the gate (without waiting).
    let fallback = listener.try_clone().ok();
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => return warn!(error = %e, "metrics listener failed"),
    };
    let shared = Shared { live: Arc::default(), reserve: Arc::default(), health, handle, tap, limits: limits.clone(), taps: Arc::default() };
    refill(&shared.reserve);
    let mut next_id = 0u64;
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            r = listener.accept() => r,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                // Trade the reserve for the waiting connection, with no file open racing for
                // the slot.
                let traded = {
                    let _gate = super::fds::gate();
                    let had = shared.reserve.lock().unwrap_or_else(|e| e.into_inner()).take().is_some();
                    if had {
                        fallback.as_ref().map(std::net::TcpListener::accept)
                    } else {
                        None
                    }
                };
                match traded.map(|r| r.and_then(|(s, _)| s.set_nonblocking(true).and_then(|()| tokio::net::TcpStream::from_std(s)))) {
                    Some(Ok(s)) => s,
                    _ => {
                        debug!(error = %e, "no descriptor for a metrics connection");
                        tokio::select! {
                            _ = stop.cancelled() => break,
                            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                        }
                        refill(&shared.reserve);
                        continue;
                    }
                }
            }
            Err(e) => {
                debug!(error = %e, "metrics accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        next_id += 1;
        let token = CancellationToken::new();
        {
            let mut l = shared.live.lock().unwrap_or_else(|e| e.into_inner());
            while l.len() >= limits.max_connections.load(Ordering::Relaxed) {
                match l.pop_front() {
                    Some((_, oldest)) => oldest.cancel(),
                    None => break,
                }
            }
            l.push_back((next_id, token.clone()));
        }
        let timeout = Duration::from_millis(limits.request_timeout_ms.load(Ordering::Relaxed));
        tokio::spawn(connection(stream, next_id, token, timeout, shared.clone()));
        refill(&shared.reserve);
    }
    for (_, t) in shared.live.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        t.cancel();
    }
    // Taps end their streams (their connections leave the list as they close); a little while
    // at most.
    let taps: Vec<CancellationToken> = shared.taps.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(_, t)| t.clone()).collect();
    for t in &taps {
        t.cancel();
    }
    let until = tokio::time::Instant::now() + Duration::from_millis(300);
    while !shared.taps.lock().unwrap_or_else(|e| e.into_inner()).is_empty() && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn connection(stream: tokio::net::TcpStream, id: u64, token: CancellationToken, timeout: Duration, shared: Shared) {
    // The `/tap` client this connection became, if it did.
    let tapped: Arc<Mutex<Option<Arc<super::tap::Client>>>> = Arc::default();
    let service = {
        let (shared, tapped, token) = (shared.clone(), tapped.clone(), token.clone());
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let r = respond(&req, &shared, id, &token, &tapped);
            std::future::ready(Ok::<_, std::convert::Infallible>(r))
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.keep_alive(false).timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(timeout);
    let blocked = Arc::new(Blocked::default());
    let io = Watched { inner: stream, blocked: blocked.clone() };
    let mut conn = Box::pin(builder.serve_connection(hyper_util::rt::TokioIo::new(io), service));
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = conn.as_mut() => break,
            _ = token.cancelled() => {
                // A tap's stream ends on the same token: its last chunk goes out, and the
                // client sees the stream end rather than a cut connection.
                if tapped.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
                    let _ = tokio::time::timeout(Duration::from_millis(200), conn.as_mut()).await;
                }
                break;
            }
            _ = &mut deadline => {
                // A tap client lives while it takes what waits for it.
                let client = tapped.lock().unwrap_or_else(|e| e.into_inner()).clone();
                match client {
                    Some(c) if !c.stalled(timeout) && !blocked.longer_than(timeout) => deadline.as_mut().reset(tokio::time::Instant::now() + (timeout / 4).max(Duration::from_millis(10))),
                    Some(_) => {
                        debug!("a /tap client took nothing for the request timeout; closing it");
                        break;
                    }
                    None => break,
                }
            }
        }
    }
    shared.live.lock().unwrap_or_else(|e| e.into_inner()).retain(|(i, _)| *i != id);
    shared.taps.lock().unwrap_or_else(|e| e.into_inner()).retain(|(i, _)| *i != id);
    // The descriptor goes back to the reserve if it was taken from it, before a file open can
    // take it.
    let _gate = super::fds::gate();
    drop(conn);
    let mut r = shared.reserve.lock().unwrap_or_else(|e| e.into_inner());
    if r.is_none() {
        *r = std::fs::File::open("/dev/null").ok();
    }
}

/// Since when a connection's writes have been refused (the peer's window is full: it stopped
/// reading); 0 while they go through.
#[derive(Debug, Default)]
struct Blocked {
    since_ms: AtomicU64,
}

impl Blocked {
    fn now_ms() -> u64 {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed().as_millis() as u64 + 1
    }

    fn longer_than(&self, d: Duration) -> bool {
        let since = self.since_ms.load(Ordering::Relaxed);
        since != 0 && Self::now_ms().saturating_sub(since) > d.as_millis() as u64
    }
}

/// A connection's stream, noting when its writes block (what tells a `/tap` client that
/// stopped reading).
struct Watched {
    inner: tokio::net::TcpStream,
    blocked: Arc<Blocked>,
}

impl tokio::io::AsyncRead for Watched {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Watched {
    fn poll_write(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>, buf: &[u8]) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        match &r {
            std::task::Poll::Pending => {
                let _ = self.blocked.since_ms.compare_exchange(0, Blocked::now_ms(), Ordering::Relaxed, Ordering::Relaxed);
            }
            std::task::Poll::Ready(_) => self.blocked.since_ms.store(0, Ordering::Relaxed),
        }
        r
    }

    fn poll_flush(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

type Body = UnsyncBoxBody<Bytes, std::convert::Infallible>;

/// A `/tap` answer: an SSE stream of what the client's queue takes, with a comment line every
/// [`HEARTBEAT`] when nothing comes. The subscription ends when the body is dropped.
fn tap_stream(sub: Subscription, end: CancellationToken) -> Body {
    let first = Bytes::from_static(b": transcriptd tap\n\n");
    let stream = futures_util::stream::unfold((sub, Some(first)), move |(sub, first)| {
        let end = end.clone();
        async move {
            if let Some(f) = first {
                return Some((Ok(hyper::body::Frame::data(f)), (sub, None)));
            }
            loop {
                let items = sub.client.take();
                if !items.is_empty() {
                    let mut out = Vec::with_capacity(items.len() * 256);
                    for i in &items {
                        i.write_sse(&mut out);
                    }
                    return Some((Ok(hyper::body::Frame::data(Bytes::from(out))), (sub, None)));
                }
                tokio::select! {
                    () = sub.client.ready() => {}
                    () = end.cancelled() => return None,
                    () = tokio::time::sleep(HEARTBEAT) => return Some((Ok(hyper::body::Frame::data(Bytes::from_static(b":\n\n"))), (sub, None))),
                }
            }
        }
    });
    BodyExt::boxed_unsync(StreamBody::new(stream))
}

fn respond(req: &Request<Incoming>, shared: &Shared, id: u64, token: &CancellationToken, tapped: &Mutex<Option<Arc<super::tap::Client>>>) -> Response<Body> {
    let reply = |status: StatusCode, content_type: &'static str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)).boxed_unsync());
        *r.status_mut() = status;
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type));
        r
    };
    const TEXT: &str = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(StatusCode::METHOD_NOT_ALLOWED, TEXT, "GET only\n".into());
    }
    let path = req.uri().path();
    if path != "/health" && !shared.limits.admits(req) {
        let mut r = reply(StatusCode::UNAUTHORIZED, TEXT, "a bearer token is needed (the prometheus sink's token_file; tap and top: --token-file)\n".into());
        r.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, hyper::header::HeaderValue::from_static("Bearer"));
        return r;
    }
    match path {
        "/metrics" => reply(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", shared.handle.render()),
        "/health" => match shared.health.status() {
            Ok(()) => reply(StatusCode::OK, TEXT, "ok\n".into()),
            Err(why) => reply(StatusCode::SERVICE_UNAVAILABLE, TEXT, why),
        },
        "/stats" => reply(StatusCode::OK, "application/json", serde_json::to_string(&*shared.tap.stats()).unwrap_or_default()),
        "/tap" => {
            let filter = match TapFilter::parse(req.uri().query().unwrap_or("")) {
                Ok(f) => f,
                Err(e) => return reply(StatusCode::BAD_REQUEST, TEXT, format!("{e}\n")),
            };
            let (max, buffer) = (shared.limits.tap_clients.load(Ordering::Relaxed), shared.limits.tap_buffer.load(Ordering::Relaxed));
            let Some(sub) = shared.tap.subscribe(filter, buffer, max) else {
                return reply(StatusCode::SERVICE_UNAVAILABLE, TEXT, format!("{max} /tap clients are connected already (tap_clients)\n"));
            };
            // Out of the connections a new one may close, into the taps.
            shared.live.lock().unwrap_or_else(|e| e.into_inner()).retain(|(i, _)| *i != id);
            shared.taps.lock().unwrap_or_else(|e| e.into_inner()).push_back((id, token.clone()));
            *tapped.lock().unwrap_or_else(|e| e.into_inner()) = Some(sub.client.clone());
            if req.method() == Method::HEAD {
                return reply(StatusCode::OK, "text/event-stream", String::new());
            }
            let mut r = Response::new(tap_stream(sub, token.clone()));
            let h = r.headers_mut();
            h.insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("text/event-stream"));
            h.insert(hyper::header::CACHE_CONTROL, hyper::header::HeaderValue::from_static("no-cache"));
            r
        }
        _ => reply(StatusCode::NOT_FOUND, TEXT, "not found: /metrics, /health, /stats and /tap are served\n".into()),
    }
}
