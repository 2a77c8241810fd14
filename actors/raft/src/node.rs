use actcd_types::EtcdError;
use actcd_types::msg::{
    CommittedEntry, ConfChangeKind, EntryKind, HardState, PeerMessage, WalEntry,
};
use protobuf::Message as _;
use raft::SnapshotStatus;
use raft::prelude::{
    ConfChange, ConfChangeType, ConfState, Entry, EntryType, HardState as RaftHardState, Message,
    MessageType, Snapshot,
};
use raft::storage::MemStorage;
use raft::{Config, RawNode, StateRole, Storage as _};

/// Static settings of one member.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub id: u64,
    /// The voters and learners as the state machine has applied them (up to `applied`); for a
    /// new cluster, its initial members. Conf changes above `applied` are re-applied as the
    /// applier reaches them again.
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
    pub election_tick: usize,
    /// Ticks without a leader before this member campaigns, instead of raft-rs's random pick in
    /// `[election_tick, 2 × election_tick)` (drawn from a thread-local generator, which no seed
    /// reaches): deterministic simulations set it per member.
    pub fixed_election_timeout: Option<usize>,
    pub heartbeat_tick: usize,
    /// Raft's pre-vote phase (`--pre-vote`): a member first asks whether it could win before
    /// raising its term, so a member that was cut off does not depose a working leader.
    pub pre_vote: bool,
    /// Apply entries up to this index are already in the state machine (its consistent index).
    pub applied: u64,
}

/// What the WAL held at start-up.
#[derive(Debug, Clone, Default)]
pub struct Recovered {
    /// (index, term, encoded ConfState) of the last released-log snapshot mark.
    pub snapshot: Option<(u64, u64, Vec<u8>)>,
    pub hard_state: HardState,
    pub entries: Vec<WalEntry>,
}

/// The work one Ready hands back, in the order it must be done (see the crate doc).
#[derive(Debug, Default)]
pub struct ReadyOutput {
    pub number: u64,
    pub messages: Vec<PeerMessage>,
    pub committed: Vec<CommittedEntry>,
    pub entries: Vec<WalEntry>,
    pub hard_state: Option<HardState>,
    /// raft's `MustSync`: the Ready carries entries, a snapshot, or a new term or vote. Without
    /// it, only the commit index (volatile) moved and nothing needs an fsync.
    pub must_sync: bool,
    pub persisted_messages: Vec<PeerMessage>,
    /// (request context, read index) pairs answered in this Ready.
    pub reads: Vec<(Vec<u8>, u64)>,
    /// The leader this node now follows, when it changed.
    pub leader_changed: Option<u64>,
    /// A snapshot from the leader that raft accepted: (index, term, encoded conf state). The
    /// state machine must install it before the Ready is persisted or anything after applied.
    pub snapshot: Option<(u64, u64, Vec<u8>)>,
    /// Snapshot messages to send: (to, snapshot index, encoded message). They travel with a
    /// store copy, on their own stream.
    pub snapshots_out: Vec<(u64, u64, Vec<u8>)>,
}

pub struct RaftNode {
    raw: RawNode<MemStorage>,
    id: u64,
    leader: u64,
    /// Read requests not answered yet, by context. raft-rs drops a read index asked of a
    /// leader that has not committed an entry in its term yet (and a follower's forwarded one
    /// with it) without a word, so unanswered reads are asked again every
    /// [`READ_RETRY_TICKS`], as etcd re-sends its read index: each time under a context never
    /// sent before (see [`retry_context`]), as etcd 3.6.9 does (#21417, issue #20418).
    pending_reads: std::collections::HashMap<Vec<u8>, PendingRead>,
    /// Read-index requests other members forwarded to this leader, by the context raft was
    /// given for them (one of this node's own, never given before) → the context the member
    /// sent, put back into the answer. See [`RaftNode::step`].
    forwarded_reads: std::collections::HashMap<Vec<u8>, Vec<u8>>,
    next_forwarded: u64,
}

/// A read request not answered yet.
#[derive(Debug, Clone, Copy, Default)]
struct PendingRead {
    /// Ticks since it was last asked.
    age: u32,
    /// How many times it was asked again.
    retries: u32,
}

/// Ticks an unanswered read index waits before it is asked again.
pub const READ_RETRY_TICKS: u32 = 5;

/// Marks a retry context: the round's context, this byte, the retry number (4 bytes).
const RETRY_MARK: u8 = 0xfe;
/// Marks a forwarded request's context on the leader: this byte, then a counter (8 bytes).
const FORWARDED_MARK: u8 = 0xff;

/// The context a read round is asked again under: never one sent before.
///
/// raft-rs's leader keys pending read-index requests by their context (the `readOnly` of etcd's
/// raft before etcd-io/raft#397). A context it has confirmed and forgotten, sent to it again (a
/// retry), is a new request to it; heartbeat answers still in flight from the first round
/// carry that context and confirm the new one, and with it every read queued before it, without
/// a quorum round after those were asked: on a leader already deposed, a stale read. A context
/// is therefore sent once, and the answer to any of a round's contexts answers the round.
fn retry_context(round: &[u8], retries: u32) -> Vec<u8> {
    let mut ctx = Vec::with_capacity(round.len() + 5);
    ctx.extend_from_slice(round);
    ctx.push(RETRY_MARK);
    ctx.extend_from_slice(&retries.to_be_bytes());
    ctx
}

fn to_raft_hs(hs: &HardState) -> RaftHardState {
    RaftHardState {
        term: hs.term,
        vote: hs.vote,
        commit: hs.commit,
        ..Default::default()
    }
}

fn conf_change(kind: ConfChangeKind, node_id: u64) -> ConfChange {
    let change_type = match kind {
        ConfChangeKind::AddVoter | ConfChangeKind::Promote => ConfChangeType::AddNode,
        ConfChangeKind::AddLearner => ConfChangeType::AddLearnerNode,
        ConfChangeKind::Remove => ConfChangeType::RemoveNode,
    };
    ConfChange {
        change_type,
        node_id,
        ..Default::default()
    }
}

/// Drops the entries below `compact_to` and lets the log's buffer go with them. raft-rs's own
/// `MemStorageCore::compact` drains the front of its vector and keeps its capacity: after a
/// `--snapshot-count` of 100,000 entries the 5,000 kept ones sat in a buffer sized for 131,072
/// (about 14 MiB of entry headers at rest). The store is rebuilt instead, as etcd's
/// `MemoryStorage.Compact` copies what it keeps into a new slice: a snapshot mark at
/// `compact_to - 1` (its term is known, so a follower whose next entry is `compact_to` still
/// gets entries, not a snapshot), the kept entries, and the same hard state and configuration.
fn compact_store(store: &MemStorage, compact_to: u64) -> raft::Result<()> {
    let last = store.last_index()?;
    let term = store.term(compact_to - 1)?;
    let kept = store.entries(
        compact_to,
        last + 1,
        None,
        raft::GetEntriesContext::empty(false),
    )?;
    let state = store.initial_state()?;
    let mut mark = Snapshot::default();
    let meta = mark.mut_metadata();
    meta.index = compact_to - 1;
    meta.term = term;
    meta.set_conf_state(state.conf_state);
    let mut fresh = raft::storage::MemStorageCore::default();
    fresh.apply_snapshot(mark)?;
    fresh.append(&kept)?;
    fresh.set_hardstate(state.hard_state);
    *store.wl() = fresh;
    Ok(())
}

/// Whether an encoded message is a heartbeat: its first field is `msg_type` (field 1, a
/// varint) with `MsgHeartbeat`'s number. Read from the bytes so the peer metrics need no
/// second decode.
pub fn is_heartbeat(bytes: &[u8]) -> bool {
    bytes.first() == Some(&0x08)
        && bytes.get(1) == Some(&(raft::eraftpb::MessageType::MsgHeartbeat as u8))
}

fn encode_messages(msgs: Vec<Message>) -> Vec<PeerMessage> {
    msgs.into_iter()
        .filter_map(|m| {
            m.write_to_bytes()
                .ok()
                .map(|b| PeerMessage { to: m.to, msg: b })
        })
        .collect()
}

impl RaftNode {
    /// Builds the node from what the WAL recovered. A fresh single-voter cluster campaigns at
    /// once, so it leads after its first Ready is persisted.
    pub fn new(cfg: &NodeConfig, rec: Recovered) -> Result<Self, EtcdError> {
        let store = MemStorage::new();
        let conf = ConfState {
            voters: cfg.voters.clone(),
            learners: cfg.learners.clone(),
            ..Default::default()
        };
        {
            let mut core = store.wl();
            match &rec.snapshot {
                Some((index, term, cs)) => {
                    let mut snap = Snapshot::default();
                    let meta = snap.mut_metadata();
                    meta.index = *index;
                    meta.term = *term;
                    // The configuration is the state machine's, which may be past the mark.
                    let _ = cs;
                    meta.set_conf_state(conf.clone());
                    core.apply_snapshot(snap).map_err(EtcdError::internal)?;
                }
                None => core.set_conf_state(conf),
            }
            let mut hs = to_raft_hs(&rec.hard_state);
            if rec.snapshot.is_none() && rec.entries.is_empty() && hs.term == 0 {
                // A brand-new member starts at term 1, as etcd's bootstrap does, so its first
                // election is term 2 and response headers carry the terms etcd's would.
                hs.term = 1;
            }
            let floor = rec.snapshot.as_ref().map_or(0, |s| s.0);
            hs.commit = hs.commit.max(floor);
            let mut ents = Vec::with_capacity(rec.entries.len());
            for e in &rec.entries {
                ents.push(Entry::parse_from_bytes(&e.data).map_err(EtcdError::internal)?);
            }
            core.append(&ents).map_err(EtcdError::internal)?;
            let last = floor.max(ents.last().map_or(0, |e| e.index));
            hs.commit = hs.commit.min(last);
            core.set_hardstate(hs);
        }
        let commit = store.rl().hard_state().commit;
        let floor = rec.snapshot.as_ref().map_or(0, |s| s.0);
        let config = Config {
            id: cfg.id,
            election_tick: cfg.election_tick,
            min_election_tick: cfg.fixed_election_timeout.unwrap_or(0),
            max_election_tick: cfg.fixed_election_timeout.map_or(0, |t| t + 1),
            heartbeat_tick: cfg.heartbeat_tick,
            applied: cfg.applied.min(commit).max(floor),
            max_size_per_msg: 1024 * 1024,
            max_inflight_msgs: 256,
            check_quorum: true,
            pre_vote: cfg.pre_vote,
            ..Default::default()
        };
        config.validate().map_err(EtcdError::internal)?;
        let logger = slog::Logger::root(crate::log::ToTracing, slog::o!());
        let mut raw = RawNode::new(&config, store, &logger).map_err(EtcdError::internal)?;
        if cfg.voters == [cfg.id] {
            raw.campaign().map_err(EtcdError::internal)?;
        }
        Ok(Self {
            raw,
            id: cfg.id,
            leader: 0,
            pending_reads: std::collections::HashMap::new(),
            forwarded_reads: std::collections::HashMap::new(),
            next_forwarded: 0,
        })
    }

    /// etcd's initial election tick advance (`--initial-election-tick-advance`): counts `n` ticks
    /// of election time at once, so a member that hears no leader campaigns after the last few
    /// ticks of its timeout instead of a whole one. `n` below the election timeout never starts
    /// an election by itself.
    pub fn advance_ticks(&mut self, n: usize) {
        for _ in 0..n {
            self.raw.tick();
        }
    }

    pub fn tick(&mut self) {
        self.raw.tick();
        if self.pending_reads.is_empty() || self.raw.raft.leader_id == raft::INVALID_ID {
            return;
        }
        let mut again = Vec::new();
        for (round, pending) in &mut self.pending_reads {
            pending.age += 1;
            if pending.age >= READ_RETRY_TICKS {
                pending.age = 0;
                pending.retries += 1;
                again.push(retry_context(round, pending.retries));
            }
        }
        for ctx in again {
            self.raw.read_index(ctx);
        }
    }

    /// The read round a read state answers: its own context, or the round a retry context
    /// was made from.
    fn read_round(&self, ctx: Vec<u8>) -> Vec<u8> {
        if self.pending_reads.contains_key(&ctx) {
            return ctx;
        }
        match ctx.len().checked_sub(5) {
            Some(n) if ctx[n] == RETRY_MARK => ctx[..n].to_vec(),
            _ => ctx,
        }
    }

    /// Stops asking again for reads not answered yet (their callers were failed).
    pub fn forget_reads(&mut self) {
        self.pending_reads.clear();
    }

    pub fn propose(&mut self, data: Vec<u8>) -> Result<(), EtcdError> {
        if self.raw.raft.leader_id == raft::INVALID_ID {
            return Err(EtcdError::NoLeader);
        }
        self.raw.propose(vec![], data).map_err(|e| match e {
            raft::Error::ProposalDropped => EtcdError::NoLeader,
            e => EtcdError::internal(e),
        })
    }

    pub fn read_index(&mut self, ctx: Vec<u8>) -> Result<(), EtcdError> {
        if self.raw.raft.leader_id == raft::INVALID_ID {
            return Err(EtcdError::NoLeader);
        }
        self.pending_reads
            .insert(ctx.clone(), PendingRead::default());
        self.raw.read_index(ctx);
        Ok(())
    }

    /// etcd's `isLearnerReady`, on the leader: the learner's log matches at least 90% of the
    /// leader's. Elsewhere `NotLeader` (the caller asks the leader). An id that is not a
    /// learner passes: the apply-time checks answer for it.
    pub fn learner_ready(&self, id: u64) -> Result<(), EtcdError> {
        if !self.is_leader() {
            return Err(EtcdError::NotLeader);
        }
        if !self.raw.raft.prs().conf().learners().contains(&id) {
            return Ok(());
        }
        let leader_match = self.raw.raft.raft_log.last_index();
        let learner_match = self.raw.raft.prs().get(id).map_or(0, |p| p.matched);
        if (learner_match as f64) < (leader_match as f64) * 0.9 {
            return Err(EtcdError::LearnerNotReady);
        }
        Ok(())
    }

    /// Proposes a configuration change carrying `context` (see `ProposeConfChange`).
    pub fn propose_conf_change(
        &mut self,
        kind: ConfChangeKind,
        node_id: u64,
        context: Vec<u8>,
    ) -> Result<(), EtcdError> {
        if self.raw.raft.leader_id == raft::INVALID_ID {
            return Err(EtcdError::NoLeader);
        }
        let mut cc = conf_change(kind, node_id);
        cc.context = context.into();
        self.raw
            .propose_conf_change(vec![], cc)
            .map_err(|e| match e {
                raft::Error::ProposalDropped => EtcdError::NoLeader,
                e => EtcdError::internal(e),
            })
    }

    /// Makes an applied membership change raft's configuration.
    pub fn apply_conf_change(&mut self, kind: ConfChangeKind, node_id: u64) {
        let cc = conf_change(kind, node_id);
        match self.raw.apply_conf_change(&cc) {
            Ok(cs) => self.raw.mut_store().wl().set_conf_state(cs),
            Err(e) => tracing::warn!(node_id, ?kind, error = %e, "conf change not applied"),
        }
    }

    /// Every voter and learner of the configuration.
    pub fn conf_members(&self) -> Vec<u64> {
        let cs = self.raw.raft.prs().conf().to_conf_state();
        cs.voters.into_iter().chain(cs.learners).collect()
    }

    /// Whether this member is a learner in its configuration.
    pub fn is_learner(&self) -> bool {
        self.raw.raft.prs().conf().learners().contains(&self.id)
    }

    /// Whether `id` is a voter or learner in this member's configuration.
    pub fn knows(&self, id: u64) -> bool {
        let conf = self.raw.raft.prs().conf();
        conf.voters().contains(id) || conf.learners().contains(&id)
    }

    /// Starts handing leadership to `to` (ignored unless this member leads).
    pub fn transfer_leader(&mut self, to: u64) {
        if self.is_leader() && to != self.id {
            self.raw.transfer_leader(to);
        }
    }

    /// How sending a snapshot to `to` ended.
    pub fn report_snapshot(&mut self, to: u64, ok: bool) {
        let status = if ok {
            SnapshotStatus::Finish
        } else {
            SnapshotStatus::Failure
        };
        self.raw.report_snapshot(to, status);
    }

    /// A peer's message as the transport hands it on (the `data` of its `RaftMessage`, or
    /// the `raft_message` of a snapshot's first chunk) decoded as raft's `Message`; `None`
    /// for bytes that are not one. The one decode of what peers send ([`Self::step`],
    /// [`Self::snapshot_index`]); the fuzz target `raft_envelope` drives it.
    pub fn decode_peer_message(bytes: &[u8]) -> Option<Message> {
        Message::parse_from_bytes(bytes).ok()
    }

    /// The snapshot index a snapshot message carries (`None` if it is not one).
    pub fn snapshot_index(msg: &[u8]) -> Option<u64> {
        let m = Self::decode_peer_message(msg)?;
        (m.get_msg_type() == MessageType::MsgSnapshot)
            .then(|| m.get_snapshot().get_metadata().index)
    }

    /// Brings raft's configuration in line with `voters` and `learners` (the members of a
    /// store installed from a snapshot) one simple change at a time.
    pub fn reconcile_conf(&mut self, voters: &[u64], learners: &[u64]) {
        let cs = self.raw.raft.prs().conf().to_conf_state();
        for &id in voters {
            if cs.learners.contains(&id) {
                self.apply_conf_change(ConfChangeKind::Promote, id);
            } else if !cs.voters.contains(&id) {
                self.apply_conf_change(ConfChangeKind::AddVoter, id);
            }
        }
        for &id in learners {
            if !cs.learners.contains(&id) && !cs.voters.contains(&id) {
                self.apply_conf_change(ConfChangeKind::AddLearner, id);
            }
        }
        for id in cs.voters.iter().chain(&cs.learners) {
            if !voters.contains(id) && !learners.contains(id) {
                self.apply_conf_change(ConfChangeKind::Remove, *id);
            }
        }
    }

    /// The transport lost member `id`.
    pub fn report_unreachable(&mut self, id: u64) {
        self.raw.report_unreachable(id);
    }

    /// A peer's message; malformed bytes are dropped (peers are trusted but not infallible).
    /// Steps a peer's message in; returns its sender and whether it answers a heartbeat (for
    /// the peer metrics).
    ///
    /// A read-index request another member forwards to this leader reaches raft under a
    /// context of this node's own, never given before, and the answer goes back under the
    /// member's context ([`Self::ready`]): raft-rs then never holds one context twice, whatever
    /// the member sends (an older member re-sends a read under the same context), which is
    /// what etcd-io/raft#397 makes raft itself tolerate (see [`retry_context`]).
    ///
    /// A message addressed to another member id is dropped, as etcd 3.5.14's `Process` does
    /// (#17813): a peer that still takes this address for a member since removed and re-added
    /// under a new id must not move this member's raft.
    pub fn step(&mut self, bytes: &[u8]) -> Option<(u64, bool)> {
        let mut m = Self::decode_peer_message(bytes)?;
        if m.to != self.id {
            tracing::warn!(
                local_member_id = %format_args!("{:x}", self.id),
                mismatch_member_id = %format_args!("{:x}", m.to),
                "rejected Raft message to mismatch member"
            );
            return None;
        }
        let seen = (
            m.from,
            m.get_msg_type() == raft::eraftpb::MessageType::MsgHeartbeatResponse,
        );
        if m.get_msg_type() == MessageType::MsgReadIndex
            && m.from != self.id
            && m.entries.len() == 1
            && self.is_leader()
            && self.raw.raft.commit_to_current_term()
        {
            self.next_forwarded += 1;
            let mut own = vec![FORWARDED_MARK];
            own.extend_from_slice(&self.next_forwarded.to_be_bytes());
            let theirs = std::mem::replace(&mut m.entries[0].data, own.clone().into());
            self.forwarded_reads.insert(own, theirs.to_vec());
        }
        let _ = self.raw.step(m);
        Some(seen)
    }

    /// Puts back the member's own context into the answers to the read requests it forwarded
    /// (see [`Self::step`]), and forgets the ones raft no longer holds.
    fn answer_forwarded_reads(&mut self, msgs: &mut [Message]) {
        if self.forwarded_reads.is_empty() {
            return;
        }
        for m in msgs.iter_mut() {
            if m.get_msg_type() == MessageType::MsgReadIndexResp
                && m.entries.len() == 1
                && let Some(theirs) = self.forwarded_reads.remove(m.entries[0].data.as_ref())
            {
                m.entries[0].data = theirs.into();
            }
        }
        let pending = &self.raw.raft.read_only.pending_read_index;
        self.forwarded_reads
            .retain(|own, _| pending.contains_key(own));
    }

    pub fn on_persisted(&mut self, number: u64) {
        self.raw.on_persist_ready(number);
    }

    pub fn on_applied(&mut self, index: u64) {
        let applied = self.raw.raft.raft_log.applied;
        let upper = self
            .raw
            .raft
            .raft_log
            .committed
            .min(self.raw.raft.raft_log.persisted);
        if index > applied && index <= upper {
            self.raw.advance_apply_to(index);
        }
    }

    /// Takes the next Ready, if any, doing the in-memory parts (snapshot, log append) and leaving
    /// the rest to the caller in `ReadyOutput`.
    pub fn ready(&mut self) -> Result<Option<ReadyOutput>, EtcdError> {
        if !self.raw.has_ready() {
            return Ok(None);
        }
        let mut rd = self.raw.ready();
        let mut out = ReadyOutput {
            number: rd.number(),
            ..Default::default()
        };
        if let Some(ss) = rd.ss()
            && ss.leader_id != self.leader
        {
            self.leader = ss.leader_id;
            out.leader_changed = Some(ss.leader_id);
        }
        let (snaps, mut msgs): (Vec<Message>, Vec<Message>) = rd
            .take_messages()
            .into_iter()
            .partition(|m| m.get_msg_type() == MessageType::MsgSnapshot);
        let mut persisted = rd.take_persisted_messages();
        self.answer_forwarded_reads(&mut msgs);
        self.answer_forwarded_reads(&mut persisted);
        out.messages = encode_messages(msgs);
        for m in snaps {
            let index = m.get_snapshot().get_metadata().index;
            if let Ok(b) = m.write_to_bytes() {
                out.snapshots_out.push((m.to, index, b));
            }
        }
        if !rd.snapshot().is_empty() {
            let snap = rd.snapshot().clone();
            let meta = snap.get_metadata();
            out.snapshot = Some((
                meta.index,
                meta.term,
                meta.get_conf_state()
                    .write_to_bytes()
                    .map_err(EtcdError::internal)?,
            ));
            self.raw
                .mut_store()
                .wl()
                .apply_snapshot(snap)
                .map_err(EtcdError::internal)?;
        }
        out.committed = rd
            .take_committed_entries()
            .into_iter()
            .map(|e| CommittedEntry {
                index: e.index,
                term: e.term,
                kind: match e.get_entry_type() {
                    EntryType::EntryNormal => EntryKind::Normal,
                    EntryType::EntryConfChange => EntryKind::ConfChange,
                    EntryType::EntryConfChangeV2 => EntryKind::ConfChangeV2,
                },
                // A conf change's request is its context; the applier decodes it like any
                // other entry's data.
                data: match e.get_entry_type() {
                    EntryType::EntryConfChange => ConfChange::parse_from_bytes(&e.data)
                        .map(|cc| cc.context.to_vec())
                        .unwrap_or_default(),
                    _ => e.data.to_vec(),
                },
            })
            .collect();
        out.reads = rd
            .take_read_states()
            .into_iter()
            .map(|r| (self.read_round(r.request_ctx), r.index))
            .collect();
        for (ctx, _) in &out.reads {
            self.pending_reads.remove(ctx);
        }
        let entries = rd.take_entries();
        if !entries.is_empty() {
            self.raw
                .mut_store()
                .wl()
                .append(&entries)
                .map_err(EtcdError::internal)?;
            for e in &entries {
                let data = e.write_to_bytes().map_err(EtcdError::internal)?;
                out.entries.push(WalEntry {
                    index: e.index,
                    term: e.term,
                    data,
                });
            }
        }
        if let Some(hs) = rd.hs() {
            self.raw.mut_store().wl().set_hardstate(hs.clone());
            out.hard_state = Some(HardState {
                term: hs.term,
                vote: hs.vote,
                commit: hs.commit,
            });
        }
        out.must_sync = rd.must_sync();
        out.persisted_messages = encode_messages(persisted);
        self.raw.advance_append_async(rd);
        Ok(Some(out))
    }

    /// Drops in-memory entries below `applied - keep`, returning (index, term, conf state) of the
    /// new snapshot mark at `applied` for the WAL, or `None` if nothing can be compacted.
    pub fn compact_log(&mut self, applied: u64, keep: u64) -> Option<(u64, u64, Vec<u8>)> {
        let term = self.raw.raft.raft_log.term(applied).ok()?;
        let first = self.raw.store().first_index().ok()?;
        let compact_to = applied.saturating_sub(keep);
        if compact_to > first {
            let _ = compact_store(self.raw.mut_store(), compact_to);
        }
        let cs = self
            .raw
            .raft
            .prs()
            .conf()
            .to_conf_state()
            .write_to_bytes()
            .ok()?;
        Some((applied, term, cs))
    }

    /// After a restart: drops from memory the replayed entries more than `keep` below the
    /// applied index, as a compaction would. The WAL replays every entry since its last
    /// snapshot mark, up to a snapshot count of them, though the state machine holds all but
    /// the last few already; a follower that far behind is sent a snapshot anyway. The WAL
    /// keeps its records until the next compaction releases them.
    pub fn trim_replayed(&mut self, keep: u64) {
        let _ = self.compact_log(self.applied(), keep);
    }

    /// Whether the next Ready would carry new log entries to persist.
    pub fn has_new_entries(&self) -> bool {
        !self.raw.raft.raft_log.unstable_entries().is_empty()
    }

    /// Whether the next Ready may be taken only once every earlier one is persisted: it
    /// carries a snapshot (installed only over a log that is all durable), or raft-rs made
    /// this member leader since the last Ready (raft-rs requires that no Ready with entries is
    /// still unpersisted when it hands out a new leader's first one).
    pub fn must_wait_for_persisted(&self) -> bool {
        self.raw.raft.raft_log.unstable_snapshot().is_some()
            || (self.raw.raft.state == StateRole::Leader && self.leader != self.id)
    }

    pub fn id(&self) -> u64 {
        self.id
    }
    pub fn leader(&self) -> u64 {
        self.raw.raft.leader_id
    }
    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }
    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }
    pub fn committed(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }
    pub fn applied(&self) -> u64 {
        self.raw.raft.raft_log.applied
    }
    pub fn last_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(applied: u64, rec: Recovered) -> RaftNode {
        let cfg = NodeConfig {
            id: 1,
            voters: vec![1],
            learners: vec![],
            election_tick: 10,
            fixed_election_timeout: None,
            heartbeat_tick: 1,
            pre_vote: true,
            applied,
        };
        RaftNode::new(&cfg, rec).unwrap()
    }

    /// Runs Readies to quiescence, persisting each at once; returns committed entries.
    /// What a run of Readies produced: committed entries, WAL writes, answered reads.
    type Drained = (Vec<CommittedEntry>, Vec<WalEntry>, Vec<(Vec<u8>, u64)>);

    fn drive(n: &mut RaftNode) -> Drained {
        let (mut committed, mut written, mut reads) = (vec![], vec![], vec![]);
        while let Some(out) = n.ready().unwrap() {
            committed.extend(out.committed);
            written.extend(out.entries);
            reads.extend(out.reads);
            n.on_persisted(out.number);
            if let Some(last) = committed.last() {
                n.on_applied(last.index);
            }
        }
        (committed, written, reads)
    }

    /// `--pre-vote`: a member whose peers are unreachable first asks whether it could win
    /// (raft thesis §9.6), so its term stays put; without pre-vote it raises its term each
    /// election timeout, as a cut-off etcd member with `--pre-vote=false` does.
    #[test]
    fn pre_vote_keeps_an_isolated_members_term() {
        let term_after_timeouts = |pre_vote: bool| {
            let cfg = NodeConfig {
                id: 1,
                voters: vec![1, 2, 3],
                learners: vec![],
                election_tick: 10,
                fixed_election_timeout: Some(10),
                heartbeat_tick: 1,
                pre_vote,
                applied: 0,
            };
            let mut n = RaftNode::new(&cfg, Recovered::default()).unwrap();
            let start = n.term();
            for _ in 0..35 {
                n.tick();
                drive(&mut n);
            }
            n.term() - start
        };
        assert_eq!(term_after_timeouts(true), 0);
        assert!(term_after_timeouts(false) >= 2);
    }

    /// `--initial-election-tick-advance`: with the ticks advanced, a member of three that
    /// hears no leader asks for (pre-)votes within three ticks; without, not before its whole
    /// election timeout.
    #[test]
    fn advanced_ticks_bring_the_first_election_forward() {
        let asks_within_three_ticks = |advance: usize| {
            let cfg = NodeConfig {
                id: 1,
                voters: vec![1, 2, 3],
                learners: vec![],
                election_tick: 10,
                fixed_election_timeout: Some(10),
                heartbeat_tick: 1,
                pre_vote: true,
                applied: 0,
            };
            let mut n = RaftNode::new(&cfg, Recovered::default()).unwrap();
            n.advance_ticks(advance);
            let mut sent = 0;
            for _ in 0..3 {
                n.tick();
                while let Some(out) = n.ready().unwrap() {
                    sent += out.messages.len() + out.persisted_messages.len();
                    n.on_persisted(out.number);
                }
            }
            sent
        };
        assert!(asks_within_three_ticks(8) >= 2, "pre-votes to both peers");
        assert_eq!(asks_within_three_ticks(0), 0);
    }

    /// etcd 3.5.14 (#17813): a message addressed to another member id is not stepped.
    #[test]
    fn a_message_to_another_member_id_is_dropped() {
        let cfg = NodeConfig {
            id: 1,
            voters: vec![1, 2, 3],
            learners: vec![],
            election_tick: 10,
            fixed_election_timeout: Some(10),
            heartbeat_tick: 1,
            pre_vote: true,
            applied: 0,
        };
        let mut n = RaftNode::new(&cfg, Recovered::default()).unwrap();
        let start = n.term();
        let heartbeat = |to: u64| {
            let mut m = Message::default();
            m.set_msg_type(MessageType::MsgHeartbeat);
            (m.from, m.to, m.term) = (2, to, start + 3);
            m.write_to_bytes().unwrap()
        };
        assert_eq!(n.step(&heartbeat(3)), None);
        drive(&mut n);
        assert_eq!(
            n.term(),
            start,
            "a heartbeat to member 3 moved member 1's term"
        );
        assert_eq!(n.step(&heartbeat(1)), Some((2, false)));
        drive(&mut n);
        assert_eq!(n.term(), start + 3, "member 2's leadership is heard");
    }

    #[test]
    fn single_member_elects_itself_and_commits_proposals() {
        let mut n = single(0, Recovered::default());
        let (committed, _, _) = drive(&mut n);
        assert!(n.is_leader());
        assert_eq!(
            n.term(),
            2,
            "a new member starts at term 1 and wins term 2, as etcd's"
        );
        // The leader's empty entry of its term.
        assert_eq!(committed.len(), 1);
        n.propose(b"a".to_vec()).unwrap();
        n.propose(b"b".to_vec()).unwrap();
        let (committed, written, _) = drive(&mut n);
        let data: Vec<_> = committed.iter().map(|e| e.data.clone()).collect();
        assert_eq!(data, vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(written.len(), 2);
        assert_eq!(n.committed(), 3);
    }

    #[test]
    fn nothing_commits_before_the_wal_says_persisted() {
        let mut n = single(0, Recovered::default());
        drive(&mut n);
        n.propose(b"x".to_vec()).unwrap();
        let out = n.ready().unwrap().unwrap();
        assert!(out.committed.is_empty());
        assert_eq!(out.entries.len(), 1);
        assert!(n.ready().unwrap().is_none());
        n.on_persisted(out.number);
        let out = n.ready().unwrap().unwrap();
        assert_eq!(out.committed.len(), 1);
    }

    #[test]
    fn read_index_answers_with_the_commit_index() {
        let mut n = single(0, Recovered::default());
        drive(&mut n);
        n.propose(b"x".to_vec()).unwrap();
        drive(&mut n);
        n.read_index(b"r1".to_vec()).unwrap();
        let (_, _, reads) = drive(&mut n);
        assert_eq!(reads, vec![(b"r1".to_vec(), 2)]);
    }

    #[test]
    fn restart_replays_entries_above_the_applied_index() {
        let mut n = single(0, Recovered::default());
        let (_, mut wal, _) = drive(&mut n);
        for i in 0..3u8 {
            n.propose(vec![i]).unwrap();
        }
        let (_, w, _) = drive(&mut n);
        wal.extend(w);
        let hs = HardState {
            term: n.term(),
            vote: 1,
            commit: n.committed(),
        };
        // The state machine had applied through index 2 before the "crash".
        let mut r = single(
            2,
            Recovered {
                snapshot: None,
                hard_state: hs,
                entries: wal,
            },
        );
        let (committed, _, _) = drive(&mut r);
        let data: Vec<_> = committed
            .iter()
            .filter(|e| !e.data.is_empty())
            .map(|e| e.data.clone())
            .collect();
        assert_eq!(data, vec![vec![1u8], vec![2u8]]);
        assert!(r.is_leader());
        assert_eq!(r.term(), 3);
    }

    #[test]
    fn compaction_keeps_the_tail_and_marks_the_applied_index() {
        let mut n = single(0, Recovered::default());
        drive(&mut n);
        for i in 0..20u8 {
            n.propose(vec![i]).unwrap();
        }
        drive(&mut n);
        let (index, term, _) = n.compact_log(21, 5).unwrap();
        assert_eq!((index, term), (21, 2));
        n.propose(b"after".to_vec()).unwrap();
        let (committed, _, _) = drive(&mut n);
        assert_eq!(committed.last().unwrap().data, b"after".to_vec());
    }

    #[test]
    fn a_restart_keeps_only_the_tail_below_applied() {
        let mut n = single(0, Recovered::default());
        let (_, mut wal, _) = drive(&mut n);
        for i in 0..50u8 {
            n.propose(vec![i]).unwrap();
        }
        wal.extend(drive(&mut n).1);
        let hs = HardState {
            term: n.term(),
            vote: 1,
            commit: n.committed(),
        };
        let applied = n.applied();
        let mut r = single(
            applied,
            Recovered {
                snapshot: None,
                hard_state: hs,
                entries: wal,
            },
        );
        assert_eq!(r.raw.store().first_index().unwrap(), 1);
        r.trim_replayed(5);
        assert_eq!(r.raw.store().first_index().unwrap(), applied - 5);
        assert_eq!(r.raw.store().last_index().unwrap(), applied);
        let (committed, _, _) = drive(&mut r);
        assert!(
            committed.iter().all(|e| e.data.is_empty()),
            "nothing applied twice"
        );
        r.propose(b"after".to_vec()).unwrap();
        let (committed, _, _) = drive(&mut r);
        assert_eq!(committed.last().unwrap().data, b"after".to_vec());
    }

    /// Counts the bytes each thread holds, so a test can see what one call gave back.
    struct Counting;

    thread_local! {
        static LIVE: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
    }

    fn live_bytes() -> isize {
        LIVE.with(|c| c.get())
    }

    // A test-only allocator over the system one; it adds a thread-local count and nothing else.
    #[allow(unsafe_code)]
    unsafe impl std::alloc::GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
            let p = unsafe { std::alloc::System.alloc(l) };
            if !p.is_null() {
                let _ = LIVE.try_with(|c| c.set(c.get() + l.size() as isize));
            }
            p
        }
        unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
            unsafe { std::alloc::System.dealloc(p, l) };
            let _ = LIVE.try_with(|c| c.set(c.get() - l.size() as isize));
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// Compaction frees the compacted entries' slots, not only their data: raft-rs's own
    /// compaction kept the vector's capacity (20,000 entry headers here, 14 MiB at rest after
    /// etcd's default snapshot count of 100,000). The kept tail, the mark's term, the hard
    /// state and the configuration are what they were.
    #[test]
    fn compaction_gives_back_the_log_buffer() {
        let mut n = single(0, Recovered::default());
        drive(&mut n);
        for _ in 0..20 {
            for _ in 0..1000 {
                n.propose(vec![7u8]).unwrap();
            }
            drive(&mut n);
        }
        let applied = n.applied();
        assert!(applied > 20_000, "{applied}");
        let state = n.raw.store().initial_state().unwrap();
        let term = n.raw.store().term(applied - 5).unwrap();

        let before = live_bytes();
        let (index, _, _) = n.compact_log(applied, 5).unwrap();
        let freed = before - live_bytes();
        assert_eq!(index, applied);
        let slots = 20_000 * std::mem::size_of::<Entry>() as isize;
        assert!(
            freed >= slots,
            "freed {freed} bytes, the slots alone are {slots}"
        );

        let store = n.raw.store();
        assert_eq!(store.first_index().unwrap(), applied - 5);
        assert_eq!(store.last_index().unwrap(), applied);
        assert_eq!(store.term(applied - 6).unwrap(), term);
        let now = store.initial_state().unwrap();
        assert_eq!(
            (now.hard_state, now.conf_state),
            (state.hard_state, state.conf_state)
        );
        n.propose(b"after".to_vec()).unwrap();
        let (committed, _, _) = drive(&mut n);
        assert_eq!(committed.last().unwrap().data, b"after".to_vec());
    }

    #[test]
    fn heartbeats_are_told_from_their_bytes() {
        use raft::eraftpb::MessageType;
        let encoded = |t: MessageType| {
            let mut m = Message::default();
            m.set_msg_type(t);
            m.to = 2;
            m.from = 1;
            m.term = 5;
            m.write_to_bytes().unwrap()
        };
        assert!(is_heartbeat(&encoded(MessageType::MsgHeartbeat)));
        for t in [
            MessageType::MsgHup,
            MessageType::MsgAppend,
            MessageType::MsgHeartbeatResponse,
            MessageType::MsgRequestVote,
        ] {
            assert!(!is_heartbeat(&encoded(t)), "{t:?}");
        }
    }
}
