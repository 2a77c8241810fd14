//! Connections, the worker driver, pacing and key generation.
//!
//! A run is a set of workers (one per `--clients`), each owning its gRPC
//! client over one of the `--conns` channels. Workers claim request indices
//! from one shared counter until `--total` is reached or `--duration` has
//! passed, so the load spreads itself over whichever workers are free. With
//! `--rate`, request i is not sent before `start + i/rate` (an even schedule
//! rather than a token bucket, so there are no bursts). Each worker keeps its
//! latencies in its own vector; they are merged once at the end, so the hot
//! path takes no lock and sends no message.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actcd_proto::etcdserverpb::AuthenticateRequest;
use actcd_proto::etcdserverpb::auth_client::AuthClient;
use rand::Rng;
use tokio::time::Instant;
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};

use crate::BenchError;

/// gRPC metadata key etcd reads the auth token from.
const TOKEN_KEY: &str = "token";

/// One gRPC channel (an HTTP/2 connection) and the auth token for it.
#[derive(Clone)]
pub struct Conn {
    pub channel: Channel,
    token: Option<AsciiMetadataValue>,
}

impl Conn {
    /// Wraps `msg` in a request carrying this connection's token, if any.
    pub fn request<T>(&self, msg: T) -> Request<T> {
        let mut req = Request::new(msg);
        if let Some(token) = &self.token {
            req.metadata_mut().insert(TOKEN_KEY, token.clone());
        }
        req
    }
}

/// Where and how to connect.
#[derive(Debug, Clone)]
pub struct ConnOpts {
    pub endpoints: Vec<String>,
    pub conns: usize,
    /// `name` or `name:password`.
    pub user: Option<String>,
    pub password: Option<String>,
}

/// `--conns` channels, dialled round-robin over the endpoints.
pub struct Pool {
    conns: Vec<Conn>,
}

/// `--user name[:password]` and `--password` as one pair, like etcd's tools.
pub fn credentials(user: Option<&str>, password: Option<&str>) -> Option<(String, String)> {
    user.map(|user| match user.split_once(':') {
        Some((name, pass)) => (name.to_owned(), pass.to_owned()),
        None => (user.to_owned(), password.unwrap_or_default().to_owned()),
    })
}

impl Pool {
    pub async fn connect(opts: &ConnOpts) -> Result<Pool, BenchError> {
        let credentials = credentials(opts.user.as_deref(), opts.password.as_deref());
        let mut conns = Vec::with_capacity(opts.conns.max(1));
        for i in 0..opts.conns.max(1) {
            let url = endpoint_url(&opts.endpoints[i % opts.endpoints.len()])?;
            let channel = Endpoint::from_shared(url.clone())
                .map_err(|e| BenchError::Usage(format!("bad endpoint {url}: {e}")))?
                .tcp_nodelay(true)
                .connect_timeout(Duration::from_secs(5))
                .connect()
                .await
                .map_err(|source| BenchError::Connect {
                    endpoint: url.clone(),
                    source,
                })?;
            let token = match &credentials {
                Some((name, password)) => Some(authenticate(&channel, name, password).await?),
                None => None,
            };
            conns.push(Conn { channel, token });
        }
        Ok(Pool { conns })
    }

    /// The connection worker `i` uses.
    pub fn conn(&self, i: usize) -> &Conn {
        &self.conns[i % self.conns.len()]
    }
}

async fn authenticate(
    channel: &Channel,
    name: &str,
    password: &str,
) -> Result<AsciiMetadataValue, BenchError> {
    let resp = AuthClient::new(channel.clone())
        .authenticate(AuthenticateRequest {
            name: name.as_bytes().to_vec(),
            password: password.as_bytes().to_vec(),
        })
        .await
        .map_err(|s| BenchError::rpc("authenticate", s))?;
    MetadataValue::try_from(resp.into_inner().token)
        .map_err(|e| BenchError::Usage(format!("server sent an unusable token: {e}")))
}

/// `host:port` → `http://host:port`; `http://…` as is. TLS is not supported.
pub fn endpoint_url(ep: &str) -> Result<String, BenchError> {
    let ep = ep.trim();
    if ep.starts_with("https://") {
        return Err(BenchError::Usage(format!(
            "{ep}: TLS endpoints are not supported"
        )));
    }
    if ep.starts_with("http://") {
        Ok(ep.to_owned())
    } else {
        Ok(format!("http://{ep}"))
    }
}

/// Which of a mixed workload's halves a request belonged to; `Event` is a watch event in the
/// latency log (`watch-latency`: its put's send time and the time to reach the watcher).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    Event,
}

/// One client's request loop body: `call(i)` sends the i-th request and waits
/// for its answer.
pub trait Worker: Send + 'static {
    fn call(&mut self, i: u64) -> impl Future<Output = Result<Op, Status>> + Send;
}

/// How much load to offer.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Stop after this many requests (`None`: until the duration ends).
    pub total: Option<u64>,
    pub duration: Option<Duration>,
    /// Requests per second over all workers; 0 is unlimited.
    pub rate: f64,
}

impl Plan {
    /// A plan of exactly `total` requests, no pacing: set-up work.
    pub fn exactly(total: u64) -> Plan {
        Plan {
            total: Some(total),
            duration: None,
            rate: 0.0,
        }
    }
}

/// One logged request: when it was sent (seconds since the Unix epoch),
/// its latency in seconds, and whether it read or wrote.
pub type Logged = (f64, f64, Op);

/// `--latency-log`: when set, every successful request of every run is
/// kept here, so a script can cut the requests into time windows (before,
/// during and after a compaction, say).
static LATENCY_LOG: Mutex<Option<Vec<Logged>>> = Mutex::new(None);

/// Turns the latency log on.
pub fn start_latency_log() {
    *LATENCY_LOG.lock().expect("latency log") = Some(Vec::new());
}

fn latency_log_on() -> bool {
    LATENCY_LOG.lock().expect("latency log").is_some()
}

/// Adds watch events to the latency log, if it is on: `(sent, latency seconds)` each.
pub fn log_events(events: impl IntoIterator<Item = (Instant, f64)>) {
    if let Some(log) = LATENCY_LOG.lock().expect("latency log").as_mut() {
        log.extend(
            events
                .into_iter()
                .map(|(at, lat)| (unix_secs(at), lat, Op::Event)),
        );
    }
}

/// Everything logged so far, in send order.
pub fn take_latency_log() -> Vec<Logged> {
    let mut log = LATENCY_LOG
        .lock()
        .expect("latency log")
        .take()
        .unwrap_or_default();
    log.sort_by(|a, b| a.0.total_cmp(&b.0));
    log
}

/// Seconds since the Unix epoch of `at`: the wall clock read once, then
/// the monotonic clock, so the log's times are as steady as its latencies.
fn unix_secs(at: Instant) -> f64 {
    static BASE: OnceLock<(Instant, f64)> = OnceLock::new();
    let (base, unix) = BASE.get_or_init(|| {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        (Instant::now(), unix)
    });
    unix + at.saturating_duration_since(*base).as_secs_f64()
        - base.saturating_duration_since(at).as_secs_f64()
}

/// Writes the log as text: `unix_seconds latency_seconds r|w`, one request
/// a line.
pub fn write_latency_log(path: &str, log: &[Logged]) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for (at, lat, op) in log {
        let op = match op {
            Op::Read => 'r',
            Op::Write => 'w',
            Op::Event => 'e',
        };
        writeln!(out, "{at:.6} {lat:.6} {op}")?;
    }
    out.flush()
}

/// What a run measured: latencies (seconds) by kind, failures by message.
#[derive(Debug, Default)]
pub struct Samples {
    pub reads: Vec<f64>,
    pub writes: Vec<f64>,
    pub errors: BTreeMap<String, u64>,
    pub elapsed: Duration,
    /// Every request, when the latency log is on.
    log: Vec<Logged>,
}

impl Samples {
    fn merge(&mut self, other: Samples) {
        self.reads.extend(other.reads);
        self.writes.extend(other.writes);
        self.log.extend(other.log);
        for (k, v) in other.errors {
            *self.errors.entry(k).or_default() += v;
        }
    }

    /// Every successful latency, reads and writes alike.
    pub fn all(&self) -> Vec<f64> {
        let mut all = Vec::with_capacity(self.reads.len() + self.writes.len());
        all.extend_from_slice(&self.reads);
        all.extend_from_slice(&self.writes);
        all
    }

    pub fn ok(&self) -> usize {
        self.reads.len() + self.writes.len()
    }

    /// The first failure is `Unimplemented`: the server lacks the service.
    pub fn unimplemented(&self) -> Option<&str> {
        self.errors
            .keys()
            .find(|e| e.starts_with("Unimplemented"))
            .map(String::as_str)
    }
}

/// The text a failed request is counted under.
pub fn error_key(status: &Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}

/// Shared by the workers of one run.
struct Shared {
    next: AtomicU64,
    done: AtomicU64,
    total: u64,
    deadline: Option<Instant>,
    start: Instant,
    /// Seconds between two requests' scheduled start; 0 when unpaced.
    interval: f64,
}

impl Shared {
    /// Claims the next request index, or `None` when the run is over.
    fn claim(&self) -> Option<u64> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        (i < self.total).then_some(i)
    }

    fn scheduled(&self, i: u64) -> Option<Instant> {
        (self.interval > 0.0)
            .then(|| self.start + Duration::from_secs_f64(self.interval * i as f64))
    }

    fn expired(&self) -> bool {
        STOPPED.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// Set by [`stop_on_signal`]: every run ends as if its duration had passed.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// On SIGTERM or SIGINT, ends the running workload early (each worker
/// finishes the request in flight) so it still reports what it measured:
/// for a load run in the background whose end is decided by a script.
pub fn stop_on_signal() {
    tokio::spawn(async {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        STOPPED.store(true, Ordering::Relaxed);
    });
}

/// Runs `workers` to the plan and hands them back with what they measured
/// (workers may have collected more, e.g. revisions of their puts).
/// `label` names the progress bar; an empty label shows none (a run inside
/// another run's measurement, such as one page walk of many).
pub async fn drive<W: Worker>(label: &str, workers: Vec<W>, plan: Plan) -> (Samples, Vec<W>) {
    let start = Instant::now();
    let shared = Arc::new(Shared {
        next: AtomicU64::new(0),
        done: AtomicU64::new(0),
        total: plan.total.unwrap_or(u64::MAX),
        deadline: plan.duration.map(|d| start + d),
        start,
        interval: if plan.rate > 0.0 {
            1.0 / plan.rate
        } else {
            0.0
        },
    });
    let finished = Arc::new(AtomicBool::new(false));
    let progress = (!label.is_empty()).then(|| {
        tokio::spawn(progress_bar(
            label.to_owned(),
            shared.clone(),
            plan,
            finished.clone(),
            std::io::stderr().is_terminal(),
        ))
    });

    let tasks: Vec<_> = workers
        .into_iter()
        .map(|w| tokio::spawn(work(w, shared.clone())))
        .collect();
    let mut samples = Samples::default();
    let mut workers = Vec::with_capacity(tasks.len());
    for t in tasks {
        let (s, w) = t.await.expect("worker task panicked");
        samples.merge(s);
        workers.push(w);
    }
    samples.elapsed = start.elapsed();
    if let Some(log) = LATENCY_LOG.lock().expect("latency log").as_mut() {
        log.append(&mut samples.log);
    }
    finished.store(true, Ordering::Relaxed);
    if let Some(p) = progress {
        let _ = p.await;
    }
    (samples, workers)
}

async fn work<W: Worker>(mut w: W, shared: Arc<Shared>) -> (Samples, W) {
    let mut s = Samples::default();
    let logging = latency_log_on();
    while let Some(i) = shared.claim() {
        if let Some(at) = shared.scheduled(i) {
            tokio::time::sleep_until(at).await;
        }
        if shared.expired() {
            break;
        }
        let st = Instant::now();
        let res = w.call(i).await;
        let lat = st.elapsed().as_secs_f64();
        if logging && let Ok(op) = res {
            s.log.push((unix_secs(st), lat, op));
        }
        match res {
            Ok(Op::Read | Op::Event) => s.reads.push(lat),
            Ok(Op::Write) => s.writes.push(lat),
            Err(status) => {
                let unimplemented = status.code() == Code::Unimplemented;
                *s.errors.entry(error_key(&status)).or_default() += 1;
                shared.done.fetch_add(1, Ordering::Relaxed);
                if unimplemented {
                    // No point hammering a service the server lacks.
                    break;
                }
                continue;
            }
        }
        shared.done.fetch_add(1, Ordering::Relaxed);
    }
    (s, w)
}

/// On a terminal, redraws `label [#####     ] done/total  rate/s  ETA` on
/// stderr four times a second; otherwise (a script's log) prints the same as
/// a line of its own every [`PROGRESS_LINE_EVERY`], so a long load still
/// shows how far it got.
async fn progress_bar(
    label: String,
    shared: Arc<Shared>,
    plan: Plan,
    finished: Arc<AtomicBool>,
    terminal: bool,
) {
    const WIDTH: usize = 40;
    let period = if terminal {
        Duration::from_millis(250)
    } else {
        PROGRESS_LINE_EVERY
    };
    let mut tick = tokio::time::interval_at(Instant::now() + period, period);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            // Off a terminal, the last line is not worth waiting a period for.
            _ = tokio::time::sleep(Duration::from_millis(100)), if !terminal => {
                if !finished.load(Ordering::Relaxed) {
                    continue;
                }
                return;
            }
        }
        let done_all = finished.load(Ordering::Relaxed);
        let done = shared.done.load(Ordering::Relaxed);
        let by_count = plan.total.map(|t| done as f64 / t.max(1) as f64);
        let by_time = plan
            .duration
            .map(|d| shared.start.elapsed().as_secs_f64() / d.as_secs_f64().max(1e-9));
        let frac = match (by_count, by_time) {
            (Some(a), Some(b)) => a.max(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => 0.0,
        };
        let frac = if done_all { 1.0 } else { frac.clamp(0.0, 1.0) };
        let filled = (frac * WIDTH as f64) as usize;
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{label} [{}{}] {done}",
            "#".repeat(filled),
            " ".repeat(WIDTH - filled)
        );
        if let Some(t) = plan.total {
            let _ = write!(err, "/{t}");
        }
        let elapsed = shared.start.elapsed().as_secs_f64();
        let _ = write!(err, "{}", rate_and_eta(done, elapsed, plan));
        if done_all || !terminal {
            let _ = writeln!(err);
        }
        if done_all {
            return;
        }
        let _ = err.flush();
    }
}

/// How often the progress line is printed when stderr is not a terminal.
pub const PROGRESS_LINE_EVERY: Duration = Duration::from_secs(10);

/// `  1234/s  ETA 0:42` for a run that has done `done` requests in
/// `elapsed` seconds: the ETA is the sooner of what the remaining requests
/// take at the rate so far and what is left of `--duration`.
pub fn rate_and_eta(done: u64, elapsed: f64, plan: Plan) -> String {
    let rate = if elapsed > 0.0 {
        done as f64 / elapsed
    } else {
        0.0
    };
    let by_count = plan
        .total
        .filter(|_| rate > 0.0)
        .map(|t| t.saturating_sub(done) as f64 / rate);
    let by_time = plan.duration.map(|d| (d.as_secs_f64() - elapsed).max(0.0));
    let eta = match (by_count, by_time) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    match eta {
        Some(eta) => {
            let secs = eta.round() as u64;
            format!("  {rate:.0}/s  ETA {}:{:02}", secs / 60, secs % 60)
        }
        None => format!("  {rate:.0}/s"),
    }
}

/// How a key index becomes a key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyFormat {
    /// `--key-size` bytes of zero-padded lowercase hex.
    #[default]
    Hex,
    /// Kubernetes-like pod keys: `/registry/pods/ns-NNNN/pod-NNNNNN`, a
    /// thousand pods per namespace (index i is pod i of namespace i/1000),
    /// so sequential indices give keys in ascending order.
    K8s,
}

/// The prefix every [`KeyFormat::K8s`] key starts with.
pub const K8S_PREFIX: &str = "/registry/pods/";

/// Pods per namespace in [`KeyFormat::K8s`] keys.
pub const K8S_PODS_PER_NS: u64 = 1000;

/// Appends the part of a [`KeyFormat::K8s`] key after [`K8S_PREFIX`]:
/// `ns-NNNN/pod-NNNNNN` (wider numbers past 10⁴ namespaces or 10⁶ pods).
pub fn write_k8s_suffix(index: u64, buf: &mut Vec<u8>) {
    use std::io::Write as _;
    let _ = write!(buf, "ns-{:04}/pod-{:06}", index / K8S_PODS_PER_NS, index);
}

/// Keys of `size` bytes: the key index in lowercase hex, zero-padded on the
/// left, so keys are printable and the same index always gives the same key;
/// or, with [`KeyFormat::K8s`], Kubernetes-like pod keys of the index.
#[derive(Debug, Clone)]
pub struct KeyGen {
    pub size: usize,
    pub space: u64,
    pub sequential: bool,
    pub format: KeyFormat,
}

impl KeyGen {
    pub fn new(size: usize, space: u64, sequential: bool) -> Result<KeyGen, BenchError> {
        KeyGen::with_format(size, space, sequential, KeyFormat::Hex)
    }

    pub fn with_format(
        size: usize,
        space: u64,
        sequential: bool,
        format: KeyFormat,
    ) -> Result<KeyGen, BenchError> {
        if format == KeyFormat::K8s {
            if space == 0 {
                return Err(BenchError::Usage(
                    "--key-space-size must be positive".into(),
                ));
            }
            return Ok(KeyGen {
                size,
                space,
                sequential,
                format,
            });
        }
        if size == 0 || space == 0 {
            return Err(BenchError::Usage(
                "--key-size and --key-space-size must be positive".into(),
            ));
        }
        if size < 16 && space > 16u64.pow(size as u32) {
            return Err(BenchError::Usage(format!(
                "--key-space-size {space} does not fit in {size}-byte hex keys"
            )));
        }
        Ok(KeyGen {
            size,
            space,
            sequential,
            format,
        })
    }

    /// The key index request `i` uses.
    pub fn index(&self, i: u64, rng: &mut impl Rng) -> u64 {
        if self.sequential {
            i % self.space
        } else {
            rng.random_range(0..self.space)
        }
    }

    /// Writes key `index` into `buf`, replacing its contents.
    pub fn write(&self, index: u64, buf: &mut Vec<u8>) {
        buf.clear();
        match self.format {
            KeyFormat::Hex => write_hex(index, self.size, buf),
            KeyFormat::K8s => {
                buf.extend_from_slice(K8S_PREFIX.as_bytes());
                write_k8s_suffix(index, buf);
            }
        }
    }
}

/// Appends `n` in lowercase hex, zero-padded to `width` digits.
pub fn write_hex(n: u64, width: usize, buf: &mut Vec<u8>) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let start = buf.len();
    buf.resize(start + width, b'0');
    let mut n = n;
    for b in buf[start..].iter_mut().rev() {
        if n == 0 {
            break;
        }
        *b = DIGITS[(n & 0xf) as usize];
        n >>= 4;
    }
}

/// `n` printable pseudo-random bytes, the value every put writes.
pub fn value_bytes(n: usize, rng: &mut impl Rng) -> Vec<u8> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..n)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())])
        .collect()
}

/// The smallest key greater than every key starting with `prefix`, as
/// etcdctl's `--prefix` computes it; `\0` (every key) if there is none.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// Parses `10s`, `500ms`, `2m`, `1h`, `1.5s`, or bare seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a duration like 10s, 500ms or 2m"))?;
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(n * scale).map_err(|e| format!("{s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    use super::*;

    #[test]
    fn endpoints_get_a_scheme() {
        assert_eq!(
            endpoint_url("127.0.0.1:2379").unwrap(),
            "http://127.0.0.1:2379"
        );
        assert_eq!(endpoint_url("http://h:1").unwrap(), "http://h:1");
        assert!(endpoint_url("https://h:1").is_err());
    }

    #[test]
    fn keys_are_padded_hex_of_the_index() {
        let g = KeyGen::new(8, 1 << 20, true).unwrap();
        let key = |i| {
            let mut k = b"stale".to_vec();
            g.write(i, &mut k);
            k
        };
        assert_eq!(key(0), b"00000000");
        assert_eq!(key(0xabc), b"00000abc");
        let mut rng = SmallRng::seed_from_u64(1);
        assert_eq!(g.index(5, &mut rng), 5);
        assert_eq!(g.index((1 << 20) + 3, &mut rng), 3);
    }

    #[test]
    fn k8s_keys_are_pods_in_namespaces_of_a_thousand() {
        let g = KeyGen::with_format(8, 1_000_000, true, KeyFormat::K8s).unwrap();
        let key = |i| {
            let mut k = Vec::new();
            g.write(i, &mut k);
            String::from_utf8(k).unwrap()
        };
        assert_eq!(key(0), "/registry/pods/ns-0000/pod-000000");
        assert_eq!(key(999), "/registry/pods/ns-0000/pod-000999");
        assert_eq!(key(1000), "/registry/pods/ns-0001/pod-001000");
        assert_eq!(key(999_999), "/registry/pods/ns-0999/pod-999999");
        // Sequential indices give ascending keys, as a range returns them.
        assert!((0..5000).all(|i| key(i) < key(i + 1)));
    }

    #[test]
    fn progress_shows_rate_and_eta() {
        let plan = Plan::exactly(1000);
        assert_eq!(rate_and_eta(100, 2.0, plan), "  50/s  ETA 0:18");
        assert_eq!(rate_and_eta(0, 0.0, plan), "  0/s");
        let timed = Plan {
            total: None,
            duration: Some(Duration::from_secs(90)),
            rate: 0.0,
        };
        assert_eq!(rate_and_eta(10, 30.0, timed), "  0/s  ETA 1:00");
    }

    #[test]
    fn latency_log_lines_are_time_latency_and_kind() {
        let path = std::env::temp_dir().join(format!("bench-log-{}", std::process::id()));
        let path = path.to_str().unwrap();
        let log = [(1.5, 0.25, Op::Read), (2.0, 0.000_001, Op::Write)];
        write_latency_log(path, &log).unwrap();
        let text = std::fs::read_to_string(path).unwrap();
        std::fs::remove_file(path).unwrap();
        assert_eq!(text, "1.500000 0.250000 r\n2.000000 0.000001 w\n");
        // Later instants are later Unix times, to the microsecond.
        let now = Instant::now();
        let later = now + Duration::from_millis(1500);
        assert!((unix_secs(later) - unix_secs(now) - 1.5).abs() < 1e-6);
    }

    #[test]
    fn random_keys_stay_in_the_key_space() {
        let g = KeyGen::new(4, 7, false).unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        assert!((0..1000).all(|i| g.index(i, &mut rng) < 7));
    }

    #[test]
    fn key_space_must_fit_the_key_size() {
        assert!(KeyGen::new(2, 256, false).is_ok());
        assert!(KeyGen::new(2, 257, false).is_err());
        assert!(KeyGen::new(0, 1, false).is_err());
        assert!(KeyGen::new(16, u64::MAX, false).is_ok());
    }

    #[test]
    fn prefix_end_increments_the_last_byte() {
        assert_eq!(prefix_end(b"bench/"), b"bench0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn claims_stop_at_the_total() {
        let shared = Shared {
            next: AtomicU64::new(0),
            done: AtomicU64::new(0),
            total: 3,
            deadline: None,
            start: Instant::now(),
            interval: 0.5,
        };
        let claimed: Vec<_> = std::iter::from_fn(|| shared.claim()).collect();
        assert_eq!(claimed, [0, 1, 2]);
        assert_eq!(
            shared.scheduled(4).unwrap() - shared.start,
            Duration::from_secs(2)
        );
    }
}
