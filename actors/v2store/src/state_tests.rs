use actcd_proto::actcdpb::V2Request;
use actcd_types::storage::{KvEngine, MemEngine, Op, write_ops};
use actcd_v2auth::{AuthOp, Proposal, Render};

use super::*;
const CHECKPOINT_EVERY: usize = 1_000;

const NOW: i64 = 1_800_000_000_000_000_000;

fn put(path: &str, val: &str) -> V2Request {
    V2Request {
        method: "PUT".into(),
        path: path.into(),
        val: val.into(),
        ..Default::default()
    }
}

fn commit(engine: &MemEngine, ops: &[Op]) {
    let mut txn = engine.write().unwrap();
    write_ops(&mut *txn, ops, None).unwrap();
    txn.commit().unwrap();
}

fn reload(engine: &MemEngine, members: u64) -> V2State {
    let txn = engine.read().unwrap();
    V2State::load(&*txn, members).unwrap()
}

fn tree_json(s: &V2State) -> String {
    s.get("/", true, true, NOW).body
}

#[test]
fn a_fresh_store_counts_the_members_etcd_records() {
    let want_index = 3;
    let s = V2State::new(3);
    assert_eq!(s.tree().index(), want_index);
}

#[test]
fn answers_carry_etcds_status_body_and_indexes() {
    let mut s = V2State::new(1);
    let out = s.apply(7, 2, &put("/a", "1"), NOW);
    assert_eq!(out.reply.status, 201);
    assert_eq!(out.reply.etcd_index, 2);
    assert_eq!((out.reply.raft_index, out.reply.raft_term), (7, 2));
    assert_eq!(
        out.reply.body,
        "{\"action\":\"set\",\"node\":{\"key\":\"/a\",\"value\":\"1\",\"modifiedIndex\":2,\"createdIndex\":2}}\n"
    );
    let missing = s.get("/nope", false, false, NOW);
    assert_eq!(missing.status, 404);
    assert!(missing.body.ends_with('\n'));
}

#[test]
fn the_journal_replays_to_the_same_tree_and_history() {
    let engine = MemEngine::new();
    let mut s = V2State::new(1);
    for i in 0..50u64 {
        let out = s.apply(10 + i, 2, &put(&format!("/d/k{i}"), &i.to_string()), NOW);
        commit(&engine, &out.ops);
    }
    let mut member = V2Request {
        method: MEMBER.into(),
        path: "/0/members/1/attributes".into(),
        dir: true,
        ..Default::default()
    };
    for out in [s.apply(70, 2, &member, NOW), {
        member.path = "/0/members/2/attributes".into();
        s.apply(70, 2, &member, NOW)
    }] {
        commit(&engine, &out.ops);
    }
    let back = reload(&engine, 1);
    assert_eq!(tree_json(&back), tree_json(&s));
    assert_eq!(back.tree().index(), s.tree().index());
    // Two writes of one raft entry are both replayed (the cluster version counted once).
    assert_eq!(back.tree().index(), 1 + 50 + 2 + 1);
    // The history came back too: a watch from the first write is answered at once.
    let mut back = back;
    assert!(matches!(
        back.watch("/d/k0", false, false, 2),
        Ok(actcd_v2tree::WatchStart::Ready(_))
    ));
}

#[test]
fn a_checkpoint_replaces_the_journal() {
    let engine = MemEngine::new();
    let mut s = V2State::new(1).checkpoint_every(CHECKPOINT_EVERY);
    let mut checkpointed = false;
    for i in 0..(CHECKPOINT_EVERY as u64 + 5) {
        let out = s.apply(10 + i, 2, &put(&format!("/k{}", i % 100), "v"), NOW);
        checkpointed |= out.ops.iter().any(|op| matches!(op, Op::Delete { .. }));
        commit(&engine, &out.ops);
    }
    assert!(checkpointed, "a checkpoint deletes the journal it covers");
    let loaded = crate::journal::load(&*engine.read().unwrap()).unwrap();
    assert!(loaded.tree.is_some());
    assert!(
        loaded.journal.len() < 10,
        "only what followed the checkpoint is journaled: {}",
        loaded.journal.len()
    );
    assert_eq!(tree_json(&reload(&engine, 1)), tree_json(&s));
}

#[test]
fn auth_changes_take_etcds_store_indexes_and_survive_a_reload() {
    let engine = MemEngine::new();
    let mut s = V2State::new(1);
    let auth = |op: AuthOp| V2Request {
        method: "AUTH".into(),
        auth_op: Proposal {
            op,
            render: Render::V2Empty,
        }
        .encode(),
        time: NOW,
        ..Default::default()
    };
    let root = AuthOp::CreateUser {
        name: "root".into(),
        password_hash: actcd_v2auth::hash_password("pw", 4).unwrap(),
        roles: vec![],
        strict: false,
    };
    let before = s.tree().index();
    let out = s.apply(5, 2, &auth(root.clone()), NOW);
    commit(&engine, &out.ops);
    // The auth directories and the enabled flag (4), then the user (1).
    assert_eq!(s.tree().index(), before + 5);
    let again = s.apply(6, 2, &auth(root), NOW);
    assert_eq!(again.reply.status, 409);
    assert_eq!(
        s.tree().index(),
        before + 5,
        "a refused create takes no index"
    );
    let out = s.apply(7, 2, &auth(AuthOp::Enable), NOW);
    commit(&engine, &out.ops);
    // The guest role and the flag.
    assert_eq!(s.tree().index(), before + 7);
    assert!(s.auth().enabled);
    let back = reload(&engine, 1);
    assert!(back.auth().enabled);
    assert!(back.auth().users.contains_key("root"));
    assert_eq!(back.tree().index(), s.tree().index());
}

#[test]
fn a_sync_expires_keys_and_is_journaled() {
    let engine = MemEngine::new();
    let mut s = V2State::new(1);
    let mut ttl = put("/t", "x");
    ttl.expiration = NOW + 1_000_000_000;
    commit(&engine, &s.apply(5, 2, &ttl, NOW).ops);
    assert!(!s.expiry_due(NOW));
    assert!(s.expiry_due(NOW + 2_000_000_000));
    let sync = V2Request {
        method: "SYNC".into(),
        time: NOW + 2_000_000_000,
        ..Default::default()
    };
    commit(&engine, &s.apply(6, 2, &sync, NOW).ops);
    assert_eq!(s.get("/t", false, false, NOW).status, 404);
    assert_eq!(reload(&engine, 1).get("/t", false, false, NOW).status, 404);
}

#[test]
fn a_quorum_read_answers_and_records_nothing() {
    let mut s = V2State::new(1);
    s.apply(5, 2, &put("/a", "1"), NOW);
    let q = V2Request {
        method: "QGET".into(),
        path: "/a".into(),
        ..Default::default()
    };
    let out = s.apply(6, 2, &q, NOW);
    assert_eq!(out.reply.status, 200);
    assert!(out.ops.is_empty());
}
