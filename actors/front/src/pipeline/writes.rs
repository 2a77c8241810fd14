//! Writes: a request proposed through preflight and raft and answered once applied, etcd's
//! timeout causes, the linearizable barrier, and what the request-duration histogram counts of
//! a proposal.

use super::*;

/// How long a physical compaction is waited for when its client set no deadline.
const PHYSICAL_COMPACTION_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

impl Pipeline {
    /// Proposes a client's write and waits for its entry to be applied.
    ///
    /// The request is boxed here, before any future holds it: an `InternalRaftRequest` is
    /// 1.3 KB of optional fields, and every future that held it by value (this one, the
    /// gRPC method's, the mailbox send's) grew by that much and was copied whole when tonic
    /// boxed the method's future (7.2 KB for a put's before: `memcpy` was 1.6% of the actors'
    /// thread at put at 100 clients in that box alone).
    pub fn write(
        &self,
        req: InternalRaftRequest,
        auth: AuthInfo,
    ) -> impl Future<Output = Result<ApplyResponse, EtcdError>> + Send + '_ {
        self.propose(Box::new(req), auth, false)
    }

    /// Proposes a request this member makes itself (publishing its attributes): never judged
    /// by auth when applied.
    pub fn write_internal(
        &self,
        req: InternalRaftRequest,
    ) -> impl Future<Output = Result<ApplyResponse, EtcdError>> + Send + '_ {
        self.propose(Box::new(req), AuthInfo::default(), true)
    }

    pub(crate) async fn propose(
        &self,
        mut req: Box<InternalRaftRequest>,
        auth: AuthInfo,
        internal: bool,
    ) -> Result<ApplyResponse, EtcdError> {
        let id = self.ids.next();
        let kind = actcd_metrics::durations::request_type(&req);
        let req_physical = req.compaction.as_ref().is_some_and(|c| c.physical);
        req.header = Some(RequestHeader {
            id,
            username: auth.username,
            auth_revision: auth.revision,
            internal,
        });
        let started = tokio::time::Instant::now();
        // Whether a leader was elected while the write waited, for naming a timeout.
        let mut leaders = self.routes.leader.clone();
        let leaderless = *leaders.borrow_and_update() == 0;
        // The raft node drops a write still waiting for a leader at the same deadline, so one
        // answered "timed out" here is never proposed later.
        let deadline = self.deadline();
        let (tx, rx) = oneshot::channel();
        let submit = Submit {
            request: req,
            reply: tx,
            deadline: Some(deadline),
        };
        // Every outcome, a refusal too, arrives on `rx`: don't wait for the handler as well
        // (that wake-up cost ~10% of single-client put latency). A full mailbox still pushes
        // back by waiting.
        match self.routes.submit.try_send(submit) {
            Ok(()) => {}
            Err(actix::prelude::SendError::Full(submit)) => {
                let _ = Box::pin(self.routes.submit.send(submit)).await?;
            }
            Err(actix::prelude::SendError::Closed(_)) => return Err(EtcdError::Stopped),
        }
        // etcd's Compact waits for a physical compaction's deletions once its entry is applied,
        // with no deadline of its own (`<-result.physc`): only the client's bounds the wait
        // (without one, ten minutes here). A million keys take longer than the 7 s the raft
        // part is given.
        let answer_by = if req_physical {
            crate::metrics::client_deadline()
                .unwrap_or(deadline + PHYSICAL_COMPACTION_WAIT)
                .max(deadline)
        } else {
            deadline
        };
        let outcome = match self.answer(rx, answer_by).await {
            // No leader from start to deadline: the raft node never proposed it, and etcd's
            // answer is its request context's error (its raft takes no proposal without a
            // leader; one made while a leader was known is named by `why_timed_out`).
            Err(EtcdError::Timeout) if leaderless && matches!(leaders.has_changed(), Ok(false)) => {
                Err(EtcdError::ProposalDeadlineExceeded)
            }
            // Boxed: a rare path whose future (three actor round trips) would otherwise size
            // every write's.
            Err(EtcdError::Timeout) => Err(Box::pin(self.why_timed_out(started)).await),
            other => other,
        };
        // etcd counts proposals that never made it through the log (not those the state
        // machine refused when applying them).
        if let Err(
            EtcdError::Timeout
            | EtcdError::TimeoutDueToLeaderFail
            | EtcdError::TimeoutDueToConnectionLost
            | EtcdError::ProposalDeadlineExceeded
            | EtcdError::NoLeader
            | EtcdError::Stopped
            | EtcdError::TooManyRequests,
        ) = &outcome
        {
            self.counters
                .proposals_failed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if let Some(kind) = kind
            && let Some(success) = proposal_success(&outcome)
        {
            self.counters
                .durations
                .request(kind, success, started.elapsed());
        }
        outcome
    }

    /// etcd's reading of a write that timed out: the leader changed while it waited (this
    /// member leads now, and the write was made within two election timeouts before it was
    /// elected: etcd keeps the time of its own elections only, so a follower never says so),
    /// or the connection to the leader (or, on the leader, to a quorum) broke since it was
    /// made, or plainly timed out — also when there is no leader now, as etcd 3.5 answers.
    pub(crate) async fn why_timed_out(&self, started: tokio::time::Instant) -> EtcdError {
        let Ok(status) = self.raft_status().await else {
            return EtcdError::Timeout;
        };
        let Some(leader_for) = status.leader_for else {
            return EtcdError::Timeout;
        };
        let now = tokio::time::Instant::now();
        if status.leader == self.config.identity.member_id
            && let Some(elected) = now.checked_sub(leader_for)
            && started < elected
            && started + 2 * self.config.election_timeout > elected
        {
            return EtcdError::TimeoutDueToLeaderFail;
        }
        let waited = now.duration_since(started);
        let Ok(activity) = self.routes.peer_activity.send(PeerActivity).await else {
            return EtcdError::Timeout;
        };
        let up_since_start = |id: u64| activity.get(&id).is_some_and(|d| *d >= waited);
        let me = self.config.identity.member_id;
        if status.leader == me {
            let Ok(members) = self.members().await else {
                return EtcdError::Timeout;
            };
            let connected = members
                .iter()
                .filter(|m| m.id == me || up_since_start(m.id))
                .count();
            if connected < members.len() / 2 + 1 {
                return EtcdError::TimeoutDueToConnectionLost;
            }
        } else if !up_since_start(status.leader) {
            return EtcdError::TimeoutDueToConnectionLost;
        }
        EtcdError::Timeout
    }

    /// Waits until this member has applied everything committed before the call (ReadIndex).
    ///
    /// A round the raft node fails because the leader changed is asked again, of the new
    /// leader (the node holds reads while there is none and starts them when one is elected),
    /// until the deadline ([`Self::deadline`]), then `request timed out` as etcd's read loop
    /// answers. etcd 3.5.1 fails a read whose round a new leader's election cut short with
    /// `leader changed` (its Go client retries it, unseen); here the read is retried inside
    /// the member instead, so that clients that don't retry see no error either. A round
    /// started after the call began still orders the read after it: linearizable either way.
    pub async fn linearizable_barrier(&self) -> Result<(), EtcdError> {
        if self.config.debug_stale_reads {
            return Ok(());
        }
        let deadline = self.deadline();
        loop {
            let round = self.routes.read_index.send(ReadIndex);
            match tokio::time::timeout_at(deadline, round).await {
                Err(_) => {
                    self.counters
                        .read_index_timeouts
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return Err(EtcdError::Timeout);
                }
                Ok(answer) => match answer? {
                    Ok(_) => return Ok(()),
                    Err(EtcdError::LeaderChanged) => {}
                    Err(e) => return Err(e),
                },
            }
        }
    }

    /// While a CORRUPT alarm is raised, reads are refused with `etcdserver: corrupt cluster`,
    /// as the applier refuses writes: data a member may hold wrongly are never served. (etcd
    /// 3.5 serves reads through its base applier, past the corrupt one; actcd doesn't.)
    pub(crate) fn refuse_if_corrupt(&self) -> Result<(), EtcdError> {
        if *self.routes.corrupt.borrow() {
            Err(EtcdError::Corrupt)
        } else {
            Ok(())
        }
    }
}

/// No put and no delete anywhere in the txn, nested txns included.
/// `etcd_server_request_duration_seconds`'s `success` of a proposal's outcome, as etcd's
/// `processInternalRaftRequestOnce` reports it: false only when the request never made it into
/// the log (too large, or no leader to take it until the deadline, or the server stopping); a
/// write that was proposed and then timed out, or that the state machine refused, counts as a
/// success. `None` for refusals etcd makes before it starts timing (a request it validates in
/// its gRPC layer, too many requests), which it never observes.
pub(crate) fn proposal_success(outcome: &Result<ApplyResponse, EtcdError>) -> Option<bool> {
    match outcome {
        Ok(_) => Some(true),
        Err(
            EtcdError::EmptyKey
            | EtcdError::KeyNotFound
            | EtcdError::ValueProvided
            | EtcdError::LeaseProvided
            | EtcdError::TooManyOps
            | EtcdError::DuplicateKey
            | EtcdError::TooManyRequests,
        ) => None,
        Err(
            EtcdError::RequestTooLarge
            | EtcdError::ProposalDeadlineExceeded
            | EtcdError::NoLeader
            | EtcdError::Stopped,
        ) => Some(false),
        Err(_) => Some(true),
    }
}
