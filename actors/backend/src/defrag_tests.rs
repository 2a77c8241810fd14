//! Online defragmentation's tests: commits made during the copy replayed into it, readers of
//! the old file reading on, crashes at each step, and the actor committing meanwhile.

use std::sync::Arc;

use actcd_types::msg::{Commit, Defragment, Flush};
use actcd_types::storage::{KvEngine, META_CONSISTENT_INDEX, Op, ReadTxn, Table, write_ops};
use actix::Actor;

use crate::defrag::{DefragRun, DefragStep, FINAL_ROUND_OPS, MAX_ROUNDS};
use crate::{BackendActor, BackendOptions, LmdbEngine};

fn open(dir: &tempfile::TempDir) -> LmdbEngine {
    let opts = BackendOptions {
        map_size: 256 << 20,
        ..BackendOptions::default()
    };
    LmdbEngine::open(dir.path(), opts).unwrap()
}

fn put(table: Table, key: &[u8], value: &[u8]) -> Op {
    Op::Put {
        table,
        key: key.to_vec(),
        value: value.into(),
    }
}

fn del(table: Table, key: &[u8]) -> Op {
    Op::Delete {
        table,
        key: key.to_vec(),
    }
}

fn commit(seq: u64, ops: Vec<Op>) -> Commit {
    Commit {
        seq,
        ops,
        consistent_index: Some((seq, 1)),
    }
}

/// Writes `c` as the one writer would (its own transaction, committed).
fn write(engine: &LmdbEngine, c: &Commit) {
    let mut w = engine.write().unwrap();
    write_ops(&mut *w, &c.ops, c.consistent_index).unwrap();
    w.commit().unwrap();
}

/// Every record of every table, in order.
type Everything = Vec<(Table, Vec<u8>, Vec<u8>)>;

/// Every record of every table.
fn everything(engine: &LmdbEngine) -> Everything {
    let r = engine.read().unwrap();
    let mut all = Vec::new();
    for table in Table::ALL {
        r.scan(table, &[], None, &mut |k, v| {
            all.push((table, k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
    }
    all
}

/// 4,000 keys of 200 bytes, 90% of them deleted again: a file a copy makes much smaller.
fn fragmented(engine: &LmdbEngine) {
    let ops = (0..4000u32)
        .map(|i| put(Table::Key, &i.to_be_bytes(), &[7; 200]))
        .collect();
    write(engine, &commit(1, ops));
    let ops = (0..4000u32)
        .filter(|i| i % 10 != 0)
        .map(|i| del(Table::Key, &i.to_be_bytes()))
        .collect();
    write(engine, &commit(2, ops));
}

#[test]
fn commits_from_before_and_after_the_copys_snapshot_replay_into_it_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(&dir);
    fragmented(&engine);
    write(
        &engine,
        &commit(3, vec![put(Table::Key, b"gone-later", b"1")]),
    );
    let mut run = DefragRun::new();
    // Recorded before the copy's snapshot: replayed onto a copy that holds them already. A key
    // written then deleted, a key deleted that existed, a key overwritten.
    for c in [
        commit(
            4,
            vec![put(Table::Key, b"flip", b"a"), del(Table::Key, b"flip")],
        ),
        commit(5, vec![del(Table::Key, &0u32.to_be_bytes())]),
        commit(6, vec![put(Table::Meta, b"m", b"1")]),
    ] {
        write(&engine, &c);
        run.record(c);
    }
    let copy = engine.defrag_copy().unwrap();
    // After it: overwritten again, deleted, re-created, and a new table's record.
    for c in [
        commit(
            7,
            vec![put(Table::Meta, b"m", b"2"), del(Table::Key, b"gone-later")],
        ),
        commit(8, vec![put(Table::Key, b"flip", b"b")]),
        commit(9, vec![put(Table::Lease, b"l", b"x")]),
    ] {
        write(&engine, &c);
        run.record(c);
    }
    let want = everything(&engine);
    let DefragStep::Finish(log) = run.next_step() else {
        panic!("a few ops finish on the writer's thread");
    };
    assert_eq!(log.len(), 6);
    copy.replay(&engine, &log).unwrap();
    let (before, after) = engine.defrag_swap(copy).unwrap();
    assert!(after < before / 2, "{before} -> {after}");
    assert_eq!(everything(&engine), want);
    // The data file stays the member's alone (it was 0644 after a defragmentation, found by
    // beyond-large.sh; etcd's bbolt copy is 0600 too).
    use std::os::unix::fs::PermissionsExt;
    let data = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .find(|e| e.file_name() == "data.mdb")
        .expect("the data file");
    assert_eq!(data.metadata().unwrap().permissions().mode() & 0o777, 0o600);
    let r = engine.read().unwrap();
    assert_eq!(
        r.get(Table::Meta, META_CONSISTENT_INDEX).unwrap(),
        Some(9u64.to_be_bytes().to_vec())
    );
    drop(r);

    // What a restart opens is the same.
    engine.force_sync().unwrap();
    drop(engine);
    let engine = open(&dir);
    assert_eq!(everything(&engine), want);
    assert_eq!(leftovers(&dir), Vec::<String>::new());
}

#[test]
fn many_ops_replay_on_workers_in_rounds_then_finish() {
    let mut run = DefragRun::new();
    let big = |seq| {
        commit(
            seq,
            (0..FINAL_ROUND_OPS as u32)
                .map(|i| put(Table::Key, &i.to_be_bytes(), b"v"))
                .collect(),
        )
    };
    run.record(big(1));
    run.record(big(2));
    assert!(matches!(run.next_step(), DefragStep::Replay(log) if log.len() == 2));
    run.record(commit(3, vec![]));
    assert!(matches!(run.next_step(), DefragStep::Finish(log) if log.len() == 1));
    // Writes as fast as the rounds: the last round runs on the writer's thread after
    // MAX_ROUNDS, whatever its size.
    let mut run = DefragRun::new();
    for round in 0..MAX_ROUNDS {
        run.record(big(u64::from(round)));
        run.record(big(u64::from(round)));
        assert!(matches!(run.next_step(), DefragStep::Replay(_)));
    }
    run.record(big(99));
    run.record(big(99));
    assert!(matches!(run.next_step(), DefragStep::Finish(log) if log.len() == 2));
    // A failure ends it.
    let mut run = DefragRun::new();
    run.record(big(1));
    run.fail("backend: lmdb: disk on fire".into());
    run.record(big(2));
    assert!(matches!(run.next_step(), DefragStep::Abort(why) if why.contains("disk on fire")));
}

#[test]
fn a_reader_of_the_old_file_reads_on_after_the_swap_which_does_not_wait_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(&dir);
    fragmented(&engine);
    let old = engine.read().unwrap();
    let (before, after) = engine.defragment().unwrap();
    assert!(after < before);
    write(&engine, &commit(3, vec![put(Table::Key, b"new", b"1")]));
    // The old snapshot: 400 keys, not the new one; new readers see it.
    let keys = |r: &dyn ReadTxn| {
        let mut n = 0;
        r.scan(Table::Key, &[], None, &mut |_, _| {
            n += 1;
            true
        })
        .unwrap();
        n
    };
    assert_eq!(keys(&*old), 400);
    assert_eq!(keys(&*engine.read().unwrap()), 401);
    // The old environment stays open while its reader does, and closes after.
    reap(&engine);
    assert_eq!(engine.retired_generations(), 1);
    drop(old);
    reap(&engine);
    assert_eq!(engine.retired_generations(), 0);

    // A second defragmentation retires the first one's environment and its directory.
    assert_eq!(leftovers(&dir), vec!["defrag-1".to_string()]);
    engine.defragment().unwrap();
    reap(&engine);
    assert_eq!(engine.retired_generations(), 0);
    assert_eq!(leftovers(&dir), vec!["defrag-2".to_string()]);
    assert_eq!(keys(&*engine.read().unwrap()), 401);
}

/// Closes the replaced environments nothing holds, and waits until they are closed.
fn reap(engine: &LmdbEngine) {
    for closing in engine.reap_retired() {
        closing.join().unwrap();
    }
}

/// The `defrag-N` directories in the environment's directory.
fn leftovers(dir: &tempfile::TempDir) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| n.starts_with("defrag-"))
        .collect();
    found.sort();
    found
}

#[test]
fn a_crash_with_a_copy_made_and_not_swapped_in_keeps_the_data_file() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(&dir);
    fragmented(&engine);
    let copy = engine.defrag_copy().unwrap();
    write(
        &engine,
        &commit(3, vec![put(Table::Key, b"after-copy", b"1")]),
    );
    let want = everything(&engine);
    engine.force_sync().unwrap();
    // A crash runs no destructor: the copy's directory stays, its environment open.
    std::mem::forget(copy);
    drop(engine);
    assert_eq!(leftovers(&dir), vec!["defrag-1".to_string()]);
    let engine = open(&dir);
    assert_eq!(everything(&engine), want);
    assert_eq!(leftovers(&dir), Vec::<String>::new());
}

#[test]
fn the_actor_commits_while_it_defragments_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(open(&dir));
    fragmented(&engine);
    let sys = actix::System::new();
    let answer = sys.block_on({
        let engine = engine.clone();
        async move {
            let addr = BackendActor::new(engine).start();
            let defrag = addr.send(Defragment);
            // Sent after the Defragment: written while it copies and replays, each commit
            // more than a round's worth so that rounds run on workers.
            for seq in 10..20u64 {
                let ops = (0..1000u32)
                    .map(|i| put(Table::Key, format!("w/{seq}/{i}").as_bytes(), b"v"))
                    .collect();
                addr.do_send(commit(seq, ops));
                addr.send(Flush).await.unwrap().unwrap();
            }
            let answer = defrag.await.unwrap();
            addr.send(Flush).await.unwrap().unwrap();
            answer
        }
    });
    let (before, after) = answer.unwrap();
    assert!(after < before, "{before} -> {after}");
    let all = everything(&engine);
    let written = all
        .iter()
        .filter(|(t, k, _)| *t == Table::Key && k.starts_with(b"w/"))
        .count();
    assert_eq!(written, 10_000);
    let r = engine.read().unwrap();
    assert_eq!(
        r.get(Table::Meta, META_CONSISTENT_INDEX).unwrap(),
        Some(19u64.to_be_bytes().to_vec())
    );
    drop(r);
    engine.force_sync().unwrap();
    drop(sys);
    let engine = Arc::into_inner(engine).expect("the actor is gone");
    drop(engine);
    let engine = open(&dir);
    assert_eq!(everything(&engine), all);
}

/// A blob of `n` sealed keys named `prefix/i`, with a consistent index and a member.
fn leader_blob(prefix: &str, n: u32) -> (Vec<u8>, Everything) {
    use actcd_types::key_record;
    use actcd_types::storage::MemEngine;
    let leader = MemEngine::default();
    let mut w = leader.write().unwrap();
    for i in 0..n {
        let k = format!("{prefix}/{i}");
        w.put(
            Table::Key,
            k.as_bytes(),
            &key_record::seal(k.as_bytes(), &[3; 500]),
        )
        .unwrap();
    }
    w.put(Table::Meta, META_CONSISTENT_INDEX, &77u64.to_be_bytes())
        .unwrap();
    let format = key_record::FORMAT_CHECKSUMMED.to_be_bytes();
    w.put(Table::Meta, key_record::FORMAT_META_KEY, &format)
        .unwrap();
    w.put(Table::Members, b"1", b"m").unwrap();
    w.commit().unwrap();
    let blob = actcd_etcd_snapshot::whole_store::encode(&*leader.read().unwrap()).unwrap();
    let records = actcd_etcd_snapshot::whole_store::decode(&blob)
        .unwrap()
        .into_iter()
        .map(|(t, k, v)| (t, k.to_vec(), v.to_vec()))
        .collect();
    (blob, records)
}

/// A leader's snapshot replaces the store, durably: built beside it in batches and swapped in
/// (ahead of time with `PrepareSnapshot`, or at once from the file); a defragmentation under
/// way when it comes ends with an error and swaps nothing in; a prepared store let go is
/// deleted.
#[test]
fn a_snapshot_replaces_the_store_and_ends_a_defragmentation_under_way() {
    use actcd_types::msg::{PrepareSnapshot, ReplaceStore};
    use actcd_types::snapshot_blob::{SnapshotBlob, StoreCopy};

    let (blob, want) = leader_blob("leader", 300);
    let (blob2, want2) = leader_blob("later", 5_000);
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(open(&dir));
    fragmented(&engine);
    let file = |data: &[u8]| SnapshotBlob::write(SnapshotBlob::incoming_path(dir.path()), data);
    let received = file(&blob).unwrap();
    let path = received.path().to_owned();
    let (received2, received3) = (file(&blob2).unwrap(), file(&blob2).unwrap());
    let sys = actix::System::new();
    let (defrag, first, dirs) = sys.block_on({
        let engine = engine.clone();
        let dir = dir.path().to_owned();
        async move {
            let addr = BackendActor::new(Arc::clone(&engine)).start();
            // Pending when the snapshot comes: committed first, then replaced with the rest.
            addr.do_send(commit(5, vec![put(Table::Lease, b"mine", b"x")]));
            let defrag = addr.send(Defragment);
            let copy = StoreCopy::Blob(received);
            addr.send(ReplaceStore { copy }).await.unwrap().unwrap();
            let defrag = defrag.await.unwrap();
            let after_first = everything(&engine);

            let prepared = addr
                .send(PrepareSnapshot { blob: received2 })
                .await
                .unwrap();
            let copy = StoreCopy::Prepared(prepared.unwrap());
            addr.send(ReplaceStore { copy }).await.unwrap().unwrap();

            let copies = |d: &std::path::Path| -> std::collections::BTreeSet<String> {
                std::fs::read_dir(d)
                    .unwrap()
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("defrag-"))
                    .collect()
            };
            let before = copies(&dir);
            let unused = addr
                .send(PrepareSnapshot { blob: received3 })
                .await
                .unwrap();
            let while_held = copies(&dir);
            drop(unused);
            addr.send(Flush).await.unwrap().unwrap();
            (defrag, after_first, (before, while_held, copies(&dir)))
        }
    });
    let err = defrag.unwrap_err().to_string();
    assert!(
        err.contains("a snapshot from the leader replaced the store"),
        "{err}"
    );
    assert!(!path.exists(), "the received copy goes once installed");
    assert_eq!(first, want);
    assert_eq!(everything(&engine), want2, "the prepared store is in use");
    // Replaced stores close on threads of their own: only the new name is looked at.
    let (before, while_held, after) = dirs;
    let new: Vec<_> = while_held.difference(&before).collect();
    assert_eq!(new.len(), 1, "{before:?} -> {while_held:?}");
    assert!(
        !after.contains(new[0]),
        "a store let go is deleted: {after:?}"
    );
    drop(sys);
    let engine = Arc::into_inner(engine).expect("the actor is gone");
    drop(engine);
    let engine = open(&dir);
    assert_eq!(everything(&engine), want2, "durable");
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
    assert!(
        std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("incoming-")),
        "every received file is gone"
    );
}
