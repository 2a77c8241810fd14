//! The LMDB backend alone, through the `KvEngine` traits the MVCC store uses, and its
//! [`BackendActor`]:
//! - `backend/commit`: one write transaction putting N records (N = 1, 100, 1000) into the `key`
//!   table under fresh revision keys with 256 B values, then `commit` (one `fdatasync` with the
//!   daemon's default durability);
//! - `backend/scan`: a read transaction opened and N consecutive records (N = 1, 100, 1000) read
//!   with a bounded `scan`, from a table of 100k records;
//! - `backend/sync`: `SyncBackend` sent to the actor on its own thread, idle and right after a
//!   one-record commit (only the send is timed).
//! - `backend/actor`: the store's write path through the actor's messages alone: `batches`
//!   `Commit`s of 100 puts (256 B, fresh revisions, each with a consistent index) sent, then a
//!   `Flush` awaited (one commit for them all, as the 100 ms tick does);
//! - `backend/read_during_commits`: a get and a 100-record scan through a store's
//!   `WriteBuffer` (1000 keys buffered over the engine, trimmed as `Committed` arrives) while
//!   the actor takes a `Commit` of 100 puts and a `Flush` after every read.
//! - `backend/bolt`: a bbolt file (etcd's snapshot format, `actcd-etcd-snapshot`'s writer) of N
//!   records (N = 10k, 100k) of 256 B planned and written page by page from a read
//!   transaction, as the Snapshot RPC streams it;
//! - `backend/defragment`: 10k records written, 90% deleted, then `defragment` (a compacting
//!   copy swapped in); each iteration starts from the same fragmented file.
//!
//! Throughput is in records. Run: `cargo bench --bench backend` (`-- --test` runs each once).

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actcd_backend::{BackendActor, LmdbEngine, Subscribe, SyncBackend};
use actcd_etcd_snapshot::{EtcdSnapshotError, bolt};
use actcd_types::Revision;
use actcd_types::msg::{Commit, Committed, Flush};
use actcd_types::storage::{KvEngine, Op, ReadEngine, ReadTxn, Table, WriteBuffer, WriteTxn};
use actix::{Actor, Addr, Context, Handler, System, SystemRunner};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// Records in the table the scans read.
const SCAN_TABLE_RECORDS: i64 = 100_000;

/// Puts revisions `first..first + n` (sub 0) in one write transaction and commits it.
fn commit_puts(engine: &LmdbEngine, first: i64, n: i64, value: &[u8]) {
    let mut txn = engine.write().expect("write txn");
    for main in first..first + n {
        txn.put(Table::Key, &Revision::new(main, 0).to_bytes(false), value)
            .expect("put");
    }
    txn.commit().expect("commit");
}

fn bench_commit(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = common::lmdb(dir.path());
    let value = vec![b'v'; common::VALUE_LEN];
    let mut next_rev = 2;

    let mut group = c.benchmark_group("backend/commit");
    for n in [1i64, 100, 1000] {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("puts", n), |b| {
            b.iter(|| {
                commit_puts(&engine, next_rev, n, &value);
                next_rev += n;
            })
        });
    }
    group.finish();
}

fn bench_scan(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = common::lmdb(dir.path());
    let value = vec![b'v'; common::VALUE_LEN];
    for first in (1..=SCAN_TABLE_RECORDS).step_by(10_000) {
        commit_puts(&engine, first, 10_000, &value);
    }

    let mut group = c.benchmark_group("backend/scan");
    for n in [1i64, 100, 1000] {
        // From the middle of the table, so the cursor descends a full-depth B-tree.
        let from = Revision::new(SCAN_TABLE_RECORDS / 2, 0).to_bytes(false);
        let to = Revision::new(SCAN_TABLE_RECORDS / 2 + n, 0).to_bytes(false);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("records", n), |b| {
            b.iter(|| {
                let txn = engine.read().expect("read txn");
                let (mut records, mut bytes) = (0, 0);
                txn.scan(Table::Key, &from, Some(&to), &mut |k, v| {
                    records += 1;
                    bytes += k.len() + black_box(v).len();
                    true
                })
                .expect("scan");
                assert_eq!(records, n);
                bytes
            })
        });
    }
    group.finish();
}

/// Times `iters` round trips of `SyncBackend`, running `between` (untimed) before each.
fn time_syncs(
    sys: &SystemRunner,
    actor: &Addr<BackendActor>,
    iters: u64,
    mut between: impl FnMut(),
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        between();
        total += sys.block_on(async {
            let start = Instant::now();
            actor
                .send(SyncBackend)
                .await
                .expect("backend mailbox")
                .expect("sync");
            start.elapsed()
        });
    }
    total
}

fn bench_sync(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = common::lmdb(dir.path());
    let value = vec![b'v'; common::VALUE_LEN];
    let mut next_rev = 2;
    let sys = System::new();
    let actor = sys.block_on({
        let engine = Arc::clone(&engine);
        async move { BackendActor::start_on_own_thread(engine) }
    });

    let mut group = c.benchmark_group("backend/sync");
    group.bench_function("idle", |b| {
        b.iter_custom(|iters| time_syncs(&sys, &actor, iters, || {}))
    });
    group.bench_function("after_commit", |b| {
        b.iter_custom(|iters| {
            time_syncs(&sys, &actor, iters, || {
                commit_puts(&engine, next_rev, 1, &value);
                next_rev += 1;
            })
        })
    });
    group.finish();
}

/// A `Commit` of 100 puts at revisions from `first`, covering entry `seq`.
fn commit_of(seq: u64, first: i64, value: &[u8]) -> Commit {
    let ops = (first..first + 100)
        .map(|main| Op::Put {
            table: Table::Key,
            key: Revision::new(main, 0).to_bytes(false).to_vec(),
            value: value.into(),
        })
        .collect();
    Commit {
        seq,
        ops,
        consistent_index: Some((seq, 1)),
    }
}

fn bench_actor_commits(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = common::lmdb(dir.path());
    let value = vec![b'v'; common::VALUE_LEN];
    let sys = System::new();
    let actor = sys.block_on(async move { BackendActor::start_on_own_thread(engine) });
    let (mut seq, mut next_rev) = (0u64, 2i64);

    let mut group = c.benchmark_group("backend/actor");
    for batches in [1u64, 10, 100] {
        group.throughput(Throughput::Elements(batches * 100));
        group.bench_function(BenchmarkId::new("commits_then_flush", batches), |b| {
            b.iter(|| {
                sys.block_on(async {
                    for _ in 0..batches {
                        seq += 1;
                        actor.do_send(commit_of(seq, next_rev, &value));
                        next_rev += 100;
                    }
                    actor.send(Flush).await.expect("mailbox").expect("flush");
                })
            })
        });
    }
    group.finish();
}

/// A state owner's buffer behind an actor, so `Committed` reaches it; the bench reads it
/// through messages too.
struct Owner {
    buffer: WriteBuffer,
}

impl Actor for Owner {
    type Context = Context<Self>;
}

impl Handler<Committed> for Owner {
    type Result = ();
    fn handle(&mut self, msg: Committed, _: &mut Self::Context) {
        self.buffer.committed(msg.seq);
    }
}

/// Buffers 100 puts at revisions from `first` and hands them to the backend.
#[derive(actix::Message)]
#[rtype(result = "()")]
struct Write {
    first: i64,
    backend: actix::Recipient<Commit>,
}

impl Handler<Write> for Owner {
    type Result = ();
    fn handle(&mut self, msg: Write, _: &mut Self::Context) {
        let seq = self.buffer.begin_batch();
        let value = vec![b'v'; common::VALUE_LEN];
        for main in msg.first..msg.first + 100 {
            self.buffer
                .put(Table::Key, &Revision::new(main, 0).to_bytes(false), &value)
                .expect("buffer put");
        }
        msg.backend.do_send(Commit {
            seq,
            ops: self.buffer.take_ops(),
            consistent_index: Some((seq, 1)),
        });
    }
}

/// A get of one revision and a scan of 100 from `from`, through the buffer.
#[derive(actix::Message)]
#[rtype(result = "usize")]
struct Read {
    from: i64,
}

impl Handler<Read> for Owner {
    type Result = usize;
    fn handle(&mut self, msg: Read, _: &mut Self::Context) -> usize {
        let key = Revision::new(msg.from, 0).to_bytes(false);
        let got = self.buffer.get(Table::Key, &key).expect("get");
        let to = Revision::new(msg.from + 100, 0).to_bytes(false);
        let mut records = 0;
        self.buffer
            .scan(Table::Key, &key, Some(&to), &mut |_, v| {
                records += black_box(v).len().min(1);
                true
            })
            .expect("scan");
        records + got.map_or(0, |v| v.len().min(1))
    }
}

fn bench_reads_during_commits(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = common::lmdb(dir.path());
    let value = vec![b'v'; common::VALUE_LEN];
    commit_puts(&engine, 2, 100_000, &value);
    let sys = System::new();
    let (backend, owner) = sys.block_on({
        let engine = Arc::clone(&engine);
        async move {
            let read: Arc<dyn ReadEngine> = engine.clone();
            let backend = BackendActor::start_on_own_thread(engine);
            let owner = Owner {
                buffer: WriteBuffer::new(read, 0),
            }
            .start();
            backend.do_send(Subscribe {
                committed: Some(owner.clone().recipient()),
                fatal: None,
            });
            (backend, owner)
        }
    });
    let mut next_rev = 100_002i64;
    // 1000 keys in the overlay before the timed reads begin.
    sys.block_on(async {
        for _ in 0..10 {
            owner
                .send(Write {
                    first: next_rev,
                    backend: backend.clone().recipient(),
                })
                .await
                .expect("owner");
            next_rev += 100;
        }
    });

    let mut group = c.benchmark_group("backend/read_during_commits");
    group.bench_function("get_and_scan_100", |b| {
        b.iter(|| {
            sys.block_on(async {
                // Reads straddle the overlay's start and the engine's end.
                let from = next_rev - 1050;
                let got = owner.send(Read { from }).await.expect("owner");
                assert_eq!(got, 101);
                owner
                    .send(Write {
                        first: next_rev,
                        backend: backend.clone().recipient(),
                    })
                    .await
                    .expect("owner");
                next_rev += 100;
                backend.do_send(Flush);
            })
        })
    });
    group.finish();
}

/// The `key` table of a read transaction, as one bucket, for the bbolt writer.
struct KeyTable<'t>(&'t dyn actcd_types::storage::ReadTxn);

impl bolt::Source for KeyTable<'_> {
    fn visit(
        &mut self,
        f: &mut dyn FnMut(bolt::Item<'_>) -> Result<(), EtcdSnapshotError>,
    ) -> Result<(), EtcdSnapshotError> {
        f(bolt::Item::Bucket(b"key"))?;
        actcd_types::storage::try_scan(self.0, Table::Key, &mut |k, v| f(bolt::Item::Pair(k, v)))
    }
}

fn bench_bolt(c: &mut Criterion) {
    let value = vec![b'v'; common::VALUE_LEN];
    let mut group = c.benchmark_group("backend/bolt");
    for n in [10_000i64, 100_000] {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = common::lmdb(dir.path());
        commit_puts(&engine, 2, n, &value);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("records", n), |b| {
            b.iter(|| {
                let txn = engine.read().expect("read");
                let mut source = KeyTable(&*txn);
                let writer = bolt::Writer::plan(&mut source).expect("plan");
                let mut bytes = 0usize;
                writer
                    .write(&mut source, &mut |page| {
                        bytes += black_box(page).len();
                        Ok(())
                    })
                    .expect("write");
                bytes
            })
        });
    }
    group.finish();
}

fn bench_defragment(c: &mut Criterion) {
    let value = vec![b'v'; common::VALUE_LEN];
    let mut group = c.benchmark_group("backend/defragment");
    group.sample_size(10);
    group.bench_function("10k_records_90pct_deleted", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().expect("tempdir");
                let engine = common::lmdb(dir.path());
                commit_puts(&engine, 2, 10_000, &value);
                let mut txn = engine.write().expect("write");
                for main in (2..10_002i64).filter(|m| m % 10 != 0) {
                    txn.delete(Table::Key, &Revision::new(main, 0).to_bytes(false))
                        .expect("delete");
                }
                txn.commit().expect("commit");
                let started = Instant::now();
                black_box(engine.defragment().expect("defragment"));
                total += started.elapsed();
            }
            total
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = bench_commit, bench_scan, bench_sync, bench_actor_commits, bench_reads_during_commits,
        bench_bolt, bench_defragment
}
criterion_main!(benches);
