//! Step two of the chain: etcd's auth applier. Every request is judged against the permission
//! view current at its point of the log, unless a member made it itself (`header.internal`:
//! lease revokes and checkpoints, automatic compactions, member attributes are never judged,
//! as etcd's own internal requests are not). Auth requests are not judged here: the auth store
//! decides who may make them, as it applies them.

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_types::auth::PermissionView;
use actcd_types::{AuthInfo, EtcdError};

/// Who a request runs as, from its header.
pub fn who(req: &InternalRaftRequest) -> AuthInfo {
    req.header
        .as_ref()
        .map(|h| AuthInfo {
            username: h.username.clone(),
            revision: h.auth_revision,
        })
        .unwrap_or_default()
}

/// Whether a member made the request itself.
pub fn is_internal(req: &InternalRaftRequest) -> bool {
    req.header.as_ref().is_some_and(|h| h.internal)
}

/// Whether the request is one the auth store applies.
pub fn is_auth_request(req: &InternalRaftRequest) -> bool {
    req.auth_enable.is_some()
        || req.auth_disable.is_some()
        || req.auth_status.is_some()
        || req.authenticate.is_some()
        || req.auth_user_add.is_some()
        || req.auth_user_delete.is_some()
        || req.auth_user_get.is_some()
        || req.auth_user_list.is_some()
        || req.auth_user_change_password.is_some()
        || req.auth_user_grant_role.is_some()
        || req.auth_user_revoke_role.is_some()
        || req.auth_role_add.is_some()
        || req.auth_role_get.is_some()
        || req.auth_role_list.is_some()
        || req.auth_role_delete.is_some()
        || req.auth_role_grant_permission.is_some()
        || req.auth_role_revoke_permission.is_some()
}

/// Whether judging `req` needs the keys attached to a lease (a Put with a lease, a
/// LeaseRevoke), and which lease: only when the view would judge it at all.
pub fn lease_in_question(view: &dyn PermissionView, req: &InternalRaftRequest) -> Option<i64> {
    if !view.enabled() || is_internal(req) {
        return None;
    }
    if let Some(p) = &req.put {
        return (p.lease != 0).then_some(p.lease);
    }
    req.lease_revoke.as_ref().map(|r| r.id)
}

/// Judges a key-space request against `view`; `lease_keys` are the keys attached to the lease
/// [`lease_in_question`] named (empty if none).
pub fn judge(
    view: &dyn PermissionView,
    req: &InternalRaftRequest,
    lease_keys: &[Vec<u8>],
) -> Result<(), EtcdError> {
    if !view.enabled() || is_internal(req) {
        return Ok(());
    }
    view.check_request(&who(req), req, &|_| lease_keys.to_vec())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use actcd_authz::{AuthView, UserEntry};
    use actcd_proto::actcdpb::RequestHeader;
    use actcd_proto::etcdserverpb::{LeaseRevokeRequest, PutRequest};

    use super::*;

    fn put(user: &str, internal: bool, lease: i64) -> InternalRaftRequest {
        InternalRaftRequest {
            header: Some(RequestHeader {
                username: user.into(),
                auth_revision: 3,
                internal,
                ..Default::default()
            }),
            put: Some(PutRequest {
                key: b"k".to_vec(),
                lease,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn requests_are_judged_unless_members_made_them() {
        let mut users = HashMap::new();
        users.insert(b"bob".to_vec(), UserEntry::default());
        let on = AuthView::new(true, 3, users);
        let off = AuthView::disabled();
        struct Case {
            name: &'static str,
            view: &'static str,
            req: InternalRaftRequest,
            want: Result<(), EtcdError>,
            want_lease: Option<i64>,
        }
        let revoke = InternalRaftRequest {
            lease_revoke: Some(LeaseRevokeRequest { id: 9 }),
            ..Default::default()
        };
        let cases = vec![
            Case {
                name: "no grant",
                view: "on",
                req: put("bob", false, 0),
                want: Err(EtcdError::PermissionDenied),
                want_lease: None,
            },
            Case {
                name: "internal: never judged",
                view: "on",
                req: put("", true, 7),
                want: Ok(()),
                want_lease: None,
            },
            Case {
                name: "auth off",
                view: "off",
                req: put("", false, 7),
                want: Ok(()),
                want_lease: None,
            },
            Case {
                name: "a leased put needs the lease's keys",
                view: "on",
                req: put("bob", false, 7),
                want: Err(EtcdError::PermissionDenied),
                want_lease: Some(7),
            },
            Case {
                name: "a client's revoke needs them too (none attached: nothing to refuse)",
                view: "on",
                req: revoke,
                want: Ok(()),
                want_lease: Some(9),
            },
        ];
        for c in cases {
            let view: &dyn PermissionView = if c.view == "on" { &on } else { &off };
            assert_eq!(judge(view, &c.req, &[]), c.want, "{}", c.name);
            assert_eq!(lease_in_question(view, &c.req), c.want_lease, "{}", c.name);
        }
    }
}
