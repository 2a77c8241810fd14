//! Three real members on 127.0.0.1: election, writes through any member, failover after the
//! leader is killed, and a restarted member catching up to the same key space (HashKV).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions};

use crate::free_port;

pub(crate) struct Member {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    pub(crate) client_port: u16,
    pub(crate) peer_port: u16,
    pub(crate) child: Option<Child>,
    /// `http` or `https` (peer TLS).
    pub(crate) peer_scheme: &'static str,
}

impl Member {
    pub(crate) fn new(name: &str, dir: &Path) -> Self {
        Member {
            name: name.to_string(),
            dir: dir.join(name),
            client_port: free_port(),
            peer_port: free_port(),
            child: None,
            peer_scheme: "http",
        }
    }

    pub(crate) fn peer_url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.peer_scheme, self.peer_port)
    }

    pub(crate) fn spawn(&mut self, initial_cluster: &str) {
        self.spawn_with(initial_cluster, &[]);
    }

    /// The command that starts this member: its name, data dir, client and peer URLs,
    /// `--initial-cluster`, short raft timings, then `extra`; logging at `ACTCD_TEST_LOG`
    /// (default `warn`). Stdio is the caller's to set.
    pub(crate) fn command(&self, initial_cluster: &str, extra: &[&str]) -> Command {
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let peer = self.peer_url();
        let mut cmd = crate::actcd_command();
        cmd.args(["--name", &self.name])
            .arg("--data-dir")
            .arg(&self.dir)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", initial_cluster])
            // Short, but not so short that a member starved of CPU for a fifth of a second on a
            // loaded 2-core CI machine loses its leadership mid-test (CI failed that way).
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(extra)
            .env(
                "RUST_LOG",
                std::env::var("ACTCD_TEST_LOG").unwrap_or_else(|_| "warn".into()),
            );
        cmd
    }

    pub(crate) fn spawn_with(&mut self, initial_cluster: &str, extra: &[&str]) {
        let child = self
            .command(initial_cluster, extra)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start actcd");
        self.child = Some(child);
    }

    /// SIGTERM, and wait for a clean exit.
    pub(crate) fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let _ = c.wait();
        }
    }

    pub(crate) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    pub(crate) async fn client(&self) -> Client {
        for _ in 0..400 {
            if let Ok(c) = Client::connect([self.endpoint()], None).await {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("member {} never accepted a connection", self.name);
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.kill();
    }
}

pub(crate) fn cluster(dir: &Path) -> (Vec<Member>, String) {
    let members: Vec<Member> = (1..=3)
        .map(|i| Member::new(&format!("m{i}"), dir))
        .collect();
    let initial = members
        .iter()
        .map(|m| format!("{}={}", m.name, m.peer_url()))
        .collect::<Vec<_>>()
        .join(",");
    (members, initial)
}

/// Retries `put` until it is acknowledged or 20 s pass (elections take a few timeouts).
pub(crate) async fn put_eventually(c: &mut Client, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match c.put(key, "v", None).await {
            Ok(_) => return,
            Err(e) => {
                assert!(Instant::now() < deadline, "put {key} never succeeded: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Whether `e` is an answer an etcd client retries: its transport failed, or the member timed
/// out, lost or is still finding its leader. On a loaded 2-core CI machine a member starved of
/// CPU for half a second loses its leadership (quorum not active); clientv3 retries such reads
/// itself and callers retry such writes, and so do these tests. Every other error is an answer.
pub(crate) fn is_transient(e: &etcd_client::Error) -> bool {
    let etcd_client::Error::GRpcStatus(s) = e else {
        return true;
    };
    s.code() == tonic::Code::Unavailable
        && (s.message().starts_with("etcdserver: request timed out")
            || ["etcdserver: leader changed", "etcdserver: no leader"].contains(&s.message())
            || !s.message().starts_with("etcdserver: "))
        || s.code() == tonic::Code::DeadlineExceeded
}

/// Calls `call` until it answers with anything but a transient error (see [`is_transient`]),
/// for up to 20 s, and returns that answer.
pub(crate) async fn retrying<T, F, Fut>(mut call: F) -> Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match call().await {
            Err(e) if is_transient(&e) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            answer => return answer,
        }
    }
}

pub(crate) async fn leader_index(members: &[Member], alive: &[usize]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for &i in alive {
            // A member not serving yet holds the request until it is: not forever here.
            let status = tokio::time::timeout(Duration::from_secs(2), async {
                members[i].client().await.status().await
            });
            if let Ok(Ok(s)) = status.await
                && s.leader() != 0
                && s.header().is_some_and(|h| h.member_id() == s.leader())
            {
                return i;
            }
        }
        assert!(Instant::now() < deadline, "no leader elected");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Three members started with `extra` flags, once one leads: (members, `--initial-cluster`,
/// the leader's index).
pub(crate) async fn running_cluster(dir: &Path, extra: &[&str]) -> (Vec<Member>, String, usize) {
    let (mut members, initial) = cluster(dir);
    for m in &mut members {
        m.spawn_with(&initial, extra);
    }
    let leader = leader_index(&members, &[0, 1, 2]).await;
    wait_serving(&members, &[0, 1, 2]).await;
    (members, initial, leader)
}

/// Waits until every member in `which` answers clients. A member serves only once its own
/// publish is applied (etcd's readiness), so one that is still publishing when a test kills its
/// peers never serves: its port accepts connections and holds their requests for good.
pub(crate) async fn wait_serving(members: &[Member], which: &[usize]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for &i in which {
        loop {
            let status = tokio::time::timeout(Duration::from_secs(2), async {
                members[i].client().await.status().await
            });
            if matches!(status.await, Ok(Ok(_))) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "member {} never served clients",
                members[i].name
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Waits until every member answers HashKV at the revision of `key` on `c`, with one hash.
pub(crate) async fn assert_same_hash(members: &[&Member], c: &mut Client, key: &str) {
    let rev = retrying(|| {
        let mut c = c.clone();
        async move { c.get(key, None).await }
    })
    .await
    .unwrap()
    .header()
    .unwrap()
    .revision();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut hashes = Vec::new();
        for m in members {
            let mut mc = m.client().await;
            hashes.push(mc.hash_kv(rev).await.map(|h| h.hash()).ok());
        }
        if hashes.iter().all(|h| h.is_some() && *h == hashes[0]) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "members never agreed at revision {rev}: {hashes:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_fail_over_and_catch_up() {
    let dir = tempfile::tempdir().unwrap();
    let (mut members, initial, leader) = running_cluster(dir.path(), &[]).await;
    let follower = (leader + 1) % 3;

    // Writes through a follower are forwarded to the leader; reads anywhere see them.
    let mut acked = Vec::new();
    let mut c = members[follower].client().await;
    for i in 0..50 {
        let key = format!("k/{i:03}");
        put_eventually(&mut c, &key).await;
        acked.push(key);
    }
    for m in &members {
        let got = m
            .client()
            .await
            .get("k/", Some(GetOptions::new().with_prefix()))
            .await;
        assert_eq!(got.unwrap().count(), 50, "linearizable read on {}", m.name);
    }

    // Kill the leader: the others elect a new one and keep taking writes.
    members[leader].kill();
    let alive: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let new_leader = leader_index(&members, &alive).await;
    assert_ne!(new_leader, leader);
    let mut c = members[alive[0]].client().await;
    for i in 50..100 {
        let key = format!("k/{i:03}");
        put_eventually(&mut c, &key).await;
        acked.push(key);
    }

    // The killed member comes back and catches up: same keys, same HashKV at one revision.
    members[leader].spawn(&initial);
    let all: Vec<&Member> = members.iter().collect();
    assert_same_hash(&all, &mut c, "k/099").await;
    for m in &members {
        let got = m
            .client()
            .await
            .get(
                "k/",
                Some(GetOptions::new().with_prefix().with_serializable()),
            )
            .await
            .unwrap();
        let keys: Vec<String> = got
            .kvs()
            .iter()
            .map(|kv| kv.key_str().unwrap().to_string())
            .collect();
        assert_eq!(keys, acked, "every acknowledged write on {}", m.name);
    }
    // The whole backend (etcd's Maintenance.Hash: every table, not just the keys) agrees too,
    // once every member has applied the same entries; a write changes it.
    let backend_hashes = || async {
        let mut hs = Vec::new();
        for m in &members {
            hs.push(m.client().await.hash().await.map(|h| h.hash()).ok());
        }
        hs
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let agreed = loop {
        let hs = backend_hashes().await;
        if hs.iter().all(|h| h.is_some() && *h == hs[0]) {
            break hs[0].unwrap();
        }
        assert!(Instant::now() < deadline, "backend hashes differ: {hs:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    put_eventually(&mut c, "k/changed").await;
    let after = c.hash().await.unwrap().hash();
    assert_ne!(after, agreed, "a write changes the backend hash");
}

/// With no leader, writes and linearizable reads wait as etcd's do and then time out as etcd
/// 3.5.1's do (seen on a 3-member cluster's survivor): a read with `etcdserver: request timed
/// out`, a write never proposed with its context's `context deadline exceeded`, code Unknown;
/// serializable reads still answer. Once a quorum is back, a write goes through again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_leader_requests_time_out_as_etcds_do() {
    let dir = tempfile::tempdir().unwrap();
    let (mut members, initial, leader) = running_cluster(dir.path(), &[]).await;
    let mut c = members[leader].client().await;
    put_eventually(&mut c, "before").await;
    let survivor = leader;
    for i in (0..3).filter(|&i| i != survivor) {
        members[i].kill();
    }
    // check-quorum makes the lone leader step down within an election timeout or two.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = c.status().await.unwrap();
        if s.leader() == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the lone member kept leading");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started = Instant::now();
    let (put, get) = tokio::join!(
        async {
            let mut c = c.clone();
            c.put("during", "x", None).await
        },
        async {
            let mut c = c.clone();
            c.get("before", None).await
        }
    );
    let want = [
        (tonic::Code::Unknown, "context deadline exceeded"),
        (tonic::Code::Unavailable, "etcdserver: request timed out"),
    ];
    for ((what, r), want) in [("put", put.map(drop)), ("get", get.map(drop))]
        .into_iter()
        .zip(want)
    {
        let (code, msg) = crate::code_and_message(r.expect_err(what));
        assert_eq!((code, msg.as_str()), want, "{what}");
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(5),
        "answered after {waited:?}: requests wait for a leader first"
    );
    let got = c
        .get("before", Some(GetOptions::new().with_serializable()))
        .await
        .unwrap();
    assert_eq!(
        got.count(),
        1,
        "serializable reads are served without a leader"
    );
    for i in (0..3).filter(|&i| i != survivor) {
        members[i].spawn(&initial);
    }
    put_eventually(&mut c, "after").await;
}

/// Lease expiry follows the leader: a lease granted before the leader dies still expires,
/// revoked by the new leader, and its key goes with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_expires_after_its_leader_dies() {
    let dir = tempfile::tempdir().unwrap();
    let (mut members, _, leader) = running_cluster(dir.path(), &[]).await;
    let mut c = members[leader].client().await;
    let lease = c.lease_grant(2, None).await.unwrap().id();
    let opts = etcd_client::PutOptions::new().with_lease(lease);
    c.put("leased", "v", Some(opts)).await.unwrap();
    members[leader].kill();
    let alive: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let new = leader_index(&members, &alive).await;
    let mut n = members[new].client().await;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if n.get("leased", None).await.is_ok_and(|r| r.count() == 0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lease never expired after failover"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ttl = n.lease_time_to_live(lease, None).await.unwrap();
    assert_eq!(ttl.ttl(), -1, "the lease is gone");
}

/// The v2 tree reaches a member that was down while the log moved past it: the leader sends it
/// a snapshot (the whole backend, the v2 store's table with it), the member reads its v2 store
/// again from it, and then answers v2 reads, indexes included, as the others do — and keeps
/// applying v2 writes on top.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v2_tree_reaches_a_member_through_a_snapshot() {
    use crate::http::request;
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--enable-v2",
        "--snapshot-count",
        "20",
        "--snapshot-catchup-entries",
        "5",
    ];
    let (mut members, initial, leader) = running_cluster(dir.path(), &flags).await;
    let behind = (leader + 1) % 3;
    let endpoints: Vec<String> = members.iter().map(Member::endpoint).collect();
    let at = |i: usize| endpoints[i].clone();
    let (status, _) = request(&at(leader), "PUT", "/v2/keys/before?value=1", "", None).await;
    assert_eq!(status, 201);
    members[behind].kill();
    for i in 0..120 {
        let path = format!("/v2/keys/dir/k{i:03}?value={i}");
        let (status, body) = request(&at(leader), "PUT", &path, "", None).await;
        assert_eq!(status, 201, "{path}: {body}");
    }
    let (status, _) = request(&at(leader), "PUT", "/v2/keys/ttl?value=x&ttl=500", "", None).await;
    assert_eq!(status, 201);
    members[behind].spawn_with(&initial, &flags);
    // Serving: it accepts connections (the tree may still be behind).
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(at(behind)).await.is_err() {
        assert!(Instant::now() < deadline, "the member never listened again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let listing = "/v2/keys/?recursive=true&sorted=true";
    let want = request(&at(leader), "GET", listing, "", None).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = request(&at(behind), "GET", listing, "", None).await;
        // TTLs are counted at the moment of the read: compare without them.
        let strip = |s: &str| {
            let v: serde_json::Value = serde_json::from_str(s).unwrap_or_default();
            let mut v = v;
            if let Some(nodes) = v.pointer_mut("/node/nodes").and_then(|n| n.as_array_mut()) {
                for n in nodes {
                    if let Some(o) = n.as_object_mut() {
                        o.remove("ttl");
                    }
                }
            }
            v
        };
        if got.0 == 200 && strip(&got.1) == strip(&want.1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the member behind never caught up:\n{}\nwant\n{}",
            got.1,
            want.1
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // It goes on applying v2 writes from there, at the same store indexes.
    let (status, body) = request(&at(leader), "PUT", "/v2/keys/after?value=2", "", None).await;
    assert_eq!(status, 201, "{body}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, got) = request(&at(behind), "GET", "/v2/keys/after", "", None).await;
        if status == 200 {
            let index = |s: &str| {
                serde_json::from_str::<serde_json::Value>(s).unwrap()["node"]["modifiedIndex"]
                    .as_u64()
            };
            assert_eq!(
                index(&got),
                index(&body),
                "the same store index on every member"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the write never reached it");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A write whose client gave up while no leader was known never commits later: with two of
/// three members down, a put through the third waits for a leader and its client's deadline
/// (`grpc-timeout`, 500 ms) passes; a member then comes back, a leader is elected, and the
/// put must not appear. (It used to be held for the server's whole request timeout, 5.4 s
/// here, and committed once a leader was back: a write the client saw fail, overwriting
/// whatever came after.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_client_gave_up_never_commits_later() {
    use actcd_proto::etcdserverpb::PutRequest;
    use actcd_proto::etcdserverpb::kv_client::KvClient;
    let dir = tempfile::tempdir().unwrap();
    let (mut members, initial, leader) = running_cluster(dir.path(), &[]).await;
    let alive = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    members[leader].kill();
    members[other].kill();
    // The survivor notices it has no leader (an election timeout is 200 ms here).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = members[alive].client().await;
        if c.status().await.is_ok_and(|s| s.leader() == 0) {
            break;
        }
        assert!(Instant::now() < deadline, "the survivor kept a leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", members[alive].endpoint()))
            .unwrap()
            .connect()
            .await
            .unwrap();
    let mut kv = KvClient::new(channel);
    let mut put = tonic::Request::new(PutRequest {
        key: b"given-up".to_vec(),
        value: b"x".to_vec(),
        ..Default::default()
    });
    put.set_timeout(Duration::from_millis(500));
    let answer = kv.put(put).await;
    assert!(
        answer.is_err(),
        "no leader: the put cannot succeed, got {answer:?}"
    );
    // A quorum again, well within the server's own request timeout.
    members[other].spawn(&initial);
    let new_leader = leader_index(&members, &[alive, other]).await;
    let mut c = members[new_leader].client().await;
    put_eventually(&mut c, "after").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let got = c.get("given-up", None).await.unwrap();
    assert_eq!(
        got.count(),
        0,
        "a write its client saw fail committed later"
    );
}
