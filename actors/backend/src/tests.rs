//! The engine's behaviour through the storage traits, on real LMDB files in temp directories.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;

use actcd_types::Revision;
use actcd_types::storage::{KvEngine, ReadTxn, Table};
use heed::EnvFlags;

use crate::engine::table_index;
use crate::{BackendError, BackendOptions, Durability, LmdbEngine};

fn small() -> BackendOptions {
    BackendOptions {
        map_size: 64 << 20,
        ..BackendOptions::default()
    }
}

fn open(dir: &tempfile::TempDir) -> LmdbEngine {
    LmdbEngine::open(dir.path(), small()).unwrap()
}

fn scan_all(r: &dyn ReadTxn, table: Table, from: &[u8], to: Option<&[u8]>) -> Vec<Vec<u8>> {
    let mut keys = vec![];
    r.scan(table, from, to, &mut |k, _| {
        keys.push(k.to_vec());
        true
    })
    .unwrap();
    keys
}

#[test]
fn engine_is_send_and_sync() {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<LmdbEngine>();
}

/// `etcd_mvcc_db_open_read_transactions`: read transactions are counted while open, owned
/// ones too, and not once they end.
#[test]
fn open_read_transactions_are_counted_until_they_end() {
    let dir = tempfile::tempdir().unwrap();
    let e = std::sync::Arc::new(open(&dir));
    assert_eq!(e.open_read_transactions(), 0);
    let a = e.read().unwrap();
    let b = e.clone().read_owned().unwrap();
    assert_eq!(e.open_read_transactions(), 2);
    drop(a);
    assert_eq!(e.open_read_transactions(), 1);
    drop(b);
    assert_eq!(e.open_read_transactions(), 0);
}

#[test]
fn tables_are_indexed_in_declaration_order() {
    for (i, t) in Table::ALL.iter().enumerate() {
        assert_eq!(table_index(*t), i, "{t:?}");
    }
}

#[test]
fn put_get_scan_delete_in_every_table() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir);
    let mut w = e.write().unwrap();
    for t in Table::ALL {
        for k in [b"a", b"b", b"c"] {
            w.put(t, k, format!("{}-{}", t.name(), k[0] as char).as_bytes())
                .unwrap();
        }
    }
    w.commit().unwrap();

    let mut w = e.write().unwrap();
    for t in Table::ALL {
        w.delete(t, b"b").unwrap();
        w.delete(t, b"never-written").unwrap();
    }
    w.commit().unwrap();

    let r = e.read().unwrap();
    for t in Table::ALL {
        let want_a = format!("{}-a", t.name()).into_bytes();
        assert_eq!(r.get(t, b"a").unwrap(), Some(want_a), "{t:?}");
        assert_eq!(r.get(t, b"b").unwrap(), None, "{t:?}");
        let mut seen = vec![];
        r.scan(t, b"a", None, &mut |k, v| {
            seen.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
        let want: Vec<(Vec<u8>, Vec<u8>)> = [b"a", b"c"]
            .iter()
            .map(|k| {
                (
                    k.to_vec(),
                    format!("{}-{}", t.name(), k[0] as char).into_bytes(),
                )
            })
            .collect();
        assert_eq!(seen, want, "{t:?}");
    }
}

#[test]
fn a_write_txn_reads_its_own_writes() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir);
    let mut w = e.write().unwrap();
    w.put(Table::Key, b"k1", b"v1").unwrap();
    w.put(Table::Key, b"k2", b"v2").unwrap();
    w.put(Table::Key, b"k1", b"v1'").unwrap();
    w.delete(Table::Key, b"k2").unwrap();
    w.put(Table::Key, b"k3", b"v3").unwrap();
    assert_eq!(w.get(Table::Key, b"k1").unwrap(), Some(b"v1'".to_vec()));
    assert_eq!(w.get(Table::Key, b"k2").unwrap(), None);
    assert_eq!(
        scan_all(&*w, Table::Key, b"", None),
        vec![b"k1".to_vec(), b"k3".to_vec()]
    );
    // Another table is untouched.
    assert_eq!(w.get(Table::Meta, b"k1").unwrap(), None);
    w.commit().unwrap();
    assert_eq!(
        e.read().unwrap().get(Table::Key, b"k1").unwrap(),
        Some(b"v1'".to_vec())
    );
}

#[test]
fn a_borrowed_read_lends_what_get_copies() {
    use actcd_types::storage::read_with;
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir);
    let mut w = e.write().unwrap();
    w.put(Table::Key, b"k1", b"v1").unwrap();
    // The write txn lends its own uncommitted writes too.
    let lent = read_with(&*w, Table::Key, b"k1", |v| v.map(<[u8]>::to_vec)).unwrap();
    assert_eq!(lent, Some(b"v1".to_vec()));
    w.commit().unwrap();
    let r = e.read().unwrap();
    for key in [&b"k1"[..], b"absent", &[b'k'; 4096]] {
        let lent = read_with(&*r, Table::Key, key, |v| v.map(<[u8]>::to_vec)).unwrap();
        assert_eq!(lent, r.get(Table::Key, key).unwrap(), "{key:?}");
    }
}

#[test]
fn a_dropped_write_txn_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir);
    let mut w = e.write().unwrap();
    w.put(Table::Key, b"base", b"1").unwrap();
    w.commit().unwrap();

    let mut w = e.write().unwrap();
    w.put(Table::Key, b"lost", b"2").unwrap();
    w.delete(Table::Key, b"base").unwrap();
    drop(w);

    let r = e.read().unwrap();
    assert_eq!(r.get(Table::Key, b"lost").unwrap(), None);
    assert_eq!(r.get(Table::Key, b"base").unwrap(), Some(b"1".to_vec()));
    drop(r);
    // The writer lock was released: a new write transaction opens at once.
    e.write().unwrap().commit().unwrap();
}

#[test]
fn a_read_txn_keeps_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir);
    let mut w = e.write().unwrap();
    w.put(Table::Meta, b"consistent_index", &1u64.to_be_bytes())
        .unwrap();
    w.commit().unwrap();

    let before = e.read().unwrap();
    let mut w = e.write().unwrap();
    w.put(Table::Meta, b"consistent_index", &2u64.to_be_bytes())
        .unwrap();
    w.put(Table::Key, &Revision::new(2, 0).to_bytes(false), b"kv")
        .unwrap();
    w.commit().unwrap();
    let after = e.read().unwrap();

    assert_eq!(
        before.get(Table::Meta, b"consistent_index").unwrap(),
        Some(1u64.to_be_bytes().to_vec())
    );
    assert!(scan_all(&*before, Table::Key, b"", None).is_empty());
    assert_eq!(
        after.get(Table::Meta, b"consistent_index").unwrap(),
        Some(2u64.to_be_bytes().to_vec())
    );
    assert_eq!(scan_all(&*after, Table::Key, b"", None).len(), 1);
}

#[test]
fn one_thread_holds_several_read_txns() {
    // Without thread-local reader slots this is allowed; with them LMDB says MDB_BAD_RSLOT.
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir);
    let reads: Vec<_> = (0..8).map(|_| e.read().unwrap()).collect();
    for r in &reads {
        assert_eq!(r.get(Table::Key, b"x").unwrap(), None);
    }
}

#[test]
fn committed_data_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = open(&dir);
        let mut w = e.write().unwrap();
        for main in 1..=100i64 {
            w.put(
                Table::Key,
                &Revision::new(main, 0).to_bytes(false),
                &main.to_be_bytes(),
            )
            .unwrap();
        }
        w.put(Table::Meta, b"consistent_index", &100u64.to_be_bytes())
            .unwrap();
        w.commit().unwrap();
        // An uncommitted transaction at close is discarded.
        let mut w = e.write().unwrap();
        w.put(Table::Meta, b"consistent_index", &101u64.to_be_bytes())
            .unwrap();
    }
    let e = open(&dir);
    let r = e.read().unwrap();
    assert_eq!(
        r.get(Table::Meta, b"consistent_index").unwrap(),
        Some(100u64.to_be_bytes().to_vec())
    );
    let keys = scan_all(&*r, Table::Key, b"", None);
    assert_eq!(keys.len(), 100);
    assert_eq!(
        Revision::from_bytes(&keys[99]),
        Some((Revision::new(100, 0), false))
    );
}

#[test]
fn scan_visits_from_inclusive_to_exclusive_and_stops_when_told() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir);
    let rev = |main: i64, tombstone: bool| Revision::new(main, 0).to_bytes(tombstone);
    let mut w = e.write().unwrap();
    for main in 1..=5 {
        w.put(Table::Key, &rev(main, main == 4), b"v").unwrap();
    }
    w.commit().unwrap();

    struct Case {
        name: &'static str,
        from: Vec<u8>,
        to: Option<Vec<u8>>,
        take: usize,
        want_mains: Vec<i64>,
    }
    let cases = [
        Case {
            name: "all",
            from: vec![],
            to: None,
            take: usize::MAX,
            want_mains: vec![1, 2, 3, 4, 5],
        },
        Case {
            name: "from is inclusive, to exclusive",
            from: rev(2, false),
            to: Some(rev(4, false)),
            take: usize::MAX,
            want_mains: vec![2, 3],
        },
        Case {
            // The 18-byte tombstone key sorts after its 17-byte revision.
            name: "tombstone past a bare revision bound",
            from: rev(4, false),
            to: Some(rev(5, false)),
            take: usize::MAX,
            want_mains: vec![4],
        },
        Case {
            name: "from between keys",
            from: Revision::new(2, 1).to_bytes(false),
            to: None,
            take: usize::MAX,
            want_mains: vec![3, 4, 5],
        },
        Case {
            name: "empty range",
            from: rev(3, false),
            to: Some(rev(3, false)),
            take: usize::MAX,
            want_mains: vec![],
        },
        Case {
            name: "reversed range",
            from: rev(4, false),
            to: Some(rev(2, false)),
            take: usize::MAX,
            want_mains: vec![],
        },
        Case {
            name: "past the end",
            from: rev(6, false),
            to: None,
            take: usize::MAX,
            want_mains: vec![],
        },
        Case {
            name: "early stop",
            from: vec![],
            to: None,
            take: 2,
            want_mains: vec![1, 2],
        },
        Case {
            name: "stop at first",
            from: rev(3, false),
            to: None,
            take: 1,
            want_mains: vec![3],
        },
    ];
    let r = e.read().unwrap();
    for c in cases {
        let mut got = vec![];
        r.scan(Table::Key, &c.from, c.to.as_deref(), &mut |k, _| {
            got.push(Revision::from_bytes(k).unwrap().0.main);
            got.len() < c.take
        })
        .unwrap();
        assert_eq!(got, c.want_mains, "{}", c.name);
    }
}

#[test]
fn size_grows_with_data() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir);
    let (disk0, used0) = e.size().unwrap();
    assert!(used0 > 0 && disk0 >= used0, "disk {disk0} used {used0}");

    let mut w = e.write().unwrap();
    for main in 0..1000i64 {
        w.put(
            Table::Key,
            &Revision::new(main, 0).to_bytes(false),
            &[7u8; 256],
        )
        .unwrap();
    }
    w.commit().unwrap();
    let (disk1, used1) = e.size().unwrap();
    // 1000 × (17 + 256) bytes of payload cannot fit in fewer pages.
    assert!(
        used1 >= used0 + 1000 * (17 + 256),
        "used {used0} -> {used1}"
    );
    assert!(disk1 >= used1, "disk {disk1} used {used1}");
    assert!(disk1 > disk0);

    // Deleting frees pages: in use falls, the file doesn't shrink.
    let mut w = e.write().unwrap();
    for main in 0..1000i64 {
        w.delete(Table::Key, &Revision::new(main, 0).to_bytes(false))
            .unwrap();
    }
    w.commit().unwrap();
    let (disk2, used2) = e.size().unwrap();
    assert!(used2 < used1, "used {used1} -> {used2}");
    assert!(disk2 >= disk1);
}

#[test]
fn readers_run_while_a_writer_holds_its_txn() {
    // The writer keeps its transaction open until the reader thread has read: if reads waited
    // for the writer this would deadlock.
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir);
    let (read_done, wait_read) = mpsc::channel();
    thread::scope(|s| {
        let mut w = e.write().unwrap();
        w.put(Table::Key, b"k", b"uncommitted").unwrap();
        s.spawn(|| {
            let r = e.read().unwrap();
            read_done.send(r.get(Table::Key, b"k").unwrap()).unwrap();
        });
        assert_eq!(wait_read.recv().unwrap(), None);
        w.commit().unwrap();
    });
    assert_eq!(
        e.read().unwrap().get(Table::Key, b"k").unwrap(),
        Some(b"uncommitted".to_vec())
    );
}

#[test]
fn concurrent_readers_see_whole_commits_while_one_thread_writes() {
    // Each commit writes `batch` new revisions and bumps `count` to the total: a reader that
    // sees a count must see exactly that many revisions, whatever the interleaving.
    const COMMITS: i64 = 200;
    const BATCH: i64 = 10;
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir);
    let writing = AtomicBool::new(true);

    let check = |reads: &mut u64| -> bool {
        let r = e.read().unwrap();
        let count = r
            .get(Table::Meta, b"count")
            .unwrap()
            .map_or(0, |v| i64::from_be_bytes(v.try_into().unwrap()));
        let mut seen = 0i64;
        r.scan(Table::Key, b"", None, &mut |_, _| {
            seen += 1;
            true
        })
        .unwrap();
        assert_eq!(seen, count, "a reader saw a partial commit");
        *reads += 1;
        count == COMMITS * BATCH
    };

    thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut reads = 0u64;
                    // Read while the writer runs, then once more after it finished.
                    while writing.load(Ordering::Acquire) {
                        check(&mut reads);
                    }
                    assert!(
                        check(&mut reads),
                        "the last commit is visible after the writer ends"
                    );
                    reads
                })
            })
            .collect();
        s.spawn(|| {
            for c in 0..COMMITS {
                let mut w = e.write().unwrap();
                for sub in 0..BATCH {
                    w.put(Table::Key, &Revision::new(c + 1, sub).to_bytes(false), b"v")
                        .unwrap();
                }
                w.put(Table::Meta, b"count", &((c + 1) * BATCH).to_be_bytes())
                    .unwrap();
                w.commit().unwrap();
            }
            writing.store(false, Ordering::Release);
        });
        for r in readers {
            assert!(r.join().unwrap() >= 1);
        }
    });
}

#[test]
fn a_full_map_is_an_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let e = LmdbEngine::open(
        dir.path(),
        BackendOptions {
            map_size: 1 << 20,
            ..BackendOptions::default()
        },
    )
    .unwrap();
    let mut w = e.write().unwrap();
    w.put(Table::Meta, b"consistent_index", &1u64.to_be_bytes())
        .unwrap();
    w.commit().unwrap();

    let mut w = e.write().unwrap();
    let err = (0..10_000i64)
        .find_map(|main| {
            w.put(
                Table::Key,
                &Revision::new(main, 0).to_bytes(false),
                &[0u8; 1024],
            )
            .err()
        })
        .expect("1 MiB map fills up");
    assert!(err.to_string().contains("database space exceeded"), "{err}");
    drop(w);
    // The failed transaction is gone; the last commit is intact and writable again.
    let r = e.read().unwrap();
    assert_eq!(
        r.get(Table::Meta, b"consistent_index").unwrap(),
        Some(1u64.to_be_bytes().to_vec())
    );
    assert!(scan_all(&*r, Table::Key, b"", None).is_empty());
    drop(r);
    let mut w = e.write().unwrap();
    w.put(Table::Meta, b"term", &2u64.to_be_bytes()).unwrap();
    w.commit().unwrap();
}

#[test]
fn durability_sets_lmdb_sync_flags() {
    struct Case {
        durability: Durability,
        want_set: EnvFlags,
        want_unset: EnvFlags,
    }
    let cases = [
        Case {
            durability: Durability::NoSync,
            want_set: EnvFlags::NO_SYNC,
            want_unset: EnvFlags::NO_META_SYNC,
        },
        Case {
            durability: Durability::NoMetaSync,
            want_set: EnvFlags::NO_META_SYNC,
            want_unset: EnvFlags::NO_SYNC,
        },
        Case {
            durability: Durability::EveryCommit,
            want_set: EnvFlags::empty(),
            want_unset: EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC,
        },
    ];
    for c in cases {
        let dir = tempfile::tempdir().unwrap();
        let e = LmdbEngine::open(
            dir.path(),
            BackendOptions {
                durability: c.durability,
                ..small()
            },
        )
        .unwrap();
        let flags = EnvFlags::from_bits_truncate(e.env_flags());
        assert!(flags.contains(c.want_set), "{:?}: {flags:?}", c.durability);
        assert!(
            !flags.intersects(c.want_unset),
            "{:?}: {flags:?}",
            c.durability
        );
        let mut w = e.write().unwrap();
        w.put(Table::Key, b"k", b"v").unwrap();
        w.commit().unwrap();
        e.sync().unwrap();
    }
}

#[test]
fn map_size_is_rounded_and_defaults_to_8_gib() {
    assert_eq!(BackendOptions::default().map_size, 8 << 30);
    let dir = tempfile::tempdir().unwrap();
    let e = LmdbEngine::open(
        dir.path(),
        BackendOptions {
            map_size: (1 << 20) + 1,
            ..BackendOptions::default()
        },
    )
    .unwrap();
    assert_eq!(e.map_size(), (1 << 20) + 64 * 1024);
}

#[test]
fn a_second_open_of_the_same_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _e = open(&dir);
    let err = LmdbEngine::open(dir.path(), small()).unwrap_err();
    assert!(matches!(err, BackendError::Open { .. }), "{err}");
}

#[test]
fn keys_lmdb_cannot_store_are_absent_and_refused() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir);
    let max = e.max_key_size();
    assert_eq!(max, 511);
    let longest = vec![b'u'; max];
    let too_long = vec![b'u'; max + 1];
    let mut w = e.write().unwrap();
    for key in [&too_long[..], b""] {
        let err = w.put(Table::AuthUsers, key, b"user").unwrap_err();
        let want = format!(
            "backend: a key of {} bytes cannot be stored (LMDB keys are 1 to 511 bytes)",
            key.len()
        );
        assert_eq!(err.to_string(), want);
        assert_eq!(w.get(Table::AuthUsers, key).unwrap(), None);
        w.delete(Table::AuthUsers, key).unwrap();
    }
    w.put(Table::AuthUsers, &longest, b"longest").unwrap();
    w.put(Table::AuthUsers, b"v", b"after").unwrap();
    w.commit().unwrap();

    // A scan may start past the limit: `longest` < `too_long` < "v".
    let r = e.read().unwrap();
    assert_eq!(
        scan_all(&*r, Table::AuthUsers, &too_long, None),
        vec![b"v".to_vec()]
    );
    assert_eq!(
        scan_all(&*r, Table::AuthUsers, &longest, None),
        vec![longest.clone(), b"v".to_vec()]
    );
    assert_eq!(
        scan_all(&*r, Table::AuthUsers, b"", Some(&too_long)),
        vec![longest]
    );
}

#[test]
fn an_owned_write_txn_outlives_the_callers_handle() {
    let dir = tempfile::tempdir().unwrap();
    let engine = std::sync::Arc::new(LmdbEngine::open(dir.path(), small()).unwrap());
    // Dropped uncommitted: nothing lands.
    let mut w = std::sync::Arc::clone(&engine).write_owned().unwrap();
    w.put(Table::Key, b"gone", b"x").unwrap();
    drop(w);
    // The transaction keeps the engine alive even when it is the last handle.
    let mut w = std::sync::Arc::clone(&engine).write_owned().unwrap();
    let reader = std::sync::Arc::downgrade(&engine);
    drop(engine);
    w.put(Table::Key, b"kept", b"v").unwrap();
    assert_eq!(w.get(Table::Key, b"kept").unwrap(), Some(b"v".to_vec()));
    w.commit().unwrap();
    assert!(reader.upgrade().is_none(), "commit released the engine");
    let engine = LmdbEngine::open(dir.path(), small()).unwrap();
    let r = engine.read().unwrap();
    assert_eq!(r.get(Table::Key, b"kept").unwrap(), Some(b"v".to_vec()));
    assert_eq!(r.get(Table::Key, b"gone").unwrap(), None);
}

fn fill(engine: &LmdbEngine, n: u32) {
    let mut w = engine.write().unwrap();
    for i in 0..n {
        w.put(Table::Key, &i.to_be_bytes(), &[i as u8; 200])
            .unwrap();
    }
    w.commit().unwrap();
}

#[test]
fn defragment_gives_freed_pages_back_and_keeps_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(&dir);
    fill(&engine, 20_000);
    let mut w = engine.write().unwrap();
    for i in (0..20_000u32).filter(|i| i % 10 != 0) {
        w.delete(Table::Key, &i.to_be_bytes()).unwrap();
    }
    w.commit().unwrap();
    let (size, in_use) = engine.disk_size().unwrap();
    assert!(
        in_use < size / 3,
        "deleting 90% frees pages: {in_use} of {size}"
    );

    let (before, after) = engine.defragment().unwrap();
    assert_eq!(before, size);
    assert!(after < before / 3, "{before} -> {after}");
    assert_eq!(engine.disk_size().unwrap().0, after);
    let r = engine.read().unwrap();
    let keys = scan_all(&*r, Table::Key, &[], None);
    let want: Vec<Vec<u8>> = (0..20_000u32)
        .filter(|i| i % 10 == 0)
        .map(|i| i.to_be_bytes().to_vec())
        .collect();
    assert_eq!(keys, want);
    assert_eq!(
        r.get(Table::Key, &10u32.to_be_bytes()).unwrap(),
        Some(vec![10u8; 200])
    );
    drop(r);

    // The swapped-in environment takes writes, and is what a restart opens.
    let mut w = engine.write().unwrap();
    w.put(Table::Meta, b"after", b"defrag").unwrap();
    w.commit().unwrap();
    engine.force_sync().unwrap();
    drop(engine);
    let engine = open(&dir);
    let r = engine.read().unwrap();
    assert_eq!(scan_all(&*r, Table::Key, &[], None).len(), 2000);
    assert_eq!(
        r.get(Table::Meta, b"after").unwrap(),
        Some(b"defrag".to_vec())
    );
    assert!(!dir.path().join("data.mdb.defrag").exists());
}

#[test]
fn a_crash_before_the_swap_leaves_the_old_file_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(&dir);
    fill(&engine, 100);
    engine.force_sync().unwrap();
    drop(engine);
    // What a defragmentation that died before its rename leaves: a copy, whole or partial.
    std::fs::write(dir.path().join("data.mdb.defrag"), b"half a copy").unwrap();
    std::fs::write(dir.path().join("data.mdb.defrag.tmp"), b"a third").unwrap();
    let engine = open(&dir);
    assert_eq!(
        scan_all(&*engine.read().unwrap(), Table::Key, &[], None).len(),
        100
    );
    assert!(!dir.path().join("data.mdb.defrag").exists());
    assert!(!dir.path().join("data.mdb.defrag.tmp").exists());
}

/// Resident kB of this process's mappings of `file` (Linux: `/proc/self/smaps`).
#[cfg(target_os = "linux")]
fn mapped_rss_kb(file: &std::path::Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let name = file.to_str().unwrap();
    let mut inside = false;
    let mut kb = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or_default();
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            inside = line.ends_with(name);
        } else if inside && let Some(v) = line.strip_prefix("Rss:") {
            kb += v
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .unwrap();
        }
    }
    kb
}

/// After a scan of every page, letting go of the mapped pages leaves none of the data file
/// resident in this process, and every record reads the same afterwards.
#[cfg(target_os = "linux")]
#[test]
fn released_pages_leave_the_process_and_read_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir);
    let value = vec![7u8; 1000];
    let mut w = e.write().unwrap();
    for i in 0..4000u32 {
        w.put(Table::Key, &i.to_be_bytes(), &value).unwrap();
    }
    w.commit().unwrap();
    let data = e.path().join("data.mdb");
    let read_all = || {
        let r = e.read().unwrap();
        let mut n = 0;
        r.scan(Table::Key, b"", None, &mut |_, v| {
            assert_eq!(v, &value[..]);
            n += 1;
            true
        })
        .unwrap();
        n
    };
    assert_eq!(read_all(), 4000);
    let scanned = mapped_rss_kb(&data);
    assert!(scanned >= 4000, "{scanned} kB resident after reading 4 MB");
    e.release_mapped_pages().unwrap();
    assert_eq!(mapped_rss_kb(&data), 0);
    assert_eq!(read_all(), 4000);
    assert!(mapped_rss_kb(&data) >= 4000);
}

#[cfg(target_os = "linux")]
#[test]
fn mappings_are_found_by_their_exact_path() {
    let maps = "\
7f00a0000000-7f00a4000000 r--s 00000000 08:01 1234                       /d/member/snap/data.mdb
7f00b0000000-7f00b4000000 r--s 00000000 08:01 1200                       /d/member/snap/data.mdb (deleted)
7f00c0000000-7f00c0001000 rw-s 00000000 08:01 1235                       /d/member/snap/lock.mdb
7f00d0000000-7f00d0001000 r--s 00000000 08:01 1236                       /x/d/member/snap/data.mdbx
7f00e0000000-7f00e0001000 r--s 00000000 08:01 1237                       /e/d/member/snap/data.mdb
";
    let path = std::path::Path::new("/d/member/snap/data.mdb");
    assert_eq!(
        crate::engine::mappings_of(maps, path),
        vec![(0x7f00a0000000, 0x7f00a4000000)]
    );
}
