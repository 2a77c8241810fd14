//! `watch-latency`: how long a put takes to reach its watchers, and whether
//! every watcher saw every put exactly once and in order.
//!
//! Set-up: `--watchers` W watchers are spread round-robin over `--streams`
//! Watch streams (stream s on connection s), watcher w watching key
//! `w % --watch-keys`. Each create is sent alone and its `created` answer
//! awaited before the next, so watch ids map to watchers without relying on
//! the order of answers, and no put starts before every watch exists.
//!
//! Load: put i writes key `i % --watch-keys` (keys are
//! `watch-latency/<random run id>/<hex index>`) at `--put-rate` (over
//! `--clients` put workers). Its value starts with the nanoseconds since the
//! run's base instant, read just before the put is sent, so a watcher
//! computes the latency of each event from the event alone, whether it
//! arrives before or after the put's own answer.
//!
//! With `--prefix`, every watcher watches the whole run prefix
//! (`watch-latency/<run id>/`) instead of one key, so each put reaches every
//! watcher (the Kubernetes shape: many watchers of one resource prefix). At
//! that scale, `--sample N` keeps the latency of every N-th watcher only
//! (all events are still counted and checked). The streams are opened side
//! by side; the time until every watch is acknowledged is `setup_s`.
//!
//! Check: each put's answer gives its revision; once the puts are done the
//! readers are told how many events each key should bring and stop when all
//! their watchers have that many (or after [`DRAIN_TIMEOUT`]). A watcher must
//! then have seen exactly the revisions of the puts to its key, ascending:
//! [`check_delivery`] names the first gap, duplicate, reordering or stranger.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use actcd_proto::etcdserverpb::kv_client::KvClient;
use actcd_proto::etcdserverpb::watch_client::WatchClient;
use actcd_proto::etcdserverpb::{
    PutRequest, WatchCreateRequest, WatchRequest, WatchResponse, watch_request,
};
use actcd_proto::mvccpb::event::EventType;
use futures::channel::mpsc;
use tokio::sync::watch as signal;
use tokio::time::Instant;
use tonic::Status;
use tonic::codec::Streaming;
use tonic::transport::Channel;

use crate::BenchError;
use crate::load::{self, Conn, Op, Plan, Pool, Worker};
use crate::report::{Report, Stats};

/// How long readers wait for missing events once the puts are done, by
/// default.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a watch create may take to be acknowledged.
const CREATE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes at the start of each value that carry the send time.
const STAMP_LEN: usize = 8;

#[derive(Debug, Clone)]
pub struct WatchOpts {
    pub watchers: usize,
    pub streams: usize,
    pub watch_keys: usize,
    pub put_clients: usize,
    pub key_size: usize,
    pub val_size: usize,
    /// Every watcher watches the run prefix rather than one key.
    pub prefix: bool,
    /// Latencies of watchers whose index is a multiple of this only.
    pub sample: usize,
    /// How long to wait for missing events once the puts are done.
    pub drain_timeout: Duration,
    /// Puts written before the watchers are created at the first of them (`--history`).
    pub history: u64,
    /// Watch clients stop reading once their watchers exist (`--stall`).
    pub stall: bool,
    /// A watcher may have received only the first part of its events (`--partial`).
    pub partial: bool,
}

/// The first way a watcher's deliveries differ from the puts to its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// A put's revision never arrived.
    Gap { missing: i64 },
    /// A revision arrived twice.
    Duplicate { revision: i64 },
    /// A revision arrived after a later one.
    OutOfOrder { revision: i64, after: i64 },
    /// A revision arrived that no put of ours produced.
    Unexpected { revision: i64 },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Gap { missing } => write!(f, "gap: revision {missing} never arrived"),
            Violation::Duplicate { revision } => {
                write!(f, "duplicate: revision {revision} arrived twice")
            }
            Violation::OutOfOrder { revision, after } => {
                write!(f, "out of order: revision {revision} arrived after {after}")
            }
            Violation::Unexpected { revision } => {
                write!(f, "unexpected: revision {revision} matches no put")
            }
        }
    }
}

/// Checks that `observed` (revisions in arrival order) is exactly
/// `expected` (the revisions of the puts to the key, ascending).
pub fn check_delivery(expected: &[i64], observed: &[i64]) -> Result<(), Violation> {
    for (i, &rev) in observed.iter().enumerate() {
        if i > 0 && rev <= observed[i - 1] {
            // The prefix so far is strictly ascending, so it can be searched.
            return Err(if observed[..i].binary_search(&rev).is_ok() {
                Violation::Duplicate { revision: rev }
            } else {
                Violation::OutOfOrder {
                    revision: rev,
                    after: observed[i - 1],
                }
            });
        }
        if expected.binary_search(&rev).is_err() {
            return Err(Violation::Unexpected { revision: rev });
        }
    }
    // Ascending and a subset of `expected`: equal unless something is missing.
    if let Some(&missing) = expected
        .iter()
        .find(|rev| observed.binary_search(rev).is_err())
    {
        return Err(Violation::Gap { missing });
    }
    Ok(())
}

/// Checks that `observed` is the first part of `expected`: ascending, no duplicate, nothing
/// skipped (`--partial`).
pub fn check_partial(expected: &[i64], observed: &[i64]) -> Result<(), Violation> {
    match check_delivery(expected, observed) {
        Err(Violation::Gap { missing }) if observed.last().is_none_or(|&l| missing > l) => Ok(()),
        other => other,
    }
}

/// Told to the readers once the puts are done.
#[derive(Debug, Clone)]
struct Finish {
    /// Events each key should bring.
    want_per_key: Arc<Vec<usize>>,
    deadline: Instant,
}

/// One watch stream's watchers and what they received.
struct StreamWatchers {
    /// Global watcher index of each local slot.
    watchers: Vec<usize>,
    /// Watched key index of each local slot.
    keys: Vec<usize>,
    /// Revisions each slot received, in arrival order.
    observed: Vec<Vec<i64>>,
    /// Event latencies (seconds).
    lats: Vec<f64>,
    /// When each of `lats`' puts was sent (nanoseconds after the run's base), for the
    /// latency log.
    sent: Vec<u64>,
    /// Latencies are kept for watchers whose index is a multiple of this.
    sample: usize,
    /// Cancellations, compactions and stream errors.
    problems: Vec<String>,
    /// Events at or below this revision are history (`--history`): checked, not timed.
    history_until: i64,
}

/// What a watcher watches: a key (empty end) or `[key, end)`.
type Target = (Vec<u8>, Vec<u8>);

/// Where the watchers start: at `from` (the first history put), or now (0); events at or
/// below `until` are history.
#[derive(Debug, Clone, Copy, Default)]
struct History {
    from: i64,
    until: i64,
}

fn create_request((key, end): &Target, start_revision: i64) -> WatchRequest {
    WatchRequest {
        request_union: Some(watch_request::RequestUnion::CreateRequest(
            WatchCreateRequest {
                key: key.clone(),
                range_end: end.clone(),
                start_revision,
                ..Default::default()
            },
        )),
    }
}

/// Opens one stream and creates its watchers one by one; watcher w watches
/// `targets[w % targets.len()]`.
async fn open_stream(
    conn: Conn,
    targets: Arc<Vec<Target>>,
    watchers: Vec<usize>,
    sample: usize,
    history: History,
) -> Result<
    (
        mpsc::UnboundedSender<WatchRequest>,
        Streaming<WatchResponse>,
        HashMap<i64, usize>,
        StreamWatchers,
    ),
    BenchError,
> {
    let keys = &targets;
    let slot_keys: Vec<usize> = watchers.iter().map(|w| w % targets.len()).collect();
    let (tx, rx) = mpsc::unbounded();
    // The first create goes out with the call: a server need not answer the
    // stream's headers before it has something to say.
    let _ = tx.unbounded_send(create_request(&keys[slot_keys[0]], history.from));
    let mut inbound = WatchClient::new(conn.channel.clone())
        .watch(conn.request(rx))
        .await
        .map_err(|s| BenchError::rpc("watch", s))?
        .into_inner();
    let mut ids = HashMap::new();
    let mut observed = vec![Vec::new(); watchers.len()];
    for (slot, &key) in slot_keys.iter().enumerate() {
        if slot > 0 {
            let _ = tx.unbounded_send(create_request(&keys[key], history.from));
        }
        loop {
            let resp = tokio::time::timeout(CREATE_TIMEOUT, inbound.message())
                .await
                .map_err(|_| BenchError::Setup("watch create was not acknowledged".into()))?
                .map_err(|s| BenchError::rpc("watch create", s))?
                .ok_or_else(|| BenchError::Setup("watch stream ended during set-up".into()))?;
            if resp.canceled {
                return Err(BenchError::Setup(format!(
                    "watch create refused: {}",
                    resp.cancel_reason
                )));
            }
            if resp.created {
                ids.insert(resp.watch_id, slot);
                break;
            }
            // A watcher created earlier on this stream already receives events (with
            // `--history`, its catching up): kept for the check. Others' (someone else's
            // writes before ours start): ignored.
            if let Some(&earlier) = ids.get(&resp.watch_id) {
                let revs: &mut Vec<i64> = &mut observed[earlier];
                revs.extend(
                    resp.events
                        .iter()
                        .filter_map(|e| e.kv.as_ref())
                        .map(|kv| kv.mod_revision),
                );
            }
        }
    }
    Ok((
        tx,
        inbound,
        ids,
        StreamWatchers {
            watchers,
            keys: slot_keys,
            observed,
            lats: Vec::new(),
            sent: Vec::new(),
            sample: sample.max(1),
            problems: Vec::new(),
            history_until: history.until,
        },
    ))
}

/// Receives events until every watcher has what the finish signal says it
/// should, the drain deadline passes, or the stream fails.
async fn read_events(
    tx: mpsc::UnboundedSender<WatchRequest>,
    mut inbound: Streaming<WatchResponse>,
    ids: HashMap<i64, usize>,
    mut sw: StreamWatchers,
    base: Instant,
    mut finish_rx: signal::Receiver<Option<Finish>>,
) -> StreamWatchers {
    let mut finish: Option<Finish> = None;
    loop {
        if let Some(f) = &finish {
            let complete = sw
                .observed
                .iter()
                .zip(&sw.keys)
                .all(|(seen, &k)| seen.len() >= f.want_per_key[k]);
            if complete {
                break;
            }
        }
        let deadline = finish.as_ref().map(|f| f.deadline);
        tokio::select! {
            msg = inbound.message() => match msg {
                Ok(Some(resp)) => on_response(&mut sw, &ids, base, resp),
                Ok(None) => {
                    sw.problems.push("watch stream ended early".into());
                    break;
                }
                Err(s) => {
                    sw.problems.push(format!("watch stream failed: {}", load::error_key(&s)));
                    break;
                }
            },
            changed = finish_rx.changed(), if finish.is_none() => {
                if changed.is_err() {
                    break;
                }
                finish = finish_rx.borrow().clone();
            }
            _ = sleep_until_opt(deadline), if deadline.is_some() => break,
        }
    }
    // Closing our side ends the stream and its watchers on the server.
    drop(tx);
    sw
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

fn on_response(
    sw: &mut StreamWatchers,
    ids: &HashMap<i64, usize>,
    base: Instant,
    resp: WatchResponse,
) {
    let arrival = base.elapsed().as_nanos() as u64;
    let Some(&slot) = ids.get(&resp.watch_id) else {
        return;
    };
    let w = sw.watchers[slot];
    if resp.canceled {
        sw.problems
            .push(format!("watcher {w} canceled: {}", resp.cancel_reason));
    }
    if resp.compact_revision != 0 {
        sw.problems.push(format!(
            "watcher {w} compacted at {}",
            resp.compact_revision
        ));
    }
    for ev in resp.events {
        let Some(kv) = ev.kv else { continue };
        if ev.r#type != EventType::Put as i32 {
            sw.problems
                .push(format!("watcher {w} got a delete at {}", kv.mod_revision));
        }
        sw.observed[slot].push(kv.mod_revision);
        if !w.is_multiple_of(sw.sample) || kv.mod_revision <= sw.history_until {
            continue;
        }
        if let Some(stamp) = kv.value.get(..STAMP_LEN) {
            let sent = u64::from_le_bytes(stamp.try_into().expect("8 bytes"));
            sw.lats.push(arrival.saturating_sub(sent) as f64 / 1e9);
            sw.sent.push(sent);
        }
    }
}

struct StampedPut {
    kv: KvClient<Channel>,
    conn: Conn,
    keys: Arc<Vec<Vec<u8>>>,
    base: Instant,
    req: PutRequest,
    /// (key index, revision) of each successful put.
    revisions: Vec<(usize, i64)>,
}

impl Worker for StampedPut {
    async fn call(&mut self, i: u64) -> Result<Op, Status> {
        let k = (i % self.keys.len() as u64) as usize;
        self.req.key.clone_from(&self.keys[k]);
        let sent = self.base.elapsed().as_nanos() as u64;
        self.req.value[..STAMP_LEN].copy_from_slice(&sent.to_le_bytes());
        let resp = self.kv.put(self.conn.request(self.req.clone())).await?;
        let rev = resp.into_inner().header.map_or(0, |h| h.revision);
        self.revisions.push((k, rev));
        Ok(Op::Write)
    }
}

/// The watchers' side of a run with `--watch-conns`: connections of its own, served (and their
/// events decoded) on a runtime of its own, one thread that runs only when nothing else of the
/// machine's wants its core (`SCHED_IDLE`; nice 19 where that is refused).
pub struct WatchSide {
    pool: Pool,
    runtime: tokio::runtime::Runtime,
}

impl WatchSide {
    pub async fn connect(opts: crate::load::ConnOpts) -> Result<WatchSide, BenchError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("watchers")
            .on_thread_start(|| {
                // SAFETY: scheduling calls on the calling thread only (pid 0 and a thread id
                // are Linux's per-thread forms); `param` outlives the call.
                #[cfg(target_os = "linux")]
                #[allow(unsafe_code)]
                unsafe {
                    let tid = libc::gettid() as libc::id_t;
                    libc::setpriority(libc::PRIO_PROCESS, tid, 19);
                    let param = libc::sched_param { sched_priority: 0 };
                    libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
                }
            })
            .enable_all()
            .build()
            .map_err(|e| BenchError::Setup(format!("watchers' runtime: {e}")))?;
        // The connections' tasks run where they are made.
        let pool = runtime
            .spawn(async move { Pool::connect(&opts).await })
            .await
            .map_err(|e| BenchError::Setup(format!("watchers' connections: {e}")))??;
        Ok(WatchSide { pool, runtime })
    }
}

pub async fn latency(
    pool: &Pool,
    watch_side: Option<WatchSide>,
    opts: &WatchOpts,
    plan: Plan,
) -> Result<Report, BenchError> {
    let handle = tokio::runtime::Handle::current();
    let (watch_pool, watch_rt) = match &watch_side {
        Some(side) => (&side.pool, side.runtime.handle().clone()),
        None => (pool, handle),
    };
    let report = run(pool, watch_pool, &watch_rt, opts, plan).await;
    if let Some(side) = watch_side {
        side.runtime.shutdown_background();
    }
    report
}

async fn run(
    pool: &Pool,
    watch_pool: &Pool,
    watch_rt: &tokio::runtime::Handle,
    opts: &WatchOpts,
    plan: Plan,
) -> Result<Report, BenchError> {
    if opts.watchers == 0 || opts.streams == 0 || opts.watch_keys == 0 {
        return Err(BenchError::Usage(
            "--watchers, --streams and --watch-keys must be positive".into(),
        ));
    }
    let streams = opts.streams.min(opts.watchers);
    // A run id in the keys keeps concurrent runs from seeing each other's puts.
    let run_id: u32 = rand::random();
    let keys: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..opts.watch_keys as u64)
            .map(|k| {
                let mut key = format!("watch-latency/{run_id:08x}/").into_bytes();
                load::write_hex(k, opts.key_size, &mut key);
                key
            })
            .collect(),
    );
    let targets: Arc<Vec<Target>> = Arc::new(if opts.prefix {
        let prefix = format!("watch-latency/{run_id:08x}/").into_bytes();
        let end = load::prefix_end(&prefix);
        vec![(prefix, end)]
    } else {
        keys.iter().map(|k| (k.clone(), Vec::new())).collect()
    });
    // The target a put to key k reaches.
    let target_of = |k: usize| if opts.prefix { 0 } else { k };
    let base = Instant::now();
    let mut value = load::value_bytes(opts.val_size.max(STAMP_LEN), &mut rand::rng());
    value[..STAMP_LEN].fill(0);
    let put_workers = || -> Vec<StampedPut> {
        (0..opts.put_clients.max(1))
            .map(|w| StampedPut {
                kv: KvClient::new(pool.conn(w).channel.clone()),
                conn: pool.conn(w).clone(),
                keys: keys.clone(),
                base,
                req: PutRequest {
                    value: value.clone(),
                    ..Default::default()
                },
                revisions: Vec::new(),
            })
            .collect()
    };

    // `--history`: puts before the watchers, which then start at the first of them.
    let mut history_revisions = Vec::new();
    if opts.history > 0 {
        let (written, workers) =
            load::drive("history", put_workers(), Plan::exactly(opts.history)).await;
        if let Some((e, n)) = written.errors.iter().next() {
            return Err(BenchError::Setup(format!(
                "{n} history puts failed, e.g. {e}"
            )));
        }
        history_revisions = workers.into_iter().flat_map(|w| w.revisions).collect();
    }
    let history = History {
        from: history_revisions.iter().map(|(_, r)| *r).min().unwrap_or(0),
        until: history_revisions.iter().map(|(_, r)| *r).max().unwrap_or(0),
    };

    let (finish_tx, finish_rx) = signal::channel(None);
    let opened = futures::future::try_join_all((0..streams).map(|s| {
        let watchers: Vec<usize> = (s..opts.watchers).step_by(streams).collect();
        watch_rt.spawn(open_stream(
            watch_pool.conn(s).clone(),
            targets.clone(),
            watchers,
            opts.sample,
            history,
        ))
    }))
    .await
    .map_err(|e| BenchError::Setup(format!("watch set-up task failed: {e}")))?;
    let setup = base.elapsed();
    eprintln!(
        "{} watchers on {streams} streams created in {:.3} s",
        opts.watchers,
        setup.as_secs_f64()
    );
    let mut readers = Vec::with_capacity(streams);
    let mut stalled = Vec::new();
    for stream in opened {
        let (tx, inbound, ids, sw) = stream?;
        if opts.stall {
            // Held open, never read, until the run ends.
            stalled.push((tx, inbound));
            continue;
        }
        readers.push(watch_rt.spawn(read_events(tx, inbound, ids, sw, base, finish_rx.clone())));
    }

    let (puts, workers) = load::drive("watch-latency", put_workers(), plan).await;

    let mut expected: Vec<Vec<i64>> = vec![Vec::new(); targets.len()];
    let measured = workers.into_iter().flat_map(|w| w.revisions);
    for (k, rev) in history_revisions.into_iter().chain(measured) {
        expected[target_of(k)].push(rev);
    }
    for revs in &mut expected {
        revs.sort_unstable();
    }
    let _ = finish_tx.send(Some(Finish {
        want_per_key: Arc::new(expected.iter().map(Vec::len).collect()),
        deadline: Instant::now() + opts.drain_timeout,
    }));

    let mut lats = Vec::new();
    let mut violations = Vec::new();
    let mut problems = Vec::new();
    let mut delivered = 0usize;
    let mut wanted = 0usize;
    for r in readers {
        let sw = r.await.expect("watch reader panicked");
        load::log_events(
            sw.sent
                .iter()
                .zip(&sw.lats)
                .map(|(&ns, &lat)| (base + Duration::from_nanos(ns), lat)),
        );
        lats.extend(sw.lats);
        problems.extend(sw.problems);
        for (slot, seen) in sw.observed.iter().enumerate() {
            delivered += seen.len();
            wanted += expected[sw.keys[slot]].len();
            let check = if opts.partial {
                check_partial
            } else {
                check_delivery
            };
            if let Err(v) = check(&expected[sw.keys[slot]], seen) {
                violations.push(format!("watcher {}: {v}", sw.watchers[slot]));
            }
        }
    }

    drop(stalled);
    let events = lats.len();
    let put_stats = Stats::new(puts.all(), puts.elapsed);
    let mut report = Report::new("watch-latency", Stats::new(lats, puts.elapsed), puts.errors);
    if let Some(e) = report
        .errors
        .keys()
        .find(|e| e.starts_with("Unimplemented"))
        && put_stats.count() == 0
    {
        return Err(BenchError::Unimplemented(format!("put ({e})")));
    }
    report.sections.push(("put".into(), put_stats));
    let check = match (violations.first(), problems.first()) {
        (None, None) => "ok".to_owned(),
        (Some(v), _) => {
            report.violation = true;
            format!(
                "FAILED: {} of {} watchers, first {v}",
                violations.len(),
                opts.watchers
            )
        }
        (None, Some(p)) => {
            report.violation = true;
            format!("FAILED: {p}")
        }
    };
    for v in violations.iter().chain(&problems).skip(1).take(9) {
        eprintln!("watch check: {v}");
    }
    report.extra.insert("watch_check".into(), check.into());
    report.extra.insert("watchers".into(), opts.watchers.into());
    report.extra.insert("streams".into(), streams.into());
    report
        .extra
        .insert("watch_keys".into(), opts.watch_keys.into());
    report.extra.insert("events".into(), events.into());
    report.extra.insert("delivered".into(), delivered.into());
    report.extra.insert("expected".into(), wanted.into());
    report.extra.insert("prefix".into(), opts.prefix.into());
    report.extra.insert("history".into(), opts.history.into());
    report.extra.insert("stall".into(), opts.stall.into());
    report.extra.insert("partial".into(), opts.partial.into());
    report
        .extra
        .insert("sample".into(), opts.sample.max(1).into());
    report
        .extra
        .insert("setup_s".into(), setup.as_secs_f64().into());
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_check_table() {
        struct Case {
            name: &'static str,
            expected: &'static [i64],
            observed: &'static [i64],
            want: Result<(), Violation>,
        }
        let cases = [
            Case {
                name: "all in order",
                expected: &[3, 5, 9],
                observed: &[3, 5, 9],
                want: Ok(()),
            },
            Case {
                name: "nothing expected, nothing seen",
                expected: &[],
                observed: &[],
                want: Ok(()),
            },
            Case {
                name: "gap in the middle",
                expected: &[3, 5, 9],
                observed: &[3, 9],
                want: Err(Violation::Gap { missing: 5 }),
            },
            Case {
                name: "tail missing",
                expected: &[3, 5, 9],
                observed: &[3, 5],
                want: Err(Violation::Gap { missing: 9 }),
            },
            Case {
                name: "nothing arrived",
                expected: &[4],
                observed: &[],
                want: Err(Violation::Gap { missing: 4 }),
            },
            Case {
                name: "immediate duplicate",
                expected: &[3, 5, 9],
                observed: &[3, 5, 5, 9],
                want: Err(Violation::Duplicate { revision: 5 }),
            },
            Case {
                name: "late duplicate",
                expected: &[3, 5, 9],
                observed: &[3, 5, 9, 3],
                want: Err(Violation::Duplicate { revision: 3 }),
            },
            Case {
                name: "swapped",
                expected: &[3, 5, 9],
                observed: &[3, 9, 5],
                want: Err(Violation::OutOfOrder {
                    revision: 5,
                    after: 9,
                }),
            },
            Case {
                name: "stranger",
                expected: &[3, 5, 9],
                observed: &[3, 4, 5, 9],
                want: Err(Violation::Unexpected { revision: 4 }),
            },
        ];
        for c in cases {
            assert_eq!(check_delivery(c.expected, c.observed), c.want, "{}", c.name);
        }
    }

    #[test]
    fn violations_read_well() {
        assert_eq!(
            Violation::OutOfOrder {
                revision: 5,
                after: 9
            }
            .to_string(),
            "out of order: revision 5 arrived after 9"
        );
    }

    #[test]
    fn events_are_recorded_with_their_latency() {
        use actcd_proto::mvccpb::{Event, KeyValue};
        let base = Instant::now();
        let mut sw = StreamWatchers {
            watchers: vec![7],
            keys: vec![0],
            observed: vec![Vec::new()],
            lats: Vec::new(),
            sent: Vec::new(),
            sample: 1,
            problems: Vec::new(),
            history_until: 0,
        };
        let ids = HashMap::from([(42, 0)]);
        let event = |rev: i64| Event {
            r#type: EventType::Put as i32,
            kv: Some(KeyValue {
                mod_revision: rev,
                value: 0u64.to_le_bytes().to_vec(),
                ..Default::default()
            }),
            prev_kv: None,
        };
        let resp_of = |revs: &[i64]| WatchResponse {
            watch_id: 42,
            events: revs.iter().map(|&r| event(r)).collect(),
            ..Default::default()
        };
        on_response(&mut sw, &ids, base, resp_of(&[10, 11]));
        // An answer for another stream's watch id is not ours.
        on_response(
            &mut sw,
            &ids,
            base,
            WatchResponse {
                watch_id: 1,
                events: vec![event(12)],
                ..Default::default()
            },
        );
        assert_eq!(sw.observed, [vec![10, 11]]);
        assert_eq!(sw.lats.len(), 2);
        assert!(sw.lats.iter().all(|&l| l >= 0.0));
        assert!(sw.problems.is_empty());
        // Sampling every 2nd watcher: watcher 7's events are counted and
        // checked, but their latencies are not kept.
        sw.sample = 2;
        on_response(&mut sw, &ids, base, resp_of(&[12]));
        assert_eq!(sw.observed, [vec![10, 11, 12]]);
        assert_eq!(sw.lats.len(), 2);
        // `--history`: events up to its last revision are checked but not timed.
        sw.sample = 1;
        sw.history_until = 13;
        on_response(&mut sw, &ids, base, resp_of(&[13, 14]));
        assert_eq!(sw.observed, [vec![10, 11, 12, 13, 14]]);
        assert_eq!(sw.lats.len(), 3, "only 14 is timed");
    }

    #[test]
    fn a_partial_delivery_is_a_prefix() {
        let expected = [3, 5, 9];
        assert_eq!(check_partial(&expected, &[]), Ok(()));
        assert_eq!(check_partial(&expected, &[3, 5]), Ok(()));
        assert_eq!(check_partial(&expected, &[3, 5, 9]), Ok(()));
        assert_eq!(
            check_partial(&expected, &[3, 9]),
            Err(Violation::Gap { missing: 5 })
        );
        assert_eq!(
            check_partial(&expected, &[5]),
            Err(Violation::Gap { missing: 3 })
        );
        assert_eq!(
            check_partial(&expected, &[3, 3]),
            Err(Violation::Duplicate { revision: 3 })
        );
    }
}
