//! `/v2/members` (list, leader, add, remove, update), `/v2/machines` and `/v2/stats`: the
//! cluster as etcd's v2 API shows it, over the same membership changes the v3 Cluster
//! service makes.

use std::sync::Arc;

use actcd_proto::etcdserverpb::MemberAddRequest;
use actcd_proto::etcdserverpb::cluster_server::Cluster;
use actcd_types::msg::MemberRecord;
use actcd_types::{AuthInfo, EtcdError};
use http::{Response, StatusCode};

use super::{V2Request, V2Routes, cluster_id, method_not_allowed, plain};
use crate::grpc::cluster::ClusterService;
use crate::http::body::Body;
use crate::pipeline::Pipeline;

pub(super) async fn handle(p: &Arc<Pipeline>, routes: &V2Routes, r: V2Request) -> Response<Body> {
    let path = r.path.as_str();
    if path == "/v2/machines" {
        return machines(p, &r).await;
    }
    if path == "/v2/members" || path.starts_with("/v2/members/") {
        return members(p, routes, r).await;
    }
    match path {
        "/v2/stats/store" => {
            if !matches!(r.method, http::Method::GET) {
                return method_not_allowed("GET");
            }
            match routes.stats.send(actcd_types::v2::V2StoreStats).await {
                Ok(s) => plain(StatusCode::OK, "application/json", s),
                Err(_) => internal(),
            }
        }
        "/v2/stats/self" => {
            if !matches!(r.method, http::Method::GET) {
                return method_not_allowed("GET");
            }
            self_stats(p).await
        }
        "/v2/stats/leader" => {
            if !matches!(r.method, http::Method::GET) {
                return method_not_allowed("GET");
            }
            leader_stats(p).await
        }
        _ => plain(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "404 page not found\n".into(),
        ),
    }
}

fn hex(id: u64) -> String {
    format!("{id:x}")
}

/// A JSON string, quoted.
fn q(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// A member as etcd's v2 API writes it ([`actcd_v2tree::member_json`]).
fn member_json(m: &MemberRecord) -> String {
    actcd_v2tree::member_json(m.id, &m.name, &m.peer_urls, &m.client_urls)
}

/// An `httptypes.HTTPError`: `{"message":…}` with its status.
fn http_error(p: &Pipeline, status: StatusCode, message: &str) -> Response<Body> {
    let mut r = plain(
        status,
        "application/json",
        format!("{{\"message\":{}}}", q(message)),
    );
    if let Ok(v) = http::HeaderValue::from_str(&cluster_id(p)) {
        r.headers_mut().insert("X-Etcd-Cluster-Id", v);
    }
    r
}

fn internal() -> Response<Body> {
    plain(
        StatusCode::INTERNAL_SERVER_ERROR,
        "application/json",
        "{\"message\":\"Internal Server Error\"}".into(),
    )
}

async fn machines(p: &Pipeline, r: &V2Request) -> Response<Body> {
    if !matches!(r.method, http::Method::GET | http::Method::HEAD) {
        return method_not_allowed("GET,HEAD");
    }
    let members = p.members().await.unwrap_or_default();
    let mut urls: Vec<String> = members.into_iter().flat_map(|m| m.client_urls).collect();
    urls.sort();
    plain(StatusCode::OK, "text/plain; charset=utf-8", urls.join(", "))
}

fn json_reply(p: &Pipeline, status: StatusCode, value: &str) -> Response<Body> {
    let mut r = plain(status, "application/json", format!("{value}\n"));
    if let Ok(v) = http::HeaderValue::from_str(&cluster_id(p)) {
        r.headers_mut().insert("X-Etcd-Cluster-Id", v);
    }
    r
}

async fn members(p: &Arc<Pipeline>, routes: &V2Routes, r: V2Request) -> Response<Body> {
    use http::Method;
    if !matches!(
        r.method,
        Method::GET | Method::POST | Method::DELETE | Method::PUT
    ) {
        return method_not_allowed("GET,POST,DELETE,PUT");
    }
    // Membership needs root when v2 auth is on (etcd's hasWriteRootAccess, GET included).
    let state = routes.auth_state();
    if state.enabled {
        let caller = routes.caller(&state, r.authorization.as_deref()).await;
        if !state.is_root_caller(&caller) {
            let a = actcd_v2auth::unauthorized_answer();
            let mut resp = plain(
                StatusCode::from_u16(a.status).unwrap_or(StatusCode::UNAUTHORIZED),
                "application/json",
                String::from_utf8_lossy(&a.body).into_owned(),
            );
            for (k, v) in &a.headers {
                if let (Ok(k), Ok(v)) = (
                    http::HeaderName::from_bytes(k.as_bytes()),
                    http::HeaderValue::from_str(v),
                ) {
                    resp.headers_mut().insert(k, v);
                }
            }
            return resp;
        }
    }
    let sub = r.path.strip_prefix("/v2/members").unwrap_or("");
    let sub = sub.strip_prefix('/').unwrap_or(sub);
    let svc = ClusterService {
        pipeline: Arc::clone(p),
    };
    match r.method {
        Method::GET => match sub {
            "" => {
                let mut members = p.members().await.unwrap_or_default();
                members.sort_by_key(|m| m.id);
                let all: Vec<String> = members.iter().map(member_json).collect();
                json_reply(
                    p,
                    StatusCode::OK,
                    &format!("{{\"members\":[{}]}}", all.join(",")),
                )
            }
            "leader" => {
                let leader = p.raft_status().await.map(|s| s.leader).unwrap_or(0);
                let members = p.members().await.unwrap_or_default();
                match members.iter().find(|m| m.id == leader && leader != 0) {
                    Some(m) => json_reply(p, StatusCode::OK, &member_json(m)),
                    None => http_error(p, StatusCode::SERVICE_UNAVAILABLE, "During election"),
                }
            }
            _ => http_error(p, StatusCode::NOT_FOUND, "Not found"),
        },
        Method::POST => {
            let urls = match peer_urls(&r) {
                Ok(u) => u,
                Err((status, msg)) => return http_error(p, status, &msg),
            };
            let req = tonic::Request::new(MemberAddRequest {
                peer_ur_ls: urls,
                is_learner: false,
            });
            match svc.member_add(req).await {
                Ok(resp) => {
                    let m = resp.into_inner().member.unwrap_or_default();
                    let record = MemberRecord {
                        id: m.id,
                        name: m.name,
                        peer_urls: m.peer_ur_ls,
                        client_urls: m.client_ur_ls,
                        is_learner: m.is_learner,
                    };
                    json_reply(p, StatusCode::CREATED, &member_json(&record))
                }
                Err(s) => status_error(p, &s),
            }
        }
        Method::DELETE => {
            let Some(id) = member_id(p, sub) else {
                return http_error(p, StatusCode::NOT_FOUND, &format!("No such member: {sub}"));
            };
            match svc.remove(AuthInfo::default(), id).await {
                Ok(_) => no_content(p),
                Err(EtcdError::MemberRemoved) => http_error(
                    p,
                    StatusCode::GONE,
                    &format!("Member permanently removed: {id:x}"),
                ),
                Err(e) => member_error(p, &e, id),
            }
        }
        _ => {
            let Some(id) = member_id(p, sub) else {
                return http_error(p, StatusCode::NOT_FOUND, &format!("No such member: {sub}"));
            };
            let urls = match peer_urls(&r) {
                Ok(u) => u,
                Err((status, msg)) => return http_error(p, status, &msg),
            };
            match svc.update(AuthInfo::default(), id, urls).await {
                Ok(_) => no_content(p),
                // etcd's update does not name a removed member: it answers 500.
                Err(EtcdError::MemberRemoved) => server_error(p),
                Err(e) => member_error(p, &e, id),
            }
        }
    }
}

fn no_content(p: &Pipeline) -> Response<Body> {
    let mut r = plain(StatusCode::NO_CONTENT, "text/plain", String::new());
    r.headers_mut().remove(http::header::CONTENT_TYPE);
    if let Ok(v) = http::HeaderValue::from_str(&cluster_id(p)) {
        r.headers_mut().insert("X-Etcd-Cluster-Id", v);
    }
    r
}

/// A member id in the path: hex, as etcd writes ids.
fn member_id(_p: &Pipeline, s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

/// The peer URLs of an add or update ([`actcd_v2tree::peer_urls`]); `Err` is etcd's answer.
fn peer_urls(r: &V2Request) -> Result<Vec<String>, (StatusCode, String)> {
    actcd_v2tree::peer_urls(r.content_type.as_deref(), &r.body).map_err(|e| {
        (
            StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST),
            e.message,
        )
    })
}

/// A refused add (the v3 service's answer) as etcd's v2 members API answers it: the conflicts
/// by name, anything else a 500 (etcd's `WriteError`).
fn status_error(p: &Pipeline, s: &tonic::Status) -> Response<Body> {
    let msg = s.message();
    if msg.contains("Peer URLs already exists") {
        return http_error(p, StatusCode::CONFLICT, "membership: peerURL exists");
    }
    if msg.contains("member ID already exist") {
        return http_error(p, StatusCode::CONFLICT, "membership: ID exists");
    }
    server_error(p)
}

/// A membership change's refusal as etcd's v2 members API answers it: the conflicts and an
/// unknown member by name, anything else a 500 (etcd's `WriteError`, which names only its own
/// HTTP errors).
fn member_error(p: &Pipeline, e: &EtcdError, id: u64) -> Response<Body> {
    match e {
        EtcdError::PeerUrlExist => {
            http_error(p, StatusCode::CONFLICT, "membership: peerURL exists")
        }
        EtcdError::MemberExist => http_error(p, StatusCode::CONFLICT, "membership: ID exists"),
        EtcdError::MemberNotFound => {
            http_error(p, StatusCode::NOT_FOUND, &format!("No such member: {id:x}"))
        }
        _ => server_error(p),
    }
}

/// etcd's 500 from the members API (with the cluster id it set on entry).
fn server_error(p: &Pipeline) -> Response<Body> {
    http_error(
        p,
        StatusCode::INTERNAL_SERVER_ERROR,
        "Internal Server Error",
    )
}

/// `/v2/stats/self`: who this member is and whom it follows.
async fn self_stats(p: &Pipeline) -> Response<Body> {
    let me = p.config.identity.member_id;
    let status = p.raft_status().await.ok();
    let members = p.members().await.unwrap_or_default();
    let name = members
        .iter()
        .find(|m| m.id == me)
        .map(|m| m.name.clone())
        .unwrap_or_default();
    let leader = status.as_ref().map_or(0, |s| s.leader);
    let state = if leader == me && me != 0 {
        "StateLeader"
    } else {
        "StateFollower"
    };
    let (start, since) = p.started_at();
    let body = format!(
        "{{\"name\":{},\"id\":{},\"state\":{},\"startTime\":{},\"leaderInfo\":{{\"leader\":{},\"uptime\":{},\"startTime\":{}}},\"recvAppendRequestCnt\":0,\"sendAppendRequestCnt\":0}}",
        q(&name),
        q(&hex(me)),
        q(state),
        q(&start),
        q(&hex(leader)),
        q(&format!("{:?}", since.elapsed())),
        q(&start),
    );
    plain(StatusCode::OK, "application/json", body)
}

/// `/v2/stats/leader`: the followers as the leader sees them; 403 on a follower.
async fn leader_stats(p: &Pipeline) -> Response<Body> {
    let me = p.config.identity.member_id;
    let leader = p.raft_status().await.map(|s| s.leader).unwrap_or(0);
    if leader != me || me == 0 {
        return plain(
            StatusCode::FORBIDDEN,
            "application/json",
            "{\"message\":\"not current leader\"}".into(),
        );
    }
    let members = p.members().await.unwrap_or_default();
    let followers: Vec<String> = members
        .iter()
        .filter(|m| m.id != me)
        .map(|m| {
            format!(
                "{}:{{\"latency\":{{\"current\":0,\"average\":0,\"standardDeviation\":0,\"minimum\":0,\"maximum\":0}},\"counts\":{{\"fail\":0,\"success\":0}}}}",
                q(&hex(m.id))
            )
        })
        .collect();
    plain(
        StatusCode::OK,
        "application/json",
        format!(
            "{{\"leader\":{},\"followers\":{{{}}}}}",
            q(&hex(me)),
            followers.join(",")
        ),
    )
}
