use std::fs;
use std::path::{Path, PathBuf};

use super::*;

fn e(index: u64, term: u64) -> WalEntry {
    WalEntry {
        index,
        term,
        data: format!("entry {index} term {term}").into_bytes(),
    }
}

fn hs(term: u64, commit: u64) -> HardState {
    HardState {
        term,
        vote: 1,
        commit,
    }
}

fn ids(entries: &[WalEntry]) -> Vec<(u64, u64)> {
    entries.iter().map(|x| (x.index, x.term)).collect()
}

fn seq(from: u64, to: u64, term: u64) -> Vec<(u64, u64)> {
    (from..=to).map(|i| (i, term)).collect()
}

/// Segment paths, oldest first.
fn segments(dir: &Path) -> Vec<PathBuf> {
    segment::list(dir)
        .unwrap()
        .segments
        .into_iter()
        .map(|(_, p)| p)
        .collect()
}

/// The length of a segment without its zero-filled preallocated tail (no record ends in a run
/// of zeros reaching the end of the file: each starts with a non-zero length and type).
fn used_len(data: &[u8]) -> usize {
    data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)
}

/// Decoded records of a segment file with their start offsets.
fn records(path: &Path) -> Vec<(usize, String)> {
    let data = fs::read(path).unwrap();
    let mut out = Vec::new();
    let (mut off, mut crc) = (0, None);
    while off < used_len(&data) {
        let d = record::decode(&data, off, crc).unwrap();
        out.push((off, format!("{:?}", d.record)));
        crc = Some(d.crc);
        off = d.next;
    }
    out
}

/// Start offsets of the entry records in a segment.
fn entry_records(path: &Path) -> Vec<usize> {
    records(path)
        .into_iter()
        .filter(|(_, r)| r.starts_with("Entry"))
        .map(|(o, _)| o)
        .collect()
}

fn max_entry(path: &Path) -> Option<u64> {
    let data = fs::read(path).unwrap();
    let (mut off, mut crc, mut max) = (0, None, None);
    while off < used_len(&data) {
        let d = record::decode(&data, off, crc).unwrap();
        if let Record::Entry { index, .. } = d.record {
            max = max.max(Some(index));
        }
        crc = Some(d.crc);
        off = d.next;
    }
    max
}

/// A WAL with entries 1..=n appended one per call (term 1), the hard state following each.
fn wal_with(dir: &Path, n: u64, segment_size: u64) -> Wal {
    let mut wal = Wal::create(dir, b"cluster=1,member=2")
        .unwrap()
        .with_segment_size(segment_size);
    for i in 1..=n {
        wal.append(Some(hs(1, i)), &[e(i, 1)]).unwrap();
    }
    wal
}

fn file_len(p: &Path) -> u64 {
    fs::metadata(p).unwrap().len()
}

/// Bytes of a segment up to its last non-zero byte: where its records end, in tests whose last
/// record doesn't end in zeros.
fn used(p: &Path) -> u64 {
    used_len(&fs::read(p).unwrap()) as u64
}

#[test]
fn create_exists_open() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("member/wal");
    assert!(!Wal::exists(&dir));
    assert!(matches!(Wal::open(&dir), Err(WalError::NotFound { .. })));

    let wal = Wal::create(&dir, b"meta").unwrap();
    drop(wal);
    assert!(Wal::exists(&dir));
    let names: Vec<_> = segments(&dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["0000000000000000-0000000000000001.wal"]);
    assert!(matches!(
        Wal::create(&dir, b"meta"),
        Err(WalError::AlreadyExists { .. })
    ));

    let (wal, got) = Wal::open(&dir).unwrap();
    let want = WalContents {
        metadata: b"meta".to_vec(),
        snapshot: None,
        hard_state: HardState::default(),
        entries: vec![],
    };
    assert_eq!(got, want);
    assert_eq!(wal.last_index(), None);

    let empty = root.path().join("empty");
    fs::create_dir(&empty).unwrap();
    assert!(!Wal::exists(&empty));
    assert!(matches!(Wal::open(&empty), Err(WalError::NotFound { .. })));
}

#[test]
fn append_and_reopen() {
    type Batch = (Option<HardState>, Vec<(u64, u64)>);
    struct Case {
        name: &'static str,
        batches: Vec<Batch>,
        want_entries: Vec<(u64, u64)>,
        want_hard_state: HardState,
    }
    let cases = [
        Case {
            name: "entries in order",
            batches: vec![(Some(hs(1, 0)), seq(1, 3, 1)), (None, seq(4, 5, 1))],
            want_entries: seq(1, 5, 1),
            want_hard_state: hs(1, 0),
        },
        Case {
            name: "overwrite 3..4 over 1..5",
            batches: vec![(None, seq(1, 5, 1)), (None, seq(3, 4, 2))],
            want_entries: vec![(1, 1), (2, 1), (3, 2), (4, 2)],
            want_hard_state: HardState::default(),
        },
        Case {
            name: "overwrite then continue",
            batches: vec![
                (None, seq(1, 5, 1)),
                (None, seq(2, 2, 2)),
                (None, seq(3, 6, 3)),
            ],
            want_entries: vec![(1, 1), (2, 2), (3, 3), (4, 3), (5, 3), (6, 3)],
            want_hard_state: HardState::default(),
        },
        Case {
            name: "overwrite from the first entry",
            batches: vec![(None, seq(1, 3, 1)), (None, seq(1, 1, 4))],
            want_entries: vec![(1, 4)],
            want_hard_state: HardState::default(),
        },
        Case {
            name: "latest hard state wins",
            batches: vec![
                (Some(hs(1, 0)), seq(1, 2, 1)),
                (Some(hs(2, 1)), vec![]),
                (None, seq(3, 3, 2)),
                (Some(hs(2, 3)), vec![]),
            ],
            // The last move is commit-only: it waits for the next write, not lost to raft.
            want_entries: vec![(1, 1), (2, 1), (3, 2)],
            want_hard_state: hs(2, 1),
        },
        Case {
            name: "a commit-only move goes out with the next write",
            batches: vec![
                (Some(hs(2, 0)), seq(1, 2, 2)),
                (Some(hs(2, 2)), vec![]),
                (None, seq(3, 3, 2)),
            ],
            want_entries: vec![(1, 2), (2, 2), (3, 2)],
            want_hard_state: hs(2, 2),
        },
        Case {
            name: "hard state only",
            batches: vec![(Some(hs(5, 0)), vec![])],
            want_entries: vec![],
            want_hard_state: hs(5, 0),
        },
    ];
    for c in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = Wal::create(dir.path(), b"m").unwrap();
        for (h, es) in &c.batches {
            let es: Vec<_> = es.iter().map(|&(i, t)| e(i, t)).collect();
            wal.append(*h, &es)
                .unwrap_or_else(|err| panic!("{}: {err}", c.name));
        }
        drop(wal);

        let (mut wal, got) = Wal::open(dir.path()).unwrap();
        assert_eq!(ids(&got.entries), c.want_entries, "{}", c.name);
        assert_eq!(
            got.entries
                .iter()
                .map(|x| x.data.clone())
                .collect::<Vec<_>>(),
            c.want_entries
                .iter()
                .map(|&(i, t)| e(i, t).data)
                .collect::<Vec<_>>(),
            "{}",
            c.name
        );
        assert_eq!(got.hard_state, c.want_hard_state, "{}", c.name);

        // Appending continues after a reopen.
        let next = c.want_entries.last().map_or(1, |x| x.0 + 1);
        wal.append(None, &[e(next, 9)])
            .unwrap_or_else(|err| panic!("{}: {err}", c.name));
        drop(wal);
        let (_, got) = Wal::open(dir.path()).unwrap();
        let mut want = c.want_entries.clone();
        want.push((next, 9));
        assert_eq!(ids(&got.entries), want, "{} after reopen", c.name);
    }
}

#[test]
fn empty_append_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut wal = wal_with(dir.path(), 3, DEFAULT_SEGMENT_SIZE);
    let path = segments(dir.path()).remove(0);
    let before = (file_len(&path), records(&path).len());
    wal.append(None, &[]).unwrap();
    assert_eq!((file_len(&path), records(&path).len()), before);
    // Not even a segment cut when the current one is full.
    let mut wal = wal.with_segment_size(1);
    wal.append(None, &[]).unwrap();
    assert_eq!(segments(dir.path()).len(), 1);
}

#[test]
fn invalid_writes_are_refused_and_write_nothing() {
    struct Case {
        name: &'static str,
        /// Entries 1..=3 are in the WAL; a mark at `mark` if given.
        mark: Option<u64>,
        entries: Vec<(u64, u64)>,
        release: Option<u64>,
        want_err: &'static str,
    }
    let cases = [
        Case {
            name: "not contiguous",
            mark: None,
            entries: vec![(4, 1), (6, 1)],
            release: None,
            want_err: "entries are not contiguous: 6 follows 4",
        },
        Case {
            name: "gap",
            mark: None,
            entries: vec![(5, 1)],
            release: None,
            want_err: "entry 5 leaves a gap after 3",
        },
        Case {
            name: "at the snapshot mark",
            mark: Some(2),
            entries: vec![(2, 2)],
            release: None,
            want_err: "entry 2 is at or below the snapshot mark 2",
        },
        Case {
            name: "mark going backwards",
            mark: Some(3),
            entries: vec![],
            release: Some(2),
            want_err: "snapshot mark 2 is below the earlier mark 3",
        },
    ];
    for c in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = wal_with(dir.path(), 3, DEFAULT_SEGMENT_SIZE);
        if let Some(m) = c.mark {
            wal.release(m, 1, b"").unwrap();
        }
        let path = segments(dir.path()).remove(0);
        let before = file_len(&path);
        let es: Vec<_> = c.entries.iter().map(|&(i, t)| e(i, t)).collect();
        let err = match c.release {
            Some(i) => wal.release(i, 1, b""),
            None => wal.append(Some(hs(9, 9)), &es),
        }
        .unwrap_err();
        assert!(matches!(err, WalError::Invalid(_)), "{}: {err}", c.name);
        assert_eq!(
            err.to_string(),
            format!("wal: refusing to write: {}", c.want_err),
            "{}",
            c.name
        );
        assert_eq!(file_len(&path), before, "{}", c.name);
        // A refused write doesn't poison the WAL.
        wal.append(None, &[e(4, 1)])
            .unwrap_or_else(|err| panic!("{}: {err}", c.name));
    }
}

#[test]
fn segments_are_cut_and_read_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let wal = wal_with(dir.path(), 60, 512);
    drop(wal);

    let files = segments(dir.path());
    assert!(files.len() >= 4, "only {} segments", files.len());
    for (seq, path) in files.iter().enumerate() {
        let name = SegmentName::parse(path.file_name().unwrap().to_str().unwrap()).unwrap();
        assert_eq!(name.seq, seq as u64);
        // Named after the first index it holds; every segment starts with its header.
        let recs = records(path);
        assert!(
            recs[0].1.starts_with("Crc")
                && recs[1].1.starts_with("Metadata")
                && recs[2].1.starts_with("HardState")
        );
        let first = recs.iter().find(|(_, r)| r.starts_with("Entry")).unwrap();
        assert!(
            first.1.contains(&format!("index: {},", name.index)),
            "{}: {}",
            path.display(),
            first.1
        );
        if seq + 1 < files.len() {
            assert!(file_len(path) >= 512);
        }
    }

    let (mut wal, got) = Wal::open(dir.path()).unwrap();
    assert_eq!(ids(&got.entries), seq(1, 60, 1));
    assert_eq!(got.hard_state, hs(1, 60));
    assert_eq!(got.metadata, b"cluster=1,member=2");
    // The reopened WAL keeps the default size until told otherwise, and keeps appending.
    wal.append(None, &[e(61, 1)]).unwrap();
    drop(wal);
    let (_, got) = Wal::open(dir.path()).unwrap();
    assert_eq!(got.entries.len(), 61);
}

#[test]
fn corruption_refuses_to_open() {
    /// Damages the WAL in `dir`; returns the file and offset the error must name.
    type Damage = fn(&Path) -> (PathBuf, usize);
    struct Case {
        name: &'static str,
        damage: Damage,
        want_reason: &'static str,
    }
    fn flip(path: &Path, at: usize) {
        let mut data = fs::read(path).unwrap();
        data[at] ^= 0x01;
        fs::write(path, data).unwrap();
    }
    let cases: [Case; 8] = [
        Case {
            name: "flipped byte in a middle record of the last segment",
            damage: |dir| {
                let path = segments(dir).pop().unwrap();
                let offs = entry_records(&path);
                let at = offs[offs.len() / 2];
                flip(&path, at + record::HEADER_LEN + 17);
                (path, at)
            },
            want_reason: "CRC mismatch",
        },
        Case {
            name: "flipped byte in the last record of a non-last segment",
            damage: |dir| {
                let path = segments(dir).remove(1);
                let at = *entry_records(&path).last().unwrap();
                flip(&path, at + record::HEADER_LEN + 17);
                (path, at)
            },
            want_reason: "CRC mismatch",
        },
        Case {
            name: "flipped byte in a segment's CRC record",
            damage: |dir| {
                let path = segments(dir).remove(1);
                flip(&path, record::HEADER_LEN);
                (path, 0)
            },
            want_reason: "CRC mismatch",
        },
        Case {
            name: "CRC record that doesn't continue the chain",
            damage: |dir| {
                // A well-formed header for another chain: only the link between files is wrong.
                let path = segments(dir).remove(2);
                let data = fs::read(&path).unwrap();
                let mut buf = Vec::new();
                let mut crc = record::encode(&mut buf, 7, &Record::Crc(7));
                let mut off = 0;
                let mut prev = None;
                while off < data.len() {
                    let d = record::decode(&data, off, prev).unwrap();
                    if off > 0 {
                        crc = record::encode(&mut buf, crc, &d.record);
                    }
                    prev = Some(d.crc);
                    off = d.next;
                }
                fs::write(&path, buf).unwrap();
                (path, 0)
            },
            want_reason: "CRC chain broken",
        },
        Case {
            name: "missing middle segment",
            damage: |dir| {
                let files = segments(dir);
                fs::remove_file(&files[1]).unwrap();
                (files[2].clone(), 0)
            },
            want_reason: "segment seq 0000000000000001 is missing",
        },
        Case {
            name: "truncated non-last segment",
            damage: |dir| {
                let path = segments(dir).remove(0);
                let at = records(&path).last().unwrap().0;
                let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
                f.set_len(file_len(&path) - 3).unwrap();
                (path, at)
            },
            want_reason: "runs past the end",
        },
        Case {
            name: "zeros after a non-last segment",
            damage: |dir| {
                let path = segments(dir).remove(0);
                let mut data = fs::read(&path).unwrap();
                let at = data.len();
                data.extend_from_slice(&[0; 64]);
                fs::write(&path, data).unwrap();
                (path, at)
            },
            want_reason: "unknown record type 0",
        },
        Case {
            name: "stray .wal file",
            damage: |dir| {
                let path = dir.join("garbage.wal");
                fs::write(&path, b"x").unwrap();
                (path, 0)
            },
            want_reason: "not {seq:016x}-{index:016x}.wal",
        },
    ];
    for c in cases {
        let dir = tempfile::tempdir().unwrap();
        drop(wal_with(dir.path(), 40, 512));
        assert!(segments(dir.path()).len() >= 3);
        let (want_file, want_offset) = (c.damage)(dir.path());

        let err = Wal::open(dir.path()).unwrap_err();
        let msg = err.to_string();
        let WalError::Corrupt {
            file,
            offset,
            reason,
        } = err
        else {
            panic!("{}: {msg}", c.name)
        };
        assert_eq!(
            (file.as_path(), offset),
            (want_file.as_path(), want_offset as u64),
            "{}: {msg}",
            c.name
        );
        assert!(reason.contains(c.want_reason), "{}: {msg}", c.name);
        let name = want_file.file_name().unwrap().to_str().unwrap();
        assert!(
            msg.contains(name) && msg.contains(&format!("offset {want_offset}")),
            "{}: {msg}",
            c.name
        );
    }
}

#[test]
fn torn_tail_is_truncated() {
    struct Case {
        name: &'static str,
        /// Damages the last segment given its path and the offset of its last entry record;
        /// returns the offset the file must be truncated to.
        damage: fn(&Path, usize) -> usize,
        want_last: u64,
    }
    fn set_len(path: &Path, len: usize) {
        fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_len(len as u64)
            .unwrap();
    }
    /// Cuts the preallocated tail off and appends `n` zeros instead.
    fn append_zeros(path: &Path, n: usize) -> usize {
        let mut data = fs::read(path).unwrap();
        let end = used_len(&data);
        data.truncate(end);
        data.resize(end + n, 0);
        fs::write(path, data).unwrap();
        end
    }
    let cases = [
        Case {
            name: "payload cut short",
            damage: |p, last| {
                set_len(p, used(p) as usize - 3);
                last
            },
            want_last: 19,
        },
        Case {
            name: "header cut short",
            damage: |p, last| {
                set_len(p, last + 4);
                last
            },
            want_last: 19,
        },
        Case {
            name: "zeros appended",
            damage: |p, _| append_zeros(p, 100),
            want_last: 20,
        },
        Case {
            name: "a page of zeros appended",
            damage: |p, _| append_zeros(p, 4096),
            want_last: 20,
        },
        Case {
            name: "last record's payload never written",
            damage: |p, last| {
                let mut data = fs::read(p).unwrap();
                data[last + record::HEADER_LEN..].fill(0);
                fs::write(p, data).unwrap();
                last
            },
            want_last: 19,
        },
        Case {
            name: "flipped byte in the very last record",
            damage: |p, last| {
                let mut data = fs::read(p).unwrap();
                data[last + record::HEADER_LEN + 17] ^= 0x80;
                fs::write(p, data).unwrap();
                last
            },
            want_last: 19,
        },
    ];
    for c in cases {
        let dir = tempfile::tempdir().unwrap();
        // Entries only, so the last record is entry 20.
        let mut wal = Wal::create(dir.path(), b"m").unwrap();
        for i in 1..=20 {
            wal.append(None, &[e(i, 1)]).unwrap();
        }
        drop(wal);
        let path = segments(dir.path()).pop().unwrap();
        let last = *entry_records(&path).last().unwrap();
        assert_eq!(records(&path).last().unwrap().0, last);
        let want_len = (c.damage)(&path, last);

        let (mut wal, got) =
            Wal::open(dir.path()).unwrap_or_else(|err| panic!("{}: {err}", c.name));
        assert_eq!(ids(&got.entries), seq(1, c.want_last, 1), "{}", c.name);
        assert_eq!(used(&path), want_len as u64, "{}", c.name);
        assert_eq!(
            file_len(&path),
            PREALLOCATE,
            "{}: preallocated again",
            c.name
        );

        wal.append(Some(hs(2, 3)), &[e(c.want_last + 1, 2)])
            .unwrap();
        drop(wal);
        let (_, got) =
            Wal::open(dir.path()).unwrap_or_else(|err| panic!("{} after append: {err}", c.name));
        let mut want = seq(1, c.want_last, 1);
        want.push((c.want_last + 1, 2));
        assert_eq!(ids(&got.entries), want, "{}", c.name);
        assert_eq!(got.hard_state, hs(2, 3), "{}", c.name);
    }
}

#[test]
fn zero_sector_inside_the_last_batch_is_torn() {
    // One batch: a large entry followed by small ones. If a sector inside the large entry never
    // reached disk, the whole unacknowledged batch is dropped, even the intact records after it.
    let dir = tempfile::tempdir().unwrap();
    let mut wal = wal_with(dir.path(), 3, DEFAULT_SEGMENT_SIZE);
    let big = WalEntry {
        index: 4,
        term: 1,
        data: vec![0xab; 3000],
    };
    wal.append(Some(hs(1, 4)), &[big, e(5, 1), e(6, 1)])
        .unwrap();
    drop(wal);
    let path = segments(dir.path()).pop().unwrap();
    let at = entry_records(&path)[3];
    let mut data = fs::read(&path).unwrap();
    let sector = at.next_multiple_of(512) + 512;
    data[sector..sector + 512].fill(0);
    fs::write(&path, data).unwrap();

    let (_, got) = Wal::open(dir.path()).unwrap();
    assert_eq!(ids(&got.entries), seq(1, 3, 1));
    assert_eq!(got.hard_state, hs(1, 3));
    // Cut back to `at` (the preallocated zeros follow): the torn batch is gone.
    let data = fs::read(&path).unwrap();
    assert!(data[at..].iter().all(|&b| b == 0));
    assert!(records(&path).last().unwrap().0 < at);
}

#[test]
fn last_segment_with_incomplete_header_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    drop(wal_with(dir.path(), 30, 512));
    let files = segments(dir.path());
    let last = files.last().unwrap();
    // As if the disk lost the header of a segment cut just before the crash.
    fs::OpenOptions::new()
        .write(true)
        .open(last)
        .unwrap()
        .set_len(5)
        .unwrap();
    let kept = max_entry(&files[files.len() - 2]).unwrap();
    // A crashed cut also leaves a temporary file behind.
    fs::write(
        dir.path().join("00000000000000ff-0000000000000001.wal.tmp"),
        b"partial",
    )
    .unwrap();

    let (mut wal, got) = Wal::open(dir.path()).unwrap();
    assert_eq!(ids(&got.entries), seq(1, kept, 1));
    assert_eq!(segments(dir.path()), files[..files.len() - 1]);
    assert!(
        fs::read_dir(dir.path()).unwrap().all(|f| !f
            .unwrap()
            .file_name()
            .to_str()
            .unwrap()
            .ends_with(".tmp"))
    );

    wal.append(None, &[e(kept + 1, 1)]).unwrap();
    drop(wal);
    let (_, got) = Wal::open(dir.path()).unwrap();
    assert_eq!(ids(&got.entries), seq(1, kept + 1, 1));

    // With no earlier segment there is nothing to fall back on.
    let dir = tempfile::tempdir().unwrap();
    drop(Wal::create(dir.path(), b"m").unwrap());
    let only = segments(dir.path()).remove(0);
    fs::OpenOptions::new()
        .write(true)
        .open(&only)
        .unwrap()
        .set_len(5)
        .unwrap();
    let err = Wal::open(dir.path()).unwrap_err();
    assert!(matches!(err, WalError::Corrupt { .. }), "{err}");
}

#[test]
fn release() {
    struct Case {
        name: &'static str,
        /// Entries 1..=50, one per append, with hard state (1, i) each unless `hs_once`.
        hs_once: bool,
        release: u64,
        want_entries: Vec<(u64, u64)>,
    }
    let cases = [
        Case {
            name: "release in the middle",
            hs_once: false,
            release: 30,
            want_entries: seq(31, 50, 1),
        },
        Case {
            name: "hard state only in released segments",
            hs_once: true,
            release: 40,
            want_entries: seq(41, 50, 1),
        },
        Case {
            name: "release everything",
            hs_once: false,
            release: 50,
            want_entries: vec![],
        },
        Case {
            name: "snapshot past the log",
            hs_once: false,
            release: 80,
            want_entries: vec![],
        },
    ];
    for c in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = Wal::create(dir.path(), b"m")
            .unwrap()
            .with_segment_size(400);
        wal.append(Some(hs(1, 0)), &[]).unwrap();
        for i in 1..=50 {
            let h = (!c.hs_once).then(|| hs(1, i));
            wal.append(h, &[e(i, 1)]).unwrap();
        }
        let want_hs = if c.hs_once { hs(1, 0) } else { hs(1, 50) };
        let before = segments(dir.path());
        assert!(before.len() >= 5, "{}", c.name);
        let maxes: Vec<_> = before.iter().map(|p| max_entry(p)).collect();
        wal.release(c.release, 1, b"conf").unwrap();
        let after = segments(dir.path());
        // Gone: the oldest segments holding only entries ≤ the released index, up to the one
        // being written (which the mark may have just cut).
        let current = after.last().unwrap();
        let gone: Vec<_> = before
            .iter()
            .zip(&maxes)
            .take_while(|(p, max)| *p != current && max.is_none_or(|m| m <= c.release))
            .map(|(p, _)| p)
            .collect();
        assert!(!gone.is_empty(), "{}", c.name);
        assert!(gone.iter().all(|p| !p.exists()), "{}", c.name);
        assert_eq!(
            after[..before.len() - gone.len()],
            before[gone.len()..],
            "{}",
            c.name
        );
        assert!(after.len() <= before.len() - gone.len() + 1, "{}", c.name);

        drop(wal);
        let (mut wal, got) =
            Wal::open(dir.path()).unwrap_or_else(|err| panic!("{}: {err}", c.name));
        let want_mark = SnapshotMark {
            index: c.release,
            term: 1,
            conf_state: b"conf".to_vec(),
        };
        assert_eq!(got.snapshot, Some(want_mark), "{}", c.name);
        assert_eq!(got.hard_state, want_hs, "{}", c.name);
        assert_eq!(got.metadata, b"m", "{}", c.name);
        assert_eq!(ids(&got.entries), c.want_entries, "{}", c.name);

        // Appending continues right after the log (or the mark, if it is past the log).
        let next = c.release.max(50) + 1;
        wal.append(Some(hs(2, next)), &[e(next, 2)])
            .unwrap_or_else(|err| panic!("{}: {err}", c.name));
        drop(wal);
        let (_, got) = Wal::open(dir.path()).unwrap();
        let mut want = c.want_entries.clone();
        want.push((next, 2));
        assert_eq!(ids(&got.entries), want, "{}", c.name);
        assert_eq!(got.hard_state, hs(2, next), "{}", c.name);
    }
}

#[test]
fn repeated_releases_keep_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let mut wal = Wal::create(dir.path(), b"m")
        .unwrap()
        .with_segment_size(300);
    for i in 1..=100 {
        wal.append(Some(hs(1, i)), &[e(i, 1)]).unwrap();
        if i % 20 == 0 {
            wal.release(i - 5, 1, b"").unwrap();
        }
    }
    drop(wal);
    let first = segments(dir.path()).remove(0);
    assert_ne!(
        first.file_name().unwrap(),
        "0000000000000000-0000000000000001.wal"
    );
    let (_, got) = Wal::open(dir.path()).unwrap();
    assert_eq!(got.snapshot.map(|s| s.index), Some(95));
    assert_eq!(ids(&got.entries), seq(96, 100, 1));
    assert_eq!(got.hard_state, hs(1, 100));
}

#[test]
fn every_fsync_is_timed() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Wal::create(dir.path(), b"meta").unwrap();
    let before = w.fsync_stats().count;
    w.append(Some(hs(1, 0)), &[e(1, 1), e(2, 1)]).unwrap();
    w.append(Some(hs(1, 2)), &[]).unwrap();
    let stats = w.fsync_stats();
    assert!(stats.count > before, "the append was synced and counted");
    assert_eq!(stats.buckets.len(), actcd_types::msg::DISK_BUCKETS.len());
    assert_eq!(
        stats.buckets.last().copied(),
        Some(stats.count),
        "every sync under 8 s"
    );
    assert!(stats.sum_secs > 0.0);
}

#[test]
fn unsafe_no_fsync_writes_without_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Wal::create(dir.path(), b"meta").unwrap();
    w.append(Some(hs(1, 0)), &[e(1, 1)]).unwrap();
    let synced = w.fsync_stats().count;
    assert!(synced >= 1);
    w.set_unsafe_no_fsync(true);
    w.append(Some(hs(1, 1)), &[e(2, 1), e(3, 1)]).unwrap();
    assert_eq!(w.fsync_stats().count, synced, "no fsync for the append");
    drop(w);
    let (_, c) = Wal::open(dir.path()).unwrap();
    assert_eq!(ids(&c.entries), seq(1, 3, 1), "still written");
}

/// `replay_segments` (the fuzz target's entry point) reads segment bytes as `open` reads the
/// files: the same contents from the same segments, the same refusal of a broken chain.
#[test]
fn replay_segments_reads_what_open_reads() {
    let dir = tempfile::tempdir().unwrap();
    drop(wal_with(dir.path(), 40, 512));
    let data: Vec<Vec<u8>> = segments(dir.path())
        .iter()
        .map(|p| fs::read(p).unwrap())
        .collect();
    assert!(data.len() >= 3, "only {} segments", data.len());
    let all: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    let got = replay_segments(&all).unwrap();
    let (_, want) = Wal::open(dir.path()).unwrap();
    assert_eq!(got, want);
    assert_eq!(ids(&got.entries), seq(1, 40, 1));
    // A torn last record is the end of the log; a segment missing from the middle breaks the
    // CRC chain.
    let last = all[all.len() - 1];
    let mut torn = all.clone();
    let cut = &last[..used_len(last) - 3];
    *torn.last_mut().unwrap() = cut;
    // (the last record is the hard state that followed entry 40).
    let before_tear = replay_segments(&torn).unwrap();
    assert_eq!(before_tear.hard_state, hs(1, 39));
    assert_eq!(before_tear.entries.len(), 40);
    let gap = [all[0], all[2]];
    let err = replay_segments(&gap).unwrap_err().to_string();
    assert!(err.contains("CRC chain broken"), "{err}");
}

/// The log's directory is 0700 and its segments 0600 (etcd's private modes, CVE-2020-15113).
#[test]
fn the_log_is_readable_by_the_member_alone() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("member/wal");
    let wal = wal_with(&dir, 3, 64 * 1024);
    drop(wal);
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&root.path().join("member")), 0o700);
    let files = segments(&dir);
    assert!(!files.is_empty());
    for f in files {
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
}
