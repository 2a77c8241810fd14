//! Tests of the front's `pipeline/reads.rs` (its `tests` module, included from there by `#[path]`).

use super::*;
use actcd_proto::etcdserverpb::{PutRequest, RangeRequest};

fn range(serializable: bool) -> RequestOp {
    RequestOp {
        request: Some(request_op::Request::RequestRange(RangeRequest {
            key: b"k".to_vec(),
            serializable,
            ..Default::default()
        })),
    }
}

#[test]
fn classifies_txns_like_etcd() {
    struct Case {
        name: &'static str,
        txn: TxnRequest,
        want_read_only: bool,
        want_serializable: bool,
    }
    let put = RequestOp {
        request: Some(request_op::Request::RequestPut(PutRequest {
            key: b"k".to_vec(),
            ..Default::default()
        })),
    };
    let nested = |ops: Vec<RequestOp>| RequestOp {
        request: Some(request_op::Request::RequestTxn(TxnRequest {
            success: ops,
            ..Default::default()
        })),
    };
    let cases = vec![
        Case {
            name: "empty",
            txn: TxnRequest::default(),
            want_read_only: true,
            want_serializable: true,
        },
        Case {
            name: "linearizable range",
            txn: TxnRequest {
                success: vec![range(false)],
                ..Default::default()
            },
            want_read_only: true,
            want_serializable: false,
        },
        Case {
            name: "serializable ranges",
            txn: TxnRequest {
                success: vec![range(true)],
                failure: vec![range(true)],
                ..Default::default()
            },
            want_read_only: true,
            want_serializable: true,
        },
        Case {
            name: "put",
            txn: TxnRequest {
                failure: vec![put.clone()],
                ..Default::default()
            },
            want_read_only: false,
            want_serializable: false,
        },
        Case {
            name: "nested put",
            txn: TxnRequest {
                success: vec![nested(vec![put])],
                ..Default::default()
            },
            want_read_only: false,
            want_serializable: false,
        },
        Case {
            name: "nested read",
            txn: TxnRequest {
                success: vec![nested(vec![range(true)])],
                ..Default::default()
            },
            want_read_only: true,
            want_serializable: false,
        },
    ];
    for c in cases {
        assert_eq!(is_txn_read_only(&c.txn), c.want_read_only, "{}", c.name);
        assert_eq!(
            is_txn_serializable(&c.txn),
            c.want_serializable,
            "{}",
            c.name
        );
    }
}
