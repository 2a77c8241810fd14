//! The auth store's published permission view, as the actors that judge requests see it.
//!
//! The auth actor owns users, roles and their merged permissions; after every change it
//! publishes an immutable view tagged with its auth revision. The applier checks each committed
//! request against the view current at that point of the log, the front checks reads, watch
//! creates and admin calls against the newest one it heard of. The view is shared as an `Arc`
//! of this trait: the one implementation lives in the plain `actcd-authz` crate, and the actors
//! that only judge need nothing but this vocabulary.

use std::sync::Arc;

use actcd_proto::actcdpb::InternalRaftRequest;

use crate::{AuthInfo, EtcdError};

/// What a request wants to do with keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Perm {
    Read,
    Write,
}

/// An immutable permission view at one auth revision: etcd's permission checks.
pub trait PermissionView: Send + Sync + std::fmt::Debug {
    /// Whether auth is on (off: every check passes).
    fn enabled(&self) -> bool;
    /// The auth revision this view was published at.
    fn revision(&self) -> u64;
    /// etcd's `IsAdminPermitted`: does `who` hold the root role?
    fn check_admin(&self, who: &AuthInfo) -> Result<(), EtcdError>;
    /// etcd's `isOpPermitted`: may `who` do `perm` on `[key, range_end)`?
    fn check_range(
        &self,
        who: &AuthInfo,
        key: &[u8],
        range_end: &[u8],
        perm: Perm,
    ) -> Result<(), EtcdError>;
    /// etcd's auth applier: every key a Put, DeleteRange, Txn, LeaseRevoke or Range touches.
    /// `lease_keys` names the keys attached to a lease.
    fn check_request(
        &self,
        who: &AuthInfo,
        req: &InternalRaftRequest,
        lease_keys: &dyn Fn(i64) -> Vec<Vec<u8>>,
    ) -> Result<(), EtcdError>;
}

/// A published view.
pub type SharedView = Arc<dyn PermissionView>;

/// An immutable book of the tokens a member accepts, published by the auth actor (which owns
/// the token provider) after every change, like the permission view. The front identifies
/// callers by the newest one it heard of.
pub trait TokenCheck: Send + Sync + std::fmt::Debug {
    /// Who `token` names: a simple token at `current_revision`, a JWT at the revision it
    /// carries. `None`: unknown, expired or forged (etcd: `invalid auth token`).
    fn info(&self, token: &str, current_revision: u64) -> Option<AuthInfo>;
    /// Whether tokens are `simple` ones, which are stateful: a use restarts their TTL (the
    /// front reports uses with `TokenUsed`), and one from a login this member has not applied
    /// yet may become valid once it catches up with the log.
    fn is_simple(&self) -> bool;
}

/// A published token book.
pub type SharedTokens = Arc<dyn TokenCheck>;
