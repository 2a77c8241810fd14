//! The ticker: the one place real time enters the member's actors.
//!
//! Every periodic message comes from one [`Ticker`] actor on the actors' System thread, each with
//! its period ([`Ticker::every`]):
//! - raft's `Tick` every `--heartbeat-interval` (raft's logical clock);
//! - the lessor's `LessorTick` every 500 ms (etcd's expiry loop);
//! - the auto-compactor's `CompactorTick{now}` every `Schedule::tick_interval`, `now` being the
//!   time since the ticker started (the compactor's only clock);
//! - the corruption checker's `CheckTick(Periodic)` every `--experimental-corrupt-check-time`
//!   and `CheckTick(CompactHash)` every `--experimental-compact-hash-check-time` (when on);
//! - the key table scrub's `ScrubTick{now}` every second (`--experimental-scrub-interval`
//!   sets how often a pass may start; each tick runs at most one bounded step);
//! - etcd's backend batch interval, every 100 ms: `FlushStore` (commit what the store applied),
//!   then `SyncBackend` (the meta page to disk, so the WAL replays at most that much after a
//!   crash), then the store's live bytes to preflight as `QuotaUsage`. A refused commit is
//!   fatal: it goes to the supervisor as `Fatal` and the flushing stops.
//!
//! Each job ticks once at start, then every period; the corruption checks only every period,
//! their first tick one period after start, as etcd's first checks come (`monitorKVHash`,
//! `monitorCompactHash`): a periodic check hashes the whole key space twice, and at start it
//! held up the member's first answer that long (4 GiB, 2 cores: 1.7–3.2 s, restart to the
//! first Range 3.8–4.5 s against 1.4 s without). A job waits for its target to take one
//! tick before sending the next (mailbox back-pressure); ticks that come due meanwhile are sent
//! right after, one by one, so a stalled target still sees every tick (the behaviour of the
//! tokio intervals this replaces). A job whose target is gone stops.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use actcd_backend::SyncBackend;
use actcd_compactor::CompactorTick;
use actcd_corrupt::{Check, CheckTick};
use actcd_types::msg::{Fatal, FlushStore, GetStoreStatus, LessorTick, QuotaUsage, Tick};
use actix::prelude::*;
use tokio::time::Instant;

/// What a job sends on each tick.
pub enum Periodic {
    Raft(Recipient<Tick>),
    Lessor(Recipient<LessorTick>),
    Compactor(Recipient<CompactorTick>),
    BackendBatch(BackendBatch),
    /// The v2 store: watchers swept, expired TTLs synced by the leader.
    V2Sync(Recipient<actcd_types::v2::V2SyncTick>),
    /// The corruption checker: one of its checks is due (it skips a tick while that check
    /// still runs, so the tick is taken at once).
    Corrupt(Recipient<CheckTick>, Check),
    /// The key table scrub: one bounded step, if a pass is under way or due.
    Scrub(Recipient<actcd_mvcc::ScrubTick>),
}

/// The recipients of one backend batch tick.
pub struct BackendBatch {
    pub store: Recipient<FlushStore>,
    pub backend: Recipient<SyncBackend>,
    pub status: Recipient<GetStoreStatus>,
    pub quota: Recipient<QuotaUsage>,
    pub fatal: Recipient<Fatal>,
}

/// One tick's work; resolves to whether the job goes on.
type Work = Pin<Box<dyn Future<Output = bool>>>;

impl Periodic {
    fn tick(&self, since_start: Duration) -> Work {
        match self {
            Periodic::Raft(raft) => {
                let send = raft.send(Tick);
                Box::pin(async move { send.await.is_ok() })
            }
            Periodic::Lessor(lessor) => {
                let send = lessor.send(LessorTick);
                Box::pin(async move { send.await.is_ok() })
            }
            Periodic::V2Sync(store) => {
                let send = store.send(actcd_types::v2::V2SyncTick);
                Box::pin(async move { send.await.is_ok() })
            }
            Periodic::Corrupt(checker, check) => {
                let send = checker.send(CheckTick(*check));
                Box::pin(async move { send.await.is_ok() })
            }
            Periodic::Compactor(compactor) => {
                let send = compactor.send(CompactorTick { now: since_start });
                Box::pin(async move { send.await.is_ok() })
            }
            Periodic::Scrub(scrubber) => {
                let send = scrubber.send(actcd_mvcc::ScrubTick { now: since_start });
                Box::pin(async move { send.await.is_ok() })
            }
            Periodic::BackendBatch(b) => {
                let (store, backend) = (b.store.clone(), b.backend.clone());
                let (status, quota, fatal) = (b.status.clone(), b.quota.clone(), b.fatal.clone());
                Box::pin(async move {
                    match store.send(FlushStore).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => {
                            fatal.do_send(Fatal {
                                actor: "mvcc",
                                error: format!("backend commit failed: {e}"),
                            });
                            return false;
                        }
                        Err(_) => return false,
                    }
                    // A failed sync is logged by the backend and retried at the next tick:
                    // the WAL is released only after a sync that succeeded.
                    if backend.send(SyncBackend).await.is_err() {
                        return false;
                    }
                    if let Ok(Ok(s)) = status.send(GetStoreStatus).await {
                        quota.do_send(QuotaUsage {
                            bytes: s.db_size_in_use,
                        });
                    }
                    true
                })
            }
        }
    }
}

impl Periodic {
    /// Whether the job's first tick is sent at start (see the module doc).
    fn at_start(&self) -> bool {
        !matches!(self, Periodic::Corrupt(..))
    }
}

struct Job {
    every: Duration,
    periodic: Periodic,
    /// A tick is on its way to the target.
    busy: bool,
    /// Ticks that came due while busy.
    owed: u32,
    /// The target is gone (or failed for good).
    done: bool,
}

/// Sends each periodic message at its period; see the module doc.
#[derive(Default)]
pub struct Ticker {
    jobs: Vec<Job>,
    started: Option<Instant>,
}

impl Ticker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a job sending `periodic` every `every`.
    pub fn every(mut self, every: Duration, periodic: Periodic) -> Self {
        self.jobs.push(Job {
            every,
            periodic,
            busy: false,
            owed: 0,
            done: false,
        });
        self
    }

    fn fire(&mut self, i: usize, ctx: &mut Context<Self>) {
        let since_start = self.started.map_or(Duration::ZERO, |t| t.elapsed());
        let job = &mut self.jobs[i];
        if job.done {
            return;
        }
        if job.busy {
            job.owed += 1;
            return;
        }
        job.busy = true;
        job.periodic
            .tick(since_start)
            .into_actor(self)
            .map(move |go_on, act, ctx| {
                let job = &mut act.jobs[i];
                job.busy = false;
                if !go_on {
                    job.done = true;
                } else if job.owed > 0 {
                    job.owed -= 1;
                    act.fire(i, ctx);
                }
            })
            .spawn(ctx);
    }
}

impl Actor for Ticker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.started = Some(Instant::now());
        for i in 0..self.jobs.len() {
            if self.jobs[i].periodic.at_start() {
                self.fire(i, ctx);
            }
            ctx.run_interval(self.jobs[i].every, move |act, ctx| act.fire(i, ctx));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use actcd_types::EtcdError;
    use actcd_types::msg::StoreStatus;

    use super::*;

    /// Stands in for every target: records what it is sent, when (since the test began).
    #[derive(Clone, Default)]
    struct Recorder {
        seen: Arc<Mutex<Vec<(&'static str, Duration)>>>,
        /// How long raft takes over a tick.
        raft_delay: Duration,
        /// Whether the store's commits fail.
        commit_fails: bool,
        t0: Option<Instant>,
    }

    impl Recorder {
        fn note(&self, what: &'static str) {
            let at = self.t0.map_or(Duration::ZERO, |t| t.elapsed());
            self.seen.lock().unwrap().push((what, at));
        }

        fn count(&self, what: &str) -> usize {
            let seen = self.seen.lock().unwrap();
            seen.iter().filter(|(w, _)| *w == what).count()
        }
    }

    impl Actor for Recorder {
        type Context = Context<Self>;
    }

    impl Handler<Tick> for Recorder {
        type Result = ResponseFuture<()>;
        fn handle(&mut self, _: Tick, _: &mut Context<Self>) -> Self::Result {
            self.note("tick");
            let delay = self.raft_delay;
            Box::pin(async move { tokio::time::sleep(delay).await })
        }
    }

    impl Handler<LessorTick> for Recorder {
        type Result = ();
        fn handle(&mut self, _: LessorTick, _: &mut Context<Self>) {
            self.note("lessor");
        }
    }

    impl Handler<CompactorTick> for Recorder {
        type Result = ();
        fn handle(&mut self, m: CompactorTick, _: &mut Context<Self>) {
            self.seen.lock().unwrap().push(("compactor", m.now));
        }
    }

    impl Handler<FlushStore> for Recorder {
        type Result = Result<(), EtcdError>;
        fn handle(&mut self, _: FlushStore, _: &mut Context<Self>) -> Self::Result {
            self.note("flush");
            if self.commit_fails {
                return Err(EtcdError::internal("mdb_txn_commit: File too large"));
            }
            Ok(())
        }
    }

    impl Handler<SyncBackend> for Recorder {
        type Result = Result<(), String>;
        fn handle(&mut self, _: SyncBackend, _: &mut Context<Self>) -> Self::Result {
            self.note("sync");
            Ok(())
        }
    }

    impl Handler<GetStoreStatus> for Recorder {
        type Result = Result<StoreStatus, EtcdError>;
        fn handle(&mut self, _: GetStoreStatus, _: &mut Context<Self>) -> Self::Result {
            Ok(StoreStatus {
                db_size_in_use: 42,
                ..Default::default()
            })
        }
    }

    impl Handler<QuotaUsage> for Recorder {
        type Result = ();
        fn handle(&mut self, m: QuotaUsage, _: &mut Context<Self>) {
            assert_eq!(m.bytes, 42);
            self.note("quota");
        }
    }

    impl Handler<CheckTick> for Recorder {
        type Result = ();
        fn handle(&mut self, m: CheckTick, _: &mut Context<Self>) {
            self.note(match m.0 {
                Check::Periodic => "periodic check",
                Check::CompactHash => "compact hash check",
            });
        }
    }

    impl Handler<Fatal> for Recorder {
        type Result = ();
        fn handle(&mut self, m: Fatal, _: &mut Context<Self>) {
            assert_eq!(m.actor, "mvcc");
            assert!(m.error.contains("File too large"), "{m:?}");
            self.note("fatal");
        }
    }

    fn start(rec: Recorder) -> Addr<Ticker> {
        let r = rec.start();
        Ticker::new()
            .every(
                Duration::from_millis(100),
                Periodic::Raft(r.clone().recipient()),
            )
            .every(
                Duration::from_millis(500),
                Periodic::Lessor(r.clone().recipient()),
            )
            .every(
                Duration::from_secs(60),
                Periodic::Compactor(r.clone().recipient()),
            )
            .every(
                Duration::from_millis(300),
                Periodic::Corrupt(r.clone().recipient(), Check::Periodic),
            )
            .every(
                Duration::from_millis(400),
                Periodic::Corrupt(r.clone().recipient(), Check::CompactHash),
            )
            .every(
                Duration::from_millis(100),
                Periodic::BackendBatch(BackendBatch {
                    store: r.clone().recipient(),
                    backend: r.clone().recipient(),
                    status: r.clone().recipient(),
                    quota: r.clone().recipient(),
                    fatal: r.recipient(),
                }),
            )
            .start()
    }

    /// Moves paused time on by `total`, a millisecond at a time, letting every message run.
    async fn run_for(total: Duration) {
        let step = Duration::from_millis(1);
        let mut left = total;
        while left > Duration::ZERO {
            tokio::time::advance(step).await;
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            left = left.saturating_sub(step);
        }
    }

    #[actix_rt::test]
    async fn each_message_comes_at_its_period_starting_at_once() {
        tokio::time::pause();
        let rec = Recorder {
            t0: Some(Instant::now()),
            ..Default::default()
        };
        let _ticker = start(rec.clone());
        run_for(Duration::from_millis(1050)).await;
        assert_eq!(rec.count("tick"), 11, "at 0, 100, …, 1000 ms");
        assert_eq!(rec.count("lessor"), 3, "at 0, 500, 1000 ms");
        assert_eq!(rec.count("flush"), 11);
        assert_eq!(rec.count("sync"), 11, "each flush is followed by a sync");
        assert_eq!(rec.count("quota"), 11, "and a quota report");
        assert_eq!(rec.count("fatal"), 0);
        let compactor: Vec<Duration> = rec
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(w, _)| *w == "compactor")
            .map(|(_, at)| *at)
            .collect();
        assert_eq!(
            compactor,
            vec![Duration::ZERO],
            "a first tick at once, `now` = 0"
        );
    }

    #[actix_rt::test]
    async fn the_corruption_checks_come_one_period_after_start_as_etcds() {
        tokio::time::pause();
        let rec = Recorder {
            t0: Some(Instant::now()),
            ..Default::default()
        };
        let _ticker = start(rec.clone());
        let at = |what: &str| -> Vec<Duration> {
            let seen = rec.seen.lock().unwrap();
            seen.iter()
                .filter(|(w, _)| *w == what)
                .map(|(_, at)| *at)
                .collect()
        };
        run_for(Duration::from_millis(250)).await;
        assert!(at("periodic check").is_empty(), "none at start");
        assert!(at("compact hash check").is_empty());
        assert_eq!(rec.count("tick"), 3, "while raft ticked at 0, 100, 200 ms");
        run_for(Duration::from_millis(800)).await;
        // One period after start, then every period (give or take the steps of `run_for`).
        let near = |got: Vec<Duration>, want: &[u64]| {
            got.len() == want.len()
                && got.iter().zip(want).all(|(g, &w)| {
                    let w = Duration::from_millis(w);
                    *g >= w && *g <= w + Duration::from_millis(5)
                })
        };
        let periodic = at("periodic check");
        assert!(near(periodic.clone(), &[300, 600, 900]), "{periodic:?}");
        let compact = at("compact hash check");
        assert!(near(compact.clone(), &[400, 800]), "{compact:?}");
    }

    #[actix_rt::test]
    async fn a_slow_target_gets_one_tick_at_a_time_and_every_tick_after() {
        tokio::time::pause();
        let rec = Recorder {
            raft_delay: Duration::from_millis(250),
            t0: Some(Instant::now()),
            ..Default::default()
        };
        let _ticker = start(rec.clone());
        run_for(Duration::from_millis(1050)).await;
        let ticks: Vec<Duration> = rec
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(w, _)| *w == "tick")
            .map(|(_, at)| *at)
            .collect();
        // Each tick is taken 250 ms after the one before: never two at once.
        for pair in ticks.windows(2) {
            assert!(pair[1] - pair[0] >= Duration::from_millis(250), "{ticks:?}");
        }
        assert_eq!(ticks.len(), 5, "at 0, 250, 500, 750, 1000 ms: {ticks:?}");
        // The others are not held up by it.
        assert_eq!(rec.count("flush"), 11);
    }

    #[actix_rt::test]
    async fn a_refused_commit_is_fatal_once_and_flushing_stops() {
        tokio::time::pause();
        let rec = Recorder {
            commit_fails: true,
            t0: Some(Instant::now()),
            ..Default::default()
        };
        let _ticker = start(rec.clone());
        run_for(Duration::from_millis(550)).await;
        assert_eq!(rec.count("fatal"), 1);
        assert_eq!(rec.count("flush"), 1, "no flush after the failure");
        assert_eq!(rec.count("sync"), 0, "nor a sync of what failed");
        assert_eq!(rec.count("tick"), 6, "raft keeps its clock");
    }
}
