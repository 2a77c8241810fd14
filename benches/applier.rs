//! The applier actor end to end into a real MVCC store: `Apply{entries}` of 64 committed entries,
//! each an encoded Put of 256 B whose request id has a registered waiter, sent to an
//! [`ApplierActor`] that decodes them, writes them through an [`MvccActor`] over LMDB (one
//! `ApplyBatch`, one engine commit with its `fdatasync`), answers the 64 waiters and reports
//! `Applied` to a fake raft node. Apply batches are awaited one after another, as the raft node
//! sends one per Ready. Throughput in entries.
//!
//! The store is preloaded with 10k keys and the Puts overwrite them in turn; registering the
//! waiters (preflight's job) is done outside the clock.
//!
//! Run: `cargo bench --bench applier` (`cargo bench --bench applier -- --test` runs each once).

mod common;

use std::time::{Duration, Instant};

use actcd_applier::{Applier, ApplierActor, ApplierPeers};
use actcd_mvcc::MvccActor;
use actcd_types::msg::{Applied, Apply, ApplyResponse, CommittedEntry, EntryKind, Fatal, Register};
use actix::{Actor, Context, Handler, Message, MessageResult, System};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use prost::Message as _;
use tokio::sync::oneshot;

const KEYS: u64 = 10_000;
const ENTRIES_PER_APPLY: u64 = 64;

/// A raft node that remembers the last `Applied` index it was told.
#[derive(Default)]
struct FakeRaft {
    applied: u64,
}

impl Actor for FakeRaft {
    type Context = Context<Self>;
}

impl Handler<Applied> for FakeRaft {
    type Result = ();

    fn handle(&mut self, msg: Applied, _: &mut Context<Self>) {
        self.applied = msg.index;
    }
}

impl Handler<Fatal> for FakeRaft {
    type Result = ();

    fn handle(&mut self, msg: Fatal, _: &mut Context<Self>) {
        panic!("apply failed in the bench: {}", msg.error);
    }
}

#[derive(Message)]
#[rtype(result = "u64")]
struct LastApplied;

impl Handler<LastApplied> for FakeRaft {
    type Result = MessageResult<LastApplied>;

    fn handle(&mut self, _: LastApplied, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.applied)
    }
}

fn bench_apply(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = common::preloaded_store(dir.path(), KEYS);
    let mut next_index = store.consistent_index() + 1;
    let sys = System::new();
    let (applier, raft) = sys.block_on(async {
        let applier = Applier::new(store.consistent_index());
        let store = MvccActor::start_sync(store);
        let raft = FakeRaft::default().start();
        // The auth store as a real actor too (auth off, as in the put benchmarks).
        let auth = actcd_auth::AuthActor::open(
            std::sync::Arc::new(actcd_types::storage::MemEngine::new()),
            actcd_auth::DEFAULT_COST,
            actcd_authz::TokenProvider::Simple(actcd_authz::SimpleTokens::new(
                std::time::Duration::from_secs(300),
            )),
        )
        .expect("auth store");
        let view = auth.view();
        let auth = auth.start_on_own_thread();
        let peers = ApplierPeers {
            chain: actcd_applier::ChainPeers {
                store: store.clone().recipient(),
                delete_keys: store.clone().recipient(),
                revision: store.recipient(),
                auth: auth.clone().recipient(),
                conf: None,
                lessor: None,
                identity: Default::default(),
                v2: None,
            },
            raft: raft.clone().recipient(),
            install: None,
            leased_keys: None,
            reload_auth: Some(auth.recipient()),
            reload_v2: None,
            conf_sync: None,
            fatal: raft.clone().recipient(),
        };
        (ApplierActor::new(applier, peers, view).start(), raft)
    });

    let mut group = c.benchmark_group("applier/apply");
    group.throughput(Throughput::Elements(ENTRIES_PER_APPLY));
    group.bench_function("puts_64", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let first = next_index;
                next_index += ENTRIES_PER_APPLY;
                // Request id = log index, so each entry answers its own waiter.
                let entries: Vec<_> = (first..next_index)
                    .map(|index| CommittedEntry {
                        index,
                        term: 1,
                        kind: EntryKind::Normal,
                        data: common::put(index, index % KEYS).encode_to_vec(),
                    })
                    .collect();
                total += sys.block_on(async {
                    let mut waiters = Vec::with_capacity(entries.len());
                    for e in &entries {
                        let (reply, rx) = oneshot::channel();
                        applier
                            .send(Register { id: e.index, reply })
                            .await
                            .expect("applier mailbox");
                        waiters.push(rx);
                    }
                    let start = Instant::now();
                    applier
                        .send(Apply { entries })
                        .await
                        .expect("applier mailbox");
                    let elapsed = start.elapsed();
                    for rx in waiters {
                        let res = rx.await.expect("waiter answered");
                        assert!(matches!(res, Ok(ApplyResponse::Put(_))), "{res:?}");
                    }
                    elapsed
                });
            }
            total
        })
    });
    group.finish();

    let applied = sys.block_on(raft.send(LastApplied)).expect("raft mailbox");
    assert_eq!(applied, next_index - 1);
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = bench_apply
}
criterion_main!(benches);
