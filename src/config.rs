//! Flags with etcd's names, defaults and `ETCD_*` environment variables, and what is derived from
//! them: the member and cluster ids, computed exactly as etcd computes them so tools that compare
//! ids across members see consistent values.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "actcd",
    version,
    about = "An etcd v3-compatible key-value store built from actors"
)]
pub struct Flags {
    /// Human-readable name for this member.
    #[arg(long, env = "ETCD_NAME", default_value = "default")]
    pub name: String,
    /// Path to the data directory (default: "<name>.actcd").
    #[arg(long, env = "ETCD_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// URLs to listen on for client traffic.
    #[arg(
        long,
        env = "ETCD_LISTEN_CLIENT_URLS",
        default_value = "http://localhost:2379"
    )]
    pub listen_client_urls: String,
    /// Client URLs advertised to the rest of the cluster.
    #[arg(
        long,
        env = "ETCD_ADVERTISE_CLIENT_URLS",
        default_value = "http://localhost:2379"
    )]
    pub advertise_client_urls: String,
    /// URLs to listen on for peer traffic.
    #[arg(
        long,
        env = "ETCD_LISTEN_PEER_URLS",
        default_value = "http://localhost:2380"
    )]
    pub listen_peer_urls: String,
    /// Peer URLs advertised to the rest of the cluster.
    #[arg(
        long,
        env = "ETCD_INITIAL_ADVERTISE_PEER_URLS",
        default_value = "http://localhost:2380"
    )]
    pub initial_advertise_peer_urls: String,
    /// Initial cluster configuration for bootstrapping: name=peer-url,...
    #[arg(long, env = "ETCD_INITIAL_CLUSTER")]
    pub initial_cluster: Option<String>,
    /// "new" or "existing".
    #[arg(long, env = "ETCD_INITIAL_CLUSTER_STATE", default_value = "new")]
    pub initial_cluster_state: String,
    /// Initial cluster token, mixed into the member ids.
    #[arg(
        long,
        env = "ETCD_INITIAL_CLUSTER_TOKEN",
        default_value = "etcd-cluster"
    )]
    pub initial_cluster_token: String,
    /// Applied entries between raft log compactions.
    #[arg(long, env = "ETCD_SNAPSHOT_COUNT", default_value_t = 100_000)]
    pub snapshot_count: u64,
    /// Entries kept in memory after a log compaction, for slow followers.
    #[arg(long, env = "ETCD_SNAPSHOT_CATCHUP_ENTRIES", default_value_t = 5000)]
    pub snapshot_catchup_entries: u64,
    /// Time (ms) of a heartbeat interval (one raft tick).
    #[arg(long, env = "ETCD_HEARTBEAT_INTERVAL", default_value_t = 100)]
    pub heartbeat_interval: u64,
    /// Time (ms) for an election to time out.
    #[arg(long, env = "ETCD_ELECTION_TIMEOUT", default_value_t = 1000)]
    pub election_timeout: u64,
    /// Maximum client request size in bytes the server will accept.
    #[arg(long, env = "ETCD_MAX_REQUEST_BYTES", default_value_t = 1_572_864)]
    pub max_request_bytes: usize,
    /// Maximum number of operations permitted in a transaction.
    #[arg(long, env = "ETCD_MAX_TXN_OPS", default_value_t = 128)]
    pub max_txn_ops: usize,
    /// Backend size quota in bytes (0: the default of 2 GiB).
    #[arg(long, env = "ETCD_QUOTA_BACKEND_BYTES", default_value_t = 0)]
    pub quota_backend_bytes: u64,
    /// Log level: debug, info, warn, error.
    #[arg(long, env = "ETCD_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// How often watchers that asked for progress notifications hear the current revision
    /// (Go duration: `10m`, `30s`, `500ms`).
    #[arg(
        long,
        env = "ETCD_EXPERIMENTAL_WATCH_PROGRESS_NOTIFY_INTERVAL",
        default_value = "10m",
        value_parser = parse_go_duration
    )]
    pub experimental_watch_progress_notify_interval: Duration,
    /// URLs for the metrics endpoint (accepted for compatibility; not served yet).
    #[arg(long, env = "ETCD_LISTEN_METRICS_URLS")]
    pub listen_metrics_urls: Option<String>,
}

/// Parses a Go-style duration as etcd's flags take them: a sequence of number+unit pairs
/// (`h`, `m`, `s`, `ms`, `us`/`µs`, `ns`), e.g. `1m30s`, `250ms`, `1.5s`.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?}");
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0f64;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let value: f64 = rest[..n].parse().map_err(|_| bad())?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let secs = match &rest[..u] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return Err(bad()),
        };
        total += value * secs;
        rest = &rest[u..];
    }
    Ok(Duration::from_secs_f64(total))
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("couldn't find local name {0:?} in the initial cluster configuration")]
    LocalNameMissing(String),
    #[error("invalid value {value:?} for {flag}: {reason}")]
    Invalid {
        flag: &'static str,
        value: String,
        reason: String,
    },
}

/// One member of the initial cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialMember {
    pub id: u64,
    pub name: String,
    pub peer_urls: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub flags: Flags,
    pub data_dir: PathBuf,
    pub member_id: u64,
    pub cluster_id: u64,
    pub members: Vec<InitialMember>,
    pub client_urls: Vec<String>,
    pub advertise_client_urls: Vec<String>,
}

impl Config {
    pub fn election_ticks(&self) -> usize {
        (self.flags.election_timeout / self.flags.heartbeat_interval.max(1)).max(2) as usize
    }

    pub fn tick(&self) -> Duration {
        Duration::from_millis(self.flags.heartbeat_interval.max(1))
    }

    /// `--quota-backend-bytes`, 0 meaning etcd's default of 2 GiB.
    /// etcd's `minLeaseTTL`: 1.5 election timeouts, in whole seconds rounded up. Grants below it
    /// are raised to it, so a lease outlives a leader election.
    pub fn min_lease_ttl(&self) -> i64 {
        let election_ticks = self.election_ticks() as u64;
        let ms = (3 * election_ticks / 2) * self.flags.heartbeat_interval.max(1);
        ms.div_ceil(1000) as i64
    }

    pub fn quota_bytes(&self) -> u64 {
        match self.flags.quota_backend_bytes {
            0 => actcd_preflight::DEFAULT_QUOTA_BYTES,
            q => q,
        }
    }

    /// etcd's request timeout: 5 s plus two election timeouts.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(5000 + 2 * self.flags.election_timeout)
    }
}

fn split_urls(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .collect()
}

/// etcd's member id: SHA-1 over the sorted peer URLs joined, then the cluster token; the first
/// 8 bytes, big-endian.
pub fn member_id(peer_urls: &[String], token: &str) -> u64 {
    let mut urls = peer_urls.to_vec();
    urls.sort();
    let mut h = sha1_smol::Sha1::new();
    h.update(urls.concat().as_bytes());
    h.update(token.as_bytes());
    let d = h.digest().bytes();
    u64::from_be_bytes(d[..8].try_into().unwrap_or_default())
}

/// etcd's cluster id: SHA-1 over the sorted member ids, 8 bytes big-endian each.
pub fn cluster_id(member_ids: &[u64]) -> u64 {
    let mut ids = member_ids.to_vec();
    ids.sort_unstable();
    let mut h = sha1_smol::Sha1::new();
    for id in ids {
        h.update(&id.to_be_bytes());
    }
    let d = h.digest().bytes();
    u64::from_be_bytes(d[..8].try_into().unwrap_or_default())
}

impl TryFrom<Flags> for Config {
    type Error = ConfigError;

    fn try_from(flags: Flags) -> Result<Self, ConfigError> {
        let initial = flags
            .initial_cluster
            .clone()
            .unwrap_or_else(|| format!("{}={}", flags.name, flags.initial_advertise_peer_urls));
        let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for part in initial.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((name, url)) = part.split_once('=') else {
                return Err(ConfigError::Invalid {
                    flag: "--initial-cluster",
                    value: initial.clone(),
                    reason: "expected name=url pairs".into(),
                });
            };
            by_name
                .entry(name.to_string())
                .or_default()
                .push(url.to_string());
        }
        let members: Vec<InitialMember> = by_name
            .into_iter()
            .map(|(name, peer_urls)| InitialMember {
                id: member_id(&peer_urls, &flags.initial_cluster_token),
                name,
                peer_urls,
            })
            .collect();
        let me = members
            .iter()
            .find(|m| m.name == flags.name)
            .ok_or_else(|| ConfigError::LocalNameMissing(flags.name.clone()))?;
        let member_id = me.id;
        let cluster_id = cluster_id(&members.iter().map(|m| m.id).collect::<Vec<_>>());
        if flags.heartbeat_interval == 0 || flags.election_timeout < 5 * flags.heartbeat_interval {
            return Err(ConfigError::Invalid {
                flag: "--election-timeout",
                value: flags.election_timeout.to_string(),
                reason: "should be at least 5 times --heartbeat-interval".into(),
            });
        }
        if flags.initial_cluster_state != "new" && flags.initial_cluster_state != "existing" {
            return Err(ConfigError::Invalid {
                flag: "--initial-cluster-state",
                value: flags.initial_cluster_state.clone(),
                reason: "must be \"new\" or \"existing\"".into(),
            });
        }
        let data_dir = flags
            .data_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("{}.actcd", flags.name)));
        Ok(Config {
            client_urls: split_urls(&flags.listen_client_urls),
            advertise_client_urls: split_urls(&flags.advertise_client_urls),
            data_dir,
            member_id,
            cluster_id,
            members,
            flags,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_like_etcds_flags() {
        let ok = [
            ("10m", 600_000),
            ("1m30s", 90_000),
            ("250ms", 250),
            ("1.5s", 1500),
            ("0", 0),
        ];
        for (s, want_ms) in ok {
            assert_eq!(
                parse_go_duration(s).map(|d| d.as_millis()),
                Ok(want_ms),
                "{s}"
            );
        }
        for s in ["", "10", "5x", "m", "1.2.3s"] {
            assert!(parse_go_duration(s).is_err(), "{s} must be refused");
        }
    }

    #[test]
    fn min_lease_ttl_is_one_and_a_half_election_timeouts_rounded_up() {
        let ttl = |args: &[&str]| {
            let mut argv = vec!["actcd"];
            argv.extend_from_slice(args);
            Config::try_from(Flags::parse_from(argv))
                .unwrap()
                .min_lease_ttl()
        };
        assert_eq!(ttl(&[]), 2, "etcd's default: 1.5 s → 2 s");
        assert_eq!(
            ttl(&["--heartbeat-interval", "10", "--election-timeout", "100"]),
            1
        );
        assert_eq!(ttl(&["--election-timeout", "5000"]), 8);
    }

    #[test]
    fn ids_match_etcds_for_the_default_member() {
        // etcd with no flags reports member 8e9e05c52164694d in cluster cdf818194e3a8c32.
        let id = member_id(&["http://localhost:2380".to_string()], "etcd-cluster");
        assert_eq!(id, 0x8e9e05c52164694d);
        assert_eq!(cluster_id(&[id]), 0xcdf818194e3a8c32);
    }

    #[test]
    fn defaults_follow_etcd() {
        let cfg = Config::try_from(Flags::parse_from(["actcd"])).unwrap();
        assert_eq!(cfg.data_dir, PathBuf::from("default.actcd"));
        assert_eq!(cfg.client_urls, vec!["http://localhost:2379".to_string()]);
        assert_eq!(cfg.election_ticks(), 10);
        let bad = Flags::parse_from(["actcd", "--name", "x", "--initial-cluster", "y=http://a:1"]);
        assert!(matches!(
            Config::try_from(bad),
            Err(ConfigError::LocalNameMissing(_))
        ));
    }
}
