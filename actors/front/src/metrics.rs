//! The tower layer in front of every gRPC service: it refuses on a learner what etcd's
//! learners refuse (`learner.rs`), and accounts for every call as go-grpc-prometheus and etcd
//! do: `grpc_server_started_total`, `grpc_server_handled_total{grpc_service,grpc_method,
//! grpc_code}`, the `grpc_server_handling_seconds` histogram (their names and buckets, which
//! etcd exports), `grpc_server_msg_{received,sent}_total` (a stream's messages one by one, read
//! off gRPC's framing as they pass), etcd's `etcd_server_client_requests_total` and
//! `etcd_network_client_grpc_{received,sent}_bytes_total` (the messages' encoded bytes, which
//! etcd's codec counts), and a warning naming the client for a unary request slower than
//! etcd's 100 ms "took too long" threshold. A stream is handled when it ends: with its status,
//! or, when the client goes away first, with the code etcd's handler returns then
//! ([`cancel_code`]). The JSON gateway's calls are counted here too (`gateway.rs`), as etcd's
//! gateway calls its gRPC server. Front-local counters; `/metrics` renders them.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;

/// go-grpc-prometheus's default histogram buckets, seconds.
pub const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// etcd's warning threshold for a slow request.
pub const SLOW: Duration = Duration::from_millis(100);

/// The streaming methods (their "handling time" is until the stream opens), and the calls
/// that wait by design (a lock or a leadership): never "slow".
fn is_stream(path: &str) -> bool {
    matches!(
        path,
        "/etcdserverpb.Watch/Watch"
            | "/etcdserverpb.Lease/LeaseKeepAlive"
            | "/etcdserverpb.Maintenance/Snapshot"
            | "/v3electionpb.Election/Observe"
            | "/v3electionpb.Election/Campaign"
            | "/v3lockpb.Lock/Lock"
    )
}

/// Counters the front keeps besides the per-method ones.
#[derive(Debug, Default)]
pub struct FrontCounters {
    /// Writes that failed to get through the log (timeouts, no leader, too many requests).
    pub proposals_failed: std::sync::atomic::AtomicU64,
    /// Bytes read from and written to client connections (gRPC and HTTP, TLS included):
    /// actcd's `actcd_network_client_{received,sent}_bytes_total`. etcd's gRPC byte counters
    /// count messages only ([`RequestStats`]).
    pub received_bytes: Arc<std::sync::atomic::AtomicU64>,
    pub sent_bytes: Arc<std::sync::atomic::AtomicU64>,
    /// `/health` answers (etcd's `etcd_server_health_success` and `_failures`).
    pub health_success: std::sync::atomic::AtomicU64,
    pub health_failures: std::sync::atomic::AtomicU64,
    /// `/metrics` scrapes being served now and served so far (the Go client's promhttp
    /// handler counts its own, which etcd exports).
    pub scrapes_in_flight: std::sync::atomic::AtomicU64,
    pub scrapes_served: std::sync::atomic::AtomicU64,
    /// Linearizable reads whose ReadIndex round did not finish before the request's deadline
    /// (added to the raft node's out-of-date rounds in `etcd_server_slow_read_indexes_total`).
    pub read_index_timeouts: std::sync::atomic::AtomicU64,
    /// etcd 3.6's per-check outcomes of `/livez` and `/readyz`: by (type, name), the last
    /// result and the successes and failures so far. Probes are rare: a lock is fine here.
    health_checks: std::sync::Mutex<HealthChecks>,
    /// etcd 3.6 and 3.7's request, range and watch send loop latencies (`durations.rs`).
    pub durations: crate::durations::Durations,
}

impl FrontCounters {
    /// One run of a `/livez` or `/readyz` check.
    pub fn record_health_check(&self, kind: &'static str, name: &str, ok: bool) {
        let mut checks = self.health_checks.lock().unwrap_or_else(|e| e.into_inner());
        let e = checks.entry((kind, name.to_string())).or_default();
        e.0 = ok;
        if ok {
            e.1 += 1;
        } else {
            e.2 += 1;
        }
    }

    /// etcd 3.6's `etcd_server_healthcheck` and `etcd_server_healthchecks_total`, once a check
    /// has run.
    pub fn render_health_checks(&self, out: &mut String) {
        let checks = self
            .health_checks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if checks.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "# HELP etcd_server_healthcheck The result of each kind of healthcheck."
        );
        let _ = writeln!(out, "# TYPE etcd_server_healthcheck gauge");
        for ((kind, name), (ok, _, _)) in &checks {
            let _ = writeln!(
                out,
                "etcd_server_healthcheck{{name=\"{name}\",type=\"{kind}\"}} {}",
                u8::from(*ok)
            );
        }
        let _ = writeln!(
            out,
            "# HELP etcd_server_healthchecks_total The total number of each kind of healthcheck."
        );
        let _ = writeln!(out, "# TYPE etcd_server_healthchecks_total counter");
        for ((kind, name), (_, success, error)) in &checks {
            for (status, n) in [("error", error), ("success", success)] {
                if *n > 0 {
                    let _ = writeln!(
                        out,
                        "etcd_server_healthchecks_total{{name=\"{name}\",status=\"{status}\",type=\"{kind}\"}} {n}"
                    );
                }
            }
        }
    }
}

/// By (type, check name): the last result, then the successes and failures so far.
type HealthChecks = std::collections::BTreeMap<(&'static str, String), (bool, u64, u64)>;

/// A client connection that adds what it reads and writes to the front's byte counters.
pub struct Counted<IO> {
    inner: IO,
    received: Arc<std::sync::atomic::AtomicU64>,
    sent: Arc<std::sync::atomic::AtomicU64>,
}

impl<IO> Counted<IO> {
    pub fn new(inner: IO, counters: &FrontCounters) -> Self {
        Self {
            inner,
            received: counters.received_bytes.clone(),
            sent: counters.sent_bytes.clone(),
        }
    }
}

impl<IO: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counted<IO> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len().saturating_sub(before) as u64;
        if n > 0 {
            self.received
                .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }
}

impl<IO: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Counted<IO> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            self.sent
                .fetch_add(*n as u64, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = &r {
            self.sent
                .fetch_add(*n as u64, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<IO: tonic::transport::server::Connected> tonic::transport::server::Connected for Counted<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

/// One method's counters: atomics, allocated once for every method the server has, so
/// accounting a call takes no lock.
#[derive(Debug)]
struct Method {
    path: String,
    service: String,
    method: String,
    /// go-grpc-prometheus's `grpc_type`.
    kind: &'static str,
    started: AtomicU64,
    /// A streaming method's messages received and sent (a unary call's are its start and
    /// its success).
    received: AtomicU64,
    sent: AtomicU64,
    /// Answers by gRPC code, indexed by the code's number.
    codes: [AtomicU64; CODES],
    /// Per bucket (not cumulative), the last one above every bound.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

/// gRPC's status codes, 0 (OK) to 16 (Unauthenticated).
const CODES: usize = 17;

/// The `client-api-version` values etcd's clients send (`unknown` without one); others are
/// counted as `unknown` too, so a made-up header can't add series.
const CLIENT_VERSIONS: [&str; 8] = ["3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "unknown"];

/// Per-method counters, and etcd's count of client requests by type and client API version.
#[derive(Debug)]
pub struct RequestStats {
    methods: Vec<Method>,
    by_path: std::collections::HashMap<String, usize>,
    /// `[unary, stream]` × [`CLIENT_VERSIONS`].
    client_requests: [[AtomicU64; CLIENT_VERSIONS.len()]; 2],
    /// `--metrics extensive`: the handling-time histograms are kept and shown (etcd shows
    /// them only then).
    extensive: std::sync::atomic::AtomicBool,
    /// Encoded bytes of the messages received and sent (etcd's codec counts them:
    /// `etcd_network_client_grpc_received_bytes_total`, `_sent_bytes_total`).
    payload_received: AtomicU64,
    payload_sent: AtomicU64,
}

impl Default for RequestStats {
    fn default() -> Self {
        let methods: Vec<Method> = METHOD_DESCRIPTORS
            .iter()
            .map(|(path, service, method, kind)| Method {
                path: path.clone(),
                service: service.clone(),
                method: method.clone(),
                kind,
                started: AtomicU64::new(0),
                received: AtomicU64::new(0),
                sent: AtomicU64::new(0),
                codes: Default::default(),
                buckets: Default::default(),
                sum_nanos: AtomicU64::new(0),
            })
            .collect();
        let by_path = methods
            .iter()
            .enumerate()
            .map(|(i, m)| (m.path.clone(), i))
            .collect();
        Self {
            methods,
            by_path,
            client_requests: Default::default(),
            extensive: std::sync::atomic::AtomicBool::new(false),
            payload_received: AtomicU64::new(0),
            payload_sent: AtomicU64::new(0),
        }
    }
}

fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "Canceled",
        Unknown => "Unknown",
        InvalidArgument => "InvalidArgument",
        DeadlineExceeded => "DeadlineExceeded",
        NotFound => "NotFound",
        AlreadyExists => "AlreadyExists",
        PermissionDenied => "PermissionDenied",
        ResourceExhausted => "ResourceExhausted",
        FailedPrecondition => "FailedPrecondition",
        Aborted => "Aborted",
        OutOfRange => "OutOfRange",
        Unimplemented => "Unimplemented",
        Internal => "Internal",
        Unavailable => "Unavailable",
        DataLoss => "DataLoss",
        Unauthenticated => "Unauthenticated",
    }
}

impl RequestStats {
    /// `--metrics extensive` (`true`) or `basic`.
    pub fn set_extensive(&self, on: bool) {
        self.extensive.store(on, Relaxed);
    }

    fn method(&self, path: &str) -> Option<&Method> {
        self.by_path.get(path).and_then(|i| self.methods.get(*i))
    }

    /// Whether `path` is a streaming method the server has.
    pub fn is_streaming(&self, path: &str) -> bool {
        self.method(path).is_some_and(|m| m.kind != "unary")
    }

    /// Messages of `path` received (encoded `bytes` in all): a stream's count one by one; a
    /// unary call's one is its start.
    pub fn received(&self, path: &str, messages: u64, bytes: u64) {
        self.payload_received.fetch_add(bytes, Relaxed);
        if let Some(m) = self.method(path).filter(|m| m.kind != "unary") {
            m.received.fetch_add(messages, Relaxed);
        }
    }

    /// Messages of `path` sent (encoded `bytes` in all); as [`Self::received`].
    pub fn sent(&self, path: &str, messages: u64, bytes: u64) {
        self.payload_sent.fetch_add(bytes, Relaxed);
        if let Some(m) = self.method(path).filter(|m| m.kind != "unary") {
            m.sent.fetch_add(messages, Relaxed);
        }
    }

    /// Encoded bytes of the messages received and sent so far.
    pub fn payload_bytes(&self) -> (u64, u64) {
        (
            self.payload_received.load(Relaxed),
            self.payload_sent.load(Relaxed),
        )
    }

    /// A call of a method the server has has started: go-grpc-prometheus's
    /// `grpc_server_started_total`, and etcd's `etcd_server_client_requests_total` by the
    /// client's `client-api-version` header. Calls of other paths are not counted (see
    /// [`Self::record`]).
    pub fn started(&self, path: &str, client_api_version: Option<&str>) {
        let Some(m) = self.by_path.get(path).and_then(|i| self.methods.get(*i)) else {
            return;
        };
        m.started.fetch_add(1, Relaxed);
        let kind = usize::from(m.kind != "unary");
        let version = client_api_version
            .and_then(|v| CLIENT_VERSIONS.iter().position(|c| *c == v))
            .unwrap_or(CLIENT_VERSIONS.len() - 1);
        self.client_requests[kind][version].fetch_add(1, Relaxed);
    }

    /// Records one answered call of a method the server has; any other path (unknown methods
    /// and services) is not counted, as etcd's interceptors never see one: a series per path a
    /// client makes up would grow `/metrics` and the memory without bound (found by the
    /// hostile-input run: 27 MB of series for random paths after 100k requests).
    pub fn record(&self, path: &str, code: tonic::Code, took: Duration) {
        let Some(m) = self.by_path.get(path).and_then(|i| self.methods.get(*i)) else {
            return;
        };
        if let Some(c) = m.codes.get(code as usize) {
            c.fetch_add(1, Relaxed);
        }
        if !self.extensive.load(Relaxed) {
            return;
        }
        let secs = took.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|le| secs <= *le)
            .unwrap_or(BUCKETS.len());
        m.buckets[i].fetch_add(1, Relaxed);
        m.sum_nanos
            .fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    /// The counters in Prometheus text, every method and code listed from zero as
    /// go-grpc-prometheus does once etcd registers its services.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let labels = |m: &Method| {
            format!(
                "grpc_method=\"{}\",grpc_service=\"{}\",grpc_type=\"{}\"",
                m.method, m.service, m.kind
            )
        };
        let _ = writeln!(
            out,
            "# HELP grpc_server_handled_total Total number of RPCs completed on the server, regardless of success or failure."
        );
        let _ = writeln!(out, "# TYPE grpc_server_handled_total counter");
        for m in &self.methods {
            for (i, c) in m.codes.iter().enumerate() {
                let code = code_name(tonic::Code::from(i as i32));
                let _ = writeln!(
                    out,
                    "grpc_server_handled_total{{grpc_code=\"{code}\",{}}} {}",
                    labels(m),
                    c.load(Relaxed)
                );
            }
        }
        if self.extensive.load(Relaxed) {
            let _ = writeln!(
                out,
                "# HELP grpc_server_handling_seconds Histogram of response latency (seconds) of gRPC that had been application-level handled by the server."
            );
            let _ = writeln!(out, "# TYPE grpc_server_handling_seconds histogram");
            for m in &self.methods {
                let l = labels(m);
                let mut cumulative = 0;
                for (le, n) in BUCKETS.iter().zip(&m.buckets) {
                    cumulative += n.load(Relaxed);
                    let _ = writeln!(
                        out,
                        "grpc_server_handling_seconds_bucket{{{l},le=\"{le}\"}} {cumulative}"
                    );
                }
                cumulative += m.buckets[BUCKETS.len()].load(Relaxed);
                let _ = writeln!(
                    out,
                    "grpc_server_handling_seconds_bucket{{{l},le=\"+Inf\"}} {cumulative}"
                );
                let _ = writeln!(
                    out,
                    "grpc_server_handling_seconds_sum{{{l}}} {}",
                    m.sum_nanos.load(Relaxed) as f64 / 1e9
                );
                let _ = writeln!(
                    out,
                    "grpc_server_handling_seconds_count{{{l}}} {cumulative}"
                );
            }
        }
        // A unary call receives one message and sends one if it succeeds; a stream's are
        // counted one by one.
        for (name, help, value) in [
            (
                "grpc_server_msg_received_total",
                "Total number of RPC stream messages received on the server.",
                (|m: &Method| {
                    if m.kind == "unary" {
                        m.started.load(Relaxed)
                    } else {
                        m.received.load(Relaxed)
                    }
                }) as fn(&Method) -> u64,
            ),
            (
                "grpc_server_msg_sent_total",
                "Total number of gRPC stream messages sent by the server.",
                |m: &Method| {
                    if m.kind == "unary" {
                        m.codes[0].load(Relaxed)
                    } else {
                        m.sent.load(Relaxed)
                    }
                },
            ),
            (
                "grpc_server_started_total",
                "Total number of RPCs started on the server.",
                |m: &Method| m.started.load(Relaxed),
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            for m in &self.methods {
                let _ = writeln!(out, "{name}{{{}}} {}", labels(m), value(m));
            }
        }
        let _ = writeln!(
            out,
            "# HELP etcd_server_client_requests_total The total number of client requests per client version."
        );
        let _ = writeln!(out, "# TYPE etcd_server_client_requests_total counter");
        for (kind, row) in ["unary", "stream"].iter().zip(&self.client_requests) {
            for (version, n) in CLIENT_VERSIONS.iter().zip(row) {
                let n = n.load(Relaxed);
                if n > 0 {
                    let _ = writeln!(
                        out,
                        "etcd_server_client_requests_total{{client_api_version=\"{version}\",type=\"{kind}\"}} {n}"
                    );
                }
            }
        }
        out
    }
}

#[derive(Clone)]
pub struct Accounting {
    pub stats: Arc<RequestStats>,
    /// Whether this member is a learner.
    pub learner: crate::learner::LearnerFlag,
}

impl<S> tower_layer::Layer<S> for Accounting {
    type Service = Accounted<S>;

    fn layer(&self, inner: S) -> Accounted<S> {
        Accounted {
            inner,
            stats: self.stats.clone(),
            learner: self.learner.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Accounted<S> {
    inner: S,
    stats: Arc<RequestStats>,
    learner: crate::learner::LearnerFlag,
}

impl<S, B> tower_service::Service<http::Request<B>> for Accounted<S>
where
    S: tower_service::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
        >,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: hyper::body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let path = req.uri().path().to_string();
        let remote = req
            .extensions()
            .get::<tonic::transport::server::TcpConnectInfo>()
            .and_then(|c| c.remote_addr());
        let stats = self.stats.clone();
        let started = Instant::now();
        stats.started(
            &path,
            req.headers()
                .get("client-api-version")
                .and_then(|v| v.to_str().ok()),
        );
        if *self.learner.borrow() && !crate::learner::allowed_for_learner(&path) {
            let refusal = actcd_types::EtcdError::NotSupportedForLearner.to_status();
            stats.record(&path, refusal.code(), started.elapsed());
            return futures::future::ready(Ok(refusal.into_http())).boxed();
        }
        let deadline = grpc_timeout(req.headers()).map(|t| tokio::time::Instant::now() + t);
        let req = req.map(|body| {
            tonic::body::Body::new(CountedBody {
                inner: body,
                framing: Framing::default(),
                stats: stats.clone(),
                path: path.clone(),
                side: Side::Received,
            })
        });
        let answer = CLIENT_DEADLINE.scope(deadline, self.inner.call(req));
        async move {
            let mut res = answer.await;
            let took = started.elapsed();
            if let Ok(resp) = &mut res {
                as_grpc_go_answers(&path, resp.headers_mut());
                // A failed call is a trailers-only answer: its status is in the headers.
                let status = resp
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<i32>().ok())
                    .map(tonic::Code::from);
                // A stream that opened is handled when it ends.
                let open_stream = status.is_none() && stats.is_streaming(&path);
                let code = status.unwrap_or(tonic::Code::Ok);
                let side = if open_stream {
                    Side::SentUntilEnd { started }
                } else {
                    stats.record(&path, code, took);
                    Side::Sent
                };
                let body = std::mem::take(resp.body_mut());
                *resp.body_mut() = tonic::body::Body::new(CountedBody {
                    inner: body,
                    framing: Framing::default(),
                    stats: stats.clone(),
                    path: path.clone(),
                    side,
                });
                if took > SLOW && !is_stream(&path) {
                    tracing::warn!(
                        method = %path,
                        remote = ?remote,
                        took = ?took,
                        code = code_name(code),
                        "request took too long"
                    );
                }
            }
            res
        }
        .boxed()
    }
}

/// The code a stream is handled with when its client goes away before it ends: what etcd's
/// handler returns then. A watch answers `ErrGRPCWatchCanceled` (Canceled); a keep-alive
/// stream `ErrGRPCNoLeader` (Unavailable: "the only server-side cancellation is noleader for
/// now", etcd's `LeaseKeepAlive` in 3.5 and 3.6); any other stream its context's error
/// (Canceled).
pub fn cancel_code(path: &str) -> tonic::Code {
    match path {
        "/etcdserverpb.Lease/LeaseKeepAlive" => tonic::Code::Unavailable,
        _ => tonic::Code::Cancelled,
    }
}

/// gRPC's framing read off a body as it passes: each message is a 5-byte prefix (a
/// compressed flag, the length, big-endian) and then its bytes.
#[derive(Debug, Default)]
struct Framing {
    prefix: [u8; 5],
    /// Prefix bytes seen of the next message.
    have: usize,
    /// Bytes of the current message still to pass.
    rest: u64,
}

impl Framing {
    /// The messages whose prefix was in `data`, and their lengths' sum.
    fn feed(&mut self, mut data: &[u8]) -> (u64, u64) {
        let (mut messages, mut bytes) = (0, 0);
        while !data.is_empty() {
            if self.rest > 0 {
                let n = usize::try_from(self.rest).map_or(data.len(), |r| r.min(data.len()));
                self.rest -= n as u64;
                data = &data[n..];
                continue;
            }
            let n = (self.prefix.len() - self.have).min(data.len());
            self.prefix[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have == self.prefix.len() {
                let [_, a, b, c, d] = self.prefix;
                let len = u64::from(u32::from_be_bytes([a, b, c, d]));
                messages += 1;
                bytes += len;
                self.rest = len;
                self.have = 0;
            }
        }
        (messages, bytes)
    }
}

/// Which way a [`CountedBody`] goes.
enum Side {
    Received,
    Sent,
    /// A stream's answer: the call is handled when the body ends (its trailers' status) or is
    /// dropped before (the client went away: [`cancel_code`]).
    SentUntilEnd {
        started: Instant,
    },
}

/// A call's body, its messages counted as they pass.
struct CountedBody<B> {
    inner: B,
    framing: Framing,
    stats: Arc<RequestStats>,
    path: String,
    side: Side,
}

impl<B> CountedBody<B> {
    fn handled(&mut self, code: tonic::Code) {
        if let Side::SentUntilEnd { started } = self.side {
            self.stats.record(&self.path, code, started.elapsed());
            self.side = Side::Sent;
        }
    }
}

impl<B> hyper::body::Body for CountedBody<B>
where
    B: hyper::body::Body<Data = bytes::Bytes> + Unpin,
{
    type Data = bytes::Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let polled = std::pin::Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let (messages, bytes) = this.framing.feed(data);
                    if messages > 0 || bytes > 0 {
                        match this.side {
                            Side::Received => this.stats.received(&this.path, messages, bytes),
                            _ => this.stats.sent(&this.path, messages, bytes),
                        }
                    }
                } else if let Some(trailers) = frame.trailers_ref() {
                    let code = trailers
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<i32>().ok())
                        .map_or(tonic::Code::Unknown, tonic::Code::from);
                    this.handled(code);
                }
            }
            Poll::Ready(Some(Err(_))) => this.handled(tonic::Code::Unknown),
            Poll::Ready(None) => this.handled(tonic::Code::Ok),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

impl<B> Drop for CountedBody<B> {
    fn drop(&mut self) {
        let code = cancel_code(&self.path);
        self.handled(code);
    }
}

/// `(path, service, method, grpc_type)` of every method of [`SERVICES`], from the proto
/// descriptors.
static METHOD_DESCRIPTORS: std::sync::LazyLock<Vec<(String, String, String, &'static str)>> =
    std::sync::LazyLock::new(|| {
        let Ok(pool) = prost_reflect::DescriptorPool::decode(actcd_proto::FILE_DESCRIPTOR_SET)
        else {
            return Vec::new();
        };
        SERVICES
            .iter()
            .filter_map(|s| pool.get_service_by_name(s))
            .flat_map(|s| {
                s.methods()
                    .map(|m| {
                        let kind = match (m.is_client_streaming(), m.is_server_streaming()) {
                            (false, false) => "unary",
                            (true, false) => "client_stream",
                            (false, true) => "server_stream",
                            (true, true) => "bidi_stream",
                        };
                        (
                            format!("/{}/{}", s.full_name(), m.name()),
                            s.full_name().to_string(),
                            m.name().to_string(),
                            kind,
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    });

/// The services on the client port, as grpc-go names them in "unknown service".
const SERVICES: &[&str] = &[
    "etcdserverpb.KV",
    "etcdserverpb.Watch",
    "etcdserverpb.Lease",
    "etcdserverpb.Cluster",
    "etcdserverpb.Maintenance",
    "etcdserverpb.Auth",
    "v3lockpb.Lock",
    "v3electionpb.Election",
];

/// Rewrites the two trailers-only refusals tonic words unlike grpc-go (found by the hostile-input
/// run; etcd 3.5.1's answers):
/// - an unknown service or method: tonic sends `Unimplemented` with no message; grpc-go says
///   `unknown service S`, `unknown method M for service S`, or for a path without a second
///   `/` `malformed method name: "P"` (with code `ResourceExhausted`, as grpc-go 1.41 has it);
/// - a message over the receive limit: tonic sends `OutOfRange` "Error, decoded message length
///   too large: found N bytes, the limit is: L bytes"; grpc-go `ResourceExhausted` "grpc:
///   received message larger than max (N vs. L)", the code clients retry and back off on.
fn as_grpc_go_answers(path: &str, headers: &mut http::HeaderMap) {
    let code = headers.get("grpc-status").map(|v| v.as_bytes());
    let message = headers
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let rewritten = match code {
        Some(b"12") if message.is_empty() => {
            let sm = path.strip_prefix('/').unwrap_or(path);
            Some(match sm.rfind('/') {
                // grpc-go 1.41 (etcd 3.5.1's) says ResourceExhausted here.
                None => (
                    tonic::Code::ResourceExhausted,
                    format!("malformed method name: {path:?}"),
                ),
                Some(pos) if SERVICES.contains(&&sm[..pos]) => (
                    tonic::Code::Unimplemented,
                    format!(
                        "unknown method {} for service {}",
                        &sm[pos + 1..],
                        &sm[..pos]
                    ),
                ),
                Some(pos) => (
                    tonic::Code::Unimplemented,
                    format!("unknown service {}", &sm[..pos]),
                ),
            })
        }
        Some(b"11") => {
            let decoded = percent_decode(message);
            decoded
                .strip_prefix("Error, decoded message length too large: found ")
                .and_then(|rest| rest.split_once(" bytes, the limit is: "))
                .map(|(found, limit)| {
                    (
                        tonic::Code::ResourceExhausted,
                        format!(
                            "grpc: received message larger than max ({found} vs. {})",
                            limit.trim_end_matches(" bytes")
                        ),
                    )
                })
        }
        _ => None,
    };
    if let Some((code, message)) = rewritten
        && let Ok(v) = http::HeaderValue::from_str(&percent_encode(&message))
    {
        headers.insert("grpc-status", http::HeaderValue::from(code as i32));
        headers.insert("grpc-message", v);
    }
}

/// gRPC's percent-encoding of `grpc-message`: bytes outside printable ASCII, and `%`.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

tokio::task_local! {
    /// The deadline of the gRPC call being served, from its `grpc-timeout` header.
    static CLIENT_DEADLINE: Option<tokio::time::Instant>;
}

/// When the client of the gRPC call this task serves stops waiting, if it said (etcd's clients
/// send their context deadline as `grpc-timeout`): a write that must wait for a leader is
/// dropped then instead of committing after its client saw it fail.
pub(crate) fn client_deadline() -> Option<tokio::time::Instant> {
    CLIENT_DEADLINE.try_with(|d| *d).ok().flatten()
}

/// gRPC's `grpc-timeout` header: digits and a unit (H, M, S, m, u, n).
fn grpc_timeout(headers: &http::HeaderMap) -> Option<std::time::Duration> {
    let v = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => std::time::Duration::from_secs(n.checked_mul(3600)?),
        "M" => std::time::Duration::from_secs(n.checked_mul(60)?),
        "S" => std::time::Duration::from_secs(n),
        "m" => std::time::Duration::from_millis(n),
        "u" => std::time::Duration::from_micros(n),
        "n" => std::time::Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
#[path = "metrics_deadline_tests.rs"]
mod deadline_tests;

#[cfg(test)]
#[path = "metrics_stream_tests.rs"]
mod stream_tests;

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
