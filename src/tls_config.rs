//! The client and peer TLS flags, and the settings derived from them: the files are read and
//! checked here so a bad one stops start-up with its flag's name and etcd's message.

use std::path::{Path, PathBuf};

use actcd_front::{ClientTls, PemInput};

use crate::config::{ConfigError, parse_go_bool};

/// etcd's TLS flags for the client and the peer ports.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsFlags {
    /// Path to the client server TLS cert file (PEM), served on `https://` client URLs.
    #[arg(long, env = "ETCD_CERT_FILE", value_parser = parse_path)]
    pub cert_file: Option<PathBuf>,
    /// Path to the client server TLS key file (PEM).
    #[arg(long, env = "ETCD_KEY_FILE", value_parser = parse_path)]
    pub key_file: Option<PathBuf>,
    /// Path to the client server TLS trusted CA cert file: clients on `https://` URLs must
    /// present a certificate it signed.
    #[arg(long, env = "ETCD_TRUSTED_CA_FILE", value_parser = parse_path)]
    pub trusted_ca_file: Option<PathBuf>,
    /// Enable client cert authentication: a verified certificate's common name is the user.
    #[arg(
        long,
        env = "ETCD_CLIENT_CERT_AUTH",
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        default_value = "false",
        value_parser = parse_go_bool
    )]
    pub client_cert_auth: bool,
    /// Path to the peer server TLS cert file (PEM), served on `https://` peer URLs and
    /// presented when connecting to `https://` peers.
    #[arg(long, env = "ETCD_PEER_CERT_FILE", value_parser = parse_path)]
    pub peer_cert_file: Option<PathBuf>,
    /// Path to the peer server TLS key file (PEM).
    #[arg(long, env = "ETCD_PEER_KEY_FILE", value_parser = parse_path)]
    pub peer_key_file: Option<PathBuf>,
    /// Path to the peer TLS trusted CA file: peers' certificates must chain to it.
    #[arg(long, env = "ETCD_PEER_TRUSTED_CA_FILE", value_parser = parse_path)]
    pub peer_trusted_ca_file: Option<PathBuf>,
    /// Require peers connecting to this member to present a certificate the CA signed.
    #[arg(
        long,
        env = "ETCD_PEER_CLIENT_CERT_AUTH",
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        default_value = "false",
        value_parser = parse_go_bool
    )]
    pub peer_client_cert_auth: bool,
}

/// A path that may be empty, as etcd's flags default to: `ETCD_CERT_FILE=` means no file.
fn parse_path(s: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(s))
}

/// A path flag that was given and is not empty.
fn path_flag(p: &Option<PathBuf>) -> Option<&Path> {
    p.as_deref().filter(|p| !p.as_os_str().is_empty())
}

/// The client TLS settings, checked as etcd checks them at start-up: an `https://` URL needs
/// `--cert-file` and `--key-file`; with only `http://` URLs they are ignored with a warning and
/// their files are not read.
pub(crate) fn client_tls(
    flags: &TlsFlags,
    client_urls: &[String],
) -> Result<Option<ClientTls>, ConfigError> {
    let (cert_file, key_file) = (path_flag(&flags.cert_file), path_flag(&flags.key_file));
    let trusted_ca_file = path_flag(&flags.trusted_ca_file);
    let key_pair_given = cert_file.is_some() || key_file.is_some();
    for url in client_urls.iter().filter(|u| u.starts_with("http://")) {
        if key_pair_given {
            tracing::warn!(
                client_url = %url,
                "scheme is HTTP while key and cert files are present; ignoring key and cert files"
            );
        }
        if flags.client_cert_auth {
            tracing::warn!(
                client_url = %url,
                "scheme is HTTP while --client-cert-auth is enabled; ignoring client cert auth for this URL"
            );
        }
    }
    let Some(https) = client_urls.iter().find(|u| u.starts_with("https://")) else {
        return Ok(None);
    };
    let (cert_file, key_file) = match (cert_file, key_file) {
        (Some(cert), Some(key)) => (cert, key),
        (None, None) => return Err(ConfigError::TlsKeyCertMissing(https.clone())),
        _ => {
            return Err(ConfigError::TlsFlags(
                "--cert-file and --key-file must be given together",
            ));
        }
    };
    // etcd would check client certificates against the system's CAs here: a trust nobody asks
    // for on purpose.
    if flags.client_cert_auth && trusted_ca_file.is_none() {
        return Err(ConfigError::TlsFlags(
            "--client-cert-auth needs --trusted-ca-file, the CA client certificates must chain to",
        ));
    }
    let names = TlsFlagNames {
        cert: "--cert-file",
        key: "--key-file",
        ca: "--trusted-ca-file",
    };
    let files = (cert_file, key_file, trusted_ca_file);
    load_tls(&names, files, flags.client_cert_auth).map(|(tls, _)| Some(tls))
}

/// The flags naming one set of TLS files, for errors.
struct TlsFlagNames {
    cert: &'static str,
    key: &'static str,
    ca: &'static str,
}

/// The PEM files as read.
struct Pems {
    cert: Vec<u8>,
    key: Vec<u8>,
    ca: Option<Vec<u8>>,
}

/// Reads a key pair and an optional CA and checks them as the client port uses them, naming
/// the flag and the file of whatever is wrong.
fn load_tls(
    names: &TlsFlagNames,
    (cert_file, key_file, ca_file): (&Path, &Path, Option<&Path>),
    client_cert_auth: bool,
) -> Result<(ClientTls, Pems), ConfigError> {
    let file_error = |flag, path: &Path, reason: String| ConfigError::TlsFile {
        flag,
        path: path.display().to_string(),
        reason,
    };
    let read = |flag, path: &Path| {
        std::fs::read(path).map_err(|e| file_error(flag, path, format!("cannot read: {e}")))
    };
    let pems = Pems {
        cert: read(names.cert, cert_file)?,
        key: read(names.key, key_file)?,
        ca: match ca_file {
            Some(path) => Some(read(names.ca, path)?),
            None => None,
        },
    };
    let tls = ClientTls::new(
        pems.cert.clone(),
        pems.key.clone(),
        pems.ca.clone(),
        client_cert_auth,
    )
    .map_err(|e| {
        let (flag, path) = match e.input {
            PemInput::Cert => (names.cert, cert_file),
            PemInput::Key => (names.key, key_file),
            // Without a CA file only client-cert-auth fails, and callers refuse that first.
            PemInput::TrustedCa => (names.ca, ca_file.unwrap_or(Path::new(""))),
        };
        file_error(flag, path, e.reason)
    })?;
    Ok((tls, pems))
}

/// The peer TLS settings, checked as the client ones are: an `https://` peer URL (listened on,
/// or of any member) needs `--peer-cert-file` and `--peer-key-file`; `--peer-client-cert-auth`
/// needs `--peer-trusted-ca-file`.
pub(crate) fn peer_tls(
    flags: &TlsFlags,
    peer_urls: &[String],
) -> Result<Option<actcd_transport::PeerTls>, ConfigError> {
    let Some(https) = peer_urls.iter().find(|u| u.starts_with("https://")) else {
        if flags.peer_cert_file.is_some() || flags.peer_key_file.is_some() {
            tracing::warn!(
                "peer URLs are HTTP while peer key and cert files are present; ignoring them"
            );
        }
        return Ok(None);
    };
    let (cert_file, key_file) = match (
        path_flag(&flags.peer_cert_file),
        path_flag(&flags.peer_key_file),
    ) {
        (Some(cert), Some(key)) => (cert, key),
        (None, None) => return Err(ConfigError::PeerTlsKeyCertMissing(https.clone())),
        _ => {
            return Err(ConfigError::TlsFlags(
                "--peer-cert-file and --peer-key-file must be given together",
            ));
        }
    };
    let ca_file = path_flag(&flags.peer_trusted_ca_file);
    if flags.peer_client_cert_auth && ca_file.is_none() {
        return Err(ConfigError::TlsFlags(
            "--peer-client-cert-auth needs --peer-trusted-ca-file, the CA peer certificates must chain to",
        ));
    }
    let names = TlsFlagNames {
        cert: "--peer-cert-file",
        key: "--peer-key-file",
        ca: "--peer-trusted-ca-file",
    };
    // The same checks as the client port's, so a bad file is named at start-up.
    let (_, pems) = load_tls(&names, (cert_file, key_file, ca_file), false)?;
    Ok(Some(actcd_transport::PeerTls {
        cert_pem: pems.cert,
        key_pem: pems.key,
        ca_pem: pems.ca,
        client_cert_auth: flags.peer_client_cert_auth,
    }))
}
