//! A deterministic in-process cluster of [`RaftNode`]s: logical ticks, a simulated network that
//! drops, delays, duplicates, reorders and partitions, crashes and restarts from a simulated
//! WAL — and the safety invariants checked after every step. Everything comes from one seed, so
//! a failing run is replayed by its seed.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use actcd_types::msg::{ConfChangeKind, EntryKind, HardState, WalEntry};

use crate::node::{NodeConfig, RaftNode, Recovered};

/// A small seeded generator (xorshift64*): reproducible, no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// True with probability `per_mille`/1000.
    fn chance(&mut self, per_mille: u64) -> bool {
        self.next() % 1000 < per_mille
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

/// How the network misbehaves.
#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    drop: u64,
    duplicate: u64,
    /// Messages arrive 0..=max_delay steps late (so they reorder too).
    max_delay: u64,
}

/// One member: its raft node (none while crashed), what it made durable, and what it applied.
struct Member {
    node: Option<RaftNode>,
    hard_state: HardState,
    /// The durable log, by index (a later write at an index replaces it and everything after).
    wal: BTreeMap<u64, WalEntry>,
    /// (index, data) of every entry applied, in order; kept across crashes (the backend).
    applied: Vec<(u64, Vec<u8>)>,
    applied_index: u64,
    /// The membership as applied (voters, learners): the configuration a restart starts from.
    voters: BTreeSet<u64>,
    learners: BTreeSet<u64>,
    /// The WAL's snapshot mark, after installing a snapshot.
    mark: Option<(u64, u64, Vec<u8>)>,
    /// Snapshots installed.
    installs: usize,
    /// Read contexts answered, with their read index.
    reads: Vec<(Vec<u8>, u64)>,
    /// Removed from the cluster: it stops and is left out of the final comparison.
    removed: bool,
}

/// A message on the network: (deliver at step, from, to, message, the store copy a snapshot
/// message carries).
type InFlight = (u64, u64, u64, Vec<u8>, Option<Copy>);

/// A state machine copy travelling with a snapshot message.
#[derive(Clone)]
struct Copy {
    applied: Vec<(u64, Vec<u8>)>,
    applied_index: u64,
    voters: BTreeSet<u64>,
    learners: BTreeSet<u64>,
}

struct Sim {
    ids: Vec<u64>,
    members: BTreeMap<u64, Member>,
    rng: Rng,
    faults: Faults,
    /// Groups that can talk; empty = no partition.
    groups: Vec<BTreeSet<u64>>,
    in_flight: Vec<InFlight>,
    /// The store copy of the last snapshot message each member stepped.
    incoming: HashMap<u64, (u64, Copy)>,
    step: u64,
    /// Who led each term.
    leaders: HashMap<u64, u64>,
    seed: u64,
    next_proposal: u64,
}

fn config(id: u64, voters: &[u64], learners: &[u64], applied: u64) -> NodeConfig {
    NodeConfig {
        id,
        voters: voters.to_vec(),
        learners: learners.to_vec(),
        // Each member's own timeout in [10, 20), fixed by its id: raft-rs would draw it from a
        // generator no seed reaches, and a run must replay from its seed.
        fixed_election_timeout: Some(10 + (id.wrapping_mul(7) % 10) as usize),
        election_tick: 10,
        heartbeat_tick: 1,
        pre_vote: true,
        applied,
    }
}

impl Member {
    /// A member starting with `voters` as its configuration.
    fn fresh(id: u64, voters: &[u64]) -> Self {
        let node = RaftNode::new(&config(id, voters, &[], 0), Recovered::default()).unwrap();
        Member {
            node: Some(node),
            hard_state: HardState::default(),
            wal: BTreeMap::new(),
            applied: Vec::new(),
            applied_index: 0,
            voters: voters.iter().copied().collect(),
            learners: BTreeSet::new(),
            mark: None,
            installs: 0,
            reads: Vec::new(),
            removed: false,
        }
    }
}

/// A conf change's context in these runs: "cc <kind> <id>".
fn conf_context(kind: ConfChangeKind, id: u64) -> Vec<u8> {
    let k = match kind {
        ConfChangeKind::AddVoter => "add",
        ConfChangeKind::AddLearner => "learner",
        ConfChangeKind::Remove => "remove",
        ConfChangeKind::Promote => "promote",
    };
    format!("cc {k} {id}").into_bytes()
}

fn parse_conf(data: &[u8]) -> Option<(ConfChangeKind, u64)> {
    let s = std::str::from_utf8(data).ok()?;
    let mut parts = s.split(' ');
    (parts.next()? == "cc").then_some(())?;
    let kind = match parts.next()? {
        "add" => ConfChangeKind::AddVoter,
        "learner" => ConfChangeKind::AddLearner,
        "remove" => ConfChangeKind::Remove,
        "promote" => ConfChangeKind::Promote,
        _ => return None,
    };
    Some((kind, parts.next()?.parse().ok()?))
}

impl Sim {
    fn new(n: u64, seed: u64, faults: Faults) -> Self {
        let ids: Vec<u64> = (1..=n).collect();
        let members = ids
            .iter()
            .map(|&id| (id, Member::fresh(id, &ids)))
            .collect();
        Self {
            ids,
            members,
            rng: Rng::new(seed),
            faults,
            groups: Vec::new(),
            in_flight: Vec::new(),
            incoming: HashMap::new(),
            step: 0,
            leaders: HashMap::new(),
            seed,
            next_proposal: 0,
        }
    }

    fn connected(&self, a: u64, b: u64) -> bool {
        self.groups.is_empty() || self.groups.iter().any(|g| g.contains(&a) && g.contains(&b))
    }

    fn partition(&mut self, groups: &[&[u64]]) {
        self.groups = groups.iter().map(|g| g.iter().copied().collect()).collect();
    }

    fn heal(&mut self) {
        self.groups.clear();
    }

    /// Puts a message on the network (a snapshot message with the store copy it carries).
    fn send(&mut self, from: u64, to: u64, msg: Vec<u8>, copy: Option<Copy>) {
        if !self.connected(from, to) || self.rng.chance(self.faults.drop) {
            if copy.is_some()
                && let Some(node) = self.members.get_mut(&from).and_then(|m| m.node.as_mut())
            {
                node.report_snapshot(to, false);
            }
            return;
        }
        let copies = if self.rng.chance(self.faults.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = self.step + self.rng.below(self.faults.max_delay + 1);
            self.in_flight
                .push((at, from, to, msg.clone(), copy.clone()));
        }
    }

    /// Runs one member's Readies to quiescence: persist, then send, then apply.
    fn drive(&mut self, id: u64) {
        loop {
            let Some(node) = self.members.get_mut(&id).and_then(|m| m.node.as_mut()) else {
                return;
            };
            let Some(out) = node.ready().unwrap() else {
                return;
            };
            let m = self.members.get_mut(&id).unwrap();
            if let Some((index, term, cs)) = out.snapshot.clone() {
                // Install the copy that came with it, durably, before the Ready is persisted.
                let (i, copy) = self.incoming.remove(&id).expect("a snapshot's copy");
                assert_eq!(i, index, "seed {}: the copy is the snapshot's", self.seed);
                m.applied = copy.applied;
                m.applied_index = copy.applied_index;
                m.voters = copy.voters;
                m.learners = copy.learners;
                m.wal = m.wal.split_off(&(index + 1));
                m.mark = Some((index, term, cs));
                m.installs += 1;
                let (v, l): (Vec<u64>, Vec<u64>) = (
                    m.voters.iter().copied().collect(),
                    m.learners.iter().copied().collect(),
                );
                m.node.as_mut().unwrap().reconcile_conf(&v, &l);
            }
            for e in &out.entries {
                let _ = m.wal.split_off(&e.index);
                m.wal.insert(e.index, e.clone());
            }
            if let Some(hs) = out.hard_state {
                m.hard_state = hs;
            }
            m.reads.extend(out.reads.iter().cloned());
            let node = m.node.as_mut().unwrap();
            node.on_persisted(out.number);
            if let Some((index, _, _)) = out.snapshot {
                node.on_applied(index);
            }
            let mut removed_self = false;
            for e in &out.committed {
                // What the state machine holds already (a snapshot's copy) is skipped, as the
                // applier skips entries at or below the consistent index.
                if e.index <= m.applied_index || e.data.is_empty() {
                    continue;
                }
                m.applied.push((e.index, e.data.clone()));
                if e.kind == EntryKind::ConfChange
                    && let Some((kind, who)) = parse_conf(&e.data)
                {
                    match kind {
                        ConfChangeKind::AddVoter | ConfChangeKind::Promote => {
                            m.learners.remove(&who);
                            m.voters.insert(who);
                        }
                        ConfChangeKind::AddLearner => {
                            m.learners.insert(who);
                        }
                        ConfChangeKind::Remove => {
                            m.voters.remove(&who);
                            m.learners.remove(&who);
                            removed_self |= who == id;
                        }
                    }
                    node.apply_conf_change(kind, who);
                }
            }
            if let Some(last) = out.committed.last() {
                m.applied_index = m.applied_index.max(last.index);
                node.on_applied(last.index);
            }
            let copy = Copy {
                applied: m.applied.clone(),
                applied_index: m.applied_index,
                voters: m.voters.clone(),
                learners: m.learners.clone(),
            };
            if removed_self {
                m.removed = true;
                m.node = None;
            }
            for pm in out.messages.into_iter().chain(out.persisted_messages) {
                self.send(id, pm.to, pm.msg, None);
            }
            for (to, _, msg) in out.snapshots_out {
                self.send(id, to, msg, Some(copy.clone()));
            }
        }
    }

    /// One logical step: deliver what is due, tick everyone, drive everyone, check.
    fn tick(&mut self) {
        self.step += 1;
        let now = self.step;
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.in_flight)
            .into_iter()
            .partition(|(at, ..)| *at <= now);
        self.in_flight = later;
        for (_, from, to, msg, copy) in due {
            let Some(node) = self.members.get_mut(&to).and_then(|m| m.node.as_mut()) else {
                continue;
            };
            if let Some(copy) = copy {
                let index = RaftNode::snapshot_index(&msg).unwrap();
                self.incoming.insert(to, (index, copy));
                node.step(&msg);
                if let Some(sender) = self.members.get_mut(&from).and_then(|m| m.node.as_mut()) {
                    sender.report_snapshot(to, true);
                }
            } else {
                node.step(&msg);
            }
        }
        for id in self.members.keys().copied().collect::<Vec<_>>() {
            if let Some(node) = self.members.get_mut(&id).and_then(|m| m.node.as_mut()) {
                node.tick();
            }
            self.drive(id);
        }
        self.check();
    }

    fn run(&mut self, steps: u64) {
        for _ in 0..steps {
            self.tick();
        }
    }

    /// Proposes a fresh value on `id`; returns it if raft took it.
    fn propose(&mut self, id: u64) -> Option<Vec<u8>> {
        self.next_proposal += 1;
        let data = format!("p{}", self.next_proposal).into_bytes();
        let node = self.members.get_mut(&id)?.node.as_mut()?;
        node.propose(data.clone()).ok()?;
        self.drive(id);
        Some(data)
    }

    fn crash(&mut self, id: u64) {
        self.members.get_mut(&id).unwrap().node = None;
        self.in_flight.retain(|(_, _, to, ..)| *to != id);
    }

    /// Asks `on` for a read index under `ctx`.
    fn read(&mut self, on: u64, ctx: &[u8]) -> bool {
        let Some(node) = self.members.get_mut(&on).and_then(|m| m.node.as_mut()) else {
            return false;
        };
        let ok = node.read_index(ctx.to_vec()).is_ok();
        self.drive(on);
        ok
    }

    fn answered(&self, on: u64, ctx: &[u8]) -> bool {
        self.members[&on].reads.iter().any(|(c, _)| c == ctx)
    }

    /// Proposes a membership change on `on`.
    fn propose_conf(&mut self, on: u64, kind: ConfChangeKind, who: u64) -> bool {
        let Some(node) = self.members.get_mut(&on).and_then(|m| m.node.as_mut()) else {
            return false;
        };
        let ok = node
            .propose_conf_change(kind, who, conf_context(kind, who))
            .is_ok();
        self.drive(on);
        ok
    }

    /// Starts a new member `id` that joins with the configuration `voters` (what a joining
    /// member learns from the cluster).
    fn join(&mut self, id: u64, voters: &[u64]) {
        self.ids.push(id);
        self.members.insert(id, Member::fresh(id, voters));
    }

    /// Compacts a member's log down to its last `keep` applied entries (WAL release too).
    fn compact(&mut self, id: u64, keep: u64) {
        let m = self.members.get_mut(&id).unwrap();
        let applied = m.applied_index;
        if let Some(node) = m.node.as_mut()
            && let Some((index, term, cs)) = node.compact_log(applied, keep)
        {
            // As the daemon's WAL release: the mark drops every entry at or below it; the raft
            // node keeps `keep` of them in memory for slow followers.
            m.wal = m.wal.split_off(&(index + 1));
            m.mark = Some((index, term, cs));
        }
    }

    /// Rebuilds the node from its WAL, with the state machine's applied index (the backend's
    /// consistent index, as the daemon does).
    fn restart(&mut self, id: u64) {
        let m = self.members.get_mut(&id).unwrap();
        if m.node.is_some() {
            return;
        }
        if m.removed {
            return;
        }
        let rec = Recovered {
            snapshot: m.mark.clone(),
            hard_state: m.hard_state,
            entries: m
                .wal
                .values()
                .filter(|e| m.mark.as_ref().is_none_or(|(i, _, _)| e.index > *i))
                .cloned()
                .collect(),
        };
        let voters: Vec<u64> = m.voters.iter().copied().collect();
        let learners: Vec<u64> = m.learners.iter().copied().collect();
        let node = RaftNode::new(&config(id, &voters, &learners, m.applied_index), rec).unwrap();
        m.node = Some(node);
    }

    fn leader(&self) -> Option<u64> {
        let mut leaders: Vec<(u64, u64)> = self
            .members
            .iter()
            .filter_map(|(&id, m)| {
                let n = m.node.as_ref()?;
                n.is_leader().then(|| (n.term(), id))
            })
            .collect();
        leaders.sort();
        leaders.last().map(|&(_, id)| id)
    }

    fn term_of(&self, id: u64) -> u64 {
        self.members[&id].node.as_ref().map_or(0, RaftNode::term)
    }

    /// The invariants, after every step.
    fn check(&mut self) {
        let seed = self.seed;
        for (&id, m) in &self.members {
            if let Some(n) = m.node.as_ref().filter(|n| n.is_leader()) {
                let prev = self.leaders.entry(n.term()).or_insert(id);
                assert_eq!(*prev, id, "seed {seed}: two leaders in term {}", n.term());
            }
        }
        // State machine safety: whatever two members applied at an index is the same.
        let mut at: HashMap<u64, (&Vec<u8>, u64)> = HashMap::new();
        for (&id, m) in &self.members {
            for (index, data) in &m.applied {
                if let Some((other, who)) = at.insert(*index, (data, id)) {
                    assert_eq!(
                        other, data,
                        "seed {seed}: members {who} and {id} applied different entries at {index}"
                    );
                }
            }
        }
        // Each member applies in index order, each index once.
        for (&id, m) in &self.members {
            assert!(
                m.applied.windows(2).all(|w| w[0].0 < w[1].0),
                "seed {seed}: member {id} applied out of order"
            );
        }
    }

    /// After healing and restarting everyone: all members applied the same sequence, and it
    /// holds everything any member ever applied.
    fn assert_converged(&mut self) {
        self.heal();
        self.faults = Faults::default();
        for id in self.ids.clone() {
            self.restart(id);
        }
        // A no-op proposal through the leader commits everything of its term.
        self.run(60);
        if let Some(l) = self.leader() {
            self.propose(l);
        }
        self.run(60);
        let seed = self.seed;
        let logs: Vec<&Vec<(u64, Vec<u8>)>> = self
            .members
            .values()
            .filter(|m| !m.removed)
            .map(|m| &m.applied)
            .collect();
        for l in &logs {
            assert_eq!(*l, logs[0], "seed {seed}: members did not converge");
        }
    }

    fn applied_anywhere(&self, data: &[u8]) -> bool {
        self.members
            .values()
            .any(|m| m.applied.iter().any(|(_, d)| d == data))
    }
}

/// Runs until some member leads, returning it and the steps taken.
fn elect(sim: &mut Sim, within: u64) -> (u64, u64) {
    for s in 1..=within {
        sim.tick();
        if let Some(l) = sim.leader() {
            return (l, s);
        }
    }
    panic!("seed {}: no leader within {within} steps", sim.seed);
}

#[test]
fn scenarios() {
    type Script = fn(&mut Sim);
    let cases: Vec<(&str, u64, Faults, Script)> = vec![
        ("election from a cold start", 3, Faults::default(), |sim| {
            let (_, steps) = elect(sim, 60);
            assert!(steps <= 60);
            sim.run(30);
            let leaders = sim
                .members
                .values()
                .filter(|m| m.node.as_ref().is_some_and(RaftNode::is_leader))
                .count();
            assert_eq!(leaders, 1, "exactly one leader");
        }),
        (
            "re-election after the leader is isolated",
            3,
            Faults::default(),
            |sim| {
                let (old, _) = elect(sim, 60);
                let old_term = sim.term_of(old);
                let others: Vec<u64> = sim.ids.iter().copied().filter(|&i| i != old).collect();
                sim.partition(&[&[old], &others]);
                sim.run(80);
                let new = sim.leader().expect("a new leader");
                assert!(others.contains(&new), "the majority elects");
                assert!(sim.term_of(new) > old_term);
                // check-quorum: the isolated leader has stepped down by now.
                assert!(!sim.members[&old].node.as_ref().unwrap().is_leader());
                sim.assert_converged();
            },
        ),
        (
            "re-election after the leader crashes",
            5,
            Faults::default(),
            |sim| {
                let (old, _) = elect(sim, 60);
                for _ in 0..5 {
                    sim.propose(old);
                }
                sim.run(10);
                sim.crash(old);
                sim.run(80);
                let new = sim.leader().expect("a new leader");
                assert_ne!(new, old);
                sim.propose(new).expect("the new leader takes proposals");
                sim.assert_converged();
            },
        ),
        (
            "a minority partition cannot commit",
            5,
            Faults::default(),
            |sim| {
                let (old, _) = elect(sim, 60);
                sim.run(5);
                let rest: Vec<u64> = sim.ids.iter().copied().filter(|&i| i != old).collect();
                let buddy = rest[0];
                let majority: Vec<u64> = rest[1..].to_vec();
                sim.partition(&[&[old, buddy], &majority]);
                let stranded: Vec<Vec<u8>> = (0..3).filter_map(|_| sim.propose(old)).collect();
                assert!(
                    !stranded.is_empty(),
                    "the old leader still takes proposals at first"
                );
                sim.run(80);
                for d in &stranded {
                    assert!(!sim.applied_anywhere(d), "a minority committed {d:?}");
                }
                let new = sim.leader().expect("the majority elects");
                assert!(majority.contains(&new));
                sim.propose(new);
                sim.assert_converged();
                for d in &stranded {
                    assert!(
                        !sim.applied_anywhere(d),
                        "stranded proposals are gone after healing"
                    );
                }
            },
        ),
        (
            "a healed partition converges",
            5,
            Faults::default(),
            |sim| {
                elect(sim, 60);
                sim.partition(&[&[1, 2], &[3, 4, 5]]);
                sim.run(60);
                for _ in 0..10 {
                    if let Some(l) = sim.leader() {
                        sim.propose(l);
                    }
                    sim.run(3);
                }
                sim.assert_converged();
                assert!(
                    sim.members[&1].applied.len() >= 10,
                    "the minority caught up"
                );
            },
        ),
        (
            "a follower and then the leader crash and restart under load",
            3,
            Faults::default(),
            |sim| {
                let (leader, _) = elect(sim, 60);
                let follower = sim.ids.iter().copied().find(|&i| i != leader).unwrap();
                for round in 0..20 {
                    if round == 5 {
                        sim.crash(follower);
                    }
                    if round == 10 {
                        sim.restart(follower);
                    }
                    if round == 12
                        && let Some(l) = sim.leader()
                    {
                        sim.crash(l);
                    }
                    if let Some(l) = sim.leader() {
                        sim.propose(l);
                    }
                    sim.run(6);
                }
                sim.assert_converged();
            },
        ),
        (
            "a read asked right after an election is answered",
            3,
            Faults::default(),
            |sim| {
                // raft-rs drops a read index at a leader that has not committed in its term
                // yet; the node asks again until answered.
                let (old, _) = elect(sim, 60);
                sim.run(5);
                sim.crash(old);
                let new = loop {
                    sim.tick();
                    if let Some(l) = sim.leader().filter(|&l| l != old) {
                        break l;
                    }
                };
                let follower = sim
                    .ids
                    .iter()
                    .copied()
                    .find(|&i| i != old && i != new)
                    .unwrap();
                assert!(sim.read(new, b"on-leader"));
                // A follower can ask once it has heard from the new leader.
                let mut asked = false;
                for _ in 0..20 {
                    if sim.read(follower, b"on-follower") {
                        asked = true;
                        break;
                    }
                    sim.tick();
                }
                assert!(asked, "the follower never learned the leader");
                sim.run(60);
                assert!(
                    sim.answered(new, b"on-leader"),
                    "the leader's read was lost"
                );
                assert!(
                    sim.answered(follower, b"on-follower"),
                    "the follower's read was lost"
                );
                sim.assert_converged();
            },
        ),
        (
            "a membership change during a partition",
            3,
            Faults::default(),
            |sim| {
                let (leader, _) = elect(sim, 60);
                let others: Vec<u64> = sim.ids.iter().copied().filter(|&i| i != leader).collect();
                // One follower is cut off while the majority adds member 4.
                sim.partition(&[&[leader, others[0], 4], &[others[1]]]);
                assert!(sim.propose_conf(leader, ConfChangeKind::AddVoter, 4));
                sim.run(10);
                sim.join(4, &[1, 2, 3, 4]);
                for _ in 0..5 {
                    if let Some(l) = sim.leader() {
                        sim.propose(l);
                    }
                    sim.run(5);
                }
                sim.heal();
                sim.run(40);
                // Then the member that was cut off is removed; it stops.
                let l = sim.leader().expect("a leader");
                assert!(sim.propose_conf(l, ConfChangeKind::Remove, others[1]));
                sim.run(40);
                assert!(
                    sim.members[&others[1]].removed,
                    "the removed member stopped"
                );
                if let Some(l) = sim.leader() {
                    sim.propose(l);
                }
                sim.assert_converged();
                assert!(sim.members[&4].voters.contains(&4));
                assert!(!sim.members[&leader].voters.contains(&others[1]));
            },
        ),
        (
            "a member behind the compacted log catches up by snapshot",
            3,
            Faults::default(),
            |sim| {
                let (leader, _) = elect(sim, 60);
                let behind = sim.ids.iter().copied().find(|&i| i != leader).unwrap();
                sim.crash(behind);
                for _ in 0..30 {
                    sim.propose(leader);
                    sim.run(2);
                }
                for id in sim.ids.clone() {
                    if id != behind {
                        sim.compact(id, 3);
                    }
                }
                sim.restart(behind);
                sim.run(60);
                assert!(
                    sim.members[&behind].installs >= 1,
                    "a snapshot was installed"
                );
                // It restarts from its snapshot mark and carries on from the log.
                sim.crash(behind);
                sim.restart(behind);
                sim.propose(sim.leader().unwrap());
                sim.assert_converged();
            },
        ),
    ];
    for (name, n, faults, script) in cases {
        for seed in 1..=3 {
            let mut sim = Sim::new(n, seed, faults);
            script(&mut sim);
            let _ = name;
        }
    }
}

/// Drops, duplicates, delays and reorders messages, cuts the cluster into random partitions and
/// crashes members, over many seeds; proposals go to random members all along. Every step is
/// checked, and at the end, healed, all members agree on everything ever applied.
#[test]
fn chaos_keeps_the_invariants() {
    for seed in 1..=40u64 {
        let faults = Faults {
            drop: 50,
            duplicate: 50,
            max_delay: 4,
        };
        let n = if seed % 2 == 0 { 3 } else { 5 };
        let mut sim = Sim::new(n, seed, faults);
        for step in 0..300u64 {
            let r = sim.rng.below(100);
            if r < 30 {
                let id = 1 + sim.rng.below(n);
                sim.propose(id);
            }
            if step % 50 == 25 {
                let cut = 1 + sim.rng.below(n - 1);
                let ids = sim.ids.clone();
                let (a, b) = ids.split_at(cut as usize);
                sim.partition(&[a, b]);
            }
            if step % 50 == 45 {
                sim.heal();
            }
            if sim.rng.chance(10) {
                let id = 1 + sim.rng.below(n);
                sim.crash(id);
            }
            if sim.rng.chance(40) {
                let id = 1 + sim.rng.below(n);
                sim.restart(id);
            }
            sim.tick();
        }
        sim.assert_converged();
        assert!(
            !sim.members[&1].applied.is_empty(),
            "seed {seed}: nothing was ever committed"
        );
    }
}

/// raft-rs's leader keeps one pending read per context and drops a second under a context it
/// already holds (another member counting from the same number, or one that restarted and
/// counts from 1 again), and a context it holds twice over time can be confirmed by stale
/// heartbeat answers (etcd-io/raft#397). So the leader gives each read another member forwards
/// a context of its own (`RaftNode::step`), and a follower's read under the very context of a
/// read the leader is holding is answered with the same round, as one under a distinct context.
#[test]
fn a_read_under_a_context_the_leader_already_holds_is_answered_in_the_same_round() {
    for (ctx_leader, ctx_follower) in [(&b"same"[..], &b"same"[..]), (b"lead-1", b"foll-1")] {
        let mut sim = Sim::new(5, 7, Faults::default());
        let (leader, _) = elect(&mut sim, 60);
        sim.run(10);
        let others: Vec<u64> = sim.ids.iter().copied().filter(|&i| i != leader).collect();
        let follower = others[0];
        // The leader and one follower cut off from the rest: no quorum, so both reads stay
        // pending at the leader until the cut heals (shorter than an election timeout).
        sim.partition(&[&[leader, follower], &others[1..]]);
        assert!(sim.read(leader, ctx_leader));
        assert!(sim.read(follower, ctx_follower));
        sim.run(2);
        assert!(!sim.answered(leader, ctx_leader), "no quorum yet");
        sim.heal();
        let mut at = (None, None);
        for t in 1..=12 {
            sim.run(1);
            if at.0.is_none() && sim.answered(leader, ctx_leader) {
                at.0 = Some(t);
            }
            if at.1.is_none() && sim.answered(follower, ctx_follower) {
                at.1 = Some(t);
            }
        }
        let (Some(leader_at), Some(follower_at)) = at else {
            panic!("both reads are answered in the end: {at:?}");
        };
        // The same round answers both: the follower's does not wait for it to ask again.
        assert!(
            follower_at <= leader_at + 1,
            "contexts {ctx_leader:?} and {ctx_follower:?}: answered at {at:?}"
        );
    }
}
