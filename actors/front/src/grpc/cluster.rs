//! etcd's Cluster service: membership changes go through the log (adds, removals and
//! promotions as raft configuration changes) and are validated when applied, in log order, by
//! every member alike; the checks that depend on which members have started (etcd's
//! `--strict-reconfig-check`, on by default) are made here first, against the applied members.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actcd_proto::actcdpb::member_change::Kind;
use actcd_proto::actcdpb::{InternalRaftRequest, MemberChange};
use actcd_proto::etcdserverpb::cluster_server::Cluster;
use actcd_proto::etcdserverpb::{
    Member, MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
    MemberUpdateRequest, MemberUpdateResponse,
};
use actcd_types::msg::{ApplyResponse, MemberRecord, PeerActivity};
use actcd_types::{AuthInfo, EtcdError};
use tonic::{Request, Response, Status};

use crate::pipeline::Pipeline;

pub struct ClusterService {
    pub pipeline: Arc<Pipeline>,
}

pub(crate) fn to_pb(m: MemberRecord) -> Member {
    Member {
        id: m.id,
        name: m.name,
        peer_ur_ls: m.peer_urls,
        client_ur_ls: m.client_urls,
        is_learner: m.is_learner,
    }
}

/// etcd's `types.NewURLs`: at least one URL, each `scheme://host:port` with an http(s) or
/// unix(s) scheme and no path.
pub fn check_peer_urls(urls: &[String]) -> Result<(), EtcdError> {
    if urls.is_empty() {
        return Err(EtcdError::MemberBadUrls);
    }
    for u in urls {
        let (scheme, rest) = u.split_once("://").ok_or(EtcdError::MemberBadUrls)?;
        if !matches!(scheme, "http" | "https" | "unix" | "unixs") {
            return Err(EtcdError::MemberBadUrls);
        }
        let (host, port) = rest.rsplit_once(':').ok_or(EtcdError::MemberBadUrls)?;
        if host.is_empty() || host.contains('/') || port.is_empty() || port.parse::<u16>().is_err()
        {
            return Err(EtcdError::MemberBadUrls);
        }
    }
    Ok(())
}

/// etcd's id for a member added at run time: SHA-1 over its sorted peer URLs and the time in
/// seconds, first 8 bytes big-endian (unique as long as two adds of one URL set are a second
/// apart, which the peer-URL check enforces anyway).
fn new_member_id(peer_urls: &[String]) -> u64 {
    let mut urls = peer_urls.to_vec();
    urls.sort();
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut h = sha1_smol::Sha1::new();
    h.update(urls.concat().as_bytes());
    h.update(secs.to_string().as_bytes());
    let d = h.digest().bytes();
    let mut id = [0u8; 8];
    id.copy_from_slice(&d[..8]);
    u64::from_be_bytes(id)
}

/// A voter has started once it has published its name.
fn started_voters(members: &[MemberRecord]) -> impl Iterator<Item = &MemberRecord> {
    members
        .iter()
        .filter(|m| !m.is_learner && !m.name.is_empty())
}

/// etcd's `IsReadyToAddVotingMember`: after the add, the started voters still make a quorum
/// (a one-member cluster may always grow to two).
pub fn ready_to_add_voter(members: &[MemberRecord]) -> bool {
    let voters = members.iter().filter(|m| !m.is_learner).count() + 1;
    let started = started_voters(members).count();
    (started == 1 && voters == 2) || started > voters / 2
}

/// etcd's `IsReadyToRemoveVotingMember`: without `id`, the started voters still make a quorum.
pub fn ready_to_remove_voter(members: &[MemberRecord], id: u64) -> bool {
    let voters = members.iter().filter(|m| !m.is_learner).count();
    let started = started_voters(members).filter(|m| m.id != id).count();
    started > (voters - 1) / 2
}

/// etcd's `IsReadyToPromoteMember`: with the learner as a voter, the started voters (counting
/// it) still make a quorum.
pub fn ready_to_promote(members: &[MemberRecord]) -> bool {
    let voters = members.iter().filter(|m| !m.is_learner).count() + 1;
    let started = started_voters(members).count() + 1;
    started > voters / 2
}

/// etcd's `HealthInterval`: a peer counts as connected once its stream has been up this long.
pub const HEALTH_INTERVAL: Duration = Duration::from_secs(5);

/// How many of `voters` (ids) count as connected: this member always, the others once their
/// stream has been up for [`HEALTH_INTERVAL`] (etcd's `numConnectedSince`).
fn connected(voters: &[u64], me: u64, activity: &HashMap<u64, Duration>) -> usize {
    voters
        .iter()
        .filter(|&&id| id == me || activity.get(&id).is_some_and(|d| *d >= HEALTH_INTERVAL))
        .count()
}

/// etcd's `mayAddMember` health rule since 3.5.30 (#21669): counting the new member as down,
/// the connected voters still make a quorum of the grown cluster (3.5.1 asked for every voter,
/// so one member down blocked every add). A one-member cluster may always grow.
pub fn healthy_to_add(voters: &[u64], me: u64, activity: &HashMap<u64, Duration>) -> bool {
    let grown = voters.len() + 1;
    voters.len() == 1 || connected(voters, me, activity) > grown / 2
}

/// etcd's `mayRemoveMember` health rule: a member that is down may go; otherwise the connected
/// voters without it still make a quorum.
pub fn healthy_to_remove(
    voters: &[u64],
    me: u64,
    id: u64,
    activity: &HashMap<u64, Duration>,
) -> bool {
    if id != me && !activity.contains_key(&id) {
        return true;
    }
    connected(voters, me, activity) > voters.len().saturating_sub(1) / 2 + 1
}

impl ClusterService {
    async fn voters_and_activity(
        &self,
        members: &[MemberRecord],
    ) -> Result<(Vec<u64>, HashMap<u64, Duration>), EtcdError> {
        let voters = members
            .iter()
            .filter(|m| !m.is_learner)
            .map(|m| m.id)
            .collect();
        let activity = self
            .pipeline
            .routes
            .peer_activity
            .send(PeerActivity)
            .await?;
        Ok((voters, activity))
    }

    /// `--strict-reconfig-check`: refuse member changes that could lose quorum.
    fn strict(&self) -> bool {
        self.pipeline.config.strict_reconfig_check
    }

    fn me(&self) -> u64 {
        self.pipeline.config.identity.member_id
    }

    /// Removes member `id` with etcd's checks (a voter only while enough members are started
    /// and healthy); the members after it. Shared by the v3 Cluster service and the v2 members
    /// API, which tells a removed id (410) from an unknown one.
    pub(crate) async fn remove(&self, who: AuthInfo, id: u64) -> Result<Vec<Member>, EtcdError> {
        let current = self.pipeline.members().await?;
        // `--strict-reconfig-check=false` skips etcd's quorum and health checks.
        let is_voter = self.strict() && current.iter().any(|m| m.id == id && !m.is_learner);
        if is_voter && !ready_to_remove_voter(&current, id) {
            return Err(EtcdError::MemberNotEnoughStarted);
        }
        if is_voter {
            let (voters, activity) = self.voters_and_activity(&current).await?;
            if !healthy_to_remove(&voters, self.me(), id, &activity) {
                return Err(EtcdError::Unhealthy);
            }
        }
        let (_, members) = self.change(who, Kind::Remove, id, vec![]).await?;
        Ok(members)
    }

    /// Updates member `id`'s peer URLs; the members after it.
    pub(crate) async fn update(
        &self,
        who: AuthInfo,
        id: u64,
        peer_urls: Vec<String>,
    ) -> Result<Vec<Member>, EtcdError> {
        check_peer_urls(&peer_urls)?;
        let (_, members) = self.change(who, Kind::Update, id, peer_urls).await?;
        Ok(members)
    }

    /// Membership changes need root when auth is on (etcd's
    /// `checkMembershipOperationPermission`).
    async fn admin<T>(&self, req: &Request<T>) -> Result<AuthInfo, EtcdError> {
        let who = self.pipeline.who(req).await?;
        self.pipeline.check_admin(who.clone()).await?;
        Ok(who)
    }

    async fn change(
        &self,
        who: AuthInfo,
        kind: Kind,
        member_id: u64,
        peer_urls: Vec<String>,
    ) -> Result<(Option<Member>, Vec<Member>), EtcdError> {
        let req = InternalRaftRequest {
            member_change: Some(MemberChange {
                kind: kind as i32,
                member_id,
                peer_urls,
            }),
            ..Default::default()
        };
        match self.pipeline.write(req, who).await? {
            ApplyResponse::Members { member, members } => {
                Ok((member.map(to_pb), members.into_iter().map(to_pb).collect()))
            }
            other => Err(EtcdError::internal(format!(
                "unexpected answer to a membership change: {other:?}"
            ))),
        }
    }
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_add(
        &self,
        req: Request<MemberAddRequest>,
    ) -> Result<Response<MemberAddResponse>, Status> {
        let who = self.admin(&req).await?;
        let r = req.into_inner();
        check_peer_urls(&r.peer_ur_ls)?;
        let current = self.pipeline.members().await?;
        if self.strict() {
            if !r.is_learner && !ready_to_add_voter(&current) {
                return Err(EtcdError::MemberNotEnoughStarted.into());
            }
            let (voters, activity) = self.voters_and_activity(&current).await?;
            if !healthy_to_add(&voters, self.me(), &activity) {
                return Err(EtcdError::Unhealthy.into());
            }
        }
        let kind = if r.is_learner {
            Kind::AddLearner
        } else {
            Kind::Add
        };
        let id = new_member_id(&r.peer_ur_ls);
        let (member, members) = self.change(who, kind, id, r.peer_ur_ls).await?;
        let header = self.pipeline.header(false).await?;
        Ok(Response::new(MemberAddResponse {
            header: Some(header),
            member,
            members,
        }))
    }

    async fn member_remove(
        &self,
        req: Request<MemberRemoveRequest>,
    ) -> Result<Response<MemberRemoveResponse>, Status> {
        let who = self.admin(&req).await?;
        let members = self.remove(who, req.get_ref().id).await?;
        let header = self.pipeline.header(false).await?;
        Ok(Response::new(MemberRemoveResponse {
            header: Some(header),
            members,
        }))
    }

    async fn member_update(
        &self,
        req: Request<MemberUpdateRequest>,
    ) -> Result<Response<MemberUpdateResponse>, Status> {
        let who = self.admin(&req).await?;
        let r = req.into_inner();
        let members = self.update(who, r.id, r.peer_ur_ls).await?;
        let header = self.pipeline.header(false).await?;
        Ok(Response::new(MemberUpdateResponse {
            header: Some(header),
            members,
        }))
    }

    async fn member_list(
        &self,
        req: Request<MemberListRequest>,
    ) -> Result<Response<MemberListResponse>, Status> {
        if req.get_ref().linearizable {
            self.pipeline.linearizable_barrier().await?;
        }
        // With auth on, for logged-in users (etcd 3.5.28+; 3.5.1 listed members to anyone).
        let who = self.pipeline.who(&req).await?;
        self.pipeline.require_user(&who)?;
        let members = self
            .pipeline
            .members()
            .await?
            .into_iter()
            .map(to_pb)
            .collect();
        let header = self.pipeline.header(false).await?;
        Ok(Response::new(MemberListResponse {
            header: Some(header),
            members,
        }))
    }

    async fn member_promote(
        &self,
        req: Request<MemberPromoteRequest>,
    ) -> Result<Response<MemberPromoteResponse>, Status> {
        let who = self.admin(&req).await?;
        let id = req.get_ref().id;
        // etcd's order: the leader's view of the learner's log first, then the member checks.
        self.pipeline.learner_ready(id).await?;
        let current = self.pipeline.members().await?;
        match current.iter().find(|m| m.id == id) {
            None => return Err(EtcdError::MemberNotFound.into()),
            Some(m) if !m.is_learner => return Err(EtcdError::MemberNotLearner.into()),
            Some(_) if self.strict() && !ready_to_promote(&current) => {
                return Err(EtcdError::MemberNotEnoughStarted.into());
            }
            Some(_) => {}
        }
        let (_, members) = self.change(who, Kind::Promote, id, vec![]).await?;
        let header = self.pipeline.header(false).await?;
        Ok(Response::new(MemberPromoteResponse {
            header: Some(header),
            members,
        }))
    }
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
pub(crate) mod tests;
