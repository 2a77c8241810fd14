//! # actcd-h2authority — a URL `:authority` from old Go clients, rewritten before h2 reads it
//!
//! Old Go clients' `:authority`: etcd's Go client 3.4 (etcdctl 3.4) dials some calls
//! (Maintenance: `endpoint status`, `hashkv`, `defrag`, `move-leader`) with the endpoint URL as
//! gRPC target, so its HTTP/2 requests carry `:authority: http://127.0.0.1:2379`. That is no
//! valid authority, and h2 (under hyper and tonic) resets such a stream with PROTOCOL_ERROR,
//! where etcd's Go server takes it. [`AuthorityFix`] sits on a connection's client → server
//! bytes before h2 reads them and rewrites such an authority to its `host:port`. Likewise etcd's
//! Go client 3.5 sends a `unix:///run/etcd.sock` endpoint's path as `:authority`; a path
//! becomes `localhost` (what grpc-go itself sends for unix targets since 1.4x).
//!
//! How, in [`AuthorityRewriter`] (no I/O, fed bytes, hands bytes on):
//! - The 24-byte preface and every frame that is not HEADERS or CONTINUATION pass untouched;
//!   their payload is not looked at (a read that falls within it goes straight into h2's buffer).
//! - A header block (a HEADERS frame, with PADDED and PRIORITY understood, and the CONTINUATION
//!   frames up to END_HEADERS) is held back until complete and decoded with an HPACK decoder
//!   (`hpack.rs`) that follows the client's encoder, dynamic table included (its size is at
//!   most HTTP/2's default 4096: the server never advertises another
//!   SETTINGS_HEADER_TABLE_SIZE, and h2 refuses a client that asks for more).
//! - Until a block needs rewriting, blocks go on byte for byte, so h2's decoder sees exactly
//!   what the client encoded. The first block whose `:authority` is a URL switches the
//!   connection to re-encoding: from then on every block is decoded here and encoded again
//!   with static-table references and literals *without indexing* only, so h2's dynamic table
//!   (stale from then on: it missed the entries of the rewritten blocks) is never referenced
//!   again. Re-encoded blocks are framed in frames of at most 16384 bytes (HTTP/2's minimum
//!   SETTINGS_MAX_FRAME_SIZE, h2's default, which tonic keeps), padding dropped, priority kept.
//! - A block that decodes to a header list over [`MAX_HEADER_LIST`] is not copied (a few
//!   bytes of references to a large table entry must not cost megabytes): h2 refuses such a
//!   list anyway, so it goes on as received, or closes the connection once re-encoding.
//! - What this layer cannot follow (a frame too large, CONTINUATION out of place, a block that
//!   does not decode) goes on untouched and the layer steps aside for the rest of the
//!   connection: h2 answers it as it would have. Once re-encoding, stepping aside would feed
//!   h2 references to entries it never saw, so the connection is closed instead.
//!
//! ## What it refuses, and its bounds
//! Every byte it reads comes from an unauthenticated client before h2 has checked anything,
//! so no input may make it panic, loop or hold memory without bound: a held header block is
//! at most [`MAX_BLOCK`] bytes, a frame it holds at most 16384, a decoded header list is
//! copied up to [`MAX_HEADER_LIST`], the HPACK dynamic table stays within 4096 bytes, and an
//! HPACK integer is at most 4 continuation bytes. It refuses nothing itself beyond closing a
//! re-encoding connection it can no longer follow: every other refusal is h2's.
//!
//! ## How it is checked
//! The unit tests below put real h2 servers and clients on either side and check the HPACK
//! decoder against loona-hpack (every octet Huffman-coded as h2 codes it). Two fuzz targets
//! (`fuzz/fuzz_targets/h2authority.rs`, `hpack.rs`, run by `fuzz/run.sh` in CI) feed
//! arbitrary client byte streams through [`AuthorityRewriter`] and [`AuthorityFix`] in
//! arbitrary read sizes, and arbitrary header blocks through [`hpack::Decoder`], from the
//! seeds in `fuzz/seeds/` (a Go client's connection opening with a URL authority).
//!
//! ## Why its own HPACK, not loona-hpack (issue 26)
//! loona-hpack (0.4.3) stays the tests' independent oracle; it does not replace `hpack.rs`:
//! - **Cost on hostile input, measured.** Its decoder builds its Huffman table (a `HashMap` of
//!   `HashMap`s over the 257 codes) anew for every Huffman-coded string and looks up two hash
//!   maps per bit. A 1 MiB block ([`MAX_BLOCK`]) of 5-byte literal fields, name and value each a
//!   one-byte Huffman string, decoded in 26.6 s with loona-hpack against 0.18 s here (dev
//!   profile on the 2-core build machine, loona-hpack at opt-level 1, this crate at 0). This
//!   decoder reads every header block of every client connection before anything is
//!   authenticated, so that gap is a client pinning a core per block.
//! - **Allocation.** It hands each Huffman-coded string out as a fresh `Vec`; here a string is
//!   decoded into scratch buffers the decoder keeps, and only dynamic-table entries allocate.
//! - **No encoder fit for re-encoding.** Its `Encoder` always indexes what is not in its table
//!   (literals with incremental indexing) and has no literal-without-indexing mode; a
//!   re-encoded block must leave h2's stale dynamic table alone, so `encode_block` (static
//!   references and literals without indexing, some thirty lines) would stay ours anyway.
//! - **A refusal h2 does not make.** It refuses a block that ends with a table size update
//!   (`SizeUpdateAtEnd`), a block of only a size update among them, which h2 takes.
//!
//! ## Features
//! `tonic` (on in the front): `tonic::transport::server::Connected` for [`AuthorityFix`].

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub mod hpack;

const PREFACE_LEN: usize = 24;
const FRAME_HEADER_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The largest frame payload re-framed blocks use: HTTP/2's minimum SETTINGS_MAX_FRAME_SIZE,
/// so always allowed, and the size h2 (as tonic sets it up) takes. A client's HEADERS or
/// CONTINUATION frame larger than this is refused by h2 anyway, and not held here.
const MAX_FRAME_SIZE: usize = 16_384;
/// The client's dynamic table size until it says otherwise (HTTP/2's default).
const HEADER_TABLE_SIZE: usize = 4096;
/// A header block held back grows at most this large; a larger one is h2's to refuse.
const MAX_BLOCK: usize = 1 << 20;
/// The largest header list (names, values and 32 bytes each) decoded here: 16 times what h2
/// takes under tonic (hyper's 16 KiB SETTINGS_MAX_HEADER_LIST_SIZE); a larger one is h2's to
/// refuse, passed on as received.
const MAX_HEADER_LIST: usize = 256 * 1024;
/// How much is read from the connection at a time while frames are being looked at.
const READ_CHUNK: usize = 8192;

/// What the rewriter does with the connection's header blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Decoding each block and passing it on as received.
    Watching,
    /// Decoding each block and passing it on encoded again without the dynamic table.
    Reencoding,
    /// Passing everything on unread for the rest of the connection.
    Aside,
}

/// A header block being held back until its END_HEADERS.
struct Block {
    /// Its frames as received.
    frames: Vec<Bytes>,
    /// Its header block fragments, joined.
    fragment: Vec<u8>,
    head: BlockHead,
}

/// What a re-encoded block keeps of the HEADERS frame that opened it.
#[derive(Clone, Copy)]
struct BlockHead {
    stream_id: u32,
    end_stream: bool,
    priority: Option<[u8; 5]>,
}

/// What becomes of a complete header block.
enum Decided {
    AsReceived,
    Reencoded(Vec<u8>),
    /// The block does not decode: h2's to answer.
    StepAside,
}

/// A decoded header list, kept in one buffer reused from block to block (no allocation per
/// field on the ordinary path).
#[derive(Default)]
struct FieldList {
    bytes: Vec<u8>,
    /// Each field's name and value as ranges of `bytes`.
    spans: Vec<[usize; 4]>,
}

impl FieldList {
    fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
    }

    fn push(&mut self, name: &[u8], value: &[u8]) {
        let name_start = self.bytes.len();
        self.bytes.extend_from_slice(name);
        let value_start = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.spans
            .push([name_start, value_start, value_start, self.bytes.len()]);
    }

    fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.spans
            .iter()
            .map(|&[n, n_end, v, v_end]| (&self.bytes[n..n_end], &self.bytes[v..v_end]))
    }

    /// Narrows every URL `:authority` to its `host:port`, and turns a unix socket's path into
    /// `localhost`; whether there was one.
    fn rewrite_authority(&mut self) -> bool {
        let mut rewritten = false;
        for span in &mut self.spans {
            let [n, n_end, v, v_end] = *span;
            if &self.bytes[n..n_end] != b":authority" {
                continue;
            }
            if let Some(host) = url_authority(&self.bytes[v..v_end]) {
                span[2] = v + host.start;
                span[3] = v + host.end;
                rewritten = true;
            } else if socket_path_authority(&self.bytes[v..v_end]) {
                let start = self.bytes.len();
                self.bytes.extend_from_slice(UNIX_AUTHORITY);
                span[2] = start;
                span[3] = start + UNIX_AUTHORITY.len();
                rewritten = true;
            }
        }
        rewritten
    }
}

/// The client's bytes turned into what h2 reads; see the module doc.
pub struct AuthorityRewriter {
    /// Bytes still to pass untouched (the preface, a passed frame's payload); `usize::MAX`
    /// once stepped aside.
    through: usize,
    mode: Mode,
    decoder: hpack::Decoder,
    block: Option<Block>,
    fields: FieldList,
}

impl Default for AuthorityRewriter {
    fn default() -> Self {
        AuthorityRewriter {
            through: PREFACE_LEN,
            mode: Mode::Watching,
            decoder: hpack::Decoder::new(HEADER_TABLE_SIZE),
            block: None,
            fields: FieldList::default(),
        }
    }
}

/// The connection must be closed: re-encoding cannot go on (see the module doc).
fn lost_track() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "HTTP/2 header block that cannot be re-encoded",
    )
}

impl AuthorityRewriter {
    /// Bytes that may go on untouched before anything needs looking at.
    pub fn through(&self) -> usize {
        self.through
    }

    /// Counts `n` bytes passed on untouched (at most [`Self::through`]) by the caller.
    pub fn passed(&mut self, n: usize) {
        if self.through != usize::MAX {
            self.through -= n;
        }
    }

    /// Moves from `input` to `out` all that can go on now; what stays in `input` waits for
    /// more bytes. An error means the connection must be closed.
    pub fn process(
        &mut self,
        input: &mut BytesMut,
        out: &mut VecDeque<Bytes>,
    ) -> std::io::Result<()> {
        loop {
            if self.through > 0 {
                if input.is_empty() {
                    return Ok(());
                }
                let n = self.through.min(input.len());
                out.push_back(input.split_to(n).freeze());
                self.passed(n);
                continue;
            }
            if input.len() < FRAME_HEADER_LEN {
                return Ok(());
            }
            let len =
                usize::from(input[0]) << 16 | usize::from(input[1]) << 8 | usize::from(input[2]);
            let kind = input[3];
            if kind != HEADERS && kind != CONTINUATION {
                if self.block.is_some() {
                    // Only CONTINUATION may follow an unfinished block: h2 ends the connection.
                    self.step_aside(out)?;
                    continue;
                }
                out.push_back(input.split_to(FRAME_HEADER_LEN).freeze());
                self.through = len;
                continue;
            }
            if len > MAX_FRAME_SIZE {
                self.step_aside(out)?;
                continue;
            }
            if input.len() < FRAME_HEADER_LEN + len {
                input.reserve(FRAME_HEADER_LEN + len - input.len());
                return Ok(());
            }
            let frame = input.split_to(FRAME_HEADER_LEN + len).freeze();
            self.take_frame(frame, out)?;
        }
    }

    /// Passes a held block on as received and everything after it unread.
    fn step_aside(&mut self, out: &mut VecDeque<Bytes>) -> std::io::Result<()> {
        if self.mode == Mode::Reencoding {
            return Err(lost_track());
        }
        if let Some(block) = self.block.take() {
            out.extend(block.frames);
        }
        self.mode = Mode::Aside;
        self.through = usize::MAX;
        Ok(())
    }

    /// Takes one whole HEADERS or CONTINUATION frame. A block in one HEADERS frame (the
    /// usual case) is decoded from the frame itself, never copied.
    fn take_frame(&mut self, frame: Bytes, out: &mut VecDeque<Bytes>) -> std::io::Result<()> {
        let flags = frame[4];
        let stream_id = u32::from_be_bytes([frame[5], frame[6], frame[7], frame[8]]) & 0x7fff_ffff;
        let payload = &frame[FRAME_HEADER_LEN..];
        match (frame[3], &mut self.block) {
            (HEADERS, None) => {
                let Some((fragment, priority)) = headers_fragment(flags, payload) else {
                    out.push_back(frame);
                    return self.step_aside(out);
                };
                let head = BlockHead {
                    stream_id,
                    end_stream: flags & END_STREAM != 0,
                    priority,
                };
                if flags & END_HEADERS != 0 {
                    let decided = self.decide(fragment)?;
                    return self.pass(decided, [frame], head, out);
                }
                self.block = Some(Block {
                    fragment: fragment.to_vec(),
                    frames: vec![frame.clone()],
                    head,
                });
            }
            (CONTINUATION, Some(block))
                if block.head.stream_id == stream_id
                    && block.fragment.len() + payload.len() <= MAX_BLOCK =>
            {
                block.fragment.extend_from_slice(payload);
                block.frames.push(frame.clone());
                if flags & END_HEADERS != 0
                    && let Some(block) = self.block.take()
                {
                    let decided = self.decide(&block.fragment)?;
                    return self.pass(decided, block.frames, block.head, out);
                }
            }
            _ => {
                self.step_aside(out)?;
                out.push_back(frame);
            }
        }
        Ok(())
    }

    /// Passes a complete block on as `decided`.
    fn pass(
        &mut self,
        decided: Decided,
        frames: impl IntoIterator<Item = Bytes>,
        head: BlockHead,
        out: &mut VecDeque<Bytes>,
    ) -> std::io::Result<()> {
        match decided {
            Decided::AsReceived => out.extend(frames),
            Decided::Reencoded(block) => frame_block(&block, head, out),
            Decided::StepAside => {
                out.extend(frames);
                self.step_aside(out)?;
            }
        }
        Ok(())
    }

    /// Decodes a complete block and decides whether it goes on as received or re-encoded.
    fn decide(&mut self, fragment: &[u8]) -> std::io::Result<Decided> {
        let fields = &mut self.fields;
        fields.clear();
        // Counted as HTTP/2 counts a header list; copies stop past the cap, so a small block
        // of references to a large table entry cannot make this allocate without bound.
        let mut list_size = 0usize;
        let decoded = self.decoder.decode(fragment, |name, value| {
            list_size = list_size.saturating_add(name.len() + value.len() + 32);
            if list_size <= MAX_HEADER_LIST {
                fields.push(name, value);
            }
        });
        if decoded.is_err() {
            return match self.mode {
                Mode::Reencoding => Err(lost_track()),
                _ => Ok(Decided::StepAside),
            };
        }
        if list_size > MAX_HEADER_LIST {
            // h2 refuses such a list itself; the decoder above stayed in step with the client.
            return match self.mode {
                Mode::Reencoding => Err(lost_track()),
                _ => Ok(Decided::AsReceived),
            };
        }
        let rewritten = self.fields.rewrite_authority();
        if self.mode == Mode::Watching && !rewritten {
            return Ok(Decided::AsReceived);
        }
        self.mode = Mode::Reencoding;
        Ok(Decided::Reencoded(encode_block(self.fields.iter())))
    }
}

/// A HEADERS frame's header block fragment and priority fields, or `None` if its padding or
/// priority do not fit in it (h2 refuses such a frame).
fn headers_fragment(flags: u8, payload: &[u8]) -> Option<(&[u8], Option<[u8; 5]>)> {
    let mut rest = payload;
    let mut pad = 0;
    if flags & PADDED != 0 {
        let (&len, after) = rest.split_first()?;
        pad = usize::from(len);
        rest = after;
    }
    let mut priority = None;
    if flags & PRIORITY != 0 {
        let fields: [u8; 5] = rest.get(..5)?.try_into().ok()?;
        priority = Some(fields);
        rest = &rest[5..];
    }
    let end = rest.len().checked_sub(pad)?;
    Some((&rest[..end], priority))
}

/// What a unix socket's path as `:authority` becomes: what grpc-go itself sends for unix
/// targets since 1.4x.
const UNIX_AUTHORITY: &[u8] = b"localhost";

/// Whether an `:authority` is a unix socket's absolute path (`/run/etcd.sock`), as etcd's Go
/// client 3.5 sends for a `unix:///run/etcd.sock` endpoint; no valid authority, which etcd's
/// Go server takes and h2 refuses.
pub(crate) fn socket_path_authority(value: &[u8]) -> bool {
    value.first() == Some(&b'/') && http::uri::Authority::try_from(value).is_err()
}

/// Where the `host:port` is in an `:authority` that is no valid authority but a URL
/// (`scheme://host:port[/…]`), as etcd's Go client 3.4 sends; `None` for any other value.
pub(crate) fn url_authority(value: &[u8]) -> Option<std::ops::Range<usize>> {
    if http::uri::Authority::try_from(value).is_ok() {
        return None;
    }
    let at = value.windows(3).position(|w| w == b"://")?;
    let scheme = &value[..at];
    if scheme.is_empty()
        || !scheme
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
    {
        return None;
    }
    let start = at + 3;
    let end = value[start..]
        .iter()
        .position(|b| matches!(b, b'/' | b'?' | b'#'))
        .map_or(value.len(), |n| start + n);
    let host_port = &value[start..end];
    (!host_port.is_empty() && http::uri::Authority::try_from(host_port).is_ok())
        .then_some(start..end)
}

/// Appends `value` as an HPACK integer with an `prefix`-bit prefix, the first byte's other
/// bits being `flags` (RFC 7541, 5.1).
fn put_integer(out: &mut Vec<u8>, mut value: usize, prefix: u32, flags: u8) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    value -= max;
    while value >= 0x80 {
        out.push(0x80 | (value & 0x7f) as u8);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends a raw (not Huffman-coded) string literal (RFC 7541, 5.2).
fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    put_integer(out, s.len(), 7, 0);
    out.extend_from_slice(s);
}

/// A header block for `fields` that leaves the decoder's dynamic table alone: a static-table
/// index where name and value are there, else a literal without indexing, its name indexed
/// when the static table has it (RFC 7541, 6.1 and 6.2.2).
fn encode_block<'a>(fields: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        let mut name_index = None;
        let mut full_index = None;
        for (i, (n, v)) in hpack::STATIC_TABLE.iter().enumerate() {
            if n.as_bytes() == name {
                name_index.get_or_insert(i + 1);
                if v.as_bytes() == value {
                    full_index = Some(i + 1);
                    break;
                }
            }
        }
        match (full_index, name_index) {
            (Some(index), _) => put_integer(&mut out, index, 7, 0x80),
            (None, Some(index)) => {
                put_integer(&mut out, index, 4, 0);
                put_string(&mut out, value);
            }
            (None, None) => {
                out.push(0);
                put_string(&mut out, name);
                put_string(&mut out, value);
            }
        }
    }
    out
}

/// Appends the frames carrying header block `block` on `head`'s stream: one HEADERS frame, then
/// CONTINUATION frames, none with a payload over [`MAX_FRAME_SIZE`].
fn frame_block(block: &[u8], head: BlockHead, out: &mut VecDeque<Bytes>) {
    let BlockHead {
        stream_id,
        end_stream,
        priority,
    } = head;
    let extra = if priority.is_some() { 5 } else { 0 };
    let first_len = block.len().min(MAX_FRAME_SIZE - extra);
    let (first, mut rest) = block.split_at(first_len);
    let mut flags = if end_stream { END_STREAM } else { 0 };
    if priority.is_some() {
        flags |= PRIORITY;
    }
    if rest.is_empty() {
        flags |= END_HEADERS;
    }
    let mut frame = Vec::with_capacity(FRAME_HEADER_LEN + extra + first.len());
    put_frame_header(&mut frame, extra + first.len(), HEADERS, flags, stream_id);
    if let Some(fields) = priority {
        frame.extend_from_slice(&fields);
    }
    frame.extend_from_slice(first);
    out.push_back(frame.into());
    while !rest.is_empty() {
        let (chunk, after) = rest.split_at(rest.len().min(MAX_FRAME_SIZE));
        rest = after;
        let flags = if rest.is_empty() { END_HEADERS } else { 0 };
        let mut frame = Vec::with_capacity(FRAME_HEADER_LEN + chunk.len());
        put_frame_header(&mut frame, chunk.len(), CONTINUATION, flags, stream_id);
        frame.extend_from_slice(chunk);
        out.push_back(frame.into());
    }
}

fn put_frame_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream_id: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream_id.to_be_bytes());
}

/// An HTTP/2 server connection whose client → server bytes go through an
/// [`AuthorityRewriter`]; writes pass untouched. A read that the rewriter need not look at
/// (within a large DATA payload, or everything once stepped aside) goes straight into the
/// reader's buffer; other bytes are read into `input` (no zeroing) and handed on from `out`.
pub struct AuthorityFix<IO> {
    inner: IO,
    rewriter: AuthorityRewriter,
    /// Read from `inner`, not yet taken by the rewriter.
    input: BytesMut,
    /// Ready for the reader.
    out: VecDeque<Bytes>,
    /// `inner` has ended.
    eof: bool,
}

impl<IO> AuthorityFix<IO> {
    /// Reads `inner` (a client's HTTP/2 connection) through a fresh [`AuthorityRewriter`].
    pub fn new(inner: IO) -> Self {
        AuthorityFix {
            inner,
            rewriter: AuthorityRewriter::default(),
            input: BytesMut::new(),
            out: VecDeque::new(),
            eof: false,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for AuthorityFix<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            let mut handed = false;
            while buf.remaining() > 0 {
                let Some(front) = this.out.front_mut() else {
                    break;
                };
                let n = front.len().min(buf.remaining());
                buf.put_slice(&front[..n]);
                front.advance(n);
                if front.is_empty() {
                    this.out.pop_front();
                }
                handed = true;
            }
            if handed || buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                // A truncated frame goes on as it came; then the end.
                if !this.input.is_empty() {
                    this.out.push_back(this.input.split().freeze());
                    continue;
                }
                return Poll::Ready(Ok(()));
            }
            // A read that passes untouched as a whole goes straight into the caller's buffer.
            if this.input.is_empty() && this.rewriter.through() >= buf.remaining() {
                let before = buf.filled().len();
                ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
                this.rewriter.passed(buf.filled().len() - before);
                return Poll::Ready(Ok(()));
            }
            this.input.reserve(READ_CHUNK);
            let n = ready!(tokio_util::io::poll_read_buf(
                Pin::new(&mut this.inner),
                cx,
                &mut this.input
            ))?;
            if n == 0 {
                this.eof = true;
                continue;
            }
            this.rewriter.process(&mut this.input, &mut this.out)?;
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for AuthorityFix<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(feature = "tonic")]
impl<IO: tonic::transport::server::Connected> tonic::transport::server::Connected
    for AuthorityFix<IO>
{
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    fn frame(kind: u8, flags: u8, stream_id: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_frame_header(&mut out, payload.len(), kind, flags, stream_id);
        out.extend_from_slice(payload);
        out
    }

    /// The client's preface and an empty SETTINGS frame.
    fn opening() -> Vec<u8> {
        let mut out = PREFACE.to_vec();
        out.extend(frame(0x4, 0, 0, &[]));
        out
    }

    /// A gRPC request's fields with `authority` and an `x-k` field.
    fn request(authority: &str, x_k: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/etcdserverpb.Maintenance/Status"),
            (":authority", authority),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("x-k", x_k),
        ]
        .into_iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
    }

    /// `fields` through a client's encoder, which indexes names it has not seen.
    fn encoded(
        encoder: &mut loona_hpack::Encoder<'static>,
        fields: &[(Vec<u8>, Vec<u8>)],
    ) -> Vec<u8> {
        encoder.encode(fields.iter().map(|(n, v)| (n.as_slice(), v.as_slice())))
    }

    /// Runs `rewriter` over `input` handed over in pieces of `piece` bytes.
    fn rewrite(input: &[u8], piece: usize) -> std::io::Result<Vec<u8>> {
        let mut rewriter = AuthorityRewriter::default();
        let mut pending = BytesMut::new();
        let mut out = VecDeque::new();
        for chunk in input.chunks(piece) {
            pending.extend_from_slice(chunk);
            rewriter.process(&mut pending, &mut out)?;
        }
        assert!(pending.is_empty(), "bytes left unprocessed");
        Ok(out.into_iter().flat_map(|b| b.to_vec()).collect())
    }

    /// What h2's server makes of `client` (through [`AuthorityFix`]): each request's
    /// authority and `x-k` field, in order. A stream h2 refuses is missing. A PING after
    /// `client` tells when h2 has read it all: its ACK comes after every request is queued.
    async fn h2_sees(client: Vec<u8>) -> Vec<(String, String)> {
        h2_sees_over(client, AuthorityFix::new).await
    }

    /// As [`h2_sees`], with h2 reading the connection through `wrap`.
    async fn h2_sees_over<T: AsyncRead + AsyncWrite + Unpin>(
        mut client: Vec<u8>,
        wrap: impl FnOnce(tokio::io::DuplexStream) -> T,
    ) -> Vec<(String, String)> {
        const OPAQUE: &[u8; 8] = b"seen-all";
        client.extend(frame(0x6, 0, 0, OPAQUE));
        let ack = frame(0x6, 0x1, 0, OPAQUE);
        let (mut near, far) = tokio::io::duplex(1 << 20);
        near.write_all(&client).await.unwrap();
        // Read what the server sends (it never waits on a full pipe) until the ACK.
        let acked = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut chunk = [0u8; 4096];
            while !got.windows(ack.len()).any(|w| w == ack.as_slice()) {
                let n = near.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the server closed the connection");
                got.extend_from_slice(&chunk[..n]);
            }
            near
        });
        tokio::pin!(acked);
        let mut conn = h2::server::handshake(wrap(far)).await.unwrap();
        let mut seen = Vec::new();
        let mut take = |accepted: Option<Result<(http::Request<h2::RecvStream>, _), h2::Error>>| {
            let (req, _respond) = accepted.expect("connection open").expect("h2 accepts");
            let authority = req
                .uri()
                .authority()
                .map(|a| a.to_string())
                .unwrap_or_default();
            let x_k = req
                .headers()
                .get("x-k")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            seen.push((authority, x_k));
        };
        let near = loop {
            tokio::select! {
                accepted = conn.accept() => take(accepted),
                near = &mut acked => break near.unwrap(),
            }
        };
        while let Some(accepted) = futures::FutureExt::now_or_never(conn.accept()) {
            take(accepted);
        }
        drop(near);
        seen
    }

    #[test]
    fn only_url_authorities_are_rewritten() {
        struct Case {
            value: &'static str,
            want: Option<&'static str>,
        }
        let cases = [
            Case {
                value: "127.0.0.1:2379",
                want: None,
            },
            Case {
                value: "localhost",
                want: None,
            },
            Case {
                value: "[::1]:2379",
                want: None,
            },
            Case {
                value: "etcd-0.etcd:2379",
                want: None,
            },
            Case {
                value: "http://127.0.0.1:23790",
                want: Some("127.0.0.1:23790"),
            },
            Case {
                value: "https://localhost:2379",
                want: Some("localhost:2379"),
            },
            Case {
                value: "http://[::1]:2379/",
                want: Some("[::1]:2379"),
            },
            Case {
                value: "https://10.0.0.1:2379/v3?x#y",
                want: Some("10.0.0.1:2379"),
            },
            Case {
                value: "http://",
                want: None,
            },
            Case {
                value: "://x:1",
                want: None,
            },
            Case {
                value: "a b://x:1",
                want: None,
            },
            Case {
                value: "/just/a/path",
                want: None,
            },
        ];
        for case in cases {
            let got = url_authority(case.value.as_bytes()).map(|r| &case.value[r]);
            assert_eq!(got, case.want, "{}", case.value);
        }
        for (value, path) in [
            ("/run/etcd.sock", true),
            ("/tmp/.tmpxu8YW0/etcd.sock", true),
            ("localhost:2379", false),
            ("run/etcd.sock", false),
            ("", false),
        ] {
            assert_eq!(socket_path_authority(value.as_bytes()), path, "{value}");
        }
    }

    #[test]
    fn integers_follow_hpack() {
        // RFC 7541, C.1: 10 and 1337 with 5-bit prefixes, 42 with an 8-bit one.
        let mut out = Vec::new();
        put_integer(&mut out, 10, 5, 0);
        put_integer(&mut out, 1337, 5, 0);
        put_integer(&mut out, 42, 8, 0);
        put_integer(&mut out, 31, 5, 0xe0);
        assert_eq!(out, [0x0a, 0x1f, 0x9a, 0x0a, 0x2a, 0xff, 0x00]);
    }

    #[test]
    fn blocks_without_url_authority_pass_byte_for_byte() {
        let mut encoder = loona_hpack::Encoder::new();
        let mut input = opening();
        let block = encoded(&mut encoder, &request("127.0.0.1:2379", "one"));
        input.extend(frame(HEADERS, END_HEADERS, 1, &block));
        input.extend(frame(0x0, END_STREAM, 1, &[0, 0, 0, 0, 2, 8, 1]));
        // Padded, with priority, split over HEADERS and two CONTINUATIONs.
        let block = encoded(&mut encoder, &request("127.0.0.1:2379", "two"));
        let (a, rest) = block.split_at(3);
        let (b, c) = rest.split_at(2);
        let mut payload = vec![4];
        payload.extend([0, 0, 0, 0, 15]);
        payload.extend(a);
        payload.extend([0; 4]);
        input.extend(frame(HEADERS, PADDED | PRIORITY | END_STREAM, 3, &payload));
        input.extend(frame(CONTINUATION, 0, 3, b));
        input.extend(frame(CONTINUATION, END_HEADERS, 3, c));
        input.extend(frame(0x6, 0, 0, &[1; 8]));
        for piece in [1, 7, 100, input.len()] {
            assert_eq!(rewrite(&input, piece).unwrap(), input, "pieces of {piece}");
        }
    }

    #[tokio::test]
    async fn h2_takes_a_url_authority_once_rewritten() {
        let mut encoder = loona_hpack::Encoder::new();
        let mut input = opening();
        let block = encoded(&mut encoder, &request("http://127.0.0.1:23790", "v"));
        input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &block));
        assert_eq!(
            h2_sees(input).await,
            [("127.0.0.1:23790".to_string(), "v".to_string())]
        );
    }

    #[tokio::test]
    async fn h2_takes_a_socket_path_authority_as_localhost() {
        let mut encoder = loona_hpack::Encoder::new();
        let mut input = opening();
        let block = encoded(&mut encoder, &request("/run/etcd.sock", "v"));
        input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &block));
        assert_eq!(
            h2_sees(input).await,
            [("localhost".to_string(), "v".to_string())]
        );
    }

    #[tokio::test]
    async fn h2_alone_refuses_a_url_authority() {
        // What the rewriting is for: without it h2 drops the request with the URL.
        let mut encoder = loona_hpack::Encoder::new();
        let mut input = opening();
        let block = encoded(&mut encoder, &request("http://127.0.0.1:23790", "v"));
        input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &block));
        let block = encoded(&mut encoder, &request("127.0.0.1:23790", "w"));
        input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 3, &block));
        assert_eq!(
            h2_sees_over(input, |io| io).await,
            [("127.0.0.1:23790".to_string(), "w".to_string())]
        );
    }

    #[tokio::test]
    async fn dynamic_table_references_stay_right_before_and_after_the_switch() {
        let mut encoder = loona_hpack::Encoder::new();
        let mut input = opening();
        // 1: indexes `x-k: a`; 3: refers to it; 5: the switch, referring to it again;
        // 7: indexes `x-k: b` after the switch; 9: refers to it, valid authority.
        let fields = [
            request("127.0.0.1:2379", "a"),
            request("127.0.0.1:2379", "a"),
            request("http://127.0.0.1:2379", "a"),
            request("https://127.0.0.1:2379", "b"),
            request("127.0.0.1:2379", "b"),
        ];
        let mut stream_id = 1;
        for fields in &fields {
            let block = encoded(&mut encoder, fields);
            input.extend(frame(HEADERS, END_HEADERS | END_STREAM, stream_id, &block));
            stream_id += 2;
        }
        let want: Vec<(String, String)> = ["a", "a", "a", "b", "b"]
            .into_iter()
            .map(|x_k| ("127.0.0.1:2379".to_string(), x_k.to_string()))
            .collect();
        assert_eq!(h2_sees(input).await, want);
    }

    #[tokio::test]
    async fn split_padded_blocks_are_rewritten_and_reframed() {
        let mut encoder = loona_hpack::Encoder::new();
        let mut input = opening();
        // A URL authority split over a padded HEADERS with priority and two CONTINUATIONs.
        let block = encoded(&mut encoder, &request("http://127.0.0.1:1", "p"));
        let (a, rest) = block.split_at(5);
        let (b, c) = rest.split_at(4);
        let mut payload = vec![3];
        payload.extend([0, 0, 0, 0, 15]);
        payload.extend(a);
        payload.extend([0; 3]);
        input.extend(frame(HEADERS, PADDED | PRIORITY | END_STREAM, 1, &payload));
        input.extend(frame(CONTINUATION, 0, 1, b));
        input.extend(frame(CONTINUATION, END_HEADERS, 1, c));
        // Then a block larger than one frame once encoded without the dynamic table.
        let big = "x".repeat(MAX_FRAME_SIZE + 100);
        let block = encoded(&mut encoder, &request("127.0.0.1:1", &big));
        let (a, b) = block.split_at(MAX_FRAME_SIZE);
        input.extend(frame(HEADERS, END_STREAM, 3, a));
        input.extend(frame(CONTINUATION, END_HEADERS, 3, b));
        let out = rewrite(&input, 1000).unwrap();
        let mut kinds = Vec::new();
        let mut at = PREFACE.len();
        while at < out.len() {
            let len = usize::from(out[at]) << 16
                | usize::from(out[at + 1]) << 8
                | usize::from(out[at + 2]);
            assert!(len <= MAX_FRAME_SIZE);
            kinds.push((out[at + 3], out[at + 4]));
            at += FRAME_HEADER_LEN + len;
        }
        assert_eq!(
            kinds,
            [
                (0x4, 0),
                (HEADERS, PRIORITY | END_STREAM | END_HEADERS),
                (HEADERS, END_STREAM),
                (CONTINUATION, END_HEADERS),
            ]
        );
        let seen = h2_sees(input).await;
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0], ("127.0.0.1:1".to_string(), "p".to_string()));
        assert!(
            seen[1].0 == "127.0.0.1:1" && seen[1].1 == big,
            "the big block changed"
        );
    }

    #[test]
    fn a_block_that_decodes_huge_is_not_copied() {
        // One 4000-byte entry in the client's dynamic table, then a block of 1000 one-byte
        // references to it: 4 MB once decoded.
        let mut encoder = loona_hpack::Encoder::new();
        let big = "v".repeat(4000);
        let first = encoded(&mut encoder, &request("127.0.0.1:1", &big));
        let reference = encoded(&mut encoder, &[(b"x-k".to_vec(), big.clone().into_bytes())]);
        assert_eq!(reference.len(), 1, "an indexed reference");
        let huge = reference.repeat(1000);
        let url = encoded(&mut encoder, &request("http://127.0.0.1:1", &big));

        // Before any rewriting: passed on as received, the decoder still in step (the URL
        // block after it is rewritten to what the client meant).
        let mut input = opening();
        input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &first));
        input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 3, &huge));
        let unchanged = input.len();
        input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 5, &url));
        let out = rewrite(&input, 4096).unwrap();
        assert_eq!(out[..unchanged], input[..unchanged]);
        let fields = loona_hpack::Decoder::new()
            .decode(&out[unchanged + FRAME_HEADER_LEN..])
            .unwrap();
        assert_eq!(fields, request("127.0.0.1:1", &big));

        // Once re-encoding, such a block cannot be re-encoded: the connection is closed.
        let mut encoder = loona_hpack::Encoder::new();
        let mut input = opening();
        let url = encoded(&mut encoder, &request("http://127.0.0.1:1", &big));
        input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &url));
        let reference = encoded(&mut encoder, &[(b"x-k".to_vec(), big.clone().into_bytes())]);
        input.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            3,
            &reference.repeat(1000),
        ));
        assert!(rewrite(&input, 4096).is_err());
    }

    #[tokio::test]
    async fn large_data_passes_through_the_reader_intact() {
        // Large DATA frames (read straight into the reader's buffer where a read falls within
        // the payload) between header blocks, read with small and large buffers.
        let mut encoder = loona_hpack::Encoder::new();
        let mut input = opening();
        let payload: Vec<u8> = (0..MAX_FRAME_SIZE).map(|i| (i % 251) as u8).collect();
        for stream_id in [1, 3] {
            let block = encoded(&mut encoder, &request("127.0.0.1:1", "d"));
            input.extend(frame(HEADERS, END_HEADERS, stream_id, &block));
            for _ in 0..3 {
                input.extend(frame(0x0, 0, stream_id, &payload));
            }
            input.extend(frame(0x0, END_STREAM, stream_id, &payload[..100]));
        }
        for read_size in [7, 1000, 20_000, 100_000] {
            let (mut near, far) = tokio::io::duplex(4096);
            let sent = input.clone();
            let writer = tokio::spawn(async move {
                near.write_all(&sent).await.unwrap();
                near.shutdown().await.unwrap();
                near
            });
            let mut reader = AuthorityFix::new(far);
            let mut got = Vec::new();
            let mut chunk = vec![0u8; read_size];
            loop {
                let n = reader.read(&mut chunk).await.unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&chunk[..n]);
            }
            let _near = writer.await.unwrap();
            assert!(
                got == input,
                "reads of {read_size} bytes changed the stream"
            );
        }
    }

    #[tokio::test]
    async fn hpack_decodes_h2s_huffman_coding_of_every_octet_as_loona_does() {
        // h2's client Huffman-codes every literal; a value with every octet a header value may
        // hold, decoded by hpack.rs and by loona-hpack, must come out the same.
        let all: Vec<u8> = std::iter::once(b'\t')
            .chain(0x20..=0x7e)
            .chain(0x80..=0xff)
            .collect();
        let (client_io, mut far) = tokio::io::duplex(1 << 20);
        let (send, conn) = h2::client::handshake(client_io).await.unwrap();
        let driver = tokio::spawn(conn);
        let req = http::Request::post("http://127.0.0.1:2379/etcdserverpb.KV/Range")
            .header("x-all", http::HeaderValue::from_bytes(&all).unwrap())
            .body(())
            .unwrap();
        let _sent = send.ready().await.unwrap().send_request(req, true).unwrap();
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        let mut sent = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Some(Ok(n)) = futures::FutureExt::now_or_never(far.read(&mut chunk)) {
            sent.extend_from_slice(&chunk[..n]);
        }
        driver.abort();
        let mut at = PREFACE.len();
        let block = loop {
            let len = usize::from(sent[at]) << 16
                | usize::from(sent[at + 1]) << 8
                | usize::from(sent[at + 2]);
            if sent[at + 3] == HEADERS {
                break &sent[at + FRAME_HEADER_LEN..at + FRAME_HEADER_LEN + len];
            }
            at += FRAME_HEADER_LEN + len;
        };
        let mut ours = Vec::new();
        hpack::Decoder::new(HEADER_TABLE_SIZE)
            .decode(block, |n, v| ours.push((n.to_vec(), v.to_vec())))
            .unwrap();
        let theirs = loona_hpack::Decoder::new().decode(block).unwrap();
        assert_eq!(ours, theirs);
        assert!(ours.contains(&(b"x-all".to_vec(), all.clone())));
        // Huffman-coded indeed: the value's bytes do not appear raw.
        assert!(!block.windows(all.len()).any(|w| w == all.as_slice()));
    }

    #[tokio::test]
    async fn an_h2_clients_connection_passes_untouched() {
        // h2's own client (Huffman coding, dynamic table): its bytes as sent.
        let (client_io, mut far) = tokio::io::duplex(1 << 20);
        let (send, conn) = h2::client::handshake(client_io).await.unwrap();
        let driver = tokio::spawn(conn);
        for i in 0..3 {
            let req = http::Request::post("http://127.0.0.1:2379/etcdserverpb.KV/Put")
                .header("content-type", "application/grpc")
                .header("x-k", format!("value-{i}"))
                .body(())
                .unwrap();
            let (_response, mut body) = send
                .clone()
                .ready()
                .await
                .unwrap()
                .send_request(req, false)
                .unwrap();
            body.send_data(Bytes::from_static(&[0, 0, 0, 0, 1, 7]), true)
                .unwrap();
        }
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        let mut sent = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Some(Ok(n)) = futures::FutureExt::now_or_never(far.read(&mut chunk)) {
            sent.extend_from_slice(&chunk[..n]);
        }
        // The preface, SETTINGS, WINDOW_UPDATE, three HEADERS and three DATA frames.
        assert!(sent.len() > 150, "{} bytes", sent.len());
        driver.abort();
        assert_eq!(rewrite(&sent, 13).unwrap(), sent);
    }
}
