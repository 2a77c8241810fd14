//! HTTP/1.1 beside gRPC on the client port, as etcd serves both on one port: `/health`,
//! `/livez`, `/readyz`, `/version` and `/metrics` (Prometheus text). Each accepted plain-TCP
//! connection is sniffed: one that opens with HTTP/2's preface goes to tonic, any other is
//! served here. The same handler serves `--listen-metrics-urls`.
//!
//! `/health` is etcd's: `{"health":"true","reason":""}` with 200, or `"false"` with 503 and the
//! reason — a raised alarm (`ALARM NOSPACE`, `ALARM CORRUPT`; `?exclude=NOSPACE` skips one), no
//! leader (`RAFT NO LEADER`), or a failed read (`QGET ERROR:…`; linearizable unless
//! `?serializable=true`, within 1 s).

use std::sync::Arc;
use std::time::Duration;

use actcd_proto::etcdserverpb::AlarmType;
use actcd_proto::etcdserverpb::RangeRequest;
use actcd_types::AuthInfo;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use crate::pipeline::Pipeline;

/// Whether a connection's first bytes are HTTP/2's preface (`PRI * HTTP/2.0…`): gRPC.
pub fn is_http2_preface(first: &[u8]) -> bool {
    first.starts_with(b"PRI")
}

/// Serves one HTTP/1.1 connection until the client closes it.
pub async fn serve_connection<IO>(stream: IO, pipeline: Arc<Pipeline>)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let p = pipeline.clone();
        async move { Ok::<_, std::convert::Infallible>(handle(&p, req).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// Every response body: whole, or streamed (the gateway's watch).
pub type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

fn reply(status: StatusCode, content_type: &str, body: String) -> Response<Body> {
    use http_body_util::BodyExt;
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)).boxed())
        .unwrap_or_default()
}

/// Query parameters as (name, value) pairs.
fn params(req: &Request<Incoming>) -> Vec<(String, String)> {
    req.uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (p.to_string(), String::new()),
        })
        .collect()
}

async fn handle(p: &Arc<Pipeline>, req: Request<Incoming>) -> Response<Body> {
    let query = params(&req);
    if req.uri().path().starts_with("/v3/") {
        return gateway(p, req).await;
    }
    if p.routes.v2.is_some() && req.uri().path().starts_with("/v2") {
        if let Some(answer) = crate::v2::handle(p, req).await {
            return answer;
        }
        return reply(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "404 page not found\n".into(),
        );
    }
    match req.uri().path() {
        "/health" => {
            let (ok, reason) = health(p, &query).await;
            let body = format!(
                "{{\"health\":\"{ok}\",\"reason\":\"{}\"}}",
                json_escape(&reason)
            );
            let status = if ok {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            // etcd writes no content type: Go's server sniffs the body as text.
            reply(status, "text/plain; charset=utf-8", body)
        }
        "/livez" => reply(StatusCode::OK, "text/plain", "ok\n".into()),
        "/readyz" => match health(p, &query).await {
            (true, _) => reply(StatusCode::OK, "text/plain", "ok\n".into()),
            (false, reason) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("{reason}\n"),
            ),
        },
        "/version" => reply(
            StatusCode::OK,
            "application/json",
            format!(
                "{{\"etcdserver\":\"{}\",\"etcdcluster\":\"{}\"}}",
                p.config.version,
                cluster_version(&p.config.version)
            ),
        ),
        "/metrics" => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4",
            metrics(p).await,
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "404 page not found\n".into(),
        ),
    }
}

/// The JSON gateway: the body read (up to the request size limit), the call made.
async fn gateway(p: &Arc<Pipeline>, req: Request<Incoming>) -> Response<Body> {
    use http_body_util::BodyExt;
    let path = req.uri().path().to_string();
    // etcd's gateway answers only POST: OPTIONS (a CORS preflight) gets 200 and no body, any
    // other method 405 on a route and 404 elsewhere.
    if req.method() == http::Method::OPTIONS {
        return reply(StatusCode::OK, "text/plain; charset=utf-8", String::new());
    }
    if req.method() != http::Method::POST {
        return if crate::gateway::is_route(&path) {
            reply(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain; charset=utf-8",
                "Method Not Allowed\n".into(),
            )
        } else {
            reply(StatusCode::NOT_FOUND, "text/plain", "Not Found\n".into())
        };
    }
    let authorization = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let limit = p.config.max_recv_bytes;
    let body = match http_body_util::Limited::new(req.into_body(), limit)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            let (status, body) =
                crate::gateway::error_answer(&actcd_types::EtcdError::RequestTooLarge.to_status());
            return reply(status, "application/json", body);
        }
    };
    // etcd's gateway calls its own gRPC server, whose learner gate sees every call.
    if *p.routes.learner.borrow() && !crate::learner::gateway_allowed_for_learner(&path) {
        let (status, body) = crate::gateway::error_answer(
            &actcd_types::EtcdError::NotSupportedForLearner.to_status(),
        );
        return reply(status, "application/json", body);
    }
    if let Some(streamed) = crate::gateway::stream(p, &path, &body, authorization.as_deref()).await
    {
        return match streamed {
            Ok(stream) => Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "application/json")
                .body(stream)
                .unwrap_or_default(),
            Err((status, json)) => reply(status, "application/json", json),
        };
    }
    match crate::gateway::call(p, &path, &body, authorization.as_deref()).await {
        Some((status, json)) => reply(status, "application/json", json),
        None => reply(StatusCode::NOT_FOUND, "text/plain", "Not Found\n".into()),
    }
}

/// One histogram in Prometheus text.
fn histogram(out: &mut String, name: &str, help: &str, h: &actcd_types::msg::DiskLatency) {
    use std::fmt::Write;
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    for (i, le) in actcd_types::msg::DISK_BUCKETS.iter().enumerate() {
        let n = h.buckets.get(i).copied().unwrap_or(0);
        let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {n}");
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum {}", h.sum_secs);
    let _ = writeln!(out, "{name}_count {}", h.count);
}

/// etcd reports the cluster version as major.minor.0.
fn cluster_version(v: &str) -> String {
    let mut parts = v.split('.');
    match (parts.next(), parts.next()) {
        (Some(a), Some(b)) => format!("{a}.{b}.0"),
        _ => v.to_string(),
    }
}

fn json_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// etcd's `checkHealth`.
async fn health(p: &Pipeline, query: &[(String, String)]) -> (bool, String) {
    let excluded: Vec<&str> = query
        .iter()
        .filter(|(k, _)| k == "exclude")
        .map(|(_, v)| v.as_str())
        .collect();
    let serializable = query
        .iter()
        .any(|(k, v)| k == "serializable" && v == "true");
    let alarms = match p.alarms().await {
        Ok(a) => a,
        Err(e) => return (false, format!("QGET ERROR:{e}")),
    };
    for a in &alarms {
        let name = AlarmType::try_from(a.alarm).map_or("UNKNOWN", |t| t.as_str_name());
        if excluded.contains(&name) {
            continue;
        }
        let reason = match name {
            "NOSPACE" => "ALARM NOSPACE",
            "CORRUPT" => "ALARM CORRUPT",
            _ => "ALARM UNKNOWN",
        };
        return (false, reason.into());
    }
    match p.raft_status().await {
        Ok(r) if r.leader == 0 => return (false, "RAFT NO LEADER".into()),
        Ok(_) => {}
        Err(e) => return (false, format!("QGET ERROR:{e}")),
    }
    let probe = RangeRequest {
        key: b"health".to_vec(),
        keys_only: true,
        limit: 1,
        serializable,
        ..Default::default()
    };
    match tokio::time::timeout(Duration::from_secs(1), p.range(probe, AuthInfo::default())).await {
        Ok(Ok(_)) => (true, String::new()),
        Ok(Err(e)) => (false, format!("QGET ERROR:{e}")),
        Err(_) => (false, "QGET ERROR:context deadline exceeded".into()),
    }
}

/// Prometheus text format, with etcd's metric names where actcd has the same quantity.
async fn metrics(p: &Pipeline) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, kind: &str, value: String| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let _ = writeln!(out, "{name} {value}");
    };
    let me = p.config.identity.member_id;
    if let Ok(r) = p.raft_status().await {
        gauge(
            "etcd_server_has_leader",
            "Whether or not a leader exists. 1 is existence, 0 is not.",
            "gauge",
            u8::from(r.leader != 0).to_string(),
        );
        gauge(
            "etcd_server_is_leader",
            "Whether or not this member is a leader. 1 if is, 0 otherwise.",
            "gauge",
            u8::from(r.leader == me && me != 0).to_string(),
        );
        gauge(
            "etcd_server_is_learner",
            "Whether or not this member is a learner. 1 if is, 0 otherwise.",
            "gauge",
            u8::from(r.is_learner).to_string(),
        );
        gauge(
            "etcd_server_leader_changes_seen_total",
            "The number of leader changes seen.",
            "counter",
            r.leader_changes.to_string(),
        );
        gauge(
            "etcd_server_proposals_committed_total",
            "The total number of consensus proposals committed.",
            "gauge",
            r.commit.to_string(),
        );
        gauge(
            "etcd_server_proposals_applied_total",
            "The total number of consensus proposals applied.",
            "gauge",
            r.applied.to_string(),
        );
        gauge(
            "etcd_server_proposals_pending",
            "The number of committed proposals not yet applied (actcd's reading).",
            "gauge",
            r.commit.saturating_sub(r.applied).to_string(),
        );
        gauge(
            "etcd_server_term",
            "The raft term this member is in.",
            "gauge",
            r.term.to_string(),
        );
    }
    if let Ok(s) = p.store_status().await {
        gauge(
            "etcd_mvcc_db_total_size_in_bytes",
            "Total size of the underlying database physically allocated in bytes.",
            "gauge",
            s.db_size.to_string(),
        );
        gauge(
            "etcd_mvcc_db_total_size_in_use_in_bytes",
            "Total size of the underlying database logically in use in bytes.",
            "gauge",
            s.db_size_in_use.to_string(),
        );
        gauge(
            "etcd_debugging_mvcc_current_revision",
            "The current revision of store.",
            "gauge",
            s.revision.to_string(),
        );
        gauge(
            "etcd_debugging_mvcc_compact_revision",
            "The revision of the last compaction in store.",
            "gauge",
            s.compact_revision.to_string(),
        );
        gauge(
            "etcd_debugging_mvcc_keys_total",
            "Total number of keys.",
            "gauge",
            s.keys.to_string(),
        );
    }
    {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &p.counters;
        gauge(
            "etcd_server_proposals_failed_total",
            "The total number of failed proposals seen.",
            "counter",
            c.proposals_failed.load(Relaxed).to_string(),
        );
        gauge(
            "etcd_network_client_grpc_received_bytes_total",
            "The total number of bytes received from grpc clients.",
            "counter",
            c.received_bytes.load(Relaxed).to_string(),
        );
        gauge(
            "etcd_network_client_grpc_sent_bytes_total",
            "The total number of bytes sent to grpc clients.",
            "counter",
            c.sent_bytes.load(Relaxed).to_string(),
        );
    }
    let _ = writeln!(
        out,
        "# HELP etcd_server_id Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID."
    );
    let _ = writeln!(out, "# TYPE etcd_server_id gauge");
    let _ = writeln!(out, "etcd_server_id{{server_id=\"{me:x}\"}} 1");
    let _ = writeln!(
        out,
        "# HELP actcd_authn_outcomes_total Requests each authenticator of the chain named a user for, passed on, or rejected."
    );
    let _ = writeln!(out, "# TYPE actcd_authn_outcomes_total counter");
    let stats = p.auth.stats();
    for (name, c) in &stats {
        for (outcome, n) in [
            ("user", c.users),
            ("not_mine", c.not_mine),
            ("rejected", c.rejected),
        ] {
            let _ = writeln!(
                out,
                "actcd_authn_outcomes_total{{authenticator=\"{name}\",outcome=\"{outcome}\"}} {n}"
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP actcd_authn_seconds_total Time each authenticator of the chain spent deciding."
    );
    let _ = writeln!(out, "# TYPE actcd_authn_seconds_total counter");
    for (name, c) in &stats {
        let _ = writeln!(
            out,
            "actcd_authn_seconds_total{{authenticator=\"{name}\"}} {}",
            c.nanos as f64 / 1e9
        );
    }
    if let Ok(f) = p
        .routes
        .fsync_stats
        .send(actcd_types::msg::GetFsyncStats)
        .await
    {
        histogram(
            &mut out,
            "etcd_disk_wal_fsync_duration_seconds",
            "The latency distributions of fsync called by WAL.",
            &f,
        );
    }
    if let Ok(c) = p
        .routes
        .commit_stats
        .send(actcd_types::msg::GetCommitStats)
        .await
    {
        histogram(
            &mut out,
            "etcd_disk_backend_commit_duration_seconds",
            "The latency distributions of commit called by backend.",
            &c,
        );
    }
    out.push_str(&p.requests.render());
    actor_metrics(p, &mut out).await;
    out
}

/// How long `/metrics` waits for an actor's answer to its probe.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Each actor's mailbox (depth and wait, as a probe sent through it found them) and the
/// handling time of its timed messages.
async fn actor_metrics(p: &Pipeline, out: &mut String) {
    use actcd_types::meter::{GetMeter, HANDLE_BUCKETS, MailboxProbe};
    use std::fmt::Write;
    let actors = &p.routes.actors;
    let meters = p
        .actor_meters
        .get_or_init(|| async {
            let mut meters = Vec::with_capacity(actors.len());
            for a in actors {
                match a.meter.send(GetMeter).await {
                    Ok(m) => meters.push(m),
                    Err(_) => return Vec::new(),
                }
            }
            meters
        })
        .await;
    let probes = actors.iter().enumerate().map(|(i, a)| async move {
        let probe = MailboxProbe {
            sent_at: std::time::Instant::now(),
            handled_at_send: meters.get(i).map(|m| m.handled()),
        };
        let started = probe.sent_at;
        let answer = tokio::time::timeout(PROBE_TIMEOUT, a.probe.send(probe)).await;
        (a.name, answer.ok().and_then(Result::ok), started.elapsed())
    });
    let answers = futures::future::join_all(probes).await;
    let _ = writeln!(
        out,
        "# HELP actcd_actor_mailbox_depth Timed messages queued ahead of a probe sent through the actor's mailbox."
    );
    let _ = writeln!(out, "# TYPE actcd_actor_mailbox_depth gauge");
    for (name, snap, _) in &answers {
        if let Some(s) = snap {
            let _ = writeln!(
                out,
                "actcd_actor_mailbox_depth{{actor=\"{name}\"}} {}",
                s.depth
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP actcd_actor_mailbox_wait_seconds How long a probe waited in the actor's mailbox (the timeout if it got no answer)."
    );
    let _ = writeln!(out, "# TYPE actcd_actor_mailbox_wait_seconds gauge");
    for (name, snap, waited) in &answers {
        let wait = snap
            .as_ref()
            .map_or(waited.as_secs_f64(), |s| s.wait_seconds);
        let _ = writeln!(
            out,
            "actcd_actor_mailbox_wait_seconds{{actor=\"{name}\"}} {wait}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP actcd_actor_handle_seconds Time the actor spent handling each timed message type."
    );
    let _ = writeln!(out, "# TYPE actcd_actor_handle_seconds histogram");
    for (name, snap, _) in &answers {
        let Some(s) = snap else { continue };
        for (message, h) in &s.by_message {
            let labels = format!("actor=\"{name}\",message=\"{message}\"");
            let mut cumulative = 0;
            for (i, le) in HANDLE_BUCKETS.iter().enumerate() {
                cumulative += h.buckets[i];
                let _ = writeln!(
                    out,
                    "actcd_actor_handle_seconds_bucket{{{labels},le=\"{le}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                out,
                "actcd_actor_handle_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "actcd_actor_handle_seconds_sum{{{labels}}} {}",
                h.seconds
            );
            let _ = writeln!(
                out,
                "actcd_actor_handle_seconds_count{{{labels}}} {}",
                h.count
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_is_told_from_http1_by_its_preface() {
        assert!(is_http2_preface(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
        for h1 in [
            &b"GET /health HTTP/1.1\r\n"[..],
            b"POST /v3/kv/range",
            b"HEAD /",
        ] {
            assert!(!is_http2_preface(h1));
        }
        assert_eq!(cluster_version("3.5.13"), "3.5.0");
    }
}
