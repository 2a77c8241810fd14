//! TLS on the client port, and the client certificate's common name.
//!
//! etcd's rules, checked against etcd 3.5.1: an `https://` listener serves the key pair of
//! `--cert-file`/`--key-file`; once `--trusted-ca-file` is given, every client must present a
//! certificate that CA signed, or the handshake fails, whether `--client-cert-auth` is on or
//! not. That flag only decides whether the verified certificate's common name is taken as the
//! user name (by the authenticator chain, through [`client_common_name`]). A handshake has
//! [`HANDSHAKE_TIMEOUT`] to finish, and the server offers the ALPN protocols `http/1.1` and `h2`.
//!
//! How: actcd runs the handshake itself ([`ClientTls::accept`], rustls with ring, through
//! tokio-rustls) rather than leaving it to tonic, because etcd serves gRPC *and* HTTP/1.1
//! (`/health`, `/metrics`, `/version`, the JSON gateway `/v3/…`, the v2 API `/v2/…`) on one
//! https port, and a tonic server with its own TLS config hands every decrypted connection to
//! its HTTP/2 server. `crate::server` routes what [`ClientTls::accept`] returns: gRPC to a
//! tonic server that has no TLS config of its own, anything else to the HTTP/1.1 handler. The
//! streams tonic gets are tokio-rustls `TlsStream`s of the very version tonic is built on, for
//! which tonic implements `Connected` with `TlsConnectInfo`: that is what makes
//! `Request::peer_certs`, and so [`client_common_name`], see the client's certificate.
//!
//! ALPN is offered as `http/1.1` first, then `h2`, and rustls picks the first of ours the
//! client offers too: gRPC clients offer `h2` alone and get it; clients that offer both (curl,
//! Go's and Prometheus's HTTP clients) get HTTP/1.1, which is what the HTTP handler speaks —
//! HTTP/2 on this port goes to tonic, which knows only the gRPC services.
//!
//! Departures, each refusing at start-up what etcd 3.5.1 accepts: a CA file with no certificate
//! in it (etcd starts, then refuses every client), and `--client-cert-auth` without
//! `--trusted-ca-file` (etcd then trusts the system's CAs for client certificates, which nobody
//! means on purpose). etcd 3.5.1 caps TLS at 1.2; actcd, as newer etcd, offers 1.3 too unless
//! `--tls-max-version=TLS1.2`. etcd answers HTTP/2 requests that are not gRPC (an h2
//! `GET /health`); actcd gives those to tonic.
//!
//! The rustls configurations of both ports (this one and the peer port's, which the daemon
//! hands to the transport) are built by the `actcd-gotls` crate: certificates judged as Go's
//! crypto/tls judges them for etcd, and etcd's CRL, allowed CN/hostname, cipher suite and
//! version settings ([`TlsOptions`]). This module keeps the client port's glue: the start-up
//! checks of the PEM files, the acceptor with its timeout and ALPN, the CN of a request.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;
use x509_parser::pem::Pem;

pub(crate) use actcd_gotls::ALPN_H2;
use actcd_gotls::common_name;
pub use actcd_gotls::{
    NOT_ALLOWED, PemInput, ServerCheck, TlsError, TlsOptions, check_client_san, client_config,
    server_config,
};

/// How long a connection may take to finish its handshake: without a limit, a peer that opens
/// a connection and never sends a ClientHello would hold a task and a socket for good.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The client port's TLS settings: the server's key pair, and the CA client certificates must
/// chain to, as a rustls server configuration. Built by [`ClientTls::new`], which refuses what
/// could not serve, so a `ClientTls` always makes a working acceptor.
#[derive(Clone)]
pub struct ClientTls {
    config: Arc<ServerConfig>,
    trusted_ca: bool,
    client_cert_auth: bool,
}

impl fmt::Debug for ClientTls {
    /// Never prints the private key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field("trusted_ca", &self.trusted_ca)
            .field("client_cert_auth", &self.client_cert_auth)
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Checks the PEM inputs the way they will be used: the certificate chain and the CA parse
    /// as X.509, the key loads and belongs to the certificate, and the CA makes a verifier.
    pub fn new(
        cert_pem: Vec<u8>,
        key_pem: Vec<u8>,
        ca_pem: Option<Vec<u8>>,
        client_cert_auth: bool,
    ) -> Result<Self, TlsError> {
        Self::with_options(
            cert_pem,
            key_pem,
            ca_pem,
            client_cert_auth,
            &TlsOptions::default(),
        )
    }

    /// [`ClientTls::new`] with etcd's further TLS settings (`--client-crl-file`,
    /// `--client-cert-allowed-hostname`, `--cipher-suites`, the TLS versions).
    pub fn with_options(
        cert_pem: Vec<u8>,
        key_pem: Vec<u8>,
        ca_pem: Option<Vec<u8>>,
        client_cert_auth: bool,
        options: &TlsOptions,
    ) -> Result<Self, TlsError> {
        let fail = |input, reason: String| TlsError { input, reason };
        certificates(&cert_pem).map_err(|r| fail(PemInput::Cert, r))?;
        if !has_private_key(&key_pem) {
            return Err(fail(PemInput::Key, "no PEM private key found".into()));
        }
        if let Some(ca) = &ca_pem {
            certificates(ca).map_err(|r| fail(PemInput::TrustedCa, r))?;
        } else if client_cert_auth {
            return Err(fail(
                PemInput::TrustedCa,
                "client certificate authentication needs a trusted CA".into(),
            ));
        }
        let mut config = server_config(
            &cert_pem,
            key_pem,
            ca_pem.as_deref(),
            ca_pem.is_some(),
            options,
        )?;
        config.alpn_protocols = vec![b"http/1.1".to_vec(), ALPN_H2.to_vec()];
        Ok(ClientTls {
            config: Arc::new(config),
            trusted_ca: ca_pem.is_some(),
            client_cert_auth,
        })
    }

    /// `--client-cert-auth`: the verified certificate's common name is the user.
    pub fn client_cert_auth(&self) -> bool {
        self.client_cert_auth
    }

    /// The server's side of the handshake on an accepted connection, within
    /// [`HANDSHAKE_TIMEOUT`]. Fails on a handshake rustls refuses (among them a client without
    /// a certificate of the trusted CA when there is one) and on a timeout.
    pub(crate) async fn accept<IO>(&self, io: IO) -> std::io::Result<TlsStream<IO>>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.config.clone());
        tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(io))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "TLS handshake"))?
    }
}

/// The common name of the client certificate this request's connection presented, which the
/// handshake has verified against `--trusted-ca-file` (a connection over plain TCP, or over TLS
/// without a trusted CA, has none). etcd takes it as the user name when `--client-cert-auth` is
/// on and no token is sent.
pub fn client_common_name<T>(req: &tonic::Request<T>) -> Option<String> {
    let certs = req.peer_certs()?;
    common_name(certs.first()?.as_ref())
}

/// Every `CERTIFICATE` block parses as X.509, and there is at least one.
fn certificates(pem: &[u8]) -> Result<usize, String> {
    let mut count = 0;
    for block in Pem::iter_from_buffer(pem) {
        let block = block.map_err(|e| format!("malformed PEM: {e}"))?;
        if block.label != "CERTIFICATE" {
            continue;
        }
        count += 1;
        block
            .parse_x509()
            .map_err(|e| format!("certificate {count} is not valid X.509: {e}"))?;
    }
    if count == 0 {
        return Err("no PEM certificate found".into());
    }
    Ok(count)
}

/// A PKCS#8, PKCS#1 (RSA) or SEC1 (EC) private key block.
fn has_private_key(pem: &[u8]) -> bool {
    Pem::iter_from_buffer(pem)
        .filter_map(Result::ok)
        .any(|b| b.label.ends_with("PRIVATE KEY"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_proto::etcdserverpb::cluster_client::ClusterClient;
    use actcd_proto::etcdserverpb::cluster_server::{Cluster, ClusterServer};
    use actcd_proto::etcdserverpb::{
        Member, MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
        MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
        MemberUpdateRequest, MemberUpdateResponse,
    };
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair,
    };
    use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity, Server};
    use tonic::{Request, Response, Status};

    /// A key pair and its certificate, in PEM.
    struct Pems {
        cert: String,
        key: String,
    }

    struct Ca {
        cert: rcgen::Certificate,
        key: KeyPair,
    }

    impl Ca {
        fn new(name: &str) -> Ca {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.distinguished_name.push(DnType::CommonName, name);
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            let cert = params.self_signed(&key).unwrap();
            Ca { cert, key }
        }

        fn pem(&self) -> String {
            self.cert.pem()
        }

        /// A leaf: a server's for 127.0.0.1 when `server`, else a client's with CN `cn`.
        fn issue(&self, cn: Option<&str>, server: bool) -> Pems {
            let key = KeyPair::generate().unwrap();
            let sans = if server {
                vec!["127.0.0.1".to_string(), "localhost".to_string()]
            } else {
                vec![]
            };
            let mut params = CertificateParams::new(sans).unwrap();
            // rcgen's default subject is a CN of its own.
            params.distinguished_name = DistinguishedName::new();
            if let Some(cn) = cn {
                params.distinguished_name.push(DnType::CommonName, cn);
            }
            params.extended_key_usages = vec![if server {
                ExtendedKeyUsagePurpose::ServerAuth
            } else {
                ExtendedKeyUsagePurpose::ClientAuth
            }];
            let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
            Pems {
                cert: cert.pem(),
                key: key.serialize_pem(),
            }
        }
    }

    #[test]
    fn plain_requests_have_no_common_name() {
        assert_eq!(client_common_name(&Request::new(())), None);
    }

    #[test]
    fn client_tls_refuses_what_could_not_serve() {
        let ca = Ca::new("ca");
        let other = Ca::new("other");
        let server = ca.issue(Some("server"), true);
        let stranger = other.issue(Some("server"), true);
        struct Case {
            name: &'static str,
            cert: String,
            key: String,
            ca: Option<String>,
            client_cert_auth: bool,
            want_err: Option<PemInput>,
        }
        let case = |name, cert: &str, key: &str, ca: Option<&str>, cca, want_err| Case {
            name,
            cert: cert.into(),
            key: key.into(),
            ca: ca.map(str::to_string),
            client_cert_auth: cca,
            want_err,
        };
        let ca_pem = ca.pem();
        let cases = [
            case("key pair", &server.cert, &server.key, None, false, None),
            case(
                "key pair and CA",
                &server.cert,
                &server.key,
                Some(&ca_pem),
                true,
                None,
            ),
            case(
                "CA without client-cert-auth",
                &server.cert,
                &server.key,
                Some(&ca_pem),
                false,
                None,
            ),
            case(
                "garbage certificate",
                "garbage\n",
                &server.key,
                None,
                false,
                Some(PemInput::Cert),
            ),
            case(
                "a key where the certificate goes",
                &server.key,
                &server.key,
                None,
                false,
                Some(PemInput::Cert),
            ),
            case(
                "garbage key",
                &server.cert,
                "garbage\n",
                None,
                false,
                Some(PemInput::Key),
            ),
            case(
                "key of another certificate",
                &server.cert,
                &stranger.key,
                None,
                false,
                Some(PemInput::Key),
            ),
            case(
                "garbage CA",
                &server.cert,
                &server.key,
                Some("garbage\n"),
                true,
                Some(PemInput::TrustedCa),
            ),
            case(
                "client-cert-auth without CA",
                &server.cert,
                &server.key,
                None,
                true,
                Some(PemInput::TrustedCa),
            ),
        ];
        for c in cases {
            let got = ClientTls::new(
                c.cert.into_bytes(),
                c.key.into_bytes(),
                c.ca.map(String::into_bytes),
                c.client_cert_auth,
            );
            assert_eq!(got.err().map(|e| e.input), c.want_err, "{}", c.name);
        }
    }

    /// Answers MemberList with one member named after the caller's certificate CN.
    struct WhoAmI;

    #[tonic::async_trait]
    impl Cluster for WhoAmI {
        async fn member_add(
            &self,
            _: Request<MemberAddRequest>,
        ) -> Result<Response<MemberAddResponse>, Status> {
            Err(Status::unimplemented(""))
        }
        async fn member_remove(
            &self,
            _: Request<MemberRemoveRequest>,
        ) -> Result<Response<MemberRemoveResponse>, Status> {
            Err(Status::unimplemented(""))
        }
        async fn member_update(
            &self,
            _: Request<MemberUpdateRequest>,
        ) -> Result<Response<MemberUpdateResponse>, Status> {
            Err(Status::unimplemented(""))
        }
        async fn member_list(
            &self,
            req: Request<MemberListRequest>,
        ) -> Result<Response<MemberListResponse>, Status> {
            let name = client_common_name(&req).unwrap_or_default();
            Ok(Response::new(MemberListResponse {
                header: None,
                members: vec![Member {
                    name,
                    ..Member::default()
                }],
            }))
        }
        async fn member_promote(
            &self,
            _: Request<MemberPromoteRequest>,
        ) -> Result<Response<MemberPromoteResponse>, Status> {
            Err(Status::unimplemented(""))
        }
    }

    /// Serves `WhoAmI` with `tls` through the same handshake and routing as `serve` (no HTTP/1.1
    /// handler here: every decrypted connection goes to tonic).
    async fn who_am_i_server(tls: ClientTls) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let router = Server::builder().add_service(ClusterServer::new(WhoAmI));
        let counters = Arc::new(crate::metrics::FrontCounters::default());
        let incoming = crate::server::decrypted(listener, tls, counters);
        tokio::spawn(router.serve_with_incoming(incoming));
        port
    }

    /// The CN the server saw, or the error the call ended with.
    async fn ask(port: u16, ca: &str, me: Option<&Pems>) -> Result<String, String> {
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
        if let Some(me) = me {
            tls = tls.identity(Identity::from_pem(&me.cert, &me.key));
        }
        let channel = Channel::from_shared(format!("https://127.0.0.1:{port}"))
            .unwrap()
            .tls_config(tls)
            .map_err(|e| e.to_string())?
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(5));
        let channel = channel.connect().await.map_err(|e| format!("{e:?}"))?;
        let resp = ClusterClient::new(channel)
            .member_list(MemberListRequest::default())
            .await
            .map_err(|s| format!("{s:?}"))?;
        Ok(resp.into_inner().members[0].name.clone())
    }

    #[tokio::test]
    async fn the_verified_client_certificate_names_the_caller() {
        let ca = Ca::new("ca");
        let other = Ca::new("other");
        let server = ca.issue(Some("server"), true);
        let alice = ca.issue(Some("alice"), false);
        let mallory = other.issue(Some("mallory"), false);
        let tls = |ca_pem: Option<String>, cca| {
            ClientTls::new(
                server.cert.clone().into_bytes(),
                server.key.clone().into_bytes(),
                ca_pem.map(String::into_bytes),
                cca,
            )
            .unwrap()
        };
        struct Case<'a> {
            name: &'a str,
            tls: ClientTls,
            client: Option<&'a Pems>,
            /// `Err`: the call fails. Over TLS 1.3 that is the server's alert or the connection
            /// closing, whichever the client reads first, so the text is not compared.
            want: Result<&'a str, ()>,
        }
        let cases = [
            Case {
                name: "client-cert-auth, good certificate",
                tls: tls(Some(ca.pem()), true),
                client: Some(&alice),
                want: Ok("alice"),
            },
            Case {
                name: "client-cert-auth, no certificate",
                tls: tls(Some(ca.pem()), true),
                client: None,
                want: Err(()),
            },
            Case {
                name: "client-cert-auth, certificate of another CA",
                tls: tls(Some(ca.pem()), true),
                client: Some(&mallory),
                want: Err(()),
            },
            // etcd: a trusted CA alone requires client certificates too.
            Case {
                name: "trusted CA only, no certificate",
                tls: tls(Some(ca.pem()), false),
                client: None,
                want: Err(()),
            },
            Case {
                name: "trusted CA only, good certificate",
                tls: tls(Some(ca.pem()), false),
                client: Some(&alice),
                want: Ok("alice"),
            },
            // Without a CA no client certificate is asked for, so none is seen.
            Case {
                name: "no CA, client offers one",
                tls: tls(None, false),
                client: Some(&alice),
                want: Ok(""),
            },
            Case {
                name: "no CA, no certificate",
                tls: tls(None, false),
                client: None,
                want: Ok(""),
            },
        ];
        for c in cases {
            let port = who_am_i_server(c.tls).await;
            let got = ask(port, &ca.pem(), c.client).await;
            match c.want {
                Ok(want_cn) => assert_eq!(got.as_deref(), Ok(want_cn), "{}", c.name),
                Err(()) => assert!(got.is_err(), "{}: got {got:?}", c.name),
            }
        }
    }
}
