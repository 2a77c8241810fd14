//! # actcd-backend — the state machine's storage, LMDB through heed
//!
//! Owns the LMDB environment under `member/snap/` and its named databases, one per
//! [`Table`](actcd_types::storage::Table) (etcd's "buckets"). [`LmdbEngine`] implements the
//! engine traits of `actcd_types::storage` ([`KvEngine`](actcd_types::storage::KvEngine),
//! `ReadTxn`, `WriteTxn`), which is all the MVCC store, lessor and auth store see of it;
//! [`BackendActor`] does the blocking maintenance work on a `SyncArbiter` thread.
//!
//! ## Tables
//! Keys and values are bytes; LMDB orders keys bytewise. What goes in them is decided by the
//! crates that write them; the formats other crates read back are:
//!
//! | database | key | value |
//! |---|---|---|
//! | `key` | a revision, [`Revision::to_bytes`](actcd_types::Revision::to_bytes): 8-byte big-endian main, `_`, 8-byte big-endian sub (17 bytes), plus a trailing `t` for a tombstone (18 bytes) | an encoded `mvccpb.KeyValue` |
//! | `meta` | `consistent_index`, `term`, `scheduledCompactRev`, `finishedCompactRev` | each an 8-byte big-endian integer |
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
//!   One actor writes (the one applying committed entries); a second writer's `write()` would
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
//! thread. The daemon also sends [`SyncBackend`] every 100 ms and always before WAL segments are
//! released, so the WAL never drops an entry the synced backend doesn't cover.
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
//! ## Defragmentation
//! [`LmdbEngine::defragment`] writes a compacting copy beside the data file, waits for the
//! transactions of the open environment to end (each holds the environment "generation" it
//! began in; new ones wait for the swap), renames the copy over `data.mdb` in one atomic step,
//! syncs the directory and reopens. A crash before the rename leaves the old file whole (the
//! copy is deleted at the next open); after it, the new one. The one writer calls it with no
//! transaction of its own open.
//!
//! ## etcd's file format
//! `bolt.rs` reads and writes bbolt files (etcd's backend): the Snapshot RPC streams one, page by
//! page, from a [`bolt::Source`] replayed twice (a plan, then the pages), and `actcd snapshot`
//! reads them, etcd's own included.
//!
//! ## Messages taken ([`BackendActor`])
//! - [`SyncBackend`] → `Result<(), String>`: flush committed transactions to disk.
//! - [`DbSize`] → `Result<(u64, u64), String>`: file size and bytes in use.
//! - [`CopyTo`] → `Result<(), String>`: write a compacted copy (snapshots, defrag).
//!
//! It sends none. Errors are [`BackendError`]s, `backend: `-prefixed, turned into strings at the
//! message boundary and into `StorageError` at the trait boundary.
//!
//! ## Layout
//! `engine.rs` opening the environment, options, sync, size, copy, the `KvEngine` impl ·
//! `txn.rs` the read and write transactions · `actor.rs` messages and `BackendActor` ·
//! `error.rs` `BackendError` · `bolt.rs` the bbolt format · `tests.rs` engine behaviour through
//! the traits.

mod actor;
mod batch;
pub mod bolt;
mod engine;
mod error;
mod txn;

#[cfg(test)]
mod tests;

pub use actcd_types::msg::{CopyTo, DbSize, SyncBackend};
pub use actor::{BackendActor, Subscribe};
pub use batch::{Batch, MAX_PENDING_BYTES, MAX_PENDING_OPS};
pub use engine::{BackendOptions, DATA_FILE, Durability, LmdbEngine};
pub use error::BackendError;
