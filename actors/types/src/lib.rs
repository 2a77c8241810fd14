//! # actcd-types — the shared vocabulary of actcd's actors
//!
//! Owns no state and runs no actors. It holds what more than one actor crate must agree on:
//!
//! - [`Revision`]: etcd's (main, sub) revision and its 17/18-byte on-disk encoding used as the key of
//!   the backend's `key` table.
//! - [`EtcdError`]: every error a client can see, with etcd 3.5.1's exact message and gRPC code, and
//!   the one mapping to `tonic::Status` ([`EtcdError::to_status`]).
//! - [`storage`]: the storage-engine traits ([`storage::KvEngine`], [`storage::ReadTxn`],
//!   [`storage::WriteTxn`]) the MVCC store writes through, with an in-memory engine for tests and
//!   benches. The LMDB engine lives in `actcd-backend`; the MVCC crate never names it. Also the
//!   [`storage::WriteBuffer`] a state owner writes into until the backend commits (an op log and
//!   an overlay), and what read views on other threads take of it: the puts of one tracked
//!   table not yet committed, as immutable runs ([`storage::Fresh`]) laid over a read
//!   transaction ([`storage::FreshTxn`]).
//! - [`msg`]: the messages that cross crate lines (raft ⇄ WAL, raft → applier, front → preflight,
//!   applier → MVCC, any actor → the daemon's supervisor: `Fatal`, `Shutdown`, …). Each actor
//!   crate takes `Recipient<M>`s of these at start-up, so no actor crate depends on another and a
//!   test can hand any actor a recorder. No actor crate stops the System: it reports `Fatal`.
//! - [`watch`]: the watch hub's stream messages from the front (`OpenStream`,
//!   `WatchRequestMsg`, `RejectWatch`, `CloseStream`) and what a stream carries
//!   (`StreamResponse`, `StreamId`, `WatchId`).
//!
//! - [`key_record`]: the `key` table's record format (a CRC32C over the revision key and the
//!   `mvccpb.KeyValue`), its one encode/decode pair and the damaged-record error.
//! - [`v2`]: the v2 store's messages (`--enable-v2`): applied entries, reads, watches.
//! - [`auth`]: the auth store's published permission view ([`auth::PermissionView`], shared as
//!   [`auth::SharedView`]): what the applier and the front judge requests against.
//!
//! ## Invariants
//! - Revisions are strictly ordered by (main, sub); the encoding sorts bytewise in the same order.
//! - An error's message string is part of the API: clients match on it. Change one only after
//!   checking real etcd 3.5.1.
//!
//! ## Layout
//! `revision.rs` encoding · `error.rs` errors and the gRPC table · `storage.rs` engine traits and
//! `MemEngine` · `msg.rs` cross-crate messages · `watch.rs` the watch streams' messages ·
//! `auth.rs` the permission view trait · `ids.rs` request-id generator · `validate.rs`
//! the cheap request checks etcd makes before a request reaches the server (used by preflight for
//! writes and by the front for reads) · `duration.rs` Go-style durations (flags, JWT options) ·
//! `meter.rs` each actor's mailbox and handler timings (`MailboxProbe`) · `synclog.rs` what
//! crash tests learn of fsyncs (`ACTCD_DEBUG_SYNC_LOG`, failpoints builds only) ·
//! `snapshot_blob.rs` a leader's store copy as a follower received it, on disk
//! ([`snapshot_blob::SnapshotBlob`]).

pub mod auth;
pub mod duration;
pub mod error;
pub mod ids;
pub mod key_record;
pub mod meter;
pub mod msg;
pub mod private_fs;
pub mod quota;
pub mod revision;
pub mod snapshot_blob;
pub mod storage;
pub mod synclog;
pub mod v2;
pub mod validate;
pub mod watch;

pub use error::EtcdError;
pub use revision::Revision;

/// Who a request runs as: the user name and the auth revision it was authorized at. Empty user
/// when auth is disabled. Names are bytes, as etcd takes them: they need not be UTF-8.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthInfo {
    pub username: Vec<u8>,
    pub revision: u64,
}

/// The identity of this member within its cluster, stamped on every response header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemberIdentity {
    pub cluster_id: u64,
    pub member_id: u64,
}
