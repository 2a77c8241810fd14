//! The client and peer TLS flags, and the settings derived from them: the files are read and
//! checked here so a bad one stops start-up with its flag's name and etcd's message.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use actcd_front::{ClientTls, PemInput, ServerCheck, TlsError, TlsOptions};

use crate::config::{ConfigError, GO_BOOL};

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
    #[arg(long, env = "ETCD_CLIENT_CERT_AUTH", default_value = "false", action = GO_BOOL)]
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
    #[arg(long, env = "ETCD_PEER_CLIENT_CERT_AUTH", default_value = "false", action = GO_BOOL)]
    pub peer_client_cert_auth: bool,
    /// Client TLS using generated certificates (under `<data-dir>/fixtures/client`), when
    /// `--cert-file` and `--key-file` are not given.
    #[arg(long, env = "ETCD_AUTO_TLS", default_value = "false", action = GO_BOOL)]
    pub auto_tls: bool,
    /// Peer TLS using generated certificates (under `<data-dir>/fixtures/peer`), when
    /// `--peer-cert-file` and `--peer-key-file` are not given. Peers' certificates are then not
    /// verified, as etcd does.
    #[arg(long, env = "ETCD_PEER_AUTO_TLS", default_value = "false", action = GO_BOOL)]
    pub peer_auto_tls: bool,
    /// Validity of the generated client and peer certificates, in years.
    #[arg(long, env = "ETCD_SELF_SIGNED_CERT_VALIDITY", default_value_t = 1)]
    pub self_signed_cert_validity: u32,
    /// Path to the client certificate revocation list file.
    #[arg(long, env = "ETCD_CLIENT_CRL_FILE", value_parser = parse_path)]
    pub client_crl_file: Option<PathBuf>,
    /// Allowed TLS hostname for client cert authentication.
    #[arg(long, env = "ETCD_CLIENT_CERT_ALLOWED_HOSTNAME", default_value = "")]
    pub client_cert_allowed_hostname: String,
    /// Path to the peer certificate revocation list file.
    #[arg(long, env = "ETCD_PEER_CRL_FILE", value_parser = parse_path)]
    pub peer_crl_file: Option<PathBuf>,
    /// Required CN for client certs connecting to the peer endpoint.
    #[arg(long, env = "ETCD_PEER_CERT_ALLOWED_CN", default_value = "")]
    pub peer_cert_allowed_cn: String,
    /// Allowed TLS hostname for inter peer authentication.
    #[arg(long, env = "ETCD_PEER_CERT_ALLOWED_HOSTNAME", default_value = "")]
    pub peer_cert_allowed_hostname: String,
    /// Skip verification of SAN field in client certificate for peer connections.
    #[arg(
        long,
        env = "ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION",
        default_value = "false",
        action = GO_BOOL,
    )]
    pub experimental_peer_skip_client_san_verification: bool,
    /// Comma-separated list of supported TLS cipher suites between client/server and peers
    /// (Go's names; empty: the TLS stack's defaults).
    #[arg(long, env = "ETCD_CIPHER_SUITES", default_value = "")]
    pub cipher_suites: String,
    /// Minimum TLS version supported by etcd (`TLS1.2`, `TLS1.3`).
    #[arg(long, env = "ETCD_TLS_MIN_VERSION", default_value = "TLS1.2")]
    pub tls_min_version: String,
    /// Maximum TLS version supported by etcd (empty: the highest the TLS stack has).
    #[arg(long, env = "ETCD_TLS_MAX_VERSION", default_value = "")]
    pub tls_max_version: String,
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

impl TlsFlags {
    /// The options shared by both ports: cipher suites and versions.
    fn common_options(&self) -> TlsOptions {
        TlsOptions {
            cipher_suites: self
                .cipher_suites
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            min_version: non_empty(&self.tls_min_version),
            max_version: non_empty(&self.tls_max_version),
            ..TlsOptions::default()
        }
    }

    fn client_options(&self) -> TlsOptions {
        TlsOptions {
            crl_file: path_flag(&self.client_crl_file).map(Path::to_path_buf),
            allowed_hostname: non_empty(&self.client_cert_allowed_hostname),
            ..self.common_options()
        }
    }

    fn peer_options(&self) -> TlsOptions {
        TlsOptions {
            crl_file: path_flag(&self.peer_crl_file).map(Path::to_path_buf),
            allowed_cn: non_empty(&self.peer_cert_allowed_cn),
            allowed_hostname: non_empty(&self.peer_cert_allowed_hostname),
            ..self.common_options()
        }
    }

    /// Checks `options` as etcd does (the cipher suites and TLS versions whatever the URLs; the
    /// allowed CN/hostname when the peer port uses TLS); the reason is etcd's message.
    fn check_options(&self, options: TlsOptions) -> Result<(), ConfigError> {
        options.check().map_err(|reason| {
            let (flag, value) = if reason.contains("cipher suite") {
                ("--cipher-suites", self.cipher_suites.clone())
            } else if reason.contains("AllowedCN") {
                ("--peer-cert-allowed-cn", self.peer_cert_allowed_cn.clone())
            } else if !self.tls_max_version.is_empty()
                && reason.contains(&format!("{:?}", self.tls_max_version))
            {
                ("--tls-max-version", self.tls_max_version.clone())
            } else {
                ("--tls-min-version", self.tls_min_version.clone())
            };
            ConfigError::Invalid {
                flag,
                value,
                reason,
            }
        })
    }
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
/// `--cert-file` and `--key-file`, or `--auto-tls` (a certificate generated under
/// `<data-dir>/fixtures/client`); with only `http://` URLs they are ignored with a warning and
/// their files are not read.
pub(crate) fn client_tls(
    flags: &TlsFlags,
    client_urls: &[String],
    data_dir: &Path,
) -> Result<Option<ClientTls>, ConfigError> {
    flags.check_options(flags.common_options())?;
    let (cert_file, key_file) = (path_flag(&flags.cert_file), path_flag(&flags.key_file));
    let trusted_ca_file = path_flag(&flags.trusted_ca_file);
    let key_pair_given = cert_file.is_some() || key_file.is_some();
    for url in client_urls
        .iter()
        .filter(|u| u.starts_with("http://") || u.starts_with("unix://"))
    {
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
    let Some(https) = client_urls
        .iter()
        .find(|u| u.starts_with("https://") || u.starts_with("unixs://"))
    else {
        return Ok(None);
    };
    if flags.auto_tls && key_pair_given {
        tracing::warn!("ignoring client auto TLS since certs given");
    }
    if flags.auto_tls && !key_pair_given {
        // etcd's generated TLS info replaces the flags': no CA, no client-cert-auth, no CRL.
        let dir = data_dir.join("fixtures").join("client");
        let (cert, key) = self_cert(&dir, client_urls, flags.self_signed_cert_validity)?;
        let tls = ClientTls::with_options(cert, key, None, false, &flags.common_options())
            .map_err(|e| ConfigError::TlsFile {
                flag: "--auto-tls",
                path: dir.display().to_string(),
                reason: e.reason,
            })?;
        return Ok(Some(tls));
    }
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
    let pems = read_pems(&names, (cert_file, key_file, trusted_ca_file))?;
    let files = (cert_file, key_file, trusted_ca_file);
    ClientTls::with_options(
        pems.cert,
        pems.key,
        pems.ca,
        flags.client_cert_auth,
        &flags.client_options(),
    )
    .map(Some)
    .map_err(|e| tls_error(&names, files, e))
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

type Files<'a> = (&'a Path, &'a Path, Option<&'a Path>);

/// Reads a key pair and an optional CA, naming the flag and the file of what can't be read.
fn read_pems(
    names: &TlsFlagNames,
    (cert_file, key_file, ca_file): Files,
) -> Result<Pems, ConfigError> {
    let read = |flag, path: &Path| {
        std::fs::read(path).map_err(|e| ConfigError::TlsFile {
            flag,
            path: path.display().to_string(),
            reason: format!("cannot read: {e}"),
        })
    };
    Ok(Pems {
        cert: read(names.cert, cert_file)?,
        key: read(names.key, key_file)?,
        ca: match ca_file {
            Some(path) => Some(read(names.ca, path)?),
            None => None,
        },
    })
}

/// A TLS error named by its flag and file.
fn tls_error(
    names: &TlsFlagNames,
    (cert_file, key_file, ca_file): Files,
    e: TlsError,
) -> ConfigError {
    let (flag, path) = match e.input {
        PemInput::Cert => (names.cert, cert_file),
        PemInput::Key => (names.key, key_file),
        // Without a CA file only client-cert-auth fails, and callers refuse that first.
        PemInput::TrustedCa => (names.ca, ca_file.unwrap_or(Path::new(""))),
        PemInput::Options => ("--cipher-suites", Path::new("")),
    };
    ConfigError::TlsFile {
        flag,
        path: path.display().to_string(),
        reason: e.reason,
    }
}

/// etcd's `SelfCert`: the key pair under `dir` (`cert.pem`, `key.pem`), reused when both files
/// are there, else generated: the listen URLs' hosts as SANs (IPs as IP SANs, names as DNS
/// SANs), subject `O=etcd`, `CA:FALSE`, server-auth, valid from today for `years` years.
/// Departures: an ECDSA P-256 key signed with SHA-256 (etcd: P-521 with SHA-512, which ring
/// does not do), a PKCS#8 key file, and whole days (midnight UTC) as the validity bounds; files
/// actcd cannot serve (etcd's P-521 ones) are replaced rather than reused.
fn self_cert(dir: &Path, urls: &[String], years: u32) -> Result<(Vec<u8>, Vec<u8>), ConfigError> {
    let fail = |reason: String| ConfigError::TlsFile {
        flag: "--auto-tls",
        path: dir.display().to_string(),
        reason,
    };
    if years == 0 {
        return Err(ConfigError::Invalid {
            flag: "--self-signed-cert-validity",
            value: "0".into(),
            reason: "selfSignedCertValidity is invalid,it should be greater than 0".into(),
        });
    }
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    if cert_path.exists() && key_path.exists() {
        let read = |p: &Path| std::fs::read(p).map_err(|e| fail(format!("{}: {e}", p.display())));
        let (cert, key) = (read(&cert_path)?, read(&key_path)?);
        // etcd's own generated key is P-521, which ring cannot sign with: a data dir taken over
        // from etcd gets new files (which etcd would reuse in turn) instead of failing to start.
        match ClientTls::new(cert.clone(), key.clone(), None, false) {
            Ok(_) => return Ok((cert, key)),
            Err(e) => tracing::warn!(
                dir = %dir.display(),
                reason = %e,
                "cannot use the generated certificate found there; generating a new one"
            ),
        }
    }
    tracing::warn!(dir = %dir.display(), validity_years = years, "automatically generate certificates");
    let mut params =
        rcgen::CertificateParams::new(Vec::<String>::new()).map_err(|e| fail(e.to_string()))?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "etcd");
    for url in urls {
        let Some(host) = url_host(url) else { continue };
        let san = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => rcgen::SanType::IpAddress(ip),
            Err(_) => rcgen::SanType::DnsName(
                host.try_into()
                    .map_err(|e: rcgen::Error| fail(e.to_string()))?,
            ),
        };
        if !params.subject_alt_names.contains(&san) {
            params.subject_alt_names.push(san);
        }
    }
    params.is_ca = rcgen::IsCa::ExplicitNoCa;
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::DigitalSignature,
        rcgen::KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let mut serial = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut serial)
        .map_err(|_| fail("no randomness for the serial number".into()))?;
    serial[0] &= 0x7f;
    params.serial_number = Some(rcgen::SerialNumber::from_slice(&serial));
    let (y, m, d) = today_utc();
    params.not_before = rcgen::date_time_ymd(y, m, d);
    // etcd's `selfSignedCertValidity`: `years` × 365 days from the start (a calendar date a
    // year on was one day short from the 29th of a month on, clamped to the 28th).
    params.not_after =
        params.not_before + std::time::Duration::from_secs(u64::from(years) * 365 * 86_400);
    let key = rcgen::KeyPair::generate().map_err(|e| fail(e.to_string()))?;
    let cert = params.self_signed(&key).map_err(|e| fail(e.to_string()))?;
    let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
    create_private_dir(dir).map_err(|e| fail(e.to_string()))?;
    write_file(&cert_path, cert_pem.as_bytes(), 0o644).map_err(|e| fail(e.to_string()))?;
    write_file(&key_path, key_pem.as_bytes(), 0o600).map_err(|e| fail(e.to_string()))?;
    tracing::info!(path = %cert_path.display(), "created cert file");
    Ok((cert_pem.into_bytes(), key_pem.into_bytes()))
}

/// The host of a URL, without port or IPv6 brackets.
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    (!host.is_empty()).then(|| host.to_string())
}

/// Today's date in UTC, from the system clock (only the generated certificate's bounds use it).
fn today_utc() -> (i32, u8, u8) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    civil_from_days((secs / 86_400) as i64)
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let y = (yoe + era * 400 + i64::from(m <= 2)) as i32;
    (y, m, d)
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

fn write_file(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// The peer TLS settings, checked as the client ones are: an `https://` peer URL (listened on,
/// or of any member) needs `--peer-cert-file` and `--peer-key-file`, or `--peer-auto-tls`;
/// `--peer-client-cert-auth` needs `--peer-trusted-ca-file`.
pub(crate) fn peer_tls(
    flags: &TlsFlags,
    peer_urls: &[String],
    data_dir: &Path,
    listen_peer_urls: &[String],
) -> Result<Option<actcd_transport::PeerTls>, ConfigError> {
    flags.check_options(flags.common_options())?;
    let Some(https) = peer_urls.iter().find(|u| u.starts_with("https://")) else {
        if flags.peer_cert_file.is_some() || flags.peer_key_file.is_some() {
            tracing::warn!(
                "peer URLs are HTTP while peer key and cert files are present; ignoring them"
            );
        }
        return Ok(None);
    };
    let pair = (
        path_flag(&flags.peer_cert_file),
        path_flag(&flags.peer_key_file),
    );
    if flags.peer_auto_tls && pair != (None, None) {
        tracing::warn!("ignoring peer auto TLS since certs given");
    }
    if flags.peer_auto_tls && pair == (None, None) {
        // As etcd: the generated TLS info replaces the flags', so peers' certificates are
        // neither asked for nor verified, whatever --peer-client-cert-auth says.
        if flags.peer_client_cert_auth {
            tracing::warn!("--peer-client-cert-auth is ignored with --peer-auto-tls, as etcd does");
        }
        let dir = data_dir.join("fixtures").join("peer");
        let (cert, key) = self_cert(&dir, listen_peer_urls, flags.self_signed_cert_validity)?;
        let options = flags.common_options();
        let auto_error = |e: TlsError| ConfigError::TlsFile {
            flag: "--peer-auto-tls",
            path: dir.display().to_string(),
            reason: e.reason,
        };
        let server = actcd_front::server_config(&cert, key.clone(), None, false, &options)
            .map_err(auto_error)?;
        let client = actcd_front::client_config(&cert, key, None, ServerCheck::Skip, &options)
            .map_err(auto_error)?;
        return Ok(Some(actcd_transport::PeerTls {
            server: Arc::new(server),
            client: Arc::new(client),
            client_cert_auth: false,
            san_check: None,
        }));
    }
    let (cert_file, key_file) = match pair {
        (Some(cert), Some(key)) => (cert, key),
        (None, None) => return Err(ConfigError::PeerTlsKeyCertMissing(https.clone())),
        _ => {
            return Err(ConfigError::TlsFlags(
                "--peer-cert-file and --peer-key-file must be given together",
            ));
        }
    };
    flags.check_options(flags.peer_options())?;
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
    let files = (cert_file, key_file, ca_file);
    let pems = read_pems(&names, files)?;
    // The client port's checks too, so a bad file is named at start-up.
    ClientTls::new(pems.cert.clone(), pems.key.clone(), pems.ca.clone(), false)
        .map_err(|e| tls_error(&names, files, e))?;
    let options = flags.peer_options();
    let server = actcd_front::server_config(
        &pems.cert,
        pems.key.clone(),
        pems.ca.as_deref(),
        flags.peer_client_cert_auth,
        &options,
    )
    .map_err(|e| tls_error(&names, files, e))?;
    let client = actcd_front::client_config(
        &pems.cert,
        pems.key,
        pems.ca.as_deref(),
        ServerCheck::Verify,
        &options,
    )
    .map_err(|e| tls_error(&names, files, e))?;
    let san_check: Option<actcd_transport::SanCheck> =
        if flags.experimental_peer_skip_client_san_verification {
            None
        } else {
            Some(Arc::new(|cert, remote| {
                Box::pin(actcd_front::check_client_san(cert, remote))
            }))
        };
    Ok(Some(actcd_transport::PeerTls {
        server: Arc::new(server),
        client: Arc::new(client),
        client_cert_auth: flags.peer_client_cert_auth,
        san_check,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn self_cert_generates_once_then_reuses() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("fixtures").join("client");
        let urls = [
            "https://127.0.0.1:2379".to_string(),
            "https://localhost:2380".to_string(),
        ];
        let (cert, key) = self_cert(&dir, &urls, 2).unwrap();
        assert_eq!(std::fs::read(dir.join("cert.pem")).unwrap(), cert);
        let mode = |f: &str| std::fs::metadata(dir.join(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("key.pem"), 0o600);
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // The same files serve, and again after a restart.
        assert!(ClientTls::new(cert.clone(), key.clone(), None, false).is_ok());
        assert_eq!(self_cert(&dir, &urls, 2).unwrap(), (cert, key));
        let zero = self_cert(&tmp.path().join("other"), &urls, 0).unwrap_err();
        assert!(
            zero.to_string()
                .ends_with("selfSignedCertValidity is invalid,it should be greater than 0"),
            "{zero}"
        );
    }

    /// What etcd 3.5.1's auto TLS leaves in a data dir: a P-521 key (openssl-made here).
    const ETCD_P521_CERT: &str = "-----BEGIN CERTIFICATE-----
MIICDjCCAW+gAwIBAgIUXnxzEsprq60E8Q2YR0J4ktnbQGQwCgYIKoZIzj0EAwQw
DzENMAsGA1UECgwEZXRjZDAgFw0yNjExMjUyMTIzNTlaGA8yMTI2MTEwMTIxMjM1
OVowDzENMAsGA1UECgwEZXRjZDCBmzAQBgcqhkjOPQIBBgUrgQQAIwOBhgAEAOvs
WMLnhRky9majldTNTcUyiy8kT+NR7EA5UT3VPEwP+TmgnR/FGCFR/snM4FPmYeCR
26gVkEjjM8DBlKhV5szPAS19H8KIOs5ObPoVr0Ng9i81VRPS9d1SHOxtHSekTo5K
j+LTBps2Z0ZAGJ/Y/5+1oIWNdcxeqJlG44KHEiwVmRHeo2QwYjAdBgNVHQ4EFgQU
HhoK+9PgKy3SPjJAoFxv8QieOLQwHwYDVR0jBBgwFoAUHhoK+9PgKy3SPjJAoFxv
8QieOLQwDwYDVR0TAQH/BAUwAwEB/zAPBgNVHREECDAGhwR/AAABMAoGCCqGSM49
BAMEA4GMADCBiAJCAa95uOH2QDGDzwL8pz/O6rWf8hKUiN8yzLr2amXtgLLuR/ST
e6Xipiepgrjt6DVgAdOgBAb7KRMG/ZT1ytVb0IjwAkIBAd4x+vyjUh4vU8ytIw6j
/3d4Y0071fhy1w9VKW6AGeLPRSa8+Nvic64RoG9gnxQA/TSv0a4rwDIlrqiHbf26
d5M=
-----END CERTIFICATE-----
";
    const ETCD_P521_KEY: &str = "-----BEGIN EC PRIVATE KEY-----
MIHcAgEBBEIBheNlqhgbByJ7pDDL0jZhc2fOLu/jBB0e6uFfPN8HaMPyhMbhimF7
DzX1GYb37gdXob0NnoWJGrsTZe5ijBwgZUSgBwYFK4EEACOhgYkDgYYABADr7FjC
54UZMvZmo5XUzU3FMosvJE/jUexAOVE91TxMD/k5oJ0fxRghUf7JzOBT5mHgkduo
FZBI4zPAwZSoVebMzwEtfR/CiDrOTmz6Fa9DYPYvNVUT0vXdUhzsbR0npE6OSo/i
0wabNmdGQBif2P+ftaCFjXXMXqiZRuOChxIsFZkR3g==
-----END EC PRIVATE KEY-----
";

    #[test]
    fn an_etcd_generated_p521_certificate_is_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("fixtures").join("peer");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cert.pem"), ETCD_P521_CERT).unwrap();
        std::fs::write(dir.join("key.pem"), ETCD_P521_KEY).unwrap();
        assert!(
            ClientTls::new(ETCD_P521_CERT.into(), ETCD_P521_KEY.into(), None, false).is_err(),
            "ring signs with P-521 now: keep etcd's files"
        );
        let urls = ["https://127.0.0.1:2380".to_string()];
        let (cert, key) = self_cert(&dir, &urls, 1).unwrap();
        assert_ne!(cert, ETCD_P521_CERT.as_bytes());
        assert!(ClientTls::new(cert.clone(), key, None, false).is_ok());
        assert_eq!(std::fs::read(dir.join("cert.pem")).unwrap(), cert);
    }

    #[test]
    fn allowed_cn_and_hostname_exclude_each_other_only_with_peer_tls() {
        use clap::Parser;
        let flags = |peer: &str| {
            crate::config::Flags::parse_from([
                "actcd",
                "--peer-cert-allowed-cn",
                "a",
                "--peer-cert-allowed-hostname",
                "b",
                "--listen-peer-urls",
                peer,
            ])
        };
        let dir = tempfile::tempdir().unwrap();
        let plain = flags("http://127.0.0.1:2380");
        assert!(
            peer_tls(
                &plain.tls,
                &["http://127.0.0.1:2380".into()],
                dir.path(),
                &[]
            )
            .is_ok()
        );
        let err = plain
            .tls
            .check_options(plain.tls.peer_options())
            .unwrap_err();
        assert!(
            err.to_string().ends_with(
                "AllowedCN and AllowedHostname are mutually exclusive (cn=\"a\", hostname=\"b\")"
            ),
            "{err}"
        );
    }

    #[test]
    fn url_hosts() {
        let cases = [
            ("https://127.0.0.1:2379", Some("127.0.0.1")),
            ("https://localhost:2379", Some("localhost")),
            ("https://[::1]:2380", Some("::1")),
            ("https://example.com", Some("example.com")),
            ("unix://", None),
        ];
        for (url, want) in cases {
            assert_eq!(url_host(url).as_deref(), want, "{url}");
        }
    }
}
