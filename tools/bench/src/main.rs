//! `actcd-bench`: a load generator for etcd v3 servers, after etcd's
//! `tools/benchmark`. It speaks plain gRPC (tonic clients generated from
//! etcd's protos), so it runs unchanged against etcd and against actcd, and
//! prints the same summary etcd's tool does, or one JSON line with `--json`.
//!
//! ```sh
//! actcd-bench --endpoints 127.0.0.1:2379 --conns 10 --clients 100 --total 50000 put --val-size 256
//! actcd-bench --clients 100 --consistency s --total 50000 range foo
//! actcd-bench --clients 10 --total 5000 range --populate 1000 --prefix bench/
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
//! `--key-space-size`, `--sequential-keys`, `--consistency l|s`,
//! `--user name[:password]`/`--password` (one Authenticate per channel, the
//! token sent as gRPC metadata `token`), `--json`, `--precise`.
//!
//! Keys are `--key-size` bytes: the key index in zero-padded lowercase hex,
//! the index drawn at random from `[0, --key-space-size)` or, with
//! `--sequential-keys`, request i's index is i mod the key space.
//!
//! The summary goes to stdout; a progress bar goes to stderr when stderr is a
//! terminal. Exit status: 0 done; 1 failed (or no request succeeded);
//! 2 bad usage; 3 the server answered `Unimplemented` (it lacks the
//! service); 4 the watch check found a violation.
//!
//! # Layout
//!
//! * `main.rs`: flags and dispatch.
//! * `load.rs`: the connection pool, the worker driver (shared request
//!   counter, total/duration, even-paced `--rate`), keys and values.
//! * `report.rs`: statistics, histogram, percentiles, text and JSON output.
//! * `kv.rs`: put, range, populate, txn-put, txn-mixed, mixed.
//! * `watch.rs`: watch-latency and the delivery checker.
//! * `lease.rs`: lease-keepalive.
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
mod report;
mod v2;
mod watch;

use std::error::Error as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tonic::{Code, Status};

use crate::load::{ConnOpts, KeyGen, Plan, Pool};
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
    #[arg(long, global = true, default_value_t = 8)]
    val_size: usize,
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
    #[arg(long, default_value_t = 0)]
    limit: i64,
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (json, precise) = (cli.global.json, cli.global.precise);
    match runtime.block_on(run(cli)) {
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
            keys: KeyGen::new(g.key_size, g.key_space_size, g.sequential_keys)?,
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
                kv::populate(&pool, g.clients, p, n, g.key_size, g.val_size).await?;
                eprintln!("populated {n} keys under {prefix:?}");
            }
            eprintln!(
                "bench with {} range",
                match g.consistency {
                    Consistency::L => "linearizable",
                    Consistency::S => "serializable",
                }
            );
            let opts = kv_opts()?;
            kv::range(&pool, &opts, plan, key, end, args.limit).await?
        }
        Command::Populate { prefix, count } => {
            let p = prefix.as_bytes();
            kv::populate(&pool, g.clients, p, *count, g.key_size, g.val_size).await?;
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
            };
            let put_plan = Plan {
                total: args
                    .put_total
                    .or(g.total)
                    .or(g.duration.is_none().then_some(1000)),
                duration: g.duration,
                rate: args.put_rate,
            };
            watch::latency(&pool, &opts, put_plan).await?
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
        Command::V2Set { .. } | Command::V2Get { .. } | Command::V2Watch(_) => {
            unreachable!("v2 commands are run before connecting")
        }
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

    #[test]
    fn endpoints_split_on_commas() {
        let cli =
            Cli::try_parse_from(["actcd-bench", "--endpoints", "a:1,http://b:2", "put"]).unwrap();
        assert_eq!(cli.global.endpoints, ["a:1", "http://b:2"]);
    }
}
