//! etcd's JSON gateway (grpc-gateway) on the client port: `POST /v3/<service>/<method>` (or
//! `/v3beta/…`, the same routes, as etcd 3.4 and 3.5 serve them) with a JSON body in, the gRPC
//! method's answer as JSON out. Bodies are decoded as etcd's Go gateway decodes them, refusals
//! in Go's words (`actcd_gojson`); answers are proto3 JSON as etcd's gateway writes it: original
//! (snake_case) field names, 64-bit integers as strings, bytes in base64, enums by name, default
//! values left out. That mapping, grpc-gateway's statuses and error bodies and the credentials
//! header are `actcd_gojson::gateway`; this file holds the routes, the streams and the counting. Each call runs the same service code as its gRPC twin, so errors, auth and
//! limits are the same; the token comes in `Grpc-Metadata-Token` or in the `Authorization`
//! header, the first winning as in etcd ([`AuthHeader`]), and `Authorization` may also carry
//! `Bearer <token>` or HTTP `Basic` credentials (checked here, then named by the
//! authenticator chain, `authn.rs`). Errors come as `{"error","code","message"}` with
//! grpc-gateway's HTTP status for the code (a body it can't decode: 400, `InvalidArgument`).
//! Server-streaming methods (`/v3/maintenance/snapshot`, `/v3/election/observe`) answer one
//! `{"result":…}` line per message; the bidirectional ones (`/v3/watch`,
//! `/v3/lease/keepalive`) read the body as a stream of JSON requests, as grpc-gateway does: a
//! first request it can't decode is a 500 (`Unknown`), a later one ends the requests (what came
//! before is served, nothing is written about it). `/v3/lock/*` and `/v3/election/*` serve the
//! lock and election services. Answers carry the headers etcd's do (`Grpc-Metadata-Content-Type`
//! once the gRPC call answered); a stream that fails writes grpc-gateway's in-stream error.
//! Each call is counted as etcd's gRPC server counts the calls its gateway makes to it
//! ([`GrpcCall`]).

use std::sync::{Arc, LazyLock};

use actcd_proto::etcdserverpb::auth_server::Auth;
use actcd_proto::etcdserverpb::cluster_server::Cluster;
use actcd_proto::etcdserverpb::kv_server::Kv;
use actcd_proto::etcdserverpb::lease_server::Lease;
use actcd_proto::etcdserverpb::maintenance_server::Maintenance;
use http::StatusCode;
use tonic::Status;

use actcd_gojson::gateway::{Answer, AuthHeader, Messages, error_answer, stream_error};
use actcd_types::{AuthInfo, EtcdError};

use actcd_proto::v3electionpb::election_server::Election;
use actcd_proto::v3lockpb::lock_server::Lock;

use crate::authn::BasicOutcome;
use crate::grpc::auth::AuthService;
use crate::grpc::cluster::ClusterService;
use crate::grpc::election::ElectionService;
use crate::grpc::kv::KvService;
use crate::grpc::lease::LeaseService;
use crate::grpc::lock::LockService;
use crate::grpc::maintenance::MaintenanceService;
use crate::pipeline::Pipeline;

/// etcd's messages, a bare name being an `etcdserverpb` one.
static MESSAGES: LazyLock<Messages> =
    LazyLock::new(|| Messages::decode(actcd_proto::FILE_DESCRIPTOR_SET, "etcdserverpb"));

/// Decodes a JSON body into the request message `name` as etcd's gateway decodes a unary
/// call's body ([`Messages::from_json`]).
fn from_json<M: prost::Message + Default>(body: &[u8], name: &str) -> Result<M, Status> {
    MESSAGES.from_json(body, name)
}

/// Encodes a response message `name` as etcd's gateway does ([`Messages::to_json`]).
fn to_json<M: prost::Message>(msg: &M, name: &str) -> Result<String, Status> {
    MESSAGES.to_json(msg, name)
}

/// Whether `path` is the gateway's: `/v3/…`, or `/v3beta/…`, which etcd 3.4 and 3.5 serve as the
/// same routes (clients written against etcd 3.4 call it; `/v3alpha/` is served by neither).
pub fn serves(path: &str) -> bool {
    path.starts_with("/v3/") || path.starts_with("/v3beta/") || path == "/v3"
}

/// A gateway path as its `/v3/…` route.
fn canonical(path: &str) -> String {
    match path.strip_prefix("/v3beta/") {
        Some(rest) => format!("/v3/{rest}"),
        None => path.to_string(),
    }
}

/// An answer with the headers etcd's gateway answers with: `Grpc-Metadata-Content-Type` when a
/// gRPC call answered, `nosniff` on a text error as Go's `http.Error` writes it. (The CORS
/// headers etcd sets on every answer are added around all handlers, in `http/mod.rs`.)
fn gateway_reply(
    status: StatusCode,
    content_type: Option<&str>,
    grpc_answered: bool,
    body: crate::http::body::Body,
) -> http::Response<crate::http::body::Body> {
    let mut b = http::Response::builder().status(status);
    if let Some(t) = content_type {
        b = b.header("content-type", t);
    }
    if content_type == Some("text/plain; charset=utf-8") {
        // Go's `http.Error`.
        b = b.header("x-content-type-options", "nosniff");
    }
    if grpc_answered {
        b = b.header("grpc-metadata-content-type", "application/grpc");
    }
    b.body(body).unwrap_or_default()
}

fn whole(text: String) -> crate::http::body::Body {
    use http_body_util::BodyExt;
    http_body_util::Full::new(bytes::Bytes::from(text)).boxed()
}

fn json_reply(status: StatusCode, json: String) -> http::Response<crate::http::body::Body> {
    gateway_reply(
        status,
        Some("application/json"),
        status == StatusCode::OK,
        whole(json),
    )
}

/// `/v3` itself: Go's `ServeMux` sends it to the `/v3/` subtree etcd registers the gateway
/// under (301, the query kept; a GET or HEAD gets Go's little HTML link).
fn redirect_to_subtree(
    req: &http::Request<hyper::body::Incoming>,
) -> http::Response<crate::http::body::Body> {
    let location = match req.uri().query() {
        Some(q) => format!("/v3/?{q}"),
        None => "/v3/".to_string(),
    };
    let mut b = http::Response::builder()
        .status(StatusCode::MOVED_PERMANENTLY)
        .header("location", location.as_str());
    let mut body = String::new();
    if req.method() == http::Method::GET || req.method() == http::Method::HEAD {
        b = b.header("content-type", "text/html; charset=utf-8");
        body = format!("<a href=\"{location}\">Moved Permanently</a>.\n\n");
    }
    b.body(whole(body)).unwrap_or_default()
}

/// Serves one request to the JSON gateway (a path [`serves`] takes): the body read (up to the
/// request size limit), the call made.
pub async fn serve(
    p: &Arc<Pipeline>,
    req: http::Request<hyper::body::Incoming>,
) -> http::Response<crate::http::body::Body> {
    use http_body_util::BodyExt;
    let path = canonical(req.uri().path());
    if path == "/v3" {
        return redirect_to_subtree(&req);
    }
    let text = |status, body: &str| {
        gateway_reply(
            status,
            Some("text/plain; charset=utf-8"),
            false,
            whole(body.to_string()),
        )
    };
    // etcd's gateway answers only POST: OPTIONS (a CORS preflight) gets 200 and no body, any
    // other method 405 on a route and 404 elsewhere.
    if req.method() == http::Method::OPTIONS {
        return gateway_reply(StatusCode::OK, None, false, whole(String::new()));
    }
    if req.method() != http::Method::POST {
        return if is_route(&path) {
            text(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed\n")
        } else {
            text(StatusCode::NOT_FOUND, "Not Found\n")
        };
    }
    let authorization = AuthHeader::of(req.headers());
    let limit = p.config.max_recv_bytes;
    let body = match http_body_util::Limited::new(req.into_body(), limit)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            let (status, body) = error_answer(&EtcdError::RequestTooLarge.to_status());
            return json_reply(status, body);
        }
    };
    // etcd's gateway calls its own gRPC server, whose learner gate sees every call.
    if *p.routes.learner.borrow() && !crate::learner::gateway_allowed_for_learner(&path) {
        let (status, body) = error_answer(&EtcdError::NotSupportedForLearner.to_status());
        return json_reply(status, body);
    }
    // Only what the authorization table lists is served.
    if !is_route(&path) {
        return text(StatusCode::NOT_FOUND, "Not Found\n");
    }
    if let Some(streamed) = stream(p, &path, &body, &authorization).await {
        return match streamed {
            Ok(lines) => gateway_reply(
                lines.status,
                Some("application/json"),
                lines.grpc_answered,
                lines.body,
            ),
            Err((status, json)) => json_reply(status, json),
        };
    }
    match call(p, &path, &body, &authorization).await {
        Some((status, json)) => json_reply(status, json),
        None => text(StatusCode::NOT_FOUND, "Not Found\n"),
    }
}

/// Runs one unary method: JSON in, the service's answer out; counted from the moment the
/// request decodes (`$call`: a [`Unary`]). `$name` is the message pair's name without its
/// `Request`/`Response` suffix (with its package where it is not `etcdserverpb`).
macro_rules! unary {
    ($call:expr, $body:expr, $svc:ident . $method:ident, $name:literal) => {{
        let request = from_json($body, concat!($name, "Request"))?;
        let grpc = $call.start(&request);
        let mut request = tonic::Request::new(request);
        $call.auth.apply(&mut request);
        let answer = $svc.$method(request).await;
        match &answer {
            Ok(response) => {
                grpc.sent(response.get_ref());
                grpc.handled(tonic::Code::Ok);
            }
            Err(status) => grpc.handled(status.code()),
        }
        to_json(&answer?.into_inner(), concat!($name, "Response"))
    }};
}

/// A gateway call as etcd's gRPC server counts the calls etcd's gateway makes to it
/// (`metrics.rs`): started once its first request decodes (a body the gateway can't decode
/// never reaches gRPC), with no client API version (`unknown` in
/// `etcd_server_client_requests_total`), its messages and their encoded bytes, handled with
/// its status (a stream: when it ends, or, if the client goes away first, with
/// [`crate::metrics::cancel_code`]).
#[derive(Clone)]
pub struct GrpcCall {
    stats: Arc<crate::metrics::RequestStats>,
    method: &'static str,
    started: std::time::Instant,
}

impl GrpcCall {
    /// A call of the gRPC method gateway `path` runs, started now.
    fn start(p: &Pipeline, path: &str) -> Self {
        let method = actcd_authz::routes::gateway_route(path).map_or("", |r| r.method);
        p.requests.started(method, None);
        GrpcCall {
            stats: p.requests.clone(),
            method,
            started: std::time::Instant::now(),
        }
    }

    fn received<M: prost::Message>(&self, m: &M) {
        self.stats.received(self.method, 1, m.encoded_len() as u64);
    }

    fn sent<M: prost::Message>(&self, m: &M) {
        self.stats.sent(self.method, 1, m.encoded_len() as u64);
    }

    fn handled(&self, code: tonic::Code) {
        self.stats.record(self.method, code, self.started.elapsed());
    }
}

/// What a unary route needs beside its body: the caller's credentials, and where its call is
/// counted.
struct Unary<'a> {
    auth: &'a GatewayAuth,
    p: &'a Pipeline,
    path: &'a str,
}

impl Unary<'_> {
    fn start<M: prost::Message>(&self, request: &M) -> GrpcCall {
        let call = GrpcCall::start(self.p, self.path);
        call.received(request);
        call
    }
}

/// How a request's credentials header reaches the authenticator chain.
pub enum GatewayAuth {
    None,
    /// `Authorization: <token>` (etcd's gateway) or `Authorization: Bearer <token>`.
    Token(tonic::metadata::MetadataValue<tonic::metadata::Ascii>),
    /// `Authorization: Basic …`, checked.
    Basic(BasicOutcome),
}

impl GatewayAuth {
    /// Reads the header; Basic credentials are checked against the store's password hash
    /// (only while auth is on: otherwise nobody is authenticated anyway).
    pub async fn from_header(p: &Pipeline, header: &AuthHeader) -> Self {
        let h = match header {
            AuthHeader::None => return GatewayAuth::None,
            // As etcd takes it: no scheme, nothing trimmed; one that can't be metadata is a
            // token nobody has, as empty is.
            AuthHeader::Token(t) => {
                return GatewayAuth::Token(
                    t.parse()
                        .unwrap_or_else(|_| tonic::metadata::MetadataValue::from_static("")),
                );
            }
            AuthHeader::Authorization(h) => h.trim(),
        };
        if h.is_empty() {
            return GatewayAuth::None;
        }
        let scheme = |name: &str| {
            h.get(..name.len())
                .filter(|s| s.eq_ignore_ascii_case(name))
                .map(|_| h[name.len()..].trim_start())
        };
        if let Some(encoded) = scheme("Basic ") {
            if !p.auth.enabled() {
                return GatewayAuth::None;
            }
            return GatewayAuth::Basic(BasicOutcome(check_basic(p, encoded).await));
        }
        let token = scheme("Bearer ").unwrap_or(h);
        match token.parse() {
            Ok(t) => GatewayAuth::Token(t),
            Err(_) => GatewayAuth::None,
        }
    }

    pub fn apply<T>(&self, request: &mut tonic::Request<T>) {
        match self {
            GatewayAuth::None => {}
            GatewayAuth::Token(t) => {
                request.metadata_mut().insert("token", t.clone());
            }
            GatewayAuth::Basic(outcome) => {
                request.extensions_mut().insert(outcome.clone());
            }
        }
    }
}

/// HTTP Basic: `base64(user:password)`, checked as Authenticate checks a password (bcrypt on
/// the blocking pool), remembered per auth revision.
async fn check_basic(p: &Pipeline, encoded: &str) -> Result<AuthInfo, EtcdError> {
    use base64::Engine;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| EtcdError::AuthFailed)?;
    let raw = String::from_utf8(raw).map_err(|_| EtcdError::AuthFailed)?;
    let (user, password) = raw.split_once(':').ok_or(EtcdError::AuthFailed)?;
    let revision = p.auth.revision();
    if p.auth.basic.matched(user, password, revision) {
        return Ok(AuthInfo {
            username: user.into(),
            revision,
        });
    }
    let checked = p.check_password(user.as_bytes(), password).await?;
    p.auth.basic.remember(user, password, checked);
    Ok(AuthInfo {
        username: user.into(),
        revision: checked,
    })
}

/// A streamed answer: its status (the error's when the stream failed before any message),
/// whether the gRPC stream answered (etcd's `Grpc-Metadata-Content-Type`), and its lines.
pub struct Streamed {
    status: StatusCode,
    grpc_answered: bool,
    body: crate::http::body::Body,
}

/// Messages as grpc-gateway streams them: one `{"result":…}` line each, a failure as its stream
/// error. Like grpc-gateway, which waits for the gRPC stream's headers, this answers once the
/// first line is ready (a watch that creates nothing, an `observe` with no leader, never do).
async fn json_lines<M, S>(messages: S, name: &'static str, call: GrpcCall) -> Streamed
where
    M: prost::Message + 'static,
    S: futures::Stream<Item = Result<M, Status>> + Send + 'static,
{
    use futures::StreamExt;
    use http_body_util::BodyExt;
    // A task turns messages into lines; the body reads them off a channel (a body must be
    // `Sync`, which a stream of futures is not). The task ends when the client goes away,
    // dropping the stream, which ends what feeds it (the watch's stream in the hub).
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Option<StatusCode>, String)>(16);
    tokio::spawn(async move {
        let mut messages = std::pin::pin!(messages);
        // The stream's status once it failed.
        let mut failed = None;
        let code = loop {
            // A quiet stream (a watch with no events) must still end when the client goes:
            // the body's end of the channel is dropped then, and `closed` says so.
            let r = tokio::select! {
                next = messages.next() => match next {
                    Some(r) => r,
                    None => break failed.unwrap_or(tonic::Code::Ok),
                },
                () = tx.closed() => break failed.unwrap_or(crate::metrics::cancel_code(call.method)),
            };
            if let Ok(m) = &r {
                call.sent(m);
            }
            let line = match r.and_then(|m| to_json(&m, name)) {
                Ok(json) => (None, format!("{{\"result\":{json}}}\n")),
                Err(s) => {
                    failed.get_or_insert(s.code());
                    let (status, line) = stream_error(&s);
                    (Some(status), line)
                }
            };
            if tx.send(line).await.is_err() {
                break failed.unwrap_or(crate::metrics::cancel_code(call.method));
            }
        };
        call.handled(code);
    });
    let first = rx.recv().await;
    let (status, grpc_answered) = match &first {
        None => (StatusCode::OK, false),
        Some((None, _)) => (StatusCode::OK, true),
        Some((Some(status), _)) => (*status, false),
    };
    let lines = futures::stream::iter(first)
        .chain(tokio_stream::wrappers::ReceiverStream::new(rx))
        .map(|(_, line)| {
            Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(bytes::Bytes::from(line)))
        });
    Streamed {
        status,
        grpc_answered,
        body: BodyExt::boxed(http_body_util::StreamBody::new(lines)),
    }
}

/// The gateway's server-streaming routes; `None` for a path that isn't one.
pub async fn stream(
    p: &Arc<Pipeline>,
    path: &str,
    body: &[u8],
    authorization: &AuthHeader,
) -> Option<Result<Streamed, Answer>> {
    Some(match path {
        "/v3/watch" => watch(p, body, authorization).await,
        "/v3/lease/keepalive" => keep_alive(p, body, authorization).await,
        "/v3/maintenance/snapshot" => snapshot(p, body, authorization).await,
        "/v3/election/observe" => observe(p, body, authorization).await,
        _ => return None,
    })
}

/// `POST /v3/watch`: the body's `WatchRequest`s, in order (up to the first that can't be
/// decoded); the answer streams every `WatchResponse` until the client goes away, as etcd's
/// does (the end of the body doesn't end the stream).
async fn watch(
    p: &Arc<Pipeline>,
    body: &[u8],
    authorization: &AuthHeader,
) -> Result<Streamed, Answer> {
    use futures::StreamExt;
    let requests: Vec<actcd_proto::etcdserverpb::WatchRequest> =
        MESSAGES.stream_requests(body, "WatchRequest")?;
    let call = GrpcCall::start(p, "/v3/watch");
    requests.iter().for_each(|r| call.received(r));
    let mut probe = tonic::Request::new(());
    GatewayAuth::from_header(p, authorization)
        .await
        .apply(&mut probe);
    let creds = p.auth.credentials(&probe);
    // The requests, then nothing more: the stream lives until the client hangs up.
    let inbound = futures::stream::iter(requests).chain(futures::stream::pending());
    let rx = crate::grpc::watch::open_stream(p.clone(), creds, inbound)
        .await
        .map_err(|e| failed(&call, &e.to_status()))?;
    Ok(json_lines(
        tokio_stream::wrappers::ReceiverStream::new(rx),
        "WatchResponse",
        call,
    )
    .await)
}

/// `POST /v3/lease/keepalive`: one answer per `LeaseKeepAliveRequest` in the body (up to the
/// first that can't be decoded), then the stream ends, as the gRPC stream does when the client
/// stops sending.
async fn keep_alive(
    p: &Arc<Pipeline>,
    body: &[u8],
    authorization: &AuthHeader,
) -> Result<Streamed, Answer> {
    use futures::StreamExt;
    let reqs: Vec<actcd_proto::etcdserverpb::LeaseKeepAliveRequest> =
        MESSAGES.stream_requests(body, "LeaseKeepAliveRequest")?;
    let call = GrpcCall::start(p, "/v3/lease/keepalive");
    reqs.iter().for_each(|r| call.received(r));
    let mut probe = tonic::Request::new(());
    GatewayAuth::from_header(p, authorization)
        .await
        .apply(&mut probe);
    let creds = Arc::new(p.auth.credentials(&probe));
    let p = p.clone();
    let answers = futures::stream::iter(reqs).then(move |r| {
        let (p, creds) = (p.clone(), creds.clone());
        async move {
            crate::grpc::lease::keep_alive_once(&p, &creds, r)
                .await
                .map_err(|e| e.to_status())
        }
    });
    Ok(json_lines(answers, "LeaseKeepAliveResponse", call).await)
}

/// `POST /v3/election/observe`: the leader, each value it proclaims, and every leader after.
async fn observe(
    p: &Arc<Pipeline>,
    body: &[u8],
    authorization: &AuthHeader,
) -> Result<Streamed, Answer> {
    let request = from_json(body, "v3electionpb.LeaderRequest").map_err(|s| error_answer(&s))?;
    let call = GrpcCall::start(p, "/v3/election/observe");
    call.received(&request);
    let mut request = tonic::Request::new(request);
    GatewayAuth::from_header(p, authorization)
        .await
        .apply(&mut request);
    let service = ElectionService {
        pipeline: p.clone(),
    };
    let leaders = service
        .observe(request)
        .await
        .map_err(|s| failed(&call, &s))?
        .into_inner();
    Ok(json_lines(leaders, "v3electionpb.LeaderResponse", call).await)
}

/// `POST /v3/maintenance/snapshot`: the backend in base64 chunks, then its checksum.
async fn snapshot(
    p: &Arc<Pipeline>,
    body: &[u8],
    authorization: &AuthHeader,
) -> Result<Streamed, Answer> {
    let request = from_json(body, "SnapshotRequest").map_err(|s| error_answer(&s))?;
    let call = GrpcCall::start(p, "/v3/maintenance/snapshot");
    call.received(&request);
    let mut request = tonic::Request::new(request);
    GatewayAuth::from_header(p, authorization)
        .await
        .apply(&mut request);
    let service = MaintenanceService {
        pipeline: p.clone(),
    };
    let chunks = service
        .snapshot(request)
        .await
        .map_err(|s| failed(&call, &s))?
        .into_inner();
    Ok(json_lines(chunks, "SnapshotResponse", call).await)
}

/// A stream that failed before it opened: handled with its status, answered with the error.
fn failed(call: &GrpcCall, s: &Status) -> Answer {
    call.handled(s.code());
    stream_error(s)
}

/// The gateway's routes; `None` for a path it doesn't serve.
pub async fn call(
    p: &Arc<Pipeline>,
    path: &str,
    body: &[u8],
    authorization: &AuthHeader,
) -> Option<Answer> {
    let auth = GatewayAuth::from_header(p, authorization).await;
    let result = route(p, path, body, &auth).await?;
    Some(match result {
        Ok(json) => (StatusCode::OK, json),
        Err(s) => error_answer(&s),
    })
}

async fn route(
    p: &Arc<Pipeline>,
    path: &str,
    body: &[u8],
    credentials: &GatewayAuth,
) -> Option<Result<String, Status>> {
    let kv = KvService {
        pipeline: p.clone(),
    };
    let lease = LeaseService {
        pipeline: p.clone(),
    };
    let cluster = ClusterService {
        pipeline: p.clone(),
    };
    let maintenance = MaintenanceService {
        pipeline: p.clone(),
    };
    let auth = AuthService {
        pipeline: p.clone(),
    };
    let lock = LockService {
        pipeline: p.clone(),
    };
    let election = ElectionService {
        pipeline: p.clone(),
    };
    let t = &Unary {
        auth: credentials,
        p,
        path,
    };
    let r: Result<String, Status> = async {
        match path {
            "/v3/kv/range" => unary!(t, body, kv.range, "Range"),
            "/v3/lock/lock" => unary!(t, body, lock.lock, "v3lockpb.Lock"),
            "/v3/lock/unlock" => unary!(t, body, lock.unlock, "v3lockpb.Unlock"),
            "/v3/election/campaign" => unary!(t, body, election.campaign, "v3electionpb.Campaign"),
            "/v3/election/proclaim" => unary!(t, body, election.proclaim, "v3electionpb.Proclaim"),
            "/v3/election/leader" => unary!(t, body, election.leader, "v3electionpb.Leader"),
            "/v3/election/resign" => unary!(t, body, election.resign, "v3electionpb.Resign"),
            "/v3/kv/put" => unary!(t, body, kv.put, "Put"),
            "/v3/kv/deleterange" => unary!(t, body, kv.delete_range, "DeleteRange"),
            "/v3/kv/txn" => unary!(t, body, kv.txn, "Txn"),
            "/v3/kv/compaction" => unary!(t, body, kv.compact, "Compaction"),
            "/v3/lease/grant" => unary!(t, body, lease.lease_grant, "LeaseGrant"),
            "/v3/lease/revoke" | "/v3/kv/lease/revoke" => {
                unary!(t, body, lease.lease_revoke, "LeaseRevoke")
            }
            "/v3/lease/timetolive" | "/v3/kv/lease/timetolive" => {
                unary!(t, body, lease.lease_time_to_live, "LeaseTimeToLive")
            }
            "/v3/lease/leases" | "/v3/kv/lease/leases" => {
                unary!(t, body, lease.lease_leases, "LeaseLeases")
            }
            "/v3/cluster/member/add" => unary!(t, body, cluster.member_add, "MemberAdd"),
            "/v3/cluster/member/remove" => unary!(t, body, cluster.member_remove, "MemberRemove"),
            "/v3/cluster/member/update" => unary!(t, body, cluster.member_update, "MemberUpdate"),
            "/v3/cluster/member/list" => unary!(t, body, cluster.member_list, "MemberList"),
            "/v3/cluster/member/promote" => {
                unary!(t, body, cluster.member_promote, "MemberPromote")
            }
            "/v3/maintenance/alarm" => unary!(t, body, maintenance.alarm, "Alarm"),
            "/v3/maintenance/status" => unary!(t, body, maintenance.status, "Status"),
            "/v3/maintenance/defragment" => unary!(t, body, maintenance.defragment, "Defragment"),
            "/v3/maintenance/hash" => unary!(t, body, maintenance.hash, "Hash"),
            "/v3/maintenance/hashkv" => unary!(t, body, maintenance.hash_kv, "HashKV"),
            "/v3/maintenance/transfer-leadership" => {
                unary!(t, body, maintenance.move_leader, "MoveLeader")
            }
            "/v3/auth/enable" => unary!(t, body, auth.auth_enable, "AuthEnable"),
            "/v3/auth/disable" => unary!(t, body, auth.auth_disable, "AuthDisable"),
            "/v3/auth/status" => unary!(t, body, auth.auth_status, "AuthStatus"),
            "/v3/auth/authenticate" => unary!(t, body, auth.authenticate, "Authenticate"),
            "/v3/auth/user/add" => unary!(t, body, auth.user_add, "AuthUserAdd"),
            "/v3/auth/user/get" => unary!(t, body, auth.user_get, "AuthUserGet"),
            "/v3/auth/user/list" => unary!(t, body, auth.user_list, "AuthUserList"),
            "/v3/auth/user/delete" => unary!(t, body, auth.user_delete, "AuthUserDelete"),
            "/v3/auth/user/changepw" => {
                unary!(t, body, auth.user_change_password, "AuthUserChangePassword")
            }
            "/v3/auth/user/grant" => unary!(t, body, auth.user_grant_role, "AuthUserGrantRole"),
            "/v3/auth/user/revoke" => unary!(t, body, auth.user_revoke_role, "AuthUserRevokeRole"),
            "/v3/auth/role/add" => unary!(t, body, auth.role_add, "AuthRoleAdd"),
            "/v3/auth/role/get" => unary!(t, body, auth.role_get, "AuthRoleGet"),
            "/v3/auth/role/list" => unary!(t, body, auth.role_list, "AuthRoleList"),
            "/v3/auth/role/delete" => unary!(t, body, auth.role_delete, "AuthRoleDelete"),
            "/v3/auth/role/grant" => unary!(
                t,
                body,
                auth.role_grant_permission,
                "AuthRoleGrantPermission"
            ),
            "/v3/auth/role/revoke" => unary!(
                t,
                body,
                auth.role_revoke_permission,
                "AuthRoleRevokePermission"
            ),
            _ => Err(Status::not_found("")),
        }
    }
    .await;
    match r {
        Err(s) if s.code() == tonic::Code::NotFound && s.message().is_empty() => None,
        other => Some(other),
    }
}

/// Whether `path` is one of the gateway's routes (a row of the authorization table,
/// `routes.rs`): another method than `POST` on one is refused with 405, as etcd's gateway
/// refuses it (found by the hostile-input run), not served.
pub fn is_route(path: &str) -> bool {
    actcd_authz::routes::gateway_route(path).is_some()
}
