//! Maintenance on a real server: `actcd snapshot save` → `status` → `restore` into a new data
//! dir gives a new cluster with the same key space (equal HashKV at the same revision, old
//! revisions readable, leases kept); bad snapshot files and used data dirs are refused.

use std::path::Path;
use std::process::Output;

use etcd_client::{Client, GetOptions, PutOptions};

use crate::{Server, free_port};

fn actcd(args: &[&str]) -> Output {
    crate::actcd_command()
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run actcd")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A server on a data dir made by `restore`, advertising the peer URL the restore was given.
fn start_restored(dir: &Path, peer_port: u16) -> Server {
    let mut s = Server {
        child: None,
        dir: dir.to_path_buf(),
        port: free_port(),
        peer_port,
        extra: Vec::new(),
        env: Vec::new(),
        scheme: "http",
    };
    s.spawn();
    s
}

async fn hash_kv(c: &mut Client) -> (u32, i64, i64) {
    let r = c.hash_kv(0).await.unwrap();
    (
        r.hash(),
        r.header().unwrap().revision(),
        r.compact_version(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_save_restore_gives_the_same_key_space_in_a_new_cluster() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Server::start(&tmp.path().join("a"));
    let mut c = a.client().await;
    // Enough records of 300 B that the file's key table needs branch pages of more than a
    // hundred children (a size the bbolt writer once planned wrong).
    let pad = "x".repeat(300);
    for i in 0..1500 {
        c.put(format!("k/{i:04}"), format!("v{i}{pad}"), None)
            .await
            .unwrap();
    }
    for i in (0..1500).step_by(3) {
        c.delete(format!("k/{i:04}"), None).await.unwrap();
    }
    let lease = c.lease_grant(600, None).await.unwrap().id();
    c.put("leased", "x", Some(PutOptions::new().with_lease(lease)))
        .await
        .unwrap();
    let mid = c.put("k/0000", "again", None).await.unwrap();
    let mid = mid.header().unwrap().revision();
    c.compact(mid - 50, None).await.unwrap();
    c.put("last", "1", None).await.unwrap();
    let before = hash_kv(&mut c).await;
    let old_members = c.member_list().await.unwrap();
    let old_cluster = old_members.header().unwrap().cluster_id();

    let file = tmp.path().join("snap.db");
    let file_s = file.to_str().unwrap();
    let out = actcd(&["snapshot", "save", file_s, "--endpoints", &a.endpoint()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim(),
        format!("Snapshot saved at {file_s}")
    );
    assert!(!tmp.path().join("snap.db.part").exists());

    let out = actcd(&["snapshot", "status", file_s, "-w", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["revision"].as_i64(), Some(before.1), "{status}");
    assert!(status["totalKey"].as_u64().unwrap() > 1000, "{status}");

    // Restore into a new data dir, as a new one-member cluster, and start it.
    let peer = free_port();
    let dir = tmp.path().join("b");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let cluster = format!("default={peer_url}");
    let restore = |dir: &Path, file: &str| {
        actcd(&[
            "snapshot",
            "restore",
            file,
            "--data-dir",
            dir.to_str().unwrap(),
            "--initial-cluster",
            &cluster,
            "--initial-advertise-peer-urls",
            &peer_url,
            "--initial-cluster-token",
            "restored",
        ])
    };
    let out = restore(&dir, file_s);
    assert!(out.status.success(), "{}", text(&out.stderr));
    drop(a);
    let b = start_restored(&dir, peer);
    let mut c = b.client().await;
    assert_eq!(
        hash_kv(&mut c).await,
        before,
        "same hash, revision, compaction"
    );
    let keys = c
        .get(
            "k/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .unwrap();
    assert_eq!(keys.count(), 1001);
    let old = c
        .get("k/0000", Some(GetOptions::new().with_revision(mid - 1)))
        .await
        .unwrap();
    assert!(old.kvs().is_empty(), "deleted at that revision");
    let again = c.get("k/0000", None).await.unwrap();
    assert_eq!(again.kvs()[0].value(), b"again");
    let leases = c.leases().await.unwrap();
    assert!(leases.leases().iter().any(|l| l.id() == lease));
    let members = c.member_list().await.unwrap();
    assert_eq!(members.members().len(), 1);
    assert_ne!(members.header().unwrap().cluster_id(), old_cluster);
    assert_eq!(
        members.members()[0].peer_urls(),
        std::slice::from_ref(&peer_url)
    );
    // It is a working cluster: writes go on from the restored revision.
    let w = c.put("after", "restore", None).await.unwrap();
    assert_eq!(w.header().unwrap().revision(), before.1 + 1);

    // A used data dir is refused, and so are damaged files.
    let out = restore(&dir, file_s);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("not empty"),
        "{}",
        text(&out.stderr)
    );
    let mut data = std::fs::read(&file).unwrap();
    let n = data.len();
    data[n / 2] ^= 0xff;
    let bad = tmp.path().join("bad.db");
    std::fs::write(&bad, &data).unwrap();
    let out = restore(&tmp.path().join("c"), bad.to_str().unwrap());
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("expected sha256"),
        "{}",
        text(&out.stderr)
    );
    assert!(!tmp.path().join("c").join("member").exists());
    std::fs::write(&bad, &data[..n - 32]).unwrap();
    let out = restore(&tmp.path().join("d"), bad.to_str().unwrap());
    assert!(
        text(&out.stderr).contains("snapshot missing hash but --skip-hash-check=false"),
        "{}",
        text(&out.stderr)
    );
}

/// Deleting 90% of 100,000 keys and compacting frees pages; Defragment gives them back to the
/// file system, and the remaining keys, their history since the compaction and the revision
/// are unchanged. Defragment needs root when auth is on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defragment_shrinks_the_file_after_mass_deletes() {
    use etcd_client::{Compare, CompareOp, DeleteOptions, Txn, TxnOp};
    let tmp = tempfile::tempdir().unwrap();
    let srv = Server::start(tmp.path());
    let mut c = srv.client().await;
    let value = vec![b'v'; 100];
    for batch in 0..(100_000 / 125) {
        let ops: Vec<TxnOp> = (0..125)
            .map(|i| TxnOp::put(format!("k/{:06}", batch * 125 + i), value.clone(), None))
            .collect();
        let txn = Txn::new()
            .when([Compare::version("never", CompareOp::Equal, 0)])
            .and_then(ops);
        c.txn(txn).await.unwrap();
    }
    let d = c
        .delete(
            "k/000000",
            Some(DeleteOptions::new().with_range("k/090000")),
        )
        .await
        .unwrap();
    assert_eq!(d.deleted(), 90_000);
    let rev = d.header().unwrap().revision();
    c.compact(
        rev,
        Some(etcd_client::CompactionOptions::new().with_physical()),
    )
    .await
    .unwrap();
    let hash_before = c.hash_kv(0).await.unwrap().hash();
    let before = c.status().await.unwrap();
    c.defragment().await.unwrap();
    let after = c.status().await.unwrap();
    assert!(
        after.db_size() * 3 < before.db_size(),
        "{} -> {}",
        before.db_size(),
        after.db_size()
    );
    assert_eq!(after.header().unwrap().revision(), rev);
    assert_eq!(c.hash_kv(0).await.unwrap().hash(), hash_before);
    let left = c
        .get(
            "k/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .unwrap();
    assert_eq!(left.count(), 10_000);
    // Writes go on after it.
    let w = c.put("after", "defrag", None).await.unwrap();
    assert_eq!(w.header().unwrap().revision(), rev + 1);

    // With auth on, only root may defragment (etcd's admin check, whose refusal etcd 3.5.1
    // sends unconverted: code Unknown, the auth store's text).
    let mut alice = crate::auth_on_with_alice(&srv, &mut c, "k/").await;
    let e = alice.defragment().await.unwrap_err();
    assert_eq!(
        crate::code_and_message(e),
        (tonic::Code::Unknown, "auth: permission denied".to_string())
    );
    let mut root = Client::connect(
        [srv.endpoint()],
        Some(etcd_client::ConnectOptions::new().with_user("root", "rootpw")),
    )
    .await
    .unwrap();
    root.defragment().await.unwrap();
}

/// Defragmentation while clients write and read: every acknowledged put is in the history
/// afterwards (read at its own revision), and still there after a crash (SIGKILL) and restart;
/// reads never fail meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defragmenting_under_load_loses_no_acknowledged_write() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let tmp = tempfile::tempdir().unwrap();
    let mut srv = Server::start(tmp.path());
    let mut c = srv.client().await;
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for w in 0..4 {
        let mut wc = srv.client().await;
        let (stop, progress) = (stop.clone(), progress.clone());
        writers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("w{w}/{i:06}");
                if let Ok(r) = wc.put(key.clone(), vec![b'x'; 512], None).await {
                    acked.push((key, r.header().unwrap().revision()));
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                if i.is_multiple_of(3) {
                    let _ = wc.delete(format!("w{w}/{:06}", i / 2), None).await;
                }
                if i.is_multiple_of(10) {
                    wc.get(format!("w{w}/{i:06}"), None).await.unwrap();
                }
                i += 1;
            }
            acked
        }));
    }
    // Defragment again and again while the writers get 2,000 puts through.
    let mut defrags = 0;
    while defrags < 5 || progress.load(Ordering::Relaxed) < 2000 {
        c.defragment().await.unwrap();
        defrags += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    assert!(acked.len() >= 2000);
    async fn all_there(c: &mut etcd_client::Client, acked: &[(String, i64)]) {
        for (key, rev) in acked {
            let r = c
                .get(key.as_str(), Some(GetOptions::new().with_revision(*rev)))
                .await
                .unwrap();
            assert_eq!(
                r.kvs().first().map(|kv| kv.mod_revision()),
                Some(*rev),
                "{key} written at {rev}"
            );
        }
    }
    all_there(&mut c, &acked).await;
    let before = hash_kv(&mut c).await;
    srv.kill();
    srv.spawn();
    let mut c = srv.client().await;
    assert_eq!(
        hash_kv(&mut c).await,
        before,
        "the same key space after a crash"
    );
    all_there(&mut c, &acked).await;
}

/// etcd's disaster recovery: every member of a new three-member cluster restored from one
/// snapshot of a single server. They elect a leader from an empty log, hold the source's key
/// space (HashKV equal to the source's at its revision, on every member), and take writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_restored_from_one_snapshot_agrees_with_its_source() {
    use crate::cluster::{assert_same_hash, cluster, put_eventually};
    let tmp = tempfile::tempdir().unwrap();
    let src = Server::start(&tmp.path().join("src"));
    let mut c = src.client().await;
    for i in 0..100 {
        c.put(format!("r/{i:03}"), format!("v{i}"), None)
            .await
            .unwrap();
    }
    c.delete(
        "r/05",
        Some(etcd_client::DeleteOptions::new().with_prefix()),
    )
    .await
    .unwrap();
    let source = hash_kv(&mut c).await;
    let file = tmp.path().join("snap.db");
    let out = actcd(&[
        "snapshot",
        "save",
        file.to_str().unwrap(),
        "--endpoints",
        &src.endpoint(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    drop(src);

    let (mut members, initial) = cluster(&tmp.path().join("new"));
    for m in &members {
        let out = actcd(&[
            "snapshot",
            "restore",
            file.to_str().unwrap(),
            "--data-dir",
            m.dir.to_str().unwrap(),
            "--name",
            &m.name,
            "--initial-cluster",
            &initial,
            "--initial-advertise-peer-urls",
            &m.peer_url(),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    for m in &mut members {
        m.spawn(&initial);
    }
    let mut c = members[0].client().await;
    put_eventually(&mut c, "after").await;
    let refs: Vec<&crate::cluster::Member> = members.iter().collect();
    assert_same_hash(&refs, &mut c, "after").await;
    for m in &members {
        let mut mc = m.client().await;
        let at_source = mc.hash_kv(source.1).await.unwrap();
        assert_eq!(
            (at_source.hash(), at_source.compact_version()),
            (source.0, source.2),
            "{} holds the source's key space",
            m.name
        );
    }
    let listed = c.member_list().await.unwrap();
    assert_eq!(listed.members().len(), 3);
}
