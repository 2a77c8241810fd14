//! The walk through a Ready that ties the steps together, and step four of the chain:
//! dispatch.
//!
//! Each entry passes the auth step (`auth_step.rs`), the corrupt step (`corrupt.rs`) and the
//! capped step (`capped.rs`); a
//! refused request gets its error on its waiter and goes no further. Key-space and compaction
//! requests go to the MVCC store in runs, one `ApplyBatch` per run (the store answers their
//! waiters itself). An auth, alarm or membership request ends the run before it (so the store
//! has applied everything before it, and an auth or alarm answer's header carries the revision
//! at that point: the one the last batch reported, else asked with `CurrentRevision`); auth
//! requests go to the auth actor, whose new view judges every entry after it; alarm requests
//! are applied here (`alarms.rs`), so a NOSPACE raised caps the very next entry; membership
//! changes and member attributes are applied here too (`members.rs`), and an applied change
//! goes to raft as `ApplyConfChange` before its waiter is answered. The table writes of all
//! three travel with the next `ApplyBatch` (`ApplyBatch.ops`), into the backend commit of a
//! consistent index at or after their entry; a Ready ending with such an entry sends a batch
//! with no requests, only those writes and the index.
//!
//! Leases (`leases.rs`) are applied here too, and the lessor hears of each one applied:
//! - a batch carries the leases that exist among those its puts name (`ApplyBatch.leases`);
//!   the store refuses a put naming any other. A LeaseGrant of a lease the run already names
//!   ends the run first (that put must not see it), and so does one with a waiter (its
//!   header carries the revision).
//! - each batch's reply says how its writes moved keys between leases; the attachments follow
//!   it before the next entry.
//! - a LeaseRevoke ends the run, so the keys attached at its point of the log are known, and
//!   sends them to the store as one `DeleteKeys` (one revision, one watch response; nothing
//!   sent, and no revision taken, for a lease without keys) carrying the lease's table write
//!   and the entry's consistent index.
//! - a LeaseCheckpoint neither ends the run nor touches the key space.
//!
//! Judging a Put with a lease or a LeaseRevoke with auth on needs the keys attached to the
//! lease: the run before is flushed first.

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::request_op::Request;
use actcd_proto::etcdserverpb::{
    AlarmRequest, LeaseGrantResponse, LeaseRevokeResponse, RequestOp, ResponseHeader,
};
use actcd_types::auth::SharedView;
use actcd_types::msg::{
    ApplyAuth, ApplyBatch, ApplyConfChange, ApplyResponse, ApplyResult, AuthReply, BatchApplied,
    ConfChangeKind, CurrentRevision, DeleteKeys, LeaseCheckpointed, LeaseGranted, LeaseRevoked,
};
use actcd_types::storage::Op;
use actcd_types::v2::{ApplyV2, V2Entry};
use actcd_types::{EtcdError, MemberIdentity};
use actix::prelude::*;
use tokio::sync::oneshot;

use crate::alarms::Alarms;
use crate::applier::{Item, Prepared};
use crate::leases::Leases;
use crate::members::Membership;
use crate::{auth_step, capped, corrupt};

/// What the chain's steps judge by, as of the point of the log applied so far.
#[derive(Debug)]
pub struct ChainState {
    /// The permission view the auth step judges by.
    pub view: SharedView,
    /// The raised alarms; NOSPACE makes the capped step refuse growing requests.
    pub alarms: Alarms,
    /// The cluster's members.
    pub members: Membership,
    /// The leases and the keys attached to them.
    pub leases: Leases,
    /// The key space's revision as the last batch reported it; `None` until one did (or after
    /// a snapshot replaced the store): then it is asked.
    pub revision: Option<i64>,
    /// etcd's `etcd_server_apply_duration_seconds` of the requests applied here rather than
    /// in the store (leases, alarms, auth), from handing each to its owner to its answer.
    pub apply_durations: actcd_types::meter::ApplyDurations,
}

/// Where the chain's steps send their work.
#[derive(Clone)]
pub struct ChainPeers {
    /// The MVCC store: runs of requests, a revoked lease's keys, the current revision.
    pub store: Recipient<ApplyBatch>,
    pub delete_keys: Recipient<DeleteKeys>,
    pub revision: Recipient<CurrentRevision>,
    /// The auth store.
    pub auth: Recipient<ApplyAuth>,
    /// The raft node, told of each membership change applied (its configuration follows).
    pub conf: Option<Recipient<ApplyConfChange>>,
    /// The lessor, told of every lease change applied.
    pub lessor: Option<LessorLink>,
    /// Stamped on auth answers' headers.
    pub identity: MemberIdentity,
    /// The v2 store: v2 API entries, each applied there in log order.
    pub v2: Option<Recipient<ApplyV2>>,
}

/// The lessor's doors: grants, revokes and checkpoints once applied.
#[derive(Clone)]
pub struct LessorLink {
    pub granted: Recipient<LeaseGranted>,
    pub revoked: Recipient<LeaseRevoked>,
    pub checkpointed: Recipient<LeaseCheckpointed>,
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
    /// Every lease the run's puts name, and those of them that exist.
    named: Vec<i64>,
    existing: Vec<i64>,
    /// v2 entries not yet sent to the v2 store, in log order.
    v2: Vec<V2Entry>,
}

impl Run {
    fn is_empty(&self) -> bool {
        self.requests.is_empty() && self.ops.is_empty() && self.v2.is_empty()
    }

    /// Adds a key-space request, noting the leases its puts name.
    fn push(
        &mut self,
        request: InternalRaftRequest,
        reply: Option<oneshot::Sender<ApplyResult>>,
        leases: &Leases,
    ) {
        let mut note = |id: i64| {
            if id != 0 && !self.named.contains(&id) {
                self.named.push(id);
                if leases.exists(id) {
                    self.existing.push(id);
                }
            }
        };
        if let Some(p) = &request.put {
            note(p.lease);
        }
        if let Some(t) = &request.txn {
            named_in_ops(&t.success, &mut note);
            named_in_ops(&t.failure, &mut note);
        }
        self.requests.push(request);
        self.replies.push(reply);
    }

    /// The batch for the store, covering up to `(index, term)`.
    fn take_batch(&mut self, (consistent_index, term): (u64, u64)) -> ApplyBatch {
        ApplyBatch {
            consistent_index,
            term,
            requests: std::mem::take(&mut self.requests),
            replies: std::mem::take(&mut self.replies),
            ops: std::mem::take(&mut self.ops),
            leases: {
                self.named.clear();
                std::mem::take(&mut self.existing)
            },
        }
    }
}

/// Calls `note` with the lease of every put in `ops` and in txns nested in them.
fn named_in_ops(ops: &[RequestOp], note: &mut impl FnMut(i64)) {
    for op in ops {
        match &op.request {
            Some(Request::RequestPut(p)) => note(p.lease),
            Some(Request::RequestTxn(t)) => {
                named_in_ops(&t.success, note);
                named_in_ops(&t.failure, note);
            }
            _ => {}
        }
    }
}

/// A lease request the applier applies (after membership, alarms and key-space requests in
/// the store's precedence when several fields are set).
enum LeaseOp {
    Grant { id: i64, ttl: i64 },
    Revoke(i64),
    Checkpoint(Vec<(i64, i64)>),
}

impl LeaseOp {
    fn of(req: &InternalRaftRequest) -> Option<Self> {
        if req.range.is_some()
            || req.put.is_some()
            || req.delete_range.is_some()
            || req.txn.is_some()
            || req.compaction.is_some()
        {
            return None;
        }
        if let Some(g) = &req.lease_grant {
            Some(Self::Grant {
                id: g.id,
                ttl: g.ttl,
            })
        } else if let Some(r) = &req.lease_revoke {
            Some(Self::Revoke(r.id))
        } else {
            req.lease_checkpoint.as_ref().map(|c| {
                Self::Checkpoint(
                    c.checkpoints
                        .iter()
                        .map(|c| (c.id, c.remaining_ttl))
                        .collect(),
                )
            })
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
                mut request,
                reply,
            } = item;
            if let Some(v2) = request.v2.take() {
                // The v2 tree is state of its own, judged by v2 auth before it was proposed
                // (as etcd does): no flush, no v3 auth step. Gathered, and sent to the v2 store
                // together before the run's writes leave (`settle_v2`).
                if self.v2.is_some() {
                    run.v2.push(V2Entry {
                        index,
                        term,
                        request: v2,
                        reply,
                    });
                } else if let Some(reply) = reply {
                    let _ = reply.send(Err(EtcdError::internal("no v2 store")));
                }
                run.covered = Some((index, term));
                continue;
            }
            if auth_step::is_auth_request(&request) {
                self.flush(&mut run, state).await?;
                let (op, started) = (auth_op(&request), std::time::Instant::now());
                let who = auth_step::who(&request);
                let applied = self
                    .auth
                    .send(ApplyAuth { request, who })
                    .await?
                    .map_err(|e| Failure::Fatal(format!("auth entry {index}: {e}")))?;
                state.view = applied.view;
                run.ops.extend(applied.ops);
                run.covered = Some((index, term));
                state.apply_durations.observe(
                    "v3",
                    op,
                    applied.result.is_ok(),
                    started.elapsed().as_secs_f64(),
                );
                if let Some(reply) = reply {
                    let answer = match applied.result {
                        Ok(r) => {
                            let revision = self.revision(state).await?;
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
            let leases = auth_step::leases_in_question(&*state.view, &request);
            if !leases.is_empty() {
                self.flush(&mut run, state).await?;
            }
            // An unknown lease has no keys: it is refused later, as etcd does.
            let lease_keys: Vec<(i64, Vec<Vec<u8>>)> = leases
                .into_iter()
                .map(|id| (id, state.leases.keys_of(id).unwrap_or_default()))
                .collect();
            let judged = auth_step::judge(&*state.view, &request, &lease_keys)
                .and_then(|()| corrupt::check(state.alarms.corrupt(), &request))
                .and_then(|()| capped::check(state.alarms.nospace(), &request));
            if let Err(e) = judged {
                run.covered = Some((index, term));
                if let Some(reply) = reply {
                    let _ = reply.send(Err(e));
                }
                continue;
            }
            if request.member_change.is_some() || request.member_attr_set.is_some() {
                self.flush(&mut run, state).await?;
                let (answer, conf) =
                    self.apply_membership(&mut state.members, &request, &mut run.ops);
                if answer.is_ok() {
                    self.record_in_v2(&request, &state.members, (index, term), &mut run);
                }
                run.covered = Some((index, term));
                if let Some(conf) = conf {
                    // This member's own removal: raft stops the member as soon as it hears of
                    // it, so the removal's table writes reach the store first (the drain at
                    // stop then puts them on disk, and the data dir refuses to start again).
                    if conf.kind == ConfChangeKind::Remove
                        && conf.node_id == self.identity.member_id
                    {
                        self.flush(&mut run, state).await?;
                    }
                    if let Some(raft) = &self.conf {
                        raft.do_send(conf);
                    }
                }
                if let Some(reply) = reply {
                    let _ = reply.send(answer);
                }
                continue;
            }
            if let Some(alarm) = alarm_request(&request) {
                self.flush(&mut run, state).await?;
                let started = std::time::Instant::now();
                let mut answer = state.alarms.apply(alarm, &mut run.ops);
                let took = started.elapsed().as_secs_f64();
                state.apply_durations.observe("v3", "Alarm", true, took);
                run.covered = Some((index, term));
                if let Some(reply) = reply {
                    let revision = self.revision(state).await?;
                    answer.header = header(self.identity, revision, term);
                    let _ = reply.send(Ok(ApplyResponse::Alarm(answer)));
                }
                continue;
            }
            if let Some(op) = LeaseOp::of(&request) {
                let started = std::time::Instant::now();
                let name = match op {
                    LeaseOp::Grant { .. } => "LeaseGrant",
                    LeaseOp::Revoke(_) => "LeaseRevoke",
                    LeaseOp::Checkpoint(_) => "LeaseCheckpoint",
                };
                let answer = self
                    .apply_lease(state, &mut run, op, (index, term), reply.is_some())
                    .await?;
                let took = started.elapsed().as_secs_f64();
                state
                    .apply_durations
                    .observe("v3", name, answer.is_ok(), took);
                run.covered = Some((index, term));
                if let Some(reply) = reply {
                    let _ = reply.send(answer);
                }
                continue;
            }
            run.covered = Some((index, term));
            run.push(request, reply, &state.leases);
        }
        // The last batch always goes: it moves the consistent index to the Ready's last entry.
        self.settle_v2(&mut run).await?;
        let batch = run.take_batch((prepared.last_index, prepared.last_term));
        self.send_batch(batch, state).await
    }

    /// A lease request at `(index, term)`: applied to `state.leases`, its table writes onto
    /// the run, the lessor told. `answered`: a waiter wants the answer (with a header).
    async fn apply_lease(
        &self,
        state: &mut ChainState,
        run: &mut Run,
        op: LeaseOp,
        (index, term): (u64, u64),
        answered: bool,
    ) -> Result<ApplyResult, Failure> {
        match op {
            LeaseOp::Grant { id, ttl } => {
                if let Err(e) = state.leases.check_grant(id, ttl) {
                    return Ok(Err(e));
                }
                if answered || run.named.contains(&id) {
                    self.flush(run, state).await?;
                }
                let ttl = match state.leases.grant(id, ttl, &mut run.ops) {
                    Ok(ttl) => ttl,
                    Err(e) => return Ok(Err(e)),
                };
                if let Some(l) = &self.lessor {
                    l.granted.do_send(LeaseGranted {
                        id,
                        ttl,
                        remaining_ttl: 0,
                    });
                }
                let header = match answered {
                    true => header(self.identity, self.revision(state).await?, term),
                    false => None,
                };
                Ok(Ok(ApplyResponse::LeaseGrant(LeaseGrantResponse {
                    header,
                    id,
                    ttl,
                    error: String::new(),
                })))
            }
            LeaseOp::Revoke(id) => {
                self.flush(run, state).await?;
                let keys = match state.leases.keys_of(id) {
                    Ok(keys) => keys,
                    Err(e) => return Ok(Err(e)),
                };
                if let Err(e) = state.leases.revoke(id, &mut run.ops) {
                    return Ok(Err(e));
                }
                if !keys.is_empty() {
                    // Into the commit of this entry's index, with the lease's table write.
                    self.settle_v2(run).await?;
                    let deleted = DeleteKeys {
                        consistent_index: index,
                        term,
                        keys,
                        ops: std::mem::take(&mut run.ops),
                    };
                    let reply = self.delete_keys.send(deleted).await?;
                    store_reply(reply, index, state)?;
                }
                if let Some(l) = &self.lessor {
                    l.revoked.do_send(LeaseRevoked { id });
                }
                let header = match answered {
                    true => header(self.identity, self.revision(state).await?, term),
                    false => None,
                };
                Ok(Ok(ApplyResponse::LeaseRevoke(LeaseRevokeResponse {
                    header,
                })))
            }
            LeaseOp::Checkpoint(checkpoints) => {
                for (id, remaining_ttl) in checkpoints {
                    if state.leases.checkpoint(id, remaining_ttl, &mut run.ops)
                        && let Some(l) = &self.lessor
                    {
                        l.checkpointed
                            .do_send(LeaseCheckpointed { id, remaining_ttl });
                    }
                }
                Ok(Ok(ApplyResponse::Empty))
            }
        }
    }

    /// An applied membership change as etcd's v2 store records it: each member record it
    /// writes (under its hidden `/0`) takes a v2 index, which v2 clients see; and once every
    /// member has published its attributes, the cluster version is recorded (one more).
    fn record_in_v2(
        &self,
        request: &InternalRaftRequest,
        members: &Membership,
        (index, term): (u64, u64),
        run: &mut Run,
    ) {
        use actcd_proto::actcdpb::member_change::Kind;
        if self.v2.is_none() {
            return;
        }
        let mut writes: Vec<(String, bool)> = Vec::new();
        if let Some(change) = &request.member_change {
            let id = change.member_id;
            match Kind::try_from(change.kind) {
                Ok(Kind::Remove) => {
                    writes.push((format!("/0/members/{id:x}"), false));
                    writes.push((format!("/0/removed_members/{id:x}"), false));
                }
                _ => writes.push((format!("/0/members/{id:x}/raftAttributes"), false)),
            }
        } else if let Some(attrs) = &request.member_attr_set {
            let all_published = members.list().iter().all(|m| !m.name.is_empty());
            writes.push((
                format!("/0/members/{:x}/attributes", attrs.member_id),
                all_published,
            ));
        }
        for (path, all_published) in writes {
            run.v2.push(V2Entry {
                index,
                term,
                request: actcd_proto::actcdpb::V2Request {
                    method: "MEMBER".into(),
                    path,
                    dir: all_published,
                    ..Default::default()
                },
                reply: None,
            });
        }
    }

    /// The key space's revision after everything sent so far.
    async fn revision(&self, state: &mut ChainState) -> Result<i64, Failure> {
        if let Some(r) = state.revision {
            return Ok(r);
        }
        let r = self.revision.send(CurrentRevision).await?;
        state.revision = Some(r);
        Ok(r)
    }

    /// A membership change (etcd's validation, then the change) or a member's attributes; the
    /// table writes go onto `ops`. Answers the result and, for an applied change, what raft is
    /// to hear (the caller sends it, before the waiter is answered).
    fn apply_membership(
        &self,
        members: &mut Membership,
        request: &InternalRaftRequest,
        ops: &mut Vec<Op>,
    ) -> (ApplyResult, Option<ApplyConfChange>) {
        let Some(change) = &request.member_change else {
            if let Some(attrs) = &request.member_attr_set {
                members.set_attributes(attrs, ops);
            }
            return (Ok(ApplyResponse::Empty), None);
        };
        let applied = match members.apply(change, ops) {
            Ok(applied) => applied,
            Err(e) => return (Err(e), None),
        };
        let conf = applied.order.map(|order| ApplyConfChange {
            kind: order.kind,
            node_id: order.node_id,
            peer_urls: order.peer_urls,
        });
        let answer = Ok(ApplyResponse::Members {
            member: Some(applied.member),
            members: members.list(),
        });
        (answer, conf)
    }

    /// Sends what the run holds, if anything.
    async fn flush(&self, run: &mut Run, state: &mut ChainState) -> Result<(), Failure> {
        let Some(covered) = run.covered.filter(|_| !run.is_empty()) else {
            return Ok(());
        };
        self.settle_v2(run).await?;
        let batch = run.take_batch(covered);
        self.send_batch(batch, state).await
    }

    /// Sends the run's gathered v2 entries to the v2 store (one message for all of them) and
    /// adds the writes that record them to the run, before any of the run's writes leave: a
    /// commit whose consistent index covers a v2 entry always holds its writes.
    async fn settle_v2(&self, run: &mut Run) -> Result<(), Failure> {
        if run.v2.is_empty() {
            return Ok(());
        }
        let entries = std::mem::take(&mut run.v2);
        if let Some(store) = &self.v2 {
            let ops = store.send(ApplyV2 { entries }).await?;
            run.ops.extend(ops);
        }
        Ok(())
    }

    async fn send_batch(&self, batch: ApplyBatch, state: &mut ChainState) -> Result<(), Failure> {
        let index = batch.consistent_index;
        let reply = self.store.send(batch).await?;
        store_reply(reply, index, state)
    }
}

/// What the store answered a batch covering up to `index`: the attachments and the revision
/// follow it; a failure stops the member.
fn store_reply(
    reply: Result<BatchApplied, actcd_types::EtcdError>,
    index: u64,
    state: &mut ChainState,
) -> Result<(), Failure> {
    match reply {
        Ok(applied) => {
            state.leases.follow(&applied.attachments);
            state.revision = Some(applied.revision);
            Ok(())
        }
        Err(e) => Err(Failure::Fatal(format!(
            "applying entries up to index {index} failed: {e}"
        ))),
    }
}

/// The alarm request an entry carries, if the applier applies it: with the store's precedence
/// when several fields are set (membership, a range, key writes and compaction come first).
/// etcd's name for an auth request, as its apply timing labels it.
fn auth_op(req: &InternalRaftRequest) -> &'static str {
    let named = [
        (req.authenticate.is_some(), "Authenticate"),
        (req.auth_enable.is_some(), "AuthEnable"),
        (req.auth_disable.is_some(), "AuthDisable"),
        (req.auth_status.is_some(), "AuthStatus"),
        (req.auth_user_add.is_some(), "AuthUserAdd"),
        (req.auth_user_delete.is_some(), "AuthUserDelete"),
        (req.auth_user_get.is_some(), "AuthUserGet"),
        (req.auth_role_get.is_some(), "AuthRoleGet"),
        (
            req.auth_user_change_password.is_some(),
            "AuthUserChangePassword",
        ),
        (req.auth_user_grant_role.is_some(), "AuthUserGrantRole"),
        (req.auth_user_revoke_role.is_some(), "AuthUserRevokeRole"),
        (req.auth_user_list.is_some(), "AuthUserList"),
        (req.auth_role_list.is_some(), "AuthRoleList"),
        (req.auth_role_add.is_some(), "AuthRoleAdd"),
        (
            req.auth_role_grant_permission.is_some(),
            "AuthRoleGrantPermission",
        ),
        (
            req.auth_role_revoke_permission.is_some(),
            "AuthRoleRevokePermission",
        ),
        (req.auth_role_delete.is_some(), "AuthRoleDelete"),
    ];
    named
        .iter()
        .find_map(|(is, name)| is.then_some(*name))
        .unwrap_or("unknown")
}

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
