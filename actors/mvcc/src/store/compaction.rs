//! A compaction of [`Store`]: scheduling it (`scheduledCompactRev`), the key index's part, and the
//! deletions of superseded records in slices of at most the batch limit, each its own write
//! (`finishedCompactRev` once the scan reaches the end), as etcd's `scheduleCompaction`.

use super::*;

impl Store {
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

    /// Compacts the index at `rev` and queues the deletion of every record it no longer needs.
    /// A newer compaction replaces an unfinished one: records an older one would drop are
    /// superseded at the newer revision too, and its scan starts from the beginning again.
    /// The key indexes are compacted by the first steps, a slice of keys each (a million keys
    /// at once hold the index's write lock, and the applies, for 0.2–0.3 s in a release
    /// build; 1000 keys a step take about 0.6 ms); the deletions start once every key's kept
    /// revision is known.
    pub(super) fn start_compaction(&mut self, rev: i64) {
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
pub(super) struct CompactionJob {
    pub(super) rev: i64,
    /// The revisions at or below `rev` to keep, complete once `index_from` is `None`.
    pub(super) keep: HashSet<Revision>,
    /// Where the key indexes' compaction resumes (the next key to compact), while it is
    /// under way; the deletions wait for it.
    pub(super) index_from: Option<Vec<u8>>,
    pub(super) from: Vec<u8>,
    pub(super) deleted: usize,
    /// etcd 3.5's compaction hash, taken over the records the deletions scan (so at no extra
    /// read): the running CRC32C and the compaction before this one. It counts, in etcd's
    /// HashKV format, every record above that compaction and the kept ones at or below it —
    /// what HashKV at `rev` said just before this compaction. `None` when it cannot be taken
    /// whole (a compaction resumed at start-up, a damaged record).
    pub(super) hash: Option<(u32, i64)>,
}

/// Deletes the records at or below `job.rev` that `job.keep` doesn't name, scanning at most
/// `budget` records from `job.from`; returns whether the scan reached the end (and then records
/// `finishedCompactRev`). Every record scanned is checked: a damaged one is reported through
/// `damage` (the member's disk is damaging data, whether or not this record was still needed)
/// and compaction goes on, deleting it if it is superseded like any other.
pub(super) fn delete_compacted_slice<W: WriteTxn + ?Sized>(
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
