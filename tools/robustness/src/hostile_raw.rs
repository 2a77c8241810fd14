//! The hostile run's raw-socket requests: HTTP/2 frames written by hand (bad settings,
//! oversize and unknown frames, broken HPACK, CONTINUATION floods, rapid resets, flow-control
//! and stream-state violations) and malformed HTTP/1.1 (smuggling-shaped framing, huge
//! headers, bad request lines) on the client port, and how an answer to them is read.

use std::time::Duration;

use actcd_proto::etcdserverpb::RangeRequest;
use rand::Rng;
use rand::rngs::StdRng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types.
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const PRIORITY: u8 = 2;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const CONTINUATION: u8 = 9;
/// Flags.
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

/// The names of the raw cases, by index (`--hostile-show` prints it).
pub const CASES: &[&str] = &[
    "garbage-no-preface",
    "truncated-preface",
    "frame-over-max-size",
    "unknown-frames-then-request",
    "settings-window-too-big",
    "settings-enable-push-2",
    "settings-bad-length",
    "window-update-zero",
    "headers-even-stream",
    "headers-garbage-hpack",
    "continuation-flood",
    "rapid-reset",
    "ping-bad-length",
    "ping-flood",
    "data-stream-0",
    "data-idle-stream",
    "priority-self-dependency",
    "rst-idle-stream",
    "uppercase-header-name",
    "connection-header",
    "data-past-window",
    "settings-max-frame-1",
    "client-trailers-no-data",
    "goaway-then-request",
    "many-streams-no-end",
    "http1-huge-header",
    "http1-bad-chunked",
    "http1-cl-and-te",
    "http1-bad-method",
    "http1-http09",
    "http1-version-9",
    "http1-long-request-line",
    "http1-h2c-upgrade",
    "http1-pipelined",
    "http1-content-length-lies",
    "http1-bad-header-bytes",
];

fn frame(b: &mut Vec<u8>, ty: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = (payload.len() as u32).to_be_bytes();
    b.extend_from_slice(&len[1..]);
    b.push(ty);
    b.push(flags);
    b.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    b.extend_from_slice(payload);
}

fn hpack_int(b: &mut Vec<u8>, mut v: usize) {
    if v < 127 {
        b.push(v as u8);
        return;
    }
    b.push(127);
    v -= 127;
    while v >= 128 {
        b.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    b.push(v as u8);
}

/// A literal header field without indexing, new name, no Huffman.
fn hpack(b: &mut Vec<u8>, name: &str, value: &[u8]) {
    b.push(0);
    hpack_int(b, name.len());
    b.extend_from_slice(name.as_bytes());
    hpack_int(b, value.len());
    b.extend_from_slice(value);
}

/// The header block of a gRPC Range call.
fn request_block(extra: &[(&str, &[u8])]) -> Vec<u8> {
    let mut h = Vec::new();
    hpack(&mut h, ":method", b"POST");
    hpack(&mut h, ":scheme", b"http");
    hpack(&mut h, ":path", b"/etcdserverpb.KV/Range");
    hpack(&mut h, ":authority", b"127.0.0.1");
    hpack(&mut h, "content-type", b"application/grpc");
    hpack(&mut h, "te", b"trailers");
    for (k, v) in extra {
        hpack(&mut h, k, v);
    }
    h
}

fn range_body() -> Vec<u8> {
    let msg = prost::Message::encode_to_vec(&RangeRequest {
        key: b"h/1".to_vec(),
        ..Default::default()
    });
    let mut b = vec![0];
    b.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    b.extend_from_slice(&msg);
    b
}

/// A whole gRPC Range call on `stream`.
fn request(b: &mut Vec<u8>, stream: u32) {
    frame(b, HEADERS, END_HEADERS, stream, &request_block(&[]));
    frame(b, DATA, END_STREAM, stream, &range_body());
}

fn start(settings: &[(u16, u32)]) -> Vec<u8> {
    let mut b = PREFACE.to_vec();
    let mut p = Vec::new();
    for (id, v) in settings {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    frame(&mut b, SETTINGS, 0, 0, &p);
    b
}

fn http1(rng: &mut StdRng, case: &str) -> Vec<u8> {
    let r = |s: &str| s.as_bytes().to_vec();
    match case {
        "http1-huge-header" => {
            let n = [8 * 1024, 64 * 1024, 1 << 20][rng.random_range(0..3)];
            let mut b = r("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ");
            b.extend(std::iter::repeat_n(b'a', n));
            b.extend_from_slice(b"\r\n\r\n");
            b
        }
        "http1-bad-chunked" => r(
            "POST /v3/kv/range HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\nffffffffffffffffff\r\n",
        ),
        "http1-cl-and-te" => r(
            "POST /v3/kv/put HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nPOST /v3/kv/put HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
        ),
        "http1-bad-method" => b"G\x00T /health HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        "http1-http09" => r("GET /health\r\n"),
        "http1-version-9" => r("GET /health HTTP/9.9\r\nHost: x\r\n\r\n"),
        "http1-long-request-line" => {
            let mut b = r("GET /");
            b.extend(std::iter::repeat_n(b'p', rng.random_range(10_000..200_000)));
            b.extend_from_slice(b" HTTP/1.1\r\nHost: x\r\n\r\n");
            b
        }
        "http1-h2c-upgrade" => r(
            "GET /health HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
        ),
        "http1-pipelined" => {
            let mut b = Vec::new();
            for i in 0..rng.random_range(2..60) {
                let p = ["/health", "/version", "/v2/keys/h/a", "/livez", "/nope"][i % 5];
                b.extend_from_slice(format!("GET {p} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
            }
            b
        }
        "http1-content-length-lies" => r(
            "POST /v3/kv/range HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 999999\r\n\r\n{\"key\":\"YQ==\"}",
        ),
        _ => b"GET /health HTTP/1.1\r\nHost: x\r\nX-Bad\x01: \xff\xfe\r\n\r\n".to_vec(),
    }
}

/// The bytes of raw case `case` (an index into [`CASES`]).
pub fn generate(rng: &mut StdRng, case: usize) -> Vec<u8> {
    let name = CASES[case % CASES.len()];
    let mut b;
    match name {
        "garbage-no-preface" => {
            return (0..rng.random_range(1..300))
                .map(|_| rng.random())
                .collect();
        }
        "truncated-preface" => return PREFACE[..rng.random_range(1..PREFACE.len())].to_vec(),
        "frame-over-max-size" => {
            b = start(&[]);
            let len = [16_385u32, 1 << 20, (1 << 24) - 1][rng.random_range(0..3)];
            b.extend_from_slice(&len.to_be_bytes()[1..]);
            b.extend_from_slice(&[DATA, 0, 0, 0, 0, 1]);
            b.extend(std::iter::repeat_n(0u8, 100));
        }
        "unknown-frames-then-request" => {
            b = start(&[]);
            frame(&mut b, 0xfa, 0xff, 0, b"whatever");
            frame(&mut b, 0x0b, 0, 1, b"\x00\x00");
            request(&mut b, 1);
        }
        "settings-window-too-big" => b = start(&[(4, 0x8000_0000)]),
        "settings-enable-push-2" => b = start(&[(2, 2)]),
        "settings-bad-length" => {
            b = PREFACE.to_vec();
            frame(&mut b, SETTINGS, 0, 0, &[0, 4, 0, 0, 1]);
        }
        "window-update-zero" => {
            b = start(&[]);
            frame(&mut b, WINDOW_UPDATE, 0, 0, &[0, 0, 0, 0]);
        }
        "headers-even-stream" => {
            b = start(&[]);
            frame(
                &mut b,
                HEADERS,
                END_HEADERS | END_STREAM,
                2,
                &request_block(&[]),
            );
        }
        "headers-garbage-hpack" => {
            b = start(&[]);
            let junk: Vec<u8> = (0..rng.random_range(1..200))
                .map(|_| rng.random())
                .collect();
            frame(&mut b, HEADERS, END_HEADERS | END_STREAM, 1, &junk);
        }
        "continuation-flood" => {
            b = start(&[]);
            frame(&mut b, HEADERS, 0, 1, &request_block(&[]));
            let mut chunk = Vec::new();
            for _ in 0..8 {
                hpack(&mut chunk, "x-pad", &[b'a'; 120]);
            }
            for _ in 0..rng.random_range(10..600) {
                frame(&mut b, CONTINUATION, 0, 1, &chunk);
            }
            if rng.random_bool(0.5) {
                frame(&mut b, CONTINUATION, END_HEADERS, 1, &[]);
            }
        }
        "rapid-reset" => {
            b = start(&[]);
            let n = rng.random_range(10..400u32);
            for i in 0..n {
                let id = 2 * i + 1;
                frame(&mut b, HEADERS, END_HEADERS, id, &request_block(&[]));
                frame(&mut b, RST_STREAM, 0, id, &8u32.to_be_bytes());
            }
            request(&mut b, 2 * n + 1);
        }
        "ping-bad-length" => {
            b = start(&[]);
            frame(&mut b, PING, 0, 0, &[1; 7]);
        }
        "ping-flood" => {
            b = start(&[]);
            for i in 0..rng.random_range(10..2000u64) {
                frame(&mut b, PING, 0, 0, &i.to_be_bytes());
            }
            request(&mut b, 1);
        }
        "data-stream-0" => {
            b = start(&[]);
            frame(&mut b, DATA, 0, 0, b"hello");
        }
        "data-idle-stream" => {
            b = start(&[]);
            frame(&mut b, DATA, END_STREAM, 5, &range_body());
        }
        "priority-self-dependency" => {
            b = start(&[]);
            frame(&mut b, PRIORITY, 0, 1, &[0, 0, 0, 1, 16]);
            request(&mut b, 1);
        }
        "rst-idle-stream" => {
            b = start(&[]);
            frame(&mut b, RST_STREAM, 0, 3, &[0, 0, 0, 8]);
        }
        "uppercase-header-name" => {
            b = start(&[]);
            frame(
                &mut b,
                HEADERS,
                END_HEADERS,
                1,
                &request_block(&[("X-Upper", b"1")]),
            );
            frame(&mut b, DATA, END_STREAM, 1, &range_body());
        }
        "connection-header" => {
            b = start(&[]);
            frame(
                &mut b,
                HEADERS,
                END_HEADERS,
                1,
                &request_block(&[("connection", b"keep-alive")]),
            );
            frame(&mut b, DATA, END_STREAM, 1, &range_body());
        }
        "data-past-window" => {
            b = start(&[]);
            frame(&mut b, HEADERS, END_HEADERS, 1, &request_block(&[]));
            let mut body = vec![0];
            body.extend_from_slice(&(80_000u32).to_be_bytes());
            body.extend(std::iter::repeat_n(0u8, 16_379));
            frame(&mut b, DATA, 0, 1, &body);
            for _ in 0..4 {
                frame(&mut b, DATA, 0, 1, &[0; 16_384]);
            }
        }
        "settings-max-frame-1" => b = start(&[(5, 1)]),
        "client-trailers-no-data" => {
            b = start(&[]);
            frame(&mut b, HEADERS, END_HEADERS, 1, &request_block(&[]));
            let mut t = Vec::new();
            hpack(&mut t, "grpc-status", b"0");
            frame(&mut b, HEADERS, END_HEADERS | END_STREAM, 1, &t);
        }
        "goaway-then-request" => {
            b = start(&[]);
            frame(&mut b, GOAWAY, 0, 0, &[0, 0, 0, 0, 0, 0, 0, 0]);
            request(&mut b, 1);
        }
        "many-streams-no-end" => {
            b = start(&[]);
            for i in 0..rng.random_range(10..300u32) {
                frame(&mut b, HEADERS, END_HEADERS, 2 * i + 1, &request_block(&[]));
            }
        }
        other => return http1(rng, other),
    }
    b
}

fn h2_code(c: u32) -> &'static str {
    match c {
        0 => "NO_ERROR",
        1 => "PROTOCOL_ERROR",
        2 => "INTERNAL_ERROR",
        3 => "FLOW_CONTROL_ERROR",
        4 => "SETTINGS_TIMEOUT",
        5 => "STREAM_CLOSED",
        6 => "FRAME_SIZE_ERROR",
        7 => "REFUSED_STREAM",
        8 => "CANCEL",
        9 => "COMPRESSION_ERROR",
        10 => "CONNECT_ERROR",
        11 => "ENHANCE_YOUR_CALM",
        12 => "INADEQUATE_SECURITY",
        13 => "HTTP_1_1_REQUIRED",
        _ => "?",
    }
}

/// What the server's bytes say: an HTTP/1 status line, or the HTTP/2 frames (GOAWAY and
/// RST_STREAM codes, how many response HEADERS).
fn describe(got: &[u8], closed: bool) -> String {
    let end = if closed { "closed" } else { "open (cut)" };
    if got.is_empty() {
        return format!("no bytes, {end}");
    }
    if got.starts_with(b"HTTP/") {
        let line = got.split(|&c| c == b'\r').next().unwrap_or(got);
        let status = String::from_utf8_lossy(&line[line.len().min(9)..line.len().min(12)]);
        let n = got.windows(5).filter(|w| w == b"HTTP/").count();
        let n = if n == 1 {
            "one answer"
        } else {
            "pipelined answers"
        };
        return format!("http1 {status} ({n}), {end}");
    }
    let (mut i, mut goaway, mut rst, mut headers) = (0, None, Vec::new(), 0u32);
    while i + 9 <= got.len() {
        let len = u32::from_be_bytes([0, got[i], got[i + 1], got[i + 2]]) as usize;
        let ty = got[i + 3];
        let stream = u32::from_be_bytes([got[i + 5], got[i + 6], got[i + 7], got[i + 8]]);
        let p = &got[(i + 9).min(got.len())..(i + 9 + len).min(got.len())];
        match ty {
            GOAWAY if p.len() >= 8 => {
                goaway = Some(u32::from_be_bytes([p[4], p[5], p[6], p[7]]));
            }
            RST_STREAM if p.len() >= 4 => {
                let c = h2_code(u32::from_be_bytes([p[0], p[1], p[2], p[3]]));
                if !rst.contains(&c) {
                    rst.push(c);
                }
            }
            HEADERS if stream != 0 => headers += 1,
            _ => {}
        }
        i += 9 + len;
    }
    let mut s = String::from("h2");
    if headers > 0 {
        s.push_str(" responses");
    }
    if !rst.is_empty() {
        s.push_str(&format!(" rst {}", rst.join("/")));
    }
    if let Some(g) = goaway {
        s.push_str(&format!(" goaway {}", h2_code(g)));
    }
    if s == "h2" {
        s.push_str(" settings only");
    }
    format!("{s}, {end}")
}

/// Writes `bytes` to a fresh connection, reads until the server closes or is silent for
/// 200 ms (at most 1 MiB, 3 s), and says what came back. `Err`: no connection at all.
pub async fn call(addr: &str, bytes: Vec<u8>) -> Result<String, String> {
    let mut tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("raw: connect: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let (mut rd, mut wr) = tcp.split();
    let mut got = Vec::new();
    let mut closed = false;
    let mut write_err = None;
    let io = async {
        let write = async {
            let r = wr.write_all(&bytes).await;
            if r.is_ok() {
                let _ = wr.flush().await;
            }
            r
        };
        let mut buf = vec![0u8; 64 * 1024];
        tokio::pin!(write);
        let mut writing = true;
        loop {
            tokio::select! {
                r = &mut write, if writing => {
                    writing = false;
                    if let Err(e) = r {
                        write_err = Some(e.kind());
                    }
                }
                r = tokio::time::timeout(Duration::from_millis(200), rd.read(&mut buf)) => {
                    match r {
                        Ok(Ok(0)) | Ok(Err(_)) => { closed = true; break; }
                        Ok(Ok(n)) => {
                            got.extend_from_slice(&buf[..n]);
                            if got.len() > (1 << 20) { break; }
                        }
                        Err(_) if !writing => break,
                        Err(_) => {}
                    }
                }
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(3), io).await;
    let mut s = describe(&got, closed);
    if let Some(k) = write_err {
        s.push_str(&format!(" (write: {k:?})"));
    }
    Ok(s)
}
