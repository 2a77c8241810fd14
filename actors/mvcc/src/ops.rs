//! etcd's counters of key-space operations: `etcd_mvcc_range_total` (and its twin
//! `etcd_debugging_mvcc_range_total`), `etcd_mvcc_put_total`, `etcd_mvcc_delete_total`,
//! `etcd_mvcc_txn_total` and `etcd_debugging_mvcc_total_put_size_in_bytes`, counted as etcd
//! counts them (`server/mvcc/metrics_txn.go`, the same in 3.5 and 3.6): per call of its mvcc
//! transaction's `Range`, `Put` and `DeleteRange`, summed when the transaction ends, a "txn"
//! being any mvcc transaction that made more than one of those calls. So, as in etcd:
//! - a Range request is one range (also one that fails as compacted or future), a DeleteRange
//!   one delete however many keys it deletes (none too), a Put one put (its size the key and
//!   the value written, `ignore_value` taking the old one);
//! - `prev_kv`, `ignore_value` and `ignore_lease` each cost a Put or DeleteRange a range
//!   first, which makes it a txn;
//! - a Txn request is two mvcc transactions when it may write (`isWrite`: any op in any branch
//!   writes): the read one evaluates the compares (one range each, stopping at the first
//!   false, nested txns' on the chosen path too) and checks the chosen puts (a range each with
//!   `ignore_value`/`ignore_lease`), then the write one runs the chosen ops; a read-only Txn is
//!   one transaction doing both;
//! - a lease revoke is one transaction of one delete per key; a compaction reads the current
//!   revision with a range (`applierV3backend.Compaction`);
//! - a watch filling `prev_kv` reads each event's previous version with a range.
//!
//! The counters are shared by the store (applies) and its read views (reads served beside
//! it): relaxed atomics, added to once per request.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The calls one etcd mvcc transaction makes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    pub ranges: u64,
    pub puts: u64,
    pub deletes: u64,
    pub put_bytes: u64,
}

impl Tally {
    pub fn range(&mut self) {
        self.ranges += 1;
    }
}

/// The totals, as `/metrics` shows them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OpCounts {
    pub ranges: u64,
    pub puts: u64,
    pub deletes: u64,
    pub txns: u64,
    pub put_bytes: u64,
}

#[derive(Debug, Default)]
pub struct OpCounters {
    ranges: AtomicU64,
    puts: AtomicU64,
    deletes: AtomicU64,
    txns: AtomicU64,
    put_bytes: AtomicU64,
}

impl OpCounters {
    /// One mvcc transaction ended having made `t`'s calls (etcd's `metricsTxnWrite.End`).
    pub(crate) fn end(&self, t: Tally) {
        if t.ranges + t.puts + t.deletes > 1 {
            self.txns.fetch_add(1, Relaxed);
        }
        for (c, n) in [
            (&self.ranges, t.ranges),
            (&self.puts, t.puts),
            (&self.deletes, t.deletes),
            (&self.put_bytes, t.put_bytes),
        ] {
            if n > 0 {
                c.fetch_add(n, Relaxed);
            }
        }
    }

    pub fn counts(&self) -> OpCounts {
        OpCounts {
            ranges: self.ranges.load(Relaxed),
            puts: self.puts.load(Relaxed),
            deletes: self.deletes.load(Relaxed),
            txns: self.txns.load(Relaxed),
            put_bytes: self.put_bytes.load(Relaxed),
        }
    }
}

#[cfg(test)]
#[path = "ops_tests.rs"]
mod tests;
