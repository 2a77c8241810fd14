//! The Lease service. Grants and revokes go through the log (the applied state decides whether a
//! lease exists); keepalives, TTLs and the lease list are the lessor's, which times leases
//! outside the log, as etcd's leader does. With auth on, every call needs a logged-in user, and
//! a user without the root role needs write permission on a lease's keys to keep it alive and
//! read permission on them to see them or list the lease (current etcd's rules: GHSA-q8m4-
//! xhhv-38mg, CVE-2023-32082; 3.5.1 checked none of them).

use std::pin::Pin;
use std::sync::Arc;

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::lease_server::Lease;
use actcd_proto::etcdserverpb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseLeasesRequest, LeaseLeasesResponse, LeaseRevokeRequest, LeaseRevokeResponse, LeaseStatus,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse,
};
use actcd_types::auth::Perm;
use actcd_types::msg::{ApplyResponse, LeaseKeys, ListLeases};
use actcd_types::{AuthInfo, EtcdError};
use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::authn::Credentials;
use crate::pipeline::Pipeline;

pub struct LeaseService {
    pub pipeline: Arc<Pipeline>,
}

fn mismatch(what: &str) -> Status {
    EtcdError::Internal(format!("actcd: unexpected apply result for {what}")).to_status()
}

impl LeaseService {
    async fn time_to_live(
        &self,
        who: AuthInfo,
        req: LeaseTimeToLiveRequest,
    ) -> Result<LeaseTimeToLiveResponse, EtcdError> {
        let p = &self.pipeline;
        p.require_user(&who)?;
        // The keys of a lease are names a user may not be allowed to read (CVE-2023-32082):
        // asked for, they need read permission on each, as in etcd 3.5.9 and later.
        if req.keys {
            p.check_lease_keys(&who, &[req.id], Perm::Read).await?;
        }
        // etcd's leader waits until it has applied everything committed, so a lease granted
        // (or revoked) before the call is seen.
        match p.linearizable_barrier().await {
            // No leader to the end: etcd's follower, waiting to forward, says so.
            Err(EtcdError::Timeout) if *p.routes.leader.borrow() == 0 => {
                return Err(EtcdError::NoLeader);
            }
            r => r?,
        }
        let ttl = p.lease_ttl(req.id).await;
        let (header, ttl) = match ttl {
            Ok(t) => (p.header(true).await?, t),
            Err(EtcdError::LeaseNotFound) => {
                return Ok(LeaseTimeToLiveResponse {
                    header: Some(p.header(true).await?),
                    id: req.id,
                    ttl: -1,
                    ..Default::default()
                });
            }
            Err(e) => return Err(e),
        };
        let keys = if req.keys {
            match p.routes.lease_keys.send(LeaseKeys { id: req.id }).await? {
                Ok(k) => k,
                // Revoked between the two questions: report it gone, as the lessor would now.
                Err(EtcdError::LeaseNotFound) => {
                    return Ok(LeaseTimeToLiveResponse {
                        header: Some(header),
                        id: req.id,
                        ttl: -1,
                        ..Default::default()
                    });
                }
                Err(e) => return Err(e),
            }
        } else {
            Vec::new()
        };
        Ok(LeaseTimeToLiveResponse {
            header: Some(header),
            id: req.id,
            ttl: ttl.remaining_ttl,
            granted_ttl: ttl.granted_ttl,
            keys,
        })
    }
}

/// One keepalive: the header is taken before the renew, so its revision is never above the one
/// at which the lease was renewed (etcd's rule: a client must not see a keepalive succeed at a
/// revision after the lease's revoke). With auth on, the stream's credentials are judged at
/// every keepalive, as etcd's `checkLeaseRenew` judges them: a logged-in user, and unless root,
/// write permission on every key the lease holds now (a key attached since the last keepalive
/// counts). With auth off this costs one flag read.
pub(crate) async fn keep_alive_once(
    p: &Pipeline,
    creds: &Credentials,
    req: LeaseKeepAliveRequest,
) -> Result<LeaseKeepAliveResponse, EtcdError> {
    if p.auth.enabled() {
        let who = p.identify(creds).await?;
        p.check_lease_keys(&who, &[req.id], Perm::Write).await?;
    }
    let header = p.recent_header().await?;
    let ttl = match p.renew_lease(req.id).await {
        Ok(ttl) => ttl,
        Err(EtcdError::LeaseNotFound) => 0,
        Err(e) => return Err(e),
    };
    Ok(LeaseKeepAliveResponse {
        header: Some(header),
        id: req.id,
        ttl,
    })
}

type KeepAliveStream = Pin<Box<dyn Stream<Item = Result<LeaseKeepAliveResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Lease for LeaseService {
    async fn lease_grant(
        &self,
        req: Request<LeaseGrantRequest>,
    ) -> Result<Response<LeaseGrantResponse>, Status> {
        let who = self.pipeline.who(&req).await?;
        self.pipeline.require_user(&who)?;
        let mut grant = req.into_inner();
        if grant.id == 0 {
            // etcd: a server-chosen id is a request id with the sign bit cleared, never 0.
            while grant.id == 0 {
                grant.id = (self.pipeline.next_id() & (i64::MAX as u64)) as i64;
            }
        }
        let r = InternalRaftRequest {
            lease_grant: Some(grant),
            ..Default::default()
        };
        match self.pipeline.write(r, who).await? {
            ApplyResponse::LeaseGrant(g) => Ok(Response::new(g)),
            _ => Err(mismatch("lease grant")),
        }
    }

    async fn lease_revoke(
        &self,
        req: Request<LeaseRevokeRequest>,
    ) -> Result<Response<LeaseRevokeResponse>, Status> {
        let who = self.pipeline.who(&req).await?;
        // The applier then needs write permission on every key attached (etcd's auth applier).
        self.pipeline.require_user(&who)?;
        let r = InternalRaftRequest {
            lease_revoke: Some(req.into_inner()),
            ..Default::default()
        };
        match self.pipeline.write(r, who).await? {
            ApplyResponse::LeaseRevoke(g) => Ok(Response::new(g)),
            _ => Err(mismatch("lease revoke")),
        }
    }

    type LeaseKeepAliveStream = KeepAliveStream;

    /// Answers each keepalive in order; an unknown or expired lease gets TTL 0, as in etcd.
    /// Through an election a keepalive waits for the new leader's answer (see
    /// [`Pipeline::renew_lease`]).
    async fn lease_keep_alive(
        &self,
        req: Request<Streaming<LeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        // Answered in the RPC's own stream, no task or channel between: a keepalive is one
        // lessor round trip. The stream ends with the client, at the first error, or at
        // shutdown, then with `Unavailable` as etcd's clients see it end.
        let p = self.pipeline.clone();
        // Read once: a stream carries one set of credentials.
        let creds = Arc::new(p.auth.credentials(&req));
        let closing = p.clone();
        let last = p.clone();
        let out = req
            .into_inner()
            .take_while(|r| std::future::ready(r.is_ok()))
            .then(move |r| {
                let (p, creds) = (p.clone(), creds.clone());
                async move {
                    match r {
                        Ok(req) => keep_alive_once(&p, &creds, req)
                            .await
                            .map_err(|e| e.to_status()),
                        Err(status) => Err(status),
                    }
                }
            })
            .map(Some)
            .take_until(Box::pin(async move { closing.closed().await }))
            .chain(futures::stream::once(async move {
                last.is_closing()
                    .then(|| Err(crate::pipeline::shutdown_status()))
            }))
            .filter_map(std::future::ready);
        Ok(Response::new(Box::pin(out)))
    }

    async fn lease_time_to_live(
        &self,
        req: Request<LeaseTimeToLiveRequest>,
    ) -> Result<Response<LeaseTimeToLiveResponse>, Status> {
        let who = self.pipeline.who(&req).await?;
        Ok(Response::new(
            self.time_to_live(who, req.into_inner()).await?,
        ))
    }

    async fn lease_leases(
        &self,
        req: Request<LeaseLeasesRequest>,
    ) -> Result<Response<LeaseLeasesResponse>, Status> {
        let p = &self.pipeline;
        let who = p.who(&req).await?;
        p.require_user(&who)?;
        let ids = p
            .routes
            .list_leases
            .send(ListLeases)
            .await
            .map_err(EtcdError::from)?;
        // etcd 3.5.28+: a user who isn't root lists the leases only if it may read every key
        // attached to any of them.
        p.check_lease_keys(&who, &ids, Perm::Read).await?;
        Ok(Response::new(LeaseLeasesResponse {
            header: Some(p.header(true).await?),
            leases: ids.into_iter().map(|id| LeaseStatus { id }).collect(),
        }))
    }
}
