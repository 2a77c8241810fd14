//! etcd's `HashKV`: a CRC32C (Castagnoli) over the bucket name `key`, then every record key and
//! value of the `key` table up to the revision, in revision order. A record at or below the
//! compacted revision counts only if a compaction at the hashed revision would keep it (etcd's
//! rule, so members that compacted at different moments agree). The record bytes are etcd's
//! (revision keys, protobuf `KeyValue` values, key-only tombstones), so the hash equals etcd's
//! for the same history. A tombstone exactly at the compacted revision never counts: etcd
//! 3.5.16 (#18474) keeps it through compaction where older members dropped it, and leaves it
//! out of the hash so that both agree.

use actcd_types::key_record;
use actcd_types::msg::HashKvResult;
use actcd_types::storage::{ReadTxn, Table};
use actcd_types::{EtcdError, Revision};

use crate::error::Error;
use crate::range::View;
use crate::store::{Sink, Store};

impl<R: ReadTxn + ?Sized> View<'_, R> {
    /// etcd's HashKV at `revision` (0: the view's) over what the view reads.
    /// Every record hashed is checked first, and hashed as etcd stores it: its revision key
    /// and its `KeyValue` bytes, without the checksum ([`key_record::open`]).
    pub fn hash_kv(&self, revision: i64) -> Result<HashKvResult, Error> {
        self.hash_plan(revision)?.hash(self.txn)
    }

    /// What a HashKV at `revision` covers: the index is needed only for this, so a reader
    /// beside the writer decides it under the index's lock and scans without it.
    pub fn hash_plan(&self, revision: i64) -> Result<HashPlan, Error> {
        let current = self.rev;
        let compacted = self.compact_rev;
        if revision > 0 && revision <= compacted {
            return Err(EtcdError::Compacted.into());
        }
        if revision > current {
            return Err(EtcdError::FutureRevision.into());
        }
        let rev = if revision <= 0 { current } else { revision };
        Ok(HashPlan {
            rev,
            current,
            compacted,
            keep: self.index.keep(rev),
        })
    }
}

/// A HashKV decided ([`View::hash_plan`]), to be run over a read transaction.
pub(crate) struct HashPlan {
    rev: i64,
    current: i64,
    compacted: i64,
    /// The revisions at or below the compaction that still count (etcd's `keep`).
    keep: std::collections::HashSet<Revision>,
}

impl HashPlan {
    /// Hashes the records `txn` holds up to the plan's revision.
    pub fn hash<R: ReadTxn + ?Sized>(&self, txn: &R) -> Result<HashKvResult, Error> {
        let (compacted, keep) = (self.compacted, &self.keep);
        let upper = Revision::new(self.rev.saturating_add(1), 0).to_bytes(false);
        let mut crc = crc32c::crc32c(b"key");
        let mut damaged = None;
        txn.scan(Table::Key, &[], Some(&upper), &mut |k, v| {
            let counts = match Revision::from_bytes(k) {
                Some((r, tombstone)) => {
                    (r.main > compacted || keep.is_empty() || keep.contains(&r))
                        && !(tombstone && r.main == compacted)
                }
                None => true,
            };
            if counts {
                match key_record::open(k, v) {
                    Ok(kv) => {
                        crc = crc32c::crc32c_append(crc, k);
                        crc = crc32c::crc32c_append(crc, kv);
                    }
                    Err(d) => {
                        damaged = Some(d);
                        return false;
                    }
                }
            }
            true
        })?;
        if let Some(d) = damaged {
            return Err(d.into());
        }
        Ok(HashKvResult {
            hash: crc,
            compact_revision: compacted,
            revision: self.current,
        })
    }
}

impl Store {
    /// Over everything applied, committed or still buffered.
    pub fn hash_kv(&self, revision: i64) -> Result<HashKvResult, EtcdError> {
        let hash = self.with_view(|v| self.checked(v.hash_kv(revision), "hash"))?;
        self.read_engine().release_scanned_pages();
        hash
    }

    /// Commits what is buffered and, with the direct sink, flushes everything to stable
    /// storage (the backend actor syncs on `SyncBackend`).
    pub fn sync(&mut self) -> Result<(), EtcdError> {
        self.commit()?;
        match self.sink() {
            Sink::Direct(engine) => engine.sync().map_err(EtcdError::internal),
            Sink::Backend(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use actcd_proto::actcdpb::InternalRaftRequest;
    use actcd_proto::etcdserverpb::PutRequest;
    use actcd_types::MemberIdentity;
    use actcd_types::msg::CompactionHashed;
    use actcd_types::storage::{KvEngine, MemEngine, ReadEngine};

    use super::*;

    fn put(k: &str, v: &str) -> InternalRaftRequest {
        InternalRaftRequest {
            put: Some(PutRequest {
                key: k.into(),
                value: v.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn hash_depends_on_history_up_to_the_revision() {
        let mut s = Store::open(Arc::new(MemEngine::new()), MemberIdentity::default()).unwrap();
        let empty = s.hash_kv(0).unwrap();
        // etcd 3.5.1's HashKV of a fresh member.
        assert_eq!(empty.hash, crc32c::crc32c(b"key"));
        s.apply_batch(1, 1, vec![put("a", "1")]).unwrap();
        let at2 = s.hash_kv(2).unwrap();
        s.apply_batch(2, 1, vec![put("a", "2")]).unwrap();
        assert_eq!(s.hash_kv(2).unwrap().hash, at2.hash);
        assert_ne!(s.hash_kv(3).unwrap().hash, at2.hash);
        assert_eq!(s.hash_kv(9).unwrap_err(), EtcdError::FutureRevision);
    }

    #[test]
    fn compacted_records_count_only_if_kept_at_the_hashed_revision() {
        let mut s = Store::open(Arc::new(MemEngine::new()), MemberIdentity::default()).unwrap();
        let reqs = (1..=3).map(|i| put("k", &i.to_string())).collect();
        s.apply_batch(1, 1, reqs).unwrap(); // k@2, k@3, k@4
        let compact = InternalRaftRequest {
            compaction: Some(actcd_proto::etcdserverpb::CompactionRequest {
                revision: 3,
                physical: true,
            }),
            ..Default::default()
        };
        s.apply_batch(2, 1, vec![compact]).unwrap();
        // k@3 stays on disk, but a compaction at 4 would drop it, so only k@4 counts.
        let scan = s.read_engine().begin_read().unwrap();
        let mut records = vec![];
        scan.scan(Table::Key, &[], None, &mut |k, v| {
            records.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
        assert_eq!(records.len(), 2);
        // Hashed as etcd stores it: the revision key, the KeyValue without its checksum.
        let mut want = crc32c::crc32c(b"key");
        want = crc32c::crc32c_append(want, &records[1].0);
        want = crc32c::crc32c_append(
            want,
            key_record::open(&records[1].0, &records[1].1).unwrap(),
        );
        assert_eq!(s.hash_kv(0).unwrap().hash, want);
        assert_eq!(s.hash_kv(3).unwrap_err(), EtcdError::Compacted);
    }

    #[test]
    fn a_tombstone_kept_at_the_compaction_revision_is_not_hashed() {
        // etcd #18474: since 3.5.16 compaction keeps a tombstone at its revision, which etcd
        // ≤ 3.5.15 (and actcd before) deleted; HashKV leaves it out so that both agree.
        let del = |k: &str| InternalRaftRequest {
            delete_range: Some(actcd_proto::etcdserverpb::DeleteRangeRequest {
                key: k.into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let compact = InternalRaftRequest {
            compaction: Some(actcd_proto::etcdserverpb::CompactionRequest {
                revision: 3,
                physical: true,
            }),
            ..Default::default()
        };
        let hashes: Vec<(u32, usize)> = [false, true]
            .into_iter()
            .map(|as_before| {
                let engine = Arc::new(MemEngine::new());
                let mut s = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
                // a@2 deleted at 3, compacted at 3; b@4 deleted at 5: nothing live, so
                // HashKV at 5 keeps nothing and hashes every record left.
                s.apply_batch(1, 1, vec![put("a", "1"), del("a")]).unwrap();
                s.apply_batch(2, 1, vec![compact.clone()]).unwrap();
                s.apply_batch(3, 1, vec![put("b", "1"), del("b")]).unwrap();
                s.sync().unwrap();
                let tomb = Revision::new(3, 0).to_bytes(true);
                if as_before {
                    let mut w = engine.write().unwrap();
                    w.delete(Table::Key, &tomb).unwrap();
                    w.commit().unwrap();
                    s = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
                }
                let mut records = 0;
                engine
                    .begin_read()
                    .unwrap()
                    .scan(Table::Key, &[], None, &mut |_, _| {
                        records += 1;
                        true
                    })
                    .unwrap();
                (s.hash_kv(0).unwrap().hash, records)
            })
            .collect();
        assert_eq!(hashes[0].1, 3, "the tombstone at 3 is kept");
        assert_eq!(hashes[1].1, 2);
        assert_eq!(hashes[0].0, hashes[1].0);
    }

    /// Keeps every compaction hash it is sent.
    struct Hashes(std::sync::Arc<std::sync::Mutex<Vec<CompactionHashed>>>);

    impl actix::Actor for Hashes {
        type Context = actix::Context<Self>;
    }

    impl actix::Handler<CompactionHashed> for Hashes {
        type Result = ();
        fn handle(&mut self, msg: CompactionHashed, _: &mut actix::Context<Self>) {
            self.0.lock().unwrap().push(msg);
        }
    }

    #[actix::test]
    async fn a_compaction_hash_is_what_hash_kv_said_just_before() {
        use actix::Actor as _;
        let mut s = Store::open(Arc::new(MemEngine::new()), MemberIdentity::default()).unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        s.set_compaction_hashes(Hashes(seen.clone()).start().recipient());
        s.set_compaction_batch_limit(2);
        let compact = |revision| InternalRaftRequest {
            compaction: Some(actcd_proto::etcdserverpb::CompactionRequest {
                revision,
                physical: true,
            }),
            ..Default::default()
        };
        // k@2..k@6, j@7 deleted at 8, k@9.
        let reqs = (1..=5).map(|i| put("k", &i.to_string())).collect();
        s.apply_batch(1, 1, reqs).unwrap();
        s.apply_batch(2, 1, vec![put("j", "x")]).unwrap();
        let del = InternalRaftRequest {
            delete_range: Some(actcd_proto::etcdserverpb::DeleteRangeRequest {
                key: b"j".to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        };
        s.apply_batch(3, 1, vec![del, put("k", "6")]).unwrap();
        let before_4 = s.hash_kv(4).unwrap();
        s.apply_batch(4, 1, vec![compact(4)]).unwrap();
        let before_8 = s.hash_kv(8).unwrap();
        s.apply_batch(5, 1, vec![compact(8)]).unwrap();
        tokio::task::yield_now().await;
        let got: Vec<(u32, i64, i64)> = seen
            .lock()
            .unwrap()
            .iter()
            .map(|h| (h.hash, h.compact_revision, h.hash_revision))
            .collect();
        assert_eq!(
            got,
            vec![(before_4.hash, -1, 4), (before_8.hash, 4, 8)],
            "each compaction's hash, with the compaction before it"
        );
    }
}
