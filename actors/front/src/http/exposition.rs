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
//!   preflight's quota). [`FAMILIES`](actcd_metrics::families::FAMILIES) gives each sample
//!   name its etcd type and help text;
//! - `/proc/self` for the process metrics the Go client writes (`process_*`), and etcd's
//!   `os_fd_*` ([`ProcessStats`]).
//!
//! This file asks the actors and orders the page; the text is written by `actcd-metrics`'
//! `text` as Go's client writes it (numbers as `strconv.FormatFloat(v, 'g', -1, 64)`, so
//! `2.147483648e+09` reads the same as etcd's).

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

use actcd_metrics::families::major_minor;
use actcd_metrics::process::ProcessStats;
use actcd_metrics::text::{
    cumulative, disk_histogram, go_float, header, histogram, render_samples, single,
};
use actcd_types::meter::{Sample, SampleValue};

use crate::pipeline::Pipeline;

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
            histogram(
                out,
                "actcd_actor_handle_seconds",
                &labels,
                cumulative(&HANDLE_BUCKETS, &h.buckets),
                h.count,
                h.seconds,
            );
        }
    }
}
