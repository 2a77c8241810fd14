//! Peer TLS (`--peer-cert-file`, `--peer-key-file`, `--peer-trusted-ca-file`,
//! `--peer-client-cert-auth`): the peer port serves TLS when its URL is `https://`, and every
//! connection to an `https://` peer verifies the peer against the trusted CA and presents this
//! member's certificate (which a peer with client-cert-auth requires).

use std::time::Duration;

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, Server, ServerTlsConfig};

/// The PEM files, already checked by the daemon at start-up.
#[derive(Debug, Clone)]
pub struct PeerTls {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    pub ca_pem: Option<Vec<u8>>,
    /// Require and verify a client certificate on the peer port.
    pub client_cert_auth: bool,
}

impl PeerTls {
    fn server_config(&self) -> ServerTlsConfig {
        let mut config = ServerTlsConfig::new()
            .identity(Identity::from_pem(&self.cert_pem, &self.key_pem))
            .timeout(Duration::from_secs(5));
        if self.client_cert_auth
            && let Some(ca) = &self.ca_pem
        {
            config = config.client_ca_root(Certificate::from_pem(ca));
        }
        config
    }

    fn client_config(&self) -> ClientTlsConfig {
        let mut config =
            ClientTlsConfig::new().identity(Identity::from_pem(&self.cert_pem, &self.key_pem));
        if let Some(ca) = &self.ca_pem {
            config = config.ca_certificate(Certificate::from_pem(ca));
        }
        config
    }
}

/// An endpoint for a peer URL: TLS for `https://` (which needs the peer TLS settings).
pub fn endpoint(url: &str, tls: Option<&PeerTls>) -> Result<Endpoint, String> {
    let e = Endpoint::from_shared(url.to_string())
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(1))
        .tcp_nodelay(true);
    if !url.starts_with("https://") {
        return Ok(e);
    }
    let tls = tls.ok_or("an https peer URL needs --peer-cert-file and --peer-key-file")?;
    e.tls_config(tls.client_config()).map_err(|e| e.to_string())
}

/// A server builder for the peer port: TLS when `tls` is given.
pub fn server(tls: Option<&PeerTls>) -> Result<Server, tonic::transport::Error> {
    let builder = Server::builder().tcp_nodelay(true);
    match tls {
        Some(t) => builder.tls_config(t.server_config()),
        None => Ok(builder),
    }
}
