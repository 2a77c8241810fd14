//! The MVCC store actor alone, over LMDB in a temporary directory (256 B values), its messages
//! awaited one after another on its `SyncArbiter` thread:
//! - `mvcc/apply_put`: `ApplyBatch` of 1 and 64 Puts overwriting existing keys (one engine
//!   commit, one `fdatasync` per batch), with 100k keys in the store (`puts_100k`) and with 1M
//!   (`puts_1M`, etcd's benchmark scale), so the cost of a larger key index and B-tree shows as
//!   the difference; throughput in Puts;
//! - `mvcc/range` (1M keys): `Range` of one key and of 1000 keys, at the latest revision and at
//!   an old revision (taken before those keys were overwritten, so the key index must pick an
//!   older revision of each);
//! - `mvcc/compaction` (1M keys): an `ApplyBatch` holding one Compaction request at the current
//!   revision, after 64 untimed overwrites. Compaction runs synchronously here, so this is a
//!   walk of the whole 1M-key index plus the deletion of the superseded records.
//!
//! One store serves both sizes: 100k keys are preloaded straight through `Store::apply_batch` in
//! batches of 1000 (as the applier would batch them) before the actor starts (0.1 s), the 100k
//! puts run, then the store grows to 1M through the actor with the same batches (untimed, about
//! 4 s on this 2-core machine, one `fdatasync` per batch), and the 1M cases run. Growing the one
//! store instead of building a second keeps the run short while the store holds the full 1M
//! keys rather than a smaller stand-in. The whole bench runs in about 40 s, most of it in the
//! compaction samples and the growth.
//!
//! Run: `cargo bench --bench mvcc` (`cargo bench --bench mvcc -- --test` runs each once).
//!
//! The key index's share of these costs, without LMDB or the actor, is `benches/mvcc_index.rs`.

mod common;

use std::time::{Duration, Instant};

use actcd_mvcc::{MvccActor, MvccPeers, MvccReader, ReadViews};
use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::{CompactionRequest, RangeRequest};
use actcd_types::msg::{ApplyBatch, Range};
use actix::{Addr, Recipient, System, SystemRunner};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// Keys in the store for the first `apply_put` cases.
const SMALL_KEYS: u64 = 100_000;
/// Keys in the store for the rest.
const KEYS: u64 = 1_000_000;
/// Keys `0..RANGE_KEYS` are overwritten once after growing to `KEYS`; the range benches read
/// them.
const RANGE_KEYS: u64 = 1000;
/// Puts per batch while preloading and growing.
const PRELOAD_BATCH: u64 = 1000;

/// Hands out consistent indexes and request ids, and which key the next Put writes.
struct Writer {
    next_index: u64,
    next_id: u64,
    next_key: u64,
    /// Keys the store holds: overwrites wrap over `0..keys`.
    keys: u64,
}

impl Writer {
    /// One `ApplyBatch` of `n` Puts on the next `n` keys (wrapping over the key space).
    fn puts(&mut self, n: u64) -> ApplyBatch {
        let keys = (0..n)
            .map(|_| {
                let k = self.next_key % self.keys;
                self.next_key += 1;
                k
            })
            .collect::<Vec<_>>();
        self.batch(keys)
    }

    /// One `ApplyBatch` of Puts of `keys`.
    fn batch(&mut self, keys: impl IntoIterator<Item = u64>) -> ApplyBatch {
        self.next_index += 1;
        let requests = keys
            .into_iter()
            .map(|k| {
                self.next_id += 1;
                common::put(self.next_id, k)
            })
            .collect();
        ApplyBatch {
            consistent_index: self.next_index,
            term: 1,
            requests,
            replies: Vec::new(),
            ops: Vec::new(),
            leases: Vec::new(),
        }
    }

    fn compaction(&mut self, revision: i64) -> ApplyBatch {
        self.next_index += 1;
        ApplyBatch {
            consistent_index: self.next_index,
            term: 1,
            requests: vec![InternalRaftRequest {
                compaction: Some(CompactionRequest {
                    revision,
                    physical: false,
                }),
                ..Default::default()
            }],
            replies: Vec::new(),
            ops: Vec::new(),
            leases: Vec::new(),
        }
    }
}

async fn apply(store: &Addr<MvccActor>, batch: ApplyBatch) -> i64 {
    common::check_all(
        store
            .send(batch)
            .await
            .expect("mvcc mailbox")
            .expect("apply batch")
            .results,
    )
}

/// `mvcc/apply_put` with the store at its current size, `label` naming it.
fn bench_puts(
    c: &mut Criterion,
    sys: &SystemRunner,
    store: &Addr<MvccActor>,
    writer: &mut Writer,
    label: &str,
) {
    let mut group = c.benchmark_group("mvcc/apply_put");
    for n in [1, 64] {
        group.throughput(Throughput::Elements(n));
        group.bench_function(BenchmarkId::new(format!("puts_{label}"), n), |b| {
            b.iter_custom(|iters| {
                // Built outside the clock: the applier hands the store decoded requests.
                let batches: Vec<_> = (0..iters).map(|_| writer.puts(n)).collect();
                sys.block_on(async {
                    let start = Instant::now();
                    for batch in batches {
                        apply(store, batch).await;
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
}

fn bench_mvcc(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let preload = Instant::now();
    let mut store = common::preloaded_store(dir.path(), SMALL_KEYS);
    let mut writer = Writer {
        next_index: store.consistent_index(),
        next_id: SMALL_KEYS,
        next_key: 0,
        keys: SMALL_KEYS,
    };
    let sys = System::new();
    // The store publishes a read view after every batch; the reader answers from them.
    let (publisher, views) = ReadViews::channel(store.read_view());
    let (store, reader) = sys.block_on(async move {
        let peers = MvccPeers {
            views: Some(publisher),
            ..MvccPeers::default()
        };
        (
            MvccActor::start_with(store, 1, Some(peers)),
            MvccReader::start_on_own_thread(views),
        )
    });
    eprintln!(
        "mvcc: preloaded {SMALL_KEYS} keys in {:.1} s",
        preload.elapsed().as_secs_f64()
    );

    bench_puts(c, &sys, &store, &mut writer, "100k");

    // Grow to KEYS (new keys, one revision each, as the preload), then overwrite the range keys
    // once: `old_rev` is the revision before that overwrite.
    let grow = Instant::now();
    let old_rev = sys.block_on(async {
        let mut revision = 0;
        for first in (SMALL_KEYS..KEYS).step_by(PRELOAD_BATCH as usize) {
            let batch = writer.batch(first..KEYS.min(first + PRELOAD_BATCH));
            revision = apply(&store, batch).await;
        }
        revision
    });
    writer.keys = KEYS;
    writer.next_key = 0;
    let overwrite = writer.puts(RANGE_KEYS);
    sys.block_on(apply(&store, overwrite));
    eprintln!(
        "mvcc: grew to {KEYS} keys in {:.1} s",
        grow.elapsed().as_secs_f64()
    );

    let mut group = c.benchmark_group("mvcc/range");
    let cases = [
        ("one_key", common::key(RANGE_KEYS / 2), Vec::new(), 1),
        (
            "1000_keys",
            common::key(0),
            common::key(RANGE_KEYS),
            RANGE_KEYS as usize,
        ),
    ];
    // Through the store's own mailbox, and through the reader (from the views, on its thread).
    let doors: [(&str, Recipient<Range>); 2] = [
        ("", store.clone().recipient()),
        ("_reader", reader.clone().recipient()),
    ];
    for ((name, key, range_end, want), (via, door)) in cases
        .into_iter()
        .flat_map(|case| doors.clone().map(|d| (case.clone(), d)))
    {
        for (at, revision) in [("latest", 0), ("old", old_rev)] {
            let request = RangeRequest {
                key: key.clone(),
                range_end: range_end.clone(),
                revision,
                ..Default::default()
            };
            group.throughput(Throughput::Elements(want as u64));
            group.bench_function(BenchmarkId::new(format!("{name}{via}"), at), |b| {
                b.iter_custom(|iters| {
                    sys.block_on(async {
                        let start = Instant::now();
                        for _ in 0..iters {
                            let resp = door
                                .send(Range {
                                    request: request.clone(),
                                })
                                .await
                                .expect("mvcc mailbox")
                                .expect("range");
                            assert_eq!(resp.kvs.len(), want);
                        }
                        start.elapsed()
                    })
                })
            });
        }
    }
    group.finish();

    bench_puts(c, &sys, &store, &mut writer, "1M");

    // Last: it removes the history the old-revision ranges read.
    let mut group = c.benchmark_group("mvcc/compaction");
    group.bench_function("after_64_puts", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let overwrites = writer.puts(64);
                total += sys.block_on(async {
                    let revision = apply(&store, overwrites).await;
                    let compaction = writer.compaction(revision);
                    let start = Instant::now();
                    apply(&store, compaction).await;
                    start.elapsed()
                });
            }
            total
        })
    });
    group.finish();

    // Every key of the store is there, at the latest revision.
    let count = sys
        .block_on(store.send(Range {
            request: RangeRequest {
                key: common::key(0),
                range_end: common::key(KEYS),
                count_only: true,
                ..Default::default()
            },
        }))
        .expect("mvcc mailbox")
        .expect("range");
    assert_eq!(count.count, KEYS as i64);
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = bench_mvcc
}
criterion_main!(benches);
