//! etcd's TLS settings beyond the key pair and the CA, and Go's names for cipher suites and
//! TLS versions.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_rustls::rustls::crypto::{CryptoProvider, ring as ring_provider};
use tokio_rustls::rustls::{SupportedCipherSuite, SupportedProtocolVersion, version};

use crate::verify::PeerChecks;

/// etcd's TLS settings beyond the key pair and the CA, as given on the command line.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// `--client-crl-file` / `--peer-crl-file`: re-read at every handshake.
    pub crl_file: Option<PathBuf>,
    /// `--peer-cert-allowed-cn`.
    pub allowed_cn: Option<String>,
    /// `--client-cert-allowed-hostname` / `--peer-cert-allowed-hostname`.
    pub allowed_hostname: Option<String>,
    /// `--cipher-suites`, Go's names; empty: rustls's defaults.
    pub cipher_suites: Vec<String>,
    /// `--tls-min-version` (`TLS1.2` when not given, as etcd's default).
    pub min_version: Option<String>,
    /// `--tls-max-version` (none: the highest, TLS 1.3).
    pub max_version: Option<String>,
}

/// Go's names of the TLS 1.2 suites rustls (with ring) implements. The ChaCha20 suites also
/// answer to Go's legacy names without `_SHA256` (`tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305`,
/// `tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305`), which etcd's `tlsutil.GetCipherSuite` maps
/// to the same suites and etcd's own tests and docs use.
fn rustls_suite(name: &str) -> Option<SupportedCipherSuite> {
    use ring_provider::cipher_suite as cs;
    Some(match name {
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
        | "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => {
            cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        }
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256" | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => {
            cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
        }
        _ => return None,
    })
}

/// Go's TLS 1.3 suite names: accepted and, as in Go, without effect (TLS 1.3 always offers
/// all three).
const TLS13_NAMES: [&str; 3] = [
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// The rest of the names etcd 3.5.1 accepts (Go's `CipherSuites()` and
/// `InsecureCipherSuites()`; Go 1.22 moved the RSA key-exchange ones from the first list to the
/// second, the union is unchanged), which rustls does not implement (CBC, RC4, 3DES, RSA key
/// exchange).
const GO_ONLY_NAMES: [&str; 16] = [
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// A TLS version flag's value as etcd spells it; `None` for `""`.
fn tls_version(value: &str) -> Result<Option<u8>, String> {
    match value {
        "" => Ok(None),
        "TLS1.2" => Ok(Some(2)),
        "TLS1.3" => Ok(Some(3)),
        "TLS1.0" | "TLS1.1" => Err(format!(
            "TLS version {value:?} is not supported by actcd: rustls speaks TLS1.2 and TLS1.3 only"
        )),
        _ => Err(format!(
            "unexpected TLS version {value:?} (must be one of: TLS1.0, TLS1.1, TLS1.2, TLS1.3)"
        )),
    }
}

impl TlsOptions {
    /// Checks the cipher suites and versions as etcd does at start-up, in etcd's words; names
    /// etcd knows that rustls cannot do are refused with the reason.
    pub fn check(&self) -> Result<(), String> {
        self.provider_and_versions().map(|_| ())?;
        if let (Some(_), Some(_)) = (&self.allowed_cn, &self.allowed_hostname) {
            return Err(format!(
                "AllowedCN and AllowedHostname are mutually exclusive (cn={:?}, hostname={:?})",
                self.allowed_cn.as_deref().unwrap_or_default(),
                self.allowed_hostname.as_deref().unwrap_or_default()
            ));
        }
        Ok(())
    }

    /// ring with the chosen TLS 1.2 suites (all TLS 1.3 ones stay), and the versions.
    pub(crate) fn provider_and_versions(
        &self,
    ) -> Result<(Arc<CryptoProvider>, Vec<&'static SupportedProtocolVersion>), String> {
        let min = tls_version(self.min_version.as_deref().unwrap_or(""))?.unwrap_or(2);
        let max = tls_version(self.max_version.as_deref().unwrap_or(""))?;
        if let Some(max) = max
            && min > max
        {
            return Err(format!(
                "min version ({}) is greater than max version ({})",
                self.min_version.as_deref().unwrap_or_default(),
                self.max_version.as_deref().unwrap_or_default()
            ));
        }
        if min == 3 && !self.cipher_suites.is_empty() {
            return Err("cipher suites cannot be configured when only TLS1.3 is enabled".into());
        }
        let mut provider = ring_provider::default_provider();
        if !self.cipher_suites.is_empty() {
            let mut tls12 = Vec::new();
            for name in &self.cipher_suites {
                if let Some(suite) = rustls_suite(name) {
                    tls12.push(suite);
                } else if GO_ONLY_NAMES.contains(&name.as_str()) {
                    return Err(format!(
                        "TLS cipher suite {name:?} is not supported by actcd: rustls offers only \
                         ECDHE with AES-GCM or ChaCha20-Poly1305 in TLS1.2"
                    ));
                } else if !TLS13_NAMES.contains(&name.as_str()) {
                    return Err(format!("unexpected TLS cipher suite {name:?}"));
                }
            }
            provider
                .cipher_suites
                .retain(|s| s.version() == &version::TLS13 || tls12.contains(s));
        }
        let versions = [(2, &version::TLS12), (3, &version::TLS13)]
            .into_iter()
            .filter(|(v, _)| *v >= min && max.is_none_or(|max| *v <= max))
            .map(|(_, v)| v)
            .collect();
        Ok((Arc::new(provider), versions))
    }

    /// The checks after verification, as the listener applies them.
    pub(crate) fn checks(&self) -> PeerChecks {
        PeerChecks {
            crl_file: self.crl_file.clone(),
            allowed_cn: self.allowed_cn.clone(),
            allowed_hostname: self.allowed_hostname.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cipher_suites_and_versions_as_etcd_checks_them() {
        let check = |suites: &[&str], min: &str, max: &str| {
            TlsOptions {
                cipher_suites: suites.iter().map(|s| s.to_string()).collect(),
                min_version: Some(min.into()),
                max_version: Some(max.into()),
                ..TlsOptions::default()
            }
            .check()
        };
        /// Suites, min and max version, and `Err(start of the message)` or `Ok`.
        type Case<'a> = (&'a [&'a str], &'a str, &'a str, Result<(), &'a str>);
        let cases: [Case; 9] = [
            (&[], "TLS1.2", "", Ok(())),
            (
                &[
                    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                    "TLS_AES_128_GCM_SHA256",
                ],
                "TLS1.2",
                "",
                Ok(()),
            ),
            (
                &["FOO"],
                "TLS1.2",
                "",
                Err("unexpected TLS cipher suite \"FOO\""),
            ),
            (
                &["TLS_RSA_WITH_AES_128_CBC_SHA"],
                "TLS1.2",
                "",
                Err("TLS cipher suite \"TLS_RSA_WITH_AES_128_CBC_SHA\" is not supported by actcd"),
            ),
            (
                &[],
                "TLS1.3",
                "TLS1.2",
                Err("min version (TLS1.3) is greater than max version (TLS1.2)"),
            ),
            (
                &["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"],
                "TLS1.3",
                "",
                Err("cipher suites cannot be configured when only TLS1.3 is enabled"),
            ),
            (&[], "TLS1.4", "", Err("unexpected TLS version \"TLS1.4\"")),
            (
                &[],
                "TLS1.0",
                "",
                Err("TLS version \"TLS1.0\" is not supported by actcd"),
            ),
            (&[], "TLS1.3", "TLS1.3", Ok(())),
        ];
        for (suites, min, max, want) in cases {
            let got = check(suites, min, max);
            match want {
                Ok(()) => assert_eq!(got, Ok(()), "{suites:?} {min} {max}"),
                Err(start) => assert!(
                    got.as_ref().is_err_and(|e| e.starts_with(start)),
                    "{suites:?} {min} {max}: {got:?}"
                ),
            }
        }
        let (provider, versions) = TlsOptions {
            cipher_suites: vec!["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".into()],
            max_version: Some("TLS1.2".into()),
            ..TlsOptions::default()
        }
        .provider_and_versions()
        .unwrap();
        assert_eq!(versions, vec![&version::TLS12]);
        let only13 = TlsOptions {
            min_version: Some("TLS1.3".into()),
            ..TlsOptions::default()
        };
        assert_eq!(
            only13.provider_and_versions().unwrap().1,
            vec![&version::TLS13]
        );
        assert_eq!(
            TlsOptions::default().provider_and_versions().unwrap().1,
            vec![&version::TLS12, &version::TLS13]
        );
        let tls12: Vec<_> = provider
            .cipher_suites
            .iter()
            .filter(|s| s.version() == &version::TLS12)
            .collect();
        assert_eq!(tls12.len(), 1);
    }

    /// Every name etcd's `tlsutil.GetCipherSuite` accepts (Go's `CipherSuites()` and
    /// `InsecureCipherSuites()`, and the two legacy ChaCha20 names etcd maps by hand), each
    /// checked as `--cipher-suites`: a suite rustls offers is taken (the legacy names as the
    /// `_SHA256` suite they alias), the TLS 1.3 names are accepted without effect, the rest
    /// are refused at start with the reason; anything else is etcd's "unexpected" error.
    #[test]
    fn every_cipher_suite_name_etcd_accepts_maps_as_go_maps_it() {
        use ring_provider::cipher_suite as cs;
        let offered = [
            (
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            ),
            (
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            ),
            (
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
                cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            ),
            (
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
                cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            ),
            (
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            ),
            (
                "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            ),
            (
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
                cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            ),
            (
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
                cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            ),
        ];
        let with = |name: &str| TlsOptions {
            cipher_suites: vec![name.to_string()],
            ..TlsOptions::default()
        };
        for (name, suite) in offered {
            let (provider, _) = with(name).provider_and_versions().expect(name);
            let tls12: Vec<_> = provider
                .cipher_suites
                .iter()
                .filter(|s| s.version() == &version::TLS12)
                .map(|s| s.suite())
                .collect();
            assert_eq!(tls12, vec![suite.suite()], "{name}");
        }
        for name in TLS13_NAMES {
            assert_eq!(with(name).check(), Ok(()), "{name}");
        }
        // etcd's table (Go 1.16, which etcd 3.5.1 is built with) less the names above.
        let go_only = [
            "TLS_RSA_WITH_RC4_128_SHA",
            "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
            "TLS_RSA_WITH_AES_128_CBC_SHA",
            "TLS_RSA_WITH_AES_256_CBC_SHA",
            "TLS_RSA_WITH_AES_128_CBC_SHA256",
            "TLS_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_RSA_WITH_AES_256_GCM_SHA384",
            "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
            "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
            "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
            "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
            "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
            "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
            "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
            "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
        ];
        assert_eq!(offered.len() + TLS13_NAMES.len() + go_only.len(), 27);
        for name in go_only {
            let got = with(name).check();
            let want = format!("TLS cipher suite {name:?} is not supported by actcd");
            assert!(
                got.as_ref().is_err_and(|e| e.starts_with(&want)),
                "{name}: {got:?}"
            );
        }
        // Go's names only, exactly: no other spelling, case or alias.
        for name in [
            "tls_ecdhe_rsa_with_chacha20_poly1305",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA",
            "TLS_CHACHA20_POLY1305",
            "TLS_FALLBACK_SCSV",
            "ECDHE-RSA-CHACHA20-POLY1305",
            "",
        ] {
            assert_eq!(
                with(name).check(),
                Err(format!("unexpected TLS cipher suite {name:?}")),
                "{name}"
            );
        }
    }
}
