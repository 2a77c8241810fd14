//! The auto-compactor alone:
//! - `compactor/schedule`: `Schedule::tick` of a 24 h periodic schedule (a window of 241
//!   samples, the most etcd's periodic compactor keeps) and of the revision schedule, with a
//!   synthetic clock;
//! - `compactor/actor`: a `CompactorTick` sent and awaited, the actor asking fakes for the raft
//!   status and the store's revision (a follower: nothing is proposed), which is what every
//!   tick costs between compactions.
//!
//! Run: `cargo bench --bench compactor` (`-- --test` runs each once).

use std::hint::black_box;
use std::time::Duration;

use actcd_compactor::{CompactorActor, CompactorPeers, CompactorTick, Mode, Schedule};
use actcd_types::EtcdError;
use actcd_types::ids::IdGenerator;
use actcd_types::msg::{GetStoreStatus, RaftStatus, RaftStatusReply, StoreStatus, Submit};
use actix::{Actor, Context, Handler, MessageResult, System};
use criterion::{Criterion, criterion_group, criterion_main};

struct Fake;

impl Actor for Fake {
    type Context = Context<Self>;
}

impl Handler<RaftStatus> for Fake {
    type Result = MessageResult<RaftStatus>;
    fn handle(&mut self, _: RaftStatus, _: &mut Context<Self>) -> Self::Result {
        MessageResult(RaftStatusReply {
            member_id: 1,
            leader: 2,
            ..Default::default()
        })
    }
}

impl Handler<GetStoreStatus> for Fake {
    type Result = Result<StoreStatus, EtcdError>;
    fn handle(&mut self, _: GetStoreStatus, _: &mut Context<Self>) -> Self::Result {
        Ok(StoreStatus {
            revision: 1_000_000,
            ..Default::default()
        })
    }
}

impl Handler<Submit> for Fake {
    type Result = Result<(), EtcdError>;
    fn handle(&mut self, _: Submit, _: &mut Context<Self>) -> Self::Result {
        panic!("a follower proposed a compaction");
    }
}

fn schedule(c: &mut Criterion) {
    let mut g = c.benchmark_group("compactor/schedule");
    let day = Duration::from_secs(24 * 3600);
    let mut s = Schedule::new(Mode::Periodic(day), Duration::ZERO);
    s.start(1);
    let mut t = Duration::ZERO;
    let mut rev = 1;
    g.bench_function("periodic_24h_tick", |b| {
        b.iter(|| {
            t += Duration::from_secs(360);
            rev += 1000;
            if let Some(r) = s.tick(t, rev, true) {
                s.done(t, r, &Ok(()));
            }
        })
    });
    let mut s = Schedule::new(Mode::Revision(10_000), Duration::ZERO);
    g.bench_function("revision_tick", |b| {
        b.iter(|| {
            t += Duration::from_secs(300);
            rev += 1000;
            black_box(s.tick(t, rev, true));
        })
    });
    g.finish();
}

fn actor(c: &mut Criterion) {
    let sys = System::new();
    let compactor = sys.block_on(async {
        let fake = Fake.start();
        let peers = CompactorPeers {
            raft: fake.clone().recipient(),
            store: fake.clone().recipient(),
            submit: fake.recipient(),
            member_id: 1,
        };
        let s = Schedule::new(Mode::Revision(10), Duration::ZERO);
        CompactorActor::new(s, peers, IdGenerator::new(1, 0)).start()
    });
    let mut g = c.benchmark_group("compactor/actor");
    let mut now = Duration::ZERO;
    g.bench_function("tick_round_trip_follower", |b| {
        b.iter(|| {
            now += Duration::from_secs(300);
            sys.block_on(compactor.send(CompactorTick { now })).unwrap();
        })
    });
    g.finish();
}

criterion_group!(benches, schedule, actor);
criterion_main!(benches);
