//! etcd's `v3lockpb.Lock`: a mutex per name, owned by a lease (etcd's v3lock server over its
//! `concurrency.Mutex`, `concurrency.rs` here).
//!
//! Lock puts `name/<lease hex>` (attached to the lease; a fresh 60 s lease when none is named)
//! unless the caller already has it, then waits for every key under `name/` created before it
//! to go. The answer's key is the ownership: Unlock deletes it, and so does the lease's end. A
//! caller who goes away while waiting takes its key back.

use std::sync::Arc;

use actcd_proto::v3lockpb::lock_server::Lock;
use actcd_proto::v3lockpb::{LockRequest, LockResponse, UnlockRequest, UnlockResponse};
use actcd_types::EtcdError;
use tonic::{Request, Response, Status};

use crate::grpc::concurrency::{Caller, Candidacy, CleanupGuard, unknown};
use crate::pipeline::Pipeline;

pub struct LockService {
    pub pipeline: Arc<Pipeline>,
}

/// etcd's `Mutex.Lock`, as `caller`: the ownership key and the header to answer with.
pub async fn lock(
    caller: &Caller,
    name: &[u8],
    lease: i64,
) -> Result<(Vec<u8>, actcd_proto::etcdserverpb::ResponseHeader), EtcdError> {
    let Candidacy {
        prefix,
        key,
        rev: my_rev,
        header,
        ..
    } = caller
        .enter(name, lease, b"")
        .await?
        .ok_or(EtcdError::SessionExpired)?;
    // From here on, if the caller goes away, the key goes too.
    let guard = {
        let (caller, key) = (caller.clone(), key.clone());
        CleanupGuard::new(move || {
            tokio::spawn(async move {
                let _ = caller.delete(key).await;
            });
        })
    };
    let owner = caller.by_create(&prefix, None).await?;
    if owner
        .kvs
        .first()
        .is_none_or(|kv| kv.create_revision == my_rev)
    {
        guard.disarm();
        return Ok((key, header));
    }
    caller.wait_deletes(&prefix, my_rev - 1).await?;
    guard.disarm();
    // The lease may have ended meanwhile, taking the key with it.
    let mine = caller
        .range(actcd_proto::etcdserverpb::RangeRequest {
            key: key.clone(),
            ..Default::default()
        })
        .await?;
    if mine.kvs.is_empty() {
        return Err(EtcdError::SessionExpired);
    }
    Ok((key, mine.header.unwrap_or_default()))
}

#[tonic::async_trait]
impl Lock for LockService {
    async fn lock(&self, req: Request<LockRequest>) -> Result<Response<LockResponse>, Status> {
        let caller = Caller::of(&self.pipeline, &req).await.map_err(unknown)?;
        let LockRequest { name, lease } = req.into_inner();
        let (key, header) = lock(&caller, &name, lease).await.map_err(unknown)?;
        Ok(Response::new(LockResponse {
            header: Some(header),
            key,
        }))
    }

    async fn unlock(
        &self,
        req: Request<UnlockRequest>,
    ) -> Result<Response<UnlockResponse>, Status> {
        let caller = Caller::of(&self.pipeline, &req).await.map_err(unknown)?;
        let deleted = caller.delete(req.into_inner().key).await.map_err(unknown)?;
        Ok(Response::new(UnlockResponse {
            header: deleted.header,
        }))
    }
}
