//! Leader changes absorbed as etcd 3.5.1 absorbs them, and streams ended by a shutdown.
//!
//! What etcd does was seen on a three-member etcd 3.5.1 cluster, its leader killed with
//! requests issued on a follower right after, through the gateway (which does not retry):
//! a keepalive and a LeaseTimeToLive wait and are answered by the new leader; a put or a lease
//! revoke forwarded to the dead leader times out after the request timeout with `request timed
//! out` (`…, possibly due to previous leader failure` when the member asked is the one elected);
//! with no leader at all a put waits and commits once one is elected, or fails `context
//! deadline exceeded` (code Unknown) if none is, and a keepalive or TimeToLive still without
//! one at the deadline fails with `no leader`. `tests/compat/elections.sh` compares these. A linearizable read cut short by the election gets `leader changed`
//! from etcd (its Go client retries it); actcd retries it itself, so it succeeds. A watch open
//! on a member that is stopped ends `Unavailable` (etcd closes the connection; Go clients say
//! `error reading from server: EOF`).
//!
//! The members here run with a 200 ms election timeout: the request timeout is 5.4 s.

use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions};

use crate::cluster::{Member, leader_index, running_cluster};
use crate::http::request;

/// The request timeout of members started by `running_cluster` (5 s + 2 × 200 ms).
const REQUEST_TIMEOUT: Duration = Duration::from_millis(5400);

/// Keepalive acknowledgements read from a stream, each awaited for at most the request
/// timeout and a second.
async fn keep_alive(
    keeper: &mut etcd_client::LeaseKeeper,
    acks: &mut etcd_client::LeaseKeepAliveStream,
) -> Result<i64, String> {
    keeper.keep_alive().await.map_err(|e| e.to_string())?;
    match tokio::time::timeout(REQUEST_TIMEOUT + Duration::from_secs(1), acks.message()).await {
        Ok(Ok(Some(ack))) => Ok(ack.ttl()),
        Ok(Ok(None)) => Err("the keepalive stream ended".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer".into()),
    }
}

/// The members other than `gone`.
fn others(gone: usize) -> Vec<usize> {
    (0..3).filter(|&i| i != gone).collect()
}

/// A follower's keepalive stream, its gateway keepalives and its linearizable reads go on
/// through the leader's death: every keepalive is answered with the lease's TTL, with no
/// error (actcd answered the first ones `etcdserver: leader changed` at once, which Patroni
/// takes for a lost lease). A put made right after the kill either commits or, forwarded to
/// the dead leader, fails as etcd's does: after the request timeout, naming the leader's
/// failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalives_and_reads_go_on_through_a_leader_kill() {
    let dir = tempfile::tempdir().unwrap();
    let (mut members, _, leader) = running_cluster(dir.path(), &[]).await;
    let follower = (leader + 1) % 3;
    let mut c = members[follower].client().await;
    // First a write that may be retried: right after the election a follower's proposals can
    // time out until its stream to the new leader is up (the other cluster tests' first writes
    // retry for the same reason); the grant after it then runs on a settled cluster.
    crate::cluster::put_eventually(&mut c, "before").await;
    let lease = c.lease_grant(30, None).await.unwrap().id();
    let (mut keeper, mut acks) = c.lease_keep_alive(lease).await.unwrap();
    assert_eq!(keep_alive(&mut keeper, &mut acks).await, Ok(30));
    let gateway = members[follower].endpoint();
    let body = format!("{{\"ID\":{lease}}}");

    members[leader].kill();
    let killed = Instant::now();
    let put = {
        let mut c = c.clone();
        tokio::spawn(async move {
            let r = c.put("during", "v", None).await;
            (r.map(drop), killed.elapsed())
        })
    };
    // Keepalives every 50 ms over the election (a few election timeouts), through both paths,
    // and linearizable reads beside them.
    while killed.elapsed() < Duration::from_secs(2) {
        let (grpc, (status, text), read) = tokio::join!(
            keep_alive(&mut keeper, &mut acks),
            request(&gateway, "POST", "/v3/lease/keepalive", &body, None),
            async {
                let mut c = c.clone();
                c.get("before", None).await.map(|r| r.count())
            }
        );
        assert_eq!(grpc, Ok(30), "gRPC keepalive after the leader's kill");
        assert_eq!(status, 200, "gateway keepalive: {text}");
        assert!(
            text.contains("\"TTL\":\"30\"") && !text.contains("error"),
            "gateway keepalive after the leader's kill: {text}"
        );
        assert_eq!(
            read.map_err(|e| e.to_string()),
            Ok(1),
            "linearizable read after the leader's kill"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let new = leader_index(&members, &others(leader)).await;
    assert_ne!(new, leader);
    let ttl = c.lease_time_to_live(lease, None).await.unwrap();
    assert_eq!(ttl.granted_ttl(), 30);
    assert!(
        ttl.ttl() > 25,
        "renewed through the election: {}",
        ttl.ttl()
    );

    let (put, took) = put.await.unwrap();
    if let Err(e) = put {
        let (code, msg) = crate::code_and_message(e);
        assert_eq!(code, tonic::Code::Unavailable, "{msg}");
        assert!(
            [
                "etcdserver: request timed out",
                "etcdserver: request timed out, possibly due to previous leader failure"
            ]
            .contains(&msg.as_str()),
            "a put during the election fails only as etcd's does: {msg}"
        );
        assert!(
            took >= REQUEST_TIMEOUT - Duration::from_millis(200),
            "failed after {took:?}, before the request timeout"
        );
    }
}

/// With no leader at all (two of three members down), a keepalive waits for one until the
/// request timeout and then fails with etcd's `no leader`; once a member comes back, a
/// keepalive, a TimeToLive, a linearizable read and a put issued while there was still no
/// leader are all answered after the election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_leader_keepalives_wait_for_one() {
    let dir = tempfile::tempdir().unwrap();
    let (mut members, initial, leader) = running_cluster(dir.path(), &[]).await;
    let survivor = (leader + 1) % 3;
    let back = (leader + 2) % 3;
    let mut c = members[survivor].client().await;
    let lease = c.lease_grant(60, None).await.unwrap().id();
    crate::cluster::put_eventually(&mut c, "before").await;
    members[leader].kill();
    members[back].kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !c.status().await.is_ok_and(|s| s.leader() == 0) {
        assert!(Instant::now() < deadline, "the survivor kept a leader");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Nobody to elect: the gateway keepalive gives up at the request timeout.
    let asked = Instant::now();
    let body = format!("{{\"ID\":{lease}}}");
    let gateway = members[survivor].endpoint();
    let (_, text) = request(&gateway, "POST", "/v3/lease/keepalive", &body, None).await;
    let waited = asked.elapsed();
    assert!(
        text.contains("\"message\":\"etcdserver: no leader\"") && text.contains("code\":14"),
        "{text}"
    );
    assert!(
        waited >= REQUEST_TIMEOUT - Duration::from_millis(200),
        "answered after {waited:?}: a keepalive waits for a leader first"
    );

    // A member comes back a second after these are asked: all of them are answered. (The
    // client's `lease_keep_alive` sends a first keepalive and waits for its answer.)
    let asked = Instant::now();
    let restart = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        members[back].spawn(&initial);
    };
    let (grpc, ttl, read, put, ()) = tokio::join!(
        async {
            let mut c = c.clone();
            c.lease_keep_alive(lease).await
        },
        async {
            let mut c = c.clone();
            c.lease_time_to_live(lease, None).await.map(|t| t.ttl())
        },
        async {
            let mut c = c.clone();
            c.get("before", None).await.map(|r| r.count())
        },
        async {
            let mut c = c.clone();
            c.put("during", "v", None).await.map(drop)
        },
        restart,
    );
    assert!(
        asked.elapsed() >= Duration::from_secs(1),
        "answered before a leader"
    );
    let (mut keeper, mut acks) = grpc.expect("keepalive stream");
    assert_eq!(
        keep_alive(&mut keeper, &mut acks).await,
        Ok(60),
        "keepalive"
    );
    let ttl = ttl.map_err(|e| e.to_string());
    assert!(ttl.as_ref().is_ok_and(|t| *t > 50), "TimeToLive: {ttl:?}");
    assert_eq!(read.map_err(|e| e.to_string()), Ok(1), "linearizable read");
    assert_eq!(put.map_err(|e| e.to_string()), Ok(()), "put");
    let got = c
        .get("during", Some(GetOptions::new().with_serializable()))
        .await
        .unwrap();
    assert_eq!(got.count(), 1);
}

/// Streams open on a member that is stopped (SIGTERM) end with `Unavailable`, as etcd's
/// clients see them end, not with a clean end a client would take as final: a watch and a
/// keepalive stream and an election observer over gRPC, and a watch through the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_end_unavailable_at_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Member::new("m1", dir.path());
    let initial = format!("m1={}", m.peer_url());
    m.spawn(&initial);
    let mut c: Client = m.client().await;
    crate::cluster::put_eventually(&mut c, "k").await;
    let mut watch = c.watch("k", None).await.unwrap();
    let created = watch.message().await.unwrap().unwrap();
    assert!(created.created());
    let lease = c.lease_grant(60, None).await.unwrap().id();
    let (mut keeper, mut acks) = c.lease_keep_alive(lease).await.unwrap();
    assert_eq!(keep_alive(&mut keeper, &mut acks).await, Ok(60));
    let mut observe = c.observe("no-leader-yet").await.unwrap();
    // The gateway's watch: its first line says created; read what follows at shutdown.
    let endpoint = m.endpoint();
    let gateway = tokio::spawn(async move {
        request(
            &endpoint,
            "POST",
            "/v3/watch",
            r#"{"create_request":{"key":"aw=="}}"#,
            None,
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    m.stop();
    let ended = tokio::time::timeout(Duration::from_secs(5), watch.message())
        .await
        .expect("the watch stream never ended");
    let (code, msg) = crate::code_and_message(ended.expect_err("a clean end of the watch"));
    assert_eq!(
        (code, msg.as_str()),
        (tonic::Code::Unavailable, "error reading from server: EOF"),
        "watch"
    );
    let ended = tokio::time::timeout(Duration::from_secs(5), acks.message())
        .await
        .expect("the keepalive stream never ended");
    let (code, _) = crate::code_and_message(ended.expect_err("a clean end of the keepalives"));
    assert_eq!(code, tonic::Code::Unavailable, "keepalive");
    let ended = tokio::time::timeout(Duration::from_secs(5), observe.message())
        .await
        .expect("the observe stream never ended");
    let (code, _) = crate::code_and_message(ended.expect_err("a clean end of the observe"));
    assert_eq!(code, tonic::Code::Unavailable, "observe");
    let (_, text) = tokio::time::timeout(Duration::from_secs(5), gateway)
        .await
        .expect("the gateway's watch never ended")
        .unwrap();
    // (etcd's gateway writes a stream's error as `{"error":{"grpc_code":14,"http_code":503,
    // "message":…,"http_status":"Service Unavailable"}}`; the code and message are checked.)
    assert!(
        text.contains("\"created\":true")
            && text.contains("code\":14")
            && text.contains("\"message\":\"error reading from server: EOF\""),
        "gateway watch: {text}"
    );
}
