//! Which lease each live key's latest record names, and how a batch's writes change that
//! ([`LeaseAttachment`]s, for the applier, which owns the leases and the keys attached to
//! them). This is key-space data only: whether a lease exists, its TTL and its table are not
//! known here.
//!
//! The lease itself is kept in the key index ([`crate::KeyIndex::lease`]), set by the put
//! that writes the record and cleared by a tombstone, so there is no second map of leased
//! keys: a change is read off each write's undo entry (the lease before) and its event (the
//! lease after), and taking a write back through the undo log puts the old lease back with
//! the rest of the key's index. Rebuilt from the `key` table on open with the index.

use actcd_proto::mvccpb::Event;
use actcd_proto::mvccpb::event::EventType;
use actcd_types::msg::LeaseAttachment;

use crate::key_index::{TreeIndex, Undo};

/// Appends to `out` the lease change of each write of one request: `undo` and `events` are
/// that request's undo entries and events, one each per write, in the same order.
pub(crate) fn track(undo: &[Undo], events: &[Event], out: &mut Vec<LeaseAttachment>) {
    debug_assert_eq!(undo.len(), events.len(), "one undo entry per event");
    for (u, event) in undo.iter().zip(events) {
        let Some(kv) = &event.kv else { continue };
        let new_lease = if event.r#type == EventType::Put as i32 {
            kv.lease
        } else {
            0
        };
        if u.prev_lease != new_lease {
            out.push(LeaseAttachment {
                key: kv.key.clone(),
                old_lease: u.prev_lease,
                new_lease,
            });
        }
    }
}

/// Every live key whose latest record names a lease, with it, sorted by key.
pub(crate) fn list(index: &TreeIndex) -> Vec<(Vec<u8>, i64)> {
    index.leased().map(|(k, l)| (k.to_vec(), l)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_proto::mvccpb::KeyValue;
    use actcd_types::Revision;

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

    /// Applies `writes` (key, lease; `None`: delete) at `rev`, `rev + 1`, … as the writer
    /// does, tracking lease changes into `out`; returns the undo entries.
    fn apply(
        index: &mut TreeIndex,
        rev: &mut i64,
        writes: &[(&[u8], Option<i64>)],
        out: &mut Vec<LeaseAttachment>,
    ) -> Vec<Undo> {
        let mut undo = Vec::new();
        let mut events = Vec::new();
        for &(key, lease) in writes {
            let at = Revision::new(*rev, 0);
            *rev += 1;
            match lease {
                Some(lease) => {
                    undo.push(index.put_stamped(key, at, lease).0);
                    events.push(event(EventType::Put, key, lease));
                }
                None => {
                    undo.push(index.tombstone_logged(key, at).expect("live"));
                    events.push(event(EventType::Delete, key, 0));
                }
            }
        }
        track(&undo, &events, out);
        undo
    }

    #[test]
    fn writes_report_lease_changes_and_undo_takes_them_back() {
        let mut index = TreeIndex::new();
        let mut rev = 2;
        let mut out = Vec::new();
        apply(
            &mut index,
            &mut rev,
            &[
                (b"a", Some(1)),
                (b"b", Some(0)),
                (b"a", Some(1)),
                (b"c", Some(2)),
            ],
            &mut out,
        );
        assert_eq!(out, vec![change(b"a", 0, 1), change(b"c", 0, 2)]);
        let before = index.clone();
        let mark = out.len();
        let undo = apply(
            &mut index,
            &mut rev,
            &[(b"a", Some(2)), (b"c", None), (b"b", None), (b"b", Some(0))],
            &mut out,
        );
        assert_eq!(out[mark..], [change(b"a", 1, 2), change(b"c", 2, 0)]);
        assert_eq!(list(&index), vec![(b"a".to_vec(), 2)]);
        for u in undo.iter().rev() {
            index.undo(u);
        }
        assert_eq!(list(&index), vec![(b"a".to_vec(), 1), (b"c".to_vec(), 2)]);
        assert_eq!(index, before);
    }
}
