//! The storage-engine traits the state machine writes through.
//!
//! An engine is a set of named tables ("buckets" in etcd) of byte keys to byte values with
//! serializable read transactions that run concurrently and one write transaction at a time whose
//! reads see its own writes. `actcd-backend` implements it over LMDB; [`MemEngine`] implements it
//! in memory for unit tests and benches. The MVCC store only knows these traits.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

/// The backend's named databases (DESIGN.md, "Storage").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    Key,
    Meta,
    Lease,
    Auth,
    AuthUsers,
    AuthRoles,
    Members,
    MembersRemoved,
    Alarm,
    /// The v2 store's nodes, event history and index (`--enable-v2`; not one of etcd's
    /// buckets, whose v2 store lived in its raft snapshots).
    V2,
}

impl Table {
    pub const ALL: [Table; 10] = [
        Table::Key,
        Table::Meta,
        Table::Lease,
        Table::Auth,
        Table::AuthUsers,
        Table::AuthRoles,
        Table::Members,
        Table::MembersRemoved,
        Table::Alarm,
        Table::V2,
    ];

    /// The database name on disk, etcd's bucket name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Key => "key",
            Table::Meta => "meta",
            Table::Lease => "lease",
            Table::Auth => "auth",
            Table::AuthUsers => "authUsers",
            Table::AuthRoles => "authRoles",
            Table::Members => "members",
            Table::MembersRemoved => "members_removed",
            Table::Alarm => "alarm",
            Table::V2 => "actcd_v2",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("backend: {0}")]
pub struct StorageError(pub String);

pub type StorageResult<T> = Result<T, StorageError>;

/// Visitor for scans: return `false` to stop.
pub type ScanFn<'a> = dyn FnMut(&[u8], &[u8]) -> bool + 'a;

pub trait ReadTxn {
    fn get(&self, table: Table, key: &[u8]) -> StorageResult<Option<Vec<u8>>>;
    /// Hands the value under `key` (`None`: absent) to `f` borrowed, where the engine can: LMDB
    /// lends a slice of its map, so a reader that only checks or copies the bytes once (a
    /// Range encoding records straight into its answer) makes no owned copy per record. The
    /// default lends a copy made by [`Self::get`]. See [`read_with`] for a typed answer.
    fn get_with(
        &self,
        table: Table,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>),
    ) -> StorageResult<()> {
        let value = self.get(table, key)?;
        f(value.as_deref());
        Ok(())
    }
    /// Whether every slice [`Self::get_with`] lends stays valid and unchanged until this
    /// transaction is dropped (an LMDB read transaction's slices of its map; a snapshot's
    /// values), so a reader may keep where it points instead of looking it up again. The
    /// default lends a copy that is gone after the call: false.
    fn lends_for_its_life(&self) -> bool {
        false
    }
    /// Visits `[from, to)` in key order (`to = None`: to the end).
    fn scan(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut ScanFn<'_>,
    ) -> StorageResult<()>;
}

/// [`ReadTxn::get_with`] with `f`'s answer returned.
pub fn read_with<T>(
    txn: &(impl ReadTxn + ?Sized),
    table: Table,
    key: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> T,
) -> StorageResult<T> {
    let mut f = Some(f);
    let mut answer = None;
    txn.get_with(table, key, &mut |value| {
        if let Some(f) = f.take() {
            answer = Some(f(value));
        }
    })?;
    answer.ok_or_else(|| StorageError("get_with did not call back".into()))
}

/// A [`try_scan`] callback.
pub type TryScanFn<'a, E> = dyn FnMut(&[u8], &[u8]) -> Result<(), E> + 'a;

/// [`ReadTxn::scan`] over a whole table with a callback that may fail: the first error stops
/// the scan and is returned.
pub fn try_scan<E: From<StorageError>>(
    txn: &(impl ReadTxn + ?Sized),
    table: Table,
    f: &mut TryScanFn<'_, E>,
) -> Result<(), E> {
    let mut failed = None;
    txn.scan(table, &[], None, &mut |k, v| match f(k, v) {
        Ok(()) => true,
        Err(e) => {
            failed = Some(e);
            false
        }
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

pub trait WriteTxn: ReadTxn {
    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> StorageResult<()>;
    fn delete(&mut self, table: Table, key: &[u8]) -> StorageResult<()>;
    /// Deletes every record of `table`. This default deletes [`CLEAR_CHUNK`] keys per scan,
    /// each scan starting past the last key deleted, so memory stays flat however large the
    /// table; an engine that can empty a table at once does so.
    fn clear(&mut self, table: Table) -> StorageResult<()> {
        let mut from = Vec::new();
        loop {
            let mut keys = Vec::new();
            self.scan(table, &from, None, &mut |k, _| {
                keys.push(k.to_vec());
                keys.len() < CLEAR_CHUNK
            })?;
            let Some(last) = keys.last() else {
                return Ok(());
            };
            from = last.clone();
            from.push(0);
            for k in &keys {
                self.delete(table, k)?;
            }
        }
    }
    /// Makes every write of this transaction visible and durable at once (atomic on crash).
    fn commit(self: Box<Self>) -> StorageResult<()>;
}

/// Keys deleted per scan by [`WriteTxn::clear`]'s default.
pub const CLEAR_CHUNK: usize = 10_000;

/// A storage engine shared by the threads that read it: LMDB's environment is designed for
/// concurrent readers and one writer, so the handle is shared, not a lock around a struct.
pub trait KvEngine: ReadEngine {
    fn read(&self) -> StorageResult<Box<dyn ReadTxn + '_>>;
    fn write(&self) -> StorageResult<Box<dyn WriteTxn + '_>>;
    /// A write transaction that keeps the engine alive itself, so it can stay open across
    /// messages (the MVCC store batches several applies into one commit). Same rules as
    /// [`Self::write`]: one at a time, begun and ended on one thread.
    fn write_owned(self: Arc<Self>) -> StorageResult<Box<dyn WriteTxn>>;
    /// A read transaction that keeps the engine alive itself and may move to another thread:
    /// for a long read off the writer's thread (streaming a snapshot to a client). It pins
    /// its snapshot's pages until dropped.
    fn read_owned(self: Arc<Self>) -> StorageResult<Box<dyn ReadTxn + Send>>;
    /// Flushes committed transactions to stable storage.
    fn sync(&self) -> StorageResult<()>;
    /// Bytes the engine occupies on disk and bytes in use by live pages.
    fn size(&self) -> StorageResult<(u64, u64)>;
    /// Gives the space of freed pages back: afterwards the on-disk size is about the size in
    /// use. Returns the on-disk size before and after. The caller holds no transaction. An
    /// engine with nothing to give back (in memory) just reports its size twice.
    fn defragment(&self) -> StorageResult<(u64, u64)> {
        let (size, _) = self.size()?;
        Ok((size, size))
    }
}

/// `meta` key of the raft index of the last applied entry (8-byte big-endian): written by the
/// backend in the transaction of the [`Commit`](crate::msg::Commit) that carries it.
pub const META_CONSISTENT_INDEX: &[u8] = b"consistent_index";
/// `meta` key of the term of the last applied entry (8-byte big-endian).
pub const META_TERM: &[u8] = b"term";

/// The read side of an engine: what a state owner holds when only the backend writes. LMDB's
/// read transactions run beside the one writer, so the handle is shared.
pub trait ReadEngine: Send + Sync + 'static {
    /// A read transaction on the last commit.
    fn begin_read(&self) -> StorageResult<Box<dyn ReadTxn + '_>>;
    /// A read transaction that keeps the engine alive and may move between threads.
    fn begin_read_owned(self: Arc<Self>) -> StorageResult<Box<dyn ReadTxn + Send>>;
    /// Bytes on disk and bytes in live pages.
    fn usage(&self) -> StorageResult<(u64, u64)>;
    /// The longest key the engine stores (`None`: no limit); empty keys are refused with a limit.
    fn max_key_size(&self) -> Option<usize> {
        None
    }
    /// After a scan of the whole store (a hash, a scrub pass): lets go of the file pages the
    /// scan mapped into this process, which would otherwise count as its resident memory. An
    /// engine that maps nothing does nothing.
    fn release_scanned_pages(&self) {}
}

/// One write of a state owner, in the order it was made: a [`Commit`](crate::msg::Commit)
/// carries a run of them to the backend, which replays them into its write transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put {
        table: Table,
        key: Vec<u8>,
        /// Shared with the write buffer's overlay, which serves reads of it until the backend
        /// has committed it: one copy of each value, not two.
        value: Arc<[u8]>,
    },
    Delete {
        table: Table,
        key: Vec<u8>,
    },
}

impl Op {
    /// Bytes of keys and values: what the backend's write transaction will dirty.
    pub fn bytes(&self) -> usize {
        match self {
            Op::Put { key, value, .. } => key.len() + value.len(),
            Op::Delete { key, .. } => key.len(),
        }
    }
}

/// Replays `ops` into `txn`, then records the consistent index and term they cover (in the
/// same transaction: a crash keeps both or neither). The backend's write path, and the
/// direct one a store uses before the backend actor runs (start-up, tests).
pub fn write_ops<W: WriteTxn + ?Sized>(
    txn: &mut W,
    ops: &[Op],
    consistent_index: Option<(u64, u64)>,
) -> StorageResult<()> {
    for op in ops {
        match op {
            Op::Put { table, key, value } => txn.put(*table, key, value)?,
            Op::Delete { table, key } => txn.delete(*table, key)?,
        }
    }
    if let Some((index, term)) = consistent_index {
        txn.put(Table::Meta, META_CONSISTENT_INDEX, &index.to_be_bytes())?;
        txn.put(Table::Meta, META_TERM, &term.to_be_bytes())?;
    }
    Ok(())
}

/// The newest buffered write of one key: its value (`None`: deleted) and the batch that wrote it.
#[derive(Debug, Clone)]
struct Slot {
    seq: u64,
    value: Option<Arc<[u8]>>,
}

/// A state owner's writes not yet committed by the backend (etcd's write buffer over its batch
/// transaction): an ordered op log to send, and an overlay of the newest write of each key
/// that reads look at before the committed engine.
///
/// Writes are grouped into batches numbered by a sequence ([`Self::begin_batch`]); the backend
/// reports the last sequence each commit covered, and [`Self::committed`] drops the overlay
/// entries whose newest write is at or below it. An entry so stays until the commit holding
/// its newest write is visible to read transactions begun after the report, which is why the
/// engine read transaction the buffer keeps is dropped on every report, before trimming.
///
/// Reads are the merge: overlay first, then the read transaction. Not `Sync` (one owner's
/// thread), but `Send`.
pub struct WriteBuffer {
    engine: Arc<dyn ReadEngine>,
    /// Writes not yet taken for sending, in order.
    ops: Vec<Op>,
    ops_bytes: usize,
    /// Per table (indexed by `Table as usize`), the newest buffered write of each key.
    overlay: Vec<BTreeMap<Vec<u8>, Slot>>,
    overlay_len: usize,
    /// The batch being written.
    seq: u64,
    /// Where the batch being written starts in `ops`, and the overlay entries of older
    /// batches it replaced: enough to take the batch back ([`Self::rollback_batch`]).
    batch_start: usize,
    replaced: Vec<(Table, Vec<u8>, Slot)>,
    /// A read transaction begun after the last trim; dropped at every trim.
    reader: std::cell::RefCell<Option<Box<dyn ReadTxn + Send>>>,
    /// The table whose puts are also kept for read views ([`Self::track`]), the ones since
    /// the last [`Self::seal`] with their batch, and the sealed runs not yet reported committed.
    tracked: Option<Table>,
    open: Vec<(u64, Vec<u8>, Arc<[u8]>)>,
    sealed: imbl::Vector<Arc<FreshRun>>,
}

impl fmt::Debug for WriteBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteBuffer")
            .field("seq", &self.seq)
            .field("ops", &self.ops.len())
            .field("overlay", &self.overlay_len)
            .finish()
    }
}

impl WriteBuffer {
    /// An empty buffer over `engine`, whose batches are numbered after `seq`.
    pub fn new(engine: Arc<dyn ReadEngine>, seq: u64) -> Self {
        Self {
            engine,
            ops: Vec::new(),
            ops_bytes: 0,
            overlay: Table::ALL.iter().map(|_| BTreeMap::new()).collect(),
            overlay_len: 0,
            seq,
            batch_start: 0,
            replaced: Vec::new(),
            reader: std::cell::RefCell::new(None),
            tracked: None,
            open: Vec::new(),
            sealed: imbl::Vector::new(),
        }
    }

    /// Also keeps the puts into `table` for read views on other threads: [`Self::seal`] hands
    /// out the ones not yet committed as immutable runs. The table's keys must only ever grow
    /// (MVCC's `key` table, keyed by revision) and its only deletes must be of records no read
    /// view can still need (compaction's): deletes are not kept.
    pub fn track(&mut self, table: Table) {
        self.tracked = Some(table);
    }

    /// The tracked table's puts not yet reported committed, oldest first, as immutable runs
    /// (the puts since the last seal become a new one). Cheap: one `Arc` per run.
    pub fn seal(&mut self) -> Fresh {
        if let Some(&(seq_last, _, _)) = self.open.last() {
            let records = self.open.drain(..).map(|(_, k, v)| (k, v)).collect();
            self.sealed
                .push_back(Arc::new(FreshRun { seq_last, records }));
        }
        Fresh {
            runs: self.sealed.clone(),
        }
    }

    /// The engine under the overlay.
    pub fn engine(&self) -> &Arc<dyn ReadEngine> {
        &self.engine
    }

    /// Starts a new batch: later writes carry the next sequence number. Returns it.
    pub fn begin_batch(&mut self) -> u64 {
        self.seq += 1;
        self.batch_start = self.ops.len();
        self.replaced.clear();
        self.seq
    }

    /// The sequence of the batch being written (the last one begun).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Writes made since the last [`Self::take_ops`].
    pub fn pending_ops(&self) -> usize {
        self.ops.len()
    }

    /// Key and value bytes of those writes.
    pub fn pending_bytes(&self) -> usize {
        self.ops_bytes
    }

    /// Keys whose newest write the engine has not confirmed committed.
    pub fn overlay_len(&self) -> usize {
        self.overlay_len
    }

    /// Takes the writes made so far, in order, for the backend; the overlay keeps them readable
    /// until [`Self::committed`] says they are in the engine.
    pub fn take_ops(&mut self) -> Vec<Op> {
        self.batch_start = 0;
        self.replaced.clear();
        self.ops_bytes = 0;
        std::mem::take(&mut self.ops)
    }

    /// The engine has committed every batch up to `seq`, visibly to read transactions begun
    /// from now on: drop the overlay entries it covers.
    pub fn committed(&mut self, seq: u64) {
        // First: a read transaction from before that commit must not serve the keys trimmed.
        self.reader.get_mut().take();
        // Read views published from now on find these runs in the engine.
        while self.sealed.front().is_some_and(|run| run.seq_last <= seq) {
            self.sealed.pop_front();
        }
        let done = self.open.partition_point(|(s, _, _)| *s <= seq);
        self.open.drain(..done);
        if self.overlay_len == 0 {
            return;
        }
        let mut left = 0;
        for table in &mut self.overlay {
            table.retain(|_, slot| slot.seq > seq);
            left += table.len();
        }
        self.overlay_len = left;
    }

    /// Drops the read transaction kept for reads (before a defragmentation, which waits for
    /// every transaction of the old file to end).
    pub fn release_reader(&mut self) {
        self.reader.get_mut().take();
    }

    /// Takes back the writes of the batch being written (its ops not yet taken): the overlay
    /// shows older batches' writes again.
    pub fn rollback_batch(&mut self) {
        let seq = self.seq;
        while self.open.last().is_some_and(|(s, _, _)| *s == seq) {
            self.open.pop();
        }
        for op in self.ops.drain(self.batch_start..) {
            let (table, key) = match &op {
                Op::Put { table, key, .. } | Op::Delete { table, key } => (*table, key),
            };
            let map = &mut self.overlay[table as usize];
            if map.get(key).is_some_and(|s| s.seq == seq) {
                map.remove(key);
                self.overlay_len -= 1;
            }
        }
        for (table, key, slot) in self.replaced.drain(..).rev() {
            if self.overlay[table as usize].insert(key, slot).is_none() {
                self.overlay_len += 1;
            }
        }
        self.ops_bytes = self.ops.iter().map(Op::bytes).sum();
    }

    /// Forgets every write, sent or not (the engine is the truth again).
    pub fn discard(&mut self) {
        self.ops.clear();
        self.ops_bytes = 0;
        self.batch_start = 0;
        self.replaced.clear();
        for table in &mut self.overlay {
            table.clear();
        }
        self.overlay_len = 0;
        self.reader.get_mut().take();
        self.open.clear();
        self.sealed.clear();
    }

    fn record(&mut self, table: Table, key: &[u8], value: Option<&[u8]>) {
        let value: Option<Arc<[u8]>> = value.map(Arc::from);
        if let Some(v) = &value
            && self.tracked == Some(table)
        {
            self.open.push((self.seq, key.to_vec(), Arc::clone(v)));
        }
        let slot = Slot {
            seq: self.seq,
            value: value.clone(),
        };
        let map = &mut self.overlay[table as usize];
        match map.get_mut(key) {
            Some(old) => {
                let old = std::mem::replace(old, slot);
                if old.seq != self.seq {
                    self.replaced.push((table, key.to_vec(), old));
                }
            }
            None => {
                map.insert(key.to_vec(), slot);
                self.overlay_len += 1;
            }
        }
        let op = match value {
            Some(value) => Op::Put {
                table,
                key: key.to_vec(),
                value,
            },
            None => Op::Delete {
                table,
                key: key.to_vec(),
            },
        };
        self.ops_bytes += op.bytes();
        self.ops.push(op);
    }

    /// Runs `f` on the kept read transaction, beginning one if none is kept.
    fn with_reader<T>(&self, f: impl FnOnce(&dyn ReadTxn) -> StorageResult<T>) -> StorageResult<T> {
        let mut reader = self.reader.borrow_mut();
        if reader.is_none() {
            *reader = Some(Arc::clone(&self.engine).begin_read_owned()?);
        }
        match reader.as_deref() {
            Some(txn) => f(txn),
            None => Err(StorageError("no read transaction".into())),
        }
    }
}

impl ReadTxn for WriteBuffer {
    fn get(&self, table: Table, key: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        if let Some(slot) = self.overlay[table as usize].get(key) {
            return Ok(slot.value.as_deref().map(<[u8]>::to_vec));
        }
        self.with_reader(|txn| txn.get(table, key))
    }

    fn scan(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut ScanFn<'_>,
    ) -> StorageResult<()> {
        if to.is_some_and(|t| t <= from) {
            return Ok(());
        }
        let upper = match to {
            Some(t) => Bound::Excluded(t),
            None => Bound::Unbounded,
        };
        let overlay = self.overlay[table as usize]
            .range::<[u8], _>((Bound::Included(from), upper))
            .map(|(k, slot)| (k.as_slice(), slot.value.as_deref()));
        self.with_reader(|txn| merge_scan(txn, table, from, to, overlay, f))
    }
}

/// Scans `[from, to)` of `table` in `txn` with `overlay` (writes not in `txn`, in key order;
/// `None`: deleted) laid over it: an overlay entry replaces the engine's record of its key.
fn merge_scan<'o>(
    txn: &dyn ReadTxn,
    table: Table,
    from: &[u8],
    to: Option<&[u8]>,
    overlay: impl Iterator<Item = (&'o [u8], Option<&'o [u8]>)>,
    f: &mut ScanFn<'_>,
) -> StorageResult<()> {
    let mut overlay = overlay.peekable();
    if overlay.peek().is_none() {
        return txn.scan(table, from, to, f);
    }
    let mut go_on = true;
    txn.scan(table, from, to, &mut |k, v| {
        while let Some((ok, ov)) = overlay.next_if(|(ok, _)| *ok < k) {
            if let Some(ov) = ov
                && !f(ok, ov)
            {
                go_on = false;
                return false;
            }
        }
        if let Some((_, ov)) = overlay.next_if(|(ok, _)| *ok == k) {
            return match ov {
                Some(ov) => {
                    go_on = f(k, ov);
                    go_on
                }
                None => true,
            };
        }
        go_on = f(k, v);
        go_on
    })?;
    if go_on {
        for (ok, ov) in overlay {
            if let Some(ov) = ov
                && !f(ok, ov)
            {
                break;
            }
        }
    }
    Ok(())
}

/// A run of puts into a [`WriteBuffer`]'s tracked table, in key order, and the last batch
/// that wrote one of them.
#[derive(Debug)]
pub struct FreshRun {
    seq_last: u64,
    records: Vec<(Vec<u8>, Arc<[u8]>)>,
}

/// The tracked table's puts a [`WriteBuffer`] had not seen committed when it was sealed,
/// oldest run first: what a read view lays over a read transaction of the engine
/// ([`FreshTxn`]). Immutable, and O(1) to clone (a persistent vector of shared runs). Every
/// run holds at least one record, and the runs follow each other in key order (the tracked
/// table's keys only grow), so a lookup is two binary searches.
#[derive(Debug, Clone, Default)]
pub struct Fresh {
    runs: imbl::Vector<Arc<FreshRun>>,
}

impl Fresh {
    /// Records held.
    pub fn len(&self) -> usize {
        self.runs.iter().map(|r| r.records.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The first run that may hold `key` or keys after it.
    fn run_of(&self, key: &[u8]) -> usize {
        match self
            .runs
            .binary_search_by(|run| run.records[0].0.as_slice().cmp(key))
        {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        }
    }

    fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let run = self.runs.get(self.run_of(key))?;
        let i = run
            .records
            .binary_search_by(|(k, _)| k.as_slice().cmp(key))
            .ok()?;
        Some(&*run.records[i].1)
    }

    /// The records in `[from, to)`, in key order.
    fn range<'a>(
        &'a self,
        from: &'a [u8],
        to: Option<&'a [u8]>,
    ) -> impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)> + 'a {
        let first = self.run_of(from);
        self.runs
            .iter()
            .skip(first)
            .take_while(move |run| to.is_none_or(|t| run.records[0].0.as_slice() < t))
            .flat_map(move |run| {
                let start = run.records.partition_point(|(k, _)| k.as_slice() < from);
                let end = match to {
                    Some(t) => run.records.partition_point(|(k, _)| k.as_slice() < t),
                    None => run.records.len(),
                };
                run.records[start..end.max(start)]
                    .iter()
                    .map(|(k, v)| (k.as_slice(), Some(&**v)))
            })
    }
}

/// A read transaction of the engine with a [`Fresh`] laid over one table: what a read view on
/// another thread sees of the writes its owner had made when it was published.
pub struct FreshTxn<'a> {
    pub table: Table,
    pub fresh: &'a Fresh,
    pub txn: &'a dyn ReadTxn,
}

impl ReadTxn for FreshTxn<'_> {
    fn get(&self, table: Table, key: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        if table == self.table
            && let Some(v) = self.fresh.get(key)
        {
            return Ok(Some(v.to_vec()));
        }
        self.txn.get(table, key)
    }

    fn get_with(
        &self,
        table: Table,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>),
    ) -> StorageResult<()> {
        if table == self.table
            && let Some(v) = self.fresh.get(key)
        {
            f(Some(v));
            return Ok(());
        }
        self.txn.get_with(table, key, f)
    }

    /// The overlay's records are shared immutable runs: they live as long as any clone of the
    /// [`Fresh`] holding them does (the caller keeps one beside the transaction).
    fn lends_for_its_life(&self) -> bool {
        self.txn.lends_for_its_life()
    }

    fn scan(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut ScanFn<'_>,
    ) -> StorageResult<()> {
        if table != self.table || to.is_some_and(|t| t <= from) {
            return self.txn.scan(table, from, to, f);
        }
        merge_scan(self.txn, table, from, to, self.fresh.range(from, to), f)
    }
}

impl WriteTxn for WriteBuffer {
    /// Refuses what the engine could not store, as its own write transaction would, so the
    /// error reaches the batch that made it and not the backend's commit.
    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> StorageResult<()> {
        if let Some(max) = self.engine.max_key_size()
            && !(1..=max).contains(&key.len())
        {
            return Err(StorageError(format!(
                "a key of {} bytes cannot be stored (LMDB keys are 1 to {max} bytes)",
                key.len()
            )));
        }
        self.record(table, key, Some(value));
        Ok(())
    }

    fn delete(&mut self, table: Table, key: &[u8]) -> StorageResult<()> {
        self.record(table, key, None);
        Ok(())
    }

    /// A buffer is not committed by its owner: its ops go to the backend ([`Self::take_ops`]).
    fn commit(self: Box<Self>) -> StorageResult<()> {
        Err(StorageError(
            "a write buffer is committed by the backend, not by its owner".into(),
        ))
    }
}

type Tables = BTreeMap<Table, BTreeMap<Vec<u8>, Vec<u8>>>;

/// An in-memory engine for tests and benches: a map per table, copy-on-commit writes.
#[derive(Debug, Clone, Default)]
pub struct MemEngine {
    tables: Arc<Mutex<Tables>>,
}

impl MemEngine {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Tables> {
        // A poisoned lock means a test already panicked; its data is still the last commit.
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn scan_map(
    map: Option<&BTreeMap<Vec<u8>, Vec<u8>>>,
    from: &[u8],
    to: Option<&[u8]>,
    f: &mut ScanFn<'_>,
) {
    let Some(map) = map else { return };
    let upper = match to {
        Some(t) => Bound::Excluded(t.to_vec()),
        None => Bound::Unbounded,
    };
    if to.is_some_and(|t| t <= from) {
        return;
    }
    for (k, v) in map.range((Bound::Included(from.to_vec()), upper)) {
        if !f(k, v) {
            break;
        }
    }
}

struct MemRead {
    snapshot: Tables,
}

impl ReadTxn for MemRead {
    fn get(&self, table: Table, key: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        Ok(self.snapshot.get(&table).and_then(|m| m.get(key)).cloned())
    }
    fn get_with(
        &self,
        table: Table,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>),
    ) -> StorageResult<()> {
        f(self
            .snapshot
            .get(&table)
            .and_then(|m| m.get(key))
            .map(Vec::as_slice));
        Ok(())
    }
    /// The snapshot is the transaction's own and never changes.
    fn lends_for_its_life(&self) -> bool {
        true
    }
    fn scan(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut ScanFn<'_>,
    ) -> StorageResult<()> {
        scan_map(self.snapshot.get(&table), from, to, f);
        Ok(())
    }
}

struct MemWrite {
    engine: MemEngine,
    working: Tables,
}

impl ReadTxn for MemWrite {
    fn get(&self, table: Table, key: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        Ok(self.working.get(&table).and_then(|m| m.get(key)).cloned())
    }
    fn scan(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut ScanFn<'_>,
    ) -> StorageResult<()> {
        scan_map(self.working.get(&table), from, to, f);
        Ok(())
    }
}

impl WriteTxn for MemWrite {
    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> StorageResult<()> {
        self.working
            .entry(table)
            .or_default()
            .insert(key.to_vec(), value.to_vec());
        Ok(())
    }
    fn delete(&mut self, table: Table, key: &[u8]) -> StorageResult<()> {
        if let Some(m) = self.working.get_mut(&table) {
            m.remove(key);
        }
        Ok(())
    }
    fn clear(&mut self, table: Table) -> StorageResult<()> {
        self.working.remove(&table);
        Ok(())
    }
    fn commit(self: Box<Self>) -> StorageResult<()> {
        *self.engine.lock() = self.working;
        Ok(())
    }
}

impl ReadEngine for MemEngine {
    fn begin_read(&self) -> StorageResult<Box<dyn ReadTxn + '_>> {
        KvEngine::read(self)
    }
    fn begin_read_owned(self: Arc<Self>) -> StorageResult<Box<dyn ReadTxn + Send>> {
        KvEngine::read_owned(self)
    }
    fn usage(&self) -> StorageResult<(u64, u64)> {
        KvEngine::size(self)
    }
}

impl KvEngine for MemEngine {
    fn read(&self) -> StorageResult<Box<dyn ReadTxn + '_>> {
        Ok(Box::new(MemRead {
            snapshot: self.lock().clone(),
        }))
    }
    fn read_owned(self: Arc<Self>) -> StorageResult<Box<dyn ReadTxn + Send>> {
        Ok(Box::new(MemRead {
            snapshot: self.lock().clone(),
        }))
    }
    fn write(&self) -> StorageResult<Box<dyn WriteTxn + '_>> {
        Ok(Box::new(MemWrite {
            engine: self.clone(),
            working: self.lock().clone(),
        }))
    }
    fn write_owned(self: Arc<Self>) -> StorageResult<Box<dyn WriteTxn>> {
        let working = self.lock().clone();
        Ok(Box::new(MemWrite {
            engine: (*self).clone(),
            working,
        }))
    }
    fn sync(&self) -> StorageResult<()> {
        Ok(())
    }
    fn size(&self) -> StorageResult<(u64, u64)> {
        let bytes: usize = self
            .lock()
            .values()
            .flat_map(|m| m.iter())
            .map(|(k, v)| k.len() + v.len())
            .sum();
        Ok((bytes as u64, bytes as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_keys(txn: &dyn ReadTxn, from: &[u8], to: Option<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut seen = vec![];
        txn.scan(Table::Key, from, to, &mut |k, v| {
            seen.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
        seen
    }

    #[test]
    fn sealed_runs_lay_uncommitted_puts_over_a_read_transaction() {
        let engine = Arc::new(MemEngine::new());
        let mut buf = WriteBuffer::new(engine.clone(), 0);
        buf.track(Table::Key);
        buf.begin_batch();
        buf.put(Table::Key, b"1", b"a").unwrap();
        buf.put(Table::Meta, b"m", b"untracked").unwrap();
        buf.begin_batch();
        buf.put(Table::Key, b"2", b"refused").unwrap();
        buf.rollback_batch();
        buf.begin_batch();
        buf.put(Table::Key, b"3", b"c").unwrap();
        let first = buf.seal();
        assert_eq!(
            first.len(),
            2,
            "the tracked table's puts, not the refused one's"
        );
        // Committed: 1 goes into the engine; a later run adds 4.
        let mut w = engine.write().unwrap();
        write_ops(&mut *w, &buf.take_ops(), None).unwrap();
        w.commit().unwrap();
        buf.begin_batch();
        buf.put(Table::Key, b"4", b"d").unwrap();
        let second = buf.seal();
        assert_eq!(second.len(), 3);

        let read = engine.read().unwrap();
        let over = FreshTxn {
            table: Table::Key,
            fresh: &second,
            txn: &*read,
        };
        assert_eq!(over.get(Table::Key, b"4").unwrap(), Some(b"d".to_vec()));
        assert_eq!(over.get(Table::Key, b"2").unwrap(), None);
        assert_eq!(
            over.get(Table::Meta, b"m").unwrap(),
            Some(b"untracked".to_vec())
        );
        let keys = |v: Vec<(Vec<u8>, Vec<u8>)>| v.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(
            keys(scan_keys(&over, b"", None)),
            [b"1".to_vec(), b"3".to_vec(), b"4".to_vec()],
            "merged in key order, each record once"
        );
        assert_eq!(keys(scan_keys(&over, b"2", Some(b"4"))), [b"3".to_vec()]);
        // Reported committed through the batch of 3: the next seal holds only 4; the first
        // seal is unchanged (immutable).
        buf.committed(3);
        assert_eq!(buf.seal().len(), 1);
        assert_eq!(first.len(), 2);
        buf.discard();
        assert!(buf.seal().is_empty());
    }

    #[test]
    fn mem_engine_reads_its_own_writes_and_commits_atomically() {
        let e = MemEngine::new();
        let mut w = e.write().unwrap();
        w.put(Table::Key, b"a", b"1").unwrap();
        w.put(Table::Key, b"b", b"2").unwrap();
        assert_eq!(w.get(Table::Key, b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(e.read().unwrap().get(Table::Key, b"a").unwrap(), None);
        w.commit().unwrap();
        let r = e.read().unwrap();
        let mut seen = vec![];
        r.scan(Table::Key, b"a", Some(b"b"), &mut |k, _| {
            seen.push(k.to_vec());
            true
        })
        .unwrap();
        assert_eq!(seen, vec![b"a".to_vec()]);
    }

    /// A buffer over a MemEngine holding `engine_keys` committed in `Table::Key`.
    fn buffer_over(engine_keys: &[&str]) -> (MemEngine, WriteBuffer) {
        let e = MemEngine::new();
        let mut w = e.write().unwrap();
        for k in engine_keys {
            w.put(Table::Key, k.as_bytes(), format!("e-{k}").as_bytes())
                .unwrap();
        }
        w.commit().unwrap();
        let b = WriteBuffer::new(Arc::new(e.clone()), 0);
        (e, b)
    }

    /// Stands in for the backend: commits the buffer's ops into the engine.
    fn commit_ops(e: &MemEngine, ops: &[Op]) {
        let mut w = e.write().unwrap();
        write_ops(&mut *w, ops, Some((9, 2))).unwrap();
        w.commit().unwrap();
    }

    fn scan_all(b: &WriteBuffer, from: &str, to: Option<&str>, limit: usize) -> Vec<String> {
        let mut seen = vec![];
        b.scan(
            Table::Key,
            from.as_bytes(),
            to.map(str::as_bytes),
            &mut |k, v| {
                seen.push(format!(
                    "{}={}",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(v)
                ));
                seen.len() < limit
            },
        )
        .unwrap();
        seen
    }

    #[test]
    fn buffer_scans_merge_overlay_and_engine_in_key_order() {
        struct Case {
            name: &'static str,
            engine: &'static [&'static str],
            puts: &'static [&'static str],
            deletes: &'static [&'static str],
            from: &'static str,
            to: Option<&'static str>,
            limit: usize,
            want_scan: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "engine only",
                engine: &["b", "d"],
                puts: &[],
                deletes: &[],
                from: "",
                to: None,
                limit: 100,
                want_scan: &["b=e-b", "d=e-d"],
            },
            Case {
                name: "overlay puts before, between and after engine keys",
                engine: &["b", "d"],
                puts: &["a", "c", "e"],
                deletes: &[],
                from: "",
                to: None,
                limit: 100,
                want_scan: &["a=o-a", "b=e-b", "c=o-c", "d=e-d", "e=o-e"],
            },
            Case {
                name: "an overlay put replaces the engine's record",
                engine: &["b", "d"],
                puts: &["b"],
                deletes: &[],
                from: "",
                to: None,
                limit: 100,
                want_scan: &["b=o-b", "d=e-d"],
            },
            Case {
                name: "deletes hide engine keys on both sides and overlay puts",
                engine: &["a", "b", "d"],
                puts: &["c"],
                deletes: &["a", "d", "c"],
                from: "",
                to: None,
                limit: 100,
                want_scan: &["b=e-b"],
            },
            Case {
                name: "bounds apply to both",
                engine: &["a", "c", "e"],
                puts: &["b", "d", "f"],
                deletes: &[],
                from: "b",
                to: Some("e"),
                limit: 100,
                want_scan: &["b=o-b", "c=e-c", "d=o-d"],
            },
            Case {
                name: "the visitor stops the merge in the overlay",
                engine: &["a", "c"],
                puts: &["b", "d"],
                deletes: &[],
                from: "",
                to: None,
                limit: 2,
                want_scan: &["a=e-a", "b=o-b"],
            },
            Case {
                name: "the visitor stops the merge in the engine",
                engine: &["a", "c"],
                puts: &["b", "d"],
                deletes: &[],
                from: "",
                to: None,
                limit: 3,
                want_scan: &["a=e-a", "b=o-b", "c=e-c"],
            },
            Case {
                name: "overlay only, past the engine's end",
                engine: &[],
                puts: &["x", "y"],
                deletes: &["y"],
                from: "",
                to: None,
                limit: 100,
                want_scan: &["x=o-x"],
            },
        ];
        for c in cases {
            let (_e, mut b) = buffer_over(c.engine);
            b.begin_batch();
            for k in c.puts {
                b.put(Table::Key, k.as_bytes(), format!("o-{k}").as_bytes())
                    .unwrap();
            }
            for k in c.deletes {
                b.delete(Table::Key, k.as_bytes()).unwrap();
            }
            assert_eq!(
                scan_all(&b, c.from, c.to, c.limit),
                c.want_scan,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn buffer_gets_look_at_the_overlay_first() {
        let (_e, mut b) = buffer_over(&["a", "b"]);
        b.begin_batch();
        b.put(Table::Key, b"a", b"new").unwrap();
        b.delete(Table::Key, b"b").unwrap();
        b.put(Table::Meta, b"a", b"meta").unwrap();
        assert_eq!(b.get(Table::Key, b"a").unwrap(), Some(b"new".to_vec()));
        assert_eq!(b.get(Table::Key, b"b").unwrap(), None);
        assert_eq!(b.get(Table::Meta, b"a").unwrap(), Some(b"meta".to_vec()));
        assert_eq!(b.get(Table::Lease, b"a").unwrap(), None);
        let ops = b.take_ops();
        assert_eq!(ops.len(), 3);
        assert_eq!(
            ops[1],
            Op::Delete {
                table: Table::Key,
                key: b"b".to_vec()
            }
        );
        assert_eq!(b.pending_ops(), 0);
        assert_eq!(b.overlay_len(), 3, "taking ops keeps them readable");
    }

    /// An overlay entry stays until the commit holding its newest write is visible to new read
    /// transactions, even across a read transaction kept from before that commit.
    #[test]
    fn buffer_trims_only_what_a_visible_commit_covers() {
        struct Case {
            name: &'static str,
            /// Batches of puts of `k` (value = batch number); each batch's ops are taken.
            batches: usize,
            /// How many of the taken batches the "backend" commits, and the seq it reports.
            committed_batches: usize,
            want_overlay: usize,
            want_value: &'static str,
        }
        let cases = [
            Case {
                name: "a newer write of the key keeps it",
                batches: 2,
                committed_batches: 1,
                want_overlay: 1,
                want_value: "2",
            },
            Case {
                name: "the covering commit trims it",
                batches: 2,
                committed_batches: 2,
                want_overlay: 0,
                want_value: "2",
            },
            Case {
                name: "nothing committed",
                batches: 3,
                committed_batches: 0,
                want_overlay: 1,
                want_value: "3",
            },
        ];
        for c in cases {
            let (e, mut b) = buffer_over(&[]);
            // A read before anything is committed keeps a read transaction of the empty engine.
            assert_eq!(b.get(Table::Key, b"other").unwrap(), None);
            let mut sent = vec![];
            for i in 1..=c.batches {
                let seq = b.begin_batch();
                b.put(Table::Key, b"k", i.to_string().as_bytes()).unwrap();
                sent.push((seq, b.take_ops()));
            }
            if c.committed_batches > 0 {
                let mut ops = vec![];
                for (_, o) in &sent[..c.committed_batches] {
                    ops.extend(o.iter().cloned());
                }
                commit_ops(&e, &ops);
                // Before the report, the overlay still answers (the kept read transaction
                // predates the commit).
                assert_eq!(
                    b.get(Table::Key, b"k").unwrap(),
                    Some(c.want_value.as_bytes().to_vec()),
                    "{}: before the report",
                    c.name
                );
                b.committed(sent[c.committed_batches - 1].0);
            }
            assert_eq!(b.overlay_len(), c.want_overlay, "{}", c.name);
            assert_eq!(
                b.get(Table::Key, b"k").unwrap(),
                Some(c.want_value.as_bytes().to_vec()),
                "{}: after the report",
                c.name
            );
            assert_eq!(
                scan_all(&b, "", None, 100),
                vec![format!("k={}", c.want_value)],
                "{}: scan",
                c.name
            );
        }
    }

    #[test]
    fn buffer_rolls_a_batch_back_to_older_batches_writes() {
        let (_e, mut b) = buffer_over(&["a"]);
        b.begin_batch();
        b.put(Table::Key, b"a", b"1").unwrap();
        b.put(Table::Key, b"b", b"1").unwrap();
        let first = b.take_ops();
        b.begin_batch();
        b.put(Table::Key, b"a", b"2").unwrap();
        b.put(Table::Key, b"a", b"3").unwrap();
        b.delete(Table::Key, b"b").unwrap();
        b.put(Table::Key, b"c", b"2").unwrap();
        b.rollback_batch();
        assert_eq!(b.pending_ops(), 0);
        assert_eq!(b.pending_bytes(), 0);
        assert_eq!(b.overlay_len(), 2);
        assert_eq!(scan_all(&b, "", None, 100), ["a=1", "b=1"]);
        assert_eq!(first.len(), 2);
    }

    #[test]
    fn write_ops_records_the_consistent_index_with_the_data() {
        let e = MemEngine::new();
        commit_ops(
            &e,
            &[Op::Put {
                table: Table::Key,
                key: b"k".to_vec(),
                value: b"v".as_slice().into(),
            }],
        );
        let r = e.read().unwrap();
        assert_eq!(r.get(Table::Key, b"k").unwrap(), Some(b"v".to_vec()));
        assert_eq!(
            r.get(Table::Meta, META_CONSISTENT_INDEX).unwrap(),
            Some(9u64.to_be_bytes().to_vec())
        );
        assert_eq!(
            r.get(Table::Meta, META_TERM).unwrap(),
            Some(2u64.to_be_bytes().to_vec())
        );
    }
}
