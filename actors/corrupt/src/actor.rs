//! [`CorruptionChecker`]: the actor glue around [`crate::decide`]. It gathers hashes (its own
//! from the MVCC reader, the peers' through the transport), asks the decisions, and raises
//! CORRUPT through the log. A check runs in a task of its own and reports back; a tick that
//! comes while one is running is skipped.

use std::collections::HashSet;

use actcd_proto::actcdpb::{InternalRaftRequest, RequestHeader};
use actcd_proto::etcdserverpb::alarm_request::AlarmAction;
use actcd_proto::etcdserverpb::{AlarmRequest, AlarmType};
use actcd_types::EtcdError;
use actcd_types::ids::IdGenerator;
use actcd_types::msg::{
    CompactionHashed, GetMembers, HashKv, LocalHashKv, MemberHash, PeerHashKv, RaftStatus,
    RaiseCorrupt, ReadIndex, Submit,
};
use actix::prelude::*;
use tokio::sync::oneshot;

use crate::decide::{self, CompactVerdict, InitialVerdict, PeerAnswer};
use crate::error::CorruptError;

/// etcd 3.5's hash storage keeps the newest ten compaction hashes.
pub const REMEMBERED_HASHES: usize = 10;

/// Which periodic check a tick is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// `--experimental-corrupt-check-time`.
    Periodic,
    /// `--experimental-compact-hash-check-time`.
    CompactHash,
}

/// Time for one check (the daemon's ticker sends it at the check's period).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct CheckTick(pub Check);

/// etcd's initial check, asked once by the daemon before it serves clients.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<(), CorruptError>")]
pub struct InitialCheck;

/// A check ended (back on the actor from its task).
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct Finished {
    check: Check,
    /// The compact hash check: the newest compaction revision every peer agreed on.
    agreed: Option<i64>,
}

/// An alarm proposal ended; a failed one (no leader yet, say) is proposed again.
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct Raised {
    member: u64,
    reason: String,
    ok: bool,
}

/// How long to wait before proposing a CORRUPT alarm again after a proposal failed.
const RAISE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Where the checker's questions go.
#[derive(Clone)]
pub struct CheckerPeers {
    /// The MVCC reader: this member's HashKV.
    pub hash_kv: Recipient<HashKv>,
    /// The transport: the peers' hashes.
    pub peer_hash: Recipient<PeerHashKv>,
    /// The applier: who the peers are.
    pub members: Recipient<GetMembers>,
    /// The raft node: who leads, and the linearizable barrier of the periodic check.
    pub raft: Recipient<RaftStatus>,
    pub read_index: Recipient<ReadIndex>,
    /// Preflight: where the CORRUPT alarm is proposed, as the Alarm RPC proposes it.
    pub submit: Recipient<Submit>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct CheckerConfig {
    pub member_id: u64,
    /// XORed into every hash this member reports (its own checks' and its answers to peers):
    /// a member whose data seem to differ, for tests (`ACTCD_DEBUG_CORRUPT_HASH`). 0 always,
    /// except in tests.
    pub debug_skew: u32,
}

pub struct CorruptionChecker {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: std::sync::Arc<actcd_types::meter::Meter>,
    config: CheckerConfig,
    peers: CheckerPeers,
    /// Request ids of its own (the daemon gives it a prefix no one else uses).
    ids: IdGenerator,
    /// Hashes taken at compactions, oldest first (at most [`REMEMBERED_HASHES`]).
    remembered: Vec<MemberHash>,
    /// The newest compaction revision the compact hash check found every peer agreeing on.
    latest_checked: i64,
    running: HashSet<CheckKind>,
    /// Members whose CORRUPT proposal is in flight.
    raising: HashSet<u64>,
}

/// [`Check`] as a set key.
type CheckKind = u8;

fn kind(c: Check) -> CheckKind {
    match c {
        Check::Periodic => 0,
        Check::CompactHash => 1,
    }
}

impl CorruptionChecker {
    pub fn new(config: CheckerConfig, peers: CheckerPeers, ids: IdGenerator) -> Self {
        Self {
            meter: actcd_types::meter::Meter::new(),
            config,
            peers,
            ids,
            remembered: Vec::new(),
            latest_checked: 0,
            running: HashSet::new(),
            raising: HashSet::new(),
        }
    }

    /// The hasher a check's task uses: this member's hash (remembered, else live) and the
    /// peers'.
    fn hasher(&self) -> Hasher {
        Hasher {
            config: self.config,
            peers: self.peers.clone(),
            remembered: self.remembered.clone(),
        }
    }

    /// Proposes ACTIVATE CORRUPT for `member` (once while a proposal is in flight).
    fn raise(&mut self, member: u64, reason: &str, ctx: &mut Context<Self>) {
        tracing::error!(
            member_id = format!("{member:x}"),
            reason,
            "data inconsistency found; raising the CORRUPT alarm"
        );
        if !self.raising.insert(member) {
            return;
        }
        let (tx, rx) = oneshot::channel();
        let submit = Submit {
            request: Box::new(corrupt_alarm(member, self.ids.next())),
            reply: tx,
            deadline: None,
        };
        let send = self.peers.submit.send(submit);
        let me = ctx.address();
        let reason = reason.to_string();
        actix::spawn(async move {
            let outcome = match send.await {
                Ok(Ok(())) => rx.await.unwrap_or(Err(EtcdError::Stopped)).map(drop),
                Ok(Err(e)) => Err(e),
                Err(e) => Err(e.into()),
            };
            if let Err(e) = &outcome {
                tracing::warn!(member_id = format!("{member:x}"), error = %e, "CORRUPT alarm not raised yet; proposing it again");
            }
            me.do_send(Raised {
                member,
                reason,
                ok: outcome.is_ok(),
            });
        });
    }
}

/// The alarm request `etcdctl alarm` would make to raise CORRUPT for `member`, made by the
/// member itself (never judged by auth).
pub fn corrupt_alarm(member: u64, id: u64) -> InternalRaftRequest {
    InternalRaftRequest {
        header: Some(RequestHeader {
            id,
            internal: true,
            ..Default::default()
        }),
        alarm: Some(AlarmRequest {
            action: AlarmAction::Activate as i32,
            member_id: member,
            alarm: AlarmType::Corrupt as i32,
        }),
        ..Default::default()
    }
}

impl Actor for CorruptionChecker {
    type Context = Context<Self>;
}

/// What a check's task needs, taken from the actor when it starts.
#[derive(Clone)]
struct Hasher {
    config: CheckerConfig,
    peers: CheckerPeers,
    remembered: Vec<MemberHash>,
}

impl Hasher {
    /// This member's hash at `revision` (0: current): one remembered at a compaction of that
    /// revision, else the store's HashKV now (etcd 3.5's `hashStorage.HashByRev`).
    async fn local(&self, revision: i64) -> Result<MemberHash, EtcdError> {
        let mut h = match self
            .remembered
            .iter()
            .find(|h| revision > 0 && h.hash_revision == revision)
        {
            Some(h) => *h,
            None => {
                let r = self.peers.hash_kv.send(HashKv { revision }).await??;
                MemberHash {
                    member_id: self.config.member_id,
                    hash: r.hash,
                    compact_revision: r.compact_revision,
                    revision: r.revision,
                    hash_revision: if revision > 0 { revision } else { r.revision },
                }
            }
        };
        h.hash ^= self.config.debug_skew;
        Ok(h)
    }

    /// The other members' ids.
    async fn peer_ids(&self) -> Result<Vec<u64>, EtcdError> {
        let members = self.peers.members.send(GetMembers).await?;
        Ok(members
            .into_iter()
            .map(|m| m.id)
            .filter(|&id| id != self.config.member_id)
            .collect())
    }

    /// Every peer's answer at `revision`, asked all at once.
    async fn ask_peers(&self, peers: &[u64], revision: i64) -> Vec<PeerAnswer> {
        let asks = peers.iter().map(|&to| {
            let send = self.peers.peer_hash.send(PeerHashKv { to, revision });
            async move { (to, send.await.unwrap_or_else(|e| Err(e.into()))) }
        });
        futures::future::join_all(asks).await
    }

    async fn is_leader(&self) -> bool {
        self.peers
            .raft
            .send(RaftStatus)
            .await
            .is_ok_and(|s| s.leader == self.config.member_id)
    }

    /// etcd's `InitialCheck`.
    async fn initial(self) -> Result<(), CorruptError> {
        let me = self.config.member_id;
        let peers = self.peer_ids().await.map_err(|e| CorruptError::LocalHash {
            member: me,
            reason: e.to_string(),
        })?;
        if peers.is_empty() {
            return Ok(());
        }
        tracing::info!(
            local_member_id = format!("{me:x}"),
            "starting initial corruption check"
        );
        let local = self.local(0).await.map_err(|e| CorruptError::LocalHash {
            member: me,
            reason: e.to_string(),
        })?;
        let mut mismatches = Vec::new();
        for (id, answer) in self.ask_peers(&peers, local.hash_revision).await {
            let peer = format!("{id:x}");
            match decide::initial(&local, &answer) {
                InitialVerdict::Agrees => {}
                InitialVerdict::Mismatch => {
                    let p = answer.unwrap_or_default();
                    tracing::warn!(
                        local_member_id = format!("{me:x}"),
                        local_member_revision = local.hash_revision,
                        local_member_compact_revision = local.compact_revision,
                        local_member_hash = local.hash,
                        remote_peer_id = peer,
                        remote_peer_revision = p.revision,
                        remote_peer_compact_revision = p.compact_revision,
                        remote_peer_hash = p.hash,
                        "found different hash values from remote peer"
                    );
                    mismatches.push(format!(
                        "peer {peer} hash {} != local hash {} at revision {} (compact revision {})",
                        p.hash, local.hash, local.hash_revision, local.compact_revision
                    ));
                }
                InitialVerdict::OtherCompaction => tracing::warn!(
                    remote_peer_id = peer,
                    "found different compact revision values from remote peer"
                ),
                InitialVerdict::PeerBehind => tracing::warn!(
                    remote_peer_id = peer,
                    revision = local.hash_revision,
                    "cannot fetch hash from slow remote peer"
                ),
                InitialVerdict::LocalBehind => tracing::warn!(
                    remote_peer_id = peer,
                    revision = local.hash_revision,
                    "cannot fetch hash from remote peer; local member is behind"
                ),
                InitialVerdict::Unreachable(e) => tracing::warn!(
                    remote_peer_id = peer,
                    error = e,
                    "failed hash kv request; skipping the peer"
                ),
            }
        }
        if !mismatches.is_empty() {
            return Err(CorruptError::Inconsistent {
                member: me,
                details: mismatches.join("; "),
            });
        }
        tracing::info!(
            local_member_id = format!("{me:x}"),
            "initial corruption checking passed; no corruption"
        );
        Ok(())
    }

    /// etcd's `PeriodicCheck` (leader only): who is corrupt, if anyone.
    async fn periodic(self) -> Result<Option<decide::Corrupt>, EtcdError> {
        if !self.is_leader().await {
            return Ok(None);
        }
        let peers = self.peer_ids().await?;
        let first = self.local(0).await?;
        let answers = self.ask_peers(&peers, first.hash_revision).await;
        self.peers.read_index.send(ReadIndex).await??;
        let second = self.local(0).await?;
        let verdict = decide::periodic(self.config.member_id, &first, &second, &answers);
        let checked = answers.iter().filter(|(_, a)| a.is_ok()).count();
        tracing::debug!(checked, "finished peer corruption check");
        Ok(verdict)
    }

    /// etcd 3.5's `CompactHashCheck` (leader only): the newest remembered compaction hash every
    /// peer agrees with, or the member found corrupt.
    async fn compact(
        self,
        latest_checked: i64,
    ) -> Result<(Option<i64>, Option<decide::Corrupt>), EtcdError> {
        if !self.is_leader().await {
            return Ok((None, None));
        }
        let peers = self.peer_ids().await?;
        if peers.is_empty() {
            return Ok((None, None));
        }
        for mine in decide::unchecked(&self.remembered, latest_checked) {
            let mut mine = mine;
            mine.hash ^= self.config.debug_skew;
            let answers = self.ask_peers(&peers, mine.hash_revision).await;
            match decide::compact(&mine, &answers) {
                CompactVerdict::Corrupt(c) => return Ok((None, Some(c))),
                CompactVerdict::AllAgree => {
                    tracing::info!(
                        revision = mine.hash_revision,
                        "successfully checked hash on whole cluster"
                    );
                    return Ok((Some(mine.hash_revision), None));
                }
                CompactVerdict::Partial { checked } => tracing::warn!(
                    revision = mine.hash_revision,
                    checked,
                    peers = peers.len(),
                    "skipped revision in compaction hash check; was not able to check all peers"
                ),
            }
        }
        Ok((None, None))
    }
}

impl Handler<InitialCheck> for CorruptionChecker {
    type Result = ResponseFuture<Result<(), CorruptError>>;

    fn handle(&mut self, _: InitialCheck, _: &mut Context<Self>) -> Self::Result {
        Box::pin(self.hasher().initial())
    }
}

impl Handler<CheckTick> for CorruptionChecker {
    type Result = ();

    fn handle(&mut self, msg: CheckTick, ctx: &mut Context<Self>) {
        let _timer = self.meter.start("CheckTick");
        if !self.running.insert(kind(msg.0)) {
            return;
        }
        let hasher = self.hasher();
        let latest_checked = self.latest_checked;
        let me = ctx.address();
        actix::spawn(async move {
            let (agreed, corrupt) = match msg.0 {
                Check::Periodic => match hasher.periodic().await {
                    Ok(c) => (None, c),
                    Err(e) => {
                        tracing::warn!(error = %e, "failed to check hash KV");
                        (None, None)
                    }
                },
                Check::CompactHash => match hasher.compact(latest_checked).await {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!(error = %e, "failed compaction hash check");
                        (None, None)
                    }
                },
            };
            if let Some(c) = corrupt {
                me.do_send(RaiseCorrupt {
                    member_id: c.member,
                    reason: c.reason,
                });
            }
            me.do_send(Finished {
                check: msg.0,
                agreed,
            });
        });
    }
}

impl Handler<Finished> for CorruptionChecker {
    type Result = ();

    fn handle(&mut self, msg: Finished, _: &mut Context<Self>) {
        self.running.remove(&kind(msg.check));
        if let Some(rev) = msg.agreed {
            self.latest_checked = self.latest_checked.max(rev);
        }
    }
}

impl Handler<RaiseCorrupt> for CorruptionChecker {
    type Result = ();

    fn handle(&mut self, msg: RaiseCorrupt, ctx: &mut Context<Self>) {
        self.raise(msg.member_id, &msg.reason, ctx);
    }
}

impl Handler<Raised> for CorruptionChecker {
    type Result = ();

    fn handle(&mut self, msg: Raised, ctx: &mut Context<Self>) {
        self.raising.remove(&msg.member);
        if !msg.ok {
            ctx.run_later(RAISE_RETRY, move |act, ctx| {
                act.raise(msg.member, &msg.reason, ctx);
            });
        }
    }
}

/// A peer asks for this member's hash (through the peer port).
impl Handler<LocalHashKv> for CorruptionChecker {
    type Result = ResponseFuture<Result<MemberHash, EtcdError>>;

    fn handle(&mut self, msg: LocalHashKv, _: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("LocalHashKv");
        let hasher = self.hasher();
        Box::pin(async move { hasher.local(msg.revision).await })
    }
}

/// The store compacted: remember the hash it took there.
impl Handler<CompactionHashed> for CorruptionChecker {
    type Result = ();

    fn handle(&mut self, msg: CompactionHashed, _: &mut Context<Self>) {
        tracing::info!(
            hash = msg.hash,
            revision = msg.hash_revision,
            compact_revision = msg.compact_revision,
            "storing new hash"
        );
        self.remembered
            .retain(|h| h.hash_revision != msg.hash_revision);
        self.remembered.push(MemberHash {
            member_id: self.config.member_id,
            hash: msg.hash,
            compact_revision: msg.compact_revision,
            revision: msg.hash_revision,
            hash_revision: msg.hash_revision,
        });
        self.remembered.sort_by_key(|h| h.hash_revision);
        let over = self.remembered.len().saturating_sub(REMEMBERED_HASHES);
        self.remembered.drain(..over);
    }
}

#[cfg(test)]
#[path = "actor_tests.rs"]
mod tests;

actcd_types::impl_mailbox_probe!(CorruptionChecker, meter);
