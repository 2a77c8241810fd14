//! # actcd-wal — the write-ahead log
//!
//! Raft's source of truth on disk. It owns one directory (the daemon passes `member/wal/`) and
//! everything in it: the segment files, their framing and CRC chain, when they are fsynced,
//! cut, repaired and deleted. Nothing else writes there.
//!
//! ## Messages
//! [`WalActor`] is the [`Wal`]'s only owner and takes, from the raft node:
//! - `Append { hard_state, entries }` → `Result<(), String>`: writes the entries, then the hard
//!   state if any, and fsyncs once. `Ok` means durable: raft may then report them persisted.
//!   An empty Append writes nothing and does not fsync; one that only moves the hard state's
//!   commit index is not written until the next write carries it (raft's `MustSync` rule says
//!   it needs no fsync, as in etcd; the commit index is volatile in raft, so a restart that
//!   finds an older one re-commits the entries, and the applier skips what the backend holds).
//! - `ReleaseWal { index, term, conf_state }` → `Result<(), String>`: the backend is synced up to
//!   `index`; writes and fsyncs a snapshot mark, then deletes segments no longer needed.
//!
//! - `GetFsyncStats` → the fsync latency histogram, for `/metrics`.
//!
//! Errors are [`WalError`]s rendered with `to_string()` (they start with `wal:`); the actor logs
//! each one. The actor sends nothing.
//!
//! ## Where the fsync runs
//! The daemon starts the actor on the raft node's thread. An `Append` of at most
//! [`INLINE_MAX_ENTRIES`] entries (what one client's writes look like) is written and fsynced
//! right there, in the handler: the raft node's `send` is a mailbox push on the same thread, with
//! no thread wake-up either way. A larger `Append` (load) and every `ReleaseWal` move the `Wal`
//! itself, by value, to a tokio blocking-pool thread and take it back when done; the handler's
//! future is atomic, so the actor handles nothing else meanwhile, but its thread is free for the
//! front, preflight and the applier while the disk syncs. The raft node waits
//! for each append before the next, so appends keep their order either way. Ownership moves,
//! nothing is shared: no lock, no handle to the `Wal` outside this actor.
//!
//! Why both: fsyncing every Ready on the raft thread cost 15–20% of put throughput at 100
//! clients; sending every Ready to a WAL thread of its own cost single-client latency (two thread
//! hand-offs, 0.26 → 0.32 ms p50 on 2 cores). Until this layout the raft node wrote small
//! Readies itself through a closure over a `Mutex<Wal>` shared with this actor on its own thread.
//! Measured against that (release builds on the shared 2-core machine under a load average of
//! 5–7, both members up at once and each case alternating between them, medians of 12 runs):
//!
//! | `actcd-bench` | before (shared `Mutex<Wal>`) | after (one owner) |
//! |---|---|---|
//! | put, 100 clients, 10 conns | 15,356 req/s (p50 5.24 ms) | 16,797 req/s (p50 4.49 ms) |
//! | put, 1 client, p50 | 0.313 ms | 0.314 ms |
//! | range 1 key, linearizable, 100 clients | 46,737 req/s | 50,076 req/s |
//!
//! Single-client latency is unchanged within the noise (the per-put same-thread message round
//! trip costs microseconds); the raft node no longer waits on the WAL for Readies that need no
//! sync (see `actcd-raft`). Group commit on a WAL thread of its own (every Append a message,
//! appends queued during an fsync coalesced) was not pursued: it keeps the two thread hand-offs
//! per single-client write that this layout avoids, and the raft node already batches every
//! proposal queued during an fsync into the next Ready, which is one fsync.
//!
//! ## On-disk format
//! Files are `{seq:016x}-{index:016x}.wal`: `seq` counts segments from 0 with no gaps; `index`
//! is the first raft index the segment may hold (last index + 1 when it was cut; a hint, since a
//! raft overwrite can later put lower indexes in it). A segment is cut when the one being
//! written has reached 64 MiB ([`DEFAULT_SEGMENT_SIZE`], [`Wal::with_segment_size`] for tests),
//! at the start of the next write, so a record never straddles two files.
//!
//! Each record is framed as
//! `length: u32 LE | type: u8 | crc: u32 LE | payload[length]`, unpadded. Types:
//!
//! | type | name | payload |
//! |---|---|---|
//! | 1 | metadata | opaque bytes given at create (member and cluster id) |
//! | 2 | entry | index u64 LE, term u64 LE, data (the encoded raft entry) |
//! | 3 | hard state | term, vote, commit: u64 LE each |
//! | 4 | CRC | u32 LE: the running CRC before this segment |
//! | 5 | snapshot mark | index u64 LE, term u64 LE, conf_state (encoded raft `ConfState`) |
//!
//! Type 0 is never written, so zero-filled bytes never parse as a record.
//!
//! `crc` is CRC32C over `type ‖ payload`, seeded with the previous record's `crc`, so each
//! record vouches for the whole history before it. The chain runs across files: every segment
//! starts with a CRC record carrying the running CRC where the previous segment ended (0 for
//! the first ever), followed by the metadata and the hard state current at the cut. A new
//! segment is written under `….wal.tmp`, fsynced, renamed into place, and the directory
//! fsynced, so a `.wal` name always has a complete header.
//!
//! ## Open: verify and repair
//! [`Wal::open`] reads segments in seq order and checks: seqs are consecutive; each segment
//! starts with CRC, metadata, hard state; each CRC record matches where the previous segment
//! ended (the oldest surviving segment's is taken as the seed); every record's CRC; metadata is
//! the same in every segment; entries follow raft's rules (no gaps, nothing at or below a
//! snapshot mark written after it); marks never go backwards.
//!
//! A failure in the **last** segment is a torn write (a crash mid-append) when the record runs
//! past the end of the file, when only zeros follow it, or when it holds a zero-filled sector:
//! the file is truncated before it (`set_len` + fsync), a warning is logged and the WAL opens.
//! Those bytes were never acknowledged: appends are sequential and each is fsynced before the
//! next, so all of them belong to the last, unfinished batch. Anything else, or any failure in
//! an earlier segment, refuses to open with [`WalError::Corrupt`] naming the file and the byte
//! offset. A damaged length field in the last segment that points past the end of the file
//! reads like a torn write; like etcd, we accept that blind spot rather than refuse to restart
//! after every crash. Leftover `.wal.tmp` files (a crashed cut) are deleted.
//!
//! [`WalContents`] is the metadata, the latest snapshot mark, the newest hard state, and the
//! entries above the mark after replaying overwrites: an entry at or below the last index seen
//! truncates the log from that index, then is appended.
//!
//! ## Preallocation
//! Each segment's blocks are reserved when it is created (`fallocate`, zero-filled), as etcd
//! does, so an append's fdatasync never has to journal a new file size (about a third cheaper
//! per fsync on ext4 here). Writes are positional; the zeros after the last record read as the
//! end of the log, and a segment is cut back to its records before the next one begins, so
//! only the last segment ends in zeros.
//!
//! ## Invariants
//! - One fsync (`fdatasync`) per Append that carries entries or a new term or vote, and per
//!   ReleaseWal; a write that starts a new
//!   segment also fsyncs the new header and the directory (once per 64 MiB). With
//!   `--unsafe-no-fsync` (`Wal::set_unsafe_no_fsync`) Appends are written and not fsynced.
//! - After a failed write or fsync the WAL refuses everything ([`WalError::Failed`]): the page
//!   cache may have dropped the data, so only a reopen (which verifies) knows what is on disk.
//! - The writer refuses what the reader would call corruption (gaps, entries at or below the
//!   mark, marks going backwards), so an upstream bug fails a write, not the next restart. To
//!   install a snapshot from the leader, release at its index before appending the entries
//!   after it.
//! - Release deletes only the oldest segments, and only those whose entries are all ≤ the
//!   released index; never the segment being written. Since every segment header repeats the
//!   metadata and the then-current hard state, and the mark is written before any deletion, a
//!   reopen still returns the newest hard state, the mark and every entry above it.
//! - The directory is fsynced after every file creation, rename or removal.
//!
//! ## Failpoints (feature `failpoints`, fail-rs; configured by `FAILPOINTS` in the daemon)
//! All four sit in `Wal::write`, the one place records reach the segment (appends, and the
//! snapshot mark of a release). `return` fails the write as a real I/O error does: the WAL is
//! marked failed and refuses everything after, the `Append` answers `Err`, and the raft node
//! reports `Fatal` (the member exits 1).
//! - `wal_before_append`: before anything is written.
//! - `wal_before_hard_state`: before a write that carries a hard state record (entries and the
//!   hard state go out in one write), after `wal_before_append`.
//! - `wal_after_append_before_fsync`: the records are written, not yet fsynced.
//! - `wal_after_fsync`: the records are durable; `return` reports a failure anyway.
//!
//! ## Layout
//! `record.rs` framing and the CRC chain · `segment.rs` file names, listing, directory fsync ·
//! `replay.rs` the log rules (overwrite, gap, mark), pure · `wal.rs` [`Wal`]: create, open,
//! append, release, torn-write detection (tests in `wal/tests.rs`) · `actor.rs` [`WalActor`] ·
//! `error.rs` [`WalError`].

mod actor;
mod error;
mod record;
mod replay;
mod segment;
mod wal;

pub use actcd_types::msg::{HardState, WalEntry};
pub use actor::{INLINE_MAX_ENTRIES, WalActor};
pub use error::WalError;
pub use wal::{DEFAULT_SEGMENT_SIZE, Wal, replay_segments};

/// A snapshot mark: the state machine durably covers the log up to `index`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotMark {
    pub index: u64,
    pub term: u64,
    /// raft-rs `ConfState`, encoded: the voters at `index`.
    pub conf_state: Vec<u8>,
}

/// What [`Wal::open`] recovered: everything raft needs to restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalContents {
    pub metadata: Vec<u8>,
    /// The latest snapshot mark, if any release happened.
    pub snapshot: Option<SnapshotMark>,
    /// The newest hard state written (default if none ever was).
    pub hard_state: HardState,
    /// Entries above the snapshot mark, ascending and contiguous, overwrites applied.
    pub entries: Vec<WalEntry>,
}
