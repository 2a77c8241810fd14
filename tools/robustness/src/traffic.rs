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
use actcd_proto::etcdserverpb::watch_client::WatchClient;
use actcd_proto::etcdserverpb::{
    self as pb, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest,
    WatchCreateRequest, WatchRequest, compare, request_op, response_op, watch_request,
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
    pub records: Vec<Record>,
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
                0..30 => {
                    let v = self.value();
                    self.put(k.clone(), v).await
                }
                30..55 => {
                    let m = self.read_member();
                    self.get(k.clone(), m, false).await;
                    false
                }
                55..63 => self.delete(k.clone()).await,
                63..85 => self.txn(k.clone()).await,
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

    fn push(&mut self, kind: Kind, member: usize, op: Operation, error: Option<String>) {
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
#[derive(Clone, Debug)]
pub struct Event {
    pub put: bool,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub mod_revision: i64,
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
    pub events: Vec<Event>,
}

#[derive(Debug)]
pub struct Watcher {
    pub id: usize,
    pub records: Vec<WatchRecord>,
}

/// Watches the key prefix from revision 1, moving to the next member on
/// error and resuming after the last event seen, until `done`.
pub async fn watch(
    id: usize,
    urls: Vec<String>,
    clock: Clock,
    last: Arc<AtomicI64>,
    done: Arc<AtomicBool>,
) -> Watcher {
    let mut records = Vec::new();
    let mut member = id % urls.len();
    while !done.load(Ordering::Relaxed) {
        let start = last.load(Ordering::Relaxed) + 1;
        let mut rec = WatchRecord {
            t: clock.now(),
            member,
            reconnect_from: Some(start),
            error: None,
            header_revision: 0,
            created: false,
            canceled: false,
            compact_revision: 0,
            events: Vec::new(),
        };
        let create = WatchRequest {
            request_union: Some(watch_request::RequestUnion::CreateRequest(
                WatchCreateRequest {
                    key: PREFIX.to_vec(),
                    range_end: PREFIX_END.to_vec(),
                    start_revision: start,
                    ..Default::default()
                },
            )),
        };
        // Keep the request stream open: a half-closed stream ends the watch.
        let reqs = futures::stream::iter([create]).chain(futures::stream::pending());
        let mut client = WatchClient::new(channel(&urls[member]));
        let opened = tokio::time::timeout(LOCAL_TIMEOUT, client.watch(reqs)).await;
        let mut stream = match opened {
            Ok(Ok(s)) => s.into_inner(),
            Ok(Err(e)) => {
                rec.error = Some(format!("{:?}: {}", e.code(), e.message()));
                records.push(rec);
                member = (member + 1) % urls.len();
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Err(_) => {
                rec.error = Some("local timeout opening the watch".into());
                records.push(rec);
                member = (member + 1) % urls.len();
                continue;
            }
        };
        records.push(rec);
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
                    let mut events = Vec::with_capacity(r.events.len());
                    for e in &r.events {
                        let kv = e.kv.clone().unwrap_or_default();
                        events.push(Event {
                            put: e.r#type == 0,
                            key: kv.key,
                            value: kv.value,
                            mod_revision: kv.mod_revision,
                        });
                    }
                    if let Some(e) = events.last() {
                        last.fetch_max(e.mod_revision, Ordering::Relaxed);
                    }
                    let canceled = r.canceled;
                    records.push(WatchRecord {
                        t: clock.now(),
                        member,
                        reconnect_from: None,
                        error: (!r.cancel_reason.is_empty()).then(|| r.cancel_reason.clone()),
                        header_revision: rev(&r.header).unwrap_or(0),
                        created: r.created,
                        canceled,
                        compact_revision: r.compact_revision,
                        events,
                    });
                    if canceled {
                        break;
                    }
                }
                Ok(None) | Err(_) => {
                    let error = match msg {
                        Err(e) => format!("{:?}: {}", e.code(), e.message()),
                        _ => "stream ended".into(),
                    };
                    records.push(WatchRecord {
                        t: clock.now(),
                        member,
                        reconnect_from: None,
                        error: Some(error),
                        header_revision: 0,
                        created: false,
                        canceled: false,
                        compact_revision: 0,
                        events: Vec::new(),
                    });
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
