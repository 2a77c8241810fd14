//! # actcd-corrupt — corruption checks between members, and the CORRUPT alarm
//!
//! Every member holds the same key space at the same revision, so their HashKVs at one revision
//! must agree (etcd's `HashKV`: a CRC32C of the `key` table up to the revision, skipping what a
//! compaction there drops). This crate compares them, as etcd 3.5 does with its
//! `--experimental-*` corruption flags, and raises the CORRUPT alarm through the log when they
//! don't. actcd turns all three checks **on by default** (etcd: off; etcd #14039):
//!
//! - **initial** (`--experimental-initial-corrupt-check`, default true): before the member
//!   serves clients, it hashes its key space at its current revision and asks every peer for
//!   its hash at that revision. A peer that answers with the same compaction and another hash
//!   stops the start-up with `<member id> found data inconsistency with peers (…)` naming each
//!   such peer. Peers that cannot be reached, have not reached the revision, or compacted past
//!   it, or compacted elsewhere, are logged and skipped, as etcd does.
//! - **periodic** (`--experimental-corrupt-check-time`, default 5m, 0 off): the leader hashes
//!   at its revision, asks every peer at that revision, passes a linearizable barrier, hashes
//!   again, and names the first member that breaks one of etcd 3.5's rules
//!   ([`decide::periodic`]): its own hash moved at one revision (the leader), a follower's
//!   revision or compaction past the leader's, or a follower with the leader's first compaction
//!   and another hash.
//! - **compact hash** (`--experimental-compact-hash-check-enabled`, default true, every
//!   `--experimental-compact-hash-check-time`, 1m): at each compaction the store hashes, over
//!   the records its deletions scan anyway, what HashKV at the compaction's revision said just
//!   before it (records above the previous compaction, kept ones at or below it: etcd's
//!   compaction hash, with the previous compaction revision) and sends it here
//!   (`CompactionHashed`); the newest ten are kept, in memory as etcd keeps them, and answered
//!   to peers asking for a hash at exactly that revision, so a member can be checked after it
//!   compacted. The leader compares its remembered hashes, newest first, with the peers' at
//!   the same revision and the same previous compaction ([`decide::compact`]); the newest one
//!   every peer agrees on is not checked again. A compaction resumed at start-up (some of its
//!   deletions done before a crash) takes no hash.
//!
//! A mismatch raises CORRUPT **for the member named** (as etcd 3.5.1 does; later 3.5 releases
//! raise it for member 0, "unknown"). The alarm is an `AlarmRequest` ACTIVATE CORRUPT
//! proposed through preflight like the Maintenance Alarm RPC's, marked as the member's own
//! (`internal`, never judged by auth). Its effect is cluster-wide and lives elsewhere: the
//! applier refuses Put, DeleteRange, Txn, Range, Compaction, LeaseGrant and LeaseRevoke with
//! `etcdserver: corrupt cluster` (gRPC `DataLoss`, etcd's `ErrGRPCCorrupt`) and publishes the
//! alarm to the front, which refuses Range and read-only Txn too — past etcd 3.5, which keeps
//! serving reads from a cluster it knows is corrupt. `etcdctl alarm list` shows
//! `memberID:<id> alarm:CORRUPT`; `etcdctl alarm disarm` clears it and service resumes.
//!
//! Compared with etcd 3.5.1 (CORRUPT raised there through the gateway's Alarm ACTIVATE, which
//! etcd accepts for any alarm type): a Put answers gRPC `DataLoss` `etcdserver: corrupt
//! cluster` (code 15 on the gateway), `etcdctl alarm list` prints `memberID:<id>
//! alarm:CORRUPT`, Status lists it in `errors`, `etcdctl alarm disarm` clears it and puts go
//! through again — the same here. Ranges are served by etcd 3.5.1 under CORRUPT (linearizable
//! and serializable); actcd refuses them.
//!
//! A proposal of the alarm that fails (no leader yet, at start-up) is made again a second
//! later; one per member is in flight at a time.
//!
//! Anything else in the member that finds corruption (a record failing its checksum) raises
//! the alarm the same way by sending [`RaiseCorrupt`](actcd_types::msg::RaiseCorrupt) here.
//!
//! Hashes travel over the **peer port** (`RaftPeer.HashKv`, etcd's `/members/hashkv`),
//! refused to members of another cluster like every peer call; never over the client port,
//! which auth and client TLS guard.
//!
//! ## Messages
//! [`CorruptionChecker`] takes [`InitialCheck`] once from the daemon (before it serves
//! clients), [`CheckTick`] from the daemon's ticker at each check's period, `LocalHashKv` from
//! the peer port (a peer's check asking), `CompactionHashed` from the store and `RaiseCorrupt`
//! from anyone. It asks the MVCC reader (`HashKv`), the transport (`PeerHashKv`), the applier
//! (`GetMembers`), the raft node (`RaftStatus`, `ReadIndex`) and sends `Submit` to preflight.
//! A check runs in a task and reports back; a tick while the same check runs is skipped, and
//! one proposal per member is in flight at a time.
//!
//! ## Debug knob
//! `ACTCD_DEBUG_CORRUPT_HASH=1` (read by the daemon, which warns when it is set) XORs a
//! constant into every hash this member reports — its own checks' and its answers to peers —
//! so tests get a member whose data seem to differ without editing its files. Never set it
//! otherwise.
//!
//! ## Layout
//! - `decide.rs`: who is corrupt, as plain functions over gathered hashes (table-tested).
//! - `actor.rs`: the actor, the hash gathering, the alarm proposal; `actor_tests.rs` drives it
//!   through its messages against a fake member.
//! - `error.rs`: why a member refuses to start.

mod actor;
pub mod decide;
mod error;

pub use actor::{
    Check, CheckTick, CheckerConfig, CheckerPeers, CorruptionChecker, InitialCheck,
    REMEMBERED_HASHES, corrupt_alarm,
};
pub use error::CorruptError;
