//! Tests of the front's `tls.rs` (its `tests` module, included from there by `#[path]`).

use super::*;
use actcd_proto::etcdserverpb::cluster_client::ClusterClient;
use actcd_proto::etcdserverpb::cluster_server::{Cluster, ClusterServer};
use actcd_proto::etcdserverpb::{
    Member, MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
    MemberUpdateRequest, MemberUpdateResponse,
};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
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
