//! Flags with etcd's names, defaults and `ETCD_*` environment variables, and what is derived from
//! them: the member and cluster ids, computed exactly as etcd computes them so tools that compare
//! ids across members see consistent values; and the client TLS settings, whose files are read
//! and checked here so a bad one stops start-up with its name.
//!
//! Every flag of etcd 3.5.1 is here with etcd's default and value syntax (Go booleans and
//! durations, comma lists). Those that mean nothing for actcd are listed once in
//! [`IGNORED_FLAGS`] with the reason, logged at start-up when set; those that would make the
//! process something else than a member bootstrapped from `--initial-cluster` (`--discovery`,
//! `--discovery-srv`, `--proxy`) stop start-up with the reason.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use actcd_front::ClientTls;
use clap::Parser;

#[path = "config_gates.rs"]
pub mod gates;

#[cfg(test)]
#[path = "docs_book.rs"]
mod docs_book;

/// Marks a flag as a Go boolean, as every boolean flag of etcd is (Go's `flag` package):
/// `--flag` alone is true, `--flag=true|false|1|0|t|f|T|F|TRUE|FALSE|True|False` sets it, and
/// `--flag false` is the flag followed by an argument, as in Go. The same words in its
/// `ETCD_*` variable. A `bool` field names its default (`default_value`); an `Option<bool>`
/// field is `None` when neither the flag nor its variable is given. [`go_bools`] gives every
/// flag so marked that syntax, in one place.
pub const GO_BOOL: clap::ArgAction = clap::ArgAction::SetTrue;

/// Gives every flag marked [`GO_BOOL`] Go's boolean syntax (see there). Only Go booleans are
/// marked `SetTrue`: no actcd flag is a plain switch.
fn go_bools(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|arg| {
        if !matches!(arg.get_action(), clap::ArgAction::SetTrue) {
            return arg;
        }
        arg.action(clap::ArgAction::Set)
            .value_parser(parse_go_bool)
            .num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true")
    })
}

/// The command line: etcd's flags with the [`GO_BOOL`] ones given Go's syntax.
impl clap::CommandFactory for Flags {
    fn command() -> clap::Command {
        go_bools(<Self as clap::Args>::augment_args(Self::bare_command()))
    }

    fn command_for_update() -> clap::Command {
        go_bools(<Self as clap::Args>::augment_args_for_update(
            Self::bare_command(),
        ))
    }
}

impl Parser for Flags {}

impl Flags {
    fn bare_command() -> clap::Command {
        clap::Command::new("actcd")
            .version(env!("CARGO_PKG_VERSION"))
            .about("An etcd v3-compatible key-value store built from actors")
            // Go's flags: a repeated flag's last value wins.
            .args_override_self(true)
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct Flags {
    /// Human-readable name for this member.
    #[arg(long, env = "ETCD_NAME", default_value = "default")]
    pub name: String,
    /// Path to the data directory (default: "<name>.actcd").
    #[arg(long, env = "ETCD_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// URLs to listen on for client traffic.
    #[arg(
        long,
        env = "ETCD_LISTEN_CLIENT_URLS",
        default_value = "http://localhost:2379"
    )]
    pub listen_client_urls: String,
    /// URLs to listen on for HTTP-only client traffic (the JSON gateway, `/health`,
    /// `/metrics`, `/v2`…); given, `--listen-client-urls` serve gRPC only (etcd 3.5.8+).
    #[arg(long, env = "ETCD_LISTEN_CLIENT_HTTP_URLS", default_value = "")]
    pub listen_client_http_urls: String,
    /// Client URLs advertised to the rest of the cluster.
    #[arg(
        long,
        env = "ETCD_ADVERTISE_CLIENT_URLS",
        default_value = "http://localhost:2379"
    )]
    pub advertise_client_urls: String,
    /// URLs to listen on for peer traffic.
    #[arg(
        long,
        env = "ETCD_LISTEN_PEER_URLS",
        default_value = "http://localhost:2380"
    )]
    pub listen_peer_urls: String,
    /// Peer URLs advertised to the rest of the cluster.
    #[arg(
        long,
        env = "ETCD_INITIAL_ADVERTISE_PEER_URLS",
        default_value = "http://localhost:2380"
    )]
    pub initial_advertise_peer_urls: String,
    /// Initial cluster configuration for bootstrapping: name=peer-url,...
    #[arg(long, env = "ETCD_INITIAL_CLUSTER")]
    pub initial_cluster: Option<String>,
    /// "new" or "existing".
    #[arg(long, env = "ETCD_INITIAL_CLUSTER_STATE", default_value = "new")]
    pub initial_cluster_state: String,
    /// Initial cluster token, mixed into the member ids.
    #[arg(
        long,
        env = "ETCD_INITIAL_CLUSTER_TOKEN",
        default_value = "etcd-cluster"
    )]
    pub initial_cluster_token: String,
    /// Applied entries between raft log compactions (etcd 3.6's default, #15408; 3.5's was
    /// 100,000).
    #[arg(long, env = "ETCD_SNAPSHOT_COUNT", default_value_t = 10_000)]
    pub snapshot_count: u64,
    /// Entries kept in memory after a log compaction, for slow followers:
    /// `--snapshot-catchup-entries` (`--experimental-snapshot-catchup-entries` in etcd 3.5). In
    /// effect once [`Flags::resolve`] has run; the flags are in [`RenamedFlags`].
    #[arg(skip = 5000u64)]
    pub snapshot_catchup_entries: u64,
    /// Time (ms) of a heartbeat interval (one raft tick).
    #[arg(long, env = "ETCD_HEARTBEAT_INTERVAL", default_value_t = 100)]
    pub heartbeat_interval: u64,
    /// Time (ms) for an election to time out.
    #[arg(long, env = "ETCD_ELECTION_TIMEOUT", default_value_t = 1000)]
    pub election_timeout: u64,
    /// Maximum client request size in bytes the server will accept.
    #[arg(long, env = "ETCD_MAX_REQUEST_BYTES", default_value_t = 1_572_864)]
    pub max_request_bytes: usize,
    /// Serve etcd's v2 API (`/v2/keys`, `/v2/auth`, `/v2/members`, `/v2/stats`, the v2 auth
    /// RFC's `/v2/security`) on the client URLs, as etcd 3.4/3.5's `--enable-v2` does.
    #[arg(long, env = "ETCD_ENABLE_V2", default_value = "false", action = GO_BOOL)]
    pub enable_v2: bool,
    /// Maximum number of operations permitted in a transaction.
    #[arg(long, env = "ETCD_MAX_TXN_OPS", default_value_t = 128)]
    pub max_txn_ops: usize,
    /// Backend size quota in bytes (0: the default of 2 GiB; negative: no quota, as in etcd;
    /// past 8 GiB: accepted with etcd's warning).
    #[arg(
        long,
        env = "ETCD_QUOTA_BACKEND_BYTES",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub quota_backend_bytes: i64,
    /// Auto-compaction: `periodic` (retention a duration, or hours) or `revision` (retention a
    /// revision count).
    #[arg(long, env = "ETCD_AUTO_COMPACTION_MODE", default_value = "periodic")]
    pub auto_compaction_mode: String,
    /// How much history auto-compaction keeps; 0 turns it off.
    #[arg(long, env = "ETCD_AUTO_COMPACTION_RETENTION", default_value = "0")]
    pub auto_compaction_retention: String,
    /// Log lines as `text` (human-readable; etcd 3.6 calls it `console`, also taken) or `json`
    /// (one object a line: level, ts, caller, msg, then the event's fields, as etcd's zap
    /// logger writes them).
    #[arg(long, env = "ETCD_LOG_FORMAT", default_value = "text", value_parser = ["text", "console", "json"])]
    pub log_format: String,
    /// Log level: debug, info, warn, error.
    #[arg(long, env = "ETCD_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// How often watchers that asked for progress notifications hear the current revision:
    /// `--watch-progress-notify-interval` (`--experimental-…` in etcd 3.5). In effect once
    /// [`Flags::resolve`] has run; the flags are in [`RenamedFlags`].
    #[arg(skip = Duration::from_secs(600))]
    pub experimental_watch_progress_notify_interval: Duration,
    /// Before serving clients, compare this member's HashKV with every reachable peer's at this
    /// member's revision and refuse to start on a mismatch: the `InitialCorruptCheck` gate
    /// (`--experimental-initial-corrupt-check` in etcd 3.5; etcd's default is off, actcd's is on:
    /// corruption is to be found, not served). In effect once [`Flags::resolve`] has run; the flags
    /// are in [`RenamedFlags`].
    #[arg(skip = true)]
    pub experimental_initial_corrupt_check: bool,
    /// How often the leader compares its HashKV with every peer's and raises the CORRUPT alarm on a
    /// mismatch: `--corrupt-check-time` (`--experimental-…` in etcd 3.5; 0 turns it off, etcd's
    /// default). On by default here, every 5 minutes: each check scans the whole key table once on
    /// every member and twice on the leader, in the reader that also serves watchers' history, so
    /// its cost grows with the store; every 5 minutes keeps that to a small share of a member's
    /// time even for stores that take seconds to scan, while bounding how long a diverged member
    /// goes unnoticed. The compact hash check (every minute, no scan) covers each compaction
    /// sooner. In effect once [`Flags::resolve`] has run; the flags are in [`RenamedFlags`].
    #[arg(skip = Duration::from_secs(300))]
    pub experimental_corrupt_check_time: Duration,
    /// After each compaction every member remembers its HashKV at the compacted revision; the
    /// leader compares the peers' with its own every `--compact-hash-check-time` and raises CORRUPT
    /// on a mismatch: the `CompactHashCheck` gate (`--experimental-compact-hash-check- enabled` in
    /// etcd 3.5, off there by default; on here). In effect once [`Flags::resolve`] has run; the
    /// flags are in [`RenamedFlags`].
    #[arg(skip = true)]
    pub experimental_compact_hash_check_enabled: bool,
    /// How often the leader runs the compact hash check: `--compact-hash-check-time`
    /// (`--experimental-…` in etcd 3.5; etcd's default, 1m). In effect once [`Flags::resolve`] has
    /// run; the flags are in [`RenamedFlags`].
    #[arg(skip = Duration::from_secs(60))]
    pub experimental_compact_hash_check_time: Duration,
    /// Extra URLs serving `/metrics` and `/health` (plain HTTP/1.1); the client URLs serve
    /// them too.
    #[arg(long, env = "ETCD_LISTEN_METRICS_URLS")]
    pub listen_metrics_urls: Option<String>,
    /// Client and peer TLS (`tls_config.rs`).
    #[command(flatten)]
    pub tls: crate::tls_config::TlsFlags,
    /// Token type handed out by Authenticate: `simple`, or
    /// `jwt,pub-key=PATH,priv-key=PATH,sign-method=RS256,ttl=5m`.
    #[arg(long, env = "ETCD_AUTH_TOKEN", default_value = "simple")]
    pub auth_token: String,
    /// Seconds a simple token lives without being used.
    #[arg(long, env = "ETCD_AUTH_TOKEN_TTL", default_value_t = 300)]
    pub auth_token_ttl: u64,
    /// bcrypt cost of stored passwords (4–31).
    #[arg(long, env = "ETCD_BCRYPT_COST", default_value_t = 10)]
    pub bcrypt_cost: u32,
    /// How often a background pass over the whole key table may start, checking every
    /// record's checksum so damage nobody reads is found and raises CORRUPT (Go duration; 0
    /// turns it off). actcd's own flag. A pass reads at most 1,000 records or 4 MiB a second,
    /// each step in a read transaction of its own, so it never holds the writer back.
    #[arg(
        long,
        env = "ETCD_EXPERIMENTAL_SCRUB_INTERVAL",
        default_value = "1h",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub experimental_scrub_interval: Duration,
    /// Path to etcd's YAML configuration file (`embed.Config`'s keys). When given, the other
    /// command-line flags and the `ETCD_*` variables are ignored, as etcd ignores them.
    #[arg(long, env = "ETCD_CONFIG_FILE")]
    pub config_file: Option<PathBuf>,
    /// Path to a dedicated WAL directory (default: `<data-dir>/member/wal`).
    #[arg(long, env = "ETCD_WAL_DIR", default_value = "", value_parser = any_path)]
    pub wal_dir: PathBuf,
    /// Whether to fast-forward the initial election ticks on boot for a faster election.
    #[arg(
        long,
        env = "ETCD_INITIAL_ELECTION_TICK_ADVANCE",
        default_value = "true",
        action = GO_BOOL,
    )]
    pub initial_election_tick_advance: bool,
    /// Maximum number of snapshot files to retain (0 is unlimited).
    #[arg(long, env = "ETCD_MAX_SNAPSHOTS", default_value_t = 5)]
    pub max_snapshots: u32,
    /// Maximum number of WAL files to retain (0 is unlimited).
    #[arg(long, env = "ETCD_MAX_WALS", default_value_t = 5)]
    pub max_wals: u32,
    /// bbolt's freelist type (`map` or `array`); actcd's backend is LMDB.
    #[arg(long, env = "ETCD_BACKEND_BBOLT_FREELIST_TYPE", default_value = "map")]
    pub backend_bbolt_freelist_type: String,
    /// Maximum time before the backend commits its transaction (Go duration; empty or 0:
    /// the default).
    #[arg(
        long,
        env = "ETCD_BACKEND_BATCH_INTERVAL",
        default_value = "0",
        value_parser = parse_go_duration_or_empty
    )]
    pub backend_batch_interval: Duration,
    /// Maximum operations before the backend commits its transaction (0: the default).
    #[arg(
        long,
        env = "ETCD_BACKEND_BATCH_LIMIT",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub backend_batch_limit: i64,
    /// Maximum concurrent gRPC streams per client connection (etcd 3.4's and later 3.5's flag).
    #[arg(long, env = "ETCD_MAX_CONCURRENT_STREAMS", default_value_t = u32::MAX)]
    pub max_concurrent_streams: u32,
    /// Minimum interval a client should wait before pinging the server (Go duration).
    #[arg(
        long,
        env = "ETCD_GRPC_KEEPALIVE_MIN_TIME",
        default_value = "5s",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub grpc_keepalive_min_time: Duration,
    /// How often the server pings a client connection to check it is alive (0 disables).
    #[arg(
        long,
        env = "ETCD_GRPC_KEEPALIVE_INTERVAL",
        default_value = "2h",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub grpc_keepalive_interval: Duration,
    /// How long to wait for a ping's answer before closing the connection (0 disables).
    #[arg(
        long,
        env = "ETCD_GRPC_KEEPALIVE_TIMEOUT",
        default_value = "20s",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub grpc_keepalive_timeout: Duration,
    /// Set SO_REUSEPORT on listeners, allowing rebinding of a port already in use.
    #[arg(long, env = "ETCD_SOCKET_REUSE_PORT", default_value = "false", action = GO_BOOL)]
    pub socket_reuse_port: bool,
    /// Set SO_REUSEADDR on listeners, allowing binding to an address in TIME_WAIT state.
    #[arg(long, env = "ETCD_SOCKET_REUSE_ADDRESS", default_value = "false", action = GO_BOOL)]
    pub socket_reuse_address: bool,
    /// Discovery URL used to bootstrap the cluster (not supported by actcd).
    #[arg(long, env = "ETCD_DISCOVERY", default_value = "")]
    pub discovery: String,
    /// What to do when the discovery service fails: `exit` or `proxy`.
    #[arg(long, env = "ETCD_DISCOVERY_FALLBACK", default_value = "proxy", value_parser = one_of(&["exit", "proxy"]))]
    pub discovery_fallback: String,
    /// HTTP proxy for traffic to the discovery service.
    #[arg(long, env = "ETCD_DISCOVERY_PROXY", default_value = "")]
    pub discovery_proxy: String,
    /// DNS SRV domain used to bootstrap the cluster (not supported by actcd).
    #[arg(long, env = "ETCD_DISCOVERY_SRV", default_value = "")]
    pub discovery_srv: String,
    /// Suffix to the DNS SRV name queried when bootstrapping.
    #[arg(long, env = "ETCD_DISCOVERY_SRV_NAME", default_value = "")]
    pub discovery_srv_name: String,
    /// Reject reconfiguration requests that would cause quorum loss.
    #[arg(long, env = "ETCD_STRICT_RECONFIG_CHECK", default_value = "true", action = GO_BOOL)]
    pub strict_reconfig_check: bool,
    /// etcd 3.6's `--max-learners`: how many learners the membership may hold. A member add
    /// past it is refused (`etcdserver: too many learner members in cluster`), and a member
    /// whose cluster already holds more does not start.
    #[arg(long, env = "ETCD_MAX_LEARNERS", default_value_t = 1)]
    pub max_learners: usize,
    /// Run Raft's pre-vote phase before an election.
    #[arg(long, env = "ETCD_PRE_VOTE", default_value = "true", action = GO_BOOL)]
    pub pre_vote: bool,
    /// Phase of the v2store deprecation: not-yet, write-only, write-only-drop-data, gone.
    #[arg(
        long,
        env = "ETCD_V2_DEPRECATION",
        default_value = "not-yet",
        value_parser = one_of(&["not-yet", "write-only", "write-only-drop-data", "gone"])
    )]
    pub v2_deprecation: String,
    /// Comma-separated origins allowed for CORS on the client HTTP port (empty or `*`: all).
    #[arg(long, env = "ETCD_CORS", default_value = "*", value_parser = parse_cors)]
    pub cors: String,
    /// Host names accepted in plain-HTTP client requests (empty or `*`: all).
    #[arg(long, env = "ETCD_HOST_WHITELIST", default_value = "*")]
    pub host_whitelist: String,
    /// Serve Go's runtime profiling data under `/debug/pprof/` (not in actcd).
    #[arg(long, env = "ETCD_ENABLE_PPROF", default_value = "false", action = GO_BOOL)]
    pub enable_pprof: bool,
    /// Detail of exported metrics: `basic`, or `extensive` for server-side gRPC histograms.
    #[arg(long, env = "ETCD_METRICS", default_value = "basic")]
    pub metrics: String,
    /// The logger: only `zap` (structured logs), as in etcd 3.5.
    #[arg(long, env = "ETCD_LOGGER", default_value = "zap")]
    pub logger: String,
    /// Where logs go: `default` or `stderr`, `stdout`, or file paths (comma-separated).
    #[arg(long, env = "ETCD_LOG_OUTPUTS", default_value = "default")]
    pub log_outputs: String,
    /// Rotate a single log-outputs file (not in actcd).
    #[arg(long, env = "ETCD_ENABLE_LOG_ROTATION", default_value = "false", action = GO_BOOL)]
    pub enable_log_rotation: bool,
    /// The log rotation settings as JSON.
    #[arg(
        long,
        env = "ETCD_LOG_ROTATION_CONFIG_JSON",
        default_value = DEFAULT_LOG_ROTATION_CONFIG
    )]
    pub log_rotation_config_json: String,
    /// `--enable-distributed-tracing` (`--experimental-…` in etcd 3.5; not in actcd). In effect
    /// once [`Flags::resolve`] has run; the flags are in [`RenamedFlags`].
    #[arg(skip = false)]
    pub experimental_enable_distributed_tracing: bool,
    /// `--distributed-tracing-address` (`--experimental-…` in etcd 3.5). In effect once
    /// [`Flags::resolve`] has run; the flags are in [`RenamedFlags`].
    #[arg(skip = String::from("localhost:4317"))]
    pub experimental_distributed_tracing_address: String,
    /// `--distributed-tracing-service-name` (`--experimental-…` in etcd 3.5). In effect once
    /// [`Flags::resolve`] has run; the flags are in [`RenamedFlags`].
    #[arg(skip = String::from("etcd"))]
    pub experimental_distributed_tracing_service_name: String,
    /// `--distributed-tracing-instance-id` (`--experimental-…` in etcd 3.5). In effect once
    /// [`Flags::resolve`] has run; the flags are in [`RenamedFlags`].
    #[arg(skip = String::new())]
    pub experimental_distributed_tracing_instance_id: String,
    /// v2 proxy mode: `off`, `readonly` or `on` (actcd has no proxy mode).
    #[arg(long, env = "ETCD_PROXY", default_value = "off", value_parser = one_of(&["off", "readonly", "on"]))]
    pub proxy: String,
    /// Time (ms) an endpoint is held in a failed state (v2 proxy).
    #[arg(long, env = "ETCD_PROXY_FAILURE_WAIT", default_value_t = 5000)]
    pub proxy_failure_wait: u64,
    /// Time (ms) of the endpoints refresh interval (v2 proxy).
    #[arg(long, env = "ETCD_PROXY_REFRESH_INTERVAL", default_value_t = 30000)]
    pub proxy_refresh_interval: u64,
    /// Time (ms) for a dial to time out (v2 proxy).
    #[arg(long, env = "ETCD_PROXY_DIAL_TIMEOUT", default_value_t = 1000)]
    pub proxy_dial_timeout: u64,
    /// Time (ms) for a write to time out (v2 proxy).
    #[arg(long, env = "ETCD_PROXY_WRITE_TIMEOUT", default_value_t = 5000)]
    pub proxy_write_timeout: u64,
    /// Time (ms) for a read to time out (v2 proxy).
    #[arg(long, env = "ETCD_PROXY_READ_TIMEOUT", default_value_t = 0)]
    pub proxy_read_timeout: u64,
    /// Serve v2 requests through the v3 backend under this prefix (not in actcd).
    #[arg(long, env = "ETCD_EXPERIMENTAL_ENABLE_V2V3", default_value = "")]
    pub experimental_enable_v2v3: String,
    /// Maximum revisions deleted in each compaction batch: `--compaction-batch-limit`
    /// (`--experimental-…` in etcd 3.5). In effect once [`Flags::resolve`] has run; the flags are
    /// in [`RenamedFlags`].
    #[arg(skip = 1000)]
    pub experimental_compaction_batch_limit: i64,
    /// Warn when applying a request takes longer than this: `--warning-apply-duration`
    /// (`--experimental-…` in etcd 3.5). In effect once [`Flags::resolve`] has run; the flags are
    /// in [`RenamedFlags`].
    #[arg(skip = Duration::from_millis(100))]
    pub experimental_warning_apply_duration: Duration,
    /// Defragment at start-up when that frees at least this many megabytes (0: never):
    /// `--bootstrap-defrag-threshold-megabytes` (`--experimental-…` in etcd 3.5). In effect once
    /// [`Flags::resolve`] has run; the flags are in [`RenamedFlags`].
    #[arg(skip = 0u64)]
    pub experimental_bootstrap_defrag_threshold_megabytes: u64,
    /// mlock etcd's memory: `--memory-mlock` (`--experimental-…` in etcd 3.5; not in actcd). In
    /// effect once [`Flags::resolve`] has run; the flags are in [`RenamedFlags`].
    #[arg(skip = false)]
    pub experimental_memory_mlock: bool,
    /// How often the downgrade status is checked: `--downgrade-check-time` (`--experimental-…`
    /// in etcd 3.5). In effect once [`Flags::resolve`] has run; the flags are in [`RenamedFlags`].
    #[arg(skip = Duration::from_secs(5))]
    pub experimental_downgrade_check_time: Duration,
    /// Serve the gRPC gateway (JSON over HTTP, `/v3/...`) on the client URLs.
    #[arg(long, env = "ETCD_ENABLE_GRPC_GATEWAY", default_value = "true", action = GO_BOOL)]
    pub enable_grpc_gateway: bool,
    /// Force a new one-member cluster from this member's data (unsafe).
    #[arg(long, env = "ETCD_FORCE_NEW_CLUSTER", default_value = "false", action = GO_BOOL)]
    pub force_new_cluster: bool,
    /// Disable fsync: unsafe, a crash loses acknowledged writes.
    #[arg(long, env = "ETCD_UNSAFE_NO_FSYNC", default_value = "false", action = GO_BOOL)]
    pub unsafe_no_fsync: bool,
    // etcd 3.6's server feature gates (`config_gates.rs`): each occurrence is one `Set`.
    #[arg(
        long,
        env = "ETCD_FEATURE_GATES",
        action = clap::ArgAction::Append,
        value_parser = gates::parse_flag,
        help = gates::flag_help()
    )]
    pub feature_gates: Vec<String>,
    /// The `--experimental-*` flags etcd 3.6 renamed or turned into feature gates, under both
    /// names.
    #[command(flatten)]
    pub renamed: RenamedFlags,
}

/// The `--experimental-*` flags etcd 3.6 renamed (`experimentalFlagMigrationMap`) or turned
/// into feature gates (`ExperimentalFlagToFeatureMap`), under both names: the old ones are
/// deprecated in 3.6 (with its warning) and gone in 3.7, and actcd, serving 3.5's users too,
/// keeps them. `None` when not given (a flag or its `ETCD_*` variable), so [`Flags::resolve`]
/// can apply etcd's rules: a renamed flag given under both names is refused, the old name
/// wins over the new one's default; an old boolean given beside `--feature-gates` naming its
/// gate is refused, else it sets the gate.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RenamedFlags {
    /// How often the leader runs the compact hash check (Go duration) (default: 1m).
    #[arg(
        long,
        env = "ETCD_COMPACT_HASH_CHECK_TIME",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub compact_hash_check_time: Option<Duration>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--compact-hash-check-time`.
    #[arg(
        long,
        env = "ETCD_EXPERIMENTAL_COMPACT_HASH_CHECK_TIME",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub experimental_compact_hash_check_time: Option<Duration>,
    /// How often the leader compares every member's HashKV (Go duration; 0: never) (default: 5m).
    #[arg(
        long,
        env = "ETCD_CORRUPT_CHECK_TIME",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub corrupt_check_time: Option<Duration>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--corrupt-check-time`.
    #[arg(
        long,
        env = "ETCD_EXPERIMENTAL_CORRUPT_CHECK_TIME",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub experimental_corrupt_check_time: Option<Duration>,
    /// Maximum revisions deleted in each compaction batch (default: 1000).
    #[arg(
        long,
        env = "ETCD_COMPACTION_BATCH_LIMIT",
        allow_negative_numbers = true
    )]
    pub compaction_batch_limit: Option<i64>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--compaction-batch-limit`.
    #[arg(
        long,
        env = "ETCD_EXPERIMENTAL_COMPACTION_BATCH_LIMIT",
        allow_negative_numbers = true
    )]
    pub experimental_compaction_batch_limit: Option<i64>,
    /// How often watchers that asked for progress notifications hear the current revision (Go
    /// duration) (default: 10m).
    #[arg(
        long,
        env = "ETCD_WATCH_PROGRESS_NOTIFY_INTERVAL",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub watch_progress_notify_interval: Option<Duration>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--watch-progress-notify-interval`.
    #[arg(
        long,
        env = "ETCD_EXPERIMENTAL_WATCH_PROGRESS_NOTIFY_INTERVAL",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub experimental_watch_progress_notify_interval: Option<Duration>,
    /// Warn when applying a request takes longer than this (Go duration) (default: 100ms).
    #[arg(
        long,
        env = "ETCD_WARNING_APPLY_DURATION",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub warning_apply_duration: Option<Duration>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--warning-apply-duration`.
    #[arg(
        long,
        env = "ETCD_EXPERIMENTAL_WARNING_APPLY_DURATION",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub experimental_warning_apply_duration: Option<Duration>,
    /// Defragment at start-up when that frees at least this many megabytes (0: never) (default: 0).
    #[arg(long, env = "ETCD_BOOTSTRAP_DEFRAG_THRESHOLD_MEGABYTES")]
    pub bootstrap_defrag_threshold_megabytes: Option<u64>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--bootstrap-defrag-threshold-megabytes`.
    #[arg(long, env = "ETCD_EXPERIMENTAL_BOOTSTRAP_DEFRAG_THRESHOLD_MEGABYTES")]
    pub experimental_bootstrap_defrag_threshold_megabytes: Option<u64>,
    /// mlock the member's memory (not in actcd) (default: false).
    #[arg(long, env = "ETCD_MEMORY_MLOCK", action = GO_BOOL)]
    pub memory_mlock: Option<bool>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--memory-mlock`.
    #[arg(long, env = "ETCD_EXPERIMENTAL_MEMORY_MLOCK", action = GO_BOOL)]
    pub experimental_memory_mlock: Option<bool>,
    /// Entries kept in memory after a log compaction, for slow followers (default: 5000).
    #[arg(long, env = "ETCD_SNAPSHOT_CATCHUP_ENTRIES")]
    pub snapshot_catchup_entries: Option<u64>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--snapshot-catchup-entries`.
    #[arg(long, env = "ETCD_EXPERIMENTAL_SNAPSHOT_CATCHUP_ENTRIES")]
    pub experimental_snapshot_catchup_entries: Option<u64>,
    /// Sleep between compaction batches (not in actcd: batches yield to writes instead) (default:
    /// 0).
    #[arg(
        long,
        env = "ETCD_COMPACTION_SLEEP_INTERVAL",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub compaction_sleep_interval: Option<Duration>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--compaction-sleep-interval`.
    #[arg(
        long,
        env = "ETCD_EXPERIMENTAL_COMPACTION_SLEEP_INTERVAL",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub experimental_compaction_sleep_interval: Option<Duration>,
    /// How often the downgrade status is checked (not in actcd) (default: 5s).
    #[arg(
        long,
        env = "ETCD_DOWNGRADE_CHECK_TIME",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub downgrade_check_time: Option<Duration>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--downgrade-check-time`.
    #[arg(
        long,
        env = "ETCD_EXPERIMENTAL_DOWNGRADE_CHECK_TIME",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub experimental_downgrade_check_time: Option<Duration>,
    /// OpenTelemetry distributed tracing (not in actcd) (default: false).
    #[arg(long, env = "ETCD_ENABLE_DISTRIBUTED_TRACING", action = GO_BOOL)]
    pub enable_distributed_tracing: Option<bool>,
    /// Skip the SAN check of peers' client certificates (default: false); its old name,
    /// `--experimental-peer-skip-client-san-verification`, is with the TLS flags.
    #[arg(long, env = "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION", action = GO_BOOL)]
    pub peer_skip_client_san_verification: Option<bool>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--enable-distributed-tracing`.
    #[arg(long, env = "ETCD_EXPERIMENTAL_ENABLE_DISTRIBUTED_TRACING", action = GO_BOOL)]
    pub experimental_enable_distributed_tracing: Option<bool>,
    /// Distributed tracing collector address (default: localhost:4317).
    #[arg(long, env = "ETCD_DISTRIBUTED_TRACING_ADDRESS")]
    pub distributed_tracing_address: Option<String>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--distributed-tracing-address`.
    #[arg(long, env = "ETCD_EXPERIMENTAL_DISTRIBUTED_TRACING_ADDRESS")]
    pub experimental_distributed_tracing_address: Option<String>,
    /// Distributed tracing service name (default: etcd).
    #[arg(long, env = "ETCD_DISTRIBUTED_TRACING_SERVICE_NAME")]
    pub distributed_tracing_service_name: Option<String>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--distributed-tracing-service-name`.
    #[arg(long, env = "ETCD_EXPERIMENTAL_DISTRIBUTED_TRACING_SERVICE_NAME")]
    pub experimental_distributed_tracing_service_name: Option<String>,
    /// Distributed tracing instance id (default: "").
    #[arg(long, env = "ETCD_DISTRIBUTED_TRACING_INSTANCE_ID")]
    pub distributed_tracing_instance_id: Option<String>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--distributed-tracing-instance-id`.
    #[arg(long, env = "ETCD_EXPERIMENTAL_DISTRIBUTED_TRACING_INSTANCE_ID")]
    pub experimental_distributed_tracing_instance_id: Option<String>,
    /// Distributed tracing samples per million spans (default: 0).
    #[arg(
        long,
        env = "ETCD_DISTRIBUTED_TRACING_SAMPLING_RATE",
        allow_negative_numbers = true
    )]
    pub distributed_tracing_sampling_rate: Option<i64>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--distributed-tracing-sampling-rate`.
    #[arg(
        long,
        env = "ETCD_EXPERIMENTAL_DISTRIBUTED_TRACING_SAMPLING_RATE",
        allow_negative_numbers = true
    )]
    pub experimental_distributed_tracing_sampling_rate: Option<i64>,
    /// Warn when a unary request takes longer than this (not in actcd) (default: 0).
    #[arg(
        long,
        env = "ETCD_WARNING_UNARY_REQUEST_DURATION",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub warning_unary_request_duration: Option<Duration>,
    /// Deprecated in etcd 3.6, removed in 3.7: `--warning-unary-request-duration`.
    #[arg(
        long,
        env = "ETCD_EXPERIMENTAL_WARNING_UNARY_REQUEST_DURATION",
        value_parser = actcd_types::duration::parse_go_duration
    )]
    pub experimental_warning_unary_request_duration: Option<Duration>,
    /// Before serving clients, compare this member's hash with its peers'. Deprecated in etcd 3.6,
    /// removed in 3.7: `--feature-gates=InitialCorruptCheck=…`.
    #[arg(long, env = "ETCD_EXPERIMENTAL_INITIAL_CORRUPT_CHECK", action = GO_BOOL)]
    pub experimental_initial_corrupt_check: Option<bool>,
    /// The leader compares the peers' hashes at each compacted revision. Deprecated in etcd 3.6,
    /// removed in 3.7: `--feature-gates=CompactHashCheck=…`.
    #[arg(long, env = "ETCD_EXPERIMENTAL_COMPACT_HASH_CHECK_ENABLED", action = GO_BOOL)]
    pub experimental_compact_hash_check_enabled: Option<bool>,
    /// Write transactions share a buffer in their read-only checks (a bbolt detail). Deprecated in
    /// etcd 3.6, removed in 3.7: `--feature-gates=TxnModeWriteWithSharedBuffer=…`.
    #[arg(long, env = "ETCD_EXPERIMENTAL_TXN_MODE_WRITE_WITH_SHARED_BUFFER", action = GO_BOOL)]
    pub experimental_txn_mode_write_with_shared_buffer: Option<bool>,
    /// The leader checkpoints leases' remaining TTLs (always on in actcd). Deprecated in etcd 3.6,
    /// removed in 3.7: `--feature-gates=LeaseCheckpoint=…`.
    #[arg(long, env = "ETCD_EXPERIMENTAL_ENABLE_LEASE_CHECKPOINT", action = GO_BOOL)]
    pub experimental_enable_lease_checkpoint: Option<bool>,
    /// Checkpointed remaining TTLs are persisted (always on in actcd). Deprecated in etcd 3.6,
    /// removed in 3.7: `--feature-gates=LeaseCheckpointPersist=…`.
    #[arg(long, env = "ETCD_EXPERIMENTAL_ENABLE_LEASE_CHECKPOINT_PERSIST", action = GO_BOOL)]
    pub experimental_enable_lease_checkpoint_persist: Option<bool>,
    /// The gRPC health service reports NOT_SERVING during a defragmentation (not in actcd).
    /// Deprecated in etcd 3.6, removed in 3.7: `--feature-gates=StopGRPCServiceOnDefrag=…`.
    #[arg(long, env = "ETCD_EXPERIMENTAL_STOP_GRPC_SERVICE_ON_DEFRAG", action = GO_BOOL)]
    pub experimental_stop_grpc_service_on_defrag: Option<bool>,
}

/// etcd's default `--log-rotation-config-json`.
pub const DEFAULT_LOG_ROTATION_CONFIG: &str =
    r#"{"maxsize": 100, "maxage": 0, "maxbackups": 0, "localtime": false, "compress": false}"#;

/// A comma list's items, trimmed, without empty ones.
pub fn comma_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .map(str::to_string)
        .collect()
}

/// `--cors`: `*` or origins that are URLs, as etcd's flag checks them.
fn parse_cors(s: &str) -> Result<String, String> {
    for origin in comma_list(s) {
        if origin == "*" {
            continue;
        }
        let (scheme, rest) = origin.split_once("://").unwrap_or(("", &origin));
        if !matches!(scheme, "http" | "https" | "unix" | "unixs") {
            return Err(format!(
                "URL scheme must be http, https, unix, or unixs: {origin}"
            ));
        }
        let authority = rest.split('/').next().unwrap_or_default();
        if !authority
            .rsplit_once(':')
            .is_some_and(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
        {
            return Err(format!(
                "URL address does not have the form \"host:port\": {origin}"
            ));
        }
    }
    Ok(s.to_string())
}

/// A path that may be empty, as etcd's path flags default to (empty: not given).
fn any_path(s: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(s))
}

/// A Go duration, or the empty string etcd's unset duration flags show (zero).
fn parse_go_duration_or_empty(s: &str) -> Result<Duration, String> {
    if s.is_empty() {
        return Ok(Duration::ZERO);
    }
    actcd_types::duration::parse_go_duration(s)
}

/// A value from a fixed set, refused in the words of etcd's own choice flags.
fn one_of(choices: &'static [&'static str]) -> impl Fn(&str) -> Result<String, String> + Clone {
    move |s: &str| {
        if choices.contains(&s) {
            Ok(s.to_string())
        } else {
            Err(format!(
                "invalid value {s:?}, want one of {}",
                choices.join(", ")
            ))
        }
    }
}

/// Parses a boolean as Go's flags do (`strconv.ParseBool`), so `--client-cert-auth=false` and
/// `ETCD_CLIENT_CERT_AUTH=1` mean what they mean to etcd.
pub fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("invalid boolean {s:?}")),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("couldn't find local name {0:?} in the initial cluster configuration")]
    LocalNameMissing(String),
    #[error("invalid value {value:?} for {flag}: {reason}")]
    Invalid {
        flag: &'static str,
        value: String,
        reason: String,
    },
    /// etcd's own message.
    #[error(
        "TLS key/cert (--cert-file, --key-file) must be provided for client url {0} with HTTPS scheme"
    )]
    TlsKeyCertMissing(String),
    /// etcd's own message.
    #[error(
        "TLS key/cert (--peer-cert-file, --peer-key-file) must be provided for peer url {0} with HTTPS scheme"
    )]
    PeerTlsKeyCertMissing(String),
    #[error("{0}")]
    TlsFlags(&'static str),
    /// etcd's message, without its resolver's detail.
    #[error(
        "--initial-cluster has {member} but missing from --initial-advertise-peer-urls={advertised}"
    )]
    AdvertiseMismatch { member: String, advertised: String },
    #[error("{flag}={value:?} is not supported by actcd: {reason}")]
    Unsupported {
        flag: &'static str,
        value: String,
        reason: String,
    },
    /// etcd's messages for `--logger`.
    #[error("{0}")]
    Logger(String),
    /// etcd's message for flags that exclude each other.
    #[error("{0}")]
    Exclusive(&'static str),
    /// etcd's messages for the renamed flags and the feature gates ([`Flags::resolve`]).
    #[error("{0}")]
    Flags(String),
    #[error("{flag} {path}: {reason}")]
    TlsFile {
        flag: &'static str,
        path: String,
        reason: String,
    },
}

/// A flag actcd accepts for compatibility but that changes nothing here.
#[derive(Debug, Clone, Copy)]
pub struct IgnoredFlag {
    pub flag: &'static str,
    /// Why it means nothing for actcd.
    pub reason: &'static str,
    /// Whether `flags` gives it a value other than etcd's default (only then is it logged).
    pub set: fn(&Flags) -> bool,
}

/// Every flag accepted and ignored, with the reason logged when it is set. docs/operations.md
/// section and the flags test read this table.
pub const IGNORED_FLAGS: &[IgnoredFlag] = &[
    IgnoredFlag {
        flag: "--backend-bbolt-freelist-type",
        reason: "the backend is LMDB, which has no bbolt freelist",
        set: |f| f.backend_bbolt_freelist_type != "map",
    },
    IgnoredFlag {
        flag: "--experimental-txn-mode-write-with-shared-buffer",
        reason: "a bbolt read-buffer detail; LMDB write transactions read their own writes",
        set: |f| f.renamed.experimental_txn_mode_write_with_shared_buffer == Some(false),
    },
    IgnoredFlag {
        flag: "--max-snapshots",
        reason: "no snapshot files are kept: the backend is the snapshot and is streamed to followers",
        set: |f| f.max_snapshots != 5,
    },
    IgnoredFlag {
        flag: "--max-wals",
        reason: "WAL segments are deleted as soon as a snapshot mark covers them",
        set: |f| f.max_wals != 5,
    },
    IgnoredFlag {
        flag: "--grpc-keepalive-min-time",
        reason: "the HTTP/2 server does not police how often clients ping",
        set: |f| f.grpc_keepalive_min_time != Duration::from_secs(5),
    },
    IgnoredFlag {
        flag: "--enable-pprof",
        reason: "there is no Go runtime to profile",
        set: |f| f.enable_pprof,
    },
    IgnoredFlag {
        flag: "--experimental-enable-distributed-tracing",
        reason: "there is no OpenTelemetry exporter",
        set: |f| f.experimental_enable_distributed_tracing,
    },
    IgnoredFlag {
        flag: "--experimental-distributed-tracing-address",
        reason: "there is no OpenTelemetry exporter",
        set: |f| f.experimental_distributed_tracing_address != "localhost:4317",
    },
    IgnoredFlag {
        flag: "--experimental-distributed-tracing-service-name",
        reason: "there is no OpenTelemetry exporter",
        set: |f| f.experimental_distributed_tracing_service_name != "etcd",
    },
    IgnoredFlag {
        flag: "--experimental-distributed-tracing-instance-id",
        reason: "there is no OpenTelemetry exporter",
        set: |f| !f.experimental_distributed_tracing_instance_id.is_empty(),
    },
    IgnoredFlag {
        flag: "--enable-log-rotation",
        reason: "log files are not rotated by the member; rotate them with copytruncate",
        set: |f| f.enable_log_rotation,
    },
    IgnoredFlag {
        flag: "--log-rotation-config-json",
        reason: "log files are not rotated by the member; rotate them with copytruncate",
        set: |f| f.log_rotation_config_json != DEFAULT_LOG_ROTATION_CONFIG,
    },
    IgnoredFlag {
        flag: "--experimental-enable-v2v3",
        reason: "v2 requests are served by the v2 store (--enable-v2), never through the v3 keys",
        set: |f| !f.experimental_enable_v2v3.is_empty(),
    },
    IgnoredFlag {
        flag: "--v2-deprecation",
        reason: "the v2 store is separate from the v3 data and is only served with --enable-v2 (which 'gone' refuses)",
        set: |f| f.v2_deprecation != "not-yet",
    },
    IgnoredFlag {
        flag: "--experimental-enable-lease-checkpoint",
        reason: "remaining-TTL checkpoints are always on",
        set: |f| f.renamed.experimental_enable_lease_checkpoint.is_some(),
    },
    IgnoredFlag {
        flag: "--experimental-enable-lease-checkpoint-persist",
        reason: "checkpointed remaining TTLs are always persisted",
        set: |f| {
            f.renamed
                .experimental_enable_lease_checkpoint_persist
                .is_some()
        },
    },
    IgnoredFlag {
        flag: "--experimental-stop-grpc-service-on-defrag",
        reason: "there is no gRPC health service (grpc.health.v1) to report NOT_SERVING during a defragmentation",
        set: |f| f.renamed.experimental_stop_grpc_service_on_defrag.is_some(),
    },
    IgnoredFlag {
        flag: "--experimental-compaction-sleep-interval",
        reason: "compaction batches are not spaced by a sleep",
        set: |f| {
            let r = &f.renamed;
            r.experimental_compaction_sleep_interval
                .or(r.compaction_sleep_interval)
                .is_some_and(|d| !d.is_zero())
        },
    },
    IgnoredFlag {
        flag: "--experimental-distributed-tracing-sampling-rate",
        reason: "there is no OpenTelemetry exporter",
        set: |f| {
            let r = &f.renamed;
            r.experimental_distributed_tracing_sampling_rate
                .or(r.distributed_tracing_sampling_rate)
                .is_some_and(|n| n != 0)
        },
    },
    IgnoredFlag {
        flag: "--experimental-warning-unary-request-duration",
        reason: "slow unary requests are not logged (slow applies are: --warning-apply-duration)",
        set: |f| {
            let r = &f.renamed;
            r.experimental_warning_unary_request_duration
                .or(r.warning_unary_request_duration)
                .is_some_and(|d| !d.is_zero())
        },
    },
    IgnoredFlag {
        flag: "--experimental-memory-mlock",
        reason: "memory is not locked",
        set: |f| f.experimental_memory_mlock,
    },
    IgnoredFlag {
        flag: "--experimental-downgrade-check-time",
        reason: "cluster downgrades are not supported",
        set: |f| f.experimental_downgrade_check_time != Duration::from_secs(5),
    },
    IgnoredFlag {
        flag: "--discovery-fallback",
        reason: "discovery is not supported (and --discovery is refused)",
        set: |f| f.discovery_fallback != "proxy",
    },
    IgnoredFlag {
        flag: "--discovery-proxy",
        reason: "discovery is not supported (and --discovery is refused)",
        set: |f| !f.discovery_proxy.is_empty(),
    },
    IgnoredFlag {
        flag: "--discovery-srv-name",
        reason: "discovery is not supported (and --discovery-srv is refused)",
        set: |f| !f.discovery_srv_name.is_empty(),
    },
    IgnoredFlag {
        flag: "--proxy-failure-wait",
        reason: "there is no v2 proxy mode (and --proxy other than off is refused)",
        set: |f| f.proxy_failure_wait != 5000,
    },
    IgnoredFlag {
        flag: "--proxy-refresh-interval",
        reason: "there is no v2 proxy mode (and --proxy other than off is refused)",
        set: |f| f.proxy_refresh_interval != 30000,
    },
    IgnoredFlag {
        flag: "--proxy-dial-timeout",
        reason: "there is no v2 proxy mode (and --proxy other than off is refused)",
        set: |f| f.proxy_dial_timeout != 1000,
    },
    IgnoredFlag {
        flag: "--proxy-write-timeout",
        reason: "there is no v2 proxy mode (and --proxy other than off is refused)",
        set: |f| f.proxy_write_timeout != 5000,
    },
    IgnoredFlag {
        flag: "--proxy-read-timeout",
        reason: "there is no v2 proxy mode (and --proxy other than off is refused)",
        set: |f| f.proxy_read_timeout != 0,
    },
];

/// The flags etcd 3.6 renamed, `(old, new)` (its `experimentalFlagMigrationMap`, and the
/// unary-request warning it handles apart).
pub const RENAMED_FLAGS: &[(&str, &str)] = &[
    (
        "--experimental-compact-hash-check-time",
        "--compact-hash-check-time",
    ),
    ("--experimental-corrupt-check-time", "--corrupt-check-time"),
    (
        "--experimental-compaction-batch-limit",
        "--compaction-batch-limit",
    ),
    (
        "--experimental-watch-progress-notify-interval",
        "--watch-progress-notify-interval",
    ),
    (
        "--experimental-warning-apply-duration",
        "--warning-apply-duration",
    ),
    (
        "--experimental-bootstrap-defrag-threshold-megabytes",
        "--bootstrap-defrag-threshold-megabytes",
    ),
    ("--experimental-memory-mlock", "--memory-mlock"),
    (
        "--experimental-snapshot-catchup-entries",
        "--snapshot-catchup-entries",
    ),
    (
        "--experimental-compaction-sleep-interval",
        "--compaction-sleep-interval",
    ),
    (
        "--experimental-downgrade-check-time",
        "--downgrade-check-time",
    ),
    (
        "--experimental-peer-skip-client-san-verification",
        "--peer-skip-client-san-verification",
    ),
    (
        "--experimental-enable-distributed-tracing",
        "--enable-distributed-tracing",
    ),
    (
        "--experimental-distributed-tracing-address",
        "--distributed-tracing-address",
    ),
    (
        "--experimental-distributed-tracing-service-name",
        "--distributed-tracing-service-name",
    ),
    (
        "--experimental-distributed-tracing-instance-id",
        "--distributed-tracing-instance-id",
    ),
    (
        "--experimental-distributed-tracing-sampling-rate",
        "--distributed-tracing-sampling-rate",
    ),
    (
        "--experimental-warning-unary-request-duration",
        "--warning-unary-request-duration",
    ),
];

impl Flags {
    /// The ignored flags this command line sets (judged on the values [`Self::resolve`] puts
    /// in effect), each to be logged once at start-up.
    pub fn ignored_in_use(&self) -> Vec<&'static IgnoredFlag> {
        let (f, _) = self.resolved();
        IGNORED_FLAGS.iter().filter(|i| (i.set)(&f)).collect()
    }

    /// Logs, once each at start-up: etcd 3.6's warning for every deprecated flag given, the
    /// feature gates `--feature-gates` set (etcd's `feature gates: …` line) and those of them
    /// that change nothing here, and every ignored flag that is set.
    pub fn warn_ignored(&self) {
        let (f, resolution) = self.resolved();
        if let Some(r) = &resolution {
            for msg in &r.deprecated {
                tracing::warn!("{msg}");
            }
            if !self.feature_gates.is_empty() {
                tracing::info!("feature gates: {}", r.gates_given.set_string());
            }
            for (gate, value, reason) in r.gates_given.without_effect() {
                tracing::warn!(
                    gate,
                    value,
                    reason,
                    "feature gate without effect in actcd: {reason}"
                );
            }
        }
        for i in IGNORED_FLAGS.iter().filter(|i| (i.set)(&f)) {
            tracing::warn!(
                flag = self.name_given(i),
                reason = i.reason,
                "flag ignored: {}",
                i.reason
            );
        }
    }
}

/// etcd 3.6's warning for each deprecated `--experimental-*` flag given (`deprecatedFlags` in
/// `server/etcdmain/config.go`), word for word.
pub const DEPRECATED_FLAGS: &[(&str, &str)] = &[
    (
        "experimental-compact-hash-check-enabled",
        "--experimental-compact-hash-check-enabled is deprecated in 3.6 and will be decommissioned in 3.7. Use '--feature-gates=CompactHashCheck=true' instead.",
    ),
    (
        "experimental-compact-hash-check-time",
        "--experimental-compact-hash-check-time is deprecated in 3.6 and will be decommissioned in 3.7. Use '--compact-hash-check-time' instead.",
    ),
    (
        "experimental-txn-mode-write-with-shared-buffer",
        "--experimental-txn-mode-write-with-shared-buffer is deprecated in v3.6 and will be decommissioned in v3.7. Use '--feature-gates=TxnModeWriteWithSharedBuffer=true' instead.",
    ),
    (
        "experimental-corrupt-check-time",
        "--experimental-corrupt-check-time is deprecated in v3.6 and will be decommissioned in v3.7. Use '--corrupt-check-time' instead.",
    ),
    (
        "experimental-compaction-batch-limit",
        "--experimental-compaction-batch-limit is deprecated in v3.6 and will be decommissioned in v3.7. Use '--compaction-batch-limit' instead.",
    ),
    (
        "experimental-watch-progress-notify-interval",
        "--experimental-watch-progress-notify-interval is deprecated in v3.6 and will be decommissioned in v3.7. Use '--watch-progress-notify-interval' instead.",
    ),
    (
        "experimental-warning-apply-duration",
        "--experimental-warning-apply-duration is deprecated in v3.6 and will be decommissioned in v3.7. Use '--warning-apply-duration' instead.",
    ),
    (
        "experimental-bootstrap-defrag-threshold-megabytes",
        "--experimental-bootstrap-defrag-threshold-megabytes is deprecated in v3.6 and will be decommissioned in v3.7. Use '--bootstrap-defrag-threshold-megabytes' instead.",
    ),
    (
        "experimental-memory-mlock",
        "--experimental-memory-mlock is deprecated in v3.6 and will be decommissioned in v3.7. Use '--memory-mlock' instead.",
    ),
    (
        "experimental-snapshot-catchup-entries",
        "--experimental-snapshot-catchup-entries is deprecated in v3.6 and will be decommissioned in v3.7. Use '--snapshot-catchup-entries' instead.",
    ),
    (
        "experimental-compaction-sleep-interval",
        "--experimental-compaction-sleep-interval is deprecated in v3.6 and will be decommissioned in v3.7. Use 'compaction-sleep-interval' instead.",
    ),
    (
        "experimental-downgrade-check-time",
        "--experimental-downgrade-check-time is deprecated in v3.6 and will be decommissioned in v3.7. Use '--downgrade-check-time' instead.",
    ),
    (
        "experimental-enable-distributed-tracing",
        "--experimental-enable-distributed-tracing is deprecated in 3.6 and will be decommissioned in 3.7. Use --enable-distributed-tracing instead.",
    ),
    (
        "experimental-distributed-tracing-address",
        "--experimental-distributed-tracing-address is deprecated in 3.6 and will be decommissioned in 3.7. Use --distributed-tracing-address instead.",
    ),
    (
        "experimental-distributed-tracing-service-name",
        "--experimental-distributed-tracing-service-name is deprecated in 3.6 and will be decommissioned in 3.7. Use --distributed-tracing-service-name instead.",
    ),
    (
        "experimental-distributed-tracing-instance-id",
        "--experimental-distributed-tracing-instance-id is deprecated in 3.6 and will be decommissioned in 3.7. Use --distributed-tracing-instance-id instead.",
    ),
    (
        "experimental-distributed-tracing-sampling-rate",
        "--experimental-distributed-tracing-sampling-rate is deprecated in 3.6 and will be decommissioned in 3.7. Use --distributed-tracing-sampling-rate instead.",
    ),
];

/// etcd's warning when `--experimental-warning-unary-request-duration` is the one in effect.
pub const DEPRECATED_UNARY_DURATION: &str = "--experimental-warning-unary-request-duration is deprecated, and will be decommissioned in v3.7. Use --warning-unary-request-duration instead.";

/// What [`Flags::resolve`] found besides the values it put in effect.
#[derive(Debug, Clone, Default)]
pub struct Resolution {
    /// The gates in effect: `--feature-gates`, then the deprecated booleans that name one.
    pub gates: gates::FeatureGates,
    /// The gates `--feature-gates` itself set (what its start-up notes speak of).
    pub gates_given: gates::FeatureGates,
    /// etcd's deprecation warnings, one per deprecated flag given, in [`DEPRECATED_FLAGS`]'s
    /// order.
    pub deprecated: Vec<&'static str>,
}

/// One renamed flag: the old name's value wins when given, the new name's else, then the
/// default; both given is etcd's error (`Config.Validate`).
fn renamed<T: Clone>(
    old: (&str, &Option<T>),
    new: (&str, &Option<T>),
    default: T,
) -> Result<T, ConfigError> {
    match (old.1, new.1) {
        (Some(_), Some(_)) => Err(ConfigError::Flags(format!(
            "cannot set --{} and --{} at the same time, please use --{} only",
            old.0, new.0, new.0
        ))),
        (Some(v), None) => Ok(v.clone()),
        (None, v) => Ok(v.clone().unwrap_or(default)),
    }
}

impl RenamedFlags {
    /// The deprecated booleans given, with the gate each stands for (etcd's
    /// `ExperimentalFlagToFeatureMap`).
    fn gate_flags(&self) -> [(&'static str, &'static str, Option<bool>); 6] {
        [
            (
                "experimental-stop-grpc-service-on-defrag",
                gates::STOP_GRPC_SERVICE_ON_DEFRAG,
                self.experimental_stop_grpc_service_on_defrag,
            ),
            (
                "experimental-initial-corrupt-check",
                gates::INITIAL_CORRUPT_CHECK,
                self.experimental_initial_corrupt_check,
            ),
            (
                "experimental-compact-hash-check-enabled",
                gates::COMPACT_HASH_CHECK,
                self.experimental_compact_hash_check_enabled,
            ),
            (
                "experimental-txn-mode-write-with-shared-buffer",
                gates::TXN_MODE_WRITE_WITH_SHARED_BUFFER,
                self.experimental_txn_mode_write_with_shared_buffer,
            ),
            (
                "experimental-enable-lease-checkpoint",
                gates::LEASE_CHECKPOINT,
                self.experimental_enable_lease_checkpoint,
            ),
            (
                "experimental-enable-lease-checkpoint-persist",
                gates::LEASE_CHECKPOINT_PERSIST,
                self.experimental_enable_lease_checkpoint_persist,
            ),
        ]
    }

    /// Whether the deprecated flag `old` (its name without dashes) was given.
    fn old_given(&self, old: &str) -> bool {
        let r = self;
        match old {
            "experimental-compact-hash-check-time" => {
                r.experimental_compact_hash_check_time.is_some()
            }
            "experimental-corrupt-check-time" => r.experimental_corrupt_check_time.is_some(),
            "experimental-compaction-batch-limit" => {
                r.experimental_compaction_batch_limit.is_some()
            }
            "experimental-watch-progress-notify-interval" => {
                r.experimental_watch_progress_notify_interval.is_some()
            }
            "experimental-warning-apply-duration" => {
                r.experimental_warning_apply_duration.is_some()
            }
            "experimental-bootstrap-defrag-threshold-megabytes" => r
                .experimental_bootstrap_defrag_threshold_megabytes
                .is_some(),
            "experimental-memory-mlock" => r.experimental_memory_mlock.is_some(),
            "experimental-snapshot-catchup-entries" => {
                r.experimental_snapshot_catchup_entries.is_some()
            }
            "experimental-compaction-sleep-interval" => {
                r.experimental_compaction_sleep_interval.is_some()
            }
            "experimental-downgrade-check-time" => r.experimental_downgrade_check_time.is_some(),
            "experimental-enable-distributed-tracing" => {
                r.experimental_enable_distributed_tracing.is_some()
            }
            "experimental-distributed-tracing-address" => {
                r.experimental_distributed_tracing_address.is_some()
            }
            "experimental-distributed-tracing-service-name" => {
                r.experimental_distributed_tracing_service_name.is_some()
            }
            "experimental-distributed-tracing-instance-id" => {
                r.experimental_distributed_tracing_instance_id.is_some()
            }
            "experimental-distributed-tracing-sampling-rate" => {
                r.experimental_distributed_tracing_sampling_rate.is_some()
            }
            "experimental-warning-unary-request-duration" => {
                r.experimental_warning_unary_request_duration.is_some()
            }
            other => self
                .gate_flags()
                .iter()
                .any(|(name, _, v)| *name == other && v.is_some()),
        }
    }
}

impl Flags {
    /// Puts etcd 3.6's rules for the renamed flags and the feature gates into effect, as
    /// etcd's `config.parse` and `Config.Validate` apply them, in their order:
    /// 1. `--feature-gates`, each occurrence one `Set`;
    /// 2. a deprecated boolean given beside `--feature-gates` that set its gate is refused
    ///    (`cannot specify both flags: …`); given alone, it sets the gate;
    /// 3. a renamed flag given under both names is refused (`cannot set --old and --new at the
    ///    same time, …`); the old name's value wins over the new name's default;
    /// 4. `LeaseCheckpointPersist` on needs `LeaseCheckpoint` on;
    /// 5. `--experimental-warning-unary-request-duration` and `--warning-unary-request-duration`
    ///    both non-zero are refused.
    ///
    /// The values in effect land in the fields the rest of the daemon reads (the old names').
    /// Running it again gives the same result. etcd finds the gate named beside a deprecated
    /// boolean by a substring search of `--feature-gates`'s value (so `LeaseCheckpointPersist`
    /// there also counts as `LeaseCheckpoint`); actcd compares whole gate names.
    pub fn resolve(&mut self) -> Result<Resolution, ConfigError> {
        let mut fg = gates::FeatureGates::new();
        for value in &self.feature_gates {
            fg.set(value).map_err(|e| ConfigError::Invalid {
                flag: "--feature-gates",
                value: value.clone(),
                reason: e,
            })?;
        }
        let given = fg.clone();
        let mut from_flags = Vec::new();
        for (flag, gate, value) in self.renamed.gate_flags() {
            let Some(v) = value else { continue };
            if given.is_set(gate) {
                let now = given.enabled(gate);
                return Err(ConfigError::Flags(format!(
                    "cannot specify both flags: --{flag}={v} and --feature-gates={gate}={now} at the same time, please just use --feature-gates={gate}={now}"
                )));
            }
            from_flags.push((gate.to_string(), v));
        }
        fg.set_pairs(&from_flags);
        let r = self.renamed.clone();
        self.experimental_compact_hash_check_time = renamed(
            (
                "experimental-compact-hash-check-time",
                &r.experimental_compact_hash_check_time,
            ),
            ("compact-hash-check-time", &r.compact_hash_check_time),
            Duration::from_secs(60),
        )?;
        self.experimental_corrupt_check_time = renamed(
            (
                "experimental-corrupt-check-time",
                &r.experimental_corrupt_check_time,
            ),
            ("corrupt-check-time", &r.corrupt_check_time),
            Duration::from_secs(300),
        )?;
        self.experimental_compaction_batch_limit = renamed(
            (
                "experimental-compaction-batch-limit",
                &r.experimental_compaction_batch_limit,
            ),
            ("compaction-batch-limit", &r.compaction_batch_limit),
            1000,
        )?;
        self.experimental_watch_progress_notify_interval = renamed(
            (
                "experimental-watch-progress-notify-interval",
                &r.experimental_watch_progress_notify_interval,
            ),
            (
                "watch-progress-notify-interval",
                &r.watch_progress_notify_interval,
            ),
            Duration::from_secs(600),
        )?;
        self.experimental_warning_apply_duration = renamed(
            (
                "experimental-warning-apply-duration",
                &r.experimental_warning_apply_duration,
            ),
            ("warning-apply-duration", &r.warning_apply_duration),
            Duration::from_millis(100),
        )?;
        self.experimental_bootstrap_defrag_threshold_megabytes = renamed(
            (
                "experimental-bootstrap-defrag-threshold-megabytes",
                &r.experimental_bootstrap_defrag_threshold_megabytes,
            ),
            (
                "bootstrap-defrag-threshold-megabytes",
                &r.bootstrap_defrag_threshold_megabytes,
            ),
            0,
        )?;
        self.experimental_memory_mlock = renamed(
            ("experimental-memory-mlock", &r.experimental_memory_mlock),
            ("memory-mlock", &r.memory_mlock),
            false,
        )?;
        self.snapshot_catchup_entries = renamed(
            (
                "experimental-snapshot-catchup-entries",
                &r.experimental_snapshot_catchup_entries,
            ),
            ("snapshot-catchup-entries", &r.snapshot_catchup_entries),
            5000,
        )?;
        renamed(
            (
                "experimental-compaction-sleep-interval",
                &r.experimental_compaction_sleep_interval,
            ),
            ("compaction-sleep-interval", &r.compaction_sleep_interval),
            Duration::ZERO,
        )?;
        self.experimental_downgrade_check_time = renamed(
            (
                "experimental-downgrade-check-time",
                &r.experimental_downgrade_check_time,
            ),
            ("downgrade-check-time", &r.downgrade_check_time),
            Duration::from_secs(5),
        )?;
        // The TLS flag keeps its old field (a plain boolean): given as true it counts as given.
        let old_skip = self.tls.experimental_peer_skip_client_san_verification;
        self.tls.experimental_peer_skip_client_san_verification = renamed(
            (
                "experimental-peer-skip-client-san-verification",
                &old_skip.then_some(true),
            ),
            (
                "peer-skip-client-san-verification",
                &r.peer_skip_client_san_verification,
            ),
            false,
        )?;
        self.experimental_enable_distributed_tracing = renamed(
            (
                "experimental-enable-distributed-tracing",
                &r.experimental_enable_distributed_tracing,
            ),
            ("enable-distributed-tracing", &r.enable_distributed_tracing),
            false,
        )?;
        self.experimental_distributed_tracing_address = renamed(
            (
                "experimental-distributed-tracing-address",
                &r.experimental_distributed_tracing_address,
            ),
            (
                "distributed-tracing-address",
                &r.distributed_tracing_address,
            ),
            "localhost:4317".to_string(),
        )?;
        self.experimental_distributed_tracing_service_name = renamed(
            (
                "experimental-distributed-tracing-service-name",
                &r.experimental_distributed_tracing_service_name,
            ),
            (
                "distributed-tracing-service-name",
                &r.distributed_tracing_service_name,
            ),
            "etcd".to_string(),
        )?;
        self.experimental_distributed_tracing_instance_id = renamed(
            (
                "experimental-distributed-tracing-instance-id",
                &r.experimental_distributed_tracing_instance_id,
            ),
            (
                "distributed-tracing-instance-id",
                &r.distributed_tracing_instance_id,
            ),
            String::new(),
        )?;
        renamed(
            (
                "experimental-distributed-tracing-sampling-rate",
                &r.experimental_distributed_tracing_sampling_rate,
            ),
            (
                "distributed-tracing-sampling-rate",
                &r.distributed_tracing_sampling_rate,
            ),
            0,
        )?;
        if fg.enabled(gates::LEASE_CHECKPOINT_PERSIST) && !fg.enabled(gates::LEASE_CHECKPOINT) {
            return Err(ConfigError::Flags(
                "enabling feature gate LeaseCheckpointPersist requires enabling feature gate LeaseCheckpoint".into(),
            ));
        }
        let mut deprecated: Vec<&'static str> = DEPRECATED_FLAGS
            .iter()
            .filter(|(flag, _)| r.old_given(flag))
            .map(|(_, msg)| *msg)
            .collect();
        let nonzero = |d: &Option<Duration>| d.is_some_and(|d| !d.is_zero());
        match (
            nonzero(&r.experimental_warning_unary_request_duration),
            nonzero(&r.warning_unary_request_duration),
        ) {
            (true, true) => {
                return Err(ConfigError::Flags(
                    "both --experimental-warning-unary-request-duration and --warning-unary-request-duration flags are set. Use only --warning-unary-request-duration".into(),
                ));
            }
            (true, false) => deprecated.push(DEPRECATED_UNARY_DURATION),
            _ => {}
        }
        self.experimental_initial_corrupt_check = fg.enabled(gates::INITIAL_CORRUPT_CHECK);
        self.experimental_compact_hash_check_enabled = fg.enabled(gates::COMPACT_HASH_CHECK);
        Ok(Resolution {
            gates: fg,
            gates_given: given,
            deprecated,
        })
    }

    /// The flags with [`Self::resolve`]'s values in effect (unchanged where it fails: the
    /// error stops the start later, in `Config::try_from`).
    fn resolved(&self) -> (Self, Option<Resolution>) {
        let mut f = self.clone();
        let r = f.resolve().ok();
        (f, r)
    }

    /// The name an ignored flag was given under: its new name when that one was used.
    fn name_given(&self, i: &IgnoredFlag) -> &'static str {
        match RENAMED_FLAGS.iter().find(|(old, _)| *old == i.flag) {
            Some((old, new)) if !self.renamed.old_given(old.trim_start_matches('-')) => new,
            _ => i.flag,
        }
    }
}

/// Flags that would make etcd something other than a member bootstrapped from
/// `--initial-cluster`: starting as a plain member instead could form a cluster of its own
/// next to the real one, so start-up stops with the reason.
fn refuse_unsupported(flags: &Flags) -> Result<(), ConfigError> {
    let refuse = |flag: &'static str, value: &str, reason: &str| {
        Err(ConfigError::Unsupported {
            flag,
            value: value.to_string(),
            reason: reason.to_string(),
        })
    };
    if !flags.discovery.is_empty() {
        return refuse(
            "--discovery",
            &flags.discovery,
            "discovery bootstrapping is not supported; list the members with --initial-cluster",
        );
    }
    if !flags.discovery_srv.is_empty() {
        return refuse(
            "--discovery-srv",
            &flags.discovery_srv,
            "DNS SRV discovery is not supported; list the members with --initial-cluster",
        );
    }
    if flags.proxy != "off" {
        return refuse(
            "--proxy",
            &flags.proxy,
            "the v2 proxy mode is not supported; this process would start as a member instead",
        );
    }
    if flags.enable_v2 && flags.v2_deprecation == "gone" {
        return Err(ConfigError::Exclusive(
            "--enable-v2 and --v2-deprecation=gone are mutually exclusive",
        ));
    }
    match flags.logger.as_str() {
        "zap" => {}
        "capnslog" => {
            return Err(ConfigError::Logger(
                "--logger=capnslog is removed in v3.5".into(),
            ));
        }
        other => {
            return Err(ConfigError::Logger(format!(
                "unknown logger option {other:?}"
            )));
        }
    }
    Ok(())
}

/// One member of the initial cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialMember {
    pub id: u64,
    pub name: String,
    pub peer_urls: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub flags: Flags,
    pub data_dir: PathBuf,
    pub member_id: u64,
    pub cluster_id: u64,
    pub members: Vec<InitialMember>,
    pub client_urls: Vec<String>,
    /// `--listen-client-http-urls`.
    pub client_http_urls: Vec<String>,
    pub advertise_client_urls: Vec<String>,
    /// What `https://` client URLs serve; `Some` whenever there is one.
    pub client_tls: Option<ClientTls>,
    /// Peer TLS; `Some` whenever a peer URL is `https://`.
    pub peer_tls: Option<actcd_transport::PeerTls>,
    /// The address peer connections leave from: with the `SetMemberLocalAddr` gate, the first
    /// eligible IP of `--initial-advertise-peer-urls` (`local_addr.rs`).
    pub peer_local_addr: Option<std::net::IpAddr>,
    /// Auto-compaction, if on.
    pub auto_compaction: Option<actcd_compactor::Mode>,
    /// The server feature gates in effect (`--feature-gates` and the deprecated booleans).
    pub gates: gates::FeatureGates,
}

impl Config {
    pub fn election_ticks(&self) -> usize {
        (self.flags.election_timeout / self.flags.heartbeat_interval.max(1)).max(2) as usize
    }

    /// Where the WAL lives: `--wal-dir`, or `<data-dir>/member/wal` as in etcd.
    pub fn wal_dir(&self) -> PathBuf {
        if self.flags.wal_dir.as_os_str().is_empty() {
            self.data_dir.join("member").join("wal")
        } else {
            self.flags.wal_dir.clone()
        }
    }

    /// `--backend-batch-interval`: how often applied writes are committed to the backend
    /// (0: etcd's 100 ms).
    pub fn backend_batch_interval(&self) -> Duration {
        match self.flags.backend_batch_interval {
            d if d.is_zero() => Duration::from_millis(100),
            d => d,
        }
    }

    /// `--backend-batch-limit`: applied requests that may wait for a backend commit (0 or
    /// less: etcd's 10,000).
    pub fn backend_batch_limit(&self) -> usize {
        match self.flags.backend_batch_limit {
            n if n <= 0 => 10_000,
            n => usize::try_from(n).unwrap_or(usize::MAX),
        }
    }

    pub fn tick(&self) -> Duration {
        Duration::from_millis(self.flags.heartbeat_interval.max(1))
    }

    /// etcd's `minLeaseTTL`: 1.5 election timeouts, in whole seconds rounded up. Grants below it
    /// are raised to it, so a lease outlives a leader election.
    pub fn min_lease_ttl(&self) -> i64 {
        let election_ticks = self.election_ticks() as u64;
        let ms = (3 * election_ticks / 2) * self.flags.heartbeat_interval.max(1);
        ms.div_ceil(1000) as i64
    }

    /// The quota preflight enforces: `--quota-backend-bytes`, 0 meaning etcd's default of
    /// 2 GiB. A negative quota (etcd: none) and one past [`MAX_QUOTA_BYTES`] are that maximum:
    /// the backend's map could not hold more (see [`Config::backend_map_size`]).
    pub fn quota_bytes(&self) -> u64 {
        match self.flags.quota_backend_bytes {
            0 => actcd_preflight::DEFAULT_QUOTA_BYTES,
            q if q < 0 => MAX_QUOTA_BYTES,
            q => q.unsigned_abs().min(MAX_QUOTA_BYTES),
        }
    }

    /// The LMDB map: address space, not memory or disk (pages are mapped as the file grows and
    /// the page cache holds them, not the member). Twice the quota, because the quota counts
    /// live pages and the file also holds the pages freed since (reused, never returned), and
    /// at least the backend's default of 8 GiB.
    pub fn backend_map_size(&self) -> usize {
        let map = self
            .quota_bytes()
            .saturating_mul(2)
            .clamp(DEFAULT_MAP_BYTES, MAX_MAP_BYTES);
        usize::try_from(map).unwrap_or(usize::MAX)
    }

    /// etcd's `NewBackendQuota` log lines, said once at start: the quota taken, and etcd's
    /// warning past its recommended maximum of 8 GiB (a recommendation, not a limit: larger
    /// databases snapshot, defragment and restore more slowly).
    pub fn log_quota(&self) {
        let name = "v3-applier";
        let q = self.flags.quota_backend_bytes;
        if q < 0 {
            tracing::info!(
                "quota-name" = name,
                "quota-size-bytes" = q,
                "disabled backend quota"
            );
            return;
        }
        if q == 0 {
            let d = actcd_preflight::DEFAULT_QUOTA_BYTES;
            tracing::info!(
                "quota-name" = name,
                "quota-size-bytes" = d,
                "quota-size" = %crate::snapshot::humanize_bytes(d),
                "enabled backend quota with default value"
            );
            return;
        }
        let bytes = q.unsigned_abs();
        let size = crate::snapshot::humanize_bytes(bytes);
        if bytes > MAX_RECOMMENDED_QUOTA_BYTES {
            tracing::warn!(
                "quota-name" = name,
                "quota-size-bytes" = q,
                "quota-size" = %size,
                "quota-maximum-size-bytes" = MAX_RECOMMENDED_QUOTA_BYTES,
                "quota-maximum-size" = %crate::snapshot::humanize_bytes(MAX_RECOMMENDED_QUOTA_BYTES),
                "quota exceeds the maximum value"
            );
        }
        tracing::info!(
            "quota-name" = name,
            "quota-size-bytes" = q,
            "quota-size" = %size,
            "enabled backend quota"
        );
        if bytes > MAX_QUOTA_BYTES {
            tracing::warn!(
                "quota-size-bytes" = q,
                "enforced-quota-size-bytes" = MAX_QUOTA_BYTES,
                "map-size-bytes" = self.backend_map_size(),
                "quota exceeds what the backend's map can hold; enforcing the largest it can"
            );
        }
    }

    /// The token provider `--auth-token` describes (its key files are read now).
    pub fn token_provider(&self) -> Result<actcd_authz::TokenProvider, ConfigError> {
        actcd_authz::TokenProvider::parse(
            &self.flags.auth_token,
            Duration::from_secs(self.flags.auth_token_ttl),
        )
        .map_err(|reason| ConfigError::Invalid {
            flag: "--auth-token",
            value: self.flags.auth_token.clone(),
            reason,
        })
    }

    /// etcd's request timeout: 5 s plus two election timeouts.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(5000 + 2 * self.flags.election_timeout)
    }
}

/// A URL with `localhost` read as `127.0.0.1`, an IP address in its canonical spelling (etcd
/// 3.7's `normalizeHost`, #20365: `[0:0::1]` is `[::1]`, an IPv4-mapped address is the IPv4
/// one), and no trailing slash, for comparisons. (etcd also resolves host names; actcd does
/// not.)
fn normal_url(u: &str) -> String {
    let u = u
        .trim_end_matches('/')
        .replace("://localhost:", "://127.0.0.1:");
    let Some((scheme, rest)) = u.split_once("://") else {
        return u;
    };
    let (host_port, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    let (host, port) = match host_port.rsplit_once(':') {
        Some((h, p)) if h.ends_with(']') || !h.contains(':') => (h, Some(p)),
        _ => (host_port, None),
    };
    let Ok(ip) = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
    else {
        return u;
    };
    let ip = match ip {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4),
        v4 => v4,
    };
    let host = match ip {
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        std::net::IpAddr::V4(v4) => v4.to_string(),
    };
    match port {
        Some(p) => format!("{scheme}://{host}:{p}{path}"),
        None => format!("{scheme}://{host}{path}"),
    }
}

#[cfg(test)]
mod etcd_36_tests {
    use clap::Parser;

    use super::{Flags, same_urls};

    /// etcd 3.6's defaults and values where they moved: `--snapshot-count` 10,000 (#15408),
    /// `--max-learners` 1, `--log-format console`.
    #[test]
    fn flags_default_as_etcd_36s() {
        let f = Flags::parse_from(["actcd"]);
        assert_eq!((f.snapshot_count, f.max_learners), (10_000, 1));
        let f = Flags::parse_from(["actcd", "--log-format", "console", "--max-learners", "3"]);
        assert_eq!((f.log_format.as_str(), f.max_learners), ("console", 3));
    }

    fn urls(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    /// etcd compares `--initial-advertise-peer-urls` with `--initial-cluster` by address: two
    /// spellings of one IP address match (3.7 normalizes them, #20365; 3.5 resolved them).
    #[test]
    fn spellings_of_one_address_match() {
        for (a, b) in [
            ("http://[::1]:2380", "http://[0:0:0:0:0:0:0:1]:2380"),
            ("http://[::ffff:127.0.0.1]:2380", "http://127.0.0.1:2380"),
            ("http://localhost:2380/", "http://127.0.0.1:2380"),
            ("https://[FE80::1]:2380", "https://[fe80:0::1]:2380"),
            ("http://node-a:2380", "http://node-a:2380"),
        ] {
            assert!(same_urls(&urls(&[a]), &urls(&[b])), "{a} {b}");
        }
        for (a, b) in [
            ("http://[::1]:2380", "http://[::1]:2381"),
            ("http://[::1]:2380", "https://[::1]:2380"),
            ("http://[::2]:2380", "http://[::1]:2380"),
            ("http://node-a:2380", "http://node-b:2380"),
        ] {
            assert!(!same_urls(&urls(&[a]), &urls(&[b])), "{a} {b}");
        }
    }
}

/// Whether two URL lists name the same URLs (in any order).
pub fn same_urls(a: &[String], b: &[String]) -> bool {
    let mut a: Vec<_> = a.iter().map(|u| normal_url(u)).collect();
    let mut b: Vec<_> = b.iter().map(|u| normal_url(u)).collect();
    a.sort();
    b.sort();
    a == b
}

pub(crate) fn split_urls(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .collect()
}

/// etcd's member id: SHA-1 over the sorted peer URLs joined, then the cluster token; the first
/// 8 bytes, big-endian.
pub fn member_id(peer_urls: &[String], token: &str) -> u64 {
    let mut urls = peer_urls.to_vec();
    urls.sort();
    let mut h = sha1_smol::Sha1::new();
    h.update(urls.concat().as_bytes());
    h.update(token.as_bytes());
    let d = h.digest().bytes();
    u64::from_be_bytes(d[..8].try_into().unwrap_or_default())
}

/// etcd's cluster id: SHA-1 over the sorted member ids, 8 bytes big-endian each.
pub fn cluster_id(member_ids: &[u64]) -> u64 {
    let mut ids = member_ids.to_vec();
    ids.sort_unstable();
    let mut h = sha1_smol::Sha1::new();
    for id in ids {
        h.update(&id.to_be_bytes());
    }
    let d = h.digest().bytes();
    u64::from_be_bytes(d[..8].try_into().unwrap_or_default())
}

/// etcd's `MaxQuotaBytes`: a quota past it is taken, with a warning (`Config::log_quota`).
pub const MAX_RECOMMENDED_QUOTA_BYTES: u64 = 8 << 30;
/// The backend's default LMDB map, the smallest a member uses.
const DEFAULT_MAP_BYTES: u64 = actcd_backend::BackendOptions::DEFAULT_MAP_SIZE as u64;
/// The largest LMDB map a member reserves: 16 TiB, the largest file ext4 holds (4 KiB blocks),
/// and an eighth of x86-64's 128 TiB of user address space, so a defragmentation's second map
/// still fits beside the first.
pub const MAX_MAP_BYTES: u64 = 16 << 40;
/// The largest quota enforced: half the largest map (the map is twice the quota). etcd takes any
/// quota up to 2^63-1 bytes; past this one actcd enforces this one and says so.
pub const MAX_QUOTA_BYTES: u64 = MAX_MAP_BYTES / 2;

impl TryFrom<Flags> for Config {
    type Error = ConfigError;

    fn try_from(mut flags: Flags) -> Result<Self, ConfigError> {
        let resolution = flags.resolve()?;
        refuse_unsupported(&flags)?;
        let initial = flags
            .initial_cluster
            .clone()
            .unwrap_or_else(|| format!("{}={}", flags.name, flags.initial_advertise_peer_urls));
        let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for part in initial.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((name, url)) = part.split_once('=') else {
                return Err(ConfigError::Invalid {
                    flag: "--initial-cluster",
                    value: initial.clone(),
                    reason: "expected name=url pairs".into(),
                });
            };
            by_name
                .entry(name.to_string())
                .or_default()
                .push(url.to_string());
        }
        let members: Vec<InitialMember> = by_name
            .into_iter()
            .map(|(name, peer_urls)| InitialMember {
                id: member_id(&peer_urls, &flags.initial_cluster_token),
                name,
                peer_urls,
            })
            .collect();
        let me = members
            .iter()
            .find(|m| m.name == flags.name)
            .ok_or_else(|| ConfigError::LocalNameMissing(flags.name.clone()))?;
        // etcd's bootstrap check: the local member's URLs in --initial-cluster are the ones it
        // advertises.
        let advertised = split_urls(&flags.initial_advertise_peer_urls);
        if !same_urls(&me.peer_urls, &advertised) {
            return Err(ConfigError::AdvertiseMismatch {
                member: format!("{}={}", me.name, me.peer_urls.join(",")),
                advertised: advertised.join(","),
            });
        }
        let mut seen = std::collections::BTreeSet::new();
        for m in &members {
            for u in &m.peer_urls {
                if !seen.insert(normal_url(u)) {
                    return Err(ConfigError::Invalid {
                        flag: "--initial-cluster",
                        value: initial.clone(),
                        reason: format!("duplicate peer URL {u}"),
                    });
                }
            }
        }
        let member_id = me.id;
        let cluster_id = cluster_id(&members.iter().map(|m| m.id).collect::<Vec<_>>());
        if flags.heartbeat_interval == 0 || flags.election_timeout < 5 * flags.heartbeat_interval {
            return Err(ConfigError::Invalid {
                flag: "--election-timeout",
                value: flags.election_timeout.to_string(),
                reason: "should be at least 5 times --heartbeat-interval".into(),
            });
        }
        if flags.initial_cluster_state != "new" && flags.initial_cluster_state != "existing" {
            return Err(ConfigError::Invalid {
                flag: "--initial-cluster-state",
                value: flags.initial_cluster_state.clone(),
                reason: "must be \"new\" or \"existing\"".into(),
            });
        }
        let data_dir = flags
            .data_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("{}.actcd", flags.name)));
        let client_urls = split_urls(&flags.listen_client_urls);
        let client_http_urls = split_urls(&flags.listen_client_http_urls);
        let all_client_urls = [client_urls.as_slice(), &client_http_urls].concat();
        // An https:// metrics URL is served with the client key pair (etcd's
        // createMetricsListener takes ClientTLSInfo), so it needs the client TLS settings too.
        let secure_metrics_urls: Vec<String> = flags
            .listen_metrics_urls
            .iter()
            .flat_map(|u| split_urls(u))
            .filter(|u| u.starts_with("https://"))
            .collect();
        let client_tls = crate::tls_config::client_tls(
            &flags.tls,
            &[all_client_urls.as_slice(), &secure_metrics_urls].concat(),
            &data_dir,
        )?;
        let peer_urls: Vec<String> = split_urls(&flags.listen_peer_urls)
            .into_iter()
            .chain(members.iter().flat_map(|m| m.peer_urls.clone()))
            .collect();
        let peer_tls = crate::tls_config::peer_tls(
            &flags.tls,
            &peer_urls,
            &data_dir,
            &split_urls(&flags.listen_peer_urls),
        )?;
        let auto_compaction = actcd_compactor::Mode::parse(
            &flags.auto_compaction_mode,
            &flags.auto_compaction_retention,
        )
        .map_err(|reason| ConfigError::Invalid {
            flag: "--auto-compaction-retention",
            value: format!(
                "{} {}",
                flags.auto_compaction_mode, flags.auto_compaction_retention
            ),
            reason,
        })?;
        actcd_auth::check_cost(flags.bcrypt_cost).map_err(|reason| ConfigError::Invalid {
            flag: "--bcrypt-cost",
            value: flags.bcrypt_cost.to_string(),
            reason,
        })?;
        let peer_local_addr = resolution
            .gates
            .enabled(gates::SET_MEMBER_LOCAL_ADDR)
            .then(|| crate::local_addr::infer(&split_urls(&flags.initial_advertise_peer_urls)))
            .flatten();
        let cfg = Config {
            client_urls,
            client_http_urls,
            client_tls,
            peer_tls,
            peer_local_addr,
            auto_compaction,
            gates: resolution.gates,
            advertise_client_urls: split_urls(&flags.advertise_client_urls),
            data_dir,
            member_id,
            cluster_id,
            members,
            flags,
        };
        // Bad --auth-token settings (a missing key file, an unknown method) stop start-up.
        cfg.token_provider()?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn min_lease_ttl_is_one_and_a_half_election_timeouts_rounded_up() {
        let ttl = |args: &[&str]| {
            let mut argv = vec!["actcd"];
            argv.extend_from_slice(args);
            Config::try_from(Flags::parse_from(argv))
                .unwrap()
                .min_lease_ttl()
        };
        assert_eq!(ttl(&[]), 2, "etcd's default: 1.5 s → 2 s");
        assert_eq!(
            ttl(&["--heartbeat-interval", "10", "--election-timeout", "100"]),
            1
        );
        assert_eq!(ttl(&["--election-timeout", "5000"]), 8);
    }

    /// `--quota-backend-bytes` as etcd takes it (any int64; 0 the default, negative none) and
    /// the LMDB map each needs; out of an int64's range is refused, never wrapped.
    #[test]
    fn quotas_up_to_the_largest_map_are_taken() {
        const GIB: u64 = 1 << 30;
        let cfg = |q: &str| {
            Flags::try_parse_from(["actcd", &format!("--quota-backend-bytes={q}")])
                .map_err(|e| e.to_string())
                .map(|f| Config::try_from(f).unwrap())
        };
        for (q, quota, map) in [
            ("0", 2 * GIB, 8 * GIB),
            ("1048576", 1 << 20, 8 * GIB),
            ("8589934592", 8 * GIB, 16 * GIB),
            ("21474836480", 20 * GIB, 40 * GIB),
            ("107374182400", 100 * GIB, 200 * GIB),
            ("-1", MAX_QUOTA_BYTES, MAX_MAP_BYTES),
            ("9223372036854775807", MAX_QUOTA_BYTES, MAX_MAP_BYTES),
        ] {
            let c = cfg(q).unwrap();
            assert_eq!(c.quota_bytes(), quota, "{q}");
            assert_eq!(c.backend_map_size() as u64, map, "{q}");
        }
        let err = cfg("9223372036854775808").unwrap_err();
        assert!(err.contains("invalid value"), "{err}");
    }

    #[test]
    fn backend_batching_takes_etcds_flags_and_defaults() {
        let cfg = |args: &[&str]| {
            let mut argv = vec!["actcd"];
            argv.extend_from_slice(args);
            Config::try_from(Flags::parse_from(argv)).unwrap()
        };
        let d = cfg(&[]);
        assert_eq!(d.backend_batch_interval(), Duration::from_millis(100));
        assert_eq!(d.backend_batch_limit(), 10_000);
        let set = cfg(&["--backend-batch-interval=10ms", "--backend-batch-limit=50"]);
        assert_eq!(set.backend_batch_interval(), Duration::from_millis(10));
        assert_eq!(set.backend_batch_limit(), 50);
        let empty = cfg(&["--backend-batch-interval=", "--backend-batch-limit=-1"]);
        assert_eq!(empty.backend_batch_interval(), Duration::from_millis(100));
        assert_eq!(empty.backend_batch_limit(), 10_000);
    }

    #[test]
    fn cors_origins_are_urls_with_a_port_as_etcd_wants_them() {
        let cors = |v: &str| {
            Flags::try_parse_from(["actcd", &format!("--cors={v}")])
                .map(|f| f.cors)
                .map_err(|e| e.to_string())
        };
        assert_eq!(cors("*").unwrap(), "*");
        assert_eq!(cors("").unwrap(), "");
        assert!(cors("http://a.example:80,https://b.example:443").is_ok());
        assert!(
            cors("foo")
                .unwrap_err()
                .contains("URL scheme must be http, https, unix, or unixs: foo")
        );
        assert!(
            cors("http://a.example")
                .unwrap_err()
                .contains("URL address does not have the form \"host:port\": http://a.example")
        );
        assert_eq!(comma_list(" a, ,b "), ["a", "b"]);
    }

    /// Every flag has its `ETCD_*` variable, named as etcd's `flags.FlagToEnv` names it.
    #[test]
    fn every_flag_has_its_etcd_variable() {
        use clap::CommandFactory;
        let cmd = Flags::command();
        let mut checked = 0;
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            let want = format!("ETCD_{}", long.to_ascii_uppercase().replace('-', "_"));
            let got = arg.get_env().and_then(|e| e.to_str());
            assert_eq!(got, Some(want.as_str()), "--{long}");
            checked += 1;
        }
        assert!(checked >= 90, "{checked} flags");
    }

    #[test]
    fn ids_match_etcds_for_the_default_member() {
        // etcd with no flags reports member 8e9e05c52164694d in cluster cdf818194e3a8c32.
        let id = member_id(&["http://localhost:2380".to_string()], "etcd-cluster");
        assert_eq!(id, 0x8e9e05c52164694d);
        assert_eq!(cluster_id(&[id]), 0xcdf818194e3a8c32);
    }

    #[test]
    fn defaults_follow_etcd() {
        let cfg = Config::try_from(Flags::parse_from(["actcd"])).unwrap();
        assert_eq!(cfg.data_dir, PathBuf::from("default.actcd"));
        assert_eq!(cfg.client_urls, vec!["http://localhost:2379".to_string()]);
        assert_eq!(cfg.election_ticks(), 10);
        let bad = Flags::parse_from(["actcd", "--name", "x", "--initial-cluster", "y=http://a:1"]);
        assert!(matches!(
            Config::try_from(bad),
            Err(ConfigError::LocalNameMissing(_))
        ));
    }

    #[test]
    fn booleans_parse_like_gos_flags() {
        let cca = |args: &[&str]| {
            let mut argv = vec!["actcd"];
            argv.extend_from_slice(args);
            Flags::try_parse_from(argv).map(|f| f.tls.client_cert_auth)
        };
        assert_eq!(cca(&[]).ok(), Some(false));
        assert_eq!(cca(&["--client-cert-auth"]).ok(), Some(true));
        assert_eq!(cca(&["--client-cert-auth=true"]).ok(), Some(true));
        assert_eq!(cca(&["--client-cert-auth=false"]).ok(), Some(false));
        assert_eq!(cca(&["--client-cert-auth=1"]).ok(), Some(true));
        assert!(cca(&["--client-cert-auth=maybe"]).is_err());
        // Like Go's flags, a bare boolean doesn't take the next argument as its value.
        assert!(cca(&["--client-cert-auth", "false"]).is_err());
        // An `Option<bool>` one: unset, bare, and given.
        let mlock = |args: &[&str]| {
            let mut argv = vec!["actcd"];
            argv.extend_from_slice(args);
            Flags::try_parse_from(argv).map(|f| f.renamed.memory_mlock)
        };
        assert_eq!(mlock(&[]).ok(), Some(None));
        assert_eq!(mlock(&["--memory-mlock"]).ok(), Some(Some(true)));
        assert_eq!(mlock(&["--memory-mlock=F"]).ok(), Some(Some(false)));
        // A default-true one turned off.
        let pre_vote = |args: &[&str]| {
            let mut argv = vec!["actcd"];
            argv.extend_from_slice(args);
            Flags::try_parse_from(argv).map(|f| f.pre_vote)
        };
        assert_eq!(pre_vote(&[]).ok(), Some(true));
        assert_eq!(pre_vote(&["--pre-vote=false"]).ok(), Some(false));
    }

    /// Every boolean flag is a Go boolean ([`GO_BOOL`]): each takes `--flag` and
    /// `--flag=false`, refuses `--flag=maybe`, and none is left a plain switch.
    #[test]
    fn every_boolean_flag_takes_gos_syntax() {
        use clap::CommandFactory;
        let cmd = Flags::command();
        let bools: Vec<String> = cmd
            .get_arguments()
            .filter(|a| a.is_require_equals_set() && a.get_num_args() == Some((0..=1).into()))
            .filter_map(|a| a.get_long().map(str::to_string))
            .collect();
        assert!(bools.len() >= 27, "{bools:?}");
        for long in &bools {
            for ok in [
                format!("--{long}"),
                format!("--{long}=false"),
                format!("--{long}=T"),
            ] {
                assert!(
                    Flags::try_parse_from(["actcd", ok.as_str()]).is_ok(),
                    "{ok}"
                );
            }
            let bad = format!("--{long}=maybe");
            assert!(
                Flags::try_parse_from(["actcd", bad.as_str()]).is_err(),
                "{bad}"
            );
        }
        assert!(
            !cmd.get_arguments()
                .any(|a| matches!(a.get_action(), clap::ArgAction::SetTrue)),
            "a boolean flag without Go's syntax"
        );
    }

    #[test]
    fn corruption_checks_are_on_by_default_and_take_etcds_flags() {
        let flags = |args: &[&str]| {
            let mut argv = vec!["actcd"];
            argv.extend_from_slice(args);
            Flags::try_parse_from(argv).map(|mut f| {
                f.resolve().unwrap();
                f
            })
        };
        let d = flags(&[]).unwrap();
        assert!(d.experimental_initial_corrupt_check);
        assert_eq!(d.experimental_corrupt_check_time, Duration::from_secs(300));
        assert!(d.experimental_compact_hash_check_enabled);
        assert_eq!(
            d.experimental_compact_hash_check_time,
            Duration::from_secs(60)
        );
        let off = flags(&[
            "--experimental-initial-corrupt-check=false",
            "--experimental-corrupt-check-time=0",
            "--experimental-compact-hash-check-enabled=false",
            "--experimental-compact-hash-check-time",
            "250ms",
        ])
        .unwrap();
        assert!(!off.experimental_initial_corrupt_check);
        assert_eq!(off.experimental_corrupt_check_time, Duration::ZERO);
        assert!(!off.experimental_compact_hash_check_enabled);
        assert_eq!(
            off.experimental_compact_hash_check_time,
            Duration::from_millis(250)
        );
        let bare = flags(&[
            "--experimental-initial-corrupt-check",
            "--experimental-compact-hash-check-enabled=1",
            "--experimental-corrupt-check-time=1h30m",
        ])
        .unwrap();
        assert!(bare.experimental_initial_corrupt_check);
        assert!(bare.experimental_compact_hash_check_enabled);
        assert_eq!(
            bare.experimental_corrupt_check_time,
            Duration::from_secs(5400)
        );
        assert!(flags(&["--experimental-initial-corrupt-check=maybe"]).is_err());
        // The key table scrub: a pass an hour by default, off with 0.
        assert_eq!(d.experimental_scrub_interval, Duration::from_secs(3600));
        let scrub = flags(&["--experimental-scrub-interval=10m"]).unwrap();
        assert_eq!(scrub.experimental_scrub_interval, Duration::from_secs(600));
        let scrub = flags(&["--experimental-scrub-interval=0"]).unwrap();
        assert!(scrub.experimental_scrub_interval.is_zero());
        assert!(flags(&["--experimental-corrupt-check-time=5"]).is_err());
    }

    /// Flags parsed and resolved, or the message that stops the start.
    fn resolved(args: &[&str]) -> Result<(Flags, Resolution), String> {
        let mut argv = vec!["actcd"];
        argv.extend_from_slice(args);
        let mut f = Flags::try_parse_from(argv).map_err(|e| e.to_string())?;
        let r = f.resolve().map_err(|e| e.to_string())?;
        Ok((f, r))
    }

    /// etcd 3.6 renamed these flags; both names are taken, the old one with 3.6's warning, and
    /// giving both is etcd's error.
    #[test]
    fn renamed_flags_take_either_name_as_etcd_3_6_does() {
        let (f, r) = resolved(&[]).unwrap();
        assert_eq!(
            f.experimental_watch_progress_notify_interval,
            Duration::from_secs(600)
        );
        assert_eq!(f.experimental_corrupt_check_time, Duration::from_secs(300));
        assert_eq!(
            f.experimental_compact_hash_check_time,
            Duration::from_secs(60)
        );
        assert_eq!(f.experimental_compaction_batch_limit, 1000);
        assert_eq!(
            f.experimental_warning_apply_duration,
            Duration::from_millis(100)
        );
        assert_eq!(f.snapshot_catchup_entries, 5000);
        assert!(r.deprecated.is_empty());
        // The new names (kubeadm's for etcd 3.6: `--watch-progress-notify-interval=5s`).
        let (f, r) = resolved(&[
            "--watch-progress-notify-interval=5s",
            "--corrupt-check-time=1m",
            "--compact-hash-check-time=30s",
            "--compaction-batch-limit=10",
            "--warning-apply-duration=1s",
            "--bootstrap-defrag-threshold-megabytes=7",
            "--snapshot-catchup-entries=9",
            "--downgrade-check-time=9s",
            "--memory-mlock",
            "--peer-skip-client-san-verification",
            "--distributed-tracing-address=x:1",
        ])
        .unwrap();
        assert_eq!(
            f.experimental_watch_progress_notify_interval,
            Duration::from_secs(5)
        );
        assert_eq!(f.experimental_corrupt_check_time, Duration::from_secs(60));
        assert_eq!(
            f.experimental_compact_hash_check_time,
            Duration::from_secs(30)
        );
        assert_eq!(f.experimental_compaction_batch_limit, 10);
        assert_eq!(
            f.experimental_warning_apply_duration,
            Duration::from_secs(1)
        );
        assert_eq!(f.experimental_bootstrap_defrag_threshold_megabytes, 7);
        assert_eq!(f.snapshot_catchup_entries, 9);
        assert_eq!(f.experimental_downgrade_check_time, Duration::from_secs(9));
        assert!(f.experimental_memory_mlock);
        assert!(f.tls.experimental_peer_skip_client_san_verification);
        assert_eq!(f.experimental_distributed_tracing_address, "x:1");
        assert!(r.deprecated.is_empty(), "{:?}", r.deprecated);
        // The old names, with etcd 3.6's warnings.
        let (f, r) = resolved(&[
            "--experimental-watch-progress-notify-interval=7s",
            "--experimental-snapshot-catchup-entries=3",
            "--experimental-compaction-sleep-interval=1ms",
        ])
        .unwrap();
        assert_eq!(
            f.experimental_watch_progress_notify_interval,
            Duration::from_secs(7)
        );
        assert_eq!(f.snapshot_catchup_entries, 3);
        assert_eq!(
            r.deprecated,
            [
                "--experimental-watch-progress-notify-interval is deprecated in v3.6 and will be decommissioned in v3.7. Use '--watch-progress-notify-interval' instead.",
                "--experimental-snapshot-catchup-entries is deprecated in v3.6 and will be decommissioned in v3.7. Use '--snapshot-catchup-entries' instead.",
                "--experimental-compaction-sleep-interval is deprecated in v3.6 and will be decommissioned in v3.7. Use 'compaction-sleep-interval' instead.",
            ]
        );
        // Both names: etcd's error, even when the values agree.
        for (old, new) in RENAMED_FLAGS {
            let value = |name: &str| match name {
                n if n.contains("tracing-address")
                    || n.contains("service-name")
                    || n.contains("instance-id") =>
                {
                    format!("{n}=x")
                }
                n if n.contains("mlock")
                    || n.contains("enable-distributed")
                    || n.contains("san-verification") =>
                {
                    format!("{n}=true")
                }
                n if n.contains("time") || n.contains("interval") || n.contains("duration") => {
                    format!("{n}=1s")
                }
                n => format!("{n}=1"),
            };
            let err = resolved(&[&value(old), &value(new)]).unwrap_err();
            let want = if old.contains("unary") {
                "both --experimental-warning-unary-request-duration and --warning-unary-request-duration flags are set. Use only --warning-unary-request-duration".to_string()
            } else {
                format!("cannot set {old} and {new} at the same time, please use {new} only")
            };
            assert_eq!(err, want, "{old}");
        }
        // The unary-request warning: 0 under either name is "not set".
        let (_, r) = resolved(&[
            "--experimental-warning-unary-request-duration=1s",
            "--warning-unary-request-duration=0",
        ])
        .unwrap();
        assert_eq!(r.deprecated, [DEPRECATED_UNARY_DURATION]);
        // Their variables count as given, as etcd's do.
        let mut f = Flags::parse_from(["actcd"]);
        f.renamed.experimental_memory_mlock = Some(true);
        f.renamed.memory_mlock = Some(false);
        assert!(f.resolve().is_err());
    }

    #[test]
    fn feature_gates_parse_with_etcds_errors_and_defaults() {
        let (_, r) = resolved(&[]).unwrap();
        assert!(r.gates.enabled(gates::FAST_LEASE_KEEP_ALIVE));
        assert!(r.gates.enabled(gates::INITIAL_CORRUPT_CHECK));
        assert!(!r.gates.enabled(gates::STOP_GRPC_SERVICE_ON_DEFRAG));
        // kubeadm's flag for etcd 3.6+; repeated occurrences add up; the variable works too.
        let (f, r) = resolved(&[
            "--feature-gates=InitialCorruptCheck=true",
            "--feature-gates",
            "FastLeaseKeepAlive=false,CompactHashCheck=false",
        ])
        .unwrap();
        assert!(f.experimental_initial_corrupt_check);
        assert!(!f.experimental_compact_hash_check_enabled);
        assert!(!r.gates.enabled(gates::FAST_LEASE_KEEP_ALIVE));
        assert_eq!(
            r.gates_given.set_string(),
            "CompactHashCheck=false,FastLeaseKeepAlive=false,InitialCorruptCheck=true"
        );
        let cfg = Config::try_from(f).unwrap();
        assert!(!cfg.gates.enabled(gates::FAST_LEASE_KEEP_ALIVE));
        for (arg, want) in [
            (
                "--feature-gates=Nope=true",
                "unrecognized feature gate: Nope",
            ),
            (
                "--feature-gates=FastLeaseKeepAlive",
                "missing bool value for FastLeaseKeepAlive",
            ),
            (
                "--feature-gates=FastLeaseKeepAlive=yes",
                "invalid value of FastLeaseKeepAlive=yes, err: strconv.ParseBool: parsing \"yes\": invalid syntax",
            ),
        ] {
            let err = resolved(&[arg]).unwrap_err();
            assert!(err.contains(want), "{arg}: {err}");
        }
        // LeaseCheckpointPersist needs LeaseCheckpoint (etcd's Validate).
        let err = resolved(&["--feature-gates=LeaseCheckpoint=false,LeaseCheckpointPersist=true"])
            .unwrap_err();
        assert_eq!(
            err,
            "enabling feature gate LeaseCheckpointPersist requires enabling feature gate LeaseCheckpoint"
        );
        assert!(resolved(&["--feature-gates=LeaseCheckpointPersist=true"]).is_ok());
    }

    /// etcd 3.6's `SetFeatureGatesFromExperimentalFlags`: a deprecated boolean sets its gate,
    /// and one given beside `--feature-gates` naming that gate is refused.
    #[test]
    fn deprecated_booleans_set_their_gates_unless_the_gate_is_given() {
        let (f, r) = resolved(&[
            "--experimental-initial-corrupt-check=false",
            "--experimental-compact-hash-check-enabled=false",
            "--experimental-stop-grpc-service-on-defrag",
        ])
        .unwrap();
        assert!(!f.experimental_initial_corrupt_check);
        assert!(!f.experimental_compact_hash_check_enabled);
        assert!(r.gates.enabled(gates::STOP_GRPC_SERVICE_ON_DEFRAG));
        assert!(
            r.gates_given.set_string().is_empty(),
            "not --feature-gates's"
        );
        assert_eq!(
            r.deprecated,
            [
                "--experimental-compact-hash-check-enabled is deprecated in 3.6 and will be decommissioned in 3.7. Use '--feature-gates=CompactHashCheck=true' instead."
            ]
        );
        let err = resolved(&[
            "--experimental-initial-corrupt-check=false",
            "--feature-gates=InitialCorruptCheck=true",
        ])
        .unwrap_err();
        assert_eq!(
            err,
            "cannot specify both flags: --experimental-initial-corrupt-check=false and --feature-gates=InitialCorruptCheck=true at the same time, please just use --feature-gates=InitialCorruptCheck=true"
        );
        // AllAlpha sets the gate too, so the boolean beside it is refused, as in etcd.
        assert!(
            resolved(&[
                "--experimental-enable-lease-checkpoint",
                "--feature-gates=AllAlpha=true"
            ])
            .is_err()
        );
        // Another gate named beside it is fine.
        assert!(
            resolved(&[
                "--experimental-initial-corrupt-check",
                "--feature-gates=FastLeaseKeepAlive=false"
            ])
            .is_ok()
        );
        // The deprecated persist flag without checkpoints: 3.6's gate message.
        let err = resolved(&[
            "--experimental-enable-lease-checkpoint=false",
            "--experimental-enable-lease-checkpoint-persist",
        ])
        .unwrap_err();
        assert!(
            err.contains("requires enabling feature gate LeaseCheckpoint"),
            "{err}"
        );
    }

    #[test]
    fn ignored_renamed_flags_are_logged_under_the_name_given() {
        let f = Flags::parse_from(["actcd", "--memory-mlock", "--downgrade-check-time=1s"]);
        let used: Vec<&str> = f
            .ignored_in_use()
            .into_iter()
            .map(|i| f.name_given(i))
            .collect();
        assert_eq!(used, ["--memory-mlock", "--downgrade-check-time"]);
        let f = Flags::parse_from(["actcd", "--experimental-memory-mlock"]);
        let used: Vec<&str> = f
            .ignored_in_use()
            .into_iter()
            .map(|i| f.name_given(i))
            .collect();
        assert_eq!(used, ["--experimental-memory-mlock"]);
    }

    /// PEM files for the TLS flags: a CA, a server key pair it signed, and files that are not
    /// what they claim to be.
    fn tls_files(dir: &Path) {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.distinguished_name.push(DnType::CommonName, "ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        let other_key = KeyPair::generate().unwrap();
        for (name, body) in [
            ("ca.pem", ca.pem()),
            ("server.pem", cert.pem()),
            ("server.key", key.serialize_pem()),
            ("other.key", other_key.serialize_pem()),
            ("garbage", "garbage\n".to_string()),
        ] {
            std::fs::write(dir.join(name), body).unwrap();
        }
    }

    #[test]
    fn peer_tls_flags_are_checked_at_start_up() {
        let dir = tempfile::tempdir().unwrap();
        tls_files(dir.path());
        let path = |name: &str| dir.path().join(name).display().to_string();
        let peer = "https://127.0.0.1:2380";
        let base = |extra: &[String]| {
            let mut argv = vec![
                "actcd".to_string(),
                "--listen-peer-urls".into(),
                peer.into(),
                "--initial-advertise-peer-urls".into(),
                peer.into(),
            ];
            argv.extend(extra.iter().cloned());
            Config::try_from(Flags::parse_from(argv))
                .map(|c| c.peer_tls.map(|t| t.client_cert_auth))
                .map_err(|e| e.to_string())
        };
        let pair = vec![
            "--peer-cert-file".to_string(),
            path("server.pem"),
            "--peer-key-file".to_string(),
            path("server.key"),
        ];
        assert_eq!(
            base(&[]),
            Err(format!(
                "TLS key/cert (--peer-cert-file, --peer-key-file) must be provided for peer url {peer} with HTTPS scheme"
            ))
        );
        assert_eq!(base(&pair), Ok(Some(false)));
        let mut auth = pair.clone();
        auth.push("--peer-client-cert-auth".into());
        assert!(
            base(&auth)
                .unwrap_err()
                .starts_with("--peer-client-cert-auth needs")
        );
        auth.extend(["--peer-trusted-ca-file".to_string(), path("ca.pem")]);
        assert_eq!(base(&auth), Ok(Some(true)));
        let mut bad = pair.clone();
        bad[3] = path("other.key");
        assert!(
            base(&bad).unwrap_err().starts_with("--peer-key-file"),
            "a key of another pair"
        );
    }

    #[test]
    fn tls_flags_are_checked_at_start_up() {
        let dir = tempfile::tempdir().unwrap();
        tls_files(dir.path());
        let path = |name: &str| dir.path().join(name).display().to_string();
        let https = "https://127.0.0.1:2379";
        struct Case {
            name: &'static str,
            args: Vec<String>,
            /// `Ok(client_cert_auth)` for a TLS config, `Ok(None)` for none.
            want: Result<Option<bool>, String>,
        }
        let key_pair = |cert: &str, key: &str| {
            vec![
                "--cert-file".to_string(),
                path(cert),
                "--key-file".to_string(),
                path(key),
            ]
        };
        let with = |urls: &str, mut rest: Vec<String>| {
            let mut args = vec!["--listen-client-urls".to_string(), urls.to_string()];
            args.append(&mut rest);
            args
        };
        let plus = |mut a: Vec<String>, b: &[&str]| {
            a.extend(b.iter().map(|s| s.to_string()));
            a
        };
        let ca = ["--trusted-ca-file".to_string(), path("ca.pem")];
        let ca: Vec<&str> = ca.iter().map(String::as_str).collect();
        let cases = [
            Case {
                name: "https without a key pair: etcd's message",
                args: with(https, vec![]),
                want: Err(format!(
                    "TLS key/cert (--cert-file, --key-file) must be provided for client url {https} with HTTPS scheme"
                )),
            },
            Case {
                name: "https with a certificate and no key",
                args: with(https, vec!["--cert-file".into(), path("server.pem")]),
                want: Err("--cert-file and --key-file must be given together".into()),
            },
            Case {
                name: "https with a key pair",
                args: with(https, key_pair("server.pem", "server.key")),
                want: Ok(Some(false)),
            },
            Case {
                name: "https and http: TLS for the https one",
                args: with(
                    &format!("http://127.0.0.1:2380,{https}"),
                    plus(key_pair("server.pem", "server.key"), &ca),
                ),
                want: Ok(Some(false)),
            },
            Case {
                name: "client-cert-auth with a CA",
                args: with(
                    https,
                    plus(
                        plus(key_pair("server.pem", "server.key"), &ca),
                        &["--client-cert-auth"],
                    ),
                ),
                want: Ok(Some(true)),
            },
            Case {
                name: "client-cert-auth without a CA",
                args: with(
                    https,
                    plus(key_pair("server.pem", "server.key"), &["--client-cert-auth"]),
                ),
                want: Err("--client-cert-auth needs --trusted-ca-file, the CA client certificates must chain to".into()),
            },
            Case {
                name: "http only: the files are ignored, not read",
                args: with(
                    "http://127.0.0.1:2379",
                    plus(key_pair("missing.pem", "missing.key"), &["--client-cert-auth"]),
                ),
                want: Ok(None),
            },
            Case {
                name: "empty paths are no paths, as in etcd",
                args: with(https, vec!["--cert-file=".into(), "--key-file=".into()]),
                want: Err(format!(
                    "TLS key/cert (--cert-file, --key-file) must be provided for client url {https} with HTTPS scheme"
                )),
            },
            Case {
                name: "missing certificate file",
                args: with(https, key_pair("missing.pem", "server.key")),
                want: Err(format!(
                    "--cert-file {}: cannot read: No such file or directory (os error 2)",
                    path("missing.pem")
                )),
            },
            Case {
                name: "not a certificate",
                args: with(https, key_pair("garbage", "server.key")),
                want: Err(format!(
                    "--cert-file {}: no PEM certificate found",
                    path("garbage")
                )),
            },
            Case {
                name: "not a key",
                args: with(https, key_pair("server.pem", "garbage")),
                want: Err(format!(
                    "--key-file {}: no PEM private key found",
                    path("garbage")
                )),
            },
            Case {
                name: "the key of another certificate",
                args: with(https, key_pair("server.pem", "other.key")),
                want: Err(format!("--key-file {}: cannot be used", path("other.key"))),
            },
            Case {
                name: "not a CA",
                args: with(
                    https,
                    plus(
                        key_pair("server.pem", "server.key"),
                        &["--trusted-ca-file", &path("garbage")],
                    ),
                ),
                want: Err(format!(
                    "--trusted-ca-file {}: no PEM certificate found",
                    path("garbage")
                )),
            },
        ];
        for c in cases {
            let mut argv = vec!["actcd".to_string()];
            argv.extend(c.args);
            let got = Config::try_from(Flags::parse_from(argv))
                .map(|cfg| cfg.client_tls.map(|t| t.client_cert_auth()))
                .map_err(|e| e.to_string());
            match (&got, &c.want) {
                // An error's start is enough: the rest comes from rustls and may change.
                (Err(e), Err(want)) => assert!(e.starts_with(want), "{}: got {e:?}", c.name),
                _ => assert_eq!(got, c.want, "{}", c.name),
            }
        }
    }
}
