//! etcd's mvcc counters and its `keysGauge`, request by request. The expected numbers are
//! etcd 3.5.1's, read off its `/metrics` after the same requests made with etcdctl.

use std::sync::Arc;

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use actcd_proto::etcdserverpb::request_op::Request;
use actcd_proto::etcdserverpb::{
    Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest,
};
use actcd_types::MemberIdentity;
use actcd_types::storage::{MemEngine, ReadEngine};

use super::*;
use crate::test_requests::{compact, delete, put};
use crate::{ReadViews, Store};

fn put_with(p: PutRequest) -> InternalRaftRequest {
    InternalRaftRequest {
        put: Some(p),
        ..Default::default()
    }
}

fn del_with(d: DeleteRangeRequest) -> InternalRaftRequest {
    InternalRaftRequest {
        delete_range: Some(d),
        ..Default::default()
    }
}

fn txn(t: TxnRequest) -> InternalRaftRequest {
    InternalRaftRequest {
        txn: Some(t),
        ..Default::default()
    }
}

fn get(k: &str) -> RangeRequest {
    RangeRequest {
        key: k.into(),
        ..Default::default()
    }
}

fn op(r: Request) -> RequestOp {
    RequestOp { request: Some(r) }
}

fn op_put(k: &str, v: &str) -> RequestOp {
    op(Request::RequestPut(PutRequest {
        key: k.into(),
        value: v.into(),
        ..Default::default()
    }))
}

fn mod_is(k: &str, result: CompareResult, rev: i64) -> Compare {
    Compare {
        result: result as i32,
        target: CompareTarget::Mod as i32,
        key: k.into(),
        target_union: Some(TargetUnion::ModRevision(rev)),
        range_end: vec![],
    }
}

fn value_is(k: &str, v: &str) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Value as i32,
        key: k.into(),
        target_union: Some(TargetUnion::Value(v.into())),
        range_end: vec![],
    }
}

/// What one step adds to the counters.
fn delta(ranges: u64, puts: u64, deletes: u64, txns: u64, put_bytes: u64) -> OpCounts {
    OpCounts {
        ranges,
        puts,
        deletes,
        txns,
        put_bytes,
    }
}

fn minus(a: OpCounts, b: OpCounts) -> OpCounts {
    delta(
        a.ranges - b.ranges,
        a.puts - b.puts,
        a.deletes - b.deletes,
        a.txns - b.txns,
        a.put_bytes - b.put_bytes,
    )
}

enum Step {
    /// Applied through the log (the applier's requests), `leases` existing.
    Apply(InternalRaftRequest),
    /// A revoked lease's keys.
    Revoke(Vec<&'static str>),
    /// Served from the read views.
    Range(RangeRequest),
    ReadTxn(TxnRequest),
}

#[test]
fn counters_count_etcds_mvcc_calls() {
    let mut store = Store::open(Arc::new(MemEngine::new()), MemberIdentity::default()).unwrap();
    let ignore_value = |k: &str| PutRequest {
        key: k.into(),
        ignore_value: true,
        ..Default::default()
    };
    let steps: Vec<(&str, Step, OpCounts)> = vec![
        ("get k", Step::Range(get("k")), delta(1, 0, 0, 0, 0)),
        ("put k v", Step::Apply(put("k", "v")), delta(0, 1, 0, 0, 2)),
        (
            "put k v2 --prev-kv: a range first, so a txn",
            Step::Apply(put_with(PutRequest {
                key: "k".into(),
                value: "v2".into(),
                prev_kv: true,
                ..Default::default()
            })),
            delta(1, 1, 0, 1, 3),
        ),
        (
            "put k --ignore-value: the old value's size",
            Step::Apply(put_with(ignore_value("k"))),
            delta(1, 1, 0, 1, 3),
        ),
        (
            "put missing --ignore-value: the range, no put",
            Step::Apply(put_with(ignore_value("missing"))),
            delta(1, 0, 0, 0, 0),
        ),
        (
            "put with a lease that does not exist: refused before the transaction",
            Step::Apply(put_with(PutRequest {
                key: "k".into(),
                lease: 7,
                ..Default::default()
            })),
            delta(0, 0, 0, 0, 0),
        ),
        (
            "del nothing: a delete all the same",
            Step::Apply(delete("nothing")),
            delta(0, 0, 1, 0, 0),
        ),
        (
            "del k --prev-kv",
            Step::Apply(del_with(DeleteRangeRequest {
                key: "k".into(),
                prev_kv: true,
                ..Default::default()
            })),
            delta(1, 0, 1, 1, 0),
        ),
        ("put a 1", Step::Apply(put("a", "1")), delta(0, 1, 0, 0, 2)),
        ("put b 2", Step::Apply(put("b", "2")), delta(0, 1, 0, 0, 2)),
        (
            "del a c: one delete for two keys",
            Step::Apply(del_with(DeleteRangeRequest {
                key: "a".into(),
                range_end: "c".into(),
                ..Default::default()
            })),
            delta(0, 0, 1, 0, 0),
        ),
        (
            "txn: put t1",
            Step::Apply(txn(TxnRequest {
                success: vec![op_put("t1", "v")],
                ..Default::default()
            })),
            delta(0, 1, 0, 0, 3),
        ),
        (
            "read-only txn: get t1",
            Step::ReadTxn(TxnRequest {
                success: vec![op(Request::RequestRange(get("t1")))],
                ..Default::default()
            }),
            delta(1, 0, 0, 0, 0),
        ),
        (
            "txn, two compares true (a read txn), then put, get, del (a write txn)",
            Step::Apply(txn(TxnRequest {
                compare: vec![mod_is("t1", CompareResult::Greater, 0), value_is("t1", "v")],
                success: vec![
                    op_put("t2", "v"),
                    op(Request::RequestRange(get("t1"))),
                    op(Request::RequestDeleteRange(DeleteRangeRequest {
                        key: "t9".into(),
                        ..Default::default()
                    })),
                ],
                failure: vec![],
            })),
            delta(3, 1, 1, 2, 3),
        ),
        (
            "txn, the first compare false (the second not read), the failure branch a get",
            Step::Apply(txn(TxnRequest {
                compare: vec![mod_is("t1", CompareResult::Equal, 0), value_is("t1", "v")],
                success: vec![op_put("t2", "v")],
                failure: vec![op(Request::RequestRange(get("t1")))],
            })),
            delta(2, 0, 0, 0, 0),
        ),
        (
            "read-only txn: two compares and a get, one transaction",
            Step::ReadTxn(TxnRequest {
                compare: vec![mod_is("t1", CompareResult::Greater, 0), value_is("t1", "v")],
                success: vec![op(Request::RequestRange(get("t2")))],
                failure: vec![],
            }),
            delta(3, 0, 0, 1, 0),
        ),
        (
            "txn whose nested txn's compare is on the path; an ignore_value put is checked too",
            Step::Apply(txn(TxnRequest {
                compare: vec![],
                success: vec![
                    op(Request::RequestTxn(TxnRequest {
                        compare: vec![value_is("t1", "v")],
                        success: vec![op_put("t3", "v")],
                        failure: vec![],
                    })),
                    op(Request::RequestPut(ignore_value("t2"))),
                ],
                failure: vec![],
            })),
            // Read: the compare and the check; write: t3, then t2's range and put.
            delta(3, 2, 0, 2, 6),
        ),
        (
            "put l1 v",
            Step::Apply(put("l1", "v")),
            delta(0, 1, 0, 0, 3),
        ),
        (
            "put l2 v",
            Step::Apply(put("l2", "v")),
            delta(0, 1, 0, 0, 3),
        ),
        (
            "lease revoke of two keys: one transaction, a delete each",
            Step::Revoke(vec!["l1", "l2"]),
            delta(0, 0, 2, 1, 0),
        ),
        (
            "lease revoke of one key",
            Step::Revoke(vec!["t3"]),
            delta(0, 0, 1, 0, 0),
        ),
        (
            "compaction: the answer's revision read with a range",
            Step::Apply(compact(3)),
            delta(1, 0, 0, 0, 0),
        ),
        (
            "a compaction refused: nothing",
            Step::Apply(compact(3)),
            delta(0, 0, 0, 0, 0),
        ),
        (
            "get at a compacted revision: a range that fails",
            Step::Range(RangeRequest {
                revision: 2,
                ..get("t1")
            }),
            delta(1, 0, 0, 0, 0),
        ),
    ];
    let mut index = 1;
    for (name, step, want) in steps {
        let before = store.op_counts();
        match step {
            Step::Apply(r) => {
                index += 1;
                store.apply_batch(index, 2, vec![r]).unwrap();
            }
            Step::Revoke(keys) => {
                index += 1;
                let keys = keys.into_iter().map(|k| k.as_bytes().to_vec()).collect();
                store
                    .delete_keys_deferred(index, 2, keys, Vec::new())
                    .unwrap();
                store.commit().unwrap();
            }
            Step::Range(r) => {
                let _ = ReadViews::channel(store.read_view()).1.range(&r);
            }
            Step::ReadTxn(t) => {
                ReadViews::channel(store.read_view())
                    .1
                    .read_txn(&t)
                    .unwrap();
            }
        }
        assert_eq!(minus(store.op_counts(), before), want, "{name}");
    }
    // The writer's own reads (tests, benches, callers without views) count alike.
    let before = store.op_counts();
    store.range(&get("t1")).unwrap();
    store
        .read_only_txn(TxnRequest {
            compare: vec![value_is("t1", "v")],
            success: vec![op(Request::RequestRange(get("t1")))],
            failure: vec![],
        })
        .unwrap();
    assert_eq!(minus(store.op_counts(), before), delta(3, 0, 0, 1, 0));
}

/// etcd's `etcd_debugging_mvcc_keys_total` is a gauge of live keys: a put creating a key adds
/// one, a delete takes one, compaction changes nothing, and a restart (or a snapshot
/// installed) counts the keys again.
#[test]
fn keys_total_counts_live_keys() {
    let engine = Arc::new(MemEngine::new());
    let mut store = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
    let keys = |s: &Store| s.status().unwrap().keys;
    // The sequence: etcd says 1.
    for (i, r) in [
        put("k", "v"),
        put("1", "x"),
        delete("1"),
        put("2", "y"),
        delete("2"),
    ]
    .into_iter()
    .enumerate()
    {
        store.apply_batch(i as u64 + 1, 2, vec![r]).unwrap();
    }
    assert_eq!(keys(&store), 1);
    store.apply_batch(6, 2, vec![put("k", "v2")]).unwrap();
    assert_eq!(keys(&store), 1, "a new version is no new key");
    store
        .apply_batch(
            7,
            2,
            vec![txn(TxnRequest {
                success: vec![
                    op_put("x", "1"),
                    op_put("y", "1"),
                    op(Request::RequestDeleteRange(DeleteRangeRequest {
                        key: "k".into(),
                        ..Default::default()
                    })),
                ],
                ..Default::default()
            })],
        )
        .unwrap();
    assert_eq!(keys(&store), 2);
    store
        .delete_keys_deferred(8, 2, vec![b"x".to_vec(), b"gone".to_vec()], Vec::new())
        .unwrap();
    store.commit().unwrap();
    assert_eq!(keys(&store), 1);
    // Compacted at the current revision, after every delete: still one.
    let rev = store.current_revision();
    store.apply_batch(9, 2, vec![compact(rev)]).unwrap();
    assert_eq!(keys(&store), 1);
    drop(store);
    let mut store = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
    assert_eq!(keys(&store), 1, "after a restart");
    store.apply_batch(10, 2, vec![delete("y")]).unwrap();
    assert_eq!(keys(&store), 0);

    // A follower installing this store as a snapshot counts its keys, and keeps counting
    // operations where it was.
    store.apply_batch(11, 2, vec![put("z", "1")]).unwrap();
    let (_, blob) = crate::store::blob_of(&*engine.begin_read().unwrap(), 0).unwrap();
    let mut follower = Store::open(Arc::new(MemEngine::new()), MemberIdentity::default()).unwrap();
    for i in 0..3 {
        follower
            .apply_batch(i + 1, 2, vec![put(format!("f{i}"), "v")])
            .unwrap();
    }
    assert_eq!(keys(&follower), 3);
    let before = follower.op_counts();
    follower.restore(&blob).unwrap();
    assert_eq!(keys(&follower), 1);
    assert_eq!(follower.op_counts(), before);
}
