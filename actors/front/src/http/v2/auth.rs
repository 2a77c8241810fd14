//! `/v2/auth` (etcd's v2 auth API) and `/v2/security` (the v2 auth RFC's): the caller is
//! identified from Basic credentials, `actcd_v2auth::plan` decides, and a change is hashed
//! (bcrypt, on the blocking pool) if it sets a password, then proposed; the v2 store applies
//! it in log order and renders the answer the plan asked for.

use actcd_proto::actcdpb::{InternalRaftRequest, V2Request as Entry};
use actcd_types::msg::ApplyResponse;
use actcd_v2auth::{Api, HttpAnswer, Plan, Proposal};
use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};

use super::{V2Request, V2Routes, cluster_id, etcd_error, now_nanos};
use crate::http::body::Body;
use crate::pipeline::Pipeline;

pub(super) async fn handle(
    p: &Pipeline,
    routes: &V2Routes,
    r: V2Request,
    api: Api,
) -> Response<Body> {
    let state = routes.auth_state();
    let caller = routes.caller(&state, r.authorization.as_deref()).await;
    let prefix = match api {
        Api::V2Auth => "/v2/auth",
        Api::Security => "/v2/security",
    };
    let sub = r.path.strip_prefix(prefix).unwrap_or("");
    match actcd_v2auth::plan(&state, api, r.method.as_str(), sub, &r.body, &caller) {
        Plan::Answer(a) => answer(p, a),
        Plan::Propose {
            op,
            hash_first,
            render,
        } => {
            let op = match hash_first {
                Some(pw) => {
                    let cost = routes.bcrypt_cost;
                    let hashed =
                        tokio::task::spawn_blocking(move || actcd_v2auth::hash_password(&pw, cost))
                            .await;
                    match hashed {
                        Ok(Ok(hash)) => op.with_hash(hash),
                        Ok(Err(e)) => return answer(p, render.render(Err(e))),
                        Err(e) => return etcd_error(p, &actcd_types::EtcdError::internal(e)),
                    }
                }
                None => op,
            };
            let entry = Entry {
                method: "AUTH".into(),
                auth_op: Proposal { op, render }.encode(),
                time: now_nanos(),
                ..Default::default()
            };
            let proposal = InternalRaftRequest {
                v2: Some(entry),
                ..Default::default()
            };
            match p.write_internal(proposal).await {
                Ok(ApplyResponse::V2(reply)) => answer(
                    p,
                    HttpAnswer {
                        status: reply.status,
                        headers: reply.headers,
                        body: reply.body.into_bytes(),
                        cluster_id: false,
                    },
                ),
                Ok(other) => etcd_error(
                    p,
                    &actcd_types::EtcdError::internal(format!("unexpected answer {other:?}")),
                ),
                Err(e) => etcd_error(p, &e),
            }
        }
    }
}

/// An auth answer as an HTTP response. The v2 store marks where etcd sets the cluster id
/// header with an empty value; it is filled here.
fn answer(p: &Pipeline, a: HttpAnswer) -> Response<Body> {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(a.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    if a.cluster_id {
        b = b.header("X-Etcd-Cluster-Id", cluster_id(p));
    }
    for (k, v) in &a.headers {
        if k.eq_ignore_ascii_case("X-Etcd-Cluster-Id") && v.is_empty() {
            b = b.header("X-Etcd-Cluster-Id", cluster_id(p));
        } else {
            b = b.header(k.as_str(), v.as_str());
        }
    }
    b.body(Full::new(Bytes::from(a.body)).boxed())
        .unwrap_or_default()
}
