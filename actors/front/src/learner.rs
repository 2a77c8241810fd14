//! What a learner serves: etcd lets a learner answer only Status and serializable Ranges (and
//! stream only snapshots); everything else is refused with `etcdserver: rpc not supported for
//! learner`, so clients move to a voting member. The front's tower layer (`metrics.rs`, which
//! sees every call's method path, as tonic's interceptors don't) refuses the rest; the Range
//! handler refuses linearizable reads itself. The JSON gateway, which calls the services without
//! that layer, asks [`gateway_allowed_for_learner`] first.

use tokio::sync::watch;

/// Whether this member is a learner, as the raft node last said.
pub type LearnerFlag = watch::Receiver<bool>;

/// The methods a learner serves (the Range handler checks `serializable` itself).
pub fn allowed_for_learner(path: &str) -> bool {
    matches!(
        path,
        "/etcdserverpb.Maintenance/Status"
            | "/etcdserverpb.KV/Range"
            | "/etcdserverpb.Maintenance/Snapshot"
    )
}

/// The JSON gateway's routes a learner serves: those of the methods above (Range refuses a
/// linearizable read itself).
pub fn gateway_allowed_for_learner(path: &str) -> bool {
    matches!(
        path,
        "/v3/maintenance/status" | "/v3/kv/range" | "/v3/maintenance/snapshot"
    )
}

#[cfg(test)]
#[path = "learner_tests.rs"]
mod tests;
