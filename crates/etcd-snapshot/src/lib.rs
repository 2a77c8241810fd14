//! # actcd-etcd-snapshot — snapshot formats: etcd's file (written and read without bbolt), and ours
//!
//! A plain library (no actor, no state of its own): etcd's `Snapshot` RPC streams its bbolt
//! backend file, `etcdctl snapshot save` stores it, and `etcdutl snapshot status|restore` read
//! it. For snapshots to move both ways between etcd and actcd this crate holds:
//!
//! - `bolt.rs` — the bbolt 1.3 file format: [`bolt::Writer`] lays a file out for a
//!   [`bolt::Source`] replayed twice (a plan that fixes every page and the size, then the pages
//!   in file order, so memory stays flat); [`bolt::Db`] reads any file bbolt writes (etcd's
//!   own included) page by page through a [`bolt::ReadAt`] ([`bolt::FileBytes`]: positioned
//!   reads of a file), handing buckets and pairs over as their pages are read and checking
//!   every offset; [`bolt::read`] collects them in memory (tests, fuzzing).
//! - `layout.rs` — etcd 3.5's backend layout over our tables: [`visit_etcd_layout`] /
//!   [`EtcdLayout`] replay a read transaction as etcd's buckets (members as etcd's JSON,
//!   compaction marks as revisions, `confState`/`authRevision`/`cluster` added), and
//!   [`from_etcd_source`] (also `bolt::Db::to_records`) turns etcd's buckets back into records
//!   of our tables one at a time for a restore; [`from_etcd_buckets`] collects them from
//!   buckets held in memory.
//! - `stream.rs` — the Snapshot RPC's messages: [`SnapshotFile`] cuts the file into etcd's
//!   32 KiB chunks counting down `remaining_bytes` and ends with the file's SHA-256;
//!   [`send_snapshot`] runs it into a tokio channel on a blocking thread.
//!
//! ## Who uses it
//! The MVCC actor answers `SnapshotStream` (`actcd_types::msg`) with a channel that
//! [`send_snapshot`] fills from a read transaction; the front forwards the chunks. `actcd
//! snapshot status|restore` (in `src/`) read files in place with [`bolt::Db`], and the restore
//! writes the records as they come (a commit every 64 MiB).
//!
//! Our own format lives here too: `whole_store.rs`, every record of every table as one blob
//! ([`whole_store::encode_to`] streams it, [`whole_store::records`] walks it in place,
//! [`whole_store::install_blob`] / [`whole_store::install_blob_batched`] write it), the
//! snapshot a leader streams to a follower too far behind for its log. The MVCC actor makes
//! it, the backend installs it; no actor crate holds a snapshot format.

//!
//! ## Invariants
//! - Both passes of a writer must see the same items: the second pass checks every page
//!   against the plan, and a source that changed is an error, never a wrong file. A read
//!   transaction never changes, so the Snapshot RPC never meets it.
//! - Reading never panics on a damaged file: every offset is checked, damage is an error.
//!   Nor does it take more than the file's size in time: each page may be reached once, and
//!   no more bytes are handed over than the file holds. Memory stays at a page per tree level
//!   (the largest value's overflow pages) and a bit per page of the file. The fuzz target `snapshot`
//!   (`fuzz/`) reads arbitrary files and whole-store blobs.
//! - Errors are [`EtcdSnapshotError`]: `bolt: …` for the file format, `snapshot: …` for
//!   records that are not what etcd's layout holds, the storage error as it came.
//!
//! ## Layout
//! `bolt.rs` the file format · `layout.rs` etcd's buckets over our tables · `stream.rs` the
//! RPC's chunks · `error.rs` [`EtcdSnapshotError`]. `tests/fixtures/` holds a snapshot etcd
//! 3.5.1 wrote.

pub mod bolt;
mod error;
mod layout;
mod stream;
pub mod whole_store;

pub use bolt::Item;
pub use error::EtcdSnapshotError;
pub use layout::{
    EtcdLayout, META_FINISHED_COMPACT, META_SCHEDULED_COMPACT, OwnedRecord, RecordFn,
    from_etcd_buckets, from_etcd_source, visit_etcd_layout,
};
pub use stream::{CHUNK_SIZE, SnapshotFile, send_snapshot};
