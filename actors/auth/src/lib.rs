//! # actcd-auth — the auth store actor
//!
//! Owns etcd's v3 auth state: the enabled flag, the auth revision, users and roles (persisted
//! in the backend's `auth`, `authUsers` and `authRoles` tables with etcd's keys and
//! encodings), each user's merged permissions, the bcrypt work of password checks, and the
//! token provider `--auth-token` chose (`actcd_authz::TokenProvider`).
//!
//! - [`AuthStore`] (`store.rs`) is the state machine, plain and testable alone: it applies auth
//!   requests in log order and keeps an [`actcd_authz::AuthView`] of the checks up to date.
//! - [`AuthActor`] (`actor.rs`) is the room, on an `Arbiter` thread of its own. After every
//!   change it publishes the view as an immutable `Arc` tagged with its auth revision.
//! - [`password`]: bcrypt hashing and checking, run on tokio's blocking pool.
//!
//! The permission view, its checks and the token providers are plain structs in
//! `actcd-authz`. The views go to the applier (which judges each committed request by the view
//! current at that point of the log) and the front (which judges reads, watch creates and
//! admin calls by the newest view); the token books go to the front, which identifies callers
//! by the newest one.
//!
//! ## Messages
//! - `ApplyAuth{request, who}` from the applier, in log order → `AuthApplied{result, view, ops}`:
//!   etcd's answer, the view to judge the next entries by, and the table writes. The actor
//!   writes nothing itself ([`OpLog`] records the writes); the applier hands the ops to the MVCC
//!   store with its next `ApplyBatch`, so they commit with the consistent index that covers the
//!   entry. An outer `Err` is a storage failure (fatal for the member).
//! - `ReloadAuth` from the applier after a snapshot from the leader was installed → the view.
//! - `CheckPassword{name, password}` → the auth revision the hash was read at (Authenticate and
//!   the gateway's Basic auth); `HashPassword{password}` → the base64 bcrypt hash to propose
//!   (UserAdd, UserChangePassword). bcrypt runs on the blocking pool, never on this thread.
//! - `ConnectAuth{events}` from the front: the current token book, view and state at once
//!   (`AuthEvent::Tokens`, `View`, `State`), then again after every applied auth request —
//!   sent before the answer goes back to the applier, so before the request's waiter hears it
//!   — and after a sweep ended unused simple tokens.
//! - Tokens: `DraftToken` → a simple token for a login about to be proposed (the entry carries
//!   it; every member registers it as the login applies, ending a user's earlier tokens at a
//!   password change or deletion, all in log order); `SignToken{username, revision}` → a JWT
//!   for a login that applied (on the blocking pool); `TokenUsed{token}` from the front → the
//!   token's TTL starts again. Once a second (etcd's resolution) unused tokens expire.
//!
//! ## Invariants
//! - User and role names and passwords are bytes, as etcd takes them (Go never checks a
//!   protobuf `string` for UTF-8): stored under their bytes, compared byte for byte (only the
//!   user and role named exactly `root` are root), listed in byte order.
//! - A refused request changes nothing and writes nothing.
//! - The auth revision rises by one with every change etcd counts (not with AuthEnable, nor
//!   with a grant that was already there), and is written with the change.
//! - A published view never changes; the applier sees a change from the entry after it on.
//!   The same holds for a published token book.
//! - A simple token is valid on a member from the moment the login that carries it applies
//!   there until a password change or deletion of its user applies, auth is disabled, or it
//!   goes unused for `--auth-token-ttl`.
//! - The store never reads its tables back between loads: its memory is the truth, which is
//!   why recording ops is enough (see `oplog.rs`).
//!
//! ## Layout
//! `store.rs` the state machine · `actor.rs` the glue · `oplog.rs` recorded writes ·
//! `password.rs` bcrypt.

mod actor;
mod oplog;
pub mod password;
mod store;

pub use actor::AuthActor;
pub use oplog::OpLog;
pub use password::{DEFAULT_COST, check_cost, hash_password, verify_password};
pub use store::{AuthRequest, AuthStore};
