//! Ready means ready (issue 25): a member logs `ready to serve client requests` and accepts
//! clients only once its own attributes are published through the log and applied here, as
//! etcd's `ReadyNotify`; a member without quorum never says it is ready, while its metrics
//! port answers `/livez`; a restarted member publishes again.

use std::io::BufRead;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::cluster::{Member, cluster};
use crate::free_port;
use crate::http::get;

/// Starts `m` with `extra` flags at log level info; its stderr lines arrive on the channel.
fn spawn_logged(m: &mut Member, initial: &str, extra: &[&str]) -> mpsc::UnboundedReceiver<String> {
    let mut child = m
        .command(initial, extra)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start actcd");
    let stderr = child.stderr.take().unwrap();
    m.child = Some(child);
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits up to `within` for a line containing `needle`; every line seen is kept in `seen`.
async fn wait_line(
    rx: &mut mpsc::UnboundedReceiver<String>,
    needle: &str,
    within: Duration,
    seen: &mut Vec<String>,
) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(line)) => {
                let hit = line.contains(needle);
                seen.push(line);
                if hit {
                    return true;
                }
            }
            Ok(None) | Err(_) => return false,
        }
    }
}

/// The 3.4 etcdctl (Debian's), which speaks v2; None where it is not installed.
fn etcdctl34() -> Option<String> {
    let bin = std::env::var("ETCDCTL34").unwrap_or_else(|_| "/usr/bin/etcdctl".to_string());
    let out = std::process::Command::new(&bin)
        .arg("--version")
        .env("ETCDCTL_API", "2")
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .contains("3.4")
        .then_some(bin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_are_ready_only_once_published_with_a_leader() {
    let dir = tempfile::tempdir().unwrap();
    let (mut members, initial) = cluster(dir.path());
    let mut logs: Vec<_> = members
        .iter_mut()
        .map(|m| spawn_logged(m, &initial, &["--enable-v2"]))
        .collect();
    let mut seen = Vec::new();
    for (m, rx) in members.iter().zip(logs.iter_mut()) {
        assert!(
            wait_line(
                rx,
                "ready to serve client requests",
                Duration::from_secs(30),
                &mut seen
            )
            .await,
            "{} never said it was ready: {seen:#?}",
            m.name
        );
    }
    // The moment the last one says so: every member is listed with its client URLs, every
    // member knows the leader, and a v2 client finds a published endpoint. Each is asked
    // after a linearizable read, which waits until it has applied everything committed before
    // it: a follower may not have applied the last member's publish when that member says
    // ready (it hears of the commit with the next append), and MemberList answers from what is
    // applied here, as etcd 3.5.1's does (a local CI run caught m1 a heartbeat behind).
    for m in &members {
        let mut c = m.client().await;
        c.get("ready-barrier", None).await.unwrap();
        let list = c.member_list().await.unwrap();
        assert_eq!(list.members().len(), 3);
        for listed in list.members() {
            assert!(
                !listed.client_urls().is_empty(),
                "{} lists {} without client URLs",
                m.name,
                listed.name()
            );
        }
        let status = c.status().await.unwrap();
        assert_ne!(status.leader(), 0, "{} knows no leader", m.name);
    }
    if let Some(ctl) = etcdctl34() {
        let endpoints = members
            .iter()
            .map(|m| format!("http://{}", m.endpoint()))
            .collect::<Vec<_>>()
            .join(",");
        let out = std::process::Command::new(&ctl)
            .env("ETCDCTL_API", "2")
            .args(["--endpoints", &endpoints, "set", "foo", "bar"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "v2 set: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let out = std::process::Command::new(&ctl)
            .env("ETCDCTL_API", "2")
            .args(["--endpoints", &endpoints, "cluster-health"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("cluster is healthy"),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        eprintln!("note: no etcdctl 3.4; skipping the v2 part");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_without_quorum_is_not_ready_but_live_and_publishes_at_every_start() {
    let dir = tempfile::tempdir().unwrap();
    let (mut members, initial) = cluster(dir.path());
    let metrics_port = free_port();
    let metrics = format!("http://127.0.0.1:{metrics_port}");
    let metrics_addr = format!("127.0.0.1:{metrics_port}");
    let mut log = spawn_logged(
        &mut members[0],
        &initial,
        &["--listen-metrics-urls", &metrics],
    );
    // Alone of three: elections time out again and again, and it never says ready.
    let mut seen = Vec::new();
    assert!(
        !wait_line(
            &mut log,
            "ready to serve client requests",
            Duration::from_secs(3),
            &mut seen
        )
        .await,
        "a member without quorum said it was ready: {seen:#?}"
    );
    assert_eq!(get(&metrics_addr, "/livez").await, (200, "ok\n".into()));
    let (status, body) = get(&metrics_addr, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    // Its client port takes the connection (the backlog) but answers nothing yet.
    let client = members[0].endpoint();
    let early = tokio::time::timeout(Duration::from_secs(1), get(&client, "/health")).await;
    assert!(
        early.is_err(),
        "the client port answered before ready: {early:?}"
    );

    // Quorum arrives: it publishes and says ready.
    let mut others: Vec<_> = members[1..]
        .iter_mut()
        .map(|m| spawn_logged(m, &initial, &[]))
        .collect();
    assert!(
        wait_line(
            &mut log,
            "ready to serve client requests",
            Duration::from_secs(30),
            &mut seen
        )
        .await,
        "{seen:#?}"
    );
    let published = seen
        .iter()
        .filter(|l| l.contains("published local member to cluster through raft"))
        .count();
    assert_eq!(published, 1, "{seen:#?}");
    assert_eq!(get(&client, "/health").await.0, 200);
    for rx in &mut others {
        assert!(
            wait_line(
                rx,
                "ready to serve client requests",
                Duration::from_secs(30),
                &mut seen
            )
            .await
        );
    }

    // Restarted with nothing changed, it publishes again (one more entry), as etcd does.
    members[0].stop();
    let mut seen = Vec::new();
    let mut log = spawn_logged(&mut members[0], &initial, &[]);
    assert!(
        wait_line(
            &mut log,
            "ready to serve client requests",
            Duration::from_secs(30),
            &mut seen
        )
        .await,
        "{seen:#?}"
    );
    assert!(
        seen.iter()
            .any(|l| l.contains("published local member to cluster through raft")),
        "a restarted member did not publish: {seen:#?}"
    );
}
