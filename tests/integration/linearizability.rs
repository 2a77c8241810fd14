//! Linearizability of recorded histories, checked with the Wing–Gong algorithm as Lowe refined
//! it (just-in-time linearization over a linked list of call/return events, with a cache of
//! (linearized set, state) pairs already explored), per key (a register's history is
//! linearizable iff each key's is, since every operation here touches one key).
//!
//! An operation whose outcome the client never learned (a timeout, a dropped connection) has
//! no return event: it may take effect at any point after its call, or never.
//!
//! The cluster test records such histories from clients on every member of a 3-member cluster
//! while members are killed and restarted, and checks every member's watch stream against the
//! committed history too.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, EventType, GetOptions, Txn, TxnOp, WatchOptions};

use crate::cluster::{Member, leader_index, running_cluster};

// ------------------------------------------------------------------ the checker

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Put(String),
    Get,
    Delete,
    /// Put `new` if the value is `expect` (`None`: the key is absent).
    Cas {
        expect: Option<String>,
        new: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Put,
    Get(Option<String>),
    Deleted(i64),
    Cas(bool),
}

#[derive(Debug, Clone)]
pub struct Op {
    pub client: usize,
    pub key: String,
    pub input: Input,
    /// `None`: the outcome is unknown (and so is whether it took effect).
    pub output: Option<Output>,
    pub call: u64,
    /// `None` with an unknown outcome.
    pub ret: Option<u64>,
}

/// A register's value, interned to keep cached states small.
type State = Option<u32>;

struct Interner(HashMap<String, u32>);

impl Interner {
    fn id(&mut self, v: &str) -> u32 {
        let n = self.0.len() as u32;
        *self.0.entry(v.to_string()).or_insert(n)
    }
}

/// The register model: the state after `input`, if `output` (when known) is what it answers.
fn step(
    state: State,
    input: &Input,
    output: Option<&Output>,
    values: &mut Interner,
) -> Option<State> {
    match input {
        Input::Put(v) => match output {
            None | Some(Output::Put) => Some(Some(values.id(v))),
            _ => None,
        },
        Input::Get => match output {
            Some(Output::Get(v)) => {
                let seen = v.as_deref().map(|v| values.id(v));
                (seen == state).then_some(state)
            }
            _ => None,
        },
        Input::Delete => match output {
            None => Some(None),
            Some(Output::Deleted(n)) => (*n == i64::from(state.is_some())).then_some(None),
            _ => None,
        },
        Input::Cas { expect, new } => {
            let hit = expect.as_deref().map(|e| values.id(e)) == state;
            let next = if hit { Some(values.id(new)) } else { state };
            match output {
                None => Some(next),
                Some(Output::Cas(ok)) => (*ok == hit).then_some(next),
                _ => None,
            }
        }
    }
}

/// Search states the checker may cache before it gives up on a history as too costly to
/// decide (the search is exponential in the worst case; a budget keeps a bad run from eating the
/// machine).
const STATE_BUDGET: usize = 2_000_000;

/// One key's history: is there an order of its operations, each taking effect at one instant
/// between its call and its return, that the register model accepts?
pub fn linearizable(ops: &[Op]) -> bool {
    decide(ops) == Some(true)
}

/// [`linearizable`], or `None` if deciding took more than [`STATE_BUDGET`] states.
pub fn decide(ops: &[Op]) -> Option<bool> {
    // Events: (time, is_return, op); calls before returns at equal times (overlap).
    let mut events: Vec<(u64, bool, usize)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        events.push((op.call, false, i));
        if let Some(r) = op.ret {
            events.push((r, true, i));
        }
    }
    events.sort_by_key(|&(t, is_ret, i)| (t, is_ret, i));
    let n = events.len();
    // A doubly linked list over the events, with a head sentinel at index n.
    let head = n;
    let mut next: Vec<usize> = (1..=n).chain([0]).collect();
    let mut prev: Vec<usize> = (0..=n).map(|i| if i == 0 { head } else { i - 1 }).collect();
    next[head] = if n == 0 { usize::MAX } else { 0 };
    if n > 0 {
        next[n - 1] = usize::MAX;
    }
    let mut call_at = vec![usize::MAX; ops.len()];
    let mut ret_at = vec![usize::MAX; ops.len()];
    for (pos, &(_, is_ret, i)) in events.iter().enumerate() {
        if is_ret {
            ret_at[i] = pos;
        } else {
            call_at[i] = pos;
        }
    }
    let unlink = |pos: usize, next: &mut Vec<usize>, prev: &mut Vec<usize>| {
        let (p, q) = (prev[pos], next[pos]);
        next[p] = q;
        if q != usize::MAX {
            prev[q] = p;
        }
    };
    let relink = |pos: usize, next: &mut Vec<usize>, prev: &mut Vec<usize>| {
        let (p, q) = (prev[pos], next[pos]);
        next[p] = pos;
        if q != usize::MAX {
            prev[q] = pos;
        }
    };
    let mut known_left = ops.iter().filter(|o| o.ret.is_some()).count();
    let mut values = Interner(HashMap::new());
    let mut linearized = vec![0u64; ops.len().div_ceil(64)];
    let mut cache: HashSet<(Vec<u64>, State)> = HashSet::new();
    let mut stack: Vec<(usize, State)> = Vec::new();
    let mut state: State = None;
    let mut cursor = next[head];
    while known_left > 0 {
        if cursor == usize::MAX || events[cursor].1 {
            // A return reached (or the end) with its operation not yet linearized: undo the
            // last choice and try the next candidate after it.
            let Some((op, before)) = stack.pop() else {
                return Some(false);
            };
            state = before;
            linearized[op / 64] &= !(1 << (op % 64));
            if ret_at[op] != usize::MAX {
                relink(ret_at[op], &mut next, &mut prev);
                known_left += 1;
            }
            relink(call_at[op], &mut next, &mut prev);
            cursor = next[call_at[op]];
            continue;
        }
        let op = events[cursor].2;
        let o = &ops[op];
        if let Some(after) = step(state, &o.input, o.output.as_ref(), &mut values) {
            let mut set = linearized.clone();
            set[op / 64] |= 1 << (op % 64);
            if cache.len() > STATE_BUDGET {
                return None;
            }
            if cache.insert((set.clone(), after)) {
                stack.push((op, state));
                state = after;
                linearized = set;
                unlink(call_at[op], &mut next, &mut prev);
                if ret_at[op] != usize::MAX {
                    unlink(ret_at[op], &mut next, &mut prev);
                    known_left -= 1;
                }
                cursor = next[head];
                continue;
            }
        }
        cursor = next[cursor];
    }
    Some(true)
}

/// Checks every key's history; the error names the first key that fails.
pub fn check(history: &[Op]) -> Result<(), String> {
    let mut by_key: BTreeMap<&str, Vec<Op>> = BTreeMap::new();
    for op in history {
        by_key.entry(&op.key).or_default().push(op.clone());
    }
    for (key, ops) in by_key {
        let verdict = match decide(&ops) {
            Some(true) => continue,
            Some(false) => "not linearizable",
            None => "too costly to decide",
        };
        let clients: HashSet<usize> = ops.iter().map(|o| o.client).collect();
        let unknown = ops.iter().filter(|o| o.ret.is_none()).count();
        return Err(format!(
            "key {key:?}: {} operations ({unknown} of unknown outcome) from {} clients: {verdict}",
            ops.len(),
            clients.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod checker {
    use super::*;

    fn op(client: usize, input: Input, output: Option<Output>, call: u64, ret: Option<u64>) -> Op {
        Op {
            client,
            key: "k".into(),
            input,
            output,
            call,
            ret,
        }
    }
    fn put(c: usize, v: &str, call: u64, ret: u64) -> Op {
        op(c, Input::Put(v.into()), Some(Output::Put), call, Some(ret))
    }
    fn get(c: usize, v: Option<&str>, call: u64, ret: u64) -> Op {
        op(
            c,
            Input::Get,
            Some(Output::Get(v.map(String::from))),
            call,
            Some(ret),
        )
    }
    fn cas(c: usize, expect: Option<&str>, new: &str, ok: bool, call: u64, ret: u64) -> Op {
        let input = Input::Cas {
            expect: expect.map(String::from),
            new: new.into(),
        };
        op(c, input, Some(Output::Cas(ok)), call, Some(ret))
    }

    #[test]
    fn known_histories() {
        let good: Vec<(&str, Vec<Op>)> = vec![
            (
                "sequential",
                vec![put(0, "a", 0, 1), get(1, Some("a"), 2, 3)],
            ),
            (
                "overlapping writes read in either order",
                vec![
                    put(0, "a", 0, 10),
                    put(1, "b", 1, 9),
                    get(2, Some("a"), 11, 12),
                ],
            ),
            (
                "a read overlapping a write may see either",
                vec![
                    put(0, "a", 0, 1),
                    put(1, "b", 2, 10),
                    get(2, Some("a"), 3, 4),
                    get(3, Some("b"), 5, 6),
                ],
            ),
            (
                "an unknown write that took effect",
                vec![
                    op(0, Input::Put("x".into()), None, 0, None),
                    get(1, Some("x"), 5, 6),
                ],
            ),
            (
                "an unknown write that never did",
                vec![
                    op(0, Input::Put("x".into()), None, 0, None),
                    get(1, None, 5, 6),
                    get(1, None, 7, 8),
                ],
            ),
            (
                "compare-and-set chains",
                vec![
                    cas(0, None, "a", true, 0, 1),
                    cas(1, Some("a"), "b", true, 2, 3),
                    cas(2, Some("a"), "c", false, 4, 5),
                    get(0, Some("b"), 6, 7),
                ],
            ),
            (
                "a delete counts what it deleted",
                vec![
                    put(0, "a", 0, 1),
                    op(1, Input::Delete, Some(Output::Deleted(1)), 2, Some(3)),
                    op(1, Input::Delete, Some(Output::Deleted(0)), 4, Some(5)),
                    get(0, None, 6, 7),
                ],
            ),
        ];
        for (name, ops) in good {
            assert!(linearizable(&ops), "{name} should be linearizable");
        }
        let bad: Vec<(&str, Vec<Op>)> = vec![
            (
                "a stale read after a completed write",
                vec![
                    put(0, "a", 0, 1),
                    put(0, "b", 2, 3),
                    get(1, Some("a"), 4, 5),
                ],
            ),
            (
                "a value never written",
                vec![put(0, "a", 0, 1), get(1, Some("z"), 2, 3)],
            ),
            (
                "two compare-and-sets from one value both succeed",
                vec![
                    put(0, "a", 0, 1),
                    cas(1, Some("a"), "b", true, 2, 10),
                    cas(2, Some("a"), "c", true, 3, 11),
                ],
            ),
            (
                "a client does not read its own write",
                vec![
                    put(0, "a", 0, 1),
                    put(0, "b", 2, 3),
                    get(0, Some("a"), 4, 5),
                ],
            ),
            (
                "reads go back in time across clients",
                vec![
                    put(0, "a", 0, 1),
                    put(0, "b", 2, 20),
                    get(1, Some("b"), 3, 4),
                    get(2, Some("a"), 5, 6),
                ],
            ),
            (
                "a delete that found nothing after a write",
                vec![
                    put(0, "a", 0, 1),
                    op(1, Input::Delete, Some(Output::Deleted(0)), 2, Some(3)),
                ],
            ),
            (
                "an unknown write seen, then unseen",
                vec![
                    op(0, Input::Put("x".into()), None, 0, None),
                    get(1, Some("x"), 5, 6),
                    get(1, None, 7, 8),
                ],
            ),
        ];
        for (name, ops) in bad {
            assert!(!linearizable(&ops), "{name} must be refused");
        }
    }

    /// Many overlapping operations: the cache keeps the search small.
    #[test]
    fn a_long_concurrent_history_is_checked_quickly() {
        let mut ops = Vec::new();
        let mut t = 0;
        for round in 0..400u64 {
            let v = format!("v{round}");
            ops.push(put((round % 4) as usize, &v, t, t + 7));
            ops.push(get(4, Some(&v), t + 8, t + 9));
            t += 5;
        }
        let start = Instant::now();
        assert!(linearizable(&ops));
        assert!(start.elapsed() < Duration::from_secs(10));
    }
}

// ------------------------------------------------------------------ the cluster run

/// Failures that happened before the request left the client: nothing took effect.
fn never_sent(e: &etcd_client::Error) -> bool {
    let s = format!("{e:?}");
    s.contains("tcp connect error") || s.contains("Connection refused")
}

async fn run_client(
    id: usize,
    mut c: Client,
    keys: Vec<String>,
    base: Instant,
    until: Instant,
    history: Arc<Mutex<Vec<Op>>>,
) {
    let mut seed = 0x1234_5678u64 ^ ((id as u64 + 1) * 0x9E37_79B9);
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut last_seen: HashMap<String, Option<String>> = HashMap::new();
    let mut seq = 0;
    let now = |base: Instant| base.elapsed().as_nanos() as u64;
    while Instant::now() < until {
        seq += 1;
        let key = keys[rand(keys.len() as u64) as usize].clone();
        let value = format!("c{id}-{seq}");
        let pick = rand(100);
        let input = match pick {
            0..40 => Input::Get,
            40..70 => Input::Put(value.clone()),
            70..80 => Input::Delete,
            _ => Input::Cas {
                expect: last_seen.get(&key).cloned().flatten(),
                new: value.clone(),
            },
        };
        let call = now(base);
        let fut = async {
            match &input {
                Input::Get => c.get(key.as_str(), None).await.map(|r| {
                    Output::Get(
                        r.kvs()
                            .first()
                            .map(|kv| kv.value_str().unwrap().to_string()),
                    )
                }),
                Input::Put(v) => c
                    .put(key.as_str(), v.as_str(), None)
                    .await
                    .map(|_| Output::Put),
                Input::Delete => c
                    .delete(key.as_str(), None)
                    .await
                    .map(|r| Output::Deleted(r.deleted())),
                Input::Cas { expect, new } => {
                    let cmp = match expect {
                        Some(e) => Compare::value(key.as_str(), CompareOp::Equal, e.as_str()),
                        None => Compare::version(key.as_str(), CompareOp::Equal, 0),
                    };
                    let txn = Txn::new().when([cmp]).and_then([TxnOp::put(
                        key.as_str(),
                        new.as_str(),
                        None,
                    )]);
                    c.txn(txn).await.map(|r| Output::Cas(r.succeeded()))
                }
            }
        };
        let result = tokio::time::timeout(Duration::from_secs(2), fut).await;
        let ret = now(base);
        let (output, ret) = match result {
            Ok(Ok(out)) => {
                if let Output::Get(v) = &out {
                    last_seen.insert(key.clone(), v.clone());
                }
                (Some(out), Some(ret))
            }
            Ok(Err(e)) if never_sent(&e) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            // A read that failed changed nothing: leave it out.
            _ if input == Input::Get => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            Ok(Err(e)) => {
                if std::env::var("LIN_DEBUG").is_ok() {
                    eprintln!("c{id} {input:?}: {e:?}");
                }
                (None, None)
            }
            Err(_) => (None, None),
        };
        let failed = output.is_none();
        history.lock().unwrap().push(Op {
            client: id,
            key,
            input,
            output,
            call,
            ret,
        });
        if failed {
            // Each unknown outcome widens the checker's search: back off while the cluster
            // recovers instead of piling them up.
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// One event as a watch delivers it: (revision, put?, key, value).
type Seen = (i64, bool, String, String);

/// Watches `prefix` on `m` from revision 1, resuming after the last revision seen whenever
/// the member goes away, until `until`.
async fn watch_member(m_endpoint: String, prefix: String, until: Instant) -> Vec<Seen> {
    let mut seen: Vec<Seen> = Vec::new();
    while Instant::now() < until {
        let from = seen.last().map_or(1, |e| e.0 + 1);
        let Ok(mut c) = Client::connect([m_endpoint.clone()], None).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let opts = WatchOptions::new().with_prefix().with_start_revision(from);
        // A restarted member serves nobody until it is ready (published again): the call waits
        // for that, but never past `until`.
        let left = until.saturating_duration_since(Instant::now());
        let Ok(Ok(mut stream)) =
            tokio::time::timeout(left, c.watch(prefix.as_str(), Some(opts))).await
        else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, stream.message()).await {
                Ok(Ok(Some(resp))) => {
                    for ev in resp.events() {
                        let kv = ev.kv().unwrap();
                        seen.push((
                            kv.mod_revision(),
                            ev.event_type() == EventType::Put,
                            kv.key_str().unwrap().to_string(),
                            kv.value_str().unwrap_or("").to_string(),
                        ));
                    }
                }
                Ok(_) => break,
                Err(_) => return seen,
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linearizable_under_member_kills() {
    let dir = tempfile::tempdir().unwrap();
    let (mut members, initial, first_leader) = running_cluster(dir.path(), &[]).await;
    let keys: Vec<String> = (0..4).map(|i| format!("lin/{i}")).collect();
    let base = Instant::now();
    let run_for = Duration::from_secs(7);
    let until = base + run_for;
    let history = Arc::new(Mutex::new(Vec::new()));
    let mut clients = Vec::new();
    for id in 0..6 {
        let m: &Member = &members[id % 3];
        let c = m.client().await;
        clients.push(tokio::spawn(run_client(
            id,
            c,
            keys.clone(),
            base,
            until,
            history.clone(),
        )));
    }
    let watchers: Vec<_> = members
        .iter()
        .map(|m| {
            tokio::spawn(watch_member(
                m.endpoint(),
                "lin/".into(),
                until + Duration::from_secs(3),
            ))
        })
        .collect();

    // Chaos: kill the leader, bring it back; then a follower.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    members[first_leader].kill();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    members[first_leader].spawn(&initial);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let alive: Vec<usize> = (0..3).collect();
    let leader = leader_index(&members, &alive).await;
    let follower = (leader + 1) % 3;
    members[follower].kill();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    members[follower].spawn(&initial);

    for c in clients {
        c.await.unwrap();
    }
    let history = history.lock().unwrap().clone();
    let known = history.iter().filter(|o| o.ret.is_some()).count();
    let started = Instant::now();
    let verdict = check(&history);
    if verdict.is_err() {
        let unknown: Vec<String> = history
            .iter()
            .filter(|o| o.ret.is_none())
            .map(|o| format!("c{} {:?} at {}ms", o.client, o.input, o.call / 1_000_000))
            .collect();
        eprintln!("unknown outcomes: {unknown:?}");
    }
    eprintln!(
        "linearizability: {} operations ({known} with a known outcome) over {} keys, checked in {:?}",
        history.len(),
        keys.len(),
        started.elapsed()
    );
    verdict.unwrap();
    assert!(known > 200, "too few operations completed: {known}");

    // The committed history, from a fresh watch on a healthy member.
    let healthy = leader_index(&members, &[0, 1, 2]).await;
    let mut c = members[healthy].client().await;
    let last = c
        .get("lin/", Some(GetOptions::new().with_prefix()))
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    let reference = watch_member(
        members[healthy].endpoint(),
        "lin/".into(),
        Instant::now() + Duration::from_secs(3),
    )
    .await;
    assert!(
        reference.last().is_some_and(|e| e.0 <= last),
        "the reference ends at or before revision {last}"
    );
    for (i, w) in watchers.into_iter().enumerate() {
        let seen = w.await.unwrap();
        assert!(
            seen.windows(2).all(|p| p[0].0 <= p[1].0),
            "member {i}: events out of order"
        );
        assert!(
            seen.len() <= reference.len(),
            "member {i}: more events than committed"
        );
        assert_eq!(
            seen[..],
            reference[..seen.len()],
            "member {i}: its watch stream is not a prefix of the committed history"
        );
        assert!(
            seen.len() * 10 >= reference.len() * 9,
            "member {i} saw {} of {} events",
            seen.len(),
            reference.len()
        );
    }
    // Every acknowledged write is in the committed history (a put's value appears).
    let committed: HashSet<&str> = reference
        .iter()
        .filter(|e| e.1)
        .map(|e| e.3.as_str())
        .collect();
    for op in &history {
        if let (Input::Put(v), Some(Output::Put)) = (&op.input, &op.output) {
            assert!(
                committed.contains(v.as_str()),
                "acknowledged put {v} is missing"
            );
        }
    }
}
