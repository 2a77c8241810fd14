//! The checker driven through its messages, with a fake member around it: the reader's HashKV,
//! the peers' answers, the membership, raft's leadership and preflight are one recording
//! actor.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actcd_types::msg::{HashKvResult, MemberRecord, RaftStatusReply};

use super::*;

const ME: u64 = 1;

/// What the fake member answers, and what it was sent.
#[derive(Default)]
struct World {
    /// This member's live hash (HashKV at any revision answers it).
    local: HashKvResult,
    /// Each peer's answer.
    peers: HashMap<u64, Result<MemberHash, EtcdError>>,
    leader: u64,
    /// Submits are refused this many times before being accepted.
    refuse_submits: usize,
    /// Alarm requests submitted, as (member, accepted).
    submitted: Vec<(u64, bool)>,
    /// Revisions peers were asked about.
    asked: Vec<i64>,
}

#[derive(Clone, Default)]
struct Fake(Arc<Mutex<World>>);

impl Actor for Fake {
    type Context = Context<Self>;
}

impl Handler<HashKv> for Fake {
    type Result = Result<HashKvResult, EtcdError>;
    fn handle(&mut self, _: HashKv, _: &mut Context<Self>) -> Self::Result {
        Ok(self.0.lock().unwrap().local)
    }
}

impl Handler<PeerHashKv> for Fake {
    type Result = Result<MemberHash, EtcdError>;
    fn handle(&mut self, msg: PeerHashKv, _: &mut Context<Self>) -> Self::Result {
        let mut w = self.0.lock().unwrap();
        w.asked.push(msg.revision);
        w.peers
            .get(&msg.to)
            .cloned()
            .unwrap_or(Err(EtcdError::Internal("unreachable".into())))
    }
}

impl Handler<GetMembers> for Fake {
    type Result = MessageResult<GetMembers>;
    fn handle(&mut self, _: GetMembers, _: &mut Context<Self>) -> Self::Result {
        let w = self.0.lock().unwrap();
        let mut ids: Vec<u64> = w.peers.keys().copied().collect();
        ids.push(ME);
        MessageResult(
            ids.into_iter()
                .map(|id| MemberRecord {
                    id,
                    ..Default::default()
                })
                .collect(),
        )
    }
}

impl Handler<RaftStatus> for Fake {
    type Result = MessageResult<RaftStatus>;
    fn handle(&mut self, _: RaftStatus, _: &mut Context<Self>) -> Self::Result {
        MessageResult(RaftStatusReply {
            member_id: ME,
            leader: self.0.lock().unwrap().leader,
            ..Default::default()
        })
    }
}

impl Handler<ReadIndex> for Fake {
    type Result = Result<u64, EtcdError>;
    fn handle(&mut self, _: ReadIndex, _: &mut Context<Self>) -> Self::Result {
        Ok(1)
    }
}

impl Handler<Submit> for Fake {
    type Result = Result<(), EtcdError>;
    fn handle(&mut self, msg: Submit, _: &mut Context<Self>) -> Self::Result {
        let mut w = self.0.lock().unwrap();
        let alarm = msg.request.alarm.expect("only alarms are submitted");
        assert_eq!(alarm.action, AlarmAction::Activate as i32);
        assert_eq!(alarm.alarm, AlarmType::Corrupt as i32);
        assert!(
            msg.request.header.is_some_and(|h| h.internal && h.id != 0),
            "the member's own request, with an id"
        );
        let accepted = w.refuse_submits == 0;
        w.refuse_submits = w.refuse_submits.saturating_sub(1);
        w.submitted.push((alarm.member_id, accepted));
        let answer = if accepted {
            Ok(actcd_types::msg::ApplyResponse::Empty)
        } else {
            Err(EtcdError::NoLeader)
        };
        let _ = msg.reply.send(answer.clone());
        answer.map(drop)
    }
}

fn hash(hash: u32, revision: i64, compact_revision: i64) -> MemberHash {
    MemberHash {
        member_id: 2,
        hash,
        compact_revision,
        revision,
        hash_revision: revision,
    }
}

fn checker(world: &Fake, debug_skew: u32) -> Addr<CorruptionChecker> {
    let fake = world.clone().start();
    CorruptionChecker::new(
        CheckerConfig {
            member_id: ME,
            debug_skew,
        },
        CheckerPeers {
            hash_kv: fake.clone().recipient(),
            peer_hash: fake.clone().recipient(),
            members: fake.clone().recipient(),
            raft: fake.clone().recipient(),
            read_index: fake.clone().recipient(),
            submit: fake.recipient(),
        },
        IdGenerator::new(ME, 1),
    )
    .start()
}

/// Lets the checker's tasks and their reports run.
async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

fn world(leader: u64, peers: Vec<(u64, Result<MemberHash, EtcdError>)>) -> Fake {
    Fake(Arc::new(Mutex::new(World {
        local: HashKvResult {
            hash: 7,
            compact_revision: -1,
            revision: 10,
        },
        peers: peers.into_iter().collect(),
        leader,
        ..Default::default()
    })))
}

#[actix::test]
async fn the_leaders_periodic_check_raises_corrupt_for_the_member_that_differs() {
    let w = world(ME, vec![(2, Ok(hash(8, 10, -1))), (3, Ok(hash(7, 10, -1)))]);
    let c = checker(&w, 0);
    c.send(CheckTick(Check::Periodic)).await.unwrap();
    settle().await;
    let got = w.0.lock().unwrap();
    assert_eq!(got.submitted, vec![(2, true)]);
    assert!(
        got.asked.iter().all(|&r| r == 10),
        "asked at the leader's revision"
    );
}

#[actix::test]
async fn a_follower_never_runs_the_periodic_check() {
    let w = world(2, vec![(2, Ok(hash(8, 10, -1)))]);
    let c = checker(&w, 0);
    c.send(CheckTick(Check::Periodic)).await.unwrap();
    settle().await;
    let got = w.0.lock().unwrap();
    assert!(got.submitted.is_empty() && got.asked.is_empty());
}

#[actix::test]
async fn the_initial_check_names_the_peer_that_differs_and_skips_the_unreachable() {
    let w = world(0, vec![(2, Ok(hash(8, 12, -1))), (3, Ok(hash(7, 12, -1)))]);
    let err = checker(&w, 0)
        .send(InitialCheck)
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("1 found data inconsistency with peers (peer 2 hash 8 != local hash 7"),
        "{err}"
    );
    // Unreachable, lagging and compacted-past peers are skipped.
    let w = world(
        0,
        vec![
            (2, Err(EtcdError::FutureRevision)),
            (3, Err(EtcdError::Compacted)),
            (4, Err(EtcdError::Internal("down".into()))),
            (5, Ok(hash(7, 12, -1))),
        ],
    );
    assert_eq!(checker(&w, 0).send(InitialCheck).await.unwrap(), Ok(()));
    // The debug knob makes this member the odd one out.
    let w = world(0, vec![(2, Ok(hash(7, 12, -1)))]);
    assert!(checker(&w, 1).send(InitialCheck).await.unwrap().is_err());
}

#[actix::test]
async fn peers_are_answered_from_a_compaction_hash_at_exactly_its_revision() {
    let w = world(0, vec![]);
    let c = checker(&w, 0);
    c.send(CompactionHashed {
        hash: 99,
        compact_revision: 3,
        hash_revision: 8,
    })
    .await
    .unwrap();
    let at8 = c.send(LocalHashKv { revision: 8 }).await.unwrap().unwrap();
    assert_eq!(
        (at8.hash, at8.compact_revision, at8.hash_revision),
        (99, 3, 8)
    );
    let live = c.send(LocalHashKv { revision: 0 }).await.unwrap().unwrap();
    assert_eq!(
        (live.hash, live.compact_revision, live.hash_revision),
        (7, -1, 10)
    );
    // Only the newest ten are kept.
    for rev in 20..31 {
        c.send(CompactionHashed {
            hash: rev as u32,
            compact_revision: rev - 1,
            hash_revision: rev,
        })
        .await
        .unwrap();
    }
    let at8 = c.send(LocalHashKv { revision: 8 }).await.unwrap().unwrap();
    assert_eq!(at8.hash, 7, "forgotten: answered live");
    let at20 = c.send(LocalHashKv { revision: 20 }).await.unwrap().unwrap();
    assert_eq!(at20.hash, 7, "the oldest of eleven is forgotten");
    let at21 = c.send(LocalHashKv { revision: 21 }).await.unwrap().unwrap();
    assert_eq!(at21.hash, 21);
}

#[actix::test]
async fn the_compact_hash_check_compares_the_same_compaction_and_remembers_agreement() {
    let w = world(ME, vec![(2, Ok(hash(5, 8, 3))), (3, Ok(hash(5, 8, 3)))]);
    let c = checker(&w, 0);
    c.send(CompactionHashed {
        hash: 5,
        compact_revision: 3,
        hash_revision: 8,
    })
    .await
    .unwrap();
    c.send(CheckTick(Check::CompactHash)).await.unwrap();
    settle().await;
    assert_eq!(w.0.lock().unwrap().asked, vec![8, 8]);
    // Agreed at 8: not asked again; a peer that differs at a newer compaction is found.
    w.0.lock().unwrap().peers.insert(3, Ok(hash(6, 12, 8)));
    w.0.lock().unwrap().peers.insert(2, Ok(hash(4, 12, 8)));
    c.send(CompactionHashed {
        hash: 4,
        compact_revision: 8,
        hash_revision: 12,
    })
    .await
    .unwrap();
    c.send(CheckTick(Check::CompactHash)).await.unwrap();
    settle().await;
    let got = w.0.lock().unwrap();
    assert_eq!(got.asked, vec![8, 8, 12, 12]);
    assert_eq!(got.submitted, vec![(3, true)]);
}

#[actix::test]
async fn a_corrupt_alarm_that_could_not_be_proposed_is_proposed_again() {
    tokio::time::pause();
    let w = world(0, vec![]);
    w.0.lock().unwrap().refuse_submits = 2;
    let c = checker(&w, 0);
    c.send(RaiseCorrupt {
        member_id: ME,
        reason: "a damaged record".into(),
    })
    .await
    .unwrap();
    settle().await;
    assert_eq!(w.0.lock().unwrap().submitted, vec![(ME, false)]);
    for _ in 0..2 {
        tokio::time::advance(RAISE_RETRY + Duration::from_millis(1)).await;
        settle().await;
    }
    assert_eq!(
        w.0.lock().unwrap().submitted,
        vec![(ME, false), (ME, false), (ME, true)]
    );
    tokio::time::advance(RAISE_RETRY * 5).await;
    settle().await;
    assert_eq!(w.0.lock().unwrap().submitted.len(), 3, "done once raised");
}
