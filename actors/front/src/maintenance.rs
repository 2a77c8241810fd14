use std::pin::Pin;
use std::sync::Arc;

use actcd_backend::BackendError;
use actcd_backend::bolt;
use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::maintenance_server::Maintenance;
use actcd_proto::etcdserverpb::{
    AlarmRequest, AlarmResponse, AlarmType, DefragmentRequest, DefragmentResponse,
    DowngradeRequest, DowngradeResponse, HashKvRequest, HashKvResponse, HashRequest, HashResponse,
    MoveLeaderRequest, MoveLeaderResponse, ResponseHeader, SnapshotRequest, SnapshotResponse,
    StatusRequest, StatusResponse,
};
use actcd_types::EtcdError;
use actcd_types::msg::{
    ApplyResponse, Defragment, HashBackend, OpenStoreReader, StoreReader, TransferLeader,
};
use actcd_types::storage::StorageError;
use futures::Stream;
use tonic::{Request, Response, Status};

use crate::pipeline::Pipeline;

pub struct MaintenanceService {
    pub pipeline: Arc<Pipeline>,
}

/// etcd's downgrade targets: `major.minor` or `major.minor.patch`.
fn is_downgrade_version(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

fn alarm_name(alarm: i32) -> &'static str {
    AlarmType::try_from(alarm).map_or("UNKNOWN", |a| a.as_str_name())
}

/// etcd's snapshot chunk (`snapshotSendBufferSize`).
const SNAPSHOT_CHUNK: usize = 32 * 1024;

/// The store, through a reader, as an etcd 3.5 bbolt file's contents.
struct StoreSource(Box<dyn actcd_types::storage::ReadTxn + Send>);

impl bolt::Source for StoreSource {
    fn visit(
        &mut self,
        f: &mut dyn FnMut(bolt::Item<'_>) -> Result<(), BackendError>,
    ) -> Result<(), BackendError> {
        use actcd_mvcc::snapshot::{EtcdItem, visit_etcd_layout};
        visit_etcd_layout(&*self.0, &mut |item| {
            let item = match item {
                EtcdItem::Bucket(name) => bolt::Item::Bucket(name),
                EtcdItem::Pair(k, v) => bolt::Item::Pair(k, v),
            };
            f(item).map_err(StorageError::from)
        })
        .map_err(BackendError::from)
    }
}

/// Streams the store as etcd does a snapshot: the file in 32 KiB chunks counting down
/// `remaining_bytes`, then its SHA-256. Runs on a blocking thread; pages are written as the
/// reader yields them (a first pass lays them out, so the size is known up front), so memory
/// stays at a chunk or two whatever the store's size. Stops when the client goes away.
fn stream_snapshot(
    reader: StoreReader,
    tx: tokio::sync::mpsc::Sender<Result<SnapshotResponse, Status>>,
) {
    let started = std::time::Instant::now();
    let mut source = StoreSource(reader.0);
    let failed = |e: BackendError| Status::from(EtcdError::Internal(format!("snapshot: {e}")));
    let writer = match bolt::Writer::plan(&mut source) {
        Ok(w) => w,
        Err(e) => {
            let _ = tx.blocking_send(Err(failed(e)));
            return;
        }
    };
    let total = writer.size();
    tracing::info!(
        total_bytes = total,
        planned_ms = started.elapsed().as_millis() as u64,
        "sending database snapshot to client"
    );
    let mut sha = ring::digest::Context::new(&ring::digest::SHA256);
    let mut chunk = Vec::with_capacity(SNAPSHOT_CHUNK);
    let mut sent = 0u64;
    let gone = || BackendError::Bolt("the client went away".into());
    let send = |chunk: &mut Vec<u8>, sent: &mut u64| -> Result<(), BackendError> {
        *sent += chunk.len() as u64;
        let msg = SnapshotResponse {
            header: None,
            remaining_bytes: total.saturating_sub(*sent),
            blob: std::mem::replace(chunk, Vec::with_capacity(SNAPSHOT_CHUNK)),
        };
        tx.blocking_send(Ok(msg)).map_err(|_| gone())
    };
    let written = writer.write(&mut source, &mut |page| {
        sha.update(page);
        let mut rest = page;
        while !rest.is_empty() {
            let take = (SNAPSHOT_CHUNK - chunk.len()).min(rest.len());
            chunk.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if chunk.len() == SNAPSHOT_CHUNK {
                send(&mut chunk, &mut sent)?;
            }
        }
        Ok(())
    });
    let finished = written.and_then(|()| {
        if !chunk.is_empty() {
            send(&mut chunk, &mut sent)?;
        }
        Ok(())
    });
    match finished {
        Ok(()) => {
            let digest = sha.finish();
            let last = SnapshotResponse {
                header: None,
                remaining_bytes: 0,
                blob: digest.as_ref().to_vec(),
            };
            if tx.blocking_send(Ok(last)).is_ok() {
                tracing::info!(
                    total_bytes = total,
                    took_ms = started.elapsed().as_millis() as u64,
                    "successfully sent database snapshot to client"
                );
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "database snapshot not sent");
            let _ = tx.blocking_send(Err(failed(e)));
        }
    }
}

type SnapshotStream = Pin<Box<dyn Stream<Item = Result<SnapshotResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Maintenance for MaintenanceService {
    /// Every alarm action goes through the log, as in etcd, so all members agree on them.
    async fn alarm(&self, req: Request<AlarmRequest>) -> Result<Response<AlarmResponse>, Status> {
        let who = self.pipeline.who(&req).await?;
        let r = InternalRaftRequest {
            alarm: Some(req.into_inner()),
            ..Default::default()
        };
        match self.pipeline.write(r, who).await? {
            ApplyResponse::Alarm(a) => Ok(Response::new(a)),
            _ => Err(EtcdError::Internal("actcd: unexpected apply result for alarm".into()).into()),
        }
    }

    async fn status(&self, _: Request<StatusRequest>) -> Result<Response<StatusResponse>, Status> {
        let raft = self.pipeline.raft_status().await?;
        let store = self.pipeline.store_status().await?;
        let id = self.pipeline.config.identity;
        Ok(Response::new(StatusResponse {
            header: Some(ResponseHeader {
                cluster_id: id.cluster_id,
                member_id: id.member_id,
                revision: store.revision,
                raft_term: raft.term,
            }),
            version: self.pipeline.config.version.clone(),
            db_size: store.db_size as i64,
            leader: raft.leader,
            raft_index: raft.commit,
            raft_term: raft.term,
            raft_applied_index: raft.applied,
            errors: store
                .alarms
                .iter()
                // etcd's entries are the alarm's protobuf text form, trailing space included.
                .map(|a| format!("memberID:{} alarm:{} ", a.member_id, alarm_name(a.alarm)))
                .collect(),
            db_size_in_use: store.db_size_in_use as i64,
            is_learner: raft.is_learner,
        }))
    }

    /// etcd's Defragment, for admins: this member's backend only (not through the log), as
    /// etcd does it; writes wait until it is done.
    async fn defragment(
        &self,
        req: Request<DefragmentRequest>,
    ) -> Result<Response<DefragmentResponse>, Status> {
        self.pipeline
            .check_admin(self.pipeline.who(&req).await?)
            .await?;
        tracing::info!("starting defragmentation");
        let started = std::time::Instant::now();
        let (before, after) = self
            .pipeline
            .routes
            .defragment
            .send(Defragment)
            .await
            .map_err(EtcdError::from)??;
        tracing::info!(
            current_db_size_bytes = before,
            current_db_size_bytes_after = after,
            took_ms = started.elapsed().as_millis() as u64,
            "finished defragmentation"
        );
        // etcd answers without a header.
        Ok(Response::new(DefragmentResponse { header: None }))
    }

    /// etcd's Hash: the whole backend (all tables), for admins.
    async fn hash(&self, req: Request<HashRequest>) -> Result<Response<HashResponse>, Status> {
        self.pipeline
            .check_admin(self.pipeline.who(&req).await?)
            .await?;
        let (hash, revision) = self
            .pipeline
            .routes
            .hash_backend
            .send(HashBackend)
            .await
            .map_err(EtcdError::from)??;
        let raft = self.pipeline.raft_status().await?;
        let id = self.pipeline.config.identity;
        Ok(Response::new(HashResponse {
            header: Some(ResponseHeader {
                cluster_id: id.cluster_id,
                member_id: id.member_id,
                revision,
                raft_term: raft.term,
            }),
            hash,
        }))
    }

    async fn hash_kv(
        &self,
        req: Request<HashKvRequest>,
    ) -> Result<Response<HashKvResponse>, Status> {
        // etcd keeps HashKV, Hash, Defragment and Snapshot for admins.
        self.pipeline
            .check_admin(self.pipeline.who(&req).await?)
            .await?;
        let r = self.pipeline.hash_kv(req.get_ref().revision).await?;
        let raft = self.pipeline.raft_status().await?;
        let id = self.pipeline.config.identity;
        Ok(Response::new(HashKvResponse {
            header: Some(ResponseHeader {
                cluster_id: id.cluster_id,
                member_id: id.member_id,
                revision: r.revision,
                raft_term: raft.term,
            }),
            hash: r.hash,
            compact_revision: r.compact_revision,
        }))
    }

    type SnapshotStream = SnapshotStream;

    /// etcd's Snapshot, for admins: the whole backend as a bbolt file (etcd's format, so
    /// `etcdutl snapshot status|restore` take it), streamed from a read transaction while
    /// writes go on (`stream_snapshot`).
    async fn snapshot(
        &self,
        req: Request<SnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        self.pipeline
            .check_admin(self.pipeline.who(&req).await?)
            .await?;
        let reader = self
            .pipeline
            .routes
            .open_reader
            .send(OpenStoreReader)
            .await
            .map_err(EtcdError::from)??;
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::task::spawn_blocking(move || stream_snapshot(reader, tx));
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    /// etcd's MoveLeader: only the leader takes it, the target must be a voting member, and
    /// the answer waits (up to the request timeout) until the target leads.
    async fn move_leader(
        &self,
        req: Request<MoveLeaderRequest>,
    ) -> Result<Response<MoveLeaderResponse>, Status> {
        let who = self.pipeline.who(&req).await?;
        self.pipeline.check_admin(who).await?;
        let target = req.get_ref().target_id;
        let p = &self.pipeline;
        let status = p.raft_status().await?;
        if status.leader != p.config.identity.member_id {
            return Err(EtcdError::NotLeader.into());
        }
        let members = p.members().await?;
        if !members.iter().any(|m| m.id == target && !m.is_learner) {
            return Err(EtcdError::BadLeaderTransferee.into());
        }
        p.routes
            .transfer_leader
            .send(TransferLeader { to: target })
            .await
            .map_err(EtcdError::from)?;
        let deadline = tokio::time::Instant::now() + p.config.request_timeout;
        while p.raft_status().await?.leader != target {
            if tokio::time::Instant::now() >= deadline {
                return Err(EtcdError::LeaderTransferTimeout.into());
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        Ok(Response::new(MoveLeaderResponse {
            header: Some(p.header(false).await?),
        }))
    }

    /// etcd's Downgrade, answered as etcd answers a target it can't go to: actcd has no
    /// earlier storage version to run as, so every target is refused (after etcd's format
    /// check), and there is never a downgrade job to cancel. For admins.
    async fn downgrade(
        &self,
        req: Request<DowngradeRequest>,
    ) -> Result<Response<DowngradeResponse>, Status> {
        use actcd_proto::etcdserverpb::downgrade_request::DowngradeAction;
        self.pipeline
            .check_admin(self.pipeline.who(&req).await?)
            .await?;
        let r = req.into_inner();
        match DowngradeAction::try_from(r.action) {
            Ok(DowngradeAction::Validate | DowngradeAction::Enable) => {
                if !is_downgrade_version(&r.version) {
                    return Err(EtcdError::WrongDowngradeVersionFormat.into());
                }
                self.pipeline.linearizable_barrier().await?;
                Err(EtcdError::InvalidDowngradeTargetVersion.into())
            }
            Ok(DowngradeAction::Cancel) => Err(EtcdError::NoInflightDowngrade.into()),
            Err(_) => Err(EtcdError::UnknownMethod.into()),
        }
    }
}
