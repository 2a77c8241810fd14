//! Corruption checks between members (etcd's `--experimental-initial-corrupt-check`,
//! `--experimental-corrupt-check-time`), on by default here: a member whose HashKV disagrees
//! with its peers' is refused at start-up, or, running, has the leader raise CORRUPT, after
//! which the cluster answers `etcdserver: corrupt cluster` until the alarm is disarmed.
//!
//! The disagreeing member is made with `ACTCD_DEBUG_CORRUPT_HASH=1`, which skews every hash it
//! reports (its data stay intact, so the test needs no knowledge of the file format).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use etcd_client::{AlarmAction, AlarmOptions, AlarmType, Client, GetOptions};

use crate::cluster::{Member, put_eventually, running_cluster};
use crate::code_and_message;

/// Starts `m` with `extra` flags and `ACTCD_DEBUG_CORRUPT_HASH=1`, its stderr captured.
fn spawn_skewed(m: &mut Member, initial: &str, extra: &[&str]) -> std::process::Child {
    spawn_captured(m, initial, extra, true)
}

/// Starts `m` with `extra` flags, its stderr captured; `skewed`: with
/// `ACTCD_DEBUG_CORRUPT_HASH=1`.
fn spawn_captured(
    m: &mut Member,
    initial: &str,
    extra: &[&str],
    skewed: bool,
) -> std::process::Child {
    m.command(initial, extra)
        .env("ACTCD_DEBUG_CORRUPT_HASH", if skewed { "1" } else { "0" })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start actcd")
}

/// Waits for `child` to exit and returns its stderr; fails the test if it exits cleanly or
/// is still running after 30 s (it is killed then).
async fn refused_start(mut child: std::process::Child) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        matches!(status, Some(s) if !s.success()),
        "a member that disagrees with its peers started: {err}"
    );
    err
}

/// The raised alarms, as (member id, type).
async fn alarms(c: &mut Client) -> Vec<(u64, AlarmType)> {
    c.alarm(AlarmAction::Get, AlarmType::None, None)
        .await
        .unwrap()
        .alarms()
        .iter()
        .map(|a| (a.member_id(), a.alarm()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_disagrees_is_refused_at_start_or_raises_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    // A short periodic check; the initial check is on by default.
    let check = ["--experimental-corrupt-check-time=300ms"];
    let (mut members, initial, leader) = running_cluster(dir.path(), &check).await;
    let f = (leader + 1) % 3;
    let mut lc = members[leader].client().await;
    for i in 0..20 {
        put_eventually(&mut lc, &format!("k/{i:02}")).await;
    }
    let ids: Vec<u64> = lc
        .member_list()
        .await
        .unwrap()
        .members()
        .iter()
        .map(|m| m.id())
        .collect();
    let f_id = {
        let mut fc = members[f].client().await;
        fc.status().await.unwrap().header().unwrap().member_id()
    };
    assert!(ids.contains(&f_id));
    // Every member agrees: no alarm after a few periodic checks.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(alarms(&mut lc).await, vec![], "no alarm while all agree");

    // (a) The follower comes back disagreeing: the initial check refuses to start it, naming
    // the peers that disagree.
    members[f].stop();
    let child = spawn_skewed(&mut members[f], &initial, &check);
    let err = refused_start(child).await;
    assert!(
        err.contains(&format!("{f_id:x} found data inconsistency with peers")),
        "{err}"
    );
    let others: Vec<u64> = ids.iter().copied().filter(|&id| id != f_id).collect();
    assert!(
        others
            .iter()
            .any(|id| err.contains(&format!("peer {id:x}"))),
        "the error names a peer: {err}"
    );

    // (b) Started with the initial check off, it runs; the leader's periodic check finds it
    // and raises CORRUPT for it.
    let mut child = spawn_skewed(
        &mut members[f],
        &initial,
        &[check[0], "--experimental-initial-corrupt-check=false"],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if alarms(&mut lc).await.contains(&(f_id, AlarmType::Corrupt)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "CORRUPT never raised for {f_id:x}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Writes and reads now fail as etcd's corrupt applier fails them, on every member.
    for m in members.iter().filter(|m| m.name != members[f].name) {
        let mut c = m.client().await;
        let (code, msg) = code_and_message(c.put("k/after", "v", None).await.unwrap_err());
        assert_eq!(
            (code, msg.as_str()),
            (tonic::Code::DataLoss, "etcdserver: corrupt cluster"),
            "put on {}",
            m.name
        );
        for opts in [None, Some(GetOptions::new().with_serializable())] {
            let (code, msg) = code_and_message(c.get("k/00", opts).await.unwrap_err());
            assert_eq!(
                (code, msg.as_str()),
                (tonic::Code::DataLoss, "etcdserver: corrupt cluster"),
                "get on {}",
                m.name
            );
        }
        let (code, _) = code_and_message(c.lease_grant(10, None).await.unwrap_err());
        assert_eq!(code, tonic::Code::DataLoss, "lease grant on {}", m.name);
    }
    etcdctl_lists_corrupt(&members[leader].endpoint(), f_id);

    // The member comes back intact (its own initial check passes); disarming lets writes
    // through again, and the periodic check finds nothing more.
    let _ = child.kill();
    let _ = child.wait();
    members[f].spawn_with(&initial, &check);
    let mut fc = members[f].client().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while fc.status().await.is_err() {
        assert!(Instant::now() < deadline, "the intact member never served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut disarm = AlarmOptions::new();
    disarm.with_member(f_id);
    lc.alarm(AlarmAction::Deactivate, AlarmType::Corrupt, Some(disarm))
        .await
        .unwrap();
    assert_eq!(alarms(&mut lc).await, vec![]);
    put_eventually(&mut lc, "k/after").await;
    let got = lc.get("k/after", None).await.unwrap();
    assert_eq!(got.kvs().len(), 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(alarms(&mut lc).await, vec![], "no alarm once all agree");
}

/// `etcdctl alarm list` shows the alarm as etcd's does, if etcdctl is installed (`$ETCDCTL`,
/// else `etcdctl` on PATH).
fn etcdctl_lists_corrupt(endpoint: &str, member: u64) {
    let bin = std::env::var("ETCDCTL").unwrap_or_else(|_| "etcdctl".to_string());
    let out = Command::new(&bin)
        .args(["--endpoints", endpoint, "alarm", "list"])
        .env("ETCDCTL_API", "3")
        .output();
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        eprintln!("note: {bin} not found; skipping the etcdctl part of the corruption test");
        return;
    };
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("memberID:{member} alarm:CORRUPT \n")
    );
}

/// etcd 3.5's compact hash check alone (the periodic check off): members agree on the hash
/// each compaction takes, so compacting raises nothing; a member whose compaction hash differs
/// has CORRUPT raised for it by the leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compact_hash_check_finds_a_member_whose_compaction_hash_differs() {
    let dir = tempfile::tempdir().unwrap();
    let check = [
        "--experimental-corrupt-check-time=0",
        "--experimental-compact-hash-check-time=300ms",
    ];
    let (mut members, initial, leader) = running_cluster(dir.path(), &check).await;
    let f = (leader + 1) % 3;
    let mut lc = members[leader].client().await;
    for i in 0..10 {
        put_eventually(&mut lc, &format!("k/{i:02}")).await;
    }
    let f_id = {
        let mut fc = members[f].client().await;
        fc.status().await.unwrap().header().unwrap().member_id()
    };
    // Every member compacts at one revision and takes the same hash there.
    let rev = lc
        .put("k/00", "again", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    lc.compact(rev - 5, None).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(alarms(&mut lc).await, vec![], "no alarm while all agree");

    // The follower comes back reporting skewed hashes (its initial check off); after the next
    // compaction the leader's compact hash check finds it.
    members[f].stop();
    let mut child = spawn_skewed(
        &mut members[f],
        &initial,
        &[
            check[0],
            check[1],
            "--experimental-initial-corrupt-check=false",
        ],
    );
    let mut fc = members[f].client().await;
    for i in 10..20 {
        put_eventually(&mut lc, &format!("k/{i:02}")).await;
    }
    let rev = lc
        .get("k/19", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    // The follower has applied up to the compaction's revision before it compacts there.
    let deadline = Instant::now() + Duration::from_secs(30);
    while fc
        .get("k/19", Some(GetOptions::new().with_serializable()))
        .await
        .map_or(true, |r| r.kvs().is_empty())
    {
        assert!(Instant::now() < deadline, "the follower never caught up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    lc.compact(rev, None).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if alarms(&mut lc).await.contains(&(f_id, AlarmType::Corrupt)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "CORRUPT never raised for {f_id:x}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (code, msg) = code_and_message(lc.put("k/after", "v", None).await.unwrap_err());
    assert_eq!(
        (code, msg.as_str()),
        (tonic::Code::DataLoss, "etcdserver: corrupt cluster")
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// Real divergence, not a knob: a stopped follower's stored value for one key is rewritten
/// through the backend engine, as a well-formed record (its checksum recomputed, so it reads
/// back without error). Its data now differ from its peers' at the same revision: the initial
/// check refuses to start it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_stored_value_was_rewritten_is_refused_at_start() {
    use actcd_backend::{BackendOptions, LmdbEngine};
    use actcd_types::key_record;
    use actcd_types::storage::{KvEngine, Table};

    let dir = tempfile::tempdir().unwrap();
    let (mut members, initial, leader) = running_cluster(dir.path(), &[]).await;
    let f = (leader + 1) % 3;
    let mut lc = members[leader].client().await;
    for i in 0..10 {
        put_eventually(&mut lc, &format!("k/{i:02}")).await;
    }
    let mut fc = members[f].client().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while fc
        .get("k/09", Some(GetOptions::new().with_serializable()))
        .await
        .map_or(true, |r| r.kvs().is_empty())
    {
        assert!(Instant::now() < deadline, "the follower never caught up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let f_id = fc.status().await.unwrap().header().unwrap().member_id();
    members[f].stop();

    let engine = LmdbEngine::open(
        &members[f].dir.join("member/snap"),
        BackendOptions {
            map_size: BackendOptions::DEFAULT_MAP_SIZE,
            max_readers: BackendOptions::DEFAULT_MAX_READERS,
            durability: Default::default(),
        },
    )
    .unwrap();
    let mut found = None;
    engine
        .read()
        .unwrap()
        .scan(Table::Key, &[], None, &mut |k, v| {
            if let Ok(kv) = key_record::decode(k, v)
                && kv.key == b"k/05"
            {
                found = Some((k.to_vec(), kv));
            }
            true
        })
        .unwrap();
    let (rev_key, mut kv) = found.expect("the record of k/05");
    kv.value = b"forged".to_vec();
    let mut w = engine.write().unwrap();
    w.put(Table::Key, &rev_key, &key_record::encode(&rev_key, &kv))
        .unwrap();
    w.commit().unwrap();
    engine.sync().unwrap();
    drop(engine);

    let child = spawn_captured(&mut members[f], &initial, &[], false);
    let err = refused_start(child).await;
    assert!(
        err.contains(&format!("{f_id:x} found data inconsistency with peers")),
        "{err}"
    );
}
