//! The cluster's membership as applied state (etcd's `membership.RaftCluster` backend half).
//!
//! Members live in the `members` table (key: the id in lower-case hex, as etcd's; value: an
//! encoded `etcdserverpb.Member`), removed ids in `members_removed` (value `removed`). Changes
//! are applied here, by the applier, in log order, so every member validates a change against
//! the same state and reaches the same answer; raft's configuration follows what is applied
//! here. Their writes go out as `Op`s that ride with the next `ApplyBatch`, into the backend
//! commit of a consistent index at or after the entry (as the alarms' do). Before the actors
//! start, the daemon loads this from a read transaction, checks that its member was not
//! removed, and records a new cluster's members by writing [`Membership::bootstrap`]'s ops
//! straight into the engine.

use std::collections::{BTreeMap, BTreeSet};

use actcd_proto::actcdpb::member_change::Kind;
use actcd_proto::actcdpb::{MemberAttributes, MemberChange};
use actcd_proto::etcdserverpb::Member;
use actcd_types::EtcdError;
use actcd_types::msg::{ConfChangeKind, MemberRecord};
use actcd_types::storage::{Op, ReadTxn, StorageError, Table};
use prost::Message;

/// etcd's default limit on learners in a cluster (`--max-learners`, etcd 3.6).
pub const DEFAULT_MAX_LEARNERS: usize = 1;

#[derive(Debug, Clone, PartialEq)]
pub struct Membership {
    members: BTreeMap<u64, MemberRecord>,
    removed: BTreeSet<u64>,
    /// `--max-learners` (etcd 3.6): learners the membership may hold.
    max_learners: usize,
}

impl Default for Membership {
    fn default() -> Self {
        Self {
            members: BTreeMap::new(),
            removed: BTreeSet::new(),
            max_learners: DEFAULT_MAX_LEARNERS,
        }
    }
}

/// What a change asks of raft's configuration once applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfOrder {
    pub kind: ConfChangeKind,
    pub node_id: u64,
    pub peer_urls: Vec<String>,
}

/// The outcome of one applied change: the member it concerns, and the order for raft (none for
/// a peer-URL update, which raft does not see).
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub member: MemberRecord,
    pub order: Option<ConfOrder>,
}

fn key(id: u64) -> Vec<u8> {
    format!("{id:x}").into_bytes()
}

fn to_pb(m: &MemberRecord) -> Member {
    Member {
        id: m.id,
        name: m.name.clone(),
        peer_ur_ls: m.peer_urls.clone(),
        client_ur_ls: m.client_urls.clone(),
        is_learner: m.is_learner,
    }
}

/// The record as the Cluster service sends it.
pub fn member_to_pb(m: &MemberRecord) -> Member {
    to_pb(m)
}

fn from_pb(m: Member) -> MemberRecord {
    MemberRecord {
        id: m.id,
        name: m.name,
        peer_urls: m.peer_ur_ls,
        client_urls: m.client_ur_ls,
        is_learner: m.is_learner,
    }
}

impl Membership {
    pub fn load<R: ReadTxn + ?Sized>(txn: &R) -> Result<Self, StorageError> {
        let mut out = Self::default();
        let mut bad = None;
        txn.scan(Table::Members, &[], None, &mut |k, v| {
            match Member::decode(v) {
                Ok(m) => {
                    out.members.insert(m.id, from_pb(m));
                }
                Err(e) => bad = Some(format!("member record {:?}: {e}", k)),
            }
            true
        })?;
        txn.scan(Table::MembersRemoved, &[], None, &mut |k, _| {
            if let Some(id) = std::str::from_utf8(k)
                .ok()
                .and_then(|s| u64::from_str_radix(s, 16).ok())
            {
                out.removed.insert(id);
            }
            true
        })?;
        match bad {
            Some(e) => Err(StorageError(e)),
            None => Ok(out),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// With `--max-learners` set to `max` (etcd 3.6; [`DEFAULT_MAX_LEARNERS`] otherwise).
    pub fn with_max_learners(mut self, max: usize) -> Self {
        self.max_learners = max;
        self
    }

    pub fn max_learners(&self) -> usize {
        self.max_learners
    }

    /// etcd 3.6's `ValidateMaxLearnerConfig` at start-up: a membership holding more learners
    /// than `--max-learners` allows is refused (a member restarted, or joining, with a lower
    /// limit than its cluster needs).
    pub fn check_max_learners(&self) -> Result<(), EtcdError> {
        if self.members.values().filter(|m| m.is_learner).count() > self.max_learners {
            return Err(EtcdError::TooManyLearners);
        }
        Ok(())
    }

    /// Every member, by id.
    pub fn list(&self) -> Vec<MemberRecord> {
        self.members.values().cloned().collect()
    }

    pub fn get(&self, id: u64) -> Option<&MemberRecord> {
        self.members.get(&id)
    }

    pub fn is_removed(&self, id: u64) -> bool {
        self.removed.contains(&id)
    }

    /// Records the initial members of a new cluster (or what a joining member fetched); the
    /// table writes are pushed onto `ops`.
    pub fn bootstrap(&mut self, members: Vec<MemberRecord>, ops: &mut Vec<Op>) {
        for m in members {
            self.save(ops, m);
        }
    }

    fn save(&mut self, ops: &mut Vec<Op>, m: MemberRecord) {
        ops.push(Op::Put {
            table: Table::Members,
            key: key(m.id),
            value: to_pb(&m).encode_to_vec().into(),
        });
        self.members.insert(m.id, m);
    }

    fn peer_urls_taken(&self, urls: &[String], except: u64) -> bool {
        self.members
            .values()
            .filter(|m| m.id != except)
            .any(|m| m.peer_urls.iter().any(|u| urls.contains(u)))
    }

    /// etcd's `ValidateConfigurationChange` followed by the change itself, its table writes
    /// pushed onto `ops`. An error is the client's answer, and then nothing changed.
    pub fn apply(
        &mut self,
        change: &MemberChange,
        ops: &mut Vec<Op>,
    ) -> Result<Applied, EtcdError> {
        let id = change.member_id;
        let kind = Kind::try_from(change.kind).unwrap_or(Kind::Add);
        if self.removed.contains(&id) {
            return Err(EtcdError::MemberRemoved);
        }
        let existing = self.members.get(&id).cloned();
        match (kind, existing) {
            (Kind::Add | Kind::AddLearner, Some(_)) => Err(EtcdError::MemberExist),
            (Kind::Add | Kind::AddLearner, None) => {
                let learner = kind == Kind::AddLearner;
                if self.peer_urls_taken(&change.peer_urls, 0) {
                    Err(EtcdError::PeerUrlExist)
                } else if learner
                    && self.members.values().filter(|m| m.is_learner).count() >= self.max_learners
                {
                    Err(EtcdError::TooManyLearners)
                } else {
                    let m = MemberRecord {
                        id,
                        peer_urls: change.peer_urls.clone(),
                        is_learner: learner,
                        ..Default::default()
                    };
                    self.save(ops, m.clone());
                    let kind = if learner {
                        ConfChangeKind::AddLearner
                    } else {
                        ConfChangeKind::AddVoter
                    };
                    Ok(Applied {
                        order: Some(ConfOrder {
                            kind,
                            node_id: id,
                            peer_urls: m.peer_urls.clone(),
                        }),
                        member: m,
                    })
                }
            }
            (_, None) => Err(EtcdError::MemberNotFound),
            (Kind::Remove, Some(m)) => {
                ops.push(Op::Delete {
                    table: Table::Members,
                    key: key(id),
                });
                ops.push(Op::Put {
                    table: Table::MembersRemoved,
                    key: key(id),
                    value: b"removed".as_slice().into(),
                });
                self.members.remove(&id);
                self.removed.insert(id);
                Ok(Applied {
                    order: Some(ConfOrder {
                        kind: ConfChangeKind::Remove,
                        node_id: id,
                        peer_urls: vec![],
                    }),
                    member: m,
                })
            }
            (Kind::Promote, Some(m)) if !m.is_learner => Err(EtcdError::MemberNotLearner),
            (Kind::Promote, Some(mut m)) => {
                m.is_learner = false;
                self.save(ops, m.clone());
                Ok(Applied {
                    order: Some(ConfOrder {
                        kind: ConfChangeKind::Promote,
                        node_id: id,
                        peer_urls: m.peer_urls.clone(),
                    }),
                    member: m,
                })
            }
            (Kind::Update, Some(mut m)) => {
                if self.peer_urls_taken(&change.peer_urls, id) {
                    Err(EtcdError::PeerUrlExist)
                } else {
                    m.peer_urls = change.peer_urls.clone();
                    self.save(ops, m.clone());
                    Ok(Applied {
                        order: None,
                        member: m,
                    })
                }
            }
        }
    }

    /// A started member's name and client URLs. Ignored for a member not (or no longer) in the
    /// cluster, as etcd does for a removed one.
    pub fn set_attributes(
        &mut self,
        attrs: &MemberAttributes,
        ops: &mut Vec<Op>,
    ) -> Option<MemberRecord> {
        let mut m = self.members.get(&attrs.member_id).cloned()?;
        m.name = attrs.name.clone();
        m.client_urls = attrs.client_urls.clone();
        self.save(ops, m.clone());
        Some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_types::storage::{KvEngine, MemEngine, write_ops};

    fn change(kind: Kind, id: u64, urls: &[&str]) -> MemberChange {
        MemberChange {
            kind: kind as i32,
            member_id: id,
            peer_urls: urls.iter().map(|u| u.to_string()).collect(),
        }
    }

    /// etcd 3.6's `--max-learners`: learner adds past the limit are refused, and a membership
    /// already past a lower limit is refused at start-up.
    #[test]
    fn max_learners_bounds_the_learners() {
        let mut ops = Vec::new();
        let mut m = Membership::default().with_max_learners(2);
        m.bootstrap(
            vec![MemberRecord {
                id: 1,
                peer_urls: vec!["http://a:2380".into()],
                ..Default::default()
            }],
            &mut ops,
        );
        for (id, want) in [
            (2, Ok(Some(ConfChangeKind::AddLearner))),
            (3, Ok(Some(ConfChangeKind::AddLearner))),
            (4, Err(EtcdError::TooManyLearners)),
        ] {
            let url = format!("http://{id}:2380");
            let got = m
                .apply(&change(Kind::AddLearner, id, &[url.as_str()]), &mut ops)
                .map(|a| a.order.map(|o| o.kind));
            assert_eq!(got, want, "learner {id}");
        }
        assert_eq!(m.check_max_learners(), Ok(()));
        let m = m.with_max_learners(1);
        assert_eq!(m.check_max_learners(), Err(EtcdError::TooManyLearners));
        assert_eq!(Membership::default().max_learners(), DEFAULT_MAX_LEARNERS);
    }

    #[test]
    fn changes_are_validated_as_etcd_validates_them() {
        let engine = MemEngine::default();
        let mut ops = Vec::new();
        let mut m = Membership::default();
        m.bootstrap(
            vec![MemberRecord {
                id: 1,
                name: "a".into(),
                peer_urls: vec!["http://a:2380".into()],
                ..Default::default()
            }],
            &mut ops,
        );
        struct Case {
            name: &'static str,
            change: MemberChange,
            want: Result<Option<ConfChangeKind>, EtcdError>,
        }
        let cases = [
            Case {
                name: "add a voter",
                change: change(Kind::Add, 2, &["http://b:2380"]),
                want: Ok(Some(ConfChangeKind::AddVoter)),
            },
            Case {
                name: "same id again",
                change: change(Kind::Add, 2, &["http://c:2380"]),
                want: Err(EtcdError::MemberExist),
            },
            Case {
                name: "a peer URL in use",
                change: change(Kind::AddLearner, 3, &["http://b:2380"]),
                want: Err(EtcdError::PeerUrlExist),
            },
            Case {
                name: "a learner",
                change: change(Kind::AddLearner, 3, &["http://c:2380"]),
                want: Ok(Some(ConfChangeKind::AddLearner)),
            },
            Case {
                name: "a second learner",
                change: change(Kind::AddLearner, 4, &["http://d:2380"]),
                want: Err(EtcdError::TooManyLearners),
            },
            Case {
                name: "promote a voter",
                change: change(Kind::Promote, 2, &[]),
                want: Err(EtcdError::MemberNotLearner),
            },
            Case {
                name: "promote the learner",
                change: change(Kind::Promote, 3, &[]),
                want: Ok(Some(ConfChangeKind::Promote)),
            },
            Case {
                name: "update to a taken URL",
                change: change(Kind::Update, 3, &["http://a:2380"]),
                want: Err(EtcdError::PeerUrlExist),
            },
            Case {
                name: "update",
                change: change(Kind::Update, 3, &["http://c2:2380"]),
                want: Ok(None),
            },
            Case {
                name: "remove",
                change: change(Kind::Remove, 2, &[]),
                want: Ok(Some(ConfChangeKind::Remove)),
            },
            // A removed id: "member not found" to gRPC clients, 410 Gone on the v2 API.
            Case {
                name: "remove again",
                change: change(Kind::Remove, 2, &[]),
                want: Err(EtcdError::MemberRemoved),
            },
            Case {
                name: "a removed id never comes back",
                change: change(Kind::Add, 2, &["http://e:2380"]),
                want: Err(EtcdError::MemberRemoved),
            },
            Case {
                name: "unknown member",
                change: change(Kind::Update, 9, &["http://z:2380"]),
                want: Err(EtcdError::MemberNotFound),
            },
            // etcd 3.6.1 (#20051): a promotion of a member that is not there (a log replayed
            // after --force-new-cluster removed it) panicked; here it is refused.
            Case {
                name: "promote an unknown member",
                change: change(Kind::Promote, 9, &[]),
                want: Err(EtcdError::MemberNotFound),
            },
            Case {
                name: "promote a removed member",
                change: change(Kind::Promote, 2, &[]),
                want: Err(EtcdError::MemberRemoved),
            },
        ];
        for c in cases {
            let before = (m.clone(), ops.len());
            let got = m
                .apply(&c.change, &mut ops)
                .map(|a| a.order.map(|o| o.kind));
            assert_eq!(got, c.want, "{}", c.name);
            if got.is_err() {
                assert_eq!(
                    (m.clone(), ops.len()),
                    before,
                    "{}: a refused change changes nothing",
                    c.name
                );
            }
        }
        let mut txn = engine.write().unwrap();
        write_ops(&mut *txn, &ops, None).unwrap();
        txn.commit().unwrap();
        let loaded = Membership::load(&*engine.read().unwrap()).unwrap();
        assert_eq!(loaded, m, "persisted as applied");
        let ids: Vec<_> = loaded.list().iter().map(|m| (m.id, m.is_learner)).collect();
        assert_eq!(ids, [(1, false), (3, false)]);
        assert_eq!(loaded.get(3).unwrap().peer_urls, ["http://c2:2380"]);
        assert!(loaded.is_removed(2));
    }

    #[test]
    fn attributes_are_published_for_members_only() {
        let mut ops = Vec::new();
        let mut m = Membership::default();
        m.bootstrap(
            vec![MemberRecord {
                id: 1,
                peer_urls: vec!["http://a:2380".into()],
                ..Default::default()
            }],
            &mut ops,
        );
        let attrs = |id| MemberAttributes {
            member_id: id,
            name: "a".into(),
            client_urls: vec!["http://a:2379".into()],
        };
        assert!(m.set_attributes(&attrs(1), &mut ops).is_some());
        let written = ops.len();
        assert!(m.set_attributes(&attrs(2), &mut ops).is_none());
        assert_eq!(ops.len(), written, "nothing written for a stranger");
        assert_eq!(m.get(1).unwrap().client_urls, ["http://a:2379"]);
        assert_eq!(m.list().len(), 1);
    }
}
