//! The address this member's peer connections leave from: etcd's `SetMemberLocalAddr` feature
//! gate (`InferLocalAddr` in `server/embed/config.go`, PRs #17661 and #19413). With the gate
//! on, it is the first host among `--initial-advertise-peer-urls` that is an IP address and
//! neither loopback nor unspecified; hostnames are skipped, and with none left the kernel
//! picks as before. etcd binds every peer dial to it (`transport.NewTransport`'s `LocalAddr`,
//! port 0): streams, snapshots and the members question a joining member asks.
//!
//! One difference: an IPv6 address is used here, where etcd's `ResolveTCPAddr(addr + ":0")`
//! fails (`too many colons in address`) and its peer transport cannot be built.

use std::net::IpAddr;

/// etcd's choice among advertised peer URLs (the gate's check is the caller's).
pub fn infer(advertise_peer_urls: &[String]) -> Option<IpAddr> {
    advertise_peer_urls
        .iter()
        .filter_map(|u| hostname(u)?.parse::<IpAddr>().ok())
        .find(|ip| !is_loopback(ip) && !ip.is_unspecified())
}

/// Go's `netip.Addr.IsLoopback`, which also takes an IPv4-mapped IPv6 loopback
/// (`::ffff:127.0.0.1`) as loopback; `IsUnspecified` does not unmap.
fn is_loopback(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Go's `url.URL.Hostname`: the host without port or IPv6 brackets.
fn hostname(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(bracketed) = host.strip_prefix('[') {
        return bracketed.split_once(']').map(|(h, _)| h);
    }
    Some(host.split_once(':').map_or(host, |(h, _)| h))
}

/// etcd's log lines around the choice (the gate is on).
pub fn log_choice(advertise_peer_urls: &[String], chosen: Option<IpAddr>) {
    tracing::info!(
        advertise_peer_urls = ?advertise_peer_urls,
        "searching for a suitable member local address in AdvertisePeerURLs"
    );
    match chosen {
        Some(ip) => tracing::info!(LocalAddr = %ip, "setting member local address"),
        None => tracing::warn!(
            advertise_peer_urls = ?advertise_peer_urls,
            "unable to set a member local address due to lack of suitable local addresses"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_first_advertised_ip_that_is_not_loopback_or_unspecified_is_chosen() {
        let cases: &[(&[&str], Option<&str>)] = &[
            (&["http://10.0.0.1:2380"], Some("10.0.0.1")),
            (
                &[
                    "http://127.0.0.1:2380",
                    "http://10.0.0.1:2380",
                    "http://10.0.0.2:2380",
                ],
                Some("10.0.0.1"),
            ),
            (
                &["http://localhost:2380", "http://10.0.0.3:2380"],
                Some("10.0.0.3"),
            ),
            (
                &["http://etcd-0.example.com:2380", "https://192.168.1.9:2380"],
                Some("192.168.1.9"),
            ),
            (
                &[
                    "http://0.0.0.0:2380",
                    "http://[::]:2380",
                    "http://[2001:db8::1]:2380",
                ],
                Some("2001:db8::1"),
            ),
            (
                &["http://[::1]:2380", "http://[::ffff:127.0.0.1]:2380"],
                None,
            ),
            (&["http://127.0.0.1:2380", "http://localhost:2380"], None),
            (&["http://127.5.5.5:2380", "http://etcd:2380"], None),
            (&["unix://localhost:2380"], None),
            (&[], None),
        ];
        for (given, want_addr) in cases {
            assert_eq!(
                infer(&urls(given)),
                want_addr.map(|a| a.parse().unwrap()),
                "{given:?}"
            );
        }
    }

    #[test]
    fn hostname_is_gos() {
        assert_eq!(hostname("http://10.0.0.1:2380"), Some("10.0.0.1"));
        assert_eq!(hostname("http://[fe80::1]:2380/x"), Some("fe80::1"));
        assert_eq!(hostname("http://user@10.0.0.1"), Some("10.0.0.1"));
        assert_eq!(hostname("10.0.0.1:2380"), None);
    }
}
