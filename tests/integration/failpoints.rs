//! Crashes at the failpoints (`--features failpoints`; fail-rs, set by `FAILPOINTS` at start):
//! each member runs until its failpoint fires — `panic` (the process aborts, as a crash) or
//! `return` (the actor's real error path: a refused WAL write or backend commit is fatal, the
//! member exits 1) — and then, restarted without failpoints, must hold every write it
//! acknowledged before and serve.
//!
//! Run with `cargo test --features failpoints --test integration failpoints`.

#![cfg(feature = "failpoints")]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use etcd_client::{Client, CompactionOptions, GetOptions, Txn, TxnOp};

use super::cluster::{
    Member, assert_same_hash, cluster, leader_index, put_eventually, running_cluster,
};
use super::{Server, free_port};

/// A member of its own under `FAILPOINTS=failpoints`, its stderr kept in `log`. A later
/// `spawn` (the restart) runs it without failpoints.
fn start_with_failpoints(data: &Path, log: &Path, failpoints: &str) -> Server {
    let mut srv = Server {
        child: None,
        dir: data.to_path_buf(),
        port: free_port(),
        peer_port: free_port(),
        extra: Vec::new(),
        env: Vec::new(),
        scheme: "http",
    };
    let child = srv
        .command()
        .env("FAILPOINTS", failpoints)
        .stdout(Stdio::null())
        .stderr(File::create(log).unwrap())
        .spawn()
        .expect("start actcd with failpoints");
    srv.child = Some(child);
    srv
}

/// Waits for the member to exit (at most 30 s).
async fn exited(srv: &mut Server) -> ExitStatus {
    exited_child(&mut srv.child).await
}

async fn exited_child(child_slot: &mut Option<Child>) -> ExitStatus {
    let child = child_slot.as_mut().expect("running");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the member kept running");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    *child_slot = None;
    status
}

/// The member died of `name` with `action`: aborted for `panic`, exit 1 (fatal) for `return`.
fn assert_died_of(status: ExitStatus, log: &Path, name: &str, action: &str) {
    let log = std::fs::read_to_string(log).unwrap();
    assert!(!status.success(), "{name}={action}: exited 0; log:\n{log}");
    if action == "return" {
        assert_eq!(status.code(), Some(1), "{name}=return: exit 1; log:\n{log}");
        assert!(
            log.contains(&format!("injected by failpoint {name}"))
                && log.contains("fatal error; shutting"),
            "{name}=return: the injected error was fatal; log:\n{log}"
        );
    } else {
        assert_eq!(status.code(), None, "{name}=panic: aborted; log:\n{log}");
        assert!(
            log.contains(&format!("failpoint {name} panic")),
            "{name}=panic: the failpoint panicked; log:\n{log}"
        );
    }
}

/// Restarts the member without failpoints and checks that every acknowledged `k/…` put is
/// there with its value, and that the member takes writes.
async fn assert_recovered(srv: &mut Server, acked: &[(String, String)]) -> Client {
    srv.spawn();
    let mut c = srv.client().await;
    let got = c
        .get("k/", Some(GetOptions::new().with_prefix()))
        .await
        .unwrap();
    let got: std::collections::HashMap<&[u8], &[u8]> =
        got.kvs().iter().map(|kv| (kv.key(), kv.value())).collect();
    for (k, v) in acked {
        assert_eq!(
            got.get(k.as_bytes()).copied(),
            Some(v.as_bytes()),
            "acknowledged write {k} lost"
        );
    }
    c.put("after", "v", None).await.unwrap();
    assert_eq!(c.get("after", None).await.unwrap().kvs()[0].value(), b"v");
    c
}

/// Puts `k/00000`, `k/00001`, … until one fails (the member died), each given 10 s; returns
/// what was acknowledged.
async fn put_until_failure(c: &mut Client, name: &str) -> Vec<(String, String)> {
    let mut acked = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0.. {
        assert!(Instant::now() < deadline, "{name} never fired");
        let (k, v) = (format!("k/{i:05}"), format!("v{i}"));
        match tokio::time::timeout(Duration::from_secs(10), c.put(k.as_str(), v.as_str(), None))
            .await
        {
            Ok(Ok(_)) => acked.push((k, v)),
            _ => break,
        }
    }
    acked
}

/// The scenario for a failpoint on the write path: `skip` evaluations pass, the next fires.
async fn crash_on_writes(name: &str, skip: u32) {
    for action in ["panic", "return"] {
        let dir = tempfile::tempdir().unwrap();
        let (data, log) = (dir.path().join("data"), dir.path().join("actcd.log"));
        let mut srv = start_with_failpoints(&data, &log, &format!("{name}={skip}*off->{action}"));
        let mut c = srv.client().await;
        let acked = put_until_failure(&mut c, name).await;
        assert!(!acked.is_empty(), "{name}={action}: no write acknowledged");
        let status = exited(&mut srv).await;
        assert_died_of(status, &log, name, action);
        assert_recovered(&mut srv, &acked).await;
    }
}

#[tokio::test]
async fn wal_before_append() {
    crash_on_writes("wal_before_append", 20).await;
}

#[tokio::test]
async fn wal_before_hard_state() {
    crash_on_writes("wal_before_hard_state", 20).await;
}

#[tokio::test]
async fn wal_after_append_before_fsync() {
    crash_on_writes("wal_after_append_before_fsync", 20).await;
}

#[tokio::test]
async fn wal_after_fsync() {
    crash_on_writes("wal_after_fsync", 20).await;
}

/// Commits come every 100 ms while puts run: the first few are start-up's and the puts'.
#[tokio::test]
async fn backend_before_commit() {
    crash_on_writes("backend_before_commit", 4).await;
}

#[tokio::test]
async fn backend_after_commit() {
    crash_on_writes("backend_after_commit", 4).await;
}

async fn put_keys(c: &mut Client, n: usize) -> Vec<(String, String)> {
    let mut acked = Vec::new();
    for i in 0..n {
        let (k, v) = (format!("k/{i:05}"), format!("v{i}"));
        c.put(k.as_str(), v.as_str(), None).await.unwrap();
        acked.push((k, v));
    }
    acked
}

/// Directories under `dir`, at any depth, whose name starts with `prefix`.
fn find_dirs(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(prefix))
            {
                found.push(path.clone());
            }
            found.extend(find_dirs(&path, prefix));
        }
    }
    found
}

/// Puts `k/w…` keys from a client of its own until `stop` is set or a put fails; returns what
/// was acknowledged.
fn keep_writing(
    mut c: Client,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<Vec<(String, String)>> {
    tokio::spawn(async move {
        let mut acked = Vec::new();
        for i in 0.. {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            let (k, v) = (format!("k/w{i:06}"), format!("w{i}"));
            let put = c.put(k.as_str(), v.as_str(), None);
            match tokio::time::timeout(Duration::from_secs(5), put).await {
                Ok(Ok(_)) => acked.push((k, v)),
                _ => break,
            }
        }
        acked
    })
}

/// A defragmentation that meets failpoint `name` while another client writes: the writes go on
/// during it, and every one acknowledged survives.
/// - `panic`: the member dies; a restart deletes the copy's `defrag-N` directory and serves
///   whichever file the crash left as `data.mdb` (the old one before the rename, the copy
///   after), with every acknowledged write.
/// - `return`: not fatal; the defragmentation answers the error and the member writes on (with
///   the old file before the rename, the copy after it: `defrag_after_swap` completes the swap).
async fn crash_during_defrag(name: &str) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    for action in ["panic", "return"] {
        let dir = tempfile::tempdir().unwrap();
        let (data, log) = (dir.path().join("data"), dir.path().join("actcd.log"));
        let mut srv = start_with_failpoints(&data, &log, &format!("{name}={action}"));
        let mut c = srv.client().await;
        let mut acked = put_keys(&mut c, 300).await;
        // Rewritten and compacted: free pages for the copy to leave out.
        acked = put_keys(&mut c, 300)
            .await
            .into_iter()
            .chain(acked)
            .collect();
        let rev = c
            .get("k/", None)
            .await
            .unwrap()
            .header()
            .unwrap()
            .revision();
        c.compact(rev, Some(CompactionOptions::new().with_physical()))
            .await
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let writer = keep_writing(c.clone(), stop.clone());
        // Some writes before, during and after the defragmentation's start.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let answer = c.defragment().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.store(true, Ordering::Relaxed);
        // The writer ends at its next put: refused by a dead member, or after `stop`.
        let written = writer.await.unwrap();
        assert!(
            !written.is_empty(),
            "{name}: no write acknowledged meanwhile"
        );
        acked.extend(written);
        if action == "panic" {
            assert!(answer.is_err(), "{name}: the member died defragmenting");
            let status = exited(&mut srv).await;
            assert_died_of(status, &log, name, "panic");
            assert_eq!(
                find_dirs(&data, "defrag-").len(),
                1,
                "{name}: the copy's directory"
            );
            let mut c = assert_recovered(&mut srv, &acked).await;
            assert!(
                find_dirs(&data, "defrag-").is_empty(),
                "{name}: deleted at start"
            );
            c.defragment().await.unwrap();
        } else {
            let err = answer.unwrap_err().to_string();
            assert!(
                err.contains(&format!("injected by failpoint {name}")),
                "{err}"
            );
            assert!(
                srv.child.as_mut().unwrap().try_wait().unwrap().is_none(),
                "{name}: not fatal"
            );
            let kept = usize::from(name == "defrag_after_swap");
            assert_eq!(
                find_dirs(&data, "defrag-").len(),
                kept,
                "{name}: the copy deleted, or in use with its lock file"
            );
            c.put("after", "v", None).await.unwrap();
            srv.stop();
            assert_recovered(&mut srv, &acked).await;
        }
    }
}

#[tokio::test]
async fn defrag_after_copy() {
    crash_during_defrag("defrag_after_copy").await;
}

#[tokio::test]
async fn defrag_before_swap() {
    crash_during_defrag("defrag_before_swap").await;
}

#[tokio::test]
async fn defrag_after_swap() {
    crash_during_defrag("defrag_after_swap").await;
}

/// Rounds of 100 keys rewritten, then a compaction at the last revision: 2,400 records to
/// delete, more than one slice (1,000), so the next slice — the next batch's or the 100 ms
/// flush's — meets the failpoint. A restart finishes the compaction.
#[tokio::test]
async fn compaction_between_slices() {
    const KEYS: usize = 100;
    const ROUNDS: usize = 25;
    let name = "compaction_between_slices";
    for action in ["panic", "return"] {
        let dir = tempfile::tempdir().unwrap();
        let (data, log) = (dir.path().join("data"), dir.path().join("actcd.log"));
        let mut srv = start_with_failpoints(&data, &log, &format!("{name}={action}"));
        let mut c = srv.client().await;
        let mut first_rev = 0;
        let mut acked = Vec::new();
        for round in 0..ROUNDS {
            let kvs: Vec<(String, String)> = (0..KEYS)
                .map(|j| (format!("k/{j:03}"), format!("r{round}")))
                .collect();
            let ops: Vec<TxnOp> = kvs
                .iter()
                .map(|(k, v)| TxnOp::put(k.as_str(), v.as_str(), None))
                .collect();
            let r = c.txn(Txn::new().and_then(ops)).await.unwrap();
            if round == 0 {
                first_rev = r.header().unwrap().revision();
            }
            acked = kvs;
        }
        let rev = c
            .get("k/000", None)
            .await
            .unwrap()
            .header()
            .unwrap()
            .revision();
        // Acknowledged after the first slice, before the next; the member may die before.
        let compacted = c.compact(rev, Some(CompactionOptions::new())).await.is_ok();
        let status = exited(&mut srv).await;
        assert_died_of(status, &log, name, action);
        let mut c = assert_recovered(&mut srv, &acked).await;
        if compacted {
            let old = c
                .get("k/000", Some(GetOptions::new().with_revision(first_rev)))
                .await;
            assert!(
                old.unwrap_err().to_string().contains("compacted"),
                "{name}={action}: the compaction survived the crash"
            );
        }
    }
}

/// Starts `m` as `cluster::Member::spawn_with` does, under `FAILPOINTS=failpoints`, its
/// stderr kept in `log`.
fn spawn_member_with_failpoints(
    m: &mut Member,
    initial_cluster: &str,
    extra: &[&str],
    log: &Path,
    failpoints: &str,
) {
    let child = m
        .command(initial_cluster, extra)
        .env("FAILPOINTS", failpoints)
        .stdout(Stdio::null())
        .stderr(File::create(log).unwrap())
        .spawn()
        .expect("start actcd with failpoints");
    m.child = Some(child);
}

/// Three members; one is down while the others write past their snapshot, so it must be sent
/// one when it comes back. It comes back with the failpoint set, dies installing it (`panic`,
/// then `return`: fatal, exit 1), and started without it catches up to the same key space.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_before_install() {
    let name = "snapshot_before_install";
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--snapshot-count", "20", "--snapshot-catchup-entries", "5"];
    let (mut members, initial, leader) = running_cluster(dir.path(), &flags).await;
    let behind = (leader + 1) % 3;
    let mut c = members[leader].client().await;
    put_eventually(&mut c, "before").await;
    members[behind].kill();
    let mut acked = Vec::new();
    for i in 0..120 {
        let (k, v) = (format!("k/{i:05}"), format!("v{i}"));
        c.put(k.as_str(), v.as_str(), None).await.unwrap();
        acked.push((k, v));
    }
    for action in ["panic", "return"] {
        let log = dir.path().join(format!("behind-{action}.log"));
        let failpoints = format!("{name}={action}");
        spawn_member_with_failpoints(&mut members[behind], &initial, &flags, &log, &failpoints);
        let status = exited_child(&mut members[behind].child).await;
        assert_died_of(status, &log, name, action);
    }
    members[behind].spawn_with(&initial, &flags);
    let all: Vec<&Member> = members.iter().collect();
    assert_same_hash(&all, &mut c, "k/00119").await;
    let mut bc = members[behind].client().await;
    let got = bc
        .get(
            "k/",
            Some(GetOptions::new().with_prefix().with_serializable()),
        )
        .await
        .unwrap();
    let got: Vec<(String, String)> = got
        .kvs()
        .iter()
        .map(|kv| {
            (
                kv.key_str().unwrap().to_string(),
                kv.value_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        got, acked,
        "every acknowledged write on the member that was behind"
    );
    put_eventually(&mut bc, "after").await;
}

/// Three members started with the failpoint; one is down while the others write past their
/// snapshot, and comes back without it: the leader dies sending it a snapshot. The third is
/// killed too (it would lead and die the same way), both come back without failpoints, and
/// the member that was behind catches up to the same key space.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_before_send() {
    let name = "snapshot_before_send";
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--snapshot-count", "20", "--snapshot-catchup-entries", "5"];
    let (mut members, initial) = cluster(dir.path());
    for (i, m) in members.iter_mut().enumerate() {
        let log = dir.path().join(format!("m{i}.log"));
        spawn_member_with_failpoints(m, &initial, &flags, &log, &format!("{name}=panic"));
    }
    let leader = leader_index(&members, &[0, 1, 2]).await;
    let (behind, third) = ((leader + 1) % 3, (leader + 2) % 3);
    let mut c = members[leader].client().await;
    put_eventually(&mut c, "before").await;
    members[behind].kill();
    let mut acked = Vec::new();
    for i in 0..120 {
        let (k, v) = (format!("k/{i:05}"), format!("v{i}"));
        c.put(k.as_str(), v.as_str(), None).await.unwrap();
        acked.push((k, v));
    }
    members[behind].spawn_with(&initial, &flags);
    let status = exited_child(&mut members[leader].child).await;
    let log = dir.path().join(format!("m{leader}.log"));
    assert_died_of(status, &log, name, "panic");
    members[third].kill();
    members[leader].spawn_with(&initial, &flags);
    members[third].spawn_with(&initial, &flags);
    let mut c = members[third].client().await;
    put_eventually(&mut c, "after").await;
    let all: Vec<&Member> = members.iter().collect();
    assert_same_hash(&all, &mut c, "after").await;
    let mut bc = members[behind].client().await;
    let got = bc
        .get(
            "k/",
            Some(GetOptions::new().with_prefix().with_serializable()),
        )
        .await
        .unwrap();
    assert_eq!(got.kvs().len(), acked.len());
    for (kv, (k, v)) in got.kvs().iter().zip(&acked) {
        assert_eq!((kv.key(), kv.value()), (k.as_bytes(), v.as_bytes()));
    }
}
