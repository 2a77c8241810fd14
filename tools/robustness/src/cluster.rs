//! The local cluster: one server process per member, its data dir and log
//! under the run's work dir, the same etcd flags for actcd and etcd.

use std::fs::OpenOptions;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use actcd_proto::etcdserverpb::StatusRequest;
use actcd_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use tonic::transport::{Channel, Endpoint};

use crate::proxy::Net;

/// Heartbeat and election timeout handed to every member, in ms.
pub const HEARTBEAT_MS: u64 = 50;
pub const ELECTION_MS: u64 = 500;

/// A free port below the ephemeral range (as `tests/integration` picks
/// them), so a port the kernel hands to an outgoing connection meanwhile
/// cannot take it from a restarting member.
pub fn free_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (base, span) = (
        low.saturating_sub(12_000).max(1024),
        12_000u16.min(low.saturating_sub(1024).max(1)),
    );
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

#[derive(Debug)]
pub struct Member {
    pub name: String,
    pub client_port: u16,
    /// The real peer port it listens on.
    pub peer_port: u16,
    /// The peer port it advertises: its proxy's with 3 members, else the real one.
    pub adv_port: u16,
    /// Started with `--initial-cluster-state existing` (re-added after a
    /// replacement).
    pub existing: bool,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    /// Where an instrumented server records its fsyncs (`ACTCD_DEBUG_SYNC_LOG`; emptied at
    /// each start).
    pub sync_log: PathBuf,
    child: Option<Child>,
    stopped: bool,
    /// The member id its Status reports (0 until learned).
    pub id: u64,
}

impl Member {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }
    fn listen_peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }
    /// The advertised peer URL (what the other members dial).
    pub fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.adv_port)
    }
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

#[derive(Debug)]
pub struct Cluster {
    server: PathBuf,
    broken: bool,
    /// The server is an actcd built with `--features failpoints`: it takes `FAILPOINTS` and
    /// keeps a sync log.
    pub instrumented: bool,
    token: String,
    pub members: Vec<Member>,
    /// The peer-link proxies (3 members).
    pub net: Option<Arc<Net>>,
    /// More flags for every member (the hostile run's `--enable-v2`).
    pub extra_args: Vec<String>,
    /// Members run with `AutoPromoteLearners`: `replace` adds a learner and waits for its
    /// promotion.
    pub auto_promote: bool,
}

impl Cluster {
    /// Lays out `n` members under `dir` (nothing started yet); with
    /// `proxied`, each advertises a proxy port of its own.
    pub fn new(
        server: &Path,
        dir: &Path,
        n: usize,
        broken: bool,
        token: String,
        proxied: bool,
    ) -> Cluster {
        let members = (0..n)
            .map(|i| {
                let name = format!("m{}", i + 1);
                let peer_port = free_port();
                Member {
                    client_port: free_port(),
                    peer_port,
                    adv_port: if proxied { free_port() } else { peer_port },
                    existing: false,
                    data_dir: dir.join(format!("{name}.data")),
                    log: dir.join(format!("{name}.log")),
                    sync_log: dir.join(format!("{name}.sync")),
                    name,
                    child: None,
                    stopped: false,
                    id: 0,
                }
            })
            .collect();
        Cluster {
            server: server.to_path_buf(),
            broken,
            instrumented: false,
            token,
            members,
            net: None,
            extra_args: Vec::new(),
            auto_promote: false,
        }
    }

    pub fn urls(&self) -> Vec<String> {
        self.members.iter().map(Member::url).collect()
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url()))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts member `i` (again, after a kill) with the same flags.
    pub fn start(&mut self, i: usize) -> std::io::Result<()> {
        self.start_with(i, None)
    }

    /// Starts member `i` with `FAILPOINTS=failpoints` (fail-rs syntax) if given.
    pub fn start_with(&mut self, i: usize, failpoints: Option<&str>) -> std::io::Result<()> {
        let initial = self.initial_cluster();
        let m = &mut self.members[i];
        let log = OpenOptions::new().create(true).append(true).open(&m.log)?;
        let mut cmd = Command::new(&self.server);
        cmd.args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&m.data_dir)
            .args(["--listen-client-urls", &m.url()])
            .args(["--advertise-client-urls", &m.url()])
            .args(["--listen-peer-urls", &m.listen_peer_url()])
            .args(["--initial-advertise-peer-urls", &m.peer_url()])
            .args(["--initial-cluster", &initial])
            .args(["--initial-cluster-token", &self.token])
            .args([
                "--initial-cluster-state",
                if m.existing { "existing" } else { "new" },
            ])
            .args(["--heartbeat-interval", &HEARTBEAT_MS.to_string()])
            .args(["--election-timeout", &ELECTION_MS.to_string()])
            // Watches with progress_notify get one a second (default 10 min).
            .args(["--experimental-watch-progress-notify-interval", "1s"])
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if self.broken {
            cmd.env("ACTCD_DEBUG_STALE_READS", "1");
        }
        if self.instrumented {
            // Raft log compactions often enough that a member down for a few seconds is sent a
            // snapshot (the `snapshot_before_install` failpoint needs one).
            cmd.args([
                "--snapshot-count",
                "300",
                "--snapshot-catchup-entries",
                "100",
            ]);
            // This incarnation's fsyncs only (see `lose`).
            std::fs::write(&m.sync_log, b"")?;
            cmd.env("ACTCD_DEBUG_SYNC_LOG", &m.sync_log);
        }
        if let Some(fp) = failpoints {
            cmd.env("FAILPOINTS", fp);
        }
        let child = cmd.spawn()?;
        if let Some(net) = &self.net {
            net.set_pid(i, Some(child.id()));
        }
        m.child = Some(child);
        m.stopped = false;
        Ok(())
    }

    /// SIGKILL member `i` and reap it.
    pub fn kill(&mut self, i: usize) {
        let m = &mut self.members[i];
        if let Some(mut c) = m.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        m.stopped = false;
        if let Some(net) = &self.net {
            net.set_pid(i, None);
        }
    }

    /// Removes member `i`'s data dir (it must be killed).
    pub fn wipe(&mut self, i: usize) -> std::io::Result<()> {
        match std::fs::remove_dir_all(&self.members[i].data_dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// SIGSTOP (`stop`) or SIGCONT member `i`.
    pub fn signal_stop(&mut self, i: usize, stop: bool) {
        let m = &mut self.members[i];
        if let Some(pid) = m.pid() {
            let _ = Command::new("kill")
                .arg(if stop { "-STOP" } else { "-CONT" })
                .arg(pid.to_string())
                .status();
            m.stopped = stop;
        }
    }

    /// Every member running and not stopped. Returns whether a start failed.
    pub fn heal(&mut self) -> std::io::Result<()> {
        for i in 0..self.members.len() {
            if self.members[i].stopped {
                self.signal_stop(i, false);
            }
            // A member that exited by itself is restarted too.
            let exited = match self.members[i].child.as_mut() {
                Some(c) => matches!(c.try_wait(), Ok(Some(_))),
                None => true,
            };
            if exited {
                self.members[i].child = None;
                self.start(i)?;
            }
        }
        Ok(())
    }

    /// Whether member `i`'s process has exited (by itself).
    pub fn has_exited(&mut self, i: usize) -> bool {
        match self.members[i].child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(Some(_))),
            None => true,
        }
    }

    /// Members whose process exited without being killed by us.
    pub fn exited(&mut self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for m in &mut self.members {
            if let Some(c) = m.child.as_mut()
                && let Ok(Some(st)) = c.try_wait()
            {
                out.push((m.name.clone(), st.to_string()));
            }
        }
        out
    }

    pub fn shutdown(&mut self) {
        for i in 0..self.members.len() {
            if self.members[i].stopped {
                self.signal_stop(i, false);
            }
            self.kill(i);
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A lazily connecting channel to `url` (reconnects after a restart).
pub fn channel(url: &str) -> Channel {
    Endpoint::from_shared(url.to_owned())
        .expect("valid url")
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_millis(1000))
        .connect_lazy()
}

/// `(member id, leader id)` from member `url`'s Status, within 1 s.
pub async fn status(url: &str) -> Option<(u64, u64)> {
    let mut c = MaintenanceClient::new(channel(url));
    let mut req = tonic::Request::new(StatusRequest {});
    req.set_timeout(Duration::from_secs(1));
    let r = tokio::time::timeout(Duration::from_millis(1500), c.status(req))
        .await
        .ok()?
        .ok()?
        .into_inner();
    Some((r.header.map_or(0, |h| h.member_id), r.leader))
}
