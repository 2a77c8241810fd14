//! # actcd-backend — the state machine's storage, LMDB through heed
//!
//! Owns the LMDB environment under `member/snap/` and its named databases, one per
//! [`Table`](actcd_types::storage::Table) (etcd's "buckets"). [`BackendActor`] is the
//! environment's only writer once the member runs: the state owners send it their writes as
//! messages and read the committed state through the read-only
//! [`ReadEngine`](actcd_types::storage::ReadEngine) handle [`LmdbEngine`] gives them.
//! [`LmdbEngine`] also implements the full engine traits of `actcd_types::storage`
//! ([`KvEngine`](actcd_types::storage::KvEngine), `ReadTxn`, `WriteTxn`), used directly only
//! before the actor starts (opening the store, `actcd snapshot restore`) and by tests.
//!
//! ## The write path, and reading one's own uncommitted writes
//! etcd's answer, kept: a write buffer over the batch transaction that reads merge in. A state
//! owner (the MVCC store) applies a batch into its
//! [`WriteBuffer`](actcd_types::storage::WriteBuffer) — an ordered op log and an overlay of the
//! newest write of each key, tagged with the batch's sequence number — and sends the drained ops
//! as one [`Commit`](actcd_types::msg::Commit)`{seq, ops, consistent_index}` at its commit
//! points (the 100 ms tick, 10,000 requests, 64 MiB, or before anything that must see them
//! committed). The actor replays them into its one open write transaction ([`Batch`]), writes the
//! consistent index and term in the same transaction, and commits per etcd's batching policy:
//! on `Flush`/`SyncBackend` (the daemon's 100 ms tick) or at [`MAX_PENDING_OPS`] (10,000) ops or
//! [`MAX_PENDING_BYTES`] (64 MiB). After each commit it sends `Committed{seq}` to its
//! subscribers, who drop the overlay entries whose newest write is covered. Reads on the owner's
//! thread look at the overlay first, then at a read transaction begun after the last trim, so an
//! entry leaves the overlay only once a commit holding it is visible to new read transactions.
//!
//! Why this and not the alternatives: keeping the LMDB write transaction on the store's thread
//! (the old design) makes the store the writer; sharing one transaction across threads is
//! impossible (LMDB ties it to its thread); having the backend answer reads would put every read
//! behind commits. The buffer costs one copy of each key and value (op log) plus an overlay
//! entry, and moves the LMDB puts and the `fdatasync` to the backend's thread.
//!
//! What must see every applied write in the engine (HashBackend, Defragment, the Snapshot RPC's
//! reader, a follower's snapshot, SyncStorage before WAL release, installing a leader's
//! snapshot) is asked of the backend *after* the writes were sent: one mailbox keeps the order,
//! and every maintenance message commits the batch first. A failed write or commit is fatal:
//! the batch is dropped uncommitted, everything after is refused, and the fatal recipient hears
//! `BackendFailed` (the store then refuses to apply, so the member stops; a restart replays the
//! WAL above the last committed consistent index).
//!
//! ## Tables
//! Keys and values are bytes; LMDB orders keys bytewise. What goes in them is decided by the
//! crates that write them; the formats other crates read back are:
//!
//! | database | key | value |
//! |---|---|---|
//! | `key` | a revision, [`Revision::to_bytes`](actcd_types::Revision::to_bytes): 8-byte big-endian main, `_`, 8-byte big-endian sub (17 bytes), plus a trailing `t` for a tombstone (18 bytes) | a 4-byte CRC32C of the key and the record, then an encoded `mvccpb.KeyValue` ([`actcd_types::key_record`]) |
//! | `meta` | `consistent_index`, `term`, `scheduledCompactRev`, `finishedCompactRev`, `actcdKeyFormat` | each an 8-byte big-endian integer |
//! | `lease`, `auth`, `authUsers`, `authRoles`, `members`, `members_removed`, `alarm` | | owned by the lessor, auth store and membership |
//!
//! Because revision keys sort bytewise in revision order, recovery rebuilds the key index with
//! one scan of `key`, and compaction deletes a prefix of it. (etcd stores the two compaction
//! marks as 17-byte revisions; an actcd data directory is not a bbolt file, so it keeps the
//! plain integer.) LMDB rejects empty keys and keys longer than
//! [`LmdbEngine::max_key_size`] (511 bytes): revision, lease and member keys are far below it;
//! user and role names longer than that cannot be stored.
//!
//! ## Invariants
//! - One write transaction at a time: LMDB serializes writers with a mutex owned by the thread
//!   that opened the transaction, so a write transaction begins and ends on one thread (the
//!   boxed `WriteTxn` is not `Send`), and a thread never opens a second one while it holds one.
//!   One actor writes ([`BackendActor`], on its own thread); a second writer's `write()` would
//!   block until the first transaction ends.
//! - Readers run concurrently and are never blocked by the writer, nor block it: each read
//!   transaction is a snapshot of the last commit before it began (MVCC pages, copy-on-write).
//!   Read transactions don't use thread-local storage, so one thread may hold several at once.
//!   A long-lived read transaction pins the pages of its snapshot and makes the file grow.
//! - A write transaction is atomic: after a crash either all of its writes are there or none.
//!   Its own reads see its writes; dropping it without `commit` discards them. The consistent
//!   index is written in the same transaction as the data it covers, which makes replaying the
//!   WAL above it idempotent.
//!
//! ## Durability
//! By default ([`Durability::NoMetaSync`]) the environment is opened with LMDB's
//! `MDB_NOMETASYNC`: each commit `fdatasync`s its data pages, and the meta page reaches the disk
//! with the next commit or sync. A power loss can undo the last commit — the raft WAL, fsynced on
//! every append, replays it, since raft re-applies every committed entry above the consistent
//! index found here — but can never leave the file inconsistent. The applier batches a whole
//! Ready into one commit, so this is one extra `fdatasync` per applied batch, off the raft
//! thread. The daemon also sends [`SyncBackend`] every 100 ms, and the store always before WAL
//! segments are released, so the WAL never drops an entry the synced backend doesn't cover.
//!
//! [`Durability::NoSync`] (`MDB_NOSYNC`) is faster (no fsync at commit) and survives a process
//! crash (committed pages are in the page cache), but on a power loss LMDB keeps its integrity
//! only if the file system writes pages back in order, which ext4 and XFS don't promise for
//! in-place overwrites: a meta page can reach the disk before the pages it points to. Nothing can
//! replay a corrupt file, so it is not the default.
//!
//! ## Sizes
//! The map size ([`BackendOptions::map_size`], 8 GiB by default) is address space, not memory or
//! disk: the data file grows as pages are written and never shrinks; freed pages are reused.
//! [`KvEngine::size`](actcd_types::storage::KvEngine::size) reports the file's size and the bytes
//! in live pages; a compacting copy ([`CopyTo`]) writes only the live pages.
//!
//! ## Defragmentation, online (`defrag.rs`)
//! etcd's defragmentation holds every write for the whole copy (etcd #9222). Here writes go on:
//! 1. `Defragment` commits the batch and starts recording: every `Commit` written from then on
//!    is also kept ([`DefragRun`]).
//! 2. A worker thread (lowest priority) writes a compacting copy (`mdb_env_copy2`, only live
//!    pages) into a new directory `defrag-N` inside the environment's, syncs it and opens it
//!    as an environment of its own ([`LmdbEngine::defrag_copy`]). The copy's snapshot is some commit at or after
//!    step 1; it need not be known, because every op is a put or delete of one key, so
//!    replaying from before it is exact (the module doc of `defrag.rs` proves it).
//! 3. While more than [`FINAL_ROUND_OPS`] ops are recorded, a worker replays them into the copy
//!    in one transaction ([`DefragCopy::replay`]), up to [`MAX_ROUNDS`] rounds.
//! 4. On this thread: the batch is committed, the rest replayed, the copy synced and renamed
//!    over `data.mdb` in one atomic step, the directory synced, and the copy's environment
//!    becomes the one in use ([`LmdbEngine::defrag_swap`]). No commit falls between.
//!
//! Transactions of the old environment read on in it after the swap (its file lives until they
//! end); once none is left (checked after the swap and on every flush,
//! [`LmdbEngine::reap_retired`]) a thread of its own closes it: its mapped pages given back in
//! 8 MiB slices, then the environment closed, then the unlinked file cut short 8 MiB at a time.
//! Closed in one go, a 72 MiB file stalled every put, read and watch event for 83 ms (the
//! address-space lock `munmap` holds, and one journal commit freeing every block, which the
//! WAL's next sync waits for). The copy itself reaches the disk 1 MiB at a time
//! (`sync_file_range`) for the same reason, and the threads that copy and close run at nice 19
//! and the lowest best-effort I/O priority: on 2 cores the copy otherwise takes a core the
//! write path needs. The directory the copy was opened in (which keeps
//! its lock file) goes with the environment. So the swap waits for no reader, and a long
//! Snapshot stream no longer holds it up. A crash before
//! the rename leaves the old file whole (the `defrag-N` directory is deleted at the next
//! open); after it, the copy, which holds every commit. More than [`MAX_LOG_BYTES`] written
//! during one defragmentation ends it with an error, the data file unchanged. A `Defragment`
//! asked while one runs joins it. Without the actor (start-up, tests) [`LmdbEngine::defragment`]
//! runs the copy and the swap in one call.
//!
//! ## At rest
//! Writing leaves the data file's pages it touched mapped into the process (RssFile: 280-440
//! MiB after loading 20 GiB), held by nothing but the page table. Every 3 s the actor asks
//! [`rest::AtRest`] whether a whole tick passed without a commit; the first time it has since
//! the last commit, the mapped pages are let go ([`LmdbEngine::release_mapped_pages`], the same
//! release recovery makes after rebuilding the index; the pages stay in the page cache).
//!
//! ## etcd's file format
//! etcd's bbolt file (the Snapshot RPC's stream, `actcd snapshot`) is not this crate's: it
//! lives in the plain library `actcd-etcd-snapshot`, which reads the store through the engine
//! traits like any other reader.
//!
//! ## Messages taken ([`BackendActor`], alone on an `Arbiter` thread; all in `actcd_types::msg`)
//! - `Commit{seq, ops, consistent_index}` → `()`: into the open transaction, committed when full.
//! - `Flush` → `Result<(), String>`: commit the batch.
//! - [`SyncBackend`] → `Result<(), String>`: commit the batch and flush every commit to disk.
//! - [`DbSize`] → `Result<(u64, u64), String>`: file size and bytes in use.
//! - [`CopyTo`] → `Result<(), String>`: commit, then write a compacted copy.
//! - `Defragment` → `Result<(u64, u64), EtcdError>`: commit, then give free pages back, with
//!   commits going on meanwhile (above); answered when the copy is swapped in.
//! - `OpenStoreReader` → `Result<StoreReader, EtcdError>`: commit, then a read transaction that
//!   may move to another thread (the Snapshot RPC; a follower's snapshot is made from it).
//! - `PrepareSnapshot{blob}` → `Result<PreparedStore, String>`: a leader's snapshot as a
//!   follower's transport received it (a file): a worker thread builds it into a store of its
//!   own in a `defrag-N` directory, committing every [`PREPARE_BATCH_BYTES`] (LMDB holds a
//!   transaction's pages until it commits; the store is nobody's yet, so a crash part-way
//!   leaves only a directory the next open deletes), before raft is handed the snapshot. The
//!   store waits here; a `PreparedStore` dropped unused sends `ReleasePrepared{id}`, which
//!   deletes it.
//! - `ReplaceStore{copy}` → `Result<(), String>`: commit the batch, then swap the prepared
//!   store in for the data file exactly as a defragmentation's copy (renamed over it, the
//!   directory synced, readers of the old store reading on); a copy still in its file is
//!   built first, the same way, on this thread. A crash leaves the old store or the new one.
//!   A defragmentation under way ends with an error. Sent by the state owner after its
//!   pending applies, so nothing it applied is lost or reordered. As in etcd (whose follower
//!   renames the received `.snap.db` in), installing is a rename, so raft waits only for that
//!   and the index rebuild, and the member keeps answering its leader meanwhile.
//! - `GetCommitStats`; [`Subscribe`] (from `src/`: who hears `Committed` and `BackendFailed`);
//!   `MailboxProbe`/`GetMeter`.
//!
//! ## Messages sent
//! `Committed{seq}` to each subscriber after each commit; `BackendFailed{error}` to the fatal
//! recipients on the first failure. Errors are [`BackendError`]s, `backend: `-prefixed, turned
//! into strings at the message boundary and into `StorageError` at the trait boundary.
//!
//! ## Measurements (2 vCPUs, shared and noisy; `actcd-bench`, release, medians of 3)
//! Before = a00f908 (the store held the LMDB write transaction), after = this design; one fresh
//! member each, `put` 100 clients/10 conns 50k × 256 B, `put` 1 client 10k, `range` of one key
//! at 100 clients (serializable, linearizable), before and after interleaved. The machine ran
//! other agents' builds (load 5–7 on 2 cores): the same binary moved by up to 40% between
//! rounds, so these say "no loss beyond noise", not more.
//!
//! | run | put 100 req/s | put 1 p50 ms | range s req/s | range l req/s |
//! |---|---:|---:|---:|---:|
//! | 1: before / after (a `Commit` per batch) | 16,967 / 15,637 | 0.310 / 0.327 | 43,716 / 42,489 | 40,799 / 40,007 |
//! | 2: before / after (a `Commit` per 100 ms tick or 10,000 requests, kept) | 10,100 / 9,663 | 0.428 / 0.450 | 37,254 / 37,869 | 33,200 / 29,955 |
//!
//! The store sends its buffered writes at the old commit points (each 100 ms tick, 10,000
//! requests, 64 MiB) rather than after every batch: the backend's thread then sleeps between
//! ticks instead of waking per batch on a 2-core machine. `cargo bench --bench backend` times
//! the actor alone (`backend/actor`, `backend/read_during_commits`).
//!
//! ## Failpoints (feature `failpoints`, fail-rs; configured by `FAILPOINTS` in the daemon)
//! - `backend_before_commit` (`Batch::commit`, an open write transaction about to commit):
//!   `return` drops it uncommitted and fails as a refused commit does: the batch refuses all
//!   that follows, the fatal recipients hear `BackendFailed`, the member exits 1.
//! - `backend_after_commit` (`Batch::commit`, right after a successful commit): `return`
//!   reports the commit failed all the same, with the same consequences.
//! - `defrag_after_copy` (the copy written and synced, not yet opened): `return` drops it and
//!   `Defragment` answers the error (not fatal); `panic` leaves a `defrag-N` directory the next
//!   open deletes.
//! - `defrag_before_swap` (every round replayed, the copy synced, before the rename over
//!   `data.mdb`): `return` fails the rename; the copy is deleted, the old file stays in use,
//!   and `Defragment` answers the error (not fatal).
//! - `defrag_after_swap` (renamed and the directory synced, before the copy's environment is
//!   put in use): `panic` dies with the copy as the data file; `return` completes the swap
//!   (after the rename there is no going back) and answers the error.
//!
//! ## Layout
//! `engine.rs` opening the environment, options, sync, size, copy, the `KvEngine` and
//! `ReadEngine` impls · `defrag.rs` online defragmentation's steps and [`DefragRun`] ·
//! `txn.rs` the read and write transactions · `batch.rs` [`Batch`], the
//! open write transaction and the commit policy · `actor.rs` `BackendActor`, `Subscribe` ·
//! `error.rs` `BackendError` · `tests.rs` engine behaviour through the traits ·
//! `defrag_tests.rs` defragmentation's. (etcd's bbolt
//! file format lives in the plain library `crates/etcd-snapshot`.)

mod actor;
mod batch;
mod defrag;
mod engine;
mod error;
pub mod rest;
mod txn;

#[cfg(test)]
mod defrag_tests;
#[cfg(test)]
mod tests;

pub use actcd_types::msg::{CopyTo, DbSize, SyncBackend};
pub use actor::{BackendActor, Subscribe};
pub use batch::{Batch, MAX_PENDING_BYTES, MAX_PENDING_OPS};
pub use defrag::{
    DefragCopy, DefragRun, DefragStep, FINAL_ROUND_OPS, MAX_LOG_BYTES, MAX_ROUNDS,
    PREPARE_BATCH_BYTES,
};
pub use engine::{BackendOptions, DATA_FILE, Durability, LmdbEngine};
pub use error::BackendError;
