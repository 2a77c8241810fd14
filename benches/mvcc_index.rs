//! MVCC's key index alone, without LMDB or the actor: the in-memory [`TreeIndex`] of 100k keys
//! (`key/00000000`…) and one [`KeyIndex`], driven through their methods. This is the part of
//! every write and read that `mvcc` (the actor over LMDB) cannot separate from the engine's
//! cost. Each op is timed over a chunk of 1000 calls, never one call at a time (a clock read
//! costs about as much as the op).
//!
//! - `mvcc_index/put`: a put of a new revision on an existing key (`overwrite`, keys taken round
//!   robin, so each key's live generation grows by one revision per 100k calls) and on a key
//!   the index has never seen (`new_key`, the tree grows);
//! - `mvcc_index/tombstone`: a delete of a live key (each chunk's keys are put back untimed);
//! - `mvcc_index/get`: one key at the latest revision and at an old one (every key has three
//!   revisions; the old read picks the first);
//! - `mvcc_index/range`: 1000 consecutive keys at the latest and at an old revision, and a count
//!   of all 100k (etcd's `count_only`);
//! - `mvcc_index/compaction`: `keep` (what a compaction at the middle revision would keep,
//!   index untouched: the hash and the read side of compaction) and `compact` itself on a copy
//!   of the 100k-key index (the copy is made outside the clock);
//! - `mvcc_index/key_index`: one key with 1000 revisions in 10 generations: get at the latest
//!   and at an old revision, and compaction at the middle.
//!
//! Run: `cargo bench --bench mvcc_index` (about 50 s; `-- --test` runs each once).
//!
//! One run on the shared 2-vCPU machine (medians, 2026-11-25; noisy, compare builds in one
//! run): get 115 ns latest / 92 ns old; put 407 ns overwrite / 284 ns new key; tombstone
//! 460 ns; 1000-key range 5.5 µs latest / 7.7 µs old; count of 100k keys 2.6 ms; `keep` 11.6 ms
//! and `compact` 10.3 ms for 100k keys; one key of 1000 revisions: get 3.4 ns latest / 37 ns
//! old, compact 0.7 µs. Since the index counts live keys in its tree's nodes (issue 18), the
//! count of 100k keys is 50–80 ns (2026-11-26, while other builds ran; put and get moved
//! within noise in an interleaved A/B of the old and new index).
//! Packing single-revision keys inline (issue 18's memory goal; same machine, interleaved
//! A/B, 2026-11-26): get 105 → 87 ns, new-key put 240 → 185 ns, 1000-key range of
//! three-revision keys 9.0 → 9.5 µs (+5%), overwrite and tombstone within noise. The index's
//! bytes per key: `cargo run --release -p actcd-mvcc --example index_memory`.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use actcd_mvcc::{KeyIndex, KeyRange, TreeIndex};
use actcd_types::Revision;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const KEYS: u64 = 100_000;
/// Calls timed together.
const CHUNK: u64 = 1000;
/// Keys a range reads.
const RANGE_KEYS: u64 = 1000;

/// The index as the benches find it: every key put three times, one revision a put, in three
/// rounds over all keys (revisions 2..=KEYS+1, then the next KEYS, then the next).
struct Loaded {
    index: TreeIndex,
    /// The next revision to write.
    next_rev: i64,
    /// A revision inside the first round: every key's first put is visible there.
    old_rev: i64,
}

fn loaded() -> Loaded {
    let mut index = TreeIndex::new();
    let mut rev = 2;
    for _round in 0..3 {
        for i in 0..KEYS {
            index.put(&common::key(i), Revision::new(rev, 0));
            rev += 1;
        }
    }
    Loaded {
        index,
        next_rev: rev,
        old_rev: KEYS as i64 + 1,
    }
}

/// Times `op` over `iters` calls on keys taken round robin from `next_key` on, in chunks of at
/// most `CHUNK` (the keys of a chunk are picked before its clock starts).
fn chunked(iters: u64, next_key: &mut u64, mut op: impl FnMut(u64)) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    let mut keys = Vec::with_capacity(CHUNK as usize);
    while done < iters {
        let n = CHUNK.min(iters - done);
        keys.clear();
        keys.extend((0..n).map(|j| (*next_key + j) % KEYS));
        *next_key += n;
        let start = Instant::now();
        for &k in &keys {
            op(k);
        }
        total += start.elapsed();
        done += n;
    }
    total
}

fn bench_tree(c: &mut Criterion) {
    let build = Instant::now();
    let Loaded {
        mut index,
        mut next_rev,
        old_rev,
    } = loaded();
    eprintln!(
        "mvcc_index: {KEYS} keys × 3 revisions indexed in {:.2} s",
        build.elapsed().as_secs_f64()
    );
    let names: Vec<Vec<u8>> = (0..KEYS).map(common::key).collect();
    let latest = |rev: i64| rev - 1;

    let mut group = c.benchmark_group("mvcc_index/read");
    group.throughput(Throughput::Elements(1));
    for (at, rev) in [("latest", latest(next_rev)), ("old", old_rev)] {
        group.bench_function(BenchmarkId::new("get", at), |b| {
            let mut next = 0;
            b.iter_custom(|iters| {
                chunked(iters, &mut next, |k| {
                    black_box(index.get(&names[k as usize], rev).expect("indexed"));
                })
            })
        });
    }
    group.throughput(Throughput::Elements(RANGE_KEYS));
    for (at, rev) in [("latest", latest(next_rev)), ("old", old_rev)] {
        let first = &names[(KEYS / 2) as usize];
        let end = &names[(KEYS / 2 + RANGE_KEYS) as usize];
        group.bench_function(BenchmarkId::new("range_1000_keys", at), |b| {
            b.iter(|| {
                let kvs = index.range(KeyRange::Span(first, end), rev);
                assert_eq!(kvs.len(), RANGE_KEYS as usize);
                black_box(kvs)
            })
        });
    }
    group.throughput(Throughput::Elements(KEYS));
    group.bench_function("count_100k_keys", |b| {
        b.iter(|| {
            let n = index.count(KeyRange::FromKey(b"\0"), latest(next_rev));
            assert_eq!(n, KEYS as usize);
            n
        })
    });
    group.finish();

    // Last before the writes: compaction works on copies and leaves `index` as loaded.
    let mut group = c.benchmark_group("mvcc_index/compaction");
    let middle = old_rev + KEYS as i64;
    group.throughput(Throughput::Elements(KEYS));
    group.bench_function("keep_100k_keys", |b| {
        b.iter(|| {
            let keep = index.keep(middle);
            assert_eq!(keep.len(), KEYS as usize);
            keep
        })
    });
    group.bench_function("compact_100k_keys", |b| {
        b.iter_batched(
            || index.clone(),
            |mut copy| {
                let keep = copy.compact(middle);
                assert_eq!(keep.len(), KEYS as usize);
                (copy, keep)
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();

    let mut group = c.benchmark_group("mvcc_index/write");
    group.throughput(Throughput::Elements(1));
    group.bench_function("put/overwrite", |b| {
        let mut next = 0;
        b.iter_custom(|iters| {
            chunked(iters, &mut next, |k| {
                index.put(&names[k as usize], Revision::new(next_rev, 0));
                next_rev += 1;
            })
        })
    });
    group.bench_function("put/new_key", |b| {
        let mut fresh = KEYS;
        b.iter_custom(|iters| {
            // Names made outside the clock, as a request hands the index its key.
            let new: Vec<Vec<u8>> = (0..iters).map(|j| common::key(fresh + j)).collect();
            fresh += iters;
            let mut names = new.iter();
            let mut cursor = 0;
            chunked(iters, &mut cursor, |_| {
                index.put(names.next().expect("named"), Revision::new(next_rev, 0));
                next_rev += 1;
            })
        })
    });
    group.bench_function("tombstone", |b| {
        let mut next = 0;
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let n = CHUNK.min(iters - done);
                let keys: Vec<&[u8]> = (0..n)
                    .map(|j| names[((next + j) % KEYS) as usize].as_slice())
                    .collect();
                next += n;
                let start = Instant::now();
                for key in &keys {
                    index
                        .tombstone(key, Revision::new(next_rev, 0))
                        .expect("live");
                    next_rev += 1;
                }
                total += start.elapsed();
                // Alive again, untimed, for the next round over the keys.
                for key in &keys {
                    index.put(key, Revision::new(next_rev, 0));
                    next_rev += 1;
                }
                done += n;
            }
            total
        })
    });
    group.finish();
}

/// One key with `generations` × `per_generation` revisions, every generation but the last
/// ended by a tombstone (counted among its revisions).
fn long_key(generations: i64, per_generation: i64) -> (KeyIndex, i64) {
    let mut ki = KeyIndex::new();
    let mut rev = 2;
    for g in 0..generations {
        for _ in 0..per_generation - 1 {
            ki.put(Revision::new(rev, 0));
            rev += 1;
        }
        if g + 1 < generations {
            ki.tombstone(Revision::new(rev, 0)).expect("live");
        } else {
            ki.put(Revision::new(rev, 0));
        }
        rev += 1;
    }
    (ki, rev - 1)
}

fn bench_key_index(c: &mut Criterion) {
    let (ki, last) = long_key(10, 100);
    let mut group = c.benchmark_group("mvcc_index/key_index");
    group.throughput(Throughput::Elements(1));
    // 150: the middle of the second generation.
    for (at, rev) in [("latest", last), ("old", 150)] {
        group.bench_function(BenchmarkId::new("get_1000_revisions", at), |b| {
            b.iter(|| black_box(&ki).get(black_box(rev)).expect("live"))
        });
    }
    group.bench_function("compact_1000_revisions", |b| {
        b.iter_batched(
            || (ki.clone(), std::collections::HashSet::new()),
            |(mut copy, mut keep)| {
                copy.compact(last / 2, &mut keep);
                (copy, keep)
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = bench_tree, bench_key_index
}
criterion_main!(benches);
