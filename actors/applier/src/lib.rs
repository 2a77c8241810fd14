//! # actcd-applier — committed entries into the state machine
//!
//! Owns the applied index, the consistent index it started from, the reply registry (the
//! requests waiting, by id, for their entry to be applied), the permission view at the point
//! of the log applied so far, the **alarms** (`alarms.rs`: which member raised NOSPACE or
//! CORRUPT, kept in the `alarm` table) and the **members** (`members.rs`: the cluster's
//! membership as applied state, etcd's `members`/`members_removed` tables; a change is
//! validated here in log order by every member alike, etcd's `ValidateConfigurationChange`,
//! and only an applied change reaches raft's configuration; published names and client URLs
//! too) and the **leases** (`leases.rs`: which leases exist, their granted and checkpointed
//! TTLs, etcd's `lease` table in `leasepb.Lease` records, and the keys attached to each, which
//! follow the store's reply to every batch). It decides *what* happens to each entry; the
//! state owners (the MVCC store, the auth store) execute it; alarm, membership and lease
//! entries it applies itself (a revoke's keys are deleted by the store, at one revision).
//!
//! ## The chain (etcd's composed appliers), a file per step
//! 1. `applier.rs`, skip applied: entries at or below the consistent index read from the
//!    backend at start-up were applied before a restart and are skipped; the rest are decoded
//!    and paired with their waiters.
//! 2. `auth_step.rs`, auth: each request is judged against the permission view current at its
//!    point of the log, unless a member made it itself (`header.internal`). Auth requests go to
//!    the auth store, which judges and applies them; its new view judges the entries after.
//! 3. `corrupt.rs`, corrupt (etcd's corrupt applier): while CORRUPT is raised (for any
//!    member), Put, DeleteRange, Txn, Range, Compaction, LeaseGrant and LeaseRevoke are
//!    refused with `etcdserver: corrupt cluster`; alarm, auth, membership and checkpoint
//!    entries still run (so the alarm can be disarmed). Whether CORRUPT is raised is published
//!    after every Ready and snapshot (`publishing_corrupt`, a `CorruptFlag`) for the front,
//!    which refuses reads while it is. Then `capped.rs`, capped (etcd's capped applier):
//!    while NOSPACE is raised, a Put, a LeaseGrant or a Txn with a put is refused with
//!    `etcdserver: mvcc: database space exceeded`; the alarm raised by an entry caps the very
//!    next one.
//! 4. `dispatch.rs`, dispatch: alarm, membership and lease requests are applied here
//!    (`alarms.rs`, `members.rs`, `leases.rs`); runs of the other requests go to the MVCC
//!    store as one `ApplyBatch` each, with the table writes of the auth, alarm, membership and
//!    lease entries before, into one backend commit with the consistent index. See its doc for
//!    how a Ready is cut into runs and how leases ride along.
//!
//! ## Messages
//! - takes `Apply{entries}` from the raft node, in log order; sends `ApplyBatch` to the MVCC
//!   store (which answers each request's waiter itself: store → caller, not store → applier →
//!   caller), `ApplyAuth` to the auth store (whose answers the applier stamps with the store's
//!   revision the last batch reported, or `CurrentRevision` when none has yet, and sends to the
//!   waiter; alarm and lease answers are stamped the same way), `DeleteKeys` to the store for a
//!   revoke of a lease with keys, `LeaseGranted`/`LeaseRevoked`/`LeaseCheckpointed` to the
//!   lessor for each lease change applied (before the waiter is answered),
//!   `ApplyConfChange{kind, node_id, peer_urls}` to the raft node for each membership change
//!   applied (before its waiter hears `ApplyResponse::Members`; a refused change, with etcd's
//!   error, reaches nobody). Then `Applied{index}` goes back to the raft node.
//! - takes `GetAlarms` from the front (Status's `errors`, `/health`) → the raised alarms as of
//!   the entries applied. The list is asked of its owner rather than published elsewhere:
//!   Status and health are rare, and an answer queued behind the Ready in flight is as fresh as
//!   the store's status beside it.
//! - takes `LeaseKeys{id}` from the front (LeaseTimeToLive with keys) → the keys attached as
//!   of the entries applied, sorted; `LeaseNotFound` for no such lease.
//! - takes `GetMembers` from the front (the Cluster service, publishing attributes) and the
//!   peer listener (a member joining asks the cluster) → the members as of the entries
//!   applied.
//! - takes `InstallSnapshot` from the raft node (a leader's snapshot): forwarded to the store
//!   behind the batches before it; the alarms, members and leases are read again from the
//!   backend (a read transaction on the engine handed over at start-up, `with_alarms`), the
//!   leases' keys from the store (`LeasedKeys`), `SyncConf` with the new members goes to the
//!   raft node, the lessor hears which leases went (`LeaseRevoked`) and which are there
//!   (`LeaseGranted`), then `ReloadAuth` goes
//!   to the auth store, whose view judges from then on; the consistent index moves to the one
//!   the snapshot covers. Conf-change entries
//!   carry their request in their context and are applied like the rest.
//! - sends `Fatal` to the daemon's supervisor when a state owner refuses a batch (see
//!   Invariants).
//! - takes `Register{id, reply}` / `Cancel{id}` from preflight. (Linearizable reads wait in the
//!   raft node, which hears `Applied` too.)
//!
//! ## Invariants
//! - Readies are applied one at a time in the order they arrive (`AtomicResponse`), and within
//!   one the steps run in log order: a later entry never starts before an earlier one is done.
//! - A write ordered after an auth change is judged by the view after it; one ordered after a
//!   NOSPACE alarm is capped by it.
//! - A refused request changes nothing and reaches no state owner; its waiter gets the error.
//! - The consistent index never commits ahead of the auth, alarm, membership and lease writes
//!   of the entries it covers.
//! - The keys attached to each lease are those whose latest record names it, at every point of
//!   the log a judgement or a revoke looks at: the run before such an entry is sent and its
//!   reply followed first. A batch's puts see a lease exist exactly if it existed at the batch's
//!   point of the log (a grant of a lease the run names ends the run).
//! - At start-up the daemon loads the leases ([`load_leases`], their keys attached from the
//!   store's live leased keys, the minimum TTL set) and the members from a read transaction
//!   ([`load_members`]),
//!   refuses to start a member that was removed, records a new cluster's members straight into
//!   the engine ([`Membership::bootstrap`]'s ops) and hands them over (`with_members`), all
//!   before any actor runs.
//! - A reply finds its caller by request id, never by queue order. A waiter whose entry is applied
//!   gets exactly one answer; waiters on a failed proposal are cancelled.
//! - A storage failure while applying stops the member: continuing would let memory and disk, or
//!   this member and the others, disagree. The applier sends `Fatal` to the daemon's supervisor
//!   once, reports no `Applied` for the failed batch and stops itself; the supervisor shuts the
//!   member down and exits non-zero, and the WAL replays the batch on restart.
//!
//! ## Layout
//! `applier.rs` step 1 and the registries · `auth_step.rs` step 2 · `capped.rs` step 3 ·
//! `dispatch.rs` step 4 and the walk through a Ready · `alarms.rs` the alarm store ·
//! `members.rs` the membership · `leases.rs` the leases ·
//! `actor.rs` the glue.

mod actor;
mod alarms;
mod applier;
mod auth_step;
mod capped;
mod corrupt;
mod dispatch;
mod leases;
mod members;

pub use actor::{ApplierActor, ApplierPeers, load_alarms, load_leases, load_members};
pub use alarms::Alarms;
pub use applier::{Applier, Item, Prepared};
pub use dispatch::{ChainPeers, ChainState, Failure, LessorLink};
pub use leases::{Lease, Leases, MAX_LEASE_TTL};
pub use members::{
    Applied as MemberApplied, ConfOrder, DEFAULT_MAX_LEARNERS, Membership, member_to_pb,
};
