//! Tests of `routes.rs`, the authorization table (its `tests` module, included from there by `#[path]`).

use super::*;

#[test]
fn paths_find_their_rows() {
    let cases: [(&str, Option<Needs>); 12] = [
        ("/v3/kv/range", Some(Keys)),
        ("/v3beta/kv/range", Some(Keys)),
        ("/v3/kv/lease/leases", Some(LeaseKeys)),
        ("/v3/maintenance/status", Some(User)),
        ("/v3/kv/nothing", None),
        ("/v3beta", None),
        ("/v2/keys", Some(V2Acl)),
        ("/v2/keys/a/b", Some(V2Acl)),
        ("/v2/keysx", None),
        ("/livez/serializable_read", Some(Anyone)),
        ("/metrics", Some(Anyone)),
        ("/debug/pprof", None),
    ];
    for (path, want) in cases {
        assert_eq!(http_needs(path), want, "{path}");
    }
}

#[test]
fn every_method_has_one_row() {
    for r in GRPC {
        assert_eq!(
            GRPC.iter().filter(|o| o.method == r.method).count(),
            1,
            "{}",
            r.method
        );
        for p in r.gateway {
            assert!(p.starts_with("/v3/"), "{p}");
            assert_eq!(gateway_route(p).map(|o| o.method), Some(r.method), "{p}");
        }
    }
}
