//! etcd's `HashKV`: a CRC32C (Castagnoli) seeded with the bucket name `key`, then every record
//! key and value of the `key` table up to the revision, in revision order. Records at or below
//! the compacted revision that compaction would drop are skipped; compaction here deletes them
//! before it returns, so every remaining record counts. The record bytes are etcd's (revision
//! keys, protobuf `KeyValue` values, key-only tombstones), so the hash equals etcd's for the same
//! history.

use actcd_types::msg::HashKvResult;
use actcd_types::storage::Table;
use actcd_types::{EtcdError, Revision};

use crate::store::Store;

impl Store {
    pub fn hash_kv(&self, revision: i64) -> Result<HashKvResult, EtcdError> {
        let current = self.current_revision();
        let compacted = self.compact_revision();
        let rev = if revision <= 0 { current } else { revision };
        if rev > current {
            return Err(EtcdError::FutureRevision);
        }
        if rev < compacted {
            return Err(EtcdError::Compacted);
        }
        let upper = Revision::new(rev.saturating_add(1), 0).to_bytes(false);
        let txn = self.engine().read().map_err(EtcdError::internal)?;
        let mut crc = crc32c::crc32c(b"key");
        txn.scan(Table::Key, &[], Some(&upper), &mut |k, v| {
            crc = crc32c::crc32c_append(crc, k);
            crc = crc32c::crc32c_append(crc, v);
            true
        })
        .map_err(EtcdError::internal)?;
        Ok(HashKvResult {
            hash: crc,
            compact_revision: compacted,
            revision: current,
        })
    }

    /// Flushes everything applied so far to stable storage.
    pub fn sync(&self) -> Result<(), EtcdError> {
        self.engine().sync().map_err(EtcdError::internal)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use actcd_proto::actcdpb::InternalRaftRequest;
    use actcd_proto::etcdserverpb::PutRequest;
    use actcd_types::MemberIdentity;
    use actcd_types::storage::MemEngine;

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
}
