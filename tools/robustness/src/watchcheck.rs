//! The watch checker: every watch response of the full watchers (prefix
//! from revision 1, resumed across members) and of the watches opened from
//! past revisions, against a reference history of the store.
//!
//! The reference is what the full watchers saw, merged by revision (they
//! must agree: `watch-disagree`); it must hold every revision from 2 to the
//! final one (every revision of a run is a write under the prefix) and
//! replay to the final state every member answered (`watch-replay`), and
//! every acknowledged write must be in it at the revision its response named
//! (`watch-lost`). Then every stream (one connection of a watch) is checked:
//!
//! * `watch-order`: event revisions never go back;
//! * `watch-atomic`: one revision's events never split across responses;
//! * `watch-unique`: no (revision, key) event twice;
//! * `watch-filter`: only keys in the watched range, no put with NOPUT, no
//!   delete with NODELETE, no event before the start revision;
//! * `watch-gap` (`watch-resume` on a resumed stream): every revision from
//!   the start up to the last event or progress notification seen whose
//!   reference events match the watch appears, with exactly those events
//!   (`watch-mismatch` if different ones);
//! * `watch-progress`: a progress notification's revision is at least every
//!   event revision sent before it and below every one sent after it;
//! * `watch-prevkv`: with `prev_kv`, each event's previous key-value is the
//!   key's value and mod revision just before that revision (absent if it
//!   did not exist);
//! * `watch-compacted`: nothing is compacted in a run, so no watch may be
//!   told so.

use std::collections::{BTreeMap, HashMap, HashSet};

use actcd_linearizability::{Input, OpResult, Output, TxnOp};

use crate::traffic::{Event, Kind, Record, Session, WatchRecord, WatchSpec, Watcher};

/// (kind, text) of each violation found.
pub type Found = Vec<(&'static str, String)>;

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn show_event(e: &Event) -> String {
    if e.put {
        format!("put {}={}@{}", show(&e.key), show(&e.value), e.mod_revision)
    } else {
        format!("delete {}@{}", show(&e.key), e.mod_revision)
    }
}

/// What identifies an event in the reference: (put, key, value if put).
type Ev = (bool, Vec<u8>, Vec<u8>);
/// A key's (value, mod revision).
type Kv = (Vec<u8>, i64);
/// (key, value, mod revision) of a final read.
type FinalKv = (Vec<u8>, Vec<u8>, i64);
/// key -> (value, mod revision).
type Store = BTreeMap<Vec<u8>, Kv>;

fn ev(e: &Event) -> Ev {
    (
        e.put,
        e.key.clone(),
        if e.put { e.value.clone() } else { Vec::new() },
    )
}

/// The store's history as the full watchers saw it.
pub struct Reference {
    /// Events by revision, sorted.
    revs: BTreeMap<i64, Vec<Ev>>,
    /// Revisions 2..=complete are all present.
    complete: i64,
    /// (revision, key) -> the key's (value, mod revision) just before.
    prev: HashMap<(i64, Vec<u8>), Option<Kv>>,
}

/// A full watcher's events by revision; `None` if some revision was seen
/// twice with different events (reported by the stream check).
fn by_revision(records: &[WatchRecord]) -> BTreeMap<i64, Vec<Ev>> {
    let mut m: BTreeMap<i64, Vec<Ev>> = BTreeMap::new();
    let mut seen: HashSet<(i64, Vec<u8>)> = HashSet::new();
    for r in records {
        for e in &r.events {
            if seen.insert((e.mod_revision, e.key.clone())) {
                m.entry(e.mod_revision).or_default().push(ev(e));
            }
        }
    }
    for v in m.values_mut() {
        v.sort();
    }
    m
}

impl Reference {
    pub fn build(watched: &[Watcher], out: &mut Found) -> Reference {
        let mut revs: BTreeMap<i64, Vec<Ev>> = BTreeMap::new();
        let mut from: HashMap<i64, usize> = HashMap::new();
        for w in watched {
            for (rev, evs) in by_revision(&w.records) {
                match revs.get(&rev) {
                    None => {
                        revs.insert(rev, evs);
                        from.insert(rev, w.id);
                    }
                    Some(have) if *have == evs => {}
                    Some(have) => out.push((
                        "watch-disagree",
                        format!(
                            "revision {rev}: watcher {} saw [{}], watcher {} saw [{}]",
                            from.get(&rev).copied().unwrap_or(0),
                            show_evs(have),
                            w.id,
                            show_evs(&evs)
                        ),
                    )),
                }
            }
        }
        let mut complete = 1;
        while revs.contains_key(&(complete + 1)) {
            complete += 1;
        }
        let mut state: HashMap<Vec<u8>, (Vec<u8>, i64)> = HashMap::new();
        let mut prev = HashMap::new();
        for (&rev, evs) in revs.range(..=complete) {
            for (put, key, value) in evs {
                prev.insert((rev, key.clone()), state.get(key).cloned());
                if *put {
                    state.insert(key.clone(), (value.clone(), rev));
                } else {
                    state.remove(key);
                }
            }
        }
        Reference {
            revs,
            complete,
            prev,
        }
    }

    /// The state after replaying revisions 2..=rev (if complete that far).
    fn state_at(&self, rev: i64) -> Option<Store> {
        if rev > self.complete {
            return None;
        }
        let mut state = BTreeMap::new();
        for (&r, evs) in self.revs.range(..=rev) {
            for (put, key, value) in evs {
                if *put {
                    state.insert(key.clone(), (value.clone(), r));
                } else {
                    state.remove(key);
                }
            }
        }
        Some(state)
    }
}

fn show_evs(evs: &[Ev]) -> String {
    evs.iter()
        .map(|(put, k, v)| {
            if *put {
                format!("put {}={}", show(k), show(v))
            } else {
                format!("delete {}", show(k))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The reference against the final state and the acknowledged writes, and
/// that it holds every revision up to the final one.
pub fn check_reference(
    reference: &Reference,
    records: &[Record],
    final_rev: i64,
    final_kvs: Option<&[FinalKv]>,
    out: &mut Found,
) {
    if reference.complete < final_rev {
        out.push((
            "watch-gap",
            format!(
                "the full watchers together saw revisions 2..={} only (revision {} missing), final revision {final_rev}",
                reference.complete,
                reference.complete + 1
            ),
        ));
    }
    if let Some(kvs) = final_kvs
        && let Some(state) = reference.state_at(final_rev)
    {
        let want: Store = kvs
            .iter()
            .map(|(k, v, r)| (k.clone(), (v.clone(), *r)))
            .collect();
        if want != state {
            let diff: Vec<String> = want
                .keys()
                .chain(state.keys())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .filter(|k| want.get(*k) != state.get(*k))
                .take(5)
                .map(|k| {
                    let f = |m: &Store| {
                        m.get(k)
                            .map_or("absent".to_owned(), |(v, r)| format!("{}@{r}", show(v)))
                    };
                    format!(
                        "{}: final read {}, watched {}",
                        show(k),
                        f(&want),
                        f(&state)
                    )
                })
                .collect();
            out.push((
                "watch-replay",
                format!(
                    "replaying the watched events to revision {final_rev} does not give the final state: {}",
                    diff.join("; ")
                ),
            ));
        }
    }
    // Acknowledged writes at their revision.
    let mut lost = Vec::new();
    for r in records {
        if r.kind != Kind::Kv || r.op.ret.is_none() {
            continue;
        }
        let mut want: Vec<(i64, Ev)> = Vec::new();
        match (&r.op.input, &r.op.output) {
            (
                Input::Put { key, value } | Input::PutLease { key, value, .. },
                Output::Put {
                    revision: Some(rev),
                },
            ) => want.push((*rev, (true, key.clone(), value.clone()))),
            (
                Input::Delete { key },
                Output::Delete {
                    deleted: Some(1),
                    revision: Some(rev),
                },
            ) => want.push((*rev, (false, key.clone(), Vec::new()))),
            (
                Input::Txn(t),
                Output::Txn {
                    succeeded,
                    results,
                    revision: Some(rev),
                },
            ) => {
                let branch = if *succeeded { &t.then } else { &t.otherwise };
                for (op, res) in branch.iter().zip(results) {
                    match (op, res) {
                        (TxnOp::Put { key, value }, _) => {
                            want.push((*rev, (true, key.clone(), value.clone())));
                        }
                        (TxnOp::Delete { key }, OpResult::Delete { deleted: Some(1) }) => {
                            want.push((*rev, (false, key.clone(), Vec::new())));
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        for (rev, e) in want {
            if rev > reference.complete {
                continue;
            }
            match reference.revs.get(&rev) {
                Some(evs) if evs.contains(&e) => {}
                got => lost.push(format!(
                    "revision {rev}: acknowledged {} (client {}, call {}) but watched [{}]",
                    show_evs(std::slice::from_ref(&e)),
                    r.op.client,
                    r.op.call,
                    got.map_or(String::new(), |g| show_evs(g))
                )),
            }
        }
    }
    if !lost.is_empty() {
        let n = lost.len();
        lost.truncate(5);
        out.push((
            "watch-lost",
            format!("{n} acknowledged write(s) not watched: {}", lost.join("; ")),
        ));
    }
}

/// One stream to check: a connection of a watch, from `start`.
pub struct Stream<'a> {
    /// For humans: "watcher 1 stream 3" / "past watcher 0 session 5".
    pub label: String,
    pub spec: &'a WatchSpec,
    pub start: i64,
    pub resumed: bool,
    pub records: &'a [WatchRecord],
}

/// The streams of a full watcher: one per (re)connection.
pub fn full_streams<'a>(w: &'a Watcher, spec: &'a WatchSpec) -> Vec<Stream<'a>> {
    let mut out = Vec::new();
    let mut i = 0;
    let recs = &w.records;
    while i < recs.len() {
        let Some(start) = recs[i].reconnect_from else {
            i += 1;
            continue;
        };
        let mut j = i + 1;
        while j < recs.len() && recs[j].reconnect_from.is_none() {
            j += 1;
        }
        if recs[i].error.is_none() {
            out.push(Stream {
                label: format!(
                    "full watcher {} stream from {start} (t {})",
                    w.id, recs[i].t
                ),
                spec,
                start,
                resumed: start > 1,
                records: &recs[i + 1..j],
            });
        }
        i = j;
    }
    out
}

pub fn session_stream(s: &Session) -> Stream<'_> {
    let f = |on: bool, name: &'static str| if on { name } else { "" };
    Stream {
        label: format!(
            "past watcher {} session {} on m{} from {} [{}..{}) {}{}{}{}{} (opened t {})",
            s.watcher,
            s.n,
            s.member + 1,
            s.spec.start,
            show(&s.spec.key),
            show(&s.spec.range_end),
            f(s.spec.prev_kv, "prev_kv "),
            f(s.spec.no_put, "NOPUT "),
            f(s.spec.no_delete, "NODELETE "),
            f(s.spec.progress_notify, "progress_notify "),
            f(s.resumed, "resumed"),
            s.opened
        ),
        spec: &s.spec,
        start: s.spec.start,
        resumed: s.resumed,
        records: &s.records,
    }
}

/// Checks one stream against the reference (see the module doc).
/// `skip_requested`: leave out answers to progress requests (watch id -1)
/// and count them in `skipped` (etcd before 3.5.8 answers them with the
/// store's revision even while the watch is still catching up: etcd issue
/// 15220, fixed by etcd PR 15237).
pub fn check_stream(
    st: &Stream<'_>,
    reference: &Reference,
    skip_requested: bool,
    skipped: &mut usize,
    out: &mut Found,
) {
    let mut problems: Vec<(&'static str, String)> = Vec::new();
    let mut last_rev = 0i64; // last event revision sent
    let mut claimed = 0i64; // highest revision covered (events or progress)
    let mut seen: HashSet<(i64, Vec<u8>)> = HashSet::new();
    let mut got: BTreeMap<i64, Vec<Ev>> = BTreeMap::new();
    let mut progress: Vec<(i64, u64)> = Vec::new(); // (header, t) of notifications so far
    let mut created = false;
    for r in st.records {
        if r.compact_revision > 0 {
            problems.push((
                "watch-compacted",
                format!("told compacted at {} (t {})", r.compact_revision, r.t),
            ));
        }
        if r.created {
            created = true;
        }
        if r.canceled || r.error.is_some() {
            break;
        }
        if r.is_progress() {
            if skip_requested && r.watch_id == -1 {
                *skipped += 1;
                continue;
            }
            let h = r.header_revision;
            if h < last_rev {
                problems.push((
                    "watch-progress",
                    format!(
                        "progress notification at revision {h} (t {}) after an event at {last_rev}",
                        r.t
                    ),
                ));
            }
            progress.push((h, r.t));
            claimed = claimed.max(h);
            continue;
        }
        let first = r.events.first().map(|e| e.mod_revision);
        if let Some(f) = first
            && f == last_rev
            && !r.fragment
        {
            problems.push((
                "watch-atomic",
                format!(
                    "revision {f} split across responses (the second at t {})",
                    r.t
                ),
            ));
        }
        for e in &r.events {
            let rev = e.mod_revision;
            if rev < last_rev {
                problems.push((
                    "watch-order",
                    format!("{} (t {}) after an event at {last_rev}", show_event(e), r.t),
                ));
            }
            if let Some((h, t)) = progress.iter().find(|(h, _)| *h >= rev) {
                problems.push((
                    "watch-progress",
                    format!(
                        "{} (t {}) sent after a progress notification at revision {h} (t {t})",
                        show_event(e),
                        r.t
                    ),
                ));
            }
            if !seen.insert((rev, e.key.clone())) {
                problems.push((
                    "watch-unique",
                    format!("{} (t {}) sent twice", show_event(e), r.t),
                ));
            }
            if !st.spec.matches(&e.key, e.put) || rev < st.start {
                problems.push((
                    "watch-filter",
                    format!("{} (t {}) does not match the watch", show_event(e), r.t),
                ));
            }
            if st.spec.prev_kv && rev <= reference.complete {
                let want = reference.prev.get(&(rev, e.key.clone()));
                if let Some(want) = want
                    && *want != e.prev
                {
                    let f = |p: &Option<(Vec<u8>, i64)>| {
                        p.as_ref()
                            .map_or("absent".to_owned(), |(v, r)| format!("{}@{r}", show(v)))
                    };
                    problems.push((
                        "watch-prevkv",
                        format!(
                            "{} (t {}): prev_kv {}, the key before it was {}",
                            show_event(e),
                            r.t,
                            f(&e.prev),
                            f(want)
                        ),
                    ));
                }
            }
            last_rev = last_rev.max(rev);
            got.entry(rev).or_default().push(ev(e));
        }
        claimed = claimed.max(last_rev);
    }
    // Reliability: every matching revision in [start, claimed] (as far as
    // the reference is complete) delivered with exactly its events.
    if created {
        let upto = claimed.min(reference.complete);
        let from = st.start.max(2);
        let range = if from <= upto {
            reference.revs.range(from..=upto)
        } else {
            reference.revs.range(0..0)
        };
        for (&rev, evs) in range {
            let mut want: Vec<Ev> = evs
                .iter()
                .filter(|(put, k, _)| st.spec.matches(k, *put))
                .cloned()
                .collect();
            want.sort();
            let mut have = got.get(&rev).cloned().unwrap_or_default();
            have.sort();
            if want == have {
                continue;
            }
            if have.is_empty() {
                problems.push((
                    if st.resumed {
                        "watch-resume"
                    } else {
                        "watch-gap"
                    },
                    format!(
                        "revision {rev} [{}] never sent (stream saw up to {claimed})",
                        show_evs(&want)
                    ),
                ));
            } else {
                problems.push((
                    "watch-mismatch",
                    format!(
                        "revision {rev}: sent [{}], the store had [{}]",
                        show_evs(&have),
                        show_evs(&want)
                    ),
                ));
            }
        }
    }
    let mut by_kind: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    for (k, t) in problems {
        by_kind.entry(k).or_default().push(t);
    }
    for (k, mut v) in by_kind {
        let n = v.len();
        v.truncate(5);
        out.push((
            k,
            format!("{}: {n} problem(s), first: {}", st.label, v.join("; ")),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &str, v: &str, rev: i64, prev: Option<(&str, i64)>) -> Event {
        Event {
            put: true,
            key: k.into(),
            value: v.into(),
            mod_revision: rev,
            prev: prev.map(|(v, r)| (v.as_bytes().to_vec(), r)),
        }
    }

    fn del(k: &str, rev: i64, prev: Option<(&str, i64)>) -> Event {
        Event {
            put: false,
            key: k.into(),
            value: Vec::new(),
            mod_revision: rev,
            prev: prev.map(|(v, r)| (v.as_bytes().to_vec(), r)),
        }
    }

    fn resp(t: u64, events: Vec<Event>) -> WatchRecord {
        WatchRecord {
            t,
            member: 0,
            reconnect_from: None,
            error: None,
            header_revision: events.last().map_or(0, |e| e.mod_revision),
            created: false,
            canceled: false,
            compact_revision: 0,
            fragment: false,
            watch_id: 0,
            events,
        }
    }

    fn created(t: u64) -> WatchRecord {
        WatchRecord {
            created: true,
            header_revision: 1,
            ..resp(t, Vec::new())
        }
    }

    fn progress(t: u64, rev: i64) -> WatchRecord {
        WatchRecord {
            header_revision: rev,
            ..resp(t, Vec::new())
        }
    }

    /// revs 2..=6: put a=1, put b=1, put a=2, delete a and b (one revision,
    /// a revoke), put b=2.
    fn history() -> Vec<WatchRecord> {
        vec![
            created(0),
            resp(
                1,
                vec![
                    put("a", "1", 2, None),
                    put("b", "1", 3, None),
                    put("a", "2", 4, Some(("1", 2))),
                ],
            ),
            resp(
                2,
                vec![
                    del("a", 5, Some(("2", 4))),
                    del("b", 5, Some(("1", 3))),
                    put("b", "2", 6, None),
                ],
            ),
        ]
    }

    fn spec(key: &str, end: &str) -> WatchSpec {
        WatchSpec {
            key: key.into(),
            range_end: end.into(),
            start: 1,
            prev_kv: true,
            no_put: false,
            no_delete: false,
            progress_notify: false,
        }
    }

    fn kinds(sp: &WatchSpec, start: i64, records: &[WatchRecord]) -> Vec<&'static str> {
        let mut found = Found::new();
        let full = Watcher {
            id: 0,
            records: history(),
        };
        let reference = Reference::build(std::slice::from_ref(&full), &mut found);
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(reference.complete, 6);
        let st = Stream {
            label: "test".into(),
            spec: sp,
            start,
            resumed: false,
            records,
        };
        let mut skipped = 0;
        check_stream(&st, &reference, false, &mut skipped, &mut found);
        found.iter().map(|(k, _)| *k).collect()
    }

    #[test]
    fn the_reference_stream_passes() {
        let all = spec("a", "c");
        assert!(kinds(&all, 1, &history()).is_empty());
        // One key from a past revision, with a progress notification.
        let b = spec("b", "");
        let recs = vec![
            created(0),
            resp(1, vec![del("b", 5, Some(("1", 3)))]),
            progress(2, 5),
            resp(3, vec![put("b", "2", 6, None)]),
        ];
        assert!(kinds(&b, 4, &recs).is_empty());
    }

    #[test]
    fn each_kind_of_fault_is_reported() {
        let all = spec("a", "c");
        let mut gap = history();
        gap[1].events.remove(1);
        assert_eq!(kinds(&all, 1, &gap), ["watch-gap"]);
        let mut split = history();
        let e = split[2].events.remove(0);
        split[1].events.push(e);
        assert_eq!(kinds(&all, 1, &split), ["watch-atomic"]);
        let mut back = history();
        back[2].events.swap(1, 2);
        assert!(kinds(&all, 1, &back).contains(&"watch-order"));
        let mut twice = history();
        twice.push(resp(3, vec![put("b", "2", 6, None)]));
        assert!(kinds(&all, 1, &twice).contains(&"watch-unique"));
        let mut prev = history();
        prev[1].events[2].prev = None;
        assert_eq!(kinds(&all, 1, &prev), ["watch-prevkv"]);
        let mut wrong = history();
        wrong[1].events[2].value = b"9".to_vec();
        assert_eq!(kinds(&all, 1, &wrong), ["watch-mismatch"]);
        let no_put = WatchSpec {
            no_put: true,
            ..spec("a", "c")
        };
        assert!(kinds(&no_put, 1, &history()).contains(&"watch-filter"));
        // A progress notification at 5 before the event at 4.
        let ahead = vec![
            created(0),
            progress(1, 5),
            resp(2, vec![put("a", "2", 4, Some(("1", 2)))]),
        ];
        let a = spec("a", "");
        assert!(kinds(&a, 4, &ahead).contains(&"watch-progress"));
        // A progress notification at 6 claims revision 5 was sent: gap.
        let claimed = vec![created(0), progress(1, 6)];
        assert_eq!(kinds(&a, 5, &claimed), ["watch-gap"]);
    }
}
