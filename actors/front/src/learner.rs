//! What a learner serves: etcd lets a learner answer only Status and serializable Ranges (and
//! stream only snapshots); everything else is refused with `etcdserver: rpc not supported for
//! learner`, so clients move to a voting member. The front's tower layer (`metrics.rs`, which
//! sees every call's method path, as tonic's interceptors don't) refuses the rest; the Range
//! handler refuses linearizable reads itself.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_learner_serves_what_etcd_lets_it() {
        for ok in [
            "/etcdserverpb.Maintenance/Status",
            "/etcdserverpb.KV/Range",
            "/etcdserverpb.Maintenance/Snapshot",
        ] {
            assert!(allowed_for_learner(ok), "{ok}");
        }
        for refused in [
            "/etcdserverpb.KV/Put",
            "/etcdserverpb.KV/Txn",
            "/etcdserverpb.Watch/Watch",
            "/etcdserverpb.Lease/LeaseKeepAlive",
            "/etcdserverpb.Cluster/MemberList",
            "/etcdserverpb.Auth/Authenticate",
        ] {
            assert!(!allowed_for_learner(refused), "{refused}");
        }
    }
}
