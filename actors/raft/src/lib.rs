//! # actcd-raft — the raft node
//!
//! Owns a raft-rs `RawNode` over raft-rs's in-memory log store (`MemStorage`) and everything that
//! drives it: ticks, proposals, read-index requests and peer messages. It does no I/O itself: log
//! entries and hard state go to the WAL writer, committed entries to the applier, peer messages to
//! an outbox. This is raft-rs's own shape — a pure state machine that hands work back in a
//! `Ready` — kept in [`RaftNode`]; [`RaftActor`] is the glue that turns messages into calls.
//!
//! ## Messages
//! Takes `Tick`, `Propose`, `ReadIndex` (queued with the next read-index round, answered once
//! the confirmed index is applied; the caller then reads the store's newest view itself),
//! `Step` (peer messages), `Unreachable` (the transport lost a peer), `Applied` (from the
//! applier), `RaftStatus`, and its own `Persisted{number}` when the WAL has made a Ready durable.
//! Membership and snapshots: `ProposeConfChange` (from preflight), `ApplyConfChange` (from the
//! applier, once a change is applied), `SyncConf` (the applier's members after a snapshot was
//! installed), `StepSnapshot` (a leader's snapshot message with its store copy),
//! `SnapshotReport` (how sending one went), `CheckLearner` and `TransferLeader`.
//! Sends `Append` and `ReleaseWal` to the WAL writer, `Apply` and `InstallSnapshot` to the
//! applier, `RaftProgress` to preflight, `SyncStorage` to the MVCC
//! store, `PeerMessage`s and `SendSnapshot` to the transport with `PeerChange`s for its address
//! book,
//! `Leadership{leader}` to the lessor when this member gains or loses leadership, whether
//! it is a learner on a watch channel the front reads, and to the daemon's supervisor `Fatal`
//! (the WAL refused a write, a snapshot could not be installed: the node reports it once, fails
//! its waiting reads and stops itself, acknowledging nothing more) or `Shutdown` (it applied its
//! own removal). It never stops the System itself.
//!
//! ## Membership
//! Raft's configuration follows the *applied* membership: a committed conf change is applied to
//! raft-rs only when the applier has applied (validated and recorded) it, in log order, as etcd
//! does; a change the applier refuses never reaches raft. On start the configuration is the
//! members recorded at the backend's consistent index, and conf changes above it are applied again as the
//! applier reaches them. A member that applies its own removal stops.
//!
//! ## Snapshots
//! Sending: raft-rs asks for a snapshot of a follower whose next entry is compacted away; its
//! message goes to the transport, which attaches a copy of the whole store made once the store
//! has applied the snapshot's index (the copy's consistent index may be later, which the
//! follower's applier then skips). Receiving: the transport steps the message with its copy;
//! if raft accepts it, the Ready carrying it is persisted only after the store installed the
//! copy durably (through the applier, behind the entries before it) and the WAL marked the
//! snapshot, so a crash leaves the old state with the old log or the new state with a log that
//! continues from it. The members the applier reads from it then become raft's configuration
//! (`SyncConf`).
//!
//! ## Handling a Ready (raft-rs's documented order, asynchronous persistence)
//! 1. send `messages` to peers at once (a leader may send before its own fsync);
//! 2. apply a snapshot, if any, to the in-memory store;
//! 3. hand `committed_entries` to the applier (raft-rs only lists entries this node has persisted);
//! 4. append `entries` to the in-memory store, then 5. send them and the new hard state to the WAL
//!    as one `Append` (one fsync);
//! 6. `advance_append_async`; when the WAL answers, `on_persist_ready(number)` and only then send
//!    the Ready's `persisted_messages` (votes and append responses must not precede the fsync).
//!    A Ready that raft says needs no sync (no entries, no snapshot, no new term or vote: a read
//!    round, a moved commit index) does not wait for the WAL when no append is in flight: it is
//!    persisted at once, and a moved commit index is handed to the WAL without waiting;
//! 7. the applier reports `Applied{index}` → `advance_apply_to(index)`.
//!
//! **Where appends run.** Every Ready goes to the WAL writer as an `Append` message. The daemon puts the WAL writer on this node's thread: it fsyncs a Ready of one or
//! two entries (one client's writes) in place, a mailbox push away with no thread hand-off,
//! and syncs larger ones (load) on a blocking-pool thread, so this thread stays free for the
//! actors that share it (the front and preflight take requests, the applier applies) while the
//! disk syncs, and the proposals queued meanwhile share the next Ready's fsync. The node neither
//! knows nor cares which. Until then the node wrote small Readies itself through a closure over
//! a `Mutex<Wal>` shared with the WAL actor; measured against that (release, 2 shared cores,
//! medians of 12 alternating runs): put at 100 clients 15.4k → 16.8k/s, single-client put p50
//! 0.313 → 0.314 ms, linearizable range at 100 clients (then a `LinearizableRange` message, before a
//! boxed continuation) 46.7k → 50.1k/s. Not waiting for the WAL on Readies that need no sync
//! is what kept linearizable ranges level: without it a read round's empty Ready cost a
//! mailbox round trip, and ranges fell 8% (see `actcd-wal`, "Where the fsync runs").
//!
//! ## Pipelined persistence (raft-rs's asynchronous Ready, etcd's "async storage writes")
//! The node does not wait for the WAL. While an `Append` is being made durable it goes on
//! stepping peer messages (a leader's append answers move the commit index), ticking, taking
//! proposals and read requests, and it takes further Readies: their messages leave at once
//! (a leader replicates the next entries while its own disk syncs the previous ones, raft
//! thesis 10.2.1), their committed entries go to the applier, and their writes queue behind
//! the one in flight. The WAL writer answers appends in the order they were sent, so Readies
//! are persisted in order, and raft-rs only lists as committed what this member has persisted
//! itself; nothing is acknowledged earlier than before. Two bounds:
//! - at most `pipeline_depth` Readies *with new entries* are on their way to the WAL at once
//!   ([`DEFAULT_PIPELINE_DEPTH`]); past it the proposals wait in raft-rs's log and share the
//!   next Ready's fsync, so pipelining never turns one fsync per batch into one per proposal;
//! - a Ready that installs a snapshot, or a new leader's first, is taken only once every
//!   earlier Ready is persisted (a snapshot replaces a log that must be durable; raft-rs
//!   asserts that no entries are in flight when this member becomes leader), and no Ready is
//!   taken while a snapshot installs (a later Ready's write would reach the WAL before the
//!   snapshot's own, and its `Persisted` would count the snapshot's Ready as durable).
//!
//! A failed append stops the node before any later `Persisted` is handled (the WAL refuses
//! every write after a failure, so a later append cannot succeed over a hole).
//!
//! Measured (release, 2 shared cores, `benches/compare-cluster.sh`, alternating builds, ratio
//! to etcd 3.5.1 in the same run): three members, put at 100 clients through the leader, median
//! of 7 runs 1.28× before, 1.56× after. One member: level (its own fsync is the quorum).
//!
//! Readies are taken in a `ProcessReady` message the actor sends itself after any input, so every
//! proposal waiting in the mailbox lands in the same Ready and shares one fsync. Read-index
//! requests are batched the same way: all requests queued before a `FlushReads` share one round.
//! A confirmed read is answered once the applier reports `Applied` at or past its index, so the
//! front can read the store right away.
//!
//! ## Log compaction
//! Every `snapshot_count` applied entries the node asks the store to sync (`SyncStorage`), then
//! compacts the in-memory log keeping the last `catchup_entries`, and tells the WAL to mark a
//! snapshot at the applied index and release older segments. Memory and disk stay bounded.
//! Compacting rebuilds the in-memory store around the kept entries (raft-rs's own compaction
//! keeps the vector's whole capacity: 14 MiB of entry slots at rest after 100,000 entries),
//! with a snapshot mark at the entry before them, whose term it knows, as etcd's
//! `MemoryStorage` keeps its dummy entry.
//!
//! ## Invariants
//! - Entries reach the applier in log order, each exactly once per process run.
//! - A Ready's persisted messages are sent only after its WAL append is durable.
//! - No read-index context reaches raft twice: a read asked again goes under a new context, and
//!   the leader gives each read another member forwards a context of its own (raft-rs keys
//!   pending reads by context; a context confirmed, forgotten and sent again could be confirmed
//!   by heartbeat answers older than the reads queued before it: etcd-io/raft#397, etcd #20418).
//! - Raft messages come only from authenticated peers; raft-rs's protobuf 2 codec has a recursion
//!   advisory on hostile input, so peer messages are size-bounded by the transport before decoding.
//!
//! ## Layout
//! `node.rs` the pure `RaftNode` and its tests · `actor.rs` the actor glue · `sim_tests.rs` a
//! deterministic simulated cluster of `RaftNode`s (seeded network faults, partitions, crashes)
//! with table-driven scenarios and a chaos run.

mod actor;
mod log;
mod node;
#[cfg(test)]
mod read_index_tests;
#[cfg(test)]
mod sim_tests;

pub use actor::{DEFAULT_PIPELINE_DEPTH, RaftActor, RaftPeers};
pub use node::{NodeConfig, RaftNode, ReadyOutput, Recovered};
