//! etcd's `concurrency` recipes (mutex and election on leases and create revisions), run in
//! the server for the Lock and Election services, as etcd runs them in its own.
//!
//! Every step is an ordinary request made as the caller ([`Caller`]): the same pipeline, the
//! same permission checks, the same errors a client doing the recipe itself would get. Waiting
//! is a watch through the hub from a known revision, so no delete between a read and the watch
//! can be missed.
//!
//! Ownership is by create revision: of the keys under `prefix/`, the one created first owns
//! the lock (or leads); each waiter watches for the deletion of the newest key created before
//! its own, and checks again.

use std::sync::Arc;

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use actcd_proto::etcdserverpb::range_request::{SortOrder, SortTarget};
use actcd_proto::etcdserverpb::request_op::Request as Op;
use actcd_proto::etcdserverpb::watch_request::RequestUnion;
use actcd_proto::etcdserverpb::{
    Compare, DeleteRangeRequest, DeleteRangeResponse, LeaseGrantRequest, PutRequest, RangeRequest,
    RangeResponse, RequestOp, ResponseHeader, TxnRequest, TxnResponse, WatchCreateRequest,
    WatchRequest,
};
use actcd_proto::mvccpb::KeyValue;
use actcd_proto::mvccpb::event::EventType;
use actcd_types::msg::ApplyResponse;
use actcd_types::{AuthInfo, EtcdError};

use crate::authn::Credentials;
use crate::pipeline::{Pipeline, is_txn_read_only};

/// etcd's session TTL when a lock or campaign names no lease.
pub const DEFAULT_SESSION_TTL: i64 = 60;

/// The end of the range of keys starting with `prefix` (etcd's `GetPrefixRangeEnd`).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff (or empty): every key from `prefix` on.
    vec![0]
}

/// A candidate's key under `prefix`: the lease in hex, as etcd names it.
pub fn candidate_key(prefix: &[u8], lease: i64) -> Vec<u8> {
    let mut key = prefix.to_vec();
    // Go's `%x` of an int64: a minus sign, not two's complement, for a negative lease.
    let hex = if lease < 0 {
        format!("-{:x}", lease.unsigned_abs())
    } else {
        format!("{lease:x}")
    };
    key.extend_from_slice(hex.as_bytes());
    key
}

/// `name/`: where an election's or a lock's candidates live.
pub fn prefix_of(name: &[u8]) -> Vec<u8> {
    let mut p = name.to_vec();
    p.push(b'/');
    p
}

/// A caller's place among a lock's or an election's candidates.
pub struct Candidacy {
    /// `name/`, where the candidates live.
    pub prefix: Vec<u8>,
    pub key: Vec<u8>,
    pub lease: i64,
    /// The key's create revision: its place in line.
    pub rev: i64,
    /// The key as it was, if the caller was a candidate already.
    pub existing: Option<KeyValue>,
    /// The header of the txn that put or found the key.
    pub header: ResponseHeader,
}

/// Requests made as one caller.
#[derive(Clone)]
pub struct Caller {
    pub p: Arc<Pipeline>,
    pub who: AuthInfo,
    pub creds: Credentials,
}

fn mismatch(what: &str) -> EtcdError {
    EtcdError::Internal(format!("actcd: unexpected apply result for {what}"))
}

impl Caller {
    pub async fn of<T>(p: &Arc<Pipeline>, req: &tonic::Request<T>) -> Result<Self, EtcdError> {
        let creds = p.auth.credentials(req);
        Ok(Self {
            p: p.clone(),
            who: p.who(req).await?,
            creds,
        })
    }

    pub async fn txn(&self, txn: TxnRequest) -> Result<TxnResponse, EtcdError> {
        if is_txn_read_only(&txn) {
            return self.p.read_only_txn(txn, self.who.clone()).await;
        }
        let r = InternalRaftRequest {
            txn: Some(txn),
            ..Default::default()
        };
        match self.p.write(r, self.who.clone()).await? {
            ApplyResponse::Txn(t) => Ok(t),
            _ => Err(mismatch("txn")),
        }
    }

    /// A linearizable read.
    pub async fn range(&self, r: RangeRequest) -> Result<RangeResponse, EtcdError> {
        self.p.range(r, self.who.clone()).await
    }

    pub async fn delete(&self, key: Vec<u8>) -> Result<DeleteRangeResponse, EtcdError> {
        let r = InternalRaftRequest {
            delete_range: Some(DeleteRangeRequest {
                key,
                ..Default::default()
            }),
            ..Default::default()
        };
        match self.p.write(r, self.who.clone()).await? {
            ApplyResponse::DeleteRange(d) => Ok(d),
            _ => Err(mismatch("delete")),
        }
    }

    /// A lease of `ttl` seconds with a server-chosen id.
    pub async fn grant(&self, ttl: i64) -> Result<i64, EtcdError> {
        let mut id = 0;
        while id == 0 {
            id = (self.p.next_id() & (i64::MAX as u64)) as i64;
        }
        let r = InternalRaftRequest {
            lease_grant: Some(LeaseGrantRequest { ttl, id }),
            ..Default::default()
        };
        match self.p.write(r, self.who.clone()).await? {
            ApplyResponse::LeaseGrant(g) => Ok(g.id),
            _ => Err(mismatch("lease grant")),
        }
    }

    /// The key under `prefix` created first (or, `newest_before`, the newest created at or
    /// before that revision).
    pub async fn by_create(
        &self,
        prefix: &[u8],
        newest_before: Option<i64>,
    ) -> Result<RangeResponse, EtcdError> {
        let (order, max_create) = match newest_before {
            Some(rev) => (SortOrder::Descend, rev),
            None => (SortOrder::Ascend, 0),
        };
        self.range(RangeRequest {
            key: prefix.to_vec(),
            range_end: prefix_end(prefix),
            limit: 1,
            sort_order: order as i32,
            sort_target: SortTarget::Create as i32,
            max_create_revision: max_create,
            ..Default::default()
        })
        .await
    }

    /// Puts `value` on `key` with `lease` unless the key exists (etcd's campaign and mutex
    /// step): `(created, the key as it is now, the txn's header)`.
    pub async fn create_or_get(
        &self,
        key: &[u8],
        value: &[u8],
        lease: i64,
    ) -> Result<(bool, Option<KeyValue>, ResponseHeader), EtcdError> {
        let txn = TxnRequest {
            compare: vec![Compare {
                result: CompareResult::Equal as i32,
                target: CompareTarget::Create as i32,
                key: key.to_vec(),
                range_end: Vec::new(),
                target_union: Some(TargetUnion::CreateRevision(0)),
            }],
            success: vec![RequestOp {
                request: Some(Op::RequestPut(PutRequest {
                    key: key.to_vec(),
                    value: value.to_vec(),
                    lease,
                    ..Default::default()
                })),
            }],
            failure: vec![RequestOp {
                request: Some(Op::RequestRange(RangeRequest {
                    key: key.to_vec(),
                    ..Default::default()
                })),
            }],
        };
        let resp = self.txn(txn).await?;
        let header = resp.header.unwrap_or_default();
        let existing = if resp.succeeded {
            None
        } else {
            resp.responses.into_iter().find_map(|r| match r.response {
                Some(actcd_proto::etcdserverpb::response_op::Response::ResponseRange(r)) => {
                    r.kvs.into_iter().next()
                }
                _ => None,
            })
        };
        Ok((resp.succeeded, existing, header))
    }

    /// The first step of both recipes: the caller's key `name/<lease in hex>` put with `value`
    /// and the lease unless it exists already (lease 0: a fresh session lease, as etcd's
    /// session grants). `None` if the key existed but was gone by the read (its lease ended).
    ///
    /// The steps run in a task of their own: a caller who goes away while they are under way
    /// (the RPC dropped with the put proposed) would otherwise leave a candidate key that
    /// nobody waits behind, blocking the line until its lease ends. Such a key, if this call
    /// created it, is deleted as soon as the put is answered.
    pub async fn enter(
        &self,
        name: &[u8],
        lease: i64,
        value: &[u8],
    ) -> Result<Option<Candidacy>, EtcdError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (me, name, value) = (self.clone(), name.to_vec(), value.to_vec());
        tokio::spawn(async move {
            let entered = me.enter_here(&name, lease, &value).await;
            if let Err(Ok(Some(c))) = tx.send(entered)
                && c.existing.is_none()
            {
                let _ = me.delete(c.key).await;
            }
        });
        rx.await
            .unwrap_or_else(|_| Err(EtcdError::Internal("actcd: candidacy task ended".into())))
    }

    async fn enter_here(
        &self,
        name: &[u8],
        lease: i64,
        value: &[u8],
    ) -> Result<Option<Candidacy>, EtcdError> {
        let lease = match lease {
            0 => self.grant(DEFAULT_SESSION_TTL).await?,
            l => l,
        };
        let prefix = prefix_of(name);
        let key = candidate_key(&prefix, lease);
        let (created, existing, header) = self.create_or_get(&key, value, lease).await?;
        let rev = match (created, &existing) {
            (true, _) => header.revision,
            (false, Some(kv)) => kv.create_revision,
            (false, None) => return Ok(None),
        };
        Ok(Some(Candidacy {
            prefix,
            key,
            lease,
            rev,
            existing,
            header,
        }))
    }

    /// `then` on `key` if it was created at `rev` (an election leader's proof): the txn's
    /// answer.
    pub async fn if_created_at(
        &self,
        key: &[u8],
        rev: i64,
        then: Op,
    ) -> Result<TxnResponse, EtcdError> {
        self.txn(TxnRequest {
            compare: vec![Compare {
                result: CompareResult::Equal as i32,
                target: CompareTarget::Create as i32,
                key: key.to_vec(),
                range_end: Vec::new(),
                target_union: Some(TargetUnion::CreateRevision(rev)),
            }],
            success: vec![RequestOp {
                request: Some(then),
            }],
            failure: Vec::new(),
        })
        .await
    }

    /// A watch on `key` (or the range up to `range_end`) from `rev`, as this caller: the
    /// receiver of its responses. Dropping it ends the watch.
    pub async fn watch(
        &self,
        key: &[u8],
        range_end: Vec<u8>,
        rev: i64,
    ) -> Result<
        tokio::sync::mpsc::Receiver<
            Result<actcd_proto::etcdserverpb::WatchResponse, tonic::Status>,
        >,
        EtcdError,
    > {
        use futures::StreamExt;
        let create = WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
                key: key.to_vec(),
                range_end,
                start_revision: rev,
                ..Default::default()
            })),
        };
        let inbound = futures::stream::iter([create]).chain(futures::stream::pending());
        crate::grpc::watch::open_stream(self.p.clone(), self.creds.clone(), inbound).await
    }

    /// Waits until `key` is deleted at or after `rev` (etcd's `waitDelete`).
    pub async fn wait_delete(&self, key: &[u8], rev: i64) -> Result<(), EtcdError> {
        let mut rx = self.watch(key, Vec::new(), rev).await?;
        while let Some(resp) = rx.recv().await {
            let resp = resp.map_err(|s| EtcdError::Internal(s.message().to_string()))?;
            if resp.compact_revision > 0 {
                return Err(EtcdError::Compacted);
            }
            if resp.canceled {
                return Err(refused(&resp.cancel_reason));
            }
            if resp
                .events
                .iter()
                .any(|e| e.r#type == EventType::Delete as i32)
            {
                return Ok(());
            }
        }
        Err(EtcdError::Internal(
            "lost watcher waiting for delete".into(),
        ))
    }

    /// Waits until every key under `prefix` created at or before `max_create_rev` is gone
    /// (etcd's `waitDeletes`); answers the header of the read that found none.
    pub async fn wait_deletes(
        &self,
        prefix: &[u8],
        max_create_rev: i64,
    ) -> Result<ResponseHeader, EtcdError> {
        loop {
            let resp = self.by_create(prefix, Some(max_create_rev)).await?;
            let header = resp.header.unwrap_or_default();
            let Some(kv) = resp.kvs.into_iter().next() else {
                return Ok(header);
            };
            self.wait_delete(&kv.key, header.revision).await?;
        }
    }
}

/// An error as the lock and election services send it: etcd runs them through its own client,
/// which hands every error back as a plain one, so clients see code Unknown with etcd's text
/// (`etcdserver: requested lease not found` included).
pub fn unknown(e: EtcdError) -> tonic::Status {
    tonic::Status::unknown(e.to_string())
}

/// A watch the front refused (permission denied…): its reason as the error.
fn refused(reason: &str) -> EtcdError {
    match reason {
        r if r == EtcdError::PermissionDenied.to_string() => EtcdError::PermissionDenied,
        r => EtcdError::Internal(r.to_string()),
    }
}

/// Runs `cleanup` unless disarmed: a waiter whose caller went away (the RPC dropped) takes its
/// key back, as etcd's mutex and election do when their context ends.
pub struct CleanupGuard {
    cleanup: Option<Box<dyn FnOnce() + Send>>,
}

impl CleanupGuard {
    pub fn new(cleanup: impl FnOnce() + Send + 'static) -> Self {
        Self {
            cleanup: Some(Box::new(cleanup)),
        }
    }

    pub fn disarm(mut self) {
        self.cleanup = None;
    }
}

impl Drop for CleanupGuard {
    fn drop(&mut self) {
        if let Some(f) = self.cleanup.take() {
            f();
        }
    }
}

#[cfg(test)]
#[path = "concurrency_tests.rs"]
mod tests;
