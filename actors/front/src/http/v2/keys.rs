//! `/v2/keys`: parsed as etcd parses it, judged by v2 auth, then a local read of the v2
//! store, a watch, or a proposal (writes and `quorum=true` reads).

use std::time::Duration;

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_types::msg::ApplyResponse;
use actcd_types::v2::{V2Get, V2Reply, V2Watch};
use actcd_v2tree::{ECODE_INVALID_FORM, ECODE_UNAUTHORIZED, V2Error, parse_key_request};
use http::{Response, StatusCode};
use http_body_util::BodyExt;

use super::{V2Request, V2Routes, etcd_error, form, method_not_allowed, now_nanos, store_reply};
use crate::http::body::Body;
use crate::pipeline::Pipeline;

/// How long a watch waits for its event before the connection is closed (etcd: 5 minutes).
const WATCH_TIMEOUT: Duration = Duration::from_secs(300);

pub(super) async fn handle(p: &Pipeline, routes: &V2Routes, r: V2Request) -> Response<Body> {
    use http::Method;
    if !matches!(
        r.method,
        Method::HEAD | Method::GET | Method::PUT | Method::POST | Method::DELETE
    ) {
        return method_not_allowed("HEAD,GET,PUT,POST,DELETE");
    }
    let key_path = r.path.strip_prefix("/v2/keys").unwrap_or("");
    let params = match form(&r) {
        Ok(p) => p,
        Err(cause) => return error(p, &V2Error::new(ECODE_INVALID_FORM, cause, 0)),
    };
    let parsed = match parse_key_request(r.method.as_str(), key_path, &params, now_nanos()) {
        Ok(k) => k,
        Err(e) => return error(p, &e),
    };
    let state = routes.auth_state();
    if state.enabled {
        let caller = routes.caller(&state, r.authorization.as_deref()).await;
        let write = !matches!(r.method, Method::GET | Method::HEAD);
        let key = if key_path.is_empty() { "/" } else { key_path };
        if !state.can_access(&caller, key, write, parsed.request.recursive) {
            return error(
                p,
                &V2Error::new(ECODE_UNAUTHORIZED, "Insufficient credentials", 0),
            );
        }
    }
    let head = r.method == Method::HEAD;
    let (is_watch, is_local_read) = (parsed.is_watch(), parsed.is_local_read());
    let no_value_on_success = parsed.no_value_on_success;
    let req = parsed.request;
    if is_watch {
        return watch(p, routes, &req).await;
    }
    if is_local_read {
        let get = V2Get {
            path: req.path.clone(),
            recursive: req.recursive,
            sorted: req.sorted,
        };
        return match routes.get.send(get).await {
            Ok(reply) => store_reply(p, &reply, head),
            Err(e) => etcd_error(p, &e.into()),
        };
    }
    let proposal = InternalRaftRequest {
        v2: Some(req),
        ..Default::default()
    };
    match p.write_internal(proposal).await {
        Ok(ApplyResponse::V2(mut reply)) => {
            if no_value_on_success && (reply.status == 200 || reply.status == 201) {
                strip_nodes(&mut reply);
            }
            store_reply(p, &reply, head)
        }
        Ok(other) => etcd_error(
            p,
            &actcd_types::EtcdError::internal(format!("unexpected answer {other:?}")),
        ),
        Err(e) => etcd_error(p, &e),
    }
}

/// `noValueOnSuccess=true`: a set, compare-and-swap, create or update answers with its action
/// alone.
fn strip_nodes(reply: &mut V2Reply) {
    let Ok(serde_json::Value::Object(ev)) = serde_json::from_str::<serde_json::Value>(&reply.body)
    else {
        return;
    };
    let Some(serde_json::Value::String(action)) = ev.get("action") else {
        return;
    };
    if matches!(
        action.as_str(),
        "set" | "compareAndSwap" | "create" | "update"
    ) {
        reply.body = format!(
            "{{\"action\":{}}}\n",
            serde_json::Value::String(action.clone())
        );
    }
}

fn error(p: &Pipeline, e: &V2Error) -> Response<Body> {
    let reply = V2Reply {
        status: e.http_status(),
        body: format!("{}\n", e.to_json()),
        headers: Vec::new(),
        etcd_index: e.index,
        ..Default::default()
    };
    let mut r = store_reply(p, &reply, false);
    // An error carries only the index header (etcd's `Error.WriteTo`).
    r.headers_mut().remove("X-Raft-Index");
    r.headers_mut().remove("X-Raft-Term");
    r
}

/// `wait=true`: the headers at once (the index the watch started at), then the event — or,
/// with `stream=true`, every event — as it happens.
async fn watch(
    p: &Pipeline,
    routes: &V2Routes,
    req: &actcd_proto::actcdpb::V2Request,
) -> Response<Body> {
    let msg = V2Watch {
        path: req.path.clone(),
        recursive: req.recursive,
        stream: req.stream,
        since: req.since,
    };
    let watching = match routes.watch.send(msg).await {
        Ok(Ok(w)) => w,
        Ok(Err(reply)) => {
            let mut r = store_reply(p, &reply, false);
            r.headers_mut().remove("X-Raft-Index");
            r.headers_mut().remove("X-Raft-Term");
            return r;
        }
        Err(e) => return etcd_error(p, &e.into()),
    };
    let stream = req.stream;
    let events = futures::stream::unfold(
        (
            watching.events,
            tokio::time::Instant::now() + WATCH_TIMEOUT,
            false,
        ),
        move |(mut rx, deadline, done)| async move {
            if done {
                return None;
            }
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(event)) => {
                    let frame = hyper::body::Frame::data(event);
                    Some((
                        Ok::<_, std::convert::Infallible>(frame),
                        (rx, deadline, !stream),
                    ))
                }
                _ => None,
            }
        },
    );
    let body = http_body_util::StreamBody::new(events).boxed();
    Response::builder()
        .status(StatusCode::OK)
        .header("Content-Type", "application/json")
        .header("X-Etcd-Cluster-Id", super::cluster_id(p))
        .header("X-Etcd-Index", watching.etcd_index.to_string())
        .header("X-Raft-Index", watching.raft_index.to_string())
        .header("X-Raft-Term", watching.raft_term.to_string())
        .body(body)
        .unwrap_or_default()
}
