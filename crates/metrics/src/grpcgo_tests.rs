//! Tests of `grpcgo.rs`, tonic's refusals in grpc-go's words (its `tests` module, included by
//! `#[path]`).

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
