//! # actcd-auth — users, roles, range permissions, passwords and tokens
//!
//! etcd's v3 auth, split by who runs what:
//!
//! - [`AuthStore`] (`store.rs`) is the auth state machine: the enabled flag, the auth revision,
//!   users and roles (persisted in the backend's `auth`, `authUsers` and `authRoles` tables with
//!   etcd's keys and encodings), and each user's merged permissions. The MVCC store embeds it
//!   and applies auth entries in log order with the writes they govern; it also asks it, for
//!   every key-space request, whether the request's user may touch each key
//!   ([`AuthStore::check_request`], etcd's auth applier), and answers reads, watch creates and
//!   admin-only maintenance calls with [`AuthStore::check_range`] / [`AuthStore::check_admin`].
//! - [`perms`] merges a user's grants into sorted disjoint interval sets ([`UserPerms`]).
//! - [`password`]: bcrypt hashing and checking, which callers run on a blocking pool.
//! - [`TokenProvider`] (`tokens.rs`): simple and JWT tokens, kept by the front.
//!
//! No actor lives here: the crate is plain structs used by the store's and the front's actors.
//!
//! ## Invariants
//! - A refused request changes nothing, in memory or in the transaction.
//! - The auth revision rises by one with every change etcd counts (not with AuthEnable, nor
//!   with a grant that was already there), and is written with the change.
//! - A request stamped with an older auth revision than the store's is refused
//!   (`auth: revision in header is old`): the client must look again.
//! - A permission check is a binary search over merged intervals, however many grants exist.
//! - Simple tokens use tokio's clock (pausable in tests); JWT expiry is checked against the wall
//!   clock as any JWT reader does. Nothing else here reads a clock.

pub mod password;
pub mod perms;
mod store;
mod tokens;

pub use password::{DEFAULT_COST, check_cost, hash_password, verify_password};
pub use perms::{Perm, UserPerms};
pub use store::{AuthRequest, AuthStore};
pub use tokens::{JwtTokens, SimpleTokens, TokenProvider};
