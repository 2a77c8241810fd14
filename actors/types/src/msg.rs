//! Messages that cross crate lines, grouped by the actor that takes them.
//!
//! Each is a named struct with its reply type declared by `rtype`. Hot-path senders use
//! `send().await` so mailbox back-pressure is real; `do_send` is used only for bounded
//! notifications (progress reports, one per Ready).

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb as pb;
use actcd_proto::etcdserverpb::{
    AlarmMember, AlarmResponse, CompactionResponse, DeleteRangeResponse, LeaseGrantResponse,
    LeaseRevokeResponse, PutResponse, RangeRequest, RangeResponse, TxnResponse,
};
use actix::Message;
use tokio::sync::oneshot;

use crate::snapshot_blob::{PreparedStore, SnapshotBlob, StoreCopy};
use crate::{AuthInfo, EtcdError};

// ---------------------------------------------------------------- raft node

/// Propose an encoded `InternalRaftRequest`. `Ok` means raft accepted it into its log, not that
/// it committed: the caller waits for the applier to complete the request by id.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), EtcdError>")]
pub struct Propose {
    pub data: Vec<u8>,
    /// When the client stops waiting (its gRPC deadline), if it said: a proposal that must wait
    /// for a leader is dropped then, never proposed after its client gave up.
    pub deadline: Option<tokio::time::Instant>,
    /// Proposed only if this member leads raft right now: never forwarded to another leader,
    /// never kept for the next one (`Err(NotLeader)` instead). The lessor's revokes and
    /// checkpoints go this way: a member that lost leadership without noticing must not revoke
    /// leases the new leader keeps alive (etcd 3.5.13, #17425 / #15247).
    pub leader_only: bool,
}

/// Ask for a read index: the reply is a commit index confirmed by a quorum after the request
/// arrived, sent once this member has applied at least that far, so a read of the store made
/// after the reply is linearizable.
#[derive(Debug, Message)]
#[rtype(result = "Result<u64, EtcdError>")]
pub struct ReadIndex;

/// A unary Range's answer as the front sends it.
pub enum RangeAnswer {
    /// As a message (sorted and filtered ranges).
    Decoded(RangeResponse),
    /// Already in its wire form, written straight into the response's buffer.
    Encoded(Box<dyn EncodedRange>),
}

impl std::fmt::Debug for RangeAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Decoded(r) => f.debug_tuple("Decoded").field(r).finish(),
            Self::Encoded(e) => write!(f, "Encoded({} bytes)", e.encoded_len()),
        }
    }
}

/// The protobuf encoding of a `RangeResponse`, produced only when written: the MVCC crate's
/// holds a read transaction and the revisions of the records to copy from it, so the answer
/// exists once, in the buffer it is written to.
pub trait EncodedRange: Send {
    /// The exact length of what [`Self::write`] writes.
    fn encoded_len(&self) -> usize;
    /// Writes the encoded `RangeResponse` (fields in number order, as prost writes them).
    fn write(&self, out: &mut dyn bytes::BufMut) -> Result<(), EtcdError>;
}

/// Reads of the key space that any thread may make at once, without a message: what the store
/// had applied when it last published a read view. The front holds one and serves Range and
/// read-only txns in the calling task (after the ReadIndex barrier when linearizable), so a read
/// waits in no mailbox at all. Implemented by the MVCC crate's published views.
pub trait KeyReads: Send + Sync + 'static {
    /// A Range on the newest view.
    fn range(&self, request: &RangeRequest) -> Result<RangeResponse, EtcdError>;
    /// A top-level Range on the newest view, encoded where it can be (see [`RangeAnswer`]).
    fn range_answer(&self, request: &RangeRequest) -> Result<RangeAnswer, EtcdError> {
        self.range(request).map(RangeAnswer::Decoded)
    }
    /// A txn that writes nothing, on the newest view.
    fn read_txn(
        &self,
        request: &actcd_proto::etcdserverpb::TxnRequest,
    ) -> Result<actcd_proto::etcdserverpb::TxnResponse, EtcdError>;
    /// The next chunk of a RangeStream (etcd 3.7) from `cursor`, read on the newest view and
    /// at most about `target_bytes` big (one key-value bigger than that is a chunk of its
    /// own); advances `cursor`. The chunk with `cursor.done` set afterwards is the last and
    /// carries header, more and count; earlier ones carry only kvs. Between two calls nothing
    /// is held but the cursor.
    fn range_chunk(
        &self,
        request: &RangeRequest,
        cursor: &mut StreamCursor,
        target_bytes: usize,
    ) -> Result<RangeResponse, EtcdError>;
}

/// Where a RangeStream stands between two chunks: all it keeps (no view, read transaction or
/// lock). Start from `StreamCursor::default()`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamCursor {
    /// The revision every chunk reads at, pinned by the first chunk (0 before it): the
    /// request's revision, or the store's revision when the stream began.
    pub at: i64,
    /// The store's revision when the stream began: the last chunk's header revision.
    pub header_revision: i64,
    /// The first key the next chunk may send (`None` before the first chunk: the request's
    /// key).
    pub next: Option<Vec<u8>>,
    /// Key-values sent so far.
    pub sent: i64,
    /// Chunks produced so far.
    pub chunks: u64,
    /// The last chunk has been produced.
    pub done: bool,
}

/// One logical clock tick (`--heartbeat-interval` of real time, sent by the daemon's ticker).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Tick;

/// A raft message from a peer, encoded with raft-rs's codec.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Step {
    pub msg: Vec<u8>,
}

/// A raft message to a peer (the raft node's outbox). Carried as bytes so the transport never
/// depends on raft-rs.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct PeerMessage {
    pub to: u64,
    pub msg: Vec<u8>,
}

/// The transport could not reach member `id` (its stream broke or would not connect): raft
/// stops pipelining appends to it and probes instead.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct Unreachable {
    pub id: u64,
}

/// The applier has applied every entry up to `index`.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct Applied {
    pub index: u64,
}

#[derive(Debug, Message)]
#[rtype(result = "RaftStatusReply")]
pub struct RaftStatus;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RaftStatusReply {
    pub member_id: u64,
    pub leader: u64,
    pub term: u64,
    pub commit: u64,
    pub applied: u64,
    pub last_index: u64,
    /// This member is a learner in its own configuration.
    pub is_learner: bool,
    /// How long ago this member learned of the current leader (`None` without one).
    pub leader_for: Option<std::time::Duration>,
    /// Leader changes this member has seen since it started (etcd's
    /// `etcd_server_leader_changes_seen_total`).
    pub leader_changes: u64,
}

// ---------------------------------------------------------------- WAL writer

/// The WAL's fsync latencies so far (etcd's `etcd_disk_wal_fsync_duration_seconds`).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "DiskLatency")]
pub struct GetFsyncStats;

/// The backend's commit latencies so far (etcd's `etcd_disk_backend_commit_duration_seconds`).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "DiskLatency")]
pub struct GetCommitStats;

/// A disk latency histogram: cumulative counts at each of [`DISK_BUCKETS`], the count, the sum.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiskLatency {
    pub buckets: Vec<u64>,
    pub count: u64,
    pub sum_secs: f64,
}

/// etcd's buckets for WAL fsync and backend commit durations: 1 ms doubling to 8.192 s.
pub const DISK_BUCKETS: [f64; 14] = [
    0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096,
    8.192,
];

impl DiskLatency {
    /// Counts one fsync that took `secs`.
    pub fn observe(&mut self, secs: f64) {
        if self.buckets.len() != DISK_BUCKETS.len() {
            self.buckets = vec![0; DISK_BUCKETS.len()];
        }
        for (b, le) in self.buckets.iter_mut().zip(DISK_BUCKETS) {
            if secs <= le {
                *b += 1;
            }
        }
        self.count += 1;
        self.sum_secs += secs;
    }
}

/// Raft's durable vote and commit state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HardState {
    pub term: u64,
    pub vote: u64,
    pub commit: u64,
}

/// A raft log entry as the WAL stores it: `data` is the whole raft-rs `Entry`, encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalEntry {
    pub index: u64,
    pub term: u64,
    pub data: Vec<u8>,
}

/// Append entries and/or a new hard state and fsync once. An entry whose index is at or below an
/// earlier one overwrites that entry and everything after it (raft log truncation).
#[derive(Debug, Message)]
#[rtype(result = "Result<(), String>")]
pub struct Append {
    pub hard_state: Option<HardState>,
    pub entries: Vec<WalEntry>,
}

/// The state machine has durably covered the log up to `index` (backend synced): record a
/// snapshot marker and delete segments that hold only entries at or below it.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), String>")]
pub struct ReleaseWal {
    pub index: u64,
    pub term: u64,
    /// raft-rs `ConfState`, encoded, so a restart knows the voters at the snapshot.
    pub conf_state: Vec<u8>,
}

// ---------------------------------------------------------------- membership

/// One member of the cluster as the applied state has it (etcd's `membership.Member`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberRecord {
    pub id: u64,
    /// Empty until the member has started and published it.
    pub name: String,
    pub peer_urls: Vec<String>,
    /// Empty until the member has started and published them.
    pub client_urls: Vec<String>,
    pub is_learner: bool,
}

/// A change of raft's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfChangeKind {
    AddVoter,
    AddLearner,
    Remove,
    /// A learner becomes a voter.
    Promote,
}

/// Propose a configuration change; `context` is the encoded `InternalRaftRequest` that the
/// applier decodes when it commits. `Ok` means raft accepted the proposal, as for [`Propose`].
#[derive(Debug, Message)]
#[rtype(result = "Result<(), EtcdError>")]
pub struct ProposeConfChange {
    pub kind: ConfChangeKind,
    pub node_id: u64,
    pub context: Vec<u8>,
}

/// The applier applied a membership change: raft's configuration follows it, and the
/// transport opens or drops the member's stream. Sent before the applier answers the change.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct ApplyConfChange {
    pub kind: ConfChangeKind,
    pub node_id: u64,
    pub peer_urls: Vec<String>,
}

/// The transport's address book: open (or re-point) the stream to a member, or drop it.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub enum PeerChange {
    Upsert { id: u64, urls: Vec<String> },
    Remove { id: u64 },
}

/// The raft configuration the applied members call for, after the store was replaced by a
/// snapshot (the applier reads them again): raft's configuration and the transport are
/// brought in line with it.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct SyncConf {
    pub members: Vec<MemberRecord>,
}

// ---------------------------------------------------------------- snapshots

/// A consistent copy of the whole state machine, for a member too far behind for the log:
/// every record of every table, plus the consistent index it covers. The copy is streamed: a
/// blocking thread reads it out of one read transaction into `chunks` (about
/// [`SNAPSHOT_CHUNK`] bytes each, a few ahead of the reader), so a store of any size is never
/// held in memory. An `Err` chunk ends it unfinished; dropping the receiver stops the reading.
#[derive(Debug)]
pub struct StoreSnapshot {
    pub consistent_index: u64,
    pub chunks: CopyChunks,
}

/// A store copy's chunks as they are read; an `Err` ends it unfinished.
pub type CopyChunks = tokio::sync::mpsc::Receiver<Result<Vec<u8>, String>>;

/// Bytes of store copy per [`StoreSnapshot`] chunk (and per chunk on the peer stream).
pub const SNAPSHOT_CHUNK: usize = 1024 * 1024;

/// Copy the store once it has applied at least `min_index` (else `Err(NotReady)`, try again).
#[derive(Debug, Message)]
#[rtype(result = "Result<StoreSnapshot, SnapshotError>")]
pub struct MakeSnapshot {
    pub min_index: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error("the store has not applied the snapshot's index yet")]
    NotReady,
    #[error("{0}")]
    Failed(String),
}

/// Raft sends a snapshot to `to`: the transport attaches a store copy covering `index` and
/// streams both, then answers with [`SnapshotReport`].
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct SendSnapshot {
    pub to: u64,
    pub index: u64,
    pub message: Vec<u8>,
}

/// How sending a snapshot to `to` ended.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct SnapshotReport {
    pub to: u64,
    pub ok: bool,
}

/// A snapshot message from the leader with the store copy it carries, received whole on disk
/// (and, where the transport can ask the backend, already built into a store of its own).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct StepSnapshot {
    pub msg: Vec<u8>,
    pub data: StoreCopy,
}

/// Replace the state machine with a snapshot (raft accepted it at `index`); the answer is the
/// consistent index the installed copy covers (≥ `index`). Durable before it is answered.
#[derive(Debug, Message)]
#[rtype(result = "Result<u64, EtcdError>")]
pub struct InstallSnapshot {
    pub index: u64,
    pub data: StoreCopy,
}

/// Build a store from a received copy beside the one in use, on a worker thread, before raft
/// sees the snapshot: installing it is then a rename, so the member goes on answering its
/// leader meanwhile (etcd's follower likewise receives its `.snap.db` and renames it in).
#[derive(Debug, Message)]
#[rtype(result = "Result<PreparedStore, String>")]
pub struct PrepareSnapshot {
    pub blob: SnapshotBlob,
}

/// Replace everything the backend holds with a leader's store copy: a prepared store is
/// swapped in (renamed over the data file); a copy still in its file is built into a store
/// first, the same way. The state owner committed its pending writes first (the mailbox keeps
/// the order). A defragmentation under way ends with an error: its copy no longer describes
/// the store.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), String>")]
pub struct ReplaceStore {
    pub copy: StoreCopy,
}

/// Is learner `id` in sync with the leader's log (etcd's rule: it has at least 90% of it)?
/// `NotLeader` unless asked of the leader, which alone tracks the learner's progress.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<(), EtcdError>")]
pub struct CheckLearner {
    pub id: u64,
}

/// A question only the leader can answer, asked over its peer port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerCall {
    RenewLease(i64),
    LeaseTtl(i64),
    LearnerReady(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerAnswer {
    /// A keepalive's granted TTL.
    Renewed(i64),
    Ttl(LeaseTtl),
    Ready,
}

/// Ask member `leader` (the transport knows its peer URL and how to reach it securely).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<PeerAnswer, EtcdError>")]
pub struct LeaderCall {
    pub leader: u64,
    pub call: PeerCall,
}

/// Hand leadership to member `to` (etcd's MoveLeader); only a leader acts on it.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct TransferLeader {
    pub to: u64,
}

/// For each peer whose stream is up, how long it has been (etcd's `ActiveSince`).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "std::collections::HashMap<u64, std::time::Duration>")]
pub struct PeerActivity;

/// The members as this member has applied them, by id (answered by the applier).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Vec<MemberRecord>")]
pub struct GetMembers;

// ---------------------------------------------------------------- applier

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Normal,
    ConfChange,
    ConfChangeV2,
}

#[derive(Debug, Clone)]
pub struct CommittedEntry {
    pub index: u64,
    pub term: u64,
    pub kind: EntryKind,
    pub data: Vec<u8>,
}

/// Committed entries, in log order, from one Ready.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Apply {
    pub entries: Vec<CommittedEntry>,
}

/// The result of applying one request, sent to whoever waits on its id.
#[derive(Debug, Clone, PartialEq)]
pub enum ApplyResponse {
    Put(PutResponse),
    DeleteRange(DeleteRangeResponse),
    Txn(TxnResponse),
    Compaction(CompactionResponse),
    Alarm(AlarmResponse),
    LeaseGrant(LeaseGrantResponse),
    LeaseRevoke(LeaseRevokeResponse),
    Auth(AuthReply),
    /// A membership change: the member it concerns and the members after it.
    Members {
        member: Option<MemberRecord>,
        members: Vec<MemberRecord>,
    },
    /// A v2 API entry's answer, rendered by the v2 store.
    V2(crate::v2::V2Reply),
    /// Entries with nothing to answer (empty entries, configuration changes).
    Empty,
}

impl ApplyResponse {
    /// The response's header, if it has one.
    pub fn header(&self) -> Option<&actcd_proto::etcdserverpb::ResponseHeader> {
        match self {
            Self::Put(r) => r.header.as_ref(),
            Self::DeleteRange(r) => r.header.as_ref(),
            Self::Txn(r) => r.header.as_ref(),
            Self::Compaction(r) => r.header.as_ref(),
            Self::Alarm(r) => r.header.as_ref(),
            Self::LeaseGrant(r) => r.header.as_ref(),
            Self::LeaseRevoke(r) => r.header.as_ref(),
            Self::Auth(_) | Self::Members { .. } | Self::V2(_) | Self::Empty => None,
        }
    }
}

pub type ApplyResult = Result<ApplyResponse, EtcdError>;

/// The answer to an applied auth request (headers left for the store to stamp).
#[derive(Debug, Clone, PartialEq)]
pub enum AuthReply {
    Enable(pb::AuthEnableResponse),
    Disable(pb::AuthDisableResponse),
    Status(pb::AuthStatusResponse),
    /// The password was checked before the proposal; the front turns this into a token for
    /// `username` at the auth `revision` the store had when it applied the request.
    Authenticate {
        username: Vec<u8>,
        revision: u64,
    },
    UserAdd(pb::AuthUserAddResponse),
    UserDelete(pb::AuthUserDeleteResponse),
    UserGet(pb::AuthUserGetResponse),
    UserList(pb::AuthUserListResponse),
    UserChangePassword(pb::AuthUserChangePasswordResponse),
    UserGrantRole(pb::AuthUserGrantRoleResponse),
    UserRevokeRole(pb::AuthUserRevokeRoleResponse),
    RoleAdd(pb::AuthRoleAddResponse),
    RoleGet(pb::AuthRoleGetResponse),
    RoleList(pb::AuthRoleListResponse),
    RoleDelete(pb::AuthRoleDeleteResponse),
    RoleGrantPermission(pb::AuthRoleGrantPermissionResponse),
    RoleRevokePermission(pb::AuthRoleRevokePermissionResponse),
}

/// Applies one committed auth request as `who` (the applier → the auth actor, in log order).
/// Outer `Err`: the auth state could not be written (fatal, like a failed batch).
#[derive(Debug, Message)]
#[rtype(result = "Result<AuthApplied, EtcdError>")]
pub struct ApplyAuth {
    pub request: InternalRaftRequest,
    pub who: AuthInfo,
}

/// What applying an auth request gave: etcd's answer (a refusal changes nothing), the view
/// to judge the following entries by, and the auth table writes, which the applier hands to
/// the MVCC store with its next [`ApplyBatch`] so they commit with a consistent index at or
/// after the entry's.
#[derive(Debug)]
pub struct AuthApplied {
    pub result: Result<AuthReply, EtcdError>,
    pub view: crate::auth::SharedView,
    pub ops: Vec<crate::storage::Op>,
}

/// The backend's auth tables were replaced (a snapshot from the leader was installed): the
/// auth actor reads them again and answers the new view.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<crate::auth::SharedView, EtcdError>")]
pub struct ReloadAuth;

/// Checks `password` against `name`'s bcrypt hash (on a blocking pool): answers the auth
/// revision the hash was read at, or etcd's `authentication failed`.
#[derive(Debug, Message)]
#[rtype(result = "Result<u64, EtcdError>")]
pub struct CheckPassword {
    pub name: Vec<u8>,
    pub password: Vec<u8>,
}

/// A bcrypt hash of `password` at the member's `--bcrypt-cost`, base64-encoded as etcd
/// proposes it (on a blocking pool).
#[derive(Debug, Message)]
#[rtype(result = "Result<String, EtcdError>")]
pub struct HashPassword {
    pub password: Vec<u8>,
}

/// The key space's current revision (auth answers carry it in their header).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "i64")]
pub struct CurrentRevision;

/// What the auth actor tells the front after applying auth changes, in apply order, before
/// the applier answers the change's waiter.
#[derive(Debug, Clone)]
pub enum AuthEvent {
    /// The auth state now: on at startup and after every change.
    State { enabled: bool, revision: u64 },
    /// The newest permission view: reads, watch creates and admin calls are judged by it.
    View(crate::auth::SharedView),
    /// The newest token book: callers are identified by it. Sent at startup and whenever a
    /// login assigned a simple token (every member applies the login, so every member knows
    /// the token, as etcd assigns them through the log too), a user's tokens ended (password
    /// change, user deleted, auth disabled) or unused tokens expired.
    Tokens(crate::auth::SharedTokens),
}

/// A simple token for a login about to be proposed (16 random letters, a dot, a counter: etcd's
/// shape); the login's entry carries it, and every member registers it when the login applies.
/// Empty with JWT tokens, which are signed after the login applies ([`SignToken`]).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "String")]
pub struct DraftToken;

/// A JWT for `username`, whose login applied at auth `revision` (signed on a blocking pool);
/// `None` with simple tokens.
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<Option<String>, EtcdError>")]
pub struct SignToken {
    pub username: Vec<u8>,
    pub revision: u64,
}

/// A simple token identified a caller: its TTL starts again (etcd's TTL keeper).
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct TokenUsed {
    pub token: String,
}

/// Where the auth actor sends [`AuthEvent`]s (the current view and state first).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct ConnectAuth {
    pub events: tokio::sync::mpsc::UnboundedSender<AuthEvent>,
}

/// Wait for the entry carrying request `id` to be applied.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Register {
    pub id: u64,
    pub reply: oneshot::Sender<ApplyResult>,
}

/// A registered request's proposal never made it into the log: answer its waiter with `error`.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Cancel {
    pub id: u64,
    pub error: EtcdError,
}

// ---------------------------------------------------------------- preflight

/// A write from the front: validate, then propose. `request.header.id` is the id the reply will
/// be completed with. Every outcome arrives on `reply`, a refusal too, so the front may send
/// this without waiting for the handler (one thread wake-up fewer per write); the handler's own
/// result repeats a refusal for senders that do wait.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), EtcdError>")]
pub struct Submit {
    /// Boxed: the request is some 1.3 KB of optional fields, and a `Submit` is moved through
    /// the front's futures and actix's envelope (each move a memcpy of its whole size).
    pub request: Box<InternalRaftRequest>,
    pub reply: oneshot::Sender<ApplyResult>,
    /// The client's deadline, if it sent one (see [`Propose::deadline`]).
    pub deadline: Option<tokio::time::Instant>,
}

/// Bytes the backend holds in live pages, reported periodically for the quota check.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct QuotaUsage {
    pub bytes: u64,
}

/// Raft's commit and the applier's progress, reported after each Ready.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct RaftProgress {
    pub committed: u64,
    pub applied: u64,
}

// ---------------------------------------------------------------- MVCC store

/// Apply decoded requests in order, all in one backend transaction that also records
/// `consistent_index`/`term`. One result per request, in order: sent straight to the request's
/// waiter when `replies` holds one for it (saving a hop back through the applier on every
/// write), returned in the reply otherwise. `replies` is empty or has one slot per request.
#[derive(Debug, Message)]
#[rtype(result = "Result<BatchApplied, EtcdError>")]
pub struct ApplyBatch {
    pub consistent_index: u64,
    pub term: u64,
    pub requests: Vec<InternalRaftRequest>,
    pub replies: Vec<Option<oneshot::Sender<ApplyResult>>>,
    /// Writes of other state owners (the auth actor's tables, the applier's alarms, members
    /// and leases) applied at entries this batch covers: written first, into the same backend
    /// commit as the batch's consistent index.
    pub ops: Vec<crate::storage::Op>,
    /// The lease ids named by the batch's puts (top-level or in any txn branch) that exist at
    /// the batch's point of the log. A put naming any other non-zero lease is refused with
    /// `etcdserver: requested lease not found` (in a txn, only in the branch taken).
    pub leases: Vec<i64>,
}

/// The answer to [`ApplyBatch`] and [`DeleteKeys`].
#[derive(Debug, Default)]
pub struct BatchApplied {
    /// One result per request when the batch carried no waiters; empty otherwise.
    pub results: Vec<ApplyResult>,
    /// The key space's revision after the batch.
    pub revision: i64,
    /// Every change of the lease named by a key's latest record, in the order the batch made
    /// them; nothing for writes where both the old and the new lease are 0.
    pub attachments: Vec<LeaseAttachment>,
}

/// `key`'s latest record named `old_lease` before a write and names `new_lease` after it (0:
/// no lease; a delete leaves 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseAttachment {
    pub key: Vec<u8>,
    pub old_lease: i64,
    pub new_lease: i64,
}

/// Delete every key of `keys` (live ones; the others are skipped) at one revision, as one
/// write: one Delete event each, one watch response; the revision moves only if something
/// was deleted. Applied like a batch (`ops` first, one backend commit with
/// `consistent_index`/`term`); `results` holds one `DeleteRange` answer whose header carries
/// the revision. The applier sends it for a LeaseRevoke, with the keys attached to the lease.
#[derive(Debug, Message)]
#[rtype(result = "Result<BatchApplied, EtcdError>")]
pub struct DeleteKeys {
    pub consistent_index: u64,
    pub term: u64,
    pub keys: Vec<Vec<u8>>,
    pub ops: Vec<crate::storage::Op>,
}

/// Every live key whose latest record names a lease, with that lease id (the applier rebuilds
/// the keys attached to each lease from it after a snapshot is installed).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<Vec<(Vec<u8>, i64)>, EtcdError>")]
pub struct LeasedKeys;

/// A read of the key space (the caller has done any linearizability wait, and judged the
/// client against the newest permission view).
#[derive(Debug, Message)]
#[rtype(result = "Result<RangeResponse, EtcdError>")]
pub struct Range {
    pub request: RangeRequest,
}

#[derive(Debug, Message)]
#[rtype(result = "Result<StoreStatus, EtcdError>")]
pub struct GetStoreStatus;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreStatus {
    pub revision: i64,
    pub compact_revision: i64,
    pub consistent_index: u64,
    pub term: u64,
    pub db_size: u64,
    pub db_size_in_use: u64,
    /// Keys live at the current revision (etcd's `keysGauge`: a put creating a key adds one,
    /// a delete takes one; compaction changes nothing).
    pub keys: u64,
}

/// The alarms raised as of the entries applied so far, as Status and `/health` report them
/// (asked of the applier, which owns them).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Vec<AlarmMember>")]
pub struct GetAlarms;

/// Make everything applied so far durable in the backend (before WAL segments are released).
#[derive(Debug, Message)]
#[rtype(result = "Result<(), EtcdError>")]
pub struct SyncStorage;

/// etcd's `HashKV`: a CRC32C over the `key` table's records up to `revision` (0 = current),
/// skipping those compaction will remove, so members can compare their state.
#[derive(Debug, Message)]
#[rtype(result = "Result<HashKvResult, EtcdError>")]
pub struct HashKv {
    pub revision: i64,
}

/// etcd's `Hash`: a CRC32C over the whole backend — every table, by name, then its records
/// (the consistent index and term left out) — and the revision it was taken at.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<(u32, i64), EtcdError>")]
pub struct HashBackend;

/// etcd's Snapshot stream: the committed store (pending applies are committed first) as an
/// etcd bbolt file, read from one read transaction on a blocking thread while writes go on.
/// Answered at once with the channel the chunks arrive on.
#[derive(Debug, Message)]
#[rtype(result = "Result<SnapshotChunks, EtcdError>")]
pub struct SnapshotStream;

/// The answer to [`SnapshotStream`]: the file in 32 KiB chunks, then its SHA-256 (with
/// `remaining_bytes` 0), as etcd sends them. A failure part way is the last item. Dropping the
/// receiver stops the stream.
#[derive(Debug)]
pub struct SnapshotChunks(pub tokio::sync::mpsc::Receiver<Result<SnapshotChunk, EtcdError>>);

/// One message of a snapshot stream: etcd's `SnapshotResponse` without its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotChunk {
    /// Bytes of the file still to come after this chunk.
    pub remaining_bytes: u64,
    pub blob: Vec<u8>,
}

/// A read transaction on the committed store (pending applies are committed first), to read
/// at length on another thread: the Snapshot RPC streams the backend from it while writes go
/// on.
#[derive(Message)]
#[rtype(result = "Result<StoreReader, EtcdError>")]
pub struct OpenStoreReader;

/// The answer to [`OpenStoreReader`]. It pins the pages of its snapshot until dropped.
pub struct StoreReader(pub Box<dyn crate::storage::ReadTxn + Send>);

impl std::fmt::Debug for StoreReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreReader")
    }
}

/// Defragment the backend (etcd's `Defragment`, local to this member): pending applies are
/// committed, then the engine gives its free pages back. Answers the on-disk size before and
/// after. Applies go on meanwhile (the backend's copy catches up with them before its swap).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<(u64, u64), EtcdError>")]
pub struct Defragment;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HashKvResult {
    pub hash: u32,
    pub compact_revision: i64,
    /// The current revision, for the response header.
    pub revision: i64,
}

/// A txn with no writes, anywhere in it: evaluated against the store's current state without
/// entering the log (the caller has done any linearizability wait).
#[derive(Debug, Message)]
#[rtype(result = "Result<actcd_proto::etcdserverpb::TxnResponse, EtcdError>")]
pub struct ReadTxn {
    pub request: actcd_proto::etcdserverpb::TxnRequest,
}

/// Commit what the store has applied but not yet committed (the daemon sends it every 100 ms,
/// etcd's backend batch interval).
#[derive(Debug, Message)]
#[rtype(result = "Result<(), EtcdError>")]
pub struct FlushStore;

// ---------------------------------------------------------------- supervisor

/// An actor cannot go on (its log or its backend refused a write, raft's state broke): the
/// member must stop and exit non-zero, as etcd exits 1. The failing actor sends this once to
/// the daemon's supervisor (a `Recipient<Fatal>` handed to it at start-up) and stops itself; it
/// never stops the System. `actor` names the actor that failed, `error` what failed.
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct Fatal {
    pub actor: &'static str,
    pub error: String,
}

/// This member must stop although nothing failed: it applied its own removal from the cluster.
/// The supervisor shuts it down in order and the process exits 0, as etcd's does.
#[derive(Debug, Clone, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct Shutdown {
    pub reason: String,
}

// ---------------------------------------------------------------- backend

/// Writes of a state owner for the backend's batch: replayed into its open write transaction in
/// order, with the consistent index and term they cover (`(index, term)`, for apply batches)
/// recorded in the same transaction. `seq` is the last batch of the owner's
/// [`WriteBuffer`](crate::storage::WriteBuffer) they hold; [`Committed`] reports it back once
/// committed. The backend commits per etcd's batching policy (on [`Flush`], [`SyncBackend`], or
/// once 10,000 ops or 64 MiB are pending). A failed write or commit is fatal: the backend
/// refuses everything after it and says so to its fatal recipient ([`BackendFailed`]).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Commit {
    pub seq: u64,
    pub ops: Vec<crate::storage::Op>,
    pub consistent_index: Option<(u64, u64)>,
}

/// Commit what the backend's batch holds (no fsync of the meta page).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<(), String>")]
pub struct Flush;

/// Commit the batch and flush every committed transaction to stable storage. The daemon sends it
/// every 100 ms, and the store before WAL segments are released (the released entries must not
/// be needed to rebuild it).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<(), String>")]
pub struct SyncBackend;

/// `(bytes the data file occupies, bytes in pages holding live data)`: etcd's `dbSize` and
/// `dbSizeInUse`.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<(u64, u64), String>")]
pub struct DbSize;

/// Write a compacted copy of the last committed state to `path` (into `path/data.mdb` if it is a
/// directory), atomically: for snapshots sent to followers and for defragmentation.
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<(), String>")]
pub struct CopyTo {
    pub path: std::path::PathBuf,
}

/// The backend committed every [`Commit`] up to `seq` of a state owner; read transactions begun
/// from now on see them, so the owner may trim its write buffer.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct Committed {
    pub seq: u64,
}

/// The backend could not write or commit: applied state is no longer reaching the disk. Fatal
/// for the member (a restart replays the WAL above the last committed consistent index).
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct BackendFailed {
    pub error: String,
}

// ---------------------------------------------------------------- lessor

/// A lease now exists in the applied state (a LeaseGrant entry applied, or found at recovery):
/// the lessor starts timing it. `ttl` is the granted TTL after the minimum was applied;
/// `remaining_ttl` is the last checkpointed remaining TTL in seconds (0 = none: a full `ttl`).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct LeaseGranted {
    pub id: i64,
    pub ttl: i64,
    pub remaining_ttl: i64,
}

/// A LeaseRevoke entry was applied: the lease and its keys are gone.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct LeaseRevoked {
    pub id: i64,
}

/// A LeaseCheckpoint entry was applied: remember the lease's remaining TTL (seconds).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct LeaseCheckpointed {
    pub id: i64,
    pub remaining_ttl: i64,
}

/// A keepalive: restart the lease's TTL. Replies with the TTL granted, or `LeaseNotFound`.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<i64, EtcdError>")]
pub struct RenewLease {
    pub id: i64,
}

/// The lease's TTLs as LeaseTimeToLive reports them (the keys come from the applier).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<LeaseTtl, EtcdError>")]
pub struct LeaseTimeToLive {
    pub id: i64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseTtl {
    /// The TTL the lease was granted with, seconds.
    pub granted_ttl: i64,
    /// Seconds left before it expires (rounded as etcd does).
    pub remaining_ttl: i64,
}

/// Every live lease id, as LeaseLeases lists them.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Vec<i64>")]
pub struct ListLeases;

/// This member became raft leader (`true`) or stopped being it. Only the leader expires leases,
/// and a new leader restarts every lease's clock.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct Leadership {
    pub leader: bool,
}

/// Time to look for expired leases and due checkpoints (the daemon sends it every 500 ms; the
/// lessor reads "now" from its clock, never in its core).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct LessorTick;

/// What the lessor wants proposed through raft: revokes of expired leases and remaining-TTL
/// checkpoints. Whoever takes it proposes them as LeaseRevoke / LeaseCheckpoint entries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Message)]
#[rtype(result = "()")]
pub struct ProposeLeaseOps {
    pub revokes: Vec<i64>,
    /// `(lease id, remaining TTL in seconds)`.
    pub checkpoints: Vec<(i64, i64)>,
}

// ---------------------------------------------------------------- watch hub

/// What one applied batch changed, sent by the MVCC store to the watch hub after applying it:
/// `events` in revision order (every event of a revision adjacent), `revision` the store's
/// current revision afterwards (it can be above the last event's: compactions and lease
/// checkpoints don't change keys).
#[derive(Debug, Clone, Default, Message)]
#[rtype(result = "()")]
pub struct Notify {
    pub revision: i64,
    pub events: Vec<actcd_proto::mvccpb::Event>,
    /// The store was replaced by a snapshot from the leader: `events` is empty, and watchers
    /// catch up from the new store's history (or learn it was compacted).
    pub restored: bool,
}

/// The watch hub tells the store whether it wants `Notify` at all (`on`): with no watcher there
/// is nobody to tell, and each notification costs the store a thread wake-up per write. The
/// reply is the store's current revision once the setting takes effect, so a hub waking up
/// knows the revision every later `Notify` follows.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "i64")]
pub struct WatchInterest {
    pub on: bool,
}

/// Read key history from the store for watchers catching up: every event with a mod revision in
/// `[from, to]`, stopping after the revision at which `max_events` is reached (never splitting a
/// revision). A watcher whose start revision is below `compact_revision` cannot catch up: the hub
/// cancels it with `compact_revision` set (etcd allows a start exactly at the compact revision).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<HistoryChunk, EtcdError>")]
pub struct History {
    pub from: i64,
    pub to: i64,
    pub max_events: usize,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryChunk {
    pub events: Vec<actcd_proto::mvccpb::Event>,
    /// The last revision this chunk covers completely (`to` when everything fit).
    pub through: i64,
    /// The store's compact revision.
    pub compact_revision: i64,
    /// The store's current revision.
    pub current_revision: i64,
}

/// The keys attached to a lease in the applied state, sorted (LeaseTimeToLive with `keys`).
/// `LeaseNotFound` when no such lease exists. Asked of the applier, which owns the leases.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<Vec<Vec<u8>>, EtcdError>")]
pub struct LeaseKeys {
    pub id: i64,
}

// ---------------------------------------------------------------- corruption checks

/// One member's HashKV as the corruption checks compare it: etcd's `HashKVResponse` (hash,
/// compact revision, the member's current revision in the header) with etcd 3.5's
/// `hash_revision`, the revision hashed, and who answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemberHash {
    pub member_id: u64,
    pub hash: u32,
    /// The compaction revision the hash was taken with.
    pub compact_revision: i64,
    /// The member's current revision when it answered.
    pub revision: i64,
    /// The revision hashed.
    pub hash_revision: i64,
}

/// Ask member `to`, over its peer port, for its hash at `revision` (0: its current revision).
/// Answered by the transport; `Compacted` / `FutureRevision` are the peer's answers, anything
/// else means it could not be asked.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<MemberHash, EtcdError>")]
pub struct PeerHashKv {
    pub to: u64,
    pub revision: i64,
}

/// This member's hash at `revision` (0: current) as peers are told it: a hash remembered at a
/// compaction of that revision first (etcd 3.5's hash storage), else the store's HashKV now.
/// Answered by the corruption checker; the peer port routes peers' `PeerHashKv` here.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<MemberHash, EtcdError>")]
pub struct LocalHashKv {
    pub revision: i64,
}

/// Raise the CORRUPT alarm for `member_id` through the log (an `AlarmRequest` ACTIVATE
/// CORRUPT, as `etcdctl alarm` would propose it, made by the member itself so auth never
/// judges it). Any part of the member that finds corruption sends this to the corruption
/// checker, which proposes it once per member until the alarm is disarmed.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct RaiseCorrupt {
    pub member_id: u64,
    /// What was found, for the log.
    pub reason: String,
}

/// The hash the store took of its key space at a compaction (etcd 3.5's `KeyValueHash`,
/// stored by its hash storage): the records up to `hash_revision` a compaction there keeps,
/// plus the ones above the previous compaction, with the previous compaction revision. Sent
/// by the store to the corruption checker, which remembers the newest ten.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct CompactionHashed {
    pub hash: u32,
    /// The compaction before this one (-1 before any).
    pub compact_revision: i64,
    /// The revision compacted at.
    pub hash_revision: i64,
}

/// Whether a CORRUPT alarm is raised, as the applier last applied it: the applier publishes
/// it, the front refuses reads while it is set (writes are refused at apply).
pub type CorruptFlag = tokio::sync::watch::Receiver<bool>;
