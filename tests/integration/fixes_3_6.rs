//! Changes of etcd 3.6 and 3.7 a client or an operator can see, as actcd has them
//! (`docs/etcd-changes/3.6-3.7.md` names each row's test).

use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions, Txn, TxnOp};

use crate::cluster::running_cluster;

/// Waits until member client `c` has applied revision `rev` (serializable reads, so its own
/// state), then returns `key`'s value there.
async fn value_at(c: &mut Client, key: &str, rev: i64) -> Option<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = c
            .get(key, Some(GetOptions::new().with_serializable()))
            .await
            .unwrap();
        if r.header().unwrap().revision() >= rev {
            return r.kvs().first().map(|kv| kv.value().to_vec());
        }
        assert!(Instant::now() < deadline, "never applied revision {rev}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// etcd #18667, fixed in 3.7.0 (#21432): a Txn whose chosen branch writes and reads a key at a
/// compacted (or future) revision failed on the member the client was connected to, but the
/// other members, which dropped the Range before applying, wrote. Here every member checks the
/// Range's revision when it applies the Txn: the Txn fails, and no member writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_txn_reading_a_compacted_or_future_revision_writes_on_no_member() {
    let dir = tempfile::tempdir().unwrap();
    let (members, _, leader) = running_cluster(dir.path(), &[]).await;
    // Through a follower, as in etcd's report (the Txn is proposed by the leader either way).
    let via = (leader + 1) % 3;
    let mut c = members[via].client().await;
    for i in 0..5 {
        c.put("k1", format!("v{i}"), None).await.unwrap();
    }
    let rev = c
        .put("k1", "last", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    c.compact(rev - 1, None).await.unwrap();

    for (read_at, want) in [
        (2, "etcdserver: mvcc: required revision has been compacted"),
        (
            rev + 100,
            "etcdserver: mvcc: required revision is a future revision",
        ),
    ] {
        let txn = Txn::new().and_then(vec![
            TxnOp::put("k2", "written", None),
            TxnOp::get("k1", Some(GetOptions::new().with_revision(read_at))),
        ]);
        let err = c.txn(txn).await.expect_err("the Txn fails");
        assert!(err.to_string().contains(want), "{err}");
    }
    // A later write, so every member is known to have applied past both Txns.
    let barrier = c
        .put("barrier", "x", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    assert_eq!(barrier, rev + 1, "neither Txn took a revision");
    for m in &members {
        let mut mc = m.client().await;
        assert_eq!(
            value_at(&mut mc, "k2", barrier).await,
            None,
            "member {} wrote k2",
            m.name
        );
    }
}

/// etcd 3.6's `/livez` and `/readyz` read their query with Go's `r.URL.Query()`: escapes and
/// `+` are decoded, a pair holding `;` is dropped, an empty `exclude` excludes nothing, and any
/// `verbose` (with or without a value) asks for every check's line. (`metrics::livez_and_readyz_
/// run_etcd_36s_named_checks` has the rest: names, sub-paths, GET only, failures.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn livez_and_readyz_read_their_query_as_go_does() {
    use crate::http::get;
    let dir = tempfile::tempdir().unwrap();
    let srv = crate::Server::start(dir.path());
    let _ = srv.client().await;
    let a = srv.endpoint();
    let all = "[+]data_corruption ok\n[+]serializable_read ok\n[+]linearizable_read ok\n[+]non_learner ok\nok\n";
    for (path, body) in [
        (
            "/readyz?verbose&exclude=linearizable%5Fread&exclude=non%5flearner",
            "[+]data_corruption ok\n[+]serializable_read ok\nok\n",
        ),
        ("/readyz?verbose=false&exclude=&exclude=x+y", all),
        ("/readyz?verb%6Fse", all),
        ("/readyz?verbose;x", "ok\n"),
        ("/readyz?verbose&exclude=data_corruption;x", all),
        ("/readyz?verbose&exclude=%zz", all),
        ("/livez?verbose&exclude=serializable%5Fread", "ok\n"),
    ] {
        assert_eq!(get(&a, path).await, (200, body.to_string()), "{path}");
    }
}

pub(crate) async fn maintenance37(
    endpoint: &str,
) -> actcd_etcd37_client::etcdserverpb::maintenance_client::MaintenanceClient<
    tonic::transport::Channel,
> {
    actcd_etcd37_client::etcdserverpb::maintenance_client::MaintenanceClient::connect(format!(
        "http://{endpoint}"
    ))
    .await
    .unwrap()
}

/// etcd 3.6's StatusResponse fields, read through a client built from etcd 3.7's proto:
/// `storageVersion` (#13773), `dbSizeQuota` (#17877, the effective quota since #20790: 2 GiB
/// when `--quota-backend-bytes` is 0) and `downgradeInfo` (#19471, always sent), as etcd 3.6
/// fills them for a 3.5-schema backend; and HashKV's `hash_revision` (#14537).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_hash_kv_carry_etcd_36s_fields() {
    use actcd_etcd37_client::etcdserverpb::{DowngradeInfo, HashKvRequest, StatusRequest};
    let dir = tempfile::tempdir().unwrap();
    let srv = crate::Server::start(dir.path());
    let mut c = srv.client().await;
    let mut m = maintenance37(&srv.endpoint()).await;
    let s = m.status(StatusRequest {}).await.unwrap().into_inner();
    // The storage schema of the release actcd reports, `major.minor.0` (3.5.0 for 3.5.x).
    let minor = s.version.rsplit_once('.').unwrap().0.to_string();
    assert_eq!(s.storage_version, format!("{minor}.0"), "{}", s.version);
    assert_eq!(s.db_size_quota, 2 * 1024 * 1024 * 1024);
    assert_eq!(
        s.downgrade_info,
        Some(DowngradeInfo {
            enabled: false,
            target_version: String::new()
        })
    );
    assert!(s.errors.is_empty(), "{:?}", s.errors);

    for i in 0..3 {
        c.put(format!("k{i}"), "v", None).await.unwrap();
    }
    let rev = c
        .put("k", "v", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    let h = m
        .hash_kv(HashKvRequest { revision: 0 })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((h.hash_revision, h.header.unwrap().revision), (rev, rev));
    let h = m
        .hash_kv(HashKvRequest { revision: rev - 2 })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (h.hash_revision, h.header.unwrap().revision),
        (rev - 2, rev)
    );

    let dir = tempfile::tempdir().unwrap();
    let srv = crate::Server::start_with(dir.path(), &["--quota-backend-bytes", "123456789"]);
    let _ = srv.client().await;
    let s = maintenance37(&srv.endpoint())
        .await
        .status(StatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.db_size_quota, 123_456_789);
}

/// Status says `etcdserver: no leader` first in `errors` while the member knows no leader, as
/// etcd 3.5 and 3.6 do (then the alarms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_errors_say_when_there_is_no_leader() {
    let dir = tempfile::tempdir().unwrap();
    let (mut members, _, leader) = running_cluster(dir.path(), &[]).await;
    let survivor = (leader + 1) % 3;
    let mut c = members[survivor].client().await;
    assert!(c.status().await.unwrap().errors().is_empty());
    for (i, m) in members.iter_mut().enumerate() {
        if i != survivor {
            m.kill();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = c.status().await.unwrap();
        if s.leader() == 0 {
            assert_eq!(s.errors(), ["etcdserver: no leader"]);
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the survivor never lost its leader"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// etcd 3.6's `/version` names the storage schema too (#13772), as Status's `storageVersion`
/// says it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_names_the_storage_schema() {
    let dir = tempfile::tempdir().unwrap();
    let srv = crate::Server::start(dir.path());
    let _ = srv.client().await;
    let (status, body) = crate::http::get(&srv.endpoint(), "/version").await;
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    // The release actcd reports, its cluster version and storage schema `major.minor.0`.
    let server = v["etcdserver"].as_str().unwrap();
    let minor = format!("{}.0", server.rsplit_once('.').unwrap().0);
    assert_eq!(v["etcdcluster"], minor.as_str(), "{body}");
    assert_eq!(v["storage"], minor.as_str(), "{body}");
    assert_eq!(v.as_object().unwrap().len(), 3, "{body}");
}

/// etcd 3.7.0 (#20802): AuthStatus needs no root, nor a login (`etcdctl auth status` works for
/// anyone); a bad token is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_status_answers_anyone() {
    use actcd_proto::etcdserverpb::AuthStatusRequest;

    use crate::auth::{As, channel, login};
    let dir = tempfile::tempdir().unwrap();
    let srv = crate::Server::start(dir.path());
    let mut c = srv.client().await;
    c.user_add("root", "rootpw", None).await.unwrap();
    c.user_grant_role("root", "root").await.unwrap();
    c.user_add("alice", "alicepw", None).await.unwrap();
    c.auth_enable().await.unwrap();

    let ch = channel(srv.port).await;
    let nobody = As {
        channel: ch.clone(),
        token: None,
    };
    let bad = As {
        channel: ch.clone(),
        token: Some("not-a-token".into()),
    };
    let alice = login(&ch, "alice", "alicepw").await.unwrap();
    for who in [&nobody, &alice] {
        let s = who
            .auth()
            .auth_status(who.req(AuthStatusRequest {}))
            .await
            .unwrap()
            .into_inner();
        assert!(s.enabled);
        assert!(s.auth_revision > 1);
    }
    let refused = bad
        .auth()
        .auth_status(bad.req(AuthStatusRequest {}))
        .await
        .unwrap_err();
    assert_eq!(refused.message(), "etcdserver: invalid auth token");

    let (status, body) =
        crate::http::request(&srv.endpoint(), "POST", "/v3/auth/status", "{}", None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"enabled\":true"), "{body}");
}

/// etcd 3.6's `--max-learners` (default 1, as 3.5's fixed limit): a learner add past it is
/// refused, and a member whose membership holds more learners than its limit does not start
/// (`ValidateMaxLearnerConfig`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_learners_bounds_learner_adds_and_start_up() {
    use etcd_client::MemberAddOptions;
    let dir = tempfile::tempdir().unwrap();
    let mut srv = crate::Server::start_with(dir.path(), &["--max-learners", "2"]);
    let mut c = srv.client().await;
    let learner = || Some(MemberAddOptions::new().with_is_learner());
    for i in 1..=2 {
        c.member_add([format!("http://127.0.0.1:{}", 1000 + i)], learner())
            .await
            .unwrap();
    }
    let err = c
        .member_add(["http://127.0.0.1:1003"], learner())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("etcdserver: too many learner members in cluster"),
        "{err}"
    );
    assert_eq!(c.member_list().await.unwrap().members().len(), 3);

    // Two learners recorded: with the default limit of 1 the member refuses to start.
    srv.stop();
    srv.extra.clear();
    let out = srv.command().output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("etcdserver: too many learner members in cluster"),
        "{stderr}"
    );
    srv.extra = vec!["--max-learners".into(), "2".into()];
    srv.spawn();
    let mut c = srv.client().await;
    assert_eq!(c.member_list().await.unwrap().members().len(), 3);

    // The default: a second learner is refused.
    let dir = tempfile::tempdir().unwrap();
    let srv = crate::Server::start(dir.path());
    let mut c = srv.client().await;
    c.member_add(["http://127.0.0.1:1001"], learner())
        .await
        .unwrap();
    let err = c
        .member_add(["http://127.0.0.1:1002"], learner())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("too many learner members"),
        "{err}"
    );
}

/// etcd 3.6's `--log-format` takes `json` and `console`; actcd's human-readable format, `text`,
/// answers to `console` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_format_takes_etcds_console() {
    let dir = tempfile::tempdir().unwrap();
    let srv = crate::Server::start_with(dir.path(), &["--log-format", "console"]);
    let mut c = srv.client().await;
    c.put("k", "v", None).await.unwrap();
}
