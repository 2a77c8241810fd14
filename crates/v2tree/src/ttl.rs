//! The expiry index: every node with a TTL, ordered by expiry time (ties in
//! the order the TTLs were set).

use std::collections::BTreeSet;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TtlIndex {
    entries: BTreeSet<(i64, u64, String)>,
    next_seq: u64,
}

impl TtlIndex {
    /// Files `path` to expire at `at`; returns the tie-breaker to keep on
    /// the node.
    pub fn insert(&mut self, at: i64, path: &str) -> u64 {
        self.next_seq += 1;
        self.entries.insert((at, self.next_seq, path.to_owned()));
        self.next_seq
    }

    pub fn remove(&mut self, at: i64, seq: u64, path: &str) {
        self.entries.remove(&(at, seq, path.to_owned()));
    }

    /// The node that expires first.
    pub fn first(&self) -> Option<(i64, u64, &str)> {
        self.entries
            .first()
            .map(|(at, seq, p)| (*at, *seq, p.as_str()))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}
