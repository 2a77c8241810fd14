//! etcd's estimate of what a write adds to the backend (`storage/quota.go`), in one place for
//! the two steps that use it: preflight's quota check before a proposal, and the capped applier
//! that refuses growing writes while the NOSPACE alarm is raised.

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::{PutRequest, RequestOp, TxnRequest, request_op};

/// etcd's per-put overhead in the estimate.
const KV_OVERHEAD: u64 = 256;

/// What `req` adds: 256 bytes of overhead per put plus its key and value; for a txn, the larger
/// branch, counting the puts of nested txns too (etcd up to 3.5.32 counted only a txn's
/// top-level puts, so a put nested in a txn in a txn passed a full store: fixed in 3.5.33 /
/// 3.6.14 / 3.7.1). Requests that add nothing (deletes, compactions, reads) cost 0.
pub fn quota_cost(req: &InternalRaftRequest) -> u64 {
    match (&req.put, &req.txn) {
        (Some(p), _) => put_cost(p),
        (None, Some(t)) => txn_cost(t),
        _ => 0,
    }
}

fn put_cost(p: &PutRequest) -> u64 {
    KV_OVERHEAD + p.key.len() as u64 + p.value.len() as u64
}

/// etcd's `costTxn`: the larger of the two branches.
pub fn txn_cost(t: &TxnRequest) -> u64 {
    let branch = |ops: &[RequestOp]| -> u64 {
        ops.iter()
            .map(|op| match &op.request {
                Some(request_op::Request::RequestPut(p)) => put_cost(p),
                Some(request_op::Request::RequestTxn(n)) => txn_cost(n),
                _ => 0,
            })
            .fold(0, u64::saturating_add)
    };
    branch(&t.success).max(branch(&t.failure))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(value: usize) -> RequestOp {
        RequestOp {
            request: Some(request_op::Request::RequestPut(PutRequest {
                key: b"k".to_vec(),
                value: vec![b'v'; value],
                ..Default::default()
            })),
        }
    }

    fn txn(success: Vec<RequestOp>, failure: Vec<RequestOp>) -> TxnRequest {
        TxnRequest {
            compare: vec![],
            success,
            failure,
        }
    }

    fn nested(t: TxnRequest) -> RequestOp {
        RequestOp {
            request: Some(request_op::Request::RequestTxn(t)),
        }
    }

    #[test]
    fn nested_puts_count_as_etcd_3_5_33_counts_them() {
        let one = 256 + 1 + 10;
        struct Case {
            name: &'static str,
            txn: TxnRequest,
            want: u64,
        }
        let cases = vec![
            Case {
                name: "top level: the larger branch",
                txn: txn(vec![put(10)], vec![put(10), put(10)]),
                want: 2 * one,
            },
            Case {
                name: "a put in a txn in a txn",
                txn: txn(
                    vec![nested(txn(
                        vec![nested(txn(vec![put(10)], vec![]))],
                        vec![],
                    ))],
                    vec![],
                ),
                want: one,
            },
            Case {
                name: "a nested txn's larger branch, beside a top-level put",
                txn: txn(
                    vec![put(10), nested(txn(vec![put(10)], vec![put(10), put(10)]))],
                    vec![],
                ),
                want: 3 * one,
            },
            Case {
                name: "nothing but reads",
                txn: txn(vec![nested(txn(vec![], vec![]))], vec![]),
                want: 0,
            },
        ];
        for c in cases {
            assert_eq!(txn_cost(&c.txn), c.want, "{}", c.name);
            let req = InternalRaftRequest {
                txn: Some(c.txn),
                ..Default::default()
            };
            assert_eq!(quota_cost(&req), c.want, "{}", c.name);
        }
    }
}
