//! Byte and message counting as data passes: [`Counted`], a client connection adding what it
//! reads and writes to [`FrontCounters`]' byte counters, and [`CountedBody`], a gRPC call's body
//! whose messages are read off gRPC's framing into [`RequestStats`], a stream's call handled
//! when its answer ends or is dropped.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use crate::counters::FrontCounters;
use crate::requests::{RequestStats, cancel_code};

/// A client connection that adds what it reads and writes to the front's byte counters.
pub struct Counted<IO> {
    inner: IO,
    received: Arc<std::sync::atomic::AtomicU64>,
    sent: Arc<std::sync::atomic::AtomicU64>,
}

impl<IO> Counted<IO> {
    /// `inner`, what it reads and writes added to `counters`' received and sent bytes.
    pub fn new(inner: IO, counters: &FrontCounters) -> Self {
        Self {
            inner,
            received: counters.received_bytes.clone(),
            sent: counters.sent_bytes.clone(),
        }
    }
}

impl<IO: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counted<IO> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len().saturating_sub(before) as u64;
        if n > 0 {
            self.received
                .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }
}

impl<IO: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Counted<IO> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            self.sent
                .fetch_add(*n as u64, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = &r {
            self.sent
                .fetch_add(*n as u64, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<IO: tonic::transport::server::Connected> tonic::transport::server::Connected for Counted<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

/// gRPC's framing read off a body as it passes: each message is a 5-byte prefix (a
/// compressed flag, the length, big-endian) and then its bytes.
#[derive(Debug, Default)]
struct Framing {
    prefix: [u8; 5],
    /// Prefix bytes seen of the next message.
    have: usize,
    /// Bytes of the current message still to pass.
    rest: u64,
}

impl Framing {
    /// The messages whose prefix was in `data`, and their lengths' sum.
    fn feed(&mut self, mut data: &[u8]) -> (u64, u64) {
        let (mut messages, mut bytes) = (0, 0);
        while !data.is_empty() {
            if self.rest > 0 {
                let n = usize::try_from(self.rest).map_or(data.len(), |r| r.min(data.len()));
                self.rest -= n as u64;
                data = &data[n..];
                continue;
            }
            let n = (self.prefix.len() - self.have).min(data.len());
            self.prefix[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have == self.prefix.len() {
                let [_, a, b, c, d] = self.prefix;
                let len = u64::from(u32::from_be_bytes([a, b, c, d]));
                messages += 1;
                bytes += len;
                self.rest = len;
                self.have = 0;
            }
        }
        (messages, bytes)
    }
}

/// Which way a [`CountedBody`] goes.
#[derive(Debug, Clone, Copy)]
pub enum Side {
    /// A request's body: its messages are received.
    Received,
    /// An answer's body whose call is already handled (a unary call's, or a stream's that
    /// failed before it opened).
    Sent,
    /// A stream's answer: the call is handled when the body ends (its trailers' status) or is
    /// dropped before (the client went away: [`cancel_code`]).
    SentUntilEnd { started: Instant },
}

/// A call's body, its messages counted as they pass.
pub struct CountedBody<B> {
    inner: B,
    framing: Framing,
    stats: Arc<RequestStats>,
    path: String,
    side: Side,
}

impl<B> CountedBody<B> {
    /// `inner`, a body of the call of method `path`, counted into `stats` as `side` says.
    pub fn new(inner: B, stats: Arc<RequestStats>, path: String, side: Side) -> Self {
        Self {
            inner,
            framing: Framing::default(),
            stats,
            path,
            side,
        }
    }

    fn handled(&mut self, code: tonic::Code) {
        if let Side::SentUntilEnd { started } = self.side {
            self.stats.record(&self.path, code, started.elapsed());
            self.side = Side::Sent;
        }
    }
}

impl<B> hyper::body::Body for CountedBody<B>
where
    B: hyper::body::Body<Data = bytes::Bytes> + Unpin,
{
    type Data = bytes::Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let polled = std::pin::Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let (messages, bytes) = this.framing.feed(data);
                    if messages > 0 || bytes > 0 {
                        match this.side {
                            Side::Received => this.stats.received(&this.path, messages, bytes),
                            _ => this.stats.sent(&this.path, messages, bytes),
                        }
                    }
                } else if let Some(trailers) = frame.trailers_ref() {
                    let code = trailers
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<i32>().ok())
                        .map_or(tonic::Code::Unknown, tonic::Code::from);
                    this.handled(code);
                }
            }
            Poll::Ready(Some(Err(_))) => this.handled(tonic::Code::Unknown),
            Poll::Ready(None) => this.handled(tonic::Code::Ok),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

impl<B> Drop for CountedBody<B> {
    fn drop(&mut self) {
        let code = cancel_code(&self.path);
        self.handled(code);
    }
}

#[cfg(test)]
#[path = "counted_tests.rs"]
mod tests;
