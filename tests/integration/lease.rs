//! The Lease service against a real server: grant, attach, revoke, keepalive, expiry, restart.

use std::time::{Duration, Instant};

use etcd_client::{EventType, GetOptions, LeaseGrantOptions, LeaseTimeToLiveOptions, PutOptions};

use crate::{Server, code_and_message, keys};

/// Short raft timings make the minimum lease TTL 1 s (etcd: 1.5 × election timeout, rounded up)
/// and the lessor's clock is checked every 500 ms.
const FAST: &[&str] = &["--heartbeat-interval", "10", "--election-timeout", "100"];

/// Polls `check` until it holds or 15 s pass: the server's clock decides when a lease expires,
/// so the test can only observe it.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(15);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn grant_attach_revoke_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;

    let g = c
        .lease_grant(60, Some(LeaseGrantOptions::new().with_id(0x1234)))
        .await
        .unwrap();
    assert_eq!((g.id(), g.ttl()), (0x1234, 60));
    // A TTL below the minimum (2 s with default timings) is raised to it.
    let short = c.lease_grant(1, None).await.unwrap();
    assert!(short.id() > 0, "server-chosen ids are positive");
    assert_eq!(short.ttl(), 2);

    let cases = [
        (
            c.lease_grant(60, Some(LeaseGrantOptions::new().with_id(0x1234)))
                .await
                .unwrap_err(),
            tonic::Code::FailedPrecondition,
            "etcdserver: lease already exists",
        ),
        (
            c.lease_grant(9_000_000_001, None).await.unwrap_err(),
            tonic::Code::OutOfRange,
            "etcdserver: too large lease TTL",
        ),
        (
            c.put("k", "v", Some(PutOptions::new().with_lease(0x999)))
                .await
                .unwrap_err(),
            tonic::Code::NotFound,
            "etcdserver: requested lease not found",
        ),
        (
            c.lease_revoke(0x999).await.unwrap_err(),
            tonic::Code::NotFound,
            "etcdserver: requested lease not found",
        ),
    ];
    for (err, want_code, want_msg) in cases {
        assert_eq!(code_and_message(err), (want_code, want_msg.to_string()));
    }

    c.put("a", "1", Some(PutOptions::new().with_lease(0x1234)))
        .await
        .unwrap();
    c.put("b", "1", Some(PutOptions::new().with_lease(0x1234)))
        .await
        .unwrap();
    // ignore_lease keeps the lease; a plain put moves the key off it.
    c.put("a", "2", Some(PutOptions::new().with_ignore_lease()))
        .await
        .unwrap();
    c.put("c", "1", Some(PutOptions::new().with_lease(0x1234)))
        .await
        .unwrap();
    c.put("c", "2", None).await.unwrap();
    let ttl = c
        .lease_time_to_live(0x1234, Some(LeaseTimeToLiveOptions::new().with_keys()))
        .await
        .unwrap();
    assert_eq!(ttl.granted_ttl(), 60);
    assert!((58..=60).contains(&ttl.ttl()), "remaining {}", ttl.ttl());
    assert_eq!(ttl.keys(), [b"a".to_vec(), b"b".to_vec()]);
    let listed: Vec<i64> = c
        .leases()
        .await
        .unwrap()
        .leases()
        .iter()
        .map(|l| l.id())
        .collect();
    assert!(listed.contains(&0x1234) && listed.contains(&short.id()));

    let before = c.get("c", None).await.unwrap().header().unwrap().revision();
    let revoked = c.lease_revoke(0x1234).await.unwrap();
    assert_eq!(
        revoked.header().unwrap().revision(),
        before + 1,
        "both keys go at one revision"
    );
    let all = c
        .get("", Some(GetOptions::new().with_all_keys()))
        .await
        .unwrap();
    assert_eq!(keys(&all), ["c"]);
    let gone = c.lease_time_to_live(0x1234, None).await.unwrap();
    assert_eq!(gone.ttl(), -1);
}

#[tokio::test]
async fn expiry_deletes_keys_and_keepalive_holds_them() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start_with(dir.path(), FAST);
    let mut c = srv.client().await;
    let kept = c.lease_grant(1, None).await.unwrap().id();
    let dropped = c.lease_grant(1, None).await.unwrap().id();
    c.put("kept", "v", Some(PutOptions::new().with_lease(kept)))
        .await
        .unwrap();
    c.put("dropped", "v", Some(PutOptions::new().with_lease(dropped)))
        .await
        .unwrap();
    let mut watch = c.watch("dropped", None).await.unwrap();
    let created = watch.message().await.unwrap().unwrap();
    assert!(created.created());

    let (mut keeper, mut acks) = c.lease_keep_alive(kept).await.unwrap();
    let started = Instant::now();
    // Keep one lease alive for three of its TTLs while the other expires.
    while started.elapsed() < Duration::from_secs(3) {
        keeper.keep_alive().await.unwrap();
        let ack = acks.message().await.unwrap().unwrap();
        assert_eq!((ack.id(), ack.ttl()), (kept, 1));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mut c2 = c.clone();
    eventually("the expired lease's key is deleted", || {
        let mut c = c2.clone();
        async move { c.get("dropped", None).await.unwrap().kvs().is_empty() }
    })
    .await;
    assert_eq!(c2.get("kept", None).await.unwrap().kvs().len(), 1);
    let del = watch.message().await.unwrap().unwrap();
    assert_eq!(del.events()[0].event_type(), EventType::Delete);
    // Keepalive of a lease that is gone answers TTL 0, which etcd-client reports as this.
    let err = c.lease_keep_alive(dropped).await.unwrap_err();
    assert!(
        matches!(&err, etcd_client::Error::LeaseKeepAliveError(m) if m == "lease not found"),
        "{err:?}"
    );
    assert_eq!(c.lease_time_to_live(dropped, None).await.unwrap().ttl(), -1);
}

#[tokio::test]
async fn restart_keeps_leases_and_their_keys() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let id = c.lease_grant(300, None).await.unwrap().id();
    c.put("held", "v", Some(PutOptions::new().with_lease(id)))
        .await
        .unwrap();
    srv.restart();
    let mut c = srv.client().await;
    let ttl = c
        .lease_time_to_live(id, Some(LeaseTimeToLiveOptions::new().with_keys()))
        .await
        .unwrap();
    assert_eq!(ttl.granted_ttl(), 300);
    assert!(ttl.ttl() > 0 && ttl.ttl() <= 300, "remaining {}", ttl.ttl());
    assert_eq!(ttl.keys(), [b"held".to_vec()]);
    assert_eq!(c.get("held", None).await.unwrap().kvs()[0].lease(), id);
    // Still revocable after the restart, keys and all.
    c.lease_revoke(id).await.unwrap();
    assert!(c.get("held", None).await.unwrap().kvs().is_empty());
}
