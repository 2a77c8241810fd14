//! The walk through a Ready that ties the steps together, and step four of the chain:
//! dispatch.
//!
//! Each entry passes the auth step (`auth_step.rs`) and the capped step (`capped.rs`); a
//! refused request gets its error on its waiter and goes no further. Key-space, lease and
//! compaction requests go to the MVCC store in runs, one `ApplyBatch` per run (the store
//! answers their waiters itself). An auth, alarm or membership request ends the run before it
//! (so the store has applied everything before it, and an auth or alarm answer's header carries
//! the revision at that point, asked with `CurrentRevision`); auth requests go to the auth
//! actor, whose new view judges every entry after it; alarm requests are applied here
//! (`alarms.rs`), so a NOSPACE raised caps the very next entry; membership changes and member
//! attributes are applied here too (`members.rs`), and an applied change goes to raft as
//! `ApplyConfChange` before its waiter is answered. The table writes of all three travel with
//! the next `ApplyBatch` (`ApplyBatch.ops`), into the backend commit of a consistent index at
//! or after their entry; a Ready ending with such an entry sends a batch with no requests, only
//! those writes and the index.
//! Judging a Put with a lease or a LeaseRevoke needs the keys attached to the lease: the run
//! before is flushed first, then the store is asked (`LeaseKeys`); rare (auth on and leases).

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::{AlarmRequest, ResponseHeader};
use actcd_types::MemberIdentity;
use actcd_types::auth::SharedView;
use actcd_types::msg::{
    ApplyAuth, ApplyBatch, ApplyConfChange, ApplyResponse, ApplyResult, AuthReply, CurrentRevision,
    LeaseKeys,
};
use actcd_types::storage::Op;
use actix::prelude::*;
use tokio::sync::oneshot;

use crate::alarms::Alarms;
use crate::applier::{Item, Prepared};
use crate::members::Membership;
use crate::{auth_step, capped};

/// What the chain's steps judge by, as of the point of the log applied so far.
#[derive(Debug)]
pub struct ChainState {
    /// The permission view the auth step judges by.
    pub view: SharedView,
    /// The raised alarms; NOSPACE makes the capped step refuse growing requests.
    pub alarms: Alarms,
    /// The cluster's members.
    pub members: Membership,
}

/// Where the chain's steps send their work.
#[derive(Clone)]
pub struct ChainPeers {
    /// The MVCC store: runs of requests, the keys attached to a lease, the current revision.
    pub store: Recipient<ApplyBatch>,
    pub lease_keys: Recipient<LeaseKeys>,
    pub revision: Recipient<CurrentRevision>,
    /// The auth store.
    pub auth: Recipient<ApplyAuth>,
    /// The raft node, told of each membership change applied (its configuration follows).
    pub conf: Option<Recipient<ApplyConfChange>>,
    /// Stamped on auth answers' headers.
    pub identity: MemberIdentity,
}

/// Why a Ready could not be applied.
#[derive(Debug)]
pub enum Failure {
    /// A state owner could not write: the member must stop (the WAL replays the Ready).
    Fatal(String),
    /// A state owner is gone: the member is stopping.
    Gone,
}

impl From<MailboxError> for Failure {
    fn from(_: MailboxError) -> Self {
        Failure::Gone
    }
}

/// Requests gathered for the store, and the writes of other owners to commit with them.
#[derive(Default)]
struct Run {
    requests: Vec<InternalRaftRequest>,
    replies: Vec<Option<oneshot::Sender<ApplyResult>>>,
    ops: Vec<Op>,
    /// The last entry the run covers so far: `(index, term)`.
    covered: Option<(u64, u64)>,
}

impl Run {
    fn is_empty(&self) -> bool {
        self.requests.is_empty() && self.ops.is_empty()
    }

    /// The batch for the store, covering up to `(index, term)`.
    fn take_batch(&mut self, (consistent_index, term): (u64, u64)) -> ApplyBatch {
        ApplyBatch {
            consistent_index,
            term,
            requests: std::mem::take(&mut self.requests),
            replies: std::mem::take(&mut self.replies),
            ops: std::mem::take(&mut self.ops),
        }
    }
}

impl ChainPeers {
    /// Applies one Ready's requests in order, moving `state` along with the log.
    pub async fn apply(&self, state: &mut ChainState, prepared: Prepared) -> Result<(), Failure> {
        let mut run = Run::default();
        for item in prepared.items {
            let Item {
                index,
                term,
                request,
                reply,
            } = item;
            if auth_step::is_auth_request(&request) {
                self.flush(&mut run).await?;
                let who = auth_step::who(&request);
                let applied = self
                    .auth
                    .send(ApplyAuth { request, who })
                    .await?
                    .map_err(|e| Failure::Fatal(format!("auth entry {index}: {e}")))?;
                state.view = applied.view;
                run.ops.extend(applied.ops);
                run.covered = Some((index, term));
                if let Some(reply) = reply {
                    let answer = match applied.result {
                        Ok(r) => {
                            let revision = self.revision.send(CurrentRevision).await?;
                            Ok(ApplyResponse::Auth(stamp_auth(
                                r,
                                header(self.identity, revision, term),
                            )))
                        }
                        Err(e) => Err(e),
                    };
                    let _ = reply.send(answer);
                }
                continue;
            }
            let lease_keys = match auth_step::lease_in_question(&*state.view, &request) {
                Some(id) => {
                    self.flush(&mut run).await?;
                    // An unknown lease has no keys: the store refuses the request itself.
                    self.lease_keys
                        .send(LeaseKeys { id })
                        .await?
                        .unwrap_or_default()
                }
                None => Vec::new(),
            };
            let judged = auth_step::judge(&*state.view, &request, &lease_keys)
                .and_then(|()| capped::check(state.alarms.nospace(), &request));
            if let Err(e) = judged {
                run.covered = Some((index, term));
                if let Some(reply) = reply {
                    let _ = reply.send(Err(e));
                }
                continue;
            }
            if request.member_change.is_some() || request.member_attr_set.is_some() {
                self.flush(&mut run).await?;
                let answer = self.apply_membership(&mut state.members, &request, &mut run.ops);
                run.covered = Some((index, term));
                if let Some(reply) = reply {
                    let _ = reply.send(answer);
                }
                continue;
            }
            if let Some(alarm) = alarm_request(&request) {
                self.flush(&mut run).await?;
                let mut answer = state.alarms.apply(alarm, &mut run.ops);
                run.covered = Some((index, term));
                if let Some(reply) = reply {
                    let revision = self.revision.send(CurrentRevision).await?;
                    answer.header = header(self.identity, revision, term);
                    let _ = reply.send(Ok(ApplyResponse::Alarm(answer)));
                }
                continue;
            }
            run.covered = Some((index, term));
            run.requests.push(request);
            run.replies.push(reply);
        }
        // The last batch always goes: it moves the consistent index to the Ready's last entry.
        let batch = run.take_batch((prepared.last_index, prepared.last_term));
        self.send_batch(batch).await
    }

    /// A membership change (etcd's validation, then the change; raft hears an applied one) or
    /// a member's attributes; the table writes go onto `ops`.
    fn apply_membership(
        &self,
        members: &mut Membership,
        request: &InternalRaftRequest,
        ops: &mut Vec<Op>,
    ) -> ApplyResult {
        let Some(change) = &request.member_change else {
            if let Some(attrs) = &request.member_attr_set {
                members.set_attributes(attrs, ops);
            }
            return Ok(ApplyResponse::Empty);
        };
        let applied = members.apply(change, ops)?;
        if let (Some(raft), Some(order)) = (&self.conf, applied.order) {
            raft.do_send(ApplyConfChange {
                kind: order.kind,
                node_id: order.node_id,
                peer_urls: order.peer_urls,
            });
        }
        Ok(ApplyResponse::Members {
            member: Some(applied.member),
            members: members.list(),
        })
    }

    /// Sends what the run holds, if anything.
    async fn flush(&self, run: &mut Run) -> Result<(), Failure> {
        let Some(covered) = run.covered.filter(|_| !run.is_empty()) else {
            return Ok(());
        };
        let batch = run.take_batch(covered);
        self.send_batch(batch).await
    }

    async fn send_batch(&self, batch: ApplyBatch) -> Result<(), Failure> {
        let index = batch.consistent_index;
        match self.store.send(batch).await? {
            Ok(_) => Ok(()),
            Err(e) => Err(Failure::Fatal(format!(
                "applying entries up to index {index} failed: {e}"
            ))),
        }
    }
}

/// The alarm request an entry carries, if the applier applies it: with the store's precedence
/// when several fields are set (membership, a range, key writes and compaction come first).
fn alarm_request(req: &InternalRaftRequest) -> Option<&AlarmRequest> {
    let before = req.member_change.is_some()
        || req.member_attr_set.is_some()
        || req.range.is_some()
        || req.put.is_some()
        || req.delete_range.is_some()
        || req.txn.is_some()
        || req.compaction.is_some();
    req.alarm.as_ref().filter(|_| !before)
}

/// An answer's header: this member, the key space's revision, the entry's term.
fn header(identity: MemberIdentity, revision: i64, term: u64) -> Option<ResponseHeader> {
    Some(ResponseHeader {
        cluster_id: identity.cluster_id,
        member_id: identity.member_id,
        revision,
        raft_term: term,
    })
}

/// Gives an auth answer its header.
fn stamp_auth(mut reply: AuthReply, stamp: Option<ResponseHeader>) -> AuthReply {
    let header = match &mut reply {
        AuthReply::Authenticate { .. } => return reply,
        AuthReply::Enable(r) => &mut r.header,
        AuthReply::Disable(r) => &mut r.header,
        AuthReply::Status(r) => &mut r.header,
        AuthReply::UserAdd(r) => &mut r.header,
        AuthReply::UserDelete(r) => &mut r.header,
        AuthReply::UserGet(r) => &mut r.header,
        AuthReply::UserList(r) => &mut r.header,
        AuthReply::UserChangePassword(r) => &mut r.header,
        AuthReply::UserGrantRole(r) => &mut r.header,
        AuthReply::UserRevokeRole(r) => &mut r.header,
        AuthReply::RoleAdd(r) => &mut r.header,
        AuthReply::RoleGet(r) => &mut r.header,
        AuthReply::RoleList(r) => &mut r.header,
        AuthReply::RoleDelete(r) => &mut r.header,
        AuthReply::RoleGrantPermission(r) => &mut r.header,
        AuthReply::RoleRevokePermission(r) => &mut r.header,
    };
    *header = stamp;
    reply
}
