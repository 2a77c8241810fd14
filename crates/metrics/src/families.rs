//! etcd's metric families that actors report in samples: [`FAMILIES`], each name with its
//! etcd type and help text, and the cluster version's `major.minor` label.

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

/// etcd reports the cluster version as major.minor in this gauge's label.
pub fn major_minor(v: &str) -> String {
    let mut parts = v.split('.');
    match (parts.next(), parts.next()) {
        (Some(a), Some(b)) => format!("{a}.{b}"),
        _ => v.to_string(),
    }
}
