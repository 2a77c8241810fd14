//! # actcd-gotls — certificates and TLS settings judged as etcd's Go crypto/tls judges them
//!
//! etcd is a Go program: what a certificate must be to be let in, which `--cipher-suites` names
//! exist and what `--tls-min-version` means are Go's crypto/tls and crypto/x509 rules plus
//! etcd's `pkg/transport` and `tlsutil` on top. actcd speaks TLS with rustls (ring, through
//! tokio-rustls); this crate makes the rustls configurations of both ports answer as etcd
//! 3.5.1 answers. No actor, no tonic, no listener: PEM bytes and [`TlsOptions`] in, a rustls
//! [`ServerConfig`](tokio_rustls::rustls::ServerConfig) ([`server_config`]) or
//! [`ClientConfig`](tokio_rustls::rustls::ClientConfig) ([`client_config`]) out. The front
//! builds the client port's acceptor from it (handshake timeout, ALPN, the CN as user name);
//! the daemon builds the peer port's configurations from it and hands them to the transport.
//!
//! ## What it reproduces
//! - **Go's certificate verification.** Go and webpki agree on nearly everything, and every
//!   leaf goes to webpki but one kind: a certificate with `CA:TRUE` presented as a leaf
//!   (typically a self-signed certificate listed in the trusted CA file and used as a member's
//!   or a client's own), which webpki refuses (`CaUsedAsEndEntity`) and Go accepts like any
//!   other leaf. Such a leaf is verified here Go's way: in the trust pool itself, or chained to
//!   it through the presented intermediates (at most four), every issuer valid now, `CA:TRUE`,
//!   allowed to sign certificates when it has a key usage, within its path length and allowing
//!   the purpose when it lists extended key usages; the signatures checked (ECDSA P-256/P-384
//!   with SHA-256/384, RSA PKCS#1 2048–8192 bits with SHA-256/384/512, Ed25519: what webpki
//!   takes), no critical extension on the leaf other than key usage, SANs, basic constraints
//!   and extended key usage, and for a server the dialled name. For every leaf, as in Go: no
//!   extended-key-usage extension means any purpose; with one, it must list the port's purpose
//!   (client auth for clients and peers dialling in, server auth for a server) or "any".
//! - **Go's `VerifyHostname`** for `--…-allowed-hostname` and a CA leaf's server name: an IP
//!   against the IP SANs, a name against the DNS SANs case-insensitively, a leading `*.`
//!   matching exactly one label, the CN never; **Go's `pkix.Name`** for the common name
//!   ([`common_name`]): of several CN attributes the last counts, an empty one names nobody.
//! - **etcd's checks after verification** (its shared `VerifyPeerCertificate`): the CRL file
//!   (`--client-crl-file`, `--peer-crl-file`, PEM or DER) is read again at every handshake on
//!   the listener and any presented certificate whose serial number it lists is refused
//!   (`transport: certificate serial <hex> revoked`), without checking who signed the list, as
//!   etcd reads serial numbers only; a CRL file that cannot be read refuses every handshake.
//!   `--peer-cert-allowed-cn` / `--…-allowed-hostname` refuse a verified certificate that does
//!   not match with etcd's [`NOT_ALLOWED`] message, in both directions on the peer port; the
//!   two are mutually exclusive in etcd's words. [`check_client_san`] is etcd's check of a
//!   dialling peer's SANs against its remote address. [`ServerCheck::Skip`] is etcd's
//!   `InsecureSkipVerify` for `--peer-auto-tls` (the handshake signatures are still checked).
//! - **Go's cipher-suite names and etcd's TLS versions** ([`TlsOptions::check`]): the 27 names
//!   etcd 3.5.1's `tlsutil.GetCipherSuite` takes (Go 1.16's `CipherSuites()` and
//!   `InsecureCipherSuites()`), exactly as spelt, plus the two legacy ChaCha20 names without
//!   `_SHA256` etcd maps to the same suites; the three TLS 1.3 names are accepted and, as in
//!   Go, change nothing. `TLS1.0`…`TLS1.3` as etcd spells them, `TLS1.2` the default minimum;
//!   etcd's messages for an unknown suite, an unknown version, min above max, and suites with
//!   TLS 1.3 only.
//!
//! ## What it refuses that Go or etcd accepts
//! Each stops start-up or fails a handshake with the reason: the 16 suite names rustls does not
//! implement (CBC, RC4, 3DES, RSA key exchange) and TLS 1.0/1.1; in a `CA:TRUE` leaf's chain,
//! an issuer with name constraints (Go would check them; this crate does not), more than four
//! intermediates, and signatures webpki would not take either (SHA-1, RSA below 2048 bits).
//! [`check_client_san`] never reverse-resolves the address for a wildcard DNS name (etcd does).
//! A client configuration without a CA trusts nothing (no system roots).
//!
//! ## How it is checked
//! The unit tests are tables whose expected column is Go's answer:
//! `verify::tests::client_certificates_as_go_judges_them` is the table the integration test
//! `tls_go::client_certificates_as_etcd_judges_them` also runs against etcd 3.5.1 with etcdctl
//! when its binaries are installed; `crl_and_allowed_names_refuse_verified_certificates`,
//! `peers_servers_are_checked_as_go_checks_them` and `hostnames_match_as_go_matches_them` the
//! CRL, allowed names, peer server certificates and `VerifyHostname`;
//! `options::tests::every_cipher_suite_name_etcd_accepts_maps_as_go_maps_it` walks etcd's whole
//! suite table and `cipher_suites_and_versions_as_etcd_checks_them` etcd's messages.
//! Certificates are made per test with rcgen; there is no fixture file. End to end, the
//! integration tests `tls` and `tls_go` (`tests/integration/`) run real servers and clients
//! through these configurations (auto TLS, CRLs, suites and versions, the peer port's checks,
//! members with self-signed CA certificates). No fuzz target of its own: the bytes a peer sends
//! are parsed by rustls/webpki and x509-parser before anything here sees them.
//!
//! ## Layout
//! `lib.rs` the errors, the common name, the ALPN name · `options.rs` [`TlsOptions`]: the
//! suite names, the versions, the crypto provider they make · `verify.rs` the configurations,
//! the verifiers (Go's chain building for `CA:TRUE` leaves, hostnames, CRL, allowed names) and
//! the peer SAN check.

use std::fmt;

mod options;
mod verify;

pub use options::TlsOptions;
pub use verify::{NOT_ALLOWED, ServerCheck, check_client_san, client_config, server_config};

/// The ALPN protocol name of HTTP/2, which gRPC runs on; peer configurations offer it alone.
pub const ALPN_H2: &[u8] = b"h2";

/// Which input a [`TlsError`] is about, so the caller can name the flag and the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PemInput {
    Cert,
    Key,
    TrustedCa,
    /// The cipher suites, versions or allowed CN/hostname.
    Options,
}

/// A certificate, key or CA that can't be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError {
    pub input: PemInput,
    pub reason: String,
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for TlsError {}

/// The subject's common name in a DER certificate. With several CN attributes the last one
/// counts, as in Go's `pkix.Name` that etcd reads; an empty CN names nobody.
pub fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let last = cert.subject().iter_common_name().last()?;
    let cn = last.as_str().ok()?;
    (!cn.is_empty()).then(|| cn.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

    /// A self-signed certificate whose subject has these CN attributes (none: an empty subject).
    fn with_common_names(cns: &[&str]) -> Vec<u8> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        // rcgen's default subject is a CN of its own.
        params.distinguished_name = DistinguishedName::new();
        for (i, cn) in cns.iter().enumerate() {
            // rcgen keeps one value per attribute type: the CN's OID as a custom type adds
            // another.
            let ty = if i == 0 {
                DnType::CommonName
            } else {
                DnType::CustomDnType(vec![2, 5, 4, 3])
            };
            params.distinguished_name.push(ty, *cn);
        }
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn common_name_is_the_subjects_cn() {
        let cases: [(&[&str], Option<&str>); 3] =
            [(&["alice"], Some("alice")), (&[""], None), (&[], None)];
        for (cns, want_cn) in cases {
            let der = with_common_names(cns);
            assert_eq!(common_name(&der).as_deref(), want_cn, "CNs {cns:?}");
        }
        assert_eq!(common_name(b"not a certificate"), None);
    }

    #[test]
    fn of_several_common_names_the_last_counts() {
        let der = with_common_names(&["first", "second"]);
        assert_eq!(common_name(&der).as_deref(), Some("second"));
    }
}
