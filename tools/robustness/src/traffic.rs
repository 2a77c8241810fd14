//! The traffic: KV clients that record every request, and watchers that
//! record every watch response.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use actcd_linearizability::{
    Compare, CompareOp, CompareTarget, Input, OpResult, Operation, Output, Txn, TxnOp,
};
use actcd_proto::etcdserverpb::kv_client::KvClient;
use actcd_proto::etcdserverpb::lease_client::LeaseClient;
use actcd_proto::etcdserverpb::watch_client::WatchClient;
use actcd_proto::etcdserverpb::{
    self as pb, DeleteRangeRequest, LeaseGrantRequest, LeaseKeepAliveRequest, LeaseRevokeRequest,
    LeaseTimeToLiveRequest, PutRequest, RangeRequest, RequestOp, TxnRequest, WatchCreateRequest,
    WatchProgressRequest, WatchRequest, compare, request_op, response_op, watch_request,
};
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tonic::transport::Channel;

use crate::cluster::channel;

/// Per-request deadline (sent as `grpc-timeout`, and enforced here too with
/// a little slack for a stopped server that never answers).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
const LOCAL_TIMEOUT: Duration = Duration::from_millis(2500);

pub const PREFIX: &[u8] = b"key/";
pub const PREFIX_END: &[u8] = b"key0";

pub fn key(i: usize) -> Vec<u8> {
    format!("key/{i:02}").into_bytes()
}

/// Keys attached to leases: client c's only ever to c's leases, so each
/// client's leases and lease keys form one partition of the check.
pub const LEASE_KEYS: usize = 4;

pub fn lease_key(client: u64, n: usize) -> Vec<u8> {
    format!("key/lease/{client:02}/{n}").into_bytes()
}

/// Short lease TTLs (s) are drawn from this range; long ones outlive a run.
const SHORT_TTL: std::ops::RangeInclusive<i64> = 2..=5;
const LONG_TTL: i64 = 3600;
/// Leases a client holds at most at once.
const MAX_LEASES: usize = 3;

/// Monotonic nanoseconds since the run's base instant.
#[derive(Clone, Copy, Debug)]
pub struct Clock(pub Instant);

impl Clock {
    pub fn now(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// How a recorded request is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Linearizable KV request: fed to the checker.
    Kv,
    /// Serializable read: recorded, not checked.
    Serializable,
    /// A final linearizable read after healing (fed to the checker).
    Final,
    /// A lease's possible expiry (added after the run; checked).
    Expiry,
    /// Failed before it was sent (no connection to the member): recorded,
    /// not checked.
    Unsent,
}

/// Whether a failure means the request never left the client: the channel
/// could not connect (member down), so nothing was sent. Any other failure
/// (a timeout, a broken connection) may have been applied.
pub fn never_sent(e: &str) -> bool {
    e.contains("tcp connect error")
}

#[derive(Clone, Debug)]
pub struct Record {
    pub kind: Kind,
    pub member: usize,
    pub op: Operation,
    pub error: Option<String>,
}

/// What the traffic of one run is shaped like.
#[derive(Clone, Debug)]
pub struct Shape {
    pub keys: usize,
    pub members: usize,
    /// Stale-read control: writes to m1, reads from the others right after.
    pub broken: bool,
    /// How many clients (for reading each other's lease keys).
    pub clients: u64,
}

fn req<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(REQUEST_TIMEOUT);
    r
}

async fn timed<T, F>(clock: Clock, fut: F) -> (u64, u64, Result<T, String>)
where
    F: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let call = clock.now();
    let r = tokio::time::timeout(LOCAL_TIMEOUT, fut).await;
    let ret = clock.now();
    let r = match r {
        Ok(Ok(resp)) => Ok(resp.into_inner()),
        Ok(Err(s)) => Err(format!("{:?}: {}", s.code(), s.message())),
        Err(_) => Err("local timeout".to_owned()),
    };
    (call, ret, r)
}

fn rev(h: &Option<pb::ResponseHeader>) -> Option<i64> {
    h.as_ref().map(|h| h.revision)
}

/// The (value, mod revision) of a single-key range answer.
fn first_kv(r: &pb::RangeResponse) -> (Option<Vec<u8>>, Option<i64>) {
    match r.kvs.first() {
        Some(kv) => (Some(kv.value.clone()), Some(kv.mod_revision)),
        None => (None, None),
    }
}

fn to_request_op(op: &TxnOp) -> RequestOp {
    let request = match op {
        TxnOp::Put { key, value } => request_op::Request::RequestPut(PutRequest {
            key: key.clone(),
            value: value.clone(),
            ..Default::default()
        }),
        TxnOp::Get { key } => request_op::Request::RequestRange(RangeRequest {
            key: key.clone(),
            ..Default::default()
        }),
        TxnOp::Delete { key } => request_op::Request::RequestDeleteRange(DeleteRangeRequest {
            key: key.clone(),
            ..Default::default()
        }),
    };
    RequestOp {
        request: Some(request),
    }
}

fn to_compare(c: &Compare) -> pb::Compare {
    let result = match c.op {
        CompareOp::Equal => compare::CompareResult::Equal,
        CompareOp::NotEqual => compare::CompareResult::NotEqual,
        CompareOp::Less => compare::CompareResult::Less,
        CompareOp::Greater => compare::CompareResult::Greater,
    };
    let (target, union) = match &c.target {
        CompareTarget::Value(v) => (
            compare::CompareTarget::Value,
            compare::TargetUnion::Value(v.clone()),
        ),
        CompareTarget::ModRevision(r) => (
            compare::CompareTarget::Mod,
            compare::TargetUnion::ModRevision(*r),
        ),
    };
    pb::Compare {
        result: result as i32,
        target: target as i32,
        key: c.key.clone(),
        range_end: Vec::new(),
        target_union: Some(union),
    }
}

/// One KV client: a seeded loop over random requests.
pub struct Client {
    pub id: u64,
    rng: StdRng,
    shape: Shape,
    clock: Clock,
    home: usize,
    kvs: Vec<KvClient<Channel>>,
    counter: u64,
    /// Last (value, mod revision) this client saw per key.
    seen: HashMap<Vec<u8>, (Option<Vec<u8>>, i64)>,
    leases_rpc: Vec<LeaseClient<Channel>>,
    /// Leases granted (or maybe granted) and not yet revoked or found gone.
    held: Vec<i64>,
    /// Leases revoked or found gone (used now and then: must be refused).
    gone: Vec<i64>,
    lease_counter: i64,
    pub records: Vec<Record>,
}

/// Whether a failure is etcd's `requested lease not found` (a definite
/// answer, not a maybe-applied failure).
fn lease_not_found(e: &str) -> bool {
    e.contains("requested lease not found")
}

impl Client {
    pub fn new(id: u64, seed: u64, shape: Shape, clock: Clock, urls: &[String]) -> Client {
        let home = if shape.broken {
            0
        } else {
            id as usize % urls.len()
        };
        Client {
            id,
            rng: StdRng::seed_from_u64(seed ^ (id + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            shape,
            clock,
            home,
            kvs: urls.iter().map(|u| KvClient::new(channel(u))).collect(),
            counter: 0,
            seen: HashMap::new(),
            leases_rpc: urls.iter().map(|u| LeaseClient::new(channel(u))).collect(),
            held: Vec::new(),
            gone: Vec::new(),
            lease_counter: 0,
            records: Vec::new(),
        }
    }

    fn value(&mut self) -> Vec<u8> {
        self.counter += 1;
        format!("c{}-{}", self.id, self.counter).into_bytes()
    }

    /// A member to read from: any (normally), another than m1 (broken).
    fn read_member(&mut self) -> usize {
        let n = self.shape.members;
        if self.shape.broken && n > 1 {
            self.rng.random_range(1..n)
        } else {
            self.rng.random_range(0..n)
        }
    }

    /// A member other than the home one, if there is one.
    fn other_member(&mut self) -> usize {
        let n = self.shape.members;
        if n == 1 {
            return 0;
        }
        if self.shape.broken {
            return self.rng.random_range(1..n);
        }
        (self.home + self.rng.random_range(1..n)) % n
    }

    pub async fn run(mut self, stop: Arc<AtomicBool>) -> Client {
        while !stop.load(Ordering::Relaxed) {
            let k = key(self.rng.random_range(0..self.shape.keys));
            let dice = self.rng.random_range(0..100u32);
            // Drawn every time so the op sequence does not depend on answers.
            let cross: u32 = self.rng.random_range(0..100);
            let cross_member = self.other_member();
            let ok = match dice {
                0..28 => {
                    let v = self.value();
                    self.put(k.clone(), v).await
                }
                28..50 => {
                    let m = self.read_member();
                    self.get(k.clone(), m, false).await;
                    false
                }
                // Someone's lease key, read through any member.
                50..53 => {
                    let m = self.read_member();
                    let c = self.rng.random_range(0..self.shape.clients.max(1));
                    let n = self.rng.random_range(0..LEASE_KEYS);
                    self.get(lease_key(c, n), m, false).await;
                    false
                }
                53..60 => self.delete(k.clone()).await,
                60..80 => self.txn(k.clone()).await,
                80..88 if !self.shape.broken => {
                    self.lease_op().await;
                    false
                }
                _ => {
                    let m = self.read_member();
                    self.get(k.clone(), m, true).await;
                    false
                }
            };
            // Read the key just written through another member.
            if ok && (self.shape.broken || cross < 30) {
                self.get(k, cross_member, false).await;
            }
        }
        self
    }

    /// One lease request: grant (short or long TTL), put attached to a
    /// lease (now and then one revoked or gone: must be refused), revoke,
    /// single keepalive, TimeToLive with keys, a plain put or a delete of a
    /// lease key (detaches it), a linearizable read of one.
    async fn lease_op(&mut self) {
        let dice = self.rng.random_range(0..100u32);
        let pick_gone: u32 = self.rng.random_range(0..100);
        let n = self.rng.random_range(0..LEASE_KEYS);
        let k = lease_key(self.id, n);
        let short = self.rng.random_bool(0.7);
        let ttl = if short {
            self.rng.random_range(SHORT_TTL)
        } else {
            LONG_TTL
        };
        let idx = self.rng.random_range(0..MAX_LEASES);
        let lease = if pick_gone < 10 && !self.gone.is_empty() {
            Some(self.gone[idx % self.gone.len()])
        } else if self.held.is_empty() {
            None
        } else {
            Some(self.held[idx % self.held.len()])
        };
        match (dice, lease) {
            (0..12, _) | (_, None) => {
                if self.held.len() >= MAX_LEASES {
                    let l = self.held[idx % self.held.len()];
                    self.revoke(l).await;
                } else {
                    self.grant(ttl).await;
                }
            }
            (12..45, Some(l)) => {
                let v = self.value();
                self.put_lease(k, v, l).await;
            }
            (45..55, Some(l)) => self.revoke(l).await,
            (55..72, Some(l)) => self.keepalive(l).await,
            (72..82, Some(l)) => self.time_to_live(l).await,
            (82..92, _) => {
                let m = self.read_member();
                self.get(k, m, false).await;
            }
            (92..96, _) => {
                let v = self.value();
                self.put(k, v).await;
            }
            _ => {
                self.delete(k).await;
            }
        }
    }

    fn forget(&mut self, l: i64) {
        self.held.retain(|&x| x != l);
        if !self.gone.contains(&l) {
            self.gone.push(l);
            if self.gone.len() > 8 {
                self.gone.remove(0);
            }
        }
    }

    async fn grant(&mut self, ttl: i64) {
        self.lease_counter += 1;
        // Client-chosen ids: a maybe-applied grant is known by its id.
        let l = ((self.id as i64 + 1) << 32) | self.lease_counter;
        let m = self.home;
        let mut rpc = self.leases_rpc[m].clone();
        let msg = LeaseGrantRequest { ttl, id: l };
        let (call, ret, r) = timed(self.clock, rpc.lease_grant(req(msg))).await;
        let r = r.and_then(|g| {
            if g.error.is_empty() {
                Ok(g)
            } else {
                Err(g.error)
            }
        });
        let (ret, output, error) = match r {
            Ok(g) => (
                Some(ret),
                Output::Lease {
                    revision: rev(&g.header),
                },
                None,
            ),
            Err(e) => (None, Output::Unknown, Some(e)),
        };
        // Held even if the grant failed: it may have been applied.
        self.held.push(l);
        let failed = error.is_some();
        let op = self.op(call, ret, Input::LeaseGrant { lease: l, ttl }, output);
        self.push(Kind::Kv, m, op, error);
        self.backoff_if(failed).await;
    }

    async fn revoke(&mut self, l: i64) {
        let m = self.home;
        let mut rpc = self.leases_rpc[m].clone();
        let (call, ret, r) = timed(
            self.clock,
            rpc.lease_revoke(req(LeaseRevokeRequest { id: l })),
        )
        .await;
        let (ret, output, error) = match r {
            Ok(g) => (
                Some(ret),
                Output::Lease {
                    revision: rev(&g.header),
                },
                None,
            ),
            Err(e) if lease_not_found(&e) => (Some(ret), Output::LeaseNotFound, Some(e)),
            Err(e) => (None, Output::Unknown, Some(e)),
        };
        self.forget(l);
        let failed = ret.is_none();
        let op = self.op(call, ret, Input::LeaseRevoke { lease: l }, output);
        self.push(Kind::Kv, m, op, error);
        self.backoff_if(failed).await;
    }

    async fn put_lease(&mut self, key: Vec<u8>, value: Vec<u8>, l: i64) {
        let m = self.home;
        let mut kv = self.kvs[m].clone();
        let msg = PutRequest {
            key: key.clone(),
            value: value.clone(),
            lease: l,
            ..Default::default()
        };
        let (call, ret, r) = timed(self.clock, kv.put(req(msg))).await;
        let (ret, output, error) = match r {
            Ok(resp) => (
                Some(ret),
                Output::Put {
                    revision: rev(&resp.header),
                },
                None,
            ),
            Err(e) if lease_not_found(&e) => {
                self.forget(l);
                (Some(ret), Output::LeaseNotFound, Some(e))
            }
            Err(e) => (None, Output::Unknown, Some(e)),
        };
        let failed = ret.is_none();
        let input = Input::PutLease {
            key,
            value,
            lease: l,
        };
        let op = self.op(call, ret, input, output);
        self.push(Kind::Kv, m, op, error);
        self.backoff_if(failed).await;
    }

    /// One keepalive on a fresh KeepAlive stream through a random member.
    async fn keepalive(&mut self, l: i64) {
        let m = self.read_member();
        let mut rpc = self.leases_rpc[m].clone();
        let reqs = futures::stream::iter([LeaseKeepAliveRequest { id: l }])
            .chain(futures::stream::pending());
        let call = self.clock.now();
        let r = tokio::time::timeout(LOCAL_TIMEOUT, async {
            let mut s = rpc
                .lease_keep_alive(req(reqs))
                .await
                .map_err(|e| format!("{:?}: {}", e.code(), e.message()))?
                .into_inner();
            match s.message().await {
                Ok(Some(r)) => Ok(r),
                Ok(None) => Err("stream ended".to_owned()),
                Err(e) => Err(format!("{:?}: {}", e.code(), e.message())),
            }
        })
        .await
        .unwrap_or_else(|_| Err("local timeout".into()));
        let ret = self.clock.now();
        let (ret, output, error) = match r {
            Ok(r) => {
                if r.ttl <= 0 {
                    self.forget(l);
                }
                (
                    Some(ret),
                    Output::LeaseTtl {
                        ttl: r.ttl,
                        keys: None,
                    },
                    None,
                )
            }
            Err(e) if lease_not_found(&e) => {
                self.forget(l);
                (Some(ret), Output::LeaseNotFound, Some(e))
            }
            Err(e) => (None, Output::Unknown, Some(e)),
        };
        let failed = ret.is_none();
        let op = self.op(call, ret, Input::LeaseKeepAlive { lease: l }, output);
        self.push(Kind::Kv, m, op, error);
        self.backoff_if(failed).await;
    }

    async fn time_to_live(&mut self, l: i64) {
        let m = self.read_member();
        let mut rpc = self.leases_rpc[m].clone();
        let msg = LeaseTimeToLiveRequest { id: l, keys: true };
        let (call, ret, r) = timed(self.clock, rpc.lease_time_to_live(req(msg))).await;
        let (ret, output, error) = match r {
            Ok(r) => (
                Some(ret),
                Output::LeaseTtl {
                    ttl: r.ttl,
                    keys: Some(r.keys),
                },
                None,
            ),
            Err(e) if lease_not_found(&e) => (Some(ret), Output::LeaseNotFound, Some(e)),
            Err(e) => (None, Output::Unknown, Some(e)),
        };
        let failed = ret.is_none();
        let op = self.op(call, ret, Input::LeaseTimeToLive { lease: l }, output);
        self.push(Kind::Kv, m, op, error);
        self.backoff_if(failed).await;
    }

    fn push(&mut self, kind: Kind, member: usize, op: Operation, error: Option<String>) {
        let kind = if op.ret.is_none() && error.as_deref().is_some_and(never_sent) {
            Kind::Unsent
        } else {
            kind
        };
        self.records.push(Record {
            kind,
            member,
            op,
            error,
        });
    }

    /// After a failure, do not spin against a member that is down.
    async fn backoff_if(&self, failed: bool) {
        if failed {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let m = self.home;
        let mut kv = self.kvs[m].clone();
        let msg = PutRequest {
            key: key.clone(),
            value: value.clone(),
            ..Default::default()
        };
        let (call, ret, r) = timed(self.clock, kv.put(req(msg))).await;
        let input = Input::Put {
            key: key.clone(),
            value: value.clone(),
        };
        let (ret, output, error) = match r {
            Ok(resp) => {
                let revision = rev(&resp.header);
                self.seen
                    .insert(key, (Some(value), revision.unwrap_or_default()));
                (Some(ret), Output::Put { revision }, None)
            }
            Err(e) => (None, Output::Unknown, Some(e)),
        };
        let failed = error.is_some();
        self.push(Kind::Kv, m, self.op(call, ret, input, output), error);
        self.backoff_if(failed).await;
        !failed
    }

    fn op(&self, call: u64, ret: Option<u64>, input: Input, output: Output) -> Operation {
        Operation {
            client: self.id,
            call,
            ret,
            input,
            output,
        }
    }

    async fn get(&mut self, key: Vec<u8>, m: usize, serializable: bool) {
        let mut kv = self.kvs[m].clone();
        let msg = RangeRequest {
            key: key.clone(),
            serializable,
            ..Default::default()
        };
        let (call, ret, r) = timed(self.clock, kv.range(req(msg))).await;
        let input = Input::Get { key: key.clone() };
        let (ret, output, error) = match r {
            Ok(resp) => {
                let (value, mod_revision) = first_kv(&resp);
                if !serializable {
                    self.seen
                        .insert(key, (value.clone(), mod_revision.unwrap_or(0)));
                }
                (
                    Some(ret),
                    Output::Get {
                        value,
                        mod_revision,
                        revision: rev(&resp.header),
                    },
                    None,
                )
            }
            Err(e) => (None, Output::Unknown, Some(e)),
        };
        let failed = error.is_some();
        let kind = if serializable {
            Kind::Serializable
        } else {
            Kind::Kv
        };
        self.push(kind, m, self.op(call, ret, input, output), error);
        self.backoff_if(failed).await;
    }

    async fn delete(&mut self, key: Vec<u8>) -> bool {
        let m = self.home;
        let mut kv = self.kvs[m].clone();
        let msg = DeleteRangeRequest {
            key: key.clone(),
            ..Default::default()
        };
        let (call, ret, r) = timed(self.clock, kv.delete_range(req(msg))).await;
        let input = Input::Delete { key: key.clone() };
        let (ret, output, error) = match r {
            Ok(resp) => {
                self.seen.insert(key, (None, 0));
                (
                    Some(ret),
                    Output::Delete {
                        deleted: Some(resp.deleted as u64),
                        revision: rev(&resp.header),
                    },
                    None,
                )
            }
            Err(e) => (None, Output::Unknown, Some(e)),
        };
        let failed = error.is_some();
        self.push(Kind::Kv, m, self.op(call, ret, input, output), error);
        self.backoff_if(failed).await;
        !failed
    }

    /// A txn on one key: a value or mod-revision compare against what this
    /// client last saw, puts/gets/deletes in the branches (at most one write
    /// per branch: etcd refuses a txn writing a key twice).
    fn random_txn(&mut self, key: &[u8]) -> Txn {
        let seen = self.seen.get(key).cloned();
        let by_value: bool = self.rng.random();
        let which = self.rng.random_range(0..4u32);
        let compare = if by_value {
            let v = seen
                .as_ref()
                .and_then(|(v, _)| v.clone())
                .unwrap_or_else(|| b"none".to_vec());
            Compare {
                key: key.to_vec(),
                op: if which == 0 {
                    CompareOp::NotEqual
                } else {
                    CompareOp::Equal
                },
                target: CompareTarget::Value(v),
            }
        } else {
            let r = seen.as_ref().map_or(0, |(_, r)| *r);
            Compare {
                key: key.to_vec(),
                op: match which {
                    0 => CompareOp::Less,
                    1 => CompareOp::Greater,
                    _ => CompareOp::Equal,
                },
                target: CompareTarget::ModRevision(if which == 0 { r + 1 } else { r }),
            }
        };
        let branch = |rng: &mut StdRng, this: &mut Self| -> Vec<TxnOp> {
            let k = key.to_vec();
            match rng.random_range(0..5u32) {
                0 => vec![TxnOp::Get { key: k }],
                1 => vec![TxnOp::Put {
                    key: k,
                    value: this.value(),
                }],
                2 => vec![
                    TxnOp::Get { key: k.clone() },
                    TxnOp::Put {
                        key: k,
                        value: this.value(),
                    },
                ],
                3 => vec![
                    TxnOp::Put {
                        key: k.clone(),
                        value: this.value(),
                    },
                    TxnOp::Get { key: k },
                ],
                _ => vec![TxnOp::Delete { key: k.clone() }, TxnOp::Get { key: k }],
            }
        };
        let mut rng = std::mem::replace(&mut self.rng, StdRng::seed_from_u64(0));
        let then = branch(&mut rng, self);
        let otherwise = branch(&mut rng, self);
        self.rng = rng;
        Txn {
            compare,
            then,
            otherwise,
        }
    }

    async fn txn(&mut self, key: Vec<u8>) -> bool {
        let t = self.random_txn(&key);
        let m = self.home;
        let mut kv = self.kvs[m].clone();
        let msg = TxnRequest {
            compare: vec![to_compare(&t.compare)],
            success: t.then.iter().map(to_request_op).collect(),
            failure: t.otherwise.iter().map(to_request_op).collect(),
        };
        let (call, ret, r) = timed(self.clock, kv.txn(req(msg))).await;
        let (ret, output, error, wrote) = match r {
            Ok(resp) => {
                let branch = if resp.succeeded {
                    &t.then
                } else {
                    &t.otherwise
                };
                let revision = rev(&resp.header);
                let mut results = Vec::new();
                for (op, r) in branch.iter().zip(&resp.responses) {
                    let res = match &r.response {
                        Some(response_op::Response::ResponseRange(g)) => {
                            let (value, mod_revision) = first_kv(g);
                            self.seen.insert(
                                op.key().to_vec(),
                                (value.clone(), mod_revision.unwrap_or(0)),
                            );
                            OpResult::Get {
                                value,
                                mod_revision,
                            }
                        }
                        Some(response_op::Response::ResponsePut(_)) => {
                            if let TxnOp::Put { key, value } = op {
                                self.seen.insert(
                                    key.clone(),
                                    (Some(value.clone()), revision.unwrap_or(0)),
                                );
                            }
                            OpResult::Put
                        }
                        Some(response_op::Response::ResponseDeleteRange(d)) => {
                            self.seen.insert(op.key().to_vec(), (None, 0));
                            OpResult::Delete {
                                deleted: Some(d.deleted as u64),
                            }
                        }
                        _ => OpResult::Put,
                    };
                    results.push(res);
                }
                let wrote = branch
                    .iter()
                    .any(|o| matches!(o, TxnOp::Put { .. } | TxnOp::Delete { .. }));
                (
                    Some(ret),
                    Output::Txn {
                        succeeded: resp.succeeded,
                        results,
                        revision,
                    },
                    None,
                    wrote,
                )
            }
            Err(e) => (None, Output::Unknown, Some(e), false),
        };
        let failed = error.is_some();
        self.push(
            Kind::Kv,
            m,
            self.op(call, ret, Input::Txn(t), output),
            error,
        );
        self.backoff_if(failed).await;
        wrote
    }
}

/// One watch event as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub put: bool,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub mod_revision: i64,
    /// `prev_kv` (value, mod revision), when sent.
    pub prev: Option<(Vec<u8>, i64)>,
}

/// One watch response (or a reconnect marker: `member` and `start` only).
#[derive(Clone, Debug)]
pub struct WatchRecord {
    pub t: u64,
    pub member: usize,
    pub reconnect_from: Option<i64>,
    pub error: Option<String>,
    pub header_revision: i64,
    pub created: bool,
    pub canceled: bool,
    pub compact_revision: i64,
    pub fragment: bool,
    /// -1 on etcd's answer to a progress request (for the whole stream).
    pub watch_id: i64,
    pub events: Vec<Event>,
}

impl WatchRecord {
    fn marker(t: u64, member: usize, from: Option<i64>, error: Option<String>) -> Self {
        WatchRecord {
            t,
            member,
            reconnect_from: from,
            error,
            header_revision: 0,
            created: false,
            canceled: false,
            compact_revision: 0,
            fragment: false,
            watch_id: 0,
            events: Vec::new(),
        }
    }

    fn response(t: u64, member: usize, r: &pb::WatchResponse) -> Self {
        let events = r
            .events
            .iter()
            .map(|e| {
                let kv = e.kv.clone().unwrap_or_default();
                Event {
                    put: e.r#type == 0,
                    key: kv.key,
                    value: kv.value,
                    mod_revision: kv.mod_revision,
                    prev: e
                        .prev_kv
                        .as_ref()
                        .map(|p| (p.value.clone(), p.mod_revision)),
                }
            })
            .collect();
        WatchRecord {
            t,
            member,
            reconnect_from: None,
            error: (!r.cancel_reason.is_empty()).then(|| r.cancel_reason.clone()),
            header_revision: rev(&r.header).unwrap_or(0),
            created: r.created,
            canceled: r.canceled,
            compact_revision: r.compact_revision,
            fragment: r.fragment,
            watch_id: r.watch_id,
            events,
        }
    }

    /// A progress notification: no events, not a create or cancel answer.
    pub fn is_progress(&self) -> bool {
        self.reconnect_from.is_none()
            && self.error.is_none()
            && !self.created
            && !self.canceled
            && self.events.is_empty()
            && self.header_revision > 0
    }
}

#[derive(Debug)]
pub struct Watcher {
    pub id: usize,
    pub records: Vec<WatchRecord>,
}

fn create(spec: &WatchSpec, start: i64) -> WatchRequest {
    let mut filters = Vec::new();
    if spec.no_put {
        filters.push(pb::watch_create_request::FilterType::Noput as i32);
    }
    if spec.no_delete {
        filters.push(pb::watch_create_request::FilterType::Nodelete as i32);
    }
    WatchRequest {
        request_union: Some(watch_request::RequestUnion::CreateRequest(
            WatchCreateRequest {
                key: spec.key.clone(),
                range_end: spec.range_end.clone(),
                start_revision: start,
                progress_notify: spec.progress_notify,
                filters,
                prev_kv: spec.prev_kv,
                ..Default::default()
            },
        )),
    }
}

/// Watches the key prefix from revision 1 (with `prev_kv`), moving to the
/// next member on error and resuming after the last event seen, until
/// `done`.
pub async fn watch(
    id: usize,
    urls: Vec<String>,
    clock: Clock,
    last: Arc<AtomicI64>,
    done: Arc<AtomicBool>,
) -> Watcher {
    let spec = WatchSpec {
        key: PREFIX.to_vec(),
        range_end: PREFIX_END.to_vec(),
        start: 1,
        prev_kv: true,
        no_put: false,
        no_delete: false,
        progress_notify: false,
    };
    let mut records = Vec::new();
    let mut member = id % urls.len();
    while !done.load(Ordering::Relaxed) {
        let start = last.load(Ordering::Relaxed) + 1;
        let reqs = futures::stream::iter([create(&spec, start)]).chain(futures::stream::pending());
        let mut client = WatchClient::new(channel(&urls[member]));
        let opened = tokio::time::timeout(LOCAL_TIMEOUT, client.watch(reqs)).await;
        let mut stream = match opened {
            Ok(Ok(s)) => s.into_inner(),
            Ok(Err(e)) => {
                let e = format!("{:?}: {}", e.code(), e.message());
                records.push(WatchRecord::marker(
                    clock.now(),
                    member,
                    Some(start),
                    Some(e),
                ));
                member = (member + 1) % urls.len();
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Err(_) => {
                let e = "local timeout opening the watch".to_owned();
                records.push(WatchRecord::marker(
                    clock.now(),
                    member,
                    Some(start),
                    Some(e),
                ));
                member = (member + 1) % urls.len();
                continue;
            }
        };
        records.push(WatchRecord::marker(clock.now(), member, Some(start), None));
        loop {
            if done.load(Ordering::Relaxed) {
                break;
            }
            let msg = match tokio::time::timeout(Duration::from_millis(200), stream.message()).await
            {
                Err(_) => continue,
                Ok(m) => m,
            };
            match msg {
                Ok(Some(r)) => {
                    let rec = WatchRecord::response(clock.now(), member, &r);
                    if let Some(e) = rec.events.last() {
                        last.fetch_max(e.mod_revision, Ordering::Relaxed);
                    }
                    let canceled = rec.canceled;
                    records.push(rec);
                    if canceled {
                        break;
                    }
                }
                Ok(None) | Err(_) => {
                    let error = match msg {
                        Err(e) => format!("{:?}: {}", e.code(), e.message()),
                        _ => "stream ended".into(),
                    };
                    records.push(WatchRecord::marker(clock.now(), member, None, Some(error)));
                    break;
                }
            }
        }
        member = (member + 1) % urls.len();
        if !done.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Watcher { id, records }
}

/// What a watch asks for.
#[derive(Clone, Debug)]
pub struct WatchSpec {
    pub key: Vec<u8>,
    /// Empty: the single key.
    pub range_end: Vec<u8>,
    pub start: i64,
    pub prev_kv: bool,
    pub no_put: bool,
    pub no_delete: bool,
    pub progress_notify: bool,
}

impl WatchSpec {
    pub fn matches(&self, key: &[u8], put: bool) -> bool {
        let in_range = if self.range_end.is_empty() {
            key == self.key.as_slice()
        } else {
            key >= self.key.as_slice() && key < self.range_end.as_slice()
        };
        let filtered = if put { self.no_put } else { self.no_delete };
        in_range && !filtered
    }
}

/// One watch opened from a past revision: its responses in order, and when
/// on-demand progress was requested. A `resumed` session continues the
/// previous one after a deliberate break, from its last event + 1.
#[derive(Clone, Debug)]
pub struct Session {
    pub watcher: usize,
    pub n: usize,
    pub spec: WatchSpec,
    pub member: usize,
    pub resumed: bool,
    pub opened: u64,
    pub records: Vec<WatchRecord>,
    pub progress_requests: Vec<u64>,
}

/// How far back a past-revision watch may start.
const PAST_WINDOW: i64 = 5_000;

/// Opens watches from random past revisions (within [`PAST_WINDOW`] of the
/// newest revision the full watchers have seen; nothing is compacted), on a
/// prefix or one key, some with `prev_kv`, a NOPUT or NODELETE filter,
/// `progress_notify`, on-demand progress requests; each runs 1–3 s, and
/// some are then broken off and resumed on another member.
pub async fn past_watches(
    id: usize,
    seed: u64,
    keys: usize,
    urls: Vec<String>,
    clock: Clock,
    latest: Arc<AtomicI64>,
    done: Arc<AtomicBool>,
) -> Vec<Session> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xA076_1D64_78BD_642F ^ id as u64);
    let mut out: Vec<Session> = Vec::new();
    let mut n = 0usize;
    while !done.load(Ordering::Relaxed) {
        let now = latest.load(Ordering::Relaxed).max(1);
        // Within the last PAST_WINDOW revisions: a start anywhere in a long run's history
        // would replay half of it per watch (gigabytes of history in a 30-minute run).
        let start = rng.random_range((now - PAST_WINDOW).max(1)..=now + 1);
        let (key, range_end) = match rng.random_range(0..100u32) {
            0..40 => (PREFIX.to_vec(), PREFIX_END.to_vec()),
            40..70 => (key(rng.random_range(0..keys)), Vec::new()),
            70..85 => (b"key/lease/".to_vec(), b"key/lease0".to_vec()),
            _ => (b"key/0".to_vec(), b"key/1".to_vec()),
        };
        let filter = rng.random_range(0..100u32);
        let mut spec = WatchSpec {
            key,
            range_end,
            start,
            prev_kv: rng.random_bool(0.5),
            no_put: filter < 15,
            no_delete: (15..30).contains(&filter),
            progress_notify: rng.random_bool(0.3),
        };
        let member = rng.random_range(0..urls.len());
        let millis = rng.random_range(1000..3000u64);
        let progress: Vec<u64> = (0..rng.random_range(0..3u32))
            .map(|_| rng.random_range(0..millis))
            .collect();
        let resume = rng.random_bool(0.3);
        let s = session(
            id, n, &spec, member, false, &urls, clock, millis, progress, &done,
        )
        .await;
        n += 1;
        let last = s
            .records
            .iter()
            .flat_map(|r| r.events.last())
            .map(|e| e.mod_revision)
            .max();
        let healthy = s.records.iter().any(|r| r.created);
        out.push(s);
        if resume && healthy && !done.load(Ordering::Relaxed) {
            spec.start = last.map_or(start, |l| l + 1);
            let member = (member + 1) % urls.len();
            let progress = vec![rng.random_range(0..1000)];
            let s = session(
                id, n, &spec, member, true, &urls, clock, 1000, progress, &done,
            )
            .await;
            n += 1;
            out.push(s);
        }
    }
    out
}

#[allow(clippy::too_many_arguments)] // one caller
async fn session(
    watcher: usize,
    n: usize,
    spec: &WatchSpec,
    member: usize,
    resumed: bool,
    urls: &[String],
    clock: Clock,
    millis: u64,
    mut progress: Vec<u64>,
    done: &AtomicBool,
) -> Session {
    progress.sort_unstable();
    let mut s = Session {
        watcher,
        n,
        spec: spec.clone(),
        member,
        resumed,
        opened: clock.now(),
        records: Vec::new(),
        progress_requests: Vec::new(),
    };
    let (tx, rx) = futures::channel::mpsc::unbounded::<WatchRequest>();
    let _ = tx.unbounded_send(create(spec, spec.start));
    let mut client = WatchClient::new(channel(&urls[member]));
    let begun = Instant::now();
    let opened = tokio::time::timeout(LOCAL_TIMEOUT, client.watch(rx)).await;
    let mut stream = match opened {
        Ok(Ok(st)) => st.into_inner(),
        Ok(Err(e)) => {
            let e = format!("{:?}: {}", e.code(), e.message());
            s.records.push(WatchRecord::marker(
                clock.now(),
                member,
                Some(spec.start),
                Some(e),
            ));
            tokio::time::sleep(Duration::from_millis(200)).await;
            return s;
        }
        Err(_) => {
            let e = "local timeout opening the watch".to_owned();
            s.records.push(WatchRecord::marker(
                clock.now(),
                member,
                Some(spec.start),
                Some(e),
            ));
            return s;
        }
    };
    let end = begun + Duration::from_millis(millis);
    let mut progress = progress.into_iter().peekable();
    while Instant::now() < end && !done.load(Ordering::Relaxed) {
        if let Some(&at) = progress.peek()
            && begun.elapsed() >= Duration::from_millis(at)
        {
            progress.next();
            s.progress_requests.push(clock.now());
            let _ = tx.unbounded_send(WatchRequest {
                request_union: Some(watch_request::RequestUnion::ProgressRequest(
                    WatchProgressRequest {},
                )),
            });
        }
        let msg = match tokio::time::timeout(Duration::from_millis(50), stream.message()).await {
            Err(_) => continue,
            Ok(m) => m,
        };
        match msg {
            Ok(Some(r)) => {
                let rec = WatchRecord::response(clock.now(), member, &r);
                let canceled = rec.canceled;
                s.records.push(rec);
                if canceled {
                    break;
                }
            }
            Ok(None) | Err(_) => {
                let error = match msg {
                    Err(e) => format!("{:?}: {}", e.code(), e.message()),
                    _ => "stream ended".into(),
                };
                s.records
                    .push(WatchRecord::marker(clock.now(), member, None, Some(error)));
                break;
            }
        }
    }
    s
}
