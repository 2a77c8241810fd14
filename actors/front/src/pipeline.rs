use std::sync::Arc;
use std::time::{Duration, Instant};

use actcd_proto::actcdpb::{InternalRaftRequest, RequestHeader};
use actcd_proto::etcdserverpb::{
    AlarmMember, RangeRequest, RangeResponse, RangeStreamResponse, RequestOp, ResponseHeader,
    TxnRequest, TxnResponse, request_op,
};
use actcd_types::auth::Perm;
use actcd_types::ids::IdGenerator;
use actcd_types::msg::{
    ApplyResponse, CheckLearner, CheckPassword, ConnectAuth, GetAlarms, GetFsyncStats, GetMembers,
    GetStoreStatus, HashBackend, HashKv, HashKvResult, KeyReads, LeaderCall, LeaseKeys,
    LeaseTimeToLive, LeaseTtl, ListLeases, MemberRecord, PeerActivity, PeerAnswer, PeerCall,
    RaftStatus, RaftStatusReply, ReadIndex, RenewLease, StoreStatus, StreamCursor, Submit,
    TransferLeader,
};
use actcd_types::{AuthInfo, EtcdError, MemberIdentity};
use actix::Recipient;
use tokio::sync::oneshot;

use crate::authn::AuthGate;

/// The chunks of one RangeStream answer, as its producer sends them.
pub type RangeChunks = tokio::sync::mpsc::Receiver<Result<RangeStreamResponse, tonic::Status>>;

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
    pub access: crate::http::AccessControl,
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
    pub v2: Option<crate::v2::V2Routes>,
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

/// Shared by every service: routes, config and the id generator.
pub struct Pipeline {
    pub routes: PipelineRoutes,
    pub config: FrontConfig,
    /// Who is calling (the authenticator chain) and the tokens Authenticate hands out.
    pub auth: AuthGate,
    ids: IdGenerator,
    /// Flips to `true` at shutdown: watch and keepalive streams end themselves, since tonic's
    /// graceful shutdown waits for every open stream.
    closing: tokio::sync::watch::Sender<bool>,
    /// The last full header and when it was taken, for answers that may carry a slightly old
    /// revision (see [`Self::recent_header`]). Front-local: no actor shares it.
    recent: std::sync::Mutex<Option<(std::time::Instant, ResponseHeader)>>,
    /// Set while one caller refreshes `recent`.
    refreshing: std::sync::atomic::AtomicBool,
    /// Every gRPC call counted and timed (`/metrics`).
    pub requests: Arc<crate::metrics::RequestStats>,
    /// The actors' meters, fetched once (`/metrics` reads their handled counts as it probes).
    pub actor_meters: tokio::sync::OnceCell<Vec<std::sync::Arc<actcd_types::meter::Meter>>>,
    /// Front-local counters: failed proposals, client bytes in and out.
    pub counters: Arc<crate::metrics::FrontCounters>,
    /// When the member started: RFC 3339 and the instant (`/v2/stats/self`).
    started: (String, std::time::Instant),
}

/// How old a header [`Pipeline::recent_header`] may hand out.
const RECENT_HEADER_AGE: Duration = Duration::from_millis(10);

impl Pipeline {
    pub fn new(
        routes: PipelineRoutes,
        config: FrontConfig,
        auth: AuthGate,
        now_ms: u64,
    ) -> Arc<Self> {
        let ids = IdGenerator::new(config.identity.member_id, now_ms);
        Arc::new(Self {
            routes,
            config,
            auth,
            ids,
            closing: tokio::sync::watch::Sender::new(false),
            recent: std::sync::Mutex::new(None),
            refreshing: std::sync::atomic::AtomicBool::new(false),
            requests: Arc::default(),
            counters: Arc::default(),
            actor_meters: tokio::sync::OnceCell::new(),
            started: (
                actcd_v2tree::format_rfc3339_nano(
                    i64::try_from(now_ms).unwrap_or(0).saturating_mul(1_000_000),
                ),
                std::time::Instant::now(),
            ),
        })
    }

    /// When the member started.
    pub fn started_at(&self) -> (String, std::time::Instant) {
        self.started.clone()
    }

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
    fn deadline(&self) -> tokio::time::Instant {
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
    async fn through_election<T, L, F>(
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
    async fn ask_leader(&self, call: PeerCall) -> Result<PeerAnswer, EtcdError> {
        let leader = self.raft_status().await?.leader;
        if leader == 0 {
            return Err(EtcdError::NoLeader);
        }
        self.routes
            .leader_call
            .send(LeaderCall { leader, call })
            .await?
    }

    /// Follows the auth store's changes (it sends the current view and state at once) until it
    /// goes away. Must be called inside a tokio runtime, once.
    pub fn follow_auth(&self) {
        let (tx, events) = tokio::sync::mpsc::unbounded_channel();
        self.routes.connect_auth.do_send(ConnectAuth { events: tx });
        self.auth.follow(events, self.routes.token_used.clone());
    }

    /// Who a gRPC request runs as (see [`AuthGate::identify`]). The credentials are read at
    /// once; the future holds no borrow of the request.
    ///
    /// A simple token this member doesn't know may come from a login it has not applied yet
    /// (the client logged in through another member a moment ago): this member then catches up
    /// with the log once (a read-index round) and looks again, so a token works on every
    /// member from the moment its login is acknowledged.
    pub fn who<'a, T>(
        &'a self,
        req: &tonic::Request<T>,
    ) -> impl Future<Output = Result<AuthInfo, EtcdError>> + Send + use<'a, T> {
        // With auth off nobody is identified: skip reading the credentials at all.
        let creds = self.auth.enabled().then(|| self.auth.credentials(req));
        async move {
            match creds {
                Some(creds) => self.identify(&creds).await,
                None => Ok(AuthInfo::default()),
            }
        }
    }

    /// Refuses `who` unless it may read `[key, range_end)`, by the newest permission view.
    pub async fn check_read(
        &self,
        who: AuthInfo,
        key: Vec<u8>,
        range_end: Vec<u8>,
    ) -> Result<(), EtcdError> {
        self.auth
            .view()
            .check_range(&who, &key, &range_end, Perm::Read)
    }

    /// Refuses `who` unless it holds the root role (maintenance calls etcd keeps for admins).
    pub async fn check_admin(&self, who: AuthInfo) -> Result<(), EtcdError> {
        self.auth.view().check_admin(&who)
    }

    /// Ends every open stream (called once at shutdown).
    pub fn close_streams(&self) {
        self.closing.send_replace(true);
    }

    /// Resolves once [`Self::close_streams`] has been called.
    pub async fn closed(&self) {
        let mut rx = self.closing.subscribe();
        let _ = rx.wait_for(|closing| *closing).await;
    }

    /// Whether [`Self::close_streams`] has been called.
    pub fn is_closing(&self) -> bool {
        *self.closing.borrow()
    }

    /// Waits for an answer sent by another actor: `etcdserver: request timed out` at
    /// `deadline`, `server stopped` if the sender went away.
    async fn answer<T>(
        &self,
        rx: oneshot::Receiver<Result<T, EtcdError>>,
        deadline: tokio::time::Instant,
    ) -> Result<T, EtcdError> {
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(res)) => res,
            Ok(Err(_)) => Err(EtcdError::Stopped),
            Err(_) => Err(EtcdError::Timeout),
        }
    }

    /// Checks `password` against the auth store's bcrypt hash for `name` (on its blocking
    /// pool: a check takes tens of milliseconds). Answers the auth revision the hash was read
    /// at, or etcd's `authentication failed` (unknown user and wrong password alike).
    pub async fn check_password(
        &self,
        name: &[u8],
        password: impl AsRef<[u8]>,
    ) -> Result<u64, EtcdError> {
        self.routes
            .check_password
            .send(CheckPassword {
                name: name.into(),
                password: password.as_ref().into(),
            })
            .await?
    }

    /// A simple token for a login about to be proposed, drafted by the auth store (empty with
    /// JWTs).
    pub async fn draft_token(&self) -> Result<String, EtcdError> {
        Ok(self
            .routes
            .draft_token
            .send(actcd_types::msg::DraftToken)
            .await?)
    }

    /// The JWT the auth store signs for a login that applied; `None` with simple tokens.
    pub async fn sign_token(
        &self,
        username: Vec<u8>,
        revision: u64,
    ) -> Result<Option<String>, EtcdError> {
        self.routes
            .sign_token
            .send(actcd_types::msg::SignToken { username, revision })
            .await?
    }

    /// A bcrypt hash of `password`, base64-encoded as etcd proposes it (on the auth store's
    /// blocking pool).
    pub async fn hash_password(&self, password: Vec<u8>) -> Result<String, EtcdError> {
        self.routes
            .hash_password
            .send(actcd_types::msg::HashPassword { password })
            .await?
    }

    /// A fresh request id (also etcd's source of server-chosen lease ids).
    pub fn next_id(&self) -> u64 {
        self.ids.next()
    }

    /// Proposes a client's write and waits for its entry to be applied.
    pub async fn write(
        &self,
        req: InternalRaftRequest,
        auth: AuthInfo,
    ) -> Result<ApplyResponse, EtcdError> {
        self.propose(req, auth, false).await
    }

    /// Proposes a request this member makes itself (publishing its attributes): never judged
    /// by auth when applied.
    pub async fn write_internal(
        &self,
        req: InternalRaftRequest,
    ) -> Result<ApplyResponse, EtcdError> {
        self.propose(req, AuthInfo::default(), true).await
    }

    async fn propose(
        &self,
        mut req: InternalRaftRequest,
        auth: AuthInfo,
        internal: bool,
    ) -> Result<ApplyResponse, EtcdError> {
        let id = self.ids.next();
        let kind = crate::durations::request_type(&req);
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
                let _ = self.routes.submit.send(submit).await?;
            }
            Err(actix::prelude::SendError::Closed(_)) => return Err(EtcdError::Stopped),
        }
        let outcome = match self.answer(rx, deadline).await {
            // No leader from start to deadline: the raft node never proposed it, and etcd's
            // answer is its request context's error (its raft takes no proposal without a
            // leader; one made while a leader was known is named by `why_timed_out`).
            Err(EtcdError::Timeout) if leaderless && matches!(leaders.has_changed(), Ok(false)) => {
                Err(EtcdError::ProposalDeadlineExceeded)
            }
            Err(EtcdError::Timeout) => Err(self.why_timed_out(started).await),
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
    async fn why_timed_out(&self, started: tokio::time::Instant) -> EtcdError {
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
    fn refuse_if_corrupt(&self) -> Result<(), EtcdError> {
        if *self.routes.corrupt.borrow() {
            Err(EtcdError::Corrupt)
        } else {
            Ok(())
        }
    }

    /// A Range, read from the store's newest published view in this task: a serializable one
    /// at once, a linearizable one once the ReadIndex barrier says everything committed before
    /// the call is applied (the store publishes a batch's view before it reports the batch
    /// applied, so the newest view then holds it).
    ///
    /// With auth on, the reader is judged by the newest permission view after the barrier, as
    /// etcd does (a grant revoked before the read began is never used).
    pub async fn range(
        &self,
        request: RangeRequest,
        who: AuthInfo,
    ) -> Result<RangeResponse, EtcdError> {
        actcd_types::validate::check_range(&request)?;
        let started = Instant::now();
        let answer = match self.before_range(&request, who).await {
            Ok(()) => self.timed_range(|| self.routes.reads.range(&request)),
            Err(e) => Err(e),
        };
        self.counters
            .durations
            .request("Range", answer.is_ok(), started.elapsed());
        answer
    }

    /// A storage read of a Range, timed as etcd times `txn.Range`
    /// (`etcd_server_range_duration_seconds`).
    fn timed_range<T>(&self, read: impl FnOnce() -> Result<T, EtcdError>) -> Result<T, EtcdError> {
        let started = Instant::now();
        let answer = read();
        self.counters
            .durations
            .range(answer.is_ok(), started.elapsed());
        answer
    }

    /// [`Self::range`] for the gRPC Range: the answer in its wire form where the store can
    /// give it so (`KeyReads::range_answer`; `range_route.rs` sends it).
    pub async fn range_answer(
        &self,
        request: RangeRequest,
        who: AuthInfo,
    ) -> Result<actcd_types::msg::RangeAnswer, EtcdError> {
        actcd_types::validate::check_range(&request)?;
        let started = Instant::now();
        let answer = match self.before_range(&request, who).await {
            Ok(()) => {
                let read = Instant::now();
                let answer = crate::range_route::read(&self.routes.reads, request).await;
                self.counters
                    .durations
                    .range(answer.is_ok(), read.elapsed());
                answer
            }
            Err(e) => Err(e),
        };
        self.counters
            .durations
            .request("Range", answer.is_ok(), started.elapsed());
        answer
    }

    /// What a Range passes before it is read (after validation, which etcd's gRPC layer does
    /// before its server takes the request up and starts timing it): the corrupt alarm, the
    /// barrier of a linearizable read, then the permission check.
    async fn before_range(&self, request: &RangeRequest, who: AuthInfo) -> Result<(), EtcdError> {
        self.refuse_if_corrupt()?;
        if !request.serializable {
            self.linearizable_barrier().await?;
        }
        if self.auth.enabled() {
            self.check_read(who, request.key.clone(), request.range_end.clone())
                .await?;
        }
        Ok(())
    }

    /// etcd 3.7's RangeStream: Range's answer in chunks whose in-order merge is the unary
    /// answer (mvcc `chunk.rs`). Checked as a Range is, plus etcd's two refusals (custom sort
    /// orders and revision filters: `Unimplemented`); then the ReadIndex barrier and the auth
    /// check, once. The chunks come from a task of their own, down a channel holding one: it
    /// makes the next only when the client has taken the one before, holds nothing but the
    /// cursor between two, and stops when the client hangs up or the member shuts down. A
    /// learner never gets here (the tower layer refuses every stream but Snapshot, as etcd).
    ///
    /// Two answers are one chunk read like a Range: count_only (as etcd), and a sort target
    /// other than KEY with order NONE, which etcd 3.7 accepts and streams chunk by chunk sorted
    /// (its merge then is not its Range answer); here it is exactly the Range answer.
    pub async fn range_stream(
        self: Arc<Self>,
        request: RangeRequest,
        who: AuthInfo,
    ) -> Result<RangeChunks, tonic::Status> {
        use actcd_proto::etcdserverpb::range_request::{SortOrder, SortTarget};
        actcd_types::validate::check_range(&request)?;
        let none = request.sort_order == SortOrder::None as i32;
        let key_ascend = request.sort_order == SortOrder::Ascend as i32
            && request.sort_target == SortTarget::Key as i32;
        if !none && !key_ascend {
            return Err(tonic::Status::unimplemented(
                "RangeStream does not support custom sort orders",
            ));
        }
        if request.min_mod_revision != 0
            || request.max_mod_revision != 0
            || request.min_create_revision != 0
            || request.max_create_revision != 0
        {
            return Err(tonic::Status::unimplemented(
                "RangeStream does not support revision filters",
            ));
        }
        self.refuse_if_corrupt()?;
        if !request.serializable {
            self.linearizable_barrier().await?;
        }
        let auth_revision = self.auth.revision();
        if self.auth.enabled() {
            self.check_read(who.clone(), request.key.clone(), request.range_end.clone())
                .await?;
        }
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let one_range = request.count_only || request.sort_target != SortTarget::Key as i32;
        if one_range {
            let answer = self
                .timed_range(|| self.routes.reads.range(&request))
                .map(|r| RangeStreamResponse {
                    range_response: Some(r),
                });
            let _ = tx.try_send(answer.map_err(tonic::Status::from));
            return Ok(rx);
        }
        tokio::spawn(self.produce_chunks(request, who, auth_revision, tx));
        Ok(rx)
    }

    /// RangeStream's producer (see [`Self::range_stream`]). The first chunk (at most ten
    /// key-values) is read in this task; the later ones, about [`Self::chunk_target`] bytes
    /// each, on a blocking thread, so that no gRPC worker reads for a millisecond at a time.
    async fn produce_chunks(
        self: Arc<Self>,
        request: RangeRequest,
        who: AuthInfo,
        auth_revision: u64,
        tx: tokio::sync::mpsc::Sender<Result<RangeStreamResponse, tonic::Status>>,
    ) {
        let target = self.chunk_target();
        let request = Arc::new(request);
        let mut cursor = StreamCursor::default();
        while !cursor.done {
            let permit = tokio::select! {
                biased;
                () = self.closed() => {
                    end_at_shutdown(&tx).await;
                    return;
                }
                permit = tx.reserve() => match permit {
                    Ok(permit) => permit,
                    // The client hung up.
                    Err(_) => return,
                },
            };
            // After an auth change since the stream began, the caller is judged again, by the
            // newest permissions, before the next chunk: as a Range sent now would be (a token
            // names its user, whose permissions are looked up afresh).
            if self.auth.revision() != auth_revision {
                let view = self.auth.view();
                let now = AuthInfo {
                    revision: if who.revision == 0 {
                        0
                    } else {
                        view.revision()
                    },
                    ..who.clone()
                };
                let checked = view.check_range(&now, &request.key, &request.range_end, Perm::Read);
                if let Err(e) = checked {
                    permit.send(Err(e.into()));
                    return;
                }
            }
            // Each chunk is a storage read, timed as etcd times each of its `txn.Range` calls.
            let chunk = if cursor.chunks == 0 {
                self.timed_range(|| self.routes.reads.range_chunk(&request, &mut cursor, target))
            } else {
                let reads = Arc::clone(&self.routes.reads);
                let req = Arc::clone(&request);
                let mut c = cursor.clone();
                let counters = Arc::clone(&self.counters);
                let read = tokio::task::spawn_blocking(move || {
                    let started = Instant::now();
                    let chunk = reads.range_chunk(&req, &mut c, target);
                    counters.durations.range(chunk.is_ok(), started.elapsed());
                    (chunk, c)
                })
                .await;
                match read {
                    Ok((chunk, c)) => {
                        cursor = c;
                        chunk
                    }
                    Err(e) => Err(EtcdError::internal(e)),
                }
            };
            match chunk {
                Ok(r) => permit.send(Ok(RangeStreamResponse {
                    range_response: Some(r),
                })),
                Err(e) => {
                    permit.send(Err(e.into()));
                    return;
                }
            }
        }
    }

    /// How big a RangeStream chunk grows: ¾ of `--max-request-bytes` (so that a client whose
    /// receive limit is the server's request limit takes it), at most 4 MiB (gRPC clients'
    /// default receive limit).
    pub fn chunk_target(&self) -> usize {
        let max_request = self.config.max_recv_bytes.saturating_sub(512 * 1024);
        (max_request / 4 * 3).clamp(1, 4 << 20)
    }

    /// A txn without writes is served like a read: linearizable through ReadIndex unless every
    /// op is a serializable range (etcd's rule), and it never enters the log.
    pub async fn read_only_txn(
        &self,
        request: TxnRequest,
        who: AuthInfo,
    ) -> Result<TxnResponse, EtcdError> {
        actcd_types::validate::check_txn(&request, self.config.max_txn_ops)?;
        self.refuse_if_corrupt()?;
        if !is_txn_serializable(&request) {
            self.linearizable_barrier().await?;
        }
        // Timed from here, as etcd times a read-only txn (after its ReadIndex wait). etcd's
        // `success` is the read's own outcome: a permission refusal is observed as a success
        // (its deferred observer sees only the error of the read), and so here.
        let started = Instant::now();
        let view = self.auth.view();
        let (answer, success) = if view.enabled() {
            // The same checks a txn gets at apply: every compare and every op, both branches.
            let as_entry = InternalRaftRequest {
                txn: Some(request),
                ..Default::default()
            };
            match view.check_request(&who, &as_entry, &|_| Vec::new()) {
                Ok(()) => {
                    let answer = self
                        .routes
                        .reads
                        .read_txn(&as_entry.txn.unwrap_or_default());
                    let success = answer.is_ok();
                    (answer, success)
                }
                Err(e) => (Err(e), true),
            }
        } else {
            let answer = self.routes.reads.read_txn(&request);
            let success = answer.is_ok();
            (answer, success)
        };
        self.counters
            .durations
            .request("ReadonlyTxn", success, started.elapsed());
        answer
    }

    /// The members as this member has applied them.
    pub async fn members(&self) -> Result<Vec<MemberRecord>, EtcdError> {
        Ok(self.routes.members.send(GetMembers).await?)
    }

    pub async fn store_status(&self) -> Result<StoreStatus, EtcdError> {
        self.routes.store_status.send(GetStoreStatus).await?
    }

    /// The raised alarms, as the applier has applied them.
    pub async fn alarms(&self) -> Result<Vec<AlarmMember>, EtcdError> {
        Ok(self.routes.alarms.send(GetAlarms).await?)
    }

    pub async fn hash_kv(&self, revision: i64) -> Result<HashKvResult, EtcdError> {
        self.routes.hash_kv.send(HashKv { revision }).await?
    }

    pub async fn raft_status(&self) -> Result<RaftStatusReply, EtcdError> {
        Ok(self.routes.raft_status.send(RaftStatus).await?)
    }

    /// A header at most 10 ms old, for answers whose revision only has to be no later than the
    /// moment they are made (keepalives: etcd takes the header *before* renewing so a client
    /// never sees a keepalive succeed at a revision after the lease's revoke; an older revision
    /// keeps that promise). Saves two actor round trips per keepalive.
    pub async fn recent_header(&self) -> Result<ResponseHeader, EtcdError> {
        let now = std::time::Instant::now();
        let cached = self.recent.lock().ok().and_then(|g| *g);
        if let Some((at, h)) = cached {
            if now.duration_since(at) < RECENT_HEADER_AGE {
                return Ok(h);
            }
            // Stale: one caller refreshes it, the others keep using the older header (an older
            // revision keeps the promise), so a burst of keepalives costs one refresh.
            if self
                .refreshing
                .swap(true, std::sync::atomic::Ordering::AcqRel)
            {
                return Ok(h);
            }
        }
        let fresh = self.header(true).await;
        if let Ok(h) = &fresh
            && let Ok(mut guard) = self.recent.lock()
        {
            *guard = Some((now, *h));
        }
        self.refreshing
            .store(false, std::sync::atomic::Ordering::Release);
        fresh
    }

    /// A header for services whose answer doesn't come from the store.
    pub async fn header(&self, with_revision: bool) -> Result<ResponseHeader, EtcdError> {
        let (raft, revision) = if with_revision {
            let (raft, store) = tokio::join!(self.raft_status(), self.store_status());
            (raft?, store?.revision)
        } else {
            (self.raft_status().await?, 0)
        };
        Ok(ResponseHeader {
            cluster_id: self.config.identity.cluster_id,
            member_id: self.config.identity.member_id,
            revision,
            raft_term: raft.term,
        })
    }
}

/// How a stream this member ends at shutdown (watch, keepalive, observe) ends: `Unavailable`,
/// so that clients log it and open it again elsewhere, instead of a clean end they would take
/// as the server's last word. etcd 3.5.1 closes its client connections at shutdown without a
/// status, and its Go client reports that as `Unavailable` "error reading from server: EOF"
/// (what etcd's gateway streams to its HTTP clients then); the same words here make a Go
/// client's log line the same.
pub fn shutdown_status() -> tonic::Status {
    tonic::Status::unavailable("error reading from server: EOF")
}

/// Sends [`shutdown_status`] down a stream's channel; a client too slow to take it within a
/// second gets the bare end instead (shutdown waits for no one).
pub(crate) async fn end_at_shutdown<T>(tx: &tokio::sync::mpsc::Sender<Result<T, tonic::Status>>) {
    let send = tx.send(Err(shutdown_status()));
    let _ = tokio::time::timeout(Duration::from_secs(1), send).await;
}

fn unexpected(a: PeerAnswer) -> EtcdError {
    EtcdError::internal(format!("unexpected answer from the leader: {a:?}"))
}

/// No put and no delete anywhere in the txn, nested txns included.
/// `etcd_server_request_duration_seconds`'s `success` of a proposal's outcome, as etcd's
/// `processInternalRaftRequestOnce` reports it: false only when the request never made it into
/// the log (too large, or no leader to take it until the deadline, or the server stopping); a
/// write that was proposed and then timed out, or that the state machine refused, counts as a
/// success. `None` for refusals etcd makes before it starts timing (a request it validates in
/// its gRPC layer, too many requests), which it never observes.
fn proposal_success(outcome: &Result<ApplyResponse, EtcdError>) -> Option<bool> {
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

pub fn is_txn_read_only(t: &TxnRequest) -> bool {
    t.success
        .iter()
        .chain(&t.failure)
        .all(|op| match &op.request {
            Some(request_op::Request::RequestRange(_)) | None => true,
            Some(request_op::Request::RequestTxn(n)) => is_txn_read_only(n),
            Some(
                request_op::Request::RequestPut(_) | request_op::Request::RequestDeleteRange(_),
            ) => false,
        })
}

/// Every op of both branches is a serializable range (an empty txn counts).
fn is_txn_serializable(t: &TxnRequest) -> bool {
    let serializable = |op: &RequestOp| matches!(&op.request, Some(request_op::Request::RequestRange(r)) if r.serializable);
    t.success.iter().chain(&t.failure).all(serializable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_proto::etcdserverpb::{PutRequest, RangeRequest};

    fn range(serializable: bool) -> RequestOp {
        RequestOp {
            request: Some(request_op::Request::RequestRange(RangeRequest {
                key: b"k".to_vec(),
                serializable,
                ..Default::default()
            })),
        }
    }

    #[test]
    fn classifies_txns_like_etcd() {
        struct Case {
            name: &'static str,
            txn: TxnRequest,
            want_read_only: bool,
            want_serializable: bool,
        }
        let put = RequestOp {
            request: Some(request_op::Request::RequestPut(PutRequest {
                key: b"k".to_vec(),
                ..Default::default()
            })),
        };
        let nested = |ops: Vec<RequestOp>| RequestOp {
            request: Some(request_op::Request::RequestTxn(TxnRequest {
                success: ops,
                ..Default::default()
            })),
        };
        let cases = vec![
            Case {
                name: "empty",
                txn: TxnRequest::default(),
                want_read_only: true,
                want_serializable: true,
            },
            Case {
                name: "linearizable range",
                txn: TxnRequest {
                    success: vec![range(false)],
                    ..Default::default()
                },
                want_read_only: true,
                want_serializable: false,
            },
            Case {
                name: "serializable ranges",
                txn: TxnRequest {
                    success: vec![range(true)],
                    failure: vec![range(true)],
                    ..Default::default()
                },
                want_read_only: true,
                want_serializable: true,
            },
            Case {
                name: "put",
                txn: TxnRequest {
                    failure: vec![put.clone()],
                    ..Default::default()
                },
                want_read_only: false,
                want_serializable: false,
            },
            Case {
                name: "nested put",
                txn: TxnRequest {
                    success: vec![nested(vec![put])],
                    ..Default::default()
                },
                want_read_only: false,
                want_serializable: false,
            },
            Case {
                name: "nested read",
                txn: TxnRequest {
                    success: vec![nested(vec![range(true)])],
                    ..Default::default()
                },
                want_read_only: true,
                want_serializable: false,
            },
        ];
        for c in cases {
            assert_eq!(is_txn_read_only(&c.txn), c.want_read_only, "{}", c.name);
            assert_eq!(
                is_txn_serializable(&c.txn),
                c.want_serializable,
                "{}",
                c.name
            );
        }
    }
}
