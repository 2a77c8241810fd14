//! # actcd-applier — committed entries into the state machine
//!
//! Owns the applied index, the consistent index it started from, and the reply registry: the
//! requests waiting, by id, for their entry to be applied.
//!
//! ## Messages
//! - takes `Apply{entries}` from the raft node, in log order. Entries at or below the consistent
//!   index read from the backend at start-up were applied before a restart and are skipped; the
//!   rest are decoded and sent to the MVCC store as one `ApplyBatch`, which writes them and the new
//!   consistent index in one backend transaction. The batch carries the waiter registered under
//!   each request's id, and the store answers it as soon as the request is applied: the reply
//!   goes store → caller, not store → applier → caller, which took one thread wake-up off every
//!   write. Then `Applied{index}` goes back to the raft node.
//! - takes `InstallSnapshot` from the raft node (a leader's snapshot): forwarded to the store
//!   behind the batches before it; the consistent index moves to the one the snapshot covers.
//!   Conf-change entries carry their request in their context and are applied like the rest.
//! - sends `Fatal` to the daemon's supervisor when the store refuses a batch (see Invariants).
//! - takes `Register{id, reply}` / `Cancel{id}` from preflight. (Linearizable reads wait in the
//!   raft node, which hears `Applied` too.)
//!
//! ## Invariants
//! - Batches are applied one at a time in the order they arrive (`AtomicResponse`): a later batch
//!   never starts before an earlier one is written.
//! - A reply finds its caller by request id, never by queue order. A waiter whose entry is applied
//!   gets exactly one answer; waiters on a failed proposal are cancelled.
//! - A storage failure while applying stops the member: continuing would let memory and disk, or
//!   this member and the others, disagree. The applier sends `Fatal` to the daemon's supervisor
//!   once, reports no `Applied` for the failed batch and stops itself; the supervisor shuts the
//!   member down and exits non-zero, and the WAL replays the batch on restart.
//!
//! ## Layout
//! `applier.rs` the plain `Applier` (decoding, skipping, the registries) · `actor.rs` the glue.

mod actor;
mod applier;

pub use actor::{ApplierActor, ApplierPeers};
pub use applier::{Applier, Prepared};
