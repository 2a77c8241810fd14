//! Certificate verification as Go's crypto/tls does it for etcd (see the crate doc for the
//! rules), with etcd's CRL and allowed CN/hostname checks on top, and the rustls server and
//! client configurations of both ports built around it.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, DistinguishedName, Error, RootCertStore,
    ServerConfig, SignatureScheme,
};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::time::ASN1Time;

use crate::{ALPN_H2, PemInput, TlsError, TlsOptions, common_name};

/// etcd's message when a verified certificate matches neither the allowed CN nor hostname.
pub const NOT_ALLOWED: &str = "client certificate authentication failed";

/// The trust pool of a CA file, as DER and as webpki's anchors.
fn roots(ca_pem: &[u8]) -> Result<(Vec<CertificateDer<'static>>, RootCertStore), TlsError> {
    let fail = |e: &dyn std::fmt::Display| TlsError {
        input: PemInput::TrustedCa,
        reason: e.to_string(),
    };
    let ders = CertificateDer::pem_slice_iter(ca_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(&e))?;
    let mut store = RootCertStore::empty();
    for der in &ders {
        store.add(der.clone()).map_err(|e| fail(&e))?;
    }
    Ok((ders, store))
}

fn key_pair(
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError {
            input: PemInput::Cert,
            reason: format!("malformed PEM: {e}"),
        })?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError {
        input: PemInput::Key,
        reason: format!("unusable private key: {e}"),
    })?;
    Ok((chain, key))
}

fn options_error(reason: String) -> TlsError {
    TlsError {
        input: PemInput::Options,
        reason,
    }
}

/// A server configuration: the key pair; with `ca_pem` and `require_client_cert`, every client
/// must present a certificate Go would verify against that CA (and pass `options`' checks).
pub fn server_config(
    cert_pem: &[u8],
    key_pem: Vec<u8>,
    ca_pem: Option<&[u8]>,
    require_client_cert: bool,
    options: &TlsOptions,
) -> Result<ServerConfig, TlsError> {
    options.check().map_err(options_error)?;
    let (chain, key) = key_pair(cert_pem, &key_pem)?;
    let (provider, versions) = options.provider_and_versions().map_err(options_error)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| options_error(e.to_string()))?;
    let builder = match ca_pem.filter(|_| require_client_cert) {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let (ders, store) = roots(ca)?;
            let webpki =
                WebPkiClientVerifier::builder_with_provider(store.into(), provider.clone())
                    .build()
                    .map_err(|e| TlsError {
                        input: PemInput::TrustedCa,
                        reason: e.to_string(),
                    })?;
            builder.with_client_cert_verifier(Arc::new(GoClientVerifier {
                webpki,
                roots: ders,
                checks: options.checks(),
            }))
        }
    };
    builder.with_single_cert(chain, key).map_err(|e| TlsError {
        input: PemInput::Key,
        reason: format!("cannot be used with the certificate: {e}"),
    })
}

/// How a member dialling a peer checks the peer's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerCheck {
    /// Go's verification against the CA, the peer URL's host as the name.
    Verify,
    /// No verification: etcd's way with auto TLS (`InsecureSkipVerify`). The handshake's
    /// signatures are still checked against the presented certificate.
    Skip,
}

/// A client configuration for dialling peers over HTTP/2: presents the key pair, checks the
/// peer's certificate as `check` says against `ca_pem` (no CA: nothing is trusted), with
/// `options`' allowed CN/hostname (etcd applies them to the servers it dials too).
pub fn client_config(
    cert_pem: &[u8],
    key_pem: Vec<u8>,
    ca_pem: Option<&[u8]>,
    check: ServerCheck,
    options: &TlsOptions,
) -> Result<ClientConfig, TlsError> {
    options.check().map_err(options_error)?;
    let (chain, key) = key_pair(cert_pem, &key_pem)?;
    let (provider, versions) = options.provider_and_versions().map_err(options_error)?;
    let verifier = server_verifier(ca_pem, check, options, &provider)?;
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| options_error(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(chain, key)
        .map_err(|e| TlsError {
            input: PemInput::Key,
            reason: format!("cannot be used with the certificate: {e}"),
        })?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(config)
}

/// The verifier of peers' server certificates [`client_config`] uses.
fn server_verifier(
    ca_pem: Option<&[u8]>,
    check: ServerCheck,
    options: &TlsOptions,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ServerCertVerifier>, TlsError> {
    Ok(match check {
        ServerCheck::Skip => Arc::new(SkipServerVerification(provider.clone())),
        ServerCheck::Verify => {
            let (ders, store) = match ca_pem {
                Some(ca) => roots(ca)?,
                None => (Vec::new(), RootCertStore::empty()),
            };
            let webpki = if store.is_empty() {
                None
            } else {
                Some(
                    WebPkiServerVerifier::builder_with_provider(store.into(), provider.clone())
                        .build()
                        .map_err(|e| TlsError {
                            input: PemInput::TrustedCa,
                            reason: e.to_string(),
                        })?,
                )
            };
            Arc::new(GoServerVerifier {
                webpki,
                roots: ders,
                checks: PeerChecks {
                    // etcd checks the CRL on its listener only.
                    crl_file: None,
                    ..options.checks()
                },
                provider: provider.clone(),
            })
        }
    })
}

/// etcd's checks after verification: the CRL and the allowed CN / hostname.
#[derive(Debug, Clone, Default)]
pub(crate) struct PeerChecks {
    pub(crate) crl_file: Option<PathBuf>,
    pub(crate) allowed_cn: Option<String>,
    pub(crate) allowed_hostname: Option<String>,
}

impl PeerChecks {
    fn check(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
    ) -> Result<(), Error> {
        if let Some(crl) = &self.crl_file {
            let presented = std::iter::once(end_entity).chain(intermediates);
            revoked(crl, presented).map_err(Error::General)?;
        }
        let allowed = match (&self.allowed_cn, &self.allowed_hostname) {
            (Some(cn), _) => common_name(end_entity.as_ref()).as_deref() == Some(cn.as_str()),
            (None, Some(host)) => parse(end_entity).is_some_and(|c| matches_host(&c, host)),
            (None, None) => true,
        };
        if allowed {
            Ok(())
        } else {
            Err(Error::General(NOT_ALLOWED.into()))
        }
    }
}

/// Fails when the CRL file lists the serial number of any of `certs`, or cannot be read.
fn revoked<'a>(
    crl_file: &std::path::Path,
    certs: impl Iterator<Item = &'a CertificateDer<'a>>,
) -> Result<(), String> {
    let bytes = std::fs::read(crl_file).map_err(|e| format!("{}: {e}", crl_file.display()))?;
    let der = match x509_parser::pem::parse_x509_pem(&bytes) {
        Ok((_, pem)) => pem.contents,
        Err(_) => bytes,
    };
    let (_, crl) = x509_parser::parse_x509_crl(&der)
        .map_err(|e| format!("{}: not a CRL: {e}", crl_file.display()))?;
    for cert in certs {
        let Some(cert) = parse(cert) else { continue };
        let serial = &cert.tbs_certificate.serial;
        if crl
            .iter_revoked_certificates()
            .any(|r| &r.user_certificate == serial)
        {
            return Err(format!(
                "transport: certificate serial {} revoked",
                hex(cert.raw_serial())
            ));
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    let trimmed = match bytes.iter().position(|b| *b != 0) {
        Some(i) => &bytes[i..],
        None => &[][..],
    };
    trimmed.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse<'a>(der: &'a CertificateDer<'_>) -> Option<X509Certificate<'a>> {
    x509_parser::parse_x509_certificate(der.as_ref())
        .ok()
        .map(|(_, c)| c)
}

/// Go's `VerifyHostname`: an IP against the IP SANs, a name against the DNS SANs (a leading
/// `*.` label matches one label); the CN does not count.
fn matches_host(cert: &X509Certificate<'_>, host: &str) -> bool {
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return san.value.general_names.iter().any(|n| match n {
            GeneralName::IPAddress(b) => ip_of(b) == Some(ip),
            _ => false,
        });
    }
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    san.value.general_names.iter().any(|n| match n {
        GeneralName::DNSName(pattern) => dns_matches(&pattern.to_ascii_lowercase(), &host),
        _ => false,
    })
}

fn ip_of(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => None,
    }
}

fn dns_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.trim_end_matches('.');
    match pattern.strip_prefix("*.") {
        Some(rest) => host
            .split_once('.')
            .is_some_and(|(label, tail)| !label.is_empty() && tail == rest),
        None => pattern == host,
    }
}

/// The OIDs of the extended key usages.
const EKU_SERVER_AUTH: &str = "1.3.6.1.5.5.7.3.1";
const EKU_CLIENT_AUTH: &str = "1.3.6.1.5.5.7.3.2";

/// Whether `der` says `CA:TRUE`, which webpki refuses as a leaf and Go does not.
fn is_ca(der: &CertificateDer<'_>) -> bool {
    parse(der).is_some_and(|c| matches!(c.basic_constraints(), Ok(Some(bc)) if bc.value.ca))
}

fn bad(e: CertificateError) -> Error {
    Error::InvalidCertificate(e)
}

/// Go's verification of a `CA:TRUE` leaf (see the module doc): in the pool itself, or chained
/// to it.
fn verify_ca_leaf(
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    roots: &[CertificateDer<'static>],
    now: UnixTime,
    purpose: &str,
    name: Option<&ServerName<'_>>,
) -> Result<(), Error> {
    let leaf = parse(end_entity).ok_or(bad(CertificateError::BadEncoding))?;
    let now = ASN1Time::from_timestamp(now.as_secs() as i64)
        .map_err(|_| bad(CertificateError::BadEncoding))?;
    check_validity(&leaf, now)?;
    if !allows_purpose(&leaf, purpose) {
        return Err(bad(CertificateError::InvalidPurpose));
    }
    let handled = ["2.5.29.15", "2.5.29.17", "2.5.29.19", "2.5.29.37"];
    if leaf
        .extensions()
        .iter()
        .any(|e| e.critical && !handled.contains(&e.oid.to_id_string().as_str()))
    {
        return Err(bad(CertificateError::BadEncoding));
    }
    if let Some(name) = name {
        let host = match name {
            ServerName::DnsName(d) => d.as_ref().to_string(),
            ServerName::IpAddress(ip) => IpAddr::from(*ip).to_string(),
            _ => return Err(bad(CertificateError::NotValidForName)),
        };
        if !matches_host(&leaf, &host) {
            return Err(bad(CertificateError::NotValidForName));
        }
    }
    if roots.iter().any(|r| r.as_ref() == end_entity.as_ref()) {
        return Ok(());
    }
    chain_to_pool(&leaf, intermediates, roots, now, purpose, 0)
}

/// How many presented intermediates a `CA:TRUE` leaf's chain may pass through.
const MAX_INTERMEDIATES: usize = 4;

/// Go's path building above `cert`, which has `below` intermediates under it: an issuer in the
/// pool, or a presented intermediate that chains to the pool in turn. Every issuer must be
/// valid now, a CA allowed to sign certificates, within its path length, and allow `purpose`;
/// one with name constraints is refused (Go would check them; actcd does not).
fn chain_to_pool(
    cert: &X509Certificate<'_>,
    intermediates: &[CertificateDer<'_>],
    roots: &[CertificateDer<'static>],
    now: ASN1Time,
    purpose: &str,
    below: usize,
) -> Result<(), Error> {
    let issued_by = |issuer: &X509Certificate<'_>| {
        issuer.subject().as_raw() == cert.issuer().as_raw() && signed_by(cert, issuer)
    };
    let mut refusal = bad(CertificateError::UnknownIssuer);
    for root in roots {
        let Some(issuer) = parse(root) else { continue };
        if issued_by(&issuer) {
            match check_issuer(&issuer, now, purpose, below) {
                Ok(()) => return Ok(()),
                Err(e) => refusal = e,
            }
        }
    }
    if below >= MAX_INTERMEDIATES {
        return Err(refusal);
    }
    for der in intermediates {
        let Some(issuer) = parse(der) else { continue };
        if !issued_by(&issuer) || issuer.subject().as_raw() == cert.subject().as_raw() {
            continue;
        }
        let verdict = check_issuer(&issuer, now, purpose, below).and_then(|()| {
            if roots.iter().any(|r| r.as_ref() == der.as_ref()) {
                Ok(())
            } else {
                chain_to_pool(&issuer, intermediates, roots, now, purpose, below + 1)
            }
        });
        match verdict {
            Ok(()) => return Ok(()),
            Err(e) => refusal = e,
        }
    }
    Err(refusal)
}

/// An issuer as Go requires it: valid now, `CA:TRUE`, allowed to sign certificates (when it
/// says what its key is for), no more intermediates under it than its path length allows, and
/// `purpose` among its extended key usages if it lists any.
fn check_issuer(
    issuer: &X509Certificate<'_>,
    now: ASN1Time,
    purpose: &str,
    below: usize,
) -> Result<(), Error> {
    check_validity(issuer, now)?;
    let Ok(Some(bc)) = issuer.basic_constraints() else {
        return Err(bad(CertificateError::UnknownIssuer));
    };
    let may_sign = match issuer.key_usage() {
        Ok(Some(ku)) => ku.value.key_cert_sign(),
        Ok(None) => true,
        Err(_) => false,
    };
    let within_path_len = bc
        .value
        .path_len_constraint
        .is_none_or(|max| below <= max as usize);
    let constrained = issuer
        .extensions()
        .iter()
        .any(|e| e.oid.to_id_string() == "2.5.29.30");
    if !bc.value.ca || !may_sign || !within_path_len || constrained {
        return Err(bad(CertificateError::UnknownIssuer));
    }
    if !allows_purpose(issuer, purpose) {
        return Err(bad(CertificateError::InvalidPurpose));
    }
    Ok(())
}

fn check_validity(cert: &X509Certificate<'_>, now: ASN1Time) -> Result<(), Error> {
    let v = cert.validity();
    if now < v.not_before {
        return Err(bad(CertificateError::NotValidYet));
    }
    if now > v.not_after {
        return Err(bad(CertificateError::Expired));
    }
    Ok(())
}

/// Go's rule: no extended-key-usage extension, or one that lists `purpose` or "any".
fn allows_purpose(cert: &X509Certificate<'_>, purpose: &str) -> bool {
    match cert.extended_key_usage() {
        Ok(None) => true,
        Ok(Some(eku)) => {
            let e = eku.value;
            e.any
                || (purpose == EKU_CLIENT_AUTH && e.client_auth)
                || (purpose == EKU_SERVER_AUTH && e.server_auth)
                || e.other.iter().any(|o| o.to_id_string() == purpose)
        }
        Err(_) => false,
    }
}

/// Whether `issuer`'s key signed `cert`, for the signature algorithms webpki takes too.
fn signed_by(cert: &X509Certificate<'_>, issuer: &X509Certificate<'_>) -> bool {
    use ring::signature as sig;
    let spki = issuer.public_key();
    let curve = spki
        .algorithm
        .parameters
        .as_ref()
        .and_then(|p| p.as_oid().ok())
        .map(|o| o.to_id_string());
    let p256 = curve.as_deref() == Some("1.2.840.10045.3.1.7");
    let p384 = curve.as_deref() == Some("1.3.132.0.34");
    let algorithm: &'static dyn sig::VerificationAlgorithm =
        match cert.signature_algorithm.algorithm.to_id_string().as_str() {
            "1.2.840.10045.4.3.2" if p256 => &sig::ECDSA_P256_SHA256_ASN1,
            "1.2.840.10045.4.3.2" if p384 => &sig::ECDSA_P384_SHA256_ASN1,
            "1.2.840.10045.4.3.3" if p256 => &sig::ECDSA_P256_SHA384_ASN1,
            "1.2.840.10045.4.3.3" if p384 => &sig::ECDSA_P384_SHA384_ASN1,
            "1.2.840.113549.1.1.11" => &sig::RSA_PKCS1_2048_8192_SHA256,
            "1.2.840.113549.1.1.12" => &sig::RSA_PKCS1_2048_8192_SHA384,
            "1.2.840.113549.1.1.13" => &sig::RSA_PKCS1_2048_8192_SHA512,
            "1.3.101.112" => &sig::ED25519,
            _ => return false,
        };
    sig::UnparsedPublicKey::new(algorithm, &spki.subject_public_key.data)
        .verify(cert.tbs_certificate.as_ref(), &cert.signature_value.data)
        .is_ok()
}

/// Client certificates (and peers dialling in), checked as Go's crypto/tls with etcd's checks.
#[derive(Debug)]
struct GoClientVerifier {
    webpki: Arc<dyn ClientCertVerifier>,
    roots: Vec<CertificateDer<'static>>,
    checks: PeerChecks,
}

impl ClientCertVerifier for GoClientVerifier {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.webpki.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        if is_ca(end_entity) {
            verify_ca_leaf(
                end_entity,
                intermediates,
                &self.roots,
                now,
                EKU_CLIENT_AUTH,
                None,
            )?;
        } else {
            self.webpki
                .verify_client_cert(end_entity, intermediates, now)?;
        }
        self.checks.check(end_entity, intermediates)?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// A peer's server certificate, checked as Go's crypto/tls with etcd's allowed CN/hostname.
#[derive(Debug)]
struct GoServerVerifier {
    /// `None` with no CA: nothing is trusted.
    webpki: Option<Arc<WebPkiServerVerifier>>,
    roots: Vec<CertificateDer<'static>>,
    checks: PeerChecks,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for GoServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if is_ca(end_entity) {
            verify_ca_leaf(
                end_entity,
                intermediates,
                &self.roots,
                now,
                EKU_SERVER_AUTH,
                Some(server_name),
            )?;
        } else if let Some(webpki) = &self.webpki {
            webpki.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            )?;
        } else {
            return Err(bad(CertificateError::UnknownIssuer));
        }
        self.checks.check(end_entity, intermediates)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        tokio_rustls::rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        tokio_rustls::rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// etcd's `InsecureSkipVerify` for auto TLS: any certificate, but the handshake must be signed
/// by its key.
#[derive(Debug)]
struct SkipServerVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for SkipServerVerification {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        tokio_rustls::rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        tokio_rustls::rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// etcd's check of a peer's client certificate against the address it connects from (unless
/// `--experimental-peer-skip-client-san-verification`): a certificate without IP or DNS SANs
/// passes; else the remote IP must be one of its IP SANs or an address one of its DNS names
/// resolves to. Departure: etcd also reverse-resolves the address for wildcard names; a
/// wildcard name never matches here.
pub async fn check_client_san(cert: Vec<u8>, remote: IpAddr) -> Result<(), String> {
    let der = CertificateDer::from(cert);
    let (ips, names) = {
        let Some(cert) = parse(&der) else {
            return Err("unparsable peer certificate".into());
        };
        let Ok(Some(san)) = cert.subject_alternative_name() else {
            return Ok(());
        };
        let mut ips = Vec::new();
        let mut names = Vec::new();
        for n in &san.value.general_names {
            match n {
                GeneralName::IPAddress(b) => ips.extend(ip_of(b)),
                GeneralName::DNSName(d) => names.push(d.to_string()),
                _ => {}
            }
        }
        (ips, names)
    };
    if ips.is_empty() && names.is_empty() {
        return Ok(());
    }
    if ips.contains(&remote) {
        return Ok(());
    }
    if names.is_empty() {
        return Err(format!(
            "x509: certificate is valid for {ips:?}, not {remote}"
        ));
    }
    for name in names.iter().filter(|n| !n.starts_with("*.")) {
        if let Ok(addrs) = tokio::net::lookup_host((name.as_str(), 0)).await
            && addrs.map(|a| a.ip()).any(|ip| ip == remote)
        {
            return Ok(());
        }
    }
    Err(format!(
        "tls: {:?} does not match any of DNSNames {names:?}",
        remote.to_string()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        SanType,
    };
    use tokio_rustls::rustls::crypto::ring as ring_provider;

    /// A certificate and its key.
    struct Issued {
        cert: rcgen::Certificate,
        key: KeyPair,
    }

    impl Issued {
        fn der(&self) -> CertificateDer<'static> {
            self.cert.der().clone()
        }
    }

    /// What a test certificate looks like; `Default` is an ordinary client leaf.
    #[derive(Clone)]
    struct Spec {
        cn: &'static str,
        ca: bool,
        eku: Vec<ExtendedKeyUsagePurpose>,
        sans: Vec<SanType>,
        /// Years from 1975 and 2090 for the expired and not-yet-valid cases.
        validity: Option<(i32, i32)>,
        serial: Option<u8>,
    }

    impl Default for Spec {
        fn default() -> Self {
            Spec {
                cn: "leaf",
                ca: false,
                eku: vec![ExtendedKeyUsagePurpose::ClientAuth],
                sans: Vec::new(),
                validity: None,
                serial: None,
            }
        }
    }

    fn issue(spec: &Spec, issuer: Option<&Issued>) -> Issued {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, spec.cn);
        p.is_ca = if spec.ca {
            IsCa::Ca(BasicConstraints::Unconstrained)
        } else {
            IsCa::ExplicitNoCa
        };
        p.extended_key_usages = spec.eku.clone();
        p.subject_alt_names = spec.sans.clone();
        if let Some((from, to)) = spec.validity {
            p.not_before = rcgen::date_time_ymd(from, 1, 1);
            p.not_after = rcgen::date_time_ymd(to, 1, 1);
        }
        if let Some(s) = spec.serial {
            p.serial_number = Some(rcgen::SerialNumber::from_slice(&[s]));
        }
        let cert = match issuer {
            Some(i) => p.signed_by(&key, &i.cert, &i.key).unwrap(),
            None => p.self_signed(&key).unwrap(),
        };
        Issued { cert, key }
    }

    fn ca(cn: &'static str) -> Issued {
        issue(
            &Spec {
                cn,
                ca: true,
                eku: Vec::new(),
                ..Spec::default()
            },
            None,
        )
    }

    fn client_verifier(pool: &[&Issued], options: &TlsOptions) -> GoClientVerifier {
        let pem: String = pool.iter().map(|c| c.cert.pem()).collect();
        let (ders, store) = roots(pem.as_bytes()).unwrap();
        let provider = Arc::new(ring_provider::default_provider());
        GoClientVerifier {
            webpki: WebPkiClientVerifier::builder_with_provider(store.into(), provider)
                .build()
                .unwrap(),
            roots: ders,
            checks: options.checks(),
        }
    }

    /// Go's crypto/tls answers (checked against etcd 3.5.1 with etcdctl by the integration
    /// test `tls_go::client_certificates_as_etcd_judges_them`).
    #[test]
    fn client_certificates_as_go_judges_them() {
        let root = ca("root");
        let other = ca("other");
        let inter = issue(
            &Spec {
                cn: "intermediate",
                ca: true,
                eku: Vec::new(),
                ..Spec::default()
            },
            Some(&root),
        );
        let self_signed_ca = issue(
            &Spec {
                cn: "self",
                ca: true,
                ..Spec::default()
            },
            None,
        );
        let self_signed_plain = issue(&Spec::default(), None);
        let expired_self = issue(
            &Spec {
                ca: true,
                validity: Some((1975, 1976)),
                ..Spec::default()
            },
            None,
        );
        let server_only_self = issue(
            &Spec {
                ca: true,
                eku: vec![ExtendedKeyUsagePurpose::ServerAuth],
                ..Spec::default()
            },
            None,
        );
        let pool = [
            &root,
            &self_signed_ca,
            &self_signed_plain,
            &expired_self,
            &server_only_self,
        ];
        let verifier = client_verifier(&pool, &TlsOptions::default());
        let leaf = |spec: Spec, by: &Issued| issue(&spec, Some(by)).der();
        let ca_leaf = |by: &Issued| {
            leaf(
                Spec {
                    ca: true,
                    ..Spec::default()
                },
                by,
            )
        };
        let intermediate = |spec: Spec, by: &Issued| issue(&spec, Some(by));
        let ca_spec = Spec {
            cn: "intermediate",
            ca: true,
            eku: Vec::new(),
            ..Spec::default()
        };
        let not_a_ca = intermediate(
            Spec {
                ca: false,
                ..ca_spec.clone()
            },
            &root,
        );
        let expired_inter = intermediate(
            Spec {
                validity: Some((1975, 1976)),
                ..ca_spec.clone()
            },
            &root,
        );
        let foreign_inter = intermediate(ca_spec.clone(), &other);
        let server_inter = intermediate(
            Spec {
                eku: vec![ExtendedKeyUsagePurpose::ServerAuth],
                ..ca_spec.clone()
            },
            &root,
        );
        struct Case {
            name: &'static str,
            chain: Vec<CertificateDer<'static>>,
            want_ok: bool,
        }
        let case = |name, chain, want_ok| Case {
            name,
            chain,
            want_ok,
        };
        let cases = [
            case(
                "leaf signed by the CA",
                vec![leaf(Spec::default(), &root)],
                true,
            ),
            case(
                "CA:TRUE self-signed leaf in the pool",
                vec![self_signed_ca.der()],
                true,
            ),
            case(
                "CA:FALSE self-signed leaf in the pool",
                vec![self_signed_plain.der()],
                true,
            ),
            case(
                "CA:TRUE self-signed leaf not in the pool",
                vec![
                    issue(
                        &Spec {
                            ca: true,
                            ..Spec::default()
                        },
                        None,
                    )
                    .der(),
                ],
                false,
            ),
            case(
                "CA:TRUE leaf signed by the CA",
                vec![leaf(
                    Spec {
                        ca: true,
                        ..Spec::default()
                    },
                    &root,
                )],
                true,
            ),
            case(
                "leaf through an intermediate",
                vec![leaf(Spec::default(), &inter), inter.der()],
                true,
            ),
            case(
                "leaf through an intermediate it does not send",
                vec![leaf(Spec::default(), &inter)],
                false,
            ),
            case(
                "EKU without clientAuth",
                vec![leaf(
                    Spec {
                        eku: vec![ExtendedKeyUsagePurpose::ServerAuth],
                        ..Spec::default()
                    },
                    &root,
                )],
                false,
            ),
            case(
                "EKU serverAuth and clientAuth",
                vec![leaf(
                    Spec {
                        eku: vec![
                            ExtendedKeyUsagePurpose::ServerAuth,
                            ExtendedKeyUsagePurpose::ClientAuth,
                        ],
                        ..Spec::default()
                    },
                    &root,
                )],
                true,
            ),
            case(
                "no EKU extension",
                vec![leaf(
                    Spec {
                        eku: Vec::new(),
                        ..Spec::default()
                    },
                    &root,
                )],
                true,
            ),
            case(
                "expired",
                vec![leaf(
                    Spec {
                        validity: Some((1975, 1976)),
                        ..Spec::default()
                    },
                    &root,
                )],
                false,
            ),
            case(
                "not yet valid",
                vec![leaf(
                    Spec {
                        validity: Some((2090, 2091)),
                        ..Spec::default()
                    },
                    &root,
                )],
                false,
            ),
            case(
                "signed by another CA",
                vec![leaf(Spec::default(), &other)],
                false,
            ),
            case(
                "CA:TRUE leaf signed by another CA",
                vec![leaf(
                    Spec {
                        ca: true,
                        ..Spec::default()
                    },
                    &other,
                )],
                false,
            ),
            case(
                "CA:TRUE self-signed in the pool, expired",
                vec![expired_self.der()],
                false,
            ),
            case(
                "CA:TRUE self-signed in the pool, EKU serverAuth only",
                vec![server_only_self.der()],
                false,
            ),
            case(
                "CA:TRUE leaf through an intermediate",
                vec![ca_leaf(&inter), inter.der()],
                true,
            ),
            case(
                "CA:TRUE leaf through an intermediate it does not send",
                vec![ca_leaf(&inter)],
                false,
            ),
            case(
                "CA:TRUE leaf through a CA:FALSE certificate",
                vec![ca_leaf(&not_a_ca), not_a_ca.der()],
                false,
            ),
            case(
                "CA:TRUE leaf through an expired intermediate",
                vec![ca_leaf(&expired_inter), expired_inter.der()],
                false,
            ),
            case(
                "CA:TRUE leaf through an intermediate of another CA",
                vec![ca_leaf(&foreign_inter), foreign_inter.der()],
                false,
            ),
            case(
                "CA:TRUE leaf through an intermediate without clientAuth",
                vec![ca_leaf(&server_inter), server_inter.der()],
                false,
            ),
        ];
        for c in cases {
            let got = verifier.verify_client_cert(&c.chain[0], &c.chain[1..], UnixTime::now());
            assert_eq!(got.is_ok(), c.want_ok, "{}: {got:?}", c.name);
        }
        assert!(verifier.client_auth_mandatory());
    }

    #[test]
    fn crl_and_allowed_names_refuse_verified_certificates() {
        let root = ca("root");
        let dir = tempfile_dir();
        let crl_path = dir.join("crl.pem");
        let revoked = issue(
            &Spec {
                cn: "revoked",
                serial: Some(7),
                ..Spec::default()
            },
            Some(&root),
        );
        let good = issue(
            &Spec {
                cn: "good",
                serial: Some(8),
                sans: vec![SanType::DnsName("m1.example.com".try_into().unwrap())],
                ..Spec::default()
            },
            Some(&root),
        );
        let crl = rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2020, 1, 1),
            next_update: rcgen::date_time_ymd(2090, 1, 1),
            crl_number: rcgen::SerialNumber::from_slice(&[1]),
            issuing_distribution_point: None,
            revoked_certs: vec![rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from_slice(&[7]),
                revocation_time: rcgen::date_time_ymd(2021, 1, 1),
                reason_code: None,
                invalidity_date: None,
            }],
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        }
        .signed_by(&root.cert, &root.key)
        .unwrap();
        std::fs::write(&crl_path, crl.pem().unwrap()).unwrap();
        std::fs::write(dir.join("crl.der"), crl.der()).unwrap();
        let opts = |f: fn(&mut TlsOptions)| {
            let mut o = TlsOptions::default();
            f(&mut o);
            o
        };
        struct Case {
            name: &'static str,
            options: TlsOptions,
            cert: CertificateDer<'static>,
            want_ok: bool,
        }
        let with_crl = |file: &str| TlsOptions {
            crl_file: Some(dir.join(file)),
            ..TlsOptions::default()
        };
        let cases = [
            Case {
                name: "no CRL",
                options: TlsOptions::default(),
                cert: revoked.der(),
                want_ok: true,
            },
            Case {
                name: "revoked, PEM CRL",
                options: with_crl("crl.pem"),
                cert: revoked.der(),
                want_ok: false,
            },
            Case {
                name: "revoked, DER CRL",
                options: with_crl("crl.der"),
                cert: revoked.der(),
                want_ok: false,
            },
            Case {
                name: "not revoked",
                options: with_crl("crl.pem"),
                cert: good.der(),
                want_ok: true,
            },
            Case {
                name: "CRL file missing",
                options: with_crl("nope"),
                cert: good.der(),
                want_ok: false,
            },
            Case {
                name: "allowed CN",
                options: opts(|o| o.allowed_cn = Some("good".into())),
                cert: good.der(),
                want_ok: true,
            },
            Case {
                name: "another CN",
                options: opts(|o| o.allowed_cn = Some("good".into())),
                cert: revoked.der(),
                want_ok: false,
            },
            Case {
                name: "allowed hostname in the SANs",
                options: opts(|o| o.allowed_hostname = Some("m1.example.com".into())),
                cert: good.der(),
                want_ok: true,
            },
            Case {
                name: "hostname as CN only does not count",
                options: opts(|o| o.allowed_hostname = Some("good".into())),
                cert: good.der(),
                want_ok: false,
            },
        ];
        for c in cases {
            let verifier = client_verifier(&[&root], &c.options);
            let got = verifier.verify_client_cert(&c.cert, &[], UnixTime::now());
            assert_eq!(got.is_ok(), c.want_ok, "{}: {got:?}", c.name);
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "actcd-tls-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn peers_servers_are_checked_as_go_checks_them() {
        let root = ca("root");
        let ip = SanType::IpAddress("127.0.0.1".parse().unwrap());
        let server = |ca_flag: bool, sans: Vec<SanType>, eku, issuer: Option<&Issued>| {
            issue(
                &Spec {
                    cn: "m1",
                    ca: ca_flag,
                    eku: vec![eku],
                    sans,
                    ..Spec::default()
                },
                issuer,
            )
        };
        let self_ca = server(
            true,
            vec![ip.clone()],
            ExtendedKeyUsagePurpose::ServerAuth,
            None,
        );
        let pem = format!("{}{}", root.cert.pem(), self_ca.cert.pem());
        let provider = Arc::new(ring_provider::default_provider());
        let verifier = |options: &TlsOptions| {
            server_verifier(
                Some(pem.as_bytes()),
                ServerCheck::Verify,
                options,
                &provider,
            )
            .unwrap()
        };
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let cases = [
            (
                "leaf signed by the CA",
                server(
                    false,
                    vec![ip.clone()],
                    ExtendedKeyUsagePurpose::ServerAuth,
                    Some(&root),
                ),
                TlsOptions::default(),
                true,
            ),
            (
                "CA:TRUE self-signed server in the pool",
                self_ca,
                TlsOptions::default(),
                true,
            ),
            (
                "CA:TRUE leaf signed by the CA",
                server(
                    true,
                    vec![ip.clone()],
                    ExtendedKeyUsagePurpose::ServerAuth,
                    Some(&root),
                ),
                TlsOptions::default(),
                true,
            ),
            (
                "another IP",
                server(
                    true,
                    vec![SanType::IpAddress("10.0.0.1".parse().unwrap())],
                    ExtendedKeyUsagePurpose::ServerAuth,
                    Some(&root),
                ),
                TlsOptions::default(),
                false,
            ),
            (
                "clientAuth only",
                server(
                    true,
                    vec![ip.clone()],
                    ExtendedKeyUsagePurpose::ClientAuth,
                    Some(&root),
                ),
                TlsOptions::default(),
                false,
            ),
            (
                "allowed CN",
                server(
                    false,
                    vec![ip.clone()],
                    ExtendedKeyUsagePurpose::ServerAuth,
                    Some(&root),
                ),
                TlsOptions {
                    allowed_cn: Some("m1".into()),
                    ..TlsOptions::default()
                },
                true,
            ),
            (
                "another allowed CN",
                server(
                    false,
                    vec![ip.clone()],
                    ExtendedKeyUsagePurpose::ServerAuth,
                    Some(&root),
                ),
                TlsOptions {
                    allowed_cn: Some("m2".into()),
                    ..TlsOptions::default()
                },
                false,
            ),
        ];
        for (case, cert, options, want_ok) in cases {
            let got = verifier(&options).verify_server_cert(
                &cert.der(),
                &[],
                &name,
                &[],
                UnixTime::now(),
            );
            assert_eq!(got.is_ok(), want_ok, "{case}: {got:?}");
        }
        let skip =
            server_verifier(None, ServerCheck::Skip, &TlsOptions::default(), &provider).unwrap();
        let stranger = ca("stranger");
        assert!(
            skip.verify_server_cert(&stranger.der(), &[], &name, &[], UnixTime::now())
                .is_ok()
        );
    }

    #[test]
    fn hostnames_match_as_go_matches_them() {
        let cert = issue(
            &Spec {
                sans: vec![
                    SanType::DnsName("*.example.com".try_into().unwrap()),
                    SanType::DnsName("m1.local".try_into().unwrap()),
                    SanType::IpAddress("10.0.0.1".parse().unwrap()),
                ],
                ..Spec::default()
            },
            None,
        );
        let der = cert.der();
        let parsed = parse(&der).unwrap();
        let cases = [
            ("a.example.com", true),
            ("A.Example.Com", true),
            ("a.b.example.com", false),
            ("example.com", false),
            ("m1.local", true),
            ("m2.local", false),
            ("10.0.0.1", true),
            ("10.0.0.2", false),
            ("leaf", false),
        ];
        for (host, want) in cases {
            assert_eq!(matches_host(&parsed, host), want, "{host}");
        }
    }
}
