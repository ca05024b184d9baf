//! A connection's socket as hyper sees it: a read, a flush, or a write
//! that waits for the client ends the connection past the phase's
//! deadline; the heads HTTP/1.1 itself refuses get an error body in the
//! spec's shape; and after such a refusal the close lingers, so the
//! refusal is not lost to a reset.

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::{Conn, ListenerConfig, Phase};

/// A connection's socket, which ends reads past the phase's deadline and
/// gives the heads HTTP/1.1 itself refuses (never handed to the
/// application, so without its `x-request-id`) an error body in the
/// spec's shape.
pub(super) struct Watched<S> {
    io: S,
    conn: Arc<Conn>,
    cfg: ListenerConfig,
    timer: Pin<Box<Sleep>>,
    /// The answer written instead of the refusal of an unreadable head.
    refusal: Option<(Vec<u8>, usize)>,
    /// After a refusal, the close lingers until then, and how much of what
    /// the client still sends it has read.
    linger: Option<(Pin<Box<Sleep>>, usize)>,
}

/// The most a lingering close reads of what a refused client still sends.
const LINGER_BYTES: usize = 1 << 20;

impl<S: AsyncRead + AsyncWrite + Unpin> Watched<S> {
    pub(super) fn new(io: S, conn: Arc<Conn>, cfg: ListenerConfig) -> Self {
        Self {
            io,
            conn,
            timer: Box::pin(tokio::time::sleep(cfg.idle_timeout)),
            cfg,
            refusal: None,
            linger: None,
        }
    }
}

/// Whether the bytes about to be written are HTTP/1.1's own refusal of a
/// head it could not read: a response head without the `x-request-id`
/// every answer of the application carries.
fn refuses(first: &[u8]) -> bool {
    // `100 Continue` is hyper's too, and must pass.
    if !first.starts_with(b"HTTP/1.") || !matches!(first.get(9), Some(b'4' | b'5')) {
        return false;
    }
    let head = first
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(first, |end| &first[..end]);
    !head
        .to_ascii_lowercase()
        .windows(15)
        .any(|w| w == b"\r\nx-request-id:")
}

impl<S: AsyncRead + AsyncWrite + Unpin> Watched<S> {
    /// The error that ends the connection once its phase's deadline has
    /// passed (there is none while it is busy); until then the timer is
    /// armed at the deadline, to wake the connection's task there.
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        let deadline = self.conn.deadline(&self.cfg)?;
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        self.timer.as_mut().poll(cx).is_ready().then(|| {
            let what = match self.conn.phase() {
                Phase::Head(_) => "the request head did not arrive within the header-read timeout",
                _ => "the connection was idle past the idle timeout",
            };
            io::Error::new(io::ErrorKind::TimedOut, what)
        })
    }

    /// A write that waits for the client ends the connection past the
    /// phase's deadline: an answer's last bytes a client does not read
    /// keep it open no longer than it may stay idle (or, once the client
    /// has sent the next request's first bytes, than a head may take).
    fn unless_expired(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match written {
            Poll::Pending => self
                .poll_expired(cx)
                .map_or(Poll::Pending, |e| Poll::Ready(Err(e))),
            done => done,
        }
    }

    /// Writes the replacement answer; `Ready` once all of it is written.
    fn poll_refusal(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some((bytes, written)) = &mut self.refusal else {
            return Poll::Ready(Ok(()));
        };
        while *written < bytes.len() {
            match Pin::new(&mut self.io).poll_write(cx, &bytes[*written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *written += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// The answer to a head that could not be read, in the spec's error shape.
fn refusal(head: &[u8]) -> Vec<u8> {
    use stratum_domain::ErrorCode;
    let status = head
        .get(9..12)
        .and_then(|s| std::str::from_utf8(s).ok())
        .and_then(|s| s.parse::<u16>().ok())
        .and_then(|s| axum::http::StatusCode::from_u16(s).ok())
        .unwrap_or(axum::http::StatusCode::BAD_REQUEST);
    let (code, message) = match status.as_u16() {
        414 => (
            ErrorCode::UriTooLong,
            "The request line is longer than the server reads; send the parameters in fewer bytes.",
        ),
        431 => (
            ErrorCode::HeadersTooLarge,
            "The request's headers are larger than the server reads (about 400 KiB, 100 headers).",
        ),
        _ => (
            ErrorCode::InvalidInput,
            "The request could not be read as HTTP/1.1.",
        ),
    };
    let id = uuid::Uuid::new_v4().to_string();
    let body = crate::error::ApiError::new(code, message)
        .body(&id)
        .to_string();
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nx-request-id: {id}\r\nconnection: close\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes()
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(expired) = this.poll_expired(cx) {
            return Poll::Ready(Err(expired));
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.conn.bytes_arrived();
        }
        read
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.refusal.is_none() && refuses(buf) {
            this.refusal = Some((refusal(buf), 0));
        }
        if this.refusal.is_some() {
            // HTTP/1.1's own answer is dropped; ours is written instead.
            return this.poll_refusal(cx).map_ok(|()| buf.len());
        }
        let written = Pin::new(&mut this.io).poll_write(cx, buf);
        this.unless_expired(cx, written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| b);
        if this.refusal.is_none() && refuses(first) {
            this.refusal = Some((refusal(first), 0));
        }
        if this.refusal.is_some() {
            let total = bufs.iter().map(|b| b.len()).sum();
            return this.poll_refusal(cx).map_ok(|()| total);
        }
        let written = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.unless_expired(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    /// Also arms the idle timer once an answer is written: hyper drops an
    /// answer's body as it writes the body's end, which ends the busy
    /// phase, then flushes (an answer whose last bytes wait for the client
    /// arms it in `poll_write`), and reads the next head only when woken.
    /// After a refusal the lingering close has its own bound.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_refusal(cx))?;
        std::task::ready!(Pin::new(&mut this.io).poll_flush(cx))?;
        match this.refusal {
            None => this
                .poll_expired(cx)
                .map_or(Poll::Ready(Ok(())), |e| Poll::Ready(Err(e))),
            Some(_) => Poll::Ready(Ok(())),
        }
    }

    /// A refused head is often not read whole (a header too large for the
    /// server's buffer, a request line too long), and a socket closed with
    /// unread bytes is reset, which throws away the refusal still on its
    /// way. So after a refusal the write side is closed first, and what the
    /// client still sends is read and dropped until it closes too, or
    /// [`LINGER_BYTES`] or the header-read timeout pass: a lingering close,
    /// as HTTP servers do.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_refusal(cx))?;
        if this.refusal.is_none() {
            return Pin::new(&mut this.io).poll_shutdown(cx);
        }
        if this.linger.is_none() {
            std::task::ready!(Pin::new(&mut this.io).poll_shutdown(cx))?;
            let until = Instant::now() + this.cfg.header_read_timeout;
            this.linger = Some((Box::pin(tokio::time::sleep_until(until)), 0));
        }
        let Some((until, drained)) = this.linger.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let mut scratch = [0u8; 8192];
        loop {
            if until.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ok(()));
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut this.io).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                    *drained += buf.filled().len();
                    if *drained >= LINGER_BYTES {
                        return Poll::Ready(Ok(()));
                    }
                }
                // The client closed, or the connection broke: done.
                Poll::Ready(_) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::refuses;

    #[test]
    fn only_heads_without_the_applications_request_id_are_rewritten() {
        assert!(refuses(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n"
        ));
        assert!(refuses(b"HTTP/1.1 400 Bad Request\r\n\r\n"));
        // An answer of the application, pipelined or not, passes as it is.
        assert!(!refuses(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-request-id: 0190\r\n\r\n{}"
        ));
        assert!(!refuses(
            b"HTTP/1.1 400 Bad Request\r\nX-Request-Id: 0190\r\n\r\n"
        ));
        assert!(!refuses(b"HTTP/1.1 100 Continue\r\n\r\n"));
        // A body's bytes are not a head.
        assert!(!refuses(b"{\"code\": \"HTTP/1.1\"}"));
    }
}
