//! # actcd-compactor — auto-compaction (`--auto-compaction-mode`, `--auto-compaction-retention`)
//!
//! Owns the compaction schedule: etcd's two compactors, as plain state driven by clock
//! messages. Only the leader compacts (a follower's ticks only record revisions), and a
//! compaction is an ordinary `Compaction` request through the log, so every member compacts at
//! the same revision.
//!
//! - **periodic** (retention a duration; a bare number means hours): revisions are sampled every
//!   tenth of the retention period (at most every 6 minutes); once a whole period has passed
//!   since the last compaction, the store is compacted at the revision sampled one period ago,
//!   then again at each interval of min(period, 1 h). A failed compaction is retried at the next
//!   sample.
//! - **revision** (retention a revision count): every 5 minutes, compact at current revision −
//!   retention, unless that is ≤ 0 or the revision last compacted.
//!
//! A compaction answered `etcdserver: mvcc: required revision has been compacted` counts as
//! done, as in etcd.
//!
//! ## Messages
//! [`CompactorActor`] takes `CompactorTick{now}` (the daemon's ticker sends one every
//! [`Schedule::tick_interval`]; `now` is time since start, the only clock this crate sees). On a
//! tick it asks the raft node whether it leads (`RaftStatus`) and the store for the current
//! revision (`GetStoreStatus`), and sends `Submit{Compaction}` to preflight when the schedule
//! says so; the answer comes back on the request's reply channel.
//!
//! ## Invariants
//! - At most one compaction is in flight; ticks meanwhile only sample revisions.
//! - The schedule never compacts at a revision it has not seen the store reach.

use std::collections::VecDeque;
use std::time::Duration;

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::CompactionRequest;
use actcd_types::EtcdError;
use actcd_types::ids::IdGenerator;
use actcd_types::msg::{GetStoreStatus, RaftStatus, Submit};
use actix::prelude::*;
use tokio::sync::oneshot;

/// etcd's `--auto-compaction-mode` with its retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Periodic(Duration),
    Revision(i64),
}

impl Mode {
    /// Parses the two flags as etcd does: `periodic` takes a Go duration or a bare number of
    /// hours, `revision` a revision count; a zero retention turns auto-compaction off (`None`).
    pub fn parse(mode: &str, retention: &str) -> Result<Option<Mode>, String> {
        let retention = retention.trim();
        match mode {
            "periodic" => {
                let d = match retention.parse::<u64>() {
                    Ok(hours) => Duration::from_secs(hours * 3600),
                    Err(_) => actcd_types::duration::parse_go_duration(retention).map_err(|e| {
                        format!("invalid auto-compaction-retention {retention:?}: {e}")
                    })?,
                };
                Ok((!d.is_zero()).then_some(Mode::Periodic(d)))
            }
            "revision" => {
                let r: i64 = retention
                    .parse()
                    .map_err(|_| format!("invalid auto-compaction-retention {retention:?}"))?;
                if r < 0 {
                    return Err(format!("invalid auto-compaction-retention {retention:?}"));
                }
                Ok((r > 0).then_some(Mode::Revision(r)))
            }
            other => Err(format!("unknown auto-compaction-mode {other:?}")),
        }
    }
}

/// etcd's revision compactor's interval.
pub const REVISION_INTERVAL: Duration = Duration::from_secs(300);

/// The schedule: which revision to compact at, given the time and the store's revision.
#[derive(Debug)]
pub struct Schedule {
    mode: Mode,
    /// Periodic: revisions sampled at each tick, oldest first (the first is one period old).
    revs: VecDeque<i64>,
    last_success: Duration,
    /// Periodic: the time that must pass since the last success (the period at first, then
    /// min(period, 1 h)).
    base_interval: Duration,
    /// Revision: the revision last compacted.
    prev: i64,
}

impl Schedule {
    pub fn new(mode: Mode, now: Duration) -> Self {
        let base_interval = match mode {
            Mode::Periodic(p) => p,
            Mode::Revision(_) => REVISION_INTERVAL,
        };
        Self {
            mode,
            revs: VecDeque::new(),
            last_success: now,
            base_interval,
            prev: 0,
        }
    }

    /// How often ticks should come.
    pub fn tick_interval(&self) -> Duration {
        match self.mode {
            Mode::Periodic(p) => p.min(Duration::from_secs(3600)) / 10,
            Mode::Revision(_) => REVISION_INTERVAL,
        }
    }

    /// Samples kept: one period's worth plus one.
    fn retentions(period: Duration, every: Duration) -> usize {
        (period.as_nanos() / every.as_nanos().max(1)) as usize + 1
    }

    /// Records the store's revision at start (the periodic compactor samples before it waits).
    pub fn start(&mut self, current: i64) {
        if let Mode::Periodic(_) = self.mode {
            self.revs.push_back(current);
        }
    }

    /// A tick at `now` with the store at `current`; `leader`: only a leader compacts. Returns
    /// the revision to compact at, if any.
    pub fn tick(&mut self, now: Duration, current: i64, leader: bool) -> Option<i64> {
        match self.mode {
            Mode::Periodic(period) => {
                let every = self.tick_interval();
                let due = leader && now.saturating_sub(self.last_success) >= self.base_interval;
                let rev = due.then(|| self.revs.front().copied()).flatten();
                if due && self.base_interval == period {
                    self.base_interval = period.min(Duration::from_secs(3600));
                }
                self.revs.push_back(current);
                while self.revs.len() > Self::retentions(period, every) {
                    self.revs.pop_front();
                }
                rev.filter(|r| *r > 0)
            }
            Mode::Revision(retention) => {
                let rev = current - retention;
                (leader && rev > 0 && rev != self.prev).then_some(rev)
            }
        }
    }

    /// How the compaction at `rev` ended (at `now`).
    pub fn done(&mut self, now: Duration, rev: i64, result: &Result<(), EtcdError>) {
        if matches!(result, Ok(()) | Err(EtcdError::Compacted)) {
            self.last_success = now;
            self.prev = rev;
        }
    }
}

/// A clock tick: time since the daemon started.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct CompactorTick {
    pub now: Duration,
}

/// A compaction's outcome, back on the actor.
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct Compacted {
    now: Duration,
    rev: i64,
    result: Result<(), EtcdError>,
}

pub struct CompactorPeers {
    pub raft: Recipient<RaftStatus>,
    pub store: Recipient<GetStoreStatus>,
    pub submit: Recipient<Submit>,
    /// This member's id (a leader is the member whose id the raft status names).
    pub member_id: u64,
}

pub struct CompactorActor {
    schedule: Schedule,
    peers: CompactorPeers,
    in_flight: bool,
    started: bool,
    /// Request ids of its own (the daemon gives it a prefix the front doesn't use).
    ids: IdGenerator,
}

impl CompactorActor {
    pub fn new(schedule: Schedule, peers: CompactorPeers, ids: IdGenerator) -> Self {
        Self {
            schedule,
            peers,
            in_flight: false,
            started: false,
            ids,
        }
    }
}

impl Actor for CompactorActor {
    type Context = Context<Self>;
}

impl Handler<CompactorTick> for CompactorActor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, msg: CompactorTick, _: &mut Context<Self>) -> Self::Result {
        let raft = self.peers.raft.send(RaftStatus);
        let store = self.peers.store.send(GetStoreStatus);
        Box::pin(
            async move { (raft.await, store.await) }
                .into_actor(self)
                .map(move |(raft, store), act, ctx| {
                    let (Ok(raft), Ok(Ok(store))) = (raft, store) else {
                        return;
                    };
                    if !act.started {
                        act.started = true;
                        act.schedule.start(store.revision);
                        return;
                    }
                    let leader = raft.leader == act.peers.member_id && !act.in_flight;
                    let Some(rev) = act.schedule.tick(msg.now, store.revision, leader) else {
                        return;
                    };
                    act.in_flight = true;
                    tracing::info!(revision = rev, "starting auto compaction");
                    let (tx, rx) = oneshot::channel();
                    let submit = Submit {
                        request: Box::new(InternalRaftRequest {
                            header: Some(actcd_proto::actcdpb::RequestHeader {
                                id: act.ids.next(),
                                // The member's own compaction: never judged by auth.
                                internal: true,
                                ..Default::default()
                            }),
                            compaction: Some(CompactionRequest {
                                revision: rev,
                                physical: false,
                            }),
                            ..Default::default()
                        }),
                        reply: tx,
                        deadline: None,
                    };
                    act.peers.submit.do_send(submit);
                    let me = ctx.address();
                    actix::spawn(async move {
                        let result = match rx.await {
                            Ok(r) => r.map(drop),
                            Err(_) => Err(EtcdError::Stopped),
                        };
                        me.do_send(Compacted {
                            now: msg.now,
                            rev,
                            result,
                        });
                    });
                }),
        )
    }
}

impl Handler<Compacted> for CompactorActor {
    type Result = ();

    fn handle(&mut self, msg: Compacted, _: &mut Context<Self>) {
        self.in_flight = false;
        match &msg.result {
            Ok(()) | Err(EtcdError::Compacted) => {
                tracing::info!(revision = msg.rev, "completed auto compaction");
            }
            Err(e) => tracing::warn!(revision = msg.rev, error = %e, "auto compaction failed"),
        }
        self.schedule.done(msg.now, msg.rev, &msg.result);
    }
}

#[cfg(test)]
mod tests;
