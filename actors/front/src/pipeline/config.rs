//! What the front is given at start: its configuration (`FrontConfig`), the actors it talks to
//! (`PipelineRoutes`, the v2 store's `V2Routes`), who may call the HTTP side (`AccessControl`,
//! `--cors` and `--host-whitelist`) and the actors `/metrics` asks (`ActorProbe`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actcd_types::MemberIdentity;
use actcd_types::msg::{
    CheckLearner, CheckPassword, ConnectAuth, GetAlarms, GetFsyncStats, GetMembers, GetStoreStatus,
    HashBackend, HashKv, KeyReads, LeaderCall, LeaseKeys, LeaseTimeToLive, ListLeases,
    PeerActivity, RaftStatus, ReadIndex, RenewLease, Submit, TransferLeader,
};
use actcd_types::v2::{V2Get, V2StoreStats, V2Watch};
use actcd_v2auth::AuthState;
use actix::Recipient;

#[derive(Debug, Clone)]
pub struct FrontConfig {
    pub identity: MemberIdentity,
    /// How long a write waits to be applied (etcd: 5 s + 2 × election timeout).
    pub request_timeout: Duration,
    /// `--election-timeout`, for naming why a write timed out.
    pub election_timeout: Duration,
    /// The etcd API version reported by Status.
    pub version: String,
    /// `--max-txn-ops`, for txns the front serves without proposing.
    pub max_txn_ops: usize,
    /// gRPC receive limit: `--max-request-bytes` plus etcd's 512 KiB of framing slack.
    pub max_recv_bytes: usize,
    /// A deliberately broken member, for the robustness suite's control run
    /// (`ACTCD_DEBUG_STALE_READS=1`): linearizable reads skip the ReadIndex barrier and may be
    /// stale. Never set otherwise; the daemon logs a warning when it is.
    pub debug_stale_reads: bool,
    /// `--strict-reconfig-check`: member changes that could lose quorum (too few started
    /// voters, an unhealthy peer) are refused; off, they go through as in etcd.
    pub strict_reconfig_check: bool,
    /// `--grpc-keepalive-interval` and `--grpc-keepalive-timeout`: the server pings each
    /// client connection after this much silence and closes it when no answer comes in time;
    /// `None` when either is 0, as in etcd.
    pub grpc_keepalive: Option<(Duration, Duration)>,
    /// `--max-concurrent-streams`: HTTP/2 streams a client connection may have open.
    pub max_concurrent_streams: u32,
    /// `--cors` and `--host-whitelist` for the client ports' HTTP/1.1 requests.
    pub access: AccessControl,
    /// `--enable-grpc-gateway`: serve the JSON gateway (`/v3/...`) on the client ports.
    pub grpc_gateway: bool,
    /// The backend quota in effect (`--quota-backend-bytes`, or etcd's default for 0), which
    /// Status reports as `dbSizeQuota`.
    pub quota_bytes: u64,
    /// Every server feature gate as `(name, stage, enabled)`, for etcd 3.6's
    /// `etcd_server_feature_enabled`.
    pub feature_gates: Vec<(String, &'static str, bool)>,
}

/// The actors the front talks to.
#[derive(Clone)]
pub struct PipelineRoutes {
    pub submit: Recipient<Submit>,
    pub read_index: Recipient<ReadIndex>,
    /// The key space as the store last published it: Range and read-only txns are read here,
    /// in the calling task (linearizable ones after the ReadIndex barrier).
    pub reads: Arc<dyn KeyReads>,
    pub store_status: Recipient<GetStoreStatus>,
    /// The applier: the alarms raised as of the entries applied.
    pub alarms: Recipient<GetAlarms>,
    pub hash_kv: Recipient<HashKv>,
    pub raft_status: Recipient<RaftStatus>,
    /// The lessor: keepalives, TTLs and the lease list.
    pub renew_lease: Recipient<RenewLease>,
    pub lease_ttl: Recipient<LeaseTimeToLive>,
    pub list_leases: Recipient<ListLeases>,
    /// The applier: keys attached to a lease.
    pub lease_keys: Recipient<LeaseKeys>,
    /// The watch hub.
    pub open_watch: Recipient<actcd_types::watch::OpenStream>,
    pub watch_request: Recipient<actcd_types::watch::WatchRequestMsg>,
    pub close_watch: Recipient<actcd_types::watch::CloseStream>,
    /// The auth store: password checks and hashes, and where it is told to send its changes
    /// (the newest permission view among them).
    pub check_password: Recipient<CheckPassword>,
    pub hash_password: Recipient<actcd_types::msg::HashPassword>,
    pub connect_auth: Recipient<ConnectAuth>,
    /// The auth store's token provider: a simple token for a login about to be proposed, a
    /// JWT for one that applied, and uses of simple tokens (which restart their TTL).
    pub draft_token: Recipient<actcd_types::msg::DraftToken>,
    pub sign_token: Recipient<actcd_types::msg::SignToken>,
    pub token_used: Recipient<actcd_types::msg::TokenUsed>,
    /// The applier's applied membership.
    pub members: Recipient<GetMembers>,
    /// The raft node, for MoveLeader.
    pub transfer_leader: Recipient<TransferLeader>,
    /// The transport: how long each peer's stream has been up.
    pub peer_activity: Recipient<PeerActivity>,
    /// The raft node: is a learner in sync (asked of the leader)?
    pub learner_ready: Recipient<CheckLearner>,
    /// The raft node: whether this member is a learner (it restricts what is served).
    pub learner: crate::learner::LearnerFlag,
    /// The raft node: the current leader's id, 0 while there is none. Requests that etcd holds
    /// through an election (keepalives, TTLs, linearizable reads) wait on its changes.
    pub leader: tokio::sync::watch::Receiver<u64>,
    /// The applier: whether a CORRUPT alarm is raised (reads are refused while it is; writes
    /// are refused at apply).
    pub corrupt: actcd_types::msg::CorruptFlag,
    /// The transport: questions only the leader answers.
    pub leader_call: Recipient<LeaderCall>,
    /// The store: etcd's whole-backend hash.
    pub hash_backend: Recipient<HashBackend>,
    /// The store: defragment the backend.
    pub defragment: Recipient<actcd_types::msg::Defragment>,
    /// The store: everything committed as etcd's snapshot file, in chunks (the Snapshot RPC).
    pub snapshot: Recipient<actcd_types::msg::SnapshotStream>,
    /// Every actor, for its mailbox and handler timings (`/metrics`).
    pub actors: Vec<ActorProbe>,
    /// The WAL writer: its fsync latencies.
    pub fsync_stats: Recipient<GetFsyncStats>,
    /// The v2 store, when `--enable-v2` serves the v2 API.
    pub v2: Option<V2Routes>,
    /// The store: its backend commit latencies.
    pub commit_stats: Recipient<actcd_types::msg::GetCommitStats>,
}

/// One actor as `/metrics` asks it: its name, and where its probe and meter questions go.
#[derive(Clone)]
pub struct ActorProbe {
    pub name: &'static str,
    pub probe: Recipient<actcd_types::meter::MailboxProbe>,
    pub meter: Recipient<actcd_types::meter::GetMeter>,
}

impl ActorProbe {
    pub fn of<A>(name: &'static str, addr: &actix::Addr<A>) -> Self
    where
        A: actix::Actor
            + actix::Handler<actcd_types::meter::MailboxProbe>
            + actix::Handler<actcd_types::meter::GetMeter>,
        A::Context: actix::dev::ToEnvelope<A, actcd_types::meter::MailboxProbe>
            + actix::dev::ToEnvelope<A, actcd_types::meter::GetMeter>,
    {
        Self {
            name,
            probe: addr.clone().recipient(),
            meter: addr.clone().recipient(),
        }
    }
}

/// The v2 store's doors, present when `--enable-v2` is on.
#[derive(Clone)]
pub struct V2Routes {
    pub get: Recipient<V2Get>,
    pub watch: Recipient<V2Watch>,
    pub stats: Recipient<V2StoreStats>,
    /// The newest v2 auth state the store published.
    pub auth: tokio::sync::watch::Receiver<Arc<AuthState>>,
    /// bcrypt cost for new v2 passwords (etcd v2: 10).
    pub bcrypt_cost: u32,
    /// Credentials checked and found good: (user, password, the hash checked against).
    pub verified: Arc<Mutex<HashMap<(String, String), String>>>,
}

impl V2Routes {
    pub fn new(
        get: Recipient<V2Get>,
        watch: Recipient<V2Watch>,
        stats: Recipient<V2StoreStats>,
        auth: tokio::sync::watch::Receiver<Arc<AuthState>>,
        bcrypt_cost: u32,
    ) -> Self {
        Self {
            get,
            watch,
            stats,
            auth,
            bcrypt_cost,
            verified: Arc::default(),
        }
    }
}

/// `--cors` and `--host-whitelist`, as etcd's access controller applies them.
#[derive(Debug, Clone, Default)]
pub struct AccessControl {
    /// Allowed origins; empty or `*` allows all.
    pub cors: Vec<String>,
    /// Host names accepted on plain HTTP; empty or `*` accepts all.
    pub host_whitelist: Vec<String>,
}

impl AccessControl {
    pub(crate) fn origin_allowed(&self, origin: &str) -> bool {
        self.cors.is_empty() || self.cors.iter().any(|o| o == "*" || o == origin)
    }

    pub(crate) fn host_allowed(&self, host: &str) -> bool {
        self.host_whitelist.is_empty() || self.host_whitelist.iter().any(|h| h == "*" || h == host)
    }
}
