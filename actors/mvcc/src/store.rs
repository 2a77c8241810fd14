//! [`Store`]: the key index, the revision clock and the compaction state over a storage engine.
//! Plain struct, no actix: [`crate::MvccActor`] is thin glue around it.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, RwLockReadGuard};

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::{
    CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest, RangeRequest,
    RangeResponse, ResponseHeader, TxnRequest, TxnResponse,
};
use actcd_proto::mvccpb::{Event, KeyValue};
use actcd_types::key_record::{self, DamagedRecord, FORMAT_CHECKSUMMED, FORMAT_META_KEY};
use actcd_types::msg::{ApplyResponse, ApplyResult, LeaseAttachment, StoreStatus};
use actcd_types::msg::{Commit, CompactionHashed};
use actcd_types::storage::{KvEngine, Op, ReadEngine, ReadTxn, Table, WriteBuffer, WriteTxn};
use actcd_types::{EtcdError, MemberIdentity, Revision};
use actix::Recipient;
use prost::Message as _;

use crate::damage::DamageReport;
use crate::error::Error;
use crate::key_index::{KeyIndex, SharedIndex, TreeIndex, Undo};
use crate::leased;
use crate::ops::{OpCounters, OpCounts, Tally};
use crate::range::View;
use crate::write::{Writer, rev_header};

/// `meta` key of the raft index of the last applied entry (8-byte big-endian).
pub const META_CONSISTENT_INDEX: &[u8] = actcd_types::storage::META_CONSISTENT_INDEX;
/// `meta` key of the term of the last applied entry (8-byte big-endian).
pub const META_TERM: &[u8] = actcd_types::storage::META_TERM;
/// `meta` key of the revision of the last compaction accepted (8-byte big-endian).
pub const META_SCHEDULED_COMPACT: &[u8] = b"scheduledCompactRev";
/// `meta` key of the revision of the last compaction whose deletions are done.
pub const META_FINISHED_COMPACT: &[u8] = b"finishedCompactRev";

/// etcd's `--experimental-compaction-batch-limit` default: records examined per deletion txn.
pub const DEFAULT_COMPACTION_BATCH_LIMIT: usize = 1000;

/// What applied batches changed, for the watch hub (collected only when
/// [`Store::set_notify`] asked for it).
#[derive(Debug, Default)]
pub struct Outbox {
    /// Watch events, in revision order.
    pub events: Vec<Event>,
}

impl Outbox {
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// What one batch applied into the write buffer returns: a result per request and the changes
/// of the lease each written key's record names.
pub type Outcome = (Vec<ApplyResult>, Vec<LeaseAttachment>);

/// Where the store's writes go when it commits. Applied batches are written into a
/// [`WriteBuffer`] (reads on the store's thread merge it over the committed engine, so they see
/// every applied write); committing hands its ops over.
#[derive(Clone)]
pub enum Sink {
    /// Straight into the engine, committed at once, with the consistent index: start-up (before
    /// the backend actor runs), `actcd snapshot restore`, unit tests and benches.
    Direct(Arc<dyn KvEngine>),
    /// To the backend actor, which commits per etcd's batching policy and reports back
    /// (`Committed{seq}` → [`Store::committed`]).
    Backend(Recipient<Commit>),
}

impl fmt::Debug for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Sink::Direct(_) => "Direct",
            Sink::Backend(_) => "Backend",
        })
    }
}

/// etcd's MVCC store (`mvcc.store` plus the KV part of `applierV3backend`).
pub struct Store {
    /// The committed state, read-only: only the sink writes.
    engine: Arc<dyn ReadEngine>,
    sink: Sink,
    /// Applied writes the engine has not confirmed committed. `None` only while a batch is
    /// being written into it (taken out so that the store can be borrowed beside it).
    buffer: Option<WriteBuffer>,
    /// Requests applied and their encoded bytes since the last commit (direct sink: the
    /// actor's commit policy).
    pending_requests: usize,
    pending_bytes: usize,
    /// Whether batches applied since the last commit moved the consistent index.
    index_moved: bool,
    /// The key index, which read views share (the store is its only writer).
    index: SharedIndex,
    /// The last batch's compaction, until it is applied to the index; whether that waits for
    /// a call (read views are published first).
    compaction_due: Option<(i64, bool)>,
    /// How long each applied key-space request took, by etcd's op name (for `/metrics`; a
    /// duration measured, never decided on).
    pub apply_durations: actcd_types::meter::ApplyDurations,
    defer_compaction: bool,
    /// Revision of the last write txn that changed something; 1 for an empty store, as in etcd.
    current_rev: i64,
    /// Main revision of the last compaction; -1 before any, as in etcd.
    compact_rev: i64,
    consistent_index: u64,
    term: u64,
    identity: MemberIdentity,
    /// Whether applies collect watch events into `outbox`.
    notify: bool,
    outbox: Outbox,
    compaction_batch_limit: usize,
    /// A compaction whose deletions are still under way (see [`Self::step_compaction`]).
    compaction: Option<CompactionJob>,
    /// How long each commit of applied batches took (for `/metrics`).
    commits: actcd_types::msg::DiskLatency,
    /// Set when a pending transaction had to be abandoned: memory is ahead of disk, and only a
    /// restart (replaying the WAL) brings them together again.
    poisoned: bool,
    /// Where damaged records are reported (log, CORRUPT alarm); read views get a copy.
    damage: DamageReport,
    /// Records that failed their check while the index was rebuilt, logged then and reported
    /// again once an alarm recipient is wired ([`Self::set_damage_report`]).
    damaged_at_open: Vec<DamagedRecord>,
    /// The compaction revision before the last one applied: what a compaction's hash is taken
    /// with (see [`CompactionJob::hash`]).
    prev_compact_rev: i64,
    /// Where the hash each compaction takes goes (the corruption checker), if anywhere.
    compaction_hashes: Option<Recipient<CompactionHashed>>,
    /// Records compactions have deleted since start (etcd's
    /// `etcd_debugging_mvcc_db_compaction_keys_total`).
    compacted_keys: u64,
    /// etcd's range, put, delete and txn counters (`ops.rs`), which read views share.
    ops: Arc<OpCounters>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("current_rev", &self.current_rev)
            .field("compact_rev", &self.compact_rev)
            .field("consistent_index", &self.consistent_index)
            .field("term", &self.term)
            .field("keys", &self.index.read().len())
            .finish_non_exhaustive()
    }
}

/// A batch written into the pending transaction and memory, not yet committed.
struct Uncommitted {
    results: Vec<ApplyResult>,
    /// The index changes made, to take back if the commit fails.
    undo: Vec<Undo>,
    /// The lease changes of the batch's keys, oldest first (a failed batch takes them back
    /// with its index changes: each key's lease lives in its index).
    attachments: Vec<LeaseAttachment>,
    /// A compaction revision to carry out once committed.
    compaction: Option<i64>,
    /// Whether that compaction asked to be answered only once physically done.
    physical: bool,
}

/// What a batch changes in memory, applied only once its transaction has committed.
struct Applied {
    results: Vec<ApplyResult>,
    events: Vec<Event>,
    physical: bool,
    current_rev: i64,
    compact_rev: i64,
    compactions: Vec<i64>,
}

impl Store {
    /// Opens the store over `engine`: rebuilds the index with one scan of the `key` table in
    /// revision order, reads the meta records, and finishes a compaction that a crash
    /// interrupted.
    /// Until [`Self::connect_backend`], commits go straight into `engine`.
    /// A data dir written before records carried checksums has its `key` table rewritten
    /// first ([`upgrade_key_format`]).
    pub fn open(engine: Arc<dyn KvEngine>, identity: MemberIdentity) -> Result<Self, EtcdError> {
        upgrade_key_format(&*engine).map_err(EtcdError::from)?;
        let read: Arc<dyn ReadEngine> = engine.clone();
        Self::open_inner(read, Sink::Direct(engine), identity, 0).map_err(EtcdError::from)
    }

    pub(crate) fn open_inner(
        engine: Arc<dyn ReadEngine>,
        sink: Sink,
        identity: MemberIdentity,
        seq: u64,
    ) -> Result<Self, Error> {
        let (index, last_main, consistent_index, term, finished, scheduled, damaged) = {
            let txn = engine.begin_read()?;
            check_key_format(&*txn)?;
            let consistent_index = read_meta(&*txn, META_CONSISTENT_INDEX)?.unwrap_or(0);
            let term = read_meta(&*txn, META_TERM)?.unwrap_or(0);
            let finished = read_meta(&*txn, META_FINISHED_COMPACT)?.map(|r| r as i64);
            let scheduled = read_meta(&*txn, META_SCHEDULED_COMPACT)?.map(|r| r as i64);
            let mut index = TreeIndex::new();
            let mut last_main = 1;
            let mut damaged = Vec::new();
            actcd_types::storage::try_scan(&*txn, Table::Key, &mut |k, v| {
                if let Some(main) = restore_record(&mut index, &mut damaged, k, v) {
                    last_main = last_main.max(main);
                }
                Ok::<(), Error>(())
            })?;
            (
                index,
                last_main,
                consistent_index,
                term,
                finished,
                scheduled,
                damaged,
            )
        };

        let compact_rev = finished.unwrap_or(-1);
        // The revision never goes back: records up to a compaction may all be gone, and a
        // crash mid-compaction may have deleted them before `finishedCompactRev` was written.
        let current_rev = last_main.max(compact_rev).max(scheduled.unwrap_or(-1));
        let mut buffer = WriteBuffer::new(engine.clone(), seq);
        // Read views lay the records not yet committed over their read transactions.
        buffer.track(Table::Key);
        let mut store = Self {
            buffer: Some(buffer),
            engine,
            sink,
            pending_requests: 0,
            pending_bytes: 0,
            index_moved: false,
            index: SharedIndex::new(index),
            compaction_due: None,
            apply_durations: actcd_types::meter::ApplyDurations::default(),
            defer_compaction: false,
            current_rev,
            compact_rev,
            consistent_index,
            term,
            identity,
            notify: false,
            outbox: Outbox::default(),
            compaction_batch_limit: DEFAULT_COMPACTION_BATCH_LIMIT,
            compaction: None,
            poisoned: false,
            commits: Default::default(),
            damage: DamageReport::default(),
            damaged_at_open: damaged,
            prev_compact_rev: compact_rev,
            compaction_hashes: None,
            compacted_keys: 0,
            ops: Arc::default(),
        };
        if let Some(rev) = scheduled.filter(|&s| s > compact_rev) {
            tracing::info!(revision = rev, "resuming interrupted compaction");
            store.compact_rev = rev;
            store.start_compaction(rev);
            // Some of its deletions may be done already: no hash of what it dropped.
            if let Some(job) = &mut store.compaction {
                job.hash = None;
            }
            store.finish_compaction_now()?;
        }
        tracing::info!(
            current_revision = store.current_rev,
            compact_revision = store.compact_rev,
            consistent_index = store.consistent_index,
            keys = store.index.read().len(),
            damaged_records = store.damaged_at_open.len(),
            "mvcc store restored"
        );
        Ok(store)
    }

    /// Reports damaged records there from now on (read views published later too), and raises
    /// the alarm for those the index rebuild met.
    pub fn set_damage_report(&mut self, damage: DamageReport) {
        if damage.raises_alarms() {
            for d in &self.damaged_at_open {
                damage.raise(d);
            }
        }
        self.damage = damage;
    }

    /// Sends the hash each compaction takes to `to` from now on (etcd 3.5's hash storage,
    /// for the compact hash check between members).
    pub fn set_compaction_hashes(&mut self, to: Recipient<CompactionHashed>) {
        self.compaction_hashes = Some(to);
    }

    /// Records that failed their check when the store opened (their keys' reads fail).
    pub fn damaged_at_open(&self) -> &[DamagedRecord] {
        &self.damaged_at_open
    }

    /// Where damaged records are reported.
    pub(crate) fn damage(&self) -> &DamageReport {
        &self.damage
    }

    /// `read`'s answer for a client: a damaged record is reported (as met `during` it) and
    /// answered with etcd's `corrupt cluster`.
    pub(crate) fn checked<T>(&self, read: Result<T, Error>, during: &str) -> Result<T, EtcdError> {
        checked(&self.damage, read, during)
    }

    /// Whether applies collect watch events for [`Self::take_outbox`]. Off by
    /// default, so stores nobody drains don't grow.
    pub fn set_notify(&mut self, on: bool) {
        self.notify = on;
        if !on {
            self.outbox = Outbox::default();
        }
    }

    /// How long commits of applied batches have taken.
    pub fn commit_stats(&self) -> actcd_types::msg::DiskLatency {
        self.commits.clone()
    }

    /// Sends commits to the backend actor from now on, after committing what the direct sink
    /// holds. The store then holds no handle that writes.
    pub fn connect_backend(&mut self, backend: Recipient<Commit>) -> Result<(), EtcdError> {
        self.commit()?;
        self.sink = Sink::Backend(backend);
        Ok(())
    }

    /// Whether commits go to the backend actor (else straight into the engine).
    pub fn has_backend(&self) -> bool {
        matches!(self.sink, Sink::Backend(_))
    }

    /// The backend committed every batch up to `seq`: the buffer stops holding them.
    pub fn committed(&mut self, seq: u64) {
        if let Some(b) = &mut self.buffer {
            b.committed(seq);
        }
    }

    /// The backend failed: what was applied may never reach the disk, so nothing more is
    /// applied or read until a restart replays the WAL.
    pub fn backend_failed(&mut self) {
        self.poisoned = true;
    }

    /// Drops the read transaction the buffer keeps (a defragmentation waits for every
    /// transaction of the old file to end).
    pub fn release_reader(&mut self) {
        if let Some(b) = &mut self.buffer {
            b.release_reader();
        }
    }

    /// Keys written but not yet confirmed committed.
    pub fn uncommitted_keys(&self) -> usize {
        self.buffer.as_ref().map_or(0, WriteBuffer::overlay_len)
    }

    /// A read transaction on what is committed, that may move to another thread.
    pub fn read_owned(&self) -> Result<Box<dyn actcd_types::storage::ReadTxn + Send>, EtcdError> {
        self.engine
            .clone()
            .begin_read_owned()
            .map_err(|e| EtcdError::from(Error::from(e)))
    }

    /// Gives the backend's free pages back (direct sink; the backend actor defragments
    /// itself). Commits first. Returns the on-disk size before and after.
    pub fn defragment(&mut self) -> Result<(u64, u64), EtcdError> {
        self.commit()?;
        self.release_reader();
        match &self.sink {
            Sink::Direct(engine) => engine
                .defragment()
                .map_err(|e| EtcdError::from(Error::from(e))),
            Sink::Backend(_) => Err(EtcdError::internal(
                "mvcc: the backend actor defragments the backend",
            )),
        }
    }

    /// etcd's backend `Hash` over the committed state: tables in name order (as bbolt keeps
    /// buckets), each name then each record's key and value, all through one CRC32C; the meta
    /// table's consistent index and term are left out (etcd's `DefaultIgnores`), so members
    /// that applied the same entries agree. Have pending applies committed first.
    pub fn hash_backend(&self) -> Result<u32, EtcdError> {
        let txn = self.engine.begin_read().map_err(Error::from)?;
        let mut tables = Table::ALL.to_vec();
        tables.sort_by_key(|t| t.name());
        let mut crc = 0u32;
        for t in tables {
            // The v2 store's table counts only once it holds something: members without v2
            // data hash as they did before it existed.
            if t == Table::V2 {
                let mut empty = true;
                txn.scan(t, &[], None, &mut |_, _| {
                    empty = false;
                    false
                })
                .map_err(Error::from)?;
                if empty {
                    continue;
                }
            }
            crc = crc32c::crc32c_append(crc, t.name().as_bytes());
            let mut damaged = None;
            txn.scan(t, &[], None, &mut |k, v| {
                // Key records are checked as they are hashed (as stored, checksum included).
                if t == Table::Key
                    && let Err(d) = key_record::open(k, v)
                {
                    damaged = Some(d);
                    return false;
                }
                let ignored = t == Table::Meta && (k == META_CONSISTENT_INDEX || k == META_TERM);
                if !ignored {
                    crc = crc32c::crc32c_append(crc, k);
                    crc = crc32c::crc32c_append(crc, v);
                }
                true
            })
            .map_err(Error::from)?;
            if let Some(d) = damaged {
                self.damage.report(&d, "hash");
                return Err(EtcdError::Corrupt);
            }
        }
        drop(txn);
        // Every page was read: let go of the ones it mapped.
        self.engine.release_scanned_pages();
        Ok(crc)
    }

    /// Bytes in live pages (0 if the engine can't tell): about the size of a blob of the store.
    pub fn size_in_use(&self) -> usize {
        self.engine.usage().map_or(0, |(_, in_use)| in_use as usize)
    }

    /// Replaces the whole state with a snapshot blob, durably, and rebuilds every index from
    /// it: [`Self::stage_restore`], a sync of the engine, [`Self::finish_restore`]. With the
    /// backend actor, the actor syncs it in between.
    pub fn restore(&mut self, data: &[u8]) -> Result<u64, EtcdError> {
        self.stage_restore(data)?;
        if let Sink::Direct(engine) = &self.sink {
            engine.sync().map_err(Error::from)?;
        }
        self.finish_restore()
    }

    /// Commits pending applies, then writes the snapshot's records in place of everything
    /// (one batch, which carries the snapshot's own consistent index) and commits it.
    pub fn stage_restore(&mut self, data: &[u8]) -> Result<(), EtcdError> {
        self.check_poisoned()?;
        self.commit()?;
        let mut buffer = self.take_buffer()?;
        buffer.begin_batch();
        let staged = install_blob(&mut buffer, data);
        if staged.is_err() {
            buffer.rollback_batch();
        }
        self.buffer = Some(buffer);
        staged?;
        // The snapshot's meta records say which entries it covers; ours must not overwrite them.
        self.index_moved = false;
        self.commit()
    }

    /// Rebuilds every index from the engine, once the staged snapshot is committed. Returns the
    /// consistent index the snapshot covers.
    pub fn finish_restore(&mut self) -> Result<u64, EtcdError> {
        let seq = self.buffer.as_ref().map_or(0, WriteBuffer::seq);
        let next = Self::open_inner(self.engine.clone(), self.sink.clone(), self.identity, seq);
        let mut next = match next {
            Ok(n) => n,
            Err(e) => {
                self.poisoned = true;
                return Err(e.into());
            }
        };
        next.compaction_batch_limit = self.compaction_batch_limit;
        next.notify = self.notify;
        next.defer_compaction = self.defer_compaction;
        next.outbox = std::mem::take(&mut self.outbox);
        next.set_damage_report(self.damage.clone());
        next.compaction_hashes = self.compaction_hashes.take();
        // The process's counters go on, as etcd's do.
        next.compacted_keys = self.compacted_keys;
        next.ops = Arc::clone(&self.ops);
        next.apply_durations = std::mem::take(&mut self.apply_durations);
        *self = next;
        Ok(self.consistent_index)
    }

    /// What batches applied since the last call changed.
    pub fn take_outbox(&mut self) -> Outbox {
        std::mem::take(&mut self.outbox)
    }

    /// Every live key whose latest record names a lease, with that lease, sorted by key (the
    /// applier rebuilds the keys attached to each lease from it).
    pub fn leased_keys(&self) -> Vec<(Vec<u8>, i64)> {
        leased::list(&self.index.read())
    }

    /// `--experimental-compaction-batch-limit`: records deleted per compaction step.
    pub fn compaction_batch_limit(&self) -> usize {
        self.compaction_batch_limit
    }

    /// Records examined per compaction deletion transaction (tests make it small).
    pub fn set_compaction_batch_limit(&mut self, limit: usize) {
        self.compaction_batch_limit = limit.max(1);
    }

    pub fn consistent_index(&self) -> u64 {
        self.consistent_index
    }

    /// Term of the last applied entry.
    pub fn term(&self) -> u64 {
        self.term
    }

    pub fn current_revision(&self) -> i64 {
        self.current_rev
    }

    /// -1 before the first compaction.
    pub fn compact_revision(&self) -> i64 {
        self.compact_rev
    }

    /// The key index (read-locked: its only writer is this store, on this thread).
    pub fn index(&self) -> RwLockReadGuard<'_, TreeIndex> {
        self.index.read()
    }

    /// The key index as read views share it.
    pub(crate) fn shared_index(&self) -> &SharedIndex {
        &self.index
    }

    pub(crate) fn sink(&self) -> &Sink {
        &self.sink
    }

    pub fn status(&self) -> Result<StoreStatus, EtcdError> {
        let (db_size, db_size_in_use) = self
            .engine
            .usage()
            .map_err(|e| EtcdError::from(Error::from(e)))?;
        Ok(StoreStatus {
            revision: self.current_rev,
            compact_revision: self.compact_rev,
            consistent_index: self.consistent_index,
            term: self.term,
            db_size,
            db_size_in_use,
            keys: self.index().live_len() as u64,
        })
    }

    /// A read of everything applied, committed or still buffered.
    pub fn range(&self, req: &RangeRequest) -> Result<RangeResponse, EtcdError> {
        self.check_poisoned()?;
        self.ops.end(Tally {
            ranges: 1,
            ..Tally::default()
        });
        let mut resp = self.with_view(|v| self.checked(v.range(req), "range"))??;
        stamp(&mut resp.header, self.identity, self.term);
        Ok(resp)
    }

    /// Runs `f` on the key space as the writer sees it: its index, over the write buffer.
    pub(crate) fn with_view<T>(
        &self,
        f: impl FnOnce(&View<'_, dyn ReadTxn + '_>) -> T,
    ) -> Result<T, EtcdError> {
        let index = self.index.read();
        self.read_with(|txn| {
            f(&View {
                index: &index,
                txn,
                rev: self.current_rev,
                compact_rev: self.compact_rev,
                concurrent: false,
            })
        })
    }

    /// Runs `f` on the write buffer: applied writes over the committed engine.
    pub(crate) fn read_with<T>(&self, f: impl FnOnce(&dyn ReadTxn) -> T) -> Result<T, EtcdError> {
        match &self.buffer {
            Some(b) => Ok(f(b)),
            None => Err(EtcdError::internal("mvcc: the write buffer is in use")),
        }
    }

    /// The write buffer, taken out so the store can be borrowed beside it; put it back.
    fn take_buffer(&mut self) -> Result<WriteBuffer, EtcdError> {
        self.buffer
            .take()
            .ok_or_else(|| EtcdError::internal("mvcc: the write buffer is in use"))
    }

    /// Requests applied since the last commit.
    pub fn pending_ops(&self) -> usize {
        self.pending_requests
    }

    /// Encoded bytes of the requests applied since the last commit.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Whether the store refuses all work until a restart (a commit holding applied writes
    /// failed).
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// etcd's range, put, delete and txn counters, as counted so far (`ops.rs`).
    pub fn op_counts(&self) -> OpCounts {
        self.ops.counts()
    }

    /// The counters themselves, which read views share.
    pub(crate) fn op_counters(&self) -> &Arc<OpCounters> {
        &self.ops
    }

    /// The identity stamped on answers.
    pub(crate) fn identity(&self) -> MemberIdentity {
        self.identity
    }

    /// The engine read views open their read transactions on.
    pub(crate) fn read_engine(&self) -> &Arc<dyn ReadEngine> {
        &self.engine
    }

    /// The buffered writes not yet committed that read views need: the `key` table's records.
    pub(crate) fn seal_fresh(&mut self) -> actcd_types::storage::Fresh {
        self.buffer
            .as_mut()
            .map(WriteBuffer::seal)
            .unwrap_or_default()
    }

    fn check_poisoned(&self) -> Result<(), EtcdError> {
        refuse_if_poisoned(self.poisoned)
    }

    /// Applies `requests` in order in one engine write transaction that also records
    /// `consistent_index` and `term`, and commits it. A refused request gets its error and
    /// changes nothing; an engine failure fails the batch and leaves the store as it was. No
    /// lease exists for its puts (see [`Self::apply_batch_with`]).
    pub fn apply_batch(
        &mut self,
        consistent_index: u64,
        term: u64,
        requests: Vec<InternalRaftRequest>,
    ) -> Result<Vec<ApplyResult>, EtcdError> {
        self.apply_batch_with(consistent_index, term, requests, &[])
            .map(|(results, _)| results)
    }

    /// [`Self::apply_batch`] where the leases `leases` exist (puts may name them).
    pub fn apply_batch_with(
        &mut self,
        consistent_index: u64,
        term: u64,
        requests: Vec<InternalRaftRequest>,
        leases: &[i64],
    ) -> Result<Outcome, EtcdError> {
        self.check_poisoned()?;
        let before = (
            self.current_rev,
            self.compact_rev,
            self.consistent_index,
            self.term,
        );
        let outbox_mark = self.outbox.events.len();
        let requests = KvRequest::all(requests);
        let Uncommitted {
            results,
            undo,
            attachments,
            compaction,
            ..
        } = self.apply_uncommitted(consistent_index, term, requests, Vec::new(), leases)?;
        if let Err(e) = self.commit() {
            // Nothing else was pending: put memory back as it was and carry on.
            let mut index = self.index.write();
            for u in undo.iter().rev() {
                index.undo(u);
            }
            drop(index);
            self.outbox.events.truncate(outbox_mark);
            (
                self.current_rev,
                self.compact_rev,
                self.consistent_index,
                self.term,
            ) = before;
            self.poisoned = false;
            return Err(e);
        }
        if let Some(rev) = compaction {
            self.start_compaction(rev);
            self.finish_compaction_now()?;
        }
        Ok((results, attachments))
    }

    /// Like [`Self::apply_batch_with`], but into the write buffer, uncommitted: the caller
    /// commits with [`Self::commit`] (after each batch with the backend actor, which batches;
    /// on a timer or when [`Self::pending_ops`] grows with the direct sink). Memory reflects
    /// the batch at once; reads see it. `ops` are other state owners' writes (the auth store's
    /// tables, the applier's) made at entries the batch covers: written first, committed with
    /// its index. `leases`: the leases that exist, of those the batch's puts name.
    pub fn apply_deferred(
        &mut self,
        consistent_index: u64,
        term: u64,
        requests: Vec<InternalRaftRequest>,
        ops: Vec<Op>,
        leases: &[i64],
    ) -> Result<Outcome, EtcdError> {
        let requests = KvRequest::all(requests);
        self.deferred(consistent_index, term, requests, ops, leases)
    }

    /// Deletes every live key of `keys` at one revision (a lease revoke's keys), into the write
    /// buffer like [`Self::apply_deferred`]: one `DeleteRange` result, whose header carries
    /// the revision (moved only if something was deleted).
    pub fn delete_keys_deferred(
        &mut self,
        consistent_index: u64,
        term: u64,
        keys: Vec<Vec<u8>>,
        ops: Vec<Op>,
    ) -> Result<Outcome, EtcdError> {
        let bytes = keys.iter().map(Vec::len).sum();
        let requests = (vec![KvRequest::DeleteKeys(keys)], bytes);
        self.deferred(consistent_index, term, requests, ops, &[])
    }

    fn deferred(
        &mut self,
        consistent_index: u64,
        term: u64,
        requests: (Vec<KvRequest>, usize),
        ops: Vec<Op>,
        leases: &[i64],
    ) -> Result<Outcome, EtcdError> {
        self.check_poisoned()?;
        let Uncommitted {
            results,
            attachments,
            compaction,
            physical,
            ..
        } = self.apply_uncommitted(consistent_index, term, requests, ops, leases)?;
        self.compaction_due = compaction.map(|rev| (rev, physical));
        if !self.defer_compaction {
            self.run_due_compaction()?;
        }
        Ok((results, attachments))
    }

    /// With read views ([`crate::ReadView`]): a batch's compaction is applied to the index only
    /// when [`Self::run_due_compaction`] is called, after the batch's view is published (a
    /// reader that finds the index compacted past its view then finds a newer view).
    pub fn defer_compaction(&mut self, on: bool) {
        self.defer_compaction = on;
    }

    /// Compacts the index at the last batch's compaction, if it had one, and starts deleting
    /// records (all of them now for a `physical` one: etcd answers it only when they are gone).
    pub fn run_due_compaction(&mut self) -> Result<(), EtcdError> {
        if let Some((rev, physical)) = self.compaction_due.take() {
            self.start_compaction(rev);
            if physical {
                self.finish_compaction_now()?;
            }
        }
        Ok(())
    }

    /// Compacts the index at the last batch's compaction, if it had one, and queues its
    /// deletions without running any: `Some(physical)` when one started. The caller runs the
    /// deletions in slices and answers a `physical` compaction's waiter once
    /// [`Self::compacting`] is false (etcd's server waits for the compaction in the client's
    /// handler, not in the apply loop).
    pub fn start_due_compaction(&mut self) -> Option<bool> {
        let (rev, physical) = self.compaction_due.take()?;
        self.start_compaction(rev);
        Some(physical)
    }

    /// Writes a batch into the write buffer and updates memory; returns the results, the
    /// index changes made (to take back if the commit fails), and a compaction to carry out.
    fn apply_uncommitted(
        &mut self,
        consistent_index: u64,
        term: u64,
        (requests, bytes): (Vec<KvRequest>, usize),
        ops: Vec<Op>,
        leases: &[i64],
    ) -> Result<Uncommitted, EtcdError> {
        let n = requests.len();
        let mut txn = self.take_buffer()?;
        txn.begin_batch();
        let mut undo = Vec::new();
        let mut attachments = Vec::new();
        // The consistent index and term go with the commit that carries this batch, and so do
        // the other owner's writes.
        let outcome = actcd_types::storage::write_ops(&mut txn, &ops, None)
            .map_err(Error::from)
            .and_then(|()| {
                self.apply_in(
                    &mut txn,
                    &mut undo,
                    &mut attachments,
                    term,
                    requests,
                    leases,
                )
            });
        let applied = match outcome {
            Ok(applied) => applied,
            Err(e) => {
                // The buffer may hold part of this batch: take the batch back out of it.
                txn.rollback_batch();
                self.buffer = Some(txn);
                let mut index = self.index.write();
                for u in undo.iter().rev() {
                    index.undo(u);
                }
                drop(index);
                tracing::error!(error = %e, consistent_index, "apply batch failed");
                return Err(e.into());
            }
        };
        self.buffer = Some(txn);
        self.pending_requests += n.max(1);
        self.pending_bytes += bytes;
        self.index_moved = true;

        self.current_rev = applied.current_rev;
        if applied.compact_rev != self.compact_rev {
            self.prev_compact_rev = self.compact_rev;
        }
        self.compact_rev = applied.compact_rev;
        self.consistent_index = consistent_index;
        self.term = term;
        if self.notify {
            self.outbox.events.extend(applied.events);
        }
        // Compacting at the last revision covers any earlier one in the same batch.
        let compaction = applied.compactions.last().copied();
        Ok(Uncommitted {
            results: applied.results,
            undo,
            attachments,
            compaction,
            physical: applied.physical,
        })
    }

    /// Commits what the write buffer holds: straight into the engine with the direct sink (a
    /// failed commit loses batches whose results were already given, so the store refuses
    /// further work until a restart replays them), or sent to the backend actor, which commits
    /// it per its batching policy.
    pub fn commit(&mut self) -> Result<(), EtcdError> {
        self.pending_requests = 0;
        self.pending_bytes = 0;
        let Some(buffer) = &mut self.buffer else {
            return Err(EtcdError::internal("mvcc: the write buffer is in use"));
        };
        if buffer.pending_ops() == 0 && !self.index_moved {
            return Ok(());
        }
        let commit = Commit {
            seq: buffer.seq(),
            ops: buffer.take_ops(),
            consistent_index: self
                .index_moved
                .then_some((self.consistent_index, self.term)),
        };
        self.index_moved = false;
        match &self.sink {
            Sink::Backend(backend) => {
                // One message per commit point (each applied batch), bounded by the apply rate;
                // the actor waits for the backend when too much stays uncommitted.
                backend.do_send(commit);
                Ok(())
            }
            Sink::Direct(engine) => {
                let started = std::time::Instant::now();
                let committed = engine.write().and_then(|mut txn| {
                    actcd_types::storage::write_ops(
                        &mut *txn,
                        &commit.ops,
                        commit.consistent_index,
                    )?;
                    txn.commit()
                });
                self.commits.observe(started.elapsed().as_secs_f64());
                match committed {
                    Ok(()) => {
                        buffer.committed(commit.seq);
                        Ok(())
                    }
                    Err(e) => {
                        // The engine is the truth again; what only the buffer held is lost.
                        buffer.discard();
                        self.poisoned = true;
                        tracing::error!(error = %e, "backend commit failed");
                        Err(EtcdError::from(Error::from(e)))
                    }
                }
            }
        }
    }

    /// Evaluates a txn that writes nothing against the current state.
    pub fn read_only_txn(&self, req: TxnRequest) -> Result<TxnResponse, EtcdError> {
        self.check_poisoned()?;
        let mut tally = Tally::default();
        let read = self.with_view(|v| self.checked(v.read_txn(&req, &mut tally), "txn"));
        self.ops.end(tally);
        let mut resp = read??;
        stamp(&mut resp.header, self.identity, self.term);
        Ok(resp)
    }

    fn apply_in<W: WriteTxn + ?Sized>(
        &mut self,
        txn: &mut W,
        undo: &mut Vec<Undo>,
        attachments: &mut Vec<LeaseAttachment>,
        term: u64,
        requests: Vec<KvRequest>,
        leases: &[i64],
    ) -> Result<Applied, Error> {
        let mut current_rev = self.current_rev;
        let mut compact_rev = self.compact_rev;
        let mut compactions = Vec::new();
        let mut physical = false;
        let mut results = Vec::with_capacity(requests.len());
        let mut events = Vec::new();
        let identity = self.identity;
        // Readers wait for the batch's index changes as a whole (they never see half a txn).
        let shared = self.index.clone();
        let mut index = shared.write();
        for req in requests {
            let first_event = events.len();
            let first_undo = undo.len();
            // etcd's name for the request, as its apply timing labels it.
            let op = match &req {
                KvRequest::Write(KvWrite::Put(_)) => Some("Put"),
                KvRequest::Write(KvWrite::DeleteRange(_)) => Some("DeleteRange"),
                KvRequest::Write(KvWrite::Txn(_)) => Some("Txn"),
                KvRequest::Compaction(..) => Some("Compaction"),
                KvRequest::DeleteKeys(_) | KvRequest::None => None,
            };
            let started = op.map(|_| std::time::Instant::now());
            let (outcome, changed) = match req {
                KvRequest::Compaction(revision, wants_physical) => {
                    // etcd's order of checks. The deletions run after the batch, beside later
                    // applies; `physical` ones finish before the batch's results are returned.
                    let outcome = if revision <= compact_rev {
                        Err(EtcdError::Compacted)
                    } else if revision > current_rev {
                        Err(EtcdError::FutureRevision)
                    } else {
                        compact_rev = revision;
                        compactions.push(revision);
                        physical |= wants_physical;
                        txn.put(Table::Meta, META_SCHEDULED_COMPACT, &revision.to_be_bytes())?;
                        // etcd reads the revision for the answer with a Range of its own.
                        self.ops.end(Tally {
                            ranges: 1,
                            ..Tally::default()
                        });
                        let mut header = rev_header(current_rev);
                        stamp(&mut header, identity, term);
                        Ok(ApplyResponse::Compaction(CompactionResponse { header }))
                    };
                    (outcome.map_err(Error::from), false)
                }
                KvRequest::None => (Ok(ApplyResponse::Empty), false),
                KvRequest::DeleteKeys(keys) => {
                    // Every key goes at one revision, as one etcd write txn.
                    let mut w = Writer::new(
                        &mut *txn,
                        &mut index,
                        &mut *undo,
                        &mut events,
                        leases,
                        current_rev,
                        compact_rev,
                    );
                    let mut deleted = 0;
                    for key in keys {
                        deleted += w
                            .delete_range(DeleteRangeRequest {
                                key,
                                ..Default::default()
                            })?
                            .deleted;
                    }
                    let changed = w.changes > 0;
                    self.ops.end(w.tally);
                    leased::track(&undo[first_undo..], &events[first_event..], attachments);
                    let mut header = rev_header(current_rev + i64::from(changed));
                    stamp(&mut header, identity, term);
                    let resp = DeleteRangeResponse {
                        header,
                        deleted,
                        prev_kvs: Vec::new(),
                    };
                    (Ok(ApplyResponse::DeleteRange(resp)), changed)
                }
                KvRequest::Write(write) => {
                    let mut w = Writer::new(
                        &mut *txn,
                        &mut index,
                        &mut *undo,
                        &mut events,
                        leases,
                        current_rev,
                        compact_rev,
                    );
                    let outcome = match write {
                        KvWrite::Put(p) => w.apply_put(p).map(|mut r| {
                            stamp(&mut r.header, identity, term);
                            ApplyResponse::Put(r)
                        }),
                        KvWrite::DeleteRange(d) => w.delete_range(d).map(|mut r| {
                            stamp(&mut r.header, identity, term);
                            ApplyResponse::DeleteRange(r)
                        }),
                        KvWrite::Txn(t) => w.txn(t).map(|mut r| {
                            stamp(&mut r.header, identity, term);
                            ApplyResponse::Txn(r)
                        }),
                    };
                    let changed = w.changes > 0;
                    // etcd's read transaction of a Txn (empty for the rest), then its write one.
                    self.ops.end(w.read_side);
                    self.ops.end(w.tally);
                    if outcome.is_ok() {
                        leased::track(&undo[first_undo..], &events[first_event..], attachments);
                    }
                    (outcome, changed)
                }
            };
            if let (Some(op), Some(started)) = (op, started) {
                // etcd counts a compaction refused as already compacted as a success.
                let success = matches!(outcome, Ok(_) | Err(Error::Request(EtcdError::Compacted)));
                self.apply_durations
                    .observe("v3", op, success, started.elapsed().as_secs_f64());
            }
            match outcome {
                Ok(r) => results.push(Ok(r)),
                Err(Error::Request(e)) => {
                    // A refused request wrote nothing (its writer rolled back), so it has no
                    // events either.
                    events.truncate(first_event);
                    results.push(Err(e));
                }
                // A record it read is damaged: it fails as a refused request does (this member
                // diverges from the others, which is what the CORRUPT alarm says), and the
                // batch goes on.
                Err(Error::Damaged(d)) => {
                    self.damage.report(&d, "apply");
                    events.truncate(first_event);
                    results.push(Err(EtcdError::Corrupt));
                }
                // The engine failed: the whole batch is abandoned.
                Err(e) => return Err(e),
            }
            if changed {
                current_rev += 1;
            }
        }
        Ok(Applied {
            results,
            events,
            physical,
            current_rev,
            compact_rev,
            compactions,
        })
    }

    /// Compacts the index at `rev` and queues the deletion of every record it no longer needs.
    /// A newer compaction replaces an unfinished one: records an older one would drop are
    /// superseded at the newer revision too, and its scan starts from the beginning again.
    /// The key indexes are compacted by the first steps, a slice of keys each (a million keys
    /// at once hold the index's write lock, and the applies, for 0.2–0.3 s in a release
    /// build; 1000 keys a step take about 0.6 ms); the deletions start once every key's kept
    /// revision is known.
    fn start_compaction(&mut self, rev: i64) {
        let keys = {
            let mut index = self.index.write();
            index.start_compaction(rev);
            index.len()
        };
        self.compaction = Some(CompactionJob {
            rev,
            // At most one revision a key: sized once, so no step pays for the set's growth
            // (a step that doubled a million-entry set took some 80 ms).
            keep: HashSet::with_capacity(keys),
            index_from: Some(Vec::new()),
            from: Vec::new(),
            deleted: 0,
            hash: Some((crc32c::crc32c(b"key"), self.prev_compact_rev)),
        });
    }

    /// Records deleted by the compactions finished since start.
    pub fn compacted_keys(&self) -> u64 {
        self.compacted_keys
    }

    /// Whether compaction deletions are still pending.
    pub fn compacting(&self) -> bool {
        self.compaction.is_some()
    }

    /// Whether the next compaction step compacts key indexes (no record deleted yet).
    pub fn compacting_index(&self) -> bool {
        self.compaction
            .as_ref()
            .is_some_and(|job| job.index_from.is_some())
    }

    /// Compacts up to `budget` key indexes while the index's part is under way, then deletes
    /// up to `budget` compacted records a step in `pending`'s transaction (which the caller
    /// commits as usual); the last step records `finishedCompactRev`. Returns whether work
    /// remains. Compaction so runs beside applies, a slice at a time, instead of stalling them;
    /// a crash in between is finished at the next start (`scheduledCompactRev` says what).
    /// Reads are unaffected: revisions at or below the compacted one are refused anyway, and
    /// HashKV skips records a compaction would drop.
    pub fn step_compaction(&mut self, budget: usize) -> Result<bool, EtcdError> {
        let Some(mut job) = self.compaction.take() else {
            return Ok(false);
        };
        self.check_poisoned()?;
        if let Some(from) = job.index_from.take() {
            let budget = budget.max(1);
            job.index_from =
                self.index
                    .write()
                    .compact_slice(job.rev, &from, budget, &mut job.keep);
            self.compaction = Some(job);
            return Ok(true);
        }
        // Between two slices: one has run (the scan resumes past its last record), the next
        // has not. `return` fails the step as a failed engine write does.
        #[cfg(feature = "failpoints")]
        if !job.from.is_empty()
            && let Some(e) = fail::eval("compaction_between_slices", |_| {
                Error::Storage(actcd_types::storage::StorageError(
                    "injected by failpoint compaction_between_slices".into(),
                ))
            })
        {
            self.compaction = Some(job);
            return Err(e.into());
        }
        let mut txn = self.take_buffer()?;
        txn.begin_batch();
        let step = delete_compacted_slice(&mut txn, &mut job, budget.max(1), &self.damage);
        if step.is_err() {
            // Take the half slice back out; the next step starts it again.
            txn.rollback_batch();
        }
        self.buffer = Some(txn);
        match step {
            Ok(true) => {
                self.pending_requests += 1;
                self.compacted_keys += job.deleted as u64;
                tracing::info!(
                    revision = job.rev,
                    deleted = job.deleted,
                    hash = job.hash.map(|(h, _)| h),
                    "finished scheduled compaction"
                );
                if let (Some((hash, prev)), Some(to)) = (job.hash, &self.compaction_hashes) {
                    let _ = to.try_send(CompactionHashed {
                        hash,
                        compact_revision: prev,
                        hash_revision: job.rev,
                    });
                }
                Ok(false)
            }
            Ok(false) => {
                self.pending_requests += 1;
                self.compaction = Some(job);
                Ok(true)
            }
            Err(e) => {
                self.compaction = Some(job);
                Err(e.into())
            }
        }
    }

    /// Runs the queued compaction to the end, committing what is buffered and then each slice
    /// of `compaction_batch_limit` records.
    pub fn finish_compaction_now(&mut self) -> Result<(), EtcdError> {
        while self.step_compaction(self.compaction_batch_limit)? {
            self.commit()?;
        }
        self.commit()
    }
}

/// A compaction's deletions under way: what to keep, and where the scan resumes.
struct CompactionJob {
    rev: i64,
    /// The revisions at or below `rev` to keep, complete once `index_from` is `None`.
    keep: HashSet<Revision>,
    /// Where the key indexes' compaction resumes (the next key to compact), while it is
    /// under way; the deletions wait for it.
    index_from: Option<Vec<u8>>,
    from: Vec<u8>,
    deleted: usize,
    /// etcd 3.5's compaction hash, taken over the records the deletions scan (so at no extra
    /// read): the running CRC32C and the compaction before this one. It counts, in etcd's
    /// HashKV format, every record above that compaction and the kept ones at or below it —
    /// what HashKV at `rev` said just before this compaction. `None` when it cannot be taken
    /// whole (a compaction resumed at start-up, a damaged record).
    hash: Option<(u32, i64)>,
}

/// Deletes the records at or below `job.rev` that `job.keep` doesn't name, scanning at most
/// `budget` records from `job.from`; returns whether the scan reached the end (and then records
/// `finishedCompactRev`). Every record scanned is checked: a damaged one is reported through
/// `damage` (the member's disk is damaging data, whether or not this record was still needed)
/// and compaction goes on, deleting it if it is superseded like any other.
fn delete_compacted_slice<W: WriteTxn + ?Sized>(
    txn: &mut W,
    job: &mut CompactionJob,
    budget: usize,
    damage: &DamageReport,
) -> Result<bool, Error> {
    // Every key with main revision ≤ rev sorts below the 8-byte prefix of rev + 1.
    let end = job.rev.saturating_add(1).to_be_bytes();
    let mut batch = Vec::new();
    let keep = &job.keep;
    let hash = &mut job.hash;
    txn.scan(Table::Key, &job.from, Some(&end), &mut |k, v| {
        match key_record::open(k, v) {
            Ok(kv) => {
                if let Some((crc, prev)) = hash {
                    // etcd's HashKV rules (`hash.rs`), a tombstone at `prev` left out too.
                    let counts = match Revision::from_bytes(k) {
                        Some((r, tombstone)) => {
                            (r.main > *prev || keep.is_empty() || keep.contains(&r))
                                && !(tombstone && r.main == *prev)
                        }
                        None => true,
                    };
                    if counts {
                        *crc = crc32c::crc32c_append(*crc, k);
                        *crc = crc32c::crc32c_append(*crc, kv);
                    }
                }
            }
            Err(d) => {
                damage.report(&d, "compaction");
                *hash = None;
            }
        }
        batch.push(k.to_vec());
        batch.len() < budget
    })?;
    for k in &batch {
        if let Some((r, _)) = Revision::from_bytes(k)
            && !job.keep.contains(&r)
        {
            txn.delete(Table::Key, k)?;
            job.deleted += 1;
        }
    }
    let done = batch.len() < budget;
    if done {
        txn.put(Table::Meta, META_FINISHED_COMPACT, &job.rev.to_be_bytes())?;
    } else if let Some(mut last) = batch.pop() {
        // The smallest key after `last`.
        last.push(0);
        job.from = last;
    }
    Ok(done)
}

/// The part of an [`InternalRaftRequest`] this store applies, picked with the precedence of
/// etcd's applier when several fields are set.
enum KvRequest {
    Write(KvWrite),
    Compaction(i64, bool),
    /// Keys to delete at one revision ([`Store::delete_keys_deferred`]).
    DeleteKeys(Vec<Vec<u8>>),
    /// Not a key-space write: a Range (reads are served outside the log, so one that went
    /// through it has no answer here), or a request another owner applies (leases, alarms,
    /// auth, membership).
    None,
}

impl KvRequest {
    fn of(req: InternalRaftRequest) -> Self {
        if req.range.is_some() {
            Self::None
        } else if let Some(p) = req.put {
            Self::Write(KvWrite::Put(p))
        } else if let Some(d) = req.delete_range {
            Self::Write(KvWrite::DeleteRange(d))
        } else if let Some(t) = req.txn {
            Self::Write(KvWrite::Txn(t))
        } else if let Some(c) = req.compaction {
            Self::Compaction(c.revision, c.physical)
        } else {
            Self::None
        }
    }

    /// Every request of a batch, with their encoded size.
    fn all(requests: Vec<InternalRaftRequest>) -> (Vec<Self>, usize) {
        let bytes = requests.iter().map(prost::Message::encoded_len).sum();
        (requests.into_iter().map(Self::of).collect(), bytes)
    }
}

/// A request that may write keys, so takes a revision if it changes something.
enum KvWrite {
    Put(PutRequest),
    DeleteRange(DeleteRangeRequest),
    Txn(TxnRequest),
}

/// What the store, and every view of it, answers once a commit of applied writes has failed.
pub(crate) fn refuse_if_poisoned(poisoned: bool) -> Result<(), EtcdError> {
    if poisoned {
        return Err(EtcdError::internal(
            "mvcc: an uncommitted batch was lost; restart to recover from the WAL",
        ));
    }
    Ok(())
}

/// Fills in what etcd's gRPC layer adds to a top-level header.
pub(crate) fn stamp(header: &mut Option<ResponseHeader>, identity: MemberIdentity, term: u64) {
    let h = header.get_or_insert_with(ResponseHeader::default);
    h.cluster_id = identity.cluster_id;
    h.member_id = identity.member_id;
    h.raft_term = term;
}

/// Everything `txn` sees as one blob (`snapshot.rs`), with the consistent index it covers;
/// `size_hint` bytes are reserved at once (growing a store-sized buffer by doubling copies it
/// again and again).
pub fn blob_of(txn: &dyn ReadTxn, size_hint: usize) -> Result<(u64, Vec<u8>), EtcdError> {
    let index = read_meta(txn, META_CONSISTENT_INDEX)?.unwrap_or(0);
    let data = actcd_etcd_snapshot::whole_store::encode_into(txn, Vec::with_capacity(size_hint))
        .map_err(Error::from)?;
    Ok((index, data))
}

fn read_meta<R: ReadTxn + ?Sized>(txn: &R, key: &[u8]) -> Result<Option<u64>, Error> {
    txn.get(Table::Meta, key)?
        .map(|v| {
            <[u8; 8]>::try_from(v.as_slice())
                .map(u64::from_be_bytes)
                .map_err(|_| {
                    Error::Corrupt(format!(
                        "meta {} is {} bytes, want 8",
                        String::from_utf8_lossy(key),
                        v.len()
                    ))
                })
        })
        .transpose()
}

/// Adds one `key` table record to the index being rebuilt, with the lease it names; returns
/// its main revision (`None` for a table key that is no revision). The record's fields are
/// read in place ([`key_record::decode_fields`]): its value is never copied.
///
/// A record that fails its check is logged and kept in `damaged`, and still indexed if its
/// bytes decode: a read of its key then meets the damage (and fails with `corrupt cluster`)
/// instead of being answered from an older version as if the damaged one never existed.
fn restore_record(
    index: &mut TreeIndex,
    damaged: &mut Vec<DamagedRecord>,
    k: &[u8],
    v: &[u8],
) -> Option<i64> {
    let unverified;
    let fields = match key_record::decode_fields(k, v) {
        Ok(f) => Some(f),
        Err(d) => {
            DamageReport::default().report(&d, "index rebuild");
            damaged.push(d);
            unverified = key_record::decode_unverified(v);
            unverified.as_ref().map(|kv| key_record::KeyFields {
                key: &kv.key,
                create_revision: kv.create_revision,
                mod_revision: kv.mod_revision,
                version: kv.version,
                lease: kv.lease,
            })
        }
    };
    let (rev, tombstone) = Revision::from_bytes(k)?;
    let Some(kv) = fields else {
        return Some(rev.main);
    };
    if tombstone {
        if index.key_index(kv.key).is_none() {
            // A tombstone whose puts were compacted away: kept at the compaction revision, so
            // a watch from there still gets the DELETE (etcd's `restoreTombstone`, #19249).
            index.insert(kv.key.to_vec(), KeyIndex::restore_tombstone(rev));
        } else if index.tombstone(kv.key, rev).is_err() {
            tracing::warn!(revision = ?rev, "tombstone of a key that is not live");
        }
    } else if index.key_index(kv.key).is_some() {
        index.put_leased(kv.key, rev, kv.lease);
    } else {
        // The oldest record left of this key: compaction may have dropped its earlier writes,
        // and with them the creating revision's sub (only its main is ever reported).
        let created = if kv.version == 1 {
            rev
        } else {
            Revision::new(kv.create_revision, 0)
        };
        let ki = KeyIndex::restore_leased(created, rev, kv.version, kv.lease);
        index.insert(kv.key.to_vec(), ki);
    }
    Some(rev.main)
}

/// `read`'s answer for a client: a damaged record is reported through `damage` (as met
/// `during` it) and answered with etcd's `corrupt cluster`.
pub(crate) fn checked<T>(
    damage: &DamageReport,
    read: Result<T, Error>,
    during: &str,
) -> Result<T, EtcdError> {
    read.map_err(|e| {
        if let Error::Damaged(d) = &e {
            damage.report(d, during);
        }
        EtcdError::from(e)
    })
}

/// Writes a leader's snapshot blob in place of everything in `txn`. A blob from a member
/// older than checksums (no format version in its `meta`) has its `key` records sealed on the
/// way in, as [`upgrade_key_format`] would have done here, so the table holds one form.
fn install_blob<W: WriteTxn + ?Sized>(txn: &mut W, data: &[u8]) -> Result<(), Error> {
    use actcd_etcd_snapshot::whole_store;
    let records = whole_store::decode(data)?;
    let format = records
        .iter()
        .find(|(t, k, _)| *t == Table::Meta && *k == FORMAT_META_KEY)
        .map(|(_, _, v)| <[u8; 8]>::try_from(*v).map(u64::from_be_bytes));
    match format {
        Some(Ok(FORMAT_CHECKSUMMED)) => Ok(whole_store::install_records(txn, &records)?),
        Some(_) => Err(Error::Corrupt(
            "the snapshot's key records are in a format this build does not read".into(),
        )),
        None => {
            let sealed: Vec<Vec<u8>> = records
                .iter()
                .map(|&(t, k, v)| match t {
                    Table::Key => key_record::seal(k, v),
                    _ => Vec::new(),
                })
                .collect();
            let version = FORMAT_CHECKSUMMED.to_be_bytes();
            let mut upgraded: Vec<_> = records
                .iter()
                .zip(&sealed)
                .map(|(&(t, k, v), s)| (t, k, if t == Table::Key { s.as_slice() } else { v }))
                .collect();
            upgraded.push((Table::Meta, FORMAT_META_KEY, version.as_slice()));
            Ok(whole_store::install_records(txn, &upgraded)?)
        }
    }
}

/// Records rewritten per scan of [`upgrade_key_format`] (the write transaction holds them all;
/// this bounds only the copy in memory).
const UPGRADE_CHUNK: usize = 10_000;

/// Brings the `key` table to [`FORMAT_CHECKSUMMED`]: a table written before checksums (no
/// format in `meta`) has every record sealed with its checksum, in one write transaction that
/// also records the format, so a crash leaves either the old table or the new one, never a mix
/// (and the format key always says which). A record that is not a `KeyValue` is left as it
/// was: it then fails its check at every read, as damage should, rather than being blessed
/// with a checksum. A fresh store just records the format.
///
/// Why a rewrite and not a tag byte telling old records from new: with a tag, a flip of the
/// tag itself would make a checksummed record read as an old one, unchecked, unless the format
/// also said where old records end — and those old records would never verify themselves. The
/// rewrite costs one pass at the first start of the new build (and the file may grow by up to
/// the table's size until the old pages are reused); after it every record verifies itself
/// and the read path knows one form.
pub fn upgrade_key_format(engine: &dyn KvEngine) -> Result<(), Error> {
    let format = {
        let txn = engine.read()?;
        read_meta(&*txn, FORMAT_META_KEY)?
    };
    match format {
        Some(FORMAT_CHECKSUMMED) => return Ok(()),
        Some(other) => {
            return Err(Error::Corrupt(format!(
                "key records are in format {other}, newer than this build reads \
                 ({FORMAT_CHECKSUMMED})"
            )));
        }
        None => {}
    }
    let mut txn = engine.write()?;
    let (mut sealed, mut left) = (0usize, 0usize);
    let mut from = Vec::new();
    loop {
        let mut chunk = Vec::new();
        txn.scan(Table::Key, &from, None, &mut |k, v| {
            chunk.push((k.to_vec(), v.to_vec()));
            chunk.len() < UPGRADE_CHUNK
        })?;
        let done = chunk.len() < UPGRADE_CHUNK;
        for (k, v) in &chunk {
            if KeyValue::decode(v.as_slice()).is_ok() {
                txn.put(Table::Key, k, &key_record::seal(k, v))?;
                sealed += 1;
            } else {
                tracing::warn!(key = ?k, "key record is no KeyValue; left unsealed (damaged)");
                left += 1;
            }
        }
        match chunk.pop() {
            Some((mut last, _)) if !done => {
                last.push(0);
                from = last;
            }
            _ => break,
        }
    }
    txn.put(
        Table::Meta,
        FORMAT_META_KEY,
        &FORMAT_CHECKSUMMED.to_be_bytes(),
    )?;
    txn.commit()?;
    if sealed + left > 0 {
        tracing::info!(
            records = sealed,
            left_damaged = left,
            "key table rewritten with a checksum in every record"
        );
    }
    Ok(())
}

/// Refuses to read a `key` table whose records are in a form this build does not read (a
/// store opened on an engine [`upgrade_key_format`] has not seen).
fn check_key_format<R: ReadTxn + ?Sized>(txn: &R) -> Result<(), Error> {
    match read_meta(txn, FORMAT_META_KEY)? {
        Some(FORMAT_CHECKSUMMED) => Ok(()),
        None => {
            let mut empty = true;
            txn.scan(Table::Key, &[], None, &mut |_, _| {
                empty = false;
                false
            })?;
            if empty {
                Ok(())
            } else {
                Err(Error::Corrupt(
                    "key records carry no format version: open the store with Store::open".into(),
                ))
            }
        }
        Some(other) => Err(Error::Corrupt(format!(
            "key records are in format {other}, newer than this build reads ({FORMAT_CHECKSUMMED})"
        ))),
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
