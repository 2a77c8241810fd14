//! # actcd-transport — the peer port: raft messages, snapshots and leader calls between members
//!
//! Owns the connections to the other members. The raft node's outbox is a [`TransportActor`]:
//! it takes `PeerMessage{to, msg}` and hands each to the queue of that peer, without waiting.
//! One task per peer drains its queue into one long-lived gRPC client stream
//! (`RaftPeer.Send`) to the peer's first peer URL, reconnecting with backoff when the stream
//! breaks (100 ms doubling to 500 ms, so a restarted member hears from its peers soon). The
//! receiving side, [`serve_peers`], steps every message it reads into the local raft node
//! (`Step`).
//!
//! ## Messages
//! - takes `PeerMessage` (from the raft node), `PeerChange` (membership: open, re-point or drop
//!   a member's stream; [`AddPeer`] at start-up in tests), `SendSnapshot` (a snapshot message:
//!   a store copy is asked of the store with `MakeSnapshot` and streamed with it on
//!   `RaftPeer.Snapshot` as the store reads it, in 1 MiB chunks closed by a CRC32C, never
//!   whole in memory; the raft node hears `SnapshotReport`), `LeaderCall` (keepalives, lease TTLs and learner progress, asked of the
//!   leader's peer port for a follower's front) and `PeerActivity` (how long each peer's stream
//!   has been up: etcd's health rule for membership changes) and `PeerHashKv{to, revision}`
//!   (a peer's HashKV for the corruption checks, etcd's `/members/hashkv`: `Compacted` and
//!   `FutureRevision` come back as themselves, anything else as the reason it failed);
//! - its peer port ([`serve_peers`], routes in [`PeerRoutes`]) steps every message a peer sends
//!   into the raft node (`Step`), writes a snapshot's copy to a file in the member's
//!   `member/snap` as it arrives and, once whole and intact, has the backend build it into a
//!   store beside its own (`PrepareSnapshot`) and hands that to the raft node (`StepSnapshot`);
//!   a copy refused or cut short is deleted at once; answers `Members` (how a member joining an existing cluster learns its
//!   id: [`fetch_members`]) from the applier, leader calls from the lessor and the raft node,
//!   and `HashKv` (peers' corruption checks) from the corruption checker (`LocalHashKv`), only
//!   for members of this cluster, like every call here;
//! - sends `Unreachable{id}` whenever the stream to a peer breaks or cannot be opened.
//!
//! Peer TLS ([`PeerTls`]): `https://` peer URLs are served and dialled with rustls
//! configurations the daemon builds (peer key pair or `--peer-auto-tls`, Go-compatible
//! verification against `--peer-trusted-ca-file`, CRL, allowed CN/hostname); this crate runs
//! the handshakes itself (tonic's TLS settings take only a CA) and checks a dialling peer's
//! certificate SANs against its address as etcd does (`SanCheck`).
//!
//! Every stream names the sender's cluster id ([`CLUSTER_ID_HEADER`]); the receiver refuses a
//! stream from another cluster (a different `--initial-cluster-token` or peer list) with
//! `FailedPrecondition` and logs it, and the sender logs the refusal as an error.
//!
//! ## Invariants
//! - The raft node is never blocked by a peer: a full queue (a slow or dead peer) drops the
//!   message, which raft resends or replaces (heartbeats, appends are retried from the peer's
//!   progress). Likewise a full raft mailbox drops an inbound message.
//! - Messages to one peer leave in the order the raft node produced them (one queue, one
//!   stream), as raft's pipelining of appends expects.
//! - What is queued for a peer that cannot be reached waits for the next attempt only while
//!   it is younger than a second (`QUEUED_AT_MOST`), and is dropped after: a proposal a
//!   follower forwards while its stream to a new leader is still being dialled goes out once
//!   the stream is up, but a member that comes back gets nothing from before its absence (a
//!   forwarded proposal reaching a restarted leader half a minute after its client gave up
//!   would overwrite newer writes). Raft resends what still matters.
//! - Inbound messages are bounded in size (`MAX_MESSAGE_BYTES`): raft-rs's codec is not
//!   hardened against hostile input, and only members should reach this port.
//!
//! ## Failpoints (feature `failpoints`, fail-rs; configured by `FAILPOINTS` in the daemon)
//! - `snapshot_before_send` (sending a snapshot to a follower: the store copy made and
//!   chunked, before connecting to the peer): `return` fails the send as an unreachable peer
//!   does; the raft node hears `SnapshotReport{ok: false}` and sends another later.

mod tls;

pub use tls::{PeerTls, SanCheck, unix_socket_host};

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use actcd_proto::actcdpb::raft_peer_client::RaftPeerClient;
use actcd_proto::actcdpb::raft_peer_server::{RaftPeer, RaftPeerServer};
use actcd_proto::actcdpb::{
    LeaseRenewReply, LeaseRenewRequest, LeaseTtlReply, MemberIdRequest, MembersReply,
    MembersRequest, PeerAck, PeerHashKvReply, PeerHashKvRequest, RaftMessage, SnapshotChunk,
};
use actcd_proto::etcdserverpb::Member;
use actcd_types::EtcdError;
use actcd_types::msg::{
    CheckLearner, GetMembers, LeaderCall, LeaseTimeToLive, LeaseTtl, LocalHashKv, MakeSnapshot,
    MemberHash, PeerActivity, PeerAnswer, PeerCall, PeerChange, PeerHashKv, PeerMessage,
    PrepareSnapshot, RenewLease, SendSnapshot, SnapshotError, SnapshotReport, Step, StepSnapshot,
    Unreachable,
};
use actcd_types::snapshot_blob::{SnapshotBlob, StoreCopy};
use actix::prelude::*;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::{Mutex, mpsc};
use tonic::{Request, Response, Status, Streaming};

/// Messages queued per peer before new ones are dropped.
pub const PEER_QUEUE: usize = 4096;
/// Largest raft message a peer may send (appends are batched by raft-rs's max size per msg).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_millis(500);
/// How long a message may wait for its peer's stream. A follower's proposal forwarded while
/// the stream to a new leader is still being dialled (the first moments after an election)
/// goes out once the stream is up, instead of being dropped and leaving its client to time
/// out (etcd's peer links fall back to their HTTP pipeline then); one older than this is
/// dropped, so it never reaches a leader that comes back after its client gave up. Raft's own
/// messages are resent or replaced whatever becomes of them.
const QUEUED_AT_MOST: Duration = Duration::from_secs(1);

/// A message for a peer, with when it was queued.
type Queued = (tokio::time::Instant, Vec<u8>);

/// A member to send to: its raft id and peer URLs (`http://host:port`), and where to report
/// that it could not be reached.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct AddPeer {
    pub id: u64,
    pub urls: Vec<String>,
    pub unreachable: Option<Recipient<Unreachable>>,
}

/// gRPC metadata naming the sender's cluster: a member of another cluster (another
/// `--initial-cluster-token` or peer list) is refused instead of stepping into our raft.
pub const CLUSTER_ID_HEADER: &str = "x-actcd-cluster-id";

/// The raft node's outbox.
pub struct TransportActor {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: std::sync::Arc<actcd_types::meter::Meter>,
    cluster_id: u64,
    /// Each peer's queue and the URLs its stream was opened to.
    queues: HashMap<u64, (mpsc::Sender<Queued>, Vec<String>)>,
    /// Told when a stream breaks (for peers added by [`PeerChange`]).
    unreachable: Option<Recipient<Unreachable>>,
    /// Where store copies for snapshots come from, and who hears how sending one ended.
    snapshots: Option<(Recipient<MakeSnapshot>, Recipient<SnapshotReport>)>,
    /// Since when each peer's stream has been up (etcd's `ActiveSince`), for the membership
    /// checks that protect the quorum.
    active_since: HashMap<u64, tokio::time::Instant>,
    /// Streams opened so far (see [`StreamState::generation`]).
    generation: u64,
    /// Generation of each peer's current stream.
    generations: HashMap<u64, u64>,
    /// Peer TLS, for `https://` peers.
    tls: Option<Arc<PeerTls>>,
    /// The address connections to peers leave from (`SetMemberLocalAddr`), if set.
    local_addr: Option<IpAddr>,
    /// Channels for questions to the leader, by URL.
    calls: HashMap<String, tonic::transport::Channel>,
    /// Raft messages dropped because a peer's queue was full (etcd's
    /// `etcd_network_peer_sent_failures_total`), by peer.
    sent_failures: HashMap<u64, u64>,
    /// Times each peer's stream went down after being up (etcd's
    /// `etcd_network_disconnected_peers_total`).
    disconnects: HashMap<u64, u64>,
}

/// A peer's stream came up or went down (sent by the stream's own task).
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct StreamState {
    id: u64,
    /// The stream's generation: a replaced stream's late news is ignored.
    generation: u64,
    up: bool,
}

impl TransportActor {
    pub fn new(cluster_id: u64) -> Self {
        Self {
            meter: actcd_types::meter::Meter::new(),
            cluster_id,
            queues: HashMap::new(),
            unreachable: None,
            snapshots: None,
            active_since: HashMap::new(),
            generation: 0,
            generations: HashMap::new(),
            tls: None,
            local_addr: None,
            calls: HashMap::new(),
            sent_failures: HashMap::new(),
            disconnects: HashMap::new(),
        }
    }

    /// Peer TLS settings, for peers with `https://` URLs.
    pub fn with_tls(mut self, tls: Option<PeerTls>) -> Self {
        self.tls = tls.map(Arc::new);
        self
    }

    /// The address every connection to a peer leaves from (etcd's `SetMemberLocalAddr`);
    /// `None`: the one the kernel picks.
    pub fn with_local_addr(mut self, local_addr: Option<IpAddr>) -> Self {
        self.local_addr = local_addr;
        self
    }

    /// Lets the transport send snapshots: `source` makes the store copy, `report` (raft)
    /// hears whether the peer got it.
    pub fn with_snapshots(
        mut self,
        source: Recipient<MakeSnapshot>,
        report: Recipient<SnapshotReport>,
    ) -> Self {
        self.snapshots = Some((source, report));
        self
    }

    /// Where broken streams to peers added by [`PeerChange`] are reported.
    pub fn reporting_to(mut self, unreachable: Recipient<Unreachable>) -> Self {
        self.unreachable = Some(unreachable);
        self
    }

    /// Opens the stream to `id` at `urls`, replacing (and so ending) an earlier one.
    fn open(
        &mut self,
        id: u64,
        urls: Vec<String>,
        unreachable: Option<Recipient<Unreachable>>,
        me: Option<Recipient<StreamState>>,
    ) {
        let Some(url) = urls.first().cloned() else {
            return;
        };
        let (tx, rx) = mpsc::channel(PEER_QUEUE);
        self.queues.insert(id, (tx, urls));
        self.active_since.remove(&id);
        self.generation += 1;
        let generation = self.generation;
        self.generations.insert(id, generation);
        let report = move |up: bool| {
            if let Some(me) = &me {
                me.do_send(StreamState { id, generation, up });
            }
            if !up && let Some(r) = &unreachable {
                r.do_send(Unreachable { id });
            }
        };
        actix::spawn(stream_to(
            url,
            self.cluster_id,
            self.tls.clone(),
            self.local_addr,
            Arc::new(Mutex::new(rx)),
            report,
        ));
    }
}

impl Actor for TransportActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(65536);
    }
}

impl Handler<AddPeer> for TransportActor {
    type Result = ();

    fn handle(&mut self, msg: AddPeer, ctx: &mut Self::Context) {
        let unreachable = msg.unreachable.or_else(|| self.unreachable.clone());
        let me = ctx.address().recipient();
        self.open(msg.id, msg.urls, unreachable, Some(me));
    }
}

/// Membership changed: a new or moved member gets a stream, a removed one loses it (dropping
/// its queue ends the stream's task).
impl Handler<PeerChange> for TransportActor {
    type Result = ();

    fn handle(&mut self, msg: PeerChange, ctx: &mut Self::Context) {
        match msg {
            PeerChange::Upsert { id, urls } => {
                if self.queues.get(&id).is_some_and(|(_, u)| *u == urls) {
                    return;
                }
                let unreachable = self.unreachable.clone();
                let me = ctx.address().recipient();
                self.open(id, urls, unreachable, Some(me));
            }
            PeerChange::Remove { id } => {
                self.queues.remove(&id);
                self.active_since.remove(&id);
                self.generations.remove(&id);
            }
        }
    }
}

impl Handler<StreamState> for TransportActor {
    type Result = ();

    fn handle(&mut self, msg: StreamState, _: &mut Self::Context) {
        if self.generations.get(&msg.id) != Some(&msg.generation) {
            return;
        }
        if msg.up {
            self.active_since
                .entry(msg.id)
                .or_insert_with(tokio::time::Instant::now);
        } else if self.active_since.remove(&msg.id).is_some() {
            *self.disconnects.entry(msg.id).or_default() += 1;
        }
    }
}

/// How long each peer's stream has been up; peers whose stream is down are absent.
impl Handler<PeerActivity> for TransportActor {
    type Result = MessageResult<PeerActivity>;

    fn handle(&mut self, _: PeerActivity, _: &mut Self::Context) -> Self::Result {
        let now = tokio::time::Instant::now();
        MessageResult(
            self.active_since
                .iter()
                .map(|(&id, &since)| (id, now.duration_since(since)))
                .collect(),
        )
    }
}

impl Handler<PeerMessage> for TransportActor {
    type Result = ();

    fn handle(&mut self, msg: PeerMessage, _: &mut Self::Context) {
        let _timer = self.meter.start("PeerMessage");
        if let Some((q, _)) = self.queues.get(&msg.to)
            && q.try_send((tokio::time::Instant::now(), msg.msg)).is_err()
        {
            *self.sent_failures.entry(msg.to).or_default() += 1;
            tracing::debug!(to = msg.to, "peer queue full; message dropped");
        }
    }
}

/// Raft sends a snapshot: attach a store copy and stream both to the peer on a stream of their
/// own (so appends to other peers, and heartbeats to this one, are not held up), then tell raft
/// how it went.
impl Handler<SendSnapshot> for TransportActor {
    type Result = ();

    fn handle(&mut self, msg: SendSnapshot, _: &mut Self::Context) {
        let _timer = self.meter.start("SendSnapshot");
        let Some((source, report)) = self.snapshots.clone() else {
            return;
        };
        let url = self
            .queues
            .get(&msg.to)
            .and_then(|(_, u)| u.first().cloned());
        let cluster_id = self.cluster_id;
        let dial = (self.tls.clone(), self.local_addr);
        actix::spawn(async move {
            let to = msg.to;
            let ok = match url {
                Some(url) => match send_snapshot(&url, cluster_id, dial, source, msg).await {
                    Ok(bytes) => {
                        tracing::info!(to = format!("{to:x}"), bytes, "snapshot sent");
                        true
                    }
                    Err(e) => {
                        tracing::warn!(to = format!("{to:x}"), error = %e, "snapshot not sent");
                        false
                    }
                },
                None => false,
            };
            report.do_send(SnapshotReport { to, ok });
        });
    }
}

impl TransportActor {
    /// A channel for questions to member `id`'s first peer URL (kept per URL, opened lazily).
    fn call_channel(&mut self, id: u64) -> Option<Result<tonic::transport::Channel, EtcdError>> {
        let url = self.queues.get(&id).and_then(|(_, u)| u.first().cloned())?;
        if let Some(c) = self.calls.get(&url) {
            return Some(Ok(c.clone()));
        }
        Some(
            match tls::endpoint(&url, self.tls.as_deref(), self.local_addr) {
                Ok(e) => {
                    let c = e.connect_lazy();
                    self.calls.insert(url, c.clone());
                    Ok(c)
                }
                Err(e) => Err(EtcdError::Internal(e)),
            },
        )
    }
}

/// A peer's HashKV, for the corruption checks: etcd's `/members/hashkv` on the peer port.
impl Handler<PeerHashKv> for TransportActor {
    type Result = ResponseFuture<Result<MemberHash, EtcdError>>;

    fn handle(&mut self, msg: PeerHashKv, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("PeerHashKv");
        let channel = match self.call_channel(msg.to) {
            Some(Ok(c)) => c,
            Some(Err(e)) => return Box::pin(async move { Err(e) }),
            None => {
                let e = EtcdError::Internal(format!("member {:x} is not a known peer", msg.to));
                return Box::pin(async move { Err(e) });
            }
        };
        let cluster_id = self.cluster_id;
        Box::pin(async move {
            let request = PeerHashKvRequest {
                revision: msg.revision,
            };
            let reply = RaftPeerClient::new(channel)
                .hash_kv(call_request(request, cluster_id))
                .await
                .map_err(from_hash_status)?
                .into_inner();
            Ok(MemberHash {
                member_id: reply.member_id,
                hash: reply.hash,
                compact_revision: reply.compact_revision,
                revision: reply.revision,
                hash_revision: reply.hash_revision,
            })
        })
    }
}

/// A peer's HashKV refusal back to the error it was (etcd's text); anything else means the
/// peer could not be asked, and says why.
fn from_hash_status(s: Status) -> EtcdError {
    match s.message() {
        m if m == EtcdError::Compacted.to_string() => EtcdError::Compacted,
        m if m == EtcdError::FutureRevision.to_string() => EtcdError::FutureRevision,
        m => EtcdError::Internal(format!("{:?}: {m}", s.code())),
    }
}

/// A question for the leader, over its peer port (leases live there; only it knows a
/// learner's progress).
impl Handler<LeaderCall> for TransportActor {
    type Result = ResponseFuture<Result<PeerAnswer, EtcdError>>;

    fn handle(&mut self, msg: LeaderCall, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("LeaderCall");
        let channel = match self.call_channel(msg.leader) {
            Some(Ok(c)) => c,
            Some(Err(e)) => return Box::pin(async move { Err(e) }),
            None => return Box::pin(async { Err(EtcdError::NoLeader) }),
        };
        let cluster_id = self.cluster_id;
        Box::pin(async move {
            let mut client = RaftPeerClient::new(channel);
            let req = |m| call_request(m, cluster_id);
            let answer = match msg.call {
                PeerCall::RenewLease(id) => client
                    .lease_renew(req(LeaseRenewRequest { id }))
                    .await
                    .map(|r| PeerAnswer::Renewed(r.into_inner().ttl)),
                PeerCall::LeaseTtl(id) => client
                    .lease_ttl(req(LeaseRenewRequest { id }))
                    .await
                    .map(|r| {
                        let t = r.into_inner();
                        PeerAnswer::Ttl(LeaseTtl {
                            granted_ttl: t.granted_ttl,
                            remaining_ttl: t.remaining_ttl,
                        })
                    }),
                PeerCall::LearnerReady(id) => client
                    .learner_ready(call_request(MemberIdRequest { id }, cluster_id))
                    .await
                    .map(|_| PeerAnswer::Ready),
            };
            answer.map_err(from_leader_status)
        })
    }
}

fn call_request<T>(msg: T, cluster_id: u64) -> Request<T> {
    let mut r = Request::new(msg);
    r.set_timeout(CALL_TIMEOUT);
    if let Ok(v) = format!("{cluster_id:x}").parse() {
        r.metadata_mut().insert(CLUSTER_ID_HEADER, v);
    }
    r
}

/// How long a question to the leader may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The leader's answer back to the error it was (its status carries etcd's text); a leader
/// that can't be reached, or is no longer leader, is a leader change to the client.
fn from_leader_status(s: Status) -> EtcdError {
    match s.message() {
        m if m == EtcdError::LeaseNotFound.to_string() => EtcdError::LeaseNotFound,
        m if m == EtcdError::LearnerNotReady.to_string() => EtcdError::LearnerNotReady,
        m if m == EtcdError::NotLeader.to_string() => EtcdError::LeaderChanged,
        _ if matches!(
            s.code(),
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
        ) =>
        {
            EtcdError::LeaderChanged
        }
        m => EtcdError::Internal(m.to_string()),
    }
}

async fn send_snapshot(
    url: &str,
    cluster_id: u64,
    (tls, local): (Option<Arc<PeerTls>>, Option<IpAddr>),
    source: Recipient<MakeSnapshot>,
    msg: SendSnapshot,
) -> Result<u64, String> {
    // The store may not have applied the snapshot's index yet: wait for it (briefly).
    let mut copy = None;
    for _ in 0..200 {
        match source
            .send(MakeSnapshot {
                min_index: msg.index,
            })
            .await
        {
            Ok(Ok(c)) => {
                copy = Some(c);
                break;
            }
            Ok(Err(SnapshotError::NotReady)) => {
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            Ok(Err(e)) => return Err(e.to_string()),
            Err(e) => return Err(e.to_string()),
        }
    }
    let copy = copy.ok_or("the store never reached the snapshot's index")?;
    // `return`: the snapshot is not sent; raft hears `SnapshotReport{ok: false}` and retries.
    #[cfg(feature = "failpoints")]
    fail::fail_point!("snapshot_before_send", |_| Err(
        "injected by failpoint snapshot_before_send".to_string()
    ));
    let channel = tls::endpoint(url, tls.as_deref(), local)?
        .connect()
        .await
        .map_err(|e| e.to_string())?;
    let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let first = SnapshotChunk {
        raft_message: msg.message,
        ..Default::default()
    };
    let mut req = Request::new(
        futures::stream::iter([first]).chain(copy_chunks(copy.chunks, Arc::clone(&sent))),
    );
    if let Ok(v) = format!("{cluster_id:x}").parse() {
        req.metadata_mut().insert(CLUSTER_ID_HEADER, v);
    }
    RaftPeerClient::new(channel)
        .max_encoding_message_size(usize::MAX)
        .snapshot(req)
        .await
        .map_err(|e| e.message().to_string())?;
    Ok(sent.load(std::sync::atomic::Ordering::Relaxed))
}

/// The store copy's chunks as the store reads them, then the closing chunk with their CRC32C;
/// `sent` counts the bytes. A failed read ends the stream without the closing chunk, so the
/// peer refuses the copy ("snapshot stream ended early").
fn copy_chunks(
    chunks: actcd_types::msg::CopyChunks,
    sent: Arc<std::sync::atomic::AtomicU64>,
) -> impl futures::Stream<Item = SnapshotChunk> + Send + 'static {
    futures::stream::unfold(Some((chunks, 0u32)), move |state| {
        let sent = Arc::clone(&sent);
        async move {
            let (mut chunks, crc) = state?;
            match chunks.recv().await {
                Some(Ok(data)) => {
                    let crc = crc32c::crc32c_append(crc, &data);
                    sent.fetch_add(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
                    let chunk = SnapshotChunk {
                        data,
                        ..Default::default()
                    };
                    Some((chunk, Some((chunks, crc))))
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "store copy failed while sending a snapshot");
                    None
                }
                None => {
                    let last = SnapshotChunk {
                        last: true,
                        crc32c: crc,
                        ..Default::default()
                    };
                    Some((last, None))
                }
            }
        }
    })
}

/// Keeps one stream open to `url` and feeds it from the queue, reconnecting after failures.
/// Ends when the queue's sender (the transport) is gone.
async fn stream_to(
    url: String,
    cluster_id: u64,
    tls: Option<Arc<PeerTls>>,
    local: Option<IpAddr>,
    queue: Arc<Mutex<mpsc::Receiver<Queued>>>,
    report: impl Fn(bool),
) {
    let mut backoff = BACKOFF_START;
    // Messages taken off the queue while the peer could not be reached, young enough to send.
    let mut held: VecDeque<Queued> = VecDeque::new();
    loop {
        let connected = match tls::endpoint(&url, tls.as_deref(), local) {
            Ok(e) => e.connect().await,
            Err(e) => {
                tracing::error!(%url, error = %e, "bad peer URL; not sending to it");
                return;
            }
        };
        match connected {
            Ok(channel) => {
                backoff = BACKOFF_START;
                report(true);
                let q = queue.clone();
                let queued = futures::stream::unfold(q, |q| async move {
                    let next = q.lock().await.recv().await;
                    next.map(|m| (m, q))
                });
                let outbound = futures::stream::iter(std::mem::take(&mut held))
                    .chain(queued)
                    .filter_map(|(at, data)| {
                        let young = at.elapsed() <= QUEUED_AT_MOST;
                        std::future::ready(young.then_some(RaftMessage { data }))
                    });
                let mut client = RaftPeerClient::new(channel);
                let mut req = Request::new(outbound);
                if let Ok(v) = format!("{cluster_id:x}").parse() {
                    req.metadata_mut().insert(CLUSTER_ID_HEADER, v);
                }
                match client.send(req).await {
                    // The queue closed: the transport is gone.
                    Ok(_) => return,
                    Err(e) if e.code() == tonic::Code::FailedPrecondition => {
                        tracing::error!(%url, error = %e.message(), "peer refused us");
                    }
                    Err(e) => tracing::debug!(%url, error = %e, "peer stream ended"),
                }
            }
            Err(e) => tracing::debug!(%url, error = %e, "peer unreachable"),
        }
        if queue.lock().await.is_closed() {
            return;
        }
        report(false);
        // What was queued for a peer we cannot reach is kept for the next attempt only while
        // it is young (see `QUEUED_AT_MOST`); the rest is dropped, as etcd's peer links drop
        // what they cannot send: raft sends again what still matters (appends, heartbeats,
        // votes), and a forwarded proposal must not reach a leader that comes back long after
        // its client gave up (it would overwrite newer writes).
        let dropped = hold_young(&queue, &mut held).await;
        tokio::time::sleep(backoff).await;
        let dropped = dropped + hold_young(&queue, &mut held).await;
        if dropped > 0 {
            tracing::debug!(%url, dropped, "messages for an unreachable peer dropped");
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Empties `queue` into `held` (after what is there already, so the order stays) and drops
/// from `held` every message older than [`QUEUED_AT_MOST`], and the oldest beyond
/// [`PEER_QUEUE`]: returns how many were dropped.
async fn hold_young(queue: &Mutex<mpsc::Receiver<Queued>>, held: &mut VecDeque<Queued>) -> usize {
    let mut q = queue.lock().await;
    while let Ok(m) = q.try_recv() {
        held.push_back(m);
    }
    let before = held.len();
    while held
        .front()
        .is_some_and(|(at, _)| at.elapsed() > QUEUED_AT_MOST || held.len() > PEER_QUEUE)
    {
        held.pop_front();
    }
    before - held.len()
}

/// Where the peer port delivers what it receives.
#[derive(Clone)]
pub struct PeerRoutes {
    /// Every raft message, stepped into the raft node.
    pub step: Recipient<Step>,
    /// Snapshot messages with their store copies.
    pub snapshot: Option<Recipient<StepSnapshot>>,
    /// The most bytes of store copy one snapshot may carry (the wiring sets it from the backend
    /// quota): this bounds the disk a sender can make the member fill (SECURITY.md).
    pub snapshot_limit: usize,
    /// Where a snapshot's store copy is written as it arrives (one at a time, never whole in
    /// memory), to be installed from there: the member's `member/snap`.
    pub snapshot_dir: std::path::PathBuf,
    /// The backend, which builds a received copy into a store beside its own before raft is
    /// handed the snapshot, so that installing it is a swap (`None`: raft gets the file).
    pub prepare: Option<Recipient<PrepareSnapshot>>,
    /// The applied membership, for members joining an existing cluster.
    pub members: Option<Recipient<GetMembers>>,
    /// The lessor, for keepalives and TTL questions followers forward to the leader.
    pub renew_lease: Option<Recipient<RenewLease>>,
    pub lease_ttl: Option<Recipient<LeaseTimeToLive>>,
    /// The raft node, for promotions a follower checks with the leader.
    pub learner_ready: Option<Recipient<CheckLearner>>,
    /// This member's hashes, for peers' corruption checks (the corruption checker).
    pub hash_kv: Option<Recipient<LocalHashKv>>,
}

/// A lessor answer as the peer port sends it: etcd's status for the error.
fn lease_status(e: EtcdError) -> Status {
    e.to_status()
}

/// The receiving side: every message read is stepped into the raft node.
pub struct PeerService {
    pub routes: PeerRoutes,
    pub cluster_id: u64,
    /// One snapshot received at a time.
    pub receiving: Arc<tokio::sync::Semaphore>,
}

impl PeerService {
    /// Refuses a sender of another cluster (see [`CLUSTER_ID_HEADER`]).
    fn check_cluster<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let theirs = req
            .metadata()
            .get(CLUSTER_ID_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| u64::from_str_radix(v, 16).ok());
        if theirs == Some(self.cluster_id) {
            return Ok(());
        }
        let msg = format!(
            "cluster ID mismatch: this member is in cluster {:x}, the sender in {}",
            self.cluster_id,
            theirs.map_or("(none)".to_string(), |c| format!("{c:x}"))
        );
        tracing::error!(remote = ?req.remote_addr(), "{msg}");
        Err(Status::failed_precondition(msg))
    }
}

#[tonic::async_trait]
impl RaftPeer for PeerService {
    async fn send(
        &self,
        req: Request<Streaming<RaftMessage>>,
    ) -> Result<Response<PeerAck>, Status> {
        self.check_cluster(&req)?;
        let mut inbound = req.into_inner();
        while let Some(m) = inbound.next().await {
            let m = m?;
            if self.routes.step.try_send(Step { msg: m.data }).is_err() {
                tracing::debug!("raft mailbox full; peer message dropped");
            }
        }
        Ok(Response::new(PeerAck {}))
    }

    async fn members(&self, _: Request<MembersRequest>) -> Result<Response<MembersReply>, Status> {
        let Some(members) = &self.routes.members else {
            return Err(Status::unavailable("membership not served here"));
        };
        let list = members
            .send(GetMembers)
            .await
            .map_err(|_| Status::unavailable("server stopping"))?;
        Ok(Response::new(MembersReply {
            cluster_id: self.cluster_id,
            members: list
                .into_iter()
                .map(|m| Member {
                    id: m.id,
                    name: m.name,
                    peer_ur_ls: m.peer_urls,
                    client_ur_ls: m.client_urls,
                    is_learner: m.is_learner,
                })
                .collect(),
        }))
    }

    async fn lease_renew(
        &self,
        req: Request<LeaseRenewRequest>,
    ) -> Result<Response<LeaseRenewReply>, Status> {
        self.check_cluster(&req)?;
        let Some(lessor) = &self.routes.renew_lease else {
            return Err(lease_status(EtcdError::NotLeader));
        };
        let id = req.into_inner().id;
        let ttl = lessor
            .send(RenewLease { id })
            .await
            .map_err(|_| lease_status(EtcdError::Stopped))?
            .map_err(lease_status)?;
        Ok(Response::new(LeaseRenewReply { ttl }))
    }

    async fn lease_ttl(
        &self,
        req: Request<LeaseRenewRequest>,
    ) -> Result<Response<LeaseTtlReply>, Status> {
        self.check_cluster(&req)?;
        let Some(lessor) = &self.routes.lease_ttl else {
            return Err(lease_status(EtcdError::NotLeader));
        };
        let id = req.into_inner().id;
        let t = lessor
            .send(LeaseTimeToLive { id })
            .await
            .map_err(|_| lease_status(EtcdError::Stopped))?
            .map_err(lease_status)?;
        Ok(Response::new(LeaseTtlReply {
            granted_ttl: t.granted_ttl,
            remaining_ttl: t.remaining_ttl,
        }))
    }

    async fn learner_ready(
        &self,
        req: Request<MemberIdRequest>,
    ) -> Result<Response<PeerAck>, Status> {
        self.check_cluster(&req)?;
        let Some(raft) = &self.routes.learner_ready else {
            return Err(lease_status(EtcdError::NotLeader));
        };
        let id = req.into_inner().id;
        raft.send(CheckLearner { id })
            .await
            .map_err(|_| lease_status(EtcdError::Stopped))?
            .map_err(lease_status)?;
        Ok(Response::new(PeerAck {}))
    }

    /// This member's HashKV at a revision, for a peer's corruption check; refusals carry
    /// etcd's text (compacted, future revision).
    async fn hash_kv(
        &self,
        req: Request<PeerHashKvRequest>,
    ) -> Result<Response<PeerHashKvReply>, Status> {
        self.check_cluster(&req)?;
        let Some(hasher) = &self.routes.hash_kv else {
            return Err(Status::unavailable("hashes are not served here"));
        };
        let revision = req.into_inner().revision;
        let h = hasher
            .send(LocalHashKv { revision })
            .await
            .map_err(|_| EtcdError::Stopped.to_status())?
            .map_err(|e| e.to_status())?;
        Ok(Response::new(PeerHashKvReply {
            member_id: h.member_id,
            hash: h.hash,
            compact_revision: h.compact_revision,
            revision: h.revision,
            hash_revision: h.hash_revision,
        }))
    }

    /// A snapshot: the raft message, the store copy in chunks, and its CRC32C. Only a whole,
    /// intact copy reaches raft.
    async fn snapshot(
        &self,
        req: Request<Streaming<SnapshotChunk>>,
    ) -> Result<Response<PeerAck>, Status> {
        self.check_cluster(&req)?;
        let Some(deliver) = &self.routes.snapshot else {
            return Err(Status::unavailable("snapshots are not taken here"));
        };
        // One at a time: a second sender waits, holding nothing but its stream.
        let _one = self
            .receiving
            .acquire()
            .await
            .map_err(|_| Status::unavailable("server stopping"))?;
        let mut inbound = req.into_inner();
        let path = SnapshotBlob::incoming_path(&self.routes.snapshot_dir);
        let local = |e: std::io::Error| {
            tracing::error!(path = %path.display(), error = %e, "cannot write a received snapshot");
            Status::internal(format!("snapshot not stored: {e}"))
        };
        // Removed when dropped: a copy not received whole and intact goes at once.
        let (blob, file) = SnapshotBlob::create(path.clone()).map_err(local)?;
        let mut file =
            tokio::io::BufWriter::with_capacity(4 << 20, tokio::fs::File::from_std(file));
        let mut msg = Vec::new();
        let mut received = 0u64;
        let mut crc = 0u32;
        let mut last = None;
        while let Some(chunk) = inbound.next().await {
            let chunk = chunk?;
            if !chunk.raft_message.is_empty() {
                msg = chunk.raft_message;
            }
            received = received.saturating_add(chunk.data.len() as u64);
            if received > self.routes.snapshot_limit as u64 {
                tracing::warn!(
                    limit = self.routes.snapshot_limit,
                    "refused a snapshot larger than this member's store may be"
                );
                return Err(Status::resource_exhausted(format!(
                    "snapshot larger than {} bytes",
                    self.routes.snapshot_limit
                )));
            }
            crc = crc32c::crc32c_append(crc, &chunk.data);
            file.write_all(&chunk.data).await.map_err(local)?;
            if chunk.last {
                last = Some(chunk.crc32c);
                break;
            }
        }
        match last {
            Some(c) if c == crc && !msg.is_empty() => {}
            Some(_) => return Err(Status::data_loss("snapshot checksum mismatch")),
            None => return Err(Status::aborted("snapshot stream ended early")),
        }
        file.flush().await.map_err(local)?;
        drop(file);
        tracing::info!(bytes = received, "snapshot received");
        let data = match &self.routes.prepare {
            None => StoreCopy::Blob(blob),
            Some(prepare) => {
                let prepared = prepare
                    .send(PrepareSnapshot { blob })
                    .await
                    .map_err(|_| Status::unavailable("server stopping"))?;
                let prepared = prepared.map_err(|e| {
                    tracing::error!(error = %e, "a received snapshot could not be built into a store");
                    Status::internal(e)
                })?;
                StoreCopy::Prepared(prepared)
            }
        };
        deliver
            .send(StepSnapshot { msg, data })
            .await
            .map_err(|_| Status::unavailable("server stopping"))?;
        Ok(Response::new(PeerAck {}))
    }
}

/// Asks the member at `url` for the cluster's members (how a member joining an existing
/// cluster learns its id and the cluster's).
pub async fn fetch_members(
    url: &str,
    tls: Option<&PeerTls>,
    local: Option<IpAddr>,
) -> Result<MembersReply, String> {
    let channel = tls::endpoint(url, tls, local)?
        .timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| e.to_string())?;
    RaftPeerClient::new(channel)
        .members(MembersRequest {})
        .await
        .map(tonic::Response::into_inner)
        .map_err(|e| e.message().to_string())
}

/// A bound peer listener: a TCP port, or the socket file of a `unix://` or `unixs://` peer URL
/// (served plain, as etcd's unix listener is).
#[derive(Debug)]
pub enum PeerListener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

impl From<tokio::net::TcpListener> for PeerListener {
    fn from(l: tokio::net::TcpListener) -> Self {
        PeerListener::Tcp(l)
    }
}

/// Serves the peer port on `listener` until `shutdown` resolves.
pub async fn serve_peers(
    listener: impl Into<PeerListener>,
    routes: PeerRoutes,
    cluster_id: u64,
    tls: Option<&PeerTls>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let service = RaftPeerServer::new(PeerService {
        routes,
        cluster_id,
        receiving: Arc::new(tokio::sync::Semaphore::new(1)),
    })
    .max_decoding_message_size(MAX_MESSAGE_BYTES);
    match listener.into() {
        PeerListener::Tcp(listener) => {
            tls::server(tls)?
                .add_service(service)
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    shutdown,
                )
                .await
        }
        PeerListener::Unix(listener) => {
            tls::server(None)?
                .add_service(service)
                .serve_unix_with_shutdown(listener, shutdown)
                .await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink_routes(sink: Addr<Sink>) -> PeerRoutes {
        PeerRoutes {
            step: sink.recipient(),
            snapshot: None,
            snapshot_limit: usize::MAX,
            snapshot_dir: std::env::temp_dir(),
            prepare: None,
            members: None,
            renew_lease: None,
            lease_ttl: None,
            learner_ready: None,
            hash_kv: None,
        }
    }

    /// Records what it is stepped with.
    struct Sink(tokio::sync::mpsc::UnboundedSender<Vec<u8>>);

    impl Actor for Sink {
        type Context = Context<Self>;
        fn started(&mut self, ctx: &mut Self::Context) {
            ctx.set_mailbox_capacity(65536);
        }
    }

    impl Handler<Step> for Sink {
        type Result = ();
        fn handle(&mut self, msg: Step, _: &mut Self::Context) {
            let _ = self.0.send(msg.msg);
        }
    }

    /// A transport of cluster 7 sending to member 2 at an address nothing listens on (yet).
    async fn sending_to_an_absent_peer() -> (Addr<TransportActor>, std::net::SocketAddr) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let transport = TransportActor::new(7).start();
        transport
            .send(AddPeer {
                id: 2,
                urls: vec![format!("http://{addr}")],
                unreachable: None,
            })
            .await
            .unwrap();
        (transport, addr)
    }

    /// Member 2's peer port comes up at `addr`: what it receives, and its stop.
    async fn peer_comes_up(
        addr: std::net::SocketAddr,
    ) -> (
        tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
        tokio::sync::oneshot::Sender<()>,
    ) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let sink = Sink(tx).start();
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        actix::spawn(async move {
            let _ = serve_peers(listener, sink_routes(sink), 7, None, async {
                let _ = stop_rx.await;
            })
            .await;
        });
        (rx, stop_tx)
    }

    /// Held messages age on the (paused) clock: the young stay, in order, the old go.
    #[tokio::test(start_paused = true)]
    async fn only_young_messages_are_held_for_the_next_attempt() {
        let (tx, rx) = mpsc::channel(PEER_QUEUE);
        let queue = Mutex::new(rx);
        let mut held = VecDeque::new();
        let now = tokio::time::Instant::now;
        tx.try_send((now(), vec![1])).unwrap();
        tokio::time::advance(Duration::from_millis(600)).await;
        tx.try_send((now(), vec![2])).unwrap();
        assert_eq!(hold_young(&queue, &mut held).await, 0);
        tokio::time::advance(Duration::from_millis(500)).await;
        tx.try_send((now(), vec![3])).unwrap();
        // 1 is 1.1 s old now: dropped; 2 (0.5 s) and 3 stay, in order.
        assert_eq!(hold_young(&queue, &mut held).await, 1);
        let kept: Vec<_> = held.iter().map(|(_, m)| m.clone()).collect();
        assert_eq!(kept, vec![vec![2], vec![3]]);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(hold_young(&queue, &mut held).await, 2);
        assert!(held.is_empty());
    }

    #[actix::test]
    async fn what_a_dead_peer_missed_is_dropped_and_the_rest_arrives_in_order() {
        // The sender starts first: what it queued more than `QUEUED_AT_MOST` before the peer
        // could be reached is dropped (a forwarded proposal must not reach a leader that comes
        // back long after its client gave up); once the stream is up, messages arrive in
        // order.
        let (transport, addr) = sending_to_an_absent_peer().await;
        for i in 100..200u8 {
            transport.do_send(PeerMessage {
                to: 2,
                msg: vec![i],
            });
        }
        // Messages to unknown members are dropped, not queued.
        transport.do_send(PeerMessage {
            to: 9,
            msg: vec![0],
        });
        // Let the stream fail with those queued until they are too old to send.
        tokio::time::sleep(QUEUED_AT_MOST + Duration::from_millis(300)).await;

        let (mut rx, stop_tx) = peer_comes_up(addr).await;
        // Probe until the stream is up.
        let first = loop {
            transport.do_send(PeerMessage {
                to: 2,
                msg: vec![250],
            });
            if let Ok(Some(got)) = tokio::time::timeout(Duration::from_millis(100), rx.recv()).await
            {
                break got;
            }
        };
        assert_eq!(
            first,
            vec![250],
            "nothing queued while the peer was down arrives"
        );
        for i in 0..100u8 {
            transport.do_send(PeerMessage {
                to: 2,
                msg: vec![i],
            });
        }
        let mut want = 0u8;
        while want < 100 {
            let got = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .expect("delivered")
                .unwrap();
            if got == vec![250] {
                continue;
            }
            assert_eq!(got, vec![want], "in order, and none of the dropped ones");
            want += 1;
        }
        let _ = stop_tx.send(());
    }

    #[actix::test]
    async fn what_is_queued_while_a_peer_is_briefly_unreachable_arrives_in_order() {
        // A follower's proposals forwarded while its stream to a new leader is still being
        // dialled: the first attempts fail, the peer comes up within the second, and every
        // message arrives, in order.
        let (transport, addr) = sending_to_an_absent_peer().await;
        // Let the first attempt fail before anything is queued.
        tokio::time::sleep(Duration::from_millis(50)).await;
        for i in 0..20u8 {
            transport.do_send(PeerMessage {
                to: 2,
                msg: vec![i],
            });
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
        let (mut rx, stop_tx) = peer_comes_up(addr).await;
        for want in 0..20u8 {
            let got = tokio::time::timeout(QUEUED_AT_MOST, rx.recv())
                .await
                .expect("delivered while still young")
                .unwrap();
            assert_eq!(got, vec![want]);
        }
        let _ = stop_tx.send(());
    }

    /// Answers `LocalHashKv` as member 2 whose store is compacted at 5 and at revision 9.
    struct Hasher;

    impl Actor for Hasher {
        type Context = Context<Self>;
    }

    impl Handler<LocalHashKv> for Hasher {
        type Result = Result<MemberHash, EtcdError>;
        fn handle(&mut self, msg: LocalHashKv, _: &mut Self::Context) -> Self::Result {
            match msg.revision {
                r if r > 9 => Err(EtcdError::FutureRevision),
                r if r > 0 && r <= 5 => Err(EtcdError::Compacted),
                r => Ok(MemberHash {
                    member_id: 2,
                    hash: 0xabcd,
                    compact_revision: 5,
                    revision: 9,
                    hash_revision: if r == 0 { 9 } else { r },
                }),
            }
        }
    }

    /// Hears each copy delivered: its size and CRC32C, read through its map.
    struct Snapshots(tokio::sync::mpsc::UnboundedSender<(u64, u32)>);
    impl Actor for Snapshots {
        type Context = Context<Self>;
    }
    impl Handler<StepSnapshot> for Snapshots {
        type Result = ();
        fn handle(&mut self, msg: StepSnapshot, _: &mut Self::Context) {
            let StoreCopy::Blob(blob) = msg.data else {
                panic!("no backend here to prepare a store");
            };
            let crc = crc32c::crc32c(&blob.map().unwrap());
            let _ = self.0.send((blob.len(), crc));
        }
    }

    fn files_in(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir).unwrap().count()
    }

    /// A snapshot stream past the member's limit is refused at the chunk that crosses it (the
    /// member never stores more than the limit), as is one whose checksum fails; one within it
    /// is written to the snapshot directory and delivered, and no copy is left behind.
    #[actix::test]
    async fn a_snapshot_past_the_limit_is_refused_before_it_is_held() {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let (got_tx, mut got) = tokio::sync::mpsc::unbounded_channel();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let routes = PeerRoutes {
            snapshot: Some(Snapshots(got_tx).start().recipient()),
            snapshot_limit: 3 * 1024 * 1024,
            snapshot_dir: dir.path().to_path_buf(),
            ..sink_routes(Sink(tx).start())
        };
        actix::spawn(async move {
            let _ = serve_peers(listener, routes, 7, None, std::future::pending()).await;
        });
        let send = |megabytes: usize, crc_of: fn(&[u8]) -> u32| async move {
            let data: Vec<u8> = (0..megabytes * 1024 * 1024).map(|i| i as u8).collect();
            let chunks: Vec<_> = data
                .chunks(actcd_types::msg::SNAPSHOT_CHUNK)
                .map(|c| SnapshotChunk {
                    data: c.to_vec(),
                    ..Default::default()
                })
                .collect();
            let crc = crc_of(&data);
            let mut chunks = [SnapshotChunk {
                raft_message: vec![1],
                ..Default::default()
            }]
            .into_iter()
            .chain(chunks)
            .collect::<Vec<_>>();
            chunks.push(SnapshotChunk {
                last: true,
                crc32c: crc,
                ..Default::default()
            });
            let mut req = Request::new(futures::stream::iter(chunks));
            req.metadata_mut()
                .insert(CLUSTER_ID_HEADER, "7".parse().unwrap());
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
                .unwrap()
                .connect()
                .await
                .unwrap();
            RaftPeerClient::new(channel)
                .max_encoding_message_size(usize::MAX)
                .snapshot(req)
                .await
                .map(|_| ())
        };
        let refused = send(8, crc32c::crc32c).await.unwrap_err();
        assert_eq!(
            refused.code(),
            tonic::Code::ResourceExhausted,
            "{refused:?}"
        );
        assert_eq!(files_in(dir.path()), 0, "the refused copy is not kept");
        let damaged = send(2, |d| crc32c::crc32c(d) ^ 1).await.unwrap_err();
        assert_eq!(damaged.code(), tonic::Code::DataLoss, "{damaged:?}");
        assert_eq!(files_in(dir.path()), 0, "the damaged copy is not kept");
        send(2, crc32c::crc32c).await.unwrap();
        let data: Vec<u8> = (0..2 * 1024 * 1024).map(|i| i as u8).collect();
        assert_eq!(
            got.recv().await,
            Some((data.len() as u64, crc32c::crc32c(&data)))
        );
        assert!(got.try_recv().is_err(), "a refused snapshot was delivered");
        assert_eq!(
            files_in(dir.path()),
            0,
            "the delivered copy goes once dropped"
        );
    }

    /// The sending side: the store's chunks as they come, closed by their CRC32C; a failed
    /// store read ends the stream unclosed, so the peer refuses it.
    #[actix::test]
    async fn a_copy_is_sent_as_the_store_reads_it_and_a_failed_read_is_never_closed() {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send(Ok(vec![1, 2, 3])).await.unwrap();
        tx.send(Ok(vec![4, 5])).await.unwrap();
        drop(tx);
        let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let chunks: Vec<_> = copy_chunks(rx, Arc::clone(&sent)).collect().await;
        let data: Vec<_> = chunks.iter().map(|c| c.data.clone()).collect();
        assert_eq!(data, [vec![1, 2, 3], vec![4, 5], vec![]]);
        let last = chunks.last().unwrap();
        assert!(last.last);
        assert_eq!(last.crc32c, crc32c::crc32c(&[1, 2, 3, 4, 5]));
        assert_eq!(sent.load(std::sync::atomic::Ordering::Relaxed), 5);

        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send(Ok(vec![1])).await.unwrap();
        tx.send(Err("disk".into())).await.unwrap();
        tx.send(Ok(vec![2])).await.unwrap();
        let chunks: Vec<_> = copy_chunks(rx, sent).collect().await;
        assert_eq!(chunks.len(), 1);
        assert!(chunks.iter().all(|c| !c.last));
    }

    /// etcd #22161 (3.5.33: the peer lease handler read a body of any size): a peer call past
    /// `MAX_MESSAGE_BYTES` is refused by the decoder before it is read into a request.
    #[actix::test]
    async fn a_peer_call_past_the_message_limit_is_refused() {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let routes = sink_routes(Sink(tx).start());
        actix::spawn(async move {
            let _ = serve_peers(listener, routes, 7, None, std::future::pending()).await;
        });
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut grpc = tonic::client::Grpc::new(channel).max_encoding_message_size(usize::MAX);
        grpc.ready().await.unwrap();
        // A body of an unknown field, one byte past the limit, sent as a LeaseRenew.
        let big = SnapshotChunk {
            data: vec![0; MAX_MESSAGE_BYTES + 1],
            ..Default::default()
        };
        let mut req = Request::new(big);
        req.metadata_mut()
            .insert(CLUSTER_ID_HEADER, "7".parse().unwrap());
        let codec: tonic_prost::ProstCodec<SnapshotChunk, LeaseRenewReply> =
            tonic_prost::ProstCodec::default();
        let refused = grpc
            .unary(
                req,
                http::uri::PathAndQuery::from_static("/actcdpb.RaftPeer/LeaseRenew"),
                codec,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(
                refused.code(),
                tonic::Code::ResourceExhausted | tonic::Code::OutOfRange
            ),
            "{refused:?}"
        );
    }

    #[actix::test]
    async fn peers_answer_hash_kv_to_members_of_their_cluster_only() {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let routes = PeerRoutes {
            hash_kv: Some(Hasher.start().recipient()),
            ..sink_routes(Sink(tx).start())
        };
        actix::spawn(async move {
            let _ = serve_peers(listener, routes, 7, None, std::future::pending()).await;
        });
        let ours = TransportActor::new(7).start();
        let theirs = TransportActor::new(8).start();
        for t in [&ours, &theirs] {
            t.send(AddPeer {
                id: 2,
                urls: vec![format!("http://{addr}")],
                unreachable: None,
            })
            .await
            .unwrap();
        }
        let ask =
            |t: &Addr<TransportActor>, to: u64, revision: i64| t.send(PeerHashKv { to, revision });
        let got = ask(&ours, 2, 7).await.unwrap().unwrap();
        assert_eq!(
            got,
            MemberHash {
                member_id: 2,
                hash: 0xabcd,
                compact_revision: 5,
                revision: 9,
                hash_revision: 7,
            }
        );
        assert_eq!(ask(&ours, 2, 3).await.unwrap(), Err(EtcdError::Compacted));
        assert_eq!(
            ask(&ours, 2, 10).await.unwrap(),
            Err(EtcdError::FutureRevision)
        );
        let refused = ask(&theirs, 2, 7).await.unwrap().unwrap_err();
        assert!(
            refused.to_string().contains("cluster ID mismatch"),
            "{refused}"
        );
        let unknown = ask(&ours, 3, 7).await.unwrap().unwrap_err();
        assert!(
            unknown.to_string().contains("not a known peer"),
            "{unknown}"
        );
    }

    #[actix::test]
    async fn a_member_of_another_cluster_is_refused() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let sink = Sink(tx).start();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        actix::spawn(async move {
            let _ = serve_peers(listener, sink_routes(sink), 7, None, std::future::pending()).await;
        });
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        for theirs in [Some("8"), None] {
            let mut req = Request::new(futures::stream::iter([RaftMessage { data: vec![1] }]));
            if let Some(c) = theirs {
                req.metadata_mut()
                    .insert(CLUSTER_ID_HEADER, c.parse().unwrap());
            }
            let got = RaftPeerClient::new(channel.clone()).send(req).await;
            assert_eq!(
                got.unwrap_err().code(),
                tonic::Code::FailedPrecondition,
                "{theirs:?}"
            );
        }
        // The same cluster is let in, and only its message arrives.
        let mut req = Request::new(futures::stream::iter([RaftMessage { data: vec![2] }]));
        req.metadata_mut()
            .insert(CLUSTER_ID_HEADER, "7".parse().unwrap());
        RaftPeerClient::new(channel).send(req).await.unwrap();
        assert_eq!(rx.recv().await.unwrap(), vec![2]);
    }
}

impl TransportActor {
    /// Send failures, whether the stream is up, and disconnections, by peer (every known peer
    /// listed, from zero). The `Remote` series get their `Local` label from the front, which
    /// knows this member's id.
    fn samples(&self) -> Vec<actcd_types::meter::Sample> {
        use actcd_types::meter::{Sample, SampleValue};
        let mut peers: Vec<u64> = self.queues.keys().copied().collect();
        peers.sort_unstable();
        let by_peer = |name: &'static str, label: &'static str, v: &dyn Fn(u64) -> u64| {
            peers
                .iter()
                .map(|id| Sample {
                    name,
                    labels: vec![(label, format!("{id:x}"))],
                    value: SampleValue::Value(v(*id) as f64),
                })
                .collect::<Vec<_>>()
        };
        let count = |m: &HashMap<u64, u64>, id: u64| m.get(&id).copied().unwrap_or(0);
        let mut out = by_peer("etcd_network_peer_sent_failures_total", "To", &|id| {
            count(&self.sent_failures, id)
        });
        out.extend(by_peer("etcd_network_active_peers", "Remote", &|id| {
            u64::from(self.active_since.contains_key(&id))
        }));
        out.extend(by_peer(
            "etcd_network_disconnected_peers_total",
            "Remote",
            &|id| count(&self.disconnects, id),
        ));
        out
    }
}

actcd_types::impl_mailbox_probe!(TransportActor, meter, samples);
