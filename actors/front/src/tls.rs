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
#[path = "tls_tests.rs"]
mod tests;
