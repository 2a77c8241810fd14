//! Opening and restoring [`Store`]: the index rebuilt from one scan of the `key` table, the meta
//! records, a snapshot blob written and read back (`blob_of`, `install_blob`), and the one-time
//! upgrade of a data dir written before records carried checksums.

use super::*;
use actcd_types::msg::SNAPSHOT_CHUNK;

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

    /// Before the backend replaces everything with a leader's copy (`ReplaceStore`), which
    /// [`Self::finish_restore`] then reads: refuses a store that stopped, and sends the pending
    /// applies ahead of it.
    pub fn prepare_replace(&mut self) -> Result<(), EtcdError> {
        self.check_poisoned()?;
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
}

/// Everything `txn` sees as one blob (`whole_store`), with the consistent index it covers;
/// `size_hint` bytes are reserved at once (growing a store-sized buffer by doubling copies it
/// again and again). Tests; a leader streams its copy ([`stream_blob`]).
#[cfg(test)]
pub fn blob_of(txn: &dyn ReadTxn, size_hint: usize) -> Result<(u64, Vec<u8>), EtcdError> {
    let index = read_meta(txn, META_CONSISTENT_INDEX)?.unwrap_or(0);
    let data = actcd_etcd_snapshot::whole_store::encode_into(txn, Vec::with_capacity(size_hint))
        .map_err(Error::from)?;
    Ok((index, data))
}

/// Chunks of a blob read ahead of the receiver: at most this many wait in the channel.
const CHUNKS_AHEAD: usize = 4;

/// Everything `txn` sees as one blob, streamed: the consistent index it covers, and a channel
/// a blocking thread fills with [`SNAPSHOT_CHUNK`]-byte pieces of the blob as it reads them
/// (at most [`CHUNKS_AHEAD`] ahead of the receiver). A failed read sends its error as the last
/// item; a dropped receiver stops the reading and ends the transaction.
pub fn stream_blob(
    txn: Box<dyn ReadTxn + Send>,
) -> Result<(u64, actcd_types::msg::CopyChunks), EtcdError> {
    let index = read_meta(&*txn, META_CONSISTENT_INDEX)?.unwrap_or(0);
    let (tx, rx) = tokio::sync::mpsc::channel(CHUNKS_AHEAD);
    std::thread::Builder::new()
        .name("snapshot-out".into())
        .spawn(move || {
            let mut out = ChunkSender {
                tx: tx.clone(),
                buf: Vec::with_capacity(SNAPSHOT_CHUNK),
            };
            if let Err(e) = actcd_etcd_snapshot::whole_store::encode_to(&*txn, &mut out) {
                let _ = tx.blocking_send(Err(e.to_string()));
            }
        })
        .map_err(|e| EtcdError::internal(format!("mvcc: snapshot thread: {e}")))?;
    Ok((index, rx))
}

/// A writer that hands full chunks to a channel, blocking while it is full.
struct ChunkSender {
    tx: tokio::sync::mpsc::Sender<Result<Vec<u8>, String>>,
    buf: Vec<u8>,
}

impl ChunkSender {
    fn send(&mut self) -> std::io::Result<()> {
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(SNAPSHOT_CHUNK));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "receiver gone"))
    }
}

impl std::io::Write for ChunkSender {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let n = data.len().min(SNAPSHOT_CHUNK - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == SNAPSHOT_CHUNK {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.send()
    }
}

/// Adds one `key` table record to the index being rebuilt, with the lease it names; returns
/// its main revision (`None` for a table key that is no revision). The record's fields are
/// read in place ([`key_record::decode_fields`]): its value is never copied.
///
/// A record that fails its check is logged and kept in `damaged`, and still indexed if its
/// bytes decode: a read of its key then meets the damage (and fails with `corrupt cluster`)
/// instead of being answered from an older version as if the damaged one never existed.
pub(super) fn restore_record(
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

/// Writes a leader's snapshot blob in place of everything in `txn` (a blob from a member older
/// than checksums has its `key` records sealed on the way in: [`whole_store::install_blob`]).
///
/// [`whole_store::install_blob`]: actcd_etcd_snapshot::whole_store::install_blob
pub(super) fn install_blob<W: WriteTxn + ?Sized>(txn: &mut W, data: &[u8]) -> Result<(), Error> {
    Ok(actcd_etcd_snapshot::whole_store::install_blob(txn, data)?)
}

/// Records rewritten per scan of [`upgrade_key_format`] (the write transaction holds them all;
/// this bounds only the copy in memory).
pub(super) const UPGRADE_CHUNK: usize = 10_000;

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
