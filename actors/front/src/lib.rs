//! # actcd-front — etcd's v3 gRPC services
//!
//! Owns the request-id generator, the routes into the actor pipeline, and a 10 ms cache of the
//! response header for keepalives. Each gRPC service is one file that turns a request into
//! messages and a reply into etcd's response:
//!
//! - writes (Put, DeleteRange, Txn, Compact, LeaseGrant, LeaseRevoke) → `Submit` to preflight
//!   with a fresh request id and a reply channel, sent without waiting for the handler; every
//!   outcome (a refusal, or the store's answer once the entry is applied) arrives on that channel,
//!   or the request times out with `etcdserver: request timed out`.
//! - linearizable reads → `LinearizableRange` (a `RangeTo` with a reply channel) to the raft
//!   node, which forwards the `RangeTo` to the store once the confirmed index is applied; the
//!   store answers the front.
//!   Serializable reads go straight to the store. Reads never enter the log.
//! - Lease (`lease.rs`): keepalives (answered in the RPC's own stream), TimeToLive and Leases
//!   ask the lessor; TimeToLive's keys come from the store. On a follower the lessor answers
//!   `NotLeader` and the question goes to the leader through the transport (`LeaderCall`).
//! - Watch (`watch.rs`): one task per stream between the client and the watch hub; it adds the
//!   raft term and, for `prev_kv` watchers, each event's previous value read from the store.
//! - Maintenance `Status`/`HashKV`/`Alarm` read the raft node and the store; `MoveLeader` asks
//!   the raft node to transfer leadership and waits until the target leads.
//! - Cluster (`cluster.rs`): membership changes are entries (adds, removals and promotions as
//!   raft conf changes) validated by the store when applied; etcd's `--strict-reconfig-check`
//!   rules (started members, peer streams up 5 s, a learner in sync with the leader) are
//!   checked here first. `MemberList` reads the store's applied members.
//! - Lock and Election (`lock.rs`, `election.rs`, over `concurrency.rs`): etcd's
//!   server-side mutex and leader election, each step an ordinary request made as the caller
//!   (txns on create revisions, linearizable reads, watches through the hub to wait for the
//!   deletion of the key ahead); a waiter whose caller goes away takes its key back. Errors go
//!   out as etcd's do there: code Unknown with etcd's text.
//! - Learners (`learner.rs`): a tower layer in front of every service refuses what etcd's
//!   learners refuse (all but Status and serializable Range).
//! - Auth (`auth.rs`): every call is an entry through the log, applied (and authorized) by the
//!   store's auth state; passwords are bcrypt-hashed on the blocking pool first. Authenticate
//!   checks the password here against the store's hash, proposes the login, and issues the
//!   token once it applied at the auth revision the check read.
//! - Identity (`authn.rs`): each request's caller comes from the authenticator chain — the
//!   `token` metadata, then a verified client certificate's common name, then HTTP Basic
//!   credentials the gateway checked — and rides with the request (in the entry's header for
//!   writes, in the message for reads) to be checked by the store when the request runs. Watch
//!   creates are checked for read permission first.
//! - HTTP/1.1 on the client port (`http.rs`): `/health`, `/livez`, `/readyz`, `/version`,
//!   `/metrics` (with each actor's mailbox, probed through it), and etcd's JSON gateway
//!   (`gateway.rs`, refusing what etcd's Go decoder refuses: `gojson.rs`), which runs the same
//!   service code as gRPC behind the same learner gate.
//! - Maintenance's Snapshot streams the store as an etcd bbolt file from a read transaction
//!   the store hands out (`OpenStoreReader`), on a blocking thread; Defragment asks the store.
//!
//! ## Invariants
//! - Every error a client sees comes from `EtcdError::to_status` (etcd's codes and strings).
//! - The front never decides a permission itself: it names the caller, and the store decides
//!   against the auth state in force when the request runs.
//! - Cheap validation (`actcd_types::validate`) runs before anything is sent on, so bad input never
//!   reaches raft.
//! - Streams (Watch, LeaseKeepAlive, Observe) end themselves at shutdown (`Pipeline::close_streams`):
//!   tonic's graceful shutdown would otherwise wait for them.
//!
//! ## Layout
//! `pipeline.rs` the routes and the shared write/read paths · `kv.rs` KV · `lease.rs` Lease ·
//! `watch.rs` Watch · `maintenance.rs` Maintenance · `cluster.rs` Cluster · `server.rs`
//! assembling the tonic router · `tls.rs` TLS on the client port and the client certificate's CN
//! · `learner.rs` what a learner serves · `lock.rs`, `election.rs`, `concurrency.rs` Lock and
//! Election · `http.rs`, `gateway.rs`, `gojson.rs` HTTP and the JSON gateway · `metrics.rs` the
//! accounting layer and client byte counts · `auth.rs` Auth · `authn.rs` the authenticator
//! chain.

mod auth;
pub mod authn;
mod cluster;
pub mod concurrency;
pub mod election;
pub mod gateway;
mod gojson;
pub mod http;
mod kv;
pub mod learner;
mod lease;
pub mod lock;
mod maintenance;
pub mod metrics;
mod pipeline;
mod server;
mod tls;
mod watch;

pub use cluster::check_peer_urls;
pub use pipeline::{ActorProbe, FrontConfig, Pipeline, PipelineRoutes};
pub use server::{parse_url, serve, serve_metrics};
pub use tls::{ClientTls, PemInput, TlsError, client_common_name};
