//! The lessor alone, with 100k leases of 3600 s (kube-apiserver's default `--event-ttl`, the TTL
//! of the leases its events are written with; longer than the 5-minute checkpoint interval, so
//! every lease also has a checkpoint scheduled):
//! - `lessor/core`: the core [`Lessor`], called directly with a synthetic "now":
//!   - `renew`: a keepalive of one lease (restarts its clock: a move in the expiry queue), ids
//!     cycling over all 100k;
//!   - `expired_500`: `expired(now, 500)`, one tick's revoke batch, on a pile-up where all
//!     100k leases are past their expiry. Each call advances "now" by the 3 s retry interval,
//!     so the 500 handed out by the previous call are due again and the pile-up never drains:
//!     every call pops 500 of 100k due leases and re-files them;
//!   - `promote`: `promote(now, 1 s)` with 100k leases all granted at once (a restart): every
//!     clock restarted, every checkpoint rescheduled, and the pile-up spread over
//!     100k / 750 ≈ 133 s, which sorts all 100k leases.
//! - `lessor/actor`: a primary [`LessorActor`] on the System thread (tokio's clock, proposing to
//!   a fake that counts `ProposeLeaseOps`) holding the same 100k leases:
//!   - `renew_round_trip`: `RenewLease` sent and awaited, one after another;
//!   - `tick_nothing_due`: `LessorTick` with nothing expired or due a checkpoint (what every
//!     500 ms tick costs between pile-ups). The fake must end up with no proposal.
//!
//! 100k is one of the sizes etcd's own lessor benchmarks use (`lessor_bench_test.go`), far above
//! what a cluster normally holds (kube-apiserver reuses one lease for a minute of events); the
//! core's operations are B-tree and hash map operations, so the per-lease timings grow only with
//! the logarithm of the count, while `promote` grows with the count itself.
//!
//! Run: `cargo bench --bench lessor` (`cargo bench --bench lessor -- --test` runs each once).

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use actcd_lessor::{Lessor, LessorActor, LessorConfig, TokioClock};
use actcd_types::msg::{Leadership, LeaseGranted, LessorTick, ProposeLeaseOps, RenewLease};
use actix::{Actor, Addr, Context, Handler, Message, System};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Leases held, ids `1..=LEASES`.
const LEASES: i64 = 100_000;
/// Granted TTL of every lease, seconds.
const TTL: i64 = 3600;

/// A follower lessor holding every lease, granted at `now`, then promoted at `now`.
fn primary_lessor(now: Instant) -> Lessor {
    let mut lessor = Lessor::new(LessorConfig::default());
    for id in 1..=LEASES {
        lessor.granted(id, TTL, 0, now);
    }
    let extend = lessor.config().election_timeout;
    lessor.promote(now, extend);
    assert!(lessor.is_primary());
    assert_eq!(lessor.len(), LEASES as usize);
    lessor
}

fn bench_core(c: &mut Criterion) {
    let t0 = Instant::now();
    let mut lessor = primary_lessor(t0);
    let mut group = c.benchmark_group("lessor/core");

    // A synthetic clock one microsecond apart per renewal: each keepalive moves its lease to
    // the end of the expiry queue, as real keepalives do.
    let mut now = t0;
    let mut next = 0;
    group.throughput(Throughput::Elements(1));
    group.bench_function("renew", |b| {
        b.iter(|| {
            now += Duration::from_micros(1);
            next = next % LEASES + 1;
            let ttl = lessor.renew(black_box(next), now).expect("renew");
            assert_eq!(ttl, TTL);
        })
    });

    let retry = lessor.config().expired_retry_interval;
    let limit = lessor.config().revoke_per_tick;
    // Past every spread expiry (the last is about 133 s after the first).
    let mut now = t0 + Duration::from_secs(TTL as u64 + 1000);
    group.throughput(Throughput::Elements(limit as u64));
    group.bench_function("expired_500", |b| {
        b.iter(|| {
            let out = lessor.expired(now, limit);
            assert_eq!(out.len(), limit);
            now += retry;
            out
        })
    });

    let extend = lessor.config().election_timeout;
    let mut now = t0;
    group.throughput(Throughput::Elements(LEASES as u64));
    group.bench_function("promote", |b| {
        b.iter(|| {
            now += Duration::from_millis(1);
            lessor.promote(now, extend);
        })
    });
    group.finish();
    assert_eq!(lessor.len(), LEASES as usize);
}

/// Stands in for whoever proposes lease ops through raft: counts what it is asked.
#[derive(Default)]
struct FakeProposer {
    proposals: u64,
}

impl Actor for FakeProposer {
    type Context = Context<Self>;
}

impl Handler<ProposeLeaseOps> for FakeProposer {
    type Result = ();

    fn handle(&mut self, _: ProposeLeaseOps, _: &mut Context<Self>) {
        self.proposals += 1;
    }
}

/// `ProposeLeaseOps` received so far.
#[derive(Message)]
#[rtype(result = "u64")]
struct Proposals;

impl Handler<Proposals> for FakeProposer {
    type Result = u64;

    fn handle(&mut self, _: Proposals, _: &mut Context<Self>) -> u64 {
        self.proposals
    }
}

fn bench_actor(c: &mut Criterion) {
    let sys = System::new();
    let (lessor, proposer): (Addr<LessorActor>, Addr<FakeProposer>) = sys.block_on(async {
        let proposer = FakeProposer::default().start();
        let lessor = LessorActor::new(
            LessorConfig::default(),
            TokioClock,
            proposer.clone().recipient(),
        )
        .start();
        // `do_send` ignores the mailbox bound; the awaited Leadership after them is handled
        // last (the mailbox is FIFO), so every grant is in by the time it returns.
        for id in 1..=LEASES {
            lessor.do_send(LeaseGranted {
                id,
                ttl: TTL,
                remaining_ttl: 0,
            });
        }
        lessor
            .send(Leadership { leader: true })
            .await
            .expect("lessor mailbox");
        (lessor, proposer)
    });

    let mut group = c.benchmark_group("lessor/actor");
    group.throughput(Throughput::Elements(1));
    let mut next = 0;
    group.bench_function("renew_round_trip", |b| {
        b.iter_custom(|iters| {
            sys.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    next = next % LEASES + 1;
                    let ttl = lessor
                        .send(RenewLease { id: next })
                        .await
                        .expect("lessor mailbox")
                        .expect("renew");
                    assert_eq!(ttl, TTL);
                }
                start.elapsed()
            })
        })
    });
    group.bench_function("tick_nothing_due", |b| {
        b.iter_custom(|iters| {
            sys.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    lessor.send(LessorTick).await.expect("lessor mailbox");
                }
                start.elapsed()
            })
        })
    });
    group.finish();

    let proposals = sys
        .block_on(proposer.send(Proposals))
        .expect("proposer mailbox");
    assert_eq!(proposals, 0, "nothing should have expired or been due");
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = bench_core, bench_actor
}
criterion_main!(benches);
