//! Tests of `counted.rs`, gRPC's framing and a call's counted body (its `tests` module, included
//! by `#[path]`).

use std::time::Instant;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Frame;

use super::*;

/// A gRPC message on the wire: the 5-byte prefix, then `len` bytes.
fn message(len: usize) -> Vec<u8> {
    let mut m = vec![0];
    m.extend_from_slice(&(len as u32).to_be_bytes());
    m.extend(std::iter::repeat_n(7, len));
    m
}

#[test]
fn framing_counts_messages_however_the_bytes_are_cut() {
    let wire: Vec<u8> = [message(3), message(0), message(300), message(1)].concat();
    for cut in [1, 2, 4, 5, 6, 7, 64, wire.len()] {
        let mut f = Framing::default();
        let (mut messages, mut bytes) = (0, 0);
        for chunk in wire.chunks(cut) {
            let (m, b) = f.feed(chunk);
            messages += m;
            bytes += b;
        }
        assert_eq!((messages, bytes), (4, 304), "cut every {cut}");
    }
}

fn sample(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0, |v| v.parse().unwrap())
}

fn labels(method: &str, service: &str, kind: &str) -> String {
    format!("grpc_method=\"{method}\",grpc_service=\"{service}\",grpc_type=\"{kind}\"")
}

type Frames = http_body_util::StreamBody<
    futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, std::convert::Infallible>>>,
>;

/// A body of `frames`, counted as a stream's answer.
fn answer(stats: &Arc<RequestStats>, path: &str, frames: Vec<Frame<Bytes>>) -> CountedBody<Frames> {
    CountedBody {
        inner: http_body_util::StreamBody::new(futures::stream::iter(
            frames.into_iter().map(Ok).collect::<Vec<_>>(),
        )),
        framing: Framing::default(),
        stats: stats.clone(),
        path: path.into(),
        side: Side::SentUntilEnd {
            started: Instant::now(),
        },
    }
}

/// A stream is handled when it ends, with its trailers' status, its messages counted one
/// by one with their bytes; one whose client went away is handled with etcd's code for
/// that method (a watch Canceled, a keep-alive stream Unavailable).
#[tokio::test]
async fn streams_are_handled_when_they_end_and_their_messages_counted() {
    let stats = Arc::new(RequestStats::default());
    let watch = "/etcdserverpb.Watch/Watch";
    let keep_alive = "/etcdserverpb.Lease/LeaseKeepAlive";
    let snapshot = "/etcdserverpb.Maintenance/Snapshot";
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().unwrap());
    let wire = Bytes::from([message(10), message(20)].concat());
    let body = answer(
        &stats,
        snapshot,
        vec![Frame::data(wire), Frame::trailers(trailers)],
    );
    let collected = body.collect().await.unwrap();
    // Ended with its trailers, then dropped: handled once, OK.
    assert_eq!(collected.to_bytes().len(), 40);
    // Requests: the bytes count, the messages for streams only (a unary one's is its start).
    let request = CountedBody {
        inner: http_body_util::Full::new(Bytes::from([message(4), message(5)].concat())),
        framing: Framing::default(),
        stats: stats.clone(),
        path: watch.into(),
        side: Side::Received,
    };
    request.collect().await.unwrap();
    // A watch and a keep-alive stream that their clients left, one message each.
    for path in [watch, keep_alive] {
        let mut body = answer(&stats, path, vec![Frame::data(Bytes::from(message(2)))]);
        let first = body.frame().await.unwrap().unwrap();
        assert!(first.is_data());
        drop(body);
    }
    let text = stats.render();
    let snap = labels("Snapshot", "etcdserverpb.Maintenance", "server_stream");
    let w = labels("Watch", "etcdserverpb.Watch", "bidi_stream");
    let k = labels("LeaseKeepAlive", "etcdserverpb.Lease", "bidi_stream");
    for (series, want) in [
        (format!("grpc_server_msg_sent_total{{{snap}}}"), 2),
        (
            format!("grpc_server_handled_total{{grpc_code=\"OK\",{snap}}}"),
            1,
        ),
        (format!("grpc_server_msg_received_total{{{w}}}"), 2),
        (format!("grpc_server_msg_sent_total{{{w}}}"), 1),
        (
            format!("grpc_server_handled_total{{grpc_code=\"Canceled\",{w}}}"),
            1,
        ),
        (
            format!("grpc_server_handled_total{{grpc_code=\"OK\",{w}}}"),
            0,
        ),
        (format!("grpc_server_msg_sent_total{{{k}}}"), 1),
        (
            format!("grpc_server_handled_total{{grpc_code=\"Unavailable\",{k}}}"),
            1,
        ),
    ] {
        assert_eq!(sample(&text, &series), want, "{series}\n{text}");
    }
    assert_eq!(stats.payload_bytes(), (9, 30 + 2 + 2));
}

/// A connection adds every byte it reads and writes to the counters it was made with.
#[tokio::test]
async fn a_connection_counts_what_it_reads_and_writes() {
    use std::sync::atomic::Ordering::Relaxed;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let counters = FrontCounters::default();
    let (ours, mut theirs) = tokio::io::duplex(64);
    let mut conn = Counted::new(ours, &counters);
    conn.write_all(b"hello").await.unwrap();
    theirs.write_all(b"abc").await.unwrap();
    let mut read = [0; 3];
    conn.read_exact(&mut read).await.unwrap();
    let mut written = [0; 5];
    theirs.read_exact(&mut written).await.unwrap();
    assert_eq!((&read, &written), (b"abc", b"hello"));
    assert_eq!(counters.received_bytes.load(Relaxed), 3);
    assert_eq!(counters.sent_bytes.load(Relaxed), 5);
}
