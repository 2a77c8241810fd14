//! The preflight checks and actor alone:
//! - `preflight/check_request`: the pure `check_request` (validation, encoding, size limit) of a
//!   Put of 256 B and of a Txn with one compare and 64 Puts on distinct keys;
//! - `preflight/submit`: `Submit` sent to a [`PreflightActor`] whose raft node is a fake that
//!   answers `Ok(())` to every `Propose` and whose applier is a fake that only counts
//!   `Register`/`Cancel`. `sequential` awaits each Submit before sending the next; `concurrent_64`
//!   sends 64 at once and awaits them all, as the front does under load. Throughput in requests.
//!
//! Run: `cargo bench --bench preflight` (`cargo bench --bench preflight -- --test` runs each once).

mod common;

use std::hint::black_box;
use std::time::Instant;

use actcd_preflight::{Limits, PreflightActor, PreflightPeers, check_request};
use actcd_proto::actcdpb::{InternalRaftRequest, RequestHeader};
use actcd_proto::etcdserverpb::{Compare, PutRequest, RequestOp, TxnRequest, compare, request_op};
use actcd_types::EtcdError;
use actcd_types::msg::{Cancel, Propose, Register, Submit};
use actix::{Actor, Addr, Context, Handler, Message, MessageResult, System};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::future::join_all;
use tokio::sync::oneshot;

/// A raft node that accepts every proposal.
struct FakeRaft;

impl Actor for FakeRaft {
    type Context = Context<Self>;
}

impl Handler<Propose> for FakeRaft {
    type Result = Result<(), EtcdError>;

    fn handle(&mut self, _: Propose, _: &mut Context<Self>) -> Self::Result {
        Ok(())
    }
}

/// An applier that counts registrations and cancellations and drops the reply senders.
#[derive(Default)]
struct FakeApplier {
    registered: u64,
    cancelled: u64,
}

impl Actor for FakeApplier {
    type Context = Context<Self>;
}

impl Handler<Register> for FakeApplier {
    type Result = ();

    fn handle(&mut self, _: Register, _: &mut Context<Self>) {
        self.registered += 1;
    }
}

impl Handler<Cancel> for FakeApplier {
    type Result = ();

    fn handle(&mut self, _: Cancel, _: &mut Context<Self>) {
        self.cancelled += 1;
    }
}

/// `(registered, cancelled)` so far.
#[derive(Message)]
#[rtype(result = "(u64, u64)")]
struct Recorded;

impl Handler<Recorded> for FakeApplier {
    type Result = MessageResult<Recorded>;

    fn handle(&mut self, _: Recorded, _: &mut Context<Self>) -> Self::Result {
        MessageResult((self.registered, self.cancelled))
    }
}

/// A Txn guarded by one version compare, writing 64 distinct keys on success.
fn txn_64_puts() -> InternalRaftRequest {
    let success = (0..64)
        .map(|i| RequestOp {
            request: Some(request_op::Request::RequestPut(PutRequest {
                key: common::key(i),
                value: vec![b'v'; common::VALUE_LEN],
                ..Default::default()
            })),
        })
        .collect();
    InternalRaftRequest {
        header: Some(RequestHeader {
            id: 1,
            ..Default::default()
        }),
        txn: Some(TxnRequest {
            compare: vec![Compare {
                result: compare::CompareResult::Equal as i32,
                target: compare::CompareTarget::Version as i32,
                key: common::key(0),
                target_union: Some(compare::TargetUnion::Version(0)),
                ..Default::default()
            }],
            success,
            failure: Vec::new(),
        }),
        ..Default::default()
    }
}

fn bench_check(c: &mut Criterion) {
    let limits = Limits::default();
    let mut group = c.benchmark_group("preflight/check_request");
    group.throughput(Throughput::Elements(1));
    for (name, request) in [("put", common::put(1, 1)), ("txn_64_ops", txn_64_puts())] {
        group.bench_function(name, |b| {
            b.iter(|| check_request(black_box(&request), &limits).expect("valid request"))
        });
    }
    group.finish();
}

/// A Submit of a Put with request id `id`; the reply receiver is dropped (the fake applier never
/// answers).
fn submit(id: u64) -> Submit {
    let (reply, _) = oneshot::channel();
    Submit {
        request: Box::new(common::put(id, id % 100_000)),
        reply,
        deadline: None,
    }
}

fn bench_submit(c: &mut Criterion) {
    let sys = System::new();
    let (preflight, applier): (Addr<PreflightActor>, Addr<FakeApplier>) = sys.block_on(async {
        let raft = FakeRaft.start();
        let applier = FakeApplier::default().start();
        let peers = PreflightPeers {
            propose: raft.recipient(),
            register: applier.clone().recipient(),
            cancel: applier.clone().recipient(),
        };
        (
            PreflightActor::new(Limits::default(), peers).start(),
            applier,
        )
    });
    let mut next_id = 0;
    let mut ids = |n: u64| {
        let first = next_id;
        next_id += n;
        first..first + n
    };

    let mut group = c.benchmark_group("preflight/submit");
    group.throughput(Throughput::Elements(1));
    group.bench_function("sequential", |b| {
        b.iter_custom(|iters| {
            let submits: Vec<_> = ids(iters).map(submit).collect();
            sys.block_on(async {
                let start = Instant::now();
                for s in submits {
                    preflight
                        .send(s)
                        .await
                        .expect("preflight mailbox")
                        .expect("submit");
                }
                start.elapsed()
            })
        })
    });
    group.throughput(Throughput::Elements(64));
    group.bench_function("concurrent_64", |b| {
        b.iter_custom(|iters| {
            let rounds: Vec<Vec<_>> = (0..iters).map(|_| ids(64).map(submit).collect()).collect();
            sys.block_on(async {
                let start = Instant::now();
                for round in rounds {
                    for res in join_all(round.into_iter().map(|s| preflight.send(s))).await {
                        res.expect("preflight mailbox").expect("submit");
                    }
                }
                start.elapsed()
            })
        })
    });
    group.finish();

    let (registered, cancelled) = sys
        .block_on(applier.send(Recorded))
        .expect("applier mailbox");
    assert_eq!((registered, cancelled), (next_id, 0));
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = bench_check, bench_submit
}
criterion_main!(benches);
