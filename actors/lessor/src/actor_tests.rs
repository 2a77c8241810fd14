//! [`LessorActor`] under paused tokio time, proposing to a recording fake.

use std::time::Duration;

use actcd_types::EtcdError;
use actcd_types::msg::{
    Leadership, LeaseCheckpointed, LeaseGranted, LeaseRevoked, LeaseTimeToLive, LeaseTtl,
    LessorTick, ListLeases, ProposeLeaseOps, ReadIndex, RenewLease,
};
use actix::{Actor, Addr, Context, Handler, Message, Recipient};
use tokio::time::advance;

use super::{LessorActor, TokioClock};
use crate::config::LessorConfig;

/// Stands in for whoever proposes lease ops through raft: records what it is asked.
#[derive(Default)]
struct Recorder {
    got: Vec<ProposeLeaseOps>,
}

impl Actor for Recorder {
    type Context = Context<Self>;
}

impl Handler<ProposeLeaseOps> for Recorder {
    type Result = ();

    fn handle(&mut self, m: ProposeLeaseOps, _: &mut Context<Self>) {
        self.got.push(m);
    }
}

/// Everything recorded so far.
#[derive(Message)]
#[rtype(result = "Vec<ProposeLeaseOps>")]
struct Take;

impl Handler<Take> for Recorder {
    type Result = Vec<ProposeLeaseOps>;

    fn handle(&mut self, _: Take, _: &mut Context<Self>) -> Vec<ProposeLeaseOps> {
        std::mem::take(&mut self.got)
    }
}

struct Harness {
    lessor: Addr<LessorActor>,
    recorder: Addr<Recorder>,
}

impl Harness {
    /// Pauses tokio's clock and starts a follower lessor proposing to a recorder.
    fn start(config: LessorConfig) -> Self {
        tokio::time::pause();
        let recorder = Recorder::default().start();
        let lessor = LessorActor::new(config, TokioClock, recorder.clone().recipient()).start();
        Self { lessor, recorder }
    }

    async fn leader(&self, leader: bool) {
        self.lessor.send(Leadership { leader }).await.unwrap();
    }

    async fn grant(&self, id: i64, ttl: i64, remaining_ttl: i64) {
        self.lessor
            .send(LeaseGranted {
                id,
                ttl,
                remaining_ttl,
            })
            .await
            .unwrap();
    }

    /// Sends a tick and returns what it proposed (the recorder's mailbox is FIFO, so the
    /// tick's `ProposeLeaseOps`, if any, arrives before `Take`).
    async fn tick(&self) -> Vec<ProposeLeaseOps> {
        self.lessor.send(LessorTick).await.unwrap();
        self.recorder.send(Take).await.unwrap()
    }

    async fn renew(&self, id: i64) -> Result<i64, EtcdError> {
        self.lessor.send(RenewLease { id }).await.unwrap()
    }

    async fn ttl(&self, id: i64) -> Result<LeaseTtl, EtcdError> {
        self.lessor.send(LeaseTimeToLive { id }).await.unwrap()
    }
}

fn revokes(ids: &[i64]) -> Vec<ProposeLeaseOps> {
    vec![ProposeLeaseOps {
        revokes: ids.to_vec(),
        checkpoints: Vec::new(),
    }]
}

fn checkpoints(cps: &[(i64, i64)]) -> Vec<ProposeLeaseOps> {
    vec![ProposeLeaseOps {
        revokes: Vec::new(),
        checkpoints: cps.to_vec(),
    }]
}

#[actix_rt::test]
async fn leader_proposes_each_expired_lease_once_per_retry_interval() {
    let h = Harness::start(LessorConfig::default());
    h.leader(true).await;
    h.grant(1, 5, 0).await;
    h.grant(2, 60, 0).await;

    assert_eq!(h.tick().await, vec![]);
    advance(Duration::from_millis(4999)).await;
    assert_eq!(h.tick().await, vec![]);
    advance(Duration::from_millis(1)).await;
    assert_eq!(h.tick().await, revokes(&[1]));

    // Not applied yet: not proposed again until the retry interval (3 s) has passed.
    advance(Duration::from_millis(500)).await;
    assert_eq!(h.tick().await, vec![]);
    // A keepalive of the expired lease waits for its revoke to apply, as etcd's leader does:
    // answered at once, the client would hear "not found" while the lease's keys are still
    // there to be read (the robustness suite's lease check caught that).
    let waiting = actix_rt::spawn(h.lessor.send(RenewLease { id: 1 }));
    advance(Duration::from_millis(2500)).await;
    assert_eq!(h.tick().await, revokes(&[1]));
    assert!(!waiting.is_finished(), "answered before the revoke applied");

    h.lessor.send(LeaseRevoked { id: 1 }).await.unwrap();
    assert_eq!(
        waiting.await.unwrap().unwrap(),
        Err(EtcdError::LeaseNotFound)
    );
    assert_eq!(h.renew(1).await, Err(EtcdError::LeaseNotFound));
    advance(Duration::from_secs(10)).await;
    assert_eq!(h.tick().await, vec![]);
    assert_eq!(h.lessor.send(ListLeases).await.unwrap(), vec![2]);
}

#[actix_rt::test]
async fn a_keepalive_waiting_on_an_expired_lease_hears_not_leader_when_leadership_is_lost() {
    let h = Harness::start(LessorConfig::default());
    h.leader(true).await;
    h.grant(1, 5, 0).await;
    advance(Duration::from_secs(6)).await;
    let waiting = actix_rt::spawn(h.lessor.send(RenewLease { id: 1 }));
    assert_eq!(h.tick().await, revokes(&[1]));
    assert!(!waiting.is_finished());
    // The revoke may never apply under this leader: the front then asks the new one.
    h.leader(false).await;
    assert_eq!(waiting.await.unwrap().unwrap(), Err(EtcdError::NotLeader));
}

#[actix_rt::test]
async fn follower_refuses_keepalives_and_never_expires() {
    let h = Harness::start(LessorConfig::default());
    h.grant(1, 5, 0).await;
    assert_eq!(h.renew(1).await, Err(EtcdError::NotLeader));
    assert_eq!(h.ttl(1).await, Err(EtcdError::NotLeader));
    advance(Duration::from_secs(3600)).await;
    assert_eq!(h.tick().await, vec![]);
    assert_eq!(h.lessor.send(ListLeases).await.unwrap(), vec![1]);
}

#[actix_rt::test]
async fn keepalive_moves_the_expiry() {
    let h = Harness::start(LessorConfig::default());
    h.leader(true).await;
    h.grant(7, 10, 0).await;
    advance(Duration::from_secs(8)).await;
    assert_eq!(
        h.ttl(7).await,
        Ok(LeaseTtl {
            granted_ttl: 10,
            remaining_ttl: 2
        })
    );
    assert_eq!(h.renew(7).await, Ok(10));
    assert_eq!(h.renew(8).await, Err(EtcdError::LeaseNotFound));
    advance(Duration::from_secs(9)).await;
    assert_eq!(h.tick().await, vec![]);
    assert_eq!(
        h.ttl(7).await,
        Ok(LeaseTtl {
            granted_ttl: 10,
            remaining_ttl: 1
        })
    );
    advance(Duration::from_secs(1)).await;
    assert_eq!(h.tick().await, revokes(&[7]));
}

#[actix_rt::test]
async fn new_leader_restarts_clocks_from_the_checkpoint_plus_election_timeout() {
    let h = Harness::start(LessorConfig {
        election_timeout: Duration::from_secs(1),
        ..LessorConfig::default()
    });
    // Recovered as a follower: lease 1 had 4 s left at its last checkpoint, lease 2 none.
    h.grant(1, 600, 4).await;
    h.grant(2, 10, 0).await;
    advance(Duration::from_secs(100)).await;
    h.leader(true).await;

    advance(Duration::from_millis(4999)).await;
    assert_eq!(h.tick().await, vec![]);
    advance(Duration::from_millis(1)).await;
    assert_eq!(h.tick().await, revokes(&[1]));

    // Leadership lost before lease 2 expires: nothing more is proposed here.
    h.leader(false).await;
    advance(Duration::from_secs(60)).await;
    assert_eq!(h.tick().await, vec![]);
}

#[actix_rt::test]
async fn checkpoints_are_proposed_and_cleared_by_a_keepalive() {
    let h = Harness::start(LessorConfig {
        checkpoint_interval: Duration::from_secs(60),
        ..LessorConfig::default()
    });
    h.leader(true).await;
    h.grant(1, 100, 0).await;

    advance(Duration::from_secs(60)).await;
    assert_eq!(h.tick().await, checkpoints(&[(1, 40)]));
    h.lessor
        .send(LeaseCheckpointed {
            id: 1,
            remaining_ttl: 40,
        })
        .await
        .unwrap();

    advance(Duration::from_secs(5)).await;
    assert_eq!(h.renew(1).await, Ok(100));
    assert_eq!(h.tick().await, checkpoints(&[(1, 0)]));
    assert_eq!(h.tick().await, vec![]);
}

#[actix_rt::test]
async fn one_message_carries_revokes_and_checkpoints() {
    let h = Harness::start(LessorConfig {
        checkpoint_interval: Duration::from_secs(60),
        ..LessorConfig::default()
    });
    h.leader(true).await;
    h.grant(1, 60, 0).await;
    h.grant(2, 100, 0).await;
    advance(Duration::from_secs(60)).await;
    assert_eq!(
        h.tick().await,
        vec![ProposeLeaseOps {
            revokes: vec![1],
            checkpoints: vec![(2, 40)],
        }]
    );
}

#[actix_rt::test]
async fn a_keepalive_of_a_lease_unknown_just_after_promotion_waits_for_its_grant() {
    let h = Harness::start(LessorConfig::default());
    h.leader(true).await;
    // Granted in the last term, its grant not applied here yet.
    let early = actix_rt::spawn(h.lessor.send(RenewLease { id: 1 }));
    let unknown = actix_rt::spawn(h.lessor.send(RenewLease { id: 2 }));
    advance(Duration::from_millis(10)).await;
    assert!(!early.is_finished() && !unknown.is_finished());
    h.grant(1, 30, 0).await;
    assert_eq!(early.await.unwrap().unwrap(), Ok(30));
    // A lease that never comes is not found once the election timeout has passed.
    assert_eq!(
        unknown.await.unwrap().unwrap(),
        Err(EtcdError::LeaseNotFound)
    );
    assert_eq!(h.renew(2).await, Err(EtcdError::LeaseNotFound));
}

#[actix_rt::test]
async fn a_keepalive_waiting_for_a_grant_hears_not_leader_when_leadership_is_lost() {
    let h = Harness::start(LessorConfig::default());
    h.leader(true).await;
    let early = actix_rt::spawn(h.lessor.send(RenewLease { id: 1 }));
    advance(Duration::from_millis(10)).await;
    h.leader(false).await;
    assert_eq!(early.await.unwrap().unwrap(), Err(EtcdError::NotLeader));
}

/// Stands in for the raft node's `ReadIndex`: counts the questions and answers `answer`; with
/// `apply` set, the grant is applied (sent to the lessor) before the answer, as the applier
/// applies a committed grant before raft answers a read index that covers it; `hang` never
/// answers.
struct FakeRaft {
    asked: usize,
    answer: Result<u64, EtcdError>,
    apply: Option<(Recipient<LeaseGranted>, LeaseGranted)>,
    hang: bool,
}

impl Actor for FakeRaft {
    type Context = Context<Self>;
}

impl Handler<ReadIndex> for FakeRaft {
    type Result = actix::ResponseFuture<Result<u64, EtcdError>>;

    fn handle(&mut self, _: ReadIndex, _: &mut Context<Self>) -> Self::Result {
        self.asked += 1;
        if let Some((lessor, granted)) = self.apply.take() {
            lessor.do_send(granted);
        }
        let (answer, hang) = (self.answer.clone(), self.hang);
        Box::pin(async move {
            if hang {
                std::future::pending::<()>().await;
            }
            answer
        })
    }
}

#[derive(Message)]
#[rtype(result = "usize")]
struct Asked;

impl Handler<Asked> for FakeRaft {
    type Result = usize;

    fn handle(&mut self, _: Asked, _: &mut Context<Self>) -> usize {
        self.asked
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct ApplyOnRead(Recipient<LeaseGranted>, LeaseGranted);

impl Handler<ApplyOnRead> for FakeRaft {
    type Result = ();

    fn handle(&mut self, m: ApplyOnRead, _: &mut Context<Self>) {
        self.apply = Some((m.0, m.1));
    }
}

/// A leader lessor whose keepalives wait on a [`FakeRaft`] answering `answer`.
async fn with_raft(
    fast_keepalive: bool,
    answer: Result<u64, EtcdError>,
    hang: bool,
) -> (Addr<LessorActor>, Addr<FakeRaft>) {
    tokio::time::pause();
    let raft = FakeRaft {
        asked: 0,
        answer,
        apply: None,
        hang,
    }
    .start();
    let recorder = Recorder::default().start();
    let config = LessorConfig {
        fast_keepalive,
        ..LessorConfig::default()
    };
    let lessor = LessorActor::new(config, TokioClock, recorder.recipient())
        .with_applied_wait(raft.clone().recipient())
        .start();
    lessor.send(Leadership { leader: true }).await.unwrap();
    // Past the window after promotion, where a lease unknown here was "not found" at once.
    advance(Duration::from_secs(2)).await;
    (lessor, raft)
}

fn granted(id: i64, ttl: i64) -> LeaseGranted {
    LeaseGranted {
        id,
        ttl,
        remaining_ttl: 0,
    }
}

#[actix_rt::test]
async fn fast_keepalive_renews_a_known_lease_at_once_and_waits_for_an_unknown_one() {
    let (lessor, raft) = with_raft(true, Ok(7), false).await;
    lessor.send(granted(1, 30)).await.unwrap();
    assert_eq!(lessor.send(RenewLease { id: 1 }).await.unwrap(), Ok(30));
    assert_eq!(raft.send(Asked).await.unwrap(), 0, "a known lease: no wait");
    // Lease 2's grant is committed but not applied here yet: the keepalive waits until this
    // member has applied everything committed, and then finds it (etcd #13932).
    raft.send(ApplyOnRead(lessor.clone().recipient(), granted(2, 40)))
        .await
        .unwrap();
    assert_eq!(lessor.send(RenewLease { id: 2 }).await.unwrap(), Ok(40));
    assert_eq!(raft.send(Asked).await.unwrap(), 1);
    // A lease that truly does not exist is not found once the wait is over.
    assert_eq!(
        lessor.send(RenewLease { id: 3 }).await.unwrap(),
        Err(EtcdError::LeaseNotFound)
    );
    assert_eq!(raft.send(Asked).await.unwrap(), 2);
}

#[actix_rt::test]
async fn without_fast_keepalive_every_keepalive_on_the_leader_waits_for_the_applied_index() {
    let (lessor, raft) = with_raft(false, Ok(7), false).await;
    lessor.send(granted(1, 30)).await.unwrap();
    assert_eq!(lessor.send(RenewLease { id: 1 }).await.unwrap(), Ok(30));
    assert_eq!(lessor.send(RenewLease { id: 1 }).await.unwrap(), Ok(30));
    assert_eq!(raft.send(Asked).await.unwrap(), 2);
    // Only the leader renews: a follower refuses at once, without waiting.
    lessor.send(Leadership { leader: false }).await.unwrap();
    assert_eq!(
        lessor.send(RenewLease { id: 1 }).await.unwrap(),
        Err(EtcdError::NotLeader)
    );
    assert_eq!(raft.send(Asked).await.unwrap(), 2);
}

#[actix_rt::test]
async fn a_keepalive_whose_wait_fails_is_not_renewed() {
    // Leadership moved during the read index: the front asks the new leader.
    let (lessor, _raft) = with_raft(false, Err(EtcdError::LeaderChanged), false).await;
    lessor.send(granted(1, 30)).await.unwrap();
    assert_eq!(
        lessor.send(RenewLease { id: 1 }).await.unwrap(),
        Err(EtcdError::NotLeader)
    );
}

#[actix_rt::test]
async fn a_keepalive_whose_wait_is_not_answered_times_out() {
    let (lessor, _raft) = with_raft(false, Ok(7), true).await;
    lessor.send(granted(1, 30)).await.unwrap();
    let pending = actix_rt::spawn(lessor.send(RenewLease { id: 1 }));
    advance(LessorConfig::default().apply_wait_timeout + Duration::from_millis(1)).await;
    assert_eq!(pending.await.unwrap().unwrap(), Err(EtcdError::Timeout));
}
