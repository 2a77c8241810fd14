//! # actcd-applier — committed entries into the state machine
//!
//! Owns the applied index, the consistent index it started from, the reply registry (the
//! requests waiting, by id, for their entry to be applied) and the permission view at the point
//! of the log applied so far. It decides *what* happens to each entry; the state owners (the
//! MVCC store, the auth store) execute it.
//!
//! ## The chain (etcd's composed appliers), a file per step
//! 1. `applier.rs`, skip applied: entries at or below the consistent index read from the
//!    backend at start-up were applied before a restart and are skipped; the rest are decoded
//!    and paired with their waiters.
//! 2. `auth_step.rs`, auth: each request is judged against the permission view current at its
//!    point of the log, unless a member made it itself (`header.internal`). Auth requests go to
//!    the auth store, which judges and applies them; its new view judges the entries after.
//! 3. `dispatch.rs`, dispatch: runs of the other requests go to the MVCC store as one
//!    `ApplyBatch` each (quota/capped and the per-kind work happen there), with the auth
//!    store's table writes of the entries before, into one backend commit with the consistent
//!    index. See its doc for how a Ready is cut into runs.
//!
//! ## Messages
//! - takes `Apply{entries}` from the raft node, in log order; sends `ApplyBatch` to the MVCC
//!   store (which answers each request's waiter itself: store → caller, not store → applier →
//!   caller), `ApplyAuth` to the auth store (whose answers the applier stamps with the store's
//!   `CurrentRevision` and sends to the waiter), `LeaseKeys` to the store when a leased Put or a
//!   LeaseRevoke must be judged with auth on. Then `Applied{index}` goes back to the raft node.
//! - takes `InstallSnapshot` from the raft node (a leader's snapshot): forwarded to the store
//!   behind the batches before it, then `ReloadAuth` to the auth store, whose view judges from
//!   then on; the consistent index moves to the one the snapshot covers. Conf-change entries
//!   carry their request in their context and are applied like the rest.
//! - sends `Fatal` to the daemon's supervisor when a state owner refuses a batch (see
//!   Invariants).
//! - takes `Register{id, reply}` / `Cancel{id}` from preflight. (Linearizable reads wait in the
//!   raft node, which hears `Applied` too.)
//!
//! ## Invariants
//! - Readies are applied one at a time in the order they arrive (`AtomicResponse`), and within
//!   one the steps run in log order: a later entry never starts before an earlier one is done.
//! - A write ordered after an auth change is judged by the view after it.
//! - A refused request changes nothing and reaches no state owner; its waiter gets the error.
//! - The consistent index never commits ahead of the auth writes of the entries it covers.
//! - A reply finds its caller by request id, never by queue order. A waiter whose entry is applied
//!   gets exactly one answer; waiters on a failed proposal are cancelled.
//! - A storage failure while applying stops the member: continuing would let memory and disk, or
//!   this member and the others, disagree. The applier sends `Fatal` to the daemon's supervisor
//!   once, reports no `Applied` for the failed batch and stops itself; the supervisor shuts the
//!   member down and exits non-zero, and the WAL replays the batch on restart.
//!
//! ## Layout
//! `applier.rs` step 1 and the registries · `auth_step.rs` step 2 · `dispatch.rs` step 3 and the
//! walk through a Ready · `actor.rs` the glue.

mod actor;
mod applier;
mod auth_step;
mod dispatch;

pub use actor::{ApplierActor, ApplierPeers};
pub use applier::{Applier, Item, Prepared};
pub use dispatch::{ChainPeers, Failure};
