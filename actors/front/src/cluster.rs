use std::sync::Arc;

use actcd_proto::etcdserverpb::cluster_server::Cluster;
use actcd_proto::etcdserverpb::{
    Member, MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
    MemberUpdateRequest, MemberUpdateResponse,
};
use tonic::{Request, Response, Status};

use crate::pipeline::Pipeline;

pub struct ClusterService {
    pub pipeline: Arc<Pipeline>,
}

/// Membership changes need the multi-member work (peer transport, conf changes); until then they
/// are refused with a clear status instead of pretending to succeed.
fn not_yet(what: &str) -> Status {
    Status::unimplemented(format!("actcd: {what} is not supported by this version"))
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_add(
        &self,
        _: Request<MemberAddRequest>,
    ) -> Result<Response<MemberAddResponse>, Status> {
        Err(not_yet("MemberAdd"))
    }

    async fn member_remove(
        &self,
        _: Request<MemberRemoveRequest>,
    ) -> Result<Response<MemberRemoveResponse>, Status> {
        Err(not_yet("MemberRemove"))
    }

    async fn member_update(
        &self,
        _: Request<MemberUpdateRequest>,
    ) -> Result<Response<MemberUpdateResponse>, Status> {
        Err(not_yet("MemberUpdate"))
    }

    async fn member_list(
        &self,
        req: Request<MemberListRequest>,
    ) -> Result<Response<MemberListResponse>, Status> {
        if req.get_ref().linearizable {
            self.pipeline.linearizable_barrier().await?;
        }
        let members = self
            .pipeline
            .config
            .members
            .iter()
            .map(|m| Member {
                id: m.id,
                name: m.name.clone(),
                peer_ur_ls: m.peer_urls.clone(),
                client_ur_ls: m.client_urls.clone(),
                is_learner: false,
            })
            .collect();
        let header = self.pipeline.header(false).await?;
        Ok(Response::new(MemberListResponse {
            header: Some(header),
            members,
        }))
    }

    async fn member_promote(
        &self,
        _: Request<MemberPromoteRequest>,
    ) -> Result<Response<MemberPromoteResponse>, Status> {
        Err(not_yet("MemberPromote"))
    }
}
