//! Requests as the applier hands them to the store, for the crate's tests.

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::{CompactionRequest, DeleteRangeRequest, PutRequest};

/// A put of `k` = `v`, no lease.
pub(crate) fn put(k: impl AsRef<[u8]>, v: impl AsRef<[u8]>) -> InternalRaftRequest {
    InternalRaftRequest {
        put: Some(PutRequest {
            key: k.as_ref().to_vec(),
            value: v.as_ref().to_vec(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A delete of the one key `k`.
pub(crate) fn delete(k: impl AsRef<[u8]>) -> InternalRaftRequest {
    InternalRaftRequest {
        delete_range: Some(DeleteRangeRequest {
            key: k.as_ref().to_vec(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A physical compaction at `revision`.
pub(crate) fn compact(revision: i64) -> InternalRaftRequest {
    InternalRaftRequest {
        compaction: Some(CompactionRequest {
            revision,
            physical: true,
        }),
        ..Default::default()
    }
}
