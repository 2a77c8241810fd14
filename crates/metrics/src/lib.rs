//! # actcd-metrics — etcd's `/metrics` as Go writes it, in plain atomics and text
//!
//! Reproduces the parts of etcd's metrics that are Go libraries' behaviour, not etcd's state,
//! with their names, labels, buckets, help texts and number formatting:
//!
//! - **go-grpc-prometheus** as etcd registers it ([`requests`]): `grpc_server_started_total`,
//!   `grpc_server_handled_total{grpc_service,grpc_method,grpc_type,grpc_code}` with grpc-go's code
//!   names (`Canceled`), `grpc_server_msg_{received,sent}_total` (a unary call's are its start and
//!   its success, a stream's counted one by one), the `grpc_server_handling_seconds` histogram
//!   with its default buckets (shown only with `--metrics extensive`, as etcd), and etcd's
//!   `etcd_server_client_requests_total{type,client_api_version}`. Every method of the client
//!   port's services is listed from zero, as once etcd has registered them; a stream is handled
//!   when it ends, or when its client goes away with the code etcd's handler returns then
//!   ([`requests::cancel_code`]).
//! - **etcd's codec and the client connections** ([`counted`]): the messages' encoded bytes
//!   (`etcd_network_client_grpc_{received,sent}_bytes_total`), read off gRPC's 5-byte framing
//!   as a body passes, and actcd's own count of every byte of a client connection.
//! - **grpc-go's refusals** ([`grpcgo`]): tonic's trailers-only answers to unknown services and
//!   methods and to oversized messages rewritten in grpc-go 1.41's codes and words.
//! - **client_golang's text format** ([`text`]): `# HELP`/`# TYPE` per family, floats as Go's
//!   `strconv.FormatFloat(v, 'g', -1, 64)` (`2.147483648e+09`, `+Inf`), histograms as
//!   cumulative `_bucket{le}` series, `+Inf`, `_sum`, `_count`; etcd's help texts and types for
//!   the samples actors report ([`families`]).
//! - **client_golang's process collector** ([`process`]): `process_*` from `/proc` as Go's
//!   procfs reads it (`USER_HZ` fixed at 100), and etcd's `os_fd_limit`, `os_fd_used`.
//! - **etcd 3.6 and 3.7's latency histograms** ([`durations`]):
//!   `etcd_server_request_duration_seconds{type,success}`,
//!   `etcd_server_range_duration_seconds{success}` and the watch send loop's, with etcd's
//!   buckets; and etcd 3.6's health check families (`etcd_server_healthcheck`,
//!   `etcd_server_healthchecks_total`, in [`counters`]).
//!
//! ## What it leaves out
//! Only what actcd measures the same way etcd does: go-grpc-prometheus's client-side metrics,
//! the Go runtime's `go_*` families (actcd has no Go runtime) and client_golang's OpenMetrics
//! format are not written. A call of a path the server does not have is not
//! counted (etcd's interceptors never see one; a series per made-up path would grow without
//! bound), and a `client-api-version` other than etcd's clients' is counted as `unknown`.
//! What the actors measure (raft, the store, the WAL) and the page's order are the front's.
//!
//! ## Invariants
//! - No allocation per request: every per-method series and every histogram is allocated once,
//!   at start, for every label value it can have; accounting a call or a message is relaxed
//!   atomic adds, no lock (`/livez` and `/readyz` checks, which are rare, take a mutex).
//! - No actors and no front types: it depends on `actcd-types` (the sample and latency types)
//!   and `actcd-proto` (the services' descriptors, a proposal's request type), and on tonic,
//!   http, hyper and tokio's I/O traits for the wire.
//!
//! ## Layout
//! - `requests.rs` go-grpc-prometheus's per-method counters and histogram, etcd's client requests.
//! - `counted.rs` the byte-counting connection and a call's counted body (gRPC's framing).
//! - `counters.rs` the front's other counters and etcd 3.6's health check families.
//! - `grpcgo.rs` tonic's refusals in grpc-go's words, `grpc-message` percent-encoding.
//! - `text.rs` client_golang's text format: floats, headers, samples, histograms.
//! - `families.rs` etcd's types and help texts of the families actors report.
//! - `process.rs` the Go process collector's numbers from `/proc`.
//! - `durations.rs` etcd 3.6 and 3.7's request, range and watch send loop histograms.
//!
//! ## How it is checked
//! Each file's tests are in its `<file>_tests.rs`: the numbers, series and refusals etcd 3.5.1
//! wrote for the same inputs (its `/metrics` after etcdctl 3.5.1's calls, its answers in the
//! hostile-input run), `/proc` texts as Linux writes them (a command name with a space, an
//! `unlimited` limit), and gRPC's framing cut at every size. The
//! integration tests `tests/integration/metrics.rs` read a running member's page against the
//! series etcd's dashboards and alerts query and the counts etcd gives for the same workload.

pub mod counted;
pub mod counters;
pub mod durations;
pub mod families;
pub mod grpcgo;
pub mod process;
pub mod requests;
pub mod text;
