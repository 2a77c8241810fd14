//! # actcd-v2store — the v2 store actor (`--enable-v2`)
//!
//! Owns etcd's v2 key tree (`actcd_v2tree::Store`: nodes, TTLs, the store index, the last
//! 1000 events, the watchers) and the v2 auth state (`actcd_v2auth::AuthState`: users, roles,
//! key patterns), and keeps both durable in the backend's `actcd_v2` table. The v2 API is
//! separate state from the v3 key space, as in etcd: v2 keys are not v3 keys, v2 auth is not
//! v3 auth. v2 watchers do not slow v3 traffic: a slow watcher is dropped at 100 events behind
//! (as etcd drops it), and a change's events go out as one shared buffer per change.
//!
//! ## Messages
//! - `ApplyV2{entries}` from the applier, in log order, each `{index, term, request, reply}`:
//!   PUT/POST/DELETE (changes), QGET (a quorum read), SYNC (the leader's clock: expire what ran
//!   out), AUTH (a v2 auth change, carrying how its answer is rendered) and MEMBER (a membership
//!   change the applier applied, which takes a store index as etcd's member records do). It
//!   answers `reply` with `ApplyResponse::V2` and returns the table writes that record the
//!   entry, which the applier commits with the entry's consistent index.
//! - `V2Get` (a GET without `quorum=true`), `V2Watch` (answered from the history, or a stream
//!   of events), `V2StoreStats` (`/v2/stats/store`) from the front.
//! - `V2SyncTick` every 500 ms from the ticker: drops watchers whose clients left, and on the
//!   leader, when a TTL has run out, proposes a SYNC with its clock through preflight
//!   (`Submit`, an internal request) — it asks the raft node (`RaftStatus`) whether it leads.
//! - `V2Reload` from the applier after a snapshot replaced the backend.
//! - It publishes the newest v2 auth state on a watch channel the front reads for every
//!   `/v2/keys` request's access check.
//!
//! ## Invariants
//! - Every member applies the same entries in the same order to the same state, and every
//!   input of an entry is in it (expirations are absolute, SYNC carries the leader's time), so
//!   members agree on the tree, its indexes and what expired when.
//! - What a commit of the backend holds for this table covers exactly the entries up to its
//!   consistent index (`journal.rs`): a restart reads the checkpoint, applies the journal, and
//!   raft replays the rest.
//!
//! ## Where it runs, and what that was measured against
//! On small machines (where the gRPC front shares the actors' thread) the v2 store joins that
//! thread too, as the MVCC store does; elsewhere it has a thread of its own
//! (`ACTCD_V2_THREAD` forces that). Against etcd 3.5.1 `--enable-v2` in the same runs, on 2
//! cores (`benches/compare-etcd.sh --only v2set,v2watch,put100v2w`, two runs each): on the
//! shared thread v2 watch latency p50 was 1.12–1.15× etcd's against 1.17–1.18× on its own,
//! CPU per watched put 0.53–0.56× against 0.65×, v2 set and v3 put beside 100 open v2 watchers
//! level. Two more steps measured the same way:
//! - the applier gathers a run's v2 entries and sends them at once (v2 set 0.50–0.66× etcd's
//!   with a round trip per entry and a checkpoint every 10,000 writes, 1.41× after both);
//! - one change's event is shared by every watcher it goes to and its JSON rendered once
//!   (watch p50 1.12–1.14× → 1.06–1.08× etcd's), and the tree hands out one shared copy of
//!   the event per change instead of one per watcher (p50 1.15–1.19× → 1.03–1.06×, p99
//!   0.61–0.62× → 0.44–0.57×, CPU per watched put 0.55–0.58× → 0.47–0.48×, against the build
//!   before either, same runs).
//!
//! ## Layout
//! `journal.rs` the table format (checkpoint + journal) · `state.rs` [`V2State`], the tree and
//! auth moved along the log and rendered as HTTP answers · `actor.rs` [`V2StoreActor`].

mod actor;
pub mod journal;
pub mod state;

pub use actor::{V2Peers, V2StoreActor};
pub use state::{MEMBER, V2State};
