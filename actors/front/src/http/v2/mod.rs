//! etcd's v2 HTTP API on the client port (`--enable-v2`): `/v2/keys` (`keys.rs`),
//! `/v2/auth` and the v2 auth RFC's `/v2/security` (`auth.rs`), `/v2/members`,
//! `/v2/machines` and `/v2/stats` (`cluster.rs`).
//!
//! The front only carries requests: the v2 store actor owns the tree and renders the keys
//! API's answers, `actcd_v2tree` parses requests as etcd does (paths, forms, keys requests,
//! member bodies), and `actcd_v2auth` decides every auth request (an answer now, or a change
//! to propose and how to render its result).
//! Writes, quorum reads and auth changes are proposed through the log like any request, as
//! internal requests (v2 requests are judged by v2 auth here, before proposing, as etcd
//! does; v3 auth never judges them). Basic credentials cost a bcrypt check: checks run on
//! the blocking pool and successful ones are remembered for the credentials and hash they
//! were made with.

mod auth;
mod cluster;
mod keys;

use std::sync::Arc;

use actcd_types::v2::V2Reply;
use actcd_v2auth::{AuthState, Caller};
use actcd_v2tree::{html_escape, mux_clean_path, percent_decode};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

use crate::http::body::Body;
use crate::pipeline::Pipeline;
pub use crate::pipeline::V2Routes;

impl V2Routes {
    fn auth_state(&self) -> Arc<AuthState> {
        Arc::clone(&self.auth.borrow())
    }

    /// Who sent `authorization`, as `actcd_v2auth::authenticate` decides, with good
    /// credentials remembered (a changed password has a new hash, so it is checked again).
    async fn caller(&self, state: &AuthState, authorization: Option<&str>) -> Caller {
        let Some(value) = authorization.filter(|v| !v.is_empty()) else {
            return Caller::Anonymous;
        };
        let Some((name, pw)) = actcd_v2auth::parse_basic(value) else {
            return Caller::BadCredentials;
        };
        let Some(user) = state.users.get(&name) else {
            return Caller::BadCredentials;
        };
        let hash = user.password_hash.clone();
        let key = (name.clone(), pw.clone());
        if self
            .verified
            .lock()
            .is_ok_and(|v| v.get(&key).is_some_and(|h| *h == hash))
        {
            return Caller::User(name);
        }
        let checked = hash.clone();
        let good =
            tokio::task::spawn_blocking(move || actcd_v2auth::verify_password(&checked, &pw))
                .await
                .unwrap_or(false);
        if !good {
            return Caller::BadCredentials;
        }
        if let Ok(mut v) = self.verified.lock() {
            if v.len() > 10_000 {
                v.clear();
            }
            v.insert(key, hash);
        }
        Caller::User(name)
    }
}

/// A request's parts the v2 handlers need.
pub(crate) struct V2Request {
    pub method: http::Method,
    /// The decoded path.
    pub path: String,
    /// The raw query string.
    pub query: String,
    pub content_type: Option<String>,
    pub authorization: Option<String>,
    pub body: Bytes,
}

/// Serves a `/v2/...` path; `None` when v2 is off (the caller answers 404).
pub async fn handle(p: &Arc<Pipeline>, req: Request<Incoming>) -> Option<Response<Body>> {
    let routes = p.routes.v2.clone()?;
    let raw_path = req.uri().path().to_string();
    // Go's ServeMux answers a path that is not clean with a redirect to the clean one.
    let clean = mux_clean_path(&raw_path);
    if clean != raw_path {
        let mut location = clean;
        if let Some(q) = req.uri().query() {
            location.push('?');
            location.push_str(q);
        }
        let body = if req.method() == http::Method::GET {
            format!(
                "<a href=\"{}\">Moved Permanently</a>.\n\n",
                html_escape(&location)
            )
        } else {
            String::new()
        };
        let mut r = plain(
            StatusCode::MOVED_PERMANENTLY,
            "text/html; charset=utf-8",
            body,
        );
        if let Ok(v) = http::HeaderValue::from_str(&location) {
            r.headers_mut().insert(http::header::LOCATION, v);
        }
        if req.method() != http::Method::GET {
            r.headers_mut().remove(http::header::CONTENT_TYPE);
        }
        return Some(r);
    }
    // etcd's CORS layer answers OPTIONS itself, before any handler.
    if req.method() == http::Method::OPTIONS {
        return Some(
            Response::builder()
                .status(StatusCode::OK)
                .body(Full::new(Bytes::new()).boxed())
                .unwrap_or_default(),
        );
    }
    let method = req.method().clone();
    let query = req.uri().query().unwrap_or("").to_string();
    let header = |name: http::header::HeaderName| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let content_type = header(http::header::CONTENT_TYPE);
    let authorization = header(http::header::AUTHORIZATION);
    let limit = p.config.max_recv_bytes;
    let body = match http_body_util::Limited::new(req.into_body(), limit)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let path = percent_decode(&raw_path);
    // Only what the authorization table (`routes.rs`) lists is served.
    actcd_authz::routes::http_needs(&path)?;
    let r = V2Request {
        method,
        path,
        query,
        content_type,
        authorization,
        body,
    };
    let answer = if r.path == "/v2/keys" || r.path.starts_with("/v2/keys/") {
        keys::handle(p, &routes, r).await
    } else if r.path == "/v2/auth" || r.path.starts_with("/v2/auth/") {
        auth::handle(p, &routes, r, actcd_v2auth::Api::V2Auth).await
    } else if r.path == "/v2/security" || r.path.starts_with("/v2/security/") {
        auth::handle(p, &routes, r, actcd_v2auth::Api::Security).await
    } else {
        cluster::handle(p, &routes, r).await
    };
    Some(answer)
}

/// Go's `r.Form` for a request ([`actcd_v2tree::parse_form`]): the body's form values, then
/// the query's; `Err` is Go's `ParseForm` error.
pub(crate) fn form(r: &V2Request) -> Result<Vec<(String, String)>, String> {
    actcd_v2tree::parse_form(
        r.method.as_str(),
        r.content_type.as_deref(),
        &r.body,
        &r.query,
    )
}

pub(crate) fn plain(status: StatusCode, content_type: &str, body: String) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)).boxed())
        .unwrap_or_default()
}

/// etcd's cluster id as its v2 API writes it (hex, no padding).
pub(crate) fn cluster_id(p: &Pipeline) -> String {
    format!("{:x}", p.config.identity.cluster_id)
}

/// A v2 store answer with etcd's headers.
pub(crate) fn store_reply(p: &Pipeline, reply: &V2Reply, head_only: bool) -> Response<Body> {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("Content-Type", "application/json")
        .header("X-Etcd-Cluster-Id", cluster_id(p))
        .header("X-Etcd-Index", reply.etcd_index.to_string());
    // An error carries only the store index (etcd's `Error.WriteTo`).
    if reply.status < 400 {
        b = b
            .header("X-Raft-Index", reply.raft_index.to_string())
            .header("X-Raft-Term", reply.raft_term.to_string());
    }
    for (k, v) in &reply.headers {
        b = b.header(k.as_str(), v.as_str());
    }
    let body = if head_only {
        Bytes::new()
    } else {
        Bytes::from(reply.body.clone())
    };
    b.body(Full::new(body).boxed()).unwrap_or_default()
}

/// An error that is not the store's (a proposal that failed): etcd's v2 error JSON.
pub(crate) fn etcd_error(p: &Pipeline, e: &actcd_types::EtcdError) -> Response<Body> {
    // etcd maps a timed-out or failed proposal to 300 "Raft Internal Error".
    let cause = e.to_string();
    let body = format!(
        "{{\"errorCode\":300,\"message\":\"Raft Internal Error\",\"cause\":{},\"index\":0}}\n",
        serde_json::Value::String(cause)
    );
    Response::builder()
        .status(StatusCode::INTERNAL_SERVER_ERROR)
        .header("Content-Type", "application/json")
        .header("X-Etcd-Cluster-Id", cluster_id(p))
        .body(Full::new(Bytes::from(body)).boxed())
        .unwrap_or_default()
}

/// 405 with `Allow`, as etcd's `allowMethod` answers.
pub(crate) fn method_not_allowed(allow: &str) -> Response<Body> {
    let mut r = plain(
        StatusCode::METHOD_NOT_ALLOWED,
        "text/plain; charset=utf-8",
        "Method Not Allowed\n".into(),
    );
    if let Ok(v) = http::HeaderValue::from_str(allow) {
        r.headers_mut().insert(http::header::ALLOW, v);
    }
    r
}

/// The wall clock in Unix nanoseconds: the time TTLs in requests count from.
pub(crate) fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
