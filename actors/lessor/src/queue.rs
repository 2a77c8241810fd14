//! [`DeadlineQueue`]: an indexed priority queue of lease ids by deadline.
//!
//! A `BTreeSet<(Instant, id)>` ordered by deadline, and a `HashMap` from id to the deadline it
//! is filed under, which is the position index: moving or removing a lease finds its entry by
//! key in O(log n), and the earliest deadlines come off the front in O(log n) each.
//!
//! Why not a binary heap with a position array (etcd's `LeaseQueue`, Xline's)? The standard
//! heap has no decrease-key, so it would be hand-written index bookkeeping; the B-tree gives the
//! same bounds with none of it, breaks ties by id so every run (and every test) sees the same
//! order, and iterates in deadline order, which the lease list wants. The heap's advantage,
//! fewer cache misses per operation, doesn't matter at a few renewals per lease per TTL.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

#[derive(Debug, Default)]
pub(crate) struct DeadlineQueue {
    order: BTreeSet<(Instant, i64)>,
    at: HashMap<i64, Instant>,
}

impl DeadlineQueue {
    /// Files `id` under `deadline`, moving it if it was already queued.
    pub(crate) fn set(&mut self, id: i64, deadline: Instant) {
        if let Some(old) = self.at.insert(id, deadline) {
            self.order.remove(&(old, id));
        }
        self.order.insert((deadline, id));
    }

    /// Takes `id` out of the queue; a no-op if it isn't there.
    pub(crate) fn remove(&mut self, id: i64) {
        if let Some(old) = self.at.remove(&id) {
            self.order.remove(&(old, id));
        }
    }

    /// Removes and returns the earliest entry if its deadline is at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, i64)> {
        let &(deadline, id) = self.order.first()?;
        if deadline > now {
            return None;
        }
        self.order.pop_first();
        self.at.remove(&id);
        Some((deadline, id))
    }

    /// The deadline `id` is filed under.
    #[cfg(test)]
    pub(crate) fn get(&self, id: i64) -> Option<Instant> {
        self.at.get(&id).copied()
    }

    pub(crate) fn clear(&mut self) {
        self.order.clear();
        self.at.clear();
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.at.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn pops_due_entries_in_deadline_then_id_order() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut q = DeadlineQueue::default();
        q.set(3, t0 + s(2));
        q.set(1, t0 + s(5));
        q.set(2, t0 + s(2));
        q.set(4, t0 + s(9));
        q.set(1, t0 + s(1)); // moved earlier
        q.remove(4);
        q.remove(42); // never queued

        assert_eq!(q.len(), 3);
        assert_eq!(q.get(1), Some(t0 + s(1)));
        let mut popped = Vec::new();
        while let Some((_, id)) = q.pop_due(t0 + s(3)) {
            popped.push(id);
        }
        assert_eq!(popped, vec![1, 2, 3]);
        assert_eq!(q.len(), 0);
        assert_eq!(q.get(4), None);
    }

    #[test]
    fn nothing_due_before_the_earliest_deadline() {
        let t0 = Instant::now();
        let mut q = DeadlineQueue::default();
        q.set(7, t0 + Duration::from_millis(10));
        assert_eq!(q.pop_due(t0), None);
        assert_eq!(
            q.pop_due(t0 + Duration::from_millis(10)),
            Some((t0 + Duration::from_millis(10), 7)),
            "a deadline equal to now is due"
        );
        q.set(8, t0);
        q.clear();
        assert_eq!(q.pop_due(t0 + Duration::from_secs(60)), None);
        assert_eq!(q.len(), 0);
    }
}
