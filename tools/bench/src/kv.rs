//! KV workloads: `put`, `populate`, `txn-put`, `txn-mixed` and `mixed`
//! (`range` has its own module).
//!
//! Every worker owns a `KvClient` over its connection, a seeded RNG (worker
//! w uses seed w, so runs are repeatable) and the request it sends, built
//! once; a call only rewrites the key in place and clones the message into
//! tonic, which takes ownership of what it encodes.

use actcd_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use actcd_proto::etcdserverpb::kv_client::KvClient;
use actcd_proto::etcdserverpb::{
    Compare, PutRequest, RangeRequest, RequestOp, TxnRequest, request_op,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tonic::Status;
use tonic::transport::Channel;

use crate::BenchError;
use crate::load::{self, Conn, KeyFormat, KeyGen, Op, Plan, Pool, Samples, Worker};
use crate::report::{Report, Stats};

/// What every KV workload shares.
#[derive(Debug, Clone)]
pub struct KvOpts {
    pub clients: usize,
    pub keys: KeyGen,
    pub val_size: usize,
    pub serializable: bool,
}

fn client(conn: &Conn) -> KvClient<Channel> {
    KvClient::new(conn.channel.clone())
}

fn rng_for(worker: usize) -> SmallRng {
    SmallRng::seed_from_u64(worker as u64)
}

/// Builds a report from KV samples; mixed workloads get read and write
/// sections.
fn kv_report(op: &str, s: Samples) -> Report {
    let mixed = !s.reads.is_empty() && !s.writes.is_empty();
    let all = Stats::new(s.all(), s.elapsed);
    let mut r = Report::new(op, all, s.errors);
    if mixed {
        r.sections
            .push(("read".into(), Stats::new(s.reads, s.elapsed)));
        r.sections
            .push(("write".into(), Stats::new(s.writes, s.elapsed)));
    }
    r
}

struct PutWorker {
    kv: KvClient<Channel>,
    conn: Conn,
    keys: KeyGen,
    rng: SmallRng,
    req: PutRequest,
}

impl Worker for PutWorker {
    async fn call(&mut self, i: u64) -> Result<Op, Status> {
        let index = self.keys.index(i, &mut self.rng);
        self.keys.write(index, &mut self.req.key);
        self.kv.put(self.conn.request(self.req.clone())).await?;
        Ok(Op::Write)
    }
}

pub async fn put(pool: &Pool, opts: &KvOpts, plan: Plan) -> Result<Report, BenchError> {
    let value = load::value_bytes(opts.val_size, &mut rng_for(usize::MAX));
    let workers = (0..opts.clients)
        .map(|w| PutWorker {
            kv: client(pool.conn(w)),
            conn: pool.conn(w).clone(),
            keys: opts.keys.clone(),
            rng: rng_for(w),
            req: PutRequest {
                value: value.clone(),
                ..Default::default()
            },
        })
        .collect();
    let (s, _) = load::drive("put", workers, plan).await;
    Ok(kv_report("put", s))
}

/// Puts `count` keys `prefix + hex(i)` (`key_size` hex digits), or with
/// [`KeyFormat::K8s`] `prefix + ns-NNNN/pod-NNNNNN`, with `val_size`-byte
/// values, over `clients` workers (at most 64). Not measured, but shows
/// the progress bar.
pub async fn populate(
    pool: &Pool,
    clients: usize,
    prefix: &[u8],
    count: u64,
    (key_size, format): (usize, KeyFormat),
    val_size: usize,
) -> Result<(), BenchError> {
    struct PopulateWorker {
        kv: KvClient<Channel>,
        conn: Conn,
        prefix: Vec<u8>,
        width: usize,
        format: KeyFormat,
        req: PutRequest,
    }
    impl Worker for PopulateWorker {
        async fn call(&mut self, i: u64) -> Result<Op, Status> {
            self.req.key.clear();
            self.req.key.extend_from_slice(&self.prefix);
            match self.format {
                KeyFormat::Hex => load::write_hex(i, self.width, &mut self.req.key),
                KeyFormat::K8s => load::write_k8s_suffix(i, &mut self.req.key),
            }
            self.kv.put(self.conn.request(self.req.clone())).await?;
            Ok(Op::Write)
        }
    }

    // Enough digits for every index, even if --key-size is smaller.
    let digits = (64 - count.saturating_sub(1).leading_zeros())
        .div_ceil(4)
        .max(1) as usize;
    let value = load::value_bytes(val_size, &mut rng_for(usize::MAX));
    let workers = (0..clients.clamp(1, 64))
        .map(|w| PopulateWorker {
            kv: client(pool.conn(w)),
            conn: pool.conn(w).clone(),
            prefix: prefix.to_vec(),
            width: key_size.max(digits),
            format,
            req: PutRequest {
                value: value.clone(),
                ..Default::default()
            },
        })
        .collect();
    let (s, _) = load::drive("populate", workers, Plan::exactly(count)).await;
    if let Some((msg, n)) = s.errors.iter().next() {
        return Err(BenchError::Setup(format!(
            "populating {count} keys: {n} puts failed, e.g. {msg}"
        )));
    }
    Ok(())
}

struct TxnPutWorker {
    kv: KvClient<Channel>,
    conn: Conn,
    keys: KeyGen,
    rng: SmallRng,
    req: TxnRequest,
}

impl Worker for TxnPutWorker {
    async fn call(&mut self, i: u64) -> Result<Op, Status> {
        let ops = self.req.success.len() as u64;
        // Keys of one txn are consecutive, so distinct (etcd refuses
        // duplicate keys in a txn); the first is sequential or random.
        let first = if self.keys.sequential {
            i.wrapping_mul(ops)
        } else {
            self.rng.random_range(0..self.keys.space)
        };
        for (j, op) in self.req.success.iter_mut().enumerate() {
            if let Some(request_op::Request::RequestPut(put)) = &mut op.request {
                self.keys
                    .write(first.wrapping_add(j as u64) % self.keys.space, &mut put.key);
            }
        }
        self.kv.txn(self.conn.request(self.req.clone())).await?;
        Ok(Op::Write)
    }
}

/// Txns of `txn_ops` puts each.
pub async fn txn_put(
    pool: &Pool,
    opts: &KvOpts,
    plan: Plan,
    txn_ops: usize,
) -> Result<Report, BenchError> {
    if txn_ops == 0 || txn_ops as u64 > opts.keys.space {
        return Err(BenchError::Usage(format!(
            "--txn-ops must be between 1 and --key-space-size ({}), got {txn_ops}",
            opts.keys.space
        )));
    }
    let value = load::value_bytes(opts.val_size, &mut rng_for(usize::MAX));
    let put = RequestOp {
        request: Some(request_op::Request::RequestPut(PutRequest {
            value,
            ..Default::default()
        })),
    };
    let workers = (0..opts.clients)
        .map(|w| TxnPutWorker {
            kv: client(pool.conn(w)),
            conn: pool.conn(w).clone(),
            keys: opts.keys.clone(),
            rng: rng_for(w),
            req: TxnRequest {
                success: vec![put.clone(); txn_ops],
                ..Default::default()
            },
        })
        .collect();
    let (s, _) = load::drive("txn-put", workers, plan).await;
    Ok(kv_report("txn-put", s))
}

/// A read-or-write request for the mixed workloads.
struct MixWorker {
    kv: KvClient<Channel>,
    conn: Conn,
    keys: KeyGen,
    rng: SmallRng,
    /// Probability that a request reads.
    read_p: f64,
    /// Wrap each request in a txn guarded by a mod_revision compare.
    txn: bool,
    put: PutRequest,
    range: RangeRequest,
}

impl MixWorker {
    fn txn_of(&self, key: &[u8], op: request_op::Request) -> TxnRequest {
        // Always true (every mod_revision, 0 for a missing key, is below
        // i64::MAX), but the server must still look the key up to decide.
        let compare = Compare {
            result: CompareResult::Less as i32,
            target: CompareTarget::Mod as i32,
            key: key.to_vec(),
            target_union: Some(TargetUnion::ModRevision(i64::MAX)),
            ..Default::default()
        };
        TxnRequest {
            compare: vec![compare],
            success: vec![RequestOp { request: Some(op) }],
            failure: Vec::new(),
        }
    }
}

impl Worker for MixWorker {
    async fn call(&mut self, i: u64) -> Result<Op, Status> {
        let index = self.keys.index(i, &mut self.rng);
        let read = self.rng.random_bool(self.read_p);
        if read {
            self.keys.write(index, &mut self.range.key);
        } else {
            self.keys.write(index, &mut self.put.key);
        }
        match (self.txn, read) {
            (false, true) => {
                self.kv.range(self.conn.request(self.range.clone())).await?;
            }
            (false, false) => {
                self.kv.put(self.conn.request(self.put.clone())).await?;
            }
            (true, true) => {
                let op = request_op::Request::RequestRange(self.range.clone());
                let txn = self.txn_of(&self.range.key, op);
                self.kv.txn(self.conn.request(txn)).await?;
            }
            (true, false) => {
                let op = request_op::Request::RequestPut(self.put.clone());
                let txn = self.txn_of(&self.put.key, op);
                self.kv.txn(self.conn.request(txn)).await?;
            }
        }
        Ok(if read { Op::Read } else { Op::Write })
    }
}

/// Plain ranges and puts (`txn: false`) or the same inside guarded txns,
/// reading with probability `read_p`.
pub async fn mixed(
    pool: &Pool,
    opts: &KvOpts,
    plan: Plan,
    read_p: f64,
    txn: bool,
) -> Result<Report, BenchError> {
    if !(0.0..=1.0).contains(&read_p) {
        return Err(BenchError::Usage(format!(
            "read probability {read_p} is not within [0, 1]"
        )));
    }
    let value = load::value_bytes(opts.val_size, &mut rng_for(usize::MAX));
    let op = if txn { "txn-mixed" } else { "mixed" };
    let workers = (0..opts.clients)
        .map(|w| MixWorker {
            kv: client(pool.conn(w)),
            conn: pool.conn(w).clone(),
            keys: opts.keys.clone(),
            rng: rng_for(w),
            read_p,
            txn,
            put: PutRequest {
                value: value.clone(),
                ..Default::default()
            },
            range: RangeRequest {
                serializable: opts.serializable,
                ..Default::default()
            },
        })
        .collect();
    let (s, _) = load::drive(op, workers, plan).await;
    Ok(kv_report(op, s))
}
