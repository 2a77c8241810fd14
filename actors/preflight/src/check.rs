use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_types::{EtcdError, validate};
use prost::Message;

/// etcd refuses new proposals once commit runs this far ahead of apply.
pub const MAX_APPLY_GAP: u64 = 5000;
/// With the `PriorityRequest` gate (etcd 3.7, #20492), a LeaseRevoke is still taken up to this
/// gap, so expiring leases relieve an overloaded cluster instead of waiting behind it.
pub const MAX_PRIORITY_GAP: u64 = 2 * MAX_APPLY_GAP;

/// etcd's `exceedsRequestLimit`: whether commit runs too far ahead of apply to take `request`.
/// A LeaseRevoke is a priority request when `priority` (the `PriorityRequest` gate) is on.
pub fn exceeds_request_limit(
    applied: u64,
    committed: u64,
    request: &InternalRaftRequest,
    priority: bool,
) -> bool {
    let gap = committed.saturating_sub(applied);
    if gap <= MAX_APPLY_GAP {
        return false;
    }
    !(priority && request.lease_revoke.is_some() && gap <= MAX_PRIORITY_GAP)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_request_bytes: usize,
    pub max_txn_ops: usize,
    /// `--quota-backend-bytes`: writes that would take the backend past it are refused.
    pub quota_bytes: u64,
    /// The `PriorityRequest` feature gate: see [`exceeds_request_limit`].
    pub priority_requests: bool,
}

/// etcd's default backend quota: 2 GiB.
pub const DEFAULT_QUOTA_BYTES: u64 = 2 * 1024 * 1024 * 1024;

impl Default for Limits {
    /// etcd's defaults: 1.5 MiB, 128 ops, 2 GiB.
    fn default() -> Self {
        Self {
            max_request_bytes: 3 * 1024 * 1024 / 2,
            max_txn_ops: 128,
            quota_bytes: DEFAULT_QUOTA_BYTES,
            priority_requests: false,
        }
    }
}

/// etcd's estimate of what a write adds to the backend (nested txns' puts counted: see
/// [`actcd_types::quota`]). Requests that add nothing cost 0 and always pass the quota.
pub use actcd_types::quota::quota_cost;

/// Whether a write of `cost` ([`quota_cost`]) fits given the backend's current size (etcd: size
/// plus cost must stay below the quota; free writes always fit).
pub fn fits_quota(cost: u64, used_bytes: u64, quota_bytes: u64) -> bool {
    cost == 0 || used_bytes.saturating_add(cost) < quota_bytes
}

/// Validates a write and returns its encoded form, ready to propose.
pub fn check_request(req: &InternalRaftRequest, limits: &Limits) -> Result<Vec<u8>, EtcdError> {
    if let Some(p) = &req.put {
        validate::check_put(p)?;
    }
    if let Some(d) = &req.delete_range {
        validate::check_delete(d)?;
    }
    if let Some(t) = &req.txn {
        validate::check_txn(t, limits.max_txn_ops)?;
    }
    let data = req.encode_to_vec();
    if data.len() > limits.max_request_bytes {
        return Err(EtcdError::RequestTooLarge);
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_proto::etcdserverpb::{
        DeleteRangeRequest, PutRequest, RequestOp, TxnRequest, request_op,
    };

    fn put_req(key: &[u8], value_len: usize) -> InternalRaftRequest {
        InternalRaftRequest {
            put: Some(PutRequest {
                key: key.to_vec(),
                value: vec![b'x'; value_len],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_lease_revoke_goes_first_under_overload_only_with_the_priority_gate() {
        use actcd_proto::etcdserverpb::LeaseRevokeRequest;
        let revoke = InternalRaftRequest {
            lease_revoke: Some(LeaseRevokeRequest { id: 7 }),
            ..Default::default()
        };
        let put = put_req(b"k", 1);
        let applied = 100;
        for (gap, priority, want_put, want_revoke) in [
            (MAX_APPLY_GAP, false, false, false),
            (MAX_APPLY_GAP, true, false, false),
            (MAX_APPLY_GAP + 1, false, true, true),
            (MAX_APPLY_GAP + 1, true, true, false),
            (MAX_PRIORITY_GAP, true, true, false),
            (MAX_PRIORITY_GAP + 1, true, true, true),
        ] {
            let committed = applied + gap;
            assert_eq!(
                exceeds_request_limit(applied, committed, &put, priority),
                want_put,
                "put, gap {gap}, priority {priority}"
            );
            assert_eq!(
                exceeds_request_limit(applied, committed, &revoke, priority),
                want_revoke,
                "revoke, gap {gap}, priority {priority}"
            );
        }
    }

    #[test]
    fn checks_in_etcds_order() {
        struct Case {
            name: &'static str,
            req: InternalRaftRequest,
            want: Result<(), EtcdError>,
        }
        let limits = Limits {
            max_request_bytes: 1024,
            max_txn_ops: 2,
            quota_bytes: 1 << 20,
            priority_requests: false,
        };
        let op = |k: &str| RequestOp {
            request: Some(request_op::Request::RequestPut(PutRequest {
                key: k.into(),
                ..Default::default()
            })),
        };
        let txn = |ops: Vec<RequestOp>| InternalRaftRequest {
            txn: Some(TxnRequest {
                compare: vec![],
                success: ops,
                failure: vec![],
            }),
            ..Default::default()
        };
        let cases = vec![
            Case {
                name: "small put",
                req: put_req(b"k", 10),
                want: Ok(()),
            },
            Case {
                name: "empty key",
                req: put_req(b"", 10),
                want: Err(EtcdError::EmptyKey),
            },
            Case {
                name: "too large",
                req: put_req(b"k", 2000),
                want: Err(EtcdError::RequestTooLarge),
            },
            Case {
                name: "txn ok",
                req: txn(vec![op("a"), op("b")]),
                want: Ok(()),
            },
            Case {
                name: "txn too many ops",
                req: txn(vec![op("a"), op("b"), op("c")]),
                want: Err(EtcdError::TooManyOps),
            },
            Case {
                name: "txn duplicate",
                req: txn(vec![op("a"), op("a")]),
                want: Err(EtcdError::DuplicateKey),
            },
        ];
        for c in cases {
            assert_eq!(
                check_request(&c.req, &limits).map(|_| ()),
                c.want,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn quota_counts_puts_like_etcd() {
        struct Case {
            name: &'static str,
            req: InternalRaftRequest,
            used: u64,
            want_cost: u64,
            want_fits: bool,
        }
        let put = |k: &str, v: usize| RequestOp {
            request: Some(request_op::Request::RequestPut(PutRequest {
                key: k.into(),
                value: vec![b'v'; v],
                ..Default::default()
            })),
        };
        let del = InternalRaftRequest {
            delete_range: Some(DeleteRangeRequest {
                key: b"k".to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let txn = |s: Vec<RequestOp>, f: Vec<RequestOp>| InternalRaftRequest {
            txn: Some(TxnRequest {
                compare: vec![],
                success: s,
                failure: f,
            }),
            ..Default::default()
        };
        let cases = vec![
            Case {
                name: "put",
                req: put_req(b"k", 10),
                used: 0,
                want_cost: 256 + 1 + 10,
                want_fits: true,
            },
            Case {
                name: "put over quota",
                req: put_req(b"k", 10),
                used: 1000 - 267,
                want_cost: 267,
                want_fits: false,
            },
            Case {
                name: "delete is free",
                req: del,
                used: 5000,
                want_cost: 0,
                want_fits: true,
            },
            Case {
                name: "txn takes the larger branch",
                req: txn(vec![put("a", 1)], vec![put("b", 10), put("c", 10)]),
                used: 0,
                want_cost: 2 * 267,
                want_fits: true,
            },
            Case {
                name: "read-only txn is free",
                req: txn(vec![], vec![]),
                used: 5000,
                want_cost: 0,
                want_fits: true,
            },
        ];
        for c in cases {
            assert_eq!(quota_cost(&c.req), c.want_cost, "{}", c.name);
            assert_eq!(
                fits_quota(quota_cost(&c.req), c.used, 1000),
                c.want_fits,
                "{}",
                c.name
            );
        }
    }
}
