//! [`MvccActor`]: the [`Store`] behind a mailbox.
//!
//! It runs on a `SyncArbiter` with exactly one thread: applying a batch commits an engine write
//! transaction, which blocks (LMDB's commit writes pages, and a write transaction must begin and
//! end on one thread), and one thread keeps applies and reads in mailbox order, so a Range sent
//! after an ApplyBatch sees its writes.

use std::sync::{Arc, Mutex};

use actcd_proto::etcdserverpb::RangeResponse;
use actcd_types::EtcdError;
use actcd_types::msg::{
    ApplyBatch, ApplyResult, GetStoreStatus, HashKv, HashKvResult, Range, ReadTxn, StoreStatus,
    SyncStorage,
};
use actix::{Actor, Addr, Handler, SyncArbiter, SyncContext};

use crate::store::Store;

pub struct MvccActor {
    store: Store,
}

impl MvccActor {
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// Starts the actor on its own `SyncArbiter` thread. Must be called inside a running actix
    /// System.
    pub fn start_sync(store: Store) -> Addr<Self> {
        // The factory runs once on the arbiter's thread; the actor never stops itself, so
        // actix never asks for a second one.
        let slot = Arc::new(Mutex::new(Some(store)));
        SyncArbiter::start(1, move || {
            let store = slot
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .expect("the mvcc actor is created once");
            MvccActor::new(store)
        })
    }
}

impl Actor for MvccActor {
    type Context = SyncContext<Self>;
}

/// Applies committed requests in one backend transaction together with the consistent index;
/// replies with one result per request, in order. `Err` means the engine failed and nothing of
/// the batch was applied.
impl Handler<ApplyBatch> for MvccActor {
    type Result = Result<Vec<ApplyResult>, EtcdError>;

    fn handle(&mut self, msg: ApplyBatch, _: &mut Self::Context) -> Self::Result {
        self.store
            .apply_batch(msg.consistent_index, msg.term, msg.requests)
    }
}

/// Reads the key space at the requested revision (the sender has done any linearizability
/// wait).
impl Handler<Range> for MvccActor {
    type Result = Result<RangeResponse, EtcdError>;

    fn handle(&mut self, msg: Range, _: &mut Self::Context) -> Self::Result {
        self.store.range(&msg.request)
    }
}

/// Reports the revision clock, compaction state, consistent index and backend size.
impl Handler<GetStoreStatus> for MvccActor {
    type Result = Result<StoreStatus, EtcdError>;

    fn handle(&mut self, _: GetStoreStatus, _: &mut Self::Context) -> Self::Result {
        self.store.status()
    }
}

/// A txn without writes, read at the current revision.
impl Handler<ReadTxn> for MvccActor {
    type Result = Result<actcd_proto::etcdserverpb::TxnResponse, EtcdError>;

    fn handle(&mut self, msg: ReadTxn, _: &mut Self::Context) -> Self::Result {
        self.store.read_only_txn(msg.request)
    }
}

/// etcd's HashKV over the records up to a revision.
impl Handler<HashKv> for MvccActor {
    type Result = Result<HashKvResult, EtcdError>;

    fn handle(&mut self, msg: HashKv, _: &mut Self::Context) -> Self::Result {
        self.store.hash_kv(msg.revision)
    }
}

/// Makes everything applied durable: the raft node sends it before releasing WAL segments.
impl Handler<SyncStorage> for MvccActor {
    type Result = Result<(), EtcdError>;

    fn handle(&mut self, _: SyncStorage, _: &mut Self::Context) -> Self::Result {
        self.store.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_proto::actcdpb::InternalRaftRequest;
    use actcd_proto::etcdserverpb::{PutRequest, RangeRequest};
    use actcd_types::MemberIdentity;
    use actcd_types::msg::ApplyResponse;
    use actcd_types::storage::MemEngine;

    #[actix::test]
    async fn messages_reach_the_store_in_order() {
        let store = Store::open(Arc::new(MemEngine::new()), MemberIdentity::default()).unwrap();
        let addr = MvccActor::start_sync(store);
        let put = InternalRaftRequest {
            put: Some(PutRequest {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let results = addr
            .send(ApplyBatch {
                consistent_index: 5,
                term: 2,
                requests: vec![put],
            })
            .await
            .unwrap()
            .unwrap();
        assert!(
            matches!(&results[0], Ok(ApplyResponse::Put(r)) if r.header.as_ref().unwrap().revision == 2)
        );
        let read = addr
            .send(Range {
                request: RangeRequest {
                    key: b"k".to_vec(),
                    ..Default::default()
                },
            })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(read.kvs[0].value, b"v");
        let status = addr.send(GetStoreStatus).await.unwrap().unwrap();
        assert_eq!(
            (status.revision, status.consistent_index, status.term),
            (2, 5, 2)
        );
    }
}
