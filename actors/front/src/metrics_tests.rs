//! Tests of the front's `metrics.rs` (its `tests` module, included from there by `#[path]`).

use super::*;

fn answer(path: &str, code: &str, message: Option<&str>) -> (String, String) {
    let mut h = http::HeaderMap::new();
    h.insert("grpc-status", http::HeaderValue::from_str(code).unwrap());
    if let Some(m) = message {
        h.insert("grpc-message", http::HeaderValue::from_str(m).unwrap());
    }
    as_grpc_go_answers(path, &mut h);
    let get = |k: &str| {
        h.get(k)
            .map(|v| percent_decode(v.to_str().unwrap()))
            .unwrap_or_default()
    };
    (get("grpc-status"), get("grpc-message"))
}

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

/// etcd 3.5.1's answers (grpc-go), taken from the hostile-input run against it.
#[test]
fn unknown_methods_and_oversized_messages_are_refused_in_grpc_go_words() {
    let s = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    assert_eq!(
        answer("/etcdserverpb.KV/Nope", "12", None),
        s("12", "unknown method Nope for service etcdserverpb.KV")
    );
    assert_eq!(
        answer("/etcdserverpb.Nope/Range", "12", None),
        s("12", "unknown service etcdserverpb.Nope")
    );
    assert_eq!(
        answer("/etcdserverpb.KV/Range/", "12", Some("")),
        s("12", "unknown service etcdserverpb.KV/Range")
    );
    assert_eq!(
        answer("/", "12", None),
        s("8", "malformed method name: \"/\"")
    );
    assert_eq!(
        answer(
            "/etcdserverpb.KV/Put",
            "11",
            Some(
                "Error, decoded message length too large: found 2621447 bytes, the limit is: 2097152 bytes"
            )
        ),
        s(
            "8",
            "grpc: received message larger than max (2621447 vs. 2097152)"
        )
    );
    // Everything else passes as it is.
    assert_eq!(
        answer(
            "/etcdserverpb.KV/Range",
            "11",
            Some("etcdserver: mvcc: required revision is a future revision")
        ),
        s(
            "11",
            "etcdserver: mvcc: required revision is a future revision"
        )
    );
    assert_eq!(
        answer("/etcdserverpb.Maintenance/Downgrade", "12", Some("x")),
        s("12", "x")
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
