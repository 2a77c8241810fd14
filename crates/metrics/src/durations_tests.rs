//! Tests of `durations.rs`, etcd's latency histograms (its `tests` module, included by `#[path]`).

use super::*;
use actcd_types::meter::SampleValue;

#[test]
fn buckets_are_etcds() {
    assert_eq!(REQUEST_TYPES[UNKNOWN], "Unknown");
    assert_eq!(REQUEST_BUCKETS[0], 0.001);
    assert_eq!(REQUEST_BUCKETS[13], 8.192);
    assert_eq!(RANGE_BUCKETS[0], 0.0001);
    assert!((RANGE_BUCKETS[19] - 52.4288).abs() < 1e-9);
}

#[test]
fn requests_are_shown_by_type_and_success_once_observed() {
    let d = Durations::default();
    d.request("Put", true, Duration::from_micros(1500));
    d.request("Put", true, Duration::from_millis(20));
    d.request("Range", false, Duration::from_secs(20));
    d.range(true, Duration::from_micros(50));
    let samples = d.samples();
    let find = |name: &str, labels: &[(&str, &str)]| {
        samples
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && s.labels
                        .iter()
                        .zip(labels)
                        .all(|(a, b)| a.0 == b.0 && a.1 == b.1)
            })
            .map(|s| match &s.value {
                SampleValue::Histogram(h) => h.clone(),
                SampleValue::Value(_) => panic!("{name} is a histogram"),
            })
    };
    let put = find(
        "etcd_server_request_duration_seconds",
        &[("success", "true"), ("type", "Put")],
    )
    .expect("Put observed");
    assert_eq!(put.count, 2);
    assert_eq!(put.counts[1], 1, "1.5 ms is in (1 ms, 2 ms]");
    assert_eq!(put.counts[5], 1, "20 ms is in (16 ms, 32 ms]");
    let range = find(
        "etcd_server_request_duration_seconds",
        &[("success", "false"), ("type", "Range")],
    )
    .expect("Range observed");
    assert_eq!(range.counts[14], 1, "above every bound");
    assert!(
        find(
            "etcd_server_request_duration_seconds",
            &[("success", "false"), ("type", "Put")]
        )
        .is_none()
    );
    let read =
        find("etcd_server_range_duration_seconds", &[("success", "true")]).expect("range observed");
    assert_eq!((read.count, read.counts[0]), (1, 1));
    let loop_samples = samples
        .iter()
        .filter(|s| s.name.starts_with("etcd_debugging_server_watch_send_loop_"))
        .count();
    assert_eq!(loop_samples, 3, "shown from zero");
}

#[test]
fn a_response_without_events_is_not_observed_per_event() {
    let d = Durations::default();
    d.watch_response(0, Duration::from_millis(1));
    d.watch_response(4, Duration::from_millis(8));
    assert_eq!(d.watch_stream.count(), 2);
    let per_event = d.watch_stream_per_event.snapshot();
    assert_eq!(per_event.count, 1);
    assert!((per_event.sum - 0.002).abs() < 1e-12);
}

#[test]
fn proposals_are_typed_as_etcd_types_them() {
    let put = InternalRaftRequest {
        put: Some(Default::default()),
        ..Default::default()
    };
    assert_eq!(request_type(&put), Some("Put"));
    let member = InternalRaftRequest {
        member_change: Some(Default::default()),
        ..Default::default()
    };
    assert_eq!(request_type(&member), None);
    assert_eq!(
        request_type(&InternalRaftRequest::default()),
        Some("Unknown")
    );
}
