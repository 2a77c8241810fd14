//! HTTP/1.1 beside gRPC on the client port, as etcd serves both on one port: `/health`,
//! `/livez`, `/readyz` (etcd 3.6's named checks, [`health`]), `/version` and `/metrics`
//! (Prometheus text, [`exposition`]). Each accepted plain-TCP
//! connection is sniffed: one that opens with HTTP/2's preface goes to tonic, any other is
//! served here. The same handler serves `--listen-metrics-urls`.
//!
//! Client ports put every request through etcd's access controller first ([`AccessControl`]):
//! on plain HTTP a `Host` not in `--host-whitelist` is answered 421 with etcd's text (DNS
//! rebinding, CVE-2018-5702); origins `--cors` allows get the `Access-Control-*` headers; an
//! `OPTIONS` request is answered 200 with no body. The metrics ports do neither, as in etcd.
//!
//! `/health` is etcd's: `{"health":"true","reason":""}` with 200, or `"false"` with 503 and the
//! reason — a raised alarm (`ALARM NOSPACE`, `ALARM CORRUPT`; `?exclude=NOSPACE` skips one), no
//! leader (`RAFT NO LEADER`), or a failed read (`QGET ERROR:…`; linearizable unless
//! `?serializable=true`, within 1 s).

use std::sync::Arc;
use std::time::Duration;

use actcd_proto::etcdserverpb::AlarmType;
use actcd_types::{AuthInfo, EtcdError};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

pub use crate::pipeline::AccessControl;
use crate::pipeline::Pipeline;

mod body;
pub mod exposition;
pub mod gateway;
pub mod health;
pub mod v2;

pub use body::Body;

/// Whether a connection's first bytes are HTTP/2's preface (`PRI * HTTP/2.0…`): gRPC.
pub fn is_http2_preface(first: &[u8]) -> bool {
    first.starts_with(b"PRI")
}

/// Which port an HTTP/1.1 connection came in on: etcd checks the `Host` of plain-HTTP client
/// requests against `--host-whitelist` and writes `--cors` headers on client ports; its
/// `--listen-metrics-urls` ports do neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    Plain,
    Tls,
    Metrics,
}

/// The request's host name without its port (Go's `httputil.GetHostname`).
fn hostname(req: &Request<Incoming>) -> String {
    let host = req
        .headers()
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default();
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        _ => host,
    }
}

/// etcd's answer to a plain-HTTP request for a host not in `--host-whitelist` (421).
fn misdirected(host: &str) -> Response<Body> {
    tracing::warn!(
        host,
        "rejecting HTTP request to prevent DNS rebinding attacks"
    );
    let mut answer = reply(
        StatusCode::MISDIRECTED_REQUEST,
        "text/plain; charset=utf-8",
        format!(
            "
etcd received your request, but the Host header was unrecognized.

To fix this, choose one of the following options:
- Enable TLS, then any HTTPS request will be allowed.
- Add the hostname you want to use to the whitelist in settings.
  - e.g. etcd --host-whitelist {host:?}

This requirement has been added to help prevent \"DNS Rebinding\" attacks (CVE-2018-5702).

"
        ),
    );
    answer.headers_mut().insert(
        "x-content-type-options",
        hyper::header::HeaderValue::from_static("nosniff"),
    );
    answer
}

/// etcd's access controller around the client port's HTTP handlers: the `Host` check on plain
/// HTTP, CORS headers, and OPTIONS answered 200 with no body.
async fn access_controlled(
    p: &Arc<Pipeline>,
    port: Port,
    req: Request<Incoming>,
) -> Response<Body> {
    if port == Port::Metrics {
        return handle(p, req).await;
    }
    let access = &p.config.access;
    if port == Port::Plain {
        let host = hostname(&req);
        if !access.host_allowed(&host) {
            return misdirected(&host);
        }
    }
    let origin = if access.origin_allowed("*") {
        Some("*".to_string())
    } else {
        req.headers()
            .get(hyper::header::ORIGIN)
            .and_then(|o| o.to_str().ok())
            .filter(|o| access.origin_allowed(o))
            .map(str::to_string)
    };
    let mut answer = if req.method() == hyper::Method::OPTIONS {
        use http_body_util::BodyExt;
        Response::new(Full::new(Bytes::new()).boxed())
    } else {
        handle(p, req).await
    };
    if let Some(origin) = origin {
        let h = answer.headers_mut();
        for (name, value) in [
            (
                "access-control-allow-methods",
                "POST, GET, OPTIONS, PUT, DELETE".to_string(),
            ),
            ("access-control-allow-origin", origin),
            (
                "access-control-allow-headers",
                "accept, content-type, authorization".to_string(),
            ),
        ] {
            if let Ok(v) = hyper::header::HeaderValue::from_str(&value) {
                h.append(name, v);
            }
        }
    }
    answer
}

/// Serves one HTTP/1.1 connection until the client closes it.
pub async fn serve_connection<IO>(stream: IO, pipeline: Arc<Pipeline>, port: Port)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let p = pipeline.clone();
        async move { Ok::<_, std::convert::Infallible>(access_controlled(&p, port, req).await) }
    });
    let _ = http1()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// Serves one HTTP/2 connection with the same handler until the client closes it: TLS
/// connections that agree on `h2` on an HTTP-only listener (`--listen-client-http-urls`), as
/// etcd's HTTPS server serves them there (a gRPC call is then just a path it does not know:
/// 404).
pub async fn serve_http2_connection<IO>(stream: IO, pipeline: Arc<Pipeline>, port: Port)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let p = pipeline.clone();
        async move { Ok::<_, std::convert::Infallible>(access_controlled(&p, port, req).await) }
    });
    let _ = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// The HTTP/1.1 server every client-port connection gets: etcd's ReadHeaderTimeout (5 minutes,
/// 3.5.33 / 3.6.14 / 3.7.1) cuts off a client that trickles its headers. hyper keeps no such
/// timeout without a timer.
fn http1() -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(READ_HEADER_TIMEOUT);
    b
}

/// How long a client may take to send a request's headers (etcd's `ReadHeaderTimeout`).
pub const READ_HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

fn reply(status: StatusCode, content_type: &str, body: String) -> Response<Body> {
    use http_body_util::BodyExt;
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)).boxed())
        .unwrap_or_default()
}

/// Query parameters as (name, value) pairs, unescaped as Go's `r.URL.Query()` reads them.
fn params(req: &Request<Incoming>) -> Vec<(String, String)> {
    health::go_query(req.uri().query().unwrap_or(""))
}

async fn handle(p: &Arc<Pipeline>, req: Request<Incoming>) -> Response<Body> {
    let query = params(&req);
    if p.config.grpc_gateway && gateway::serves(req.uri().path()) {
        return gateway::serve(p, req).await;
    }
    if p.routes.v2.is_some() && req.uri().path().starts_with("/v2") {
        if let Some(answer) = v2::handle(p, req).await {
            return answer;
        }
        return reply(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "404 page not found\n".into(),
        );
    }
    // Only what the authorization table (`routes.rs`) lists is served.
    if actcd_authz::routes::http_needs(req.uri().path()).is_none() {
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
                p.counters
                    .health_success
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                StatusCode::OK
            } else {
                p.counters
                    .health_failures
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                StatusCode::SERVICE_UNAVAILABLE
            };
            // etcd writes no content type: Go's server sniffs the body as text.
            reply(status, "text/plain; charset=utf-8", body)
        }
        // etcd 3.6 adds the storage schema (#13772): 3.5's layout, `major.minor.0` as the
        // cluster version, what Status reports as `storageVersion`.
        "/version" => reply(
            StatusCode::OK,
            "application/json",
            format!(
                "{{\"etcdserver\":\"{}\",\"etcdcluster\":\"{}\",\"storage\":\"{}\"}}",
                p.config.version,
                cluster_version(&p.config.version),
                cluster_version(&p.config.version)
            ),
        ),
        "/metrics" => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            exposition::render(p).await,
        ),
        path if health::Kind::route(path).is_some() => {
            let Some((kind, single)) = health::Kind::route(path) else {
                return reply(StatusCode::NOT_FOUND, "text/plain", String::new());
            };
            livez_readyz(p, req.method(), kind, single, &query).await
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "404 page not found\n".into(),
        ),
    }
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
    let probe = health::probe(serializable);
    match tokio::time::timeout(Duration::from_secs(1), p.range(probe, AuthInfo::default())).await {
        // With auth on the anonymous probe is refused: that is a member answering, healthy,
        // as etcd's v3 health check counts it (the hostile run saw 503s with auth on).
        Ok(Ok(_) | Err(EtcdError::UserEmpty | EtcdError::PermissionDenied)) => {
            (true, String::new())
        }
        Ok(Err(e)) => (false, format!("QGET ERROR:{e}")),
        Err(_) => (false, "QGET ERROR:context deadline exceeded".into()),
    }
}

/// etcd 3.6's `/livez` and `/readyz` (see [`health`]).
async fn livez_readyz(
    p: &Pipeline,
    method: &http::Method,
    kind: health::Kind,
    single: Option<&'static str>,
    query: &[(String, String)],
) -> Response<Body> {
    if method != http::Method::GET {
        let mut r = reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "Method Not Allowed\n".into(),
        );
        r.headers_mut()
            .insert(http::header::ALLOW, http::HeaderValue::from_static("GET"));
        r.headers_mut().insert(
            "x-content-type-options",
            http::HeaderValue::from_static("nosniff"),
        );
        return r;
    }
    let excluded: Vec<&str> = query
        .iter()
        .filter(|(k, v)| k == "exclude" && !v.is_empty())
        .map(|(_, v)| v.as_str())
        .collect();
    let verbose = query.iter().any(|(k, _)| k == "verbose");
    let mut outcomes = Vec::new();
    for name in health::selected(kind, single, &excluded) {
        let r = health::run(p, name).await;
        p.counters.record_health_check(kind.name(), name, r.is_ok());
        outcomes.push((name, r));
    }
    let answer = health::answer(&outcomes, verbose);
    let status = if answer.ok {
        StatusCode::OK
    } else {
        tracing::warn!(path = kind.name(), reason = %answer.body.trim_end(), "health check failed");
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut r = reply(status, "text/plain; charset=utf-8", answer.body);
    r.headers_mut().insert(
        "x-content-type-options",
        http::HeaderValue::from_static("nosniff"),
    );
    r
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
