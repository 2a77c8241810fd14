//! The Watch service against a real server: every create option, cancel, progress, compaction,
//! and many watchers over one stream and over many.

use std::collections::HashMap;

use etcd_client::{
    Client, EventType, PutOptions, WatchFilterType, WatchOptions, WatchResponse, WatchStream,
};

use crate::Server;

/// The next response on `w` (a stream that ends is a failure).
async fn next(w: &mut WatchStream) -> WatchResponse {
    tokio::time::timeout(std::time::Duration::from_secs(10), w.message())
        .await
        .expect("a watch response within 10 s")
        .expect("watch stream healthy")
        .expect("watch stream open")
}

/// `(type, key, value, mod_revision)` of each event.
fn events(r: &WatchResponse) -> Vec<(EventType, String, String, i64)> {
    r.events()
        .iter()
        .map(|e| {
            let kv = e.kv().unwrap();
            (
                e.event_type(),
                String::from_utf8_lossy(kv.key()).into_owned(),
                String::from_utf8_lossy(kv.value()).into_owned(),
                kv.mod_revision(),
            )
        })
        .collect()
}

async fn rev(c: &mut Client, k: &str, v: &str) -> i64 {
    c.put(k, v, None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision()
}

#[tokio::test]
async fn watch_keys_prefixes_and_ranges_from_now() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    // Written while nobody watches (the hub has told the store to stop notifying): a watch
    // created after the acknowledgement must start past it.
    rev(&mut c, "k", "before").await;
    let mut w = c.watch("k", None).await.unwrap();
    let created = next(&mut w).await;
    assert!(created.created() && created.events().is_empty());
    let start = created.header().unwrap().revision();
    w.watch("p/", Some(WatchOptions::new().with_prefix()))
        .await
        .unwrap();
    let prefix_id = next(&mut w).await.watch_id();
    w.watch("m", Some(WatchOptions::new().with_range("o")))
        .await
        .unwrap();
    next(&mut w).await;
    w.watch("y", Some(WatchOptions::new().with_from_key()))
        .await
        .unwrap();
    next(&mut w).await;

    let r1 = rev(&mut c, "k", "1").await;
    assert_eq!(r1, start + 1);
    let got = next(&mut w).await;
    assert_eq!(events(&got), [(EventType::Put, "k".into(), "1".into(), r1)]);
    assert_eq!(got.header().unwrap().revision(), r1);

    let r2 = rev(&mut c, "p/a", "2").await;
    let got = next(&mut w).await;
    assert_eq!(got.watch_id(), prefix_id);
    assert_eq!(events(&got)[0].3, r2);
    rev(&mut c, "n", "3").await; // in [m, o)
    assert_eq!(events(&next(&mut w).await)[0].1, "n");
    rev(&mut c, "z", "4").await; // from y
    assert_eq!(events(&next(&mut w).await)[0].1, "z");
    c.delete("k", None).await.unwrap();
    let got = next(&mut w).await;
    assert_eq!(events(&got)[0].0, EventType::Delete);
    assert!(got.events()[0].kv().unwrap().value().is_empty());
    rev(&mut c, "unwatched", "x").await;
    rev(&mut c, "k", "again").await;
    assert_eq!(events(&next(&mut w).await)[0].2, "again", "no stray events");
}

#[tokio::test]
async fn history_replay_filters_prev_kv_and_one_response_per_revision() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let first = rev(&mut c, "h/a", "1").await;
    rev(&mut c, "h/b", "1").await;
    c.delete("h/a", None).await.unwrap();
    // One txn: two puts at one revision.
    c.txn(etcd_client::Txn::new().and_then([
        etcd_client::TxnOp::put("h/c", "1", None),
        etcd_client::TxnOp::put("h/d", "1", None),
    ]))
    .await
    .unwrap();

    let mut w = c
        .watch(
            "h/",
            Some(
                WatchOptions::new()
                    .with_prefix()
                    .with_start_revision(first)
                    .with_prev_key(),
            ),
        )
        .await
        .unwrap();
    assert!(next(&mut w).await.created());
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let r = next(&mut w).await;
        let revs: Vec<i64> = r
            .events()
            .iter()
            .map(|e| e.kv().unwrap().mod_revision())
            .collect();
        assert!(revs.windows(2).all(|p| p[0] <= p[1]), "ordered: {revs:?}");
        seen.extend(r.events().to_vec());
    }
    let kinds: Vec<(EventType, String)> = seen
        .iter()
        .map(|e| {
            (
                e.event_type(),
                String::from_utf8_lossy(e.kv().unwrap().key()).into_owned(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (EventType::Put, "h/a".into()),
            (EventType::Put, "h/b".into()),
            (EventType::Delete, "h/a".into()),
            (EventType::Put, "h/c".into()),
            (EventType::Put, "h/d".into()),
        ]
    );
    assert_eq!(
        seen[2].prev_kv().map(|kv| kv.value().to_vec()),
        Some(b"1".to_vec()),
        "the delete carries the value it removed"
    );
    assert!(
        seen[0].prev_kv().is_none(),
        "a create has no previous value"
    );

    // Filters: no puts → only the delete.
    let mut f = c
        .watch(
            "h/",
            Some(
                WatchOptions::new()
                    .with_prefix()
                    .with_start_revision(first)
                    .with_filters([WatchFilterType::NoPut]),
            ),
        )
        .await
        .unwrap();
    assert!(next(&mut f).await.created());
    let only = next(&mut f).await;
    assert_eq!(events(&only)[0].0, EventType::Delete);
    assert_eq!(only.events().len(), 1);
}

#[tokio::test]
async fn cancel_ids_progress_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let mut w = c
        .watch("a", Some(WatchOptions::new().with_watch_id(7)))
        .await
        .unwrap();
    let created = next(&mut w).await;
    assert_eq!((created.created(), created.watch_id()), (true, 7));
    // The same id again on this stream is refused.
    w.watch("b", Some(WatchOptions::new().with_watch_id(7)))
        .await
        .unwrap();
    let dup = next(&mut w).await;
    assert!(dup.canceled(), "{dup:?}");
    // Progress: no events, the current revision.
    let now = rev(&mut c, "other", "x").await;
    w.request_progress().await.unwrap();
    let p = next(&mut w).await;
    assert!(p.events().is_empty() && !p.created() && !p.canceled());
    assert_eq!(p.header().unwrap().revision(), now);
    w.cancel(7).await.unwrap();
    let cancelled = next(&mut w).await;
    assert!(cancelled.canceled());
    assert_eq!(cancelled.watch_id(), 7);
    rev(&mut c, "a", "after-cancel").await;

    // A start revision below the compaction point is cancelled with the compact revision.
    for i in 0..5 {
        rev(&mut c, "a", &i.to_string()).await;
    }
    let compact_at = rev(&mut c, "a", "last").await - 1;
    c.compact(compact_at, None).await.unwrap();
    let mut old = c
        .watch("a", Some(WatchOptions::new().with_start_revision(2)))
        .await
        .unwrap();
    let mut r = next(&mut old).await;
    if r.created() && !r.canceled() {
        r = next(&mut old).await;
    }
    assert!(r.canceled());
    assert_eq!(r.compact_revision(), compact_at);
}

#[tokio::test]
async fn many_watchers_each_see_every_event_once() {
    const STREAMS: usize = 20;
    const PER_STREAM: usize = 50;
    const PUTS: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let mut streams = Vec::new();
    for _ in 0..STREAMS {
        let mut w = c.watch("hot", None).await.unwrap();
        assert!(next(&mut w).await.created());
        for _ in 1..PER_STREAM {
            w.watch("hot", None).await.unwrap();
            assert!(next(&mut w).await.created());
        }
        streams.push(w);
    }
    let mut revs = Vec::new();
    for i in 0..PUTS {
        revs.push(
            c.put("hot", i.to_string(), Some(PutOptions::new()))
                .await
                .unwrap()
                .header()
                .unwrap()
                .revision(),
        );
    }
    for mut w in streams {
        expect_every_put(&mut w, PER_STREAM, &revs).await;
    }
}

/// Reads `watchers × revs` events from `w` and checks that each of `watchers` watches saw every
/// revision of `revs` exactly once, in order.
async fn expect_every_put(w: &mut WatchStream, watchers: usize, revs: &[i64]) {
    let mut per_watch: HashMap<i64, Vec<i64>> = HashMap::new();
    let mut total = 0;
    while total < watchers * revs.len() {
        let r = next(w).await;
        total += r.events().len();
        per_watch
            .entry(r.watch_id())
            .or_default()
            .extend(r.events().iter().map(|e| e.kv().unwrap().mod_revision()));
    }
    assert_eq!(per_watch.len(), watchers);
    for (id, got) in per_watch {
        assert_eq!(got, revs, "watch {id}: every put once, in order");
    }
}

/// A raw Watch stream (etcd-client hides `fragment`): sends `create` and keeps the stream open.
async fn raw_watch(
    endpoint: &str,
    create: actcd_proto::etcdserverpb::WatchCreateRequest,
) -> tonic::Streaming<actcd_proto::etcdserverpb::WatchResponse> {
    use actcd_proto::etcdserverpb::WatchRequest;
    use actcd_proto::etcdserverpb::watch_client::WatchClient;
    use actcd_proto::etcdserverpb::watch_request::RequestUnion;
    use futures::StreamExt;
    let mut client = WatchClient::connect(format!("http://{endpoint}"))
        .await
        .unwrap()
        .max_decoding_message_size(64 << 20);
    let req = WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(create)),
    };
    let requests = futures::stream::iter([req]).chain(futures::stream::pending());
    client.watch(requests).await.unwrap().into_inner()
}

async fn raw_next(
    s: &mut tonic::Streaming<actcd_proto::etcdserverpb::WatchResponse>,
) -> actcd_proto::etcdserverpb::WatchResponse {
    tokio::time::timeout(std::time::Duration::from_secs(10), s.message())
        .await
        .expect("a watch response within 10 s")
        .unwrap()
        .expect("stream open")
}

#[tokio::test]
async fn large_responses_fragment_when_asked_and_progress_notify_ticks() {
    use actcd_proto::etcdserverpb::WatchCreateRequest;
    const KEYS: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    // Fragments are cut at --max-request-bytes plus etcd's 512 KiB of gRPC allowance: 576 KiB
    // here, against 1.2 MB of history.
    let srv = Server::start_with(
        dir.path(),
        &[
            "--max-request-bytes",
            "65536",
            "--experimental-watch-progress-notify-interval",
            "200ms",
        ],
    );
    let mut c = srv.client().await;
    let value = vec![b'v'; 4000];
    for i in 0..KEYS {
        c.put(format!("f/{i:04}"), value.clone(), None)
            .await
            .unwrap();
    }
    let history = |fragment| WatchCreateRequest {
        key: b"f/".to_vec(),
        range_end: b"f0".to_vec(),
        start_revision: 1,
        fragment,
        ..Default::default()
    };

    let mut whole = raw_watch(&srv.endpoint(), history(false)).await;
    assert!(raw_next(&mut whole).await.created);
    let mut seen = 0;
    while seen < KEYS {
        let r = raw_next(&mut whole).await;
        assert!(!r.fragment, "unasked responses are never fragmented");
        seen += r.events.len();
    }

    let mut pieces = raw_watch(&srv.endpoint(), history(true)).await;
    assert!(raw_next(&mut pieces).await.created);
    let (mut revs, mut fragments, mut last_was_fragment) = (Vec::new(), 0, false);
    while revs.len() < KEYS {
        let r = raw_next(&mut pieces).await;
        fragments += usize::from(r.fragment);
        last_was_fragment = r.fragment;
        revs.extend(r.events.iter().map(|e| e.kv.as_ref().unwrap().mod_revision));
    }
    assert!(fragments >= 1, "1.2 MB must be split");
    assert!(!last_was_fragment, "the last piece closes the response");
    assert!(
        revs.windows(2).all(|w| w[0] < w[1]),
        "in order, no duplicates"
    );
    assert_eq!(revs.len(), KEYS);

    // An idle watcher that asked for progress hears the current revision periodically.
    let mut idle = raw_watch(
        &srv.endpoint(),
        WatchCreateRequest {
            key: b"idle".to_vec(),
            progress_notify: true,
            ..Default::default()
        },
    )
    .await;
    assert!(raw_next(&mut idle).await.created);
    let p = raw_next(&mut idle).await;
    assert!(p.events.is_empty() && !p.created && !p.canceled);
    assert_eq!(p.header.unwrap().revision, 1 + KEYS as i64);
}

/// 2,000 watchers on one stream and 30 puts make 60,000 responses, far more than the hub queues
/// for one stream: watchers fall behind, catch up from history, and must still see every put
/// exactly once, in order.
#[tokio::test]
async fn one_crowded_stream_falls_back_to_history_without_losing_events() {
    const WATCHERS: usize = 2000;
    const PUTS: usize = 30;
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let mut w = c.watch("crowd", None).await.unwrap();
    for _ in 1..WATCHERS {
        w.watch("crowd", None).await.unwrap();
    }
    let mut created = 0;
    while created < WATCHERS {
        if next(&mut w).await.created() {
            created += 1;
        }
    }
    let mut revs = Vec::new();
    for i in 0..PUTS {
        let r = c.put("crowd", vec![b'x'; 1024 + i], None).await.unwrap();
        revs.push(r.header().unwrap().revision());
    }
    expect_every_put(&mut w, WATCHERS, &revs).await;
}

/// Issue 28 part 4: clients that stop reading their watch streams hold back neither the writes
/// nor anyone else's watchers (their forwarding waits for room before it takes its turn at the
/// front, `Pipeline::watch_turn`), and once they read again they get every event, in order,
/// from history.
#[tokio::test]
async fn watch_clients_that_stop_reading_hold_back_neither_writes_nor_other_watchers() {
    const STALLED: usize = 2;
    const WATCHERS: usize = 20;
    const PUTS: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    // Each stalled client on a connection of its own, as another process would be.
    let mut stalled = Vec::new();
    for _ in 0..STALLED {
        let mut sc = srv.client().await;
        let mut w = sc
            .watch("big/", Some(WatchOptions::new().with_prefix()))
            .await
            .unwrap();
        for _ in 1..WATCHERS {
            w.watch("big/", Some(WatchOptions::new().with_prefix()))
                .await
                .unwrap();
        }
        let mut created = 0;
        while created < WATCHERS {
            if next(&mut w).await.created() {
                created += 1;
            }
        }
        stalled.push((sc, w));
    }
    let mut reader = srv.client().await;
    let mut live = reader
        .watch("big/", Some(WatchOptions::new().with_prefix()))
        .await
        .unwrap();
    assert!(next(&mut live).await.created());
    // 200 values of 16 KiB to 20 watchers: 64 MiB a stalled stream does not read, far past what
    // its socket, HTTP/2 window and queues hold.
    let writes = async {
        let mut revs = Vec::new();
        for i in 0..PUTS {
            let r = c
                .put(format!("big/{i:04}"), vec![b'v'; 16 << 10], None)
                .await
                .unwrap();
            revs.push(r.header().unwrap().revision());
        }
        revs
    };
    let revs = tokio::time::timeout(std::time::Duration::from_secs(120), writes)
        .await
        .expect("writes held back by watch clients that do not read");
    // The reading client hears of every put while the others still do not read.
    expect_every_put(&mut live, 1, &revs).await;
    // Reading again, the stalled clients get everything, from history where it was dropped.
    for (_, w) in &mut stalled {
        expect_every_put(w, WATCHERS, &revs).await;
    }
}
