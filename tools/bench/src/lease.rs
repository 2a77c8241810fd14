//! `lease-keepalive`: keepalive round trips over long-lived LeaseKeepAlive
//! streams.
//!
//! `--leases` leases are granted first (over `--clients` workers; the grant
//! latency is reported as its own section). Then each client opens one
//! LeaseKeepAlive stream and sends one keepalive at a time, waiting for its
//! answer, request i renewing lease `i % --leases`; that round trip is the
//! measured latency. An answer for another lease, or a TTL ≤ 0 (the lease is
//! gone), counts as an error. The leases are revoked at the end.

use std::sync::Arc;

use actcd_proto::etcdserverpb::lease_client::LeaseClient;
use actcd_proto::etcdserverpb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, LeaseKeepAliveResponse, LeaseRevokeRequest,
};
use futures::channel::mpsc;
use tonic::Status;
use tonic::codec::Streaming;
use tonic::transport::Channel;

use crate::BenchError;
use crate::load::{self, Conn, Op, Plan, Pool, Worker};
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
        Ok(KeepAlive { tx, inbound, ids })
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
            Some(r) if r.ttl <= 0 => Err(Status::not_found("lease not found")),
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
    let revoked = revoke_all(pool, clients, ids).await;

    let mut report = Report::new("lease-keepalive", Stats::new(s.all(), s.elapsed), s.errors);
    report
        .sections
        .push(("grant".into(), Stats::new(granted.all(), granted.elapsed)));
    report.extra.insert("leases".into(), opts.leases.into());
    report.extra.insert("revoked".into(), revoked.into());
    Ok(report)
}

/// Revokes every lease in `ids`; returns how many revokes succeeded.
async fn revoke_all(pool: &Pool, clients: usize, ids: Arc<Vec<i64>>) -> usize {
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
    s.ok()
}
