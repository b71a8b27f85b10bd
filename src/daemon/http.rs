//! The prometheus sink's listener: `/metrics` and `/health` over HTTP/1.1.
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
//!   that the waiting connection is served (and gets its 503), instead of spinning.

use super::health::Health;
use bytes::Bytes;
use http_body_util::Full;
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

/// Connection limits, changeable while serving (a reload).
#[derive(Debug)]
struct Limits {
    max_connections: AtomicUsize,
    request_timeout_ms: AtomicU64,
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
    pub fn bind(addr: SocketAddr, max_connections: usize, request_timeout: Duration, health: Arc<Health>, handle: PrometheusHandle) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        if !addr.ip().is_loopback() {
            warn!(%addr, "the metrics listener is not on a loopback address: /metrics and /health are reachable from the network; restrict access (firewall, NetworkPolicy) or bind 127.0.0.1");
        }
        let limits = Arc::new(Limits {
            max_connections: AtomicUsize::new(max_connections.max(1)),
            request_timeout_ms: AtomicU64::new(request_timeout.as_millis() as u64),
        });
        let stop = CancellationToken::new();
        let thread = {
            let (limits, stop) = (limits.clone(), stop.clone());
            std::thread::Builder::new().name("metrics".into()).spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => return warn!(error = %e, "cannot start the metrics listener's runtime"),
                };
                rt.block_on(serve(listener, limits, health, handle, stop));
            })?
        };
        info!(addr = %local, max_connections, request_timeout = ?request_timeout, "serving /metrics and /health");
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
    pub fn set_limits(&self, max_connections: usize, request_timeout: Duration) {
        self.limits.max_connections.store(max_connections.max(1), Ordering::Relaxed);
        self.limits.request_timeout_ms.store(request_timeout.as_millis() as u64, Ordering::Relaxed);
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

async fn serve(listener: std::net::TcpListener, limits: Arc<Limits>, health: Arc<Health>, handle: PrometheusHandle, stop: CancellationToken) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => return warn!(error = %e, "metrics listener failed"),
    };
    let live: Live = Arc::default();
    let mut reserve = std::fs::File::open("/dev/null").ok();
    let mut next_id = 0u64;
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((stream, _)) => {
                next_id += 1;
                let token = CancellationToken::new();
                {
                    let mut l = live.lock().unwrap_or_else(|e| e.into_inner());
                    while l.len() >= limits.max_connections.load(Ordering::Relaxed) {
                        match l.pop_front() {
                            Some((_, oldest)) => oldest.cancel(),
                            None => break,
                        }
                    }
                    l.push_back((next_id, token.clone()));
                }
                let timeout = Duration::from_millis(limits.request_timeout_ms.load(Ordering::Relaxed));
                tokio::spawn(connection(stream, next_id, token, timeout, live.clone(), health.clone(), handle.clone()));
                if reserve.is_none() {
                    reserve = std::fs::File::open("/dev/null").ok();
                }
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                // Release the reserve: the next accept takes its slot.
                if reserve.take().is_some() {
                    continue;
                }
                debug!(error = %e, "no descriptor for a metrics connection");
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
                reserve = std::fs::File::open("/dev/null").ok();
            }
            Err(e) => {
                debug!(error = %e, "metrics accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    for (_, t) in live.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        t.cancel();
    }
}

async fn connection(
    stream: tokio::net::TcpStream,
    id: u64,
    token: CancellationToken,
    timeout: Duration,
    live: Live,
    health: Arc<Health>,
    handle: PrometheusHandle,
) {
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let r = respond(&req, &health, &handle);
        std::future::ready(Ok::<_, std::convert::Infallible>(r))
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.keep_alive(false).timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(timeout);
    let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    tokio::select! {
        _ = conn => {}
        _ = token.cancelled() => {}
        _ = tokio::time::sleep(timeout) => {}
    }
    live.lock().unwrap_or_else(|e| e.into_inner()).retain(|(i, _)| *i != id);
}

fn respond(req: &Request<Incoming>, health: &Health, handle: &PrometheusHandle) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, content_type: &'static str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type));
        r
    };
    const TEXT: &str = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(StatusCode::METHOD_NOT_ALLOWED, TEXT, "GET only\n".into());
    }
    match req.uri().path() {
        "/metrics" => reply(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", handle.render()),
        "/health" => match health.status() {
            Ok(()) => reply(StatusCode::OK, TEXT, "ok\n".into()),
            Err(why) => reply(StatusCode::SERVICE_UNAVAILABLE, TEXT, why),
        },
        _ => reply(StatusCode::NOT_FOUND, TEXT, "not found: /metrics and /health are served\n".into()),
    }
}
