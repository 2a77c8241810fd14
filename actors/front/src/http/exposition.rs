//! `/metrics`: everything this member measures, in Prometheus text format, under etcd 3.5's
//! names, types, help texts, labels and histogram buckets wherever actcd has the same quantity.
//!
//! Where the numbers come from:
//! - the front's own counters (gRPC calls by method and code, client bytes, `/health` answers,
//!   etcd 3.6's health checks), relaxed atomics;
//! - status replies of raft (leader, term, proposals), the store (revisions, keys, db size),
//!   the WAL (fsync latencies) and the backend (commit latencies);
//! - every actor's answer to a `MailboxProbe` sent through its mailbox: its mailbox depth and
//!   handling times (actcd's own `actcd_actor_*` series) and the [`Sample`]s it keeps in plain
//!   fields (the MVCC store's puts and deletes, the lessor's grants, the watch hub's watchers,
//!   preflight's quota). [`FAMILIES`] gives each sample name its etcd type and help text;
//! - `/proc/self` for the process metrics the Go client writes (`process_*`), and etcd's
//!   `os_fd_*`.
//!
//! Numbers are written as Go's `strconv.FormatFloat(v, 'g', -1, 64)` writes them (the Go client
//! does), so `2.147483648e+09` reads the same as etcd's.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

use actcd_types::meter::{Sample, SampleValue};

use crate::pipeline::Pipeline;

/// `(name, type, help)` of every metric an actor reports in its probe answer: etcd 3.5.1's
/// words (`etcd_server_healthcheck*` are etcd 3.6's).
pub const FAMILIES: &[(&str, &str, &str)] = &[
    (
        "etcd_mvcc_range_total",
        "counter",
        "Total number of ranges seen by this member.",
    ),
    (
        "etcd_debugging_mvcc_range_total",
        "counter",
        "Total number of ranges seen by this member.",
    ),
    (
        "etcd_mvcc_put_total",
        "counter",
        "Total number of puts seen by this member.",
    ),
    (
        "etcd_mvcc_delete_total",
        "counter",
        "Total number of deletes seen by this member.",
    ),
    (
        "etcd_mvcc_txn_total",
        "counter",
        "Total number of txns seen by this member.",
    ),
    (
        "etcd_debugging_mvcc_total_put_size_in_bytes",
        "gauge",
        "The total size of put kv pairs seen by this member.",
    ),
    (
        "etcd_debugging_mvcc_watch_stream_total",
        "gauge",
        "Total number of watch streams.",
    ),
    (
        "etcd_debugging_mvcc_watcher_total",
        "gauge",
        "Total number of watchers.",
    ),
    (
        "etcd_debugging_mvcc_slow_watcher_total",
        "gauge",
        "Total number of unsynced slow watchers.",
    ),
    (
        "etcd_debugging_mvcc_events_total",
        "counter",
        "Total number of events sent by this member.",
    ),
    (
        "etcd_debugging_mvcc_pending_events_total",
        "gauge",
        "Total number of pending events to be sent.",
    ),
    (
        "etcd_debugging_lease_granted_total",
        "counter",
        "The total number of granted leases.",
    ),
    (
        "etcd_debugging_lease_revoked_total",
        "counter",
        "The total number of revoked leases.",
    ),
    (
        "etcd_debugging_lease_renewed_total",
        "counter",
        "The number of renewed leases seen by the leader.",
    ),
    (
        "etcd_debugging_lease_ttl_total",
        "histogram",
        "Bucketed histogram of lease TTLs.",
    ),
    (
        "etcd_debugging_server_lease_expired_total",
        "counter",
        "The total number of expired leases.",
    ),
    (
        "etcd_server_quota_backend_bytes",
        "gauge",
        "Current backend storage quota size in bytes.",
    ),
    (
        "etcd_network_peer_sent_bytes_total",
        "counter",
        "The total number of bytes sent to peers.",
    ),
    (
        "etcd_network_peer_received_bytes_total",
        "counter",
        "The total number of bytes received from peers.",
    ),
    (
        "etcd_network_peer_sent_failures_total",
        "counter",
        "The total number of send failures from peers.",
    ),
    (
        "etcd_network_peer_round_trip_time_seconds",
        "histogram",
        "Round-Trip-Time histogram between peers",
    ),
    (
        "etcd_network_active_peers",
        "gauge",
        "The current number of active peer connections.",
    ),
    (
        "etcd_network_disconnected_peers_total",
        "counter",
        "The total number of disconnected peers.",
    ),
    (
        "etcd_disk_wal_write_bytes_total",
        "gauge",
        "Total number of bytes written in WAL.",
    ),
    (
        "etcd_mvcc_hash_duration_seconds",
        "histogram",
        "The latency distribution of storage hash operation.",
    ),
    (
        "etcd_mvcc_hash_rev_duration_seconds",
        "histogram",
        "The latency distribution of storage hash by revision operation.",
    ),
    (
        "etcd_disk_backend_defrag_duration_seconds",
        "histogram",
        "The latency distribution of backend defragmentation.",
    ),
    (
        "etcd_disk_backend_snapshot_duration_seconds",
        "histogram",
        "The latency distribution of backend snapshots.",
    ),
    (
        "etcd_disk_defrag_inflight",
        "gauge",
        "Whether or not defrag is active on the member. 1 means active, 0 means not.",
    ),
    (
        "etcd_debugging_auth_revision",
        "gauge",
        "The current revision of auth store.",
    ),
    (
        "etcd_server_heartbeat_send_failures_total",
        "counter",
        "The total number of leader heartbeat send failures (likely overloaded from slow disk).",
    ),
    (
        "etcd_server_read_indexes_failed_total",
        "counter",
        "The total number of failed read indexes seen.",
    ),
    (
        "etcd_server_apply_duration_seconds",
        "histogram",
        "The latency distributions of v2 apply called by backend.",
    ),
    (
        "etcd_mvcc_db_open_read_transactions",
        "gauge",
        "The number of currently open read transactions",
    ),
    (
        "etcd_server_slow_read_indexes_total",
        "counter",
        "The total number of pending read indexes not in sync with leader's or timed out read index requests.",
    ),
    (
        "etcd_server_learner_promote_successes",
        "counter",
        "The total number of successful learner promotions while this member is leader.",
    ),
    (
        "etcd_server_snapshot_apply_in_progress_total",
        "gauge",
        "1 if the server is applying the incoming snapshot. 0 if none.",
    ),
    (
        "etcd_debugging_mvcc_index_compaction_pause_duration_milliseconds",
        "histogram",
        "Bucketed histogram of index compaction pause duration.",
    ),
    (
        "etcd_debugging_mvcc_db_compaction_pause_duration_milliseconds",
        "histogram",
        "Bucketed histogram of db compaction pause duration.",
    ),
    (
        "etcd_debugging_mvcc_db_compaction_total_duration_milliseconds",
        "histogram",
        "Bucketed histogram of db compaction total duration.",
    ),
    (
        "etcd_debugging_mvcc_db_compaction_keys_total",
        "counter",
        "Total number of db keys compacted.",
    ),
    (
        "etcd_debugging_mvcc_db_compaction_last",
        "gauge",
        "The unix time of the last db compaction. Resets to 0 on start.",
    ),
    (
        "etcd_debugging_store_reads_total",
        "counter",
        "Total number of reads action by (get/getRecursive), local to this member.",
    ),
    (
        "etcd_debugging_store_writes_total",
        "counter",
        "Total number of writes (e.g. set/compareAndDelete) seen by this member.",
    ),
    (
        "etcd_debugging_store_expires_total",
        "counter",
        "Total number of expired keys.",
    ),
    (
        "etcd_debugging_store_watch_requests_total",
        "counter",
        "Total number of incoming watch requests (new or reestablished).",
    ),
    (
        "etcd_debugging_store_watchers",
        "gauge",
        "Count of currently active watchers.",
    ),
    (
        "etcd_server_slow_apply_total",
        "counter",
        "The total number of slow apply requests (likely overloaded from slow disk).",
    ),
    // etcd 3.6 and 3.7's (`durations.rs`; the alarms are the applier's, the progress pass the
    // watch hub's).
    (
        "etcd_server_request_duration_seconds",
        "histogram",
        "Response latency distribution in seconds for each type.",
    ),
    (
        "etcd_server_range_duration_seconds",
        "histogram",
        "The latency distributions of txn.Range",
    ),
    (
        "etcd_debugging_server_alarms",
        "gauge",
        "Alarms for every member in cluster. 1 for 'server_id' label with current ID. 2 for 'alarm_type' label with type of this alarm",
    ),
    (
        "etcd_debugging_server_watch_send_loop_watch_stream_duration_seconds",
        "histogram",
        "The total duration in seconds of running through the send loop watch stream response all events.",
    ),
    (
        "etcd_debugging_server_watch_send_loop_watch_stream_duration_per_event_seconds",
        "histogram",
        "The average duration in seconds of running through the send loop watch stream response, per event.",
    ),
    (
        "etcd_debugging_server_watch_send_loop_control_stream_duration_seconds",
        "histogram",
        "The total duration in seconds of running through the send loop control stream response.",
    ),
    (
        "etcd_debugging_server_watch_send_loop_progress_duration_seconds",
        "histogram",
        "The total duration in seconds of running through the progress loop control stream response.",
    ),
];

/// Go's `strconv.FormatFloat(v, 'g', -1, 64)`: the shortest digits that read back as `v`,
/// in exponent form (sign and at least two exponent digits) when the decimal exponent is
/// below -4 or at least 6.
pub fn go_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let e = format!("{v:e}");
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    format!("{v}")
}

/// One family's HELP and TYPE lines.
fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A family with one series and no labels.
fn single(out: &mut String, name: &str, kind: &str, help: &str, v: f64) {
    header(out, name, kind, help);
    let _ = writeln!(out, "{name} {}", go_float(v));
}

fn label_text(labels: &[(&str, String)]) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect::<Vec<_>>()
        .join(",")
}

/// The samples actors reported, grouped by name in the order first seen, each family under
/// its etcd type and help.
pub fn render_samples(out: &mut String, samples: &[Sample]) {
    let mut order: Vec<&str> = Vec::new();
    let mut by_name: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        if !by_name.contains_key(s.name) {
            order.push(s.name);
        }
        by_name.entry(s.name).or_default().push(s);
    }
    for name in order {
        let (kind, help) = FAMILIES
            .iter()
            .find(|(n, _, _)| *n == name)
            .map_or(("untyped", ""), |(_, k, h)| (*k, *h));
        header(out, name, kind, help);
        for s in &by_name[name] {
            let labels = label_text(&s.labels);
            match &s.value {
                SampleValue::Value(v) => {
                    if labels.is_empty() {
                        let _ = writeln!(out, "{name} {}", go_float(*v));
                    } else {
                        let _ = writeln!(out, "{name}{{{labels}}} {}", go_float(*v));
                    }
                }
                SampleValue::Histogram(h) => {
                    let sep = if labels.is_empty() { "" } else { "," };
                    let mut cumulative = 0;
                    for (le, n) in h.bounds.iter().zip(&h.counts) {
                        cumulative += n;
                        let _ = writeln!(
                            out,
                            "{name}_bucket{{{labels}{sep}le=\"{}\"}} {cumulative}",
                            go_float(*le)
                        );
                    }
                    let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", h.count);
                    let braces = if labels.is_empty() {
                        String::new()
                    } else {
                        format!("{{{labels}}}")
                    };
                    let _ = writeln!(out, "{name}_sum{braces} {}", go_float(h.sum));
                    let _ = writeln!(out, "{name}_count{braces} {}", h.count);
                }
            }
        }
    }
}

/// What `/proc/self` says about this process, as the Go client's process collector reads it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub open_fds: f64,
    pub max_fds: f64,
    pub virtual_bytes: f64,
    pub virtual_max_bytes: f64,
    pub resident_bytes: f64,
    pub start_time_seconds: f64,
}

/// Linux's `USER_HZ`, which the Go client's procfs takes as fixed too.
const USER_HZ: f64 = 100.0;

impl ProcessStats {
    /// Reads `/proc/self`; fields it can't read stay 0.
    pub fn read() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let mut s = Self::parse(
            &read("/proc/self/stat"),
            &read("/proc/self/status"),
            &read("/proc/self/limits"),
            &read("/proc/stat"),
        );
        s.open_fds = std::fs::read_dir("/proc/self/fd").map_or(0.0, |d| d.count() as f64);
        s
    }

    /// The numbers out of the texts of `/proc/self/stat`, `/proc/self/status`,
    /// `/proc/self/limits` and `/proc/stat`.
    pub fn parse(stat: &str, status: &str, limits: &str, system: &str) -> Self {
        let mut s = Self::default();
        // Fields after the command name (which may hold spaces), from field 3 (state) on.
        let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = after.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        s.cpu_seconds = (num(11) + num(12)) / USER_HZ;
        let boot = system
            .lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        s.start_time_seconds = boot + num(19) / USER_HZ;
        let kb = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<f64>().ok())
                .map_or(0.0, |v| v * 1024.0)
        };
        s.virtual_bytes = kb("VmSize:");
        s.resident_bytes = kb("VmRSS:");
        let soft = |key: &str| {
            limits
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .map_or(0.0, |v| {
                    if v == "unlimited" {
                        u64::MAX as f64
                    } else {
                        v.parse::<f64>().unwrap_or(0.0)
                    }
                })
        };
        s.max_fds = soft("Max open files");
        s.virtual_max_bytes = soft("Max address space");
        s
    }

    fn render(&self, out: &mut String) {
        single(
            out,
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            self.cpu_seconds,
        );
        single(
            out,
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            self.max_fds,
        );
        single(
            out,
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            self.open_fds,
        );
        single(
            out,
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            self.resident_bytes,
        );
        single(
            out,
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            self.start_time_seconds,
        );
        single(
            out,
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            self.virtual_bytes,
        );
        single(
            out,
            "process_virtual_memory_max_bytes",
            "gauge",
            "Maximum amount of virtual memory available in bytes.",
            self.virtual_max_bytes,
        );
        // etcd's own pair, from the same numbers.
        single(
            out,
            "os_fd_limit",
            "gauge",
            "The file descriptor limit.",
            self.max_fds,
        );
        single(
            out,
            "os_fd_used",
            "gauge",
            "The number of used file descriptors.",
            self.open_fds,
        );
    }
}

/// etcd reports the cluster version as major.minor in this gauge's label.
fn major_minor(v: &str) -> String {
    let mut parts = v.split('.');
    match (parts.next(), parts.next()) {
        (Some(a), Some(b)) => format!("{a}.{b}"),
        _ => v.to_string(),
    }
}

/// One disk latency histogram (etcd's 1 ms doubling buckets).
fn disk_histogram(out: &mut String, name: &str, help: &str, h: &actcd_types::msg::DiskLatency) {
    header(out, name, "histogram", help);
    for (i, le) in actcd_types::msg::DISK_BUCKETS.iter().enumerate() {
        let n = h.buckets.get(i).copied().unwrap_or(0);
        let _ = writeln!(out, "{name}_bucket{{le=\"{}\"}} {n}", go_float(*le));
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum {}", go_float(h.sum_secs));
    let _ = writeln!(out, "{name}_count {}", h.count);
}

/// The whole `/metrics` page.
pub async fn render(p: &Pipeline) -> String {
    // As promhttp counts: this scrape is in flight while the page is made, and counted as
    // served (code 200: making the page cannot fail) once it is made.
    let c = &p.counters;
    c.scrapes_in_flight.fetch_add(1, Relaxed);
    let out = render_page(p).await;
    c.scrapes_in_flight.fetch_sub(1, Relaxed);
    c.scrapes_served.fetch_add(1, Relaxed);
    out
}

/// The page, ending with promhttp's own two families.
async fn render_page(p: &Pipeline) -> String {
    let mut out = String::new();
    let me = p.config.identity.member_id;
    if let Ok(r) = p.raft_status().await {
        for (name, kind, help, v) in [
            (
                "etcd_server_has_leader",
                "gauge",
                "Whether or not a leader exists. 1 is existence, 0 is not.",
                u8::from(r.leader != 0) as f64,
            ),
            (
                "etcd_server_is_leader",
                "gauge",
                "Whether or not this member is a leader. 1 if is, 0 otherwise.",
                u8::from(r.leader == me && me != 0) as f64,
            ),
            (
                "etcd_server_is_learner",
                "gauge",
                "Whether or not this member is a learner. 1 if is, 0 otherwise.",
                u8::from(r.is_learner) as f64,
            ),
            (
                "etcd_server_leader_changes_seen_total",
                "counter",
                "The number of leader changes seen.",
                r.leader_changes as f64,
            ),
            // etcd types these two as gauges (it sets them from raft's indexes).
            (
                "etcd_server_proposals_committed_total",
                "gauge",
                "The total number of consensus proposals committed.",
                r.commit as f64,
            ),
            (
                "etcd_server_proposals_applied_total",
                "gauge",
                "The total number of consensus proposals applied.",
                r.applied as f64,
            ),
            (
                "etcd_server_proposals_pending",
                "gauge",
                "The current number of pending proposals to commit.",
                r.commit.saturating_sub(r.applied) as f64,
            ),
            (
                "actcd_server_term",
                "gauge",
                "The raft term this member is in.",
                r.term as f64,
            ),
        ] {
            single(&mut out, name, kind, help, v);
        }
    }
    if let Ok(s) = p.store_status().await {
        for (name, help, v) in [
            (
                "etcd_mvcc_db_total_size_in_bytes",
                "Total size of the underlying database physically allocated in bytes.",
                s.db_size as f64,
            ),
            (
                "etcd_mvcc_db_total_size_in_use_in_bytes",
                "Total size of the underlying database logically in use in bytes.",
                s.db_size_in_use as f64,
            ),
            (
                "etcd_debugging_mvcc_current_revision",
                "The current revision of store.",
                s.revision as f64,
            ),
            (
                "etcd_debugging_mvcc_compact_revision",
                "The revision of the last compaction in store.",
                s.compact_revision as f64,
            ),
            (
                "etcd_debugging_mvcc_keys_total",
                "Total number of keys.",
                s.keys as f64,
            ),
        ] {
            single(&mut out, name, "gauge", help, v);
        }
    }
    let c = &p.counters;
    let (payload_received, payload_sent) = p.requests.payload_bytes();
    for (name, kind, help, v) in [
        (
            "etcd_server_proposals_failed_total",
            "counter",
            "The total number of failed proposals seen.",
            c.proposals_failed.load(Relaxed) as f64,
        ),
        // etcd's: the gRPC messages' encoded bytes (its codec counts them).
        (
            "etcd_network_client_grpc_received_bytes_total",
            "counter",
            "The total number of bytes received from grpc clients.",
            payload_received as f64,
        ),
        (
            "etcd_network_client_grpc_sent_bytes_total",
            "counter",
            "The total number of bytes sent to grpc clients.",
            payload_sent as f64,
        ),
        // actcd's: every byte of the client connections (HTTP/2 framing, the JSON gateway
        // and TLS included).
        (
            "actcd_network_client_received_bytes_total",
            "counter",
            "The total number of bytes read from client connections.",
            c.received_bytes.load(Relaxed) as f64,
        ),
        (
            "actcd_network_client_sent_bytes_total",
            "counter",
            "The total number of bytes written to client connections.",
            c.sent_bytes.load(Relaxed) as f64,
        ),
        (
            "etcd_server_health_success",
            "counter",
            "The total number of successful health checks",
            c.health_success.load(Relaxed) as f64,
        ),
        (
            "etcd_server_health_failures",
            "counter",
            "The total number of failed health checks",
            c.health_failures.load(Relaxed) as f64,
        ),
    ] {
        single(&mut out, name, kind, help, v);
    }
    for (name, help, label, value) in [
        (
            "etcd_server_id",
            "Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID.",
            "server_id",
            format!("{me:x}"),
        ),
        (
            "etcd_server_version",
            "Which version is running. 1 for 'server_version' label with current version.",
            "server_version",
            p.config.version.clone(),
        ),
        (
            "etcd_cluster_version",
            "Which version is running. 1 for 'cluster_version' label with current cluster version",
            "cluster_version",
            major_minor(&p.config.version),
        ),
    ] {
        header(&mut out, name, "gauge", help);
        let _ = writeln!(out, "{name}{{{label}=\"{value}\"}} 1");
    }
    // etcd 3.6's gauge: every server feature gate, 1 when on.
    header(
        &mut out,
        "etcd_server_feature_enabled",
        "gauge",
        "Whether or not a feature is enabled. 1 is enabled, 0 is not.",
    );
    for (name, stage, on) in &p.config.feature_gates {
        let _ = writeln!(
            out,
            "etcd_server_feature_enabled{{name=\"{name}\",stage=\"{stage}\"}} {}",
            u8::from(*on)
        );
    }
    c.render_health_checks(&mut out);
    header(
        &mut out,
        "actcd_authn_outcomes_total",
        "counter",
        "Requests each authenticator of the chain named a user for, passed on, or rejected.",
    );
    let stats = p.auth.stats();
    for (name, c) in &stats {
        for (outcome, n) in [
            ("user", c.users),
            ("not_mine", c.not_mine),
            ("rejected", c.rejected),
        ] {
            let _ = writeln!(
                out,
                "actcd_authn_outcomes_total{{authenticator=\"{name}\",outcome=\"{outcome}\"}} {n}"
            );
        }
    }
    header(
        &mut out,
        "actcd_authn_seconds_total",
        "counter",
        "Time each authenticator of the chain spent deciding.",
    );
    for (name, c) in &stats {
        let _ = writeln!(
            out,
            "actcd_authn_seconds_total{{authenticator=\"{name}\"}} {}",
            go_float(c.nanos as f64 / 1e9)
        );
    }
    if let Ok(f) = p
        .routes
        .fsync_stats
        .send(actcd_types::msg::GetFsyncStats)
        .await
    {
        disk_histogram(
            &mut out,
            "etcd_disk_wal_fsync_duration_seconds",
            "The latency distributions of fsync called by WAL.",
            &f,
        );
    }
    if let Ok(c) = p
        .routes
        .commit_stats
        .send(actcd_types::msg::GetCommitStats)
        .await
    {
        disk_histogram(
            &mut out,
            "etcd_disk_backend_commit_duration_seconds",
            "The latency distributions of commit called by backend.",
            &c,
        );
    }
    out.push_str(&p.requests.render());
    ProcessStats::read().render(&mut out);
    actor_metrics(p, &mut out).await;
    single(
        &mut out,
        "promhttp_metric_handler_requests_in_flight",
        "gauge",
        "Current number of scrapes being served.",
        c.scrapes_in_flight.load(Relaxed) as f64,
    );
    header(
        &mut out,
        "promhttp_metric_handler_requests_total",
        "counter",
        "Total number of scrapes by HTTP status code.",
    );
    let served = c.scrapes_served.load(Relaxed);
    for (code, n) in [("200", served), ("500", 0), ("503", 0)] {
        let _ = writeln!(
            out,
            "promhttp_metric_handler_requests_total{{code=\"{code}\"}} {n}"
        );
    }
    out
}

/// How long `/metrics` waits for an actor's answer to its probe.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Each actor's mailbox (depth and wait, as a probe sent through it found them), the handling
/// time of its timed messages, and the samples it keeps.
async fn actor_metrics(p: &Pipeline, out: &mut String) {
    use actcd_types::meter::{GetMeter, HANDLE_BUCKETS, MailboxProbe};
    let actors = &p.routes.actors;
    let meters = p
        .actor_meters
        .get_or_init(|| async {
            let mut meters = Vec::with_capacity(actors.len());
            for a in actors {
                match a.meter.send(GetMeter).await {
                    Ok(m) => meters.push(m),
                    Err(_) => return Vec::new(),
                }
            }
            meters
        })
        .await;
    let probes = actors.iter().enumerate().map(|(i, a)| async move {
        let probe = MailboxProbe {
            sent_at: std::time::Instant::now(),
            handled_at_send: meters.get(i).map(|m| m.handled()),
        };
        let started = probe.sent_at;
        let answer = tokio::time::timeout(PROBE_TIMEOUT, a.probe.send(probe)).await;
        (a.name, answer.ok().and_then(Result::ok), started.elapsed())
    });
    let answers = futures::future::join_all(probes).await;
    let local = format!("{:x}", p.config.identity.member_id);
    let samples: Vec<Sample> = p
        .counters
        .durations
        .samples()
        .into_iter()
        .chain(
            answers
                .iter()
                .filter_map(|(_, snap, _)| snap.as_ref())
                .flat_map(|s| s.metrics.iter().cloned()),
        )
        .map(|mut s| {
            // The transport names the remote member; etcd's series name this one too.
            if s.labels.first().is_some_and(|(k, _)| *k == "Remote") {
                s.labels.insert(0, ("Local", local.clone()));
            }
            // The raft node counts out-of-date rounds; the front, rounds that timed out.
            if s.name == "etcd_server_slow_read_indexes_total"
                && let SampleValue::Value(v) = &mut s.value
            {
                *v += p.counters.read_index_timeouts.load(Relaxed) as f64;
            }
            s
        })
        .collect();
    render_samples(out, &samples);
    header(
        out,
        "actcd_actor_mailbox_depth",
        "gauge",
        "Timed messages queued ahead of a probe sent through the actor's mailbox.",
    );
    for (name, snap, _) in &answers {
        if let Some(s) = snap {
            let _ = writeln!(
                out,
                "actcd_actor_mailbox_depth{{actor=\"{name}\"}} {}",
                s.depth
            );
        }
    }
    header(
        out,
        "actcd_actor_mailbox_wait_seconds",
        "gauge",
        "How long a probe waited in the actor's mailbox (the timeout if it got no answer).",
    );
    for (name, snap, waited) in &answers {
        let wait = snap
            .as_ref()
            .map_or(waited.as_secs_f64(), |s| s.wait_seconds);
        let _ = writeln!(
            out,
            "actcd_actor_mailbox_wait_seconds{{actor=\"{name}\"}} {}",
            go_float(wait)
        );
    }
    header(
        out,
        "actcd_actor_handle_seconds",
        "histogram",
        "Time the actor spent handling each timed message type.",
    );
    for (name, snap, _) in &answers {
        let Some(s) = snap else { continue };
        for (message, h) in &s.by_message {
            let labels = format!("actor=\"{name}\",message=\"{message}\"");
            let mut cumulative = 0;
            for (i, le) in HANDLE_BUCKETS.iter().enumerate() {
                cumulative += h.buckets[i];
                let _ = writeln!(
                    out,
                    "actcd_actor_handle_seconds_bucket{{{labels},le=\"{}\"}} {cumulative}",
                    go_float(*le)
                );
            }
            let _ = writeln!(
                out,
                "actcd_actor_handle_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "actcd_actor_handle_seconds_sum{{{labels}}} {}",
                go_float(h.seconds)
            );
            let _ = writeln!(
                out,
                "actcd_actor_handle_seconds_count{{{labels}}} {}",
                h.count
            );
        }
    }
}

#[cfg(test)]
#[path = "exposition_tests.rs"]
mod tests;
