//! The MVCC store actor alone, over LMDB in a temporary directory, preloaded with 1M keys
//! (256 B values, etcd's benchmark scale), its messages awaited one after another on its
//! `SyncArbiter` thread:
//! - `mvcc/range`: `Range` of one key and of 1000 keys, at the latest revision and at an old
//!   revision (taken before those keys were overwritten, so the key index must pick an older
//!   revision of each);
//! - `mvcc/apply_put`: `ApplyBatch` of 1 and 64 Puts overwriting existing keys (one engine
//!   commit, one `fdatasync` per batch); throughput in Puts;
//! - `mvcc/compaction`: an `ApplyBatch` holding one Compaction request at the current revision,
//!   after 64 untimed overwrites. Compaction runs synchronously here, so this is a walk of the
//!   whole 1M-key index plus the deletion of the superseded records.
//!
//! The preload goes straight through `Store::apply_batch` in batches of 1000 (as the applier
//! would batch them) before the actor starts; it takes about 1.5 s on this 2-core machine, so
//! the store holds the full 1M keys rather than a smaller stand-in. The whole bench runs in
//! about 30 s, most of it in the compaction samples.
//!
//! Run: `cargo bench --bench mvcc` (`cargo bench --bench mvcc -- --test` runs each once).

mod common;

use std::time::{Duration, Instant};

use actcd_mvcc::MvccActor;
use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::{CompactionRequest, RangeRequest};
use actcd_types::msg::{ApplyBatch, Range};
use actix::{Addr, System};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const KEYS: u64 = 1_000_000;
/// Keys `0..RANGE_KEYS` are overwritten once after the preload; the range benches read them.
const RANGE_KEYS: u64 = 1000;

/// Hands out consistent indexes and request ids, and which key the next Put overwrites.
struct Writer {
    next_index: u64,
    next_key: u64,
}

impl Writer {
    /// One `ApplyBatch` of `n` Puts on the next `n` keys (wrapping over the key space).
    fn puts(&mut self, n: u64) -> ApplyBatch {
        self.next_index += 1;
        let requests = (0..n)
            .map(|_| {
                let k = self.next_key % KEYS;
                self.next_key += 1;
                common::put(self.next_key, k)
            })
            .collect();
        ApplyBatch {
            consistent_index: self.next_index,
            term: 1,
            requests,
            replies: Vec::new(),
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
        }
    }
}

async fn apply(store: &Addr<MvccActor>, batch: ApplyBatch) -> i64 {
    common::check_all(
        store
            .send(batch)
            .await
            .expect("mvcc mailbox")
            .expect("apply batch"),
    )
}

fn bench_mvcc(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let preload = Instant::now();
    let store = common::preloaded_store(dir.path(), KEYS);
    let old_rev = store.current_revision();
    let mut writer = Writer {
        next_index: store.consistent_index(),
        next_key: 0,
    };
    let overwrite = writer.puts(RANGE_KEYS);
    let sys = System::new();
    let store = sys.block_on(async move {
        let store = MvccActor::start_sync(store);
        apply(&store, overwrite).await;
        store
    });
    eprintln!(
        "mvcc: preloaded {KEYS} keys in {:.1} s",
        preload.elapsed().as_secs_f64()
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
    for (name, key, range_end, want) in cases {
        for (at, revision) in [("latest", 0), ("old", old_rev)] {
            let request = RangeRequest {
                key: key.clone(),
                range_end: range_end.clone(),
                revision,
                ..Default::default()
            };
            group.throughput(Throughput::Elements(want as u64));
            group.bench_function(BenchmarkId::new(name, at), |b| {
                b.iter_custom(|iters| {
                    sys.block_on(async {
                        let start = Instant::now();
                        for _ in 0..iters {
                            let resp = store
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

    let mut group = c.benchmark_group("mvcc/apply_put");
    for n in [1, 64] {
        group.throughput(Throughput::Elements(n));
        group.bench_function(BenchmarkId::new("puts", n), |b| {
            b.iter_custom(|iters| {
                // Built outside the clock: the applier hands the store decoded requests.
                let batches: Vec<_> = (0..iters).map(|_| writer.puts(n)).collect();
                sys.block_on(async {
                    let start = Instant::now();
                    for batch in batches {
                        apply(&store, batch).await;
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();

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
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = bench_mvcc
}
criterion_main!(benches);
