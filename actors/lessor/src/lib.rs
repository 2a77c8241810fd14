//! # actcd-lessor — lease time: expiry, keepalives, remaining-TTL checkpoints
//!
//! Following etcd 3.5's `server/lease/lessor.go`, minus what is not about time. Which leases
//! exist, the TTL each was granted, its last checkpointed remaining TTL and its keys are applied
//! state, kept by the applier (`actcd-applier`'s `leases` module) and changed only through the
//! log. The lessor owns the rest:
//!
//! - the **expiry** of every lease, when this member is the primary (the raft leader);
//! - **keepalives** (renewing restarts the clock), the remaining TTL that `LeaseTimeToLive`
//!   reports, and the lease list;
//! - **expiring**: finding leases past their expiry and asking for their revoke through raft,
//!   at a bounded rate;
//! - **checkpoints**: proposing each long lease's remaining TTL every interval, so a restart or
//!   a new leader resumes the countdown instead of granting the full TTL again.
//!
//! It hears of grants, revokes and checkpoints only once they are applied. Between proposing a
//! revoke and seeing it applied a lease still exists here; a proposal that never applies (lost
//! to a leader change) is simply proposed again.
//!
//! ## Messages taken ([`LessorActor`], on the System thread)
//! - `LeaseGranted{id, ttl, remaining_ttl}`: a grant applied, or a lease found at recovery.
//! - `LeaseRevoked{id}`, `LeaseCheckpointed{id, remaining_ttl}`: applied revoke/checkpoint.
//! - `RenewLease{id}` → `Result<i64, EtcdError>`: the granted TTL; `NotLeader` on a follower
//!   (the caller forwards to the leader), `LeaseNotFound` for an unknown or expired lease (held
//!   first: an expired one until its revoke applies, an unknown one just after promotion until
//!   its grant applies or an election timeout passes). On the primary, with the raft node's
//!   `ReadIndex` given (`with_applied_wait`), a keepalive of a lease this lessor does not know
//!   (every keepalive with `FastLeaseKeepAlive` off) is answered only once this member has
//!   applied everything committed ([`keepalive_waits_for_apply`]).
//! - `LeaseTimeToLive{id}` → `Result<LeaseTtl, EtcdError>`: granted TTL and whole seconds left;
//!   `NotLeader` on a follower, `LeaseNotFound` if unknown.
//! - `ListLeases` → `Vec<i64>`: every lease, soonest expiry first.
//! - `Leadership{leader}`: promote (restart every clock) or demote (stop them).
//! - `LessorTick` (every 500 ms from the daemon): look for expired leases and due checkpoints.
//!
//! ## Messages sent
//! - `ProposeLeaseOps{revokes, checkpoints}` to the `Recipient` given at construction, at most
//!   one per tick and only when non-empty; the taker proposes LeaseRevoke / LeaseCheckpoint
//!   entries. Checkpoints are `(id, remaining TTL)`, a remaining TTL of 0 clearing one. They are
//!   proposed only while this member leads raft (`Propose{leader_only}`): a revoke handed out
//!   just before a demotion reached this actor is dropped by the raft node, never forwarded to
//!   the new leader (etcd 3.5.13, #17425 / issue #15247: an old leader revoked leases the new
//!   one was keeping alive).
//!
//! ## Invariants
//! - **Only the primary expires.** A follower's leases have no expiry ("forever", as in etcd);
//!   it hands out no revokes or checkpoints and refuses keepalives. Promotion starts every
//!   clock at now + election timeout + the checkpointed remaining TTL (or the TTL); demotion
//!   stops them and drops every schedule.
//! - **A lease is handed out for revoke at most once per retry interval** (3 s), and again
//!   after each until its revoke is applied; an expired lease is never renewed.
//! - **Time comes only from the [`Clock`].** The core, [`Lessor`], takes `now` as an argument
//!   and never reads a clock, so its tests run on a timeline of offsets and the actor's under
//!   paused tokio time; nothing sleeps.
//!
//! ## Rules carried over from etcd 3.5
//! - TimeToLive's remaining TTL is whole seconds **truncated toward zero**, so an expired lease
//!   whose revoke is not yet applied can report 0 or less; a checkpoint's remaining TTL is
//!   **rounded up**, and none is proposed while it would still equal the granted TTL or once
//!   the lease has expired.
//! - Revokes: at most `revoke_per_tick` (500, etcd's 1000 a second over its 500 ms loop),
//!   earliest expiry first.
//! - A checkpoint is scheduled an interval (5 minutes) after a grant, an applied checkpoint or
//!   a promotion, for leases whose remaining TTL is longer than the interval.
//! - Renewing a lease that carries a checkpointed remaining TTL proposes a checkpoint of 0 to
//!   clear it, so the renewal survives a leader change; the lease's clock restarts at its full
//!   TTL either way.
//! - Promoting with at least a second's worth of revokes (1000) of leases spreads their
//!   expiries so no more than three quarters of the revoke rate fall in any second.
//! - The minimum TTL (etcd's `minLeaseTTL`, 1.5 election timeouts rounded up to seconds) is
//!   applied by the applier before `LeaseGranted` is sent, at grant and at recovery.
//!
//! ## Where this differs from etcd, and why
//! - **Less waiting.** As etcd's leader, the actor holds a keepalive of an expired lease until
//!   its revoke applies ("not found") or leadership goes (`NotLeader`: the front then asks the
//!   new leader, and holds keepalives through an election as etcd's `LeaseRenew` does). But
//!   etcd's renewal also waits for the clearing checkpoint to apply; here the clear is proposed
//!   with the next tick's batch and the local remaining TTL is cleared at once (the clock runs
//!   the full TTL, as in etcd).
//! - **Promoted at election**, on `Leadership{leader: true}`, where etcd promotes its lessor
//!   once the new leader has applied its term's first (empty) entry, i.e. everything of the
//!   terms before, and answers "not primary" until then (the forwarding member asks again).
//!   So for an election timeout after promotion a keepalive of a lease unknown here waits for
//!   its grant to apply (then renews it) or for the window to end (then "not found"), instead
//!   of telling a client that a lease granted just before the election is gone.
//! - **TimeToLive on a follower is `NotLeader`** instead of a "forever" TTL: etcd forwards it
//!   to the leader, and the caller here does the same.
//! - **Checkpoints are re-armed when handed out**, not only when applied, so one lost to a
//!   leader change is retried an interval later; promotion schedules checkpoints for every
//!   lease (etcd 3.5.1 forgot to, fixed in later 3.5 releases). One schedule per lease, not a
//!   heap that may hold duplicates.
//! - **Checkpointing is on by default**; in etcd it is an experimental flag.
//! - **Keepalives and the applied index** follow etcd 3.7's `FastLeaseKeepAlive` (#20589, on
//!   by default; `LessorConfig::fast_keepalive`): the primary renews a lease it knows at once,
//!   and a keepalive of one it does not know waits for a read index (everything committed
//!   applied here), which also settles etcd 3.5's #13932 (a grant committed but not yet
//!   applied). Off, every keepalive on the primary waits so, as in etcd 3.5, whose
//!   `ensureLeadership` and `waitAppliedIndex` the read index stands for together.
//! - **One checkpoint batch per tick**, `checkpoints_per_tick` (1000, etcd's batch size),
//!   where etcd loops over up to 500 batches: 2000 a second still keeps 600,000 long leases
//!   checkpointed every 5 minutes, and one tick's proposal stays one bounded entry.
//!
//! No error type of its own: the only failures are etcd's `NotLeader` and `LeaseNotFound`.
//!
//! ## Layout
//! `config.rs` [`LessorConfig`] and its defaults · `queue.rs` the indexed priority queue of
//! lease ids by deadline (a B-tree plus a position map; why not a heap is explained there) ·
//! `lessor.rs` [`Lessor`], the core, with `lessor_tests.rs` · `actor.rs` [`LessorActor`],
//! [`Clock`], [`TokioClock`], with `actor_tests.rs`.

mod actor;
mod config;
mod keepalive;
mod lessor;
mod queue;

pub use actor::{Clock, LessorActor, TokioClock};
pub use config::LessorConfig;
pub use keepalive::keepalive_waits_for_apply;
pub use lessor::Lessor;
