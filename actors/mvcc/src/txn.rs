//! Txn: compares, the choice of branch, validation, and execution at one revision.
//!
//! Following etcd (`applierV3backend.Txn`): every compare of the txn and of all nested txns on
//! the chosen path is evaluated first, against the state before the txn. Then the chosen ops are
//! checked against that same state — Put's `ignore_value`/`ignore_lease` need the key, a lease
//! must be one the applier listed as existing (`ApplyBatch.leases`), then a Range's revision must be neither future nor compacted — and the first
//! failure fails the whole txn with nothing written. Only then are the ops executed in order,
//! all writes sharing one main revision and every read seeing the txn's earlier writes.
//!
//! One deliberate difference: etcd panics when an op fails during execution after passing the
//! checks (a Put with `ignore_value` on a key deleted earlier in the same txn). Here the txn is
//! rolled back and fails with the op's error (`key not found`) instead.

use std::cmp::Ordering;

use actcd_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use actcd_proto::etcdserverpb::request_op::Request;
use actcd_proto::etcdserverpb::response_op::Response;
use actcd_proto::etcdserverpb::{
    Compare, RequestOp, ResponseHeader, ResponseOp, TxnRequest, TxnResponse,
};
use actcd_proto::mvccpb::KeyValue;
use actcd_types::EtcdError;
use actcd_types::storage::{ReadTxn, WriteTxn};

use crate::error::Error;
use crate::key_index::KeyRange;
use crate::ops::Tally;
use crate::range::View;
use crate::write::{Writer, rev_header};

/// The outcome of a txn's compares, with one entry per nested txn on the chosen branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TxnPath {
    pub succeeded: bool,
    pub nested: Vec<TxnPath>,
}

fn branch(req: &TxnRequest, succeeded: bool) -> &[RequestOp] {
    if succeeded {
        &req.success
    } else {
        &req.failure
    }
}

/// Evaluates the compares of `req` and, recursively, of the nested txns it will run, adding
/// each compare evaluated to `compares` (etcd reads a range for each, up to the first false).
pub(crate) fn txn_path<R: ReadTxn + ?Sized>(
    view: &View<'_, R>,
    req: &TxnRequest,
    compares: &mut u64,
) -> Result<TxnPath, Error> {
    let mut succeeded = true;
    for c in &req.compare {
        *compares += 1;
        if !compare(view, c)? {
            succeeded = false;
            break;
        }
    }
    let nested = branch(req, succeeded)
        .iter()
        .filter_map(|op| match &op.request {
            Some(Request::RequestTxn(t)) => Some(txn_path(view, t, compares)),
            _ => None,
        })
        .collect::<Result<_, _>>()?;
    Ok(TxnPath { succeeded, nested })
}

/// etcd's `applyCompare`: every key in the compare's range must pass. With no key at all, a
/// VALUE compare fails and the others compare a zero record (version, revisions, lease 0).
pub(crate) fn compare<R: ReadTxn + ?Sized>(view: &View<'_, R>, c: &Compare) -> Result<bool, Error> {
    let target = CompareTarget::try_from(c.target);
    let needs_record = matches!(target, Ok(CompareTarget::Value | CompareTarget::Lease));
    let live = view
        .index
        .range(KeyRange::new(&c.key, &c.range_end), view.rev);
    if live.is_empty() {
        // No way to tell a missing value from an empty one, so comparing one always fails.
        return Ok(target != Ok(CompareTarget::Value) && compare_kv(c, &KeyValue::default()));
    }
    for (_, kr) in live {
        let kv = if needs_record {
            view.record(kr.modified)?
        } else {
            KeyValue {
                create_revision: kr.created.main,
                mod_revision: kr.modified.main,
                version: kr.version,
                ..Default::default()
            }
        };
        if !compare_kv(c, &kv) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// etcd's `compareKV`. A `target_union` that doesn't match the target compares against zero
/// (or the empty value); an unknown result passes; an unknown target compares as equal.
fn compare_kv(c: &Compare, kv: &KeyValue) -> bool {
    let int = |want: Option<i64>| want.unwrap_or(0);
    let ord = match (CompareTarget::try_from(c.target), &c.target_union) {
        (Ok(CompareTarget::Value), Some(TargetUnion::Value(v))) => kv.value.as_slice().cmp(v),
        (Ok(CompareTarget::Value), _) => kv.value.as_slice().cmp(&[]),
        (Ok(CompareTarget::Version), u) => kv.version.cmp(&int(match u {
            Some(TargetUnion::Version(v)) => Some(*v),
            _ => None,
        })),
        (Ok(CompareTarget::Create), u) => kv.create_revision.cmp(&int(match u {
            Some(TargetUnion::CreateRevision(v)) => Some(*v),
            _ => None,
        })),
        (Ok(CompareTarget::Mod), u) => kv.mod_revision.cmp(&int(match u {
            Some(TargetUnion::ModRevision(v)) => Some(*v),
            _ => None,
        })),
        (Ok(CompareTarget::Lease), u) => kv.lease.cmp(&int(match u {
            Some(TargetUnion::Lease(v)) => Some(*v),
            _ => None,
        })),
        (Err(_), _) => Ordering::Equal,
    };
    match CompareResult::try_from(c.result) {
        Ok(CompareResult::Equal) => ord == Ordering::Equal,
        Ok(CompareResult::NotEqual) => ord != Ordering::Equal,
        Ok(CompareResult::Greater) => ord == Ordering::Greater,
        Ok(CompareResult::Less) => ord == Ordering::Less,
        Err(_) => true,
    }
}

/// Calls `f` on every non-txn op of the chosen branches, depth first, in order.
fn check_ops(
    req: &TxnRequest,
    path: &TxnPath,
    f: &mut impl FnMut(&RequestOp) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut nested = path.nested.iter();
    for op in branch(req, path.succeeded) {
        if let Some(Request::RequestTxn(t)) = &op.request {
            let p = nested.next().ok_or_else(path_mismatch)?;
            check_ops(t, p, f)?;
        } else {
            f(op)?;
        }
    }
    Ok(())
}

/// A Range op naming a revision must name one neither future nor compacted.
fn check_range_revisions<R: ReadTxn + ?Sized>(
    view: &View<'_, R>,
    req: &TxnRequest,
    path: &TxnPath,
) -> Result<(), Error> {
    check_ops(req, path, &mut |op| match &op.request {
        Some(Request::RequestRange(r)) if r.revision != 0 => {
            if r.revision > view.rev {
                Err(EtcdError::FutureRevision.into())
            } else if r.revision < view.compact_rev {
                Err(EtcdError::Compacted.into())
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    })
}

impl<R: ReadTxn + ?Sized> View<'_, R> {
    /// A txn that writes nothing (its chosen branch holds only ranges and such txns), read at
    /// the view's revision: compares, the same checks a write txn gets, then the ranges. The
    /// header carries only the revision; the caller stamps the rest. `tally` gets the ranges
    /// etcd's read transaction would make (`ops.rs`).
    pub fn read_txn(&self, req: &TxnRequest, tally: &mut Tally) -> Result<TxnResponse, Error> {
        let path = txn_path(self, req, &mut tally.ranges)?;
        check_ops(req, &path, &mut |op| match &op.request {
            Some(Request::RequestPut(_) | Request::RequestDeleteRange(_)) => Err(Error::Request(
                EtcdError::internal("actcd: read-only txn attempted a write"),
            )),
            _ => Ok(()),
        })?;
        check_range_revisions(self, req, &path)?;
        let mut resp = self.exec_read_txn(req, &path, tally)?;
        resp.header = rev_header(self.rev);
        Ok(resp)
    }

    fn exec_read_txn(
        &self,
        req: &TxnRequest,
        path: &TxnPath,
        tally: &mut Tally,
    ) -> Result<TxnResponse, Error> {
        let mut nested = path.nested.iter();
        let mut responses = Vec::new();
        for op in branch(req, path.succeeded) {
            let response = match &op.request {
                None => None,
                Some(Request::RequestRange(r)) => {
                    tally.range();
                    Some(Response::ResponseRange(self.range(r)?))
                }
                Some(Request::RequestTxn(t)) => {
                    let p = nested.next().ok_or_else(path_mismatch)?;
                    Some(Response::ResponseTxn(self.exec_read_txn(t, p, tally)?))
                }
                Some(Request::RequestPut(_) | Request::RequestDeleteRange(_)) => {
                    return Err(Error::Request(EtcdError::internal(
                        "actcd: read-only txn attempted a write",
                    )));
                }
            };
            responses.push(ResponseOp { response });
        }
        Ok(TxnResponse {
            header: Some(ResponseHeader::default()),
            succeeded: path.succeeded,
            responses,
        })
    }
}

fn path_mismatch() -> Error {
    Error::Corrupt("txn path does not match the txn".into())
}

impl<W: WriteTxn + ?Sized> Writer<'_, W> {
    /// A top-level Txn. On a refused op nothing stays written and the error is the txn's.
    /// The compares and checks are etcd's read transaction (`read_side`), the ops its write
    /// transaction (`tally`).
    pub fn txn(&mut self, req: TxnRequest) -> Result<TxnResponse, Error> {
        let mut read_side = Tally::default();
        let checked = (|| {
            let view = self.view();
            let path = txn_path(&view, &req, &mut read_side.ranges)?;
            let leases = self.leases;
            check_ops(&req, &path, &mut |op| match &op.request {
                Some(Request::RequestPut(p)) => {
                    if p.ignore_value || p.ignore_lease {
                        read_side.range();
                        if view.index.get(&p.key, view.rev).is_none() {
                            return Err(EtcdError::KeyNotFound.into());
                        }
                    }
                    if p.lease != 0 && !leases.contains(&p.lease) {
                        return Err(EtcdError::LeaseNotFound.into());
                    }
                    Ok(())
                }
                _ => Ok(()),
            })?;
            check_range_revisions(&view, &req, &path)?;
            Ok::<_, Error>(path)
        })();
        self.read_side = read_side;
        let path = checked?;

        let mark = self.undo.len();
        match self.exec_txn(req, &path) {
            Ok(mut resp) => {
                resp.header = rev_header(self.read_rev());
                Ok(resp)
            }
            Err(e @ (Error::Request(_) | Error::Damaged(_))) => {
                self.rollback_to(mark)?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Runs the chosen branch. Responses of nested ops carry a header with only the revision;
    /// a nested txn's header is empty (etcd fills only the top-level header).
    fn exec_txn(&mut self, req: TxnRequest, path: &TxnPath) -> Result<TxnResponse, Error> {
        let ops = if path.succeeded {
            req.success
        } else {
            req.failure
        };
        let mut nested = path.nested.iter();
        let mut responses = Vec::with_capacity(ops.len());
        for op in ops {
            let response = match op.request {
                None => None,
                Some(Request::RequestRange(r)) => {
                    self.tally.range();
                    Some(Response::ResponseRange(self.view().range(&r)?))
                }
                Some(Request::RequestPut(p)) => Some(Response::ResponsePut(self.put(p)?)),
                Some(Request::RequestDeleteRange(d)) => {
                    Some(Response::ResponseDeleteRange(self.delete_range(d)?))
                }
                Some(Request::RequestTxn(t)) => {
                    let p = nested.next().ok_or_else(path_mismatch)?;
                    Some(Response::ResponseTxn(self.exec_txn(t, p)?))
                }
            };
            responses.push(ResponseOp { response });
        }
        Ok(TxnResponse {
            header: Some(ResponseHeader::default()),
            succeeded: path.succeeded,
            responses,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_proto::etcdserverpb::PutRequest;

    fn cmp(target: CompareTarget, result: CompareResult, union: Option<TargetUnion>) -> Compare {
        Compare {
            result: result as i32,
            target: target as i32,
            key: b"k".to_vec(),
            target_union: union,
            range_end: vec![],
        }
    }

    #[test]
    fn compare_kv_follows_etcds_rules() {
        use CompareResult::*;
        use CompareTarget::*;
        struct Case {
            name: &'static str,
            c: Compare,
            want: bool,
        }
        let kv = KeyValue {
            key: b"k".to_vec(),
            create_revision: 2,
            mod_revision: 5,
            version: 3,
            value: b"m".to_vec(),
            lease: 7,
        };
        let cases = [
            Case {
                name: "value equal",
                c: cmp(Value, Equal, Some(TargetUnion::Value(b"m".to_vec()))),
                want: true,
            },
            Case {
                name: "value greater",
                c: cmp(Value, Greater, Some(TargetUnion::Value(b"a".to_vec()))),
                want: true,
            },
            Case {
                name: "value less",
                c: cmp(Value, Less, Some(TargetUnion::Value(b"a".to_vec()))),
                want: false,
            },
            Case {
                name: "value vs missing union is empty",
                c: cmp(Value, Greater, None),
                want: true,
            },
            Case {
                name: "version not equal",
                c: cmp(Version, NotEqual, Some(TargetUnion::Version(3))),
                want: false,
            },
            Case {
                name: "create less",
                c: cmp(Create, Less, Some(TargetUnion::CreateRevision(3))),
                want: true,
            },
            Case {
                name: "mod greater",
                c: cmp(Mod, Greater, Some(TargetUnion::ModRevision(4))),
                want: true,
            },
            Case {
                name: "lease equal",
                c: cmp(Lease, Equal, Some(TargetUnion::Lease(7))),
                want: true,
            },
            Case {
                name: "mismatched union compares to zero",
                c: cmp(Mod, Greater, Some(TargetUnion::Version(100))),
                want: true,
            },
            Case {
                name: "unknown result passes",
                c: Compare {
                    result: 42,
                    ..cmp(Mod, Equal, Some(TargetUnion::ModRevision(1)))
                },
                want: true,
            },
        ];
        for c in cases {
            assert_eq!(compare_kv(&c.c, &kv), c.want, "{}", c.name);
        }
    }

    #[test]
    fn path_covers_nested_txns_on_the_chosen_branch() {
        let nested = |ok: bool| RequestOp {
            request: Some(Request::RequestTxn(TxnRequest {
                compare: if ok {
                    vec![]
                } else {
                    vec![cmp(CompareTarget::Version, CompareResult::Greater, None)]
                },
                ..Default::default()
            })),
        };
        let put = RequestOp {
            request: Some(Request::RequestPut(PutRequest::default())),
        };
        let req = TxnRequest {
            compare: vec![],
            success: vec![nested(true), put, nested(false)],
            failure: vec![nested(true)],
        };
        let index = crate::key_index::TreeIndex::new();
        let engine = actcd_types::storage::MemEngine::new();
        let txn = actcd_types::storage::KvEngine::read(&engine).unwrap();
        let view = View {
            index: &index,
            txn: &*txn,
            rev: 1,
            compact_rev: -1,
            concurrent: false,
        };
        let path = txn_path(&view, &req, &mut 0).unwrap();
        let leaf = |succeeded| TxnPath {
            succeeded,
            nested: vec![],
        };
        assert_eq!(
            path,
            TxnPath {
                succeeded: true,
                nested: vec![leaf(true), leaf(false)]
            }
        );
        let mut seen = 0;
        check_ops(&req, &path, &mut |_| {
            seen += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, 1, "only the put is a leaf op");
    }
}
