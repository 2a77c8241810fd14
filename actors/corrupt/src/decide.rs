//! Who is corrupt: etcd 3.5's rules as plain functions over the hashes gathered (no I/O, no
//! time), so every rule is tested by a table.

use actcd_types::EtcdError;
use actcd_types::msg::MemberHash;

/// A peer and what it answered when asked for its hash.
pub type PeerAnswer = (u64, Result<MemberHash, EtcdError>);

/// What one peer's answer says about this member's data at start-up (etcd's `InitialCheck`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitialVerdict {
    /// Same hash.
    Agrees,
    /// Same revision hashed, same compaction, another hash: the data differ.
    Mismatch,
    /// Another hash, but the peer compacted at another revision: nothing can be said.
    OtherCompaction,
    /// The peer has not reached this member's revision yet (skipped, as etcd does).
    PeerBehind,
    /// The peer compacted past this member's revision (skipped).
    LocalBehind,
    /// The peer could not be asked (skipped).
    Unreachable(String),
}

/// etcd's initial check of one peer's answer against this member's own hash `local`, taken at
/// the revision the peer was asked about.
pub fn initial(local: &MemberHash, answer: &Result<MemberHash, EtcdError>) -> InitialVerdict {
    match answer {
        Ok(p) if p.hash == local.hash => InitialVerdict::Agrees,
        Ok(p) if p.compact_revision == local.compact_revision => InitialVerdict::Mismatch,
        Ok(_) => InitialVerdict::OtherCompaction,
        Err(EtcdError::FutureRevision) => InitialVerdict::PeerBehind,
        Err(EtcdError::Compacted) => InitialVerdict::LocalBehind,
        Err(e) => InitialVerdict::Unreachable(e.to_string()),
    }
}

/// A member to raise CORRUPT for, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corrupt {
    pub member: u64,
    pub reason: String,
}

/// etcd 3.5's periodic check, run by the leader `me`: `first` is its hash before the peers were
/// asked (at the revision they were asked about), `second` its hash after a linearizable
/// barrier, `peers` their answers. The first rule broken names the member (etcd raises one
/// alarm per round):
/// - the leader's own two hashes differ at the same revision and compaction: the leader;
/// - a peer's current revision is past the leader's after the barrier: that peer (a follower
///   cannot have applied what the leader has not);
/// - a peer's compaction is past the leader's: that peer;
/// - a peer compacted where the leader had when it hashed, but its hash differs: that peer.
///
/// Peers that could not answer are not judged.
pub fn periodic(
    me: u64,
    first: &MemberHash,
    second: &MemberHash,
    peers: &[PeerAnswer],
) -> Option<Corrupt> {
    if second.hash != first.hash
        && second.revision == first.revision
        && second.compact_revision == first.compact_revision
    {
        return Some(Corrupt {
            member: me,
            reason: format!(
                "the leader's own hash changed at revision {} (compact revision {}): {} then {}",
                first.revision, first.compact_revision, first.hash, second.hash
            ),
        });
    }
    for (id, answer) in peers {
        let Ok(p) = answer else { continue };
        let reason = if p.revision > second.revision {
            format!(
                "its revision {} is past the leader's {}",
                p.revision, second.revision
            )
        } else if p.compact_revision > second.compact_revision {
            format!(
                "its compact revision {} is past the leader's {}",
                p.compact_revision, second.compact_revision
            )
        } else if p.compact_revision == first.compact_revision && p.hash != first.hash {
            format!(
                "its hash {} at revision {} differs from the leader's {} (compact revision {})",
                p.hash, first.hash_revision, first.hash, first.compact_revision
            )
        } else {
            continue;
        };
        return Some(Corrupt {
            member: *id,
            reason,
        });
    }
    None
}

/// How comparing one remembered compaction hash with the peers' went (etcd 3.5's compact hash
/// check).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactVerdict {
    /// A peer with the same compaction hashed differently: raise CORRUPT for it.
    Corrupt(Corrupt),
    /// Every peer answered with the same compaction and the same hash: this revision, and
    /// every older one, need no checking again.
    AllAgree,
    /// Some peers could not be compared (unreachable, or another compaction); try an older
    /// remembered hash.
    Partial { checked: usize },
}

/// Compares the leader's hash remembered at a compaction, `mine`, with the peers' answers at
/// its revision. Only answers with the same previous compaction are compared.
pub fn compact(mine: &MemberHash, peers: &[PeerAnswer]) -> CompactVerdict {
    let mut checked = 0;
    for (id, answer) in peers {
        let Ok(p) = answer else { continue };
        if p.compact_revision != mine.compact_revision {
            continue;
        }
        if p.hash != mine.hash {
            return CompactVerdict::Corrupt(Corrupt {
                member: *id,
                reason: format!(
                    "its hash {} at compaction revision {} differs from the leader's {} \
                     (previous compaction {})",
                    p.hash, mine.hash_revision, mine.hash, mine.compact_revision
                ),
            });
        }
        checked += 1;
    }
    if checked == peers.len() {
        CompactVerdict::AllAgree
    } else {
        CompactVerdict::Partial { checked }
    }
}

/// The remembered hashes the compact hash check has yet to confirm: above `latest_checked`,
/// newest first.
pub fn unchecked(hashes: &[MemberHash], latest_checked: i64) -> Vec<MemberHash> {
    let mut out: Vec<MemberHash> = hashes
        .iter()
        .filter(|h| h.hash_revision > latest_checked)
        .copied()
        .collect();
    out.sort_by_key(|h| std::cmp::Reverse(h.hash_revision));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(hash: u32, revision: i64, compact_revision: i64) -> MemberHash {
        MemberHash {
            member_id: 0,
            hash,
            compact_revision,
            revision,
            hash_revision: revision,
        }
    }

    #[test]
    fn initial_check_refuses_only_a_different_hash_of_the_same_compaction() {
        struct Case {
            name: &'static str,
            answer: Result<MemberHash, EtcdError>,
            want: InitialVerdict,
        }
        let local = h(7, 10, 3);
        let cases = vec![
            Case {
                name: "same hash",
                answer: Ok(h(7, 12, 3)),
                want: InitialVerdict::Agrees,
            },
            Case {
                name: "same hash, other compaction",
                answer: Ok(h(7, 12, 5)),
                want: InitialVerdict::Agrees,
            },
            Case {
                name: "other hash, same compaction",
                answer: Ok(h(8, 12, 3)),
                want: InitialVerdict::Mismatch,
            },
            Case {
                name: "other hash, other compaction",
                answer: Ok(h(8, 12, 5)),
                want: InitialVerdict::OtherCompaction,
            },
            Case {
                name: "peer behind",
                answer: Err(EtcdError::FutureRevision),
                want: InitialVerdict::PeerBehind,
            },
            Case {
                name: "peer compacted past",
                answer: Err(EtcdError::Compacted),
                want: InitialVerdict::LocalBehind,
            },
            Case {
                name: "peer down",
                answer: Err(EtcdError::Internal("Unavailable: refused".into())),
                want: InitialVerdict::Unreachable("Unavailable: refused".into()),
            },
        ];
        for c in cases {
            assert_eq!(initial(&local, &c.answer), c.want, "{}", c.name);
        }
    }

    #[test]
    fn periodic_check_names_the_member_etcd_names() {
        struct Case {
            name: &'static str,
            first: MemberHash,
            second: MemberHash,
            peers: Vec<PeerAnswer>,
            want_member: Option<u64>,
        }
        const ME: u64 = 1;
        let cases = vec![
            Case {
                name: "all agree",
                first: h(7, 10, 3),
                second: h(9, 11, 3),
                peers: vec![(2, Ok(h(7, 10, 3))), (3, Ok(h(7, 11, 3)))],
                want_member: None,
            },
            Case {
                name: "a follower with another hash at the same compaction",
                first: h(7, 10, 3),
                second: h(7, 10, 3),
                peers: vec![(2, Ok(h(7, 10, 3))), (3, Ok(h(8, 10, 3)))],
                want_member: Some(3),
            },
            Case {
                name: "another hash after another compaction is not judged",
                first: h(7, 10, 3),
                second: h(7, 10, 3),
                peers: vec![(2, Ok(h(8, 10, 1)))],
                want_member: None,
            },
            Case {
                name: "a follower ahead of the leader",
                first: h(7, 10, 3),
                second: h(7, 10, 3),
                peers: vec![(2, Ok(h(7, 12, 3)))],
                want_member: Some(2),
            },
            Case {
                name: "a follower compacted past the leader",
                first: h(7, 10, 3),
                second: h(7, 10, 3),
                peers: vec![(2, Ok(h(8, 10, 5)))],
                want_member: Some(2),
            },
            Case {
                name: "the leader's own hash moved under it",
                first: h(7, 10, 3),
                second: h(8, 10, 3),
                peers: vec![(2, Ok(h(7, 10, 3)))],
                want_member: Some(ME),
            },
            Case {
                name: "the leader's hash moved with its revision: not judged",
                first: h(7, 10, 3),
                second: h(8, 11, 3),
                peers: vec![],
                want_member: None,
            },
            Case {
                name: "unreachable and lagging peers are not judged",
                first: h(7, 10, 3),
                second: h(7, 10, 3),
                peers: vec![
                    (2, Err(EtcdError::FutureRevision)),
                    (3, Err(EtcdError::Internal("down".into()))),
                ],
                want_member: None,
            },
            Case {
                name: "the first broken rule wins",
                first: h(7, 10, 3),
                second: h(7, 10, 3),
                peers: vec![(2, Ok(h(8, 10, 3))), (3, Ok(h(9, 10, 3)))],
                want_member: Some(2),
            },
        ];
        for c in cases {
            let got = periodic(ME, &c.first, &c.second, &c.peers).map(|c| c.member);
            assert_eq!(got, c.want_member, "{}", c.name);
        }
    }

    #[test]
    fn compact_check_compares_only_the_same_compaction() {
        struct Case {
            name: &'static str,
            peers: Vec<PeerAnswer>,
            want: CompactVerdict,
        }
        // Remembered at the compaction at 10, the one before at 4.
        let mine = h(7, 10, 4);
        let cases = vec![
            Case {
                name: "all agree",
                peers: vec![(2, Ok(h(7, 10, 4))), (3, Ok(h(7, 10, 4)))],
                want: CompactVerdict::AllAgree,
            },
            Case {
                name: "one differs",
                peers: vec![(2, Ok(h(7, 10, 4))), (3, Ok(h(6, 10, 4)))],
                want: CompactVerdict::Corrupt(Corrupt {
                    member: 3,
                    reason: String::new(),
                }),
            },
            Case {
                name: "another compaction (a live hash) is not compared",
                peers: vec![(2, Ok(h(6, 10, 10))), (3, Ok(h(7, 10, 4)))],
                want: CompactVerdict::Partial { checked: 1 },
            },
            Case {
                name: "an unreachable peer leaves it partial",
                peers: vec![(2, Err(EtcdError::Compacted)), (3, Ok(h(7, 10, 4)))],
                want: CompactVerdict::Partial { checked: 1 },
            },
        ];
        for c in cases {
            let got = match compact(&mine, &c.peers) {
                CompactVerdict::Corrupt(x) => CompactVerdict::Corrupt(Corrupt {
                    member: x.member,
                    reason: String::new(),
                }),
                v => v,
            };
            assert_eq!(got, c.want, "{}", c.name);
        }
    }

    #[test]
    fn unchecked_hashes_are_the_newer_ones_newest_first() {
        let hashes = [h(1, 5, 2), h(2, 9, 5), h(3, 12, 9)];
        let got: Vec<i64> = unchecked(&hashes, 5)
            .iter()
            .map(|h| h.hash_revision)
            .collect();
        assert_eq!(got, vec![12, 9]);
        assert!(unchecked(&hashes, 12).is_empty());
    }
}
