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
//! - [`TokenProvider`] (`tokens.rs`): simple and JWT tokens. The front's gate keeps one: its
//!   book of simple tokens follows the `TokenAssigned` / `UserInvalidated` events the auth
//!   actor sends as it applies logins and password changes, and it verifies JWTs itself, so
//!   identifying a caller costs no message.
//!
//! ## Invariants
//! - A published view never changes; a new auth revision is a new view.
//! - Simple tokens use tokio's clock (pausable in tests); JWT expiry is checked against the
//!   wall clock as any JWT reader does. Nothing else here reads a clock.
//!
//! ## Layout
//! `perms.rs` interval sets · `view.rs` the view and its checks · `tokens.rs` token providers.

pub mod perms;
mod tokens;
mod view;

pub use perms::{Perm, UserPerms};
pub use tokens::{JwtTokens, SimpleTokens, TokenProvider};
pub use view::{AuthView, UserEntry};
