//! [`Batch`]: the backend's one write transaction, kept open across [`Commit`]s and committed
//! per etcd's batching policy. Plain struct, no actix: [`crate::BackendActor`] is glue around
//! it. It must live on one thread (an LMDB write transaction begins and ends on the thread that
//! opened it), which is why the actor has a thread of its own.

use std::sync::Arc;
use std::time::Instant;

use actcd_types::msg::{Commit, DiskLatency};
use actcd_types::storage::{KvEngine, WriteTxn, write_ops};

use crate::engine::LmdbEngine;

/// etcd's backend batch limit: commit once this many ops are pending.
pub const MAX_PENDING_OPS: usize = 10_000;

/// Commit once this many key and value bytes are pending, whatever the count: LMDB keeps a
/// transaction's dirty pages in memory and refuses one that dirties too many.
pub const MAX_PENDING_BYTES: usize = 64 * 1024 * 1024;

/// The open write transaction and what it holds.
pub struct Batch {
    engine: Arc<LmdbEngine>,
    txn: Option<Box<dyn WriteTxn>>,
    ops: usize,
    bytes: usize,
    /// The last `Commit::seq` written into `txn`.
    seq: u64,
    max_ops: usize,
    max_bytes: usize,
    /// Set by the first failed write or commit: everything after is refused (a restart replays
    /// the WAL above the last committed consistent index).
    failed: Option<String>,
    commits: DiskLatency,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("open", &self.txn.is_some())
            .field("ops", &self.ops)
            .field("seq", &self.seq)
            .finish()
    }
}

impl Batch {
    pub fn new(engine: Arc<LmdbEngine>) -> Self {
        Self::with_limits(engine, MAX_PENDING_OPS, MAX_PENDING_BYTES)
    }

    /// [`Self::new`] with other commit thresholds (tests, benches).
    pub fn with_limits(engine: Arc<LmdbEngine>, max_ops: usize, max_bytes: usize) -> Self {
        Self {
            engine,
            txn: None,
            ops: 0,
            bytes: 0,
            seq: 0,
            max_ops: max_ops.max(1),
            max_bytes: max_bytes.max(1),
            failed: None,
            commits: DiskLatency::default(),
        }
    }

    pub fn engine(&self) -> &Arc<LmdbEngine> {
        &self.engine
    }

    /// Ops written since the last commit.
    pub fn pending_ops(&self) -> usize {
        self.ops
    }

    /// How long commits have taken.
    pub fn commit_stats(&self) -> DiskLatency {
        self.commits.clone()
    }

    /// The error that stopped the backend, if one did.
    pub fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    fn check(&self) -> Result<(), String> {
        match &self.failed {
            Some(e) => Err(format!("backend: stopped after an earlier failure: {e}")),
            None => Ok(()),
        }
    }

    fn fail(&mut self, e: String) -> String {
        // The open transaction may hold half a commit: drop it uncommitted.
        self.txn = None;
        self.failed.get_or_insert_with(|| e.clone());
        e
    }

    /// Writes `c` into the open transaction (beginning one); commits if the batch is full.
    /// Returns the seq a commit covered, if one happened.
    pub fn write(&mut self, c: &Commit) -> Result<Option<u64>, String> {
        self.check()?;
        let mut txn = match self.txn.take() {
            Some(t) => t,
            None => match Arc::clone(&self.engine).write_owned() {
                Ok(t) => t,
                Err(e) => return Err(self.fail(e.to_string())),
            },
        };
        if let Err(e) = write_ops(&mut *txn, &c.ops, c.consistent_index) {
            return Err(self.fail(e.to_string()));
        }
        self.txn = Some(txn);
        self.ops += c.ops.len().max(1);
        self.bytes += c.ops.iter().map(|o| o.bytes()).sum::<usize>();
        self.seq = self.seq.max(c.seq);
        if self.ops >= self.max_ops || self.bytes >= self.max_bytes {
            return self.commit();
        }
        Ok(None)
    }

    /// Commits the open transaction, if any; returns the seq it covered.
    pub fn commit(&mut self) -> Result<Option<u64>, String> {
        self.check()?;
        self.ops = 0;
        self.bytes = 0;
        let Some(txn) = self.txn.take() else {
            return Ok(None);
        };
        // `return`: the transaction is dropped uncommitted, as after a failed commit.
        #[cfg(feature = "failpoints")]
        fail::fail_point!("backend_before_commit", |_| Err(
            self.fail(injected("backend_before_commit"))
        ));
        let started = Instant::now();
        let done = txn.commit();
        self.commits.observe(started.elapsed().as_secs_f64());
        match done {
            Ok(()) => {
                #[cfg(feature = "failpoints")]
                if let Some(t) = self.engine.durable_after_commit() {
                    actcd_types::synclog::record(format_args!("lmdb {t}"));
                }
                // `return`: committed, yet reported as a failed commit.
                #[cfg(feature = "failpoints")]
                fail::fail_point!("backend_after_commit", |_| Err(
                    self.fail(injected("backend_after_commit"))
                ));
                Ok(Some(self.seq))
            }
            Err(e) => Err(self.fail(e.to_string())),
        }
    }

    /// Commits, then flushes every commit to stable storage.
    pub fn sync(&mut self) -> Result<Option<u64>, String> {
        let seq = self.commit()?;
        self.engine.force_sync().map_err(|e| e.to_string())?;
        Ok(seq)
    }
}

/// The error a failpoint's `return` stands for.
#[cfg(feature = "failpoints")]
fn injected(name: &str) -> String {
    format!("backend: lmdb: injected by failpoint {name}")
}
