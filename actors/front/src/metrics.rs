//! The tower layer in front of every gRPC service: it refuses on a learner what etcd's
//! learners refuse (`learner.rs`), and accounts for every call:
//! `grpc_server_handled_total{grpc_service,grpc_method,grpc_code}` and the
//! `grpc_server_handling_seconds` histogram (go-grpc-prometheus's names and buckets, which
//! etcd exports), and a warning naming the client for a unary request slower than etcd's
//! 100 ms "took too long" threshold. Front-local counters; `/metrics` renders them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
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

#[derive(Debug, Default, Clone)]
struct Method {
    /// Answers by gRPC code name.
    codes: BTreeMap<&'static str, u64>,
    /// Cumulative counts per bucket, then the total count and sum.
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// Counters the front keeps besides the per-method ones.
#[derive(Debug, Default)]
pub struct FrontCounters {
    /// Writes that failed to get through the log (timeouts, no leader, too many requests).
    pub proposals_failed: std::sync::atomic::AtomicU64,
    /// Bytes read from and written to client connections (gRPC and HTTP, TLS included).
    pub received_bytes: Arc<std::sync::atomic::AtomicU64>,
    pub sent_bytes: Arc<std::sync::atomic::AtomicU64>,
}

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

/// Per-method counters.
#[derive(Debug, Default)]
pub struct RequestStats {
    methods: Mutex<BTreeMap<String, Method>>,
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
    /// Records one answered call of a method the server has; any other path (unknown methods
    /// and services) is not counted, as etcd's interceptors never see one: a series per path a
    /// client makes up would grow `/metrics` and the memory without bound (found by the
    /// hostile-input run: 27 MB of series for random paths after 100k requests).
    pub fn record(&self, path: &str, code: tonic::Code, took: Duration) {
        if !KNOWN_METHODS.contains(path) {
            return;
        }
        let secs = took.as_secs_f64();
        let mut methods = self.methods.lock().unwrap_or_else(|e| e.into_inner());
        if !methods.contains_key(path) {
            methods.insert(path.to_string(), Method::default());
        }
        let Some(m) = methods.get_mut(path) else {
            return;
        };
        *m.codes.entry(code_name(code)).or_default() += 1;
        for (i, le) in BUCKETS.iter().enumerate() {
            if secs <= *le {
                m.buckets[i] += 1;
            }
        }
        m.count += 1;
        m.sum += secs;
    }

    /// The counters in Prometheus text.
    pub fn render(&self) -> String {
        let methods = self
            .methods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut out = String::new();
        let labels = |path: &str| {
            let (service, method) = path
                .trim_start_matches('/')
                .split_once('/')
                .unwrap_or(("", path));
            format!("grpc_method=\"{method}\",grpc_service=\"{service}\"")
        };
        let _ = writeln!(
            out,
            "# HELP grpc_server_handled_total Total number of RPCs completed on the server, regardless of success or failure."
        );
        let _ = writeln!(out, "# TYPE grpc_server_handled_total counter");
        for (path, m) in &methods {
            for (code, n) in &m.codes {
                let _ = writeln!(
                    out,
                    "grpc_server_handled_total{{grpc_code=\"{code}\",{}}} {n}",
                    labels(path)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP grpc_server_handling_seconds Histogram of response latency (seconds) of gRPC that had been application-level handled by the server."
        );
        let _ = writeln!(out, "# TYPE grpc_server_handling_seconds histogram");
        for (path, m) in &methods {
            let l = labels(path);
            for (le, n) in BUCKETS.iter().zip(m.buckets) {
                let _ = writeln!(
                    out,
                    "grpc_server_handling_seconds_bucket{{{l},le=\"{le}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "grpc_server_handling_seconds_bucket{{{l},le=\"+Inf\"}} {}",
                m.count
            );
            let _ = writeln!(out, "grpc_server_handling_seconds_sum{{{l}}} {}", m.sum);
            let _ = writeln!(out, "grpc_server_handling_seconds_count{{{l}}} {}", m.count);
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
    S: tower_service::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
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
        if *self.learner.borrow() && !crate::learner::allowed_for_learner(&path) {
            let refusal = actcd_types::EtcdError::NotSupportedForLearner.to_status();
            stats.record(&path, refusal.code(), started.elapsed());
            return futures::future::ready(Ok(refusal.into_http())).boxed();
        }
        let deadline = grpc_timeout(req.headers()).map(|t| tokio::time::Instant::now() + t);
        let answer = CLIENT_DEADLINE.scope(deadline, self.inner.call(req));
        async move {
            let mut res = answer.await;
            let took = started.elapsed();
            if let Ok(resp) = &mut res {
                as_grpc_go_answers(&path, resp.headers_mut());
                // A failed unary call is a trailers-only answer: its status is in the headers.
                let code = resp
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<i32>().ok())
                    .map_or(tonic::Code::Ok, tonic::Code::from);
                stats.record(&path, code, took);
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

/// `/service/Method` of every method of [`SERVICES`], from the proto descriptors.
static KNOWN_METHODS: std::sync::LazyLock<std::collections::HashSet<String>> =
    std::sync::LazyLock::new(|| {
        let Ok(pool) = prost_reflect::DescriptorPool::decode(actcd_proto::FILE_DESCRIPTOR_SET)
        else {
            return Default::default();
        };
        SERVICES
            .iter()
            .filter_map(|s| pool.get_service_by_name(s))
            .flat_map(|s| {
                s.methods()
                    .map(|m| format!("/{}/{}", s.full_name(), m.name()))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(path: &str, code: &str, message: Option<&str>) -> (String, String) {
        let mut h = http::HeaderMap::new();
        h.insert("grpc-status", http::HeaderValue::from_str(code).unwrap());
        if let Some(m) = message {
            h.insert("grpc-message", http::HeaderValue::from_str(m).unwrap());
        }
        as_grpc_go_answers(path, &mut h);
        let get = |k: &str| {
            h.get(k)
                .map(|v| percent_decode(v.to_str().unwrap()))
                .unwrap_or_default()
        };
        (get("grpc-status"), get("grpc-message"))
    }

    #[test]
    fn calls_of_unknown_methods_are_not_counted() {
        let s = RequestStats::default();
        s.record(
            "/etcdserverpb.KV/Range",
            tonic::Code::Ok,
            Duration::from_millis(1),
        );
        s.record(
            "/etcdserverpb.KV/Nope",
            tonic::Code::Unimplemented,
            Duration::from_millis(1),
        );
        s.record(
            &format!("/{}", "x".repeat(8000)),
            tonic::Code::ResourceExhausted,
            Duration::from_millis(1),
        );
        let text = s.render();
        assert!(text.contains("grpc_method=\"Range\""), "{text}");
        assert!(!text.contains("Nope") && !text.contains("xxxx"), "{text}");
        assert!(KNOWN_METHODS.len() >= 40, "{}", KNOWN_METHODS.len());
    }

    /// etcd 3.5.1's answers (grpc-go), taken from the hostile-input run against it.
    #[test]
    fn unknown_methods_and_oversized_messages_are_refused_in_grpc_go_words() {
        let s = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        assert_eq!(
            answer("/etcdserverpb.KV/Nope", "12", None),
            s("12", "unknown method Nope for service etcdserverpb.KV")
        );
        assert_eq!(
            answer("/etcdserverpb.Nope/Range", "12", None),
            s("12", "unknown service etcdserverpb.Nope")
        );
        assert_eq!(
            answer("/etcdserverpb.KV/Range/", "12", Some("")),
            s("12", "unknown service etcdserverpb.KV/Range")
        );
        assert_eq!(
            answer("/", "12", None),
            s("8", "malformed method name: \"/\"")
        );
        assert_eq!(
            answer(
                "/etcdserverpb.KV/Put",
                "11",
                Some(
                    "Error, decoded message length too large: found 2621447 bytes, the limit is: 2097152 bytes"
                )
            ),
            s(
                "8",
                "grpc: received message larger than max (2621447 vs. 2097152)"
            )
        );
        // Everything else passes as it is.
        assert_eq!(
            answer(
                "/etcdserverpb.KV/Range",
                "11",
                Some("etcdserver: mvcc: required revision is a future revision")
            ),
            s(
                "11",
                "etcdserver: mvcc: required revision is a future revision"
            )
        );
        assert_eq!(
            answer("/etcdserverpb.Maintenance/Downgrade", "12", Some("x")),
            s("12", "x")
        );
    }

    #[test]
    fn counts_and_buckets_render_as_prometheus_text() {
        let s = RequestStats::default();
        s.record(
            "/etcdserverpb.KV/Put",
            tonic::Code::Ok,
            Duration::from_millis(3),
        );
        s.record(
            "/etcdserverpb.KV/Put",
            tonic::Code::Ok,
            Duration::from_millis(30),
        );
        s.record(
            "/etcdserverpb.KV/Put",
            tonic::Code::InvalidArgument,
            Duration::from_millis(1),
        );
        let text = s.render();
        let has = |line: &str| text.lines().any(|l| l == line);
        assert!(has(
            r#"grpc_server_handled_total{grpc_code="OK",grpc_method="Put",grpc_service="etcdserverpb.KV"} 2"#
        ));
        assert!(has(
            r#"grpc_server_handled_total{grpc_code="InvalidArgument",grpc_method="Put",grpc_service="etcdserverpb.KV"} 1"#
        ));
        assert!(has(
            r#"grpc_server_handling_seconds_bucket{grpc_method="Put",grpc_service="etcdserverpb.KV",le="0.005"} 2"#
        ));
        assert!(has(
            r#"grpc_server_handling_seconds_bucket{grpc_method="Put",grpc_service="etcdserverpb.KV",le="0.05"} 3"#
        ));
        assert!(has(
            r#"grpc_server_handling_seconds_count{grpc_method="Put",grpc_service="etcdserverpb.KV"} 3"#
        ));
    }
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
mod deadline_tests {
    use super::grpc_timeout;
    use std::time::Duration;

    #[test]
    fn grpc_timeouts_are_read_in_every_unit() {
        for (header, want) in [
            ("5S", Some(Duration::from_secs(5))),
            ("4999m", Some(Duration::from_millis(4999))),
            ("2M", Some(Duration::from_secs(120))),
            ("1H", Some(Duration::from_secs(3600))),
            ("250000u", Some(Duration::from_millis(250))),
            ("7n", Some(Duration::from_nanos(7))),
            ("5", None),
            ("S", None),
            ("x5S", None),
        ] {
            let mut h = http::HeaderMap::new();
            h.insert("grpc-timeout", header.parse().unwrap());
            assert_eq!(grpc_timeout(&h), want, "{header}");
        }
    }
}
