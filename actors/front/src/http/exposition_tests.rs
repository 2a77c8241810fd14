//! Tests of the front's `http/exposition.rs` (its `tests` module, included from there by `#[path]`).

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
fn proc_files_give_the_go_clients_process_metrics() {
    let stat = "4242 (act cd) S 1 4242 4242 0 -1 4194560 900 0 0 0 150 50 0 0 20 0 9 0 \
                    12345 745517056 7764 18446744073709551615";
    let status = "Name:\tactcd\nVmSize:\t  728044 kB\nVmRSS:\t   31056 kB\n";
    let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            20000                20000                files\n\
                      Max address space         unlimited            unlimited            bytes\n";
    let system = "cpu  1 2 3\nbtime 1795630000\n";
    let s = ProcessStats::parse(stat, status, limits, system);
    assert_eq!(s.cpu_seconds, 2.0);
    assert_eq!(s.start_time_seconds, 1795630000.0 + 123.45);
    assert_eq!(s.virtual_bytes, 728044.0 * 1024.0);
    assert_eq!(s.resident_bytes, 31056.0 * 1024.0);
    assert_eq!(s.max_fds, 20000.0);
    assert_eq!(s.virtual_max_bytes, u64::MAX as f64);
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
