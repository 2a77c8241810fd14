//! The leases of the applied state (etcd's lessor without its clock): which leases exist, the
//! TTL each was granted, its last checkpointed remaining TTL, and the keys attached to it.
//! LeaseGrant, LeaseRevoke and LeaseCheckpoint entries are applied here, by the applier, in
//! log order, so every member agrees; the lessor actor only keeps time and hears what was
//! applied (`LeaseGranted`, `LeaseRevoked`, `LeaseCheckpointed`).
//!
//! Attachments follow the key space: the MVCC store reports, with each applied batch, how its
//! writes changed the lease each key's latest record names (`LeaseAttachment`s), and
//! [`Leases::follow`] applies them; at start-up and after a snapshot is installed they are
//! rebuilt from the store's live leased keys ([`Leases::attach_all`]). A key naming a lease
//! that does not exist stays unattached (etcd logs and carries on too).
//!
//! On disk: the `lease` table maps the lease id (8-byte big-endian) to an encoded etcd
//! `leasepb.Lease{ID = 1, TTL = 2, RemainingTTL = 3}`. Changes go out as `Op`s that ride with
//! the next `ApplyBatch` (or the revoke's `DeleteKeys`), into the backend commit of a
//! consistent index at or after their entry. Attachments are not stored.

use std::collections::{BTreeSet, HashMap};

use actcd_types::EtcdError;
use actcd_types::msg::{LeaseAttachment, LeaseGranted};
use actcd_types::storage::{Op, ReadTxn, Table};
use prost::Message;

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
    /// The keys attached, sorted (a revoke deletes them in this order).
    pub keys: BTreeSet<Vec<u8>>,
}

#[derive(Debug, Default)]
pub struct Leases {
    leases: HashMap<i64, Lease>,
    /// Key → the lease it is attached to (keys without a lease are absent).
    key_lease: HashMap<Vec<u8>, i64>,
    /// Granted TTLs below this are raised to it (etcd's `minLeaseTTL`).
    min_ttl: i64,
}

fn lease_key(id: i64) -> Vec<u8> {
    id.to_be_bytes().to_vec()
}

impl Leases {
    /// Reads the `lease` table; attachments come with [`Self::attach_all`].
    pub fn load<R: ReadTxn + ?Sized>(txn: &R) -> Result<Self, EtcdError> {
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
                    failed = Some(EtcdError::internal(format!("lease record: {e}")));
                    false
                }
            },
        )
        .map_err(EtcdError::internal)?;
        match failed {
            Some(e) => Err(e),
            None => Ok(Self {
                leases,
                ..Self::default()
            }),
        }
    }

    pub fn min_ttl(&self) -> i64 {
        self.min_ttl
    }

    /// etcd's minimum lease TTL (seconds): grants below it are raised to it.
    pub fn set_min_ttl(&mut self, secs: i64) {
        self.min_ttl = secs.max(1);
    }

    /// Attaches each key to the lease its latest record names (`(key, lease)` as the store
    /// lists its live leased keys).
    pub fn attach_all(&mut self, keys: Vec<(Vec<u8>, i64)>) {
        for (key, id) in keys {
            if let Some(l) = self.leases.get_mut(&id) {
                l.keys.insert(key.clone());
                self.key_lease.insert(key, id);
            } else {
                tracing::warn!(lease = id, "a key names a lease that does not exist");
            }
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

    /// Every lease as the lessor must hear of it (at start-up, after a snapshot), by id.
    pub fn granted(&self) -> Vec<LeaseGranted> {
        let mut v: Vec<_> = self
            .leases
            .iter()
            .map(|(&id, l)| LeaseGranted {
                id,
                ttl: l.ttl,
                remaining_ttl: l.remaining_ttl,
            })
            .collect();
        v.sort_by_key(|g| g.id);
        v
    }

    /// etcd's `Lessor.Grant` checks, in its order.
    pub fn check_grant(&self, id: i64, ttl: i64) -> Result<(), EtcdError> {
        if id == 0 {
            return Err(EtcdError::LeaseNotFound);
        }
        if ttl > MAX_LEASE_TTL {
            return Err(EtcdError::LeaseTtlTooLarge);
        }
        if self.leases.contains_key(&id) {
            return Err(EtcdError::LeaseExists);
        }
        Ok(())
    }

    /// [`Self::check_grant`], then the grant; returns the TTL granted.
    pub fn grant(&mut self, id: i64, ttl: i64, ops: &mut Vec<Op>) -> Result<i64, EtcdError> {
        self.check_grant(id, ttl)?;
        let ttl = ttl.max(self.min_ttl);
        let lease = Lease {
            ttl,
            remaining_ttl: 0,
            keys: BTreeSet::new(),
        };
        persist(ops, id, &lease);
        self.leases.insert(id, lease);
        Ok(ttl)
    }

    /// The keys attached to the lease, sorted; `LeaseNotFound` if there is no such lease.
    pub fn keys_of(&self, id: i64) -> Result<Vec<Vec<u8>>, EtcdError> {
        self.leases
            .get(&id)
            .map(|l| l.keys.iter().cloned().collect())
            .ok_or(EtcdError::LeaseNotFound)
    }

    /// Drops the lease and its attachments (the caller deletes its keys at the same point of
    /// the log); `LeaseNotFound` if there is no such lease.
    pub fn revoke(&mut self, id: i64, ops: &mut Vec<Op>) -> Result<(), EtcdError> {
        let l = self.leases.remove(&id).ok_or(EtcdError::LeaseNotFound)?;
        for k in &l.keys {
            self.key_lease.remove(k);
        }
        ops.push(Op::Delete {
            table: Table::Lease,
            key: lease_key(id),
        });
        Ok(())
    }

    /// Records a checkpointed remaining TTL; a lease that is gone is skipped (`false`), as in
    /// etcd.
    pub fn checkpoint(&mut self, id: i64, remaining_ttl: i64, ops: &mut Vec<Op>) -> bool {
        let Some(l) = self.leases.get_mut(&id) else {
            return false;
        };
        l.remaining_ttl = remaining_ttl;
        persist(ops, id, l);
        true
    }

    /// Follows what a batch did to the lease each written key's record names.
    pub fn follow(&mut self, changes: &[LeaseAttachment]) {
        for c in changes {
            let from = self.key_lease.remove(&c.key);
            if let Some(l) = from.and_then(|id| self.leases.get_mut(&id)) {
                l.keys.remove(&c.key);
            }
            if let Some(l) = self.leases.get_mut(&c.new_lease) {
                l.keys.insert(c.key.clone());
                self.key_lease.insert(c.key.clone(), c.new_lease);
            }
        }
    }
}

fn persist(ops: &mut Vec<Op>, id: i64, l: &Lease) {
    let rec = LeaseRecord {
        id,
        ttl: l.ttl,
        remaining_ttl: l.remaining_ttl,
    };
    ops.push(Op::Put {
        table: Table::Lease,
        key: lease_key(id),
        value: rec.encode_to_vec().into(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_types::storage::{KvEngine, MemEngine, write_ops};

    fn change(key: &[u8], old_lease: i64, new_lease: i64) -> LeaseAttachment {
        LeaseAttachment {
            key: key.to_vec(),
            old_lease,
            new_lease,
        }
    }

    fn keys(l: &Leases, id: i64) -> Vec<&[u8]> {
        l.get(id)
            .map(|l| l.keys.iter().map(Vec::as_slice).collect())
            .unwrap_or_default()
    }

    /// The leases `ops` leave in a fresh table.
    fn reload(ops: &[Op]) -> Leases {
        let engine = MemEngine::new();
        let mut txn = engine.write().unwrap();
        write_ops(&mut *txn, ops, None).unwrap();
        txn.commit().unwrap();
        Leases::load(&*engine.read().unwrap()).unwrap()
    }

    #[test]
    fn grant_checks_in_etcds_order_and_raises_the_minimum() {
        let mut l = Leases::default();
        l.set_min_ttl(2);
        let mut ops = Vec::new();
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
            let got = l.grant(c.id, c.ttl, &mut ops);
            assert_eq!(got, c.want, "grant {} ttl {}", c.id, c.ttl);
        }
        let loaded = reload(&ops);
        assert_eq!(loaded.get(7).map(|l| l.ttl), Some(2));
        assert_eq!(loaded.get(8).map(|l| l.ttl), Some(30));
        assert_eq!(
            loaded.granted().iter().map(|g| g.id).collect::<Vec<_>>(),
            vec![7, 8]
        );
    }

    #[test]
    fn attachment_changes_move_keys_between_leases() {
        let mut l = Leases::default();
        let mut ops = Vec::new();
        l.grant(1, 10, &mut ops).unwrap();
        l.grant(2, 10, &mut ops).unwrap();
        l.follow(&[change(b"a", 0, 1), change(b"b", 0, 1)]);
        assert_eq!(keys(&l, 1), vec![b"a".as_slice(), b"b"]);
        // A key naming a lease that does not exist stays unattached.
        l.follow(&[change(b"a", 1, 2), change(b"b", 1, 0), change(b"c", 0, 9)]);
        assert_eq!(keys(&l, 1), Vec::<&[u8]>::new());
        assert_eq!(keys(&l, 2), vec![b"a".as_slice()]);
        assert_eq!(l.keys_of(9), Err(EtcdError::LeaseNotFound));

        let mut fresh = reload(&ops);
        fresh.attach_all(vec![(b"a".to_vec(), 2), (b"z".to_vec(), 5)]);
        assert_eq!(keys(&fresh, 2), vec![b"a".as_slice()]);
    }

    #[test]
    fn revoke_and_checkpoint_persist() {
        let mut l = Leases::default();
        let mut ops = Vec::new();
        l.grant(1, 10, &mut ops).unwrap();
        l.grant(2, 10, &mut ops).unwrap();
        l.follow(&[change(b"a", 0, 1)]);
        assert!(l.checkpoint(1, 4, &mut ops));
        assert!(!l.checkpoint(9, 4, &mut ops));
        assert_eq!(reload(&ops).get(1).map(|l| l.remaining_ttl), Some(4));

        assert_eq!(l.keys_of(1), Ok(vec![b"a".to_vec()]));
        l.revoke(1, &mut ops).unwrap();
        assert!(!l.exists(1));
        assert_eq!(l.revoke(1, &mut ops), Err(EtcdError::LeaseNotFound));
        let loaded = reload(&ops);
        assert!(!loaded.exists(1) && loaded.exists(2));
        // The key left with its lease: a later write of it moves nothing.
        l.follow(&[change(b"a", 1, 0)]);
        assert_eq!(keys(&l, 2), Vec::<&[u8]>::new());
    }
}
