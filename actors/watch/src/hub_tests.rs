//! Table-driven tests of the hub core, with a sink that records what each stream got and a
//! store that answers history reads from an event list.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use actcd_proto::etcdserverpb::watch_create_request::FilterType;
use actcd_proto::etcdserverpb::watch_request::RequestUnion;
use actcd_proto::etcdserverpb::{
    WatchCancelRequest, WatchCreateRequest, WatchProgressRequest, WatchRequest, WatchResponse,
};
use actcd_proto::mvccpb::event::EventType;
use actcd_proto::mvccpb::{Event, KeyValue};
use actcd_types::msg::{History, HistoryChunk};
use actcd_types::watch::{StreamId, StreamResponse};

use crate::hub::*;

// ---------------------------------------------------------------- fixtures

struct SinkState {
    cap: usize,
    queue: VecDeque<StreamResponse>,
    closed: bool,
}

#[derive(Clone)]
pub(crate) struct TestSink(Rc<RefCell<SinkState>>);

impl TestSink {
    fn new(cap: usize) -> Self {
        Self(Rc::new(RefCell::new(SinkState {
            cap,
            queue: VecDeque::new(),
            closed: false,
        })))
    }

    fn take_all(&self) -> Vec<StreamResponse> {
        self.0.borrow_mut().queue.drain(..).collect()
    }

    fn drain(&self) -> Vec<WatchResponse> {
        self.take_all()
            .into_iter()
            .map(|r| r.into_response())
            .collect()
    }

    fn close(&self) {
        self.0.borrow_mut().closed = true;
    }
}

impl StreamSink for TestSink {
    fn try_send(&mut self, r: StreamResponse) -> Result<(), SendError> {
        let mut s = self.0.borrow_mut();
        if s.closed {
            return Err(SendError::Closed);
        }
        if s.queue.len() >= s.cap {
            return Err(SendError::Full(r));
        }
        s.queue.push_back(r);
        Ok(())
    }

    fn room(&self) -> usize {
        let s = self.0.borrow();
        s.cap.saturating_sub(s.queue.len())
    }

    fn capacity(&self) -> usize {
        self.0.borrow().cap
    }
}

/// The store's history: answers `History` as the MVCC store promises to.
#[derive(Default)]
struct Store {
    events: Vec<Event>,
    compact: i64,
    current: i64,
    reads: Vec<(i64, i64)>,
}

impl Store {
    /// Record a write; returns the Notify the store would send.
    fn apply(&mut self, events: Vec<Event>) -> (i64, Vec<Event>) {
        let rev = events.last().map_or(self.current, rev_of);
        self.current = self.current.max(rev);
        self.events.extend(events.iter().cloned());
        (self.current, events)
    }

    fn answer(&mut self, h: History) -> HistoryChunk {
        self.reads.push((h.from, h.to));
        answer_history(&self.events, h, self.compact, self.current)
    }
}

/// What the MVCC store answers to `h` when it holds `events` (in revision order): events from
/// `max(from, compact)` to `to`, stopping after the revision at which `max_events` is reached.
/// Shared by the fake stores of the core's tests and the actor's.
pub(crate) fn answer_history(
    events: &[Event],
    h: History,
    compact: i64,
    current: i64,
) -> HistoryChunk {
    let mut out = Vec::new();
    let mut through = h.to;
    let mut last = 0;
    for e in events {
        let r = rev_of(e);
        if r < h.from.max(compact) || r > h.to {
            continue;
        }
        if out.len() >= h.max_events && r != last {
            through = last;
            break;
        }
        last = r;
        out.push(e.clone());
    }
    HistoryChunk {
        events: out,
        through,
        compact_revision: compact,
        current_revision: current,
    }
}

fn rev_of(e: &Event) -> i64 {
    e.kv.as_ref().unwrap().mod_revision
}

fn put(key: &str, rev: i64) -> Event {
    Event {
        r#type: EventType::Put as i32,
        kv: Some(KeyValue {
            key: key.as_bytes().to_vec(),
            create_revision: rev,
            mod_revision: rev,
            version: 1,
            value: format!("v{rev}").into_bytes(),
            lease: 0,
        }),
        prev_kv: None,
    }
}

fn del(key: &str, rev: i64) -> Event {
    Event {
        r#type: EventType::Delete as i32,
        kv: Some(KeyValue {
            key: key.as_bytes().to_vec(),
            mod_revision: rev,
            ..Default::default()
        }),
        prev_kv: None,
    }
}

fn create(key: &str, end: &str) -> WatchCreateRequest {
    WatchCreateRequest {
        key: key.as_bytes().to_vec(),
        range_end: end.as_bytes().to_vec(),
        ..Default::default()
    }
}

fn req_create(c: WatchCreateRequest) -> WatchRequest {
    WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(c)),
    }
}

fn req_cancel(id: i64) -> WatchRequest {
    WatchRequest {
        request_union: Some(RequestUnion::CancelRequest(WatchCancelRequest {
            watch_id: id,
        })),
    }
}

fn req_progress() -> WatchRequest {
    WatchRequest {
        request_union: Some(RequestUnion::ProgressRequest(WatchProgressRequest {})),
    }
}

/// A compact rendering of a response, for readable assertions.
fn show(r: &WatchResponse) -> String {
    let mut s = format!("id={} rev={}", r.watch_id, r.header.unwrap().revision);
    if r.created {
        s += " created";
    }
    if r.canceled {
        s += " canceled";
    }
    if r.compact_revision != 0 {
        s += &format!(" compact={}", r.compact_revision);
    }
    if !r.cancel_reason.is_empty() {
        s += &format!(" reason={:?}", r.cancel_reason);
    }
    if r.fragment {
        s += " fragment";
    }
    for e in &r.events {
        let kv = e.kv.as_ref().unwrap();
        let ty = if e.r#type == EventType::Put as i32 {
            "put"
        } else {
            "del"
        };
        s += &format!(
            " {ty}:{}@{}",
            String::from_utf8_lossy(&kv.key),
            kv.mod_revision
        );
    }
    s
}

fn shows(rs: &[WatchResponse]) -> Vec<String> {
    rs.iter().map(show).collect()
}

struct Fixture {
    hub: WatchHub<TestSink>,
    store: Store,
}

impl Fixture {
    fn new(current: i64) -> Self {
        Self::with_config(HubConfig::default(), current)
    }

    fn with_config(cfg: HubConfig, current: i64) -> Self {
        Self {
            hub: WatchHub::new(cfg, current),
            store: Store {
                current,
                ..Default::default()
            },
        }
    }

    fn open(&mut self, cap: usize) -> (StreamId, TestSink) {
        let sink = TestSink::new(cap);
        (self.hub.open_stream(sink.clone()), sink)
    }

    /// Apply a write in the store and notify the hub, then serve its reads.
    fn write(&mut self, events: Vec<Event>) {
        let (rev, evs) = self.store.apply(events);
        self.hub.notify(rev, evs);
        self.serve_reads();
    }

    fn request(&mut self, s: StreamId, r: WatchRequest) {
        self.hub.handle_request(s, r);
        self.serve_reads();
    }

    fn serve_reads(&mut self) {
        while let Some(h) = self.hub.next_history_read() {
            let chunk = self.store.answer(h);
            self.hub.history_read_done(Ok(chunk));
        }
    }
}

// ---------------------------------------------------------------- matching and filters

#[test]
fn events_reach_the_watchers_whose_keys_cover_them() {
    struct Case {
        name: &'static str,
        create: WatchCreateRequest,
        want: Vec<&'static str>,
    }
    let with_filter = |mut c: WatchCreateRequest, f: FilterType| {
        c.filters.push(f as i32);
        c
    };
    let cases = [
        Case {
            name: "single key",
            create: create("foo", ""),
            want: vec!["put:foo@2", "del:foo@6"],
        },
        Case {
            name: "prefix",
            create: create("foo", "fop"),
            want: vec!["put:foo@2", "put:foo/a@3", "put:fooo@4", "del:foo@6"],
        },
        Case {
            name: "range [b, foo/b)",
            create: create("b", "foo/b"),
            want: vec!["put:foo@2", "put:foo/a@3", "del:foo@6"],
        },
        Case {
            name: "from key",
            create: create("foo/", "\0"),
            want: vec!["put:foo/a@3", "put:fooo@4", "put:zzz@5"],
        },
        Case {
            name: "empty key with \\0 end: everything",
            create: create("", "\0"),
            want: vec![
                "put:a@1",
                "put:foo@2",
                "put:foo/a@3",
                "put:fooo@4",
                "put:zzz@5",
                "del:foo@6",
            ],
        },
        Case {
            name: "NOPUT",
            create: with_filter(create("foo", "fop"), FilterType::Noput),
            want: vec!["del:foo@6"],
        },
        Case {
            name: "NODELETE",
            create: with_filter(create("foo", ""), FilterType::Nodelete),
            want: vec!["put:foo@2"],
        },
        Case {
            name: "unrelated key",
            create: create("nope", ""),
            want: vec![],
        },
    ];
    for c in cases {
        let mut f = Fixture::new(0);
        let (s, sink) = f.open(100);
        f.request(s, req_create(c.create));
        assert_eq!(
            shows(&sink.drain()),
            vec!["id=0 rev=0 created"],
            "{}",
            c.name
        );
        let writes = [
            put("a", 1),
            put("foo", 2),
            put("foo/a", 3),
            put("fooo", 4),
            put("zzz", 5),
            del("foo", 6),
        ];
        for w in writes {
            f.write(vec![w]);
        }
        let got: Vec<String> = sink
            .drain()
            .iter()
            .map(|r| {
                assert_eq!(r.events.len(), 1);
                // Synced watchers: one response per revision, headed by that revision.
                assert_eq!(
                    r.header.unwrap().revision,
                    r.events[0].kv.as_ref().unwrap().mod_revision
                );
                show(r).split(' ').nth(2).unwrap().to_owned()
            })
            .collect();
        assert_eq!(got, c.want, "{}", c.name);
    }
}

#[test]
fn one_response_per_revision_from_a_batched_notify() {
    let mut f = Fixture::new(1);
    let (s, sink) = f.open(100);
    f.request(s, req_create(create("k", "l")));
    // One applied batch: a txn at 2 touching two keys, then puts at 3 and 4.
    f.write(vec![put("k1", 2), put("k2", 2), put("x", 3), put("k3", 4)]);
    assert_eq!(
        shows(&sink.drain()),
        vec![
            "id=0 rev=1 created",
            "id=0 rev=2 put:k1@2 put:k2@2",
            "id=0 rev=4 put:k3@4",
        ]
    );
    // A notify that only moves the revision (a compaction) leaves nothing to send.
    f.hub.notify(5, vec![]);
    assert_eq!(f.hub.current_revision(), 5);
    assert!(sink.drain().is_empty());
}

#[test]
fn a_future_start_revision_skips_earlier_events() {
    let mut f = Fixture::new(3);
    let (s, sink) = f.open(100);
    let mut c = create("k", "");
    c.start_revision = 6;
    f.request(s, req_create(c));
    for rev in 4..=7 {
        f.write(vec![put("k", rev)]);
    }
    assert_eq!(
        shows(&sink.drain()),
        vec![
            "id=0 rev=3 created",
            "id=0 rev=6 put:k@6",
            "id=0 rev=7 put:k@7"
        ]
    );
}

#[test]
fn prev_kv_is_flagged_for_the_front_and_stripped_for_others() {
    let mut f = Fixture::new(1);
    let (s, sink) = f.open(100);
    let mut wants = create("k", "");
    wants.prev_kv = true;
    f.request(s, req_create(wants));
    f.request(s, req_create(create("k", "")));
    let mut ev = put("k", 2);
    ev.prev_kv = Some(KeyValue {
        key: b"k".to_vec(),
        mod_revision: 1,
        ..Default::default()
    });
    f.write(vec![ev]);
    let got = sink.take_all();
    let flags: Vec<(i64, bool, bool, bool)> = got
        .into_iter()
        .map(|r| {
            let fill = r.fill_prev_kv;
            let r = r.into_response();
            (
                r.watch_id,
                r.created,
                fill,
                r.events.first().is_some_and(|e| e.prev_kv.is_some()),
            )
        })
        .collect();
    assert_eq!(
        flags,
        vec![
            (0, true, false, false),
            (1, true, false, false),
            (0, false, true, true),
            (1, false, false, false),
        ]
    );
}

// ---------------------------------------------------------------- create / cancel

#[test]
fn create_and_cancel_responses_match_etcd() {
    struct Case {
        name: &'static str,
        requests: Vec<WatchRequest>,
        want: Vec<&'static str>,
    }
    let with_id = |id: i64| {
        let mut c = create("k", "");
        c.watch_id = id;
        req_create(c)
    };
    let cases = [
        Case {
            name: "auto ids count from 0 per stream",
            requests: vec![with_id(0), with_id(0), with_id(0)],
            want: vec![
                "id=0 rev=7 created",
                "id=1 rev=7 created",
                "id=2 rev=7 created",
            ],
        },
        Case {
            name: "auto ids skip client-chosen ones",
            requests: vec![with_id(1), with_id(0), with_id(0), with_id(0)],
            want: vec![
                "id=1 rev=7 created",
                "id=0 rev=7 created",
                "id=2 rev=7 created",
                "id=3 rev=7 created",
            ],
        },
        Case {
            name: "a duplicate id is refused with watch id -1",
            requests: vec![with_id(5), with_id(5)],
            want: vec![
                "id=5 rev=7 created",
                "id=-1 rev=7 created canceled reason=\"mvcc: duplicate watch ID provided on the WatchStream\"",
            ],
        },
        Case {
            name: "an empty range is refused",
            requests: vec![req_create(create("b", "a"))],
            want: vec!["id=-1 rev=7 created canceled reason=\"mvcc: watcher range is empty\""],
        },
        Case {
            name: "cancel answers with the id; an unknown id gets nothing",
            requests: vec![with_id(0), req_cancel(0), req_cancel(0), req_cancel(42)],
            want: vec!["id=0 rev=7 created", "id=0 rev=7 canceled"],
        },
        Case {
            name: "a canceled id can be chosen again",
            requests: vec![with_id(3), req_cancel(3), with_id(3)],
            want: vec![
                "id=3 rev=7 created",
                "id=3 rev=7 canceled",
                "id=3 rev=7 created",
            ],
        },
        Case {
            name: "a request with nothing in it is ignored",
            requests: vec![WatchRequest {
                request_union: None,
            }],
            want: vec![],
        },
    ];
    for c in cases {
        let mut f = Fixture::new(7);
        let (s, sink) = f.open(100);
        for r in c.requests {
            f.request(s, r);
        }
        assert_eq!(shows(&sink.drain()), c.want, "{}", c.name);
    }
}

#[test]
fn ids_are_per_stream_and_cancel_stops_events() {
    let mut f = Fixture::new(1);
    let (a, sink_a) = f.open(100);
    let (b, sink_b) = f.open(100);
    f.request(a, req_create(create("k", "")));
    f.request(b, req_create(create("k", "")));
    f.write(vec![put("k", 2)]);
    f.request(a, req_cancel(0));
    f.write(vec![put("k", 3)]);
    assert_eq!(
        shows(&sink_a.drain()),
        vec![
            "id=0 rev=1 created",
            "id=0 rev=2 put:k@2",
            "id=0 rev=2 canceled"
        ]
    );
    assert_eq!(
        shows(&sink_b.drain()),
        vec![
            "id=0 rev=1 created",
            "id=0 rev=2 put:k@2",
            "id=0 rev=3 put:k@3"
        ]
    );
}

#[test]
fn reject_create_answers_in_stream_order() {
    let mut f = Fixture::new(4);
    let (s, sink) = f.open(100);
    f.hub
        .reject_create(s, 9, "etcdserver: permission denied".into());
    assert_eq!(
        shows(&sink.drain()),
        vec!["id=-1 rev=4 created canceled reason=\"etcdserver: permission denied\""],
        "etcd 3.5.6 (#14547): watch id -1, never the client's id"
    );
}

#[test]
fn a_negative_start_revision_is_refused_as_compacted() {
    let mut f = Fixture::new(4);
    let (s, sink) = f.open(100);
    let mut c = create("k", "");
    c.start_revision = -1;
    c.watch_id = 3;
    f.request(s, req_create(c));
    assert_eq!(
        shows(&sink.drain()),
        vec![
            "id=-1 rev=4 created canceled reason=\"etcdserver: mvcc: required revision has been compacted\""
        ]
    );
    assert_eq!(f.hub.stats().watchers, 0);
    // The id was never taken: the same create without the negative start is served.
    let mut c = create("k", "");
    c.watch_id = 3;
    f.request(s, req_create(c));
    assert_eq!(shows(&sink.drain()), vec!["id=3 rev=4 created"]);
}

// ---------------------------------------------------------------- catch-up

#[test]
fn unsynced_watcher_catches_up_then_joins_synced_with_notify_interleaved() {
    let mut f = Fixture::new(0);
    for rev in 1..=5 {
        f.write(vec![put("k", rev)]);
    }
    let (s, sink) = f.open(100);
    let mut c = create("k", "");
    c.start_revision = 2;
    f.hub.handle_request(s, req_create(c));
    // The read for [2, 5] is in flight while revisions 6 and 7 are applied.
    let first = f.hub.next_history_read().expect("a read");
    assert_eq!((first.from, first.to), (2, 5));
    assert!(f.hub.next_history_read().is_none(), "one read at a time");
    for rev in [6, 7] {
        let (r, evs) = f.store.apply(vec![put("k", rev)]);
        f.hub.notify(r, evs);
    }
    let chunk = f.store.answer(first);
    f.hub.history_read_done(Ok(chunk));
    let second = f.hub.next_history_read().expect("a second read");
    assert_eq!((second.from, second.to), (6, 7));
    let chunk = f.store.answer(second);
    f.hub.history_read_done(Ok(chunk));
    assert!(f.hub.next_history_read().is_none());
    assert_eq!(f.hub.stats().synced, 1);
    f.write(vec![put("k", 8)]);
    assert_eq!(
        shows(&sink.drain()),
        vec![
            "id=0 rev=5 created",
            "id=0 rev=5 put:k@2 put:k@3 put:k@4 put:k@5",
            "id=0 rev=7 put:k@6 put:k@7",
            "id=0 rev=8 put:k@8",
        ]
    );
}

#[test]
fn catching_up_takes_only_catch_up_queue_places_and_synced_events_the_whole_queue() {
    let cfg = HubConfig {
        catch_up_queue: 4,
        ..Default::default()
    };
    let mut f = Fixture::with_config(cfg, 0);
    for rev in 1..=3 {
        f.write(vec![put("k", rev)]);
    }
    let (s, sink) = f.open(100);
    // Ten watchers from revision 1: their created answers are control responses, and take
    // the queue as they come.
    for _ in 0..10 {
        let mut c = create("k", "");
        c.start_revision = 1;
        f.request(s, req_create(c));
    }
    f.serve_reads();
    let queued = sink.take_all();
    let created = queued.iter().filter(|r| r.response.created).count();
    assert_eq!(created, 10);
    // Catch-up responses went only while the queue held fewer than four: the rest are
    // victims, which hold no events.
    let mut caught_up = BTreeMap::new();
    let record = |caught_up: &mut BTreeMap<i64, Vec<i64>>, got: Vec<StreamResponse>| {
        for r in got.into_iter().map(StreamResponse::into_response) {
            if r.created {
                continue;
            }
            let revs: Vec<i64> = r
                .events
                .iter()
                .map(|e| e.kv.as_ref().unwrap().mod_revision)
                .collect();
            assert!(
                caught_up.insert(r.watch_id, revs).is_none(),
                "one catch-up each"
            );
        }
    };
    record(&mut caught_up, queued);
    let first = caught_up.len();
    assert!(first < 4, "{first} caught up beside ten created answers");
    assert_eq!(f.hub.stats().victims, 10 - first);
    // Retries with the queue empty take back at most four at a time.
    let mut rounds = 0;
    while f.hub.needs_retry() {
        f.hub.retry_victims();
        f.serve_reads();
        let got = sink.take_all();
        assert!(
            got.len() <= 4,
            "{} catch-up responses queued at once",
            got.len()
        );
        record(&mut caught_up, got);
        rounds += 1;
        assert!(rounds < 10, "the victims never caught up");
    }
    assert!(rounds >= 2, "{rounds} rounds for {} victims", 10 - first);
    assert_eq!(caught_up.len(), 10);
    assert!(caught_up.values().all(|revs| revs == &[1, 2, 3]));
    // Synced, the ten get a new revision's events all at once: the whole queue is theirs.
    f.write(vec![put("k", 4)]);
    assert_eq!(sink.take_all().len(), 10);
    assert_eq!(f.hub.stats().synced, 10);
}

#[test]
fn catch_up_reads_in_bounded_batches_without_splitting_a_revision() {
    let cfg = HubConfig {
        history_batch_events: 3,
        ..Default::default()
    };
    let mut f = Fixture::with_config(cfg, 0);
    f.write(vec![put("a", 1), put("b", 1)]);
    f.write(vec![put("a", 2), put("b", 2)]);
    f.write(vec![put("a", 3)]);
    f.write(vec![put("b", 4)]);
    let (s, sink) = f.open(100);
    let mut c = create("a", "c");
    c.start_revision = 1;
    f.request(s, req_create(c));
    assert_eq!(f.store.reads, vec![(1, 4), (3, 4)]);
    assert_eq!(
        shows(&sink.drain()),
        vec![
            "id=0 rev=4 created",
            "id=0 rev=2 put:a@1 put:b@1 put:a@2 put:b@2",
            "id=0 rev=4 put:a@3 put:b@4",
        ]
    );
}

#[test]
fn watchers_at_different_revisions_share_reads_without_duplicates() {
    let mut f = Fixture::new(0);
    for rev in 1..=6 {
        f.write(vec![put("k", rev)]);
    }
    let (s, sink) = f.open(100);
    for start in [5, 2] {
        let mut c = create("k", "");
        c.start_revision = start;
        f.hub.handle_request(s, req_create(c));
    }
    // A third joins below the read in flight: it must wait for the next read, not skip ahead.
    let read = f.hub.next_history_read().unwrap();
    assert_eq!((read.from, read.to), (2, 6));
    let mut c = create("k", "");
    c.start_revision = 1;
    f.hub.handle_request(s, req_create(c));
    let chunk = f.store.answer(read);
    f.hub.history_read_done(Ok(chunk));
    f.serve_reads();
    assert_eq!(
        shows(&sink.drain()),
        vec![
            "id=0 rev=6 created",
            "id=1 rev=6 created",
            "id=2 rev=6 created",
            "id=0 rev=6 put:k@5 put:k@6",
            "id=1 rev=6 put:k@2 put:k@3 put:k@4 put:k@5 put:k@6",
            "id=2 rev=6 put:k@1 put:k@2 put:k@3 put:k@4 put:k@5 put:k@6",
        ]
    );
    assert_eq!(f.hub.stats().synced, 3);
}

#[test]
fn a_failed_read_is_retried_on_the_next_retry_tick() {
    let mut f = Fixture::new(0);
    f.write(vec![put("k", 1)]);
    let (s, sink) = f.open(100);
    let mut c = create("k", "");
    c.start_revision = 1;
    f.hub.handle_request(s, req_create(c));
    let read = f.hub.next_history_read().unwrap();
    f.hub
        .history_read_done(Err(actcd_types::EtcdError::Stopped));
    assert!(f.hub.next_history_read().is_none());
    assert!(f.hub.needs_retry());
    f.hub.retry_victims();
    assert_eq!(
        f.hub.next_history_read().map(|h| (h.from, h.to)),
        Some((read.from, read.to))
    );
    let chunk = f.store.answer(read);
    f.hub.history_read_done(Ok(chunk));
    assert_eq!(
        shows(&sink.drain()),
        vec!["id=0 rev=1 created", "id=0 rev=1 put:k@1"]
    );
    assert!(!f.hub.needs_retry());
}

// ---------------------------------------------------------------- compaction

#[test]
fn a_watch_below_the_compact_revision_is_canceled_and_keeps_its_id() {
    let mut f = Fixture::new(0);
    for rev in 1..=6 {
        f.write(vec![put("k", rev)]);
    }
    f.store.compact = 4;
    let (s, sink) = f.open(100);
    let with = |id: i64, start: i64| {
        let mut c = create("k", "");
        c.watch_id = id;
        c.start_revision = start;
        req_create(c)
    };
    f.request(s, with(1, 3));
    f.request(s, with(2, 4));
    assert_eq!(
        shows(&sink.drain()),
        vec![
            "id=1 rev=6 created",
            "id=1 rev=0 canceled compact=4",
            "id=2 rev=6 created",
            "id=2 rev=6 put:k@4 put:k@5 put:k@6",
        ]
    );
    // Once the hub knows the compact revision it cancels at once.
    f.request(s, with(3, 2));
    assert_eq!(
        shows(&sink.drain()),
        vec!["id=3 rev=6 created", "id=3 rev=0 canceled compact=4"]
    );
    // As in etcd the id stays taken until the client cancels it.
    f.request(s, with(1, 0));
    f.request(s, req_cancel(1));
    f.request(s, with(1, 0));
    assert_eq!(
        shows(&sink.drain()),
        vec![
            "id=-1 rev=6 created canceled reason=\"mvcc: duplicate watch ID provided on the WatchStream\"",
            "id=1 rev=6 canceled",
            "id=1 rev=6 created",
        ]
    );
}

// ---------------------------------------------------------------- slow streams

#[test]
fn a_full_stream_makes_victims_that_catch_up_later_without_loss() {
    let mut f = Fixture::new(0);
    let (slow, slow_sink) = f.open(3);
    let (fast, fast_sink) = f.open(100);
    f.request(slow, req_create(create("k", "")));
    f.request(slow, req_create(create("k", "\0")));
    f.request(fast, req_create(create("k", "")));
    for rev in 1..=5 {
        f.write(vec![put("k", rev)]);
    }
    // Two created responses and one event fit; everything after waits.
    assert_eq!(f.hub.stats().victims, 2);
    assert_eq!(
        fast_sink.drain().len(),
        6,
        "the fast stream is never held up"
    );
    assert_eq!(
        shows(&slow_sink.drain()),
        vec![
            "id=0 rev=0 created",
            "id=1 rev=0 created",
            "id=0 rev=1 put:k@1"
        ]
    );
    // Still no room was noticed: victims stay put, and later writes don't reach them.
    f.write(vec![put("k", 6)]);
    assert!(f.hub.needs_retry());
    f.hub.retry_victims();
    f.serve_reads();
    let mut got = slow_sink.drain();
    f.write(vec![put("k", 7)]);
    got.extend(slow_sink.drain());
    assert!(!f.hub.needs_retry());
    assert_eq!(
        shows(&got),
        vec![
            "id=0 rev=6 put:k@2 put:k@3 put:k@4 put:k@5 put:k@6",
            "id=1 rev=6 put:k@1 put:k@2 put:k@3 put:k@4 put:k@5 put:k@6",
            "id=0 rev=7 put:k@7",
            "id=1 rev=7 put:k@7",
        ]
    );
}

#[test]
fn a_retry_takes_back_only_the_victims_the_queue_has_room_for() {
    let mut f = Fixture::new(0);
    let (s, sink) = f.open(8);
    for _ in 0..20 {
        f.request(s, req_create(create("k", "")));
    }
    // Eight created answers fill the queue; the other twelve wait in the backlog.
    let mut created = 0;
    while f.hub.needs_retry() || created == 0 {
        created += sink.drain().len();
        f.hub.retry_victims();
    }
    created += sink.drain().len();
    assert_eq!(created, 20, "every watcher is created");
    // The queue takes eight events; the twelve other watchers become victims.
    f.write(vec![put("k", 1)]);
    assert_eq!(f.hub.stats().victims, 12);
    let mut seen: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    let mut record = |rs: Vec<StreamResponse>| {
        for r in rs.into_iter().map(StreamResponse::into_response) {
            let revs = r.events.iter().map(|e| e.kv.as_ref().unwrap().mod_revision);
            seen.entry(r.watch_id).or_default().extend(revs);
        }
    };
    let read = |n: usize| {
        let mut q = sink.0.borrow_mut();
        let n = n.min(q.queue.len());
        q.queue.drain(..n).collect::<Vec<_>>()
    };
    // One free slot is not worth a retry: nobody is taken back (all twelve were, before).
    record(read(1));
    f.hub.retry_victims();
    f.serve_reads();
    assert_eq!(f.hub.stats().victims, 12);
    // Room for a quarter of the queue: two are taken back, and sent what they missed.
    record(read(1));
    f.hub.retry_victims();
    f.serve_reads();
    assert_eq!(f.hub.stats().victims, 10);
    // Read and retried until nobody waits: every watcher saw revision 1, once.
    let mut rounds = 0;
    while f.hub.needs_retry() {
        record(read(usize::MAX));
        f.hub.retry_victims();
        f.serve_reads();
        rounds += 1;
        assert!(rounds < 10, "the victims never caught up");
    }
    record(read(usize::MAX));
    assert_eq!(seen.len(), 20);
    assert!(seen.values().all(|revs| revs == &[1]), "{seen:?}");
}

#[test]
fn control_responses_wait_behind_a_full_stream_and_keep_their_order() {
    let mut f = Fixture::new(0);
    let (s, sink) = f.open(1);
    f.request(s, req_create(create("a", "")));
    f.request(s, req_create(create("b", "")));
    f.write(vec![put("b", 1)]);
    f.request(s, req_cancel(0));
    assert_eq!(f.hub.stats().backlog, 2);
    let mut got = Vec::new();
    while f.hub.needs_retry() {
        got.extend(sink.drain());
        f.hub.retry_victims();
        f.serve_reads();
    }
    got.extend(sink.drain());
    assert_eq!(
        shows(&got),
        vec![
            "id=0 rev=0 created",
            "id=1 rev=0 created",
            "id=0 rev=1 canceled",
            "id=1 rev=1 put:b@1",
        ]
    );
}

#[test]
fn a_stream_that_never_reads_is_closed_once_its_backlog_is_full() {
    let cfg = HubConfig {
        max_backlog: 3,
        ..Default::default()
    };
    let mut f = Fixture::with_config(cfg, 0);
    let (s, _sink) = f.open(1);
    for _ in 0..4 {
        f.request(s, req_create(create("k", "")));
    }
    assert_eq!(f.hub.stats().streams, 1);
    f.request(s, req_create(create("k", "")));
    assert_eq!(f.hub.stats(), HubStats::default());
}

#[test]
fn a_closed_receiver_drops_the_stream() {
    let mut f = Fixture::new(0);
    let (s, sink) = f.open(10);
    f.request(s, req_create(create("k", "")));
    sink.close();
    f.write(vec![put("k", 1)]);
    let st = f.hub.stats();
    assert_eq!((st.streams, st.watchers, st.synced), (0, 0, 0));
    // Closing it again, or a request for it, is harmless.
    f.hub.close_stream(s);
    f.request(s, req_create(create("k", "")));
    assert_eq!(f.hub.stats().watchers, 0);
}

#[test]
fn close_stream_forgets_every_watcher() {
    let mut f = Fixture::new(3);
    let (s, _sink) = f.open(1);
    for start in [0, 1, 0] {
        let mut c = create("k", "");
        c.start_revision = start;
        f.hub.handle_request(s, req_create(c));
    }
    assert_eq!(f.hub.stats().watchers, 3);
    f.hub.close_stream(s);
    let st = f.hub.stats();
    assert_eq!(
        (st.streams, st.watchers, st.synced, st.unsynced, st.victims),
        (0, 0, 0, 0, 0)
    );
}

// ---------------------------------------------------------------- progress

#[test]
fn progress_requests_answer_once_every_watcher_is_synced() {
    let mut f = Fixture::new(0);
    for rev in 1..=3 {
        f.write(vec![put("k", rev)]);
    }
    let (s, sink) = f.open(100);
    // No watchers: answered at once, like etcd 3.5.1.
    f.request(s, req_progress());
    assert_eq!(shows(&sink.drain()), vec!["id=-1 rev=3"]);

    let mut c = create("k", "");
    c.start_revision = 1;
    f.hub.handle_request(s, req_create(c));
    let read = f.hub.next_history_read().unwrap();
    f.hub.handle_request(s, req_progress());
    f.hub.handle_request(s, req_progress());
    assert_eq!(shows(&sink.drain()), vec!["id=0 rev=3 created"]);
    let chunk = f.store.answer(read);
    f.hub.history_read_done(Ok(chunk));
    // The events up to 3 come first; one answer for both requests.
    assert_eq!(
        shows(&sink.drain()),
        vec!["id=0 rev=3 put:k@1 put:k@2 put:k@3", "id=-1 rev=3"]
    );
}

/// etcd 3.5.22 (#20290): a watch that starts above the store's revision is synced at once, but
/// no progress report (periodic or requested) names a revision below its start: the client
/// would take it as "nothing happened up to R" for revisions it never asked about.
#[test]
fn future_watchers_hold_back_progress_until_the_store_reaches_their_start() {
    let mut f = Fixture::new(2);
    let (s, sink) = f.open(100);
    let mut c = create("k", "");
    c.start_revision = 5;
    c.progress_notify = true;
    f.request(s, req_create(c));
    assert_eq!(shows(&sink.drain()), vec!["id=0 rev=2 created"]);
    assert_eq!(f.hub.stats().synced, 1);

    f.hub.progress_tick();
    f.request(s, req_progress());
    assert!(sink.drain().is_empty(), "nothing at revision 2 < 5");
    f.write(vec![put("other", 3)]);
    f.write(vec![put("k", 4)]);
    f.hub.progress_tick();
    assert!(
        sink.drain().is_empty(),
        "no event below the start, no progress at 4"
    );
    // The store reaches the start: the waiting request is answered, then the event follows.
    f.write(vec![put("other", 5)]);
    assert_eq!(shows(&sink.drain()), vec!["id=-1 rev=5"]);
    f.hub.progress_tick();
    assert_eq!(shows(&sink.drain()), vec!["id=0 rev=5"]);
    f.write(vec![put("k", 6)]);
    assert_eq!(shows(&sink.drain()), vec!["id=0 rev=6 put:k@6"]);

    // A watch from now (start 0) never holds anything back.
    let (s2, sink2) = f.open(100);
    f.request(s2, req_create(create("k", "")));
    f.request(s2, req_progress());
    assert_eq!(
        shows(&sink2.drain()),
        vec!["id=0 rev=6 created", "id=-1 rev=6"]
    );
}

#[test]
fn progress_notify_reaches_idle_synced_watchers_each_tick() {
    let mut f = Fixture::new(1);
    let (s, sink) = f.open(100);
    let mut c = create("k", "");
    c.progress_notify = true;
    f.request(s, req_create(c));
    f.request(s, req_create(create("k", "")));
    let mut behind = create("k", "");
    behind.progress_notify = true;
    behind.start_revision = 1;
    f.hub.handle_request(s, req_create(behind));
    sink.drain();

    f.hub.progress_tick();
    assert_eq!(
        shows(&sink.drain()),
        vec!["id=0 rev=1"],
        "unsynced id 2 is skipped"
    );
    f.serve_reads();
    sink.drain();
    f.write(vec![put("k", 2)]);
    sink.drain();
    // Both got an event since the last tick: nothing this time, then idle again.
    f.hub.progress_tick();
    assert!(sink.drain().is_empty());
    f.hub.progress_tick();
    let mut got = shows(&sink.drain());
    got.sort();
    assert_eq!(got, vec!["id=0 rev=2", "id=2 rev=2"]);
}

#[test]
fn progress_notify_is_skipped_when_the_stream_is_full() {
    let mut f = Fixture::new(1);
    let (s, sink) = f.open(1);
    let mut c = create("k", "");
    c.progress_notify = true;
    f.request(s, req_create(c));
    f.hub.progress_tick();
    assert_eq!(f.hub.stats().backlog, 0);
    assert_eq!(shows(&sink.drain()), vec!["id=0 rev=1 created"]);
}

// ---------------------------------------------------------------- fragments

fn big_put(key: &str, rev: i64, len: usize) -> Event {
    let mut e = put(key, rev);
    e.kv.as_mut().unwrap().value = vec![b'x'; len];
    e
}

#[test]
fn fragmented_responses_stay_contiguous_even_when_the_stream_fills() {
    let cfg = HubConfig {
        max_request_bytes: 0, // pieces under etcd's 512 KiB allowance
        ..Default::default()
    };
    let mut f = Fixture::with_config(cfg, 1);
    let (s, sink) = f.open(3);
    let mut c = create("big", "bih");
    c.fragment = true;
    f.request(s, req_create(c));
    f.request(s, req_create(create("big/6", "")));
    // One txn: 6 events of 200 KB: pieces of 2 events.
    let evs: Vec<Event> = (1..=6)
        .map(|i| big_put(&format!("big/{i}"), 2, 200_000))
        .collect();
    f.write(evs);
    let st = f.hub.stats();
    assert_eq!((st.backlog, st.victims), (2, 1));
    let mut got = sink.drain();
    f.hub.retry_victims();
    got.extend(sink.drain());
    f.hub.retry_victims();
    f.serve_reads();
    got.extend(sink.drain());
    let summary: Vec<(i64, usize, bool)> = got
        .iter()
        .map(|r| (r.watch_id, r.events.len(), r.fragment))
        .collect();
    assert_eq!(
        summary,
        vec![
            (0, 0, false),
            (1, 0, false),
            (0, 2, true),
            (0, 2, true),
            (0, 2, false),
            (1, 1, false),
        ]
    );
    assert!(!f.hub.needs_retry());
}

#[test]
fn watchers_without_fragment_get_large_responses_whole() {
    let cfg = HubConfig {
        max_request_bytes: 0,
        ..Default::default()
    };
    let mut f = Fixture::with_config(cfg, 1);
    let (s, sink) = f.open(10);
    f.request(s, req_create(create("big", "bih")));
    let evs: Vec<Event> = (1..=6)
        .map(|i| big_put(&format!("big/{i}"), 2, 200_000))
        .collect();
    f.write(evs);
    let got = sink.drain();
    assert_eq!(got.len(), 2);
    assert_eq!((got[1].events.len(), got[1].fragment), (6, false));
}

// ---------------------------------------------------------------- load

/// Every watcher gets every event it covers exactly once, in order, across synced, unsynced and
/// victim states.
fn check_exactly_once(streams: usize, watchers: usize) {
    let mut f = Fixture::new(0);
    let keys = ["a", "b", "c", "d", "e"];
    // The first 20 revisions exist before any watcher.
    for rev in 1..=20 {
        f.write(vec![put(keys[rev as usize % 5], rev)]);
    }
    let mut sinks = Vec::new();
    for i in 0..streams {
        // Every tenth stream is small, so it fills and its watchers become victims.
        let cap = if i % 10 == 3 { 8 } else { 1_000_000 };
        sinks.push(f.open(cap));
    }
    // Each watcher: (stream index, watch id) -> (key, range_end, start revision).
    let mut plan: BTreeMap<(usize, i64), (&str, &str, i64)> = BTreeMap::new();
    let mut next_id = vec![0i64; streams];
    for w in 0..watchers {
        let si = w % streams;
        let (s, _) = &sinks[si];
        let (key, end) = match w % 4 {
            0 => (keys[w % 5], ""),
            1 => ("b", "d"),
            2 => ("c", "\0"),
            _ => ("", "\0"),
        };
        let mut c = create(key, end);
        // A third start in the past.
        c.start_revision = if w % 3 == 0 { 1 + (w % 20) as i64 } else { 0 };
        let start = if c.start_revision == 0 {
            f.hub.current_revision() + 1
        } else {
            c.start_revision
        };
        f.hub.handle_request(*s, req_create(c));
        plan.insert((si, next_id[si]), (key, end, start));
        next_id[si] += 1;
        if w % 1000 == 999 {
            // Writes land while watchers are still being created.
            let rev = f.store.current + 1;
            f.write(vec![put(keys[rev as usize % 5], rev)]);
        }
    }
    f.serve_reads();
    let mut got: BTreeMap<(usize, i64), Vec<(String, i64)>> = BTreeMap::new();
    let mut collect = |sinks: &Vec<(StreamId, TestSink)>| {
        for (si, (_, sink)) in sinks.iter().enumerate() {
            for r in sink.drain() {
                for e in &r.events {
                    let kv = e.kv.as_ref().unwrap();
                    got.entry((si, r.watch_id))
                        .or_default()
                        .push((String::from_utf8(kv.key.clone()).unwrap(), kv.mod_revision));
                }
            }
        }
    };
    let mut saw_victims = false;
    for _ in 0..40 {
        saw_victims |= f.hub.stats().victims > 0;
        let rev = f.store.current + 1;
        f.write(vec![put(keys[rev as usize % 5], rev), put("ca", rev)]);
        collect(&sinks);
        f.hub.retry_victims();
        f.serve_reads();
    }
    while f.hub.needs_retry() {
        collect(&sinks);
        f.hub.retry_victims();
        f.serve_reads();
    }
    collect(&sinks);
    assert_eq!(saw_victims, streams > 1, "small streams fill up");
    let st = f.hub.stats();
    assert_eq!((st.synced, st.unsynced, st.victims), (watchers, 0, 0));
    let covers = |key: &str, end: &str, k: &str| match end {
        "" => k == key,
        "\0" => k >= key,
        end => key <= k && k < end,
    };
    let mut delivered = 0;
    for ((si, id), (key, end, start)) in &plan {
        let want: Vec<(String, i64)> = f
            .store
            .events
            .iter()
            .map(|e| {
                let kv = e.kv.as_ref().unwrap();
                (String::from_utf8(kv.key.clone()).unwrap(), kv.mod_revision)
            })
            .filter(|(k, r)| r >= start && covers(key, end, k))
            .collect();
        assert_eq!(
            got.get(&(*si, *id)).cloned().unwrap_or_default(),
            want,
            "stream {si} watch {id}"
        );
        delivered += want.len();
    }
    assert!(delivered > watchers * 20, "{delivered} events delivered");
}

#[test]
fn load_10000_watchers_on_one_stream_get_every_event_once() {
    check_exactly_once(1, 10_000);
}

#[test]
fn load_10000_watchers_across_100_streams_get_every_event_once() {
    check_exactly_once(100, 10_000);
}

// ---------------------------------------------------------------- shared events

/// The shared events of `r`, if any.
fn shared_of(r: &StreamResponse) -> Option<&actcd_types::watch::SharedEvents> {
    r.shared.as_ref()
}

#[test]
fn watchers_that_get_the_same_events_share_one_copy() {
    let mut f = Fixture::new(1);
    let (s, sink) = f.open(100);
    let noput = {
        let mut c = create("foo", "fop");
        c.filters.push(FilterType::Noput as i32);
        c
    };
    for c in [
        create("foo", "fop"),
        create("foo", "fop"),
        create("foo/a", ""),
        noput,
    ] {
        f.request(s, req_create(c));
    }
    sink.take_all();

    // One revision, two keys: both prefix watchers take both events; the single-key watcher
    // one of them; the NOPUT watcher none.
    f.write(vec![put("foo/a", 2), put("foo/b", 2)]);
    let mut got = sink.take_all();
    got.sort_by_key(|r| r.response.watch_id);
    assert_eq!(got.len(), 3, "{got:?}");
    let (a, b) = (shared_of(&got[0]).unwrap(), shared_of(&got[1]).unwrap());
    assert!(std::sync::Arc::ptr_eq(&a.all, &b.all));
    assert!(got[0].response.events.is_empty());
    assert!(
        shared_of(&got[2]).is_none(),
        "a subset is the watcher's own"
    );
    let got: Vec<WatchResponse> = got.into_iter().map(|r| r.into_response()).collect();
    assert_eq!(
        shows(&got),
        [
            "id=0 rev=2 put:foo/a@2 put:foo/b@2",
            "id=1 rev=2 put:foo/a@2 put:foo/b@2",
            "id=2 rev=2 put:foo/a@2",
        ]
    );

    // Catching up: watchers from revision 2 and from 3 share the read's events, the later one
    // a tail of them.
    f.write(vec![put("foo/c", 3)]);
    sink.take_all();
    let from = |rev| {
        let mut c = create("foo", "fop");
        c.start_revision = rev;
        c
    };
    let (s2, sink2) = f.open(100);
    f.hub.handle_request(s2, req_create(from(2)));
    f.hub.handle_request(s2, req_create(from(3)));
    // One key of the prefix, in the same read: its own copy of what its key covers.
    let mut one = create("foo/b", "");
    one.start_revision = 2;
    f.hub.handle_request(s2, req_create(one));
    f.serve_reads();
    let got = sink2.take_all();
    assert_eq!(got.len(), 6, "created thrice, then events");
    let (a, b) = (shared_of(&got[3]).unwrap(), shared_of(&got[4]).unwrap());
    assert!(std::sync::Arc::ptr_eq(&a.all, &b.all));
    assert!(shared_of(&got[5]).is_none());
    let got: Vec<WatchResponse> = got.into_iter().map(|r| r.into_response()).collect();
    assert_eq!(
        shows(&got[3..]),
        [
            "id=0 rev=3 put:foo/a@2 put:foo/b@2 put:foo/c@3",
            "id=1 rev=3 put:foo/c@3",
            "id=2 rev=3 put:foo/b@2",
        ]
    );
}
