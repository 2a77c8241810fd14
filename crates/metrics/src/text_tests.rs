//! Tests of `text.rs`, client_golang's text format (its `tests` module, included by `#[path]`).

use super::*;

/// Values as etcd 3.5.1's `/metrics` showed them.
#[test]
fn numbers_are_written_as_go_writes_them() {
    for (v, want) in [
        (0.0, "0"),
        (24.0, "24"),
        (20480.0, "20480"),
        (2147483648.0, "2.147483648e+09"),
        (31801344.0, "3.1801344e+07"),
        (1795639906.0, "1.795639906e+09"),
        (u64::MAX as f64, "1.8446744073709552e+19"),
        (1e6, "1e+06"),
        (0.14, "0.14"),
        (0.000361035, "0.000361035"),
        (8.046e-06, "8.046e-06"),
        (0.005, "0.005"),
        (1.048576e6, "1.048576e+06"),
        (f64::INFINITY, "+Inf"),
    ] {
        assert_eq!(go_float(v), want, "{v}");
    }
}

#[test]
fn samples_render_under_their_etcd_type_and_help() {
    let mut ttl = actcd_types::meter::Histogram::new(&[1.0, 2.0, 4.0]);
    ttl.observe(3.0);
    ttl.observe(100.0);
    let samples = vec![
        Sample::value("etcd_mvcc_put_total", 24.0),
        Sample::histogram("etcd_debugging_lease_ttl_total", &ttl),
        Sample {
            name: "etcd_network_peer_sent_bytes_total",
            labels: vec![("To", "8e9e05c52164694d".into())],
            value: SampleValue::Value(6512.0),
        },
    ];
    let mut out = String::new();
    render_samples(&mut out, &samples);
    let want = "\
# HELP etcd_mvcc_put_total Total number of puts seen by this member.
# TYPE etcd_mvcc_put_total counter
etcd_mvcc_put_total 24
# HELP etcd_debugging_lease_ttl_total Bucketed histogram of lease TTLs.
# TYPE etcd_debugging_lease_ttl_total histogram
etcd_debugging_lease_ttl_total_bucket{le=\"1\"} 0
etcd_debugging_lease_ttl_total_bucket{le=\"2\"} 0
etcd_debugging_lease_ttl_total_bucket{le=\"4\"} 1
etcd_debugging_lease_ttl_total_bucket{le=\"+Inf\"} 2
etcd_debugging_lease_ttl_total_sum 103
etcd_debugging_lease_ttl_total_count 2
# HELP etcd_network_peer_sent_bytes_total The total number of bytes sent to peers.
# TYPE etcd_network_peer_sent_bytes_total counter
etcd_network_peer_sent_bytes_total{To=\"8e9e05c52164694d\"} 6512
";
    assert_eq!(out, want);
}

/// A disk latency family as etcd 3.5.1 shows one: cumulative counts at its 1 ms doubling
/// bounds, no labels.
#[test]
fn disk_histograms_are_written_as_etcds() {
    let mut h = actcd_types::msg::DiskLatency::default();
    h.observe(0.0015);
    h.observe(0.5);
    let mut out = String::new();
    disk_histogram(
        &mut out,
        "etcd_disk_wal_fsync_duration_seconds",
        "The latency distributions of fsync called by WAL.",
        &h,
    );
    let mut want = String::from(
        "# HELP etcd_disk_wal_fsync_duration_seconds The latency distributions of fsync called by WAL.\n\
         # TYPE etcd_disk_wal_fsync_duration_seconds histogram\n",
    );
    for (le, n) in [
        ("0.001", 0),
        ("0.002", 1),
        ("0.004", 1),
        ("0.008", 1),
        ("0.016", 1),
        ("0.032", 1),
        ("0.064", 1),
        ("0.128", 1),
        ("0.256", 1),
        ("0.512", 2),
        ("1.024", 2),
        ("2.048", 2),
        ("4.096", 2),
        ("8.192", 2),
        ("+Inf", 2),
    ] {
        want.push_str(&format!(
            "etcd_disk_wal_fsync_duration_seconds_bucket{{le=\"{le}\"}} {n}\n"
        ));
    }
    want.push_str("etcd_disk_wal_fsync_duration_seconds_sum 0.5015\n");
    want.push_str("etcd_disk_wal_fsync_duration_seconds_count 2\n");
    assert_eq!(out, want);
}

/// A labelled series: labels then `le` in the buckets, the labels alone on `_sum` and `_count`.
#[test]
fn labelled_histograms_keep_their_labels_on_every_line() {
    let mut out = String::new();
    histogram(
        &mut out,
        "actcd_actor_handle_seconds",
        "actor=\"mvcc\",message=\"Put\"",
        cumulative(&[0.001, 0.01], &[2, 1, 4]),
        7,
        1.25,
    );
    assert_eq!(
        out,
        "actcd_actor_handle_seconds_bucket{actor=\"mvcc\",message=\"Put\",le=\"0.001\"} 2\n\
         actcd_actor_handle_seconds_bucket{actor=\"mvcc\",message=\"Put\",le=\"0.01\"} 3\n\
         actcd_actor_handle_seconds_bucket{actor=\"mvcc\",message=\"Put\",le=\"+Inf\"} 7\n\
         actcd_actor_handle_seconds_sum{actor=\"mvcc\",message=\"Put\"} 1.25\n\
         actcd_actor_handle_seconds_count{actor=\"mvcc\",message=\"Put\"} 7\n"
    );
}

#[test]
fn label_values_escape_backslash_quote_and_line_feed() {
    assert_eq!(
        label_text(&[("a", "x\\y\"z\nw".to_string())]),
        "a=\"x\\\\y\\\"z\\nw\""
    );
}
