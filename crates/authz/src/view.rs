//! [`AuthView`]: an immutable picture of the auth state at one auth revision, and etcd's
//! permission checks against it.

use std::collections::HashMap;
use std::sync::Arc;

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::{PutRequest, RequestOp, TxnRequest, request_op};
use actcd_types::auth::{PermissionView, SharedView};
use actcd_types::{AuthInfo, EtcdError};

use crate::perms::{Perm, UserPerms};

/// One user as the checks see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserEntry {
    /// Holds the root role: may do anything.
    pub is_root: bool,
    /// Its roles' permissions, merged.
    pub perms: UserPerms,
}

/// The enabled flag, the auth revision and every user's merged permissions. Built by the auth
/// store and published as an `Arc` after every change; nobody changes a published one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthView {
    enabled: bool,
    revision: u64,
    users: HashMap<Vec<u8>, UserEntry>,
}

impl AuthView {
    pub fn new(enabled: bool, revision: u64, users: HashMap<Vec<u8>, UserEntry>) -> Self {
        Self {
            enabled,
            revision,
            users,
        }
    }

    /// A view with auth off: every check passes.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// Published, for the applier and the front.
    pub fn shared(self) -> SharedView {
        Arc::new(self)
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    pub fn revision(&self) -> u64 {
        self.revision
    }

    pub fn user(&self, name: &[u8]) -> Option<&UserEntry> {
        self.users.get(name)
    }

    pub fn set_enabled(&mut self, enabled: bool) {
        self.enabled = enabled;
    }

    pub fn set_revision(&mut self, revision: u64) {
        self.revision = revision;
    }

    pub fn set_user(&mut self, name: Vec<u8>, entry: UserEntry) {
        self.users.insert(name, entry);
    }

    pub fn remove_user(&mut self, name: &[u8]) {
        self.users.remove(name);
    }

    pub fn clear_users(&mut self) {
        self.users.clear();
    }

    fn is_root(&self, name: &[u8]) -> bool {
        self.users.get(name).is_some_and(|u| u.is_root)
    }

    /// etcd's `IsAdminPermitted`.
    pub fn check_admin(&self, who: &AuthInfo) -> Result<(), EtcdError> {
        if !self.enabled {
            return Ok(());
        }
        if who.username.is_empty() {
            return Err(EtcdError::UserEmpty);
        }
        if !self.users.contains_key(&who.username) {
            return Err(EtcdError::UserNotFound);
        }
        if !self.is_root(&who.username) {
            return Err(EtcdError::PermissionDenied);
        }
        Ok(())
    }

    /// etcd's `isOpPermitted`: may `who` do `perm` on `[key, range_end)` now?
    pub fn check_range(
        &self,
        who: &AuthInfo,
        key: &[u8],
        range_end: &[u8],
        perm: Perm,
    ) -> Result<(), EtcdError> {
        if !self.enabled {
            return Ok(());
        }
        if who.revision == 0 || who.username.is_empty() {
            return Err(EtcdError::UserEmpty);
        }
        if who.revision < self.revision {
            return Err(EtcdError::AuthOldRevision);
        }
        let Some(user) = self.users.get(&who.username) else {
            return Err(EtcdError::PermissionDenied);
        };
        if user.is_root || user.perms.allows(perm, key, range_end) {
            Ok(())
        } else {
            Err(EtcdError::PermissionDenied)
        }
    }

    /// The checks etcd's auth applier makes before a key-space request applies: every key a
    /// Put, DeleteRange, Txn (compares and both branches, nested txns too) or LeaseRevoke
    /// touches. `lease_keys` names the keys attached to a lease.
    pub fn check_request(
        &self,
        who: &AuthInfo,
        req: &InternalRaftRequest,
        lease_keys: &dyn Fn(i64) -> Vec<Vec<u8>>,
    ) -> Result<(), EtcdError> {
        if !self.enabled {
            return Ok(());
        }
        if let Some(p) = &req.put {
            self.check_put(who, p, lease_keys)?;
        } else if let Some(d) = &req.delete_range {
            self.check_range(who, &d.key, &d.range_end, Perm::Write)?;
            if d.prev_kv {
                self.check_range(who, &d.key, &d.range_end, Perm::Read)?;
            }
        } else if let Some(t) = &req.txn {
            self.check_txn(who, t, lease_keys)?;
        } else if let Some(r) = &req.lease_revoke {
            for k in lease_keys(r.id) {
                self.check_range(who, &k, &[], Perm::Write)?;
            }
        } else if let Some(r) = &req.range {
            self.check_range(who, &r.key, &r.range_end, Perm::Read)?;
        }
        Ok(())
    }

    /// etcd's `checkPutAuth`, the same for a Put alone and one inside a Txn (etcd up to
    /// 3.5.29 checked only the key inside a Txn, GHSA-x35m-3gp4-4fh5): write on the key; write
    /// on every key the lease already holds (who can't revoke the lease mustn't extend it to
    /// their key); read on the key when the previous value is asked for.
    fn check_put(
        &self,
        who: &AuthInfo,
        p: &PutRequest,
        lease_keys: &dyn Fn(i64) -> Vec<Vec<u8>>,
    ) -> Result<(), EtcdError> {
        self.check_range(who, &p.key, &[], Perm::Write)?;
        if p.lease != 0 {
            for k in lease_keys(p.lease) {
                self.check_range(who, &k, &[], Perm::Write)?;
            }
        }
        if p.prev_kv {
            self.check_range(who, &p.key, &[], Perm::Read)?;
        }
        Ok(())
    }

    fn check_txn(
        &self,
        who: &AuthInfo,
        t: &TxnRequest,
        lease_keys: &dyn Fn(i64) -> Vec<Vec<u8>>,
    ) -> Result<(), EtcdError> {
        for c in &t.compare {
            self.check_range(who, &c.key, &c.range_end, Perm::Read)?;
        }
        t.success
            .iter()
            .chain(&t.failure)
            .try_for_each(|op| self.check_op(who, op, lease_keys))
    }

    fn check_op(
        &self,
        who: &AuthInfo,
        op: &RequestOp,
        lease_keys: &dyn Fn(i64) -> Vec<Vec<u8>>,
    ) -> Result<(), EtcdError> {
        match &op.request {
            Some(request_op::Request::RequestRange(r)) => {
                self.check_range(who, &r.key, &r.range_end, Perm::Read)
            }
            Some(request_op::Request::RequestPut(p)) => self.check_put(who, p, lease_keys),
            Some(request_op::Request::RequestDeleteRange(d)) => {
                if d.prev_kv {
                    self.check_range(who, &d.key, &d.range_end, Perm::Read)?;
                }
                self.check_range(who, &d.key, &d.range_end, Perm::Write)
            }
            // etcd 3.5.1 does not look inside nested txns; we do, so one can't smuggle a write.
            Some(request_op::Request::RequestTxn(n)) => self.check_txn(who, n, lease_keys),
            None => Ok(()),
        }
    }
}

impl PermissionView for AuthView {
    fn enabled(&self) -> bool {
        self.enabled
    }

    fn revision(&self) -> u64 {
        self.revision
    }

    fn check_admin(&self, who: &AuthInfo) -> Result<(), EtcdError> {
        AuthView::check_admin(self, who)
    }

    fn check_range(
        &self,
        who: &AuthInfo,
        key: &[u8],
        range_end: &[u8],
        perm: Perm,
    ) -> Result<(), EtcdError> {
        AuthView::check_range(self, who, key, range_end, perm)
    }

    fn check_request(
        &self,
        who: &AuthInfo,
        req: &InternalRaftRequest,
        lease_keys: &dyn Fn(i64) -> Vec<Vec<u8>>,
    ) -> Result<(), EtcdError> {
        AuthView::check_request(self, who, req, lease_keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_proto::authpb::Role;
    use actcd_proto::authpb::permission::Type;
    use actcd_proto::etcdserverpb as pb;

    fn role(perms: &[(Type, &str, &[u8])]) -> Role {
        crate::perms::tests::named_role("app", perms)
    }

    /// root, alice with read-write on `[a/, a0)`, bob with nothing; at auth revision 5.
    fn view() -> AuthView {
        let mut v = AuthView::new(true, 5, HashMap::new());
        v.set_user(
            "root".into(),
            UserEntry {
                is_root: true,
                perms: UserPerms::default(),
            },
        );
        v.set_user(
            "alice".into(),
            UserEntry {
                is_root: false,
                perms: UserPerms::build([&role(&[(Type::Readwrite, "a/", b"a0")])]),
            },
        );
        v.set_user("bob".into(), UserEntry::default());
        v
    }

    fn who(name: &str, revision: u64) -> AuthInfo {
        AuthInfo {
            username: name.into(),
            revision,
        }
    }

    #[test]
    fn range_checks_refuse_in_etcds_order() {
        use EtcdError::*;
        struct Case {
            name: &'static str,
            who: AuthInfo,
            key: &'static [u8],
            perm: Perm,
            want: Result<(), EtcdError>,
        }
        let cases = vec![
            Case {
                name: "granted",
                who: who("alice", 5),
                key: b"a/1",
                perm: Perm::Write,
                want: Ok(()),
            },
            Case {
                name: "outside the grant",
                who: who("alice", 5),
                key: b"b/1",
                perm: Perm::Read,
                want: Err(PermissionDenied),
            },
            Case {
                name: "nobody",
                who: AuthInfo::default(),
                key: b"a/1",
                perm: Perm::Read,
                want: Err(UserEmpty),
            },
            Case {
                name: "an older revision, even for root",
                who: who("root", 4),
                key: b"a/1",
                perm: Perm::Read,
                want: Err(AuthOldRevision),
            },
            Case {
                name: "unknown user",
                who: who("ghost", 5),
                key: b"a/1",
                perm: Perm::Read,
                want: Err(PermissionDenied),
            },
            Case {
                name: "root may",
                who: who("root", 9),
                key: b"zzz",
                perm: Perm::Write,
                want: Ok(()),
            },
            Case {
                name: "no roles",
                who: who("bob", 5),
                key: b"a/1",
                perm: Perm::Read,
                want: Err(PermissionDenied),
            },
        ];
        let v = view();
        for c in cases {
            assert_eq!(
                v.check_range(&c.who, c.key, b"", c.perm),
                c.want,
                "{}",
                c.name
            );
        }
        assert_eq!(
            AuthView::disabled().check_range(&AuthInfo::default(), b"k", b"", Perm::Write),
            Ok(()),
            "auth off"
        );
    }

    #[test]
    fn admin_checks() {
        let v = view();
        assert_eq!(v.check_admin(&who("root", 1)), Ok(()));
        assert_eq!(
            v.check_admin(&who("alice", 5)),
            Err(EtcdError::PermissionDenied)
        );
        assert_eq!(
            v.check_admin(&who("ghost", 5)),
            Err(EtcdError::UserNotFound)
        );
        assert_eq!(
            v.check_admin(&AuthInfo::default()),
            Err(EtcdError::UserEmpty)
        );
    }

    /// Names are bytes: one that is not UTF-8 is a user like any other, and a name matches
    /// only the same bytes, so no look-alike gets another user's permissions or root's.
    #[test]
    fn names_match_byte_for_byte() {
        let mut v = view();
        v.set_user(
            b"u\xff\xfe".to_vec(),
            UserEntry {
                is_root: false,
                perms: UserPerms::build([&role(&[(Type::Readwrite, "u/", b"u0")])]),
            },
        );
        let at = |name: &[u8]| AuthInfo {
            username: name.to_vec(),
            revision: 5,
        };
        struct Case {
            who: &'static [u8],
            want_admin: Result<(), EtcdError>,
            want_write_u: Result<(), EtcdError>,
        }
        for c in [
            Case {
                who: b"u\xff\xfe",
                want_admin: Err(EtcdError::PermissionDenied),
                want_write_u: Ok(()),
            },
            // The name as Go writes it in a JWT claim or JSON: another (missing) user.
            Case {
                who: "u\u{FFFD}\u{FFFD}".as_bytes(),
                want_admin: Err(EtcdError::UserNotFound),
                want_write_u: Err(EtcdError::PermissionDenied),
            },
            Case {
                who: b"u\xff",
                want_admin: Err(EtcdError::UserNotFound),
                want_write_u: Err(EtcdError::PermissionDenied),
            },
            Case {
                who: b"root\xff",
                want_admin: Err(EtcdError::UserNotFound),
                want_write_u: Err(EtcdError::PermissionDenied),
            },
            Case {
                who: b"root\0",
                want_admin: Err(EtcdError::UserNotFound),
                want_write_u: Err(EtcdError::PermissionDenied),
            },
            Case {
                who: b"ROOT",
                want_admin: Err(EtcdError::UserNotFound),
                want_write_u: Err(EtcdError::PermissionDenied),
            },
            Case {
                who: b"root",
                want_admin: Ok(()),
                want_write_u: Ok(()),
            },
        ] {
            let name = c.who.escape_ascii().to_string();
            assert_eq!(v.check_admin(&at(c.who)), c.want_admin, "{name}: admin");
            assert_eq!(
                v.check_range(&at(c.who), b"u/1", b"", Perm::Write),
                c.want_write_u,
                "{name}: write u/1"
            );
        }
    }

    #[test]
    fn requests_are_checked_on_every_key_they_touch() {
        let v = view();
        let alice = who("alice", 5);
        // A nested txn can't smuggle a write past the check.
        let nested = InternalRaftRequest {
            txn: Some(TxnRequest {
                success: vec![RequestOp {
                    request: Some(request_op::Request::RequestTxn(TxnRequest {
                        success: vec![RequestOp {
                            request: Some(request_op::Request::RequestPut(pb::PutRequest {
                                key: b"b/1".to_vec(),
                                ..Default::default()
                            })),
                        }],
                        ..Default::default()
                    })),
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            v.check_request(&alice, &nested, &|_| Vec::new()),
            Err(EtcdError::PermissionDenied)
        );
        // Revoking a lease needs write on every attached key.
        let revoke = InternalRaftRequest {
            lease_revoke: Some(pb::LeaseRevokeRequest { id: 7 }),
            ..Default::default()
        };
        let keys = |_| vec![b"a/1".to_vec(), b"b/1".to_vec()];
        assert_eq!(
            v.check_request(&alice, &revoke, &keys),
            Err(EtcdError::PermissionDenied)
        );
        assert_eq!(
            v.check_request(&alice, &revoke, &|_| vec![b"a/1".to_vec()]),
            Ok(())
        );
        // A put with a lease needs write on the lease's keys too.
        let put = InternalRaftRequest {
            put: Some(pb::PutRequest {
                key: b"a/2".to_vec(),
                lease: 7,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            v.check_request(&alice, &put, &keys),
            Err(EtcdError::PermissionDenied)
        );
        assert_eq!(v.check_request(&alice, &put, &|_| Vec::new()), Ok(()));
    }
}
