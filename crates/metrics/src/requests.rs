//! go-grpc-prometheus's per-method server accounting as etcd exports it: `grpc_server_started_total`,
//! `grpc_server_handled_total{grpc_service,grpc_method,grpc_type,grpc_code}`, the
//! `grpc_server_handling_seconds` histogram (`--metrics extensive` only, as etcd), the
//! `grpc_server_msg_{received,sent}_total` counts, and etcd's
//! `etcd_server_client_requests_total{type,client_api_version}`: every series of every method of
//! the client port's services, allocated once and listed from zero.

use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// go-grpc-prometheus's default histogram buckets, seconds.
pub const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The streaming methods (their "handling time" is until the stream opens), and the calls
/// that wait by design (a lock or a leadership): never "slow", whatever their handling time.
pub fn never_slow(path: &str) -> bool {
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

/// go-grpc-prometheus's `grpc_code` label of `code` (grpc-go's `codes.Code` names:
/// `Canceled` with one l).
pub fn code_name(code: tonic::Code) -> &'static str {
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
                    crate::text::go_float(m.sum_nanos.load(Relaxed) as f64 / 1e9)
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
pub const SERVICES: &[&str] = &[
    "etcdserverpb.KV",
    "etcdserverpb.Watch",
    "etcdserverpb.Lease",
    "etcdserverpb.Cluster",
    "etcdserverpb.Maintenance",
    "etcdserverpb.Auth",
    "v3lockpb.Lock",
    "v3electionpb.Election",
];

#[cfg(test)]
#[path = "requests_tests.rs"]
mod tests;
