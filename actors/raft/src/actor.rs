use std::collections::{BTreeMap, HashMap};

use actcd_types::EtcdError;
use actcd_types::msg::{
    Append, Applied, Apply, ApplyConfChange, CheckLearner, ConfChangeKind, Fatal, InstallSnapshot,
    Leadership, PeerChange, PeerMessage, Propose, ProposeConfChange, RaftProgress, RaftStatus,
    RaftStatusReply, ReadIndex, ReleaseWal, SendSnapshot, Shutdown, SnapshotReport, Step,
    StepSnapshot, SyncConf, SyncStorage, Tick, TransferLeader, Unreachable,
};
use actix::prelude::*;
use tokio::sync::oneshot;

use crate::node::{RaftNode, ReadyOutput};

/// Where the node's work goes. Handed over by the daemon at start-up.
#[derive(Clone)]
pub struct RaftPeers {
    pub wal: Recipient<Append>,
    pub release: Recipient<ReleaseWal>,
    pub applier: Recipient<Apply>,
    pub progress: Recipient<RaftProgress>,
    pub sync_storage: Recipient<SyncStorage>,
    pub outbox: Option<Recipient<PeerMessage>>,
    /// Told when this member becomes leader or stops being it (the lessor expires leases only
    /// on the leader).
    pub leadership: Option<Recipient<Leadership>>,
    /// The transport's address book, kept in step with applied membership changes.
    pub peer_book: Option<Recipient<PeerChange>>,
    /// Where snapshot messages go (the transport attaches a store copy).
    pub snapshots: Option<Recipient<SendSnapshot>>,
    /// Where a snapshot from the leader is installed (the applier, in log order).
    pub install: Option<Recipient<InstallSnapshot>>,
    /// Told whether this member is a learner whenever the configuration changes (the front
    /// serves a learner less).
    pub learner: Option<tokio::sync::watch::Sender<bool>>,
    /// The current leader's id (0 while there is none), published at every change: requests
    /// the front holds through an election (keepalives, reads) wake on it.
    pub leader: Option<tokio::sync::watch::Sender<u64>>,
    /// The daemon's supervisor, told once when the node cannot go on (the WAL refused a write,
    /// a snapshot could not be installed); the node then stops itself.
    pub fatal: Recipient<Fatal>,
    /// The daemon's supervisor, told when this member applied its own removal.
    pub shutdown: Recipient<Shutdown>,
}

/// The WAL made Ready `number` durable.
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct Persisted {
    number: u64,
    persisted_messages: Vec<PeerMessage>,
}

/// Take and handle every pending Ready (sent to self so queued input batches into one Ready).
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct ProcessReady;

/// Start one read-index round for every read queued so far.
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct FlushReads;

/// A `ReadIndex` caller waiting for its read index to be confirmed and applied (or for its
/// round to fail): answered with the index, after which it reads the store's newest view.
struct ReadWaiter(oneshot::Sender<Result<u64, EtcdError>>);

impl ReadWaiter {
    fn finish(self, result: Result<u64, EtcdError>) {
        let _ = self.0.send(result);
    }
}

pub struct RaftActor {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: std::sync::Arc<actcd_types::meter::Meter>,
    node: RaftNode,
    peers: RaftPeers,
    ready_scheduled: bool,
    /// `Append`s sent to the WAL and not answered yet.
    appends_in_flight: usize,
    /// Readies with new entries taken while earlier ones are still being persisted, at most
    /// (the crate doc, "Pipelined persistence").
    pipeline_depth: usize,
    /// Reads waiting for the next round.
    queued_reads: Vec<ReadWaiter>,
    /// Rounds in flight, by request context.
    read_rounds: HashMap<u64, Vec<ReadWaiter>>,
    /// Confirmed reads waiting for the applier to reach their read index.
    reads_awaiting_apply: BTreeMap<u64, Vec<ReadWaiter>>,
    /// Read-index contexts: unique across members and restarts (the leader keeps one pending
    /// read per context and drops a second with one it already holds, so a restarted member
    /// or another member counting from 1 again would lose its reads).
    read_ids: actcd_types::ids::IdGenerator,
    snapshot_count: u64,
    catchup_entries: u64,
    last_snapshot: u64,
    compacting: bool,
    /// The store copy of the last snapshot message stepped in: (snapshot index, data).
    incoming: Option<(u64, actcd_types::snapshot_blob::StoreCopy)>,
    /// A snapshot installed by the Ready being persisted: applied once persisted.
    installed: Option<u64>,
    /// A snapshot is being installed into the store: no further Ready is taken until its own
    /// Ready went to the WAL (a later one would reach the WAL, and count as persisted, first).
    installing: bool,
    /// Proposals made while no leader was known, with until when they may wait: proposed as
    /// soon as a leader is, unless their client's deadline (if it sent one) or `proposal_ttl`
    /// has passed by then — a write its client saw fail must not commit later. etcd's raft
    /// node holds proposals the same way, and its callers time out.
    waiting_for_leader: Vec<(tokio::time::Instant, Vec<u8>)>,
    proposal_ttl: std::time::Duration,
    /// When this member learned of the current leader.
    leader_since: Option<tokio::time::Instant>,
    /// Leaders seen since start.
    leader_changes: u64,
    /// A fatal error was reported: nothing more is written, applied or answered.
    failed: bool,
    /// Peer traffic for `/metrics` (read when a `MailboxProbe` asks).
    traffic: PeerTraffic,
}

/// etcd's buckets for `etcd_network_peer_round_trip_time_seconds`: 0.1 ms doubling, 16.
const RTT_BUCKETS: [f64; 16] = actcd_types::meter::exponential_buckets(0.0001, 2.0);

/// Bytes of raft messages sent to and received from each peer, and heartbeat round trips
/// (from a heartbeat to its answer, as the leader sees them; etcd's prober measures the same
/// link with pings of its own).
#[derive(Default)]
struct PeerTraffic {
    sent: HashMap<u64, u64>,
    received: HashMap<u64, u64>,
    /// The oldest unanswered heartbeat to each peer.
    heartbeat_sent: HashMap<u64, std::time::Instant>,
    round_trips: HashMap<u64, actcd_types::meter::Histogram>,
    /// Heartbeats the transport's mailbox refused (etcd's
    /// `etcd_server_heartbeat_send_failures_total`).
    heartbeat_send_failures: u64,
    /// Read-index rounds that failed: cut short by a leader change or refused by raft (etcd's
    /// `etcd_server_read_indexes_failed_total`).
    read_indexes_failed: u64,
    /// Read states that came back for a round no longer waited for (etcd's
    /// `etcd_server_slow_read_indexes_total` counts these "out-of-date" answers; the front adds
    /// the rounds that timed out).
    slow_read_indexes: u64,
    /// Learners promoted while this member led (etcd's
    /// `etcd_server_learner_promote_successes`).
    promotions: u64,
}

/// Readies with new entries on their way to the WAL at once, by default (measured: the crate
/// doc, "Pipelined persistence").
pub const DEFAULT_PIPELINE_DEPTH: usize = 2;

/// Proposals held while there is no leader, at most.
const MAX_WAITING_FOR_LEADER: usize = 16_384;

impl RaftActor {
    pub fn new(
        node: RaftNode,
        peers: RaftPeers,
        snapshot_count: u64,
        catchup_entries: u64,
    ) -> Self {
        let last_snapshot = node.applied();
        Self {
            meter: actcd_types::meter::Meter::new(),
            traffic: PeerTraffic::default(),
            node,
            peers,
            ready_scheduled: false,
            appends_in_flight: 0,
            pipeline_depth: DEFAULT_PIPELINE_DEPTH,
            queued_reads: Vec::new(),
            read_rounds: HashMap::new(),
            reads_awaiting_apply: BTreeMap::new(),
            read_ids: actcd_types::ids::IdGenerator::new(0, 0),
            snapshot_count: snapshot_count.max(1),
            catchup_entries,
            last_snapshot,
            compacting: false,
            incoming: None,
            installed: None,
            installing: false,
            waiting_for_leader: Vec::new(),
            proposal_ttl: std::time::Duration::from_secs(5),
            leader_since: None,
            leader_changes: 0,
            failed: false,
        }
    }

    /// The node cannot go on: tell the supervisor once, fail every waiting read, and stop this
    /// actor (raft must not acknowledge anything after its log failed). Stopping the member is
    /// the supervisor's call.
    fn fail(&mut self, error: String, ctx: &mut Context<Self>) {
        if std::mem::replace(&mut self.failed, true) {
            return;
        }
        self.peers.fatal.do_send(Fatal {
            actor: "raft",
            error,
        });
        self.fail_all(EtcdError::Stopped);
        ctx.stop();
    }

    /// How long a proposal made without a leader waits for one (the front's request timeout).
    /// Where read-index contexts come from (the daemon: this member's id and its start time).
    pub fn with_read_ids(mut self, ids: actcd_types::ids::IdGenerator) -> Self {
        self.read_ids = ids;
        self
    }

    /// How many Readies with new entries may be on their way to the WAL at once (at least 1).
    pub fn with_pipeline_depth(mut self, depth: usize) -> Self {
        self.pipeline_depth = depth.max(1);
        self
    }

    pub fn with_proposal_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.proposal_ttl = ttl;
        self
    }

    fn queue_read(&mut self, waiter: ReadWaiter, ctx: &mut Context<Self>) {
        if self.queued_reads.is_empty() {
            ctx.notify(FlushReads);
        }
        self.queued_reads.push(waiter);
    }

    fn schedule_ready(&mut self, ctx: &mut Context<Self>) {
        if !self.ready_scheduled {
            self.ready_scheduled = true;
            ctx.notify(ProcessReady);
        }
    }

    fn send_peers(&mut self, msgs: Vec<PeerMessage>) {
        if let Some(outbox) = &self.peers.outbox {
            for m in msgs {
                *self.traffic.sent.entry(m.to).or_default() += m.msg.len() as u64;
                if crate::node::is_heartbeat(&m.msg) {
                    self.traffic
                        .heartbeat_sent
                        .entry(m.to)
                        .or_insert_with(std::time::Instant::now);
                }
                let heartbeat = crate::node::is_heartbeat(&m.msg);
                // Peer traffic is best effort: raft retries what is lost.
                if outbox.try_send(m).is_err() && heartbeat {
                    self.traffic.heartbeat_send_failures += 1;
                }
            }
        }
    }

    fn handle_ready(&mut self, out: ReadyOutput, ctx: &mut Context<Self>) {
        if self.failed {
            return;
        }
        if let Some(leader) = out.leader_changed {
            self.leader_since = (leader != 0).then(tokio::time::Instant::now);
            if leader != 0 {
                self.leader_changes += 1;
                self.propose_waiting(ctx);
            }
        }
        if out.leader_changed.is_some() {
            let leader = self.node.is_leader();
            if let Some(l) = &self.peers.leadership {
                l.do_send(Leadership { leader });
            }
            // After the lessor's `Leadership`: a keepalive the front sends on seeing this
            // member lead reaches the lessor after its promotion (one mailbox, in order).
            if let (Some(tx), Some(id)) = (&self.peers.leader, out.leader_changed) {
                tx.send_replace(id);
            }
            // Reads of the old term can no longer be confirmed.
            self.node.forget_reads();
            self.traffic.read_indexes_failed += self.read_rounds.len() as u64;
            for w in self.read_rounds.drain().flat_map(|(_, ws)| ws) {
                w.finish(Err(EtcdError::LeaderChanged));
            }
        }
        self.send_peers(out.messages);
        if let Some(tx) = &self.peers.snapshots {
            for (to, index, message) in out.snapshots_out {
                tx.do_send(SendSnapshot { to, index, message });
            }
        }
        if !out.committed.is_empty() {
            self.peers.applier.do_send(Apply {
                entries: out.committed,
            });
        }
        for (rctx, index) in out.reads {
            let Ok(key) = <[u8; 8]>::try_from(rctx.as_slice()) else {
                continue;
            };
            if let Some(waiters) = self.read_rounds.remove(&u64::from_be_bytes(key)) {
                if index <= self.node.applied() {
                    for w in waiters {
                        w.finish(Ok(index));
                    }
                } else {
                    self.reads_awaiting_apply
                        .entry(index)
                        .or_default()
                        .extend(waiters);
                }
            } else {
                self.traffic.slow_read_indexes += 1;
            }
        }
        let number = out.number;
        let persisted_messages = out.persisted_messages;
        let append = Append {
            hard_state: out.hard_state,
            entries: out.entries,
        };
        if let Some((index, term, conf_state)) = out.snapshot {
            self.install_snapshot(
                index,
                term,
                conf_state,
                append,
                number,
                persisted_messages,
                ctx,
            );
            self.peers.progress.do_send(RaftProgress {
                committed: self.node.committed(),
                applied: self.node.applied(),
            });
            return;
        }
        if !out.must_sync && self.appends_in_flight == 0 {
            // Nothing to make durable, and every earlier Ready is: the Ready counts as persisted
            // now (its `Persisted` queues behind theirs). A moved commit index goes to the WAL
            // without waiting, in order with later appends; it is written with the next write.
            if append.hard_state.is_some() {
                self.peers.wal.do_send(append);
            }
            ctx.notify(Persisted {
                number,
                persisted_messages,
            });
        } else {
            self.persist(append, number, persisted_messages, ctx);
        }
        self.peers.progress.do_send(RaftProgress {
            committed: self.node.committed(),
            applied: self.node.applied(),
        });
    }

    /// Sends the Ready's writes to the WAL; once they are durable the Ready counts as persisted.
    /// The node goes on meanwhile: it steps peer messages, takes proposals and ticks, and takes
    /// further Readies up to the pipeline depth. The WAL writer answers appends in the order
    /// they were sent, so `Persisted` arrive in Ready order.
    fn persist(
        &mut self,
        append: Append,
        number: u64,
        persisted_messages: Vec<PeerMessage>,
        ctx: &mut Context<Self>,
    ) {
        self.appends_in_flight += 1;
        self.peers
            .wal
            .send(append)
            .into_actor(self)
            .map(move |res, act, ctx| {
                act.appends_in_flight -= 1;
                match res {
                    Ok(Ok(())) => ctx.notify(Persisted {
                        number,
                        persisted_messages,
                    }),
                    // Raft cannot go on without its log: stop instead of acknowledging anything.
                    Ok(Err(e)) => act.fail(format!("WAL append failed: {e}"), ctx),
                    Err(_) => act.fail_all(EtcdError::Stopped),
                }
            })
            .spawn(ctx);
    }

    /// Raft accepted a snapshot from the leader. Before the Ready is persisted: the store
    /// replaces its state with the copy that came with the message (durably), then the WAL
    /// marks the snapshot (dropping the log below it), then the Ready's own writes. A crash in
    /// between leaves either the old store with the old log, or the new store (whose
    /// consistent index covers the mark) with a log that replays from it. Nothing else runs on
    /// this actor meanwhile.
    #[allow(clippy::too_many_arguments)]
    fn install_snapshot(
        &mut self,
        index: u64,
        term: u64,
        conf_state: Vec<u8>,
        append: Append,
        number: u64,
        persisted_messages: Vec<PeerMessage>,
        ctx: &mut Context<Self>,
    ) {
        let data = match self.incoming.take() {
            Some((i, d)) if i == index => d,
            _ => {
                let e =
                    format!("raft accepted a snapshot at index {index} whose data never arrived");
                self.fail(e, ctx);
                return;
            }
        };
        let Some(install) = self.peers.install.clone() else {
            self.fail("no state machine to install a snapshot into".into(), ctx);
            return;
        };
        let release = self.peers.release.clone();
        self.installing = true;
        let work = async move {
            install
                .send(InstallSnapshot { index, data })
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            release
                .send(ReleaseWal {
                    index,
                    term,
                    conf_state,
                })
                .await
                .map_err(|e| e.to_string())?
        };
        work.into_actor(self)
            .map(move |res, act, ctx| {
                act.installing = false;
                match res {
                    Ok(()) => {
                        act.installed = Some(index);
                        act.persist(append, number, persisted_messages, ctx);
                    }
                    Err(e) => act.fail(
                        format!("installing the snapshot at index {index} failed: {e}"),
                        ctx,
                    ),
                }
            })
            .wait(ctx);
    }

    fn publish_role(&self) {
        if let Some(tx) = &self.peers.learner {
            let learner = self.node.is_learner();
            tx.send_if_modified(|v| std::mem::replace(v, learner) != learner);
        }
    }

    /// A leader is known again: propose what waited for one, and start the reads that did.
    fn propose_waiting(&mut self, ctx: &mut Context<Self>) {
        let now = tokio::time::Instant::now();
        for (until, data) in std::mem::take(&mut self.waiting_for_leader) {
            // Its client gave up: never proposed after that (it could overwrite newer writes).
            if now < until {
                let _ = self.node.propose(data);
            }
        }
        if !self.queued_reads.is_empty() {
            ctx.notify(FlushReads);
        }
        self.schedule_ready(ctx);
    }

    /// Answers the confirmed reads whose index is now applied.
    fn release_applied_reads(&mut self) {
        let applied = self.node.applied();
        let later = self.reads_awaiting_apply.split_off(&(applied + 1));
        for (index, waiters) in std::mem::replace(&mut self.reads_awaiting_apply, later) {
            for w in waiters {
                w.finish(Ok(index));
            }
        }
    }

    fn fail_all(&mut self, e: EtcdError) {
        let queued = self.queued_reads.drain(..);
        let rounds = self.read_rounds.drain().flat_map(|(_, ws)| ws);
        let waiting = std::mem::take(&mut self.reads_awaiting_apply).into_values();
        for w in queued.chain(rounds).chain(waiting.flatten()) {
            w.finish(Err(e.clone()));
        }
    }

    fn maybe_compact(&mut self, ctx: &mut Context<Self>) {
        let applied = self.node.applied();
        if self.compacting || applied < self.last_snapshot + self.snapshot_count {
            return;
        }
        self.compacting = true;
        let sync = self.peers.sync_storage.send(SyncStorage);
        sync.into_actor(self)
            .map(move |res, act, _| {
                act.compacting = false;
                if !matches!(res, Ok(Ok(()))) {
                    tracing::warn!("backend sync before log compaction failed; will retry");
                    return;
                }
                let Some((index, term, conf_state)) =
                    act.node.compact_log(applied, act.catchup_entries)
                else {
                    return;
                };
                act.last_snapshot = index;
                act.peers.release.do_send(ReleaseWal {
                    index,
                    term,
                    conf_state,
                });
                tracing::debug!(index, "raft log compacted");
            })
            .spawn(ctx);
    }
}

impl Actor for RaftActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.publish_role();
        // Raft's work queues can hold a burst of proposals: don't let the mailbox cap them first.
        ctx.set_mailbox_capacity(65536);
        self.schedule_ready(ctx);
    }
}

impl Handler<ProcessReady> for RaftActor {
    type Result = ();

    fn handle(&mut self, _: ProcessReady, ctx: &mut Context<Self>) {
        let _timer = self.meter.start("ProcessReady");
        self.ready_scheduled = false;
        while !self.failed {
            // Further Readies wait for the WAL's answers (each `Persisted` schedules them
            // again): a snapshot or a new leadership until every earlier write is durable, new
            // entries past the pipeline depth, which lets proposals gather into one fsync.
            let in_flight = self.appends_in_flight;
            if self.installing
                || (in_flight > 0 && self.node.must_wait_for_persisted())
                || (in_flight >= self.pipeline_depth && self.node.has_new_entries())
            {
                break;
            }
            match self.node.ready() {
                Ok(Some(out)) => self.handle_ready(out, ctx),
                Ok(None) => break,
                Err(e) => self.fail(format!("raft ready failed: {e}"), ctx),
            }
        }
    }
}

impl Handler<Persisted> for RaftActor {
    type Result = ();

    fn handle(&mut self, msg: Persisted, ctx: &mut Context<Self>) {
        let _timer = self.meter.start("Persisted");
        if self.failed {
            return;
        }
        self.node.on_persisted(msg.number);
        if let Some(index) = self.installed.take() {
            self.node.on_applied(index);
            self.last_snapshot = self.last_snapshot.max(index);
            self.release_applied_reads();
        }
        self.send_peers(msg.persisted_messages);
        self.schedule_ready(ctx);
    }
}

impl Handler<Tick> for RaftActor {
    type Result = ();

    fn handle(&mut self, _: Tick, ctx: &mut Context<Self>) {
        let _timer = self.meter.start("Tick");
        self.node.tick();
        self.schedule_ready(ctx);
    }
}

impl Handler<Propose> for RaftActor {
    type Result = Result<(), EtcdError>;

    fn handle(&mut self, msg: Propose, ctx: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("Propose");
        if msg.leader_only && self.node.leader() != self.node.id() {
            // etcd 3.5.13 (#17425): "Ignore the lease revoking request because current member
            // isn't a leader". Proposed now it would be forwarded to the new leader, or kept
            // for the next one, and revoke a lease someone else has been keeping alive.
            tracing::warn!(
                leader = self.node.leader(),
                "ignoring a leader-only proposal: this member is not the leader"
            );
            return Err(EtcdError::NotLeader);
        }
        if self.node.leader() == 0 {
            if self.waiting_for_leader.len() >= MAX_WAITING_FOR_LEADER {
                return Err(EtcdError::NoLeader);
            }
            let ttl = tokio::time::Instant::now() + self.proposal_ttl;
            let until = msg.deadline.map_or(ttl, |d| d.min(ttl));
            self.waiting_for_leader.push((until, msg.data));
            return Ok(());
        }
        self.node.propose(msg.data)?;
        self.schedule_ready(ctx);
        Ok(())
    }
}

impl Handler<ProposeConfChange> for RaftActor {
    type Result = Result<(), EtcdError>;

    fn handle(&mut self, msg: ProposeConfChange, ctx: &mut Context<Self>) -> Self::Result {
        self.node
            .propose_conf_change(msg.kind, msg.node_id, msg.context)?;
        self.schedule_ready(ctx);
        Ok(())
    }
}

/// A membership change the store applied: raft's configuration and the transport follow.
impl Handler<ApplyConfChange> for RaftActor {
    type Result = ();

    fn handle(&mut self, msg: ApplyConfChange, ctx: &mut Context<Self>) {
        self.node.apply_conf_change(msg.kind, msg.node_id);
        self.publish_role();
        let me = self.node.id();
        if msg.kind == ConfChangeKind::Promote && self.node.leader() == me {
            self.traffic.promotions += 1;
        }
        if let Some(book) = &self.peers.peer_book
            && msg.node_id != me
        {
            match msg.kind {
                ConfChangeKind::Remove => book.do_send(PeerChange::Remove { id: msg.node_id }),
                _ => book.do_send(PeerChange::Upsert {
                    id: msg.node_id,
                    urls: msg.peer_urls,
                }),
            }
        }
        if msg.kind == ConfChangeKind::Remove && msg.node_id == me {
            // etcd's member stops here, and exits 0; its data dir is of no further use to this
            // cluster. The supervisor shuts the member down in order.
            tracing::warn!("the member has been permanently removed from the cluster; stopping");
            self.peers.shutdown.do_send(Shutdown {
                reason: "the member has been permanently removed from the cluster".into(),
            });
        }
        self.schedule_ready(ctx);
    }
}

/// A snapshot message and the store copy it came with.
impl Handler<StepSnapshot> for RaftActor {
    type Result = ();

    fn handle(&mut self, msg: StepSnapshot, ctx: &mut Context<Self>) {
        let Some(index) = RaftNode::snapshot_index(&msg.msg) else {
            return;
        };
        self.incoming = Some((index, msg.data));
        self.node.step(&msg.msg);
        self.schedule_ready(ctx);
    }
}

impl Handler<CheckLearner> for RaftActor {
    type Result = Result<(), EtcdError>;

    fn handle(&mut self, msg: CheckLearner, _: &mut Context<Self>) -> Self::Result {
        self.node.learner_ready(msg.id)
    }
}

impl Handler<TransferLeader> for RaftActor {
    type Result = ();

    fn handle(&mut self, msg: TransferLeader, ctx: &mut Context<Self>) {
        self.node.transfer_leader(msg.to);
        self.schedule_ready(ctx);
    }
}

impl Handler<SnapshotReport> for RaftActor {
    type Result = ();

    fn handle(&mut self, msg: SnapshotReport, ctx: &mut Context<Self>) {
        self.node.report_snapshot(msg.to, msg.ok);
        self.schedule_ready(ctx);
    }
}

/// The store was replaced by a snapshot: raft's configuration and the transport follow its
/// members.
impl Handler<SyncConf> for RaftActor {
    type Result = ();

    fn handle(&mut self, msg: SyncConf, ctx: &mut Context<Self>) {
        let ids = |learner: bool| -> Vec<u64> {
            msg.members
                .iter()
                .filter(|m| m.is_learner == learner)
                .map(|m| m.id)
                .collect()
        };
        let (voters, learners) = (ids(false), ids(true));
        let before = self.node.conf_members();
        self.node.reconcile_conf(&voters, &learners);
        self.publish_role();
        let me = self.node.id();
        if let Some(book) = &self.peers.peer_book {
            for m in msg.members.iter().filter(|m| m.id != me) {
                book.do_send(PeerChange::Upsert {
                    id: m.id,
                    urls: m.peer_urls.clone(),
                });
            }
            for id in before {
                if id != me && !msg.members.iter().any(|m| m.id == id) {
                    book.do_send(PeerChange::Remove { id });
                }
            }
        }
        self.schedule_ready(ctx);
    }
}

impl Handler<ReadIndex> for RaftActor {
    type Result = ResponseFuture<Result<u64, EtcdError>>;

    fn handle(&mut self, _: ReadIndex, ctx: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("ReadIndex");
        let (tx, rx) = oneshot::channel();
        self.queue_read(ReadWaiter(tx), ctx);
        Box::pin(async move { rx.await.unwrap_or(Err(EtcdError::Stopped)) })
    }
}

impl Handler<FlushReads> for RaftActor {
    type Result = ();

    fn handle(&mut self, _: FlushReads, ctx: &mut Context<Self>) {
        let _timer = self.meter.start("FlushReads");
        // Without a leader, reads wait for one (their callers time out, as etcd's do).
        if self.queued_reads.is_empty() || self.node.leader() == 0 {
            return;
        }
        let id = self.read_ids.next();
        match self.node.read_index(id.to_be_bytes().to_vec()) {
            Ok(()) => {
                self.read_rounds
                    .insert(id, std::mem::take(&mut self.queued_reads));
                self.schedule_ready(ctx);
            }
            Err(e) => {
                self.traffic.read_indexes_failed += 1;
                for w in self.queued_reads.drain(..) {
                    w.finish(Err(e.clone()));
                }
            }
        }
    }
}

impl Handler<Unreachable> for RaftActor {
    type Result = ();

    fn handle(&mut self, msg: Unreachable, ctx: &mut Context<Self>) {
        self.node.report_unreachable(msg.id);
        self.schedule_ready(ctx);
    }
}

impl Handler<Step> for RaftActor {
    type Result = ();

    fn handle(&mut self, msg: Step, ctx: &mut Context<Self>) {
        let _timer = self.meter.start("Step");
        if let Some((from, heartbeat_answer)) = self.node.step(&msg.msg) {
            let t = &mut self.traffic;
            *t.received.entry(from).or_default() += msg.msg.len() as u64;
            if heartbeat_answer && let Some(sent) = t.heartbeat_sent.remove(&from) {
                t.round_trips
                    .entry(from)
                    .or_insert_with(|| actcd_types::meter::Histogram::new(&RTT_BUCKETS))
                    .observe(sent.elapsed().as_secs_f64());
            }
        }
        self.schedule_ready(ctx);
    }
}

impl Handler<Applied> for RaftActor {
    type Result = ();

    fn handle(&mut self, msg: Applied, ctx: &mut Context<Self>) {
        let _timer = self.meter.start("Applied");
        self.node.on_applied(msg.index);
        self.release_applied_reads();
        self.peers.progress.do_send(RaftProgress {
            committed: self.node.committed(),
            applied: self.node.applied(),
        });
        self.maybe_compact(ctx);
        self.schedule_ready(ctx);
    }
}

impl Handler<RaftStatus> for RaftActor {
    type Result = MessageResult<RaftStatus>;

    fn handle(&mut self, _: RaftStatus, _: &mut Context<Self>) -> Self::Result {
        MessageResult(RaftStatusReply {
            member_id: self.node.id(),
            leader: self.node.leader(),
            term: self.node.term(),
            commit: self.node.committed(),
            applied: self.node.applied(),
            last_index: self.node.last_index(),
            is_learner: self.node.is_learner(),
            leader_for: self.leader_since.map(|t| t.elapsed()),
            leader_changes: self.leader_changes,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::node::{NodeConfig, Recovered};

    /// Answers every message it takes and records what it saw.
    struct Recorder {
        /// Refuse every Append that carries entries, as a full disk would.
        failing_wal: bool,
        /// While set, each Append with entries is answered only when a permit is added to
        /// `permits` (first sent, first answered), as a slow disk would.
        gated: Arc<std::sync::atomic::AtomicBool>,
        permits: Arc<tokio::sync::Semaphore>,
        appends: Arc<Mutex<Vec<usize>>>,
        applied: Arc<Mutex<Vec<Vec<u8>>>>,
        releases: Arc<Mutex<Vec<u64>>>,
        fatal: Arc<Mutex<Vec<Fatal>>>,
        shutdowns: Arc<Mutex<Vec<Shutdown>>>,
    }

    impl Handler<Fatal> for Recorder {
        type Result = ();
        fn handle(&mut self, m: Fatal, _: &mut Context<Self>) {
            self.fatal.lock().unwrap().push(m);
        }
    }

    impl Handler<Shutdown> for Recorder {
        type Result = ();
        fn handle(&mut self, m: Shutdown, _: &mut Context<Self>) {
            self.shutdowns.lock().unwrap().push(m);
        }
    }

    impl Actor for Recorder {
        type Context = Context<Self>;
    }

    impl Handler<Append> for Recorder {
        type Result = ResponseFuture<Result<(), String>>;
        fn handle(&mut self, m: Append, _: &mut Context<Self>) -> Self::Result {
            self.appends.lock().unwrap().push(m.entries.len());
            if self.failing_wal && !m.entries.is_empty() {
                return Box::pin(async { Err("No space left on device".into()) });
            }
            let gate = (self.gated.load(std::sync::atomic::Ordering::SeqCst)
                && !m.entries.is_empty())
            .then(|| self.permits.clone());
            Box::pin(async move {
                if let Some(permits) = gate {
                    permits.acquire().await.unwrap().forget();
                }
                Ok(())
            })
        }
    }

    impl Handler<ReleaseWal> for Recorder {
        type Result = Result<(), String>;
        fn handle(&mut self, m: ReleaseWal, _: &mut Context<Self>) -> Self::Result {
            self.releases.lock().unwrap().push(m.index);
            Ok(())
        }
    }

    impl Handler<Apply> for Recorder {
        type Result = ();
        fn handle(&mut self, m: Apply, _: &mut Context<Self>) {
            self.applied
                .lock()
                .unwrap()
                .extend(m.entries.into_iter().map(|e| e.data));
        }
    }

    impl Handler<RaftProgress> for Recorder {
        type Result = ();
        fn handle(&mut self, _: RaftProgress, _: &mut Context<Self>) {}
    }

    impl Handler<SyncStorage> for Recorder {
        type Result = Result<(), EtcdError>;
        fn handle(&mut self, _: SyncStorage, _: &mut Context<Self>) -> Self::Result {
            Ok(())
        }
    }

    fn start(snapshot_count: u64) -> (Addr<RaftActor>, Recorder) {
        start_with(snapshot_count, false)
    }

    fn start_with(snapshot_count: u64, failing_wal: bool) -> (Addr<RaftActor>, Recorder) {
        start_voters(snapshot_count, failing_wal, vec![1])
    }

    /// Member 1 of `voters`; with others it never hears from, it never leads.
    fn start_voters(
        snapshot_count: u64,
        failing_wal: bool,
        voters: Vec<u64>,
    ) -> (Addr<RaftActor>, Recorder) {
        let rec = Recorder {
            failing_wal,
            appends: Default::default(),
            applied: Default::default(),
            releases: Default::default(),
            fatal: Default::default(),
            shutdowns: Default::default(),
            gated: Default::default(),
            permits: Arc::new(tokio::sync::Semaphore::new(0)),
        };
        let seen = Recorder {
            failing_wal,
            appends: rec.appends.clone(),
            applied: rec.applied.clone(),
            releases: rec.releases.clone(),
            fatal: rec.fatal.clone(),
            shutdowns: rec.shutdowns.clone(),
            gated: rec.gated.clone(),
            permits: rec.permits.clone(),
        };
        let fake = rec.start();
        let cfg = NodeConfig {
            id: 1,
            voters,
            learners: vec![],
            election_tick: 10,
            fixed_election_timeout: None,
            heartbeat_tick: 1,
            pre_vote: true,
            applied: 0,
        };
        let node = RaftNode::new(&cfg, Recovered::default()).unwrap();
        let peers = RaftPeers {
            wal: fake.clone().recipient(),
            release: fake.clone().recipient(),
            applier: fake.clone().recipient(),
            progress: fake.clone().recipient(),
            sync_storage: fake.clone().recipient(),
            fatal: fake.clone().recipient(),
            shutdown: fake.recipient(),
            outbox: None,
            leadership: None,
            peer_book: None,
            snapshots: None,
            install: None,
            learner: None,
            leader: None,
        };
        let actor = RaftActor::new(node, peers, snapshot_count, 2);
        (actor.start(), seen)
    }

    /// Lets every queued message (and the ones they queue) run.
    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    #[actix_rt::test]
    async fn proposals_are_persisted_then_applied_in_order() {
        let (raft, seen) = start(1000);
        settle().await;
        for i in 0..3u8 {
            raft.send(Propose {
                data: vec![i],
                deadline: None,
                leader_only: false,
            })
            .await
            .unwrap()
            .unwrap();
        }
        settle().await;
        let applied: Vec<_> = seen
            .applied
            .lock()
            .unwrap()
            .iter()
            .filter(|d| !d.is_empty())
            .cloned()
            .collect();
        assert_eq!(applied, vec![vec![0u8], vec![1], vec![2]]);
        // Every entry reaches the WAL exactly once.
        let appends = seen.appends.lock().unwrap().clone();
        assert_eq!(
            appends.iter().sum::<usize>(),
            4,
            "leader's empty entry and three proposals"
        );
        let status = raft.send(RaftStatus).await.unwrap();
        assert_eq!((status.leader, status.commit), (1, 4));
    }

    /// Pipelined persistence: while the WAL writes one Ready, the node keeps stepping messages
    /// and takes the next Ready's entries to the WAL, up to the pipeline depth; nothing is
    /// applied before the WAL answered for it, and every entry is written once, in order.
    #[actix_rt::test]
    async fn readies_are_pipelined_to_the_wal_and_applied_only_once_durable() {
        use std::sync::atomic::Ordering::SeqCst;
        let (raft, seen) = start(1000);
        settle().await;
        let elected = seen.appends.lock().unwrap().iter().sum::<usize>();
        assert_eq!(elected, 1, "the new leader's empty entry");
        seen.gated.store(true, SeqCst);
        let propose = |b: u8| Propose {
            data: vec![b],
            deadline: None,
            leader_only: false,
        };
        let with_entries = || {
            let a = seen.appends.lock().unwrap();
            a.iter().filter(|&&n| n > 0).count()
        };
        let user_applied = || {
            let a = seen.applied.lock().unwrap();
            a.iter()
                .filter(|d| !d.is_empty())
                .cloned()
                .collect::<Vec<_>>()
        };
        raft.send(propose(1)).await.unwrap().unwrap();
        settle().await;
        raft.send(propose(2)).await.unwrap().unwrap();
        settle().await;
        assert_eq!(
            with_entries(),
            3,
            "the second Ready left before the first was durable"
        );
        raft.send(propose(3)).await.unwrap().unwrap();
        raft.send(propose(4)).await.unwrap().unwrap();
        settle().await;
        assert_eq!(
            with_entries(),
            3,
            "past the depth, proposals wait for the WAL"
        );
        let status = raft.send(RaftStatus).await.unwrap();
        assert_eq!(
            (status.commit, status.last_index),
            (1, 5),
            "the node still answers; nothing unpersisted is committed"
        );
        assert!(user_applied().is_empty());

        seen.permits.add_permits(1);
        settle().await;
        assert_eq!(user_applied(), vec![vec![1u8]], "only what is durable");
        assert_eq!(with_entries(), 4, "3 and 4 share the next Ready");
        seen.gated.store(false, SeqCst);
        seen.permits.add_permits(2);
        settle().await;
        assert_eq!(user_applied(), vec![vec![1u8], vec![2], vec![3], vec![4]]);
        let written = seen.appends.lock().unwrap().iter().sum::<usize>();
        assert_eq!(written, 5, "every entry written once");
        let status = raft.send(RaftStatus).await.unwrap();
        assert_eq!((status.commit, status.last_index), (5, 5));
    }

    /// etcd 3.5.13 (#17425, issue #15247): the lessor's revokes are proposed only by the
    /// leader. A member without leadership refuses them at once: it neither forwards them nor
    /// keeps them until a leader is known, as it does a client's write.
    #[actix_rt::test]
    async fn lease_ops_are_dropped_unless_this_member_leads() {
        let propose = |leader_only| Propose {
            data: vec![9],
            deadline: None,
            leader_only,
        };
        let (follower, seen) = start_voters(1000, false, vec![1, 2]);
        settle().await;
        assert_eq!(
            follower.send(propose(true)).await.unwrap(),
            Err(EtcdError::NotLeader)
        );
        assert_eq!(
            follower.send(propose(false)).await.unwrap(),
            Ok(()),
            "a client's write waits for a leader"
        );
        settle().await;
        assert!(seen.applied.lock().unwrap().is_empty());

        let (leader, seen) = start(1000);
        settle().await;
        assert_eq!(leader.send(propose(true)).await.unwrap(), Ok(()));
        settle().await;
        assert!(seen.applied.lock().unwrap().contains(&vec![9]));
    }

    #[actix_rt::test]
    async fn read_index_answers_the_commit_index_once_applied() {
        let (raft, seen) = start(1000);
        settle().await;
        raft.send(Propose {
            data: vec![7],
            deadline: None,
            leader_only: false,
        })
        .await
        .unwrap()
        .unwrap();
        settle().await;
        let a = raft.send(ReadIndex);
        let b = raft.send(ReadIndex);
        let reads = tokio::spawn(async move { tokio::join!(a, b) });
        settle().await;
        assert!(
            !reads.is_finished(),
            "index 2 is committed but not applied yet"
        );
        raft.send(Applied { index: 2 }).await.unwrap();
        let (a, b) = reads.await.unwrap();
        assert_eq!((a.unwrap(), b.unwrap()), (Ok(2), Ok(2)));
        // Once applied, a new read is answered straight after its round, whose Ready has
        // nothing to persist: the WAL is not asked.
        let appends = seen.appends.lock().unwrap().len();
        assert_eq!(raft.send(ReadIndex).await.unwrap(), Ok(2));
        assert_eq!(seen.appends.lock().unwrap().len(), appends);
    }

    #[actix_rt::test]
    async fn a_failed_wal_write_is_reported_once_and_the_node_stops() {
        let (raft, seen) = start_with(1000, true);
        settle().await;
        let read = raft.send(ReadIndex);
        let second = raft.send(ReadIndex);
        settle().await;
        let want = vec![Fatal {
            actor: "raft",
            error: "WAL append failed: No space left on device".into(),
        }];
        assert_eq!(*seen.fatal.lock().unwrap(), want);
        let appends = seen.appends.lock().unwrap().clone();
        assert_eq!(
            appends.iter().filter(|&&n| n > 0).count(),
            1,
            "nothing written after the failure: {appends:?}"
        );
        assert!(
            matches!(read.await, Ok(Err(EtcdError::Stopped)) | Err(_)),
            "a waiting read is failed, not left hanging"
        );
        assert!(
            matches!(second.await, Ok(Err(EtcdError::Stopped)) | Err(_)),
            "so is every other"
        );
        assert!(
            raft.send(Propose {
                data: vec![1],
                deadline: None,
                leader_only: false,
            })
            .await
            .is_err(),
            "the node stopped itself"
        );
        assert!(seen.shutdowns.lock().unwrap().is_empty());
    }

    #[actix_rt::test]
    async fn applying_its_own_removal_asks_for_an_orderly_shutdown() {
        let (raft, seen) = start(1000);
        settle().await;
        raft.send(ApplyConfChange {
            kind: ConfChangeKind::Remove,
            node_id: 1,
            peer_urls: vec![],
        })
        .await
        .unwrap();
        settle().await;
        let shutdowns = seen.shutdowns.lock().unwrap().clone();
        assert_eq!(shutdowns.len(), 1);
        assert!(shutdowns[0].reason.contains("permanently removed"));
        assert!(seen.fatal.lock().unwrap().is_empty(), "not a failure");
    }

    #[actix_rt::test]
    async fn applied_entries_past_snapshot_count_release_the_wal() {
        let (raft, seen) = start(3);
        settle().await;
        for i in 0..5u8 {
            raft.send(Propose {
                data: vec![i],
                deadline: None,
                leader_only: false,
            })
            .await
            .unwrap()
            .unwrap();
        }
        settle().await;
        raft.send(Applied { index: 6 }).await.unwrap();
        settle().await;
        assert_eq!(seen.releases.lock().unwrap().clone(), vec![6]);
    }
}

impl RaftActor {
    /// etcd's peer traffic metrics (labelled with the peer's id in hex as etcd does), failed
    /// heartbeats and read-index rounds, and whether a snapshot is being installed.
    fn samples(&self) -> Vec<actcd_types::meter::Sample> {
        use actcd_types::meter::{Sample, SampleValue};
        let mut out = vec![
            Sample::value(
                "etcd_server_heartbeat_send_failures_total",
                self.traffic.heartbeat_send_failures as f64,
            ),
            Sample::value(
                "etcd_server_read_indexes_failed_total",
                self.traffic.read_indexes_failed as f64,
            ),
            Sample::value(
                "etcd_server_slow_read_indexes_total",
                self.traffic.slow_read_indexes as f64,
            ),
            Sample::value(
                "etcd_server_learner_promote_successes",
                self.traffic.promotions as f64,
            ),
            Sample::value(
                "etcd_server_snapshot_apply_in_progress_total",
                f64::from(u8::from(self.installed.is_some())),
            ),
        ];
        let mut by_peer = |name: &'static str, label: &'static str, m: &HashMap<u64, u64>| {
            let mut peers: Vec<_> = m.iter().collect();
            peers.sort();
            for (id, n) in peers {
                out.push(Sample {
                    name,
                    labels: vec![(label, format!("{id:x}"))],
                    value: SampleValue::Value(*n as f64),
                });
            }
        };
        by_peer(
            "etcd_network_peer_sent_bytes_total",
            "To",
            &self.traffic.sent,
        );
        by_peer(
            "etcd_network_peer_received_bytes_total",
            "From",
            &self.traffic.received,
        );
        let mut rtts: Vec<_> = self.traffic.round_trips.iter().collect();
        rtts.sort_by_key(|(id, _)| **id);
        for (id, h) in rtts {
            out.push(Sample {
                name: "etcd_network_peer_round_trip_time_seconds",
                labels: vec![("To", format!("{id:x}"))],
                value: SampleValue::Histogram(h.clone()),
            });
        }
        out
    }
}

actcd_types::impl_mailbox_probe!(RaftActor, meter, samples);
