//! Step two of the chain: etcd's auth applier. Every request is judged against the permission
//! view current at its point of the log, unless a member made it itself (`header.internal`:
//! lease revokes and checkpoints, automatic compactions, member attributes are never judged,
//! as etcd's own internal requests are not). Auth requests are not judged here: the auth store
//! decides who may make them, as it applies them.

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::{TxnRequest, request_op};
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

/// The leases whose attached keys judging `req` needs: a Put's lease, the lease of every Put
/// inside a Txn (nested ones too: etcd up to 3.5.29 did not look there, GHSA-x35m-3gp4-4fh5),
/// a LeaseRevoke's; none when the view would not judge the request at all.
pub fn leases_in_question(view: &dyn PermissionView, req: &InternalRaftRequest) -> Vec<i64> {
    let mut ids = Vec::new();
    if !view.enabled() || is_internal(req) {
        return ids;
    }
    if let Some(p) = &req.put {
        ids.push(p.lease);
    } else if let Some(t) = &req.txn {
        txn_leases(t, &mut ids);
    } else if let Some(r) = &req.lease_revoke {
        ids.push(r.id);
    }
    ids.retain(|&id| id != 0);
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn txn_leases(t: &TxnRequest, ids: &mut Vec<i64>) {
    for op in t.success.iter().chain(&t.failure) {
        match &op.request {
            Some(request_op::Request::RequestPut(p)) => ids.push(p.lease),
            Some(request_op::Request::RequestTxn(n)) => txn_leases(n, ids),
            _ => {}
        }
    }
}

/// Judges a key-space request against `view`; `lease_keys` are the keys attached to each lease
/// [`leases_in_question`] named (a lease not among them has none).
pub fn judge(
    view: &dyn PermissionView,
    req: &InternalRaftRequest,
    lease_keys: &[(i64, Vec<Vec<u8>>)],
) -> Result<(), EtcdError> {
    if !view.enabled() || is_internal(req) {
        return Ok(());
    }
    let keys_of = |id: i64| {
        lease_keys
            .iter()
            .find(|(l, _)| *l == id)
            .map(|(_, keys)| keys.clone())
            .unwrap_or_default()
    };
    view.check_request(&who(req), req, &keys_of)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use actcd_authz::{AuthView, UserEntry};
    use actcd_proto::actcdpb::RequestHeader;
    use actcd_proto::etcdserverpb::{LeaseRevokeRequest, PutRequest, RequestOp};

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
            want_leases: Vec<i64>,
        }
        let revoke = InternalRaftRequest {
            lease_revoke: Some(LeaseRevokeRequest { id: 9 }),
            ..Default::default()
        };
        // A put with lease 5 inside a txn inside a txn, and one with lease 7 at the top.
        let leased = |lease| RequestOp {
            request: Some(request_op::Request::RequestPut(PutRequest {
                key: b"k".to_vec(),
                lease,
                ..Default::default()
            })),
        };
        let nested = InternalRaftRequest {
            header: put("bob", false, 0).header,
            txn: Some(TxnRequest {
                success: vec![
                    leased(7),
                    RequestOp {
                        request: Some(request_op::Request::RequestTxn(TxnRequest {
                            failure: vec![leased(5), leased(7)],
                            ..Default::default()
                        })),
                    },
                ],
                ..Default::default()
            }),
            ..Default::default()
        };
        let cases = vec![
            Case {
                name: "a txn's leased puts, nested ones too, each lease once",
                view: "on",
                req: nested,
                want: Err(EtcdError::PermissionDenied),
                want_leases: vec![5, 7],
            },
            Case {
                name: "no grant",
                view: "on",
                req: put("bob", false, 0),
                want: Err(EtcdError::PermissionDenied),
                want_leases: vec![],
            },
            Case {
                name: "internal: never judged",
                view: "on",
                req: put("", true, 7),
                want: Ok(()),
                want_leases: vec![],
            },
            Case {
                name: "auth off",
                view: "off",
                req: put("", false, 7),
                want: Ok(()),
                want_leases: vec![],
            },
            Case {
                name: "a leased put needs the lease's keys",
                view: "on",
                req: put("bob", false, 7),
                want: Err(EtcdError::PermissionDenied),
                want_leases: vec![7],
            },
            Case {
                name: "a client's revoke needs them too (none attached: nothing to refuse)",
                view: "on",
                req: revoke,
                want: Ok(()),
                want_leases: vec![9],
            },
        ];
        for c in cases {
            let view: &dyn PermissionView = if c.view == "on" { &on } else { &off };
            assert_eq!(judge(view, &c.req, &[]), c.want, "{}", c.name);
            assert_eq!(
                leases_in_question(view, &c.req),
                c.want_leases,
                "{}",
                c.name
            );
        }
    }
}
