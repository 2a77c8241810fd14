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
            name: "generation ending at the revision is dropped",
            ops: ETCD_EXAMPLE,
            at: 3,
            want_keep: &[],
            want_shape: &[&[4, 5], &[]],
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
            name: "compact at the last tombstone empties the key",
            ops: ETCD_EXAMPLE,
            at: 5,
            want_keep: &[],
            want_shape: &[&[]],
            want_empty: true,
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
            version: 4
        })
    );
    assert_eq!(
        ki.get(7),
        Some(KeyRev {
            modified: r(7),
            created: r(2),
            version: 5
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
                version: 1
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
    let keep = t.compact(4);
    assert_eq!(keep, HashSet::from([r(3)]));
    assert_eq!(t.len(), 1);
    assert!(t.key_index(b"gone").is_none());
    assert_eq!(t.get(b"live", 5).map(|k| k.version), Some(2));
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
