//! The lease each live key's latest record names (the `lease` field of its `KeyValue`), so
//! that every applied batch can say how its writes changed it ([`LeaseAttachment`]s, for the
//! applier, which owns the leases and the keys attached to them). This is key-space data
//! only: whether a lease exists, its TTL and its table are not known here.
//!
//! Only keys whose latest record names a non-zero lease are held, so a store without leased
//! keys pays one lookup in an empty map per record written. Rebuilt from the `key` table on
//! open; a batch's changes are taken back (newest first) if the batch fails.

use std::collections::HashMap;

use actcd_proto::mvccpb::Event;
use actcd_proto::mvccpb::event::EventType;
use actcd_types::msg::LeaseAttachment;

#[derive(Debug, Default)]
pub(crate) struct LeasedKeys {
    /// Key → the non-zero lease its latest record names.
    map: HashMap<Vec<u8>, i64>,
}

impl LeasedKeys {
    /// At open: `map` holds the lease of each key's latest record (live, non-zero only).
    pub(crate) fn restored(map: HashMap<Vec<u8>, i64>) -> Self {
        Self { map }
    }

    /// Follows one applied event: a Put names its record's lease, a Delete leaves none. A
    /// change is appended to `out`.
    pub(crate) fn track(&mut self, event: &Event, out: &mut Vec<LeaseAttachment>) {
        let Some(kv) = &event.kv else { return };
        let new_lease = if event.r#type == EventType::Put as i32 {
            kv.lease
        } else {
            0
        };
        let old_lease = self.map.get(&kv.key).copied().unwrap_or(0);
        if old_lease == new_lease {
            return;
        }
        self.set(&kv.key, new_lease);
        out.push(LeaseAttachment {
            key: kv.key.clone(),
            old_lease,
            new_lease,
        });
    }

    /// Takes `changes` back, newest first.
    pub(crate) fn undo(&mut self, changes: &[LeaseAttachment]) {
        for c in changes.iter().rev() {
            self.set(&c.key, c.old_lease);
        }
    }

    fn set(&mut self, key: &[u8], lease: i64) {
        if lease == 0 {
            self.map.remove(key);
        } else {
            self.map.insert(key.to_vec(), lease);
        }
    }

    /// Every leased key with its lease, sorted by key.
    pub(crate) fn list(&self) -> Vec<(Vec<u8>, i64)> {
        let mut v: Vec<_> = self.map.iter().map(|(k, &l)| (k.clone(), l)).collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_proto::mvccpb::KeyValue;

    fn event(t: EventType, key: &[u8], lease: i64) -> Event {
        Event {
            r#type: t as i32,
            kv: Some(KeyValue {
                key: key.to_vec(),
                lease,
                ..Default::default()
            }),
            prev_kv: None,
        }
    }

    fn change(key: &[u8], old_lease: i64, new_lease: i64) -> LeaseAttachment {
        LeaseAttachment {
            key: key.to_vec(),
            old_lease,
            new_lease,
        }
    }

    #[test]
    fn events_report_lease_changes_and_undo_takes_them_back() {
        let mut l = LeasedKeys::default();
        let mut out = Vec::new();
        for ev in [
            event(EventType::Put, b"a", 1),
            event(EventType::Put, b"b", 0),
            event(EventType::Put, b"a", 1),
            event(EventType::Put, b"c", 2),
        ] {
            l.track(&ev, &mut out);
        }
        assert_eq!(out, vec![change(b"a", 0, 1), change(b"c", 0, 2)]);
        let mark = out.len();
        for ev in [
            event(EventType::Put, b"a", 2),
            event(EventType::Delete, b"c", 0),
            event(EventType::Delete, b"b", 0),
            event(EventType::Put, b"b", 0),
        ] {
            l.track(&ev, &mut out);
        }
        assert_eq!(out[mark..], [change(b"a", 1, 2), change(b"c", 2, 0)]);
        assert_eq!(l.list(), vec![(b"a".to_vec(), 2)]);
        l.undo(&out[mark..]);
        assert_eq!(l.list(), vec![(b"a".to_vec(), 1), (b"c".to_vec(), 2)]);
    }
}
