//! # actcd-grpcmetrics — etcd's gRPC-side latency histograms, as plain atomics
//!
//! Reproduces the latency families etcd 3.6 and 3.7 add on the server side of a client
//! request, with etcd's names, labels and buckets (`server/etcdserver/metrics.go`,
//! `txn/metrics.go`, `api/v3rpc/metrics.go`): `etcd_server_request_duration_seconds{type,success}`,
//! `etcd_server_range_duration_seconds{success}` and the watch send loop's
//! `etcd_debugging_server_watch_send_loop_*` histograms ([`durations`]). The front observes
//! them in its own tasks and renders them on `/metrics`.
//!
//! ## Invariants
//! - No allocation per request: every histogram is allocated once, at start, for every label
//!   value it can have; an observation is three relaxed atomic adds, no lock.
//! - No actors and no front types: it depends on `actcd-types` (the sample types) and
//!   `actcd-proto` (a proposal's request type) only.
//!
//! ## Layout
//! `durations.rs` the histograms and the request-type names (tests in `durations_tests.rs`:
//! buckets, labels and samples as etcd's).
//!
//! go-grpc-prometheus's `grpc_server_*` families (the per-method counters, the handling-time
//! histogram and the byte counts) are still the front's `metrics.rs`: its tower layer is
//! interleaved with the learner gate and the client deadline of each call.

pub mod durations;
