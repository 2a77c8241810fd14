//! The fault injector: one fault every interval, each healed before the
//! next (kill → restart after 1–2 s; stop → continue after 2× the election
//! timeout; peer-link faults through the proxies → healed after their
//! duration; replace → removed, wiped, re-added and caught up).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};

use actcd_proto::etcdserverpb::cluster_client::ClusterClient;
use actcd_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use actcd_proto::etcdserverpb::{
    DefragmentRequest, HashKvRequest, Member, MemberAddRequest, MemberListRequest,
    MemberRemoveRequest,
};

use crate::cluster::{Cluster, ELECTION_MS, channel, status};
use crate::proxy::Link;
use crate::run::range;
use crate::traffic::Clock;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    Kill,
    KillLeader,
    Stop,
    Blackhole,
    Delay,
    Drop,
    OneWay,
    Replace,
    Failpoint,
    LoseUnsynced,
}

/// Every fault kind, in `--faults` order.
pub const ALL: &[Fault] = &[
    Fault::Kill,
    Fault::KillLeader,
    Fault::Stop,
    Fault::Blackhole,
    Fault::Delay,
    Fault::Drop,
    Fault::OneWay,
    Fault::Replace,
    Fault::Failpoint,
    Fault::LoseUnsynced,
];

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::KillLeader => "kill-leader",
            Fault::Stop => "stop",
            Fault::Blackhole => "blackhole",
            Fault::Delay => "delay",
            Fault::Drop => "drop",
            Fault::OneWay => "oneway",
            Fault::Replace => "replace",
            Fault::Failpoint => "failpoint",
            Fault::LoseUnsynced => "lose-unsynced",
        }
    }
    pub fn parse(s: &str) -> Result<Vec<Fault>, String> {
        let mut out = Vec::new();
        for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            if w == "none" {
                continue;
            }
            if w == "all" {
                out.extend_from_slice(ALL);
                continue;
            }
            match ALL.iter().find(|f| f.name() == w) {
                Some(f) => out.push(*f),
                None => {
                    return Err(format!(
                        "unknown fault {w:?} ({}, all, none)",
                        ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// One injected fault, for the summary and the dump.
#[derive(Clone, Debug)]
pub struct Injected {
    pub t: u64,
    pub fault: Fault,
    pub member: String,
    pub note: String,
    /// Set when the fault's own steps failed (a replacement that never
    /// completed, a member that never caught up): reported as a violation.
    pub failed: Option<String>,
}

/// Index of the leader, via Status on every member.
async fn leader(cluster: &Arc<Mutex<Cluster>>) -> Option<usize> {
    let (urls, ids): (Vec<String>, Vec<u64>) = {
        let c = cluster.lock().expect("cluster lock");
        (c.urls(), c.members.iter().map(|m| m.id).collect())
    };
    for url in &urls {
        if let Some((_, leader)) = status(url).await
            && leader != 0
            && let Some(i) = ids.iter().position(|&id| id == leader)
        {
            return Some(i);
        }
    }
    None
}

async fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let end = tokio::time::Instant::now() + d;
    while tokio::time::Instant::now() < end && !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn secs(t: u64) -> f64 {
    t as f64 / 1e9
}

/// A peer-link fault's target: one member's links (to and from every other
/// member) or one pair's.
fn link_target(rng: &mut StdRng, n: usize) -> (Vec<(usize, usize)>, String) {
    let a = rng.random_range(0..n);
    if rng.random_bool(0.5) {
        let links = (0..n)
            .filter(|&b| b != a)
            .flat_map(|b| [(a, b), (b, a)])
            .collect();
        (links, format!("m{} <-> all", a + 1))
    } else {
        let b = (a + rng.random_range(1..n)) % n;
        (vec![(a, b), (b, a)], format!("m{} <-> m{}", a + 1, b + 1))
    }
}

pub async fn inject(
    cluster: Arc<Mutex<Cluster>>,
    kinds: Vec<Fault>,
    interval: Duration,
    seed: u64,
    clock: Clock,
    stop: Arc<AtomicBool>,
) -> Vec<Injected> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xFA17_5EED);
    let mut done = Vec::new();
    let (n, net, instrumented) = {
        let c = cluster.lock().expect("cluster lock");
        (c.members.len(), c.net.clone(), c.instrumented)
    };
    // Failpoints and the sync log exist only in an actcd built with `--features failpoints`.
    let kinds: Vec<Fault> = kinds
        .into_iter()
        .filter(|k| instrumented || !matches!(k, Fault::Failpoint | Fault::LoseUnsynced))
        .collect();
    let kinds: Vec<Fault> = if n == 1 {
        kinds
            .into_iter()
            .filter(|k| matches!(k, Fault::Kill | Fault::Failpoint | Fault::LoseUnsynced))
            .collect()
    } else if net.is_none() {
        kinds
            .into_iter()
            .filter(|k| {
                !matches!(
                    k,
                    Fault::Blackhole | Fault::Delay | Fault::Drop | Fault::OneWay
                )
            })
            .collect()
    } else {
        kinds
    };
    if kinds.is_empty() {
        return done;
    }
    // Kinds are dealt from a shuffled deck: every kind once per round.
    let mut deck: Vec<Fault> = Vec::new();
    // Start to start: a fault's own duration does not stretch the interval
    // (unless it is longer than the interval).
    let mut next = tokio::time::Instant::now() + interval;
    loop {
        sleep_unless(
            &stop,
            next.saturating_duration_since(tokio::time::Instant::now()),
        )
        .await;
        next = tokio::time::Instant::now().max(next) + interval;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if deck.is_empty() {
            deck = kinds.clone();
            deck.shuffle(&mut rng);
        }
        let fault = deck.pop().expect("deck");
        let random = rng.random_range(0..n);
        let pause = Duration::from_millis(rng.random_range(1000..=2000));
        let t = clock.now();
        let mut failed = None;
        let (member, note) = match fault {
            Fault::Kill | Fault::KillLeader => {
                let (i, how) = if fault == Fault::KillLeader {
                    match leader(&cluster).await {
                        Some(i) => (i, "leader"),
                        None => (random, "leader unknown, random member"),
                    }
                } else {
                    (random, "random member")
                };
                let name = {
                    let mut c = cluster.lock().expect("cluster lock");
                    c.kill(i);
                    c.members[i].name.clone()
                };
                println!(
                    "[{:6.2}s] fault {}: SIGKILL {name} ({how}), restart in {:.1}s",
                    secs(t),
                    fault.name(),
                    pause.as_secs_f64()
                );
                tokio::time::sleep(pause).await;
                let r = cluster.lock().expect("cluster lock").start(i);
                let note = match r {
                    Ok(()) => format!("{how}; restarted after {:.1}s", pause.as_secs_f64()),
                    Err(e) => format!("{how}; restart failed: {e}"),
                };
                (name, note)
            }
            Fault::Stop => {
                let d = Duration::from_millis(2 * ELECTION_MS);
                let name = {
                    let mut c = cluster.lock().expect("cluster lock");
                    c.signal_stop(random, true);
                    c.members[random].name.clone()
                };
                println!(
                    "[{:6.2}s] fault stop: SIGSTOP {name} for {:.1}s",
                    secs(t),
                    d.as_secs_f64()
                );
                tokio::time::sleep(d).await;
                cluster
                    .lock()
                    .expect("cluster lock")
                    .signal_stop(random, false);
                (name, format!("continued after {:.1}s", d.as_secs_f64()))
            }
            Fault::Blackhole | Fault::Delay | Fault::OneWay => {
                let net = net.as_ref().expect("proxied");
                let (links, what, link, d) = match fault {
                    Fault::Blackhole => {
                        let (links, what) = link_target(&mut rng, n);
                        let d = Duration::from_millis(2 * ELECTION_MS);
                        (links, what, Link::Blackhole, d)
                    }
                    Fault::Delay => {
                        let (links, what) = link_target(&mut rng, n);
                        let by = Duration::from_millis(rng.random_range(50..=200));
                        let d = Duration::from_millis(rng.random_range(2000..=4000));
                        (links, what, Link::Delay(by), d)
                    }
                    _ => {
                        let a = random;
                        let b = (a + rng.random_range(1..n)) % n;
                        let d = Duration::from_millis(rng.random_range(2 * ELECTION_MS..=3000));
                        (
                            vec![(a, b)],
                            format!("m{} -> m{} (m{} -> m{} flows)", a + 1, b + 1, b + 1, a + 1),
                            Link::Blackhole,
                            d,
                        )
                    }
                };
                for &(a, b) in &links {
                    net.set(a, b, link);
                }
                let how = match link {
                    Link::Delay(by) => format!("+{} ms per chunk", by.as_millis()),
                    _ => "blackholed".to_owned(),
                };
                println!(
                    "[{:6.2}s] fault {}: {what} {how} for {:.1}s",
                    secs(t),
                    fault.name(),
                    d.as_secs_f64()
                );
                tokio::time::sleep(d).await;
                net.heal();
                (what, format!("{how}; healed after {:.1}s", d.as_secs_f64()))
            }
            Fault::Drop => {
                let net = net.as_ref().expect("proxied");
                let a = random;
                let (what, closed) = if rng.random_bool(0.5) {
                    (format!("inbound of m{}", a + 1), net.drop_conns(None, a))
                } else {
                    let b = (a + rng.random_range(1..n)) % n;
                    (
                        format!("m{} <-> m{}", a + 1, b + 1),
                        net.drop_conns(Some(a), b) + net.drop_conns(Some(b), a),
                    )
                };
                println!(
                    "[{:6.2}s] fault drop: closed {closed} connection(s), {what}",
                    secs(t)
                );
                (what, format!("closed {closed} connection(s)"))
            }
            Fault::Replace => {
                let (name, note, fail) = replace(&cluster, &mut rng, clock).await;
                failed = fail;
                (name, note)
            }
            Fault::Failpoint => failpoint(&cluster, &mut rng, random, t, &stop).await,
            Fault::LoseUnsynced => {
                let (name, lost) = {
                    let mut c = cluster.lock().expect("cluster lock");
                    c.kill(random);
                    let m = &c.members[random];
                    let lost = crate::lose::lose_unsynced(&m.data_dir, &m.sync_log)
                        .unwrap_or_else(|e| format!("file surgery failed: {e}"));
                    (m.name.clone(), lost)
                };
                println!(
                    "[{:6.2}s] fault lose-unsynced: SIGKILL {name}, {lost}; restart in {:.1}s",
                    secs(t),
                    pause.as_secs_f64()
                );
                tokio::time::sleep(pause).await;
                let r = cluster.lock().expect("cluster lock").start(random);
                let note = match r {
                    Ok(()) => lost,
                    Err(e) => format!("{lost}; restart failed: {e}"),
                };
                (name, note)
            }
        };
        done.push(Injected {
            t,
            fault,
            member,
            note,
            failed,
        });
    }
    done
}

/// The failpoints a failpoints build of actcd has that traffic (or the fault itself) reaches,
/// and what reaches them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Trigger {
    /// Any write traffic.
    Writes,
    /// A Defragment call to the member.
    Defrag,
    /// The member falls behind the leader's log while down, and is sent a snapshot.
    Snapshot,
}

const FAILPOINTS: &[(&str, Trigger)] = &[
    ("wal_before_append", Trigger::Writes),
    ("wal_before_hard_state", Trigger::Writes),
    ("wal_after_append_before_fsync", Trigger::Writes),
    ("wal_after_fsync", Trigger::Writes),
    ("backend_before_commit", Trigger::Writes),
    ("backend_after_commit", Trigger::Writes),
    ("defrag_after_copy", Trigger::Defrag),
    ("defrag_before_swap", Trigger::Defrag),
    ("defrag_after_swap", Trigger::Defrag),
    ("snapshot_before_install", Trigger::Snapshot),
];

/// How long an armed member may run before its failpoint is given up on.
const FAILPOINT_WAIT: Duration = Duration::from_secs(10);

/// How long a member stays down before it is armed with `snapshot_before_install`: with
/// `--snapshot-count 300` and ~200 writes a second the leader has compacted past it by then.
const SNAPSHOT_DOWN: Duration = Duration::from_secs(5);

/// Whether the member's log since byte `from` shows failpoint `fp` firing (fail-rs's panic
/// message names it; a `return` surfaces as an error naming it).
fn fired(log: &std::path::Path, from: u64, fp: &str) -> bool {
    let Ok(bytes) = std::fs::read(log) else {
        return false;
    };
    let tail = String::from_utf8_lossy(bytes.get(from as usize..).unwrap_or_default());
    tail.contains(&format!("failpoint {fp}"))
}

/// Restarts member `i` with one failpoint set to `panic` (the process aborts) or `return` (the
/// actor's error path: a fatal storage error stops the member), drives what reaches it, waits
/// for the member to die of it, and restarts it without.
async fn failpoint(
    cluster: &Arc<Mutex<Cluster>>,
    rng: &mut StdRng,
    i: usize,
    t: u64,
    stop: &AtomicBool,
) -> (String, String) {
    let n = cluster.lock().expect("cluster lock").members.len();
    let choices: Vec<&(&str, Trigger)> = FAILPOINTS
        .iter()
        .filter(|(_, trig)| n > 1 || *trig != Trigger::Snapshot)
        .collect();
    let &&(fp, trigger) = choices.choose(rng).expect("failpoints");
    let action = if rng.random_bool(0.5) {
        "panic"
    } else {
        "return"
    };
    let (name, url, log) = {
        let mut c = cluster.lock().expect("cluster lock");
        c.kill(i);
        let m = &c.members[i];
        (m.name.clone(), m.url(), m.log.clone())
    };
    println!(
        "[{:6.2}s] fault failpoint: SIGKILL {name}, restart with {fp}={action}",
        secs(t)
    );
    if trigger == Trigger::Snapshot {
        // Down long enough for the leader to compact past it (instrumented members run with a
        // small --snapshot-count).
        tokio::time::sleep(SNAPSHOT_DOWN).await;
    }
    let setting = format!("{fp}={action}");
    // Where this incarnation's log starts: whether the failpoint fired is read from there.
    let log_from = std::fs::metadata(&log).map_or(0, |m| m.len());
    if let Err(e) = cluster
        .lock()
        .expect("cluster lock")
        .start_with(i, Some(&setting))
    {
        return (name, format!("{setting}: restart failed: {e}"));
    }
    let started = tokio::time::Instant::now();
    let mut died = false;
    while started.elapsed() < FAILPOINT_WAIT && !stop.load(Ordering::Relaxed) {
        if cluster.lock().expect("cluster lock").has_exited(i) {
            died = true;
            break;
        }
        // A `return` off the write path (a failed defragmentation) is answered as an error
        // and the member serves on: done once the log says it fired and the member has had
        // time to stop if the error was fatal.
        if action == "return" && fired(&log, log_from, fp) {
            tokio::time::sleep(Duration::from_secs(2)).await;
            died = cluster.lock().expect("cluster lock").has_exited(i);
            break;
        }
        if trigger == Trigger::Defrag {
            let mut m = MaintenanceClient::new(channel(&url));
            let mut req = tonic::Request::new(DefragmentRequest {});
            req.set_timeout(Duration::from_secs(2));
            let _ = tokio::time::timeout(Duration::from_secs(3), m.defragment(req)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let outcome = if died {
        format!(
            "{setting}: died after {:.1}s",
            started.elapsed().as_secs_f64()
        )
    } else if fired(&log, log_from, fp) {
        format!(
            "{setting}: fired after {:.1}s, the member answered an error and kept serving",
            started.elapsed().as_secs_f64()
        )
    } else {
        format!(
            "{setting}: not reached in {:.0}s, killed",
            started.elapsed().as_secs_f64()
        )
    };
    println!("[{:6.2}s]   {name}: {outcome}; restarting without", secs(t));
    let r = {
        let mut c = cluster.lock().expect("cluster lock");
        c.kill(i);
        c.start(i)
    };
    match r {
        Ok(()) => (name, outcome),
        Err(e) => (name, format!("{outcome}; restart failed: {e}")),
    }
}

fn code(s: &tonic::Status) -> String {
    format!("{:?}: {}", s.code(), s.message())
}

/// Calls `f(attempt)` until it succeeds or `within` passes, backing off
/// 200 ms doubling to 2 s and printing each refusal. `f` may also give up
/// early with `Err(Ok(v))` (already done).
async fn retry<T, F, Fut>(what: &str, clock: Clock, within: Duration, mut f: F) -> Result<T, String>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + within;
    let mut backoff = Duration::from_millis(200);
    let mut attempt = 0;
    loop {
        match f(attempt).await {
            Ok(v) => return Ok(v),
            Err(e) => {
                if tokio::time::Instant::now() + backoff > deadline {
                    return Err(format!(
                        "{what}: gave up after {} attempt(s): {e}",
                        attempt + 1
                    ));
                }
                println!(
                    "[{:6.2}s]   replace: {what} refused ({e}); retry in {} ms",
                    secs(clock.now()),
                    backoff.as_millis()
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
                attempt += 1;
            }
        }
    }
}

async fn member_list(url: &str) -> Result<Vec<Member>, String> {
    let mut c = ClusterClient::new(channel(url));
    let mut req = tonic::Request::new(MemberListRequest {
        linearizable: false,
    });
    req.set_timeout(Duration::from_secs(2));
    match tokio::time::timeout(Duration::from_millis(2500), c.member_list(req)).await {
        Ok(Ok(r)) => Ok(r.into_inner().members),
        Ok(Err(s)) => Err(code(&s)),
        Err(_) => Err("local timeout".into()),
    }
}

async fn hash_kv(url: &str, revision: i64) -> Result<u32, String> {
    let mut m = MaintenanceClient::new(channel(url));
    let mut req = tonic::Request::new(HashKvRequest { revision });
    req.set_timeout(Duration::from_secs(3));
    match tokio::time::timeout(Duration::from_millis(3500), m.hash_kv(req)).await {
        Ok(Ok(r)) => Ok(r.into_inner().hash),
        Ok(Err(s)) => Err(code(&s)),
        Err(_) => Err("local timeout".into()),
    }
}

/// Replaces a random follower: MemberRemove, gone from MemberList, SIGKILL,
/// data dir wiped, MemberAdd (same name and peer URL), started with
/// `--initial-cluster-state existing`, until its linearizable read works and
/// its HashKV at that read's revision equals another member's. Returns the
/// member, the note and what failed.
async fn replace(
    cluster: &Arc<Mutex<Cluster>>,
    rng: &mut StdRng,
    clock: Clock,
) -> (String, String, Option<String>) {
    let t0 = std::time::Instant::now();
    let Some(l) = leader(cluster).await else {
        println!(
            "[{:6.2}s] fault replace: leader unknown, skipped",
            secs(clock.now())
        );
        return ("-".into(), "leader unknown; skipped".into(), None);
    };
    let (urls, n, learner) = {
        let c = cluster.lock().expect("cluster lock");
        (c.urls(), c.members.len(), c.auto_promote)
    };
    let i = (l + rng.random_range(1..n)) % n;
    let (name, old_id, peer_url) = {
        let c = cluster.lock().expect("cluster lock");
        let m = &c.members[i];
        (m.name.clone(), m.id, m.peer_url())
    };
    // The other members, leader first.
    let others: Vec<usize> = std::iter::once(l)
        .chain((0..n).filter(|&j| j != l && j != i))
        .collect();
    println!(
        "[{:6.2}s] fault replace: {name} ({old_id:x}; leader m{}): MemberRemove",
        secs(clock.now()),
        l + 1
    );
    let fail = |what: String| {
        println!(
            "[{:6.2}s]   replace {name}: FAILED: {what}",
            secs(clock.now())
        );
        (name.clone(), what.clone(), Some(what))
    };
    let removed = retry("MemberRemove", clock, Duration::from_secs(30), |a| {
        let url = urls[others[a % others.len()]].clone();
        async move {
            let mut c = ClusterClient::new(channel(&url));
            let mut req = tonic::Request::new(MemberRemoveRequest { id: old_id });
            req.set_timeout(Duration::from_secs(3));
            match tokio::time::timeout(Duration::from_millis(3500), c.member_remove(req)).await {
                Ok(Ok(_)) => Ok(()),
                // An earlier attempt went through after all.
                Ok(Err(s)) if s.code() == tonic::Code::NotFound => Ok(()),
                Ok(Err(s)) => Err(code(&s)),
                Err(_) => Err("local timeout".into()),
            }
        }
    })
    .await;
    if let Err(e) = removed {
        return fail(e);
    }
    let gone = retry(
        "MemberList without it",
        clock,
        Duration::from_secs(20),
        |a| {
            let url = urls[others[a % others.len()]].clone();
            async move {
                let list = member_list(&url).await?;
                if list.iter().any(|m| m.id == old_id) {
                    Err("still listed".into())
                } else {
                    Ok(())
                }
            }
        },
    )
    .await;
    if let Err(e) = gone {
        return fail(e);
    }
    {
        let mut c = cluster.lock().expect("cluster lock");
        c.kill(i);
        if let Err(e) = c.wipe(i) {
            drop(c);
            return fail(format!("wiping the data dir: {e}"));
        }
    }
    println!(
        "[{:6.2}s]   replace {name}: removed, killed, data dir wiped; MemberAdd {peer_url}",
        secs(clock.now())
    );
    let added = retry("MemberAdd", clock, Duration::from_secs(30), |a| {
        let url = urls[others[a % others.len()]].clone();
        let peer_url = peer_url.clone();
        async move {
            let mut c = ClusterClient::new(channel(&url));
            let mut req = tonic::Request::new(MemberAddRequest {
                peer_ur_ls: vec![peer_url.clone()],
                is_learner: learner,
            });
            req.set_timeout(Duration::from_secs(3));
            match tokio::time::timeout(Duration::from_millis(3500), c.member_add(req)).await {
                Ok(Ok(r)) => r
                    .into_inner()
                    .member
                    .map(|m| m.id)
                    .ok_or_else(|| "no member in the answer".to_owned()),
                Ok(Err(s)) => {
                    // An earlier attempt went through after all: its id.
                    if let Ok(list) = member_list(&url).await
                        && let Some(m) = list.iter().find(|m| m.peer_ur_ls.contains(&peer_url))
                    {
                        return Ok(m.id);
                    }
                    Err(code(&s))
                }
                Err(_) => Err("local timeout".into()),
            }
        }
    })
    .await;
    let new_id = match added {
        Ok(id) => id,
        Err(e) => return fail(e),
    };
    {
        let mut c = cluster.lock().expect("cluster lock");
        c.members[i].id = new_id;
        c.members[i].existing = true;
        if let Err(e) = c.start(i) {
            drop(c);
            return fail(format!("start: {e}"));
        }
    }
    println!(
        "[{:6.2}s]   replace {name}: added as {new_id:x}{}, started (existing); waiting until caught up",
        secs(clock.now()),
        if learner { " (learner)" } else { "" }
    );
    if learner {
        // Promoted by the leader alone (AutoPromoteLearners): no MemberPromote is sent.
        let promoted = retry(
            "promotion by the leader",
            clock,
            Duration::from_secs(60),
            |a| {
                let url = urls[others[a % others.len()]].clone();
                async move {
                    let list = member_list(&url).await?;
                    match list.iter().find(|m| m.id == new_id) {
                        Some(m) if !m.is_learner => Ok(()),
                        Some(_) => Err("still a learner".into()),
                        None => Err("not listed".into()),
                    }
                }
            },
        )
        .await;
        if let Err(e) = promoted {
            return fail(format!("{new_id:x} never promoted: {e}"));
        }
        println!(
            "[{:6.2}s]   replace {name}: promoted by the leader after {:.1}s",
            secs(clock.now()),
            t0.elapsed().as_secs_f64()
        );
    }
    let caught = retry("catch-up", clock, Duration::from_secs(60), |a| {
        let url = urls[i].clone();
        let other = urls[others[a % others.len()]].clone();
        async move {
            let r = range(&url, b"health", b"").await?;
            let mine = hash_kv(&url, r.revision).await?;
            let theirs = hash_kv(&other, r.revision).await?;
            if mine == theirs {
                Ok(r.revision)
            } else {
                Err(format!(
                    "HashKV({}) {mine:#010x} vs {theirs:#010x}",
                    r.revision
                ))
            }
        }
    })
    .await;
    match caught {
        Ok(rev) => {
            let note = format!(
                "{old_id:x} -> {new_id:x}; caught up (HashKV at {rev} agrees) after {:.1}s",
                t0.elapsed().as_secs_f64()
            );
            println!("[{:6.2}s]   replace {name}: {note}", secs(clock.now()));
            (name, note, None)
        }
        Err(e) => fail(format!("{old_id:x} -> {new_id:x}; never caught up: {e}")),
    }
}
