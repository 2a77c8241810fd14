//! One request's writes inside the batch's write transaction: Put and DeleteRange, the undo log
//! that takes a failed request back out, and the revision rules they share.
//!
//! A request that changes anything writes at main revision `begin_rev + 1`, its changes numbered
//! by `sub` = 0, 1, 2…; reads inside it see its earlier writes (revision `begin_rev + 1` once it
//! has changed something). Every record goes into the write transaction and every index change
//! into the undo log at once, so a request that fails half-way is rolled back by replaying the
//! log backwards: the revision keys it wrote were new, so deleting them restores the table.

use actcd_proto::etcdserverpb::{
    DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse, ResponseHeader,
};
use actcd_proto::mvccpb::event::EventType;
use actcd_proto::mvccpb::{Event, KeyValue};
use actcd_types::key_record;
use actcd_types::storage::{Table, WriteTxn};
use actcd_types::{EtcdError, Revision};

use crate::error::Error;
use crate::key_index::{KeyRange, TreeIndex, Undo};
use crate::ops::Tally;
use crate::range::View;

/// A header carrying only a revision: what etcd puts in responses nested in a Txn, and what
/// the store stamps with the member's identity for top-level responses.
pub(crate) fn rev_header(revision: i64) -> Option<ResponseHeader> {
    Some(ResponseHeader {
        revision,
        ..Default::default()
    })
}

/// Executes one request's operations against the batch's write transaction and the index.
pub(crate) struct Writer<'a, W: WriteTxn + ?Sized> {
    pub txn: &'a mut W,
    pub index: &'a mut TreeIndex,
    /// Every index change of the batch so far, oldest first.
    pub undo: &'a mut Vec<Undo>,
    /// The watch events of the batch so far: exactly one per entry of `undo`, in the same order,
    /// so a rollback takes both back together.
    pub events: &'a mut Vec<Event>,
    /// The store's revision before this request.
    pub begin_rev: i64,
    pub compact_rev: i64,
    /// Records this request has written so far (the next `sub`).
    pub changes: i64,
    /// The lease ids that exist, of those the batch's puts name (the applier's answer): a put
    /// naming another non-zero lease is refused.
    pub leases: &'a [i64],
    /// What etcd's write transaction for this request would count (`ops.rs`): its ranges,
    /// puts and deletes. A Txn's compares and checks come before, in `read_side`.
    pub tally: Tally,
    /// The calls of a Txn's read transaction (compares, `ignore_*` checks).
    pub read_side: Tally,
}

impl<'a, W: WriteTxn + ?Sized> Writer<'a, W> {
    /// A writer for the next request, at the store's revision `begin_rev`.
    pub fn new(
        txn: &'a mut W,
        index: &'a mut TreeIndex,
        undo: &'a mut Vec<Undo>,
        events: &'a mut Vec<Event>,
        leases: &'a [i64],
        begin_rev: i64,
        compact_rev: i64,
    ) -> Self {
        Writer {
            txn,
            index,
            undo,
            events,
            begin_rev,
            compact_rev,
            changes: 0,
            leases,
            tally: Tally::default(),
            read_side: Tally::default(),
        }
    }

    /// The revision reads see: the request's own once it has written something.
    pub fn read_rev(&self) -> i64 {
        self.begin_rev + i64::from(self.changes > 0)
    }

    pub fn view(&self) -> View<'_, W> {
        View {
            index: &*self.index,
            txn: &*self.txn,
            rev: self.read_rev(),
            compact_rev: self.compact_rev,
            concurrent: false,
        }
    }

    /// A top-level Put: the lease must exist (checked first, as etcd does), then [`Self::put`].
    pub fn apply_put(&mut self, req: PutRequest) -> Result<PutResponse, Error> {
        if req.lease != 0 && !self.leases.contains(&req.lease) {
            return Err(EtcdError::LeaseNotFound.into());
        }
        self.put(req)
    }

    /// Writes a new version of the key. `ignore_value`/`ignore_lease` take the current value or
    /// lease and need the key to exist now.
    pub fn put(&mut self, req: PutRequest) -> Result<PutResponse, Error> {
        let ignore = req.ignore_value || req.ignore_lease;
        let prev = if ignore || req.prev_kv {
            self.tally.range();
            self.view().get(&req.key)?
        } else {
            None
        };
        let (value, lease) = match &prev {
            None if ignore => return Err(EtcdError::KeyNotFound.into()),
            Some(p) => (
                if req.ignore_value {
                    p.value.clone()
                } else {
                    req.value
                },
                if req.ignore_lease { p.lease } else { req.lease },
            ),
            None => (req.value, req.lease),
        };

        let rev = Revision::new(self.begin_rev + 1, self.changes);
        // Indexed first (one lookup), so the undo log covers a record write that fails.
        let (undo, created, version) = self.index.put_stamped(&req.key, rev, lease);
        self.undo.push(undo);
        let kv = KeyValue {
            key: req.key,
            create_revision: created.main,
            mod_revision: rev.main,
            version,
            value,
            lease,
        };
        let at = rev.to_bytes(false);
        self.txn
            .put(Table::Key, &at, &key_record::encode(&at, &kv))?;
        self.tally.puts += 1;
        self.tally.put_bytes += (kv.key.len() + kv.value.len()) as u64;
        self.events.push(Event {
            r#type: EventType::Put as i32,
            kv: Some(kv),
            prev_kv: None,
        });
        self.changes += 1;
        Ok(PutResponse {
            header: rev_header(rev.main),
            prev_kv: prev.filter(|_| req.prev_kv),
        })
    }

    /// Deletes every live key in the range at one revision, one tombstone record each.
    pub fn delete_range(&mut self, req: DeleteRangeRequest) -> Result<DeleteRangeResponse, Error> {
        if req.prev_kv {
            self.tally.range();
        }
        self.tally.deletes += 1;
        let (keys, prev_kvs) = {
            let view = self.view();
            let live = self
                .index
                .range(KeyRange::new(&req.key, &req.range_end), view.rev);
            let prev_kvs = if req.prev_kv {
                live.iter()
                    .map(|(_, kr)| view.record(kr.modified))
                    .collect::<Result<_, _>>()?
            } else {
                Vec::new()
            };
            let keys: Vec<Vec<u8>> = live.into_iter().map(|(k, _)| k.to_vec()).collect();
            (keys, prev_kvs)
        };
        if keys.is_empty() {
            return Ok(DeleteRangeResponse {
                header: rev_header(self.read_rev()),
                deleted: 0,
                prev_kvs,
            });
        }
        let main = self.begin_rev + 1;
        let deleted = keys.len() as i64;
        for key in keys {
            let rev = Revision::new(main, self.changes);
            // etcd's tombstone record holds only the key (the revision is the record's own key);
            // keeping the same bytes keeps HashKV comparable with etcd's.
            let tombstone = KeyValue {
                key,
                ..Default::default()
            };
            let at = rev.to_bytes(true);
            self.txn
                .put(Table::Key, &at, &key_record::encode(&at, &tombstone))?;
            let undo = self
                .index
                .tombstone_logged(&tombstone.key, rev)
                .map_err(|e| Error::Corrupt(format!("{e} for a live key")))?;
            self.undo.push(undo);
            // etcd's delete event: the key and the deletion revision.
            self.events.push(Event {
                r#type: EventType::Delete as i32,
                kv: Some(KeyValue {
                    key: tombstone.key,
                    mod_revision: main,
                    ..Default::default()
                }),
                prev_kv: None,
            });
            self.changes += 1;
        }
        Ok(DeleteRangeResponse {
            header: rev_header(main),
            deleted,
            prev_kvs,
        })
    }

    /// Takes back every change logged after `mark`, in the index and in the write transaction.
    pub fn rollback_to(&mut self, mark: usize) -> Result<(), Error> {
        while self.undo.len() > mark {
            let Some(u) = self.undo.pop() else { break };
            self.index.undo(&u);
            self.events.pop();
            self.txn.delete(Table::Key, &u.rev.to_bytes(u.tombstone))?;
            self.changes -= 1;
        }
        Ok(())
    }
}
