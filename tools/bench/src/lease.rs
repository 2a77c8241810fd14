//! `lease-keepalive`: keepalive round trips over long-lived LeaseKeepAlive
//! streams.
//!
//! `--leases` leases are granted first (over `--clients` workers; the grant
//! latency is reported as its own section). Then each client opens one
//! LeaseKeepAlive stream and sends one keepalive at a time, waiting for its
//! answer, request i renewing lease `i % --leases`; that round trip is the
//! measured latency. An answer for another lease, or a TTL ≤ 0 (the lease is
//! gone), counts as an error. The leases are revoked at the end.
//!
//! `lease-load`: the Kubernetes events pattern at scale. Grants `--leases`
//! leases, puts one key under `--prefix` with each (`ns-NNNN/pod-NNNNNN`
//! names, `--val-size` values), keeps every lease alive for `--keepalive-for`
//! at `--keepalive-rate` renewals/s (by default what etcd's Go client does:
//! each lease once per TTL/3), then revokes them all and checks that the
//! keys went with them. Each phase is a section of the report (grant,
//! attach, keepalive, revoke); the main figures are the keepalives'.

use std::collections::HashSet;
use std::sync::Arc;

use std::time::Duration;

use actcd_proto::etcdserverpb::kv_client::KvClient;
use actcd_proto::etcdserverpb::lease_client::LeaseClient;
use actcd_proto::etcdserverpb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, LeaseKeepAliveResponse, LeaseRevokeRequest,
    PutRequest, RangeRequest,
};
use futures::channel::mpsc;
use tonic::Status;
use tonic::codec::Streaming;
use tonic::transport::Channel;

use crate::BenchError;
use crate::load::{self, Conn, Op, Plan, Pool, Samples, Worker};
use crate::report::{Report, Stats};

#[derive(Debug, Clone)]
pub struct LeaseOpts {
    pub clients: usize,
    pub leases: u64,
    pub ttl: i64,
}

struct Grant {
    lease: LeaseClient<Channel>,
    conn: Conn,
    ttl: i64,
    ids: Vec<i64>,
}

impl Worker for Grant {
    async fn call(&mut self, _: u64) -> Result<Op, Status> {
        let req = LeaseGrantRequest {
            ttl: self.ttl,
            id: 0,
        };
        let resp = self.lease.lease_grant(self.conn.request(req)).await?;
        let resp = resp.into_inner();
        if !resp.error.is_empty() {
            return Err(Status::unknown(resp.error));
        }
        self.ids.push(resp.id);
        Ok(Op::Write)
    }
}

struct Revoke {
    lease: LeaseClient<Channel>,
    conn: Conn,
    ids: Arc<Vec<i64>>,
}

impl Worker for Revoke {
    async fn call(&mut self, i: u64) -> Result<Op, Status> {
        let id = self.ids[i as usize];
        self.lease
            .lease_revoke(self.conn.request(LeaseRevokeRequest { id }))
            .await?;
        Ok(Op::Write)
    }
}

struct KeepAlive {
    tx: mpsc::UnboundedSender<LeaseKeepAliveRequest>,
    inbound: Streaming<LeaseKeepAliveResponse>,
    ids: Arc<Vec<i64>>,
    /// Leases a keepalive found gone (TTL ≤ 0): lost to expiry while kept alive.
    lost: HashSet<i64>,
}

impl KeepAlive {
    /// Opens a stream with one keepalive of `first` (a server need not
    /// answer the call before the first message) and consumes its answer.
    async fn open(conn: &Conn, ids: Arc<Vec<i64>>, first: i64) -> Result<KeepAlive, BenchError> {
        let (tx, rx) = mpsc::unbounded();
        let _ = tx.unbounded_send(LeaseKeepAliveRequest { id: first });
        let mut inbound = LeaseClient::new(conn.channel.clone())
            .lease_keep_alive(conn.request(rx))
            .await
            .map_err(|s| BenchError::rpc("lease keepalive", s))?
            .into_inner();
        inbound
            .message()
            .await
            .map_err(|s| BenchError::rpc("lease keepalive", s))?
            .ok_or_else(|| BenchError::Setup("keepalive stream ended at once".into()))?;
        Ok(KeepAlive {
            tx,
            inbound,
            ids,
            lost: HashSet::new(),
        })
    }
}

impl Worker for KeepAlive {
    async fn call(&mut self, i: u64) -> Result<Op, Status> {
        let id = self.ids[(i % self.ids.len() as u64) as usize];
        self.tx
            .unbounded_send(LeaseKeepAliveRequest { id })
            .map_err(|_| Status::unavailable("keepalive stream closed"))?;
        match self.inbound.message().await? {
            Some(r) if r.id != id => Err(Status::internal(format!(
                "keepalive of lease {id} answered for lease {}",
                r.id
            ))),
            Some(r) if r.ttl <= 0 => {
                self.lost.insert(id);
                Err(Status::not_found("lease not found"))
            }
            Some(_) => Ok(Op::Write),
            None => Err(Status::unavailable("keepalive stream ended")),
        }
    }
}

pub async fn keepalive(pool: &Pool, opts: &LeaseOpts, plan: Plan) -> Result<Report, BenchError> {
    if opts.leases == 0 || opts.ttl <= 0 {
        return Err(BenchError::Usage(
            "--leases and --ttl must be positive".into(),
        ));
    }
    let clients = opts.clients.max(1);
    let lease_client = |w: usize| LeaseClient::new(pool.conn(w).channel.clone());

    let grants = (0..clients)
        .map(|w| Grant {
            lease: lease_client(w),
            conn: pool.conn(w).clone(),
            ttl: opts.ttl,
            ids: Vec::new(),
        })
        .collect();
    let (granted, grants) = load::drive("grant", grants, Plan::exactly(opts.leases)).await;
    if let Some(e) = granted.unimplemented() {
        return Err(BenchError::Unimplemented(format!("lease grant ({e})")));
    }
    let ids: Arc<Vec<i64>> = Arc::new(grants.into_iter().flat_map(|g| g.ids).collect());
    if let Some((msg, n)) = granted.errors.iter().next() {
        revoke_all(pool, clients, ids).await;
        return Err(BenchError::Setup(format!(
            "{n} lease grants failed, e.g. {msg}"
        )));
    }

    let mut workers = Vec::with_capacity(clients);
    for w in 0..clients {
        let first = ids[w % ids.len()];
        match KeepAlive::open(pool.conn(w), ids.clone(), first).await {
            Ok(k) => workers.push(k),
            Err(e) => {
                drop(workers);
                revoke_all(pool, clients, ids).await;
                return Err(e);
            }
        }
    }
    let (s, workers) = load::drive("lease-keepalive", workers, plan).await;
    drop(workers);
    let revoked = revoke_all(pool, clients, ids).await.ok();

    let mut report = Report::new("lease-keepalive", Stats::new(s.all(), s.elapsed), s.errors);
    report
        .sections
        .push(("grant".into(), Stats::new(granted.all(), granted.elapsed)));
    report.extra.insert("leases".into(), opts.leases.into());
    report.extra.insert("revoked".into(), revoked.into());
    Ok(report)
}

/// Revokes every lease in `ids`; returns what the revokes measured.
async fn revoke_all(pool: &Pool, clients: usize, ids: Arc<Vec<i64>>) -> Samples {
    let n = ids.len() as u64;
    let workers = (0..clients)
        .map(|w| Revoke {
            lease: LeaseClient::new(pool.conn(w).channel.clone()),
            conn: pool.conn(w).clone(),
            ids: ids.clone(),
        })
        .collect();
    let (s, _) = load::drive("revoke", workers, Plan::exactly(n)).await;
    for (msg, n) in &s.errors {
        eprintln!("revoke: {n} failed: {msg}");
    }
    s
}

#[derive(Debug, Clone)]
pub struct LoadOpts {
    pub clients: usize,
    pub leases: u64,
    pub ttl: i64,
    /// Where the attached keys go.
    pub prefix: Vec<u8>,
    pub val_size: usize,
    pub keepalive_for: Duration,
    /// Renewals per second over all leases; 0: each lease once per TTL/3.
    pub keepalive_rate: f64,
}

/// Renewals per second that keep every lease alive the way etcd's Go
/// client does (one keepalive per lease every TTL/3 seconds).
pub fn client_keepalive_rate(leases: u64, ttl: i64) -> f64 {
    leases as f64 / (ttl.max(1) as f64 / 3.0)
}

struct Attach {
    kv: KvClient<Channel>,
    conn: Conn,
    ids: Arc<Vec<i64>>,
    prefix: Vec<u8>,
    req: PutRequest,
}

impl Worker for Attach {
    async fn call(&mut self, i: u64) -> Result<Op, Status> {
        self.req.key.clone_from(&self.prefix);
        load::write_k8s_suffix(i, &mut self.req.key);
        self.req.lease = self.ids[i as usize];
        self.kv.put(self.conn.request(self.req.clone())).await?;
        Ok(Op::Write)
    }
}

/// `lease-load`; `plan`'s total and rate are ignored (the phases have their
/// own), its duration too (`keepalive_for` is the keepalive phase's).
pub async fn load(pool: &Pool, opts: &LoadOpts) -> Result<Report, BenchError> {
    if opts.leases == 0 || opts.ttl <= 0 || opts.keepalive_rate < 0.0 {
        return Err(BenchError::Usage(
            "--leases and --ttl must be positive, --keepalive-rate not negative".into(),
        ));
    }
    let clients = opts.clients.max(1);
    let grants = (0..clients)
        .map(|w| Grant {
            lease: LeaseClient::new(pool.conn(w).channel.clone()),
            conn: pool.conn(w).clone(),
            ttl: opts.ttl,
            ids: Vec::new(),
        })
        .collect();
    let (granted, grants) = load::drive("grant", grants, Plan::exactly(opts.leases)).await;
    if let Some(e) = granted.unimplemented() {
        return Err(BenchError::Unimplemented(format!("lease grant ({e})")));
    }
    let ids: Arc<Vec<i64>> = Arc::new(in_grant_order(grants.into_iter().map(|g| g.ids).collect()));
    let fail = |what: &str, s: &Samples| {
        s.errors
            .iter()
            .next()
            .map(|(msg, n)| BenchError::Setup(format!("{n} {what} failed, e.g. {msg}")))
    };
    if let Some(e) = fail("lease grants", &granted) {
        revoke_all(pool, clients, ids).await;
        return Err(e);
    }

    let value = load::value_bytes(opts.val_size, &mut rand::rng());
    let attachers = (0..clients)
        .map(|w| Attach {
            kv: KvClient::new(pool.conn(w).channel.clone()),
            conn: pool.conn(w).clone(),
            ids: ids.clone(),
            prefix: opts.prefix.clone(),
            req: PutRequest {
                value: value.clone(),
                ..Default::default()
            },
        })
        .collect();
    let n = ids.len() as u64;
    let (attached, _) = load::drive("attach", attachers, Plan::exactly(n)).await;
    if let Some(e) = fail("puts with a lease", &attached) {
        revoke_all(pool, clients, ids).await;
        return Err(e);
    }

    let mut workers = Vec::with_capacity(clients);
    for w in 0..clients {
        match KeepAlive::open(pool.conn(w), ids.clone(), ids[w % ids.len()]).await {
            Ok(k) => workers.push(k),
            Err(e) => {
                drop(workers);
                revoke_all(pool, clients, ids).await;
                return Err(e);
            }
        }
    }
    let rate = if opts.keepalive_rate > 0.0 {
        opts.keepalive_rate
    } else {
        client_keepalive_rate(opts.leases, opts.ttl)
    };
    let plan = Plan {
        total: None,
        duration: Some(opts.keepalive_for),
        rate,
    };
    let (kept, workers) = load::drive("keepalive", workers, plan).await;
    let lost: HashSet<i64> = workers
        .iter()
        .flat_map(|w| w.lost.iter().copied())
        .collect();
    drop(workers);

    let revoked = revoke_all(pool, clients, ids).await;
    let left = KvClient::new(pool.conn(0).channel.clone())
        .range(pool.conn(0).request(RangeRequest {
            key: opts.prefix.clone(),
            range_end: load::prefix_end(&opts.prefix),
            count_only: true,
            ..Default::default()
        }))
        .await
        .map_err(|s| BenchError::rpc("range", s))?
        .into_inner()
        .count;

    let mut report = Report::new(
        "lease-load",
        Stats::new(kept.all(), kept.elapsed),
        kept.errors,
    );
    for (label, s) in [
        ("grant", &granted),
        ("attach", &attached),
        ("revoke", &revoked),
    ] {
        report
            .sections
            .push((label.into(), Stats::new(s.all(), s.elapsed)));
    }
    report.extra.insert("leases".into(), opts.leases.into());
    report.extra.insert("keepalive_rate".into(), rate.into());
    report.extra.insert("revoked".into(), revoked.ok().into());
    // Leases that expired while their keepalives ran (a revoke's "not found" after the
    // keepalives stopped is a lease that ran out its TTL meanwhile, not one lost).
    report.extra.insert("leases_lost".into(), lost.len().into());
    report.extra.insert("keys_left".into(), left.into());
    if left != 0 {
        // Revoking a lease must delete its keys.
        report.violation = true;
    }
    Ok(report)
}

/// The grant workers' leases in about the order they were granted (each worker's first, then
/// each one's second, ...), so the first keepalive round renews the oldest leases first and no
/// lease waits a whole round more than the others for its first renewal.
fn in_grant_order(per_worker: Vec<Vec<i64>>) -> Vec<i64> {
    let longest = per_worker.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| per_worker.iter().filter_map(move |ids| ids.get(i).copied()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_rate_renews_each_lease_every_third_of_its_ttl() {
        assert_eq!(client_keepalive_rate(100_000, 600), 500.0);
        assert_eq!(client_keepalive_rate(30, 3), 30.0);
    }

    #[test]
    fn leases_are_renewed_in_about_their_grant_order() {
        let ids = in_grant_order(vec![vec![1, 4, 6], vec![2, 5], vec![3]]);
        assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
    }
}
