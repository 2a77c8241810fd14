//! Questions only the leader answers (lease renewals and time-to-live, a learner's readiness),
//! asked of the leader's own actors or over the peer port, and the wait through an election
//! that etcd's lease calls make.

use super::*;

impl Pipeline {
    /// A keepalive: answered by this member's lessor if it leads, else by the leader's (leases
    /// are kept, and expire, on the leader only), held through an election as etcd's
    /// `LeaseRenew` holds it (see [`Self::through_election`]).
    pub async fn renew_lease(&self, id: i64) -> Result<i64, EtcdError> {
        let local = || async move { self.routes.renew_lease.send(RenewLease { id }).await? };
        match local().await {
            Err(EtcdError::NotLeader) => {
                let remote = |a| match a {
                    PeerAnswer::Renewed(ttl) => Ok(ttl),
                    other => Err(unexpected(other)),
                };
                self.through_election(PeerCall::RenewLease(id), local, remote)
                    .await
            }
            other => other,
        }
    }

    /// A lease's TTLs, from the leader (see [`Self::renew_lease`]).
    pub async fn lease_ttl(&self, id: i64) -> Result<LeaseTtl, EtcdError> {
        let local = || async move { self.routes.lease_ttl.send(LeaseTimeToLive { id }).await? };
        match local().await {
            Err(EtcdError::NotLeader) => {
                let remote = |a| match a {
                    PeerAnswer::Ttl(t) => Ok(t),
                    other => Err(unexpected(other)),
                };
                self.through_election(PeerCall::LeaseTtl(id), local, remote)
                    .await
            }
            other => other,
        }
    }

    /// How long a request may wait for a leader: etcd's request timeout, or less if its gRPC
    /// client said so (`grpc-timeout`).
    pub(crate) fn deadline(&self) -> tokio::time::Instant {
        let ours = tokio::time::Instant::now() + self.config.request_timeout;
        crate::metrics::client_deadline().map_or(ours, |theirs| theirs.min(ours))
    }

    /// A question only the leader answers (a keepalive, a lease's TTL), asked as etcd's
    /// `LeaseRenew` and `LeaseTimeToLive` ask it through an election: of this member's own
    /// actor (`local`) while it leads, else of the leader over the peer port, and again
    /// whenever the leader changes, until an answer or the deadline (see [`Self::deadline`]).
    /// At the deadline: `no leader` if none was elected (etcd's `waitLeader`), else `request
    /// timed out`. `NotLeader`, `LeaderChanged` and `NoLeader` from either side are not
    /// answers: the election is still settling.
    ///
    /// Waiting is driven by the raft node's leader changes. A call that failed while the
    /// leader stayed the same (a connection to a live leader broke) is asked again after an
    /// election timeout at the latest, the time raft takes to notice a dead leader; a leader
    /// change while a call is in flight drops it and asks the new leader (both are renewals or
    /// reads, safe to repeat).
    pub(crate) async fn through_election<T, L, F>(
        &self,
        call: PeerCall,
        local: impl Fn() -> L,
        remote: F,
    ) -> Result<T, EtcdError>
    where
        L: Future<Output = Result<T, EtcdError>>,
        F: Fn(PeerAnswer) -> Result<T, EtcdError>,
    {
        let deadline = self.deadline();
        let mut leaders = self.routes.leader.clone();
        let me = self.config.identity.member_id;
        loop {
            let leader = *leaders.borrow_and_update();
            if leader == 0 {
                match tokio::time::timeout_at(deadline, leaders.changed()).await {
                    Ok(Ok(())) => continue,
                    Ok(Err(_)) => return Err(EtcdError::Stopped),
                    Err(_) => return Err(EtcdError::NoLeader),
                }
            }
            let asked = async {
                if leader == me {
                    local().await
                } else {
                    let call = LeaderCall { leader, call };
                    self.routes.leader_call.send(call).await?.and_then(&remote)
                }
            };
            let outcome = tokio::select! {
                r = asked => r,
                moved = leaders.changed() => match moved {
                    Ok(()) => continue,
                    Err(_) => return Err(EtcdError::Stopped),
                },
                () = tokio::time::sleep_until(deadline) => return Err(EtcdError::Timeout),
            };
            match outcome {
                Err(EtcdError::NotLeader | EtcdError::LeaderChanged | EtcdError::NoLeader) => {}
                other => return other,
            }
            let retry = tokio::time::Instant::now() + self.config.election_timeout;
            match tokio::time::timeout_at(retry.min(deadline), leaders.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(EtcdError::Stopped),
                Err(_) if tokio::time::Instant::now() >= deadline => {
                    return Err(EtcdError::Timeout);
                }
                Err(_) => {}
            }
        }
    }

    /// etcd's `isLearnerReady`, asked of this member's raft node if it leads, else of the
    /// leader's.
    pub async fn learner_ready(&self, id: u64) -> Result<(), EtcdError> {
        match self.routes.learner_ready.send(CheckLearner { id }).await? {
            Err(EtcdError::NotLeader) => {
                self.ask_leader(PeerCall::LearnerReady(id)).await.map(drop)
            }
            other => other,
        }
    }

    /// Asks the current leader once, through the transport.
    pub(crate) async fn ask_leader(&self, call: PeerCall) -> Result<PeerAnswer, EtcdError> {
        let leader = self.raft_status().await?.leader;
        if leader == 0 {
            return Err(EtcdError::NoLeader);
        }
        self.routes
            .leader_call
            .send(LeaderCall { leader, call })
            .await?
    }
}

pub(crate) fn unexpected(a: PeerAnswer) -> EtcdError {
    EtcdError::internal(format!("unexpected answer from the leader: {a:?}"))
}
