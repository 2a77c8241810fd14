//! `actcd-bench`: a load generator for etcd v3 servers, after etcd's
//! `tools/benchmark`. It speaks plain gRPC (tonic clients generated from
//! etcd's protos), so it runs unchanged against etcd and against actcd, and
//! prints the same summary etcd's tool does, or one JSON line with `--json`.
//!
//! ```sh
//! actcd-bench --endpoints 127.0.0.1:2379 --conns 10 --clients 100 --total 50000 put --val-size 256
//! actcd-bench --clients 100 --consistency s --total 50000 range foo
//! actcd-bench --clients 10 --total 5000 range --populate 1000 --prefix bench/
//! actcd-bench --conns 10 --clients 100 --total 1000000 --sequential-keys --key-space-size 1000000 \
//!     --key-format k8s --value-size 256 put
//! actcd-bench --total 3 range --prefix /registry/pods/ --paginate 10000
//! actcd-bench --total 3 range --prefix /registry/pods/ --stream --keys-only
//! actcd-bench --total 1000 range --prefix /registry/pods/ --count-only --revision 1000
//! actcd-bench ready /registry/pods/ns-0000/pod-000000 --interval 10ms
//! actcd-bench --conns 10 --clients 100 lease-load --leases 100000 --ttl 600 --keepalive-for 30s
//! actcd-bench --conns 10 watch-latency --prefix --watchers 100000 --streams 100 --sample 100 \
//!     --put-total 100 --put-rate 1000
//! actcd-bench --clients 100 --total 20000 txn-put --txn-ops 4 --key-space-size 10000
//! actcd-bench --duration 10s --json mixed --read-ratio 0.9 --key-space-size 1000
//! actcd-bench --conns 4 watch-latency --watchers 100 --streams 10 --put-total 1000 --put-rate 200
//! actcd-bench --clients 10 --total 20000 lease-keepalive --leases 1000
//! actcd-bench --clients 100 --total 50000 v2-set --val-size 256 --key-space-size 100000
//! actcd-bench --clients 100 --total 50000 v2-get --populate --key-space-size 1000
//! actcd-bench v2-watch --watchers 100 --put-total 2000 --put-rate 500
//! actcd-bench --duration 60s v2-watch --watchers 100 --hold
//! ```
//!
//! Global flags (any position): `--endpoints` (comma list, `host:port` or
//! `http://host:port`), `--conns` gRPC channels, `--clients` concurrent
//! workers (worker w uses channel w mod conns), `--total` requests or
//! `--duration` (whichever ends first; 10000 requests if neither),
//! `--rate` requests/s (0: unlimited), `--key-size`, `--val-size`,
//! `--key-space-size`, `--sequential-keys`, `--key-format hex|k8s`,
//! `--consistency l|s`,
//! `--user name[:password]`/`--password` (one Authenticate per channel, the
//! token sent as gRPC metadata `token`), `--json`, `--precise`,
//! `--latency-log PATH` (every request's send time and latency, for
//! cutting a run into time windows).
//!
//! Keys are `--key-size` bytes: the key index in zero-padded lowercase hex,
//! the index drawn at random from `[0, --key-space-size)` or, with
//! `--sequential-keys`, request i's index is i mod the key space. With
//! `--key-format k8s` they are Kubernetes-like pod keys of the index,
//! `/registry/pods/ns-NNNN/pod-NNNNNN`.
//!
//! SIGTERM or SIGINT ends a run early, as if its `--duration` had passed:
//! the report covers what was done until then.
//!
//! The summary goes to stdout; progress (done/total, rate, ETA) goes to
//! stderr, redrawn in place on a terminal, else a line every 10 s. Exit
//! status: 0 done; 1 failed (or no request succeeded); 2 bad usage; 3 the
//! server answered `Unimplemented` (it lacks the service, e.g. RangeStream
//! before etcd 3.7); 4 a check found a violation (watch delivery, keys left
//! after their leases were revoked).
//!
//! # Layout
//!
//! * `main.rs`: flags and dispatch.
//! * `load.rs`: the connection pool, the worker driver (shared request
//!   counter, total/duration, even-paced `--rate`), keys and values.
//! * `report.rs`: statistics, histogram, percentiles, text and JSON output.
//! * `kv.rs`: put, populate, txn-put, txn-mixed, mixed.
//! * `range.rs`: range, unary, paginated (`--paginate`) or streamed
//!   (`--stream`, etcd 3.7's RangeStream).
//! * `watch.rs`: watch-latency (per-key or `--prefix` watchers) and the
//!   delivery checker.
//! * `lease.rs`: lease-keepalive and lease-load.
//! * `v2.rs`: v2-set, v2-get and v2-watch over etcd's v2 HTTP API
//!   (`--enable-v2`), one HTTP/1.1 keep-alive connection per client or
//!   watcher (`--conns` does not apply; `--user` is not supported).
//!
//! The client should cost little next to the server it measures: one tokio
//! multi-thread runtime, requests built once per worker and only their key
//! rewritten, latencies pushed to per-worker vectors and sorted once at the
//! end (no histogram structure, no lock or channel per request).

mod auth;
mod kv;
mod lease;
mod load;
mod range;
mod report;
mod v2;
mod watch;

use std::error::Error as _;
use std::process::ExitCode;
use std::time::Duration;

use actcd_proto::etcdserverpb::RangeRequest;
use clap::{Args, Parser, Subcommand, ValueEnum};
use tonic::{Code, Status};

use crate::load::{ConnOpts, KeyFormat, KeyGen, Plan, Pool};
use crate::report::Report;

/// Why a run could not produce a report.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Usage(String),
    #[error("cannot connect to {endpoint}: {source}")]
    Connect {
        endpoint: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("{what}: {}", load::error_key(.status))]
    Rpc { what: &'static str, status: Status },
    #[error("server does not implement it: {0}")]
    Unimplemented(String),
    #[error("{0}")]
    Setup(String),
}

impl BenchError {
    /// A failed call; `Unimplemented` gets its own variant (and exit status).
    pub fn rpc(what: &'static str, status: Status) -> BenchError {
        if status.code() == Code::Unimplemented {
            BenchError::Unimplemented(match status.message() {
                "" => what.to_owned(),
                msg => format!("{what} ({msg})"),
            })
        } else {
            BenchError::Rpc { what, status }
        }
    }

    fn exit_code(&self) -> u8 {
        match self {
            BenchError::Usage(_) => 2,
            BenchError::Unimplemented(_) => 3,
            _ => 1,
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "actcd-bench",
    version,
    about = "Load generator for etcd v3 servers (actcd and etcd alike)"
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct Global {
    /// gRPC endpoints, comma separated (`host:port` or `http://host:port`).
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        default_value = "127.0.0.1:2379"
    )]
    endpoints: Vec<String>,
    /// Number of gRPC connections.
    #[arg(long, global = true, default_value_t = 1)]
    conns: usize,
    /// Number of concurrent clients, spread over the connections.
    #[arg(long, global = true, default_value_t = 1)]
    clients: usize,
    /// Total number of requests (default 10000 unless --duration is given).
    #[arg(long, global = true)]
    total: Option<u64>,
    /// Run for this long (e.g. 10s, 500ms, 2m).
    #[arg(long, global = true, value_parser = load::parse_duration)]
    duration: Option<Duration>,
    /// Key size in bytes.
    #[arg(long, global = true, default_value_t = 8)]
    key_size: usize,
    /// Value size in bytes.
    #[arg(long, global = true, default_value_t = 8, alias = "value-size")]
    val_size: usize,
    /// How key indices become keys: `hex` (--key-size hex digits) or `k8s`
    /// (`/registry/pods/ns-NNNN/pod-NNNNNN`, a thousand pods a namespace).
    #[arg(long, global = true, value_enum, default_value_t = KeyFormat::Hex)]
    key_format: KeyFormat,
    /// Number of distinct keys written or read.
    #[arg(long, global = true, default_value_t = 1)]
    key_space_size: u64,
    /// Use keys in sequence rather than at random.
    #[arg(long, global = true)]
    sequential_keys: bool,
    /// Linearizable (l) or serializable (s) reads.
    #[arg(long, global = true, value_enum, default_value_t = Consistency::L)]
    consistency: Consistency,
    /// Maximum requests per second over all clients (0: unlimited).
    #[arg(long, global = true, default_value_t = 0.0)]
    rate: f64,
    /// User name, or `name:password`.
    #[arg(long, global = true)]
    user: Option<String>,
    /// Password, when --user does not carry one.
    #[arg(long, global = true)]
    password: Option<String>,
    /// Print one JSON line instead of the text summary.
    #[arg(long, global = true)]
    json: bool,
    /// Print full floating-point precision.
    #[arg(long, global = true)]
    precise: bool,
    /// Also write every successful request to this file, one line each:
    /// `unix_seconds latency_seconds r|w|e` (send time, latency, read, write, or a watch event
    /// of watch-latency: its put's send time and the time it took to reach the watcher).
    #[arg(long, global = true, value_name = "PATH")]
    latency_log: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Consistency {
    /// Linearizable.
    L,
    /// Serializable.
    S,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Put --val-size byte values to keys of the key space.
    Put,
    /// Range over one key, [key, range_end) or a --prefix.
    Range(RangeArgs),
    /// Write --count keys under --prefix (set-up for range; not measured).
    Populate {
        #[arg(long)]
        prefix: String,
        #[arg(long)]
        count: u64,
    },
    /// Txns of --txn-ops puts each.
    TxnPut {
        /// Puts per txn.
        #[arg(long, default_value_t = 1)]
        txn_ops: usize,
    },
    /// Txns guarded by a mod_revision compare, each holding a range or a put.
    TxnMixed {
        /// Reads per write (1: half of the txns read).
        #[arg(long, default_value_t = 1.0)]
        rw_ratio: f64,
    },
    /// Plain ranges and puts.
    Mixed {
        /// Fraction of requests that read.
        #[arg(long, default_value_t = 0.9)]
        read_ratio: f64,
    },
    /// Put-to-watcher latency, checking every watcher sees every put once, in order.
    WatchLatency(WatchArgs),
    /// Authenticate round trips (a password check and a token each), as --user.
    Authenticate,
    /// Keepalive round trips over LeaseKeepAlive streams (one per client).
    LeaseKeepalive {
        /// Leases to grant and keep alive.
        #[arg(long, default_value_t = 1000)]
        leases: u64,
        /// TTL of each lease, in seconds.
        #[arg(long, default_value_t = 60)]
        ttl: i64,
    },
    /// Poll a serializable range of one key until the server answers; print the seconds it took.
    Ready(ReadyArgs),
    /// Grant --leases leases, put one key with each, keep them alive, revoke them all.
    LeaseLoad(LeaseLoadArgs),
    /// v2 API: PUT /v2/keys/<prefix>/<key> with value=<--val-size bytes> (one HTTP/1.1 connection per client).
    V2Set {
        /// v2 directory the keys go under.
        #[arg(long, default_value = "bench")]
        prefix: String,
    },
    /// v2 API: GET /v2/keys/<prefix>/<key> over the key space (one HTTP/1.1 connection per client).
    V2Get {
        /// v2 directory the keys are under.
        #[arg(long, default_value = "bench")]
        prefix: String,
        /// First set every key of the key space (not measured).
        #[arg(long)]
        populate: bool,
        /// Quorum reads (`?quorum=true`, through the log).
        #[arg(long)]
        quorum: bool,
    },
    /// v2 API: put-to-event latency of stream watchers (?wait=true&recursive=true&stream=true on a prefix).
    V2Watch(V2WatchArgs),
}

#[derive(Debug, Args)]
struct ReadyArgs {
    /// The key read.
    #[arg(default_value = "ready-probe")]
    key: String,
    /// Time between two tries.
    #[arg(long, default_value = "10ms", value_parser = load::parse_duration)]
    interval: Duration,
    /// Give up (exit status 1) after this long.
    #[arg(long, default_value = "10m", value_parser = load::parse_duration)]
    timeout: Duration,
}

#[derive(Debug, Args)]
struct LeaseLoadArgs {
    /// Leases to grant, each with one key.
    #[arg(long, default_value_t = 1000)]
    leases: u64,
    /// TTL of each lease, in seconds.
    #[arg(long, default_value_t = 600)]
    ttl: i64,
    /// Where the keys go (`<prefix>ns-NNNN/pod-NNNNNN`).
    #[arg(long, default_value = "/registry/events/")]
    prefix: String,
    /// How long to keep the leases alive.
    #[arg(long, default_value = "30s", value_parser = load::parse_duration)]
    keepalive_for: Duration,
    /// Keepalives per second over all leases (0: each lease once per TTL/3, as etcd's client does).
    #[arg(long, default_value_t = 0.0)]
    keepalive_rate: f64,
}

#[derive(Debug, Args)]
struct V2WatchArgs {
    /// Number of watchers, each on its own connection.
    #[arg(long, default_value_t = 10)]
    watchers: usize,
    /// Number of puts under the prefix (default: --total, else 1000); put i writes key i mod --key-space-size.
    #[arg(long)]
    put_total: Option<u64>,
    /// Puts per second (0: unlimited), over --clients writers.
    #[arg(long, default_value_t = 100.0)]
    put_rate: f64,
    /// Watched v2 directory (default: v2-watch/<random run id>).
    #[arg(long)]
    prefix: Option<String>,
    /// Only open the watchers and hold them, no puts, until --duration passes or SIGINT/SIGTERM.
    #[arg(long)]
    hold: bool,
}

#[derive(Debug, Args)]
struct RangeArgs {
    /// First key of the range.
    #[arg(conflicts_with = "prefix")]
    key: Option<String>,
    /// End of the range (exclusive); a single key when absent.
    range_end: Option<String>,
    /// Range over every key with this prefix.
    #[arg(long)]
    prefix: Option<String>,
    /// Maximum keys per answer (0: no limit).
    #[arg(long, default_value_t = 0, conflicts_with = "paginate")]
    limit: i64,
    /// Read at this revision (0: the newest).
    #[arg(long, default_value_t = 0)]
    revision: i64,
    /// Keys without values.
    #[arg(long)]
    keys_only: bool,
    /// Only the number of keys in the range.
    #[arg(long, conflicts_with_all = ["paginate", "keys_only"])]
    count_only: bool,
    /// Each request walks the whole range in pages of N keys (Kubernetes'
    /// list: next key = last key + \0, revision pinned to the first page's).
    #[arg(long, value_name = "N", conflicts_with = "stream")]
    paginate: Option<i64>,
    /// Each request is one RangeStream (etcd 3.7), its chunks merged.
    #[arg(long)]
    stream: bool,
    /// Largest answer (or stream chunk) accepted, in bytes (default: etcd's Go client's, 2^31-1).
    #[arg(long, default_value_t = range::DEFAULT_MAX_RECV_BYTES)]
    max_recv_bytes: usize,
    /// First write this many keys under --prefix (not measured).
    #[arg(long)]
    populate: Option<u64>,
}

#[derive(Debug, Args)]
struct WatchArgs {
    /// Number of watchers.
    #[arg(long, default_value_t = 10)]
    watchers: usize,
    /// Number of watch streams the watchers are spread over.
    #[arg(long, default_value_t = 1)]
    streams: usize,
    /// Number of distinct watched keys (watcher w watches key w mod this).
    #[arg(long, default_value_t = 1)]
    watch_keys: usize,
    /// Number of puts to the watched keys (default: --total, else 1000).
    #[arg(long)]
    put_total: Option<u64>,
    /// Puts per second (0: unlimited).
    #[arg(long, default_value_t = 100.0)]
    put_rate: f64,
    /// Every watcher watches the run's whole key prefix, so every put reaches every watcher.
    #[arg(long)]
    prefix: bool,
    /// Keep the latencies of every N-th watcher only (all events are still checked).
    #[arg(long, default_value_t = 1, value_name = "N")]
    sample: usize,
    /// How long to wait for undelivered events once the puts are done.
    #[arg(long, default_value = "10s", value_parser = load::parse_duration)]
    drain_timeout: Duration,
    /// Puts written to the watched keys before the watchers exist; every watcher is then
    /// created at the first of them, so it starts behind and catches up through them while
    /// the measured puts run (etcd #22264's unsynced watchers). Checked like the others; the
    /// latency figures count the measured puts' events only.
    #[arg(long, default_value_t = 0, value_name = "N")]
    history: u64,
    /// The watch streams get connections of their own, N of them (0: they share the puts'
    /// --conns), and a thread of their own at the lowest priority (`SCHED_IDLE`), as watchers in
    /// other processes than the writers: the puts' latency is then the server's, not the time
    /// the puts' answers wait behind this process decoding millions of events.
    #[arg(long, default_value_t = 0, value_name = "N")]
    watch_conns: usize,
    /// Watch clients that stop reading once their watchers exist (slow consumers): their
    /// streams stay open, unread, until the run ends, and are not checked.
    #[arg(long)]
    stall: bool,
    /// Accept a watcher that received only the first part of its events (in order, no
    /// duplicate): for runs whose fan-out no client could read in time. `delivered` says how
    /// much arrived.
    #[arg(long)]
    partial: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (json, precise) = (cli.global.json, cli.global.precise);
    let latency_log = cli.global.latency_log.clone();
    if latency_log.is_some() {
        load::start_latency_log();
    }
    let result = runtime.block_on(run(cli));
    if let Some(path) = latency_log
        && let Err(e) = load::write_latency_log(&path, &load::take_latency_log())
    {
        eprintln!("actcd-bench: cannot write the latency log {path}: {e}");
    }
    match result {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(report)) => {
            if json {
                println!("{}", report.json());
            } else {
                print!("{}", report.text(precise));
            }
            if report.violation {
                ExitCode::from(4)
            } else if report.only_unimplemented() {
                ExitCode::from(3)
            } else if report.stats.count() == 0 && report.error_count() > 0 {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            let mut msg = e.to_string();
            let mut source = e.source();
            while let Some(s) = source {
                msg.push_str(&format!(": {s}"));
                source = s.source();
            }
            eprintln!("actcd-bench: {msg}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Runs the chosen workload; `None` for set-up commands with nothing to report.
async fn run(cli: Cli) -> Result<Option<Report>, BenchError> {
    let g = &cli.global;
    if g.endpoints.is_empty() || g.conns == 0 || g.clients == 0 {
        return Err(BenchError::Usage(
            "--endpoints, --conns and --clients must not be empty or zero".into(),
        ));
    }
    if g.rate < 0.0 {
        return Err(BenchError::Usage("--rate must not be negative".into()));
    }
    let plan = Plan {
        total: match (g.total, g.duration) {
            (None, None) => Some(10_000),
            (total, _) => total,
        },
        duration: g.duration,
        rate: g.rate,
    };
    if cli.command.is_v2() {
        return run_v2(g, &cli.command, plan).await.map(Some);
    }
    // (The v2 workloads above keep the default: v2-watch --hold has its own.)
    load::stop_on_signal();
    if let Command::Ready(args) = &cli.command {
        let took = wait_ready(&g.endpoints[0], args).await?;
        println!("{:.3}", took.as_secs_f64());
        return Ok(None);
    }
    let pool = Pool::connect(&ConnOpts {
        endpoints: g.endpoints.clone(),
        conns: g.conns,
        user: g.user.clone(),
        password: g.password.clone(),
    })
    .await?;
    let kv_opts = || -> Result<kv::KvOpts, BenchError> {
        Ok(kv::KvOpts {
            clients: g.clients,
            keys: KeyGen::with_format(
                g.key_size,
                g.key_space_size,
                g.sequential_keys,
                g.key_format,
            )?,
            val_size: g.val_size,
            serializable: g.consistency == Consistency::S,
        })
    };

    let report = match &cli.command {
        Command::Put => kv::put(&pool, &kv_opts()?, plan).await?,
        Command::Range(args) => {
            let (key, end) = match (&args.prefix, &args.key) {
                (Some(p), _) => (p.as_bytes().to_vec(), load::prefix_end(p.as_bytes())),
                (None, Some(k)) => (
                    k.as_bytes().to_vec(),
                    args.range_end.clone().unwrap_or_default().into_bytes(),
                ),
                (None, None) => {
                    return Err(BenchError::Usage("range needs a key or --prefix".into()));
                }
            };
            if let Some(n) = args.populate {
                let Some(prefix) = &args.prefix else {
                    return Err(BenchError::Usage("--populate needs --prefix".into()));
                };
                let p = prefix.as_bytes();
                let keys = (g.key_size, g.key_format);
                kv::populate(&pool, g.clients, p, n, keys, g.val_size).await?;
                eprintln!("populated {n} keys under {prefix:?}");
            }
            eprintln!(
                "bench with {} range",
                match g.consistency {
                    Consistency::L => "linearizable",
                    Consistency::S => "serializable",
                }
            );
            let opts = range::RangeOpts {
                clients: g.clients,
                req: RangeRequest {
                    key,
                    range_end: end,
                    limit: args.limit,
                    revision: args.revision,
                    serializable: g.consistency == Consistency::S,
                    keys_only: args.keys_only,
                    count_only: args.count_only,
                    ..Default::default()
                },
                mode: match (args.paginate, args.stream) {
                    (Some(n), _) => range::Mode::Paginate(n),
                    (None, true) => range::Mode::Stream,
                    (None, false) => range::Mode::Unary,
                },
                max_recv_bytes: args.max_recv_bytes,
            };
            range::range(&pool, &opts, plan).await?
        }
        Command::Populate { prefix, count } => {
            let p = prefix.as_bytes();
            let keys = (g.key_size, g.key_format);
            kv::populate(&pool, g.clients, p, *count, keys, g.val_size).await?;
            eprintln!("populated {count} keys under {prefix:?}");
            return Ok(None);
        }
        Command::TxnPut { txn_ops } => kv::txn_put(&pool, &kv_opts()?, plan, *txn_ops).await?,
        Command::TxnMixed { rw_ratio } => {
            if !rw_ratio.is_finite() || *rw_ratio < 0.0 {
                return Err(BenchError::Usage("--rw-ratio must be ≥ 0".into()));
            }
            let read_p = rw_ratio / (1.0 + rw_ratio);
            kv::mixed(&pool, &kv_opts()?, plan, read_p, true).await?
        }
        Command::Mixed { read_ratio } => {
            kv::mixed(&pool, &kv_opts()?, plan, *read_ratio, false).await?
        }
        Command::WatchLatency(args) => {
            let opts = watch::WatchOpts {
                watchers: args.watchers,
                streams: args.streams,
                watch_keys: args.watch_keys,
                put_clients: g.clients,
                key_size: g.key_size,
                val_size: g.val_size,
                prefix: args.prefix,
                sample: args.sample,
                drain_timeout: args.drain_timeout,
                history: args.history,
                stall: args.stall,
                partial: args.partial,
            };
            let watch_side = match args.watch_conns {
                0 => None,
                conns => Some(
                    watch::WatchSide::connect(ConnOpts {
                        endpoints: g.endpoints.clone(),
                        conns,
                        user: g.user.clone(),
                        password: g.password.clone(),
                    })
                    .await?,
                ),
            };
            let put_plan = Plan {
                total: args
                    .put_total
                    .or(g.total)
                    .or(g.duration.is_none().then_some(1000)),
                duration: g.duration,
                rate: args.put_rate,
            };
            watch::latency(&pool, watch_side, &opts, put_plan).await?
        }
        Command::Authenticate => {
            let credentials = load::credentials(g.user.as_deref(), g.password.as_deref());
            auth::authenticate(&pool, g.clients, credentials, plan).await?
        }
        Command::LeaseKeepalive { leases, ttl } => {
            let opts = lease::LeaseOpts {
                clients: g.clients,
                leases: *leases,
                ttl: *ttl,
            };
            lease::keepalive(&pool, &opts, plan).await?
        }
        Command::LeaseLoad(args) => {
            let opts = lease::LoadOpts {
                clients: g.clients,
                leases: args.leases,
                ttl: args.ttl,
                prefix: args.prefix.clone().into_bytes(),
                val_size: g.val_size,
                keepalive_for: args.keepalive_for,
                keepalive_rate: args.keepalive_rate,
            };
            lease::load(&pool, &opts).await?
        }
        Command::V2Set { .. } | Command::V2Get { .. } | Command::V2Watch(_) => {
            unreachable!("v2 commands are run before connecting")
        }
        Command::Ready(_) => unreachable!("ready is run before connecting"),
    };
    Ok(Some(report))
}

impl Command {
    /// Speaks etcd's v2 HTTP API rather than gRPC.
    fn is_v2(&self) -> bool {
        matches!(
            self,
            Command::V2Set { .. } | Command::V2Get { .. } | Command::V2Watch(_)
        )
    }
}

/// Dials `endpoint` and reads `args.key` serializably every `args.interval`
/// until an answer comes (any answer: the key need not exist); returns how
/// long that took. For timing a restart: the server is ready when it serves
/// reads from its store.
async fn wait_ready(endpoint: &str, args: &ReadyArgs) -> Result<Duration, BenchError> {
    use actcd_proto::etcdserverpb::kv_client::KvClient;
    let start = tokio::time::Instant::now();
    let url = load::endpoint_url(endpoint)?;
    let ep = tonic::transport::Endpoint::from_shared(url.clone())
        .map_err(|e| BenchError::Usage(format!("bad endpoint {url}: {e}")))?
        .connect_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(1));
    let req = RangeRequest {
        key: args.key.clone().into_bytes(),
        serializable: true,
        ..Default::default()
    };
    let mut last = String::from("never tried");
    while start.elapsed() < args.timeout {
        match ep.connect().await {
            Ok(channel) => match KvClient::new(channel).range(req.clone()).await {
                Ok(_) => return Ok(start.elapsed()),
                Err(s) => last = load::error_key(&s),
            },
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(args.interval).await;
    }
    Err(BenchError::Setup(format!(
        "{url} did not answer a serializable range within {:?}: {last}",
        args.timeout
    )))
}

/// The v2 workloads: plain HTTP/1.1, no gRPC pool.
async fn run_v2(g: &Global, command: &Command, plan: Plan) -> Result<Report, BenchError> {
    if g.user.is_some() {
        return Err(BenchError::Usage(
            "--user is not supported by the v2 cases".into(),
        ));
    }
    let keys = KeyGen::new(g.key_size, g.key_space_size, g.sequential_keys)?;
    let opts = |prefix: &str| v2::opts(&g.endpoints, g.clients, keys.clone(), g.val_size, prefix);
    match command {
        Command::V2Set { prefix } => v2::set(&opts(prefix)?, plan).await,
        Command::V2Get {
            prefix,
            populate,
            quorum,
        } => {
            let opts = opts(prefix)?;
            if *populate {
                v2::populate(&opts).await?;
                eprintln!("populated {} v2 keys under {prefix:?}", keys.space);
            }
            v2::get(&opts, plan, *quorum).await
        }
        Command::V2Watch(args) => {
            if args.put_rate < 0.0 {
                return Err(BenchError::Usage("--put-rate must not be negative".into()));
            }
            let prefix = args.prefix.clone().unwrap_or_else(v2::run_prefix);
            let wopts = v2::V2WatchOpts {
                watchers: args.watchers,
                hold: args.hold.then_some(g.duration),
            };
            let put_plan = Plan {
                total: args
                    .put_total
                    .or(g.total)
                    .or(g.duration.is_none().then_some(1000)),
                duration: g.duration,
                rate: args.put_rate,
            };
            v2::watch(&opts(&prefix)?, &wopts, put_plan).await
        }
        _ => Err(BenchError::Usage("not a v2 command".into())),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn flags_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli = Cli::try_parse_from([
            "actcd-bench",
            "--clients",
            "4",
            "range",
            "--prefix",
            "bench/",
            "--populate",
            "1000",
            "--consistency",
            "s",
            "--json",
        ])
        .unwrap();
        assert_eq!(cli.global.clients, 4);
        assert_eq!(cli.global.consistency, Consistency::S);
        assert!(cli.global.json);
        let Command::Range(args) = cli.command else {
            panic!("not a range: {:?}", cli.command)
        };
        assert_eq!(args.prefix.as_deref(), Some("bench/"));
        assert_eq!(args.populate, Some(1000));
    }

    #[test]
    fn v2_commands_parse() {
        let cli = Cli::try_parse_from([
            "actcd-bench",
            "v2-watch",
            "--watchers",
            "100",
            "--hold",
            "--duration",
            "5s",
        ])
        .unwrap();
        assert!(cli.command.is_v2());
        assert_eq!(cli.global.duration, Some(Duration::from_secs(5)));
        let Command::V2Watch(args) = cli.command else {
            panic!("not a v2-watch: {:?}", cli.command)
        };
        assert_eq!(args.watchers, 100);
        assert!(args.hold);
        let cli =
            Cli::try_parse_from(["actcd-bench", "v2-get", "--populate", "--prefix", "b"]).unwrap();
        assert!(matches!(cli.command, Command::V2Get { populate: true, .. }));
        assert!(
            !Cli::try_parse_from(["actcd-bench", "put"])
                .unwrap()
                .command
                .is_v2()
        );
    }

    fn range_args(args: &[&str]) -> Result<RangeArgs, clap::Error> {
        let argv = ["actcd-bench", "range", "--prefix", "/registry/pods/"];
        let cli = Cli::try_parse_from(argv.iter().chain(args))?;
        match cli.command {
            Command::Range(args) => Ok(args),
            other => panic!("not a range: {other:?}"),
        }
    }

    #[test]
    fn range_flags_parse() {
        let a = range_args(&[
            "--keys-only",
            "--revision",
            "42",
            "--paginate",
            "10000",
            "--max-recv-bytes",
            "1048576",
        ])
        .unwrap();
        assert!(a.keys_only && !a.count_only && !a.stream);
        assert_eq!(a.revision, 42);
        assert_eq!(a.paginate, Some(10000));
        assert_eq!(a.max_recv_bytes, 1 << 20);
        let a = range_args(&["--stream", "--count-only"]).unwrap();
        assert!(a.stream && a.count_only);
        assert_eq!(a.paginate, None);
        assert_eq!(a.max_recv_bytes, i32::MAX as usize);
    }

    #[test]
    fn range_modes_that_cannot_go_together_are_refused() {
        for bad in [
            &["--paginate", "10", "--stream"][..],
            &["--paginate", "10", "--limit", "5"],
            &["--paginate", "10", "--count-only"],
            &["--count-only", "--keys-only"],
            &["--paginate", "ten"],
        ] {
            assert!(range_args(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn key_format_and_value_size_parse() {
        let cli = Cli::try_parse_from([
            "actcd-bench",
            "put",
            "--key-format",
            "k8s",
            "--value-size",
            "256",
        ])
        .unwrap();
        assert_eq!(cli.global.key_format, KeyFormat::K8s);
        assert_eq!(cli.global.val_size, 256);
        let cli = Cli::try_parse_from(["actcd-bench", "put"]).unwrap();
        assert_eq!(cli.global.key_format, KeyFormat::Hex);
        assert!(Cli::try_parse_from(["actcd-bench", "put", "--key-format", "etcd"]).is_err());
    }

    #[test]
    fn lease_load_and_prefix_watch_flags_parse() {
        let cli = Cli::try_parse_from([
            "actcd-bench",
            "lease-load",
            "--leases",
            "100000",
            "--keepalive-for",
            "30s",
        ])
        .unwrap();
        let Command::LeaseLoad(a) = cli.command else {
            panic!("not a lease-load: {:?}", cli.command)
        };
        assert_eq!((a.leases, a.ttl), (100_000, 600));
        assert_eq!(a.keepalive_for, Duration::from_secs(30));
        assert_eq!(a.prefix, "/registry/events/");
        let cli = Cli::try_parse_from([
            "actcd-bench",
            "watch-latency",
            "--prefix",
            "--watchers",
            "100000",
            "--sample",
            "100",
            "--drain-timeout",
            "2m",
        ])
        .unwrap();
        let Command::WatchLatency(a) = cli.command else {
            panic!("not a watch-latency: {:?}", cli.command)
        };
        assert!(a.prefix);
        assert_eq!((a.watchers, a.sample), (100_000, 100));
        assert_eq!(a.drain_timeout, Duration::from_secs(120));
    }

    #[test]
    fn endpoints_split_on_commas() {
        let cli =
            Cli::try_parse_from(["actcd-bench", "--endpoints", "a:1,http://b:2", "put"]).unwrap();
        assert_eq!(cli.global.endpoints, ["a:1", "http://b:2"]);
    }
}
