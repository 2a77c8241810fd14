//! The WAL writer actor alone: `Append` batches of 1, 16 and 256 entries of 256 B each, sent to a
//! [`WalActor`] on the sender's thread and awaited one after another, as the raft node does (the
//! one-entry batch is written in place, the others on the blocking pool).
//! Every Append carries the hard state a leader writes with its entries and ends in the real
//! `fdatasync`, in a temporary directory on the data disk. Throughput is in entries, so the three
//! sizes show what batching a Ready buys.
//!
//! Run: `cargo bench --bench wal` (`cargo bench --bench wal -- --test` runs each benchmark once).

mod common;

use std::time::Instant;

use actcd_types::msg::{Append, HardState, WalEntry};
use actcd_wal::{Wal, WalActor};
use actix::System;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// Entries `first..first + n` of term 1, 256 B each, and the hard state committing them.
fn append(first: u64, n: u64) -> Append {
    let entries = (first..first + n)
        .map(|index| WalEntry {
            index,
            term: 1,
            data: vec![b'e'; common::VALUE_LEN],
        })
        .collect();
    Append {
        hard_state: Some(HardState {
            term: 1,
            vote: 1,
            commit: first + n - 1,
        }),
        entries,
    }
}

fn bench_append(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = Wal::create(dir.path(), b"bench").expect("create wal");
    let sys = System::new();
    let wal = sys.block_on(async { actix::Actor::start(WalActor::new(wal)) });
    // The log must stay contiguous across every benchmark and iteration.
    let mut next_index = 1;

    let mut group = c.benchmark_group("wal/append");
    for n in [1u64, 16, 256] {
        group.throughput(Throughput::Elements(n));
        group.bench_function(BenchmarkId::new("entries", n), |b| {
            b.iter_custom(|iters| {
                // Built outside the clock: the raft node hands the WAL ready-made entries.
                let batches: Vec<Append> = (0..iters)
                    .map(|_| {
                        let msg = append(next_index, n);
                        next_index += n;
                        msg
                    })
                    .collect();
                sys.block_on(async {
                    let start = Instant::now();
                    for msg in batches {
                        wal.send(msg)
                            .await
                            .expect("wal mailbox")
                            .expect("wal append");
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = bench_append
}
criterion_main!(benches);
