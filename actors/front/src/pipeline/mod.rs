//! `Pipeline`: the door every service goes through to the actors. It holds the routes and the
//! configuration (`config.rs`), identifies callers and judges them against the newest
//! permission view, hands out ids and response headers, and closes the streams at shutdown;
//! what it does for a request is in the files beside it: `writes.rs` (proposals through raft),
//! `reads.rs` (ranges, RangeStream, read-only txns, the admin reads), `leader.rs` (questions
//! only the leader answers), `guard.rs` (the checks current etcd added after 3.5.1: a
//! logged-in user, the keys a lease holds; and who a keepalive stream's credentials name).

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
    ApplyResponse, CheckLearner, CheckPassword, ConnectAuth, GetAlarms, GetMembers, GetStoreStatus,
    HashKv, HashKvResult, KeyReads, LeaderCall, LeaseTimeToLive, LeaseTtl, MemberRecord,
    PeerActivity, PeerAnswer, PeerCall, RaftStatus, RaftStatusReply, ReadIndex, RenewLease,
    StoreStatus, StreamCursor, Submit,
};
use actcd_types::{AuthInfo, EtcdError};
use tokio::sync::oneshot;

use crate::authn::AuthGate;

mod config;
mod guard;
mod leader;
mod reads;
mod writes;

pub use config::{AccessControl, ActorProbe, FrontConfig, PipelineRoutes, V2Routes};
pub use reads::is_txn_read_only;

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
    /// Turns at forwarding watch responses: see [`Self::watch_turn`].
    watch_turns: tokio::sync::Semaphore,
    /// When a turn last yielded to the writes (see [`Self::watch_turn`]), with the header that
    /// round trip brought back; touched only under a turn.
    watch_yield: std::sync::Mutex<Option<(std::time::Instant, ResponseHeader)>>,
}

/// Watch streams forwarding at once (see [`Pipeline::watch_turn`]).
const WATCH_TURNS: usize = 1;

/// How often a watch turn yields to the writes ([`Pipeline::watch_turn`]). Measured with 1,000
/// clients that stop reading (`benches/beyond-watch.sh`, stall): never (each turn's header from
/// a cache) 2,000 puts/s at p99 200 ms; every 10 ms 19,500/s at 15 ms; every 3 ms no better.
const WATCH_YIELD: Duration = Duration::from_millis(10);

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
            watch_turns: tokio::sync::Semaphore::new(WATCH_TURNS),
            watch_yield: std::sync::Mutex::new(None),
        })
    }

    /// A turn at forwarding a batch of watch responses. Every stream's forwarding task takes
    /// one, first come first served, so the watch streams together add at most one batch to a
    /// round of the front's scheduler however many of them have responses waiting: the work of
    /// requests (a put's hops through the front) waits behind one batch, not behind every
    /// stream's (etcd #22264: fan-out holding writes).
    ///
    /// Turns alone bound a round, not the share: with 1,000 streams that keep up, every put
    /// fans out into 1,000 forwards and socket writes, and the writes get what is left. So at
    /// most every [`WATCH_YIELD`] a turn first yields to them: its holder waits for a round trip
    /// through the raft node and the store, behind every request queued there, while no stream
    /// forwards. Watch output then falls behind a busy write path; queues fill, watchers become
    /// victims and catch up from history in bulk, which costs far less per event. The header
    /// every response needs comes from that round trip (`Err` when it fails).
    pub async fn watch_turn(
        &self,
    ) -> (
        tokio::sync::SemaphorePermit<'_>,
        Result<ResponseHeader, EtcdError>,
    ) {
        let turn = self
            .watch_turns
            .acquire()
            .await
            .expect("the watch turns are never closed");
        let now = std::time::Instant::now();
        let last = self.watch_yield.lock().ok().and_then(|g| *g);
        if let Some((at, header)) = last
            && now.duration_since(at) < WATCH_YIELD
        {
            return (turn, Ok(header));
        }
        let header = self.header(true).await;
        if let Ok(h) = &header {
            if let Ok(mut g) = self.watch_yield.lock() {
                *g = Some((std::time::Instant::now(), *h));
            }
            // The same round trip refreshes what `recent_header` hands out (keepalives), so
            // the two do not each make one every 10 ms.
            if let Ok(mut g) = self.recent.lock() {
                *g = Some((now, *h));
            }
        }
        (turn, header)
    }

    /// When the member started.
    pub fn started_at(&self) -> (String, std::time::Instant) {
        self.started.clone()
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
