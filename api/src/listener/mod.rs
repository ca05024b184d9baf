//! The listener `serve` answers on: a listen backlog sized for thousands of
//! node agents, a bound on open connections, the idle keep-alive and
//! header-read timeouts, the spec's error shape for the heads HTTP/1.1
//! itself refuses (414, 431), and a graceful stop.
//!
//! Each connection is in one of three phases: idle (waiting for a request),
//! reading a request head (a byte of it arrived), or busy (a request was
//! handed to the application and its answer is not written yet). Idle and
//! head-reading connections have a deadline; a busy one is bounded by the
//! request timeout of its route instead (`http::within`), or, for a watcher,
//! by the watcher limit and the stop. When the connection limit is reached,
//! the connection idle longest is closed to admit the new one, so a crowd of
//! idle sockets cannot lock out `/healthz`; only when every connection is
//! busy does a new one wait in the backlog.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use bytes::Bytes;
use clap::Args;
use futures::stream::{FuturesUnordered, StreamExt};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::settings::{duration, ConfigError};

mod watched;
use watched::Watched;

/// The connection settings of `serve`, each a flag and an environment
/// variable.
#[derive(Args, Debug, Clone)]
pub struct ConnArgs {
    /// Connections the kernel queues before they are accepted (the kernel
    /// caps it at `net.core.somaxconn`).
    #[arg(long, env = "STRATUM_LISTEN_BACKLOG", default_value = "4096")]
    pub listen_backlog: String,
    /// Open connections at most. At the limit, the connection idle longest
    /// is closed to admit a new one. It is lowered to what the process's
    /// open-file limit allows.
    #[arg(long, env = "STRATUM_MAX_CONNECTIONS", default_value = "10000")]
    pub max_connections: String,
    /// How long a client may take to send a request's line and headers,
    /// from its first byte.
    #[arg(long, env = "STRATUM_HEADER_READ_TIMEOUT", default_value = "10s")]
    pub header_read_timeout: String,
    /// How long a connection may stay open between requests.
    #[arg(long, env = "STRATUM_IDLE_TIMEOUT", default_value = "60s")]
    pub idle_timeout: String,
    /// How long a request may take, its body included; long-polls get
    /// their wait on top, event streams are bounded by the watcher limit.
    #[arg(long, env = "STRATUM_REQUEST_TIMEOUT", default_value = "30s")]
    pub request_timeout: String,
    /// Event streams and long-polls open at once, at most; beyond it a
    /// watcher is answered 503 with `Retry-After`.
    #[arg(long, env = "STRATUM_MAX_WATCHERS", default_value = "4096")]
    pub max_watchers: String,
    /// How long a stop waits for requests in flight after it ended the
    /// event streams and long-polls.
    #[arg(long, env = "STRATUM_SHUTDOWN_GRACE", default_value = "10s")]
    pub shutdown_grace: String,
}

/// What the listener enforces.
#[derive(Clone, Debug)]
pub struct ListenerConfig {
    pub backlog: u32,
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub shutdown_grace: Duration,
}

/// What the application enforces per request.
#[derive(Clone, Debug)]
pub struct RequestLimits {
    pub request_timeout: Duration,
    pub max_watchers: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(30),
            max_watchers: 4096,
        }
    }
}

impl ConnArgs {
    pub fn config(&self) -> Result<(ListenerConfig, RequestLimits), ConfigError> {
        let positive = |var: &str, v: &str| match v.trim().parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(ConfigError(format!(
                "{var} must be a whole number from 1 to {}, not `{v}`",
                u32::MAX
            ))),
        };
        Ok((
            ListenerConfig {
                backlog: positive("STRATUM_LISTEN_BACKLOG", &self.listen_backlog)?,
                max_connections: positive("STRATUM_MAX_CONNECTIONS", &self.max_connections)?
                    as usize,
                header_read_timeout: duration(
                    "STRATUM_HEADER_READ_TIMEOUT",
                    &self.header_read_timeout,
                )?,
                idle_timeout: duration("STRATUM_IDLE_TIMEOUT", &self.idle_timeout)?,
                shutdown_grace: duration("STRATUM_SHUTDOWN_GRACE", &self.shutdown_grace)?,
            },
            RequestLimits {
                request_timeout: duration("STRATUM_REQUEST_TIMEOUT", &self.request_timeout)?,
                max_watchers: positive("STRATUM_MAX_WATCHERS", &self.max_watchers)? as usize,
            },
        ))
    }
}

/// Binds `addr` with `backlog` queued connections.
pub fn bind(addr: SocketAddr, backlog: u32) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// File descriptors kept for the database, the log and the adapters.
const RESERVED_FDS: u64 = 64;

/// Raises the open-file limit to its hard limit and lowers `wanted` to
/// what that allows: accepting beyond it would fail with "too many open
/// files", which also stops every other connection's progress.
pub fn connection_limit(wanted: usize) -> usize {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut lim = getrlimit(Resource::Nofile);
    if let (Some(cur), Some(max)) = (lim.current, lim.maximum) {
        if cur < max {
            lim.current = Some(max);
            if setrlimit(Resource::Nofile, lim).is_err() {
                lim.current = Some(cur);
            }
        }
    }
    let Some(files) = lim.current else {
        return wanted;
    };
    let allowed = files.saturating_sub(RESERVED_FDS).max(files / 2).max(1) as usize;
    if allowed < wanted {
        tracing::warn!(
            wanted,
            allowed,
            open_files = files,
            "STRATUM_MAX_CONNECTIONS lowered to what the open-file limit allows"
        );
        allowed
    } else {
        wanted
    }
}

/// Lowers the watcher bound to half the connections, so watchers, which
/// hold their connections busy, always leave room for other requests.
pub fn watcher_limit(wanted: usize, max_connections: usize) -> usize {
    let allowed = (max_connections / 2).max(1);
    if wanted > allowed {
        tracing::warn!(
            wanted,
            allowed,
            max_connections,
            "STRATUM_MAX_WATCHERS lowered to half the connection limit"
        );
        allowed
    } else {
        wanted
    }
}

#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Waiting for a request since then.
    Idle(Instant),
    /// A request head's first byte arrived then.
    Head(Instant),
    /// This many requests are handed to the application.
    Busy(usize),
}

/// One open connection, as the listener and its requests see it.
struct Conn {
    phase: Mutex<Phase>,
    /// Cancelled to close the connection at once.
    close: CancellationToken,
}

impl Conn {
    fn phase(&self) -> Phase {
        *self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, f: impl FnOnce(Phase) -> Phase) {
        let mut p = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        *p = f(*p);
    }

    fn deadline(&self, cfg: &ListenerConfig) -> Option<Instant> {
        match self.phase() {
            Phase::Idle(since) => Some(since + cfg.idle_timeout),
            Phase::Head(since) => Some(since + cfg.header_read_timeout),
            Phase::Busy(_) => None,
        }
    }

    fn bytes_arrived(&self) {
        self.set(|p| match p {
            Phase::Idle(_) => Phase::Head(Instant::now()),
            other => other,
        });
    }

    fn begin(self: &Arc<Self>) -> BusyGuard {
        self.set(|p| match p {
            Phase::Busy(n) => Phase::Busy(n + 1),
            _ => Phase::Busy(1),
        });
        BusyGuard(self.clone())
    }
}

/// Holds a connection busy until the answer is written (or dropped).
///
/// Its drop wakes nothing: hyper drops an answer's body as it writes the
/// body's end, then writes and flushes what it holds, and [`Watched`] arms
/// the idle timer there: in `poll_flush` once all is written, in its
/// writes while the last bytes wait for the client. A wake here cost every
/// answer one more poll of its connection's task.
struct BusyGuard(Arc<Conn>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.set(|p| match p {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => Phase::Idle(Instant::now()),
        });
    }
}

/// The open connections.
#[derive(Default)]
struct Registry {
    open: Mutex<HashMap<u64, Arc<Conn>>>,
    next: AtomicU64,
    freed: Notify,
}

impl Registry {
    fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn insert(self: &Arc<Self>, conn: Arc<Conn>) -> Registered {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, conn);
        Registered(self.clone(), id)
    }

    /// Closes the connection that has waited longest without a request in
    /// flight; answers whether there was one.
    fn evict_longest_idle(&self) -> bool {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = open
            .values()
            .filter(|c| !c.close.is_cancelled())
            .filter_map(|c| match c.phase() {
                Phase::Idle(t) | Phase::Head(t) => Some((t, c)),
                Phase::Busy(_) => None,
            })
            .min_by_key(|(t, _)| *t);
        match oldest {
            Some((_, c)) => {
                c.close.cancel();
                true
            }
            None => false,
        }
    }

    fn all(&self) -> Vec<Arc<Conn>> {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }
}

/// Removes a connection from the registry when its task ends.
struct Registered(Arc<Registry>, u64);

impl Drop for Registered {
    fn drop(&mut self) {
        self.0
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.1);
        self.0.freed.notify_waiters();
    }
}

/// Serves `app` on `listener` until `stopping` is cancelled, then lets the
/// requests in flight finish for at most the grace period. Answers whether
/// every connection finished within it.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    cfg: ListenerConfig,
    tls: Option<Arc<crate::tls::Tls>>,
    stopping: CancellationToken,
) -> bool {
    let registry = Arc::new(Registry::default());
    let tasks = tokio_util::task::TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors or a connection reset before it was
                    // accepted: the listener itself is fine.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopping.cancelled() => break,
        };
        // At the limit, make room by closing the connection idle longest;
        // when every connection is busy, wait for one to end.
        while registry.len() >= cfg.max_connections {
            let freed = registry.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if !registry.evict_longest_idle() {
                tracing::debug!(
                    max = cfg.max_connections,
                    "every connection is busy: the next waits"
                );
            }
            tokio::select! {
                _ = freed => {}
                _ = stopping.cancelled() => break,
            }
        }
        if stopping.is_cancelled() {
            break;
        }
        let _ = stream.set_nodelay(true);
        let conn = Arc::new(Conn {
            phase: Mutex::new(Phase::Idle(Instant::now())),
            close: CancellationToken::new(),
        });
        let registered = registry.insert(conn.clone());
        tasks.spawn(connection(
            stream,
            tls.as_ref().map(|t| t.acceptor()),
            Serving {
                peer,
                conn,
                _registered: registered,
                app: app.clone(),
                cfg: cfg.clone(),
                // A token of its own that the service's stop cancels: the
                // service's token is one lock that every connection's wait
                // would share, on every core.
                stopping: stopping.child_token(),
            },
        ));
    }
    drop(listener);
    tasks.close();
    // Idle connections close at once; busy ones when their answer is written.
    for c in registry.all() {
        if !matches!(c.phase(), Phase::Busy(_)) {
            c.close.cancel();
        }
    }
    tokio::time::timeout(cfg.shutdown_grace, tasks.wait())
        .await
        .is_ok()
}

/// What serving one connection needs, whatever its stream.
struct Serving {
    peer: SocketAddr,
    conn: Arc<Conn>,
    _registered: Registered,
    app: Router,
    cfg: ListenerConfig,
    stopping: CancellationToken,
}

async fn connection(stream: TcpStream, tls: Option<tokio_rustls::TlsAcceptor>, serving: Serving) {
    let Some(acceptor) = tls else {
        return http(stream, None, serving).await;
    };
    // The handshake is bounded like a request head, and ends when the
    // connection is evicted or the service stops.
    let handshake = tokio::time::timeout(serving.cfg.header_read_timeout, acceptor.accept(stream));
    let peer = serving.peer;
    let stream = tokio::select! {
        r = handshake => match r {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::info!(%peer, error = %e, "TLS handshake refused");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake did not finish within the header-read timeout");
                return;
            }
        },
        _ = serving.conn.close.cancelled() => return,
        _ = serving.stopping.cancelled() => return,
    };
    let cert = crate::tls::ClientCertificate::of(stream.get_ref().1.peer_certificates());
    http(stream, cert, serving).await
}

/// Serves HTTP/1.1 on a connection's (plain or TLS) stream; every request
/// carries what its client certificate says, if it presented one.
async fn http<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    cert: Option<crate::tls::ClientCertificate>,
    serving: Serving,
) {
    let Serving {
        peer,
        conn,
        _registered,
        app,
        cfg,
        stopping,
    } = serving;
    let io = TokioIo::new(Watched::new(stream, conn.clone(), cfg));
    let service = {
        let conn = conn.clone();
        hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            let busy = conn.begin();
            let app = app.clone();
            if let Some(cert) = &cert {
                req.extensions_mut().insert(cert.clone());
            }
            // Where it came from: authentication failures are throttled
            // per address.
            req.extensions_mut().insert(crate::auth::Peer(peer.ip()));
            async move {
                let res = app
                    .oneshot(req.map(Body::new))
                    .await
                    .unwrap_or_else(|never: Infallible| match never {});
                Ok::<_, Infallible>(res.map(|body| Body::new(Held { body, _busy: busy })))
            }
        })
    };
    let served = hyper::server::conn::http1::Builder::new()
        .header_read_timeout(None)
        .serve_connection(io, service);
    tokio::pin!(served);
    // What ends the connection early: its eviction (at once) or the
    // service's stop (gracefully). Watched in a set that polls them only
    // when one of them wakes it, not each time the connection's task runs
    // (a few times a request): polling a token's `cancelled()` takes two
    // locks, the token's (tokio-rs/tokio#7775) and its `Notify`'s. Such
    // polls, these and the long-polls', were 3.8 % of the server's samples
    // as 5,000 agents' long-polls were answered (`docs/benchmarks.md`).
    let mut ends = FuturesUnordered::new();
    ends.push(end(conn.close.clone(), stopping));
    let result = tokio::select! {
        r = served.as_mut() => r,
        Some(why) = ends.next() => match why {
            End::Evicted => return,
            End::Stopping => {
                served.as_mut().graceful_shutdown();
                tokio::select! {
                    r = served.as_mut() => r,
                    _ = conn.close.cancelled() => return,
                }
            }
        },
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended");
    }
}

/// Why a connection ends before its client closes it.
enum End {
    /// Closed at once ([`Conn::close`]): evicted, or idle at the stop.
    Evicted,
    /// The service stops: the answer in flight is written first.
    Stopping,
}

/// Waits for the first of a connection's ends.
async fn end(close: CancellationToken, stopping: CancellationToken) -> End {
    tokio::select! {
        biased;
        _ = close.cancelled() => End::Evicted,
        _ = stopping.cancelled() => End::Stopping,
    }
}

/// An answer's body that keeps its connection busy until it is written.
struct Held {
    body: Body,
    _busy: BusyGuard,
}

impl hyper::body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
