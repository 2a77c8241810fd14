//! Tests of the front's `metrics.rs` (its `deadline_tests` module, included from there by `#[path]`).

use super::grpc_timeout;
use std::time::Duration;

#[test]
fn grpc_timeouts_are_read_in_every_unit() {
    for (header, want) in [
        ("5S", Some(Duration::from_secs(5))),
        ("4999m", Some(Duration::from_millis(4999))),
        ("2M", Some(Duration::from_secs(120))),
        ("1H", Some(Duration::from_secs(3600))),
        ("250000u", Some(Duration::from_millis(250))),
        ("7n", Some(Duration::from_nanos(7))),
        ("5", None),
        ("S", None),
        ("x5S", None),
    ] {
        let mut h = http::HeaderMap::new();
        h.insert("grpc-timeout", header.parse().unwrap());
        assert_eq!(grpc_timeout(&h), want, "{header}");
    }
}
