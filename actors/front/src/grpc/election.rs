//! etcd's `v3electionpb.Election`: leader election per name on leases and create revisions
//! (etcd's v3election server over its `concurrency.Election`, `concurrency.rs` here).
//!
//! - Campaign puts `name/<lease hex>` with the value unless the caller is already a candidate
//!   (then proclaims the new value if it differs), waits for every candidate created before it
//!   to go, and answers the leader key: name, key, create revision, lease.
//! - Proclaim and Resign act only while the key still has that create revision (`election:
//!   not leader` otherwise for Proclaim; Resign of a lost leadership does nothing).
//! - Leader is the candidate created first (`election: no leader` if none); Observe streams it,
//!   and every value it proclaims, then the next leader after it goes.

use std::pin::Pin;
use std::sync::Arc;

use actcd_proto::etcdserverpb::request_op::Request as Op;
use actcd_proto::etcdserverpb::{DeleteRangeRequest, PutRequest, ResponseHeader};
use actcd_proto::mvccpb::event::EventType;
use actcd_proto::v3electionpb::election_server::Election;
use actcd_proto::v3electionpb::{
    CampaignRequest, CampaignResponse, LeaderKey, LeaderRequest, LeaderResponse, ProclaimRequest,
    ProclaimResponse, ResignRequest, ResignResponse,
};
use actcd_types::EtcdError;
use futures::Stream;
use tonic::{Request, Response, Status};

use crate::grpc::concurrency::{Caller, Candidacy, CleanupGuard, prefix_end, prefix_of, unknown};
use crate::pipeline::Pipeline;

pub struct ElectionService {
    pub pipeline: Arc<Pipeline>,
}

type ObserveStream = Pin<Box<dyn Stream<Item = Result<LeaderResponse, Status>> + Send>>;

/// Puts `value` on the leader's key if it still leads (etcd's `Election.Proclaim`).
async fn proclaim(
    caller: &Caller,
    leader: &LeaderKey,
    value: &[u8],
) -> Result<ResponseHeader, EtcdError> {
    let put = Op::RequestPut(PutRequest {
        key: leader.key.clone(),
        value: value.to_vec(),
        lease: leader.lease,
        ..Default::default()
    });
    let resp = caller.if_created_at(&leader.key, leader.rev, put).await?;
    if !resp.succeeded {
        return Err(EtcdError::ElectionNotLeader);
    }
    Ok(resp.header.unwrap_or_default())
}

/// Deletes the leader's key if it still leads (etcd's `Election.Resign`).
async fn resign(caller: &Caller, leader: &LeaderKey) -> Result<ResponseHeader, EtcdError> {
    let delete = Op::RequestDeleteRange(DeleteRangeRequest {
        key: leader.key.clone(),
        ..Default::default()
    });
    let resp = caller
        .if_created_at(&leader.key, leader.rev, delete)
        .await?;
    Ok(resp.header.unwrap_or_default())
}

/// etcd's `Election.Campaign`, as `caller`.
pub async fn campaign(
    caller: &Caller,
    name: &[u8],
    lease: i64,
    value: &[u8],
) -> Result<(LeaderKey, ResponseHeader), EtcdError> {
    let Candidacy {
        prefix,
        key,
        lease,
        rev,
        existing,
        header,
    } = caller
        .enter(name, lease, value)
        .await?
        .ok_or(EtcdError::ElectionNotLeader)?;
    let leader = LeaderKey {
        name: name.to_vec(),
        key,
        rev,
        lease,
    };
    // From here on, if the caller goes away, the candidacy goes too.
    let guard = {
        let (caller, leader) = (caller.clone(), leader.clone());
        CleanupGuard::new(move || {
            tokio::spawn(async move {
                let _ = resign(&caller, &leader).await;
            });
        })
    };
    if let Some(kv) = existing
        && kv.value != value
    {
        // A failed proclamation gives the candidacy back (the guard, dropped).
        proclaim(caller, &leader, value).await?;
    }
    // etcd gives the candidacy back only when the caller went away, not on other errors.
    let waited = caller.wait_deletes(&prefix, rev - 1).await;
    guard.disarm();
    waited?;
    Ok((leader, header))
}

/// The first-created candidate under `name/`, with the header of the read.
async fn current_leader(caller: &Caller, name: &[u8]) -> Result<LeaderResponse, EtcdError> {
    let resp = caller.by_create(&prefix_of(name), None).await?;
    let kv = resp
        .kvs
        .into_iter()
        .next()
        .ok_or(EtcdError::ElectionNoLeader)?;
    Ok(LeaderResponse {
        header: resp.header,
        kv: Some(kv),
    })
}

/// etcd's `Election.Observe`: every leader and each value it proclaims, until the receiver
/// goes away or a watch fails.
async fn observe(
    caller: Caller,
    name: Vec<u8>,
    tx: tokio::sync::mpsc::Sender<Result<LeaderResponse, Status>>,
) {
    let prefix = prefix_of(&name);
    loop {
        // The leader now, or the first candidate to appear.
        // A failed step (a refused caller…) ends the stream without an error, as etcd's
        // observer closes its channel and returns.
        let (mut header, kv) = match caller.by_create(&prefix, None).await {
            Err(_) => return,
            Ok(resp) => {
                let header = resp.header.unwrap_or_default();
                match resp.kvs.into_iter().next() {
                    Some(kv) => (header, kv),
                    None => {
                        let Ok(mut rx) = caller
                            .watch(&prefix, prefix_end(&prefix), header.revision)
                            .await
                        else {
                            return;
                        };
                        let mut first = None;
                        while first.is_none() {
                            let Some(Ok(w)) = rx.recv().await else { return };
                            if w.canceled {
                                return;
                            }
                            let put = w
                                .events
                                .into_iter()
                                .find(|e| e.r#type == EventType::Put as i32)
                                .and_then(|e| e.kv);
                            if let Some(kv) = put {
                                let mut h = w.header.unwrap_or_default();
                                h.revision = kv.mod_revision;
                                first = Some((h, kv));
                            }
                        }
                        match first {
                            Some(f) => f,
                            None => return,
                        }
                    }
                }
            }
        };
        let key = kv.key.clone();
        let sent = LeaderResponse {
            header: Some(header),
            kv: Some(kv),
        };
        if tx.send(Ok(sent)).await.is_err() {
            return;
        }
        // Its proclamations, until it goes.
        let Ok(mut rx) = caller.watch(&key, Vec::new(), header.revision + 1).await else {
            return;
        };
        'leader: loop {
            tokio::select! {
                () = tx.closed() => return,
                w = rx.recv() => {
                    let Some(Ok(w)) = w else { return };
                    if w.canceled {
                        return;
                    }
                    if let Some(h) = w.header {
                        header = h;
                    }
                    for e in w.events {
                        if e.r#type == EventType::Delete as i32 {
                            break 'leader;
                        }
                        let resp = LeaderResponse {
                            header: Some(header),
                            kv: e.kv,
                        };
                        if tx.send(Ok(resp)).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }
}

#[tonic::async_trait]
impl Election for ElectionService {
    async fn campaign(
        &self,
        req: Request<CampaignRequest>,
    ) -> Result<Response<CampaignResponse>, Status> {
        let caller = Caller::of(&self.pipeline, &req).await.map_err(unknown)?;
        let CampaignRequest { name, lease, value } = req.into_inner();
        let (leader, header) = campaign(&caller, &name, lease, &value)
            .await
            .map_err(unknown)?;
        Ok(Response::new(CampaignResponse {
            header: Some(header),
            leader: Some(leader),
        }))
    }

    async fn proclaim(
        &self,
        req: Request<ProclaimRequest>,
    ) -> Result<Response<ProclaimResponse>, Status> {
        let caller = Caller::of(&self.pipeline, &req).await.map_err(unknown)?;
        let ProclaimRequest { leader, value } = req.into_inner();
        let leader = leader.ok_or(EtcdError::MissingLeaderKey).map_err(unknown)?;
        let header = proclaim(&caller, &leader, &value).await.map_err(unknown)?;
        Ok(Response::new(ProclaimResponse {
            header: Some(header),
        }))
    }

    async fn leader(
        &self,
        req: Request<LeaderRequest>,
    ) -> Result<Response<LeaderResponse>, Status> {
        let caller = Caller::of(&self.pipeline, &req).await.map_err(unknown)?;
        let leader = current_leader(&caller, &req.into_inner().name)
            .await
            .map_err(unknown)?;
        Ok(Response::new(leader))
    }

    type ObserveStream = ObserveStream;

    async fn observe(
        &self,
        req: Request<LeaderRequest>,
    ) -> Result<Response<Self::ObserveStream>, Status> {
        let caller = Caller::of(&self.pipeline, &req).await.map_err(unknown)?;
        let name = req.into_inner().name;
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let closing = self.pipeline.clone();
        let gone = tx.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = observe(caller, name, tx) => {}
                () = gone.closed() => {}
                () = closing.closed() => {}
            }
            // Whichever ended first at shutdown (the watch under `observe` ends then too).
            if closing.is_closing() {
                crate::pipeline::end_at_shutdown(&gone).await;
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn resign(
        &self,
        req: Request<ResignRequest>,
    ) -> Result<Response<ResignResponse>, Status> {
        let caller = Caller::of(&self.pipeline, &req).await.map_err(unknown)?;
        let leader = req
            .into_inner()
            .leader
            .ok_or(EtcdError::MissingLeaderKey)
            .map_err(unknown)?;
        let header = resign(&caller, &leader).await.map_err(unknown)?;
        Ok(Response::new(ResignResponse {
            header: Some(header),
        }))
    }
}
