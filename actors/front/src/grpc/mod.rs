//! The gRPC services, a file each, over the pipeline: `kv.rs` (with `range_route.rs`, its gRPC
//! Range served by a route of its own), `watch.rs` (with `watch_route.rs`, its gRPC method),
//! `lease.rs`, `maintenance.rs`, `cluster.rs` (with `autopromote.rs`, the leader's loop that
//! promotes learners under the `AutoPromoteLearners` gate), `auth.rs`, and `lock.rs` and
//! `election.rs` over `concurrency.rs` (etcd's server-side mutex and election recipes);
//! `own_method.rs` is the generated-service shape the two own routes share. The JSON gateway
//! (`http/gateway.rs`) calls the same service code, so both answer alike.

pub(crate) mod auth;
pub mod autopromote;
pub(crate) mod cluster;
pub(crate) mod concurrency;
pub(crate) mod election;
pub(crate) mod kv;
pub(crate) mod lease;
pub(crate) mod lock;
pub(crate) mod maintenance;
mod own_method;
pub(crate) mod range_route;
pub(crate) mod watch;
pub(crate) mod watch_route;
