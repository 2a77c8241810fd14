//! etcd's v2 key store (`--enable-v2`, `/v2/keys`), and v2 requests read
//! as etcd's Go server reads them, as plain logic: no actors, no I/O, no
//! clock of its own. Every operation that needs the time
//! is given it (Unix nanoseconds).
//!
//! # What it owns
//!
//! * The key tree: files (keys with values) and directories, created and
//!   modified indices, TTLs ([`Store`]).
//! * The store index: every change takes the next index; reads and errors
//!   report the current one ([`Store::index`]).
//! * The ops of etcd 3.4's `v2store`: [`Store::get`], [`Store::set`],
//!   [`Store::create`] (with in-order keys), [`Store::update`],
//!   [`Store::compare_and_swap`], [`Store::delete`],
//!   [`Store::compare_and_delete`], [`Store::delete_expired_keys`] /
//!   [`Store::sync`]; and etcd's dispatch of a committed request
//!   ([`Store::apply`], [`Store::apply_full`]).
//! * The last 1000 events and the watchers ([`Store::watch`],
//!   [`Store::take_notifications`], [`Store::cancel_watch`]).
//! * Counters of `/v2/stats/store` ([`Store::stats_json`]).
//! * The v2 error ([`V2Error`]: code, message, HTTP status, JSON) and the
//!   event JSON ([`Event::to_json`]), byte for byte as etcd 3.4.23 writes
//!   them (the HTTP writer appends the `\n` etcd ends each body with).
//! * Parsing of `/v2/keys` requests ([`parse_key_request`]), and of what
//!   comes before it as Go's `net/http` reads it: the request path cleaned
//!   as `ServeMux` cleans it ([`mux_clean_path`], with [`html_escape`] for
//!   its redirect) and percent-decoded ([`percent_decode`]), the form
//!   values of body and query in `r.Form` order ([`parse_form`]), a bad
//!   escape refused in `url.ParseQuery`'s words.
//! * The `/v2/members` wire: a member's JSON ([`member_json`]) and the
//!   peer URLs of an add or update ([`peer_urls`]), read as etcd reads a
//!   `MemberCreateRequest` — Go's field matching and type errors, the
//!   common JSON syntax errors in Go's words, `types.NewURLs`' checks —
//!   or refused with etcd's status and message ([`Refusal`]).
//! * Saving and loading ([`Store::save`], [`Store::recover`],
//!   [`Store::restore`]).
//!
//! # Invariants
//!
//! * Keys are clean absolute paths; the root `/` always exists, is a
//!   directory and cannot be written or removed. User keys live directly
//!   at the root (etcd keeps them under a hidden `/1` and trims it on the
//!   way out; the output here is what etcd's output looks like after that
//!   trimming, so the root shows no `key`).
//! * Every change that succeeds takes exactly one index and adds exactly
//!   one event to the history (refreshes included, though watchers never
//!   see those), so the history's indices are consecutive.
//! * A node has a TTL exactly when it is in the expiry index.
//! * Nothing reachable from input panics; tree walks, removals and saving
//!   do not recurse on the depth of a key.
//!
//! # HTTP headers (for the front)
//!
//! * An answer with an event: `X-Etcd-Index: {event.etcd_index}` (the
//!   index after a change, the current index for reads), status 201 when
//!   [`Event::is_created`], else 200.
//! * An error: `X-Etcd-Index: {error.index}` (0 for parse errors),
//!   status [`V2Error::http_status`].
//! * A watch: `X-Etcd-Index` is the store index when the watch started —
//!   the `etcd_index` of the event in [`WatchStart::Ready`], or
//!   [`Store::watcher_start_index`] for a registered watcher (the events
//!   it then receives carry their own `etcd_index`, which etcd does not
//!   put in any header).
//!
//! # Layout (one file per concern)
//!
//! * `error.rs`: [`V2Error`], the codes, messages and statuses.
//! * `json.rs`: Go-compatible string quoting and time formatting.
//! * `event.rs`: [`Event`], [`NodeExtern`] and their JSON.
//! * `node.rs`: tree nodes, paths, TTL arithmetic, hidden-key rule.
//! * `ttl.rs`: the expiry index.
//! * `history.rs`: the 1000-event window and its scan.
//! * `watch.rs`: registered watchers and who hears of what.
//! * `stats.rs`: the counters and their JSON.
//! * `store.rs`: [`Store`] and its operations.
//! * `apply.rs`: the dispatch of a committed [`V2Request`].
//! * `parse.rs`: [`parse_key_request`].
//! * `form.rs`: the request path and form as Go reads them (tests in
//!   `form_tests.rs`).
//! * `members.rs`: the `/v2/members` body and member JSON (tests in
//!   `members_tests.rs`).
//! * `persist.rs`: [`Store::save`] / [`Store::recover`] and the format.
//!
//! # How it is checked
//!
//! Unit tests beside each file; `tests/` runs the store's operations,
//! errors, TTLs, watches, persistence and parsing, and `tests/etcd_http.rs`
//! replays requests with the status, index and body etcd 3.4.23 answered.
//! `form_tests.rs` and `members_tests.rs` hold Go's decoding and refusals
//! of request paths, forms and member bodies. The fuzz target `v2keys`
//! (`fuzz/fuzz_targets/v2keys.rs`) feeds arbitrary requests to
//! [`parse_key_request`]; the compat scripts `tests/compat/v2.sh` and
//! `v2-cluster.sh` compare the front's answers with etcd's.
//!
//! # Persistence format
//!
//! Ours, not etcd's: JSON of a versioned struct (version 1) holding the
//! current index, the nodes as a flat list by path (parents first, each
//! with its indices, value or `dir`, and absolute expiry), the history
//! window with its start and last indices, and the counters. Watchers are
//! not saved. See `persist.rs` for the shape.
//!
//! # Additions to the agreed API
//!
//! [`Store::apply_full`] and [`Applied`] (SYNC's expire events),
//! [`TtlOptions`], [`Store::watcher_start_index`],
//! [`Store::watcher_count`], [`Store::next_expiration`],
//! [`Store::has_ttl_keys`], [`Store::stats`] / [`Counters`],
//! [`Store::restore`] (keeps watchers), [`Event::to_json_no_value`] /
//! [`Event::to_http_json`] / [`Event::is_created`],
//! [`KeyRequest::is_watch`] / [`KeyRequest::is_local_read`] /
//! [`KeyRequest::needs_proposal`], [`clean_path`],
//! [`format_rfc3339_nano`], the `ECODE_*` and `ACTION_*` constants.
//!
//! # Where it knowingly differs from etcd
//!
//! * No `/0` namespace and no membership keys: etcd's index also counts
//!   its own cluster writes (a fresh etcd starts user keys at index 4 or
//!   so); here a fresh store is at 0. Whoever applies the log decides.
//! * Listings are always in key order. etcd lists unsorted directories in
//!   Go map order (random), so this is one of its possible answers.
//! * Expiries due at the same instant expire in the order their TTLs were
//!   set (after a [`Store::recover`]: in path order); etcd's heap leaves
//!   ties in no defined order.
//! * etcd drops a watcher whose 100-event channel is full; here events
//!   wait in [`Store::take_notifications`] without a bound.
//! * A SYNC through [`Store::apply`] returns a placeholder `sync` event
//!   (etcd returns none); AUTH and other methods fail with etcd's "unknown
//!   method" (code 300) — v2 auth lives elsewhere.
//! * A recursive listing builds nested [`NodeExtern`]s, so its depth is
//!   that of the tree; absurdly deep trees (tens of thousands of levels)
//!   could exhaust the stack there, where Go's stacks would grow.
//! * Instants outside years 0..=9999 are formatted anyway (Go fails to
//!   encode them); they cannot come from a sane TTL.
//! * The counters copy etcd's quirks (a refused delete of the root counts
//!   as a successful delete; a failed compare-and-delete counts as a
//!   success; a create whose parent is a file also counts a failed set),
//!   but not the reads etcd's own machinery makes, so `getsSuccess` and
//!   `getsFail` count only client reads.

mod apply;
mod error;
mod event;
mod form;
mod history;
mod json;
mod members;
mod node;
mod parse;
mod persist;
mod stats;
mod store;
mod ttl;
mod watch;

pub use actcd_proto::actcdpb::V2Request;
pub use apply::{Applied, UNKNOWN_METHOD_CAUSE};
pub use error::*;
pub use event::{
    ACTION_COMPARE_AND_DELETE, ACTION_COMPARE_AND_SWAP, ACTION_CREATE, ACTION_DELETE,
    ACTION_EXPIRE, ACTION_GET, ACTION_SET, ACTION_SYNC, ACTION_UPDATE, Event, NodeExtern,
};
pub use form::{form_pairs, html_escape, mux_clean_path, parse_form, percent_decode};
pub use history::HISTORY_CAPACITY;
pub use json::format_rfc3339_nano;
pub use members::{Refusal, member_json, peer_urls};
pub use node::clean_path;
pub use parse::{KeyRequest, parse_key_request};
pub use persist::SNAPSHOT_VERSION;
pub use stats::Counters;
pub use store::{MIN_EXPIRE_TIME, Store, TtlOptions};
pub use watch::{WatchStart, WatcherId};
