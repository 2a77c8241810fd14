use super::*;

#[derive(Clone, Copy)]
enum Op {
    Put(i64, i64),
    Del(i64, i64),
}

fn build(ops: &[Op]) -> KeyIndex {
    let mut ki = KeyIndex::new();
    for op in ops {
        match *op {
            Op::Put(m, s) => ki.put(Revision::new(m, s)),
            Op::Del(m, s) => ki
                .tombstone(Revision::new(m, s))
                .expect("tombstone a live key"),
        }
    }
    ki
}

/// Main revisions of each generation, oldest generation first.
fn shape(ki: &KeyIndex) -> Vec<Vec<i64>> {
    ki.generations()
        .iter()
        .map(|g| g.revisions().iter().map(|r| r.main).collect())
        .collect()
}

fn r(main: i64) -> Revision {
    Revision::new(main, 0)
}

/// etcd's own example: put(1) put(2) tombstone(3) put(4) tombstone(5).
const ETCD_EXAMPLE: &[Op] = &[
    Op::Put(1, 0),
    Op::Put(2, 0),
    Op::Del(3, 0),
    Op::Put(4, 0),
    Op::Del(5, 0),
];

#[test]
fn get_sees_the_write_visible_at_each_revision() {
    struct Case {
        name: &'static str,
        ops: &'static [Op],
        at: i64,
        /// (modified main, created main, version)
        want: Option<(i64, i64, i64)>,
    }
    const WALK: &[Op] = &[Op::Put(2, 0), Op::Put(3, 1), Op::Del(4, 0), Op::Put(5, 0)];
    let cases = [
        Case {
            name: "before creation",
            ops: WALK,
            at: 1,
            want: None,
        },
        Case {
            name: "first put",
            ops: WALK,
            at: 2,
            want: Some((2, 2, 1)),
        },
        Case {
            name: "second put",
            ops: WALK,
            at: 3,
            want: Some((3, 2, 2)),
        },
        Case {
            name: "at tombstone",
            ops: WALK,
            at: 4,
            want: None,
        },
        Case {
            name: "new generation",
            ops: WALK,
            at: 5,
            want: Some((5, 5, 1)),
        },
        Case {
            name: "future reads latest",
            ops: WALK,
            at: 99,
            want: Some((5, 5, 1)),
        },
        Case {
            name: "deleted key after tombstone",
            ops: ETCD_EXAMPLE,
            at: 7,
            want: None,
        },
        Case {
            name: "between generations",
            ops: ETCD_EXAMPLE,
            at: 3,
            want: None,
        },
        Case {
            name: "second generation",
            ops: ETCD_EXAMPLE,
            at: 4,
            want: Some((4, 4, 1)),
        },
    ];
    for c in cases {
        let ki = build(c.ops);
        let got = ki
            .get(c.at)
            .map(|k| (k.modified.main, k.created.main, k.version));
        assert_eq!(got, c.want, "{}", c.name);
    }
}

#[test]
fn generations_record_puts_and_tombstones() {
    let ki = build(&[Op::Put(2, 0), Op::Put(3, 1), Op::Del(4, 0), Op::Put(5, 0)]);
    assert_eq!(shape(&ki), vec![vec![2, 3, 4], vec![5]]);
    let g = &ki.generations()[0];
    assert_eq!((g.created(), g.version()), (r(2), 3));
    assert_eq!(g.revisions()[1], Revision::new(3, 1));
    assert_eq!(ki.modified(), r(5));

    let mut deleted = build(&[Op::Put(2, 0), Op::Del(3, 0)]);
    assert_eq!(shape(&deleted), vec![vec![2, 3], vec![]]);
    assert_eq!(
        deleted.tombstone(r(4)),
        Err(RevisionNotFound),
        "tombstone of a deleted key"
    );
    assert_eq!(
        KeyIndex::new().clone().tombstone(r(1)),
        Err(RevisionNotFound)
    );
}

#[test]
fn compact_keeps_what_reads_at_or_above_the_revision_need() {
    struct Case {
        name: &'static str,
        ops: &'static [Op],
        at: i64,
        want_keep: &'static [i64],
        want_shape: &'static [&'static [i64]],
        want_empty: bool,
    }
    let cases = [
        Case {
            name: "below everything keeps all",
            ops: ETCD_EXAMPLE,
            at: 0,
            want_keep: &[],
            want_shape: &[&[1, 2, 3], &[4, 5], &[]],
            want_empty: false,
        },
        Case {
            name: "keeps greatest at or below, drops older",
            ops: ETCD_EXAMPLE,
            at: 2,
            want_keep: &[2],
            want_shape: &[&[2, 3], &[4, 5], &[]],
            want_empty: false,
        },
        Case {
            // etcd 3.5.16 (#18474): a tombstone at the revision stays, alone.
            name: "generation ending at the revision keeps its tombstone",
            ops: ETCD_EXAMPLE,
            at: 3,
            want_keep: &[3],
            want_shape: &[&[3], &[4, 5], &[]],
            want_empty: false,
        },
        Case {
            name: "second generation kept from its put",
            ops: ETCD_EXAMPLE,
            at: 4,
            want_keep: &[4],
            want_shape: &[&[4, 5], &[]],
            want_empty: false,
        },
        Case {
            name: "compact at the last tombstone keeps it alone",
            ops: ETCD_EXAMPLE,
            at: 5,
            want_keep: &[5],
            want_shape: &[&[5], &[]],
            want_empty: false,
        },
        Case {
            name: "compact past the last tombstone empties the key",
            ops: ETCD_EXAMPLE,
            at: 6,
            want_keep: &[],
            want_shape: &[&[]],
            want_empty: true,
        },
        Case {
            name: "live key keeps its latest",
            ops: &[Op::Put(2, 0), Op::Put(3, 0), Op::Put(4, 0)],
            at: 10,
            want_keep: &[4],
            want_shape: &[&[4]],
            want_empty: false,
        },
        Case {
            name: "live key mid-history",
            ops: &[Op::Put(2, 0), Op::Put(3, 0), Op::Put(4, 0)],
            at: 3,
            want_keep: &[3],
            want_shape: &[&[3, 4]],
            want_empty: false,
        },
        Case {
            // A txn's delete and put of the key at the revision: the put supersedes the DELETE.
            name: "deleted and re-created at the revision keeps the put",
            ops: &[Op::Put(2, 0), Op::Del(4, 0), Op::Put(4, 1)],
            at: 4,
            want_keep: &[4],
            want_shape: &[&[4]],
            want_empty: false,
        },
        Case {
            name: "re-created key drops the old generation",
            ops: &[Op::Put(2, 0), Op::Del(3, 0), Op::Put(6, 0)],
            at: 4,
            want_keep: &[],
            want_shape: &[&[6]],
            want_empty: false,
        },
    ];
    for c in cases {
        let mut ki = build(c.ops);
        let mut keep = HashSet::new();
        ki.compact(c.at, &mut keep);
        let mut keep: Vec<i64> = keep.into_iter().map(|r| r.main).collect();
        keep.sort_unstable();
        assert_eq!(keep, c.want_keep, "{}: keep", c.name);
        let want: Vec<Vec<i64>> = c.want_shape.iter().map(|g| g.to_vec()).collect();
        assert_eq!(shape(&ki), want, "{}: generations", c.name);
        assert_eq!(ki.is_empty(), c.want_empty, "{}: empty", c.name);
    }
}

#[test]
fn compaction_keeps_versions_and_reads_at_or_above_it() {
    let mut ki = build(&[Op::Put(2, 0), Op::Put(3, 0), Op::Put(4, 0)]);
    let before: Vec<_> = (3..6).map(|at| ki.get(at)).collect();
    ki.compact(3, &mut HashSet::new());
    let after: Vec<_> = (3..6).map(|at| ki.get(at)).collect();
    assert_eq!(before, after);
    assert_eq!(ki.get(4).map(|k| k.version), Some(3));
    assert_eq!(ki.get(2), None, "compacted away");
    // Compacting again at the same revision changes nothing and keeps the same set.
    let mut keep = HashSet::new();
    let snapshot = ki.clone();
    ki.compact(3, &mut keep);
    assert_eq!(ki, snapshot);
    assert_eq!(keep, HashSet::from([r(3)]));
}

#[test]
fn restore_continues_versions_after_compaction() {
    let mut ki = KeyIndex::restore(r(2), r(5), 4);
    ki.put(r(7));
    assert_eq!(
        ki.get(5),
        Some(KeyRev {
            modified: r(5),
            created: r(2),
            version: 4,
            lease: None,
        })
    );
    assert_eq!(
        ki.get(7),
        Some(KeyRev {
            modified: r(7),
            created: r(2),
            version: 5,
            lease: Some(0),
        })
    );
}

#[test]
fn tree_ranges_follow_etcds_key_range_rules() {
    struct Case {
        name: &'static str,
        key: &'static [u8],
        range_end: &'static [u8],
        at: i64,
        want: &'static [&'static [u8]],
    }
    let mut t = TreeIndex::new();
    t.put(b"a", r(2));
    t.put(b"b", r(3));
    t.put(b"b/1", r(4));
    t.put(b"c", r(5));
    t.tombstone(b"b", r(6)).unwrap();
    let cases = [
        Case {
            name: "single",
            key: b"a",
            range_end: b"",
            at: 6,
            want: &[b"a"],
        },
        Case {
            name: "single missing",
            key: b"z",
            range_end: b"",
            at: 6,
            want: &[],
        },
        Case {
            name: "single deleted",
            key: b"b",
            range_end: b"",
            at: 6,
            want: &[],
        },
        Case {
            name: "single historical",
            key: b"b",
            range_end: b"",
            at: 5,
            want: &[b"b"],
        },
        Case {
            name: "span",
            key: b"a",
            range_end: b"c",
            at: 5,
            want: &[b"a", b"b", b"b/1"],
        },
        Case {
            name: "prefix",
            key: b"b",
            range_end: b"c",
            at: 6,
            want: &[b"b/1"],
        },
        Case {
            name: "from key",
            key: b"b",
            range_end: b"\0",
            at: 5,
            want: &[b"b", b"b/1", b"c"],
        },
        Case {
            name: "all keys",
            key: b"\0",
            range_end: b"\0",
            at: 6,
            want: &[b"a", b"b/1", b"c"],
        },
        Case {
            name: "before creation",
            key: b"\0",
            range_end: b"\0",
            at: 3,
            want: &[b"a", b"b"],
        },
        Case {
            name: "inverted",
            key: b"c",
            range_end: b"a",
            at: 6,
            want: &[],
        },
        Case {
            name: "empty span",
            key: b"a",
            range_end: b"a",
            at: 6,
            want: &[],
        },
    ];
    for c in cases {
        let range = KeyRange::new(c.key, c.range_end);
        let keys: Vec<&[u8]> = t.range(range, c.at).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, c.want, "{}", c.name);
        assert_eq!(t.count(range, c.at), c.want.len(), "{}: count", c.name);
    }
}

#[test]
fn tree_revisions_limit_but_count_all() {
    let mut t = TreeIndex::new();
    for (i, k) in [b"a", b"b", b"c", b"d"].iter().enumerate() {
        t.put(*k, r(i as i64 + 2));
    }
    let all = KeyRange::new(b"\0", b"\0");
    let (kvs, total) = t.revisions(all, 10, 2);
    assert_eq!((kvs.len(), total), (2, 4));
    assert_eq!(
        kvs[1],
        (
            &b"b"[..],
            KeyRev {
                modified: r(3),
                created: r(3),
                version: 1,
                lease: Some(0),
            }
        )
    );
    assert_eq!(t.revisions(all, 10, 0).0.len(), 4);
}

#[test]
fn tree_compaction_drops_empty_keys_and_returns_keep_set() {
    let mut t = TreeIndex::new();
    t.put(b"gone", r(2));
    t.put(b"live", r(3));
    t.tombstone(b"gone", r(4)).unwrap();
    t.put(b"live", r(5));
    // The tombstone at the compaction revision stays (etcd #18474), invisible to reads.
    let keep = t.compact(4);
    assert_eq!(keep, HashSet::from([r(3), r(4)]));
    assert_eq!(t.len(), 2);
    assert_eq!(t.live_len(), 1);
    assert_eq!(t.get(b"gone", 4), None);
    assert_eq!(t.count(KeyRange::FromKey(b""), 5), 1);
    // The next compaction drops it and the key.
    let keep = t.compact(5);
    assert_eq!(keep, HashSet::from([r(5)]));
    assert_eq!(t.len(), 1);
    assert!(t.key_index(b"gone").is_none());
    assert_eq!(t.get(b"live", 5).map(|k| k.version), Some(2));
}

#[test]
fn a_tombstone_at_the_compaction_revision_stays_until_the_next_one() {
    // etcd's TestKeyIndexCompactAndKeep after #18474: compact(5) of put 1, 2, del 3, put 4,
    // del 5 leaves {5(t)}, {}; `keep` (the hash's) still leaves the tombstone out.
    let mut ki = build(ETCD_EXAMPLE);
    let mut hashed = HashSet::new();
    ki.keep(5, &mut hashed);
    assert!(hashed.is_empty(), "{hashed:?}");
    let mut kept = HashSet::new();
    ki.compact(5, &mut kept);
    assert_eq!(kept, HashSet::from([r(5)]));
    assert_eq!(shape(&ki), vec![vec![5], vec![]]);
    assert!(!ki.is_live());
    assert!((0..8).all(|at| ki.get(at).is_none()));
    // Compacting at the same revision again changes nothing.
    let before = ki.clone();
    ki.compact(5, &mut HashSet::new());
    assert_eq!(ki, before);
    // A re-creation starts a generation after it; the next compaction drops the tombstone.
    ki.put(r(7));
    let mut kept = HashSet::new();
    ki.compact(6, &mut kept);
    assert!(kept.is_empty(), "{kept:?}");
    assert_eq!(shape(&ki), vec![vec![7]]);
    assert_eq!(ki.get(7).map(|k| (k.created, k.version)), Some((r(7), 1)));
}

#[test]
fn a_lone_tombstone_is_restored_as_compaction_left_it() {
    // etcd's restoreTombstone (#19249): the same index as the compaction left, but for the
    // generation's unknown creation.
    let ki = KeyIndex::restore_tombstone(r(5));
    assert_eq!(shape(&ki), vec![vec![5], vec![]]);
    assert!(!ki.is_live() && !ki.is_empty());
    assert_eq!(ki.modified(), r(5));
    assert!((0..8).all(|at| ki.get(at).is_none()));
    let mut re = ki.clone();
    re.put(r(6));
    assert_eq!(re.get(6).map(|k| (k.created, k.version)), Some((r(6), 1)));
    let mut gone = ki;
    gone.compact(6, &mut HashSet::new());
    assert!(gone.is_empty());
}

#[test]
fn undo_takes_changes_back_newest_first() {
    let mut t = TreeIndex::new();
    t.put(b"a", r(2));
    t.put(b"b", r(2 + 1));
    let before = t.clone();
    let mut log = vec![
        t.put_logged(b"a", Revision::new(4, 0)),
        t.tombstone_logged(b"a", Revision::new(4, 1)).unwrap(),
        t.put_logged(b"a", Revision::new(4, 2)),
        t.tombstone_logged(b"b", Revision::new(4, 3)).unwrap(),
        t.put_logged(b"new", Revision::new(4, 4)),
    ];
    assert_ne!(t, before);
    while let Some(u) = log.pop() {
        t.undo(&u);
    }
    assert_eq!(t, before);
    assert_eq!(t.tombstone_logged(b"missing", r(9)), Err(RevisionNotFound));
}

/// xorshift64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn key_name(i: u64) -> Vec<u8> {
    format!("k{i:02}").into_bytes()
}

/// A random range over `key_name` keys, of every form.
fn random_range(rng: &mut Rng, keys: u64) -> (Vec<u8>, Vec<u8>) {
    let a = key_name(rng.below(keys + 1));
    let b = key_name(rng.below(keys + 1));
    match rng.below(4) {
        0 => (a, Vec::new()),
        1 => (a, vec![0]),
        2 => (vec![0], vec![0]),
        _ => (a, b),
    }
}

/// Checks `count` and `revisions`' total against a visit of every key, at every revision a
/// read may still ask for.
fn check_counts(t: &TreeIndex, rng: &mut Rng, keys: u64, newest: i64, what: &str) {
    for at in t.compacted().max(1)..=newest {
        for _ in 0..4 {
            let (key, end) = random_range(rng, keys);
            let range = KeyRange::new(&key, &end);
            let want = t.count_visiting(range, at);
            assert_eq!(t.count(range, at), want, "{what}: count {range:?} at {at}");
            let limit = rng.below(4) as usize;
            let (got, total) = t.revisions(range, at, limit);
            assert_eq!(
                total, want,
                "{what}: total of {range:?} at {at}, limit {limit}"
            );
            assert_eq!(got.len(), if limit == 0 { want } else { want.min(limit) });
        }
    }
}

/// Random puts, tombstones, refused batches (undone) and compactions on a few keys; after
/// each step, counts at every revision still readable equal a visit of the keys, and each
/// live key's lease is the one its latest put named.
#[test]
fn counts_at_every_revision_equal_a_visit_of_the_keys() {
    const KEYS: u64 = 12;
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let mut t = TreeIndex::new();
    let mut leases = std::collections::BTreeMap::new();
    let mut main = 1;
    for step in 0..400 {
        let before = (t.clone(), leases.clone(), t.journal.flips.clone());
        let refuse = rng.below(5) == 0;
        main += 1;
        let mut undo = Vec::new();
        for sub in 0..1 + rng.below(3) as i64 {
            let k = key_name(rng.below(KEYS));
            let rev = Revision::new(main, sub);
            if rng.below(3) == 0 {
                if let Ok(u) = t.tombstone_logged(&k, rev) {
                    undo.push(u);
                    leases.remove(&k);
                }
            } else if t.get(&k, main).is_none_or(|kr| kr.modified.main < main) {
                let lease = rng.below(3) as i64;
                undo.push(t.put_stamped(&k, rev, lease).0);
                leases.insert(k, lease);
            }
        }
        if refuse {
            for u in undo.iter().rev() {
                t.undo(u);
            }
            assert_eq!(t, before.0, "step {step}: undo restores the keys");
            assert_eq!(t.journal.flips, before.2, "step {step}: and the journal");
            leases = before.1;
            main -= 1;
        }
        if rng.below(25) == 0 {
            let at =
                t.compacted().max(1) + rng.below((main - t.compacted().max(1)) as u64 + 1) as i64;
            t.compact(at);
            assert!(t.journal.flips.iter().all(|f| f.rev.main > at), "trimmed");
        }
        check_counts(&t, &mut rng, KEYS, main, &format!("step {step}"));
        let want: Vec<(&[u8], i64)> = leases
            .iter()
            .filter(|&(_, &l)| l != 0)
            .map(|(k, &l)| (k.as_slice(), l))
            .collect();
        assert_eq!(t.leased().collect::<Vec<_>>(), want, "step {step}: leases");
        for (k, &l) in &leases {
            assert_eq!(
                t.get(k, main).and_then(|kr| kr.lease),
                Some(l),
                "step {step}"
            );
        }
    }
}

/// Counts below the journal's floor (a full journal, or keys restored from disk) visit the
/// keys and are still right.
#[test]
fn counts_below_the_journal_floor_visit_the_keys() {
    let mut t = TreeIndex::new();
    // Restored keys: their history is not journaled.
    t.insert(b"a".to_vec(), KeyIndex::restore(r(2), r(5), 2));
    t.insert(b"b".to_vec(), KeyIndex::restore(r(6), r(6), 1));
    assert_eq!(t.journal.floor, 6);
    assert_eq!(t.count(KeyRange::FromKey(b"\0"), 5), 1);
    assert_eq!(t.count(KeyRange::FromKey(b"\0"), 6), 2);
    // Flip one key JOURNAL_CAP + 10 times: the oldest flips fall off.
    let mut main = 7;
    for i in 0..JOURNAL_CAP + 10 {
        if i % 2 == 0 {
            t.tombstone(b"c-missing-first", r(main)).unwrap_err();
            t.put(b"c", r(main));
        } else {
            t.tombstone(b"c", r(main)).unwrap();
        }
        main += 1;
    }
    assert_eq!(t.journal.flips.len(), JOURNAL_CAP);
    assert!(t.journal.floor > 6);
    let newest = main - 1;
    for at in [
        5,
        6,
        7,
        8,
        t.journal.floor - 1,
        t.journal.floor,
        newest - 1,
        newest,
    ] {
        let all = KeyRange::FromKey(b"\0");
        assert_eq!(t.count(all, at), t.count_visiting(all, at), "at {at}");
    }
}

#[test]
fn keyrev_carries_the_lease_only_for_the_latest_write() {
    let mut t = TreeIndex::new();
    t.put_leased(b"a", r(2), 7);
    t.put_leased(b"a", r(3), 8);
    assert_eq!(t.get(b"a", 3).and_then(|kr| kr.lease), Some(8));
    // Rewritten since: read the record.
    assert_eq!(t.get(b"a", 2).map(|kr| kr.lease), Some(None));
    t.tombstone(b"a", r(4)).unwrap();
    assert_eq!(t.key_index(b"a").map(KeyIndex::lease), Some(0));
    assert_eq!(t.get(b"a", 3).map(|kr| kr.lease), Some(None));
    assert_eq!(t.leased().count(), 0);
}

/// A journal that turns over many times keeps its arena bounded and its keys right.
#[test]
fn the_journal_arena_drops_forgotten_keys() {
    let mut t = TreeIndex::new();
    let name = |i: usize| format!("{:0>100}", i % 50).into_bytes();
    let mut main = 2;
    for i in 0..3 * JOURNAL_CAP {
        let key = name(i);
        if t.get(&key, main).is_some() {
            t.tombstone(&key, r(main)).unwrap();
        } else {
            t.put(&key, r(main));
        }
        main += 1;
    }
    let j = &t.journal;
    assert_eq!(j.flips.len(), JOURNAL_CAP);
    assert!(
        j.bytes.len() <= 2 * JOURNAL_CAP * 100 + 4096,
        "{}",
        j.bytes.len()
    );
    for (n, f) in j.flips.iter().enumerate() {
        let i = (f.rev.main - 2) as usize;
        assert_eq!(j.key(f), name(i), "flip {n}");
    }
    let all = KeyRange::FromKey(b"\0");
    for at in [j.floor, j.floor + 1, main - 100, main - 1] {
        assert_eq!(t.count(all, at), t.count_visiting(all, at), "at {at}");
    }
}

/// A compaction run a few keys at a time, with writes between the slices, ends where a
/// compaction run at once before those writes ends, and keeps the same revisions.
#[test]
fn compaction_in_slices_with_writes_between_equals_one_at_once() {
    let mut rng = Rng(0x5eed_cafe);
    for round in 0..50 {
        let keys = 12;
        let mut t = TreeIndex::new();
        let mut rev = 1;
        let write = |t: &mut TreeIndex, rng: &mut Rng, rev: &mut i64| {
            *rev += 1;
            let key = key_name(rng.below(keys));
            let live = t.get(&key, *rev).is_some();
            if live && rng.below(3) == 0 {
                t.tombstone(&key, r(*rev)).unwrap();
            } else {
                t.put(&key, r(*rev));
            }
        };
        for _ in 0..60 {
            write(&mut t, &mut rng, &mut rev);
        }
        let at = 2 + rng.below(rev as u64 - 1) as i64;
        let mut at_once = t.clone();
        let keep_at_once = at_once.compact(at);

        let mut sliced = t;
        sliced.start_compaction(at);
        let mut keep = HashSet::new();
        let mut from = Some(Vec::new());
        let mut later = Rng(round + 1);
        let mut later_rev = rev;
        while let Some(f) = from.take() {
            from = sliced.compact_slice(at, &f, 1 + rng.below(4) as usize, &mut keep);
            // The same writes reach both, between slices for one.
            let before = later.0;
            write(&mut sliced, &mut later, &mut later_rev);
            let mut same = Rng(before);
            let mut same_rev = later_rev - 1;
            write(&mut at_once, &mut same, &mut same_rev);
        }
        assert_eq!(keep, keep_at_once, "round {round}: kept revisions");
        assert_eq!(sliced, at_once, "round {round}: index");
        assert_eq!(sliced.compacted(), at);
    }
}

#[test]
fn a_key_written_once_takes_no_allocation_and_40_bytes() {
    // The packed form's tag lives in the version's non-zero niche.
    assert_eq!(std::mem::size_of::<KeyIndex>(), 40);
    let mut ki = KeyIndex::new();
    ki.put(Revision::new(5, 0));
    assert!(matches!(ki.hist, Hist::One(_)));
}

#[test]
fn histories_are_packed_exactly_when_they_fit() {
    let mut ki = KeyIndex::new();
    ki.put_leased(Revision::new(5, 1), 7);
    assert!(matches!(ki.hist, Hist::One(_)));
    ki.put(Revision::new(6, 0));
    assert!(matches!(ki.hist, Hist::Many(_)));
    // Compacted down to the visible write: packed again, and the same as restored.
    let mut keep = HashSet::new();
    ki.compact(6, &mut keep);
    assert!(matches!(ki.hist, Hist::One(_)));
    assert_eq!(
        ki,
        KeyIndex::restore(Revision::new(5, 1), Revision::new(6, 0), 2)
    );
    let kr = ki.get(6).unwrap();
    assert_eq!(
        (kr.created, kr.modified, kr.version, kr.lease),
        (Revision::new(5, 1), Revision::new(6, 0), 2, Some(0))
    );
    assert_eq!(ki.get(5), None);
    // A sub past 32 bits stays a list, and reads the same.
    let big = Revision::new(9, i64::from(u32::MAX) + 1);
    let mut wide = KeyIndex::new();
    wide.put(big);
    assert!(matches!(wide.hist, Hist::Many(_)));
    assert_eq!(wide.get(9).unwrap().modified, big);
    // Tombstoned, then undone: packed as before.
    let mut t = KeyIndex::new();
    t.put(Revision::new(3, 0));
    let before = t.clone();
    t.tombstone(Revision::new(4, 0)).unwrap();
    assert!(!t.is_live());
    t.undo_tombstone(0);
    assert_eq!(t, before);
    t.undo_put(0);
    assert!(t.is_empty());
    assert_eq!(t, KeyIndex::new());
}
