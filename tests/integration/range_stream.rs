//! etcd 3.7's RangeStream, called through a client generated from a proto of its own
//! (`tools/etcd37-client`), so the wire is what is checked. The contract (etcd's proto and
//! KEP-5966): the chunks, merged in order as protobuf merges messages (kvs appended; header,
//! more and count from the last), are the unary Range answer. Every case here merges a stream
//! and compares it with actcd's unary Range at the same state, and checks the chunk rules:
//! ascending and disjoint, only the last carries header/more/count, each chunk within the
//! byte target unless it holds one key-value, the first at most ten.

use std::time::Duration;

use actcd_etcd37_client::etcdserverpb::kv_client::KvClient;
use actcd_etcd37_client::etcdserverpb::range_request::{SortOrder, SortTarget};
use actcd_etcd37_client::etcdserverpb::{RangeRequest, RangeResponse};
use etcd_client::{Client, PutOptions, Txn, TxnOp};
use prost::Message;
use tonic::transport::Channel;

use crate::Server;

type Kv37 = KvClient<Channel>;

/// `--max-request-bytes` of these servers: chunks then aim at ¾ of it.
const MAX_REQUEST: usize = 20_000;
const TARGET: usize = MAX_REQUEST / 4 * 3;

/// A client whose HTTP/2 windows are the protocol's initial 64 KiB, so that a stream it stops
/// reading stops the server's producer after a few chunks (with the usual megabytes of
/// window, a test-sized answer is all sent before the test acts).
async fn narrow(srv: &Server) -> Kv37 {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", srv.endpoint()))
        .unwrap()
        .initial_stream_window_size(Some(65_535))
        .initial_connection_window_size(Some(65_535))
        .connect()
        .await
        .unwrap();
    KvClient::new(channel)
}

async fn start(dir: &std::path::Path) -> (Server, Client, Kv37) {
    let srv = Server::start_with(dir, &["--max-request-bytes", &MAX_REQUEST.to_string()]);
    let c = srv.client().await;
    let kv = KvClient::connect(format!("http://{}", srv.endpoint()))
        .await
        .unwrap();
    (srv, c, kv)
}

fn with_token<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    if let Some(t) = token {
        r.metadata_mut().insert("token", t.parse().unwrap());
    }
    r
}

/// Every chunk of a stream, or the status it ended with.
async fn chunks(
    kv: &mut Kv37,
    req: &RangeRequest,
    token: Option<&str>,
) -> Result<Vec<RangeResponse>, tonic::Status> {
    let mut stream = kv
        .range_stream(with_token(req.clone(), token))
        .await?
        .into_inner();
    let mut out = Vec::new();
    while let Some(m) = stream.message().await? {
        out.push(m.range_response.unwrap_or_default());
    }
    Ok(out)
}

async fn unary(
    kv: &mut Kv37,
    req: &RangeRequest,
    token: Option<&str>,
) -> Result<RangeResponse, tonic::Status> {
    Ok(kv.range(with_token(req.clone(), token)).await?.into_inner())
}

/// Protobuf's merge of the chunks, in order.
fn merge(chunks: &[RangeResponse]) -> RangeResponse {
    let mut merged = RangeResponse::default();
    for c in chunks {
        merged.merge(c.encode_to_vec().as_slice()).unwrap();
    }
    merged
}

/// The bytes a chunk's kvs take in it.
fn kvs_bytes(c: &RangeResponse) -> usize {
    c.kvs
        .iter()
        .map(|kv| {
            let len = kv.encoded_len();
            1 + prost::encoding::encoded_len_varint(len as u64) + len
        })
        .sum()
}

fn check_chunk_rules(chunks: &[RangeResponse], what: &str) {
    let (last, rest) = chunks.split_last().expect("at least one chunk");
    assert!(
        last.header.is_some(),
        "{what}: the last chunk has the header"
    );
    for c in rest {
        assert!(
            c.header.is_none() && !c.more && c.count == 0,
            "{what}: an intermediate chunk carries only kvs"
        );
        assert!(!c.kvs.is_empty(), "{what}: an empty intermediate chunk");
    }
    assert!(chunks[0].kvs.len() <= 10, "{what}: first chunk over 10");
    for c in chunks {
        assert!(
            c.kvs.len() <= 1 || kvs_bytes(c) <= TARGET,
            "{what}: a chunk of {} bytes",
            kvs_bytes(c)
        );
    }
    let keys: Vec<&Vec<u8>> = chunks
        .iter()
        .flat_map(|c| &c.kvs)
        .map(|kv| &kv.key)
        .collect();
    assert!(
        keys.windows(2).all(|w| w[0] < w[1]),
        "{what}: keys not strictly ascending"
    );
    if keys.len() > 10 {
        assert!(chunks.len() >= 2, "{what}: more than 10 keys in one chunk");
    }
}

/// Streams `req`, checks the chunk rules and that the merge is the unary answer.
async fn same_as_range(kv: &mut Kv37, req: &RangeRequest, token: Option<&str>) -> RangeResponse {
    let what = format!("{req:?}");
    let got = chunks(kv, req, token).await.unwrap();
    check_chunk_rules(&got, &what);
    let merged = merge(&got);
    let want = unary(kv, req, token).await.unwrap();
    assert_eq!(merged, want, "{what}");
    merged
}

fn range(key: &[u8], end: &[u8]) -> RangeRequest {
    RangeRequest {
        key: key.to_vec(),
        range_end: end.to_vec(),
        ..Default::default()
    }
}

fn status_of<T: std::fmt::Debug>(r: Result<T, tonic::Status>) -> (tonic::Code, String) {
    let s = r.expect_err("refused");
    (s.code(), s.message().to_string())
}

/// Puts `n` keys `{prefix}{i:05}` with values of `size` bytes, 100 to a txn.
async fn fill(c: &mut Client, prefix: &str, n: usize, size: usize) {
    let value = vec![b'v'; size];
    for start in (0..n).step_by(100) {
        let ops: Vec<TxnOp> = (start..n.min(start + 100))
            .map(|i| TxnOp::put(format!("{prefix}{i:05}"), value.clone(), None))
            .collect();
        c.txn(Txn::new().and_then(ops)).await.unwrap();
    }
}

#[tokio::test]
async fn chunks_merge_into_range_across_shapes_limits_revisions_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c, mut kv) = start(dir.path()).await;
    fill(&mut c, "big/", 5000, 90).await;
    for (prefix, n) in [
        ("one/", 1),
        ("nine/", 9),
        ("ten/", 10),
        ("eleven/", 11),
        ("m/", 25),
    ] {
        fill(&mut c, prefix, n, 7).await;
    }
    // Binary keys, with the pair `b/k` and `b/k\0` (a cursor of `b/k` + `\0` must not skip
    // the second), and a value bigger than the chunk target.
    for key in [&b"b/k"[..], b"b/k\0", b"b/k\0\0", b"b/\xff\x00", b"b/\x00"] {
        c.put(key, b"bin".to_vec(), None).await.unwrap();
    }
    c.put("b/large", vec![b'L'; TARGET + 1000], None)
        .await
        .unwrap();
    let filled = c.get("x", None).await.unwrap().header().unwrap().revision();

    // History: overwrites, deletes, a delete and recreate (a new generation), leases.
    let lease = c.lease_grant(600, None).await.unwrap().id();
    let other = c.lease_grant(600, None).await.unwrap().id();
    c.put("m/00003", "over", None).await.unwrap();
    c.delete("m/00004", None).await.unwrap();
    c.delete("m/00005", None).await.unwrap();
    c.put("m/00005", "again", None).await.unwrap();
    c.put(
        "m/00006",
        "leased",
        Some(PutOptions::new().with_lease(lease)),
    )
    .await
    .unwrap();
    let middle = c.get("x", None).await.unwrap().header().unwrap().revision();
    c.put(
        "m/00006",
        "re-leased",
        Some(PutOptions::new().with_lease(other)),
    )
    .await
    .unwrap();
    c.put(
        "m/00007",
        "leased",
        Some(PutOptions::new().with_lease(lease)),
    )
    .await
    .unwrap();
    c.delete("m/00008", None).await.unwrap();
    c.put("m/00003", "over again", None).await.unwrap();

    let shapes: Vec<(&[u8], &[u8], usize)> = vec![
        (b"one/00000", b"", 1),
        (b"missing", b"", 0),
        (b"nine/", b"nine0", 9),
        (b"ten/", b"ten0", 10),
        (b"eleven/", b"eleven0", 11),
        (b"m/", b"m0", 25),
        (b"m/00002", b"m/00020", 18),
        (b"b/", b"b0", 7),
        (b"b/k", b"b/k\0\x01", 3),
        (b"eleven/00005", b"\0", 0),
        (b"z", b"a", 0),
    ];
    for (key, end, n) in &shapes {
        let n = *n as i64;
        let mut limits = vec![0, 1, 9, 10, 11, 10 * n + 3];
        if n > 1 {
            limits.extend([n - 1, n, n + 1]);
        }
        for limit in limits {
            for revision in [0, filled, middle] {
                for keys_only in [false, true] {
                    let req = RangeRequest {
                        limit,
                        revision,
                        keys_only,
                        serializable: limit % 2 == 1,
                        ..range(key, end)
                    };
                    same_as_range(&mut kv, &req, None).await;
                }
            }
        }
    }

    // Many chunks: 5000 keys and every key there is, at several limits.
    for (key, end) in [(&b"big/"[..], &b"big0"[..]), (b"\0", b"\0")] {
        for limit in [0, 10, 11, 4321, 4999, 5000, 5001] {
            for keys_only in [false, true] {
                let req = RangeRequest {
                    limit,
                    keys_only,
                    ..range(key, end)
                };
                let merged = same_as_range(&mut kv, &req, None).await;
                if key == b"big/" && limit == 0 {
                    assert_eq!(merged.kvs.len(), 5000);
                    assert_eq!(merged.count, 5000);
                }
            }
        }
    }
    let all = chunks(&mut kv, &range(b"big/", b"big0"), None)
        .await
        .unwrap();
    assert!(
        all.len() > 20,
        "5000 keys of ~110 bytes fit in {} chunks",
        all.len()
    );

    // The large value is a chunk of its own.
    let b = chunks(&mut kv, &range(b"b/", b"b0"), None).await.unwrap();
    let large = b
        .iter()
        .find(|c| c.kvs.iter().any(|kv| kv.key == b"b/large"))
        .unwrap();
    assert_eq!(large.kvs.len(), 1);

    // keys_only keeps the leases (etcd 3.5.1's answer; 3.7's index-only reads drop them).
    let keys_only = RangeRequest {
        keys_only: true,
        ..range(b"m/00006", b"m/00008")
    };
    let merged = merge(&chunks(&mut kv, &keys_only, None).await.unwrap());
    let leases: Vec<i64> = merged.kvs.iter().map(|kv| kv.lease).collect();
    assert_eq!(leases, vec![other, lease]);
    assert!(merged.kvs.iter().all(|kv| kv.value.is_empty()));

    // count_only, with and without a limit, and with keys_only: one chunk, header and count.
    for limit in [0, 3] {
        let req = RangeRequest {
            count_only: true,
            keys_only: limit == 3,
            limit,
            ..range(b"big/", b"big0")
        };
        let got = chunks(&mut kv, &req, None).await.unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].count, 5000);
        assert!(got[0].kvs.is_empty());
        assert_eq!(got[0], unary(&mut kv, &req, None).await.unwrap());
    }

    // A sort target other than KEY with order NONE is accepted: the Range answer exactly.
    for target in [
        SortTarget::Version,
        SortTarget::Create,
        SortTarget::Mod,
        SortTarget::Value,
    ] {
        let req = RangeRequest {
            sort_target: target as i32,
            sort_order: SortOrder::None as i32,
            ..range(b"m/", b"m0")
        };
        // One chunk (etcd 3.7 sorts each chunk, so its merge is not its Range answer).
        let got = chunks(&mut kv, &req, None).await.unwrap();
        assert_eq!(got.len(), 1);
        assert!(got[0].kvs.len() > 10);
        assert_eq!(got[0], unary(&mut kv, &req, None).await.unwrap());
    }
    let ascend = RangeRequest {
        sort_target: SortTarget::Key as i32,
        sort_order: SortOrder::Ascend as i32,
        ..range(b"big/", b"big0")
    };
    same_as_range(&mut kv, &ascend, None).await;
}

#[tokio::test]
async fn refusals_have_etcds_codes_and_texts() {
    use tonic::Code;
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c, mut kv) = start(dir.path()).await;
    fill(&mut c, "k/", 30, 10).await;
    let sorts = "RangeStream does not support custom sort orders";
    let filters = "RangeStream does not support revision filters";
    let refused = |order: SortOrder, target: SortTarget| RangeRequest {
        sort_order: order as i32,
        sort_target: target as i32,
        ..range(b"k/", b"k0")
    };
    for req in [
        refused(SortOrder::Descend, SortTarget::Key),
        refused(SortOrder::Ascend, SortTarget::Mod),
        refused(SortOrder::Descend, SortTarget::Value),
        refused(SortOrder::Ascend, SortTarget::Create),
    ] {
        assert_eq!(
            status_of(chunks(&mut kv, &req, None).await),
            (Code::Unimplemented, sorts.to_string()),
            "{req:?}"
        );
    }
    for set in 0..4 {
        let mut req = range(b"k/", b"k0");
        *[
            &mut req.min_mod_revision,
            &mut req.max_mod_revision,
            &mut req.min_create_revision,
            &mut req.max_create_revision,
        ][set] = 2;
        assert_eq!(
            status_of(chunks(&mut kv, &req, None).await),
            (Code::Unimplemented, filters.to_string())
        );
    }
    // What Range refuses, RangeStream refuses alike.
    for i in 0..10 {
        c.put(format!("k/{i:05}"), "again", None).await.unwrap();
    }
    let now = c.get("x", None).await.unwrap().header().unwrap().revision();
    c.compact(now - 5, None).await.unwrap();
    let same_as_unary = [
        range(b"", b""),
        RangeRequest {
            sort_order: 7,
            ..range(b"k/", b"k0")
        },
        RangeRequest {
            revision: now + 1,
            ..range(b"k/", b"k0")
        },
        RangeRequest {
            revision: now - 6,
            ..range(b"k/", b"k0")
        },
    ];
    let expected = [
        (Code::InvalidArgument, "etcdserver: key is not provided"),
        (Code::InvalidArgument, "etcdserver: invalid sort option"),
        (
            Code::OutOfRange,
            "etcdserver: mvcc: required revision is a future revision",
        ),
        (
            Code::OutOfRange,
            "etcdserver: mvcc: required revision has been compacted",
        ),
    ];
    for (req, (code, text)) in same_as_unary.iter().zip(expected) {
        let streamed = status_of(chunks(&mut kv, req, None).await);
        assert_eq!(streamed, (code, text.to_string()), "{req:?}");
        assert_eq!(streamed, status_of(unary(&mut kv, req, None).await));
    }
    // The compaction mark itself is still readable.
    let at_mark = RangeRequest {
        revision: now - 5,
        ..range(b"k/", b"k0")
    };
    same_as_range(&mut kv, &at_mark, None).await;
}

/// Opens a stream of `req` and takes its first chunk, leaving the rest unread.
async fn first_chunk(
    kv: &mut Kv37,
    req: &RangeRequest,
    token: Option<&str>,
) -> (
    tonic::Streaming<actcd_etcd37_client::etcdserverpb::RangeStreamResponse>,
    RangeResponse,
) {
    let mut stream = kv
        .range_stream(with_token(req.clone(), token))
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    (stream, first.range_response.unwrap())
}

#[tokio::test]
async fn a_stream_reads_at_its_start_and_ends_compacted_when_passed() {
    let dir = tempfile::tempdir().unwrap();
    let (srv, mut c, mut kv) = start(dir.path()).await;
    let mut slow = narrow(&srv).await;
    fill(&mut c, "big/", 3000, 90).await;
    let req = range(b"big/", b"big0");
    let want = unary(&mut kv, &req, None).await.unwrap();

    // Writes after the first chunk, at both ends of the range: none of them is seen.
    let (mut stream, first) = first_chunk(&mut slow, &req, None).await;
    c.put("big/02999", "changed", None).await.unwrap();
    c.delete("big/02000", None).await.unwrap();
    c.put("big/02500x", "new", None).await.unwrap();
    c.put("big/00001", "changed", None).await.unwrap();
    let mut got = vec![first];
    while let Some(m) = stream.message().await.unwrap() {
        got.push(m.range_response.unwrap());
    }
    check_chunk_rules(&got, "writes between chunks");
    assert_eq!(merge(&got), want);
    assert!(got.len() > 10);

    // A compaction past the stream's revision ends it with etcd's error; what came before is
    // the start of the answer.
    let want = unary(&mut kv, &req, None).await.unwrap();
    let (mut stream, first) = first_chunk(&mut slow, &req, None).await;
    c.put("other", "x", None).await.unwrap();
    let now = c.get("x", None).await.unwrap().header().unwrap().revision();
    c.compact(now, None).await.unwrap();
    let mut kvs = first.kvs;
    let status = loop {
        match stream.message().await {
            Ok(Some(m)) => kvs.extend(m.range_response.unwrap().kvs),
            Ok(None) => panic!("the stream ended without the compaction's error"),
            Err(s) => break s,
        }
    };
    assert_eq!(status.code(), tonic::Code::OutOfRange);
    assert_eq!(
        status.message(),
        "etcdserver: mvcc: required revision has been compacted"
    );
    assert!(kvs.len() < want.kvs.len());
    assert_eq!(kvs[..], want.kvs[..kvs.len()]);
}

#[tokio::test]
async fn a_client_that_stops_reading_holds_nothing_back() {
    let dir = tempfile::tempdir().unwrap();
    let (srv, mut c, _) = start(dir.path()).await;
    let mut slow = narrow(&srv).await;
    fill(&mut c, "big/", 3000, 90).await;
    let ranges = |text: &str| {
        crate::http::parse_prometheus(text)
            .get("etcd_mvcc_range_total")
            .copied()
            .unwrap()
    };
    let before = ranges(&crate::http::get(&srv.endpoint(), "/metrics").await.1);
    let (stream, _) = first_chunk(&mut slow, &range(b"big/", b"big0"), None).await;
    // Writes and a compaction go through while the stream waits.
    let work = async {
        for i in 0..300 {
            c.put(format!("w/{i}"), "v", None).await.unwrap();
        }
        let now = c.get("x", None).await.unwrap().header().unwrap().revision();
        c.compact(now, None).await.unwrap();
        c.put("after", "compaction", None).await.unwrap();
    };
    tokio::time::timeout(Duration::from_secs(60), work)
        .await
        .expect("writes held back by a stalled stream");
    // The stream produced a few chunks ahead and then stopped: it is not reading on.
    let stalled = ranges(&crate::http::get(&srv.endpoint(), "/metrics").await.1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let later = ranges(&crate::http::get(&srv.endpoint(), "/metrics").await.1);
    assert_eq!(stalled, later, "a stalled stream goes on reading");
    assert!(
        later - before < 20.0,
        "{} chunks read ahead",
        later - before
    );
    drop(stream);
    // The server serves on (the hung-up stream's producer ends at its next chunk).
    c.get("big/00001", None).await.unwrap();
}

#[tokio::test]
async fn metrics_count_a_range_per_chunk_and_a_server_stream() {
    let dir = tempfile::tempdir().unwrap();
    let (srv, mut c, mut kv) = start(dir.path()).await;
    fill(&mut c, "k/", 500, 90).await;
    let metrics = || async {
        crate::http::parse_prometheus(&crate::http::get(&srv.endpoint(), "/metrics").await.1)
    };
    let before = metrics().await;
    let n = chunks(&mut kv, &range(b"k/", b"k0"), None)
        .await
        .unwrap()
        .len() as f64;
    assert!(n > 2.0);
    let after = metrics().await;
    let ranges = |m: &std::collections::HashMap<String, f64>| m["etcd_mvcc_range_total"];
    // The probe read of /metrics itself counts nothing; the stream counts one per chunk.
    assert_eq!(ranges(&after) - ranges(&before), n);
    let started = r#"grpc_server_started_total{grpc_method="RangeStream",grpc_service="etcdserverpb.KV",grpc_type="server_stream"}"#;
    assert_eq!(after[started], 1.0, "{after:?}");
}

#[tokio::test]
async fn auth_is_checked_at_the_start_and_when_permissions_change() {
    use etcd_client::{AuthClient, RoleRevokePermissionOptions};
    let dir = tempfile::tempdir().unwrap();
    let (srv, mut c, mut kv) = start(dir.path()).await;
    fill(&mut c, "alice/", 2000, 90).await;
    fill(&mut c, "bob/", 30, 10).await;
    let _alice = crate::auth_on_with_alice(&srv, &mut c, "alice/").await;
    async fn token(auth: &mut AuthClient, name: &str, password: &str) -> String {
        auth.authenticate(name.into(), password.into())
            .await
            .unwrap()
            .token()
            .to_string()
    }
    let root_client = Client::connect([srv.endpoint()], None).await.unwrap();
    let mut auth = root_client.auth_client();
    let root = token(&mut auth, "root", "rootpw").await;
    let alice = token(&mut auth, "alice", "alicepw").await;

    for (req, who) in [
        (range(b"\0", b"\0"), &root),
        (range(b"alice/", b"alice0"), &alice),
        (range(b"alice/00010", b"alice/00020"), &alice),
    ] {
        same_as_range(&mut kv, &req, Some(who)).await;
    }
    for (req, who) in [
        (range(b"bob/", b"bob0"), Some(alice.as_str())),
        (range(b"alice/", b"alice1"), Some(alice.as_str())),
        (range(b"alice/", b"alice0"), None),
    ] {
        let streamed = status_of(chunks(&mut kv, &req, who).await);
        let want = status_of(unary(&mut kv, &req, who).await);
        assert_eq!(streamed, want, "{req:?}");
        assert_ne!(streamed.0, tonic::Code::Ok);
    }
    assert_eq!(
        status_of(chunks(&mut kv, &range(b"bob/", b"bob0"), Some(&alice)).await),
        (
            tonic::Code::PermissionDenied,
            "etcdserver: permission denied".to_string()
        )
    );

    // An auth change that leaves alice's permission alone does not end her stream.
    let req = range(b"alice/", b"alice0");
    let want = unary(&mut kv, &req, Some(&alice)).await.unwrap();
    let (mut stream, first) = first_chunk(&mut narrow(&srv).await, &req, Some(&alice)).await;
    let mut admin = Client::connect(
        [srv.endpoint()],
        Some(etcd_client::ConnectOptions::new().with_user("root", "rootpw")),
    )
    .await
    .unwrap();
    admin.user_add("carol", "carolpw", None).await.unwrap();
    let mut got = vec![first];
    while let Some(m) = stream.message().await.unwrap() {
        got.push(m.range_response.unwrap());
    }
    assert!(got.len() > 5);
    assert_eq!(merge(&got), want);

    // Alice's permission is taken back while her stream waits: it ends refused.
    let (mut stream, _) = first_chunk(&mut narrow(&srv).await, &req, Some(&alice)).await;
    admin
        .role_revoke_permission(
            "alice-role",
            "alice/",
            Some(RoleRevokePermissionOptions::new().with_prefix()),
        )
        .await
        .unwrap();
    let status = loop {
        match stream.message().await {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the stream ended normally after the permission went"),
            Err(s) => break s,
        }
    };
    // etcd 3.7 judges only the token's auth revision, once more at the end of the stream
    // (any auth change fails it then); here the first chunk after the change judges alice
    // again, as a Range sent now is judged.
    let unary_now = status_of(unary(&mut kv, &req, Some(&alice)).await);
    assert_eq!((status.code(), status.message().to_string()), unary_now);
}

#[tokio::test]
async fn no_gateway_route() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let _c = srv.client().await;
    let body = r#"{"key":"YQ=="}"#;
    let stream =
        crate::http::request(&srv.endpoint(), "POST", "/v3/kv/rangestream", body, None).await;
    let unknown =
        crate::http::request(&srv.endpoint(), "POST", "/v3/kv/nosuchthing", body, None).await;
    assert_eq!(stream, unknown);
    // The unary route is there.
    let range = crate::http::request(&srv.endpoint(), "POST", "/v3/kv/range", body, None).await;
    assert_eq!(range.0, 200);
}

#[tokio::test]
async fn shutdown_ends_a_waiting_stream_with_an_error_not_a_clean_end() {
    let dir = tempfile::tempdir().unwrap();
    let (mut srv, mut c, _) = start(dir.path()).await;
    let mut slow = narrow(&srv).await;
    fill(&mut c, "big/", 3000, 90).await;
    let (mut stream, _) = first_chunk(&mut slow, &range(b"big/", b"big0"), None).await;
    let stopping = tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        srv.stop();
        started.elapsed()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status = loop {
        let next = tokio::time::timeout(Duration::from_secs(30), stream.message())
            .await
            .expect("the stream hangs after shutdown");
        match next {
            Ok(Some(m)) => assert!(m.range_response.unwrap().header.is_none()),
            Ok(None) => panic!("a clean end without the last chunk"),
            Err(s) => break s,
        }
    };
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    let took = stopping.await.unwrap();
    assert!(took < Duration::from_secs(20), "shutdown took {took:?}");
}
