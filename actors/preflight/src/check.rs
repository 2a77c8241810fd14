use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_types::{EtcdError, validate};
use prost::Message;

/// etcd refuses new proposals once commit runs this far ahead of apply.
pub const MAX_APPLY_GAP: u64 = 5000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_request_bytes: usize,
    pub max_txn_ops: usize,
}

impl Default for Limits {
    /// etcd's defaults: 1.5 MiB and 128 ops.
    fn default() -> Self {
        Self {
            max_request_bytes: 3 * 1024 * 1024 / 2,
            max_txn_ops: 128,
        }
    }
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
    use actcd_proto::etcdserverpb::{PutRequest, RequestOp, TxnRequest, request_op};

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
    fn checks_in_etcds_order() {
        struct Case {
            name: &'static str,
            req: InternalRaftRequest,
            want: Result<(), EtcdError>,
        }
        let limits = Limits {
            max_request_bytes: 1024,
            max_txn_ops: 2,
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
}
