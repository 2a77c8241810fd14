//! # actcd-authz — permission checks and tokens, as plain structs
//!
//! The parts of etcd's v3 auth that more than one actor needs, with no actor inside:
//!
//! - [`perms`] merges a user's grants into sorted disjoint interval sets ([`UserPerms`]): a
//!   permission check is one binary search, however many grants exist.
//! - [`AuthView`] (`view.rs`): the enabled flag, the auth revision and every user's merged
//!   permissions, immutable once published. The auth actor builds one after every change and
//!   publishes it as an `Arc` ([`actcd_types::auth::SharedView`]); the applier checks each
//!   committed request against the view current at that point of the log
//!   ([`AuthView::check_request`], etcd's auth applier), the front checks reads, watch creates
//!   and admin calls against the newest one ([`AuthView::check_range`],
//!   [`AuthView::check_admin`]). Refusals come in etcd's order: `user name is empty`,
//!   `auth: revision in header is old`, `permission denied`.
//! - [`TokenProvider`] (`tokens.rs`): simple and JWT tokens, owned by the auth actor, which
//!   drafts, registers (as logins apply), ends (password changes, deletions, disable, TTL)
//!   and signs them. After each change it publishes a [`TokenBook`]
//!   ([`actcd_types::auth::SharedTokens`]), immutable like the view: the front identifies
//!   callers by the newest one without a message, and verifies JWTs with its key.
//! - [`routes`] (`routes.rs`): the authorization table, what each gRPC method, JSON gateway
//!   path and plain HTTP path of the client port requires with auth on (pure data and its
//!   lookups); the front serves no HTTP path it lacks and the route audit test walks every row.
//! - User and role names are bytes everywhere (etcd never checks them for UTF-8);
//!   [`go_lossy`] (`names.rs`) turns one into text where text is needed, as Go does.
//!
//! ## Invariants
//! - A published view never changes; a new auth revision is a new view.
//! - A published token book never changes either.
//! - A name matches only the same bytes: no name is folded, trimmed or made valid UTF-8
//!   before a lookup, so `root` is root and `root\xff` is not.
//! - Simple tokens' time is passed in by the caller; JWT expiry is checked against the wall
//!   clock as any JWT reader does. Nothing else here reads a clock.
//!
//! ## Layout
//! `perms.rs` interval sets · `view.rs` the view and its checks · `tokens.rs` token providers ·
//! `names.rs` names as text · `routes.rs` the authorization table (tests in `routes_tests.rs`).

mod names;
pub mod perms;
pub mod routes;
mod tokens;
mod view;

pub use names::go_lossy;
pub use perms::{Perm, UserPerms};
pub use tokens::{JwtTokens, SimpleTokens, TokenBook, TokenProvider};
pub use view::{AuthView, UserEntry};
