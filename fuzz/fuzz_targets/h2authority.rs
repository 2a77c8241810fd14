//! Fuzz target `h2authority`: a client's HTTP/2 connection bytes through the `:authority`
//! rewriter, as `actors/front/src/server.rs` reads every connection. The first byte seeds the
//! sizes of the reads (from the socket and by h2); the rest is what the client sends. The
//! same bytes go through [`AuthorityRewriter::process`] at once and through [`AuthorityFix`]
//! in those pieces: what h2 reads must not depend on how the bytes arrived (the same bytes,
//! or an error on both), and it is never more than the client's bytes re-encoded can be
//! ([`bound`]).
#![no_main]

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use actcd_h2authority::{AuthorityFix, AuthorityRewriter};
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncRead, ReadBuf};

/// A socket that hands out `data` in pieces whose sizes come from `sizes`, sometimes
/// answering `Pending` first (the waker is a no-op: the reader polls again).
struct Socket<'a> {
    data: &'a [u8],
    sizes: u32,
    pending: bool,
}

impl Socket<'_> {
    fn next_size(&mut self) -> usize {
        self.sizes = self.sizes.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        (self.sizes >> 16) as usize % 97 + 1
    }
}

impl AsyncRead for Socket<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        self.pending = !self.pending;
        if self.pending && self.sizes & 1 == 0 {
            return Poll::Pending;
        }
        let n = self.next_size().min(self.data.len()).min(buf.remaining());
        buf.put_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Poll::Ready(Ok(()))
    }
}

/// The rewriter over all of `input` at once, then what is left at the end as it came.
fn at_once(input: &[u8]) -> Option<Vec<u8>> {
    let mut rewriter = AuthorityRewriter::default();
    let mut buf = BytesMut::from(input);
    let mut out: VecDeque<Bytes> = VecDeque::new();
    rewriter.process(&mut buf, &mut out).ok()?;
    let mut all: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
    all.extend_from_slice(&buf);
    Some(all)
}

/// What h2 reads through `AuthorityFix`, in reads of varying sizes.
fn in_pieces(input: &[u8], seed: u8) -> Option<Vec<u8>> {
    let socket = Socket {
        data: input,
        sizes: u32::from(seed),
        pending: false,
    };
    let mut fix = AuthorityFix::new(socket);
    let mut cx = Context::from_waker(Waker::noop());
    let mut read = Vec::new();
    let mut sizes = u32::from(seed).wrapping_add(7);
    // The socket answers `Pending` at most every other poll, so two in a row is a hang.
    let mut pending = 0;
    loop {
        sizes = sizes.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let want = [1, 9, 100, 8192, 16_384][(sizes >> 16) as usize % 5];
        let mut space = vec![0u8; want];
        let mut buf = ReadBuf::new(&mut space);
        match Pin::new(&mut fix).poll_read(&mut cx, &mut buf) {
            Poll::Pending => {
                pending += 1;
                assert!(
                    pending < 3,
                    "AuthorityFix pending without reading the socket"
                );
                continue;
            }
            Poll::Ready(Err(_)) => return None,
            Poll::Ready(Ok(())) if buf.filled().is_empty() => return Some(read),
            Poll::Ready(Ok(())) => read.extend_from_slice(buf.filled()),
        }
        pending = 0;
        assert!(
            read.len() <= bound(input.len()),
            "{} bytes out of {}",
            read.len(),
            input.len()
        );
    }
}

/// The most the rewriter may hand on for `n` bytes: re-encoding spells each field as a
/// literal, and one byte of the client's (an indexed field) may name a dynamic-table entry of
/// up to 4064 bytes of name and value; a block decoding past 256 KiB is never copied.
fn bound(n: usize) -> usize {
    4200 * n + 1024
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, input)) = data.split_first() else {
        return;
    };
    let whole = at_once(input);
    let pieces = in_pieces(input, seed);
    match (&whole, &pieces) {
        (Some(a), Some(b)) => assert!(a == b, "read in pieces differs from read at once"),
        (None, None) => {}
        _ => panic!(
            "at once: {}, in pieces: {}",
            if whole.is_some() { "ok" } else { "error" },
            if pieces.is_some() { "ok" } else { "error" }
        ),
    }
    if let Some(out) = whole {
        assert!(
            out.len() <= bound(input.len()),
            "{} bytes out of {}",
            out.len(),
            input.len()
        );
    }
});
