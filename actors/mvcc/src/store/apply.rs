//! Applying to [`Store`]: batches of raft entries into the write buffer (each entry's writes
//! undone if it fails), the KV part of etcd's applier (`applierV3backend`: Put, DeleteRange,
//! Txn, Compaction), deferred applies, and the commit that hands buffered writes to the
//! backend.

use super::*;

impl Store {
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

    pub(super) fn deferred(
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

    /// Writes a batch into the write buffer and updates memory; returns the results, the
    /// index changes made (to take back if the commit fails), and a compaction to carry out.
    pub(super) fn apply_uncommitted(
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

    pub(super) fn apply_in<W: WriteTxn + ?Sized>(
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
}

/// The part of an [`InternalRaftRequest`] this store applies, picked with the precedence of
/// etcd's applier when several fields are set.
pub(super) enum KvRequest {
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
pub(super) enum KvWrite {
    Put(PutRequest),
    DeleteRange(DeleteRangeRequest),
    Txn(TxnRequest),
}
