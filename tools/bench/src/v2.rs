//! etcd's v2 HTTP API (`--enable-v2`): `v2-set`, `v2-get` and `v2-watch`.
//!
//! HTTP/1.1 carries one request at a time, so every client owns its own
//! keep-alive connection (client c dials endpoint c mod the endpoints;
//! `--conns` plays no part). A connection that fails is dialled again on the
//! client's next request. Requests go through hyper's low-level client
//! (`hyper::client::conn::http1`), with the `Host` header set as Go's server
//! wants it.
//!
//! * `v2-set`: `PUT /v2/keys/<prefix>/<key>` with the form body
//!   `value=<--val-size bytes>`; keys as the v3 cases make them.
//! * `v2-get`: `GET /v2/keys/<prefix>/<key>` (`--quorum` adds
//!   `?quorum=true`); `--populate` first writes every key of the key space.
//! * `v2-watch`: `--watchers` W connections each holding
//!   `GET /v2/keys/<prefix>?wait=true&recursive=true&stream=true`, opened
//!   (headers received, so the watch exists) before any put; then
//!   `--clients` writers put key `i mod --key-space-size` under the prefix
//!   at `--put-rate`. Each value starts with the put's send time (16 hex
//!   digits of nanoseconds since the run's base instant), so a watcher reads
//!   each event's latency off the event alone. Every put's answer gives its
//!   `modifiedIndex`; once the puts are done the watchers drain until each has
//!   seen every put (or [`DRAIN_TIMEOUT`]), and must have seen exactly those
//!   indexes, ascending ([`watch::check_delivery`]).
//! * `v2-watch --hold`: only open the watchers and hold them, no puts, until
//!   `--duration` passes or SIGINT/SIGTERM; `holding N v2 watchers` goes to
//!   stderr once all are open (for running v3 load beside them).
//!
//! A server without the v2 API answers 404 with no v2 error body: that
//! counts as `Unimplemented` (exit status 3), as a missing gRPC service does.

use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HOST};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde::Deserialize;
use tokio::net::TcpStream;
use tokio::sync::watch as signal;
use tokio::time::Instant;
use tonic::Status;

use crate::BenchError;
use crate::load::{self, KeyGen, Op, Plan, Samples, Worker};
use crate::report::{Report, Stats};
use crate::watch::{DRAIN_TIMEOUT, check_delivery};

/// How long dialling one connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Hex digits at the start of each watched value that carry the send time.
const STAMP_LEN: usize = 16;

/// One HTTP/1.1 keep-alive connection, dialled on first use and again after
/// a failure.
pub struct HttpConn {
    authority: String,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl HttpConn {
    pub fn new(endpoint: &str) -> Result<HttpConn, BenchError> {
        Ok(HttpConn {
            authority: authority(endpoint)?,
            sender: None,
        })
    }

    fn request(&self, method: Method, path: &str, body: Bytes) -> Request<Full<Bytes>> {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, &self.authority);
        if !body.is_empty() {
            req = req.header(CONTENT_TYPE, "application/x-www-form-urlencoded");
        }
        req.body(Full::new(body)).expect("valid request")
    }

    /// Sends one request; the answer's body is left unread.
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<Response<Incoming>, Status> {
        let req = self.request(method, path, body);
        if self.sender.as_ref().is_none_or(SendRequest::is_closed) {
            self.sender = Some(dial(&self.authority).await?);
        }
        let sender = self.sender.as_mut().expect("dialled above");
        let res = match sender.ready().await {
            Ok(()) => sender.send_request(req).await,
            Err(e) => Err(e),
        };
        res.map_err(|e| {
            self.sender = None;
            Status::unavailable(format!("{}: {e}", self.authority))
        })
    }

    /// Sends one request and reads the whole answer; a non-2xx answer is an
    /// error ([`check`]).
    pub async fn call(&mut self, method: Method, path: &str, body: Bytes) -> Result<Bytes, Status> {
        let resp = self.send(method, path, body).await?;
        let status = resp.status();
        let body = match resp.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => {
                self.sender = None;
                return Err(Status::unavailable(format!("reading the answer: {e}")));
            }
        };
        check(status, &body)?;
        Ok(body)
    }
}

async fn dial(authority: &str) -> Result<SendRequest<Full<Bytes>>, Status> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(authority))
        .await
        .map_err(|_| Status::unavailable(format!("{authority}: connect timed out")))?
        .map_err(|e| Status::unavailable(format!("{authority}: {e}")))?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| Status::unavailable(format!("{authority}: {e}")))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// `host:port` of an `--endpoints` entry.
pub fn authority(endpoint: &str) -> Result<String, BenchError> {
    let url = load::endpoint_url(endpoint)?;
    let rest = url.strip_prefix("http://").unwrap_or(&url);
    let auth = rest.split('/').next().unwrap_or_default();
    if auth.is_empty() {
        return Err(BenchError::Usage(format!("bad endpoint {endpoint:?}")));
    }
    Ok(auth.to_owned())
}

/// etcd's v2 error body (`{"errorCode":100,"message":"Key not found",...}`).
#[derive(Debug, Deserialize)]
struct V2Error {
    #[serde(rename = "errorCode")]
    error_code: u64,
    message: String,
}

/// A 2xx answer is fine; a v2 error counts under its message and code; a
/// bare 404 means the server has no v2 API.
pub fn check(status: StatusCode, body: &[u8]) -> Result<(), Status> {
    if status.is_success() {
        return Ok(());
    }
    match serde_json::from_slice::<V2Error>(body) {
        Ok(e) => Err(Status::unknown(format!(
            "HTTP {}: {} ({})",
            status.as_u16(),
            e.message,
            e.error_code
        ))),
        Err(_) if status == StatusCode::NOT_FOUND => Err(Status::unimplemented(
            "no v2 API (HTTP 404; is the server started with --enable-v2?)",
        )),
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let text: String = text.trim().chars().take(120).collect();
            Err(Status::unknown(format!("HTTP {}: {text}", status.as_u16())))
        }
    }
}

/// Characters a `--prefix` may hold: they go into the URL as they are.
fn check_prefix(prefix: &str) -> Result<String, BenchError> {
    let p = prefix.trim_matches('/');
    let ok = p
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~/".contains(&b));
    if p.is_empty() || !ok {
        return Err(BenchError::Usage(format!(
            "--prefix {prefix:?}: want a non-empty path of letters, digits and -._~/"
        )));
    }
    Ok(p.to_owned())
}

/// `/v2/keys/<prefix>/<hex key><suffix>`, the key rewritten in place.
#[derive(Clone)]
struct KeyPath {
    buf: Vec<u8>,
    base: usize,
    suffix: &'static str,
}

impl KeyPath {
    fn new(prefix: &str, suffix: &'static str) -> KeyPath {
        let buf = format!("/v2/keys/{prefix}/").into_bytes();
        KeyPath {
            base: buf.len(),
            buf,
            suffix,
        }
    }

    fn of(&mut self, keys: &KeyGen, index: u64) -> &str {
        self.buf.truncate(self.base);
        load::write_hex(index, keys.size, &mut self.buf);
        self.buf.extend_from_slice(self.suffix.as_bytes());
        std::str::from_utf8(&self.buf).expect("ascii path")
    }
}

/// What the v2 cases share.
#[derive(Debug, Clone)]
pub struct V2Opts {
    pub endpoints: Vec<String>,
    pub clients: usize,
    pub keys: KeyGen,
    pub val_size: usize,
    pub prefix: String,
}

impl V2Opts {
    fn conns(&self, n: usize) -> Result<Vec<HttpConn>, BenchError> {
        (0..n)
            .map(|c| HttpConn::new(&self.endpoints[c % self.endpoints.len()]))
            .collect()
    }
}

fn rng_for(worker: usize) -> SmallRng {
    SmallRng::seed_from_u64(worker as u64)
}

/// The form body `value=<val_size printable bytes>`.
fn form_value(val_size: usize) -> Bytes {
    let mut body = b"value=".to_vec();
    body.extend(load::value_bytes(val_size, &mut rng_for(usize::MAX)));
    Bytes::from(body)
}

struct SetWorker {
    conn: HttpConn,
    keys: KeyGen,
    rng: SmallRng,
    path: KeyPath,
    body: Bytes,
}

impl Worker for SetWorker {
    async fn call(&mut self, i: u64) -> Result<Op, Status> {
        let index = self.keys.index(i, &mut self.rng);
        let path = self.path.of(&self.keys, index);
        self.conn.call(Method::PUT, path, self.body.clone()).await?;
        Ok(Op::Write)
    }
}

fn set_workers(opts: &V2Opts, clients: usize, keys: &KeyGen) -> Result<Vec<SetWorker>, BenchError> {
    let body = form_value(opts.val_size);
    let path = KeyPath::new(&opts.prefix, "");
    Ok(opts
        .conns(clients)?
        .into_iter()
        .enumerate()
        .map(|(w, conn)| SetWorker {
            conn,
            keys: keys.clone(),
            rng: rng_for(w),
            path: path.clone(),
            body: body.clone(),
        })
        .collect())
}

fn report(op: &str, s: Samples) -> Report {
    Report::new(op, Stats::new(s.all(), s.elapsed), s.errors)
}

pub async fn set(opts: &V2Opts, plan: Plan) -> Result<Report, BenchError> {
    let workers = set_workers(opts, opts.clients, &opts.keys)?;
    let (s, _) = load::drive("v2-set", workers, plan).await;
    Ok(report("v2-set", s))
}

/// Writes every key of the key space once, in order. Not measured.
pub async fn populate(opts: &V2Opts) -> Result<(), BenchError> {
    let keys = KeyGen {
        sequential: true,
        ..opts.keys.clone()
    };
    let workers = set_workers(opts, opts.clients.clamp(1, 64), &keys)?;
    let (s, _) = load::drive("v2-populate", workers, Plan::exactly(keys.space)).await;
    if let Some(e) = s.unimplemented() {
        return Err(BenchError::Unimplemented(format!("v2 set ({e})")));
    }
    if let Some((msg, n)) = s.errors.iter().next() {
        return Err(BenchError::Setup(format!(
            "populating {} v2 keys: {n} sets failed, e.g. {msg}",
            keys.space
        )));
    }
    Ok(())
}

struct GetWorker {
    conn: HttpConn,
    keys: KeyGen,
    rng: SmallRng,
    path: KeyPath,
}

impl Worker for GetWorker {
    async fn call(&mut self, i: u64) -> Result<Op, Status> {
        let index = self.keys.index(i, &mut self.rng);
        let path = self.path.of(&self.keys, index);
        self.conn.call(Method::GET, path, Bytes::new()).await?;
        Ok(Op::Read)
    }
}

pub async fn get(opts: &V2Opts, plan: Plan, quorum: bool) -> Result<Report, BenchError> {
    let path = KeyPath::new(&opts.prefix, if quorum { "?quorum=true" } else { "" });
    let workers = opts
        .conns(opts.clients)?
        .into_iter()
        .enumerate()
        .map(|(w, conn)| GetWorker {
            conn,
            keys: opts.keys.clone(),
            rng: rng_for(w),
            path: path.clone(),
        })
        .collect();
    let (s, _) = load::drive("v2-get", workers, plan).await;
    Ok(report("v2-get", s))
}

/// The parts of a v2 node the watch case reads.
#[derive(Debug, Deserialize)]
struct Node {
    #[serde(rename = "modifiedIndex")]
    modified_index: i64,
    #[serde(default)]
    value: Option<String>,
}

/// A set's answer, or one event of a watch stream.
#[derive(Debug, Deserialize)]
struct Event {
    action: String,
    node: Node,
}

/// Takes every complete JSON event off the front of `buf` (events are
/// newline-separated, but a frame may end inside one), leaving a partial
/// one in place. A malformed event is passed on as `Err` and the buffer
/// dropped.
fn take_events(buf: &mut Vec<u8>, mut on: impl FnMut(Result<Event, String>)) {
    let mut it = serde_json::Deserializer::from_slice(buf).into_iter::<Event>();
    let consumed = loop {
        match it.next() {
            Some(Ok(ev)) => on(Ok(ev)),
            Some(Err(e)) if e.is_eof() => break it.byte_offset(),
            Some(Err(e)) => {
                on(Err(e.to_string()));
                break buf.len();
            }
            None => break buf.len(),
        }
    };
    buf.drain(..consumed);
}

/// Nanoseconds since the base instant, from a value's first [`STAMP_LEN`] hex digits.
fn stamp_of(value: &str) -> Option<u64> {
    u64::from_str_radix(value.get(..STAMP_LEN)?, 16).ok()
}

/// Told to the watchers once the puts are done.
#[derive(Debug, Clone, Copy)]
struct Finish {
    /// Events each watcher should bring.
    want: usize,
    deadline: Instant,
}

/// What one watcher received.
#[derive(Debug, Default)]
struct Watched {
    /// `modifiedIndex` of each event, in arrival order.
    observed: Vec<i64>,
    /// Event latencies (seconds).
    lats: Vec<f64>,
    /// Stream failures, odd events.
    problems: Vec<String>,
}

/// Opens watcher `w`'s stream: returns once the headers are in, so the
/// watch exists on the server.
async fn open_watcher(mut conn: HttpConn, prefix: &str) -> Result<Incoming, BenchError> {
    let path = format!("/v2/keys/{prefix}?wait=true&recursive=true&stream=true");
    let resp = conn
        .send(Method::GET, &path, Bytes::new())
        .await
        .map_err(|s| BenchError::rpc("v2 watch", s))?;
    let status = resp.status();
    if status != StatusCode::OK {
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        check(status, &body).map_err(|s| BenchError::rpc("v2 watch", s))?;
        return Err(BenchError::Setup(format!("v2 watch answered {status}")));
    }
    // The connection task lives as long as the sender or the body: keep
    // the body, drop the sender (nothing else goes over this connection).
    Ok(resp.into_body())
}

/// Receives events until the finish signal's count is reached, the drain
/// deadline passes, or the stream fails.
async fn read_events(
    w: usize,
    mut body: Incoming,
    base: Instant,
    mut finish_rx: signal::Receiver<Option<Finish>>,
) -> Watched {
    let mut out = Watched::default();
    let mut buf = Vec::new();
    let mut finish: Option<Finish> = None;
    loop {
        if finish.is_some_and(|f| out.observed.len() >= f.want) {
            break;
        }
        let deadline = finish.map(|f| f.deadline);
        tokio::select! {
            frame = body.frame() => match frame {
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else { continue };
                    let arrival = base.elapsed().as_nanos() as u64;
                    buf.extend_from_slice(&data);
                    take_events(&mut buf, |ev| match ev {
                        Ok(ev) => {
                            if ev.action != "set" {
                                out.problems.push(format!(
                                    "watcher {w} got a {:?} at {}", ev.action, ev.node.modified_index
                                ));
                            }
                            out.observed.push(ev.node.modified_index);
                            if let Some(sent) = ev.node.value.as_deref().and_then(stamp_of) {
                                out.lats.push(arrival.saturating_sub(sent) as f64 / 1e9);
                            }
                        }
                        Err(e) => out.problems.push(format!("watcher {w}: bad event: {e}")),
                    });
                }
                Some(Err(e)) => {
                    out.problems.push(format!("watcher {w}: stream failed: {e}"));
                    break;
                }
                None => {
                    out.problems.push(format!("watcher {w}: stream ended early"));
                    break;
                }
            },
            changed = finish_rx.changed(), if finish.is_none() => {
                if changed.is_err() {
                    break;
                }
                finish = *finish_rx.borrow();
            }
            _ = sleep_until_opt(deadline), if deadline.is_some() => break,
        }
    }
    out
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Puts key `i mod keys` under the prefix with a stamped value, keeping
/// each answer's `modifiedIndex`.
struct StampedSet {
    conn: HttpConn,
    keys: KeyGen,
    path: KeyPath,
    base: Instant,
    body: Vec<u8>,
    indexes: Vec<i64>,
}

impl Worker for StampedSet {
    async fn call(&mut self, i: u64) -> Result<Op, Status> {
        let path = self.path.of(&self.keys, i % self.keys.space);
        let sent = self.base.elapsed().as_nanos() as u64;
        let mut stamp = Vec::with_capacity(STAMP_LEN);
        load::write_hex(sent, STAMP_LEN, &mut stamp);
        let at = b"value=".len();
        self.body[at..at + STAMP_LEN].copy_from_slice(&stamp);
        let answer = self
            .conn
            .call(Method::PUT, path, Bytes::copy_from_slice(&self.body))
            .await?;
        let ev: Event = serde_json::from_slice(&answer)
            .map_err(|e| Status::unknown(format!("unreadable set answer: {e}")))?;
        self.indexes.push(ev.node.modified_index);
        Ok(Op::Write)
    }
}

#[derive(Debug, Clone)]
pub struct V2WatchOpts {
    pub watchers: usize,
    /// Hold the watchers until this long has passed (`None`: until a signal), no puts.
    pub hold: Option<Option<Duration>>,
}

/// Opens the watchers and starts their readers.
async fn start_watchers(
    opts: &V2Opts,
    watchers: usize,
    base: Instant,
    finish_rx: &signal::Receiver<Option<Finish>>,
) -> Result<Vec<tokio::task::JoinHandle<Watched>>, BenchError> {
    let opened = futures::future::try_join_all(
        opts.conns(watchers)?
            .into_iter()
            .map(|conn| open_watcher(conn, &opts.prefix)),
    )
    .await?;
    Ok(opened
        .into_iter()
        .enumerate()
        .map(|(w, body)| tokio::spawn(read_events(w, body, base, finish_rx.clone())))
        .collect())
}

pub async fn watch(opts: &V2Opts, wopts: &V2WatchOpts, plan: Plan) -> Result<Report, BenchError> {
    if wopts.watchers == 0 {
        return Err(BenchError::Usage("--watchers must be positive".into()));
    }
    let base = Instant::now();
    let (finish_tx, finish_rx) = signal::channel(None);
    let readers = start_watchers(opts, wopts.watchers, base, &finish_rx).await?;

    if let Some(hold) = wopts.hold {
        eprintln!("holding {} v2 watchers", wopts.watchers);
        let held = Instant::now();
        wait_for_end(hold).await;
        let _ = finish_tx.send(Some(Finish {
            want: 0,
            deadline: Instant::now(),
        }));
        let mut events = 0;
        let mut problems = Vec::new();
        for r in readers {
            let got = r.await.expect("v2 watch reader panicked");
            events += got.observed.len();
            problems.extend(got.problems);
        }
        let mut report = Report::new(
            "v2-watch-hold",
            Stats::new(Vec::new(), held.elapsed()),
            Default::default(),
        );
        let check = match problems.first() {
            None => "ok".to_owned(),
            Some(p) => {
                report.violation = true;
                format!("FAILED: {p}")
            }
        };
        report.extra.insert("watch_check".into(), check.into());
        report
            .extra
            .insert("watchers".into(), wopts.watchers.into());
        report.extra.insert("events".into(), events.into());
        return Ok(report);
    }

    // `value=`, the stamp, then printable filler up to --val-size.
    let mut body = form_value(opts.val_size.max(STAMP_LEN)).to_vec();
    body[b"value=".len()..][..STAMP_LEN].fill(b'0');
    let keys = KeyGen {
        sequential: true,
        ..opts.keys.clone()
    };
    let path = KeyPath::new(&opts.prefix, "");
    let workers = opts
        .conns(opts.clients.max(1))?
        .into_iter()
        .map(|conn| StampedSet {
            conn,
            keys: keys.clone(),
            path: path.clone(),
            base,
            body: body.clone(),
            indexes: Vec::new(),
        })
        .collect();
    let (puts, workers) = load::drive("v2-watch", workers, plan).await;
    let mut expected: Vec<i64> = workers.into_iter().flat_map(|w| w.indexes).collect();
    expected.sort_unstable();
    let _ = finish_tx.send(Some(Finish {
        want: expected.len(),
        deadline: Instant::now() + DRAIN_TIMEOUT,
    }));

    let mut lats = Vec::new();
    let mut violations = Vec::new();
    let mut problems = Vec::new();
    for (w, r) in readers.into_iter().enumerate() {
        let got = r.await.expect("v2 watch reader panicked");
        lats.extend(got.lats);
        problems.extend(got.problems);
        if let Err(v) = check_delivery(&expected, &got.observed) {
            violations.push(format!("watcher {w}: {v}"));
        }
    }

    let events = lats.len();
    let put_stats = Stats::new(puts.all(), puts.elapsed);
    if let Some(e) = puts.unimplemented()
        && put_stats.count() == 0
    {
        return Err(BenchError::Unimplemented(format!("v2 set ({e})")));
    }
    let mut report = Report::new("v2-watch", Stats::new(lats, puts.elapsed), puts.errors);
    report.sections.push(("put".into(), put_stats));
    let check = match (violations.first(), problems.first()) {
        (None, None) => "ok".to_owned(),
        (Some(v), _) => {
            report.violation = true;
            format!(
                "FAILED: {} of {} watchers, first {v}",
                violations.len(),
                wopts.watchers
            )
        }
        (None, Some(p)) => {
            report.violation = true;
            format!("FAILED: {p}")
        }
    };
    for v in violations.iter().chain(&problems).skip(1).take(9) {
        eprintln!("v2 watch check: {v}");
    }
    report.extra.insert("watch_check".into(), check.into());
    report
        .extra
        .insert("watchers".into(), wopts.watchers.into());
    report.extra.insert("events".into(), events.into());
    Ok(report)
}

/// Until `limit` passes (if any), SIGINT or SIGTERM.
async fn wait_for_end(limit: Option<Duration>) {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = sleep_until_opt(limit.map(|d| Instant::now() + d)) => {}
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

/// Checks a `--prefix` and builds the shared options.
pub fn opts(
    endpoints: &[String],
    clients: usize,
    keys: KeyGen,
    val_size: usize,
    prefix: &str,
) -> Result<V2Opts, BenchError> {
    for ep in endpoints {
        authority(ep)?;
    }
    Ok(V2Opts {
        endpoints: endpoints.to_vec(),
        clients,
        keys,
        val_size,
        prefix: check_prefix(prefix)?,
    })
}

/// A prefix of its own for one watch run, so runs do not see each other's puts.
pub fn run_prefix() -> String {
    format!("v2-watch/{:08x}", rand::random::<u32>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_of_endpoints() {
        assert_eq!(authority("127.0.0.1:2379").unwrap(), "127.0.0.1:2379");
        assert_eq!(authority("http://h:1/").unwrap(), "h:1");
        assert!(authority("https://h:1").is_err());
    }

    #[test]
    fn v2_errors_and_missing_api() {
        assert!(check(StatusCode::CREATED, b"{}").is_ok());
        let e = check(
            StatusCode::NOT_FOUND,
            br#"{"errorCode":100,"message":"Key not found","cause":"/a","index":3}"#,
        )
        .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unknown);
        assert_eq!(e.message(), "HTTP 404: Key not found (100)");
        let e = check(StatusCode::NOT_FOUND, b"404 page not found\n").unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unimplemented);
        let e = check(StatusCode::BAD_GATEWAY, b"oops").unwrap_err();
        assert_eq!(e.message(), "HTTP 502: oops");
    }

    #[test]
    fn prefixes_go_into_urls_as_they_are() {
        assert_eq!(check_prefix("/bench/v2/").unwrap(), "bench/v2");
        assert!(check_prefix("").is_err());
        assert!(check_prefix("a b").is_err());
        assert!(check_prefix("a?b").is_err());
    }

    #[test]
    fn key_paths_rewrite_the_key() {
        let keys = KeyGen::new(8, 1000, true).unwrap();
        let mut p = KeyPath::new("bench", "?quorum=true");
        assert_eq!(p.of(&keys, 0xab), "/v2/keys/bench/000000ab?quorum=true");
        assert_eq!(p.of(&keys, 1), "/v2/keys/bench/00000001?quorum=true");
    }

    #[test]
    fn events_split_across_frames() {
        let ev = |i: i64| {
            format!(
                r#"{{"action":"set","node":{{"key":"/p/0","value":"{:016x}xx","modifiedIndex":{i},"createdIndex":{i}}},"prevNode":{{"key":"/p/0","value":"v","modifiedIndex":1,"createdIndex":1}}}}"#,
                1000 + i
            ) + "\n"
        };
        let all = ev(7) + &ev(8);
        let mut buf = Vec::new();
        let mut seen = Vec::new();
        // Byte by byte: every split point leaves a partial event in place.
        for b in all.bytes() {
            buf.push(b);
            take_events(&mut buf, |e| {
                let e = e.unwrap();
                seen.push((
                    e.node.modified_index,
                    stamp_of(e.node.value.as_deref().unwrap()),
                ));
            });
        }
        assert!(buf.is_empty());
        assert_eq!(seen, [(7, Some(1007)), (8, Some(1008))]);

        let mut bad = b"{\"action\":1}\n".to_vec();
        let mut errs = 0;
        take_events(&mut bad, |e| errs += usize::from(e.is_err()));
        assert_eq!(errs, 1);
        assert!(bad.is_empty());
    }
}
