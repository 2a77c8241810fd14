//! # actcd-etcd-snapshot — snapshot formats: etcd's file (written and read without bbolt), and ours
//!
//! A plain library (no actor, no state of its own): etcd's `Snapshot` RPC streams its bbolt
//! backend file, `etcdctl snapshot save` stores it, and `etcdutl snapshot status|restore` read
//! it. For snapshots to move both ways between etcd and actcd this crate holds:
//!
//! - `bolt.rs` — the bbolt 1.3 file format: [`bolt::Writer`] lays a file out for a
//!   [`bolt::Source`] replayed twice (a plan that fixes every page and the size, then the pages
//!   in file order, so memory stays flat), [`bolt::read`] reads any file bbolt writes (etcd's
//!   own included), checking every offset.
//! - `layout.rs` — etcd 3.5's backend layout over our tables: [`visit_etcd_layout`] /
//!   [`EtcdLayout`] replay a read transaction as etcd's buckets (members as etcd's JSON,
//!   compaction marks as revisions, `confState`/`authRevision`/`cluster` added), and
//!   [`from_etcd_buckets`] reads etcd's buckets back as records of our tables for a restore.
//! - `stream.rs` — the Snapshot RPC's messages: [`SnapshotFile`] cuts the file into etcd's
//!   32 KiB chunks counting down `remaining_bytes` and ends with the file's SHA-256;
//!   [`send_snapshot`] runs it into a tokio channel on a blocking thread.
//!
//! ## Who uses it
//! The MVCC actor answers `SnapshotStream` (`actcd_types::msg`) with a channel that
//! [`send_snapshot`] fills from a read transaction; the front forwards the chunks. `actcd
//! snapshot status|restore` (in `src/`) read files with [`bolt::read`] and
//! [`from_etcd_buckets`].
//!
//! Our own format lives here too: `whole_store.rs`, every record of every table as one blob
//! ([`whole_store::encode_into`], [`whole_store::install`]), the snapshot a leader sends a
//! follower too far behind for its log. The MVCC actor makes and installs it; no actor crate
//! holds a snapshot format.
//!
//! ## Invariants
//! - Both passes of a writer must see the same items: the second pass checks every page
//!   against the plan, and a source that changed is an error, never a wrong file. A read
//!   transaction never changes, so the Snapshot RPC never meets it.
//! - Reading never panics on a damaged file: every offset is checked, damage is an error.
//!   Nor does it take more than the file's size in time or memory: each page may be reached
//!   once, and no more bytes are copied out than the file holds. The fuzz target `snapshot`
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
    EtcdLayout, META_FINISHED_COMPACT, META_SCHEDULED_COMPACT, OwnedRecord, from_etcd_buckets,
    visit_etcd_layout,
};
pub use stream::{CHUNK_SIZE, SnapshotFile, send_snapshot};
