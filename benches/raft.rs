//! The pure raft node alone (no actor, no I/O): a single-member [`RaftNode`] that leads, given N
//! proposals (N = 1, 64, 1024; each an encoded Put of 256 B), then driven through its Ready loop
//! to quiescence — `ready()`, `on_persisted(number)` at once (as if the WAL fsync were free),
//! `on_applied(last committed)` — as the raft actor does. This is the consensus CPU cost per
//! proposal that the WAL and applier benches leave out. Throughput in proposals.
//!
//! The in-memory log is compacted (untimed) whenever it holds over 10000 applied entries, keeping
//! 5000 as the daemon's `--snapshot-catchup-entries` does, so memory stays flat over a long run.
//!
//! Run: `cargo bench --bench raft` (`cargo bench --bench raft -- --test` runs each once).

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use actcd_raft::{NodeConfig, RaftNode, Recovered};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use prost::Message as _;

const CATCHUP_ENTRIES: u64 = 5000;

/// Runs Readies until there are none, persisting and applying each at once.
fn drive(node: &mut RaftNode) {
    while let Some(out) = node.ready().expect("ready") {
        node.on_persisted(out.number);
        if let Some(last) = out.committed.last() {
            node.on_applied(last.index);
        }
        black_box(out);
    }
}

/// A fresh single-member node that has elected itself and applied its empty entry.
fn leader() -> RaftNode {
    let cfg = NodeConfig {
        id: 1,
        voters: vec![1],
        learners: vec![],
        election_tick: 10,
        fixed_election_timeout: None,
        heartbeat_tick: 1,
        pre_vote: true,
        applied: 0,
    };
    let mut node = RaftNode::new(&cfg, Recovered::default()).expect("raft node");
    drive(&mut node);
    assert!(node.is_leader());
    node
}

fn bench_propose(c: &mut Criterion) {
    let payload = common::put(1, 1).encode_to_vec();
    let mut group = c.benchmark_group("raft/propose_and_drive");
    for n in [1u64, 64, 1024] {
        let mut node = leader();
        let mut compacted_at = 0;
        group.throughput(Throughput::Elements(n));
        group.bench_function(BenchmarkId::new("proposals", n), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // Copied outside the clock: the actor receives each proposal as owned bytes.
                    let proposals: Vec<Vec<u8>> = (0..n).map(|_| payload.clone()).collect();
                    let start = Instant::now();
                    for data in proposals {
                        node.propose(data).expect("propose");
                    }
                    drive(&mut node);
                    total += start.elapsed();
                    assert_eq!(node.applied(), node.last_index());
                    if node.applied() - compacted_at > 2 * CATCHUP_ENTRIES {
                        node.compact_log(node.applied(), CATCHUP_ENTRIES);
                        compacted_at = node.applied();
                    }
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = bench_propose
}
criterion_main!(benches);
