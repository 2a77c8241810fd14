//! The client-facing counters besides the per-method ones: failed proposals, client connection
//! bytes, `/health` answers, promhttp's scrape counts, timed-out ReadIndex rounds, etcd 3.6's
//! `/livez` and `/readyz` check outcomes (rendered here as `etcd_server_healthcheck` and
//! `etcd_server_healthchecks_total`), and the latency histograms of [`crate::durations`].

use std::fmt::Write as _;
use std::sync::Arc;

/// Counters the front keeps besides the per-method ones.
#[derive(Debug, Default)]
pub struct FrontCounters {
    /// Writes that failed to get through the log (timeouts, no leader, too many requests).
    pub proposals_failed: std::sync::atomic::AtomicU64,
    /// Bytes read from and written to client connections (gRPC and HTTP, TLS included):
    /// actcd's `actcd_network_client_{received,sent}_bytes_total`. etcd's gRPC byte counters
    /// count messages only ([`RequestStats`](crate::requests::RequestStats)).
    pub received_bytes: Arc<std::sync::atomic::AtomicU64>,
    pub sent_bytes: Arc<std::sync::atomic::AtomicU64>,
    /// `/health` answers (etcd's `etcd_server_health_success` and `_failures`).
    pub health_success: std::sync::atomic::AtomicU64,
    pub health_failures: std::sync::atomic::AtomicU64,
    /// `/metrics` scrapes being served now and served so far (the Go client's promhttp
    /// handler counts its own, which etcd exports).
    pub scrapes_in_flight: std::sync::atomic::AtomicU64,
    pub scrapes_served: std::sync::atomic::AtomicU64,
    /// Linearizable reads whose ReadIndex round did not finish before the request's deadline
    /// (added to the raft node's out-of-date rounds in `etcd_server_slow_read_indexes_total`).
    pub read_index_timeouts: std::sync::atomic::AtomicU64,
    /// etcd 3.6's per-check outcomes of `/livez` and `/readyz`: by (type, name), the last
    /// result and the successes and failures so far. Probes are rare: a lock is fine here.
    health_checks: std::sync::Mutex<HealthChecks>,
    /// etcd 3.6 and 3.7's request, range and watch send loop latencies (`durations.rs`).
    pub durations: crate::durations::Durations,
}

impl FrontCounters {
    /// One run of a `/livez` or `/readyz` check.
    pub fn record_health_check(&self, kind: &'static str, name: &str, ok: bool) {
        let mut checks = self.health_checks.lock().unwrap_or_else(|e| e.into_inner());
        let e = checks.entry((kind, name.to_string())).or_default();
        e.0 = ok;
        if ok {
            e.1 += 1;
        } else {
            e.2 += 1;
        }
    }

    /// etcd 3.6's `etcd_server_healthcheck` and `etcd_server_healthchecks_total`, once a check
    /// has run.
    pub fn render_health_checks(&self, out: &mut String) {
        let checks = self
            .health_checks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if checks.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "# HELP etcd_server_healthcheck The result of each kind of healthcheck."
        );
        let _ = writeln!(out, "# TYPE etcd_server_healthcheck gauge");
        for ((kind, name), (ok, _, _)) in &checks {
            let _ = writeln!(
                out,
                "etcd_server_healthcheck{{name=\"{name}\",type=\"{kind}\"}} {}",
                u8::from(*ok)
            );
        }
        let _ = writeln!(
            out,
            "# HELP etcd_server_healthchecks_total The total number of each kind of healthcheck."
        );
        let _ = writeln!(out, "# TYPE etcd_server_healthchecks_total counter");
        for ((kind, name), (_, success, error)) in &checks {
            for (status, n) in [("error", error), ("success", success)] {
                if *n > 0 {
                    let _ = writeln!(
                        out,
                        "etcd_server_healthchecks_total{{name=\"{name}\",status=\"{status}\",type=\"{kind}\"}} {n}"
                    );
                }
            }
        }
    }
}

/// By (type, check name): the last result, then the successes and failures so far.
type HealthChecks = std::collections::BTreeMap<(&'static str, String), (bool, u64, u64)>;
