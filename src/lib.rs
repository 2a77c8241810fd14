//! # actcd — one member, as a library
//!
//! The daemon (`src/main.rs`) is a thin shell over this: parse etcd's flags into a
//! [`config::Config`], then [`node::run`] until a signal. In-process benches and tests call
//! [`node::run_until`] with their own stop future.
//!
//! The flags are etcd 3.5.1's, each with its `ETCD_*` variable (`config.rs`, which also holds
//! the table of accepted-but-ignored flags); `config_file.rs` reads etcd's YAML config file
//! into the same flags and rewrites Go's single-dash spelling; `log_outputs.rs` is
//! `--log-outputs`; `listen.rs` opens the listeners (`--socket-reuse-port`); `local_addr.rs`
//! picks the address peer connections leave from (`SetMemberLocalAddr`).
//!
//! ## Threads
//! - one actix System thread for preflight, the raft node, the WAL writer, the applier and the
//!   lessor. Each handler is short (the applier awaits the store without blocking; the WAL
//!   writer fsyncs only one- and two-entry Readies here), and sharing a thread turns
//!   cross-thread hops into mailbox pushes: measured on 2 cores against a separate raft
//!   arbiter, a third fewer context switches per single-client put, p50 0.38 → 0.34 ms, and
//!   +10% put / +5% linearizable-range throughput at 100 clients;
//! - the gRPC front (tonic): on machines with up to 2 cores it runs on that same System
//!   thread (requests reach preflight, raft and the lessor as mailbox pushes; see
//!   `node::front_threads` for the measurements), otherwise on a tokio runtime with all cores
//!   but two; `ACTCD_FRONT_THREADS` overrides; `ACTCD_FRONT_HELPERS` adds threads that
//!   accept on the same listeners beside the shared thread (`wiring::front_helpers`: the
//!   member then grows with cores, at a cost per request measured there);
//! - a thread each for the blocking or bulky work: the WAL writer's fsyncs of Readies of three
//!   or more entries and its releases (a tokio blocking-pool thread, to which the WAL actor
//!   lends its `Wal`; it fsyncs smaller Readies in place), the MVCC store and the MVCC reader
//!   (with more than 2 cores; on 2 they share the System thread with the front, unless
//!   `ACTCD_READER_THREAD` gives the reader its own), the v2 store (likewise: beside the front
//!   on 2 cores, `ACTCD_V2_THREAD` gives it its own; it applies v2 entries whether or not
//!   `--enable-v2` serves the API), the backend (the environment's
//!   only writer: batched LMDB commits, syncs, defragmentation), the auth store (view builds,
//!   bcrypt on its blocking pool) and the watch hub (fan-out);
//! - the main thread waits for a signal.
//!
//! A panic ends the member with exit 2 (`main.rs`), as a Go panic ends etcd.
//!
//! ## Time and shutdown
//! - `ticker.rs`: one actor sends every periodic message (raft's tick, the lessor's, the
//!   auto-compactor's, the backend batch flush and sync, the v2 store's expiry sync) at its
//!   period; no other code in the
//!   member reads the clock to drive an actor.
//! - `supervisor.rs`: the only place the actors' System is stopped. An actor's fatal error
//!   arrives as a typed `Fatal` message (a backend failure as `BackendFailed`, a removal from
//!   the cluster as `Shutdown`); the member then stops serving clients, drains the store's
//!   buffered writes into the backend, stops its actors, syncs the backend, and
//!   [`node::run_until`] returns the error, so the daemon exits 1 as etcd does.
//!
//! ## Wiring
//! `wiring.rs` starts the actors, one small builder per subsystem (leases, auth store, storage,
//! watch hub, consensus, apply, admission, ticks, routes). Every mailbox in a cycle is made
//! first, so each actor starts once with all its peers; which thread each runs on is decided
//! there and nowhere else. `node.rs` recovers the state the actors start from (backend, key
//! index, auth, alarms, WAL, raft node) and serves the client side. `allocator.rs` gives
//! freed memory back to the system where mimalloc alone would keep it: once recovery is done,
//! and every second from a thread of its own (its doc says why and what it measured).

pub mod allocator;
pub mod config;
pub mod config_file;
pub mod listen;
pub mod local_addr;
pub mod log_outputs;
pub mod logging;
pub mod node;
mod serve;
pub mod snapshot;
pub mod supervisor;
pub mod ticker;
pub mod tls_config;
mod wiring;
