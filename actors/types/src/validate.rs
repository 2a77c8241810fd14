//! The checks etcd's gRPC layer makes before a request reaches the server: they need no state, so
//! they run before anything is proposed. Order matters because clients see the first failure:
//! size and op counts, then each op, then overlapping writes in a txn.

use std::collections::BTreeSet;

use actcd_proto::etcdserverpb::{
    DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest, request_op,
};

use crate::EtcdError;

pub fn check_range(r: &RangeRequest) -> Result<(), EtcdError> {
    if r.key.is_empty() {
        return Err(EtcdError::EmptyKey);
    }
    // Unknown enum numbers survive decoding as raw i32s. etcd 3.5.1 doesn't check them (an
    // unknown sort target crashes its apply path); later etcd refuses them with this error.
    if !(0..=2).contains(&r.sort_order) || !(0..=4).contains(&r.sort_target) {
        return Err(EtcdError::InvalidSortOption);
    }
    Ok(())
}

pub fn check_put(r: &PutRequest) -> Result<(), EtcdError> {
    if r.key.is_empty() {
        return Err(EtcdError::EmptyKey);
    }
    if r.ignore_value && !r.value.is_empty() {
        return Err(EtcdError::ValueProvided);
    }
    if r.ignore_lease && r.lease != 0 {
        return Err(EtcdError::LeaseProvided);
    }
    Ok(())
}

pub fn check_delete(r: &DeleteRangeRequest) -> Result<(), EtcdError> {
    if r.key.is_empty() {
        return Err(EtcdError::EmptyKey);
    }
    Ok(())
}

/// Op counts, compare keys and every op (recursively), then overlapping writes.
pub fn check_txn(r: &TxnRequest, max_txn_ops: usize) -> Result<(), EtcdError> {
    check_txn_ops(r, max_txn_ops)?;
    let _ = write_set(&r.success)?;
    let _ = write_set(&r.failure)?;
    Ok(())
}

fn check_txn_ops(r: &TxnRequest, max_txn_ops: usize) -> Result<(), EtcdError> {
    let ops = r.compare.len().max(r.success.len()).max(r.failure.len());
    if ops > max_txn_ops {
        return Err(EtcdError::TooManyOps);
    }
    if r.compare.iter().any(|c| c.key.is_empty()) {
        return Err(EtcdError::EmptyKey);
    }
    for op in r.success.iter().chain(&r.failure) {
        check_op(op, max_txn_ops - ops)?;
    }
    Ok(())
}

fn check_op(op: &RequestOp, max_txn_ops: usize) -> Result<(), EtcdError> {
    match &op.request {
        Some(request_op::Request::RequestRange(r)) => check_range(r),
        Some(request_op::Request::RequestPut(r)) => check_put(r),
        Some(request_op::Request::RequestDeleteRange(r)) => check_delete(r),
        Some(request_op::Request::RequestTxn(r)) => check_txn_ops(r, max_txn_ops),
        // An op with nothing set: etcd answers "key not found".
        None => Err(EtcdError::KeyNotFound),
    }
}

/// A delete's interval `[start, end)`; `end = None` reaches past every key.
#[derive(Debug, Clone)]
struct Interval {
    start: Vec<u8>,
    end: Option<Vec<u8>>,
}

impl Interval {
    fn of(key: &[u8], range_end: &[u8]) -> Self {
        match range_end {
            [] => {
                let mut end = key.to_vec();
                end.push(0);
                Self {
                    start: key.to_vec(),
                    end: Some(end),
                }
            }
            [0] => Self {
                start: key.to_vec(),
                end: None,
            },
            e => Self {
                start: key.to_vec(),
                end: Some(e.to_vec()),
            },
        }
    }

    fn contains(&self, k: &[u8]) -> bool {
        k >= self.start.as_slice() && self.end.as_deref().is_none_or(|e| k < e)
    }
}

/// The keys one branch puts and the ranges it deletes, nested txns included. Two puts of one key,
/// or a put of a key the same branch deletes, make the txn ambiguous: etcd refuses it.
fn write_set(ops: &[RequestOp]) -> Result<(BTreeSet<Vec<u8>>, Vec<Interval>), EtcdError> {
    let mut puts = BTreeSet::new();
    let mut dels = Vec::new();
    for op in ops {
        match &op.request {
            Some(request_op::Request::RequestDeleteRange(d)) => {
                dels.push(Interval::of(&d.key, &d.range_end));
            }
            Some(request_op::Request::RequestPut(p)) if !puts.insert(p.key.clone()) => {
                return Err(EtcdError::DuplicateKey);
            }
            _ => {}
        }
    }
    for op in ops {
        let Some(request_op::Request::RequestTxn(t)) = &op.request else {
            continue;
        };
        let (puts_then, dels_then) = write_set(&t.success)?;
        let (puts_else, dels_else) = write_set(&t.failure)?;
        for k in puts_then.iter().chain(&puts_else) {
            if puts.contains(k) || dels.iter().any(|d| d.contains(k)) {
                return Err(EtcdError::DuplicateKey);
            }
        }
        puts.extend(puts_then);
        puts.extend(puts_else);
        dels.extend(dels_then);
        dels.extend(dels_else);
    }
    if puts.iter().any(|k| dels.iter().any(|d| d.contains(k))) {
        return Err(EtcdError::DuplicateKey);
    }
    Ok((puts, dels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_proto::etcdserverpb::Compare;

    fn put(k: &str) -> RequestOp {
        RequestOp {
            request: Some(request_op::Request::RequestPut(PutRequest {
                key: k.into(),
                ..Default::default()
            })),
        }
    }
    fn del(k: &str, end: &[u8]) -> RequestOp {
        RequestOp {
            request: Some(request_op::Request::RequestDeleteRange(
                DeleteRangeRequest {
                    key: k.into(),
                    range_end: end.to_vec(),
                    ..Default::default()
                },
            )),
        }
    }
    fn get(k: &str) -> RequestOp {
        RequestOp {
            request: Some(request_op::Request::RequestRange(RangeRequest {
                key: k.into(),
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
    fn txn_checks() {
        struct Case {
            name: &'static str,
            txn: TxnRequest,
            want: Result<(), EtcdError>,
        }
        let many: Vec<RequestOp> = (0..129).map(|i| put(&format!("k{i}"))).collect();
        let cases = vec![
            Case {
                name: "empty",
                txn: txn(vec![], vec![]),
                want: Ok(()),
            },
            Case {
                name: "distinct puts",
                txn: txn(vec![put("a"), put("b")], vec![]),
                want: Ok(()),
            },
            Case {
                name: "same key in both branches",
                txn: txn(vec![put("a")], vec![put("a")]),
                want: Ok(()),
            },
            Case {
                name: "duplicate put",
                txn: txn(vec![put("a"), put("a")], vec![]),
                want: Err(EtcdError::DuplicateKey),
            },
            Case {
                name: "put inside deleted range",
                txn: txn(vec![del("a", b"c"), put("b")], vec![]),
                want: Err(EtcdError::DuplicateKey),
            },
            Case {
                name: "put at deleted range end is outside",
                txn: txn(vec![del("a", b"c"), put("c")], vec![]),
                want: Ok(()),
            },
            Case {
                name: "put after from-key delete",
                txn: txn(vec![del("a", &[0]), put("zzz")], vec![]),
                want: Err(EtcdError::DuplicateKey),
            },
            Case {
                name: "overlapping deletes are fine",
                txn: txn(vec![del("a", b"c"), del("b", b"d")], vec![]),
                want: Ok(()),
            },
            Case {
                name: "read and write of one key",
                txn: txn(vec![get("a"), put("a")], vec![]),
                want: Ok(()),
            },
            Case {
                name: "nested put duplicates outer put",
                txn: txn(vec![put("a"), nested(txn(vec![put("a")], vec![]))], vec![]),
                want: Err(EtcdError::DuplicateKey),
            },
            Case {
                name: "nested put inside outer delete",
                txn: txn(
                    vec![del("a", b"z"), nested(txn(vec![], vec![put("m")]))],
                    vec![],
                ),
                want: Err(EtcdError::DuplicateKey),
            },
            Case {
                name: "nested branches may share a key",
                txn: txn(vec![nested(txn(vec![put("a")], vec![put("a")]))], vec![]),
                want: Ok(()),
            },
            Case {
                name: "too many ops",
                txn: txn(many, vec![]),
                want: Err(EtcdError::TooManyOps),
            },
            Case {
                name: "empty key in op",
                txn: txn(vec![put("")], vec![]),
                want: Err(EtcdError::EmptyKey),
            },
            Case {
                name: "empty op",
                txn: txn(vec![RequestOp { request: None }], vec![]),
                want: Err(EtcdError::KeyNotFound),
            },
            Case {
                name: "empty compare key",
                txn: TxnRequest {
                    compare: vec![Compare::default()],
                    success: vec![],
                    failure: vec![],
                },
                want: Err(EtcdError::EmptyKey),
            },
        ];
        for c in cases {
            assert_eq!(check_txn(&c.txn, 128), c.want, "{}", c.name);
        }
    }

    #[test]
    fn put_and_range_checks() {
        let mut p = PutRequest {
            key: b"k".to_vec(),
            ..Default::default()
        };
        assert_eq!(check_put(&p), Ok(()));
        p.ignore_value = true;
        p.value = b"v".to_vec();
        assert_eq!(check_put(&p), Err(EtcdError::ValueProvided));
        p.value.clear();
        p.ignore_lease = true;
        p.lease = 5;
        assert_eq!(check_put(&p), Err(EtcdError::LeaseProvided));
        p.key.clear();
        assert_eq!(check_put(&p), Err(EtcdError::EmptyKey));
        let mut r = RangeRequest {
            key: b"k".to_vec(),
            ..Default::default()
        };
        assert_eq!(check_range(&r), Ok(()));
        r.sort_order = 7;
        assert_eq!(check_range(&r), Err(EtcdError::InvalidSortOption));
        r.sort_order = 0;
        r.key.clear();
        assert_eq!(check_range(&r), Err(EtcdError::EmptyKey));
        assert_eq!(
            check_delete(&DeleteRangeRequest::default()),
            Err(EtcdError::EmptyKey)
        );
    }
}
