//! A damaged `key` record on every path that reads one: the request fails with `corrupt
//! cluster`, never with the record's bytes, and the damage is reported with its key and
//! revision. Old-format tables are rewritten once and read right.

use std::sync::{Arc, Mutex};

use actcd_etcd_snapshot::whole_store;
use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use actcd_proto::etcdserverpb::{
    Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest, request_op,
};
use actcd_proto::mvccpb::KeyValue;
use actcd_types::key_record::{self, FORMAT_CHECKSUMMED, FORMAT_META_KEY};
use actcd_types::msg::{ApplyResponse, RaiseCorrupt};
use actcd_types::storage::{KvEngine, MemEngine, ReadEngine, Table};
use actcd_types::{EtcdError, MemberIdentity, Revision};
use actix::{Actor, Context, Handler};
use prost::Message;

use super::DamageReport;
use crate::{ReadViews, Store};

const ME: u64 = 0x51;

/// Keeps every `RaiseCorrupt` it is sent.
struct Recorder(Arc<Mutex<Vec<RaiseCorrupt>>>);

impl Actor for Recorder {
    type Context = Context<Self>;
}

impl Handler<RaiseCorrupt> for Recorder {
    type Result = ();
    fn handle(&mut self, msg: RaiseCorrupt, _: &mut Context<Self>) {
        self.0.lock().unwrap().push(msg);
    }
}

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

fn get(k: &str) -> RangeRequest {
    RangeRequest {
        key: k.into(),
        ..Default::default()
    }
}

/// Flips one bit in the last byte of the record at `rev` (inside the value for a put).
fn damage(engine: &MemEngine, rev: Revision) {
    let at = rev.to_bytes(false);
    let mut stored = engine
        .read()
        .unwrap()
        .get(Table::Key, &at)
        .unwrap()
        .unwrap();
    *stored.last_mut().unwrap() ^= 0x01;
    let mut w = engine.write().unwrap();
    w.put(Table::Key, &at, &stored).unwrap();
    w.commit().unwrap();
}

/// A store with `a`=1 at 2, `b`=1 at 3, `b`=2 at 4 (committed), whose record 4 is damaged,
/// reporting to a recorder.
async fn damaged_store() -> (Arc<MemEngine>, Store, Arc<Mutex<Vec<RaiseCorrupt>>>) {
    let engine = Arc::new(MemEngine::new());
    let mut store = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
    store
        .apply_batch(1, 1, vec![put("a", "1"), put("b", "1"), put("b", "2")])
        .unwrap();
    damage(&engine, Revision::new(4, 0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = Recorder(seen.clone()).start();
    store.set_damage_report(DamageReport::to(recorder.recipient(), ME));
    (engine, store, seen)
}

/// Lets the recorder take what was sent, then checks it named record 4 of `b`.
async fn assert_reported(seen: &Arc<Mutex<Vec<RaiseCorrupt>>>, what: &str) {
    tokio::task::yield_now().await;
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert!(!seen.is_empty(), "{what}: nothing reported");
    for r in seen {
        assert_eq!(r.member_id, ME, "{what}");
        assert!(
            r.reason.contains("revision 4_0") && r.reason.contains("key \"b\""),
            "{what}: {}",
            r.reason
        );
    }
}

#[actix::test]
async fn every_read_of_a_damaged_record_fails_corrupt_and_is_reported() {
    let (_engine, mut store, seen) = damaged_store().await;
    let (_publisher, views) = ReadViews::channel(store.read_view());

    type Read = Box<dyn Fn(&Store, &ReadViews) -> Result<(), EtcdError>>;
    struct Case {
        name: &'static str,
        read: Read,
    }
    let cases = [
        Case {
            name: "range of the key",
            read: Box::new(|s, _| s.range(&get("b")).map(drop)),
        },
        Case {
            name: "range over the view",
            read: Box::new(|_, v| v.range(&get("b")).map(drop)),
        },
        Case {
            name: "prefix range over the view",
            read: Box::new(|_, v| {
                v.range(&RangeRequest {
                    key: b"a".to_vec(),
                    range_end: b"c".to_vec(),
                    ..Default::default()
                })
                .map(drop)
            }),
        },
        Case {
            name: "read-only txn over the view",
            read: Box::new(|_, v| {
                v.read_txn(&TxnRequest {
                    success: vec![RequestOp {
                        request: Some(request_op::Request::RequestRange(get("b"))),
                    }],
                    ..Default::default()
                })
                .map(drop)
            }),
        },
        Case {
            name: "history for a watcher",
            read: Box::new(|_, v| v.history(2, 4, 100).map(drop)),
        },
        Case {
            name: "history on the store",
            read: Box::new(|s, _| s.history(4, 4, 100).map(drop)),
        },
        Case {
            name: "hashkv over the view",
            read: Box::new(|_, v| v.hash_kv(0).map(drop)),
        },
        Case {
            name: "hash of the backend",
            read: Box::new(|s, _| s.hash_backend().map(drop)),
        },
    ];
    for c in &cases {
        assert_eq!(
            (c.read)(&store, &views),
            Err(EtcdError::Corrupt),
            "{}",
            c.name
        );
        assert_reported(&seen, c.name).await;
    }
    // What the damage does not touch still reads.
    assert_eq!(store.range(&get("a")).unwrap().kvs[0].value, b"1");
    assert_eq!(views.range(&get("a")).unwrap().kvs[0].value, b"1");
    assert_eq!(views.history(2, 3, 100).unwrap().events.len(), 2);
    assert!(views.hash_kv(3).is_ok(), "HashKV below the damage");
    let _ = store.read_view();
}

#[actix::test]
async fn a_write_that_reads_a_damaged_record_fails_alone() {
    let (_engine, mut store, seen) = damaged_store().await;
    let with_prev = InternalRaftRequest {
        put: Some(PutRequest {
            key: b"b".to_vec(),
            value: b"3".to_vec(),
            prev_kv: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    let delete_prev = InternalRaftRequest {
        delete_range: Some(DeleteRangeRequest {
            key: b"b".to_vec(),
            prev_kv: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    let compare_value = InternalRaftRequest {
        txn: Some(TxnRequest {
            compare: vec![Compare {
                key: b"b".to_vec(),
                result: CompareResult::Equal as i32,
                target: CompareTarget::Value as i32,
                target_union: Some(TargetUnion::Value(b"2".to_vec())),
                ..Default::default()
            }],
            success: vec![RequestOp {
                request: Some(request_op::Request::RequestPut(PutRequest {
                    key: b"c".to_vec(),
                    value: b"x".to_vec(),
                    ..Default::default()
                })),
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let results = store
        .apply_batch(
            2,
            1,
            vec![with_prev, put("a", "2"), delete_prev, compare_value],
        )
        .unwrap();
    assert_eq!(results[0], Err(EtcdError::Corrupt), "put with prev_kv");
    assert!(
        matches!(&results[1], Ok(ApplyResponse::Put(r)) if r.header.as_ref().unwrap().revision == 5),
        "the rest of the batch goes on: {:?}",
        results[1]
    );
    assert_eq!(results[2], Err(EtcdError::Corrupt), "delete with prev_kv");
    assert_eq!(
        results[3],
        Err(EtcdError::Corrupt),
        "txn comparing the value"
    );
    assert_eq!(
        store.current_revision(),
        5,
        "only the clean put took a revision"
    );
    assert_reported(&seen, "apply").await;
}

#[actix::test]
async fn reopening_indexes_around_a_damaged_record_and_reports_it() {
    let (engine, store, _) = damaged_store().await;
    drop(store);
    let mut store = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
    let damaged = store.damaged_at_open().to_vec();
    assert_eq!(damaged.len(), 1);
    assert_eq!(damaged[0].revision, Some(Revision::new(4, 0)));
    assert_eq!(damaged[0].key.as_deref(), Some(b"b".as_slice()));
    assert_eq!(store.current_revision(), 4);
    // The damaged version is still b's latest: a read fails, never answering the older 1.
    assert_eq!(store.range(&get("b")), Err(EtcdError::Corrupt));
    // The alarm is raised once someone is there to raise it.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = Recorder(seen.clone()).start();
    store.set_damage_report(DamageReport::to(recorder.recipient(), ME));
    assert_reported(&seen, "open").await;
}

#[test]
fn compaction_reports_damage_and_finishes() {
    let engine = Arc::new(MemEngine::new());
    let mut store = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
    store
        .apply_batch(1, 1, vec![put("a", "1"), put("a", "2"), put("a", "3")])
        .unwrap();
    damage(&engine, Revision::new(2, 0));
    let compact = InternalRaftRequest {
        compaction: Some(actcd_proto::etcdserverpb::CompactionRequest {
            revision: 3,
            physical: true,
        }),
        ..Default::default()
    };
    assert!(store.apply_batch(2, 1, vec![compact]).unwrap()[0].is_ok());
    assert_eq!(store.range(&get("a")).unwrap().kvs[0].value, b"3");
}

/// Rewrites `engine`'s key table as a build before checksums left it: plain `KeyValue`s and
/// no format version.
fn make_old_format(engine: &MemEngine) {
    let mut records = Vec::new();
    engine
        .read()
        .unwrap()
        .scan(Table::Key, &[], None, &mut |k, v| {
            records.push((k.to_vec(), key_record::open(k, v).unwrap().to_vec()));
            true
        })
        .unwrap();
    let mut w = engine.write().unwrap();
    for (k, v) in records {
        w.put(Table::Key, &k, &v).unwrap();
    }
    w.delete(Table::Meta, FORMAT_META_KEY).unwrap();
    w.commit().unwrap();
}

#[test]
fn an_old_format_table_is_rewritten_once_and_reads_right() {
    let engine = Arc::new(MemEngine::new());
    let mut store = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
    let reqs = (0..25)
        .map(|i| put(&format!("k{}", i % 7), &format!("v{i}")))
        .collect();
    store.apply_batch(1, 1, reqs).unwrap();
    store
        .apply_batch(
            2,
            1,
            vec![InternalRaftRequest {
                delete_range: Some(DeleteRangeRequest {
                    key: b"k3".to_vec(),
                    ..Default::default()
                }),
                ..Default::default()
            }],
        )
        .unwrap();
    let all = RangeRequest {
        key: vec![0],
        range_end: vec![0],
        ..Default::default()
    };
    let want = store.range(&all).unwrap();
    let want_hash = store.hash_kv(0).unwrap();
    let want_at = store.range(&RangeRequest {
        revision: 10,
        ..all.clone()
    });
    drop(store);

    make_old_format(&engine);
    // A build that skipped the upgrade would refuse, not misread.
    let read: Arc<dyn ReadEngine> = engine.clone();
    let sink = crate::Sink::Direct(engine.clone());
    assert!(
        Store::open_inner(read, sink, MemberIdentity::default(), 0).is_err(),
        "unversioned records are never read as checksummed ones"
    );
    let store = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
    assert_eq!(store.range(&all).unwrap(), want);
    assert_eq!(store.hash_kv(0).unwrap(), want_hash, "HashKV as before");
    assert_eq!(
        store.range(&RangeRequest {
            revision: 10,
            ..all.clone()
        }),
        want_at
    );
    assert!(store.damaged_at_open().is_empty());
    let txn = engine.read().unwrap();
    assert_eq!(
        txn.get(Table::Meta, FORMAT_META_KEY).unwrap(),
        Some(FORMAT_CHECKSUMMED.to_be_bytes().to_vec())
    );
    let mut sealed = 0;
    txn.scan(Table::Key, &[], None, &mut |k, v| {
        key_record::decode(k, v).expect("every record sealed");
        sealed += 1;
        true
    })
    .unwrap();
    assert_eq!(sealed, 26);
}

#[test]
fn an_old_leaders_snapshot_is_sealed_as_it_is_installed() {
    let from = Arc::new(MemEngine::new());
    let mut leader = Store::open(from.clone(), MemberIdentity::default()).unwrap();
    leader
        .apply_batch(7, 1, vec![put("x", "1"), put("y", "2")])
        .unwrap();
    make_old_format(&from);
    let blob = {
        let txn = from.read().unwrap();
        let mut raw = Vec::new();
        // The old build's blob: records as stored, no checks (whole_store checks key records).
        raw.extend_from_slice(b"actcdsn1");
        for (code, t) in Table::ALL.iter().enumerate() {
            txn.scan(*t, &[], None, &mut |k, v| {
                raw.push(code as u8);
                raw.extend_from_slice(&(k.len() as u32).to_be_bytes());
                raw.extend_from_slice(k);
                raw.extend_from_slice(&(v.len() as u32).to_be_bytes());
                raw.extend_from_slice(v);
                true
            })
            .unwrap();
        }
        raw
    };
    assert!(whole_store::decode(&blob).is_ok());
    let to = Arc::new(MemEngine::new());
    let mut follower = Store::open(to.clone(), MemberIdentity::default()).unwrap();
    assert_eq!(follower.restore(&blob).unwrap(), 7);
    assert_eq!(follower.range(&get("y")).unwrap().kvs[0].value, b"2");
    let txn = to.read().unwrap();
    txn.scan(Table::Key, &[], None, &mut |k, v| {
        key_record::decode(k, v).expect("sealed on install");
        true
    })
    .unwrap();
    let kv = KeyValue::decode(
        key_record::open(
            &Revision::new(2, 0).to_bytes(false),
            &txn.get(Table::Key, &Revision::new(2, 0).to_bytes(false))
                .unwrap()
                .unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(kv.value, b"1");
}
