//! Leases in the applied state: which leases exist, the TTL each was granted, its last
//! checkpointed remaining TTL, and the keys attached to it. Changed only by applied entries
//! (LeaseGrant, LeaseRevoke, LeaseCheckpoint, and every Put/Delete through the events it makes),
//! so every member agrees on it. Time is not here: the lessor actor times leases and proposes
//! revokes; this module only records what the log decided.
//!
//! On disk: the `lease` table maps the lease id (8-byte big-endian) to an encoded etcd
//! `leasepb.Lease{ID = 1, TTL = 2, RemainingTTL = 3}`, written in the same transaction as the
//! batch that changed it. Attachments are not stored: each key's latest record names its lease,
//! so they are rebuilt from the `key` table on open.

use std::collections::{BTreeSet, HashMap};

use actcd_proto::mvccpb::Event;
use actcd_proto::mvccpb::event::EventType;
use actcd_types::EtcdError;
use actcd_types::storage::{ReadTxn, Table, WriteTxn};
use prost::Message;

use crate::error::Error;

/// etcd's `MaxLeaseTTL`: about 285 years.
pub const MAX_LEASE_TTL: i64 = 9_000_000_000;

/// etcd's `leasepb.Lease`, the `lease` table's record.
#[derive(Clone, PartialEq, prost::Message)]
struct LeaseRecord {
    #[prost(int64, tag = "1")]
    id: i64,
    #[prost(int64, tag = "2")]
    ttl: i64,
    #[prost(int64, tag = "3")]
    remaining_ttl: i64,
}

/// One lease as the log left it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lease {
    /// Granted TTL in seconds (at least the minimum).
    pub ttl: i64,
    /// Last checkpointed remaining TTL in seconds; 0 = never checkpointed (a full `ttl`).
    pub remaining_ttl: i64,
    pub keys: BTreeSet<Vec<u8>>,
}

/// What a lease change in a batch did, for the lessor to hear about once it is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseNote {
    Granted {
        id: i64,
        ttl: i64,
        remaining_ttl: i64,
    },
    Revoked {
        id: i64,
    },
    Checkpointed {
        id: i64,
        remaining_ttl: i64,
    },
}

/// One in-memory change, to take back if the batch holding it fails.
#[derive(Debug)]
pub(crate) enum LeaseUndo {
    Granted(i64),
    Removed(i64, Lease),
    Checkpointed(i64, i64),
    /// `key` moved from `prev` to whatever it is attached to now.
    Attached {
        key: Vec<u8>,
        prev: Option<i64>,
    },
}

#[derive(Debug, Default)]
pub struct Leases {
    leases: HashMap<i64, Lease>,
    /// Key → the lease it is attached to (keys without a lease are absent).
    key_lease: HashMap<Vec<u8>, i64>,
    /// Granted TTLs below this are raised to it (etcd's `minLeaseTTL`).
    min_ttl: i64,
}

fn lease_key(id: i64) -> [u8; 8] {
    id.to_be_bytes()
}

impl Leases {
    /// Reads the `lease` table; attachments come later with [`Self::restore_attachment`].
    pub(crate) fn load<R: ReadTxn + ?Sized>(txn: &R) -> Result<Self, Error> {
        let mut leases = HashMap::new();
        let mut failed = None;
        txn.scan(
            Table::Lease,
            &[],
            None,
            &mut |_, v| match LeaseRecord::decode(v) {
                Ok(r) => {
                    leases.insert(
                        r.id,
                        Lease {
                            ttl: r.ttl,
                            remaining_ttl: r.remaining_ttl,
                            keys: BTreeSet::new(),
                        },
                    );
                    true
                }
                Err(e) => {
                    failed = Some(Error::Corrupt(format!("lease record: {e}")));
                    false
                }
            },
        )?;
        match failed {
            Some(e) => Err(e),
            None => Ok(Self {
                leases,
                ..Self::default()
            }),
        }
    }

    pub(crate) fn min_ttl(&self) -> i64 {
        self.min_ttl
    }

    pub(crate) fn set_min_ttl(&mut self, secs: i64) {
        self.min_ttl = secs.max(1);
    }

    /// At open: `key`'s latest record names `id`. A lease that no longer exists (etcd logs
    /// and carries on here too) leaves the key unattached.
    pub(crate) fn restore_attachment(&mut self, key: Vec<u8>, id: i64) {
        if let Some(l) = self.leases.get_mut(&id) {
            l.keys.insert(key.clone());
            self.key_lease.insert(key, id);
        } else {
            tracing::warn!(lease = id, "a key names a lease that does not exist");
        }
    }

    pub fn exists(&self, id: i64) -> bool {
        self.leases.contains_key(&id)
    }

    pub fn get(&self, id: i64) -> Option<&Lease> {
        self.leases.get(&id)
    }

    pub fn len(&self) -> usize {
        self.leases.len()
    }

    pub fn is_empty(&self) -> bool {
        self.leases.is_empty()
    }

    /// Every lease as the lessor must hear of it at start-up.
    pub fn notes(&self) -> Vec<LeaseNote> {
        let mut v: Vec<_> = self
            .leases
            .iter()
            .map(|(&id, l)| LeaseNote::Granted {
                id,
                ttl: l.ttl,
                remaining_ttl: l.remaining_ttl,
            })
            .collect();
        v.sort_by_key(|n| match n {
            LeaseNote::Granted { id, .. } => *id,
            _ => 0,
        });
        v
    }

    /// etcd's `Lessor.Grant` checks, in its order; returns the TTL granted.
    pub(crate) fn grant<W: WriteTxn + ?Sized>(
        &mut self,
        txn: &mut W,
        undo: &mut Vec<LeaseUndo>,
        id: i64,
        ttl: i64,
    ) -> Result<i64, Error> {
        if id == 0 {
            return Err(EtcdError::LeaseNotFound.into());
        }
        if ttl > MAX_LEASE_TTL {
            return Err(EtcdError::LeaseTtlTooLarge.into());
        }
        if self.leases.contains_key(&id) {
            return Err(EtcdError::LeaseExists.into());
        }
        let ttl = ttl.max(self.min_ttl);
        let lease = Lease {
            ttl,
            remaining_ttl: 0,
            keys: BTreeSet::new(),
        };
        persist(txn, id, &lease)?;
        self.leases.insert(id, lease);
        undo.push(LeaseUndo::Granted(id));
        Ok(ttl)
    }

    /// The keys to delete for a revoke, sorted; `LeaseNotFound` if there is no such lease.
    pub(crate) fn keys_of(&self, id: i64) -> Result<Vec<Vec<u8>>, EtcdError> {
        self.leases
            .get(&id)
            .map(|l| l.keys.iter().cloned().collect())
            .ok_or(EtcdError::LeaseNotFound)
    }

    /// Drops the lease (its keys must already be deleted, which detached them).
    pub(crate) fn remove<W: WriteTxn + ?Sized>(
        &mut self,
        txn: &mut W,
        undo: &mut Vec<LeaseUndo>,
        id: i64,
    ) -> Result<(), Error> {
        txn.delete(Table::Lease, &lease_key(id))?;
        if let Some(l) = self.leases.remove(&id) {
            for k in &l.keys {
                self.key_lease.remove(k);
            }
            undo.push(LeaseUndo::Removed(id, l));
        }
        Ok(())
    }

    /// Records a checkpointed remaining TTL; a lease that is gone is skipped, as in etcd.
    pub(crate) fn checkpoint<W: WriteTxn + ?Sized>(
        &mut self,
        txn: &mut W,
        undo: &mut Vec<LeaseUndo>,
        id: i64,
        remaining_ttl: i64,
    ) -> Result<bool, Error> {
        let Some(l) = self.leases.get_mut(&id) else {
            return Ok(false);
        };
        let prev = std::mem::replace(&mut l.remaining_ttl, remaining_ttl);
        let l = l.clone();
        persist(txn, id, &l)?;
        undo.push(LeaseUndo::Checkpointed(id, prev));
        Ok(true)
    }

    /// Follows one applied event: a Put attaches its key to the lease it names (moving it off
    /// any other), a Delete detaches it.
    pub(crate) fn track(&mut self, event: &Event, undo: &mut Vec<LeaseUndo>) {
        let Some(kv) = &event.kv else { return };
        let now = if event.r#type == EventType::Put as i32 && kv.lease != 0 {
            Some(kv.lease)
        } else {
            None
        };
        let prev = self.key_lease.get(&kv.key).copied();
        if prev == now {
            return;
        }
        self.move_key(&kv.key, prev, now);
        undo.push(LeaseUndo::Attached {
            key: kv.key.clone(),
            prev,
        });
    }

    fn move_key(&mut self, key: &[u8], from: Option<i64>, to: Option<i64>) {
        if let Some(l) = from.and_then(|id| self.leases.get_mut(&id)) {
            l.keys.remove(key);
        }
        match to.and_then(|id| self.leases.get_mut(&id).map(|l| (id, l))) {
            Some((id, l)) => {
                l.keys.insert(key.to_vec());
                self.key_lease.insert(key.to_vec(), id);
            }
            None => {
                self.key_lease.remove(key);
            }
        }
    }

    pub(crate) fn undo(&mut self, u: LeaseUndo) {
        match u {
            LeaseUndo::Granted(id) => {
                self.leases.remove(&id);
            }
            LeaseUndo::Removed(id, l) => {
                for k in &l.keys {
                    self.key_lease.insert(k.clone(), id);
                }
                self.leases.insert(id, l);
            }
            LeaseUndo::Checkpointed(id, prev) => {
                if let Some(l) = self.leases.get_mut(&id) {
                    l.remaining_ttl = prev;
                }
            }
            LeaseUndo::Attached { key, prev } => {
                let now = self.key_lease.get(&key).copied();
                self.move_key(&key, now, prev);
            }
        }
    }
}

fn persist<W: WriteTxn + ?Sized>(txn: &mut W, id: i64, l: &Lease) -> Result<(), Error> {
    let rec = LeaseRecord {
        id,
        ttl: l.ttl,
        remaining_ttl: l.remaining_ttl,
    };
    txn.put(Table::Lease, &lease_key(id), &rec.encode_to_vec())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_proto::mvccpb::KeyValue;
    use actcd_types::storage::{KvEngine, MemEngine};

    fn put_event(key: &[u8], lease: i64) -> Event {
        Event {
            r#type: EventType::Put as i32,
            kv: Some(KeyValue {
                key: key.to_vec(),
                lease,
                ..Default::default()
            }),
            prev_kv: None,
        }
    }

    fn delete_event(key: &[u8]) -> Event {
        Event {
            r#type: EventType::Delete as i32,
            kv: Some(KeyValue {
                key: key.to_vec(),
                ..Default::default()
            }),
            prev_kv: None,
        }
    }

    fn keys(l: &Leases, id: i64) -> Vec<&[u8]> {
        l.get(id)
            .map(|l| l.keys.iter().map(Vec::as_slice).collect())
            .unwrap_or_default()
    }

    #[test]
    fn grant_checks_in_etcds_order_and_raises_the_minimum() {
        let engine = MemEngine::new();
        let mut txn = engine.write().unwrap();
        let mut l = Leases::default();
        l.set_min_ttl(2);
        let mut undo = Vec::new();
        struct Case {
            id: i64,
            ttl: i64,
            want: Result<i64, EtcdError>,
        }
        let cases = [
            Case {
                id: 0,
                ttl: 5,
                want: Err(EtcdError::LeaseNotFound),
            },
            Case {
                id: 7,
                ttl: MAX_LEASE_TTL + 1,
                want: Err(EtcdError::LeaseTtlTooLarge),
            },
            Case {
                id: 7,
                ttl: 1,
                want: Ok(2),
            },
            Case {
                id: 7,
                ttl: 10,
                want: Err(EtcdError::LeaseExists),
            },
            Case {
                id: 8,
                ttl: 30,
                want: Ok(30),
            },
        ];
        for c in cases {
            let got = l
                .grant(&mut *txn, &mut undo, c.id, c.ttl)
                .map_err(EtcdError::from);
            assert_eq!(got, c.want, "grant {} ttl {}", c.id, c.ttl);
        }
        txn.commit().unwrap();
        let loaded = Leases::load(&*engine.read().unwrap()).unwrap();
        assert_eq!(loaded.get(7).map(|l| l.ttl), Some(2));
        assert_eq!(loaded.get(8).map(|l| l.ttl), Some(30));
    }

    #[test]
    fn events_move_keys_between_leases_and_undo_restores_them() {
        let engine = MemEngine::new();
        let mut txn = engine.write().unwrap();
        let mut l = Leases::default();
        let mut undo = Vec::new();
        l.grant(&mut *txn, &mut undo, 1, 10).unwrap();
        l.grant(&mut *txn, &mut undo, 2, 10).unwrap();
        l.track(&put_event(b"a", 1), &mut undo);
        l.track(&put_event(b"b", 1), &mut undo);
        assert_eq!(keys(&l, 1), vec![b"a".as_slice(), b"b"]);

        let mark = undo.len();
        l.track(&put_event(b"a", 2), &mut undo);
        l.track(&delete_event(b"b"), &mut undo);
        l.track(&put_event(b"c", 0), &mut undo);
        assert_eq!(keys(&l, 1), Vec::<&[u8]>::new());
        assert_eq!(keys(&l, 2), vec![b"a".as_slice()]);

        for u in undo.drain(mark..).rev() {
            l.undo(u);
        }
        assert_eq!(keys(&l, 1), vec![b"a".as_slice(), b"b"]);
        assert_eq!(keys(&l, 2), Vec::<&[u8]>::new());
    }

    #[test]
    fn remove_and_checkpoint_persist_and_undo() {
        let engine = MemEngine::new();
        let mut txn = engine.write().unwrap();
        let mut l = Leases::default();
        let mut undo = Vec::new();
        l.grant(&mut *txn, &mut undo, 1, 10).unwrap();
        l.track(&put_event(b"a", 1), &mut undo);
        assert!(l.checkpoint(&mut *txn, &mut undo, 1, 4).unwrap());
        assert!(!l.checkpoint(&mut *txn, &mut undo, 9, 4).unwrap());
        txn.commit().unwrap();
        assert_eq!(
            Leases::load(&*engine.read().unwrap())
                .unwrap()
                .get(1)
                .map(|l| l.remaining_ttl),
            Some(4)
        );

        let mut txn = engine.write().unwrap();
        let mark = undo.len();
        l.remove(&mut *txn, &mut undo, 1).unwrap();
        assert!(!l.exists(1));
        for u in undo.drain(mark..).rev() {
            l.undo(u);
        }
        assert_eq!(keys(&l, 1), vec![b"a".as_slice()]);
        // A put that moves the key must find it attached again.
        l.track(&delete_event(b"a"), &mut undo);
        assert_eq!(keys(&l, 1), Vec::<&[u8]>::new());
    }
}
