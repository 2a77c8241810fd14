//! The watch hub actor alone, its history reads answered by a fake store (empty chunks; none is
//! expected, since every watcher starts at the current revision and no stream ever fills up):
//! - `watch/notify`: one `Notify` carrying one Put (256 B value) sent to the hub and awaited,
//!   then every response it produced received from its stream's queue: fan-out latency per
//!   notification. Throughput in deliveries (responses).
//!   - `hot_key/100`: 100 watchers on `hot`, 10 streams of 10;
//!   - `hot_key/10000`: 10,000 watchers on `hot`, 100 streams of 100: the cost of fan-out
//!     should grow linearly from the first, per delivery about the same;
//!   - `distinct_keys_one_match/10000`: 10,000 watchers on distinct keys over 100 streams, each
//!     notification matching exactly one: the key index must make this cost one lookup, not a
//!     scan of the watchers.
//!
//! Before those, the set-up measures memory per idle watcher: the process's resident memory
//! (VmRSS) before and after creating 100,000 watchers on distinct keys (100 streams of 1000)
//! in a hub of their own, printed as bytes per watcher (a measurement, not a check). At 100k the
//! total is tens of MB, so RSS's page granularity and the allocator's slack are small beside
//! it. It runs first, before anything else has grown the heap, and that hub is closed again
//! before the timings.
//!
//! Run: `cargo bench --bench watch` (`cargo bench --bench watch -- --test` runs each once).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use actcd_proto::etcdserverpb::watch_request::RequestUnion;
use actcd_proto::etcdserverpb::{WatchCreateRequest, WatchRequest};
use actcd_proto::mvccpb::event::EventType;
use actcd_proto::mvccpb::{Event, KeyValue};
use actcd_types::EtcdError;
use actcd_types::msg::{History, HistoryChunk, Notify};
use actcd_watch::{
    CloseStream, GetHubStats, HubConfig, OpenStream, ResponseReceiver, StreamId, StreamResponse,
    WatchHubActor, WatchRequestMsg,
};
use actix::{Actor, Addr, Context, Handler, System, SystemRunner};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const HOT: &[u8] = b"hot";
/// Each stream's queue: more than one notification's worth of responses on any stream here, and
/// the number of creates sent before their `created` responses are received.
const STREAM_CAPACITY: usize = 128;
/// The hub starts at this store revision; the first notification carries the next one.
const START_REVISION: i64 = 1;

/// The MVCC store as the hub sees it: every history read gets an empty chunk reaching `to`.
/// Counts the reads.
struct FakeStore {
    reads: Arc<AtomicU64>,
}

impl Actor for FakeStore {
    type Context = Context<Self>;
}

impl Handler<History> for FakeStore {
    type Result = Result<HistoryChunk, EtcdError>;

    fn handle(&mut self, h: History, _: &mut Context<Self>) -> Self::Result {
        self.reads.fetch_add(1, Ordering::Relaxed);
        Ok(HistoryChunk {
            events: Vec::new(),
            through: h.to,
            compact_revision: 0,
            current_revision: h.to,
        })
    }
}

/// A Put of `key` at `revision`, as the store notifies it.
fn put_event(key: &[u8], revision: i64) -> Event {
    Event {
        r#type: EventType::Put as i32,
        kv: Some(KeyValue {
            key: key.to_vec(),
            create_revision: START_REVISION,
            mod_revision: revision,
            version: revision - START_REVISION + 1,
            value: vec![b'v'; common::VALUE_LEN],
            lease: 0,
        }),
        prev_kv: None,
    }
}

fn create(key: Vec<u8>) -> WatchRequest {
    WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
            key,
            ..Default::default()
        })),
    }
}

/// A hub with its streams' receiving ends.
struct Fixture {
    hub: Addr<WatchHubActor>,
    streams: Vec<(StreamId, ResponseReceiver)>,
    /// Watchers per stream; watcher `w` of stream `s` has id `w` and is the `s * per_stream + w`th
    /// created.
    per_stream: usize,
    /// The hub's revision: the last one notified.
    revision: i64,
}

impl Fixture {
    /// A hub at `START_REVISION` with `streams` streams of `per_stream` watchers, the `n`th
    /// created watching `key(n)` from the next revision on. Every `created` response is
    /// received, so the queues are empty afterwards.
    async fn start(
        store: &Addr<FakeStore>,
        streams: usize,
        per_stream: usize,
        key: impl Fn(usize) -> Vec<u8>,
    ) -> Self {
        let hub = WatchHubActor::new(
            HubConfig::default(),
            store.clone().recipient(),
            START_REVISION,
        )
        .start();
        let mut opened = Vec::with_capacity(streams);
        for _ in 0..streams {
            let o = hub
                .send(OpenStream {
                    capacity: STREAM_CAPACITY,
                    max_bytes: usize::MAX,
                })
                .await
                .expect("hub mailbox");
            opened.push((o.stream, o.responses));
        }
        let mut fx = Self {
            hub,
            streams: opened,
            per_stream,
            revision: START_REVISION,
        };
        fx.create_watchers(key).await;
        fx
    }

    async fn create_watchers(&mut self, key: impl Fn(usize) -> Vec<u8>) {
        for (s, (stream, rx)) in self.streams.iter_mut().enumerate() {
            for first in (0..self.per_stream).step_by(STREAM_CAPACITY) {
                let chunk = first..self.per_stream.min(first + STREAM_CAPACITY);
                for w in chunk.clone() {
                    let request = create(key(s * self.per_stream + w));
                    self.hub
                        .send(WatchRequestMsg {
                            stream: *stream,
                            request,
                        })
                        .await
                        .expect("hub mailbox");
                }
                for w in chunk {
                    let r = rx.try_recv().expect("created response").0.into_response();
                    assert!(r.created && !r.canceled, "create refused: {r:?}");
                    assert_eq!(r.watch_id, w as i64);
                }
            }
        }
    }

    fn watchers(&self) -> usize {
        self.streams.len() * self.per_stream
    }

    /// `n` notifications of one Put each, on the key `key(revision)` gives.
    fn notifies(&mut self, n: u64, key: impl Fn(i64) -> Vec<u8>) -> Vec<Notify> {
        (0..n)
            .map(|_| {
                self.revision += 1;
                Notify {
                    revision: self.revision,
                    events: vec![put_event(&key(self.revision), self.revision)],
                    restored: false,
                }
            })
            .collect()
    }

    async fn notify(&self, n: Notify) {
        self.hub.send(n).await.expect("hub mailbox");
    }

    /// Receives one response with the event at `revision` from stream `s`.
    async fn receive(&mut self, s: usize, revision: i64) -> StreamResponse {
        let (r, _) = self.streams[s].1.recv().await.expect("stream open");
        let header = r.response.header.expect("header");
        assert_eq!(header.revision, revision);
        assert_eq!(r.event_count(), 1);
        r
    }

    /// Checks every queue is empty and every watcher still synced.
    async fn check_idle(&mut self) {
        for (stream, rx) in &mut self.streams {
            assert!(
                rx.try_recv().is_none(),
                "stream {stream:?} holds an unexpected response"
            );
        }
        let stats = self.hub.send(GetHubStats).await.expect("hub mailbox");
        assert_eq!(stats.watchers, self.watchers());
        assert_eq!(stats.synced, self.watchers());
        assert_eq!(stats.current_revision, self.revision);
    }

    async fn close(self) {
        for (stream, _) in &self.streams {
            self.hub
                .send(CloseStream { stream: *stream })
                .await
                .expect("hub mailbox");
        }
    }
}

/// Resident memory per idle watcher, from 100,000 watchers on distinct keys.
fn report_idle_memory(sys: &SystemRunner, store: &Addr<FakeStore>) {
    const STREAMS: usize = 100;
    const PER_STREAM: usize = 1000;
    sys.block_on(async {
        let before = common::vm_rss_bytes();
        let mut fx = Fixture::start(store, STREAMS, PER_STREAM, |n| common::key(n as u64)).await;
        let after = common::vm_rss_bytes();
        fx.check_idle().await;
        let watchers = fx.watchers() as u64;
        eprintln!(
            "watch: {watchers} idle watchers on distinct keys ({STREAMS} streams): RSS {:.1} MiB -> \
             {:.1} MiB, {} bytes per watcher",
            before as f64 / (1 << 20) as f64,
            after as f64 / (1 << 20) as f64,
            after.saturating_sub(before) / watchers,
        );
        fx.close().await;
    });
}

fn bench_notify(c: &mut Criterion) {
    let sys = System::new();
    let reads = Arc::new(AtomicU64::new(0));
    let store = sys.block_on(async {
        FakeStore {
            reads: reads.clone(),
        }
        .start()
    });
    report_idle_memory(&sys, &store);

    let mut group = c.benchmark_group("watch/notify");
    for (streams, per_stream) in [(10, 10), (100, 100)] {
        let mut fx = sys.block_on(Fixture::start(&store, streams, per_stream, |_| {
            HOT.to_vec()
        }));
        let watchers = fx.watchers();
        group.throughput(Throughput::Elements(watchers as u64));
        group.bench_function(BenchmarkId::new("hot_key", watchers), |b| {
            b.iter_custom(|iters| {
                // Built outside the clock: the store hands the hub events it already has.
                let notifies = fx.notifies(iters, |_| HOT.to_vec());
                sys.block_on(async {
                    let start = Instant::now();
                    for n in notifies {
                        let revision = n.revision;
                        fx.notify(n).await;
                        for s in 0..streams {
                            for _ in 0..per_stream {
                                fx.receive(s, revision).await;
                            }
                        }
                    }
                    start.elapsed()
                })
            })
        });
        sys.block_on(async {
            fx.check_idle().await;
            fx.close().await;
        });
    }

    // Watcher n watches key(n), so the Put at revision r matches watcher r % KEYS.
    const KEYS: usize = 10_000;
    const PER_STREAM: usize = 100;
    let mut fx = sys.block_on(Fixture::start(&store, KEYS / PER_STREAM, PER_STREAM, |n| {
        common::key(n as u64)
    }));
    let key_of = |revision: i64| revision as usize % KEYS;
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new("distinct_keys_one_match", KEYS), |b| {
        b.iter_custom(|iters| {
            let notifies = fx.notifies(iters, |r| common::key(key_of(r) as u64));
            sys.block_on(async {
                let start = Instant::now();
                for n in notifies {
                    let revision = n.revision;
                    fx.notify(n).await;
                    let watcher = key_of(revision);
                    let r = fx.receive(watcher / PER_STREAM, revision).await;
                    assert_eq!(r.response.watch_id, (watcher % PER_STREAM) as i64);
                }
                start.elapsed()
            })
        })
    });
    group.finish();
    sys.block_on(async {
        fx.check_idle().await;
        fx.close().await;
    });

    assert_eq!(
        reads.load(Ordering::Relaxed),
        0,
        "no watcher should have fallen behind"
    );
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = bench_notify
}
criterion_main!(benches);
