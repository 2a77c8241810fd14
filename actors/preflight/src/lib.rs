//! # actcd-preflight — checks before a write is proposed
//!
//! Owns the write-admission limits: `--max-request-bytes`, `--max-txn-ops`, and the gap between
//! raft's commit index and the applier's applied index. Everything here is cheap and stateless
//! except the gap, which raft reports after each Ready.
//!
//! ## Messages
//! - takes [`Submit`](actcd_types::msg::Submit) from the front: validates the request
//!   (`actcd_types::validate`), refuses it if the server is too far behind
//!   (`etcdserver: too many requests`) or the encoded entry is over `--max-request-bytes`
//!   (`etcdserver: request is too large`), then sends `Register{id, reply}` to the applier and
//!   `Propose` to the raft node. If raft refuses the proposal it sends `Cancel{id, error}` so the applier
//!   forgets the waiter.
//! - takes [`RaftProgress`](actcd_types::msg::RaftProgress) from the raft node and
//!   [`QuotaUsage`](actcd_types::msg::QuotaUsage) (live backend bytes) from the daemon's
//!   100 ms ticker.
//! - `--quota-backend-bytes`: a write whose cost (etcd's estimate: 256 bytes plus key and value
//!   per put) would take the backend past the quota is refused with
//!   `etcdserver: mvcc: database space exceeded`, and the NOSPACE alarm is proposed (at most
//!   once per usage report). The MVCC store then refuses growing writes at apply time until
//!   the alarm is disarmed. Usage is the backend's live pages, not its file size: LMDB reuses
//!   freed pages, so compacting is enough to make room (etcd also needs a defrag).
//!
//! ## Invariants
//! - Nothing that fails a check is proposed, so bad input never changes data.
//! - `Register` reaches the applier's mailbox before the `Propose` is even sent, so the applier
//!   always knows the waiter before it can apply the entry.
//!
//! ## Layout
//! `check.rs` the pure checks (`Limits`, `check_request`) · `actor.rs` the actor glue.

mod actor;
mod check;

pub use actor::{PreflightActor, PreflightPeers};
pub use check::{
    DEFAULT_QUOTA_BYTES, Limits, MAX_APPLY_GAP, check_request, fits_quota, quota_cost,
};
