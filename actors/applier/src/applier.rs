//! Step one of the chain: skip what the backend already holds, decode the rest, and pair each
//! request with its waiter. Also the registries (waiters by id) and the applied index.

use std::collections::HashMap;

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_types::EtcdError;
use actcd_types::msg::{ApplyResult, CommittedEntry, EntryKind};
use prost::Message;
use tokio::sync::oneshot;

/// One committed request and whoever waits for its answer.
#[derive(Debug)]
pub struct Item {
    pub index: u64,
    pub term: u64,
    pub request: InternalRaftRequest,
    pub reply: Option<oneshot::Sender<ApplyResult>>,
}

/// One Apply's worth of work for the rest of the chain.
#[derive(Debug)]
pub struct Prepared {
    pub items: Vec<Item>,
    pub last_index: u64,
    pub last_term: u64,
}

#[derive(Debug, Default)]
pub struct Applier {
    consistent_index: u64,
    applied: u64,
    waiters: HashMap<u64, oneshot::Sender<ApplyResult>>,
}

impl Applier {
    /// `consistent_index`: the last index the backend holds, read at start-up.
    pub fn new(consistent_index: u64) -> Self {
        Self {
            consistent_index,
            applied: consistent_index,
            ..Default::default()
        }
    }

    pub fn applied(&self) -> u64 {
        self.applied
    }

    pub fn register(&mut self, id: u64, reply: oneshot::Sender<ApplyResult>) {
        self.waiters.insert(id, reply);
    }

    /// The request's proposal failed: its waiter gets `error`.
    pub fn cancel(&mut self, id: u64, error: EtcdError) {
        if let Some(w) = self.waiters.remove(&id) {
            let _ = w.send(Err(error));
        }
    }

    /// Turns committed entries into a store batch, skipping what the backend already holds.
    /// `None` when every entry was skipped.
    pub fn prepare(&mut self, entries: Vec<CommittedEntry>) -> Option<Prepared> {
        let last = entries.last()?;
        let (last_index, last_term) = (last.index, last.term);
        if last_index <= self.consistent_index {
            self.mark_applied(last_index);
            return None;
        }
        let mut items = Vec::with_capacity(entries.len());
        for e in entries {
            if e.index <= self.consistent_index
                || e.kind == EntryKind::ConfChangeV2
                || e.data.is_empty()
            {
                continue;
            }
            match InternalRaftRequest::decode(e.data.as_slice()) {
                Ok(request) => {
                    let id = request.header.as_ref().map_or(0, |h| h.id);
                    items.push(Item {
                        index: e.index,
                        term: e.term,
                        request,
                        reply: self.waiters.remove(&id),
                    });
                }
                // Only this server's own proposals are in the log; an undecodable one is a bug,
                // and skipping it on every member keeps them in agreement.
                Err(err) => tracing::error!(index = e.index, %err, "undecodable raft entry"),
            }
        }
        Some(Prepared {
            items,
            last_index,
            last_term,
        })
    }

    /// Records a batch as applied (the store has answered its waiters).
    pub fn complete(&mut self, last_index: u64) {
        self.consistent_index = last_index;
        self.mark_applied(last_index);
    }

    /// The store was replaced by a snapshot covering `consistent_index`: entries up to it are
    /// in it and are skipped from now on.
    pub fn installed(&mut self, consistent_index: u64) {
        self.consistent_index = consistent_index;
        self.mark_applied(consistent_index);
    }

    fn mark_applied(&mut self, index: u64) {
        self.applied = self.applied.max(index);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_proto::actcdpb::RequestHeader;
    use actcd_proto::etcdserverpb::PutRequest;
    use actcd_types::msg::ApplyResponse;

    fn entry(index: u64, id: u64) -> CommittedEntry {
        let req = InternalRaftRequest {
            header: Some(RequestHeader {
                id,
                ..Default::default()
            }),
            put: Some(PutRequest {
                key: b"k".to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        };
        CommittedEntry {
            index,
            term: 1,
            kind: EntryKind::Normal,
            data: req.encode_to_vec(),
        }
    }

    #[test]
    fn skips_entries_at_or_below_the_consistent_index() {
        struct Case {
            name: &'static str,
            consistent: u64,
            entries: Vec<CommittedEntry>,
            want_ids: Option<Vec<u64>>,
            want_applied: u64,
        }
        let empty = |i| CommittedEntry {
            index: i,
            term: 1,
            kind: EntryKind::Normal,
            data: vec![],
        };
        let cases = vec![
            Case {
                name: "all new",
                consistent: 0,
                entries: vec![entry(1, 10), entry(2, 11)],
                want_ids: Some(vec![10, 11]),
                want_applied: 0,
            },
            Case {
                name: "some old",
                consistent: 1,
                entries: vec![entry(1, 10), entry(2, 11)],
                want_ids: Some(vec![11]),
                want_applied: 1,
            },
            Case {
                name: "all old",
                consistent: 5,
                entries: vec![entry(4, 10), entry(5, 11)],
                want_ids: None,
                want_applied: 5,
            },
            Case {
                name: "empty entries carry no request",
                consistent: 0,
                entries: vec![empty(1), entry(2, 7)],
                want_ids: Some(vec![7]),
                want_applied: 0,
            },
        ];
        for c in cases {
            let mut a = Applier::new(c.consistent);
            let p = a.prepare(c.entries);
            let ids = p.as_ref().map(|p| {
                p.items
                    .iter()
                    .map(|i| i.request.header.as_ref().map_or(0, |h| h.id))
                    .collect::<Vec<_>>()
            });
            assert_eq!(ids, c.want_ids, "{}", c.name);
            assert_eq!(a.applied(), c.want_applied.max(c.consistent), "{}", c.name);
        }
    }

    #[test]
    fn hands_each_request_its_waiter_by_id() {
        let mut a = Applier::new(0);
        let (tx1, mut rx1) = oneshot::channel();
        let (tx2, mut rx2) = oneshot::channel();
        a.register(10, tx1);
        a.register(11, tx2);
        a.cancel(11, EtcdError::NoLeader);
        assert_eq!(rx2.try_recv().unwrap(), Err(EtcdError::NoLeader));
        let p = a
            .prepare(vec![entry(1, 10), entry(2, 11), entry(3, 12)])
            .unwrap();
        let slots: Vec<bool> = p.items.iter().map(|i| i.reply.is_some()).collect();
        assert_eq!(
            slots,
            [true, false, false],
            "10 waits; 11 cancelled; 12 never registered"
        );
        let mut items = p.items;
        let _ = items[0]
            .reply
            .take()
            .unwrap()
            .send(Ok(ApplyResponse::Empty));
        assert_eq!(rx1.try_recv().unwrap(), Ok(ApplyResponse::Empty));
        a.complete(p.last_index);
        assert_eq!(a.applied(), 3);
        assert!(
            a.prepare(vec![entry(3, 12)]).is_none(),
            "applied entries are skipped"
        );
    }
}
