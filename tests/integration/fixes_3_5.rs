//! etcd 3.5.2 – 3.5.34's fixes that actcd adopted, against a real member: each test is the
//! row of `docs/etcd-changes/3.5.md` that names it.

use std::time::Duration;

use etcd_client::{Client, ConnectOptions, Permission, WatchOptions, WatchResponse, WatchStream};

use crate::Server;

/// The next response on `w` within 10 s.
async fn next(w: &mut WatchStream) -> WatchResponse {
    tokio::time::timeout(Duration::from_secs(10), w.message())
        .await
        .expect("a watch response within 10 s")
        .expect("watch stream healthy")
        .expect("watch stream open")
}

/// Whatever `w` says within `wait` (nothing is what some tests want).
async fn quiet(w: &mut WatchStream, wait: Duration) -> Vec<WatchResponse> {
    let mut out = Vec::new();
    while let Ok(r) = tokio::time::timeout(wait, w.message()).await {
        out.push(r.unwrap().expect("watch stream open"));
    }
    out
}

async fn put(c: &mut Client, k: &str) -> i64 {
    c.put(k, "v", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision()
}

/// etcd 3.5.24 (#20709): a negative start revision is refused as compacted, watch id -1, and
/// takes no id (3.5.1 read it as "from the first revision").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_negative_start_revision_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let rev = put(&mut c, "k").await;
    let opts = WatchOptions::new().with_start_revision(-1).with_watch_id(5);
    let mut w = c.watch("k", Some(opts)).await.unwrap();
    let r = next(&mut w).await;
    assert!(r.created() && r.canceled(), "{r:?}");
    assert_eq!(r.watch_id(), -1);
    assert_eq!(
        r.cancel_reason(),
        "etcdserver: mvcc: required revision has been compacted"
    );
    assert_eq!(r.header().unwrap().revision(), rev);
    // Id 5 was never taken.
    w.watch("k", Some(WatchOptions::new().with_watch_id(5)))
        .await
        .unwrap();
    let r = next(&mut w).await;
    assert!(r.created() && !r.canceled() && r.watch_id() == 5, "{r:?}");
}

/// etcd 3.5.6 (#14547, #14563): a watch refused by auth is answered with watch id -1 (the
/// client's id, 0 when it lets the server choose, closed a live watch 0 on the client) and a
/// reason naming the failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_watch_is_answered_with_watch_id_minus_one() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    c.user_add("root", "rootpw", None).await.unwrap();
    c.user_grant_role("root", "root").await.unwrap();
    c.role_add("a-reader").await.unwrap();
    c.role_grant_permission("a-reader", Permission::read("a"))
        .await
        .unwrap();
    c.user_add("alice", "alicepw", None).await.unwrap();
    c.user_grant_role("alice", "a-reader").await.unwrap();
    c.auth_enable().await.unwrap();

    let opts = ConnectOptions::new().with_user("alice", "alicepw");
    let mut alice = Client::connect([srv.endpoint()], Some(opts)).await.unwrap();
    let mut w = alice.watch("a", None).await.unwrap();
    let r = next(&mut w).await;
    assert!(r.created() && !r.canceled() && r.watch_id() == 0, "{r:?}");
    w.watch("b", None).await.unwrap();
    let r = next(&mut w).await;
    assert!(r.created() && r.canceled(), "{r:?}");
    assert_eq!(r.watch_id(), -1, "never the id the client asked for (0)");
    assert_eq!(
        r.cancel_reason(),
        "rpc error: code = PermissionDenied desc = etcdserver: permission denied"
    );
    // Watch 0 lives on.
    let opts = ConnectOptions::new().with_user("root", "rootpw");
    let mut root = Client::connect([srv.endpoint()], Some(opts)).await.unwrap();
    let rev = put(&mut root, "a").await;
    let r = next(&mut w).await;
    assert_eq!((r.watch_id(), r.events().len()), (0, 1));
    assert_eq!(r.events()[0].kv().unwrap().mod_revision(), rev);

    // Without a token the reason says the user name is empty.
    let mut anon = Client::connect([srv.endpoint()], None).await.unwrap();
    let mut w = anon.watch("a", None).await.unwrap();
    let r = next(&mut w).await;
    assert!(r.created() && r.canceled() && r.watch_id() == -1, "{r:?}");
    assert_eq!(
        r.cancel_reason(),
        "rpc error: code = InvalidArgument desc = etcdserver: user name is empty"
    );
}

/// etcd 3.5.22 (#20290, issue #20221): a watch on a future revision hears no progress, asked
/// for or periodic, naming a revision below its start; once the store reaches the start the
/// waiting request is answered, and events follow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_on_a_future_revision_hears_no_revision_below_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start_with(
        dir.path(),
        &["--experimental-watch-progress-notify-interval", "100ms"],
    );
    let mut c = srv.client().await;
    let now = put(&mut c, "other").await;
    let start = now + 3;
    let opts = WatchOptions::new()
        .with_start_revision(start)
        .with_progress_notify();
    let mut w = c.watch("k", Some(opts)).await.unwrap();
    let r = next(&mut w).await;
    assert!(r.created() && r.watch_id() == 0, "{r:?}");
    w.request_progress().await.unwrap();
    put(&mut c, "other").await;
    put(&mut c, "k").await; // below the start: never sent
    let heard = quiet(&mut w, Duration::from_millis(600)).await;
    assert!(
        heard.is_empty(),
        "below revision {start}, nothing: {heard:?}"
    );

    assert_eq!(put(&mut c, "other").await, start);
    let r = next(&mut w).await;
    assert_eq!((r.watch_id(), r.header().unwrap().revision()), (-1, start));
    assert!(r.events().is_empty());
    let r = next(&mut w).await;
    assert_eq!((r.watch_id(), r.header().unwrap().revision()), (0, start));
    assert!(r.events().is_empty(), "the periodic notification, now due");
    let rev = put(&mut c, "k").await;
    let r = loop {
        let r = next(&mut w).await;
        if !r.events().is_empty() {
            break r;
        }
        assert!(r.header().unwrap().revision() >= start, "{r:?}");
    };
    assert_eq!(r.events()[0].kv().unwrap().mod_revision(), rev);
}

/// etcd 3.5.8 (#15695, issue #15220) and 3.5.13 (#17566), what Kubernetes' consistent reads
/// from its watch cache rely on: a progress request is answered with a revision only once
/// every watcher of the stream has been sent every event up to it, including a watcher that
/// catches up through revisions none of which it matches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_requests_answer_at_the_revision_every_watcher_reached() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let mut last = 0;
    for i in 0..1500 {
        last = put(&mut c, &format!("p/{:04}", i % 50)).await;
    }
    // From the first revision: the stream is behind by 1500 events when the request arrives.
    let opts = WatchOptions::new().with_prefix().with_start_revision(1);
    let mut w = c.watch("p/", Some(opts)).await.unwrap();
    // And a watcher that catches up through all of them without matching one.
    let opts = WatchOptions::new().with_start_revision(1);
    w.watch("nothing-here", Some(opts)).await.unwrap();
    w.request_progress().await.unwrap();
    let mut seen = 0;
    let mut top = 0;
    let progress = loop {
        let r = next(&mut w).await;
        if r.watch_id() == -1 {
            break r.header().unwrap().revision();
        }
        for e in r.events() {
            top = top.max(e.kv().unwrap().mod_revision());
            seen += 1;
        }
    };
    assert!(progress >= last, "{progress} < {last}");
    assert_eq!(
        (seen, top),
        (1500, last),
        "every event up to the reported revision came first"
    );
}

/// etcd 3.5.8 (#15619): RoleGrantPermission refuses a range that holds no key; 3.5.1 stored
/// it. Prefixes and from-key ranges still go in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_permission_range_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    c.role_add("r").await.unwrap();
    for (what, perm) in [
        ("end below key", Permission::read("b").with_range_end("a")),
        ("end at key", Permission::read("a").with_range_end("a")),
        ("no key", Permission::read("")),
    ] {
        match c.role_grant_permission("r", perm).await {
            Err(etcd_client::Error::GRpcStatus(s)) => {
                assert_eq!(format!("{:?}", s.code()), "InvalidArgument", "{what}");
                assert_eq!(s.message(), "etcdserver: invalid auth management", "{what}");
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    for perm in [
        Permission::read("a"),
        Permission::read("a").with_range_end("b"),
        Permission::read("p/").with_prefix(),
        Permission::read("f").with_from_key(),
    ] {
        c.role_grant_permission("r", perm).await.unwrap();
    }
    let role = c.role_get("r").await.unwrap();
    assert_eq!(role.permissions().len(), 4);
}

/// The events of a watch of `key` from `rev`: its first response after the created one.
async fn watch_from(c: &mut Client, key: &str, rev: i64) -> WatchResponse {
    let mut w = c
        .watch(key, Some(WatchOptions::new().with_start_revision(rev)))
        .await
        .unwrap();
    let r = next(&mut w).await;
    if r.created() && r.events().is_empty() && !r.canceled() {
        return next(&mut w).await;
    }
    r
}

/// etcd 3.5.16 and 3.5.18 (#18474, #19249): compacting at a delete's revision keeps its
/// DELETE, so a watch from the compaction revision gets it, also after a restart (the key
/// index is rebuilt from the lone tombstone). 3.5.1 deleted the tombstone: nothing came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_the_compaction_revision_gets_the_delete_there() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server::start(dir.path());
    let mut c = srv.client().await;
    assert_eq!(put(&mut c, "a").await, 2);
    let del = c.delete("a", None).await.unwrap();
    assert_eq!(del.header().unwrap().revision(), 3);
    c.compact(
        3,
        Some(etcd_client::CompactionOptions::new().with_physical()),
    )
    .await
    .unwrap();
    let delete_at_3 = |r: &WatchResponse| {
        let e: Vec<_> = r
            .events()
            .iter()
            .map(|e| {
                let kv = e.kv().unwrap();
                (e.event_type(), kv.key().to_vec(), kv.mod_revision())
            })
            .collect();
        assert_eq!(
            e,
            [(etcd_client::EventType::Delete, b"a".to_vec(), 3)],
            "{r:?}"
        );
    };
    delete_at_3(&watch_from(&mut c, "a", 3).await);
    let r = watch_from(&mut c, "a", 2).await;
    assert!(r.canceled() && r.compact_revision() == 3, "{r:?}");

    srv.restart();
    let mut c = srv.client().await;
    delete_at_3(&watch_from(&mut c, "a", 3).await);
    // Only the tombstone at the compaction revision is left, and HashKV leaves it out: the
    // hash of an empty store, crc32c("key"), as etcd 3.5.1 (which deleted it) answers.
    let h = c.hash_kv(0).await.unwrap();
    assert_eq!((h.hash(), h.compact_version()), (1_084_519_789, 3), "{h:?}");
    assert!(c.get("a", None).await.unwrap().kvs().is_empty());
    // The next compaction drops the tombstone.
    assert_eq!(put(&mut c, "b").await, 4);
    c.compact(
        4,
        Some(etcd_client::CompactionOptions::new().with_physical()),
    )
    .await
    .unwrap();
    let r = watch_from(&mut c, "a", 3).await;
    assert!(r.canceled() && r.compact_revision() == 4, "{r:?}");
}

/// etcd 3.5.10 (#16165): `snapshot restore --bump-revision N --mark-compacted`, as etcdutl's:
/// the restored member starts N revisions past the file's latest, compacted there, so a watch
/// from an old revision is answered "compacted"; one flag without the other is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_can_bump_the_revision_and_mark_it_compacted() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Server::start(&tmp.path().join("a"));
    let mut c = a.client().await;
    put(&mut c, "k").await;
    let latest = put(&mut c, "k").await;
    let file = tmp.path().join("snap.db");
    let file_s = file.to_str().unwrap();
    let actcd = |args: &[&str]| {
        crate::actcd_command()
            .args(args)
            .env("RUST_LOG", "warn")
            .output()
            .expect("run actcd")
    };
    let out = actcd(&["snapshot", "save", file_s, "--endpoints", &a.endpoint()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(a);

    let peer = crate::free_port();
    let peer_url = format!("http://127.0.0.1:{peer}");
    let cluster = format!("default={peer_url}");
    let restore = |dir: &str, extra: &[&str]| {
        let mut args = vec![
            "snapshot",
            "restore",
            file_s,
            "--data-dir",
            dir,
            "--initial-cluster",
            &cluster,
            "--initial-advertise-peer-urls",
            &peer_url,
        ];
        args.extend(extra);
        actcd(&args)
    };
    let dir = tmp.path().join("b");
    let dir_s = dir.to_str().unwrap();
    for half in [&["--bump-revision", "5"][..], &["--mark-compacted"]] {
        let out = restore(dir_s, half);
        assert!(!out.status.success());
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim(),
            "Error: --mark-compacted required if --revision-bump > 0"
        );
        assert!(!dir.exists(), "nothing restored");
    }
    let out = restore(dir_s, &["--bump-revision", "1000", "--mark-compacted"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut b = Server {
        child: None,
        dir: dir.clone(),
        port: crate::free_port(),
        peer_port: peer,
        extra: Vec::new(),
        env: Vec::new(),
        scheme: "http",
    };
    b.spawn();
    let mut c = b.client().await;
    let bumped = latest + 1000;
    let h = c.hash_kv(0).await.unwrap();
    assert_eq!(
        (h.header().unwrap().revision(), h.compact_version()),
        (bumped, bumped)
    );
    let got = c.get("k", None).await.unwrap();
    assert_eq!(
        got.kvs()[0].mod_revision(),
        latest,
        "the keys are the file's"
    );
    // A watch from a revision the old cluster served, or from just below the bump.
    for from in [latest, bumped - 1] {
        let r = watch_from(&mut c, "k", from).await;
        assert!(r.canceled() && r.compact_revision() == bumped, "{r:?}");
    }
    assert_eq!(put(&mut c, "k").await, bumped + 1);
    let r = watch_from(&mut c, "k", bumped).await;
    assert_eq!(r.events().len(), 1, "{r:?}");
    assert_eq!(r.events()[0].kv().unwrap().mod_revision(), bumped + 1);
}
