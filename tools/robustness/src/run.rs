//! One run: cluster up, traffic and faults for the duration, heal, check,
//! dump, summary.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actcd_linearizability::{
    self as lin, Input, Mode, OpResult, Operation, Options, Outcome, Output, TxnOp,
};
use actcd_proto::etcdserverpb::kv_client::KvClient;
use actcd_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use actcd_proto::etcdserverpb::{HashKvRequest, RangeRequest};
use serde_json::{Value, json};

use crate::cluster::{Cluster, channel, status};
use crate::faults::{self, Fault, Injected};
use crate::proxy::Net;
use crate::traffic::{
    self, Client, Clock, Kind, PREFIX, PREFIX_END, Record, Session, Shape, WatchRecord, WatchSpec,
    Watcher,
};
use crate::{Cli, RunSpec};

#[path = "watchcheck.rs"]
mod watchcheck;

/// Past-revision watch tasks per run.
const PAST_WATCHERS: usize = 2;

/// A violation: its kind (for the summary) and what to print.
struct Violation {
    kind: &'static str,
    text: String,
}

/// A linearizable read of `key`..`end` through `url`, within 2 s.
pub async fn range(url: &str, key: &[u8], end: &[u8]) -> Result<RangeOut, String> {
    range_at(url, key, end, 0).await
}

/// A linearizable read of `key`..`end` through `url` at `revision` (0: the latest), within
/// 2 s. The answer's `revision` is the one read at.
pub async fn range_at(
    url: &str,
    key: &[u8],
    end: &[u8],
    revision: i64,
) -> Result<RangeOut, String> {
    let mut kv = KvClient::new(channel(url));
    let mut req = tonic::Request::new(RangeRequest {
        key: key.to_vec(),
        range_end: end.to_vec(),
        revision,
        ..Default::default()
    });
    req.set_timeout(traffic::REQUEST_TIMEOUT);
    let r = tokio::time::timeout(Duration::from_millis(2500), kv.range(req)).await;
    match r {
        Ok(Ok(r)) => {
            let r = r.into_inner();
            Ok(RangeOut {
                revision: match revision {
                    0 => r.header.map_or(0, |h| h.revision),
                    at => at,
                },
                kvs: r
                    .kvs
                    .into_iter()
                    .map(|kv| (kv.key, kv.value, kv.mod_revision))
                    .collect(),
            })
        }
        Ok(Err(s)) => Err(format!("{:?}: {}", s.code(), s.message())),
        Err(_) => Err("local timeout".into()),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeOut {
    pub revision: i64,
    pub kvs: Vec<(Vec<u8>, Vec<u8>, i64)>,
}

/// Waits until every member answers a linearizable read (outside the
/// checked prefix). Returns the members that did not by the deadline.
async fn wait_healthy(urls: &[String], within: Duration) -> Vec<usize> {
    let deadline = Instant::now() + within;
    let mut pending: Vec<usize> = (0..urls.len()).collect();
    while !pending.is_empty() && Instant::now() < deadline {
        let mut still = Vec::new();
        for &i in &pending {
            if range(&urls[i], b"health", b"").await.is_err() {
                still.push(i);
            }
        }
        pending = still;
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    pending
}

fn tail(path: &Path, lines: usize) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

pub async fn run(cli: &Cli, spec: &RunSpec, seed: u64, dir: &Path) -> u8 {
    println!(
        "== run: {} member(s), {} s, {} client(s), faults [{}], seed {seed}{}, dir {}",
        spec.members,
        spec.duration,
        cli.clients,
        spec.faults
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(","),
        if cli.broken { ", BROKEN" } else { "" },
        dir.display()
    );
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("cannot create {}: {e}", dir.display());
        return 2;
    }
    let token = format!("robustness-{seed}");
    let proxied = spec.members > 1;
    let mut cluster = Cluster::new(&cli.server, dir, spec.members, cli.broken, token, proxied);
    cluster.instrumented = cli.failpoints;
    if cli.auto_promote {
        cluster.auto_promote = true;
        cluster
            .extra_args
            .push("--feature-gates=AutoPromoteLearners=true".into());
    }
    if proxied {
        let adv: Vec<u16> = cluster.members.iter().map(|m| m.adv_port).collect();
        let real: Vec<u16> = cluster.members.iter().map(|m| m.peer_port).collect();
        match Net::start(&adv, &real).await {
            Ok(net) => cluster.net = Some(net),
            Err(e) => {
                eprintln!("cannot start the peer proxies: {e}");
                return 2;
            }
        }
    }
    for i in 0..spec.members {
        if let Err(e) = cluster.start(i) {
            eprintln!("cannot start {}: {e}", cli.server.display());
            return 2;
        }
    }
    let urls = cluster.urls();
    let down = wait_healthy(&urls, Duration::from_secs(30)).await;
    if !down.is_empty() {
        for i in down {
            let m = &cluster.members[i];
            eprintln!(
                "{} never became healthy; last log lines:\n{}",
                m.name,
                tail(&m.log, 20)
            );
        }
        return 2;
    }
    for (i, url) in urls.iter().enumerate() {
        if let Some((id, _)) = status(url).await {
            cluster.members[i].id = id;
        }
    }
    let cluster = Arc::new(Mutex::new(cluster));

    // Traffic, watchers, faults.
    let clock = Clock(Instant::now());
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let shape = Shape {
        keys: cli.keys,
        members: spec.members,
        broken: cli.broken,
        clients: cli.clients as u64,
    };
    let lasts: Vec<Arc<AtomicI64>> = (0..spec.members)
        .map(|_| Arc::new(AtomicI64::new(0)))
        .collect();
    let watchers: Vec<_> = lasts
        .iter()
        .enumerate()
        .map(|(w, last)| {
            tokio::spawn(traffic::watch(
                w,
                urls.clone(),
                clock,
                last.clone(),
                done.clone(),
            ))
        })
        .collect();
    let past: Vec<_> = (0..if cli.broken { 0 } else { PAST_WATCHERS })
        .map(|w| {
            tokio::spawn(traffic::past_watches(
                w,
                seed,
                cli.keys,
                urls.clone(),
                clock,
                lasts[0].clone(),
                stop.clone(),
            ))
        })
        .collect();
    let clients: Vec<_> = (0..cli.clients as u64)
        .map(|id| {
            let c = Client::new(id, seed, shape.clone(), clock, &urls);
            tokio::spawn(c.run(stop.clone()))
        })
        .collect();
    let injector = tokio::spawn(faults::inject(
        cluster.clone(),
        spec.faults.clone(),
        Duration::from_secs_f64(spec.fault_interval.max(0.1)),
        seed,
        clock,
        stop.clone(),
    ));
    let traffic_end = Instant::now() + Duration::from_secs(spec.duration);
    let mut next_note = Instant::now() + Duration::from_secs(10);
    while Instant::now() < traffic_end {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if Instant::now() >= next_note {
            println!("[{:6.2}s] traffic running", clock.now() as f64 / 1e9);
            next_note += Duration::from_secs(10);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut records: Vec<Record> = Vec::new();
    for c in clients {
        match c.await {
            Ok(c) => records.extend(c.records),
            Err(e) => eprintln!("client task failed: {e}"),
        }
    }
    let injected: Vec<Injected> = injector.await.unwrap_or_default();
    let mut sessions: Vec<Session> = Vec::new();
    for p in past {
        if let Ok(s) = p.await {
            sessions.extend(s);
        }
    }
    println!(
        "[{:6.2}s] traffic stopped; healing",
        clock.now() as f64 / 1e9
    );

    // Heal and wait.
    let mut violations: Vec<Violation> = Vec::new();
    {
        let mut c = cluster.lock().expect("cluster lock");
        if let Some(net) = &c.net {
            net.heal();
        }
        for x in injected.iter().filter(|x| x.failed.is_some()) {
            violations.push(Violation {
                kind: "replace",
                text: format!(
                    "{} at {:.2}s: {}",
                    x.member,
                    x.t as f64 / 1e9,
                    x.failed.as_deref().unwrap_or_default()
                ),
            });
        }
        for (name, status) in c.exited() {
            violations.push(Violation {
                kind: "exited",
                text: format!("{name} exited by itself ({status})"),
            });
        }
        if let Err(e) = c.heal() {
            violations.push(Violation {
                kind: "unhealthy",
                text: format!("restart failed: {e}"),
            });
        }
    }
    let down = wait_healthy(&urls, Duration::from_secs(60)).await;
    for i in &down {
        let c = cluster.lock().expect("cluster lock");
        let m = &c.members[*i];
        violations.push(Violation {
            kind: "unhealthy",
            text: format!(
                "{} not healthy 60 s after healing; log tail:\n{}",
                m.name,
                tail(&m.log, 20)
            ),
        });
    }

    // Every key the traffic used (the lease keys too).
    let mut all_keys: Vec<Vec<u8>> = (0..cli.keys).map(traffic::key).collect();
    for r in &records {
        for k in r.op.input.keys() {
            all_keys.push(k.to_vec());
        }
    }
    all_keys.sort();
    all_keys.dedup();
    // Final reads through every member: fed to the checker and compared.
    let mut finals: Vec<Option<RangeOut>> = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        let call = clock.now();
        let r = range(url, PREFIX, PREFIX_END).await;
        let ret = clock.now();
        match r {
            Ok(out) => {
                // One range read has one linearization point: its per-key
                // reads go at distinct instants inside its interval, one
                // after the other (nothing but maybe-applied ops is
                // concurrent, and they fit before or after all of them), or
                // the search would try every subset of them at a dead end.
                for (n, key) in all_keys.iter().enumerate() {
                    let at = (call + n as u64).min(ret);
                    let kv = out.kvs.iter().find(|(kk, _, _)| kk == key);
                    records.push(Record {
                        kind: Kind::Final,
                        member: i,
                        op: Operation {
                            client: 1000 + i as u64,
                            call: at,
                            ret: Some(at),
                            input: Input::Get { key: key.clone() },
                            output: Output::Get {
                                value: kv.map(|(_, v, _)| v.clone()),
                                mod_revision: kv.map(|(_, _, r)| *r),
                                revision: Some(out.revision),
                            },
                        },
                        error: None,
                    });
                }
                finals.push(Some(out));
            }
            Err(e) => {
                if !down.contains(&i) {
                    violations.push(Violation {
                        kind: "unhealthy",
                        text: format!("final read through m{} failed: {e}", i + 1),
                    });
                }
                finals.push(None);
            }
        }
    }
    // The members are compared at one revision, the newest read: leases can still expire
    // (and delete keys) between the reads of one member and the next.
    let final_rev = finals
        .iter()
        .flatten()
        .map(|f| f.revision)
        .max()
        .unwrap_or(0);
    let mut read: Vec<(usize, RangeOut)> = Vec::new();
    for (i, f) in finals.iter().enumerate() {
        let Some(f) = f else { continue };
        if f.revision == final_rev {
            read.push((i, f.clone()));
            continue;
        }
        match range_at(&urls[i], PREFIX, PREFIX_END, final_rev).await {
            Ok(out) => read.push((i, out)),
            Err(e) => violations.push(Violation {
                kind: "unhealthy",
                text: format!(
                    "final read through m{} at revision {final_rev} failed: {e}",
                    i + 1
                ),
            }),
        }
    }
    if let Some((i0, f0)) = read.first() {
        for (i, f) in &read[1..] {
            if f.kvs != f0.kvs {
                violations.push(Violation {
                    kind: "final-state",
                    text: format!(
                        "m{} and m{} disagree on the final state at revision {final_rev}:\n  m{}: {}\n  m{}: {}",
                        i0 + 1,
                        i + 1,
                        i0 + 1,
                        show_kvs(&f0.kvs),
                        i + 1,
                        show_kvs(&f.kvs)
                    ),
                });
            }
        }
    }
    // HashKV at one revision on every member.
    let mut hashes: Vec<(usize, u32)> = Vec::new();
    if final_rev > 0 {
        for (i, url) in urls.iter().enumerate() {
            let mut got = None;
            let mut last_err = String::new();
            for _ in 0..10 {
                let mut m = MaintenanceClient::new(channel(url));
                let mut req = tonic::Request::new(HashKvRequest {
                    revision: final_rev,
                });
                req.set_timeout(Duration::from_secs(5));
                match tokio::time::timeout(Duration::from_secs(6), m.hash_kv(req)).await {
                    Ok(Ok(r)) => {
                        got = Some(r.into_inner().hash);
                        break;
                    }
                    Ok(Err(e)) => last_err = format!("{:?}: {}", e.code(), e.message()),
                    Err(_) => last_err = "local timeout".into(),
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            match got {
                Some(h) => hashes.push((i, h)),
                None => violations.push(Violation {
                    kind: "hashkv",
                    text: format!(
                        "HashKV({final_rev}) through m{} never answered: {last_err}",
                        i + 1
                    ),
                }),
            }
        }
        if hashes.windows(2).any(|w| w[0].1 != w[1].1) {
            violations.push(Violation {
                kind: "hashkv",
                text: format!(
                    "HashKV at revision {final_rev} differs: {}",
                    hashes
                        .iter()
                        .map(|(i, h)| format!("m{}={h:#010x}", i + 1))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            });
        }
    }

    // Watchers: let them catch up to the final revision, then stop them.
    let catch_up = Instant::now() + Duration::from_secs(15);
    while Instant::now() < catch_up && !lasts.iter().all(|l| l.load(Ordering::Relaxed) >= final_rev)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    done.store(true, Ordering::Relaxed);
    let mut watched: Vec<Watcher> = Vec::new();
    for w in watchers {
        if let Ok(w) = w.await {
            watched.push(w);
        }
    }
    let mut found = watchcheck::Found::new();
    let reference = watchcheck::Reference::build(&watched, &mut found);
    let final_kvs = read.first().map(|(_, f)| f.kvs.as_slice());
    watchcheck::check_reference(&reference, &records, final_rev, final_kvs, &mut found);
    let full_spec = WatchSpec {
        key: PREFIX.to_vec(),
        range_end: PREFIX_END.to_vec(),
        start: 1,
        prev_kv: true,
        no_put: false,
        no_delete: false,
        progress_notify: false,
    };
    let skip_requested = etcd_before_15237(&cli.server);
    let mut skipped = 0;
    for w in &watched {
        for st in watchcheck::full_streams(w, &full_spec) {
            watchcheck::check_stream(&st, &reference, skip_requested, &mut skipped, &mut found);
        }
    }
    for s in &sessions {
        let st = watchcheck::session_stream(s);
        watchcheck::check_stream(&st, &reference, skip_requested, &mut skipped, &mut found);
    }
    for (kind, text) in found {
        violations.push(Violation { kind, text });
    }

    // A lease may expire (the server revokes it) at any time from its
    // grant's call plus the TTL asked for (a server grants at least that,
    // from when it applies the grant): one maybe-applied expiry per grant.
    let expiries: Vec<Record> = records
        .iter()
        .filter_map(|r| match r.op.input {
            Input::LeaseGrant { lease, ttl } => Some(Record {
                kind: Kind::Expiry,
                member: r.member,
                op: Operation {
                    client: r.op.client,
                    call: r
                        .op
                        .call
                        .saturating_add((ttl.max(0) as u64).saturating_mul(1_000_000_000)),
                    ret: None,
                    input: Input::LeaseExpire { lease },
                    output: Output::Unknown,
                },
                error: None,
            }),
            _ => None,
        })
        .collect();
    records.extend(expiries);

    // Linearizability.
    let checked: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            // Failed reads and lease queries took no effect: left out.
            let no_effect = matches!(
                r.op.input,
                Input::Get { .. } | Input::LeaseKeepAlive { .. } | Input::LeaseTimeToLive { .. }
            );
            !matches!(r.kind, Kind::Serializable | Kind::Unsent)
                && (r.op.ret.is_some() || !no_effect)
        })
        .map(|(i, _)| i)
        .collect();
    let history: Vec<Operation> = checked.iter().map(|&i| records[i].op.clone()).collect();
    let mut undecided = Vec::new();
    let mut check_notes = Vec::new();
    if skip_requested {
        check_notes.push(format!(
            "{skipped} answer(s) to progress requests not checked (etcd before 3.5.8 may send them ahead of events: etcd issue 15220)"
        ));
    }
    let mut modes = vec![Mode::PerKey];
    if history.len() <= cli.whole_limit {
        modes.push(Mode::Whole);
    } else {
        check_notes.push(format!(
            "whole mode skipped ({} ops > --whole-limit {})",
            history.len(),
            cli.whole_limit
        ));
    }
    let history = Arc::new(history);
    for mode in modes {
        let opts = Options {
            mode,
            max_steps: if mode == Mode::Whole {
                cli.whole_max_steps
            } else {
                cli.max_steps
            },
            ..Options::default()
        };
        let h = history.clone();
        let t = Instant::now();
        let outcome = tokio::task::spawn_blocking(move || lin::check(&h, &opts)).await;
        let secs = t.elapsed().as_secs_f64();
        match outcome {
            Ok(Outcome::Linearizable) => {
                check_notes.push(format!("{mode:?}: linearizable ({secs:.1}s)"))
            }
            Ok(Outcome::Violation(v)) => {
                check_notes.push(format!("{mode:?}: VIOLATION ({secs:.1}s)"));
                violations.push(Violation {
                    kind: "linearizability",
                    text: format!(
                        "{v}(op #i: the line of history.jsonl with \"checked_index\": i)"
                    ),
                });
            }
            Ok(Outcome::Unknown { keys, steps }) => {
                check_notes.push(format!(
                    "{mode:?}: undecided after {steps} steps on {} key(s) ({secs:.1}s)",
                    keys.len()
                ));
                undecided.push(mode);
            }
            Ok(Outcome::Malformed { index, reason }) => {
                violations.push(Violation {
                    kind: "malformed-history",
                    text: format!("op #{index}: {reason} ({})", history[index]),
                });
            }
            Err(e) => violations.push(Violation {
                kind: "checker-panic",
                text: e.to_string(),
            }),
        }
    }

    // Dump and summary.
    let path = dir.join("history.jsonl");
    if let Err(e) = dump(&path, &records, &checked, &watched, &sessions, &injected) {
        eprintln!("cannot write {}: {e}", path.display());
    }
    cluster.lock().expect("cluster lock").shutdown();
    summary(
        spec,
        &records,
        &watched,
        &sessions,
        &injected,
        &violations,
        &check_notes,
        final_rev,
    );
    for v in &violations {
        println!("VIOLATION [{}]: {}", v.kind, v.text);
    }
    if violations.is_empty() {
        0
    } else {
        println!("history: {}", path.display());
        1
    }
}

/// Whether `server` is an etcd older than 3.5.8 (or 3.4.25), whose answers
/// to progress requests may come ahead of events (etcd issue 15220, fixed by
/// etcd PR 15237). Asked with `--version` (etcd prints `etcd Version: X.Y.Z`;
/// actcd does not).
fn etcd_before_15237(server: &Path) -> bool {
    let Ok(out) = std::process::Command::new(server).arg("--version").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(v) = text
        .lines()
        .find_map(|l| l.strip_prefix("etcd Version: "))
        .map(str::trim)
    else {
        return false;
    };
    let n: Vec<u64> = v
        .split(['.', '-'])
        .take(3)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    match n.as_slice() {
        [3, 5, p] => *p < 8,
        [3, 4, p] => *p < 25,
        [3, m, _] => *m < 4,
        _ => false,
    }
}

fn show_kvs(kvs: &[(Vec<u8>, Vec<u8>, i64)]) -> String {
    kvs.iter()
        .map(|(k, v, r)| {
            format!(
                "{}={}@{r}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v)
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn s(b: &[u8]) -> Value {
    Value::String(String::from_utf8_lossy(b).into_owned())
}

fn txn_op_json(o: &TxnOp) -> Value {
    match o {
        TxnOp::Put { key, value } => json!({"op": "put", "key": s(key), "value": s(value)}),
        TxnOp::Get { key } => json!({"op": "get", "key": s(key)}),
        TxnOp::Delete { key } => json!({"op": "delete", "key": s(key)}),
    }
}

fn input_json(i: &Input) -> Value {
    match i {
        Input::Put { key, value } => json!({"op": "put", "key": s(key), "value": s(value)}),
        Input::Get { key } => json!({"op": "get", "key": s(key)}),
        Input::Delete { key } => json!({"op": "delete", "key": s(key)}),
        Input::PutLease { key, value, lease } => {
            json!({"op": "put", "key": s(key), "value": s(value), "lease": format!("{lease:x}")})
        }
        Input::LeaseGrant { lease, ttl } => {
            json!({"op": "lease-grant", "lease": format!("{lease:x}"), "ttl": ttl})
        }
        Input::LeaseRevoke { lease } => {
            json!({"op": "lease-revoke", "lease": format!("{lease:x}")})
        }
        Input::LeaseExpire { lease } => {
            json!({"op": "lease-expiry", "lease": format!("{lease:x}")})
        }
        Input::LeaseKeepAlive { lease } => {
            json!({"op": "lease-keepalive", "lease": format!("{lease:x}")})
        }
        Input::LeaseTimeToLive { lease } => {
            json!({"op": "lease-timetolive", "lease": format!("{lease:x}")})
        }
        Input::Txn(t) => {
            let (target, against) = match &t.compare.target {
                lin::CompareTarget::Value(v) => ("value", s(v)),
                lin::CompareTarget::ModRevision(r) => ("mod_revision", json!(r)),
            };
            json!({
                "op": "txn",
                "compare": {"key": s(&t.compare.key), "target": target,
                            "relation": format!("{:?}", t.compare.op), "against": against},
                "then": t.then.iter().map(txn_op_json).collect::<Vec<_>>(),
                "else": t.otherwise.iter().map(txn_op_json).collect::<Vec<_>>(),
            })
        }
    }
}

fn output_json(o: &Output) -> Value {
    match o {
        Output::Unknown => Value::Null,
        Output::Put { revision } => json!({"revision": revision}),
        Output::Get {
            value,
            mod_revision,
            revision,
        } => json!({"value": value.as_deref().map(s), "mod_revision": mod_revision,
                    "revision": revision}),
        Output::Delete { deleted, revision } => json!({"deleted": deleted, "revision": revision}),
        Output::Lease { revision } => json!({"revision": revision}),
        Output::LeaseNotFound => json!({"lease_not_found": true}),
        Output::LeaseTtl { ttl, keys } => json!({
            "ttl": ttl,
            "keys": keys.as_ref().map(|ks| ks.iter().map(|k| s(k)).collect::<Vec<_>>()),
        }),
        Output::Txn {
            succeeded,
            results,
            revision,
        } => json!({
            "succeeded": succeeded,
            "revision": revision,
            "results": results.iter().map(|r| match r {
                OpResult::Put => json!({"op": "put"}),
                OpResult::Get { value, mod_revision } =>
                    json!({"op": "get", "value": value.as_deref().map(s), "mod_revision": mod_revision}),
                OpResult::Delete { deleted } => json!({"op": "delete", "deleted": deleted}),
            }).collect::<Vec<_>>(),
        }),
    }
}

fn watch_json(w: usize, r: &WatchRecord) -> Value {
    json!({
        "type": "watch", "watcher": w, "t": r.t, "member": r.member,
        "reconnect_from": r.reconnect_from, "error": r.error,
        "header_revision": r.header_revision, "created": r.created,
        "canceled": r.canceled, "compact_revision": r.compact_revision,
        "progress": r.is_progress(), "watch_id": r.watch_id,
        "events": r.events.iter().map(|e| json!({
            "type": if e.put { "put" } else { "delete" }, "key": s(&e.key),
            "value": s(&e.value), "mod_revision": e.mod_revision,
            "prev": e.prev.as_ref().map(|(v, r)| json!({"value": s(v), "mod_revision": r})),
        })).collect::<Vec<_>>(),
    })
}

/// A past-revision watch session: one `watch-session` line (what it asked
/// for), then its responses as `watch` lines with `"session"`.
fn session_json(x: &Session) -> Vec<Value> {
    let mut out = vec![json!({
        "type": "watch-session", "watcher": x.watcher, "session": x.n, "member": x.member,
        "t": x.opened, "key": s(&x.spec.key), "range_end": s(&x.spec.range_end),
        "start_revision": x.spec.start, "prev_kv": x.spec.prev_kv, "noput": x.spec.no_put,
        "nodelete": x.spec.no_delete, "progress_notify": x.spec.progress_notify,
        "resumed": x.resumed, "progress_requests": x.progress_requests,
    })];
    for r in &x.records {
        let mut v = watch_json(x.watcher, r);
        v["session"] = json!(x.n);
        v["type"] = json!("past-watch");
        out.push(v);
    }
    out
}

fn dump(
    path: &Path,
    records: &[Record],
    checked: &[usize],
    watched: &[Watcher],
    sessions: &[Session],
    injected: &[Injected],
) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let index: HashMap<usize, usize> = checked.iter().enumerate().map(|(n, &i)| (i, n)).collect();
    for (i, r) in records.iter().enumerate() {
        let kind = match r.kind {
            Kind::Kv => "kv",
            Kind::Serializable => "serializable",
            Kind::Final => "final",
            Kind::Expiry => "expiry",
            Kind::Unsent => "unsent",
        };
        let v = json!({
            "type": kind, "checked_index": index.get(&i),
            "client": r.op.client, "member": r.member, "call": r.op.call, "ret": r.op.ret,
            "input": input_json(&r.op.input), "output": output_json(&r.op.output),
            "error": r.error,
        });
        writeln!(f, "{v}")?;
    }
    for w in watched {
        for r in &w.records {
            writeln!(f, "{}", watch_json(w.id, r))?;
        }
    }
    for x in sessions {
        for v in session_json(x) {
            writeln!(f, "{v}")?;
        }
    }
    for x in injected {
        writeln!(
            f,
            "{}",
            json!({"type": "fault", "t": x.t, "fault": x.fault.name(), "member": x.member, "note": x.note})
        )?;
    }
    f.flush()
}

#[allow(clippy::too_many_arguments)] // one call site
fn summary(
    spec: &RunSpec,
    records: &[Record],
    watched: &[Watcher],
    sessions: &[Session],
    injected: &[Injected],
    violations: &[Violation],
    notes: &[String],
    final_rev: i64,
) {
    let kv: Vec<&Record> = records.iter().filter(|r| r.kind == Kind::Kv).collect();
    let acked = kv.iter().filter(|r| r.op.ret.is_some()).count();
    let maybe = kv
        .iter()
        .filter(|r| r.op.ret.is_none() && !matches!(r.op.input, Input::Get { .. }))
        .count();
    let failed_reads = kv
        .iter()
        .filter(|r| r.op.ret.is_none() && matches!(r.op.input, Input::Get { .. }))
        .count();
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &kv {
        let k = match r.op.input {
            Input::Put { .. } => "put",
            Input::Get { .. } => "get",
            Input::Delete { .. } => "delete",
            Input::Txn(_) => "txn",
            Input::PutLease { .. } => "put-lease",
            Input::LeaseGrant { .. } => "grant",
            Input::LeaseRevoke { .. } => "revoke",
            Input::LeaseExpire { .. } => "expiry",
            Input::LeaseKeepAlive { .. } => "keepalive",
            Input::LeaseTimeToLive { .. } => "timetolive",
        };
        *by_kind.entry(k).or_default() += 1;
    }
    let ser = records
        .iter()
        .filter(|r| r.kind == Kind::Serializable)
        .count();
    let unsent = records.iter().filter(|r| r.kind == Kind::Unsent).count();
    let mut faults: BTreeMap<Fault, usize> = BTreeMap::new();
    for x in injected {
        *faults.entry(x.fault).or_default() += 1;
    }
    let mut vkinds: BTreeMap<&str, usize> = BTreeMap::new();
    for v in violations {
        *vkinds.entry(v.kind).or_default() += 1;
    }
    let join = |m: Vec<String>| {
        if m.is_empty() {
            "none".to_owned()
        } else {
            m.join(" ")
        }
    };
    println!(
        "summary: {} member(s) {} s: ops {} ({}) acknowledged {acked} maybe-applied {maybe} failed-reads {failed_reads} serializable {ser} unsent {unsent} final-revision {final_rev} watch-responses {} past-watches {} ({} responses)",
        spec.members,
        spec.duration,
        kv.len(),
        by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        watched.iter().map(|w| w.records.len()).sum::<usize>(),
        sessions.len(),
        sessions.iter().map(|x| x.records.len()).sum::<usize>(),
    );
    println!(
        "summary: faults {}; checker: {}; violations {}",
        join(
            faults
                .iter()
                .map(|(k, n)| format!("{}={n}", k.name()))
                .collect()
        ),
        notes.join("; "),
        join(vkinds.iter().map(|(k, n)| format!("{k}={n}")).collect())
    );
}
