//! Tests of the front's `learner.rs` (its `tests` module, included from there by `#[path]`).

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
        // etcd 3.7 refuses every stream but Snapshot on a learner, serializable or not.
        "/etcdserverpb.KV/RangeStream",
        "/etcdserverpb.Watch/Watch",
        "/etcdserverpb.Lease/LeaseKeepAlive",
        "/etcdserverpb.Cluster/MemberList",
        "/etcdserverpb.Auth/Authenticate",
    ] {
        assert!(!allowed_for_learner(refused), "{refused}");
    }
    assert!(gateway_allowed_for_learner("/v3/kv/range"));
    assert!(gateway_allowed_for_learner("/v3/maintenance/status"));
    for refused in [
        "/v3/kv/put",
        "/v3/lock/lock",
        "/v3/election/observe",
        "/v3/watch",
    ] {
        assert!(!gateway_allowed_for_learner(refused), "{refused}");
    }
}
