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
//! - reads (Range, read-only Txn, watchers' `prev_kv`) are read here, in the RPC's own task,
//!   from the store's newest published read view (`KeyReads` in `PipelineRoutes::reads`): no
//!   mailbox, no thread hand-off. A linearizable one first asks the raft node for a `ReadIndex`,
//!   answered once the confirmed index is applied (the store publishes a batch's view before it
//!   reports the batch applied). Reads never enter the log. With auth on, a read is judged by
//!   the newest permission view after its barrier. Measured against the reader actor answering
//!   them (same runs, etcd 3.5.1 beside): serializable-range p99 while 100 clients put
//!   0.35 → 0.28 of etcd's, linearizable range throughput 1.91 → 2.02× etcd's.
//! - Lease (`grpc/lease.rs`): keepalives (answered in the RPC's own stream), TimeToLive and Leases
//!   ask the lessor; TimeToLive's keys come from the applier. On a follower the lessor answers
//!   `NotLeader` and the question goes to the leader through the transport (`LeaderCall`).
//!   Through an election keepalives and TimeToLive wait for the new leader and linearizable
//!   reads ask again, woken by the raft node's leader changes (`PipelineRoutes::leader`), up
//!   to the request timeout or the client's `grpc-timeout`.
//! - Streams the member ends at shutdown (watch, keepalive, observe) end `Unavailable`.
//! - Watch (`grpc/watch.rs`): one task per stream between the client and the watch hub
//!   (`actcd_types::watch`: `OpenStream`, `WatchRequestMsg`, `CloseStream`, answered with
//!   `StreamResponse`s); it adds the raft term and, for `prev_kv` watchers, each event's previous
//!   value read from the store. The gRPC method is served by a route of its own
//!   (`grpc/watch_route.rs`) whose codec writes the events the hub shares among watchers from the
//!   one shared copy, not a copy per watcher; the JSON gateway gets whole `WatchResponse`s.
//!   The streams take turns (`Pipeline::watch_turn`): one batch of at most 8 responses is
//!   forwarded at a time however many streams have some waiting, so a put's hops through the
//!   front wait behind one batch, not behind every stream's; a stream waits for room in its
//!   client's queue before it takes its turn, so a client that stops reading holds up nobody.
//!   Every 10 ms a turn first yields to the writes (a round trip through the raft node and the
//!   store, which brings the header), so watch output falls behind a busy write path and its
//!   watchers catch up from history in bulk, rather than taking the core from the writes.
//! - Maintenance `Status`/`HashKV` read the raft node and the store, and Status's `errors` (and
//!   `/health`) the applier's alarms (`GetAlarms`); `Alarm` goes through the log; `MoveLeader` asks
//!   the raft node to transfer leadership and waits until the target leads.
//! - Cluster (`grpc/cluster.rs`): membership changes are entries (adds, removals and promotions as
//!   raft conf changes) validated by the applier when applied; etcd's `--strict-reconfig-check`
//!   rules (started members, peer streams up 5 s, a learner in sync with the leader) are
//!   checked here first. `MemberList` reads the applier's applied members.
//! - Lock and Election (`grpc/lock.rs`, `grpc/election.rs`, over `grpc/concurrency.rs`): etcd's
//!   server-side mutex and leader election, each step an ordinary request made as the caller
//!   (txns on create revisions, linearizable reads, watches through the hub to wait for the
//!   deletion of the key ahead); a waiter whose caller goes away takes its key back. Errors go
//!   out as etcd's do there: code Unknown with etcd's text.
//! - CORRUPT: while the applier's published `CorruptFlag` says the alarm is raised, Range and
//!   read-only Txn (served here, never through the log) answer `etcdserver: corrupt cluster`,
//!   as the applier answers writes; etcd 3.5 still serves reads then, actcd serves no data a
//!   member may hold wrongly.
//! - Learners (`learner.rs`): a tower layer in front of every service refuses what etcd's
//!   learners refuse (all but Status and serializable Range).
//! - With auth on, what each route requires is one table (`actcd_authz::routes`, re-exported
//!   as `actcd_front::routes`), walked by the route audit test; the services enforce it, with
//!   current etcd's rules where they differ from 3.5.1's (SECURITY.md: lease calls, member list, Status and alarm lists for logged-in
//!   users, alarm changes and compaction for root, a lease's keys for its keepalive, its keys
//!   and the lease list).
//! - Auth (`grpc/auth.rs`): every call is an entry through the log, applied (and authorized) by the
//!   auth store actor; passwords are bcrypt-hashed by it (`HashPassword`, on its blocking pool)
//!   first. Authenticate has the auth store check the password (`CheckPassword`) and draft a
//!   simple token (`DraftToken`), proposes the login carrying it, and once the login applied
//!   at the auth revision the check read, answers that token or the JWT the store signs
//!   (`SignToken`).
//! - Identity (`authn.rs`): each request's caller comes from the authenticator chain — the
//!   `token` metadata, then a verified client certificate's common name, then HTTP Basic
//!   credentials the gateway checked. Writes carry it in the entry's header and are judged by
//!   the applier against the permission view at their point of the log. Reads, read-only txns,
//!   watch creates and admin-only calls are judged here against the newest view the auth store
//!   published (`AuthEvent::View`; `ConnectAuth`), with no message on the way. Callers are
//!   identified by the newest token book the store published (`AuthEvent::Tokens`); a use of a
//!   simple token is reported back (`TokenUsed`, no answer awaited) to restart its TTL. The
//!   front imports no actor crate for this: the view and the book are `actcd_types::auth`
//!   trait objects.
//! - HTTP/1.1 on the client port (`http/`): `/health`, etcd 3.6's `/livez` and `/readyz`
//!   (`http/health.rs`), `/version`, `/metrics` (`http/exposition.rs`: etcd's series, from front
//!   counters, status replies and the samples each actor returns with its mailbox probe), and
//!   etcd's JSON gateway (`http/gateway.rs`, also under `/v3beta/`; bodies decoded as etcd's Go
//!   gateway decodes them, by the `actcd-gojson` crate), which runs the same service code as
//!   gRPC behind the same learner gate.
//! - Old Go clients (the `actcd-h2authority` crate): every HTTP/2 connection is read through
//!   a layer that rewrites a URL `:authority` (etcdctl 3.4's maintenance calls send
//!   `http://host:port`, which h2 refuses) to its `host:port`, following the client's HPACK
//!   state.
//! - Maintenance's Snapshot asks the store for its chunks (`SnapshotStream` → `SnapshotChunks`:
//!   etcd's bbolt file in 32 KiB pieces, then its SHA-256, made on a blocking thread from a read
//!   transaction) and forwards them as they come; Defragment asks the store.
//!
//! ## Invariants
//! - The front speaks only messages: it depends on `actcd-types`, `actcd-proto` and plain
//!   libraries, never on an actor crate; every route is a `Recipient` handed in at start-up.
//! - Every error a client sees comes from `EtcdError::to_status` (etcd's codes and strings).
//! - A read is judged by a view at least as new as every auth change acknowledged before it
//!   began (the auth store queues the view before the applier answers the change; the gate
//!   reads its queue before each decision; a linearizable read is judged after its read index
//!   is applied). Writes are judged by the applier, never here.
//! - Cheap validation (`actcd_types::validate`) runs before anything is sent on, so bad input never
//!   reaches raft.
//! - Streams (Watch, LeaseKeepAlive, Observe, RangeStream) end themselves at shutdown
//!   (`Pipeline::close_streams`): tonic's graceful shutdown would otherwise wait for them.
//! - RangeStream (etcd 3.7, gRPC only: no gateway route) is checked like a Range once, then
//!   read chunk by chunk from the newest views by a producer task that holds nothing between
//!   chunks (`Pipeline::range_stream`; the chunks are the mvcc crate's).
//! - The gRPC Range is served by a route of its own in front of the generated KV server
//!   (`grpc/range_route.rs`): its codec writes an answer the store encoded from its records
//!   (`KeyReads::range_answer`) into tonic's buffer reserved at its exact length, and any
//!   other answer with prost as the generated method would; the other KV methods, and Range
//!   through the JSON gateway, are served as before.
//!
//! ## Layout
//! Floors, each importing only the ones below it (no file imports one above it, none of them
//! import each other in a circle):
//! - top: `server.rs` assembles the tonic router, the HTTP side and the listeners (each
//!   connection wrapped in the `actcd-h2authority` layer for old Go clients);
//! - the HTTP/1.1 side, `http/`: the router (`mod.rs`: `/health`, `/version`, access control),
//!   etcd's JSON gateway (`gateway.rs`: its routes; the wire, proto3 JSON as grpc-gateway writes
//!   it and bodies as Go decodes them, is `actcd-gojson`'s), the `/livez` and `/readyz` checks
//!   (`health.rs`), the `/metrics` page (`exposition.rs`: what it asks the actors; the text
//!   format, etcd's families and the process figures are `actcd-metrics`') and the v2 API
//!   (`v2/`; requests parsed by `actcd-v2tree`, auth decided by `actcd-v2auth`); it calls the
//!   gRPC services' code, so the gateway answers as gRPC does;
//! - the gRPC services, `grpc/`, a file each (its `mod.rs` lists them);
//! - the door to the actors, `pipeline/`: the `Pipeline` (`mod.rs`: identity, ids, headers,
//!   shutdown), what it is given (`config.rs`), `writes.rs`, `reads.rs`, `leader.rs`, and
//!   `guard.rs` (the checks current etcd added after 3.5.1: a logged-in user; the keys a lease
//!   holds);
//! - the ground: `authn.rs` the authenticator chain, `metrics.rs` the accounting layer (the
//!   tower layer with `learner.rs`'s gate; the per-method atomics, go-grpc-prometheus's families
//!   and the client byte counts are `actcd-metrics`'), `tls.rs` TLS on the client port and the
//!   client certificate's CN (the rustls configurations and Go's certificate rules are the
//!   `actcd-gotls` crate's), `socket.rs` the listeners. The authorization table (what every gRPC
//!   method, gateway path and HTTP route requires with auth on; the HTTP side serves nothing it
//!   lacks) is `actcd-authz`'s `routes`, re-exported here as `routes`; etcd 3.6 and 3.7's latency
//!   histograms are `actcd-metrics`' `durations`, re-exported as `durations`.
//!
//! A file's unit tests are its sibling `<file>_tests.rs` (`mod.rs`'s are `mod_tests.rs`),
//! included as its `tests` module by `#[path]`, as in actors/mvcc.

pub mod authn;
mod grpc;
pub mod http;
pub mod learner;
pub mod metrics;
mod pipeline;
mod server;
mod socket;
mod tls;

pub use actcd_authz::routes;
pub use actcd_metrics::durations;
pub use grpc::autopromote::run as auto_promote_learners;
pub use grpc::cluster::check_peer_urls;
pub use http::{exposition, gateway, health, v2};
pub use pipeline::{ActorProbe, FrontConfig, Pipeline, PipelineRoutes};
pub use server::{parse_url, serve, serve_metrics};
pub use socket::{ClientListener, Listening, Socket, Traffic};
pub use tls::{
    ClientTls, NOT_ALLOWED, PemInput, ServerCheck, TlsError, TlsOptions, check_client_san,
    client_common_name, client_config, server_config,
};
