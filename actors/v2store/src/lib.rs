//! # actcd-v2store — the v2 store actor (`--enable-v2`)
//!
//! Owns etcd's v2 key tree (`actcd_v2tree::Store`: nodes, TTLs, the store index, the last
//! 1000 events, the watchers) and the v2 auth state (`actcd_v2auth::AuthState`: users, roles,
//! key patterns), and keeps both durable in the backend's `actcd_v2` table. The v2 API is
//! separate state from the v3 key space, as in etcd: v2 keys are not v3 keys, v2 auth is not
//! v3 auth, and v2 watchers never slow v3 traffic (this actor has a thread of its own).
//!
//! ## Messages
//! - `ApplyV2{index, term, request, reply}` from the applier, in log order, for every v2 entry:
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
//! ## Layout
//! `journal.rs` the table format (checkpoint + journal) · `state.rs` [`V2State`], the tree and
//! auth moved along the log and rendered as HTTP answers · `actor.rs` [`V2StoreActor`].

mod actor;
pub mod journal;
pub mod state;

pub use actor::{V2Peers, V2StoreActor};
pub use state::{MEMBER, V2State};
