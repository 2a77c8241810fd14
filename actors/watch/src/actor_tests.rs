//! The actor with a fake store that answers `History` from an in-memory event list and records
//! every read. Time is paused: timers fire as soon as nothing else can run, never by sleeping.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actcd_proto::etcdserverpb::watch_request::RequestUnion;
use actcd_proto::etcdserverpb::{WatchCreateRequest, WatchRequest, WatchResponse};
use actcd_proto::mvccpb::event::EventType;
use actcd_proto::mvccpb::{Event, KeyValue};
use actcd_types::EtcdError;
use actcd_types::msg::{History, HistoryChunk, Notify, WatchInterest};
use actix::{Actor, Addr, Context, Handler, ResponseFuture};
use tokio::sync::Semaphore;

use crate::actor::*;
use crate::hub::HubConfig;
use actcd_types::watch::{CloseStream, OpenStream, ResponseReceiver, StreamId, WatchRequestMsg};

#[derive(Default)]
struct StoreState {
    events: Vec<Event>,
    current: i64,
    compact: i64,
    reads: Vec<(i64, i64)>,
    /// Fail this many reads first.
    failures: usize,
    /// Every `WatchInterest` taken, in order.
    interest: Vec<bool>,
}

/// The MVCC store as the hub sees it. Replies wait for a permit of `gate`, so a test can hold
/// a read in flight.
struct FakeStore {
    state: Arc<Mutex<StoreState>>,
    gate: Arc<Semaphore>,
}

impl Actor for FakeStore {
    type Context = Context<Self>;
}

impl Handler<History> for FakeStore {
    type Result = ResponseFuture<Result<HistoryChunk, EtcdError>>;

    fn handle(&mut self, h: History, _: &mut Context<Self>) -> Self::Result {
        let state = self.state.clone();
        let gate = self.gate.clone();
        Box::pin(async move {
            gate.acquire().await.expect("gate").forget();
            let mut s = state.lock().unwrap();
            s.reads.push((h.from, h.to));
            if s.failures > 0 {
                s.failures -= 1;
                return Err(EtcdError::Internal("disk on fire".into()));
            }
            Ok(crate::hub_tests::answer_history(
                &s.events, h, s.compact, s.current,
            ))
        })
    }
}

/// The store notifies only while the hub listens; the reply is its revision.
impl Handler<WatchInterest> for FakeStore {
    type Result = i64;

    fn handle(&mut self, m: WatchInterest, _: &mut Context<Self>) -> i64 {
        let mut s = self.state.lock().unwrap();
        s.interest.push(m.on);
        s.current
    }
}

struct Setup {
    hub: Addr<WatchHubActor>,
    store: Arc<Mutex<StoreState>>,
    gate: Arc<Semaphore>,
}

impl Setup {
    /// A hub over a store already holding one put of `key` per revision in `1..=current`.
    fn new(cfg: HubConfig, key: &str, current: i64) -> Self {
        let store = Arc::new(Mutex::new(StoreState {
            events: (1..=current).map(|r| put(key, r)).collect(),
            current,
            ..Default::default()
        }));
        let gate = Arc::new(Semaphore::new(Semaphore::MAX_PERMITS));
        let fake = FakeStore {
            state: store.clone(),
            gate: gate.clone(),
        }
        .start();
        let hub = WatchHubActor::new(cfg, fake.recipient(), current).start();
        Self { hub, store, gate }
    }

    /// Apply a write in the store and notify the hub, as the MVCC actor does.
    async fn write(&self, events: Vec<Event>) {
        let rev = {
            let mut s = self.store.lock().unwrap();
            s.current = events.last().unwrap().kv.as_ref().unwrap().mod_revision;
            s.events.extend(events.iter().cloned());
            s.current
        };
        self.hub
            .send(Notify {
                revision: rev,
                events,
                restored: false,
            })
            .await
            .unwrap();
    }

    async fn open(&self, capacity: usize) -> (StreamId, ResponseReceiver) {
        let o = self
            .hub
            .send(OpenStream {
                capacity,
                max_bytes: usize::MAX,
            })
            .await
            .unwrap();
        (o.stream, o.responses)
    }

    async fn watch(&self, stream: StreamId, c: WatchCreateRequest) {
        self.hub
            .send(WatchRequestMsg {
                stream,
                request: WatchRequest {
                    request_union: Some(RequestUnion::CreateRequest(c)),
                },
            })
            .await
            .unwrap();
    }
}

fn put(key: &str, rev: i64) -> Event {
    Event {
        r#type: EventType::Put as i32,
        kv: Some(KeyValue {
            key: key.as_bytes().to_vec(),
            create_revision: 1,
            mod_revision: rev,
            version: rev,
            value: b"v".to_vec(),
            lease: 0,
        }),
        prev_kv: None,
    }
}

fn watch_from(key: &str, start: i64) -> WatchCreateRequest {
    WatchCreateRequest {
        key: key.as_bytes().to_vec(),
        start_revision: start,
        ..Default::default()
    }
}

/// Receive `n` responses; fails (instead of hanging) when time has to run far ahead for them.
async fn recv(rx: &mut ResponseReceiver, n: usize) -> Vec<WatchResponse> {
    let mut out = Vec::new();
    for _ in 0..n {
        let r = tokio::time::timeout(Duration::from_secs(3600), rx.recv())
            .await
            .expect("a response within the hour")
            .expect("stream open");
        out.push(r.0.into_response());
    }
    out
}

fn revs(r: &WatchResponse) -> Vec<i64> {
    r.events
        .iter()
        .map(|e| e.kv.as_ref().unwrap().mod_revision)
        .collect()
}

#[actix_rt::test]
async fn streams_get_created_then_events_then_cancel() {
    tokio::time::pause();
    let s = Setup::new(HubConfig::default(), "k", 3);
    let (stream, mut rx) = s.open(16).await;
    s.watch(stream, watch_from("k", 0)).await;
    s.write(vec![put("k", 4)]).await;
    s.hub
        .send(WatchRequestMsg {
            stream,
            request: WatchRequest {
                request_union: Some(RequestUnion::CancelRequest(
                    actcd_proto::etcdserverpb::WatchCancelRequest { watch_id: 0 },
                )),
            },
        })
        .await
        .unwrap();
    let got = recv(&mut rx, 3).await;
    assert!(got[0].created && got[0].header.unwrap().revision == 3);
    assert_eq!(
        (revs(&got[1]), got[1].header.unwrap().revision),
        (vec![4], 4)
    );
    assert!(got[2].canceled && got[2].watch_id == 0);
    s.hub.send(CloseStream { stream }).await.unwrap();
    assert!(rx.recv().await.is_none(), "closing drops the queue");
    let st = s.hub.send(GetHubStats).await.unwrap();
    assert_eq!((st.streams, st.watchers), (0, 0));
    assert!(s.store.lock().unwrap().reads.is_empty());
}

#[actix_rt::test]
async fn catch_up_reads_history_while_notifications_keep_arriving() {
    tokio::time::pause();
    let s = Setup::new(HubConfig::default(), "k", 5);
    // Hold the store's replies.
    s.gate.forget_permits(Semaphore::MAX_PERMITS);
    let (stream, mut rx) = s.open(16).await;
    s.watch(stream, watch_from("k", 2)).await;
    s.write(vec![put("k", 6)]).await;
    s.write(vec![put("k", 7)]).await;
    let st = s.hub.send(GetHubStats).await.unwrap();
    assert!(st.history_read_in_flight);
    assert_eq!((st.unsynced, st.current_revision), (1, 7));
    s.gate.add_permits(Semaphore::MAX_PERMITS);
    let got = recv(&mut rx, 3).await;
    assert!(got[0].created);
    assert_eq!(
        (revs(&got[1]), got[1].header.unwrap().revision),
        (vec![2, 3, 4, 5], 5)
    );
    assert_eq!(
        (revs(&got[2]), got[2].header.unwrap().revision),
        (vec![6, 7], 7)
    );
    s.write(vec![put("k", 8)]).await;
    assert_eq!(revs(&recv(&mut rx, 1).await[0]), vec![8]);
    assert_eq!(s.store.lock().unwrap().reads, vec![(2, 5), (6, 7)]);
    assert_eq!(s.hub.send(GetHubStats).await.unwrap().synced, 1);
}

#[actix_rt::test]
async fn a_failed_read_is_retried_after_the_retry_interval() {
    tokio::time::pause();
    let s = Setup::new(HubConfig::default(), "k", 2);
    s.store.lock().unwrap().failures = 2;
    let (stream, mut rx) = s.open(16).await;
    s.watch(stream, watch_from("k", 1)).await;
    let got = recv(&mut rx, 2).await;
    assert_eq!(revs(&got[1]), vec![1, 2]);
    assert_eq!(s.store.lock().unwrap().reads, vec![(1, 2), (1, 2), (1, 2)]);
}

#[actix_rt::test]
async fn compacted_start_is_canceled_with_the_compact_revision() {
    tokio::time::pause();
    let s = Setup::new(HubConfig::default(), "k", 9);
    s.store.lock().unwrap().compact = 5;
    let (stream, mut rx) = s.open(16).await;
    s.watch(stream, watch_from("k", 4)).await;
    let got = recv(&mut rx, 2).await;
    assert!(got[0].created);
    assert!(got[1].canceled);
    assert_eq!(
        (got[1].compact_revision, got[1].header.unwrap().revision),
        (5, 0)
    );
}

#[actix_rt::test]
async fn a_slow_stream_catches_up_later_and_never_holds_up_others() {
    tokio::time::pause();
    let s = Setup::new(HubConfig::default(), "k", 0);
    let (slow, mut slow_rx) = s.open(2).await;
    let (fast, mut fast_rx) = s.open(100).await;
    s.watch(slow, watch_from("k", 0)).await;
    s.watch(fast, watch_from("k", 0)).await;
    for rev in 1..=20 {
        s.write(vec![put("k", rev)]).await;
    }
    let fast_got = recv(&mut fast_rx, 21).await;
    let fast_revs: Vec<i64> = fast_got.iter().flat_map(revs).collect();
    assert_eq!(fast_revs, (1..=20).collect::<Vec<_>>());
    assert_eq!(s.hub.send(GetHubStats).await.unwrap().victims, 1);
    // Reading the slow stream makes room; the retry timer brings the victim back.
    let mut slow_revs = Vec::new();
    while slow_revs.len() < 20 {
        let r = recv(&mut slow_rx, 1).await.remove(0);
        slow_revs.extend(revs(&r));
    }
    assert_eq!(slow_revs, (1..=20).collect::<Vec<_>>());
    let st = s.hub.send(GetHubStats).await.unwrap();
    assert_eq!((st.synced, st.victims, st.backlog), (2, 0, 0));
}

#[actix_rt::test]
async fn progress_notify_follows_the_configured_interval() {
    tokio::time::pause();
    let cfg = HubConfig {
        progress_interval: Duration::from_secs(60),
        ..Default::default()
    };
    let s = Setup::new(cfg, "k", 3);
    let (stream, mut rx) = s.open(16).await;
    let mut c = watch_from("k", 0);
    c.progress_notify = true;
    s.watch(stream, c).await;
    assert!(recv(&mut rx, 1).await[0].created);
    let started = tokio::time::Instant::now();
    let got = recv(&mut rx, 1).await;
    // Timers round to the millisecond.
    assert!(
        started.elapsed() <= Duration::from_secs(61),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        (
            got[0].watch_id,
            got[0].events.len(),
            got[0].header.unwrap().revision
        ),
        (0, 0, 3)
    );
    // An explicit tick right after one: the watcher is due again (it got no events).
    s.hub.send(ProgressTick).await.unwrap();
    assert_eq!(recv(&mut rx, 1).await[0].header.unwrap().revision, 3);
}

#[actix_rt::test]
async fn a_dropped_receiver_is_noticed_and_forgotten() {
    tokio::time::pause();
    let s = Setup::new(HubConfig::default(), "k", 0);
    let (stream, rx) = s.open(4).await;
    s.watch(stream, watch_from("k", 0)).await;
    drop(rx);
    s.write(vec![put("k", 1)]).await;
    let st = s.hub.send(GetHubStats).await.unwrap();
    assert_eq!((st.streams, st.watchers), (0, 0));
}

/// 10,000 watchers over 100 streams with small queues drained by their own tasks: every
/// watcher sees every revision exactly once, in order.
#[actix_rt::test]
async fn load_10000_watchers_across_100_streams_through_channels() {
    tokio::time::pause();
    const STREAMS: usize = 100;
    const PER_STREAM: usize = 100;
    const WRITES: i64 = 30;
    let s = Setup::new(HubConfig::default(), "k", 10);
    let mut readers = Vec::new();
    for i in 0..STREAMS {
        let (stream, mut rx) = s.open(if i % 2 == 0 { 4 } else { 256 }).await;
        for w in 0..PER_STREAM {
            // Half start in the past (revision 5), half from now.
            let start = if w % 2 == 0 { 5 } else { 0 };
            s.watch(stream, watch_from("k", start)).await;
        }
        readers.push(actix_rt::spawn(async move {
            let mut seen: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
            let want =
                PER_STREAM / 2 * (10 - 4 + WRITES as usize) + PER_STREAM / 2 * WRITES as usize;
            let mut total = 0;
            while total < want {
                let r = tokio::time::timeout(Duration::from_secs(3600), rx.recv())
                    .await
                    .expect("events keep coming")
                    .expect("stream open");
                let r = r.0.into_response();
                total += r.events.len();
                seen.entry(r.watch_id).or_default().extend(revs(&r));
            }
            seen
        }));
    }
    for rev in 11..=10 + WRITES {
        s.write(vec![put("k", rev)]).await;
    }
    for reader in readers {
        let seen = reader.await.unwrap();
        assert_eq!(seen.len(), PER_STREAM);
        for (id, got) in seen {
            let from = if id % 2 == 0 { 5 } else { 11 };
            assert_eq!(got, (from..=10 + WRITES).collect::<Vec<_>>(), "watch {id}");
        }
    }
    let st = s.hub.send(GetHubStats).await.unwrap();
    assert_eq!(
        (st.synced, st.unsynced, st.victims),
        (STREAMS * PER_STREAM, 0, 0)
    );
}

/// A hub with no watchers stops the store's notifications; the next create asks for them again
/// and starts its watcher after the revision the store reports, which writes made while nobody
/// listened have moved on.
#[actix_rt::test]
async fn a_hub_without_watchers_stops_listening_and_catches_up_on_the_next_create() {
    tokio::time::pause();
    let store = Arc::new(Mutex::new(StoreState {
        current: 3,
        ..Default::default()
    }));
    let fake = FakeStore {
        state: store.clone(),
        gate: Arc::new(Semaphore::new(Semaphore::MAX_PERMITS)),
    }
    .start();
    let hub = WatchHubActor::new(HubConfig::default(), fake.clone().recipient(), 3)
        .with_interest(fake.recipient())
        .start();
    let (stream, mut rx) = {
        let o = hub
            .send(OpenStream {
                capacity: 16,
                max_bytes: usize::MAX,
            })
            .await
            .unwrap();
        (o.stream, o.responses)
    };
    tokio::task::yield_now().await;
    assert_eq!(
        store.lock().unwrap().interest,
        vec![false],
        "idle from the start"
    );

    // Writes 4 and 5 happen unnoticed.
    store.lock().unwrap().current = 5;
    hub.send(WatchRequestMsg {
        stream,
        request: WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(watch_from("k", 0))),
        },
    })
    .await
    .unwrap();
    let created = recv(&mut rx, 1).await;
    assert!(created[0].created);
    assert_eq!(
        created[0].header.unwrap().revision,
        5,
        "the store's revision, not the hub's"
    );
    assert_eq!(store.lock().unwrap().interest, vec![false, true]);

    // Notifications the store sent before it answered are stale; the next one is delivered.
    hub.send(Notify {
        revision: 5,
        events: vec![put("k", 5)],
        restored: false,
    })
    .await
    .unwrap();
    hub.send(Notify {
        revision: 6,
        events: vec![put("k", 6)],
        restored: false,
    })
    .await
    .unwrap();
    assert_eq!(revs(&recv(&mut rx, 1).await[0]), vec![6]);

    hub.send(CloseStream { stream }).await.unwrap();
    tokio::task::yield_now().await;
    assert_eq!(store.lock().unwrap().interest, vec![false, true, false]);
}
