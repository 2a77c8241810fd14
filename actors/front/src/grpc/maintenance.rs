use std::pin::Pin;
use std::sync::Arc;

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::maintenance_server::Maintenance;
use actcd_proto::etcdserverpb::{
    AlarmRequest, AlarmResponse, AlarmType, DefragmentRequest, DefragmentResponse, DowngradeInfo,
    DowngradeRequest, DowngradeResponse, HashKvRequest, HashKvResponse, HashRequest, HashResponse,
    MoveLeaderRequest, MoveLeaderResponse, ResponseHeader, SnapshotRequest, SnapshotResponse,
    StatusRequest, StatusResponse,
};
use actcd_types::EtcdError;
use actcd_types::msg::{
    ApplyResponse, Defragment, HashBackend, SnapshotChunks, SnapshotStream, TransferLeader,
};
use futures::{Stream, StreamExt};
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

/// The storage schema etcd 3.6 reports for a backend of this API version's layout, which
/// records none: `major.minor.0` (`3.5.0`), as `schema.DetectSchemaVersion` answers for a 3.5
/// backend.
fn storage_version(api_version: &str) -> String {
    let mut parts = api_version.split('.');
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => format!("{major}.{minor}.0"),
        _ => api_version.to_string(),
    }
}

fn alarm_name(alarm: i32) -> &'static str {
    AlarmType::try_from(alarm).map_or("UNKNOWN", |a| a.as_str_name())
}

type SnapshotResponses = Pin<Box<dyn Stream<Item = Result<SnapshotResponse, Status>> + Send>>;

impl MaintenanceService {
    /// The admin check of Defragment, Snapshot, Hash and HashKV as etcd 3.5.1 answers
    /// it: a caller without the root role gets the auth store's own refusal, code Unknown
    /// (`auth: permission denied`, `auth: user name is empty`, `auth: user not found`), not
    /// the `etcdserver: permission denied` every other service sends; a bad token, likewise,
    /// `auth: invalid auth token` (code Unknown). etcd 3.5.1 does not check MoveLeader
    /// and Downgrade at all; etcd 3.6 does, with `etcdserver: permission denied`, which is
    /// what they answer here: letting any user move the leader would be a hole.
    async fn admin_as_etcd_3_5<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let who = self
            .pipeline
            .who(req)
            .await
            .map_err(EtcdError::unconverted_admin_refusal)?;
        self.pipeline
            .check_admin(who)
            .await
            .map_err(|e| e.unconverted_admin_refusal().into())
    }
}

#[tonic::async_trait]
impl Maintenance for MaintenanceService {
    /// Every alarm action goes through the log, as in etcd, so all members agree on them. With
    /// auth on, listing alarms needs a logged-in user and raising or disarming one the root
    /// role (etcd 3.5.28+, GHSA-q8m4-xhhv-38mg: 3.5.1 let anyone raise NOSPACE, which stops
    /// every write in the cluster).
    async fn alarm(&self, req: Request<AlarmRequest>) -> Result<Response<AlarmResponse>, Status> {
        use actcd_proto::etcdserverpb::alarm_request::AlarmAction;
        let who = self.pipeline.who(&req).await?;
        if req.get_ref().action == AlarmAction::Get as i32 {
            self.pipeline.require_user(&who)?;
        } else {
            self.pipeline.check_admin(who.clone()).await?;
        }
        let r = InternalRaftRequest {
            alarm: Some(req.into_inner()),
            ..Default::default()
        };
        match self.pipeline.write(r, who).await? {
            ApplyResponse::Alarm(a) => Ok(Response::new(a)),
            _ => Err(EtcdError::Internal("actcd: unexpected apply result for alarm".into()).into()),
        }
    }

    /// With auth on, for logged-in users (etcd 3.5.28+; 3.5.1 answered anyone). `errors` starts
    /// with `etcdserver: no leader` while no leader is known, then the alarms, as in etcd 3.5
    /// and 3.6. etcd 3.6's fields are filled as etcd 3.6 fills them on a 3.5-schema backend
    /// in a 3.5 cluster: `storageVersion` the storage schema (`3.5.0`), `dbSizeQuota` the
    /// effective `--quota-backend-bytes` (2 GiB for 0, etcd #20790), `downgradeInfo` always
    /// present, disabled (actcd never downgrades).
    async fn status(
        &self,
        req: Request<StatusRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        let who = self.pipeline.who(&req).await?;
        self.pipeline.require_user(&who)?;
        let raft = self.pipeline.raft_status().await?;
        let store = self.pipeline.store_status().await?;
        let alarms = self.pipeline.alarms().await?;
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
            errors: (raft.leader == 0)
                .then(|| EtcdError::NoLeader.to_string())
                .into_iter()
                // etcd's entries are the alarm's protobuf text form, trailing space included.
                .chain(
                    alarms.iter().map(|a| {
                        format!("memberID:{} alarm:{} ", a.member_id, alarm_name(a.alarm))
                    }),
                )
                .collect(),
            db_size_in_use: store.db_size_in_use as i64,
            is_learner: raft.is_learner,
            storage_version: storage_version(&self.pipeline.config.version),
            db_size_quota: i64::try_from(self.pipeline.config.quota_bytes).unwrap_or(i64::MAX),
            downgrade_info: Some(DowngradeInfo {
                enabled: false,
                target_version: String::new(),
            }),
        }))
    }

    /// etcd's Defragment, for admins: this member's backend only (not through the log), as
    /// etcd does it; writes wait until it is done.
    async fn defragment(
        &self,
        req: Request<DefragmentRequest>,
    ) -> Result<Response<DefragmentResponse>, Status> {
        self.admin_as_etcd_3_5(&req).await?;
        tracing::info!("starting defragmentation");
        let started = std::time::Instant::now();
        let (before, after) = self
            .pipeline
            .routes
            .defragment
            .send(Defragment)
            .await
            .map_err(EtcdError::from)?
            .inspect_err(|e| tracing::warn!(error = %e, "failed to defragment"))?;
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
        self.admin_as_etcd_3_5(&req).await?;
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
        self.admin_as_etcd_3_5(&req).await?;
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
            // etcd 3.6: the revision hashed up to, the one asked for or else the current one.
            hash_revision: match req.get_ref().revision {
                0 => r.revision,
                asked => asked,
            },
        }))
    }

    type SnapshotStream = SnapshotResponses;

    /// etcd's Snapshot, for admins: the whole backend as a bbolt file (etcd's format, so
    /// `etcdutl snapshot status|restore` take it), streamed by the store from a read
    /// transaction while writes go on; the chunks are forwarded as they come.
    async fn snapshot(
        &self,
        req: Request<SnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        self.admin_as_etcd_3_5(&req).await?;
        let SnapshotChunks(chunks) = self
            .pipeline
            .routes
            .snapshot
            .send(SnapshotStream)
            .await
            .map_err(EtcdError::from)??;
        let responses = tokio_stream::wrappers::ReceiverStream::new(chunks).map(|chunk| {
            chunk
                .map(|c| SnapshotResponse {
                    header: None,
                    remaining_bytes: c.remaining_bytes,
                    blob: c.blob,
                    // etcd 3.6 sends the file's recorded storage version: none in a 3.5 file.
                    version: String::new(),
                })
                .map_err(Status::from)
        });
        Ok(Response::new(Box::pin(responses)))
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
