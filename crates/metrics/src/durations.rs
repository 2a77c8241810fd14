//! The latency families of etcd 3.6 and 3.7 that the front measures, because the work they time
//! happens in the front's tasks: `etcd_server_request_duration_seconds{type,success}` (a
//! client request from the server taking it up to its answer: Range, read-only Txn, and every
//! proposal), `etcd_server_range_duration_seconds{success}` (the storage read of a Range), and
//! the watch send loop's `etcd_debugging_server_watch_send_loop_watch_stream_duration_seconds`,
//! `_watch_stream_duration_per_event_seconds` and `_control_stream_duration_seconds` (the
//! hub's progress pass, `_progress_duration_seconds`, is timed in the watch hub). Names,
//! labels, help texts and buckets are etcd's (`server/etcdserver/metrics.go`,
//! `txn/metrics.go`, `api/v3rpc/metrics.go`); help texts are in `families::FAMILIES`.
//!
//! Every histogram is allocated once, when the front starts, for every label value it can
//! have: an observation is three relaxed atomic adds, no lock and no allocation. A series is
//! shown once it has an observation, as etcd's `HistogramVec`s show theirs; the watch send
//! loop's are plain histograms in etcd, shown from zero.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_types::meter::{Histogram, Sample, exponential_buckets};

/// `etcd_server_request_duration_seconds` and the watch send loop's buckets: 1 ms doubling up
/// to 8.192 s (`ExponentialBuckets(0.001, 2, 14)`).
pub const REQUEST_BUCKETS: [f64; 14] = exponential_buckets(0.001, 2.0);

/// `etcd_server_range_duration_seconds`'s buckets: 100 µs doubling up to 52 s
/// (`ExponentialBuckets(0.0001, 2, 20)`).
pub const RANGE_BUCKETS: [f64; 20] = exponential_buckets(0.0001, 2.0);

/// A histogram of fixed buckets kept in atomics. Sums are kept in nanoseconds.
#[derive(Debug)]
pub struct AtomicHistogram {
    bounds: &'static [f64],
    /// Per bucket (not cumulative), the last one above every bound.
    counts: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl AtomicHistogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_nanos: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, took: Duration) {
        let secs = took.as_secs_f64();
        let i = self
            .bounds
            .iter()
            .position(|le| secs <= *le)
            .unwrap_or(self.bounds.len());
        if let Some(c) = self.counts.get(i) {
            c.fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_nanos
            .fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// A copy for rendering (the buckets are read one by one: a scrape may see an observation
    /// in the count and not yet in its bucket, as Go's client may too).
    pub fn snapshot(&self) -> Histogram {
        Histogram {
            bounds: self.bounds,
            counts: self.counts.iter().map(|c| c.load(Relaxed)).collect(),
            count: self.count.load(Relaxed),
            sum: self.sum_nanos.load(Relaxed) as f64 / 1e9,
        }
    }
}

/// etcd's `getRequestType` names, in its order; `Unknown` for anything else it proposes.
const REQUEST_TYPES: [&str; 32] = [
    "Range",
    "Put",
    "DeleteRange",
    "Txn",
    "Compaction",
    "LeaseGrant",
    "LeaseRevoke",
    "LeaseCheckpoint",
    "Alarm",
    "Authenticate",
    "AuthEnable",
    "AuthDisable",
    "AuthStatus",
    "AuthUserAdd",
    "AuthUserDelete",
    "AuthUserChangePassword",
    "AuthUserGrantRole",
    "AuthUserGet",
    "AuthUserRevokeRole",
    "AuthRoleAdd",
    "AuthRoleGrantPermission",
    "AuthRoleGet",
    "AuthRoleRevokePermission",
    "AuthRoleDelete",
    "AuthUserList",
    "AuthRoleList",
    "ClusterVersionSet",
    "ClusterMemberAttrSet",
    "DowngradeInfoSet",
    "DowngradeVersionTest",
    "Unknown",
    // Read-only requests etcd serves without the log (`EtcdServer.Range`, `.Txn`).
    "ReadonlyTxn",
];

/// Where `Unknown` is in [`REQUEST_TYPES`].
const UNKNOWN: usize = 30;

/// Index of a request type in [`REQUEST_TYPES`].
fn type_index(name: &str) -> usize {
    REQUEST_TYPES
        .iter()
        .position(|t| *t == name)
        .unwrap_or(UNKNOWN)
}

/// etcd's `getRequestType` of a proposal, or `None` for what etcd proposes without its
/// `processInternalRaftRequestOnce` (v2 requests, membership changes), which it doesn't time.
pub fn request_type(r: &InternalRaftRequest) -> Option<&'static str> {
    let t = if r.range.is_some() {
        "Range"
    } else if r.put.is_some() {
        "Put"
    } else if r.delete_range.is_some() {
        "DeleteRange"
    } else if r.txn.is_some() {
        "Txn"
    } else if r.compaction.is_some() {
        "Compaction"
    } else if r.lease_grant.is_some() {
        "LeaseGrant"
    } else if r.lease_revoke.is_some() {
        "LeaseRevoke"
    } else if r.lease_checkpoint.is_some() {
        "LeaseCheckpoint"
    } else if r.alarm.is_some() {
        "Alarm"
    } else if r.authenticate.is_some() {
        "Authenticate"
    } else if r.auth_enable.is_some() {
        "AuthEnable"
    } else if r.auth_disable.is_some() {
        "AuthDisable"
    } else if r.auth_status.is_some() {
        "AuthStatus"
    } else if r.auth_user_add.is_some() {
        "AuthUserAdd"
    } else if r.auth_user_delete.is_some() {
        "AuthUserDelete"
    } else if r.auth_user_change_password.is_some() {
        "AuthUserChangePassword"
    } else if r.auth_user_grant_role.is_some() {
        "AuthUserGrantRole"
    } else if r.auth_user_get.is_some() {
        "AuthUserGet"
    } else if r.auth_user_revoke_role.is_some() {
        "AuthUserRevokeRole"
    } else if r.auth_role_add.is_some() {
        "AuthRoleAdd"
    } else if r.auth_role_grant_permission.is_some() {
        "AuthRoleGrantPermission"
    } else if r.auth_role_get.is_some() {
        "AuthRoleGet"
    } else if r.auth_role_revoke_permission.is_some() {
        "AuthRoleRevokePermission"
    } else if r.auth_role_delete.is_some() {
        "AuthRoleDelete"
    } else if r.auth_user_list.is_some() {
        "AuthUserList"
    } else if r.auth_role_list.is_some() {
        "AuthRoleList"
    } else if r.member_attr_set.is_some() {
        "ClusterMemberAttrSet"
    } else if r.v2.is_some() || r.member_change.is_some() {
        return None;
    } else {
        "Unknown"
    };
    Some(t)
}

/// The front's latency histograms (see the module doc).
#[derive(Debug)]
pub struct Durations {
    /// `etcd_server_request_duration_seconds`: by [`REQUEST_TYPES`] index, then `[false,
    /// true]` for `success`.
    requests: Vec<[AtomicHistogram; 2]>,
    /// `etcd_server_range_duration_seconds`: `[false, true]` for `success`.
    ranges: [AtomicHistogram; 2],
    /// The watch send loop: a watch response sent (its events' previous values read, then
    /// handed to the client's stream), the same per event, a control response (created,
    /// canceled) sent.
    pub watch_stream: AtomicHistogram,
    pub watch_stream_per_event: AtomicHistogram,
    pub control_stream: AtomicHistogram,
}

impl Default for Durations {
    fn default() -> Self {
        let pair = |b: &'static [f64]| [AtomicHistogram::new(b), AtomicHistogram::new(b)];
        Self {
            requests: REQUEST_TYPES
                .iter()
                .map(|_| pair(&REQUEST_BUCKETS))
                .collect(),
            ranges: pair(&RANGE_BUCKETS),
            watch_stream: AtomicHistogram::new(&REQUEST_BUCKETS),
            watch_stream_per_event: AtomicHistogram::new(&REQUEST_BUCKETS),
            control_stream: AtomicHistogram::new(&REQUEST_BUCKETS),
        }
    }
}

impl Durations {
    /// One request of etcd type `kind` answered `took` after the server took it up.
    pub fn request(&self, kind: &str, success: bool, took: Duration) {
        if let Some(h) = self.requests.get(type_index(kind)) {
            h[usize::from(success)].observe(took);
        }
    }

    /// One storage read of a Range.
    pub fn range(&self, success: bool, took: Duration) {
        self.ranges[usize::from(success)].observe(took);
    }

    /// One watch response of `events` events sent in `took`. etcd also divides by the count
    /// of a response without events (a progress notification), observing `+Inf` (or `NaN`),
    /// which makes the per-event sum `+Inf` for good; such a response is not observed per
    /// event here.
    pub fn watch_response(&self, events: usize, took: Duration) {
        self.watch_stream.observe(took);
        if let Ok(n) = u32::try_from(events)
            && n > 0
        {
            self.watch_stream_per_event.observe(took / n);
        }
    }

    /// The series for `/metrics`: the observed ones of the labelled families, in etcd's label
    /// order, and the watch send loop's three always.
    pub fn samples(&self) -> Vec<Sample> {
        let mut out = Vec::new();
        for (kind, pair) in REQUEST_TYPES.iter().zip(&self.requests) {
            for (success, h) in [false, true].iter().zip(pair) {
                if h.count() > 0 {
                    let mut s =
                        Sample::histogram("etcd_server_request_duration_seconds", &h.snapshot());
                    s.labels = vec![("success", success.to_string()), ("type", (*kind).into())];
                    out.push(s);
                }
            }
        }
        for (success, h) in [false, true].iter().zip(&self.ranges) {
            if h.count() > 0 {
                let mut s = Sample::histogram("etcd_server_range_duration_seconds", &h.snapshot());
                s.labels = vec![("success", success.to_string())];
                out.push(s);
            }
        }
        for (name, h) in [
            (
                "etcd_debugging_server_watch_send_loop_watch_stream_duration_seconds",
                &self.watch_stream,
            ),
            (
                "etcd_debugging_server_watch_send_loop_watch_stream_duration_per_event_seconds",
                &self.watch_stream_per_event,
            ),
            (
                "etcd_debugging_server_watch_send_loop_control_stream_duration_seconds",
                &self.control_stream,
            ),
        ] {
            out.push(Sample::histogram(name, &h.snapshot()));
        }
        out
    }
}

#[cfg(test)]
#[path = "durations_tests.rs"]
mod tests;
