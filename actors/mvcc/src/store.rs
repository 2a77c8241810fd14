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

mod apply;
mod compaction;
mod recovery;

use compaction::CompactionJob;

#[cfg(test)]
pub use recovery::blob_of;
pub use recovery::{stream_blob, upgrade_key_format};

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
