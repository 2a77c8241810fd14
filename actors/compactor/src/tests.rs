use std::sync::{Arc, Mutex};

use actcd_types::msg::{ApplyResponse, RaftStatusReply, StoreStatus};

use super::*;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// (mode, retention, what parsing gives).
type ParseCase = (
    &'static str,
    &'static str,
    Result<Option<Mode>, &'static str>,
);

#[test]
fn flags_parse_as_etcds() {
    let cases: Vec<ParseCase> = vec![
        ("periodic", "1", Ok(Some(Mode::Periodic(secs(3600))))),
        ("periodic", "30m", Ok(Some(Mode::Periodic(secs(1800))))),
        ("periodic", "1h30m", Ok(Some(Mode::Periodic(secs(5400))))),
        ("periodic", "0", Ok(None)),
        ("revision", "1000", Ok(Some(Mode::Revision(1000)))),
        ("revision", "0", Ok(None)),
        (
            "revision",
            "1h",
            Err("invalid auto-compaction-retention \"1h\""),
        ),
        ("bogus", "1", Err("unknown auto-compaction-mode \"bogus\"")),
    ];
    for (mode, retention, want) in cases {
        let got = Mode::parse(mode, retention);
        match (&got, &want) {
            (Err(e), Err(w)) => assert!(e.starts_with(w), "{mode} {retention}: {e}"),
            _ => assert_eq!(got, want.map_err(String::from), "{mode} {retention}"),
        }
    }
}

/// The store at revision 100 + 10 per second.
fn rev_at(t: u64) -> i64 {
    100 + 10 * t as i64
}

#[test]
fn periodic_compacts_at_the_revision_one_period_old() {
    let mut s = Schedule::new(Mode::Periodic(secs(10)), secs(0));
    assert_eq!(s.tick_interval(), secs(1));
    s.start(rev_at(0));
    let mut compacted = Vec::new();
    for t in 1..=30 {
        if let Some(rev) = s.tick(secs(t), rev_at(t), true) {
            compacted.push((t, rev));
            s.done(secs(t), rev, &Ok(()));
        }
    }
    // First after a whole period, at the revision seen at the start; then once per period,
    // each time at the oldest of the last period's samples (etcd's window: the sample one
    // period before the last one).
    assert_eq!(
        compacted,
        vec![(10, rev_at(0)), (20, rev_at(9)), (30, rev_at(19))]
    );
}

#[test]
fn periodic_waits_while_not_leader_and_retries_failures() {
    let mut s = Schedule::new(Mode::Periodic(secs(10)), secs(0));
    s.start(rev_at(0));
    for t in 1..=14 {
        assert_eq!(
            s.tick(secs(t), rev_at(t), false),
            None,
            "a follower never compacts"
        );
    }
    // Leader from t=15: the window holds the last 11 samples, the oldest from t=4.
    let rev = s.tick(secs(15), rev_at(15), true).unwrap();
    assert_eq!(rev, rev_at(4));
    s.done(secs(15), rev, &Err(EtcdError::Timeout));
    // A failure is retried at the next tick, at the window's new oldest revision.
    let rev = s.tick(secs(16), rev_at(16), true).unwrap();
    assert_eq!(rev, rev_at(5));
    // "already compacted" counts as done.
    s.done(secs(16), rev, &Err(EtcdError::Compacted));
    assert_eq!(s.tick(secs(17), rev_at(17), true), None);
}

#[test]
fn periods_over_an_hour_compact_hourly() {
    let day = secs(24 * 3600);
    let mut s = Schedule::new(Mode::Periodic(day), secs(0));
    assert_eq!(s.tick_interval(), secs(360), "samples every 6 minutes");
    s.start(1);
    let mut times = Vec::new();
    let mut t = 0;
    while t < 27 * 3600 {
        t += 360;
        if let Some(rev) = s.tick(secs(t), 1 + t as i64, true) {
            times.push(t / 3600);
            s.done(secs(t), rev, &Ok(()));
        }
    }
    assert_eq!(times, vec![24, 25, 26, 27], "after a day, then every hour");
}

#[test]
fn revision_mode_keeps_the_last_retention_revisions() {
    let mut s = Schedule::new(Mode::Revision(100), secs(0));
    assert_eq!(s.tick_interval(), REVISION_INTERVAL);
    assert_eq!(s.tick(secs(300), 50, true), None, "not enough history yet");
    assert_eq!(s.tick(secs(600), 250, false), None, "followers don't");
    assert_eq!(s.tick(secs(900), 250, true), Some(150));
    s.done(secs(900), 150, &Ok(()));
    assert_eq!(s.tick(secs(1200), 250, true), None, "nothing new since");
    assert_eq!(s.tick(secs(1500), 400, true), Some(300));
}

/// Answers every question as a one-member leader at a growing revision, and records the
/// compactions it is asked for (answering them).
#[derive(Clone, Default)]
struct Fake {
    revision: Arc<Mutex<i64>>,
    compactions: Arc<Mutex<Vec<i64>>>,
}

impl Actor for Fake {
    type Context = Context<Self>;
}

impl Handler<RaftStatus> for Fake {
    type Result = MessageResult<RaftStatus>;
    fn handle(&mut self, _: RaftStatus, _: &mut Context<Self>) -> Self::Result {
        MessageResult(RaftStatusReply {
            member_id: 1,
            leader: 1,
            ..Default::default()
        })
    }
}

impl Handler<GetStoreStatus> for Fake {
    type Result = Result<StoreStatus, EtcdError>;
    fn handle(&mut self, _: GetStoreStatus, _: &mut Context<Self>) -> Self::Result {
        Ok(StoreStatus {
            revision: *self.revision.lock().unwrap(),
            ..Default::default()
        })
    }
}

impl Handler<Submit> for Fake {
    type Result = Result<(), EtcdError>;
    fn handle(&mut self, m: Submit, _: &mut Context<Self>) -> Self::Result {
        let rev = m.request.compaction.unwrap().revision;
        self.compactions.lock().unwrap().push(rev);
        let _ = m.reply.send(Ok(ApplyResponse::Empty));
        Ok(())
    }
}

#[actix_rt::test]
async fn the_actor_compacts_on_its_ticks() {
    let fake = Fake::default();
    let addr = fake.clone().start();
    let peers = CompactorPeers {
        raft: addr.clone().recipient(),
        store: addr.clone().recipient(),
        submit: addr.recipient(),
        member_id: 1,
    };
    let schedule = Schedule::new(Mode::Revision(10), secs(0));
    let compactor = CompactorActor::new(schedule, peers, IdGenerator::new(7, 0)).start();
    for (t, rev) in [(0, 5), (300, 5), (600, 40), (900, 40), (1200, 70)] {
        *fake.revision.lock().unwrap() = rev;
        compactor
            .send(CompactorTick { now: secs(t) })
            .await
            .unwrap();
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }
    assert_eq!(*fake.compactions.lock().unwrap(), vec![30, 60]);
}
