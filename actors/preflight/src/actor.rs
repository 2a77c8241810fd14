use actcd_proto::actcdpb::member_change::Kind;
use actcd_proto::actcdpb::{InternalRaftRequest, MemberChange, RequestHeader};
use actcd_proto::etcdserverpb::alarm_request::AlarmAction;
use actcd_proto::etcdserverpb::{
    AlarmRequest, AlarmType, LeaseCheckpoint, LeaseCheckpointRequest, LeaseRevokeRequest,
};
use actcd_types::EtcdError;
use actcd_types::msg::{
    Cancel, ConfChangeKind, GetStoreStatus, Propose, ProposeConfChange, ProposeLeaseOps,
    QuotaUsage, RaftProgress, Register, Submit,
};
use actix::{Actor, Context, Handler, Recipient, ResponseFuture};
use prost::Message as _;

use crate::check::{Limits, check_request, exceeds_request_limit, fits_quota, quota_cost};

/// Where admitted writes go.
#[derive(Clone)]
pub struct PreflightPeers {
    pub propose: Recipient<Propose>,
    pub register: Recipient<Register>,
    pub cancel: Recipient<Cancel>,
}

pub struct PreflightActor {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: std::sync::Arc<actcd_types::meter::Meter>,
    limits: Limits,
    peers: PreflightPeers,
    committed: u64,
    applied: u64,
    /// Raises the NOSPACE alarm as this member.
    member_id: u64,
    /// Live bytes in the backend, as last reported (every 100 ms).
    used_bytes: u64,
    /// Asked for fresh usage when the last report says a write doesn't fit.
    store_status: Option<Recipient<GetStoreStatus>>,
    /// A NOSPACE alarm was proposed since the last usage report: don't flood the log.
    alarm_proposed: bool,
    /// Where membership changes are proposed (as raft configuration changes).
    propose_conf: Option<Recipient<ProposeConfChange>>,
}

impl PreflightActor {
    pub fn new(limits: Limits, peers: PreflightPeers) -> Self {
        Self {
            meter: actcd_types::meter::Meter::new(),
            limits,
            peers,
            committed: 0,
            applied: 0,
            member_id: 0,
            used_bytes: 0,
            store_status: None,
            alarm_proposed: false,
            propose_conf: None,
        }
    }

    /// The member id NOSPACE alarms are raised under.
    pub fn with_member(mut self, member_id: u64) -> Self {
        self.member_id = member_id;
        self
    }

    /// Where to ask for fresh backend usage before refusing a write over quota: reports are up
    /// to 100 ms old, and one taken before a compaction must not keep refusing (and re-raising
    /// the alarm) after an operator made room.
    pub fn with_store_status(mut self, status: Recipient<GetStoreStatus>) -> Self {
        self.store_status = Some(status);
        self
    }

    /// Where membership changes go: a member add, removal or promotion is a raft configuration
    /// change, not an ordinary entry.
    pub fn with_conf_changes(mut self, propose: Recipient<ProposeConfChange>) -> Self {
        self.propose_conf = Some(propose);
        self
    }

    fn nospace_alarm(&self) -> Propose {
        let alarm = InternalRaftRequest {
            alarm: Some(AlarmRequest {
                action: AlarmAction::Activate as i32,
                member_id: self.member_id,
                alarm: AlarmType::Nospace as i32,
            }),
            ..Default::default()
        };
        Propose {
            data: alarm.encode_to_vec(),
            deadline: None,
            leader_only: false,
        }
    }
}

impl Actor for PreflightActor {
    type Context = Context<Self>;
}

impl Handler<Submit> for PreflightActor {
    type Result = ResponseFuture<Result<(), EtcdError>>;

    /// Validate, check the quota, register the waiter, then propose. The proposal itself is
    /// awaited outside the actor so one slow proposal never holds up the checks of the next.
    ///
    /// The quota (etcd's): a write whose cost would take the backend past it raises the NOSPACE
    /// alarm (through the log, so every member caps writes) and is refused. Over the last
    /// report, fresh usage is asked for first.
    fn handle(&mut self, msg: Submit, _: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("Submit");
        let checked = if exceeds_request_limit(
            self.applied,
            self.committed,
            &msg.request,
            self.limits.priority_requests,
        ) {
            Err(EtcdError::TooManyRequests)
        } else {
            check_request(&msg.request, &self.limits)
        };
        let data = match checked {
            Ok(d) => d,
            Err(e) => {
                let _ = msg.reply.send(Err(e.clone()));
                return Box::pin(async move { Err(e) });
            }
        };
        if let Some(change) = &msg.request.member_change
            && let Some(kind) = conf_change_kind(change)
        {
            let Some(propose) = self.propose_conf.clone() else {
                let e = EtcdError::internal("membership changes are not wired to raft");
                let _ = msg.reply.send(Err(e.clone()));
                return Box::pin(async move { Err(e) });
            };
            let node_id = change.member_id;
            let id = msg.request.header.as_ref().map_or(0, |h| h.id);
            let peers = self.peers.clone();
            return Box::pin(async move {
                peers.register.do_send(Register {
                    id,
                    reply: msg.reply,
                });
                let proposal = ProposeConfChange {
                    kind,
                    node_id,
                    context: data,
                };
                cancel_if_refused(&peers, id, propose.send(proposal).await)
            });
        }
        let cost = quota_cost(&msg.request);
        let deadline = msg.deadline;
        let quota = self.limits.quota_bytes;
        let fits = move |used: u64| fits_quota(cost, used, quota);
        let over = !fits(self.used_bytes);
        let alarm = (over && !self.alarm_proposed).then(|| self.nospace_alarm());
        self.alarm_proposed |= over;
        let status = self.store_status.clone().filter(|_| over);
        let id = msg.request.header.as_ref().map_or(0, |h| h.id);
        let peers = self.peers.clone();
        let used = self.used_bytes;
        Box::pin(async move {
            if over {
                let fresh = match status {
                    Some(s) => s.send(GetStoreStatus).await.ok().and_then(Result::ok),
                    None => None,
                };
                if !fresh.is_some_and(|st| fits(st.db_size_in_use)) {
                    if let Some(alarm) = alarm {
                        tracing::warn!(used, quota, "backend quota exceeded; raising NOSPACE");
                        peers.propose.do_send(alarm);
                    }
                    let _ = msg.reply.send(Err(EtcdError::NoSpace));
                    return Err(EtcdError::NoSpace);
                }
            }
            // Register is queued at the applier before the proposal exists, so the applier
            // always knows the waiter first. do_send is bounded by the requests in flight.
            peers.register.do_send(Register {
                id,
                reply: msg.reply,
            });
            let answer = peers
                .propose
                .send(Propose {
                    data,
                    deadline,
                    leader_only: false,
                })
                .await;
            cancel_if_refused(&peers, id, answer)
        })
    }
}

/// The raft change a membership request makes; `None` for a peer-URL update, which raft does
/// not see (it goes through the log as an ordinary entry).
/// The raft node's answer to proposal `id`. A refused proposal never reaches the log, so its
/// waiter, registered at the applier beforehand, is cancelled with the refusal.
fn cancel_if_refused(
    peers: &PreflightPeers,
    id: u64,
    answer: Result<Result<(), EtcdError>, actix::MailboxError>,
) -> Result<(), EtcdError> {
    let res = answer.unwrap_or_else(|e| Err(EtcdError::from(e)));
    if let Err(e) = &res {
        peers.cancel.do_send(Cancel {
            id,
            error: e.clone(),
        });
    }
    res
}

fn conf_change_kind(change: &MemberChange) -> Option<ConfChangeKind> {
    match Kind::try_from(change.kind).ok()? {
        Kind::Add => Some(ConfChangeKind::AddVoter),
        Kind::AddLearner => Some(ConfChangeKind::AddLearner),
        Kind::Remove => Some(ConfChangeKind::Remove),
        Kind::Promote => Some(ConfChangeKind::Promote),
        Kind::Update => None,
    }
}

impl Handler<QuotaUsage> for PreflightActor {
    type Result = ();

    fn handle(&mut self, msg: QuotaUsage, _: &mut Context<Self>) {
        self.used_bytes = msg.bytes;
        self.alarm_proposed = false;
    }
}

impl Handler<RaftProgress> for PreflightActor {
    type Result = ();

    fn handle(&mut self, msg: RaftProgress, _: &mut Context<Self>) {
        self.committed = msg.committed;
        self.applied = msg.applied;
    }
}

/// The lessor's revokes of expired leases and its checkpoints, proposed as etcd's leader does:
/// one LeaseRevoke entry per lease, one LeaseCheckpoint entry for the batch. Nobody waits on
/// them (request id 0); a revoke lost to a leader change is asked for again by the lessor.
impl Handler<ProposeLeaseOps> for PreflightActor {
    type Result = ();

    fn handle(&mut self, msg: ProposeLeaseOps, _: &mut Context<Self>) {
        let _timer = self.meter.start("ProposeLeaseOps");
        // The member's own requests: never judged by auth (etcd revokes as root).
        let internal = || {
            Some(RequestHeader {
                internal: true,
                ..Default::default()
            })
        };
        let revokes = msg.revokes.into_iter().map(|id| InternalRaftRequest {
            header: internal(),
            lease_revoke: Some(LeaseRevokeRequest { id }),
            ..Default::default()
        });
        let checkpoint = (!msg.checkpoints.is_empty()).then(|| InternalRaftRequest {
            header: internal(),
            lease_checkpoint: Some(LeaseCheckpointRequest {
                checkpoints: msg
                    .checkpoints
                    .into_iter()
                    .map(|(id, remaining_ttl)| LeaseCheckpoint { id, remaining_ttl })
                    .collect(),
            }),
            ..Default::default()
        });
        for req in revokes.chain(checkpoint) {
            // Only as leader (etcd 3.5.13's ensureLeadership before revoking): a proposal
            // forwarded by a member that just lost leadership would revoke a lease the new
            // leader is keeping alive.
            self.peers.propose.do_send(Propose {
                data: req.encode_to_vec(),
                deadline: None,
                leader_only: true,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use actcd_proto::actcdpb::{InternalRaftRequest, RequestHeader};
    use actcd_proto::etcdserverpb::PutRequest;
    use actix::Addr;
    use tokio::sync::oneshot;

    use super::*;

    /// Stands in for raft and the applier, recording the order of what arrives.
    struct Recorder {
        log: Arc<Mutex<Vec<String>>>,
        refuse: bool,
    }

    impl Actor for Recorder {
        type Context = Context<Self>;
    }

    impl Handler<Propose> for Recorder {
        type Result = Result<(), EtcdError>;
        fn handle(&mut self, _: Propose, _: &mut Context<Self>) -> Self::Result {
            self.log.lock().unwrap().push("propose".into());
            if self.refuse {
                Err(EtcdError::NoLeader)
            } else {
                Ok(())
            }
        }
    }

    impl Handler<Register> for Recorder {
        type Result = ();
        fn handle(&mut self, m: Register, _: &mut Context<Self>) {
            self.log.lock().unwrap().push(format!("register {}", m.id));
        }
    }

    impl Handler<Cancel> for Recorder {
        type Result = ();
        fn handle(&mut self, m: Cancel, _: &mut Context<Self>) {
            self.log.lock().unwrap().push(format!("cancel {}", m.id));
        }
    }

    fn put(id: u64, key: &[u8]) -> InternalRaftRequest {
        InternalRaftRequest {
            header: Some(RequestHeader {
                id,
                ..Default::default()
            }),
            put: Some(PutRequest {
                key: key.to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn start(refuse: bool) -> (Addr<PreflightActor>, Arc<Mutex<Vec<String>>>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let fake = Recorder {
            log: log.clone(),
            refuse,
        }
        .start();
        let peers = PreflightPeers {
            propose: fake.clone().recipient(),
            register: fake.clone().recipient(),
            cancel: fake.recipient(),
        };
        (PreflightActor::new(Limits::default(), peers).start(), log)
    }

    #[actix_rt::test]
    async fn admitted_writes_register_before_they_are_proposed() {
        let (pf, log) = start(false);
        let (tx, _rx) = oneshot::channel();
        pf.send(Submit {
            request: Box::new(put(7, b"k")),
            reply: tx,
            deadline: None,
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(log.lock().unwrap().clone(), vec!["register 7", "propose"]);
    }

    #[actix_rt::test]
    async fn refused_writes_reach_nobody() {
        let (pf, log) = start(false);
        let (tx, rx) = oneshot::channel();
        let err = pf
            .send(Submit {
                request: Box::new(put(8, b"")),
                reply: tx,
                deadline: None,
            })
            .await
            .unwrap();
        assert_eq!(err, Err(EtcdError::EmptyKey));
        assert_eq!(
            rx.await.unwrap(),
            Err(EtcdError::EmptyKey),
            "on the reply too"
        );
        pf.send(RaftProgress {
            committed: 10_000,
            applied: 10,
        })
        .await
        .unwrap();
        let (tx, _rx) = oneshot::channel();
        let err = pf
            .send(Submit {
                request: Box::new(put(9, b"k")),
                reply: tx,
                deadline: None,
            })
            .await
            .unwrap();
        assert_eq!(err, Err(EtcdError::TooManyRequests));
        assert!(log.lock().unwrap().is_empty());
    }

    #[actix_rt::test]
    async fn a_proposal_raft_refuses_cancels_its_waiter() {
        let (pf, log) = start(true);
        let (tx, _rx) = oneshot::channel();
        let err = pf
            .send(Submit {
                request: Box::new(put(5, b"k")),
                reply: tx,
                deadline: None,
            })
            .await
            .unwrap();
        assert_eq!(err, Err(EtcdError::NoLeader));
        // Cancel is sent without waiting; let it arrive.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            log.lock().unwrap().clone(),
            vec!["register 5", "propose", "cancel 5"]
        );
    }
}

impl PreflightActor {
    /// The backend quota (etcd's `etcd_server_quota_backend_bytes`).
    fn samples(&self) -> Vec<actcd_types::meter::Sample> {
        vec![actcd_types::meter::Sample::value(
            "etcd_server_quota_backend_bytes",
            self.limits.quota_bytes as f64,
        )]
    }
}

actcd_types::impl_mailbox_probe!(PreflightActor, meter, samples);
