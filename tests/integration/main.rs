//! Integration tests: real `actcd` processes on 127.0.0.1, driven with the `etcd-client` crate.
//!
//! Each test starts its own server on free ports with its own data directory, so tests run in
//! parallel. Nothing is mocked: every write goes front → preflight → raft → WAL → applier → MVCC →
//! LMDB.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod auth;
mod auth_bytes;
mod cluster;
mod corrupt;
mod corruption;
mod elections;
mod failpoints;
mod fatal;
mod fixes_3_5;
mod fixes_3_6;
mod flags;
mod gateway;
mod hostile;
mod http;
mod lease;
mod linearizability;
mod listeners;
mod lock;
mod maintenance;
mod membership;
mod memory;
mod metrics;
mod old_clients;
mod range_stream;
mod ready;
mod restart_memory;
mod routes_audit;
mod security;
mod security_kept;
mod tls;
mod tls_go;
mod upgrade;
mod v2;
mod watch;

use etcd_client::{
    Client, Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, SortOrder, SortTarget, Txn,
    TxnOp, TxnOpResponse,
};

/// A command that runs the actcd binary under test. Unless the run names a layout
/// (`ACTCD_FRONT_THREADS` set, as on a machine where that is wanted), each test's members get
/// one of three thread layouts, chosen by the test's name so a test always runs in the same
/// one: the gRPC front sharing the actors' thread (what a 2-core machine such as CI's gets),
/// the same with a helper thread accepting on the same listeners (`ACTCD_FRONT_HELPERS=1`,
/// issue 27's layout that grows with cores), or the front on two threads of its own (what
/// bigger machines get). One pass of the suite so covers every layout.
pub(crate) fn actcd_command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_actcd"));
    if std::env::var_os("ACTCD_FRONT_THREADS").is_none() {
        let (threads, helpers) = front_layout_of_this_test();
        cmd.env("ACTCD_FRONT_THREADS", threads);
        if std::env::var_os("ACTCD_FRONT_HELPERS").is_none() {
            cmd.env("ACTCD_FRONT_HELPERS", helpers);
        }
    }
    cmd
}

/// One HTTP/1.1 request on the stream `connect` opens (plain, TLS or a unix socket), the
/// connection closed after it: (status, body), or why there was none, all within 10 s. `host`
/// is the Host header.
pub(crate) async fn http1_exchange<S, F>(
    connect: F,
    host: &str,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    F: std::future::Future<Output = std::io::Result<S>>,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let talk = async {
        let mut s = connect.await?;
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await?;
        let mut raw = Vec::new();
        // A server that closes without TLS's close_notify still said all it had to.
        match s.read_to_end(&mut raw).await {
            Err(e) if e.kind() != std::io::ErrorKind::UnexpectedEof || raw.is_empty() => {
                return Err(e);
            }
            _ => {}
        }
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&raw).into_owned())
    };
    let text = tokio::time::timeout(Duration::from_secs(10), talk)
        .await
        .map_err(|_| "timed out".to_string())?
        .map_err(|e| e.to_string())?;
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("not an HTTP/1.1 answer: {text:?}"))?;
    let status = head
        .strip_prefix("HTTP/1.1 ")
        .and_then(|h| h.split(' ').next())
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP/1.1 status line: {head:?}"))?;
    Ok((status, rest.to_string()))
}

/// `ACTCD_FRONT_THREADS` for the test running on this thread (libtest names each test's
/// thread after the test): FNV-1a of the name, odd → a front of its own.
fn front_layout_of_this_test() -> (&'static str, &'static str) {
    let name = std::thread::current().name().unwrap_or("").to_string();
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    match (hash % 2, (hash >> 1) % 2) {
        (1, _) => ("2", "0"),
        (_, 1) => ("0", "1"),
        _ => ("0", "0"),
    }
}

/// A port no one listens on, handed out once per test process.
///
/// Not the kernel's `bind(0)`: a port from the ephemeral range, free when asked, can be taken as
/// the source port of any outgoing connection (clients, peers) before the server binds it, and
/// the member then fails with "address already in use". Ports here come from below that range,
/// where the kernel never picks, in a walk no two tests of this process share.
fn free_port() -> u16 {
    use std::sync::atomic::AtomicU16;
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (base, span) = (
        low.saturating_sub(12_000).max(1024),
        12_000u16.min(low.saturating_sub(1024).max(1)),
    );
    // Start each test process elsewhere so two runs side by side rarely meet.
    let _ = NEXT.compare_exchange(
        0,
        (std::process::id() % u32::from(span)) as u16 + 1,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = base + n % span;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

struct Server {
    child: Option<Child>,
    dir: PathBuf,
    port: u16,
    peer_port: u16,
    extra: Vec<String>,
    env: Vec<(String, String)>,
    /// Of the client URL: `http`, or `https` for the TLS tests.
    scheme: &'static str,
}

impl Server {
    fn start(dir: &Path) -> Self {
        Self::start_with(dir, &[])
    }

    fn start_with(dir: &Path, extra: &[&str]) -> Self {
        let mut s = Server {
            child: None,
            dir: dir.to_path_buf(),
            port: free_port(),
            peer_port: free_port(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            scheme: "http",
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let child = self
            .command()
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start actcd");
        self.child = Some(child);
    }

    /// The command line `spawn` runs.
    fn command(&self) -> Command {
        let peer = self.peer_port;
        let client_url = format!("{}://127.0.0.1:{}", self.scheme, self.port);
        let peer_url = format!("http://127.0.0.1:{peer}");
        // `--name`'s default, unless the test names the member (a data dir made under a name).
        let name = self
            .env
            .iter()
            .find(|(k, _)| k == "ETCD_NAME")
            .map_or("default", |(_, v)| v.as_str());
        let mut cmd = actcd_command();
        cmd.arg("--data-dir")
            .arg(&self.dir)
            .args([
                "--listen-client-urls",
                &client_url,
                "--advertise-client-urls",
                &client_url,
            ])
            .args([
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
            ])
            .args(["--initial-cluster", &format!("{name}={peer_url}")])
            .args(&self.extra)
            .env("RUST_LOG", "warn")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd
    }

    fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Connects once the server answers a read.
    async fn client(&self) -> Client {
        for _ in 0..400 {
            if let Ok(mut c) = Client::connect([self.endpoint()], None).await
                && c.get("health-probe", None).await.is_ok()
            {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("actcd on {} never became ready", self.endpoint());
    }

    fn signal(&mut self, sig: &str) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args([sig, &c.id().to_string()])
                .status();
            let _ = c.wait();
        }
    }

    fn kill(&mut self) {
        self.signal("-KILL");
    }

    fn stop(&mut self) {
        self.signal("-TERM");
    }

    fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Turns auth on with `root` (password `rootpw`) and `alice` (`alicepw`), who may read and
/// write the keys under `prefix` only; answers a client logged in as alice.
async fn auth_on_with_alice(srv: &Server, c: &mut Client, prefix: &str) -> Client {
    use etcd_client::{ConnectOptions, Permission};
    c.user_add("root", "rootpw", None).await.unwrap();
    c.user_grant_role("root", "root").await.unwrap();
    c.user_add("alice", "alicepw", None).await.unwrap();
    c.role_add("alice-role").await.unwrap();
    c.role_grant_permission("alice-role", Permission::read_write(prefix).with_prefix())
        .await
        .unwrap();
    c.user_grant_role("alice", "alice-role").await.unwrap();
    c.auth_enable().await.unwrap();
    Client::connect(
        [srv.endpoint()],
        Some(ConnectOptions::new().with_user("alice", "alicepw")),
    )
    .await
    .unwrap()
}

fn code_and_message(e: etcd_client::Error) -> (tonic::Code, String) {
    match e {
        etcd_client::Error::GRpcStatus(s) => (s.code(), s.message().to_string()),
        other => panic!("not a gRPC status: {other:?}"),
    }
}

fn keys(resp: &etcd_client::GetResponse) -> Vec<String> {
    resp.kvs()
        .iter()
        .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
        .collect()
}

#[tokio::test]
async fn put_get_versions_and_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;

    let r = c.put("foo", "bar", None).await.unwrap();
    assert_eq!(r.header().unwrap().revision(), 2);
    let r = c
        .put("foo", "baz", Some(PutOptions::new().with_prev_key()))
        .await
        .unwrap();
    assert_eq!(r.prev_key().unwrap().value(), b"bar");
    let g = c.get("foo", None).await.unwrap();
    let kv = &g.kvs()[0];
    assert_eq!(
        (
            kv.value(),
            kv.version(),
            kv.create_revision(),
            kv.mod_revision()
        ),
        (&b"baz"[..], 2, 2, 3)
    );
    assert_eq!(g.header().unwrap().revision(), 3);
    let h = g.header().unwrap();
    assert_ne!(h.cluster_id(), 0);
    assert_ne!(h.member_id(), 0);
    assert!(h.raft_term() >= 1);

    // ignore_value keeps the value, ignore_lease the lease.
    c.put("foo", "", Some(PutOptions::new().with_ignore_value()))
        .await
        .unwrap();
    let g = c.get("foo", None).await.unwrap();
    assert_eq!((g.kvs()[0].value(), g.kvs()[0].version()), (&b"baz"[..], 3));
    c.put("foo", "qux", Some(PutOptions::new().with_ignore_lease()))
        .await
        .unwrap();

    // Old revisions stay readable.
    let g = c
        .get("foo", Some(GetOptions::new().with_revision(2)))
        .await
        .unwrap();
    assert_eq!(g.kvs()[0].value(), b"bar");
    // Delete and recreate starts a new generation.
    c.delete("foo", None).await.unwrap();
    assert!(c.get("foo", None).await.unwrap().kvs().is_empty());
    let r = c.put("foo", "again", None).await.unwrap();
    let g = c.get("foo", None).await.unwrap();
    assert_eq!(g.kvs()[0].version(), 1);
    assert_eq!(g.kvs()[0].create_revision(), r.header().unwrap().revision());
}

#[tokio::test]
async fn range_options() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    for (k, v) in [("a", "3"), ("b", "1"), ("b1", "2"), ("b2", "0"), ("c", "5")] {
        c.put(k, v, None).await.unwrap();
    }
    c.put("b1", "22", None).await.unwrap(); // b1: version 2, mod rev 7

    struct Case {
        name: &'static str,
        key: &'static str,
        opts: GetOptions,
        want_keys: Vec<&'static str>,
        want_count: i64,
        want_more: bool,
    }
    let cases = vec![
        Case {
            name: "single",
            key: "b",
            opts: GetOptions::new(),
            want_keys: vec!["b"],
            want_count: 1,
            want_more: false,
        },
        Case {
            name: "missing",
            key: "zz",
            opts: GetOptions::new(),
            want_keys: vec![],
            want_count: 0,
            want_more: false,
        },
        Case {
            name: "range",
            key: "b",
            opts: GetOptions::new().with_range("c"),
            want_keys: vec!["b", "b1", "b2"],
            want_count: 3,
            want_more: false,
        },
        Case {
            name: "prefix",
            key: "b",
            opts: GetOptions::new().with_prefix(),
            want_keys: vec!["b", "b1", "b2"],
            want_count: 3,
            want_more: false,
        },
        Case {
            name: "from key",
            key: "b2",
            opts: GetOptions::new().with_from_key(),
            want_keys: vec!["b2", "c"],
            want_count: 2,
            want_more: false,
        },
        Case {
            name: "all keys",
            key: "",
            opts: GetOptions::new().with_all_keys(),
            want_keys: vec!["a", "b", "b1", "b2", "c"],
            want_count: 5,
            want_more: false,
        },
        Case {
            name: "limit",
            key: "",
            opts: GetOptions::new().with_all_keys().with_limit(2),
            want_keys: vec!["a", "b"],
            want_count: 5,
            want_more: true,
        },
        Case {
            name: "limit exact",
            key: "b",
            opts: GetOptions::new().with_prefix().with_limit(3),
            want_keys: vec!["b", "b1", "b2"],
            want_count: 3,
            want_more: false,
        },
        Case {
            name: "sort key desc",
            key: "b",
            opts: GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Key, SortOrder::Descend),
            want_keys: vec!["b2", "b1", "b"],
            want_count: 3,
            want_more: false,
        },
        Case {
            name: "sort value asc",
            key: "",
            opts: GetOptions::new()
                .with_all_keys()
                .with_sort(SortTarget::Value, SortOrder::Ascend),
            want_keys: vec!["b2", "b", "b1", "a", "c"],
            want_count: 5,
            want_more: false,
        },
        Case {
            name: "sort version desc then limit",
            key: "",
            opts: GetOptions::new()
                .with_all_keys()
                .with_sort(SortTarget::Version, SortOrder::Descend)
                .with_limit(1),
            want_keys: vec!["b1"],
            want_count: 5,
            want_more: true,
        },
        Case {
            name: "sort mod asc",
            key: "",
            opts: GetOptions::new()
                .with_all_keys()
                .with_sort(SortTarget::Mod, SortOrder::Ascend),
            want_keys: vec!["a", "b", "b2", "c", "b1"],
            want_count: 5,
            want_more: false,
        },
        Case {
            name: "sort create desc",
            key: "",
            opts: GetOptions::new()
                .with_all_keys()
                .with_sort(SortTarget::Create, SortOrder::Descend),
            want_keys: vec!["c", "b2", "b1", "b", "a"],
            want_count: 5,
            want_more: false,
        },
        Case {
            name: "min mod rev",
            key: "",
            opts: GetOptions::new().with_all_keys().with_min_mod_revision(6),
            want_keys: vec!["b1", "c"],
            want_count: 5,
            want_more: false,
        },
        Case {
            name: "max create rev",
            key: "",
            opts: GetOptions::new()
                .with_all_keys()
                .with_max_create_revision(3),
            want_keys: vec!["a", "b"],
            want_count: 5,
            want_more: false,
        },
        Case {
            name: "serializable",
            key: "a",
            opts: GetOptions::new().with_serializable(),
            want_keys: vec!["a"],
            want_count: 1,
            want_more: false,
        },
        Case {
            name: "historical",
            key: "",
            opts: GetOptions::new().with_all_keys().with_revision(3),
            want_keys: vec!["a", "b"],
            want_count: 2,
            want_more: false,
        },
    ];
    for case in cases {
        let r = c.get(case.key, Some(case.opts)).await.unwrap();
        assert_eq!(keys(&r), case.want_keys, "{}", case.name);
        assert_eq!(r.count(), case.want_count, "{}", case.name);
        assert_eq!(r.more(), case.want_more, "{}", case.name);
    }

    let r = c
        .get("b", Some(GetOptions::new().with_prefix().with_keys_only()))
        .await
        .unwrap();
    assert!(r.kvs().iter().all(|kv| kv.value().is_empty()));
    assert_eq!(r.kvs().len(), 3);
    let r = c
        .get("b", Some(GetOptions::new().with_prefix().with_count_only()))
        .await
        .unwrap();
    assert!(r.kvs().is_empty());
    assert_eq!(r.count(), 3);
}

#[tokio::test]
async fn delete_range_and_prev_kv() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    for k in ["k1", "k2", "k3", "x"] {
        c.put(k, format!("v-{k}"), None).await.unwrap();
    }
    let d = c
        .delete(
            "k",
            Some(DeleteOptions::new().with_prefix().with_prev_key()),
        )
        .await
        .unwrap();
    assert_eq!(d.deleted(), 3);
    let prev: Vec<_> = d.prev_kvs().iter().map(|kv| kv.value().to_vec()).collect();
    assert_eq!(
        prev,
        vec![b"v-k1".to_vec(), b"v-k2".to_vec(), b"v-k3".to_vec()]
    );
    // One revision for the whole delete.
    assert_eq!(d.header().unwrap().revision(), 6);
    // Deleting nothing does not advance the revision.
    let d = c.delete("nothing", None).await.unwrap();
    assert_eq!((d.deleted(), d.header().unwrap().revision()), (0, 6));
    let r = c
        .get("", Some(GetOptions::new().with_all_keys()))
        .await
        .unwrap();
    assert_eq!(keys(&r), vec!["x"]);
}

#[tokio::test]
async fn txn_compares_branches_and_one_revision() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    c.put("a", "1", None).await.unwrap(); // rev 2
    c.put("b", "2", None).await.unwrap(); // rev 3

    struct Case {
        name: &'static str,
        cmp: Compare,
        want_succeeded: bool,
    }
    let cases = vec![
        Case {
            name: "value equal",
            cmp: Compare::value("a", CompareOp::Equal, "1"),
            want_succeeded: true,
        },
        Case {
            name: "value greater",
            cmp: Compare::value("a", CompareOp::Greater, "0"),
            want_succeeded: true,
        },
        Case {
            name: "value less fails",
            cmp: Compare::value("a", CompareOp::Less, "0"),
            want_succeeded: false,
        },
        Case {
            name: "value not equal",
            cmp: Compare::value("a", CompareOp::NotEqual, "x"),
            want_succeeded: true,
        },
        Case {
            name: "version",
            cmp: Compare::version("a", CompareOp::Equal, 1),
            want_succeeded: true,
        },
        Case {
            name: "missing key version 0",
            cmp: Compare::version("nope", CompareOp::Equal, 0),
            want_succeeded: true,
        },
        Case {
            name: "missing key value fails",
            cmp: Compare::value("nope", CompareOp::Equal, ""),
            want_succeeded: false,
        },
        Case {
            name: "create",
            cmp: Compare::create_revision("b", CompareOp::Equal, 3),
            want_succeeded: true,
        },
        Case {
            name: "mod less",
            cmp: Compare::mod_revision("b", CompareOp::Less, 3),
            want_succeeded: false,
        },
        Case {
            name: "lease",
            cmp: Compare::lease("a", CompareOp::Equal, 0),
            want_succeeded: true,
        },
        Case {
            name: "range all versions > 0",
            cmp: Compare::version("a", CompareOp::Greater, 0).with_range("c"),
            want_succeeded: true,
        },
        Case {
            name: "prefix compare",
            cmp: Compare::value("a", CompareOp::Equal, "1").with_prefix(),
            want_succeeded: true,
        },
    ];
    for case in cases {
        let t = Txn::new()
            .when(vec![case.cmp])
            .and_then(vec![TxnOp::get("a", None)])
            .or_else(vec![TxnOp::get("b", None)]);
        let r = c.txn(t).await.unwrap();
        assert_eq!(r.succeeded(), case.want_succeeded, "{}", case.name);
        // Read-only txns do not advance the revision.
        assert_eq!(r.header().unwrap().revision(), 3, "{}", case.name);
    }

    // All writes of a txn share one revision; reads inside see earlier writes; nested txns run.
    let t = Txn::new()
        .when(vec![Compare::value("a", CompareOp::Equal, "1")])
        .and_then(vec![
            TxnOp::put("a", "10", None),
            TxnOp::put("c", "30", None),
            TxnOp::get("c", None),
            TxnOp::txn(Txn::new().and_then(vec![TxnOp::delete("b", None)])),
        ]);
    let r = c.txn(t).await.unwrap();
    assert!(r.succeeded());
    assert_eq!(r.header().unwrap().revision(), 4);
    let ops = r.op_responses();
    assert_eq!(ops.len(), 4);
    match &ops[2] {
        TxnOpResponse::Get(g) => assert_eq!(g.kvs()[0].value(), b"30"),
        other => panic!("unexpected {other:?}"),
    }
    match &ops[3] {
        TxnOpResponse::Txn(t) => assert!(t.succeeded()),
        other => panic!("unexpected {other:?}"),
    }
    for (k, want_mod) in [("a", 4), ("c", 4)] {
        assert_eq!(
            c.get(k, None).await.unwrap().kvs()[0].mod_revision(),
            want_mod
        );
    }
    assert!(c.get("b", None).await.unwrap().kvs().is_empty());
}

#[tokio::test]
async fn errors_match_etcd_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start_with(dir.path(), &["--max-txn-ops", "4"]);
    let mut c = srv.client().await;
    c.put("k", "v", None).await.unwrap();
    use tonic::Code;
    let big = vec![b'x'; 2 * 1024 * 1024 - 1024];
    let many: Vec<TxnOp> = (0..5)
        .map(|i| TxnOp::put(format!("m{i}"), "v", None))
        .collect();
    struct Case {
        name: &'static str,
        result: Result<(), etcd_client::Error>,
        want: (Code, &'static str),
    }
    let cases = vec![
        Case {
            name: "empty key put",
            result: c.put("", "v", None).await.map(|_| ()),
            want: (Code::InvalidArgument, "etcdserver: key is not provided"),
        },
        Case {
            name: "empty key get",
            result: c.get("", None).await.map(|_| ()),
            want: (Code::InvalidArgument, "etcdserver: key is not provided"),
        },
        Case {
            name: "empty key delete",
            result: c.delete("", None).await.map(|_| ()),
            want: (Code::InvalidArgument, "etcdserver: key is not provided"),
        },
        Case {
            name: "future revision",
            result: c
                .get("k", Some(GetOptions::new().with_revision(99)))
                .await
                .map(|_| ()),
            want: (
                Code::OutOfRange,
                "etcdserver: mvcc: required revision is a future revision",
            ),
        },
        Case {
            name: "lease not found",
            result: c
                .put("k", "v2", Some(PutOptions::new().with_lease(12345)))
                .await
                .map(|_| ()),
            want: (Code::NotFound, "etcdserver: requested lease not found"),
        },
        Case {
            name: "ignore value on missing key",
            result: c
                .put("nokey", "", Some(PutOptions::new().with_ignore_value()))
                .await
                .map(|_| ()),
            want: (Code::InvalidArgument, "etcdserver: key not found"),
        },
        Case {
            name: "value with ignore_value",
            result: c
                .put("k", "x", Some(PutOptions::new().with_ignore_value()))
                .await
                .map(|_| ()),
            want: (Code::InvalidArgument, "etcdserver: value is provided"),
        },
        Case {
            name: "too large",
            result: c.put("k", big.clone(), None).await.map(|_| ()),
            want: (Code::InvalidArgument, "etcdserver: request is too large"),
        },
        Case {
            name: "too many ops",
            result: c.txn(Txn::new().and_then(many)).await.map(|_| ()),
            want: (
                Code::InvalidArgument,
                "etcdserver: too many operations in txn request",
            ),
        },
        Case {
            name: "duplicate key",
            result: c
                .txn(
                    Txn::new()
                        .and_then(vec![TxnOp::put("d", "1", None), TxnOp::put("d", "2", None)]),
                )
                .await
                .map(|_| ()),
            want: (
                Code::InvalidArgument,
                "etcdserver: duplicate key given in txn request",
            ),
        },
        Case {
            name: "txn put with missing lease",
            result: c
                .txn(Txn::new().and_then(vec![
                    TxnOp::put("t1", "1", None),
                    TxnOp::put("t2", "2", Some(PutOptions::new().with_lease(7))),
                ]))
                .await
                .map(|_| ()),
            want: (Code::NotFound, "etcdserver: requested lease not found"),
        },
    ];
    for case in cases {
        let (code, msg) = code_and_message(case.result.expect_err(case.name));
        assert_eq!((code, msg.as_str()), case.want, "{}", case.name);
    }
    // Nothing above changed anything.
    let r = c
        .get("", Some(GetOptions::new().with_all_keys()))
        .await
        .unwrap();
    assert_eq!(keys(&r), vec!["k"]);
    assert_eq!(r.header().unwrap().revision(), 2);
    assert_eq!(r.kvs()[0].value(), b"v");
}

#[tokio::test]
async fn compaction() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    for i in 0..5 {
        c.put("k", format!("v{i}"), None).await.unwrap(); // revs 2..=6
    }
    c.put("gone", "x", None).await.unwrap(); // 7
    c.delete("gone", None).await.unwrap(); // 8
    c.compact(
        4,
        Some(etcd_client::CompactionOptions::new().with_physical()),
    )
    .await
    .unwrap();
    let (code, msg) = code_and_message(
        c.get("k", Some(GetOptions::new().with_revision(3)))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, msg.as_str()),
        (
            tonic::Code::OutOfRange,
            "etcdserver: mvcc: required revision has been compacted"
        )
    );
    // The compacted revision itself and later ones stay readable.
    assert_eq!(
        c.get("k", Some(GetOptions::new().with_revision(4)))
            .await
            .unwrap()
            .kvs()[0]
            .value(),
        b"v2"
    );
    assert_eq!(
        c.get("k", Some(GetOptions::new().with_revision(5)))
            .await
            .unwrap()
            .kvs()[0]
            .value(),
        b"v3"
    );
    let (_, msg) = code_and_message(c.compact(4, None).await.unwrap_err());
    assert_eq!(
        msg,
        "etcdserver: mvcc: required revision has been compacted"
    );
    let (_, msg) = code_and_message(c.compact(100, None).await.unwrap_err());
    assert_eq!(
        msg,
        "etcdserver: mvcc: required revision is a future revision"
    );
    c.compact(8, None).await.unwrap();
    assert_eq!(c.get("k", None).await.unwrap().kvs()[0].value(), b"v4");
    assert!(c.get("gone", None).await.unwrap().kvs().is_empty());
}

#[tokio::test]
async fn restart_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server::start_with(
        dir.path(),
        &["--snapshot-count", "50", "--snapshot-catchup-entries", "10"],
    );
    let mut c = srv.client().await;
    for i in 0..200 {
        c.put(format!("key{i:03}"), format!("value{i}"), None)
            .await
            .unwrap();
    }
    c.delete("key000", None).await.unwrap();
    c.compact(100, None).await.unwrap();
    let before = c
        .get("", Some(GetOptions::new().with_all_keys()))
        .await
        .unwrap();
    srv.restart();
    let mut c = srv.client().await;
    let after = c
        .get("", Some(GetOptions::new().with_all_keys()))
        .await
        .unwrap();
    type Flat = (Vec<u8>, Vec<u8>, i64, i64, i64);
    let flat = |r: &etcd_client::GetResponse| -> Vec<Flat> {
        r.kvs()
            .iter()
            .map(|kv| {
                (
                    kv.key().to_vec(),
                    kv.value().to_vec(),
                    kv.create_revision(),
                    kv.mod_revision(),
                    kv.version(),
                )
            })
            .collect()
    };
    assert_eq!(flat(&after), flat(&before));
    assert_eq!(after.kvs().len(), 199);
    assert_eq!(
        after.header().unwrap().revision(),
        before.header().unwrap().revision()
    );
    let (_, msg) = code_and_message(
        c.get("key001", Some(GetOptions::new().with_revision(50)))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        msg,
        "etcdserver: mvcc: required revision has been compacted"
    );
    // And it keeps taking writes at the next revision.
    let r = c.put("after", "restart", None).await.unwrap();
    assert_eq!(
        r.header().unwrap().revision(),
        before.header().unwrap().revision() + 1
    );
    let member = r.header().unwrap().member_id();

    // Restarted with other --initial-cluster flags, a member keeps the identity in its WAL.
    srv.peer_port = free_port();
    srv.restart();
    let mut c = srv.client().await;
    let r = c.get("after", None).await.unwrap();
    assert_eq!(r.header().unwrap().member_id(), member);
    assert_eq!(r.kvs()[0].value(), b"restart");
}

/// SIGKILL while many clients write: every acknowledged write must be there after restart.
#[tokio::test]
async fn crash_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server::start(dir.path());
    for round in 0..3 {
        let c = srv.client().await;
        let acked = Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut writers = Vec::new();
        for w in 0..8 {
            let mut c = c.clone();
            let acked = acked.clone();
            let stop = stop.clone();
            writers.push(tokio::spawn(async move {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("r{round}/w{w}/{i}");
                    if c.put(key.clone(), key.clone(), None).await.is_ok() {
                        acked.lock().unwrap().push(key);
                    } else {
                        break;
                    }
                    i += 1;
                }
            }));
        }
        // Let writes flow, then kill mid-stream.
        while acked.lock().unwrap().len() < 200 * (round + 1) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        srv.kill();
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            let _ = w.await;
        }
        srv.spawn();
        let mut c = srv.client().await;
        let acked = acked.lock().unwrap().clone();
        assert!(!acked.is_empty());
        for key in &acked {
            let r = c
                .get(key.as_str(), Some(GetOptions::new().with_serializable()))
                .await
                .unwrap();
            assert_eq!(r.kvs().len(), 1, "round {round}: acknowledged {key} lost");
            assert_eq!(r.kvs()[0].value(), key.as_bytes());
        }
    }
}

/// Random and hostile input: the server answers each request and nothing changes that shouldn't.
#[tokio::test]
async fn hostile_input_never_breaks_the_server() {
    use rand::Rng;
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    c.put("stable", "value", None).await.unwrap();
    let mut rng = rand::rng();
    for _ in 0..200 {
        let klen = rng.random_range(0..64);
        let key: Vec<u8> = (0..klen).map(|_| rng.random()).collect();
        let end: Vec<u8> = (0..rng.random_range(0..4)).map(|_| rng.random()).collect();
        let rev: i64 = rng.random_range(-5..20);
        let limit: i64 = [i64::MIN, -1, 0, 1, i64::MAX][rng.random_range(0..5)];
        let opts = GetOptions::new()
            .with_range(end.clone())
            .with_revision(rev)
            .with_limit(limit);
        let _ = c.get(key.clone(), Some(opts)).await;
        let _ = c
            .get(key.clone(), Some(GetOptions::new().with_range(end)))
            .await;
        let val: Vec<u8> = (0..rng.random_range(0..256))
            .map(|_| rng.random())
            .collect();
        if !key.is_empty() && key != b"stable" {
            c.put(key.clone(), val, None).await.unwrap();
            c.delete(key, None).await.unwrap();
        }
    }
    let r = c.get("stable", None).await.unwrap();
    assert_eq!(r.kvs()[0].value(), b"value");
    assert_eq!(r.kvs()[0].version(), 1);
    let (_, msg) = code_and_message(c.compact(i64::MAX, None).await.unwrap_err());
    assert_eq!(
        msg,
        "etcdserver: mvcc: required revision is a future revision"
    );
}

#[tokio::test]
async fn status_and_member_list() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    c.put("k", "v", None).await.unwrap();
    let s = c.status().await.unwrap();
    assert_eq!(s.version(), actcd::node::API_VERSION);
    assert_eq!(s.leader(), s.header().unwrap().member_id());
    assert!(s.raft_index() >= 2);
    assert!(s.db_size() > 0);
    let m = c.member_list().await.unwrap();
    assert_eq!(m.members().len(), 1);
    assert_eq!(
        m.members()[0].client_urls(),
        [format!("http://{}", srv.endpoint())]
    );
}

/// Flags can come from etcd's environment variables.
#[tokio::test]
async fn etcd_environment_variables_set_flags() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server::start(dir.path());
    srv.kill();
    srv.env.push(("ETCD_MAX_TXN_OPS".into(), "2".into()));
    srv.spawn();
    let mut c = srv.client().await;
    let ops: Vec<TxnOp> = (0..3)
        .map(|i| TxnOp::put(format!("e{i}"), "v", None))
        .collect();
    let (_, msg) = code_and_message(c.txn(Txn::new().and_then(ops)).await.unwrap_err());
    assert_eq!(msg, "etcdserver: too many operations in txn request");
}

/// A WAL damaged anywhere but its tail stops the server at start-up, naming file and offset;
/// a torn tail (a crash mid-write) is cut off and the server starts.
#[tokio::test]
async fn wal_corruption_refuses_start_and_torn_tail_is_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server::start(dir.path());
    let mut c = srv.client().await;
    for i in 0..50 {
        c.put(format!("w{i}"), "x".repeat(100), None).await.unwrap();
    }
    srv.stop();
    let wal_dir = dir.path().join("member/wal");
    let mut segments: Vec<_> = std::fs::read_dir(&wal_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    segments.sort();
    let seg = segments.last().unwrap().clone();
    let pristine = std::fs::read(&seg).unwrap();

    // A torn tail: the last record lost its final bytes.
    std::fs::write(&seg, &pristine[..pristine.len() - 3]).unwrap();
    srv.spawn();
    let mut c = srv.client().await;
    assert_eq!(c.get("w0", None).await.unwrap().kvs().len(), 1);
    srv.stop();

    // One flipped byte in the middle of the records (the segment ends in preallocated zeros).
    let mut damaged = std::fs::read(&seg).unwrap();
    let used = damaged.iter().rposition(|&b| b != 0).unwrap() + 1;
    damaged[used / 2] ^= 0xff;
    std::fs::write(&seg, &damaged).unwrap();
    let mut child = actcd_command()
        .arg("--data-dir")
        .arg(dir.path())
        .args([
            "--listen-client-urls",
            &format!("http://127.0.0.1:{}", free_port()),
        ])
        .env("RUST_LOG", "error")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // It must refuse at once; a server that starts anyway is killed so the test fails, not hangs.
    let mut status = None;
    for _ in 0..200 {
        status = child.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if status.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        matches!(status, Some(s) if !s.success()),
        "actcd started on a corrupt WAL"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let file = seg.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        err.contains(&file) && err.contains("offset"),
        "unexpected error: {err}"
    );
}

/// Requests no typed client would build (unknown enum numbers, empty ops, deep nesting), sent
/// with the raw protocol: each gets an answer or etcd's error, and nothing changes.
#[tokio::test]
async fn raw_protocol_oddities_are_answered() {
    use actcd_proto::etcdserverpb::kv_client::KvClient;
    use actcd_proto::etcdserverpb::{
        Compare as PbCompare, PutRequest, RangeRequest, RequestOp, TxnRequest, compare, request_op,
    };
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    c.put("k", "v", None).await.unwrap();
    let mut kv = KvClient::connect(format!("http://{}", srv.endpoint()))
        .await
        .unwrap();

    let odd_sort = RangeRequest {
        key: b"k".to_vec(),
        sort_order: 7,
        sort_target: 99,
        ..Default::default()
    };
    let st = kv.range(odd_sort).await.unwrap_err();
    assert_eq!(
        (st.code(), st.message()),
        (
            tonic::Code::InvalidArgument,
            "etcdserver: invalid sort option"
        )
    );

    let empty_op = TxnRequest {
        success: vec![RequestOp { request: None }],
        ..Default::default()
    };
    let st = kv.txn(empty_op).await.unwrap_err();
    assert_eq!(st.message(), "etcdserver: key not found");

    // Unknown compare target and result: etcd lets such a compare pass.
    let odd_cmp = PbCompare {
        key: b"k".to_vec(),
        target: 42,
        result: 42,
        target_union: Some(compare::TargetUnion::Version(1)),
        ..Default::default()
    };
    let put = |k: &str| RequestOp {
        request: Some(request_op::Request::RequestPut(PutRequest {
            key: k.as_bytes().to_vec(),
            value: b"x".to_vec(),
            ..Default::default()
        })),
    };
    let t = TxnRequest {
        compare: vec![odd_cmp],
        success: vec![put("odd")],
        failure: vec![],
    };
    assert!(kv.txn(t).await.unwrap().into_inner().succeeded);

    // A txn nested 40 deep (prost decodes at most 100 nested messages), each level reading: served, no stack trouble.
    let mut t = TxnRequest {
        success: vec![],
        ..Default::default()
    };
    for _ in 0..40 {
        t = TxnRequest {
            success: vec![RequestOp {
                request: Some(request_op::Request::RequestTxn(t)),
            }],
            ..Default::default()
        };
    }
    assert!(kv.txn(t).await.unwrap().into_inner().succeeded);

    let r = c
        .get("", Some(GetOptions::new().with_all_keys()))
        .await
        .unwrap();
    assert_eq!(keys(&r), vec!["k", "odd"]);
}

/// `--quota-backend-bytes`: writes past the quota are refused with etcd's error and raise the
/// NOSPACE alarm, which caps puts until disarmed; deletes still run; after making room
/// (delete, compact, defragment) and disarming, writes go through again. The alarm survives a
/// restart.
#[tokio::test]
async fn quota_raises_nospace_until_disarmed() {
    use etcd_client::{AlarmAction, AlarmOptions, AlarmType};
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server::start_with(dir.path(), &["--quota-backend-bytes", "1048576"]);
    let mut c = srv.client().await;
    let value = vec![b'x'; 64 * 1024];
    let mut refused = None;
    // Usage reaches preflight every 100 ms, so some puts overshoot the quota before the first
    // refusal; 400 of them (25 MiB) is far more than a report's worth.
    for i in 0..400 {
        match c.put(format!("big{i}"), value.clone(), None).await {
            Ok(_) => {}
            Err(e) => {
                refused = Some(code_and_message(e));
                break;
            }
        }
    }
    assert_eq!(
        refused,
        Some((
            tonic::Code::ResourceExhausted,
            "etcdserver: mvcc: database space exceeded".into()
        ))
    );
    // The alarm is raised through the log; poll until it is applied.
    let mut member = 0;
    for _ in 0..100 {
        let r = c
            .alarm(AlarmAction::Get, AlarmType::None, None)
            .await
            .unwrap();
        if let Some(a) = r.alarms().first() {
            assert_eq!(a.alarm(), AlarmType::Nospace);
            member = a.member_id();
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_ne!(member, 0, "NOSPACE alarm never raised");
    let status = c.status().await.unwrap();
    assert_eq!(
        status.errors(),
        [format!("memberID:{member} alarm:NOSPACE ")]
    );
    // /health says why (etcd's reason), unless told to leave NOSPACE out.
    let (status, body) = http::get(&srv.endpoint(), "/health").await;
    assert_eq!(
        (status, body.as_str()),
        (503, r#"{"health":"false","reason":"ALARM NOSPACE"}"#)
    );
    let (status, _) = http::get(&srv.endpoint(), "/health?exclude=NOSPACE").await;
    assert_eq!(status, 200);
    // Capped: even a small put is refused at apply time; deletes run.
    let (_, msg) = code_and_message(c.put("small", "v", None).await.unwrap_err());
    assert_eq!(msg, "etcdserver: mvcc: database space exceeded");
    srv.restart();
    let mut c = srv.client().await;
    let r = c
        .alarm(AlarmAction::Get, AlarmType::None, None)
        .await
        .unwrap();
    assert_eq!(r.alarms().len(), 1, "the alarm survives a restart");
    let d = c
        .delete("big", Some(DeleteOptions::new().with_prefix()))
        .await
        .unwrap();
    assert!(d.deleted() > 0);
    let rev = d.header().unwrap().revision();
    c.compact(
        rev,
        Some(etcd_client::CompactionOptions::new().with_physical()),
    )
    .await
    .unwrap();
    // Defragmentation gives the freed pages back to the file system; it doesn't disarm.
    let before = c.status().await.unwrap();
    c.defragment().await.unwrap();
    let after = c.status().await.unwrap();
    assert!(
        after.db_size() < before.db_size() / 2,
        "defragmentation shrinks the file: {} -> {}",
        before.db_size(),
        after.db_size()
    );
    let r = c
        .alarm(AlarmAction::Get, AlarmType::None, None)
        .await
        .unwrap();
    assert_eq!(r.alarms().len(), 1, "defragmentation leaves the alarm");
    let mut opts = AlarmOptions::new();
    opts.with_member(member);
    let r = c
        .alarm(AlarmAction::Deactivate, AlarmType::Nospace, Some(opts))
        .await
        .unwrap();
    assert_eq!(r.alarms().len(), 1);
    // Once the freed space is reported, writes fit again.
    let mut last = None;
    for _ in 0..100 {
        match c.put("small", "v", None).await {
            Ok(_) => {
                last = None;
                break;
            }
            Err(e) => last = Some(code_and_message(e)),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(last, None, "puts still refused after compaction and disarm");
}

/// `--auto-compaction-mode periodic --auto-compaction-retention 1s`: history older than about
/// a second is compacted away while writes go on; a bad retention stops start-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_compaction_keeps_only_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start_with(
        dir.path(),
        &[
            "--auto-compaction-mode",
            "periodic",
            "--auto-compaction-retention",
            "1s",
        ],
    );
    let mut c = srv.client().await;
    let first = c
        .put("k", "0", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut i = 0;
    loop {
        i += 1;
        c.put("k", format!("{i}"), None).await.unwrap();
        match c
            .get("k", Some(GetOptions::new().with_revision(first)))
            .await
        {
            Err(e) => {
                let (_, msg) = code_and_message(e);
                assert_eq!(
                    msg,
                    "etcdserver: mvcc: required revision has been compacted"
                );
                break;
            }
            Ok(_) => {
                assert!(std::time::Instant::now() < deadline, "never compacted");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    // What was written in the last moment is still readable at its revision.
    let recent = c
        .put("k", "last", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    assert!(
        c.get("k", Some(GetOptions::new().with_revision(recent)))
            .await
            .is_ok()
    );

    let out = actcd_command()
        .args(["--auto-compaction-mode", "sometimes", "--data-dir"])
        .arg(dir.path().join("other"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown auto-compaction-mode \"sometimes\""),
        "{err}"
    );
}

/// Downgrade answers as etcd answers targets it can't reach (actcd has no older storage version
/// to run as), and there is never a job to cancel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrade_is_refused_as_etcd_refuses_it() {
    use actcd_proto::etcdserverpb::DowngradeRequest;
    use actcd_proto::etcdserverpb::downgrade_request::DowngradeAction;
    use actcd_proto::etcdserverpb::maintenance_client::MaintenanceClient;
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let _ = srv.client().await;
    let mut m = MaintenanceClient::connect(format!("http://{}", srv.endpoint()))
        .await
        .unwrap();
    let cases = [
        (
            DowngradeAction::Validate,
            "3.4",
            tonic::Code::InvalidArgument,
            "etcdserver: invalid downgrade target version",
        ),
        (
            DowngradeAction::Enable,
            "3.4.0",
            tonic::Code::InvalidArgument,
            "etcdserver: invalid downgrade target version",
        ),
        (
            DowngradeAction::Validate,
            "three",
            tonic::Code::InvalidArgument,
            "etcdserver: wrong downgrade target version format",
        ),
        (
            DowngradeAction::Cancel,
            "",
            tonic::Code::FailedPrecondition,
            "etcdserver: no inflight downgrade job",
        ),
    ];
    for (action, version, code, msg) in cases {
        let req = DowngradeRequest {
            action: action as i32,
            version: version.into(),
        };
        let err = m.downgrade(req).await.unwrap_err();
        assert_eq!(
            (err.code(), err.message()),
            (code, msg),
            "{action:?} {version}"
        );
    }
}
