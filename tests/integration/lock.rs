//! The server-side lock and election services (`v3lockpb`, `v3electionpb`) through the
//! `etcd-client` crate, as Kubernetes-style controllers use them: contention and hand-over,
//! leases ending a hold, waiters that go away, leadership, proclamations and observers, etcd's
//! errors, and auth.

use std::time::Duration;

use etcd_client::{Client, GetOptions, LockOptions, ProclaimOptions, ResignOptions};

use crate::{Server, auth_on_with_alice, code_and_message};

/// How long a call that must be blocked is given to show it is not done yet. A call that
/// wrongly went through fails the test whatever this is; a slow machine can only make the
/// test pass without seeing a wrong answer.
const BLOCKED: Duration = Duration::from_millis(300);

async fn owners(c: &mut Client, prefix: &str) -> Vec<(String, i64)> {
    let r = c
        .get(prefix, Some(GetOptions::new().with_prefix()))
        .await
        .unwrap();
    r.kvs()
        .iter()
        .map(|kv| (kv.key_str().unwrap().to_string(), kv.create_revision()))
        .collect()
}

/// Polls until `prefix` holds exactly `n` keys (for up to about 10 s: a key a waiter left
/// behind is deleted by a task of its own, which a loaded 2-core CI machine may run late; a
/// key that is never deleted still fails).
async fn until_keys(c: &mut Client, prefix: &str, n: usize) {
    for _ in 0..500 {
        if owners(c, prefix).await.len() == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "{prefix} never held {n} keys: {:?}",
        owners(c, prefix).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_are_handed_over_in_order_and_end_with_their_lease() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let la = c.lease_grant(60, None).await.unwrap().id();
    let lb = c.lease_grant(60, None).await.unwrap().id();
    let lc = c.lease_grant(60, None).await.unwrap().id();

    let a = c
        .lock("job", Some(LockOptions::new().with_lease(la)))
        .await
        .unwrap();
    assert_eq!(a.key(), format!("job/{la:x}").as_bytes());
    // Locking again with the same lease is the same hold.
    let again = c
        .lock("job", Some(LockOptions::new().with_lease(la)))
        .await
        .unwrap();
    assert_eq!(again.key(), a.key());

    // B and then C wait behind A.
    let mut cb = srv.client().await;
    let b = tokio::spawn(async move {
        cb.lock("job", Some(LockOptions::new().with_lease(lb)))
            .await
            .unwrap()
    });
    until_keys(&mut c, "job/", 2).await;
    let mut cc = srv.client().await;
    let cwait = tokio::spawn(async move {
        cc.lock("job", Some(LockOptions::new().with_lease(lc)))
            .await
            .unwrap()
    });
    until_keys(&mut c, "job/", 3).await;
    let mut b = b;
    assert!(
        tokio::time::timeout(BLOCKED, &mut b).await.is_err(),
        "B must wait while A holds the lock"
    );

    // A unlocks: B (created before C) gets it; C still waits.
    c.unlock(a.key()).await.unwrap();
    let b = b.await.unwrap();
    assert_eq!(b.key(), format!("job/{lb:x}").as_bytes());
    let mut cwait = cwait;
    assert!(tokio::time::timeout(BLOCKED, &mut cwait).await.is_err());

    // B's lease ends: its key goes with it, and C holds the lock.
    c.lease_revoke(lb).await.unwrap();
    let cres = cwait.await.unwrap();
    assert_eq!(cres.key(), format!("job/{lc:x}").as_bytes());
    assert_eq!(owners(&mut c, "job/").await.len(), 1);

    // Without a lease, the server grants one (60 s) for the hold.
    let fresh = c.lock("solo", None).await.unwrap();
    let key = String::from_utf8(fresh.key().to_vec()).unwrap();
    let lease = i64::from_str_radix(key.strip_prefix("solo/").unwrap(), 16).unwrap();
    let ttl = c.lease_time_to_live(lease, None).await.unwrap();
    assert!(ttl.ttl() > 50 && ttl.ttl() <= 60, "{}", ttl.ttl());

    // A lease that does not exist: etcd's error, code Unknown (its lock server's client
    // hands errors back plain).
    let err = c
        .lock("job", Some(LockOptions::new().with_lease(12345)))
        .await
        .unwrap_err();
    assert_eq!(
        code_and_message(err),
        (
            tonic::Code::Unknown,
            "etcdserver: requested lease not found".into()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_goes_away_takes_its_key_back() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let la = c.lease_grant(60, None).await.unwrap().id();
    let lb = c.lease_grant(60, None).await.unwrap().id();
    let a = c
        .lock("gate", Some(LockOptions::new().with_lease(la)))
        .await
        .unwrap();
    let mut cb = srv.client().await;
    let waiter = tokio::spawn(async move {
        let _ = cb
            .lock("gate", Some(LockOptions::new().with_lease(lb)))
            .await;
    });
    until_keys(&mut c, "gate/", 2).await;
    // The waiting client goes away (its call is dropped with its connection).
    waiter.abort();
    let _ = waiter.await;
    until_keys(&mut c, "gate/", 1).await;
    assert_eq!(owners(&mut c, "gate/").await[0].0, format!("gate/{la:x}"));

    // Waiters that go away at any moment, even while their call is between its put and its
    // wait, leave no key behind.
    for step in 0..60u64 {
        let l = c.lease_grant(60, None).await.unwrap().id();
        let mut cw = srv.client().await;
        let waiter = tokio::spawn(async move {
            let _ = cw
                .lock("gate", Some(LockOptions::new().with_lease(l)))
                .await;
        });
        tokio::time::sleep(Duration::from_micros(50 * step)).await;
        waiter.abort();
        let _ = waiter.await;
    }
    until_keys(&mut c, "gate/", 1).await;
    c.unlock(a.key()).await.unwrap();
    until_keys(&mut c, "gate/", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elections_lead_proclaim_observe_and_hand_over() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let err = c.leader("ctl").await.unwrap_err();
    assert_eq!(
        code_and_message(err),
        (tonic::Code::Unknown, "election: no leader".into())
    );

    let mut observer = srv.client().await;
    let mut observed = observer.observe("ctl").await.unwrap();

    let la = c.lease_grant(60, None).await.unwrap().id();
    let lb = c.lease_grant(60, None).await.unwrap().id();
    let won = c.campaign("ctl", "a1", la).await.unwrap();
    let leader_a = won.leader().unwrap().clone();
    assert_eq!(leader_a.key(), format!("ctl/{la:x}").as_bytes());
    assert_eq!(leader_a.lease(), la);
    let l = c.leader("ctl").await.unwrap();
    assert_eq!(l.kv().unwrap().value(), b"a1");
    let first = observed.message().await.unwrap().unwrap();
    assert_eq!(first.kv().unwrap().value(), b"a1");

    // B campaigns and waits.
    let mut cb = srv.client().await;
    let b = tokio::spawn(async move { cb.campaign("ctl", "b1", lb).await.unwrap() });
    until_keys(&mut c, "ctl/", 2).await;
    let mut b = b;
    assert!(tokio::time::timeout(BLOCKED, &mut b).await.is_err());

    // A proclaims; the observer sees it; the leader is still A.
    c.proclaim(
        "a2",
        Some(ProclaimOptions::new().with_leader(leader_a.clone())),
    )
    .await
    .unwrap();
    let next = observed.message().await.unwrap().unwrap();
    assert_eq!(next.kv().unwrap().value(), b"a2");
    assert_eq!(c.leader("ctl").await.unwrap().kv().unwrap().value(), b"a2");

    // A resigns: B leads, the observer follows.
    c.resign(Some(ResignOptions::new().with_leader(leader_a.clone())))
        .await
        .unwrap();
    let won_b = b.await.unwrap();
    let leader_b = won_b.leader().unwrap().clone();
    assert_eq!(leader_b.key(), format!("ctl/{lb:x}").as_bytes());
    let next = observed.message().await.unwrap().unwrap();
    assert_eq!(next.kv().unwrap().value(), b"b1");
    assert_eq!(c.leader("ctl").await.unwrap().kv().unwrap().value(), b"b1");

    // A is no leader any more.
    let err = c
        .proclaim("a3", Some(ProclaimOptions::new().with_leader(leader_a)))
        .await
        .unwrap_err();
    assert_eq!(
        code_and_message(err),
        (tonic::Code::Unknown, "election: not leader".into())
    );
    // B's lease ends: no leader.
    c.lease_revoke(lb).await.unwrap();
    let err = c.leader("ctl").await.unwrap_err();
    assert_eq!(code_and_message(err).1, "election: no leader");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_and_election_run_as_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let mut alice = auth_on_with_alice(&srv, &mut c, "mine/").await;
    let held = alice.lock("mine", None).await.unwrap();
    assert!(held.key().starts_with(b"mine/"));
    alice.unlock(held.key()).await.unwrap();
    let err = alice.lock("theirs", None).await.unwrap_err();
    assert_eq!(
        code_and_message(err),
        (tonic::Code::Unknown, "etcdserver: permission denied".into())
    );
    let err = alice.leader("theirs").await.unwrap_err();
    assert_eq!(code_and_message(err).1, "etcdserver: permission denied");
    // A refused observer's stream just ends, as etcd's does.
    let mut refused = alice.observe("theirs").await.unwrap();
    assert!(refused.message().await.unwrap().is_none());
}
