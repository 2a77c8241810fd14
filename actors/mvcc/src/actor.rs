//! [`MvccActor`]: the [`Store`] behind a mailbox.
//!
//! It runs alone on an `Arbiter` thread of its own: applying a batch writes an engine write
//! transaction, which blocks (LMDB's commit writes pages, and a write transaction must begin and
//! end on one thread), and one thread keeps applies and reads in mailbox order, so a Range sent
//! after an ApplyBatch sees its writes. An `Arbiter` rather than a `SyncArbiter`: the latter's
//! channel spins with `sched_yield` before it sleeps, which on 2 cores took CPU from the threads
//! that had work; measured against it, +5% put and +5–15% linearizable range throughput at 100
//! clients and single-client put p50 0.28 → 0.25 ms.
//!
//! Applied batches go into the store's write buffer (reads merge it over the committed engine,
//! so they see every applied write). With the backend actor connected ([`MvccPeers::backend`])
//! the buffered writes are sent to it as a `Commit` on `FlushStore` (every 100 ms) or once
//! `max_pending_ops` requests or 64 MiB are pending; the backend commits them and answers
//! `Committed{seq}`, which trims the buffer. What must see every applied write in the engine
//! (HashBackend, Defragment, the Snapshot RPC's reader, a follower's snapshot, SyncStorage,
//! installing a snapshot) asks the backend after sending the writes: its mailbox keeps the
//! order. Without a backend actor (tests, benches) commits go straight into the engine: after
//! every batch, or batched ([`MvccActor::batched`]) until `FlushStore`, `SyncStorage` or
//! `max_pending_ops` requests.
//!
//! In that mode a compaction runs in steps beside applies (one every `COMPACTION_PACE` and
//! one per `FlushStore`), not all at once; a `physical` compaction's waiter is answered once
//! the last step is done (its batch and the applies after it are not held up), as etcd's
//! server waits for it outside its apply loop.

use actcd_proto::etcdserverpb::RangeResponse;
use actcd_types::EtcdError;
use actcd_types::msg::{
    ApplyBatch, ApplyResponse, ApplyResult, BatchApplied, CurrentRevision, DeleteKeys, FlushStore,
    GetStoreStatus, HashBackend, HashKv, HashKvResult, History, HistoryChunk, InstallSnapshot,
    LeasedKeys, MakeSnapshot, Notify, Range, ReadTxn, SnapshotError, StoreSnapshot, StoreStatus,
    SyncStorage, WatchInterest,
};
use actcd_types::msg::{
    BackendFailed, Commit, Committed, Defragment, Flush, OpenStoreReader, ReplaceStore,
    SnapshotChunks, SnapshotStream, StoreReader, SyncBackend,
};
use actcd_types::snapshot_blob::StoreCopy;
use actix::dev::ToEnvelope;
use actix::{
    Actor, ActorFutureExt, Addr, Arbiter, AsyncContext, AtomicResponse, Context, Handler,
    Recipient, ResponseFuture, WrapFuture,
};

use crate::store::{Outcome, Store};

/// A compaction runs a step at a time — `Store::compaction_batch_limit` keys of the index, then
/// as many records (`--experimental-compaction-batch-limit`, etcd's 1000) — one step every
/// `COMPACTION_PACE` on a timer, and one per `FlushStore`; never after a batch. A step takes
/// about 1.5 ms at 1000 (release, 2 cores), so a request waits at most that for one, and the
/// thread the store shares on small machines stays mostly free; a million keys overwritten
/// once (a million index keys, two million records examined) take some 20 s to compact, about
/// what etcd's pace (1000 records, then 10 ms of sleep) takes. The steps used to run after each batch
/// (1000) and each flush (10,000, some 17 ms): the apply rate set the pace, and a flush's step
/// stalled every request behind it.
const COMPACTION_PACE: std::time::Duration = std::time::Duration::from_millis(5);

/// Commit once this much request data is pending, whatever the count: LMDB keeps a transaction's
/// dirty pages in memory and refuses one that dirties too many.
const MAX_PENDING_BYTES: usize = 64 * 1024 * 1024;

/// With the backend actor: once this many keys wait for the backend to confirm their commit,
/// the actor takes no message until a `Flush` has committed them, so a backend slower than
/// the applies holds the applies back instead of growing the buffer without bound.
const MAX_UNCOMMITTED_KEYS: usize = 200_000;

pub struct MvccActor {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: std::sync::Arc<actcd_types::meter::Meter>,
    store: Store,
    /// Commit once this many requests are pending (direct sink); 1 commits every batch.
    max_pending_ops: usize,
    peers: MvccPeers,
    /// `peers.backend`, once the store sends its commits there.
    backend: Option<BackendLink>,
    /// Whether the watch hub wants `Notify` (it says so with `WatchInterest`).
    hub_listening: bool,
    /// What the applied batches did, for `/metrics` (read when a `MailboxProbe` asks).
    counts: WriteCounts,
    /// How long hashes and defragmentations took, for `/metrics`.
    timings: Timings,
    /// `--experimental-warning-apply-duration`: a batch that takes longer is logged, as etcd
    /// logs an apply that took too long.
    warn_apply: std::time::Duration,
    /// Waiters of physical compactions whose deletions are still under way, with their
    /// results (see [`Self::answer_physical_waiters`]).
    physical_waiters: Vec<(tokio::sync::oneshot::Sender<ApplyResult>, ApplyResult)>,
    /// Time between two compaction steps on the timer (`None`: only `FlushStore` runs them).
    compaction_pace: Option<std::time::Duration>,
    /// Whether a timed compaction step is scheduled.
    pacing: bool,
}

/// etcd's buckets for hash durations: 10 ms doubling, 15 of them.
pub(crate) const HASH_BUCKETS: [f64; 15] = actcd_types::meter::exponential_buckets(0.01, 2.0);
/// etcd's buckets for defragmentation durations: 100 ms doubling, 13 of them.
const DEFRAG_BUCKETS: [f64; 13] = actcd_types::meter::exponential_buckets(0.1, 2.0);

/// `etcd_mvcc_hash_duration_seconds` (Hash; HashKV is timed by the reader that serves it),
/// `etcd_disk_backend_defrag_duration_seconds` and `etcd_disk_defrag_inflight`.
struct Timings {
    hash: actcd_types::meter::Histogram,
    defrag: actcd_types::meter::Histogram,
    defrag_inflight: bool,
    snapshot: actcd_types::meter::Histogram,
    /// Compaction (milliseconds, etcd's `etcd_debugging_mvcc_*compaction*`): the key index's
    /// compaction, each slice of deletions, and the whole run from start to last slice.
    index_pause: actcd_types::meter::Histogram,
    db_pause: actcd_types::meter::Histogram,
    db_total: actcd_types::meter::Histogram,
    compaction_started: Option<std::time::Instant>,
    /// Unix time the last compaction finished (0 since start).
    compaction_last: f64,
}

/// etcd's buckets for snapshot durations: 10 ms doubling, 17 of them.
const SNAPSHOT_BUCKETS: [f64; 17] = actcd_types::meter::exponential_buckets(0.01, 2.0);
/// etcd's compaction buckets, milliseconds.
const INDEX_PAUSE_BUCKETS: [f64; 14] = actcd_types::meter::exponential_buckets(0.5, 2.0);
const DB_PAUSE_BUCKETS: [f64; 13] = actcd_types::meter::exponential_buckets(1.0, 2.0);
const DB_TOTAL_BUCKETS: [f64; 14] = actcd_types::meter::exponential_buckets(100.0, 2.0);

impl Default for Timings {
    fn default() -> Self {
        use actcd_types::meter::Histogram;
        Self {
            hash: Histogram::new(&HASH_BUCKETS),
            defrag: Histogram::new(&DEFRAG_BUCKETS),
            defrag_inflight: false,
            snapshot: Histogram::new(&SNAPSHOT_BUCKETS),
            index_pause: Histogram::new(&INDEX_PAUSE_BUCKETS),
            db_pause: Histogram::new(&DB_PAUSE_BUCKETS),
            db_total: Histogram::new(&DB_TOTAL_BUCKETS),
            compaction_started: None,
            compaction_last: 0.0,
        }
    }
}

/// What the actor counts of applied batches (etcd's range, put, delete and txn counters are
/// the store's, `ops.rs`, which its read views share).
#[derive(Debug, Default, Clone, Copy)]
struct WriteCounts {
    /// Batches slower than `--experimental-warning-apply-duration` (etcd's
    /// `etcd_server_slow_apply_total`).
    slow_applies: u64,
}

/// Who hears what applied batches changed. The store sends before it answers the batch, so a
/// client that saw a write acknowledged and then opens a watch finds the hub already past it.
#[derive(Default)]
pub struct MvccPeers {
    /// The watch hub: one `Notify` per batch that changed keys.
    pub watch: Option<Recipient<Notify>>,
    /// The backend actor, the only writer of the environment. `None`: the store commits
    /// straight into its engine (tests, benches).
    pub backend: Option<BackendLink>,
    /// Where the store publishes a [`crate::ReadView`] after every change, for the readers
    /// ([`crate::MvccReader`]): after each batch before its waiters are answered, after each
    /// commit reported, after a snapshot is installed, and when the store fails.
    pub views: Option<crate::ViewPublisher>,
}

/// The backend actor's doors the store uses. It answers `Committed{seq}` after each commit and
/// `BackendFailed` on a failure (`Subscribe` it to this actor).
#[derive(Clone)]
pub struct BackendLink {
    pub commit: Recipient<Commit>,
    pub flush: Recipient<Flush>,
    pub sync: Recipient<SyncBackend>,
    pub defragment: Recipient<Defragment>,
    pub open_reader: Recipient<OpenStoreReader>,
    pub replace: Recipient<ReplaceStore>,
}

impl BackendLink {
    /// Every door to `backend`, an actor that takes all six messages.
    pub fn of<B>(backend: &Addr<B>) -> Self
    where
        B: Actor
            + Handler<Commit>
            + Handler<Flush>
            + Handler<SyncBackend>
            + Handler<Defragment>
            + Handler<OpenStoreReader>
            + Handler<ReplaceStore>,
        B::Context: ToEnvelope<B, Commit>
            + ToEnvelope<B, Flush>
            + ToEnvelope<B, SyncBackend>
            + ToEnvelope<B, Defragment>
            + ToEnvelope<B, OpenStoreReader>
            + ToEnvelope<B, ReplaceStore>,
    {
        Self {
            commit: backend.clone().recipient(),
            flush: backend.clone().recipient(),
            sync: backend.clone().recipient(),
            defragment: backend.clone().recipient(),
            open_reader: backend.clone().recipient(),
            replace: backend.clone().recipient(),
        }
    }
}

impl MvccActor {
    /// Commits every batch before answering it.
    pub fn new(store: Store) -> Self {
        Self::batched(store, 1)
    }

    /// Keeps applied batches in one open transaction until `FlushStore`, `SyncStorage`, or
    /// `max_pending_ops` pending requests.
    pub fn batched(store: Store, max_pending_ops: usize) -> Self {
        Self {
            meter: actcd_types::meter::Meter::new(),
            store,
            backend: None,
            max_pending_ops: max_pending_ops.max(1),
            peers: MvccPeers::default(),
            hub_listening: true,
            counts: WriteCounts::default(),
            timings: Timings::default(),
            warn_apply: std::time::Duration::from_millis(100),
            physical_waiters: Vec::new(),
            compaction_pace: Some(COMPACTION_PACE),
            pacing: false,
        }
    }

    /// Time between two compaction steps run on a timer; `None` leaves them to `FlushStore`
    /// (tests that count steps).
    pub fn with_compaction_pace(mut self, pace: Option<std::time::Duration>) -> Self {
        self.compaction_pace = pace;
        self
    }

    /// Logs batches that take longer than `d` to apply (etcd's default: 100 ms).
    pub fn with_warning_apply_duration(mut self, d: std::time::Duration) -> Self {
        self.warn_apply = d;
        self
    }

    /// Sends what each batch changes to `peers` (the store collects it only from now on).
    pub fn with_peers(mut self, mut peers: MvccPeers) -> Self {
        self.store.set_notify(true);
        if let Some(link) = peers.backend.take() {
            match self.store.connect_backend(link.commit.clone()) {
                Ok(()) => self.backend = Some(link),
                Err(e) => {
                    tracing::error!(error = %e, "cannot hand the store's writes to the backend");
                    self.store.backend_failed();
                }
            }
        }
        self.store.defer_compaction(peers.views.is_some());
        self.peers = peers;
        self.publish();
        self
    }

    /// After a batch: once enough is pending, sends the buffered writes to the backend actor
    /// (which commits per its own policy), or commits them straight into the engine. Sending
    /// at the old commit points rather than after every batch keeps the backend's thread asleep
    /// between ticks: on 2 cores a wake-up per batch cost single-client put latency. With the
    /// backend, a long queue of uncommitted writes makes the actor wait for a commit before its
    /// next message.
    fn commit_after_batch(&mut self, ctx: &mut Context<Self>) -> Result<(), EtcdError> {
        let full = self.store.pending_ops() >= self.max_pending_ops
            || self.store.pending_bytes() >= MAX_PENDING_BYTES;
        match &self.backend {
            Some(link) => {
                if full {
                    self.store.commit()?;
                }
                if self.store.uncommitted_keys() > MAX_UNCOMMITTED_KEYS {
                    self.store.commit()?;
                    let flushed = link.flush.send(Flush);
                    ctx.wait(flushed.into_actor(self).map(|res, act, _| {
                        if let Ok(Err(e)) | Err(e) = res.map_err(|e| e.to_string()) {
                            tracing::error!(error = %e, "backend flush failed");
                            act.store.backend_failed();
                        }
                    }));
                }
                Ok(())
            }
            None => {
                if full {
                    self.store.commit()?;
                }
                Ok(())
            }
        }
    }

    /// Publishes the state as applied now for the readers.
    fn publish(&mut self) {
        if let Some(views) = &self.peers.views {
            views.send_replace(std::sync::Arc::new(self.store.read_view()));
        }
    }

    /// Hands the events of the batches just applied to the hub. `do_send`: one message per
    /// batch, bounded by the apply rate.
    fn announce(&mut self) {
        let out = self.store.take_outbox();
        if !out.events.is_empty()
            && self.hub_listening
            && let Some(w) = &self.peers.watch
        {
            w.do_send(Notify {
                revision: self.store.current_revision(),
                events: out.events,
                restored: false,
            });
        }
    }

    /// Starts the actor on its own `Arbiter` thread. Must be called inside a running actix
    /// System.
    pub fn start_sync(store: Store) -> Addr<Self> {
        Self::start_batched(store, 1)
    }

    /// [`Self::start_sync`] with batched commits (see [`Self::batched`]).
    pub fn start_batched(store: Store, max_pending_ops: usize) -> Addr<Self> {
        Self::start_with(store, max_pending_ops, None)
    }

    /// [`Self::start_batched`], telling `peers` what each batch changes (see
    /// [`Self::with_peers`]).
    pub fn start_with(
        store: Store,
        max_pending_ops: usize,
        peers: Option<MvccPeers>,
    ) -> Addr<Self> {
        // Built on the arbiter's own thread: the pending LMDB write transaction must begin and
        // end on one thread, and the actor never leaves this one.
        let arbiter = Arbiter::new();
        MvccActor::start_in_arbiter(&arbiter.handle(), move |_| {
            let actor = MvccActor::batched(store, max_pending_ops);
            match peers {
                Some(p) => actor.with_peers(p),
                None => actor,
            }
        })
    }

    /// [`Self::start_with`] on the calling thread.
    pub fn start_here(
        store: Store,
        max_pending_ops: usize,
        peers: Option<MvccPeers>,
    ) -> Addr<Self> {
        let actor = MvccActor::batched(store, max_pending_ops);
        match peers {
            Some(p) => actor.with_peers(p),
            None => actor,
        }
        .start()
    }
}

impl Actor for MvccActor {
    type Context = Context<Self>;

    /// Every read and apply of the server comes through here: don't let actix's default
    /// mailbox of 16 make senders queue outside it.
    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(65536);
    }

    /// Nothing applied is lost by stopping uncommitted (the WAL replays it), but committing
    /// makes the next start quicker.
    fn stopped(&mut self, _: &mut Self::Context) {
        if let Err(e) = self.store.commit() {
            tracing::warn!(error = %e, "final commit failed; the WAL will replay it");
        }
    }
}

/// Applies committed requests in one backend transaction together with the consistent index;
/// replies with one result per request, in order (unless the waiters got them), the revision
/// after and the lease changes of the keys written. `Err` means the engine failed and nothing
/// of the batch was applied.
impl Handler<ApplyBatch> for MvccActor {
    type Result = Result<BatchApplied, EtcdError>;

    fn handle(&mut self, msg: ApplyBatch, ctx: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("ApplyBatch");
        let (started, requests) = (std::time::Instant::now(), msg.requests.len());
        let outcome = self
            .store
            .apply_deferred(
                msg.consistent_index,
                msg.term,
                msg.requests,
                msg.ops,
                &msg.leases,
            )
            .inspect_err(|_| self.publish())?;
        let took = started.elapsed();
        if took > self.warn_apply {
            self.counts.slow_applies += 1;
            tracing::warn!(
                took = ?took,
                expected_duration = ?self.warn_apply,
                requests,
                consistent_index = msg.consistent_index,
                "apply request took too long"
            );
        }
        self.after_batch(outcome, msg.replies, ctx)
    }
}

/// Deletes the keys of a lease revoke at one revision, like a batch of one request.
impl Handler<DeleteKeys> for MvccActor {
    type Result = Result<BatchApplied, EtcdError>;

    fn handle(&mut self, msg: DeleteKeys, ctx: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("DeleteKeys");
        let outcome = self
            .store
            .delete_keys_deferred(msg.consistent_index, msg.term, msg.keys, msg.ops)
            .inspect_err(|_| self.publish())?;
        self.after_batch(outcome, Vec::new(), ctx)
    }
}

impl MvccActor {
    /// Runs compaction deletions, timing them while a compaction is under way (etcd's pause
    /// and total durations, and the time it finished). As etcd's `scheduleCompaction`, a
    /// slice of deletions is a pause only when more follow (etcd observes the pause between
    /// two batches, none for the last, so a compaction of one batch has none); the key
    /// indexes' slices are the index pause's, not this one's.
    fn compaction_slice(
        &mut self,
        run: impl FnOnce(&mut Store) -> Result<(), EtcdError>,
    ) -> Result<(), EtcdError> {
        if !self.store.compacting() {
            let done = run(&mut self.store);
            self.answer_physical_waiters()?;
            return done;
        }
        let deletions = !self.store.compacting_index();
        let started = std::time::Instant::now();
        let done = run(&mut self.store);
        let t = &mut self.timings;
        if deletions && self.store.compacting() {
            t.db_pause.observe(started.elapsed().as_secs_f64() * 1000.0);
        }
        if !self.store.compacting() {
            if let Some(from) = t.compaction_started.take() {
                t.db_total.observe(from.elapsed().as_secs_f64() * 1000.0);
            }
            t.compaction_last = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs() as f64);
            done?;
            return self.answer_physical_waiters();
        }
        done
    }

    /// Runs the next compaction step after `compaction_pace`, and so on until the compaction is
    /// done (one timer at a time).
    fn pace_compaction(&mut self, ctx: &mut Context<Self>) {
        let Some(pace) = self.compaction_pace else {
            return;
        };
        if self.pacing || !self.store.compacting() {
            return;
        }
        self.pacing = true;
        ctx.run_later(pace, |act, ctx| {
            act.pacing = false;
            let step = act.store.compaction_batch_limit();
            match act.compaction_slice(|s| s.step_compaction(step).map(drop)) {
                Ok(()) => act.pace_compaction(ctx),
                // The store refuses work from now on, or the step is tried again by the next
                // `FlushStore`, whose failure the ticker reports.
                Err(e) => tracing::error!(error = %e, "compaction step failed"),
            }
        });
    }

    /// Answers the physical compactions waiting for their deletions, once none is under way:
    /// the last slice is sent toward the disk first (etcd forces a backend commit there).
    fn answer_physical_waiters(&mut self) -> Result<(), EtcdError> {
        if self.physical_waiters.is_empty() || self.store.compacting() {
            return Ok(());
        }
        self.store.commit()?;
        for (reply, res) in self.physical_waiters.drain(..) {
            let _ = reply.send(res);
        }
        Ok(())
    }

    /// What follows every applied batch: watchers hear of it before any client does, the
    /// waiters get their results, a compaction slice runs, the writes go on toward the disk.
    fn after_batch(
        &mut self,
        (mut results, attachments): Outcome,
        replies: Vec<Option<tokio::sync::oneshot::Sender<ApplyResult>>>,
        ctx: &mut Context<Self>,
    ) -> Result<BatchApplied, EtcdError> {
        // Before the hub hears of the batch (its history reads for watchers catching up must
        // reach the revision it was told of), before any waiter does, and before the applier
        // (hence raft) counts it applied: a read that follows any of them sees it.
        self.publish();
        // Only now may the index lose what a compaction drops (see `view.rs`).
        let was_compacting = self.store.compacting();
        let started = std::time::Instant::now();
        let finish_now = self.max_pending_ops == 1 && self.backend.is_none();
        let physical = self.store.start_due_compaction();
        if !was_compacting && self.store.compacting() {
            self.timings
                .index_pause
                .observe(started.elapsed().as_secs_f64() * 1000.0);
            self.timings.compaction_started = Some(started);
        }
        // A physical compaction's result travels back with the batch when it has no waiter
        // here: then the batch waits for the deletions, as before.
        if physical == Some(true) && (replies.is_empty() || finish_now) {
            self.compaction_slice(Store::finish_compaction_now)?;
        }
        let hold = physical == Some(true) && self.store.compacting();
        self.announce();
        if !replies.is_empty() {
            for (res, reply) in results.drain(..).zip(replies) {
                if let Some(reply) = reply {
                    // A physical compaction is answered once its deletions are done (below,
                    // by the slice that ends them); the applies go on meanwhile.
                    if hold && matches!(res, Ok(ApplyResponse::Compaction(_))) {
                        self.physical_waiters.push((reply, res));
                    } else {
                        let _ = reply.send(res);
                    }
                }
            }
        }
        if finish_now {
            self.compaction_slice(Store::finish_compaction_now)?;
        } else {
            self.pace_compaction(ctx);
        }
        self.commit_after_batch(ctx)?;
        Ok(BatchApplied {
            results,
            revision: self.store.current_revision(),
            attachments,
        })
    }
}

/// Every live key whose latest record names a lease (the applier reads it after a snapshot
/// is installed).
impl Handler<LeasedKeys> for MvccActor {
    type Result = Result<Vec<(Vec<u8>, i64)>, EtcdError>;

    fn handle(&mut self, _: LeasedKeys, _: &mut Self::Context) -> Self::Result {
        Ok(self.store.leased_keys())
    }
}

/// Reads the key space at the requested revision (the sender has done any linearizability
/// wait).
impl Handler<Range> for MvccActor {
    type Result = Result<RangeResponse, EtcdError>;

    fn handle(&mut self, msg: Range, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("Range");
        self.store.range(&msg.request)
    }
}

/// Reports the revision clock, compaction state, consistent index and backend size.
impl Handler<GetStoreStatus> for MvccActor {
    type Result = Result<StoreStatus, EtcdError>;

    fn handle(&mut self, _: GetStoreStatus, _: &mut Self::Context) -> Self::Result {
        self.store.status()
    }
}

/// A txn without writes, read at the current revision.
impl Handler<ReadTxn> for MvccActor {
    type Result = Result<actcd_proto::etcdserverpb::TxnResponse, EtcdError>;

    fn handle(&mut self, msg: ReadTxn, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("ReadTxn");
        self.store.read_only_txn(msg.request)
    }
}

/// etcd's HashKV over the records up to a revision.
impl Handler<HashKv> for MvccActor {
    type Result = Result<HashKvResult, EtcdError>;

    fn handle(&mut self, msg: HashKv, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("HashKv");
        self.store.hash_kv(msg.revision)
    }
}

/// The backend commit latencies so far.
impl Handler<actcd_types::msg::GetCommitStats> for MvccActor {
    type Result = actix::MessageResult<actcd_types::msg::GetCommitStats>;

    fn handle(
        &mut self,
        _: actcd_types::msg::GetCommitStats,
        _: &mut Self::Context,
    ) -> Self::Result {
        actix::MessageResult(self.store.commit_stats())
    }
}

/// etcd's `Hash` of the whole backend, with pending applies committed first. Nothing is applied
/// meanwhile, so the revision answered is the one hashed.
impl Handler<HashBackend> for MvccActor {
    type Result = AtomicResponse<Self, Result<(u32, i64), EtcdError>>;

    fn handle(&mut self, _: HashBackend, _: &mut Self::Context) -> Self::Result {
        let hash = |act: &mut Self| {
            let started = std::time::Instant::now();
            let hash = act.store.hash_backend();
            act.timings.hash.observe(started.elapsed().as_secs_f64());
            Ok((hash?, act.store.current_revision()))
        };
        let flushed = match self.committed_first(|link| link.flush.send(Flush)) {
            Ok(Some(flushed)) => flushed,
            Ok(None) => return AtomicResponse::new(Box::pin(actix::fut::ready(hash(self)))),
            Err(e) => return AtomicResponse::new(Box::pin(actix::fut::ready(Err(e)))),
        };
        AtomicResponse::new(Box::pin(flushed.into_actor(self).map(
            move |res, act, _| {
                backend_answer(res)?;
                hash(act)
            },
        )))
    }
}

/// Defragmentation: pending applies are committed first (the backend copies what it has
/// committed and replays into the copy what it commits after), then applies and reads go on
/// while the backend works, unlike etcd's, which holds every write for the whole of it. The
/// buffer's read transaction is let go after the swap, so its next read begins in the new file
/// and the old one's space goes back once no transaction holds it.
impl Handler<Defragment> for MvccActor {
    type Result = actix::ResponseActFuture<Self, Result<(u64, u64), EtcdError>>;

    fn handle(&mut self, _: Defragment, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("Defragment");
        let started = std::time::Instant::now();
        let Some(link) = self.backend.clone() else {
            let answer = self.store.defragment();
            self.timings.defrag.observe(started.elapsed().as_secs_f64());
            return Box::pin(actix::fut::ready(answer));
        };
        if let Err(e) = self.store.commit() {
            return Box::pin(actix::fut::ready(Err(e)));
        }
        self.timings.defrag_inflight = true;
        let done = link.defragment.send(Defragment);
        Box::pin(done.into_actor(self).map(move |res, act, _| {
            act.timings.defrag_inflight = false;
            act.timings.defrag.observe(started.elapsed().as_secs_f64());
            act.store.release_reader();
            res.map_err(|e| EtcdError::internal(format!("backend: {e}")))?
        }))
    }
}

/// etcd's Snapshot RPC: everything applied is committed first, so the read transaction the
/// file streams from sees it all; the file is made on a blocking thread, applies go on.
impl Handler<SnapshotStream> for MvccActor {
    type Result = ResponseFuture<Result<SnapshotChunks, EtcdError>>;

    fn handle(&mut self, _: SnapshotStream, ctx: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("SnapshotStream");
        let reader = self.open_reader();
        let damage = self.store.damage().clone();
        let me = ctx.address();
        Box::pin(async move {
            let StoreReader(reader) = reader.await?;
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            tokio::task::spawn_blocking(move || {
                let started = std::time::Instant::now();
                // A damaged record fails the file (the client hears `corrupt cluster`).
                if let Err(actcd_etcd_snapshot::EtcdSnapshotError::Damaged(d)) =
                    actcd_etcd_snapshot::send_snapshot(&*reader, &tx)
                {
                    damage.report(&d, "snapshot");
                }
                me.do_send(SnapshotSent(started.elapsed()));
            });
            Ok(SnapshotChunks(rx))
        })
    }
}

/// A Snapshot RPC's file was streamed out, in this long (etcd's
/// `etcd_disk_backend_snapshot_duration_seconds`).
#[derive(Debug, actix::Message)]
#[rtype(result = "()")]
struct SnapshotSent(std::time::Duration);

impl Handler<SnapshotSent> for MvccActor {
    type Result = ();

    fn handle(&mut self, msg: SnapshotSent, _: &mut Self::Context) {
        self.timings.snapshot.observe(msg.0.as_secs_f64());
    }
}

/// A copy of the whole store for a member too far behind for the log, once this member has
/// applied the snapshot's index: pending applies are committed first, so the copy covers them.
/// The copy is read out of one read transaction on a blocking thread and streamed in chunks as
/// the receiver takes them: applies go on meanwhile, and no store-sized buffer is ever held,
/// however large the store.
impl Handler<MakeSnapshot> for MvccActor {
    type Result = ResponseFuture<Result<StoreSnapshot, SnapshotError>>;

    fn handle(&mut self, msg: MakeSnapshot, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("MakeSnapshot");
        let failed = |e: EtcdError| SnapshotError::Failed(e.to_string());
        let reader = if self.store.consistent_index() < msg.min_index {
            None
        } else {
            Some(self.open_reader())
        };
        Box::pin(async move {
            let reader = reader
                .ok_or(SnapshotError::NotReady)?
                .await
                .map_err(failed)?;
            let (consistent_index, chunks) = crate::store::stream_blob(reader.0).map_err(failed)?;
            Ok(StoreSnapshot {
                consistent_index,
                chunks,
            })
        })
    }
}

impl MvccActor {
    /// Commits what is buffered; with the backend actor, then asks it `ask` (its mailbox keeps
    /// the order, so the answer follows the commit). `None`: no backend, committed already.
    fn committed_first<F>(
        &mut self,
        ask: impl FnOnce(&BackendLink) -> F,
    ) -> Result<Option<F>, EtcdError> {
        self.store.commit()?;
        Ok(self.backend.as_ref().map(ask))
    }

    /// A read transaction that sees every applied write.
    fn open_reader(
        &mut self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<StoreReader, EtcdError>>>> {
        match self.committed_first(|link| link.open_reader.send(OpenStoreReader)) {
            Ok(Some(asked)) => Box::pin(async move {
                asked
                    .await
                    .map_err(|e| EtcdError::internal(format!("backend: {e}")))?
            }),
            Ok(None) => {
                let reader = self.store.read_owned().map(StoreReader);
                Box::pin(async move { reader })
            }
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    /// After a snapshot was installed: the hub follows (the applier reads the members, alarms
    /// and leases again).
    fn after_restore(&mut self, snapshot_index: u64, index: u64) {
        tracing::info!(
            snapshot_index,
            consistent_index = index,
            revision = self.store.current_revision(),
            "installed a snapshot from the leader"
        );
        self.publish();
        if self.hub_listening
            && let Some(w) = &self.peers.watch
        {
            w.do_send(Notify {
                revision: self.store.current_revision(),
                events: vec![],
                restored: true,
            });
        }
        self.announce();
    }
}

/// What the backend answered a `Flush` or `SyncBackend`.
fn backend_answer(res: Result<Result<(), String>, actix::MailboxError>) -> Result<(), EtcdError> {
    match res {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(EtcdError::internal(e)),
        Err(e) => Err(EtcdError::internal(format!("backend: {e}"))),
    }
}

/// Replaces the store with a snapshot the leader sent (through the applier, in log order),
/// durably: with the backend actor, the snapshot's records are sent and synced before the
/// store rebuilds from them, and nothing else is applied meanwhile. Watchers catch up from the
/// new history (the applier reads the members, alarms and leases again, and tells raft and
/// the lessor).
impl Handler<InstallSnapshot> for MvccActor {
    type Result = AtomicResponse<Self, Result<u64, EtcdError>>;

    fn handle(&mut self, msg: InstallSnapshot, _: &mut Self::Context) -> Self::Result {
        // `return`: the install fails before anything is written, as a refused one does.
        #[cfg(feature = "failpoints")]
        fail::fail_point!("snapshot_before_install", |_| AtomicResponse::new(
            Box::pin(actix::fut::ready(Err(EtcdError::internal(
                "mvcc: injected by failpoint snapshot_before_install"
            ))))
        ));
        let snapshot_index = msg.index;
        let Some(link) = self.backend.clone() else {
            let done = match &msg.data {
                StoreCopy::Blob(blob) => blob
                    .map()
                    .map_err(|e| EtcdError::internal(format!("mvcc: snapshot file: {e}")))
                    .and_then(|map| self.store.restore(&map))
                    .inspect(|&index| self.after_restore(snapshot_index, index)),
                StoreCopy::Prepared(_) => Err(EtcdError::internal(
                    "mvcc: a store prepared by a backend, and no backend to swap it in",
                )),
            };
            return AtomicResponse::new(Box::pin(actix::fut::ready(done)));
        };
        // Pending applies reach the backend first; the copy replaces them with everything else.
        if let Err(e) = self.store.prepare_replace() {
            return AtomicResponse::new(Box::pin(actix::fut::ready(Err(e))));
        }
        let replaced = link.replace.send(ReplaceStore { copy: msg.data });
        AtomicResponse::new(Box::pin(replaced.into_actor(self).map(
            move |res, act, _| {
                backend_answer(res)?;
                let index = act.store.finish_restore()?;
                act.after_restore(snapshot_index, index);
                Ok(index)
            },
        )))
    }
}

/// The backend committed every write sent up to `seq`: the buffer stops holding them.
impl Handler<Committed> for MvccActor {
    type Result = ();

    fn handle(&mut self, msg: Committed, _: &mut Self::Context) {
        self.store.committed(msg.seq);
        // Views from now on find those records in the engine: the old runs can go.
        self.publish();
    }
}

/// The backend failed: applied state no longer reaches the disk. The store refuses further
/// work, so the next apply fails and the member stops (a restart replays the WAL).
impl Handler<BackendFailed> for MvccActor {
    type Result = ();

    fn handle(&mut self, msg: BackendFailed, _: &mut Self::Context) {
        tracing::error!(error = %msg.error, "the backend failed; the store stops applying");
        self.store.backend_failed();
        self.publish();
    }
}

/// The hub starts or stops listening; the reply is the revision later notifications follow.
impl Handler<WatchInterest> for MvccActor {
    type Result = i64;

    fn handle(&mut self, msg: WatchInterest, _: &mut Self::Context) -> i64 {
        self.hub_listening = msg.on;
        self.store.current_revision()
    }
}

/// Key history for watchers catching up.
impl Handler<History> for MvccActor {
    type Result = Result<HistoryChunk, EtcdError>;

    fn handle(&mut self, msg: History, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("History");
        self.store.history(msg.from, msg.to, msg.max_events)
    }
}

/// The revision clock now (the applier stamps auth answers with it).
impl Handler<CurrentRevision> for MvccActor {
    type Result = i64;

    fn handle(&mut self, _: CurrentRevision, _: &mut Self::Context) -> i64 {
        self.store.current_revision()
    }
}

/// Makes everything applied durable: the raft node sends it before releasing WAL segments.
impl Handler<SyncStorage> for MvccActor {
    type Result = ResponseFuture<Result<(), EtcdError>>;

    fn handle(&mut self, _: SyncStorage, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("SyncStorage");
        let Some(link) = self.backend.clone() else {
            let done = self.store.sync();
            return Box::pin(async move { done });
        };
        let sent = self.store.commit();
        let synced = link.sync.send(SyncBackend);
        Box::pin(async move {
            sent?;
            backend_answer(synced.await)
        })
    }
}

/// Commits the applied batches still pending.
impl Handler<FlushStore> for MvccActor {
    type Result = Result<(), EtcdError>;

    fn handle(&mut self, _: FlushStore, ctx: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("FlushStore");
        let step = self.store.compaction_batch_limit();
        self.compaction_slice(|s| s.step_compaction(step).map(drop))?;
        // A compaction resumed otherwise than by a batch (or after a failed step) is paced too.
        self.pace_compaction(ctx);
        self.store.commit()?;
        if let Some(link) = &self.backend {
            link.flush.do_send(Flush);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use actcd_proto::actcdpb::InternalRaftRequest;
    use actcd_proto::etcdserverpb::{PutRequest, RangeRequest};
    use actcd_types::MemberIdentity;
    use actcd_types::msg::ApplyResponse;
    use actcd_types::snapshot_blob::SnapshotBlob;
    use actcd_types::storage::MemEngine;

    /// A Put of `k` = `v`.
    fn put(v: &str) -> InternalRaftRequest {
        InternalRaftRequest {
            put: Some(PutRequest {
                key: b"k".to_vec(),
                value: v.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Sends one ApplyBatch and unwraps the mailbox and the engine.
    async fn apply(
        addr: &Addr<MvccActor>,
        consistent_index: u64,
        requests: Vec<InternalRaftRequest>,
    ) -> Vec<ApplyResult> {
        addr.send(ApplyBatch {
            consistent_index,
            term: 2,
            requests,
            replies: Vec::new(),
            ops: Vec::new(),
            leases: Vec::new(),
        })
        .await
        .unwrap()
        .unwrap()
        .results
    }

    #[actix::test]
    async fn messages_reach_the_store_in_order() {
        let store = Store::open(Arc::new(MemEngine::new()), MemberIdentity::default()).unwrap();
        let addr = MvccActor::start_sync(store);
        let results = apply(&addr, 5, vec![put("v")]).await;
        assert!(
            matches!(&results[0], Ok(ApplyResponse::Put(r)) if r.header.as_ref().unwrap().revision == 2)
        );
        let read = addr
            .send(Range {
                request: RangeRequest {
                    key: b"k".to_vec(),
                    ..Default::default()
                },
            })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(read.kvs[0].value, b"v");
        let status = addr.send(GetStoreStatus).await.unwrap().unwrap();
        assert_eq!(
            (status.revision, status.consistent_index, status.term),
            (2, 5, 2)
        );
    }

    /// The consistent index the engine has committed, as stored.
    fn committed_index(engine: &MemEngine) -> Option<Vec<u8>> {
        use actcd_types::storage::{KvEngine, Table};
        engine
            .read()
            .unwrap()
            .get(Table::Meta, crate::META_CONSISTENT_INDEX)
            .unwrap()
    }

    #[actix::test]
    async fn batched_commits_wait_for_a_flush_and_reads_see_them_before() {
        let engine = Arc::new(MemEngine::new());
        let store = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
        let addr = MvccActor::start_batched(store, 1000);
        apply(&addr, 5, vec![put("v")]).await;
        let committed = || committed_index(&engine);
        assert_eq!(committed(), None, "nothing committed before a flush");
        let range = Range {
            request: RangeRequest {
                key: b"k".to_vec(),
                ..Default::default()
            },
        };
        let r = addr.send(range).await.unwrap().unwrap();
        assert_eq!(
            r.kvs[0].value, b"v",
            "reads see applied, uncommitted writes"
        );
        addr.send(FlushStore).await.unwrap().unwrap();
        assert_eq!(committed(), Some(5u64.to_be_bytes().to_vec()));
    }

    fn compaction(revision: i64, physical: bool) -> InternalRaftRequest {
        InternalRaftRequest {
            compaction: Some(actcd_proto::etcdserverpb::CompactionRequest { revision, physical }),
            ..Default::default()
        }
    }

    /// The revision the last compaction finished at, as the engine holds it.
    fn finished_compaction(engine: &MemEngine) -> Option<Vec<u8>> {
        use actcd_types::storage::{KvEngine, Table};
        engine
            .read()
            .unwrap()
            .get(Table::Meta, crate::META_FINISHED_COMPACT)
            .unwrap()
    }

    #[actix::test]
    async fn batched_compaction_runs_in_slices_and_physical_waits() {
        let engine = Arc::new(MemEngine::new());
        let store = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
        let addr = start_unpaced(store, 1_000_000, None);
        // Revisions 2..=13001; compacting at 12500 leaves 12498 records to delete: the index's
        // step, then thirteen of deletions, one per flush (no timer here, and none after a
        // batch).
        let reqs = (0..13000).map(|i| put(&i.to_string())).collect();
        apply(&addr, 1, reqs).await;
        let finished = || finished_compaction(&engine);
        apply(&addr, 2, vec![compaction(12500, false)]).await;
        apply(&addr, 3, vec![put("more")]).await;
        let mut flushes = 0;
        while finished().is_none() {
            assert!(flushes < 20, "the compaction never ends");
            addr.send(FlushStore).await.unwrap().unwrap();
            flushes += 1;
        }
        assert_eq!(finished(), Some(12500i64.to_be_bytes().to_vec()));
        assert_eq!(flushes, 14, "one step a flush");
        apply(&addr, 4, vec![compaction(13000, true)]).await;
        addr.send(FlushStore).await.unwrap().unwrap();
        assert_eq!(
            finished(),
            Some(13000i64.to_be_bytes().to_vec()),
            "physical finished at once"
        );
    }
    #[actix::test]
    async fn physical_compaction_waiter_is_answered_after_deletions_not_the_batch() {
        let engine = Arc::new(MemEngine::new());
        let mut store = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
        // Steps of 100 on the 5 ms timer: the 12,498 records take at least 125 steps, 0.6 s.
        store.set_compaction_batch_limit(100);
        // With read views, as in the server: the actor, not the store, runs the compaction.
        let (publisher, _views) = crate::ReadViews::channel(store.read_view());
        let peers = MvccPeers {
            views: Some(publisher),
            ..MvccPeers::default()
        };
        let addr = MvccActor::start_with(store, 1_000_000, Some(peers));
        let reqs = (0..13000).map(|i| put(&i.to_string())).collect();
        apply(&addr, 1, reqs).await;
        let finished = || finished_compaction(&engine);
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let applied = addr
            .send(ApplyBatch {
                consistent_index: 2,
                term: 2,
                requests: vec![compaction(12500, true)],
                replies: vec![Some(tx)],
                ops: Vec::new(),
                leases: Vec::new(),
            })
            .await
            .unwrap()
            .unwrap();
        assert!(applied.results.is_empty(), "the result went to the waiter");
        // The batch is done but the deletions are not: the waiter has no answer yet, and
        // the next apply is not held up by them.
        assert!(rx.try_recv().is_err(), "answered before the deletions");
        let results = apply(&addr, 3, vec![put("after")]).await;
        assert!(matches!(&results[0], Ok(ApplyResponse::Put(_))));
        assert!(rx.try_recv().is_err(), "answered before the deletions");
        assert_eq!(finished(), None);
        // The timer runs the steps to the end (no flush is sent), then answers the waiter.
        assert!(matches!(
            rx.await.unwrap(),
            Ok(ApplyResponse::Compaction(_))
        ));
        assert_eq!(finished(), Some(12500i64.to_be_bytes().to_vec()));
    }

    /// [`MvccActor::start_with`] without the compaction timer: steps run only on `FlushStore`.
    fn start_unpaced(
        store: Store,
        max_pending_ops: usize,
        peers: Option<MvccPeers>,
    ) -> Addr<MvccActor> {
        let arbiter = Arbiter::new();
        MvccActor::start_in_arbiter(&arbiter.handle(), move |_| {
            let actor = MvccActor::batched(store, max_pending_ops).with_compaction_pace(None);
            match peers {
                Some(p) => actor.with_peers(p),
                None => actor,
            }
        })
    }

    /// Stands in for the backend actor over a `MemEngine`: keeps `Commit`s until a `Flush` or
    /// `SyncBackend`, then commits them and reports `Committed`, as the real one does.
    struct FakeBackend {
        engine: Arc<MemEngine>,
        held: Vec<Commit>,
        store: Option<Recipient<Committed>>,
    }

    impl Actor for FakeBackend {
        type Context = actix::Context<Self>;
    }

    #[derive(actix::Message)]
    #[rtype(result = "()")]
    struct Tell(Recipient<Committed>);

    impl Handler<Tell> for FakeBackend {
        type Result = ();
        fn handle(&mut self, msg: Tell, _: &mut Self::Context) {
            self.store = Some(msg.0);
        }
    }

    impl FakeBackend {
        fn commit(&mut self) -> Result<(), String> {
            use actcd_types::storage::KvEngine;
            let Some(seq) = self.held.last().map(|c| c.seq) else {
                return Ok(());
            };
            let mut txn = self.engine.write().map_err(|e| e.to_string())?;
            for c in self.held.drain(..) {
                actcd_types::storage::write_ops(&mut *txn, &c.ops, c.consistent_index)
                    .map_err(|e| e.to_string())?;
            }
            txn.commit().map_err(|e| e.to_string())?;
            if let Some(s) = &self.store {
                s.do_send(Committed { seq });
            }
            Ok(())
        }
    }

    impl Handler<Commit> for FakeBackend {
        type Result = ();
        fn handle(&mut self, msg: Commit, _: &mut Self::Context) {
            self.held.push(msg);
        }
    }

    impl Handler<Flush> for FakeBackend {
        type Result = Result<(), String>;
        fn handle(&mut self, _: Flush, _: &mut Self::Context) -> Self::Result {
            self.commit()
        }
    }

    impl Handler<SyncBackend> for FakeBackend {
        type Result = Result<(), String>;
        fn handle(&mut self, _: SyncBackend, _: &mut Self::Context) -> Self::Result {
            self.commit()
        }
    }

    impl Handler<Defragment> for FakeBackend {
        type Result = Result<(u64, u64), EtcdError>;
        fn handle(&mut self, _: Defragment, _: &mut Self::Context) -> Self::Result {
            self.commit().map_err(EtcdError::internal)?;
            Ok((1, 1))
        }
    }

    impl Handler<OpenStoreReader> for FakeBackend {
        type Result = Result<StoreReader, EtcdError>;
        fn handle(&mut self, _: OpenStoreReader, _: &mut Self::Context) -> Self::Result {
            use actcd_types::storage::KvEngine;
            self.commit().map_err(EtcdError::internal)?;
            Ok(StoreReader(
                Arc::clone(&self.engine)
                    .read_owned()
                    .map_err(EtcdError::internal)?,
            ))
        }
    }

    impl Handler<ReplaceStore> for FakeBackend {
        type Result = Result<(), String>;
        fn handle(&mut self, msg: ReplaceStore, _: &mut Self::Context) -> Self::Result {
            use actcd_types::storage::KvEngine;
            self.commit()?;
            let StoreCopy::Blob(blob) = msg.copy else {
                return Err("the fake backend prepares nothing".into());
            };
            let map = blob.map().map_err(|e| e.to_string())?;
            let mut txn = self.engine.write().map_err(|e| e.to_string())?;
            actcd_etcd_snapshot::whole_store::install_blob(&mut *txn, &map)
                .map_err(|e| e.to_string())?;
            txn.commit().map_err(|e| e.to_string())
        }
    }

    /// A store sending its writes to a [`FakeBackend`].
    fn with_fake_backend(engine: &Arc<MemEngine>) -> Addr<MvccActor> {
        let store = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
        let backend = FakeBackend {
            engine: engine.clone(),
            held: vec![],
            store: None,
        }
        .start();
        let peers = MvccPeers {
            backend: Some(BackendLink::of(&backend)),
            ..MvccPeers::default()
        };
        let addr = MvccActor::start_with(store, 10_000, Some(peers));
        backend.do_send(Tell(addr.clone().recipient()));
        addr
    }

    #[actix::test]
    async fn with_the_backend_actor_reads_see_sent_writes_and_waiters_see_them_committed() {
        use actcd_types::storage::{KvEngine, Table};
        let engine = Arc::new(MemEngine::new());
        let addr = with_fake_backend(&engine);
        apply(&addr, 5, vec![put("v")]).await;
        let committed = || committed_index(&engine);
        let range = || Range {
            request: RangeRequest {
                key: b"k".to_vec(),
                ..Default::default()
            },
        };
        let r = addr.send(range()).await.unwrap().unwrap();
        assert_eq!(r.kvs[0].value, b"v", "reads see sent, uncommitted writes");
        assert_eq!(committed(), None, "the backend holds them until a flush");

        // HashBackend waits for the commit: it hashes what the engine holds.
        let (hash, rev) = addr.send(HashBackend).await.unwrap().unwrap();
        assert_eq!(rev, 2);
        assert_eq!(committed(), Some(5u64.to_be_bytes().to_vec()));
        let direct = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
        assert_eq!(direct.hash_backend().unwrap(), hash);

        // After `Committed` trimmed the buffer, reads come from the engine.
        apply(&addr, 6, vec![put("w")]).await;
        addr.send(SyncStorage).await.unwrap().unwrap();
        assert_eq!(committed(), Some(6u64.to_be_bytes().to_vec()));
        let r = addr.send(range()).await.unwrap().unwrap();
        assert_eq!(r.kvs[0].value, b"w");

        // A reader and a snapshot cover every applied write.
        apply(&addr, 7, vec![put("x")]).await;
        let SnapshotChunks(mut chunks) = addr.send(SnapshotStream).await.unwrap().unwrap();
        let mut file = Vec::new();
        while let Some(chunk) = chunks.recv().await {
            file.extend(chunk.unwrap().blob);
        }
        // The last 32 bytes are the file's SHA-256, as etcd sends it.
        file.truncate(file.len() - 32);
        let db = actcd_etcd_snapshot::bolt::read(&file).unwrap();
        let meta = db.buckets.iter().find(|(name, _)| name == b"meta").unwrap();
        let index = meta
            .1
            .iter()
            .find(|(k, _)| k == b"consistent_index")
            .map(|(_, v)| u64::from_be_bytes(v.as_slice().try_into().unwrap()));
        assert_eq!(index, Some(7), "the Snapshot RPC's file covers entry 7");
        apply(&addr, 8, vec![put("y")]).await;
        let snap = addr
            .send(MakeSnapshot { min_index: 8 })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(snap.consistent_index, 8);
        let mut blob = Vec::new();
        let mut chunks = snap.chunks;
        while let Some(chunk) = chunks.recv().await {
            blob.extend(chunk.unwrap());
        }
        let dir = tempfile::tempdir().unwrap();
        let path = SnapshotBlob::incoming_path(dir.path());
        let data = SnapshotBlob::write(path.clone(), &blob).unwrap();

        // Installing it elsewhere replaces that store's state durably.
        let other_engine = Arc::new(MemEngine::new());
        let other = with_fake_backend(&other_engine);
        apply(&other, 3, vec![put("old")]).await;
        let index = other
            .send(InstallSnapshot {
                index: 8,
                data: StoreCopy::Blob(data),
            })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(index, 8);
        assert!(!path.exists(), "the received copy goes once installed");
        let r = other.send(range()).await.unwrap().unwrap();
        assert_eq!(r.kvs[0].value, b"y");
        let status = other.send(GetStoreStatus).await.unwrap().unwrap();
        assert_eq!((status.revision, status.consistent_index), (5, 8));
        assert_eq!(
            other_engine
                .read()
                .unwrap()
                .get(Table::Meta, crate::META_CONSISTENT_INDEX)
                .unwrap(),
            Some(8u64.to_be_bytes().to_vec()),
            "the snapshot's own consistent index was committed"
        );
        assert_eq!(addr.send(Defragment).await.unwrap().unwrap(), (1, 1));
    }

    /// A backend whose defragmentation never ends: the store waits on it and takes no other
    /// message meanwhile, as it does for a long defragmentation.
    struct StuckBackend;

    impl Actor for StuckBackend {
        type Context = actix::Context<Self>;
    }

    impl Handler<Commit> for StuckBackend {
        type Result = ();
        fn handle(&mut self, _: Commit, _: &mut Self::Context) {}
    }

    impl Handler<Flush> for StuckBackend {
        type Result = ResponseFuture<Result<(), String>>;
        fn handle(&mut self, _: Flush, _: &mut Self::Context) -> Self::Result {
            Box::pin(std::future::pending())
        }
    }

    impl Handler<SyncBackend> for StuckBackend {
        type Result = Result<(), String>;
        fn handle(&mut self, _: SyncBackend, _: &mut Self::Context) -> Self::Result {
            Ok(())
        }
    }

    impl Handler<Defragment> for StuckBackend {
        type Result = ResponseFuture<Result<(u64, u64), EtcdError>>;
        fn handle(&mut self, _: Defragment, _: &mut Self::Context) -> Self::Result {
            Box::pin(std::future::pending())
        }
    }

    impl Handler<ReplaceStore> for StuckBackend {
        type Result = Result<(), String>;
        fn handle(&mut self, _: ReplaceStore, _: &mut Self::Context) -> Self::Result {
            Err("stuck".into())
        }
    }

    impl Handler<OpenStoreReader> for StuckBackend {
        type Result = Result<StoreReader, EtcdError>;
        fn handle(&mut self, _: OpenStoreReader, _: &mut Self::Context) -> Self::Result {
            Err(EtcdError::internal("stuck"))
        }
    }

    #[actix::test]
    async fn reads_are_answered_by_the_reader_while_the_writer_is_busy() {
        use std::time::Duration;
        let engine = Arc::new(MemEngine::new());
        let mut store = Store::open(engine, MemberIdentity::default()).unwrap();
        let (publisher, views) = crate::ReadViews::channel(store.read_view());
        let backend = StuckBackend.start();
        let peers = MvccPeers {
            backend: Some(BackendLink::of(&backend)),
            views: Some(publisher),
            ..MvccPeers::default()
        };
        let writer = MvccActor::start_with(store, 10_000, Some(peers));
        let reader = crate::MvccReader::start_on_own_thread(views);
        let range = || Range {
            request: RangeRequest {
                key: b"k".to_vec(),
                ..Default::default()
            },
        };
        // An applied write is in the view before the batch is answered.
        apply(&writer, 5, vec![put("v")]).await;
        let r = reader.send(range()).await.unwrap().unwrap();
        assert_eq!(
            (r.kvs[0].value.as_slice(), r.header.unwrap().revision),
            (&b"v"[..], 2)
        );

        // A defragmentation that never ends holds up nothing: applies and the writer's own
        // reads go on.
        writer.do_send(Defragment);
        assert_eq!(apply(&writer, 6, vec![put("u")]).await.len(), 1);
        let r = writer.send(range()).await.unwrap().unwrap();
        assert_eq!(
            (r.kvs[0].value.as_slice(), r.header.unwrap().revision),
            (&b"u"[..], 3)
        );

        // The writer now waits for a backend hash whose flush never ends, with an apply queued
        // behind it.
        writer.do_send(HashBackend);
        let queued = writer.send(ApplyBatch {
            consistent_index: 7,
            term: 2,
            requests: vec![put("w")],
            replies: Vec::new(),
            ops: Vec::new(),
            leases: Vec::new(),
        });
        let stuck = tokio::time::timeout(Duration::from_millis(200), writer.send(range())).await;
        assert!(stuck.is_err(), "the writer's own mailbox is held up");
        assert!(
            tokio::time::timeout(Duration::from_millis(200), queued)
                .await
                .is_err()
        );
        // Every kind of read still gets its answer from the reader, at revision 3.
        for _ in 0..100 {
            let r = reader.send(range()).await.unwrap().unwrap();
            assert_eq!(r.kvs[0].value, b"u");
        }
        let chunk = reader
            .send(History {
                from: 1,
                to: 10,
                max_events: 10,
            })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(chunk.events.len(), 2);
        let hash = reader.send(HashKv { revision: 0 }).await.unwrap().unwrap();
        assert_eq!(hash.revision, 3);
        let txn = reader
            .send(ReadTxn {
                request: Default::default(),
            })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(txn.header.unwrap().revision, 3);
    }
}

impl MvccActor {
    /// The write counters, hash and defragmentation timings, for `/metrics`.
    fn samples(&self) -> Vec<actcd_types::meter::Sample> {
        use actcd_types::meter::Sample;
        let c = self.counts;
        let ops = self.store.op_counts();
        let t = &self.timings;
        vec![
            Sample::histogram("etcd_mvcc_hash_duration_seconds", &t.hash),
            Sample::histogram("etcd_disk_backend_defrag_duration_seconds", &t.defrag),
            Sample::histogram("etcd_disk_backend_snapshot_duration_seconds", &t.snapshot),
            Sample::value(
                "etcd_disk_defrag_inflight",
                f64::from(u8::from(t.defrag_inflight)),
            ),
            Sample::histogram(
                "etcd_debugging_mvcc_index_compaction_pause_duration_milliseconds",
                &t.index_pause,
            ),
            Sample::histogram(
                "etcd_debugging_mvcc_db_compaction_pause_duration_milliseconds",
                &t.db_pause,
            ),
            Sample::histogram(
                "etcd_debugging_mvcc_db_compaction_total_duration_milliseconds",
                &t.db_total,
            ),
            Sample::value("etcd_debugging_mvcc_db_compaction_last", t.compaction_last),
            Sample::value(
                "etcd_debugging_mvcc_db_compaction_keys_total",
                self.store.compacted_keys() as f64,
            ),
            Sample::value("etcd_mvcc_range_total", ops.ranges as f64),
            Sample::value("etcd_debugging_mvcc_range_total", ops.ranges as f64),
            Sample::value("etcd_mvcc_put_total", ops.puts as f64),
            Sample::value("etcd_mvcc_delete_total", ops.deletes as f64),
            Sample::value("etcd_mvcc_txn_total", ops.txns as f64),
            Sample::value("etcd_server_slow_apply_total", c.slow_applies as f64),
            Sample::value(
                "etcd_debugging_mvcc_total_put_size_in_bytes",
                ops.put_bytes as f64,
            ),
        ]
        .into_iter()
        .chain(self.store.apply_durations.samples())
        .collect()
    }
}

actcd_types::impl_mailbox_probe!(MvccActor, meter, samples);
