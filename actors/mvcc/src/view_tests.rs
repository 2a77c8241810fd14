//! Read views: what a view reads while the writer goes on, the records not yet committed, and
//! the compaction race (see the module doc).

use std::sync::Arc;

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::response_op::Response;
use actcd_proto::etcdserverpb::{PutRequest, RangeRequest, TxnRequest};
use actcd_proto::etcdserverpb::{RequestOp, request_op::Request};
use actcd_types::storage::{MemEngine, ReadEngine, ReadTxn, ScanFn, StorageResult, Table};
use actcd_types::{EtcdError, MemberIdentity};

use super::*;
use crate::test_requests::{compact, put};

fn get(k: &str, revision: i64) -> RangeRequest {
    RangeRequest {
        key: k.into(),
        revision,
        ..Default::default()
    }
}

fn value(r: Result<RangeResponse, EtcdError>) -> Vec<u8> {
    r.unwrap().kvs.pop().map(|kv| kv.value).unwrap_or_default()
}

/// A store that keeps applied batches in its write buffer until told to commit.
fn buffered() -> Store {
    Store::open(Arc::new(MemEngine::new()), MemberIdentity::default()).unwrap()
}

fn apply(store: &mut Store, index: u64, requests: Vec<InternalRaftRequest>) {
    let (results, _) = store
        .apply_deferred(index, 2, requests, Vec::new(), &[])
        .unwrap();
    for r in results {
        r.unwrap();
    }
}

#[test]
fn a_view_keeps_its_revision_while_the_writer_goes_on() {
    let mut store = buffered();
    apply(&mut store, 1, vec![put("k", "a")]);
    let old = store.read_view();
    apply(&mut store, 2, vec![put("k", "b"), put("other", "x")]);
    store.commit().unwrap();
    let new = store.read_view();

    assert_eq!(old.revision(), 2);
    assert_eq!(value(old.range(&get("k", 0))), b"a");
    assert!(old.range(&get("other", 0)).unwrap().kvs.is_empty());
    assert_eq!(
        old.range(&get("k", 3)).unwrap_err(),
        EtcdError::FutureRevision
    );
    assert_eq!(new.revision(), 4);
    assert_eq!(value(new.range(&get("k", 0))), b"b");
    assert_eq!(value(new.range(&get("k", 2))), b"a");
    // Headers are stamped like the store's.
    let header = new.range(&get("k", 0)).unwrap().header.unwrap();
    assert_eq!((header.revision, header.raft_term), (4, 2));
    // A read-only txn reads at the view's revision too.
    let txn = TxnRequest {
        success: vec![RequestOp {
            request: Some(Request::RequestRange(get("k", 0))),
        }],
        ..Default::default()
    };
    let resp = old.read_txn(&txn).unwrap();
    assert_eq!(resp.header.unwrap().revision, 2);
    let Some(Response::ResponseRange(r)) = &resp.responses[0].response else {
        panic!("a range answer: {:?}", resp.responses);
    };
    assert_eq!(r.kvs[0].value, b"a");
    // One that writes is refused.
    let write = TxnRequest {
        success: vec![RequestOp {
            request: Some(Request::RequestPut(PutRequest::default())),
        }],
        ..Default::default()
    };
    assert!(new.read_txn(&write).is_err());
}

#[test]
fn records_not_yet_committed_are_read_from_the_views_runs() {
    let mut store = buffered();
    apply(&mut store, 1, vec![put("a", "1")]);
    apply(&mut store, 2, vec![put("b", "2")]);
    let view = store.read_view();
    assert_eq!(view.fresh.len(), 2, "nothing is committed yet");
    assert_eq!(value(view.range(&get("a", 0))), b"1");
    assert_eq!(value(view.range(&get("b", 0))), b"2");
    let all = RangeRequest {
        key: vec![0],
        range_end: vec![0],
        ..Default::default()
    };
    assert_eq!(view.range(&all).unwrap().kvs.len(), 2);
    // History and HashKV scan the runs merged with the engine, and agree with the writer.
    assert_eq!(
        view.history(1, 10, 100).unwrap(),
        store.history(1, 10, 100).unwrap()
    );
    assert_eq!(view.hash_kv(0).unwrap(), store.hash_kv(0).unwrap());

    store.commit().unwrap();
    apply(&mut store, 3, vec![put("c", "3")]);
    let after = store.read_view();
    assert_eq!(after.fresh.len(), 1, "committed runs are dropped");
    assert_eq!(after.range(&all).unwrap().kvs.len(), 3);
    assert_eq!(
        after.history(1, 10, 100).unwrap(),
        store.history(1, 10, 100).unwrap()
    );
    assert_eq!(after.hash_kv(0).unwrap(), store.hash_kv(0).unwrap());
    // The older view still reads what it read: the engine now holds its runs too.
    assert_eq!(view.range(&all).unwrap().kvs.len(), 2);
}

#[test]
fn a_record_compacted_under_a_view_is_compacted_or_read_again_on_a_newer_one() {
    let mut store = buffered();
    apply(&mut store, 1, vec![put("k", "a")]); // 2
    apply(&mut store, 2, vec![put("k", "b")]); // 3
    store.commit().unwrap();
    let (publisher, views) = ReadViews::channel(store.read_view());
    let old = views.newest();
    let chunk = views.history(2, 3, 100).unwrap();
    assert_eq!(chunk.events.len(), 2);

    // The writer goes on: k = c at 4, then a compaction at 4 deletes records 2 and 3.
    apply(&mut store, 3, vec![put("k", "c")]);
    apply(&mut store, 4, vec![compact(4)]);
    store.finish_compaction_now().unwrap();
    store.commit().unwrap();

    // The old view names record 3 for k's latest value, and it is gone.
    assert_eq!(old.range(&get("k", 0)).unwrap_err(), EtcdError::Compacted);
    assert_eq!(old.range(&get("k", 2)).unwrap_err(), EtcdError::Compacted);
    // Before the newer view is published, that is the answer the views give...
    assert_eq!(views.range(&get("k", 2)).unwrap_err(), EtcdError::Compacted);
    publisher.send_replace(Arc::new(store.read_view()));
    // ...after it, a read of the latest revision is read again on it, one at a named
    // revision stays compacted.
    assert_eq!(
        views.retrying_range_on(&old, &get("k", 0)),
        Ok(b"c".to_vec())
    );
    assert_eq!(views.range(&get("k", 2)).unwrap_err(), EtcdError::Compacted);
    // History from 2 on the old view misses the deleted records; the views notice the moved
    // compaction and answer from the new view, which reports it.
    let chunk = views.history(2, 4, 100).unwrap();
    assert_eq!(chunk.compact_revision, 4);
    assert_eq!(views.hash_kv(0).unwrap(), store.hash_kv(0).unwrap());
}

#[test]
fn a_failed_store_publishes_views_that_refuse_reads() {
    let mut store = buffered();
    apply(&mut store, 1, vec![put("k", "a")]);
    store.backend_failed();
    assert!(store.read_view().range(&get("k", 0)).is_err());
}

impl ReadViews {
    /// [`Self::range`] as if `first` had been the newest view when the read began.
    fn retrying_range_on(
        &self,
        first: &Arc<ReadView>,
        req: &RangeRequest,
    ) -> Result<Vec<u8>, EtcdError> {
        let mut answer = first.range(req);
        let newest = self.newest();
        if !Arc::ptr_eq(first, &newest) && matches!(answer, Err(EtcdError::Compacted)) {
            answer = newest.range(req);
        }
        answer.map(|mut r| r.kvs.pop().map(|kv| kv.value).unwrap_or_default())
    }
}

/// A read engine whose `key` scans stop at a gate until the test opens it: a hash caught in
/// the middle of its scan.
struct Gated {
    inner: Arc<dyn ReadEngine>,
    scanning: std::sync::mpsc::SyncSender<()>,
    go: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

struct GatedTxn<'a> {
    inner: Box<dyn ReadTxn + 'a>,
    gate: &'a Gated,
}

impl ReadTxn for GatedTxn<'_> {
    fn get(&self, table: Table, key: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        self.inner.get(table, key)
    }

    fn scan(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut ScanFn<'_>,
    ) -> StorageResult<()> {
        if table == Table::Key {
            let _ = self.gate.scanning.send(());
            let _ = self.gate.go.lock().unwrap().recv();
        }
        self.inner.scan(table, from, to, f)
    }
}

impl ReadEngine for Gated {
    fn begin_read(&self) -> StorageResult<Box<dyn ReadTxn + '_>> {
        Ok(Box::new(GatedTxn {
            inner: self.inner.begin_read()?,
            gate: self,
        }))
    }

    fn begin_read_owned(self: Arc<Self>) -> StorageResult<Box<dyn ReadTxn + Send>> {
        Arc::clone(&self.inner).begin_read_owned()
    }

    fn usage(&self) -> StorageResult<(u64, u64)> {
        self.inner.usage()
    }
}

/// A hash reads the whole key table (seconds on a large store): it holds the index's lock only
/// while it decides which revisions count, so the writer, which takes that lock for every
/// batch, goes on while it scans.
#[test]
fn a_hash_scans_without_holding_the_index() {
    let mut store = buffered();
    apply(&mut store, 2, vec![put("a", "1"), put("b", "2")]);
    store.commit().unwrap();
    let mut view = store.read_view();
    let (scanning, scanned) = std::sync::mpsc::sync_channel(0);
    let (go, gate) = std::sync::mpsc::channel();
    view.engine = Arc::new(Gated {
        inner: Arc::clone(&view.engine),
        scanning,
        go: std::sync::Mutex::new(gate),
    });
    let view = Arc::new(view);
    let hashing = {
        let view = Arc::clone(&view);
        std::thread::spawn(move || view.hash_kv(0))
    };
    scanned.recv().unwrap();
    assert!(
        view.index.writable_now(),
        "the hash holds the index's lock while it scans"
    );
    go.send(()).unwrap();
    let hash = hashing.join().unwrap().unwrap();
    assert_eq!(
        hash,
        store.hash_kv(0).unwrap(),
        "the same hash as the store's own"
    );
}
