//! [`Wal`]: create, open (verify and repair), append, release.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use actcd_types::msg::{DiskLatency, HardState, WalEntry};
use tracing::{debug, info, warn};

use crate::record::{self, DecodeError, DecodeErrorKind, MAX_PAYLOAD, Record};
use crate::replay::{self, Replay};
use crate::segment::{self, SegmentName};
use crate::{SnapshotMark, WalContents, WalError};

/// A segment is cut once the one being written reaches this size.
pub const DEFAULT_SEGMENT_SIZE: u64 = 64 * 1024 * 1024;

/// Records every segment starts with: CRC, metadata, hard state.
const HEADER_RECORDS: usize = 3;

/// Write granularity assumed when telling a torn write from corruption: a crash can leave a
/// never-written sector reading as zeros in the middle of the last, unsynced batch.
const SECTOR: usize = 512;

#[derive(Debug)]
struct Segment {
    name: SegmentName,
    path: PathBuf,
    /// Highest entry index written to this segment; what `release` checks before deleting it.
    max_index: Option<u64>,
}

/// The write-ahead log of one member. One writer; not shared.
#[derive(Debug)]
pub struct Wal {
    dir: PathBuf,
    metadata: Vec<u8>,
    segment_size: u64,
    /// Oldest first, seqs without gaps; the last one is being written.
    segments: Vec<Segment>,
    /// The last segment, positioned at its end.
    file: File,
    /// Bytes in the last segment.
    size: u64,
    /// CRC of the last record written: the seed of the next one.
    crc: u32,
    hard_state: HardState,
    /// `hard_state` moved only its commit index since it was last written: it goes out with
    /// the next write instead of costing a write of its own.
    hard_state_unwritten: bool,
    /// See `Replay::last_index`.
    last_index: Option<u64>,
    snapshot: Option<SnapshotMark>,
    failed: bool,
    /// How long each fsync took (for `/metrics`).
    fsyncs: DiskLatency,
    /// Bytes written to segments by this process (etcd's `etcd_disk_wal_write_bytes_total`).
    written_bytes: u64,
    /// `--unsafe-no-fsync`: appends are written but never fsynced (a crash may lose
    /// acknowledged writes).
    no_fsync: bool,
}

impl Wal {
    /// `--unsafe-no-fsync`: from now on appends are not fsynced. Unsafe: what a crash or power
    /// loss catches in the page cache is lost, acknowledged or not.
    pub fn set_unsafe_no_fsync(&mut self, on: bool) {
        self.no_fsync = on;
    }

    /// The fsync latencies so far.
    pub fn fsync_stats(&self) -> DiskLatency {
        self.fsyncs.clone()
    }

    /// Bytes written to segments since the WAL was opened (records of appends, hard states,
    /// snapshot marks; not a new segment's header).
    pub fn written_bytes(&self) -> u64 {
        self.written_bytes
    }

    /// Creates a WAL in `dir` (made if missing) whose first segment holds `metadata` and an empty
    /// hard state. Refuses if `dir` already holds segments.
    pub fn create(dir: impl AsRef<Path>, metadata: &[u8]) -> Result<Wal, WalError> {
        let dir = dir.as_ref();
        if metadata.len() > MAX_PAYLOAD {
            return Err(WalError::Invalid(format!(
                "metadata of {} bytes is too large",
                metadata.len()
            )));
        }
        // 0700, the segments 0600 (etcd's private modes, CVE-2020-15113): the log holds every
        // value and the auth entries.
        actcd_types::private_fs::touch_private_dir(dir)
            .map_err(WalError::io("create directory", dir))?;
        // The directory itself may be new: make its entry in the parent durable too.
        if let Some(parent) = dir.parent() {
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            segment::sync_dir(parent)?;
        }
        let listing = segment::list(dir)?;
        if !listing.segments.is_empty() || !listing.strays.is_empty() {
            return Err(WalError::AlreadyExists {
                dir: dir.to_path_buf(),
            });
        }
        remove_tmp(dir, &listing.tmp)?;

        let name = SegmentName { seq: 0, index: 1 };
        let (file, size, crc) =
            write_segment_header(dir, name, 0, metadata, HardState::default(), PREALLOCATE)?;
        info!(dir = %dir.display(), "wal: created");
        Ok(Wal {
            dir: dir.to_path_buf(),
            metadata: metadata.to_vec(),
            segment_size: DEFAULT_SEGMENT_SIZE,
            segments: vec![Segment {
                name,
                path: dir.join(name.file_name()),
                max_index: None,
            }],
            file,
            size,
            crc,
            hard_state: HardState::default(),
            last_index: None,
            snapshot: None,
            failed: false,
            fsyncs: DiskLatency::default(),
            written_bytes: 0,
            no_fsync: false,
            hard_state_unwritten: false,
        })
    }

    /// Whether `dir` holds at least one segment (so the member restarts rather than joins).
    pub fn exists(dir: impl AsRef<Path>) -> bool {
        segment::list(dir.as_ref()).is_ok_and(|l| !l.segments.is_empty())
    }

    /// Opens the WAL in `dir`: verifies every record and the CRC chain across segments,
    /// truncates a torn final record, and returns what raft needs to restart. Appends continue
    /// at the end of the last segment.
    pub fn open(dir: impl AsRef<Path>) -> Result<(Wal, WalContents), WalError> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(WalError::NotFound {
                dir: dir.to_path_buf(),
            });
        }
        let listing = segment::list(dir)?;
        if let Some(stray) = listing.strays.first() {
            return Err(WalError::corrupt(
                stray,
                0,
                "a .wal file whose name is not {seq:016x}-{index:016x}.wal",
            ));
        }
        if listing.segments.is_empty() {
            return Err(WalError::NotFound {
                dir: dir.to_path_buf(),
            });
        }
        remove_tmp(dir, &listing.tmp)?;
        for w in listing.segments.windows(2) {
            if w[1].0.seq != w[0].0.seq + 1 {
                let reason = format!("segment seq {:016x} is missing before it", w[0].0.seq + 1);
                return Err(WalError::corrupt(&w[1].1, 0, reason));
            }
        }

        let mut replay = Replay::default();
        let mut segments: Vec<Segment> = Vec::with_capacity(listing.segments.len());
        // CRC at the end of the previous segment, and the last segment's length and end CRC.
        let mut end_crc = None;
        let mut tail = (0u64, 0u32);
        let count = listing.segments.len();
        for (i, (name, path)) in listing.segments.into_iter().enumerate() {
            let is_last = i + 1 == count;
            let data = fs::read(&path).map_err(WalError::io("read", &path))?;
            let scan = scan_segment(&path, &data, end_crc, is_last, &mut replay)?;

            if scan.records < HEADER_RECORDS {
                // Only the last segment gets here (scan_segment refuses elsewhere). Cuts make
                // headers durable before the rename, so this is a crash on a disk that lied or
                // an empty file: it holds nothing, so drop it and write on in the previous one.
                let Some(prev) = segments.last() else {
                    return Err(WalError::corrupt(
                        &path,
                        scan.valid_len,
                        "the only segment has an incomplete header",
                    ));
                };
                warn!(file = %path.display(), "wal: removing last segment with an incomplete header");
                fs::remove_file(&path).map_err(WalError::io("remove", &path))?;
                segment::sync_dir(dir)?;
                let len = fs::metadata(&prev.path)
                    .map_err(WalError::io("stat", &prev.path))?
                    .len();
                tail = (len, end_crc.unwrap_or(0));
                break;
            }
            // Zeros after the last record are the segment's preallocated space, not damage.
            if data[scan.valid_len..].iter().any(|&b| b != 0) {
                warn!(
                    file = %path.display(),
                    offset = scan.valid_len,
                    dropped = data.len() - scan.valid_len,
                    "wal: truncating torn final record"
                );
                let f = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(WalError::io("open", &path))?;
                f.set_len(scan.valid_len as u64)
                    .and_then(|()| f.sync_all())
                    .map_err(WalError::io("truncate", &path))?;
                #[cfg(feature = "failpoints")]
                actcd_types::synclog::record(format_args!(
                    "wal {} {}",
                    path.display(),
                    scan.valid_len
                ));
            }
            end_crc = Some(scan.crc);
            tail = (scan.valid_len as u64, scan.crc);
            segments.push(Segment {
                name,
                path,
                max_index: scan.max_index,
            });
        }

        let metadata = replay.metadata.clone().unwrap_or_default();
        let current = segments.last().map(|s| s.path.clone()).unwrap_or_default();
        let file = OpenOptions::new()
            .write(true)
            .open(&current)
            .map_err(WalError::io("open", &current))?;
        preallocate(&file, PREALLOCATE).map_err(WalError::io("preallocate", &current))?;
        let wal = Wal {
            dir: dir.to_path_buf(),
            metadata: metadata.clone(),
            segment_size: DEFAULT_SEGMENT_SIZE,
            segments,
            file,
            size: tail.0,
            crc: tail.1,
            hard_state: replay.hard_state(),
            last_index: replay.last_index(),
            snapshot: replay.snapshot().cloned(),
            failed: false,
            fsyncs: DiskLatency::default(),
            written_bytes: 0,
            no_fsync: false,
            hard_state_unwritten: false,
        };
        let contents = replay.finish(metadata);
        info!(
            dir = %dir.display(),
            segments = wal.segments.len(),
            entries = contents.entries.len(),
            "wal: opened"
        );
        Ok((wal, contents))
    }

    /// Sets the size at which a new segment is cut (64 MiB by default; small in tests).
    pub fn with_segment_size(mut self, bytes: u64) -> Wal {
        self.segment_size = bytes;
        self
    }

    /// Writes `entries` and then `hard_state`, then fsyncs once. An entry at or below the last
    /// index overwrites from there (raft truncation). Nothing to write means no write and no
    /// fsync. The first write into a newly cut segment also fsyncs the segment header and the
    /// directory.
    ///
    /// A hard state that only moves the commit index is not written at once: it goes out with
    /// the next write (raft's `MustSync` rule says it needs no fsync, as etcd's WAL does; we go
    /// one step further and skip the write, which took a syscall off every single-client write
    /// — the commit index is raft's volatile state: a lost one is learned again from the
    /// leader or recomputed, while entries, terms and votes must never be forgotten).
    pub fn append(
        &mut self,
        hard_state: Option<HardState>,
        entries: &[WalEntry],
    ) -> Result<(), WalError> {
        self.check_usable()?;
        if hard_state.is_none() && entries.is_empty() {
            return Ok(());
        }
        self.check_entries(entries)?;
        let must_sync = !entries.is_empty()
            || hard_state.is_some_and(|hs| {
                hs.term != self.hard_state.term || hs.vote != self.hard_state.vote
            });
        if !must_sync {
            // Only the commit index moved: remember it for the next write.
            if let Some(hs) = hard_state {
                self.hard_state = hs;
                self.hard_state_unwritten = true;
            }
            return Ok(());
        }
        let mut records: Vec<Record<'_>> = entries.iter().map(Record::entry).collect();
        let newest = hard_state.or(self.hard_state_unwritten.then_some(self.hard_state));
        records.extend(newest.map(Record::HardState));
        self.write(&records, must_sync)?;

        if let Some(hs) = newest {
            self.hard_state = hs;
            self.hard_state_unwritten = false;
        }
        if let Some(last) = entries.last() {
            self.last_index = Some(last.index);
            if let Some(seg) = self.segments.last_mut() {
                seg.max_index = seg.max_index.max(Some(last.index));
            }
        }
        Ok(())
    }

    /// Records that the state machine durably covers the log up to `index` (write + fsync of a
    /// snapshot mark), then deletes the oldest segments whose entries are all at or below
    /// `index`. The segment being written is never deleted, and every segment starts with the
    /// metadata and the hard state current when it was cut, so a reopen still finds the newest
    /// hard state, this mark, and every entry above `index`.
    pub fn release(&mut self, index: u64, term: u64, conf_state: &[u8]) -> Result<(), WalError> {
        self.check_usable()?;
        replay::check_mark(self.snapshot.as_ref(), index).map_err(WalError::Invalid)?;
        if conf_state.len() > MAX_PAYLOAD - 16 {
            return Err(WalError::Invalid(format!(
                "conf state of {} bytes is too large",
                conf_state.len()
            )));
        }
        let mark = SnapshotMark {
            index,
            term,
            conf_state: conf_state.to_vec(),
        };
        let mut records = Vec::with_capacity(2);
        if self.hard_state_unwritten {
            records.push(Record::HardState(self.hard_state));
        }
        records.push(Record::snapshot(&mark));
        self.write(&records, true)?;
        self.hard_state_unwritten = false;
        self.last_index = Some(self.last_index.map_or(index, |l| l.max(index)));
        self.snapshot = Some(mark);
        self.remove_released(index)
    }

    /// The newest hard state written.
    pub fn hard_state(&self) -> HardState {
        self.hard_state
    }

    /// The index the next entry may follow (`None` for a WAL with no entries and no mark).
    pub fn last_index(&self) -> Option<u64> {
        self.last_index
    }

    /// The latest snapshot mark.
    pub fn snapshot(&self) -> Option<&SnapshotMark> {
        self.snapshot.as_ref()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn check_usable(&self) -> Result<(), WalError> {
        if self.failed {
            Err(WalError::Failed)
        } else {
            Ok(())
        }
    }

    /// Refuses what open() would call corruption, so a bug upstream fails the write instead of
    /// the next restart.
    fn check_entries(&self, entries: &[WalEntry]) -> Result<(), WalError> {
        for w in entries.windows(2) {
            if w[0].index.checked_add(1) != Some(w[1].index) {
                return Err(WalError::Invalid(format!(
                    "entries are not contiguous: {} follows {}",
                    w[1].index, w[0].index
                )));
            }
        }
        if let Some(first) = entries.first() {
            replay::check_next(self.last_index, self.snapshot.as_ref(), first.index)
                .map_err(WalError::Invalid)?;
        }
        if let Some(big) = entries.iter().find(|e| e.data.len() > MAX_PAYLOAD - 16) {
            return Err(WalError::Invalid(format!(
                "entry {} of {} bytes is too large",
                big.index,
                big.data.len()
            )));
        }
        Ok(())
    }

    /// Frames `records` into one buffer, writes it to the current segment (cutting a new one
    /// first if the current is full) and fsyncs once.
    fn write(&mut self, records: &[Record<'_>], sync: bool) -> Result<(), WalError> {
        #[cfg(feature = "failpoints")]
        fail::fail_point!("wal_before_append", |_| Err(
            self.injected("wal_before_append")
        ));
        #[cfg(feature = "failpoints")]
        if records.iter().any(|r| matches!(r, Record::HardState(_))) {
            fail::fail_point!("wal_before_hard_state", |_| Err(
                self.injected("wal_before_hard_state")
            ));
        }
        if self.size >= self.segment_size {
            self.cut()?;
        }
        let mut buf = Vec::with_capacity(
            records
                .iter()
                .map(|r| record::HEADER_LEN + r.payload_len())
                .sum(),
        );
        let mut crc = self.crc;
        for r in records {
            crc = record::encode(&mut buf, crc, r);
        }
        let path = self
            .segments
            .last()
            .map(|s| s.path.as_path())
            .unwrap_or(&self.dir);
        // After a failed write or fsync the file's contents are unknown: stop until reopened.
        let written = self.file.write_all_at(&buf, self.size);
        if written.is_ok() {
            self.written_bytes += buf.len() as u64;
        }
        #[cfg(feature = "failpoints")]
        let written = written.and_then(|()| {
            fail::fail_point!("wal_after_append_before_fsync", |_| Err(injected_io(
                "wal_after_append_before_fsync"
            )));
            Ok(())
        });
        let synced = written.and_then(|()| {
            if !sync || self.no_fsync {
                return Ok(());
            }
            let started = std::time::Instant::now();
            let r = self.file.sync_data();
            self.fsyncs.observe(started.elapsed().as_secs_f64());
            #[cfg(feature = "failpoints")]
            let r = r.and_then(|()| {
                fail::fail_point!("wal_after_fsync", |_| Err(injected_io("wal_after_fsync")));
                Ok(())
            });
            r
        });
        if let Err(e) = synced {
            self.failed = true;
            return Err(WalError::io("append to", path)(e));
        }
        self.size += buf.len() as u64;
        self.crc = crc;
        #[cfg(feature = "failpoints")]
        if sync {
            actcd_types::synclog::record(format_args!("wal {} {}", path.display(), self.size));
        }
        Ok(())
    }

    /// What a failpoint's `return` makes of a write: the error a failed write returns, and the
    /// WAL refuses everything after it, as after a real one.
    #[cfg(feature = "failpoints")]
    fn injected(&mut self, name: &str) -> WalError {
        self.failed = true;
        let path = self
            .segments
            .last()
            .map_or(self.dir.clone(), |s| s.path.clone());
        WalError::io("append to", &path)(injected_io(name))
    }

    /// Starts segment seq+1, named after the next index, with the header records.
    fn cut(&mut self) -> Result<(), WalError> {
        let seq = self.segments.last().map_or(0, |s| s.name.seq + 1);
        let name = SegmentName {
            seq,
            index: self.last_index.map_or(1, |i| i + 1),
        };
        // The finished segment loses its preallocated tail: only the last one may end in zeros.
        if let Err(e) = self
            .file
            .set_len(self.size)
            .and_then(|()| self.file.sync_all())
        {
            self.failed = true;
            let path = self
                .segments
                .last()
                .map_or(self.dir.clone(), |s| s.path.clone());
            return Err(WalError::io("truncate", &path)(e));
        }
        #[cfg(feature = "failpoints")]
        if let Some(s) = self.segments.last() {
            actcd_types::synclog::record(format_args!("wal {} {}", s.path.display(), self.size));
        }
        // A half-done cut may have made the new file visible: nothing may be written after it.
        let (file, size, crc) = write_segment_header(
            &self.dir,
            name,
            self.crc,
            &self.metadata,
            self.hard_state,
            PREALLOCATE.min(self.segment_size.max(1)),
        )
        .inspect_err(|_| self.failed = true)?;
        let path = self.dir.join(name.file_name());
        debug!(file = %path.display(), "wal: cut segment");
        self.segments.push(Segment {
            name,
            path,
            max_index: None,
        });
        self.file = file;
        self.size = size;
        self.crc = crc;
        Ok(())
    }

    /// Deletes the longest run of oldest segments holding only entries ≤ `index`. Only a prefix,
    /// so the survivors keep consecutive seqs and an unbroken CRC chain.
    fn remove_released(&mut self, index: u64) -> Result<(), WalError> {
        let writable = self.segments.len().saturating_sub(1);
        let n = self.segments[..writable]
            .iter()
            .take_while(|s| s.max_index.is_none_or(|m| m <= index))
            .count();
        if n == 0 {
            return Ok(());
        }
        for k in 0..n {
            let path = &self.segments[k].path;
            if let Err(e) = fs::remove_file(path) {
                let err = WalError::io("remove", path)(e);
                // Oldest first, so what is left is still a gap-free suffix.
                self.segments.drain(..k);
                return Err(err);
            }
        }
        let removed: Vec<_> = self.segments.drain(..n).map(|s| s.path).collect();
        info!(index, removed = removed.len(), "wal: released segments");
        segment::sync_dir(&self.dir)
    }
}

/// The I/O error a failpoint's `return` stands for.
#[cfg(feature = "failpoints")]
fn injected_io(name: &str) -> std::io::Error {
    std::io::Error::other(format!("injected by failpoint {name}"))
}

/// Writes a segment's header (CRC, metadata, hard state) under a temporary name, fsyncs it,
/// renames it into place and fsyncs the directory. Returns the open file (positioned at its
/// end), its size and the running CRC.
fn write_segment_header(
    dir: &Path,
    name: SegmentName,
    prev_crc: u32,
    metadata: &[u8],
    hard_state: HardState,
    segment_size: u64,
) -> Result<(File, u64, u32), WalError> {
    let mut buf = Vec::new();
    let mut crc = record::encode(&mut buf, prev_crc, &Record::Crc(prev_crc));
    crc = record::encode(&mut buf, crc, &Record::Metadata(metadata));
    crc = record::encode(&mut buf, crc, &Record::HardState(hard_state));

    let tmp = dir.join(name.tmp_file_name());
    let path = dir.join(name.file_name());
    let mut file = actcd_types::private_fs::create_private_file(&tmp, true)
        .map_err(WalError::io("create", &tmp))?;
    file.write_all(&buf)
        .and_then(|()| preallocate(&file, segment_size))
        .and_then(|()| file.sync_all())
        .map_err(WalError::io("write", &tmp))?;
    fs::rename(&tmp, &path).map_err(WalError::io("rename", &tmp))?;
    segment::sync_dir(dir)?;
    #[cfg(feature = "failpoints")]
    actcd_types::synclog::record(format_args!("wal {} {}", path.display(), buf.len()));
    Ok((file, buf.len() as u64, crc))
}

/// Bytes reserved per segment: a whole segment, as etcd does. Unit tests reserve less, since
/// they read and rewrite segment files whole many times.
#[cfg(not(test))]
const PREALLOCATE: u64 = DEFAULT_SEGMENT_SIZE;
#[cfg(test)]
const PREALLOCATE: u64 = 64 * 1024;

/// Reserves the segment's blocks up front, zero-filled, as etcd does: an fdatasync after an
/// append that grows the file must also journal the new size, one that writes into allocated
/// space need not (about a third cheaper per fsync on ext4 here). The zeros after the last
/// record read as the end of the log ([`is_torn`]); a segment is cut back to its records
/// before the next one starts, so only the last segment ever ends in zeros.
fn preallocate(file: &File, size: u64) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    if len >= size {
        return Ok(());
    }
    rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), len, size - len)
        .map_err(std::io::Error::from)
}

fn remove_tmp(dir: &Path, tmp: &[PathBuf]) -> Result<(), WalError> {
    for p in tmp {
        warn!(file = %p.display(), "wal: removing unfinished segment");
        fs::remove_file(p).map_err(WalError::io("remove", p))?;
    }
    if !tmp.is_empty() {
        segment::sync_dir(dir)?;
    }
    Ok(())
}

/// What one segment held.
struct Scan {
    /// Bytes of complete, verified records.
    valid_len: usize,
    records: usize,
    /// CRC of the last valid record.
    crc: u32,
    max_index: Option<u64>,
}

/// Verifies one segment and feeds its records to `replay`. `prev_end` is the CRC the previous
/// segment ended with (`None` for the oldest surviving one, whose predecessors were released).
/// A record that fails to decode is a torn write only in the last segment and only when
/// `is_torn` says so; anything else is corruption.
fn scan_segment(
    path: &Path,
    data: &[u8],
    prev_end: Option<u32>,
    is_last: bool,
    replay: &mut Replay,
) -> Result<Scan, WalError> {
    let mut scan = Scan {
        valid_len: 0,
        records: 0,
        crc: prev_end.unwrap_or(0),
        max_index: None,
    };
    let mut off = 0;
    while off < data.len() {
        let prev = (scan.records > 0).then_some(scan.crc);
        let d = match record::decode(data, off, prev) {
            Ok(d) => d,
            Err(e) if is_last && is_torn(data, off, &e) => break,
            Err(e) => return Err(WalError::corrupt(path, off, e.kind.to_string())),
        };
        let corrupt = |reason: String| WalError::corrupt(path, off, reason);
        match (scan.records, d.record) {
            (0, Record::Crc(start)) => {
                if let Some(end) = prev_end
                    && start != end
                {
                    return Err(corrupt(format!(
                        "CRC chain broken: segment continues from {start:#010x} but the previous one ended at {end:#010x}"
                    )));
                }
            }
            (1, Record::Metadata(m)) => match &replay.metadata {
                Some(first) if first != m => {
                    return Err(corrupt(
                        "metadata differs from the earlier segments'".into(),
                    ));
                }
                Some(_) => {}
                None => replay.metadata = Some(m.to_vec()),
            },
            (2, Record::HardState(hs)) => replay.set_hard_state(hs),
            (n, r) if n < HEADER_RECORDS => {
                return Err(corrupt(format!(
                    "record {n} of a segment must be {}, found {}",
                    ["a CRC record", "metadata", "a hard state"][n],
                    kind_name(&r)
                )));
            }
            (_, Record::Entry { index, term, data }) => {
                replay
                    .entry(WalEntry {
                        index,
                        term,
                        data: data.to_vec(),
                    })
                    .map_err(corrupt)?;
                scan.max_index = scan.max_index.max(Some(index));
            }
            (_, Record::HardState(hs)) => replay.set_hard_state(hs),
            (
                _,
                Record::Snapshot {
                    index,
                    term,
                    conf_state,
                },
            ) => {
                replay
                    .mark(SnapshotMark {
                        index,
                        term,
                        conf_state: conf_state.to_vec(),
                    })
                    .map_err(corrupt)?;
            }
            (_, r @ (Record::Crc(_) | Record::Metadata(_))) => {
                return Err(corrupt(format!(
                    "unexpected {} record after the segment header",
                    kind_name(&r)
                )));
            }
        }
        scan.records += 1;
        scan.crc = d.crc;
        off = d.next;
        scan.valid_len = off;
    }
    if !is_last && scan.records < HEADER_RECORDS {
        return Err(WalError::corrupt(
            path,
            scan.valid_len,
            "segment header is incomplete",
        ));
    }
    Ok(scan)
}

/// Verifies and replays segments held in memory, oldest first, as [`Wal::open`] does its
/// files (each through the same `scan_segment`: the CRC chain across segments, the header
/// records, a torn tail accepted in the last one only, a last segment with an incomplete
/// header dropped), touching no file. What the fuzz target `wal` drives: the decoding of
/// arbitrary segment bytes as a restart would meet them.
pub fn replay_segments(segments: &[&[u8]]) -> Result<WalContents, WalError> {
    let mut replay = Replay::default();
    let mut end_crc = None;
    for (i, data) in segments.iter().enumerate() {
        let path = PathBuf::from(format!("segment-{i}.wal"));
        let is_last = i + 1 == segments.len();
        let scan = scan_segment(&path, data, end_crc, is_last, &mut replay)?;
        if scan.records < HEADER_RECORDS {
            if i == 0 {
                return Err(WalError::corrupt(
                    &path,
                    scan.valid_len,
                    "the only segment has an incomplete header",
                ));
            }
            break;
        }
        end_crc = Some(scan.crc);
    }
    let metadata = replay.metadata.clone().unwrap_or_default();
    Ok(replay.finish(metadata))
}

fn kind_name(r: &Record<'_>) -> &'static str {
    match r {
        Record::Metadata(_) => "metadata",
        Record::Entry { .. } => "entry",
        Record::HardState(_) => "hard state",
        Record::Crc(_) => "CRC",
        Record::Snapshot { .. } => "snapshot",
    }
}

/// Whether a record that failed to decode at `off` in the last segment is what a crash during
/// its write leaves behind. Appends are sequential and each is fsynced before the next, so
/// everything from a torn record on belongs to the one unacknowledged batch:
/// - it runs past the end of the file (short header or payload);
/// - or only zeros follow it (the file was extended but later bytes never reached disk);
/// - or it contains a never-written, zero-filled sector (pages landed out of order), which
///   includes a header that reads as zeros up to its sector's end.
///
/// A CRC mismatch with real data after it is corruption. A record whose CRC matches but whose
/// payload is malformed is never torn.
fn is_torn(data: &[u8], off: usize, err: &DecodeError) -> bool {
    let zero = |b: &[u8]| b.iter().all(|&x| x == 0);
    match err.kind {
        DecodeErrorKind::Short => true,
        DecodeErrorKind::Malformed { .. } => false,
        DecodeErrorKind::BadType(_) | DecodeErrorKind::BadCrc { .. } => {
            let end = err.end.min(data.len());
            let sector_end = ((off / SECTOR + 1) * SECTOR).min(data.len());
            let mut s = off.next_multiple_of(SECTOR);
            let mut zero_sector = false;
            while s + SECTOR <= end && !zero_sector {
                zero_sector = zero(&data[s..s + SECTOR]);
                s += SECTOR;
            }
            zero(&data[end..]) || zero(&data[off..sector_end]) || zero_sector
        }
    }
}

#[cfg(test)]
mod tests;
