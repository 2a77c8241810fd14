//! Request ids, unique across members and restarts the way etcd makes them: the top 16 bits are
//! the low bits of the member id, the next 40 bits a millisecond timestamp taken once at start-up,
//! the low 8 bits (and carries into the timestamp) a counter. Ids only need to be unique while a
//! request waits for its entry to be applied; the start-up timestamp keeps a restarted member from
//! reusing ids still in its log.

use std::sync::atomic::{AtomicU64, Ordering};

/// Shared by every request handler: the counter is atomic so handlers never wait on each other.
#[derive(Debug)]
pub struct IdGenerator {
    prefix: u64,
    suffix: AtomicU64,
}

const TS_LEN: u32 = 40;
const CNT_LEN: u32 = 8;
const SUFFIX_LEN: u32 = TS_LEN + CNT_LEN;

impl IdGenerator {
    /// `now_ms` is passed in (no wall clock in core logic): the daemon reads it once at start-up.
    pub fn new(member_id: u64, now_ms: u64) -> Self {
        let prefix = member_id << SUFFIX_LEN;
        let suffix = (now_ms & ((1 << TS_LEN) - 1)) << CNT_LEN;
        Self {
            prefix,
            suffix: AtomicU64::new(suffix),
        }
    }

    pub fn next(&self) -> u64 {
        let suffix = self.suffix.fetch_add(1, Ordering::Relaxed) + 1;
        self.prefix | (suffix & ((1 << SUFFIX_LEN) - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_and_carry_the_member() {
        let g = IdGenerator::new(0xabcd, 1_700_000_000_000);
        let a = g.next();
        let b = g.next();
        assert_ne!(a, b);
        assert_eq!(a >> SUFFIX_LEN, 0xabcd);
        let other = IdGenerator::new(0xabce, 1_700_000_000_000);
        assert_ne!(other.next(), a);
    }
}
