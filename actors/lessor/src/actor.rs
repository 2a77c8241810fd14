//! [`LessorActor`]: the [`Lessor`] behind a mailbox, with a [`Clock`] for "now".

use std::collections::HashMap;
use std::time::Instant;

use actcd_types::EtcdError;
use actcd_types::msg::{
    Leadership, LeaseCheckpointed, LeaseGranted, LeaseRevoked, LeaseTimeToLive, LeaseTtl,
    LessorTick, ListLeases, ProposeLeaseOps, ReadIndex, RenewLease,
};
use actix::{Actor, AsyncContext, Context, Handler, Message, Recipient, ResponseFuture};
use tokio::sync::oneshot;

use crate::config::LessorConfig;
use crate::lessor::Lessor;

/// Where the lessor reads the time. Its only source of "now".
pub trait Clock: Send + Unpin + 'static {
    fn now(&self) -> Instant;
}

/// Tokio's clock: real time, or the test's when tokio's time is paused.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// Runs on the System thread: every handler is a map lookup or a few B-tree operations.
pub struct LessorActor<C: Clock = TokioClock> {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: std::sync::Arc<actcd_types::meter::Meter>,
    lessor: Lessor,
    clock: C,
    /// Takes expired leases' revokes and checkpoints to propose through raft.
    propose: Recipient<ProposeLeaseOps>,
    /// Keepalives of expired leases, waiting for the revoke to apply (answered
    /// `LeaseNotFound`) or for this member to lose leadership (`NotLeader`: the front then
    /// asks the new leader).
    renew_waiters: HashMap<i64, Vec<oneshot::Sender<Result<i64, EtcdError>>>>,
    /// Keepalives of leases unknown here just after promotion, waiting for their grant to
    /// apply (answered with the renewal) or for the window to end (`LeaseNotFound`); see
    /// [`Lessor::renew_may_be_early`].
    early_waiters: HashMap<i64, Vec<oneshot::Sender<Result<i64, EtcdError>>>>,
    /// etcd's lease counters, for `/metrics` (read when a `MailboxProbe` asks).
    counts: LeaseCounts,
    /// The raft node's `ReadIndex`: a keepalive that must wait until this member has applied
    /// everything committed ([`crate::keepalive_waits_for_apply`]) asks it first. `None`: no
    /// keepalive waits (tests of the lessor alone).
    applied_wait: Option<Recipient<ReadIndex>>,
}

/// etcd's buckets for `etcd_debugging_lease_ttl_total`: 1 s doubling, 24 of them.
const TTL_BUCKETS: [f64; 24] = actcd_types::meter::exponential_buckets(1.0, 2.0);

/// Grants applied (and leases found at recovery), revokes applied, keepalives that renewed on
/// this member (the primary), expired leases handed to raft for revoking, granted TTLs.
struct LeaseCounts {
    granted: u64,
    revoked: u64,
    renewed: u64,
    expired: u64,
    ttl: actcd_types::meter::Histogram,
}

impl<C: Clock> LessorActor<C> {
    /// A follower lessor with no leases: it learns of them from `LeaseGranted` (sent for every
    /// lease at recovery, then on every applied grant) and starts expiring them on
    /// `Leadership{leader: true}`.
    pub fn new(config: LessorConfig, clock: C, propose: Recipient<ProposeLeaseOps>) -> Self {
        Self {
            meter: actcd_types::meter::Meter::new(),
            lessor: Lessor::new(config),
            clock,
            propose,
            renew_waiters: HashMap::new(),
            early_waiters: HashMap::new(),
            counts: LeaseCounts {
                granted: 0,
                revoked: 0,
                renewed: 0,
                expired: 0,
                ttl: actcd_types::meter::Histogram::new(&TTL_BUCKETS),
            },
            applied_wait: None,
        }
    }

    /// Keepalives that must wait until this member has applied everything committed ask
    /// `read_index` (the raft node's) first.
    pub fn with_applied_wait(mut self, read_index: Recipient<ReadIndex>) -> Self {
        self.applied_wait = Some(read_index);
        self
    }
}

impl<C: Clock> Actor for LessorActor<C> {
    type Context = Context<Self>;
}

/// A grant applied (or a lease found at recovery): start timing it.
impl<C: Clock> Handler<LeaseGranted> for LessorActor<C> {
    type Result = ();

    fn handle(&mut self, m: LeaseGranted, _: &mut Context<Self>) {
        let _timer = self.meter.start("LeaseGranted");
        let now = self.clock.now();
        self.lessor.granted(m.id, m.ttl, m.remaining_ttl, now);
        self.counts.granted += 1;
        self.counts.ttl.observe(m.ttl as f64);
        for w in self.early_waiters.remove(&m.id).unwrap_or_default() {
            let r = self.lessor.renew(m.id, now);
            if r.is_ok() {
                self.counts.renewed += 1;
            }
            let _ = w.send(r);
        }
    }
}

/// A revoke applied: forget the lease.
impl<C: Clock> Handler<LeaseRevoked> for LessorActor<C> {
    type Result = ();

    fn handle(&mut self, m: LeaseRevoked, _: &mut Context<Self>) {
        let _timer = self.meter.start("LeaseRevoked");
        self.lessor.revoked(m.id);
        self.counts.revoked += 1;
        for w in self.renew_waiters.remove(&m.id).unwrap_or_default() {
            let _ = w.send(Err(EtcdError::LeaseNotFound));
        }
    }
}

/// A checkpoint applied: remember the remaining TTL, schedule the next checkpoint.
impl<C: Clock> Handler<LeaseCheckpointed> for LessorActor<C> {
    type Result = ();

    fn handle(&mut self, m: LeaseCheckpointed, _: &mut Context<Self>) {
        let now = self.clock.now();
        self.lessor.checkpointed(m.id, m.remaining_ttl, now);
    }
}

/// A keepalive asked again once this member has applied everything committed: it goes through
/// the mailbox, behind the `LeaseGranted` of every grant applied by then.
#[derive(Debug, Message)]
#[rtype(result = "Result<i64, EtcdError>")]
struct RenewApplied {
    id: i64,
}

/// A keepalive. On the primary, one that must wait for the applied index
/// ([`crate::keepalive_waits_for_apply`]: with `FastLeaseKeepAlive`, only a lease unknown here)
/// first asks the raft node for a read index, whose answer comes once this member has applied
/// everything committed when it was asked, then is renewed (`RenewApplied`). A read index that
/// fails because leadership moved is `NotLeader` (the front asks the new leader); one not
/// answered within `apply_wait_timeout` is `request timed out`.
impl<C: Clock> Handler<RenewLease> for LessorActor<C> {
    type Result = ResponseFuture<Result<i64, EtcdError>>;

    fn handle(&mut self, m: RenewLease, ctx: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("RenewLease");
        let config = self.lessor.config();
        let waits = crate::keepalive_waits_for_apply(
            config.fast_keepalive,
            self.lessor.is_primary(),
            self.lessor.contains(m.id),
        );
        match (&self.applied_wait, waits) {
            (Some(read_index), true) => {
                let (read_index, me) = (read_index.clone(), ctx.address());
                let (id, limit) = (m.id, config.apply_wait_timeout);
                Box::pin(async move {
                    match tokio::time::timeout(limit, read_index.send(ReadIndex)).await {
                        Err(_) => Err(EtcdError::Timeout),
                        Ok(Err(_)) => Err(EtcdError::Stopped),
                        Ok(Ok(Err(EtcdError::LeaderChanged | EtcdError::NoLeader))) => {
                            Err(EtcdError::NotLeader)
                        }
                        Ok(Ok(Err(e))) => Err(e),
                        Ok(Ok(Ok(_))) => me
                            .send(RenewApplied { id })
                            .await
                            .unwrap_or(Err(EtcdError::Stopped)),
                    }
                })
            }
            _ => self.renew(m.id, false, ctx),
        }
    }
}

impl<C: Clock> Handler<RenewApplied> for LessorActor<C> {
    type Result = ResponseFuture<Result<i64, EtcdError>>;

    fn handle(&mut self, m: RenewApplied, ctx: &mut Context<Self>) -> Self::Result {
        self.renew(m.id, true, ctx)
    }
}

impl<C: Clock> LessorActor<C> {
    /// [`Lessor::renew`]; for an expired lease, once its revoke has applied
    /// ([`Lessor::renew_must_wait`]); for a lease unknown just after promotion, once its grant
    /// applies or the window ends ([`Lessor::renew_may_be_early`]), unless this member has just
    /// applied everything committed (`applied`): then an unknown lease is not there.
    fn renew(
        &mut self,
        id: i64,
        applied: bool,
        ctx: &mut Context<Self>,
    ) -> ResponseFuture<Result<i64, EtcdError>> {
        let now = self.clock.now();
        if let Some(until) = self.lessor.renew_may_be_early(id, now).filter(|_| !applied) {
            let (tx, rx) = oneshot::channel();
            let waiters = self.early_waiters.entry(id).or_default();
            if waiters.is_empty() {
                ctx.run_later(until.saturating_duration_since(now), move |act, _| {
                    for w in act.early_waiters.remove(&id).unwrap_or_default() {
                        let _ = w.send(Err(EtcdError::LeaseNotFound));
                    }
                });
            }
            waiters.push(tx);
            return Box::pin(async move { rx.await.unwrap_or(Err(EtcdError::NotLeader)) });
        }
        if self.lessor.renew_must_wait(id, now) {
            let (tx, rx) = oneshot::channel();
            self.renew_waiters.entry(id).or_default().push(tx);
            return Box::pin(async move { rx.await.unwrap_or(Err(EtcdError::NotLeader)) });
        }
        let r = self.lessor.renew(id, now);
        if r.is_ok() {
            self.counts.renewed += 1;
        }
        Box::pin(async move { r })
    }
}

/// [`Lessor::time_to_live`].
impl<C: Clock> Handler<LeaseTimeToLive> for LessorActor<C> {
    type Result = Result<LeaseTtl, EtcdError>;

    fn handle(&mut self, m: LeaseTimeToLive, _: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("LeaseTimeToLive");
        self.lessor.time_to_live(m.id, self.clock.now())
    }
}

/// [`Lessor::leases`].
impl<C: Clock> Handler<ListLeases> for LessorActor<C> {
    type Result = Vec<i64>;

    fn handle(&mut self, _: ListLeases, _: &mut Context<Self>) -> Vec<i64> {
        self.lessor.leases()
    }
}

/// Leader: promote, extending every expiry by the election timeout. Follower: demote.
impl<C: Clock> Handler<Leadership> for LessorActor<C> {
    type Result = ();

    fn handle(&mut self, m: Leadership, _: &mut Context<Self>) {
        if m.leader {
            let extend = self.lessor.config().election_timeout;
            self.lessor.promote(self.clock.now(), extend);
            tracing::info!(leases = self.lessor.len(), "lessor promoted");
        } else if self.lessor.is_primary() {
            self.lessor.demote();
            let early = self.early_waiters.drain();
            for (_, waiters) in self.renew_waiters.drain().chain(early) {
                for w in waiters {
                    let _ = w.send(Err(EtcdError::NotLeader));
                }
            }
            tracing::info!("lessor demoted");
        }
    }
}

/// Expired leases and due checkpoints, as one `ProposeLeaseOps` if there are any. `do_send`:
/// at most one message per tick, bounded by the per-tick limits; anything lost is handed out
/// again (revokes after the retry interval, checkpoints an interval later).
impl<C: Clock> Handler<LessorTick> for LessorActor<C> {
    type Result = ();

    fn handle(&mut self, _: LessorTick, _: &mut Context<Self>) {
        let _timer = self.meter.start("LessorTick");
        let ops = self.lessor.tick(self.clock.now());
        if ops.revokes.is_empty() && ops.checkpoints.is_empty() {
            return;
        }
        self.counts.expired += ops.revokes.len() as u64;
        tracing::debug!(
            revokes = ops.revokes.len(),
            checkpoints = ops.checkpoints.len(),
            "proposing lease ops"
        );
        self.propose.do_send(ops);
    }
}

#[cfg(test)]
#[path = "actor_tests.rs"]
mod tests;

impl<C: Clock> LessorActor<C> {
    /// etcd's lease metrics.
    fn samples(&self) -> Vec<actcd_types::meter::Sample> {
        use actcd_types::meter::Sample;
        let c = &self.counts;
        vec![
            Sample::value("etcd_debugging_lease_granted_total", c.granted as f64),
            Sample::value("etcd_debugging_lease_revoked_total", c.revoked as f64),
            Sample::value("etcd_debugging_lease_renewed_total", c.renewed as f64),
            Sample::value(
                "etcd_debugging_server_lease_expired_total",
                c.expired as f64,
            ),
            Sample::histogram("etcd_debugging_lease_ttl_total", &c.ttl),
        ]
    }
}

actcd_types::impl_mailbox_probe!([C: Clock] LessorActor<C>, meter, samples);
