//! Read-index contexts, driven through the raft actor's messages (`Tick`, `Step`, `ReadIndex`,
//! `Applied`) with its peers played by hand: what it sends is read from its outbox, what the
//! peers answer is stepped in (or held back, as a slow network would).
//!
//! etcd-io/raft#397 (in raft v3.7.0) and etcd #21417 (3.6.9, 3.5.28; issue #20418): a leader
//! that keys pending reads by their context, given one context twice (a retry) while heartbeat
//! answers of the first round are still on their way, confirms the second with those answers,
//! and every read queued before it, with no quorum round after they were asked. raft-rs 0.7
//! keys them so, so contexts are made never to repeat: this member's retries carry fresh ones,
//! and a leader gives each forwarded request a context of its own.

use std::sync::{Arc, Mutex};

use actcd_types::EtcdError;
use actcd_types::msg::{
    Append, Applied, Apply, Fatal, PeerMessage, RaftProgress, RaftStatus, ReadIndex, ReleaseWal,
    Shutdown, Step, SyncStorage, Tick,
};
use actix::prelude::*;
use protobuf::Message as _;
use raft::prelude::{Entry, Message, MessageType};

use crate::node::{NodeConfig, READ_RETRY_TICKS, Recovered};
use crate::{RaftActor, RaftNode, RaftPeers};

/// Plays the WAL (every append durable at once), the applier and the outbox.
#[derive(Default)]
struct Around {
    sent: Arc<Mutex<Vec<Message>>>,
}

impl Actor for Around {
    type Context = Context<Self>;
}

impl Handler<Append> for Around {
    type Result = Result<(), String>;
    fn handle(&mut self, _: Append, _: &mut Context<Self>) -> Self::Result {
        Ok(())
    }
}

impl Handler<ReleaseWal> for Around {
    type Result = Result<(), String>;
    fn handle(&mut self, _: ReleaseWal, _: &mut Context<Self>) -> Self::Result {
        Ok(())
    }
}

impl Handler<SyncStorage> for Around {
    type Result = Result<(), EtcdError>;
    fn handle(&mut self, _: SyncStorage, _: &mut Context<Self>) -> Self::Result {
        Ok(())
    }
}

impl Handler<Apply> for Around {
    type Result = ();
    fn handle(&mut self, _: Apply, _: &mut Context<Self>) {}
}

impl Handler<RaftProgress> for Around {
    type Result = ();
    fn handle(&mut self, _: RaftProgress, _: &mut Context<Self>) {}
}

impl Handler<Fatal> for Around {
    type Result = ();
    fn handle(&mut self, m: Fatal, _: &mut Context<Self>) {
        panic!("the raft node failed: {m:?}");
    }
}

impl Handler<Shutdown> for Around {
    type Result = ();
    fn handle(&mut self, _: Shutdown, _: &mut Context<Self>) {}
}

impl Handler<PeerMessage> for Around {
    type Result = ();
    fn handle(&mut self, m: PeerMessage, _: &mut Context<Self>) {
        self.sent
            .lock()
            .unwrap()
            .push(Message::parse_from_bytes(&m.msg).unwrap());
    }
}

/// Member `id` of voters 1, 2 and 3, and what it sends.
fn start(id: u64) -> (Addr<RaftActor>, Arc<Mutex<Vec<Message>>>) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let around = Around { sent: sent.clone() }.start();
    let cfg = NodeConfig {
        id,
        voters: vec![1, 2, 3],
        learners: vec![],
        election_tick: 10,
        fixed_election_timeout: Some(10),
        heartbeat_tick: 1,
        pre_vote: false,
        applied: 0,
    };
    let node = RaftNode::new(&cfg, Recovered::default()).unwrap();
    let peers = RaftPeers {
        wal: around.clone().recipient(),
        release: around.clone().recipient(),
        applier: around.clone().recipient(),
        progress: around.clone().recipient(),
        sync_storage: around.clone().recipient(),
        outbox: Some(around.clone().recipient()),
        leadership: None,
        peer_book: None,
        snapshots: None,
        install: None,
        learner: None,
        leader: None,
        fatal: around.clone().recipient(),
        shutdown: around.recipient(),
    };
    (RaftActor::new(node, peers, 1000, 100).start(), sent)
}

/// Lets every queued message (and the ones they queue) run.
async fn settle() {
    for _ in 0..200 {
        tokio::task::yield_now().await;
    }
}

fn msg(msg_type: MessageType, from: u64, to: u64, term: u64) -> Message {
    let mut m = Message::default();
    m.set_msg_type(msg_type);
    m.from = from;
    m.to = to;
    m.term = term;
    m
}

fn with_context(mut m: Message, ctx: &[u8]) -> Message {
    m.mut_entries().push(Entry {
        data: ctx.to_vec().into(),
        ..Default::default()
    });
    m
}

async fn step(raft: &Addr<RaftActor>, m: Message) {
    raft.send(Step {
        msg: m.write_to_bytes().unwrap(),
    })
    .await
    .unwrap();
    settle().await;
}

/// Takes what the member sent since last asked.
fn take(sent: &Arc<Mutex<Vec<Message>>>) -> Vec<Message> {
    std::mem::take(&mut *sent.lock().unwrap())
}

fn of_type(msgs: &[Message], t: MessageType) -> Vec<Message> {
    msgs.iter()
        .filter(|m| m.get_msg_type() == t)
        .cloned()
        .collect()
}

/// The answers peers `from` give to the heartbeats in `msgs` (held back or delivered by the
/// caller).
fn heartbeat_answers(msgs: &[Message], from: &[u64]) -> Vec<Message> {
    of_type(msgs, MessageType::MsgHeartbeat)
        .into_iter()
        .filter(|hb| from.contains(&hb.to))
        .map(|hb| {
            let mut a = msg(MessageType::MsgHeartbeatResponse, hb.to, hb.from, hb.term);
            a.context = hb.context.clone();
            a
        })
        .collect()
}

/// Member 1 times out, wins member 2's vote, and commits (and applies) its first entry with
/// member 2's append answer: a leader at term 2 whose commit index 1 is of its own term.
async fn leader() -> (Addr<RaftActor>, Arc<Mutex<Vec<Message>>>) {
    let (raft, sent) = start(1);
    settle().await;
    for _ in 0..10 {
        raft.send(Tick).await.unwrap();
    }
    settle().await;
    let votes = of_type(&take(&sent), MessageType::MsgRequestVote);
    assert!(!votes.is_empty(), "member 1 campaigns");
    let term = votes[0].term;
    let mut granted = msg(MessageType::MsgRequestVoteResponse, 2, 1, term);
    granted.reject = false;
    step(&raft, granted).await;
    let appends = of_type(&take(&sent), MessageType::MsgAppend);
    let last = appends[0].get_entries().last().unwrap().index;
    let mut ack = msg(MessageType::MsgAppendResponse, 2, 1, term);
    ack.index = last;
    step(&raft, ack).await;
    raft.send(Applied { index: last }).await.unwrap();
    settle().await;
    take(&sent);
    (raft, sent)
}

/// A member of an earlier actcd, or any peer, asks a read of the leader under a context it
/// used before, while answers to the first round's heartbeats are held up. The leader must not
/// take those late answers as confirming its own read asked since: here nothing about the
/// cluster after that read was asked was heard from anyone.
#[actix_rt::test]
async fn late_heartbeat_answers_do_not_confirm_a_read_asked_after_them() {
    let (raft, sent) = leader().await;
    let term = raft.send(RaftStatus).await.unwrap().term;

    // Member 2 forwards a read with context "A"; the answers to its heartbeats are delayed.
    step(
        &raft,
        with_context(msg(MessageType::MsgReadIndex, 2, 1, 0), b"A"),
    )
    .await;
    let delayed = heartbeat_answers(&take(&sent), &[2, 3]);
    assert_eq!(delayed.len(), 2, "a heartbeat round to members 2 and 3");

    // The next heartbeat round is answered by member 2: "A" is confirmed, and its answer goes
    // back to member 2 under member 2's own context.
    raft.send(Tick).await.unwrap();
    settle().await;
    for a in heartbeat_answers(&take(&sent), &[2]) {
        step(&raft, a).await;
    }
    let answers = of_type(&take(&sent), MessageType::MsgReadIndexResp);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].to, 2);
    assert_eq!(answers[0].get_entries()[0].data.as_ref(), b"A");

    // This member's own read: its heartbeats reach nobody.
    let read = raft.send(ReadIndex);
    let read = tokio::spawn(read);
    settle().await;
    take(&sent);

    // Member 2 asks again under "A", then the held-up answers of the first round arrive.
    step(
        &raft,
        with_context(msg(MessageType::MsgReadIndex, 2, 1, 0), b"A"),
    )
    .await;
    take(&sent);
    for a in delayed {
        step(&raft, a).await;
    }
    settle().await;
    assert!(
        !read.is_finished(),
        "a read was confirmed by heartbeat answers sent before it was asked: {:?}",
        read.await
    );
    assert!(
        of_type(&take(&sent), MessageType::MsgReadIndexResp).is_empty(),
        "nor is member 2's second read confirmed by them"
    );

    // A round after both were asked confirms both.
    raft.send(Tick).await.unwrap();
    settle().await;
    for a in heartbeat_answers(&take(&sent), &[3]) {
        step(&raft, a).await;
    }
    assert_eq!(read.await.unwrap().unwrap(), Ok(1));
    let answers = of_type(&take(&sent), MessageType::MsgReadIndexResp);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].get_entries()[0].data.as_ref(), b"A");
    assert_eq!(answers[0].term, term);
}

/// A follower's read that the leader leaves unanswered is asked again every
/// `READ_RETRY_TICKS` ticks, each time under a context it never sent before, and the answer to
/// any of them answers the read, once.
#[actix_rt::test]
async fn a_read_is_asked_again_under_a_new_context_each_time() {
    let (raft, sent) = start(2);
    settle().await;
    // Leader 1, term 2, sends entry 1 committed.
    let mut append = msg(MessageType::MsgAppend, 1, 2, 2);
    append.mut_entries().push(Entry {
        index: 1,
        term: 2,
        ..Default::default()
    });
    append.commit = 1;
    step(&raft, append).await;
    raft.send(Applied { index: 1 }).await.unwrap();
    settle().await;
    take(&sent);

    let read = tokio::spawn(raft.send(ReadIndex));
    settle().await;
    let mut contexts = Vec::new();
    let asked = |msgs: Vec<Message>| -> Vec<Vec<u8>> {
        of_type(&msgs, MessageType::MsgReadIndex)
            .iter()
            .inspect(|m| assert_eq!(m.to, 1, "forwarded to the leader"))
            .map(|m| m.get_entries()[0].data.to_vec())
            .collect()
    };
    contexts.extend(asked(take(&sent)));
    for _ in 0..3 {
        // The leader's heartbeat keeps this member from campaigning.
        step(&raft, msg(MessageType::MsgHeartbeat, 1, 2, 2)).await;
        for _ in 0..READ_RETRY_TICKS {
            raft.send(Tick).await.unwrap();
        }
        settle().await;
        contexts.extend(asked(take(&sent)));
    }
    assert_eq!(
        contexts.len(),
        4,
        "asked, then again three times: {contexts:?}"
    );
    let mut distinct = contexts.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "a context was sent twice: {contexts:?}");
    assert!(!read.is_finished());

    // The leader answers the second time it was asked: that answers the read.
    let mut answer = with_context(msg(MessageType::MsgReadIndexResp, 1, 2, 2), &contexts[1]);
    answer.index = 1;
    step(&raft, answer).await;
    assert_eq!(read.await.unwrap().unwrap(), Ok(1));

    // Late answers to the other times are dropped; the next read is a round of its own.
    for ctx in [&contexts[0], &contexts[3]] {
        let mut late = with_context(msg(MessageType::MsgReadIndexResp, 1, 2, 2), ctx);
        late.index = 1;
        step(&raft, late).await;
    }
    let next = tokio::spawn(raft.send(ReadIndex));
    settle().await;
    let again = asked(take(&sent));
    assert_eq!(again.len(), 1);
    assert!(!contexts.contains(&again[0]));
    assert!(!next.is_finished(), "answered only by its own round");
    let mut answer = with_context(msg(MessageType::MsgReadIndexResp, 1, 2, 2), &again[0]);
    answer.index = 1;
    step(&raft, answer).await;
    assert_eq!(next.await.unwrap().unwrap(), Ok(1));
}
