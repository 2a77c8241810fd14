//! # actcd — the daemon
//!
//! Parses etcd's flags (`config.rs`), recovers state from disk, starts the actors and wires them
//! together (`node.rs`), serves the client API, and shuts down in order on SIGINT/SIGTERM.
//!
//! ## Threads
//! - tokio multi-thread runtime: the gRPC front (tonic) and the signal handler;
//! - one actix System thread for preflight, the raft node and the applier. Each handler is
//!   short (the applier awaits the store without blocking), and sharing a thread turns two
//!   cross-thread hops per write into mailbox pushes: measured on 2 cores against a separate
//!   raft arbiter, a third fewer context switches per single-client put, p50 0.38 → 0.34 ms,
//!   and +10% put / +5% linearizable-range throughput at 100 clients;
//! - SyncArbiter threads for the blocking work: the WAL writer (fsync), the MVCC store (LMDB
//!   write transactions) and the backend (periodic LMDB sync).

mod config;
mod node;

use std::process::ExitCode;

use clap::Parser;

use crate::config::{Config, Flags};

/// gRPC and prost allocate and free many small buffers per request; with glibc's allocator that
/// showed as ~7% of server CPU under a range load (perf), mimalloc's thread-local caches cut it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn init_logging(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}

fn main() -> ExitCode {
    let flags = Flags::parse();
    init_logging(&flags.log_level);
    let config = match Config::try_from(flags) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::from(2);
        }
    };
    match node::run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
