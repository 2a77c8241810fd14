//! Tests of `requests.rs`, go-grpc-prometheus's per-method counters (its `tests` module, included
//! by `#[path]`).

use super::*;

#[test]
fn calls_of_unknown_methods_are_not_counted() {
    let s = RequestStats::default();
    s.record(
        "/etcdserverpb.KV/Range",
        tonic::Code::Ok,
        Duration::from_millis(1),
    );
    s.record(
        "/etcdserverpb.KV/Nope",
        tonic::Code::Unimplemented,
        Duration::from_millis(1),
    );
    s.record(
        &format!("/{}", "x".repeat(8000)),
        tonic::Code::ResourceExhausted,
        Duration::from_millis(1),
    );
    let text = s.render();
    assert!(text.contains("grpc_method=\"Range\""), "{text}");
    assert!(!text.contains("Nope") && !text.contains("xxxx"), "{text}");
    assert!(
        METHOD_DESCRIPTORS.len() >= 40,
        "{}",
        METHOD_DESCRIPTORS.len()
    );
}

#[test]
fn counts_and_buckets_render_as_prometheus_text() {
    let s = RequestStats::default();
    assert!(!s.render().contains("grpc_server_handling_seconds"));
    s.set_extensive(true);
    s.record(
        "/etcdserverpb.KV/Put",
        tonic::Code::Ok,
        Duration::from_millis(3),
    );
    s.record(
        "/etcdserverpb.KV/Put",
        tonic::Code::Ok,
        Duration::from_millis(30),
    );
    s.record(
        "/etcdserverpb.KV/Put",
        tonic::Code::InvalidArgument,
        Duration::from_millis(1),
    );
    let text = s.render();
    let has = |line: &str| text.lines().any(|l| l == line);
    assert!(has(
        r#"grpc_server_handled_total{grpc_code="OK",grpc_method="Put",grpc_service="etcdserverpb.KV",grpc_type="unary"} 2"#
    ));
    assert!(has(
        r#"grpc_server_handled_total{grpc_code="InvalidArgument",grpc_method="Put",grpc_service="etcdserverpb.KV",grpc_type="unary"} 1"#
    ));
    assert!(has(
        r#"grpc_server_handling_seconds_bucket{grpc_method="Put",grpc_service="etcdserverpb.KV",grpc_type="unary",le="0.005"} 2"#
    ));
    assert!(has(
        r#"grpc_server_handling_seconds_bucket{grpc_method="Put",grpc_service="etcdserverpb.KV",grpc_type="unary",le="0.05"} 3"#
    ));
    assert!(has(
        r#"grpc_server_handling_seconds_count{grpc_method="Put",grpc_service="etcdserverpb.KV",grpc_type="unary"} 3"#
    ));
}

/// etcd 3.5.1's series after one Watch and two Puts from etcdctl 3.5.1 (its client sends
/// `client-api-version: 3.5`), and a call without the header.
#[test]
fn started_calls_are_counted_by_type_and_client_version() {
    let s = RequestStats::default();
    s.started("/etcdserverpb.Watch/Watch", Some("3.5"));
    s.started("/etcdserverpb.KV/Put", Some("3.5"));
    s.started("/etcdserverpb.KV/Put", Some("3.5"));
    s.started("/etcdserverpb.KV/Range", None);
    s.started("/etcdserverpb.KV/Range", Some("made-up"));
    s.started("/etcdserverpb.KV/Nope", Some("3.5"));
    let text = s.render();
    let has = |line: &str| text.lines().any(|l| l == line);
    for line in [
        r#"grpc_server_started_total{grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} 1"#,
        r#"grpc_server_started_total{grpc_method="Put",grpc_service="etcdserverpb.KV",grpc_type="unary"} 2"#,
        r#"grpc_server_started_total{grpc_method="LeaseKeepAlive",grpc_service="etcdserverpb.Lease",grpc_type="bidi_stream"} 0"#,
        r#"grpc_server_started_total{grpc_method="Snapshot",grpc_service="etcdserverpb.Maintenance",grpc_type="server_stream"} 0"#,
        r#"grpc_server_handled_total{grpc_code="Unavailable",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 0"#,
        r#"etcd_server_client_requests_total{client_api_version="3.5",type="stream"} 1"#,
        r#"etcd_server_client_requests_total{client_api_version="3.5",type="unary"} 2"#,
        r#"etcd_server_client_requests_total{client_api_version="unknown",type="unary"} 2"#,
    ] {
        assert!(has(line), "{line} missing from\n{text}");
    }
    assert!(!text.contains("Nope"));
}

#[test]
fn the_handling_sum_is_written_as_go_writes_floats() {
    let s = RequestStats::default();
    s.set_extensive(true);
    s.record(
        "/etcdserverpb.KV/Put",
        tonic::Code::Ok,
        Duration::from_micros(10),
    );
    let text = s.render();
    let sum = text
        .lines()
        .find(|l| l.starts_with("grpc_server_handling_seconds_sum{grpc_method=\"Put\""))
        .unwrap_or_default();
    // Go's strconv 'g' writes 0.00001 as 1e-05 (Rust's `{}` would write 0.00001).
    assert!(sum.ends_with(" 1e-05"), "{sum}");
}
