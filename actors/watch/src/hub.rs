//! The watch hub's core: streams, watchers and their groups, with no actor and no channel in it.
//!
//! [`WatchHub`] is driven by calls (a client request, a store notification, a history chunk, a
//! tick) and writes responses into each stream's [`StreamSink`] without ever waiting. What it
//! needs from the store it asks for through [`WatchHub::next_history_read`]; the caller performs
//! the read and hands the result back to [`WatchHub::history_read_done`].

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use actcd_proto::etcdserverpb::watch_create_request::FilterType;
use actcd_proto::etcdserverpb::watch_request::RequestUnion;
use actcd_proto::etcdserverpb::{ResponseHeader, WatchCreateRequest, WatchRequest, WatchResponse};
use actcd_proto::mvccpb::Event;
use actcd_proto::mvccpb::event::EventType;
use actcd_types::msg::{History, HistoryChunk};
use actcd_types::watch::{
    EventRun, INVALID_WATCH_ID, SharedEvents, StreamId, StreamResponse, WatchId,
};
use actcd_types::{EtcdError, MemberIdentity};

use crate::error::WatchError;
use crate::fragment::{GRPC_OVERHEAD_BYTES, fragment};
use crate::group::{Handle, WatchKeys, WatcherGroup};

/// Why a stream took no response: declared beside the queue in `actcd-types`.
pub use actcd_types::watch::SendError;

/// Where a stream's responses go: a bounded queue the hub fills without waiting.
pub trait StreamSink {
    fn try_send(&mut self, response: StreamResponse) -> Result<(), SendError>;
    /// How many more responses would fit now.
    fn room(&self) -> usize;
    /// How many responses the queue holds when full.
    fn capacity(&self) -> usize;
    /// Whether at least one more response would fit now.
    fn has_room(&self) -> bool {
        self.room() > 0
    }
}

/// How many more catch-up responses a stream takes: the room in its queue, but never past
/// `limit` responses queued ([`HubConfig::catch_up_queue`]).
fn catch_up_room(sink: &impl StreamSink, limit: usize) -> usize {
    let room = sink.room();
    let queued = sink.capacity().saturating_sub(room);
    room.min(limit.saturating_sub(queued))
}

/// Tunables, etcd's defaults.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// `--max-request-bytes`: watchers that asked for `fragment` get responses split below this
    /// plus etcd's 512 KiB gRPC allowance.
    pub max_request_bytes: usize,
    /// Events asked of the store per history read while watchers catch up.
    pub history_batch_events: usize,
    /// Control responses (created, canceled, progress) a stream may hold back while its queue
    /// is full before the hub gives up on it and closes it.
    pub max_backlog: usize,
    /// Stamped on every header so fragment sizes come out as sent; the front still sets
    /// `raft_term`.
    pub member: MemberIdentity,
    /// How often watchers with `progress_notify` hear the current revision (etcd: 10 minutes).
    /// Used by the actor; zero turns it off.
    pub progress_interval: Duration,
    /// How soon to retry streams whose queue was full (etcd: 10 ms). Used by the actor.
    pub retry_interval: Duration,
    /// Catch-up responses go only to a stream holding fewer than this many responses; the
    /// rest of its catching-up watchers become victims, and victims come back only as many as
    /// fit under it. The queue's whole capacity stays for synced watchers' events and control
    /// responses. Off by default (no limit but the queue's): with 64, 100,000 watchers on 100
    /// streams catching up held writes less (`benches/beyond-watch.sh`, put p99 12.7-23.6 →
    /// 8.0-9.5 ms, one watcher 5.1-5.7), but 10,000 synced watchers on one stream, which
    /// become victims whenever a put's 10,000 responses overflow the queue, came back 64 a
    /// retry and heard of a put in p50 903 ms instead of 16-25 (`benches/compare-etcd.sh`,
    /// watch10k1; etcd 3.5.1: 133 ms).
    pub catch_up_queue: usize,
}

impl Default for HubConfig {
    fn default() -> Self {
        Self {
            max_request_bytes: 1_572_864,
            history_batch_events: 1000,
            max_backlog: 1024,
            member: MemberIdentity::default(),
            progress_interval: Duration::from_secs(600),
            retry_interval: Duration::from_millis(10),
            catch_up_queue: usize::MAX,
        }
    }
}

/// Counts, for tests and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HubStats {
    pub streams: usize,
    pub watchers: usize,
    pub synced: usize,
    pub unsynced: usize,
    pub victims: usize,
    /// Responses held back for streams whose queue was full.
    pub backlog: usize,
    pub current_revision: i64,
    pub compact_revision: i64,
    pub history_read_in_flight: bool,
    /// Events sent to watchers so far (etcd's `etcd_debugging_mvcc_events_total`).
    pub events_sent: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Caught up: fed by `notify`.
    Synced,
    /// Behind: fed from history reads.
    Unsynced,
    /// Its stream's queue was full: fed by nothing until a retry.
    Victim,
    /// Canceled because its next revision was compacted; the id stays taken until the client
    /// cancels it, as in etcd.
    Compacted,
}

struct Watcher {
    stream: StreamId,
    id: WatchId,
    keys: WatchKeys,
    no_put: bool,
    no_delete: bool,
    prev_kv: bool,
    fragment: bool,
    progress_notify: bool,
    /// No events went out since the last progress tick (etcd's `progress[id]`).
    progress_due: bool,
    /// The `start_revision` the client asked for (0 = from now). Until the store reaches it,
    /// no progress report goes out for this watcher or its stream: it would name a revision
    /// below the watch's start (etcd 3.5.22, #20290).
    start_rev: i64,
    /// The lowest revision this watcher has not been sent yet.
    min_rev: i64,
    state: State,
}

struct Stream<S> {
    sink: S,
    ids: BTreeMap<WatchId, Handle>,
    next_id: WatchId,
    /// Responses that must reach the sink before anything else does: control responses and the
    /// remaining fragments of a split response that did not fit. While it is non-empty the
    /// stream takes no event response (its watchers become victims instead).
    backlog: VecDeque<StreamResponse>,
    victims: BTreeSet<Handle>,
    /// Where the next retry starts taking victims back, so that under lasting overload every
    /// victim gets its turn (taken in handle order from here, wrapping around).
    retry_from: Handle,
    closed: bool,
}

enum Delivery {
    /// On the stream (or in its backlog, for the tail of a split response), or nothing to send.
    Done,
    /// Nothing was sent: the stream is full.
    Blocked,
    /// The stream is gone.
    Gone,
}

/// Streams and their watchers; see the crate doc for the rules it keeps.
pub struct WatchHub<S> {
    cfg: HubConfig,
    current_rev: i64,
    compact_rev: i64,
    streams: BTreeMap<StreamId, Stream<S>>,
    next_stream: u64,
    watchers: HashMap<Handle, Watcher>,
    next_handle: Handle,
    synced: WatcherGroup,
    unsynced: WatcherGroup,
    /// The history read in flight: `(from, to)`.
    reading: Option<(i64, i64)>,
    /// The last history read failed: wait for the next retry tick.
    reads_paused: bool,
    /// Streams with a progress request waiting for all their watchers to be synced.
    progress_waiting: BTreeSet<StreamId>,
    /// Streams holding back responses or with victims: what a retry looks at.
    busy: BTreeSet<StreamId>,
    dead: Vec<StreamId>,
    /// Events handed to watchers' streams so far.
    events_sent: u64,
}

impl<S: StreamSink> WatchHub<S> {
    /// A hub for a store whose current revision is `current_revision`: the next `notify` must
    /// carry the events after it.
    pub fn new(cfg: HubConfig, current_revision: i64) -> Self {
        Self {
            cfg,
            current_rev: current_revision,
            compact_rev: 0,
            streams: BTreeMap::new(),
            next_stream: 1,
            watchers: HashMap::new(),
            next_handle: 1,
            synced: WatcherGroup::default(),
            unsynced: WatcherGroup::default(),
            reading: None,
            reads_paused: false,
            progress_waiting: BTreeSet::new(),
            busy: BTreeSet::new(),
            dead: Vec::new(),
            events_sent: 0,
        }
    }

    pub fn config(&self) -> &HubConfig {
        &self.cfg
    }

    pub fn current_revision(&self) -> i64 {
        self.current_rev
    }

    pub fn open_stream(&mut self, sink: S) -> StreamId {
        let id = StreamId(self.next_stream);
        self.next_stream += 1;
        self.streams.insert(
            id,
            Stream {
                sink,
                ids: BTreeMap::new(),
                next_id: 0,
                backlog: VecDeque::new(),
                victims: BTreeSet::new(),
                retry_from: 0,
                closed: false,
            },
        );
        id
    }

    /// Forget a stream and all its watchers (the client went away).
    pub fn close_stream(&mut self, stream: StreamId) {
        self.dead.push(stream);
        self.finish();
    }

    /// One request from the client, as etcd's server handles it.
    pub fn handle_request(&mut self, stream: StreamId, request: WatchRequest) {
        match request.request_union {
            Some(RequestUnion::CreateRequest(c)) => self.create(stream, c),
            Some(RequestUnion::CancelRequest(c)) => self.cancel(stream, c.watch_id),
            // Answered by `finish` once every watcher of the stream is synced.
            Some(RequestUnion::ProgressRequest(_)) if self.live_stream(stream).is_some() => {
                self.progress_waiting.insert(stream);
            }
            Some(RequestUnion::ProgressRequest(_)) | None => {}
        }
        self.finish();
    }

    /// Refuse a create request the front would not allow (permissions, a bad token), with
    /// `reason` (etcd's error text, e.g. `etcdserver: permission denied`), in stream order.
    /// The response carries watch id -1, as etcd's since 3.5.6 (#14547): the client's own id (0
    /// when it let the server choose) would close a live watch of that id on the client.
    pub fn reject_create(&mut self, stream: StreamId, watch_id: WatchId, reason: String) {
        let _ = watch_id;
        let resp = WatchResponse {
            header: Some(self.header(self.current_rev)),
            watch_id: INVALID_WATCH_ID,
            created: true,
            canceled: true,
            cancel_reason: reason,
            ..Default::default()
        };
        self.send_control(stream, resp);
        self.finish();
    }

    /// What the store applied: `events` in revision order, `revision` its revision afterwards.
    /// Synced watchers get one response per revision (header revision = that revision).
    pub fn notify(&mut self, revision: i64, events: Vec<Event>) {
        let mut events = events.into_iter().peekable();
        while let Some(first) = events.next() {
            let rev = event_revision(&first);
            let mut group = vec![first];
            while let Some(ev) = events.next_if(|e| event_revision(e) == rev) {
                group.push(ev);
            }
            if rev <= self.current_rev {
                // Normal after the hub caught its clock up on waking (notifications the store
                // sent before it answered are still in the mailbox).
                tracing::debug!(
                    rev,
                    current = self.current_rev,
                    "watch hub: ignoring events at or below its revision"
                );
                continue;
            }
            self.notify_revision(rev, group);
            self.current_rev = rev;
        }
        self.current_rev = self.current_rev.max(revision);
        self.finish();
    }

    /// The store was replaced by a snapshot and is now at `revision`: the events between were
    /// never notified, so every synced watcher goes back to catching up from the store's
    /// history from the first revision it has not seen (or is cancelled if that was compacted).
    pub fn restore(&mut self, revision: i64) {
        let next = self.current_rev + 1;
        let synced: Vec<Handle> = self.synced.members().collect();
        for h in synced {
            if let Some(w) = self.watchers.get_mut(&h) {
                w.min_rev = w.min_rev.max(next);
            }
            self.set_state(h, State::Unsynced);
        }
        self.current_rev = self.current_rev.max(revision);
        self.finish();
    }

    /// The history read to issue now, if any: at most one is in flight, and it covers the
    /// oldest unsynced watcher up to the hub's current revision.
    pub fn next_history_read(&mut self) -> Option<History> {
        if self.reading.is_some() || self.reads_paused || self.unsynced.is_empty() {
            return None;
        }
        let from = self
            .unsynced
            .members()
            .map(|h| self.watchers[&h].min_rev)
            .min()?
            .max(1);
        let to = self.current_rev;
        if from > to {
            // Unsynced watchers never start above the current revision; recover if one did.
            let ahead: Vec<Handle> = self.unsynced.members().collect();
            ahead
                .into_iter()
                .for_each(|h| self.set_state(h, State::Synced));
            return None;
        }
        self.reading = Some((from, to));
        Some(History {
            from,
            to,
            max_events: self.cfg.history_batch_events,
        })
    }

    /// The answer to the last [`next_history_read`](Self::next_history_read).
    pub fn history_read_done(&mut self, result: Result<HistoryChunk, EtcdError>) {
        let Some((from, to)) = self.reading.take() else {
            return;
        };
        match result {
            Ok(chunk) => self.catch_up(from, to, chunk),
            Err(e) => {
                tracing::warn!(error = %e, from, to, "watch hub: history read failed; retrying");
                self.reads_paused = true;
            }
        }
        self.finish();
    }

    /// Whether [`retry_victims`](Self::retry_victims) has work: held-back responses, victims,
    /// or a failed history read.
    pub fn needs_retry(&self) -> bool {
        self.reads_paused || !self.busy.is_empty()
    }

    /// Push held-back responses out, and let the victims of every stream with room again catch
    /// up (through history, so nothing they missed is lost).
    pub fn retry_victims(&mut self) {
        self.reads_paused = false;
        let busy: Vec<StreamId> = self.busy.iter().copied().collect();
        for sid in busy {
            let Some(st) = self.streams.get_mut(&sid) else {
                self.busy.remove(&sid);
                continue;
            };
            if !flush_backlog(st) {
                self.dead.push(sid);
                continue;
            }
            if !st.backlog.is_empty() || !st.sink.has_room() {
                continue;
            }
            // Only as many victims as the queue has room for go back to catching up (each will
            // be sent at least one response), and only once the queue has drained a quarter
            // (or has room for them all): taking every victim back whenever one slot was free
            // moved 100,000 watchers between groups every retry, for the next read to find
            // their queues full again and make them victims once more.
            let limit = self.cfg.catch_up_queue.clamp(1, st.sink.capacity().max(1));
            let room = catch_up_room(&st.sink, limit);
            if room < st.victims.len() && room < limit.div_ceil(4) {
                continue;
            }
            let from = st.retry_from;
            let back: Vec<Handle> = st
                .victims
                .range(from..)
                .chain(st.victims.range(..from))
                .copied()
                .take(room)
                .collect();
            for h in &back {
                st.victims.remove(h);
            }
            st.retry_from = back.last().map_or(0, |h| h.wrapping_add(1));
            let done = st.victims.is_empty();
            for h in back {
                let ahead = self.watchers[&h].min_rev > self.current_rev;
                self.set_state(
                    h,
                    if ahead {
                        State::Synced
                    } else {
                        State::Unsynced
                    },
                );
            }
            if !done {
                continue;
            }
            self.busy.remove(&sid);
        }
        self.finish();
    }

    /// The progress ticker fired: every synced watcher with `progress_notify` that was sent no
    /// events since the previous tick hears the current revision (as etcd, skipped when its
    /// stream is full: events are flowing).
    pub fn progress_tick(&mut self) {
        let header = self.header(self.current_rev);
        for w in self.watchers.values_mut().filter(|w| w.progress_notify) {
            let due = std::mem::replace(&mut w.progress_due, true);
            if !due || w.state != State::Synced || self.current_rev < w.start_rev {
                continue;
            }
            let Some(st) = self.streams.get_mut(&w.stream) else {
                continue;
            };
            if st.closed || !st.backlog.is_empty() {
                continue;
            }
            let resp = StreamResponse::new(
                WatchResponse {
                    header: Some(header),
                    watch_id: w.id,
                    ..Default::default()
                },
                false,
            );
            if let Err(SendError::Closed) = st.sink.try_send(resp) {
                st.closed = true;
                self.dead.push(w.stream);
            }
        }
        self.finish();
    }

    /// Watchers on every stream.
    pub fn watcher_count(&self) -> usize {
        self.watchers.len()
    }

    /// The store is at `revision` and will notify everything after it: a hub that was not
    /// listening while it had no watchers catches its clock up (never back).
    pub fn advance_revision(&mut self, revision: i64) {
        self.current_rev = self.current_rev.max(revision);
    }

    pub fn stats(&self) -> HubStats {
        HubStats {
            streams: self.streams.len(),
            watchers: self.watchers.len(),
            synced: self.synced.len(),
            unsynced: self.unsynced.len(),
            victims: self.streams.values().map(|s| s.victims.len()).sum(),
            backlog: self.streams.values().map(|s| s.backlog.len()).sum(),
            current_revision: self.current_rev,
            compact_revision: self.compact_rev,
            history_read_in_flight: self.reading.is_some(),
            events_sent: self.events_sent,
        }
    }

    // ------------------------------------------------------------ requests

    fn create(&mut self, sid: StreamId, req: WatchCreateRequest) {
        if self.live_stream(sid).is_none() {
            return;
        }
        let current = self.current_rev;
        let header = self.header(current);
        let refuse = |reason: WatchError| WatchResponse {
            header: Some(header),
            watch_id: INVALID_WATCH_ID,
            created: true,
            canceled: true,
            cancel_reason: reason.to_string(),
            ..Default::default()
        };
        // etcd 3.5.24 (#20709): a negative start would read the history from its beginning;
        // refused as if it were compacted, before anything else is looked at.
        if req.start_revision < 0 {
            let resp = refuse(WatchError::NegativeRevision);
            return self.send_control(sid, resp);
        }
        let keys = match WatchKeys::from_request(&req.key, &req.range_end) {
            Ok(k) => k,
            Err(_) => {
                let resp = refuse(WatchError::EmptyRange);
                return self.send_control(sid, resp);
            }
        };
        let st = self.streams.get_mut(&sid).expect("live stream");
        let id = if req.watch_id == 0 {
            while st.ids.contains_key(&st.next_id) {
                st.next_id += 1;
            }
            st.next_id += 1;
            st.next_id - 1
        } else if st.ids.contains_key(&req.watch_id) {
            let resp = refuse(WatchError::DuplicateId);
            return self.send_control(sid, resp);
        } else {
            req.watch_id
        };
        let start = if req.start_revision == 0 {
            current + 1
        } else {
            req.start_revision
        };
        let synced = start > current;
        let h = self.next_handle;
        self.next_handle += 1;
        st.ids.insert(id, h);
        let watcher = Watcher {
            stream: sid,
            id,
            keys,
            no_put: req.filters.contains(&(FilterType::Noput as i32)),
            no_delete: req.filters.contains(&(FilterType::Nodelete as i32)),
            prev_kv: req.prev_kv,
            fragment: req.fragment,
            progress_notify: req.progress_notify,
            progress_due: true,
            start_rev: req.start_revision,
            min_rev: start,
            state: if synced {
                State::Synced
            } else {
                State::Unsynced
            },
        };
        let group = if synced {
            &mut self.synced
        } else {
            &mut self.unsynced
        };
        group.add(h, &watcher.keys);
        self.watchers.insert(h, watcher);

        let created = WatchResponse {
            header: Some(header),
            watch_id: id,
            created: true,
            ..Default::default()
        };
        self.send_control(sid, created);
        if !synced && start < self.compact_rev {
            self.cancel_compacted(h);
        }
    }

    /// etcd answers a cancel only for an id the stream knows; an unknown id gets nothing.
    fn cancel(&mut self, sid: StreamId, id: WatchId) {
        let Some(st) = self.live_stream(sid) else {
            return;
        };
        let Some(h) = st.ids.remove(&id) else {
            return;
        };
        self.drop_watcher(h);
        let resp = WatchResponse {
            header: Some(self.header(self.current_rev)),
            watch_id: id,
            canceled: true,
            ..Default::default()
        };
        self.send_control(sid, resp);
    }

    // ------------------------------------------------------------ feeding watchers

    fn notify_revision(&mut self, rev: i64, events: Vec<Event>) {
        let events = Arc::new(EventRun::new(events));
        if self.synced.is_empty() {
            return;
        }
        let batches = match_events(&self.synced, &self.watchers, events, |w| rev >= w.min_rev);
        for (h, evs) in batches {
            if let Delivery::Blocked = self.deliver(h, rev, evs) {
                self.make_victim(h, rev);
            }
        }
    }

    /// Feed unsynced watchers from a history chunk covering `[from, chunk.through]`.
    fn catch_up(&mut self, from: i64, to: i64, chunk: HistoryChunk) {
        if chunk.compact_revision > self.compact_rev {
            self.compact_rev = chunk.compact_revision;
        }
        let compacted: Vec<Handle> = self
            .unsynced
            .members()
            .filter(|h| self.watchers[h].min_rev < self.compact_rev)
            .collect();
        compacted.into_iter().for_each(|h| self.cancel_compacted(h));

        let through = chunk.through.min(to);
        if through < from {
            tracing::warn!(
                from,
                through,
                "watch hub: history read made no progress; retrying"
            );
            self.reads_paused = true;
            return;
        }
        // Only watchers whose next revision the chunk covers from its start; one that joined
        // below `from` while the read was in flight waits for the next read.
        let covers = |w: &Watcher| from <= w.min_rev && w.min_rev <= through;
        let participants: Vec<Handle> = self
            .unsynced
            .members()
            .filter(|h| covers(&self.watchers[h]))
            .collect();
        let events = Arc::new(EventRun::new(
            chunk
                .events
                .into_iter()
                .filter(|e| (from..=through).contains(&event_revision(e)))
                .collect(),
        ));
        // One watcher at a time, and only while its stream has room: a stream that is full makes
        // its remaining watchers victims before any event is copied for them, so a catch-up
        // never holds more than the streams can take (10,000 watchers on one stream once held
        // a copy of the whole chunk each).
        let mut misses: Option<(WatchKeys, Option<usize>)> = None;
        let limit = self.cfg.catch_up_queue.max(1);
        for h in participants {
            let w = &self.watchers[&h];
            let room = self.streams.get(&w.stream).is_some_and(|st| {
                !st.closed && st.backlog.is_empty() && catch_up_room(&st.sink, limit) > 0
            });
            if !room {
                if self.streams.contains_key(&w.stream) {
                    let min = w.min_rev;
                    self.make_victim(h, min);
                }
                continue;
            }
            // Events are in revision order: the watcher's are a tail, shared with every other
            // watcher that takes the same tail unless its keys leave some out.
            let start = events.partition_point(|e| event_revision(e) < w.min_rev);
            let has = |e: &Event| e.kv.as_ref().is_some_and(|kv| w.keys.contains(&kv.key));
            // The last event the watcher's keys leave out, found once for a run of watchers
            // with the same keys (100,000 watchers of one prefix compared every key each).
            let last_miss = match &misses {
                Some((keys, miss)) if *keys == w.keys => *miss,
                _ => {
                    let miss = events.iter().rposition(|e| !has(e));
                    misses = Some((w.keys.clone(), miss));
                    miss
                }
            };
            let evs = if last_miss.is_none_or(|m| m < start) {
                Batch::Shared(SharedEvents {
                    all: Arc::clone(&events),
                    start,
                    end: events.len(),
                })
            } else {
                Batch::Owned(events[start..].iter().filter(|e| has(e)).cloned().collect())
            };
            match self.deliver(h, through, evs) {
                Delivery::Blocked => self.make_victim(h, self.watchers[&h].min_rev),
                Delivery::Gone => {}
                Delivery::Done => {
                    let w = self.watchers.get_mut(&h).expect("watcher");
                    w.min_rev = through + 1;
                    if w.min_rev > self.current_rev {
                        self.set_state(h, State::Synced);
                    }
                }
            }
        }
    }

    /// Send `events` (already matched to the watcher, in revision order) as one response, split
    /// if the watcher asked for fragments.
    fn deliver(&mut self, h: Handle, header_rev: i64, events: Batch) -> Delivery {
        let header = self.header(header_rev);
        let limit = self.cfg.max_request_bytes + GRPC_OVERHEAD_BYTES;
        let w = self.watchers.get_mut(&h).expect("watcher");
        let filtered = |e: &Event| {
            let put = e.r#type == EventType::Put as i32;
            put && w.no_put || !put && w.no_delete
        };
        let strip = |e: &Event| !w.prev_kv && e.prev_kv.is_some();
        // Shared events stay shared unless this watcher sees them differently (filters, no
        // `prev_kv`) or may need them split: then it gets its own copy.
        let (mut events, shared) = match events {
            Batch::Shared(s)
                if !w.fragment && !s.events().iter().any(|e| filtered(e) || strip(e)) =>
            {
                if s.start == s.end {
                    return Delivery::Done;
                }
                (Vec::new(), Some(s))
            }
            Batch::Shared(s) => (s.events().to_vec(), None),
            Batch::Owned(v) => (v, None),
        };
        if shared.is_none() {
            events.retain(|e| !filtered(e));
            if events.is_empty() {
                return Delivery::Done;
            }
            if !w.prev_kv {
                events.iter_mut().for_each(|e| e.prev_kv = None);
            }
        }
        let Some(st) = self.streams.get_mut(&w.stream) else {
            return Delivery::Gone;
        };
        if st.closed {
            return Delivery::Gone;
        }
        if !st.backlog.is_empty() {
            return Delivery::Blocked;
        }
        let resp = WatchResponse {
            header: Some(header),
            watch_id: w.id,
            events,
            ..Default::default()
        };
        let sent = (resp.events.len() + shared.as_ref().map_or(0, |s| s.end - s.start)) as u64;
        let pieces = if w.fragment {
            fragment(resp, limit)
        } else {
            vec![resp]
        };
        let fill_prev_kv = w.prev_kv;
        let mut shared = shared;
        let mut pieces = pieces.into_iter().map(|response| StreamResponse {
            response,
            // Never split: only watchers without `fragment` share.
            shared: shared.take(),
            fill_prev_kv,
        });
        let first = pieces.next().expect("at least one piece");
        match st.sink.try_send(first) {
            Ok(()) => self.events_sent += sent,
            Err(SendError::Full(_)) => return Delivery::Blocked,
            Err(SendError::Closed) => {
                st.closed = true;
                self.dead.push(w.stream);
                return Delivery::Gone;
            }
        }
        // The rest of a split response must follow it directly: what doesn't fit is held back.
        for piece in pieces {
            if !st.backlog.is_empty() {
                st.backlog.push_back(piece);
                continue;
            }
            match st.sink.try_send(piece) {
                Ok(()) => {}
                Err(SendError::Full(piece)) => {
                    st.backlog.push_back(piece);
                    self.busy.insert(w.stream);
                }
                Err(SendError::Closed) => {
                    st.closed = true;
                    self.dead.push(w.stream);
                    return Delivery::Gone;
                }
            }
        }
        w.progress_due = false;
        Delivery::Done
    }

    /// A created/canceled/progress response: never dropped; held back behind earlier ones while
    /// the stream is full. A stream holding back more than `max_backlog` is closed.
    fn send_control(&mut self, sid: StreamId, response: WatchResponse) {
        let max = self.cfg.max_backlog;
        let Some(st) = self.live_stream(sid) else {
            return;
        };
        let mut item = StreamResponse::new(response, false);
        if st.backlog.is_empty() {
            match st.sink.try_send(item) {
                Ok(()) => return,
                Err(SendError::Full(back)) => item = back,
                Err(SendError::Closed) => {
                    st.closed = true;
                    self.dead.push(sid);
                    return;
                }
            }
        }
        // Control responses carry no events; the tail of one split response may sit beside them.
        let held = st.backlog.iter().filter(|r| r.event_count() == 0).count();
        if held >= max {
            tracing::warn!(
                stream = sid.0,
                held,
                "watch hub: stream not reading its responses; closing it"
            );
            st.closed = true;
            self.dead.push(sid);
            return;
        }
        st.backlog.push_back(item);
        self.busy.insert(sid);
    }

    fn cancel_compacted(&mut self, h: Handle) {
        self.set_state(h, State::Compacted);
        let (stream, id) = (self.watchers[&h].stream, self.watchers[&h].id);
        // etcd's compaction response carries no revision in its header.
        let resp = WatchResponse {
            header: Some(self.header(0)),
            watch_id: id,
            canceled: true,
            compact_revision: self.compact_rev,
            ..Default::default()
        };
        self.send_control(stream, resp);
    }

    // ------------------------------------------------------------ bookkeeping

    fn make_victim(&mut self, h: Handle, min_rev: i64) {
        self.set_state(h, State::Victim);
        let w = self.watchers.get_mut(&h).expect("watcher");
        w.min_rev = min_rev;
        if let Some(st) = self.streams.get_mut(&w.stream) {
            st.victims.insert(h);
            self.busy.insert(w.stream);
        }
    }

    /// Move a watcher between groups (a victim leaving its stream's victim set is the caller's
    /// business).
    fn set_state(&mut self, h: Handle, state: State) {
        let w = self.watchers.get_mut(&h).expect("watcher");
        match w.state {
            State::Synced => self.synced.remove(h, &w.keys),
            State::Unsynced => self.unsynced.remove(h, &w.keys),
            State::Victim | State::Compacted => false,
        };
        match state {
            State::Synced => self.synced.add(h, &w.keys),
            State::Unsynced => self.unsynced.add(h, &w.keys),
            State::Victim | State::Compacted => {}
        }
        w.state = state;
    }

    fn drop_watcher(&mut self, h: Handle) {
        let Some(w) = self.watchers.remove(&h) else {
            return;
        };
        match w.state {
            State::Synced => {
                self.synced.remove(h, &w.keys);
            }
            State::Unsynced => {
                self.unsynced.remove(h, &w.keys);
            }
            State::Victim => {
                if let Some(st) = self.streams.get_mut(&w.stream) {
                    st.victims.remove(&h);
                }
            }
            State::Compacted => {}
        }
    }

    /// Run after every entry point: answer progress requests that can be answered now, and drop
    /// streams found closed.
    fn finish(&mut self) {
        let waiting: Vec<StreamId> = self.progress_waiting.iter().copied().collect();
        for sid in waiting {
            let Some(st) = self.streams.get(&sid) else {
                self.progress_waiting.remove(&sid);
                continue;
            };
            // Compacted watchers get nothing more, so they don't hold the answer back; a
            // watcher whose start the store has not reached yet does (etcd's progressIfSync).
            let behind = st.ids.values().any(|h| {
                let w = &self.watchers[h];
                matches!(w.state, State::Unsynced | State::Victim)
                    || w.state == State::Synced && self.current_rev < w.start_rev
            });
            if st.closed || behind {
                continue;
            }
            self.progress_waiting.remove(&sid);
            let resp = WatchResponse {
                header: Some(self.header(self.current_rev)),
                watch_id: INVALID_WATCH_ID,
                ..Default::default()
            };
            self.send_control(sid, resp);
        }
        while let Some(sid) = self.dead.pop() {
            let Some(st) = self.streams.remove(&sid) else {
                continue;
            };
            for h in st.ids.into_values() {
                self.drop_watcher(h);
            }
            self.progress_waiting.remove(&sid);
            self.busy.remove(&sid);
        }
    }

    fn live_stream(&mut self, sid: StreamId) -> Option<&mut Stream<S>> {
        self.streams.get_mut(&sid).filter(|s| !s.closed)
    }

    fn header(&self, revision: i64) -> ResponseHeader {
        ResponseHeader {
            cluster_id: self.cfg.member.cluster_id,
            member_id: self.cfg.member.member_id,
            revision,
            raft_term: 0,
        }
    }
}

/// Push held-back responses into the sink in order; false if the stream is closed.
fn flush_backlog<S: StreamSink>(st: &mut Stream<S>) -> bool {
    while let Some(item) = st.backlog.pop_front() {
        match st.sink.try_send(item) {
            Ok(()) => {}
            Err(SendError::Full(item)) => {
                st.backlog.push_front(item);
                return true;
            }
            Err(SendError::Closed) => {
                st.closed = true;
                return false;
            }
        }
    }
    true
}

/// The events each watcher of `group` covers (and `wants`), per watcher in event order, watchers
/// in the order they first matched. A watcher that covers all of `events` (the usual case: one
/// event a revision, or a prefix watcher) shares them; only the others get copies.
fn match_events(
    group: &WatcherGroup,
    watchers: &HashMap<Handle, Watcher>,
    events: Arc<EventRun>,
    wants: impl Fn(&Watcher) -> bool,
) -> Vec<(Handle, Batch)> {
    let all = |events: &Arc<EventRun>| {
        Batch::Shared(SharedEvents {
            all: Arc::clone(events),
            start: 0,
            end: events.len(),
        })
    };
    if let [only] = &events[..] {
        let mut out = Vec::new();
        if let Some(kv) = &only.kv {
            group.for_each_match(&kv.key, |h| {
                if wants(&watchers[&h]) {
                    out.push((h, all(&events)));
                }
            });
        }
        return out;
    }
    let mut matched: Vec<(Handle, Vec<usize>)> = Vec::new();
    let mut slot: HashMap<Handle, usize> = HashMap::new();
    for (i, ev) in events.iter().enumerate() {
        let Some(kv) = &ev.kv else { continue };
        group.for_each_match(&kv.key, |h| {
            if !wants(&watchers[&h]) {
                return;
            }
            let at = *slot.entry(h).or_insert_with(|| {
                matched.push((h, Vec::new()));
                matched.len() - 1
            });
            matched[at].1.push(i);
        });
    }
    matched
        .into_iter()
        .map(|(h, idx)| {
            if idx.len() == events.len() {
                (h, all(&events))
            } else {
                (
                    h,
                    Batch::Owned(idx.into_iter().map(|i| events[i].clone()).collect()),
                )
            }
        })
        .collect()
}

/// A watcher's events on their way to [`WatchHub::deliver`].
enum Batch {
    /// Events other watchers get too.
    Shared(SharedEvents),
    /// This watcher's own.
    Owned(Vec<Event>),
}

fn event_revision(e: &Event) -> i64 {
    e.kv.as_ref().map_or(0, |kv| kv.mod_revision)
}
