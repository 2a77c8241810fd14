//! Step three of the chain: etcd's capped applier. While a NOSPACE alarm is raised, requests
//! that would grow the store — a Put, a LeaseGrant, a Txn with a put in either branch, nested
//! txns included (etcd 3.5.33+; earlier etcd looked at the top level only and wrote a put
//! nested in a txn in a txn into a full store) — are refused with `etcdserver: mvcc: database space exceeded`;
//! deletes, compactions, lease revokes and alarm requests still run, so an operator can make
//! room and disarm.

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_types::EtcdError;
use actcd_types::quota::txn_cost;

/// Refuses `req` if it would grow the store while `nospace` is raised.
pub fn check(nospace: bool, req: &InternalRaftRequest) -> Result<(), EtcdError> {
    if nospace && grows(req) {
        Err(EtcdError::NoSpace)
    } else {
        Ok(())
    }
}

/// Whether `req` would grow the store, read with the precedence the store applies a request
/// by when several fields are set (a range first, then put, delete, txn, compaction, lease
/// grant).
fn grows(req: &InternalRaftRequest) -> bool {
    if req.range.is_some() {
        false
    } else if req.put.is_some() {
        true
    } else if req.delete_range.is_some() {
        false
    } else if let Some(t) = &req.txn {
        txn_cost(t) > 0
    } else if req.compaction.is_some() || req.alarm.is_some() {
        false
    } else {
        req.lease_grant.is_some()
    }
}

#[cfg(test)]
mod tests {
    use actcd_proto::etcdserverpb::{
        CompactionRequest, DeleteRangeRequest, LeaseGrantRequest, LeaseRevokeRequest, PutRequest,
        RangeRequest, RequestOp, TxnRequest, request_op,
    };

    use super::*;

    fn op(r: request_op::Request) -> RequestOp {
        RequestOp { request: Some(r) }
    }

    #[test]
    fn nospace_refuses_only_what_grows_the_store() {
        struct Case {
            name: &'static str,
            req: InternalRaftRequest,
            want_capped: bool,
        }
        let put = || PutRequest {
            key: b"k".to_vec(),
            ..Default::default()
        };
        let del = || DeleteRangeRequest {
            key: b"k".to_vec(),
            ..Default::default()
        };
        let cases = vec![
            Case {
                name: "put",
                req: InternalRaftRequest {
                    put: Some(put()),
                    ..Default::default()
                },
                want_capped: true,
            },
            Case {
                name: "lease grant",
                req: InternalRaftRequest {
                    lease_grant: Some(LeaseGrantRequest { ttl: 5, id: 1 }),
                    ..Default::default()
                },
                want_capped: true,
            },
            Case {
                name: "txn with a put in its failure branch",
                req: InternalRaftRequest {
                    txn: Some(TxnRequest {
                        success: vec![op(request_op::Request::RequestDeleteRange(del()))],
                        failure: vec![op(request_op::Request::RequestPut(put()))],
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                want_capped: true,
            },
            Case {
                name: "txn with a put in a txn in a txn",
                req: InternalRaftRequest {
                    txn: Some(TxnRequest {
                        success: vec![op(request_op::Request::RequestTxn(TxnRequest {
                            success: vec![op(request_op::Request::RequestTxn(TxnRequest {
                                success: vec![op(request_op::Request::RequestPut(put()))],
                                ..Default::default()
                            }))],
                            ..Default::default()
                        }))],
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                want_capped: true,
            },
            Case {
                name: "txn of deletes",
                req: InternalRaftRequest {
                    txn: Some(TxnRequest {
                        success: vec![op(request_op::Request::RequestDeleteRange(del()))],
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                want_capped: false,
            },
            Case {
                name: "delete",
                req: InternalRaftRequest {
                    delete_range: Some(del()),
                    ..Default::default()
                },
                want_capped: false,
            },
            Case {
                name: "compaction",
                req: InternalRaftRequest {
                    compaction: Some(CompactionRequest {
                        revision: 3,
                        physical: false,
                    }),
                    ..Default::default()
                },
                want_capped: false,
            },
            Case {
                name: "lease revoke",
                req: InternalRaftRequest {
                    lease_revoke: Some(LeaseRevokeRequest { id: 1 }),
                    ..Default::default()
                },
                want_capped: false,
            },
            Case {
                name: "a range comes first: nothing applied, nothing capped",
                req: InternalRaftRequest {
                    range: Some(RangeRequest::default()),
                    put: Some(put()),
                    ..Default::default()
                },
                want_capped: false,
            },
        ];
        for c in cases {
            assert_eq!(check(false, &c.req), Ok(()), "{}: no alarm", c.name);
            let want = if c.want_capped {
                Err(EtcdError::NoSpace)
            } else {
                Ok(())
            };
            assert_eq!(check(true, &c.req), want, "{}: NOSPACE", c.name);
        }
    }
}
