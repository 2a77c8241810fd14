//! `BackendActor`: the environment's only writer, on a thread of its own (an LMDB write
//! transaction begins and ends on one thread, and commits `fdatasync`). It takes the state
//! owners' writes as [`Commit`]s into one open transaction ([`Batch`]), commits per etcd's
//! batching policy, tells its subscribers what each commit covered ([`Committed`]), and does the
//! blocking maintenance work (sync, size, copies, defragmentation) in mailbox order after them.
//!
//! An `Arbiter` rather than a `SyncArbiter`: the latter's channel spins with `sched_yield`
//! before it sleeps, which on 2 cores takes CPU from the threads that have work (measured for
//! the MVCC store, see its actor doc).

use std::collections::HashMap;
use std::sync::Arc;

use actcd_types::EtcdError;
use actcd_types::msg::{
    BackendFailed, Commit, Committed, CopyTo, DbSize, Defragment, Flush, GetCommitStats,
    OpenStoreReader, PrepareSnapshot, ReplaceStore, StoreReader, SyncBackend,
};
use actcd_types::snapshot_blob::{PreparedStore, ReleasePrepared, StoreCopy};
use actcd_types::storage::KvEngine;
use actix::{
    Actor, ActorFutureExt, Addr, Arbiter, AsyncContext, Context, Handler, Message, MessageResult,
    Recipient, ResponseActFuture, ResponseFuture, WrapFuture, fut,
};
use tokio::sync::oneshot;

use crate::batch::{Batch, MAX_PENDING_BYTES, MAX_PENDING_OPS};
use crate::defrag::{DefragCopy, DefragRun, DefragStep};
use crate::engine::LmdbEngine;
use crate::error::BackendError;

/// Who hears of commits: every subscriber gets `Committed{seq}` after each commit; the fatal
/// recipient gets the first failure (the store poisons itself and its next apply fails, or a
/// supervisor stops the member).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Subscribe {
    pub committed: Option<Recipient<Committed>>,
    pub fatal: Option<Recipient<BackendFailed>>,
}

pub struct BackendActor {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: Arc<actcd_types::meter::Meter>,
    batch: Batch,
    subscribers: Vec<Recipient<Committed>>,
    fatal: Vec<Recipient<BackendFailed>>,
    /// The defragmentation under way, if one is.
    defrag: Option<Defragmenting>,
    /// Stores built from leaders' snapshots, waiting to be swapped in (`ReplaceStore`) or let
    /// go (`ReleasePrepared`), by id.
    prepared: HashMap<u64, DefragCopy>,
    next_prepared: u64,
    /// When to let the data file's mapped pages go (see [`crate::rest`]).
    at_rest: crate::rest::AtRest,
}

/// An online defragmentation: what the writer has committed since it began, and who waits for
/// its answer (a `Defragment` asked meanwhile joins it).
struct Defragmenting {
    run: DefragRun,
    waiters: Vec<oneshot::Sender<Result<(u64, u64), EtcdError>>>,
}

/// A defragmentation's step done on a worker thread: the copy made, or a round replayed into it.
#[derive(Message)]
#[rtype(result = "()")]
struct DefragProgress(Result<DefragCopy, BackendError>);

impl BackendActor {
    pub fn new(engine: Arc<LmdbEngine>) -> Self {
        Self::with_batch(Batch::new(engine))
    }

    pub fn with_batch(batch: Batch) -> Self {
        Self {
            meter: actcd_types::meter::Meter::new(),
            batch,
            subscribers: Vec::new(),
            fatal: Vec::new(),
            defrag: None,
            prepared: HashMap::new(),
            next_prepared: 0,
            at_rest: crate::rest::AtRest::default(),
        }
    }

    /// Starts the actor on an `Arbiter` thread of its own. Must be called inside a running
    /// actix System.
    pub fn start_on_own_thread(engine: Arc<LmdbEngine>) -> Addr<Self> {
        Self::start_with_limits(engine, MAX_PENDING_OPS, MAX_PENDING_BYTES)
    }

    /// [`Self::start_on_own_thread`] with other commit thresholds (tests, benches). The batch
    /// is made on the actor's thread: its write transaction never leaves it.
    pub fn start_with_limits(
        engine: Arc<LmdbEngine>,
        max_ops: usize,
        max_bytes: usize,
    ) -> Addr<Self> {
        let arbiter = Arbiter::new();
        BackendActor::start_in_arbiter(&arbiter.handle(), move |_| {
            Self::with_batch(Batch::with_limits(engine, max_ops, max_bytes))
        })
    }

    /// After a commit: subscribers trim what it covered. `do_send`: one per commit.
    fn announce(&self, seq: Option<u64>) {
        if let Some(seq) = seq {
            for s in &self.subscribers {
                s.do_send(Committed { seq });
            }
        }
    }

    /// Reports the outcome of a write or commit: a failure is fatal.
    fn settle(&mut self, outcome: Result<Option<u64>, String>) -> Result<(), String> {
        match outcome {
            Ok(seq) => {
                self.announce(seq);
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "backend write failed; applied state no longer reaches the disk");
                for f in &self.fatal {
                    f.do_send(BackendFailed { error: e.clone() });
                }
                self.fatal.clear();
                Err(e)
            }
        }
    }

    /// Answers everyone waiting for the defragmentation under way.
    fn end_defrag(&mut self, answer: Result<(u64, u64), EtcdError>) {
        if let Err(e) = &answer {
            tracing::warn!(error = %e, "defragmentation failed; the data file is unchanged");
        }
        for w in self.defrag.take().into_iter().flat_map(|d| d.waiters) {
            let _ = w.send(answer.clone());
        }
    }

    /// The last round of a defragmentation and its swap, on this thread: nothing is committed
    /// between the batch's commit and the swap.
    fn finish_defrag(
        &mut self,
        copy: DefragCopy,
        log: &[actcd_types::msg::Commit],
    ) -> Result<(u64, u64), EtcdError> {
        let started = std::time::Instant::now();
        self.commit_first()?;
        let engine = Arc::clone(self.batch.engine());
        copy.replay(&engine, log).map_err(EtcdError::internal)?;
        let replayed = started.elapsed();
        let swapped = engine.defrag_swap(copy).map_err(EtcdError::internal);
        engine.reap_retired_in_background();
        tracing::info!(
            commits = log.len(),
            last_round_ms = replayed.as_secs_f64() * 1e3,
            swap_ms = (started.elapsed() - replayed).as_secs_f64() * 1e3,
            "defragmentation's last round and swap, on the backend's thread"
        );
        swapped
    }

    /// Commits what is pending before a maintenance operation.
    fn commit_first(&mut self) -> Result<(), EtcdError> {
        let outcome = self.batch.commit();
        self.settle(outcome).map_err(EtcdError::internal)
    }
}

/// How often the backend looks whether the member is at rest ([`crate::rest`]): the pages go
/// back within two ticks of the last commit.
const REST_TICK: std::time::Duration = std::time::Duration::from_secs(3);

impl Actor for BackendActor {
    type Context = Context<Self>;

    /// Every applied batch comes through here: don't let actix's default mailbox of 16 make
    /// senders queue outside it.
    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(65536);
        ctx.run_interval(REST_TICK, |act, _| {
            if act.at_rest.tick()
                && let Err(e) = act.batch.engine().release_mapped_pages()
            {
                tracing::debug!(error = %e, "could not release the data file's mapped pages");
            }
        });
    }

    /// Nothing is lost by stopping uncommitted (the WAL replays it), but committing makes the
    /// next start quicker.
    fn stopped(&mut self, _: &mut Self::Context) {
        if self.batch.failed().is_none()
            && let Err(e) = self.batch.sync()
        {
            tracing::warn!(error = %e, "final backend commit failed; the WAL will replay it");
        }
    }
}

impl Handler<Subscribe> for BackendActor {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, _: &mut Self::Context) {
        self.subscribers.extend(msg.committed);
        self.fatal.extend(msg.fatal);
    }
}

/// Writes a state owner's ops into the open transaction; commits when the batch is full.
impl Handler<Commit> for BackendActor {
    type Result = ();

    fn handle(&mut self, msg: Commit, _: &mut Self::Context) {
        let _timer = self.meter.start("Commit");
        self.at_rest.committed();
        let outcome = self.batch.write(&msg);
        if let Some(d) = &mut self.defrag {
            match &outcome {
                Ok(_) => d.run.record(msg),
                Err(e) => d.run.fail(e.clone()),
            }
        }
        let _ = self.settle(outcome);
    }
}

/// Commits the batch (etcd's 100 ms batch interval, or a store that must see its writes in the
/// engine).
impl Handler<Flush> for BackendActor {
    type Result = Result<(), String>;

    fn handle(&mut self, _: Flush, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("Flush");
        let outcome = self.batch.commit();
        self.batch.engine().reap_retired_in_background();
        self.settle(outcome)
    }
}

impl Handler<SyncBackend> for BackendActor {
    type Result = Result<(), String>;

    /// Commits the batch and `fsync`s the data file. An error here means applied state may not
    /// be durable: the caller must not release WAL segments.
    fn handle(&mut self, _: SyncBackend, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("SyncBackend");
        let outcome = self.batch.sync();
        self.batch.engine().reap_retired_in_background();
        self.settle(outcome)
    }
}

/// A received snapshot is built into a store beside the one in use, on a worker thread, so
/// that installing it (when raft has accepted it) is a swap; the store stays here until then.
impl Handler<PrepareSnapshot> for BackendActor {
    type Result = ResponseActFuture<Self, Result<PreparedStore, String>>;

    fn handle(&mut self, msg: PrepareSnapshot, ctx: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("PrepareSnapshot");
        let engine = Arc::clone(self.batch.engine());
        let (tx, rx) = oneshot::channel();
        let build = move || {
            let built = msg
                .blob
                .map()
                .map_err(|e| format!("backend: snapshot file {}: {e}", msg.blob.path().display()))
                .and_then(|map| engine.prepare_from_blob(&map).map_err(|e| e.to_string()));
            let _ = tx.send(built);
        };
        if let Err(e) = on_worker(build) {
            let e = format!("backend: cannot start a worker thread: {e}");
            return Box::pin(fut::ready(Err(e)));
        }
        let release = ctx.address().recipient();
        Box::pin(
            async move {
                rx.await
                    .unwrap_or_else(|_| Err("backend: the snapshot's build was dropped".into()))
            }
            .into_actor(self)
            .map(move |built, act, _| {
                let copy = built?;
                act.next_prepared += 1;
                let id = act.next_prepared;
                act.prepared.insert(id, copy);
                Ok(PreparedStore::new(id, release))
            }),
        )
    }
}

/// A prepared store nobody will swap in: its directory goes.
impl Handler<ReleasePrepared> for BackendActor {
    type Result = ();

    fn handle(&mut self, msg: ReleasePrepared, _: &mut Self::Context) {
        if self.prepared.remove(&msg.id).is_some() {
            tracing::info!(
                id = msg.id,
                "a store built from a snapshot was not used; deleted"
            );
        }
    }
}

/// A leader's snapshot replaces everything: the store built from it is swapped in for the data
/// file (built here first, on this thread, if it came as a file), as a defragmentation's copy
/// is; transactions of the old store read on. A defragmentation under way ends with an error
/// once its worker reports (its copy no longer describes the store; it is dropped, never
/// swapped in).
impl Handler<ReplaceStore> for BackendActor {
    type Result = Result<(), String>;

    fn handle(&mut self, msg: ReplaceStore, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("ReplaceStore");
        if let Some(d) = &mut self.defrag {
            d.run
                .fail("a snapshot from the leader replaced the store".into());
        }
        self.commit_first().map_err(|e| e.to_string())?;
        let engine = Arc::clone(self.batch.engine());
        let copy = match msg.copy {
            StoreCopy::Prepared(p) => {
                let id = p.take();
                self.prepared
                    .remove(&id)
                    .ok_or_else(|| format!("backend: no store prepared as {id}"))?
            }
            StoreCopy::Blob(blob) => {
                let map = blob.map().map_err(|e| {
                    format!("backend: snapshot file {}: {e}", blob.path().display())
                })?;
                engine.prepare_from_blob(&map).map_err(|e| e.to_string())?
            }
        };
        // Once renamed in, the copy is the store whatever else fails: a failure is fatal, as
        // for any write the store cannot take back.
        let swapped = engine.swap_in_copy(copy, "backend replaced by a leader's snapshot");
        engine.reap_retired_in_background();
        self.settle(swapped.map(|_| None).map_err(|e| e.to_string()))
    }
}

impl Handler<DbSize> for BackendActor {
    type Result = Result<(u64, u64), String>;

    /// Reads the file size and page counts in a short read transaction.
    fn handle(&mut self, _: DbSize, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("DbSize");
        self.batch.engine().disk_size().map_err(|e| e.to_string())
    }
}

impl Handler<CopyTo> for BackendActor {
    type Result = Result<(), String>;

    /// Commits the batch, then copies inside one read transaction (its consistent index says
    /// which entries the copy covers).
    fn handle(&mut self, msg: CopyTo, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("CopyTo");
        self.commit_first().map_err(|e| e.to_string())?;
        match self.batch.engine().copy_to(&msg.path) {
            Ok(file) => {
                tracing::info!(path = %file.display(), "backend copied");
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "backend copy failed");
                Err(e.to_string())
            }
        }
    }
}

/// Commits the batch, then gives the free pages back without holding up writes: the compacted
/// copy is made and brought up to date on worker threads while commits go on here (each also
/// recorded for replay), and only the last small round and the swap run on this thread
/// (`defrag.rs`). Transactions of the old file read on after the swap.
impl Handler<Defragment> for BackendActor {
    type Result = ResponseFuture<Result<(u64, u64), EtcdError>>;

    fn handle(&mut self, _: Defragment, ctx: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("Defragment");
        let (tx, rx) = oneshot::channel();
        let answer = async move {
            rx.await.unwrap_or_else(|_| {
                Err(EtcdError::internal(
                    "backend: the defragmentation was dropped",
                ))
            })
        };
        if let Some(d) = &mut self.defrag {
            d.waiters.push(tx);
            return Box::pin(answer);
        }
        if let Err(e) = self.commit_first() {
            return Box::pin(async move { Err(e) });
        }
        // Every commit from here on is recorded: the copy's snapshot is taken after this point.
        self.defrag = Some(Defragmenting {
            run: DefragRun::new(),
            waiters: vec![tx],
        });
        let engine = Arc::clone(self.batch.engine());
        let me = ctx.address();
        if let Err(e) = on_worker(move || me.do_send(DefragProgress(engine.defrag_copy()))) {
            self.end_defrag(Err(EtcdError::internal(format!(
                "backend: defragment: cannot start a worker thread: {e}"
            ))));
        }
        Box::pin(answer)
    }
}

/// The copy is made, or a round replayed into it: another round on a worker, or the last one
/// and the swap here.
impl Handler<DefragProgress> for BackendActor {
    type Result = ();

    fn handle(&mut self, msg: DefragProgress, ctx: &mut Self::Context) {
        let _timer = self.meter.start("DefragProgress");
        let Some(d) = &mut self.defrag else {
            return;
        };
        let copy = match msg.0 {
            Ok(copy) => copy,
            Err(e) => return self.end_defrag(Err(EtcdError::internal(e))),
        };
        match d.run.next_step() {
            DefragStep::Abort(why) => {
                drop(copy);
                self.end_defrag(Err(EtcdError::internal(format!(
                    "backend: defragment: {why}"
                ))));
            }
            DefragStep::Replay(log) => {
                let engine = Arc::clone(self.batch.engine());
                let me = ctx.address();
                let round = move || {
                    let replayed = copy.replay(&engine, &log).map(|()| copy);
                    me.do_send(DefragProgress(replayed));
                };
                if let Err(e) = on_worker(round) {
                    self.end_defrag(Err(EtcdError::internal(format!(
                        "backend: defragment: cannot start a worker thread: {e}"
                    ))));
                }
            }
            DefragStep::Finish(log) => {
                let answer = self.finish_defrag(copy, &log);
                self.end_defrag(answer);
            }
        }
    }
}

/// Runs `work` on a thread of its own at the lowest priority (a defragmentation's copy or
/// round: seconds of I/O that must not hold up the writer, nor take the CPU it needs).
fn on_worker(work: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("defrag".into())
        .spawn(move || {
            crate::defrag::lower_priority();
            work();
        })
        .map(drop)
}

/// A read transaction that sees every write sent before this message (the batch is committed
/// first), for reading at length on another thread.
impl Handler<OpenStoreReader> for BackendActor {
    type Result = Result<StoreReader, EtcdError>;

    fn handle(&mut self, _: OpenStoreReader, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("OpenStoreReader");
        self.commit_first()?;
        let reader = Arc::clone(self.batch.engine())
            .read_owned()
            .map_err(EtcdError::internal)?;
        Ok(StoreReader(reader))
    }
}

/// The commit latencies so far.
impl Handler<GetCommitStats> for BackendActor {
    type Result = MessageResult<GetCommitStats>;

    fn handle(&mut self, _: GetCommitStats, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.batch.commit_stats())
    }
}

impl BackendActor {
    /// etcd's `etcd_mvcc_db_open_read_transactions`: read transactions open on the database
    /// now (the store's read views, readers, scrubs and snapshot streams).
    fn samples(&self) -> Vec<actcd_types::meter::Sample> {
        vec![actcd_types::meter::Sample::value(
            "etcd_mvcc_db_open_read_transactions",
            self.batch.engine().open_read_transactions() as f64,
        )]
    }
}

actcd_types::impl_mailbox_probe!(BackendActor, meter, samples);

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use actcd_types::storage::{KvEngine, META_CONSISTENT_INDEX, Op, Table};

    use super::*;
    use crate::engine::{BackendOptions, DATA_FILE};

    fn small() -> BackendOptions {
        BackendOptions {
            map_size: 64 << 20,
            ..BackendOptions::default()
        }
    }

    /// Records what the backend tells its subscribers.
    #[derive(Default, Clone)]
    struct Recorder {
        committed: Arc<Mutex<Vec<u64>>>,
        failed: Arc<Mutex<Vec<String>>>,
    }

    impl Actor for Recorder {
        type Context = Context<Self>;
    }

    impl Handler<Committed> for Recorder {
        type Result = ();
        fn handle(&mut self, msg: Committed, _: &mut Self::Context) {
            self.committed.lock().unwrap().push(msg.seq);
        }
    }

    /// Answered once everything sent to the recorder before it was taken.
    #[derive(Message)]
    #[rtype(result = "()")]
    struct Drain;

    impl Handler<Drain> for Recorder {
        type Result = ();
        fn handle(&mut self, _: Drain, _: &mut Self::Context) {}
    }

    impl Handler<BackendFailed> for Recorder {
        type Result = ();
        fn handle(&mut self, msg: BackendFailed, _: &mut Self::Context) {
            self.failed.lock().unwrap().push(msg.error);
        }
    }

    fn put(key: &[u8], value: &[u8]) -> Op {
        Op::Put {
            table: Table::Key,
            key: key.to_vec(),
            value: value.into(),
        }
    }

    fn commit(seq: u64, ops: Vec<Op>) -> Commit {
        Commit {
            seq,
            ops,
            consistent_index: Some((seq * 10, 1)),
        }
    }

    fn index_of(engine: &LmdbEngine) -> Option<Vec<u8>> {
        engine
            .read()
            .unwrap()
            .get(Table::Meta, META_CONSISTENT_INDEX)
            .unwrap()
    }

    #[test]
    fn commits_wait_for_a_flush_or_a_full_batch_and_are_announced() {
        struct Case {
            name: &'static str,
            max_ops: usize,
            commits: u64,
            flush: bool,
            want_index: Option<u64>,
            want_committed: Vec<u64>,
        }
        let cases = [
            Case {
                name: "pending until a flush",
                max_ops: 100,
                commits: 2,
                flush: false,
                want_index: None,
                want_committed: vec![],
            },
            Case {
                name: "a flush commits them with the last consistent index",
                max_ops: 100,
                commits: 2,
                flush: true,
                want_index: Some(20),
                want_committed: vec![2],
            },
            Case {
                name: "a full batch commits by itself",
                max_ops: 2,
                commits: 3,
                flush: false,
                want_index: Some(20),
                want_committed: vec![2],
            },
        ];
        for c in cases {
            let dir = tempfile::tempdir().unwrap();
            let engine = Arc::new(LmdbEngine::open(dir.path(), small()).unwrap());
            let rec = Recorder::default();
            let sys = actix::System::new();
            sys.block_on({
                let engine = engine.clone();
                let rec = rec.clone();
                async move {
                    let addr = BackendActor::start_with_limits(engine, c.max_ops, 1 << 30);
                    let r = rec.start();
                    addr.do_send(Subscribe {
                        committed: Some(r.clone().recipient()),
                        fatal: Some(r.clone().recipient()),
                    });
                    for seq in 1..=c.commits {
                        addr.do_send(commit(seq, vec![put(&seq.to_be_bytes(), b"v")]));
                    }
                    if c.flush {
                        addr.send(Flush).await.unwrap().unwrap();
                    } else {
                        addr.send(DbSize).await.unwrap().unwrap();
                    }
                    r.send(Drain).await.unwrap();
                }
            });
            assert_eq!(
                index_of(&engine),
                c.want_index.map(|i| i.to_be_bytes().to_vec()),
                "{}",
                c.name
            );
            assert_eq!(
                *rec.committed.lock().unwrap(),
                c.want_committed,
                "{}",
                c.name
            );
            assert!(rec.failed.lock().unwrap().is_empty(), "{}", c.name);
        }
    }

    #[test]
    fn a_failed_write_is_fatal_and_refuses_what_follows() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Arc::new(LmdbEngine::open(dir.path(), small()).unwrap());
        let rec = Recorder::default();
        let sys = actix::System::new();
        let flushed = sys.block_on({
            let engine = engine.clone();
            let rec = rec.clone();
            async move {
                let addr = BackendActor::start_on_own_thread(engine);
                let r = rec.start();
                addr.do_send(Subscribe {
                    committed: Some(r.clone().recipient()),
                    fatal: Some(r.clone().recipient()),
                });
                addr.do_send(commit(1, vec![put(b"ok", b"v")]));
                // LMDB refuses a key past its limit (the store's buffer refuses it first; the
                // backend must still not commit half a batch).
                addr.do_send(commit(2, vec![put(&[7; 600], b"v")]));
                let flushed = addr.send(Flush).await.unwrap();
                r.send(Drain).await.unwrap();
                flushed
            }
        });
        assert!(flushed.is_err(), "{flushed:?}");
        assert_eq!(index_of(&engine), None, "nothing of the batch committed");
        assert_eq!(rec.failed.lock().unwrap().len(), 1);
        assert!(rec.committed.lock().unwrap().is_empty());
    }

    #[test]
    fn messages_sync_report_size_copy_and_open_readers() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Arc::new(LmdbEngine::open(&dir.path().join("snap"), small()).unwrap());
        let copy_dir = dir.path().join("copy");
        std::fs::create_dir(&copy_dir).unwrap();
        let copy_file = dir.path().join("snapshot.db");

        let sys = actix::System::new();
        let (synced, size, into_dir, into_file, read) = sys.block_on({
            let engine = engine.clone();
            let copy_dir = copy_dir.clone();
            let copy_file = copy_file.clone();
            async move {
                let addr = BackendActor::start_on_own_thread(engine);
                addr.do_send(commit(1, vec![put(b"k", b"v")]));
                let synced = addr.send(SyncBackend).await.unwrap();
                let size = addr.send(DbSize).await.unwrap();
                addr.do_send(commit(2, vec![put(b"k2", b"v2")]));
                let into_dir = addr.send(CopyTo { path: copy_dir }).await.unwrap();
                let into_file = addr.send(CopyTo { path: copy_file }).await.unwrap();
                addr.do_send(commit(3, vec![put(b"k3", b"v3")]));
                let reader = addr.send(OpenStoreReader).await.unwrap().unwrap();
                let read = reader.0.get(Table::Key, b"k3").unwrap();
                (synced, size, into_dir, into_file, read)
            }
        });
        assert_eq!(synced, Ok(()));
        let (on_disk, in_use) = size.unwrap();
        assert!(
            in_use > 0 && on_disk >= in_use,
            "on_disk {on_disk}, in_use {in_use}"
        );
        assert_eq!(into_dir, Ok(()));
        assert_eq!(into_file, Ok(()));
        assert_eq!(
            read,
            Some(b"v3".to_vec()),
            "a reader sees every write sent before"
        );
        assert!(copy_file.is_file());
        assert!(!dir.path().join("snapshot.db.tmp").exists());

        // The copy made into a directory is an environment with the data sent before it.
        let copy = LmdbEngine::open(&copy_dir, small()).unwrap();
        assert!(copy_dir.join(DATA_FILE).is_file());
        let r = copy.read().unwrap();
        assert_eq!(
            r.get(Table::Meta, META_CONSISTENT_INDEX).unwrap(),
            Some(20u64.to_be_bytes().to_vec())
        );
        assert_eq!(r.get(Table::Key, b"k2").unwrap(), Some(b"v2".to_vec()));
    }

    #[test]
    fn a_failed_copy_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Arc::new(LmdbEngine::open(dir.path(), small()).unwrap());
        let missing = dir.path().join("no/such/dir/snapshot.db");
        let sys = actix::System::new();
        let got = sys.block_on(async move {
            let addr = BackendActor::start_on_own_thread(engine);
            addr.send(CopyTo { path: missing }).await.unwrap()
        });
        let err = got.unwrap_err();
        assert!(
            err.starts_with("backend: cannot copy the environment to "),
            "{err}"
        );
    }
}
