//! # actcd-front — etcd's v3 gRPC services
//!
//! Owns nothing but the request-id generator and the routes into the actor pipeline. Each gRPC
//! service is one file that turns a request into messages and a reply into etcd's response:
//!
//! - writes (Put, DeleteRange, Txn, Compact) → `Submit` to preflight with a fresh request id and a
//!   reply channel; the applier answers on that channel once the entry is applied, or the request
//!   times out with `etcdserver: request timed out`.
//! - linearizable reads → `ReadIndex` to the raft node (answered once this member has applied
//!   the confirmed index), then `Range` to the MVCC store; serializable reads go straight to the
//!   store. Reads never enter the log.
//! - Maintenance `Status`/`HashKV`/`Alarm` and Cluster `MemberList` read the raft node, the
//!   store and the static membership.
//!
//! ## Invariants
//! - Every error a client sees comes from `EtcdError::to_status` (etcd's codes and strings).
//! - Cheap validation (`actcd_types::validate`) runs before anything is sent on, so bad input never
//!   reaches raft.
//!
//! ## Layout
//! `pipeline.rs` the routes and the shared write/read paths · `kv.rs` KV · `maintenance.rs`
//! Maintenance · `cluster.rs` Cluster · `server.rs` assembling the tonic router.

mod cluster;
mod kv;
mod lease;
mod maintenance;
mod pipeline;
mod server;
mod watch;

pub use pipeline::{FrontConfig, MemberInfo, Pipeline, PipelineRoutes};
pub use server::{parse_url, serve};
