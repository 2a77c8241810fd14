//! etcd's flags, its config file and its unit-file command lines, against real members.
//!
//! - Every flag etcd 3.5.1's own `etcd --help` lists is accepted with the default value that
//!   help shows (found as the auth tests find the binary; skipped where none is installed).
//! - The flags actcd accepts but ignores are each logged once, by name, when set.
//! - A member starts from etcd's YAML config file (ignoring the command line and `ETCD_*`),
//!   and from a command line as etcd's clustering guide and unit files write it (`-data-dir`).
//! - `--wal-dir`, `--strict-reconfig-check`, `--log-outputs` and the refused flags behave as
//!   in etcd.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use actcd::config::{Flags, IGNORED_FLAGS};
use clap::Parser;
use etcd_client::Client;

use crate::auth::etcd_binary;
use crate::cluster::{Member, leader_index};
use crate::free_port;

/// `(flag, default as etcd's help shows it)` for every flag of `etcd --help`.
fn etcd_help_flags(bin: &Path) -> Vec<(String, String)> {
    let out = Command::new(bin).arg("--help").output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let mut flags = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        // Flag lines are indented `--name 'default'` (or a bare number, or nothing).
        if !line.starts_with("--") {
            continue;
        }
        let (name, rest) = line.split_once(' ').unwrap_or((line, ""));
        let rest = rest.trim();
        let default = rest
            .strip_prefix('\'')
            .and_then(|r| r.strip_suffix('\''))
            .unwrap_or(rest);
        flags.push((name.to_string(), default.to_string()));
    }
    flags
}

#[test]
fn every_flag_of_etcd_3_5_1_is_accepted_with_its_default() {
    let Some(bin) = etcd_binary() else {
        eprintln!("no etcd 3.5.1 binary: skipped");
        return;
    };
    let flags = etcd_help_flags(&bin);
    assert!(
        flags.len() >= 85,
        "etcd --help listed {} flags",
        flags.len()
    );
    let mut refused = Vec::new();
    for (name, default) in &flags {
        let value = match (name.as_str(), default.as_str()) {
            // Shown as a template, and as nothing.
            ("--data-dir", _) => "default.etcd".to_string(),
            ("--experimental-bootstrap-defrag-threshold-megabytes", _) => "0".to_string(),
            (_, d) => d.to_string(),
        };
        let argv = ["actcd".to_string(), format!("{name}={value}")];
        if let Err(e) = Flags::try_parse_from(&argv) {
            refused.push(format!("{name}={value}: {e}"));
        }
        // Go's single-dash spelling, as unit files write it.
        let single = actcd::config_file::go_style_args([
            "actcd".to_string(),
            format!("{}={value}", &name[1..]),
        ]);
        if let Err(e) = Flags::try_parse_from(single) {
            refused.push(format!("-{name}={value}: {e}"));
        }
    }
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
    // And unknown flags still fail.
    assert!(Flags::try_parse_from(["actcd", "--no-such-flag=1"]).is_err());
    assert!(
        Flags::try_parse_from(actcd::config_file::go_style_args([
            "actcd",
            "-no-such-flag"
        ]))
        .is_err()
    );
}

/// A non-default value for each ignored flag.
fn ignored_flag_value(flag: &str) -> &'static str {
    match flag {
        "--backend-bbolt-freelist-type" => "array",
        "--max-snapshots" | "--max-wals" => "9",
        "--experimental-distributed-tracing-address" => "localhost:9999",
        "--experimental-distributed-tracing-service-name" => "svc",
        "--experimental-distributed-tracing-instance-id" => "i1",
        "--log-rotation-config-json" => "{\"maxsize\": 5}",
        "--experimental-enable-v2v3" => "/v2v3",
        "--v2-deprecation" => "write-only",
        "--experimental-downgrade-check-time" => "9s",
        "--grpc-keepalive-min-time" => "1s",
        "--discovery-fallback" => "exit",
        "--discovery-proxy" => "http://127.0.0.1:1",
        "--discovery-srv-name" => "x",
        "--proxy-failure-wait"
        | "--proxy-refresh-interval"
        | "--proxy-dial-timeout"
        | "--proxy-write-timeout"
        | "--proxy-read-timeout" => "1234",
        "--experimental-txn-mode-write-with-shared-buffer" => "false",
        "--experimental-compaction-sleep-interval"
        | "--experimental-warning-unary-request-duration" => "1s",
        "--experimental-distributed-tracing-sampling-rate" => "5",
        _ => "true",
    }
}

/// Waits until a member on `port` answers a read; panics after 20 s.
async fn ready_client(port: u16) -> Client {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut c) = Client::connect([format!("127.0.0.1:{port}")], None).await
            && c.get("probe", None).await.is_ok()
        {
            return c;
        }
        assert!(Instant::now() < deadline, "member on {port} never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn ignored_flags_are_logged_once_each_to_the_log_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("member.log");
    let mut m = Member::new("m1", dir.path());
    let initial = format!("m1={}", m.peer_url());
    let mut extra: Vec<String> = IGNORED_FLAGS
        .iter()
        .map(|i| format!("{}={}", i.flag, ignored_flag_value(i.flag)))
        .collect();
    // etcd's output list: the file and stdout (which this test drops).
    extra.push(format!("--log-outputs=stdout,{}", log.display()));
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let flags =
        Flags::try_parse_from(std::iter::once("actcd").chain(extra.iter().copied())).unwrap();
    assert_eq!(flags.ignored_in_use().len(), IGNORED_FLAGS.len());
    m.spawn_with(&initial, &extra);
    let mut c = ready_client(m.client_port).await;
    c.put("k", "v", None).await.unwrap();
    m.stop();
    let text = std::fs::read_to_string(&log).unwrap();
    for i in IGNORED_FLAGS {
        let lines = text
            .lines()
            .filter(|l| l.contains("flag ignored") && l.contains(&format!("flag=\"{}\"", i.flag)))
            .count();
        assert_eq!(lines, 1, "{} logged {lines} times in:\n{text}", i.flag);
    }
}

/// A member's stderr and exit status for a command line that must fail at start-up.
fn failed_start(args: &[&str]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = crate::actcd_command()
        .arg("--data-dir")
        .arg(dir.path())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("actcd {args:?} did not stop");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.success(), err)
}

#[test]
fn flags_that_would_change_what_the_process_is_stop_start_up() {
    for (args, want) in [
        (
            vec!["--discovery=https://discovery.etcd.io/abc"],
            "--discovery=\"https://discovery.etcd.io/abc\" is not supported",
        ),
        (
            vec!["--discovery-srv=example.com"],
            "--discovery-srv=\"example.com\" is not supported",
        ),
        (vec!["--proxy=on"], "--proxy=\"on\" is not supported"),
        (
            vec!["--logger=capnslog"],
            "--logger=capnslog is removed in v3.5",
        ),
        (
            vec!["--log-outputs=/nonexistent/dir/x.log"],
            "couldn't open sink \"/nonexistent/dir/x.log\"",
        ),
        (vec!["--proxy=sideways"], "invalid value"),
        (
            vec!["--enable-v2", "--v2-deprecation=gone"],
            "--enable-v2 and --v2-deprecation=gone are mutually exclusive",
        ),
    ] {
        let (ok, err) = failed_start(&args);
        assert!(!ok, "{args:?} started");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[tokio::test]
async fn a_member_starts_from_etcds_config_file_ignoring_flags_and_variables() {
    let dir = tempfile::tempdir().unwrap();
    let (client, peer) = (free_port(), free_port());
    let data = dir.path().join("data");
    let file = dir.path().join("etcd.conf.yml");
    // The shape of etcd's etcd.conf.yml.sample.
    std::fs::write(
        &file,
        format!(
            "# This is the configuration file for the etcd server.
name: 'from-file'
data-dir: {data}
wal-dir:
snapshot-count: 10000
heartbeat-interval: 20
election-timeout: 200
quota-backend-bytes: 0
listen-peer-urls: http://127.0.0.1:{peer}
listen-client-urls: http://127.0.0.1:{client}
max-snapshots: 5
max-wals: 5
cors:
initial-advertise-peer-urls: http://127.0.0.1:{peer}
advertise-client-urls: http://127.0.0.1:{client}
discovery:
discovery-fallback: 'proxy'
discovery-proxy:
discovery-srv:
initial-cluster: from-file=http://127.0.0.1:{peer}
initial-cluster-token: 'etcd-cluster'
initial-cluster-state: 'new'
strict-reconfig-check: false
enable-v2: true
enable-pprof: false
proxy: 'off'
proxy-failure-wait: 5000
proxy-refresh-interval: 30000
proxy-dial-timeout: 1000
proxy-write-timeout: 5000
proxy-read-timeout: 0
client-transport-security:
  cert-file:
  key-file:
  client-cert-auth: false
  trusted-ca-file:
peer-transport-security:
  cert-file:
  key-file:
  client-cert-auth: false
  trusted-ca-file:
log-level: warn
logger: zap
log-outputs: [stderr]
force-new-cluster: false
auto-compaction-mode: periodic
auto-compaction-retention: \"1\"
",
            data = data.display()
        ),
    )
    .unwrap();
    // Flags and variables that would break the start if they were read.
    let mut child = crate::actcd_command()
        .arg("--config-file")
        .arg(&file)
        .args([
            "--name",
            "ignored",
            "--listen-client-urls",
            "http://127.0.0.1:1",
        ])
        .env("ETCD_NAME", "ignored-too")
        .env("ETCD_INITIAL_CLUSTER", "nobody=http://127.0.0.1:1")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut c = ready_client(client).await;
    c.put("from", "file", None).await.unwrap();
    let got = c.get("from", None).await.unwrap();
    assert_eq!(got.kvs()[0].value(), b"file");
    let members = c.member_list().await.unwrap();
    assert_eq!(members.members()[0].name(), "from-file");
    assert!(data.join("member").is_dir());
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test]
async fn a_unit_file_command_line_starts_a_member() {
    let dir = tempfile::tempdir().unwrap();
    let (client, peer) = (free_port(), free_port());
    let data = dir.path().join("infra0.etcd");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let client_url = format!("http://127.0.0.1:{client}");
    // etcd's clustering guide's static bootstrap, for one member, with a unit file's
    // single-dash `-data-dir`.
    let mut child = crate::actcd_command()
        .args(["--name", "infra0"])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--listen-client-urls", &client_url])
        .args(["--advertise-client-urls", &client_url])
        .args(["--initial-cluster-token", "etcd-cluster-1"])
        .args(["--initial-cluster", &format!("infra0={peer_url}")])
        .args(["--initial-cluster-state", "new"])
        .arg(format!("-data-dir={}", data.display()))
        .args(["-heartbeat-interval", "20", "-election-timeout", "200"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut c = ready_client(client).await;
    c.put("unit", "file", None).await.unwrap();
    assert_eq!(c.get("unit", None).await.unwrap().kvs()[0].value(), b"file");
    assert!(
        data.join("member").is_dir(),
        "the single-dash -data-dir was used"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test]
async fn wal_dir_holds_the_wal() {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("dedicated-wal");
    let mut m = Member::new("m1", dir.path());
    let initial = format!("m1={}", m.peer_url());
    let wal_flag = format!("--wal-dir={}", wal.display());
    m.spawn_with(&initial, &[&wal_flag]);
    let mut c = ready_client(m.client_port).await;
    c.put("k", "in-the-wal", None).await.unwrap();
    m.stop();
    assert!(
        std::fs::read_dir(&wal).unwrap().next().is_some(),
        "segments in --wal-dir"
    );
    assert!(!m.dir.join("member/wal").exists(), "no WAL in the data dir");
    m.spawn_with(&initial, &[&wal_flag]);
    let mut c = ready_client(m.client_port).await;
    assert_eq!(
        c.get("k", None).await.unwrap().kvs()[0].value(),
        b"in-the-wal"
    );
}

#[tokio::test]
async fn strict_reconfig_check_off_lets_a_quorum_losing_remove_through() {
    let dir = tempfile::tempdir().unwrap();
    // m1 without the check, m2 and m3 with etcd's default.
    let (mut members, initial) = crate::cluster::cluster(dir.path());
    members[0].spawn_with(&initial, &["--strict-reconfig-check=false"]);
    members[1].spawn(&initial);
    members[2].spawn(&initial);
    leader_index(&members, &[0, 1, 2]).await;
    let mut c1 = members[0].client().await;
    let mut c2 = members[1].client().await;
    let ids: Vec<u64> = c1
        .member_list()
        .await
        .unwrap()
        .members()
        .iter()
        .map(|m| m.id())
        .collect();
    let id_of = |name: &str, list: &etcd_client::MemberListResponse| {
        list.members()
            .iter()
            .find(|m| m.name() == name)
            .unwrap()
            .id()
    };
    let list = c1.member_list().await.unwrap();
    let (m2, m3) = (id_of("m2", &list), id_of("m3", &list));
    assert_eq!(ids.len(), 3);
    members[2].kill();
    // With m3 down, removing m2 would leave m1 alone of two voters: m2 refuses.
    let err = c2.member_remove(m2).await.unwrap_err().to_string();
    assert!(err.contains("unhealthy cluster"), "{err}");
    // m1, without the check, lets it through (m1 and m2 still commit it).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match c1.member_remove(m2).await {
            Ok(r) => {
                let left: Vec<u64> = r.members().iter().map(|m| m.id()).collect();
                assert!(!left.contains(&m2) && left.contains(&m3), "{left:?}");
                break;
            }
            Err(e) => {
                assert!(
                    Instant::now() < deadline && !e.to_string().contains("unhealthy"),
                    "{e}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// HTTP/2 frame types seen on a raw connection to the client port within `wait`, after the
/// client preface and an empty SETTINGS (answered with nothing else: pings go unanswered).
async fn frames_seen(port: u16, wait: Duration) -> Vec<(u8, u8)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let mut frames = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let mut head = [0u8; 9];
        match tokio::time::timeout_at(deadline, s.read_exact(&mut head)).await {
            Ok(Ok(_)) => {}
            _ => return frames,
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut body = vec![0u8; len];
        if tokio::time::timeout_at(deadline, s.read_exact(&mut body))
            .await
            .is_err()
        {
            return frames;
        }
        frames.push((head[3], head[4]));
    }
}

#[tokio::test]
async fn grpc_keepalive_pings_idle_client_connections() {
    const PING: u8 = 6;
    let dir = tempfile::tempdir().unwrap();
    let mut m = Member::new("m1", dir.path());
    let initial = format!("m1={}", m.peer_url());
    m.spawn_with(
        &initial,
        &[
            "--grpc-keepalive-interval=200ms",
            "--grpc-keepalive-timeout=5s",
        ],
    );
    ready_client(m.client_port).await;
    let frames = frames_seen(m.client_port, Duration::from_millis(1500)).await;
    assert!(
        frames.iter().any(|&(t, flags)| t == PING && flags & 1 == 0),
        "no ping in {frames:?}"
    );
    m.stop();
    // etcd's default (2 h): no ping in that time.
    m.spawn(&initial);
    ready_client(m.client_port).await;
    let frames = frames_seen(m.client_port, Duration::from_millis(1500)).await;
    assert!(
        !frames.iter().any(|&(t, flags)| t == PING && flags & 1 == 0),
        "a ping in {frames:?}"
    );
}

#[tokio::test]
async fn socket_reuse_port_lets_another_listener_bind_the_client_port() {
    let bind_again = |port: u16| {
        let s = tokio::net::TcpSocket::new_v4().unwrap();
        s.set_reuseport(true).unwrap();
        s.bind(([127, 0, 0, 1], port).into())
            .and_then(|()| s.listen(16))
            .is_ok()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut m = Member::new("m1", dir.path());
    let initial = format!("m1={}", m.peer_url());
    m.spawn_with(&initial, &["--socket-reuse-port"]);
    ready_client(m.client_port).await;
    assert!(bind_again(m.client_port), "SO_REUSEPORT on the listener");
    m.stop();
    m.spawn(&initial);
    ready_client(m.client_port).await;
    assert!(!bind_again(m.client_port), "no SO_REUSEPORT by default");
}

#[tokio::test]
async fn applies_slower_than_the_warning_apply_duration_are_logged() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("member.log");
    let mut m = Member::new("m1", dir.path());
    let initial = format!("m1={}", m.peer_url());
    let outputs = format!("--log-outputs={}", log.display());
    // Every apply takes longer than a nanosecond.
    m.spawn_with(
        &initial,
        &["--experimental-warning-apply-duration=1ns", &outputs],
    );
    let mut c = ready_client(m.client_port).await;
    c.put("slow", "v", None).await.unwrap();
    m.stop();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains("apply request took too long")
                && l.contains("expected_duration=1ns")),
        "{text}"
    );
}

#[tokio::test]
async fn backend_batch_flags_keep_writes_readable_across_a_restart() {
    // A commit every 5 ms or every 2 applied requests: each write is read back, and is still
    // there after a restart (replayed from the WAL or committed by then).
    let dir = tempfile::tempdir().unwrap();
    let mut m = Member::new("m1", dir.path());
    let initial = format!("m1={}", m.peer_url());
    let flags = ["--backend-batch-interval=5ms", "--backend-batch-limit=2"];
    m.spawn_with(&initial, &flags);
    let mut c = ready_client(m.client_port).await;
    for i in 0..10 {
        c.put(format!("k{i}"), "v", None).await.unwrap();
    }
    m.stop();
    m.spawn_with(&initial, &flags);
    let mut c = ready_client(m.client_port).await;
    let got = c
        .get("k", Some(etcd_client::GetOptions::new().with_prefix()))
        .await
        .unwrap();
    assert_eq!(got.kvs().len(), 10);
}

/// One raw HTTP/1.1 request; the whole answer (head and body) as text.
async fn http_raw(port: u16, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).to_string()
}

#[tokio::test]
async fn cors_and_host_whitelist_guard_the_client_http_port_as_etcds_do() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Member::new("m1", dir.path());
    let initial = format!("m1={}", m.peer_url());
    m.spawn_with(
        &initial,
        &["--host-whitelist=example.com", "--cors=http://a.example:80"],
    );
    ready_client(m.client_port).await;
    let port = m.client_port;
    // A Host not on the list: etcd's 421 and its text, byte for byte (Content-Length 371).
    let got = http_raw(
        port,
        "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 421 Misdirected Request"), "{got}");
    assert!(
        got.to_ascii_lowercase().contains("content-length: 371"),
        "{got}"
    );
    assert!(
        got.contains("  - e.g. etcd --host-whitelist \"127.0.0.1\"\n"),
        "{got}"
    );
    // On the list (the port is not part of the name), from an allowed origin: CORS headers.
    let got = http_raw(
        port,
        "GET /version HTTP/1.1\r\nHost: example.com:2379\r\nOrigin: http://a.example:80\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 200 OK"), "{got}");
    let lower = got.to_ascii_lowercase();
    assert!(
        lower.contains("access-control-allow-origin: http://a.example:80"),
        "{got}"
    );
    assert!(lower.contains("access-control-allow-methods: post, get, options, put, delete"));
    assert!(lower.contains("access-control-allow-headers: accept, content-type, authorization"));
    // Another origin: no CORS headers; OPTIONS is answered 200 with nothing.
    let got = http_raw(
        port,
        "OPTIONS /v3/kv/range HTTP/1.1\r\nHost: example.com\r\nOrigin: http://b.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 200 OK"), "{got}");
    assert!(
        !got.to_ascii_lowercase().contains("access-control"),
        "{got}"
    );
    // gRPC on the same port is not an HTTP/1.1 request: the host list does not apply.
    let mut c = ready_client(port).await;
    c.put("grpc", "ok", None).await.unwrap();
    m.stop();
    // etcd's defaults (`*`): any host, and `Access-Control-Allow-Origin: *`.
    m.spawn(&initial);
    ready_client(port).await;
    let got = http_raw(
        port,
        "GET /version HTTP/1.1\r\nHost: anything.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 200 OK"), "{got}");
    assert!(
        got.to_ascii_lowercase()
            .contains("access-control-allow-origin: *"),
        "{got}"
    );
}

#[tokio::test]
async fn force_new_cluster_restarts_a_member_alone_with_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let (mut members, initial, leader) = crate::cluster::running_cluster(dir.path(), &[]).await;
    let mut c = ready_client(members[leader].client_port).await;
    for i in 0..20 {
        c.put(format!("k{i}"), format!("v{i}"), None).await.unwrap();
    }
    // Every member has applied the writes before they stop.
    for m in &members {
        let mut mc = ready_client(m.client_port).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while mc
            .get(
                "k19",
                Some(etcd_client::GetOptions::new().with_serializable()),
            )
            .await
            .map(|r| r.kvs().is_empty())
            .unwrap_or(true)
        {
            assert!(Instant::now() < deadline, "{} never applied k19", m.name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    for m in &mut members {
        m.stop();
    }
    // m1 alone, with etcd's unsafe flag: it leads a cluster of one and keeps every key.
    members[0].spawn_with(&initial, &["--force-new-cluster"]);
    let mut c = ready_client(members[0].client_port).await;
    let list = c.member_list().await.unwrap();
    let names: Vec<&str> = list.members().iter().map(|m| m.name()).collect();
    assert_eq!(names, ["m1"]);
    let got = c
        .get("k", Some(etcd_client::GetOptions::new().with_prefix()))
        .await
        .unwrap();
    assert_eq!(got.kvs().len(), 20);
    c.put("after", "force", None).await.unwrap();
    // The new membership is recorded: a restart without the flag is still a cluster of one.
    members[0].stop();
    members[0].spawn(&initial);
    let mut c = ready_client(members[0].client_port).await;
    assert_eq!(c.member_list().await.unwrap().members().len(), 1);
    assert_eq!(
        c.get("after", None).await.unwrap().kvs()[0].value(),
        b"force"
    );
}

#[tokio::test]
async fn compaction_runs_in_batches_of_the_given_limit() {
    // One record per compaction step: a physical compaction still finishes and answers.
    let dir = tempfile::tempdir().unwrap();
    let mut m = Member::new("m1", dir.path());
    let initial = format!("m1={}", m.peer_url());
    m.spawn_with(&initial, &["--experimental-compaction-batch-limit=1"]);
    let mut c = ready_client(m.client_port).await;
    let mut rev = 0;
    for i in 0..30 {
        rev = c
            .put("k", format!("v{i}"), None)
            .await
            .unwrap()
            .header()
            .unwrap()
            .revision();
    }
    c.compact(
        rev,
        Some(etcd_client::CompactionOptions::new().with_physical()),
    )
    .await
    .unwrap();
    let old = c
        .get(
            "k",
            Some(etcd_client::GetOptions::new().with_revision(rev - 5)),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        old.contains("required revision has been compacted"),
        "{old}"
    );
    assert_eq!(c.get("k", None).await.unwrap().kvs()[0].value(), b"v29");
}

#[tokio::test]
async fn bootstrap_defrag_shrinks_a_backend_with_enough_free_space() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Member::new("m1", dir.path());
    let initial = format!("m1={}", m.peer_url());
    m.spawn(&initial);
    let mut c = ready_client(m.client_port).await;
    // About 8 MiB of values, deleted and compacted away: free pages in the data file.
    let value = vec![b'x'; 64 * 1024];
    for i in 0..128 {
        c.put(format!("big{i}"), value.clone(), None).await.unwrap();
    }
    let rev = c
        .delete("big", Some(etcd_client::DeleteOptions::new().with_prefix()))
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    c.compact(
        rev,
        Some(etcd_client::CompactionOptions::new().with_physical()),
    )
    .await
    .unwrap();
    m.stop();
    // A threshold above what is free: nothing happens.
    m.spawn_with(
        &initial,
        &["--experimental-bootstrap-defrag-threshold-megabytes=1000"],
    );
    let mut c = ready_client(m.client_port).await;
    let before = c.status().await.unwrap().db_size();
    assert!(before > 8 * 1024 * 1024, "{before}");
    m.stop();
    m.spawn_with(
        &initial,
        &["--experimental-bootstrap-defrag-threshold-megabytes=1"],
    );
    let mut c = ready_client(m.client_port).await;
    let after = c.status().await.unwrap().db_size();
    assert!(after < before / 2, "{before} -> {after}");
}

#[test]
fn version_prints_etcds_lines() {
    for arg in ["--version", "-version", "--version=true"] {
        let out = crate::actcd_command().arg(arg).output().unwrap();
        assert!(out.status.success(), "{arg}");
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            format!("etcd Version: {}", actcd::node::API_VERSION),
            "{arg}"
        );
        assert!(lines[1].starts_with("Git SHA: "));
        assert!(lines[3].starts_with("Go OS/Arch: "));
    }
}

/// `actcd --version | head -1`: the reader is gone before the rest is written; that is not a
/// panic (it was one: Rust's stdout reports the closed pipe, and `println!` panics on it).
#[test]
fn version_into_a_closed_pipe_is_not_a_panic() {
    let mut child = crate::actcd_command()
        .arg("--version")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[tokio::test]
async fn the_grpc_gateway_can_be_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Member::new("m1", dir.path());
    let initial = format!("m1={}", m.peer_url());
    let range = "POST /v3/kv/range HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 14\r\nConnection: close\r\n\r\n{\"key\":\"YQ==\"}";
    m.spawn(&initial);
    ready_client(m.client_port).await;
    let got = http_raw(m.client_port, range).await;
    assert!(got.starts_with("HTTP/1.1 200 OK"), "{got}");
    m.stop();
    m.spawn_with(&initial, &["--enable-grpc-gateway=false"]);
    ready_client(m.client_port).await;
    let got = http_raw(m.client_port, range).await;
    assert!(got.starts_with("HTTP/1.1 404 Not Found"), "{got}");
}

/// etcd 3.6's flag names (as kubeadm writes them for etcd ≥ 3.6: `--feature-gates=
/// InitialCorruptCheck=true`, `--watch-progress-notify-interval=5s`) start a member that acts
/// on them; `etcd_server_feature_enabled` reports the gates; the old names still work, with
/// etcd 3.6's deprecation warning; both names together stop the start with etcd's error.
#[tokio::test]
async fn a_member_starts_with_etcd_3_6s_flag_names_and_feature_gates() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("member.log");
    let mut m = Member::new("m1", dir.path());
    let initial = format!("m1={}", m.peer_url());
    let outputs = format!("--log-outputs={}", log.display());
    m.spawn_with(
        &initial,
        &[
            "--feature-gates=InitialCorruptCheck=true,FastLeaseKeepAlive=false",
            "--watch-progress-notify-interval=5s",
            "--warning-apply-duration=1ns",
            "--compaction-batch-limit=1",
            "--corrupt-check-time=1m",
            "--compact-hash-check-time=30s",
            "--snapshot-catchup-entries=100",
            "--memory-mlock",
            &outputs,
        ],
    );
    let mut c = ready_client(m.client_port).await;
    c.put("k", "v", None).await.unwrap();
    let (status, body) = crate::http::get(&m.endpoint(), "/metrics").await;
    assert_eq!(status, 200);
    for line in [
        "# TYPE etcd_server_feature_enabled gauge",
        "etcd_server_feature_enabled{name=\"FastLeaseKeepAlive\",stage=\"BETA\"} 0",
        "etcd_server_feature_enabled{name=\"InitialCorruptCheck\",stage=\"ALPHA\"} 1",
        "etcd_server_feature_enabled{name=\"AllAlpha\",stage=\"ALPHA\"} 0",
        "etcd_server_feature_enabled{name=\"StopGRPCServiceOnDefrag\",stage=\"ALPHA\"} 0",
    ] {
        assert!(body.lines().any(|l| l == line), "no {line:?} in /metrics");
    }
    m.stop();
    let text = std::fs::read_to_string(&log).unwrap();
    // `--warning-apply-duration` is in effect under its new name.
    assert!(
        text.lines()
            .any(|l| l.contains("apply request took too long")
                && l.contains("expected_duration=1ns")),
        "{text}"
    );
    assert!(text.contains("flag=\"--memory-mlock\""), "{text}");
    assert!(!text.contains("is deprecated"), "{text}");
    // The old names: the same member, with etcd 3.6's warnings.
    std::fs::remove_file(&log).unwrap();
    m.spawn_with(
        &initial,
        &[
            "--experimental-watch-progress-notify-interval=5s",
            "--experimental-initial-corrupt-check=true",
            &outputs,
        ],
    );
    let mut c = ready_client(m.client_port).await;
    assert_eq!(c.get("k", None).await.unwrap().kvs()[0].value(), b"v");
    m.stop();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("--experimental-watch-progress-notify-interval is deprecated in v3.6 and will be decommissioned in v3.7. Use '--watch-progress-notify-interval' instead."),
        "{text}"
    );
    for (args, want) in [
        (
            vec![
                "--experimental-watch-progress-notify-interval=5s",
                "--watch-progress-notify-interval=5s",
            ],
            "cannot set --experimental-watch-progress-notify-interval and --watch-progress-notify-interval at the same time, please use --watch-progress-notify-interval only",
        ),
        (
            vec![
                "--experimental-compact-hash-check-enabled=true",
                "--feature-gates=CompactHashCheck=false",
            ],
            "cannot specify both flags: --experimental-compact-hash-check-enabled=true and --feature-gates=CompactHashCheck=false at the same time, please just use --feature-gates=CompactHashCheck=false",
        ),
        (
            vec!["--feature-gates=NoSuchGate=true"],
            "unrecognized feature gate: NoSuchGate",
        ),
    ] {
        let (ok, err) = failed_start(&args);
        assert!(!ok, "{args:?} started");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// Keepalives through the leader and through a follower answer the lease's TTL with
/// `FastLeaseKeepAlive` on (etcd 3.7's default) and off (etcd 3.5's wait for the applied
/// index), and a lease granted through one member is kept alive through another at once.
#[tokio::test]
async fn keepalives_work_with_fast_lease_keep_alive_on_and_off() {
    for gate in [
        "--feature-gates=FastLeaseKeepAlive=true",
        "--feature-gates=FastLeaseKeepAlive=false",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (members, _, leader) = crate::cluster::running_cluster(dir.path(), &[gate]).await;
        let follower = (leader + 1) % 3;
        let mut on_leader = ready_client(members[leader].client_port).await;
        let mut on_follower = ready_client(members[follower].client_port).await;
        for (grant, keep) in [(&mut on_follower, leader), (&mut on_leader, follower)] {
            let id = grant.lease_grant(30, None).await.unwrap().id();
            let mut c = ready_client(members[keep].client_port).await;
            let (mut keeper, mut stream) = c.lease_keep_alive(id).await.unwrap();
            for _ in 0..3 {
                keeper.keep_alive().await.unwrap();
                let r = stream.message().await.unwrap().unwrap();
                assert_eq!((r.id(), r.ttl()), (id, 30), "{gate}");
            }
            let ttl = c.lease_time_to_live(id, None).await.unwrap();
            assert!(ttl.ttl() > 25, "{gate}: {}", ttl.ttl());
        }
        // A lease that does not exist: TTL 0 after the wait (the client names it "not found").
        let err = on_follower.lease_keep_alive(0x7777).await.unwrap_err();
        assert!(err.to_string().contains("lease not found"), "{gate}: {err}");
    }
}

/// The version actcd reports (docs/compatibility.md, "The version actcd reports"): etcd 3.7's, so that
/// Kubernetes' version checks turn on what actcd serves: RequestWatchProgress (consistent
/// reads from the watch cache, WatchList: 3.5.13 or later) and RangeStream (3.7 or later).
#[tokio::test]
async fn the_reported_version_is_etcd_3_7s() {
    assert_eq!(actcd::node::API_VERSION, "3.7.1");
    let v: Vec<u32> = actcd::node::API_VERSION
        .split('.')
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(
        v >= vec![3, 5, 13],
        "Kubernetes' RequestWatchProgress floor"
    );
    assert!(v >= vec![3, 7, 0], "RangeStream");
    let dir = tempfile::tempdir().unwrap();
    let mut m = Member::new("m1", dir.path());
    m.spawn(&format!("m1={}", m.peer_url()));
    let mut c = ready_client(m.client_port).await;
    assert_eq!(c.status().await.unwrap().version(), "3.7.1");
    let (_, metrics) = crate::http::get(&m.endpoint(), "/metrics").await;
    assert!(
        metrics.contains("etcd_server_version{server_version=\"3.7.1\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("etcd_cluster_version{cluster_version=\"3.7\"} 1"));
}

/// `--quota-backend-bytes` past etcd's recommended 8 GiB (issue 28 part 2): 20 GiB, 100 GiB and
/// etcd's largest (2^63-1) are taken with etcd 3.5's warning, word for word and field for field
/// (`quota.go`, checked against etcd 3.5.1's log); a negative quota turns the quota off as in
/// etcd; each member serves and reports the quota it enforces. A value past an int64 is refused
/// at start, as etcd's flag parser refuses it.
#[tokio::test]
async fn quotas_past_8_gib_are_taken_with_etcds_warning() {
    const GIB: i64 = 1 << 30;
    for (quota, size, enforced, want) in [
        (
            20 * GIB,
            "22 GB",
            20 * GIB,
            "quota exceeds the maximum value",
        ),
        (
            100 * GIB,
            "107 GB",
            100 * GIB,
            "quota exceeds the maximum value",
        ),
        (
            i64::MAX,
            "9.2 EB",
            8 << 40,
            "quota exceeds the maximum value",
        ),
        (-1, "", 8 << 40, "disabled backend quota"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("member.log");
        let mut srv = crate::Server {
            child: None,
            dir: dir.path().join("data"),
            port: free_port(),
            peer_port: free_port(),
            extra: vec![format!("--quota-backend-bytes={quota}")],
            env: vec![("RUST_LOG".into(), "info".into())],
            scheme: "http",
        };
        let child = srv
            .command()
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        srv.child = Some(child);
        let mut c = srv.client().await;
        c.put("k", vec![7u8; 100_000], None).await.unwrap();
        let status = crate::fixes_3_6::maintenance37(&srv.endpoint())
            .await
            .status(actcd_etcd37_client::etcdserverpb::StatusRequest {})
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status.db_size_quota, enforced, "{quota}");
        let text = std::fs::read_to_string(&log).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains(want))
            .unwrap_or_else(|| panic!("{quota}: no {want:?} in:\n{text}"));
        if quota > 0 {
            assert!(line.contains(" WARN "), "{line}");
            for field in [
                "quota-name=\"v3-applier\"".to_string(),
                format!("quota-size-bytes={quota}"),
                format!("quota-size={size}"),
                "quota-maximum-size-bytes=8589934592".into(),
                "quota-maximum-size=8.6 GB".into(),
            ] {
                assert!(line.contains(&field), "{quota}: {field} not in {line}");
            }
        } else {
            assert!(line.contains("quota-size-bytes=-1"), "{line}");
        }
    }
    let (ok, err) = failed_start(&["--quota-backend-bytes=9223372036854775808"]);
    assert!(!ok);
    assert!(
        err.contains("invalid value '9223372036854775808' for '--quota-backend-bytes"),
        "{err}"
    );
}
