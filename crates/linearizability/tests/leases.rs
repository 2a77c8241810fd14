//! Leases in the model: grant, put with a lease, revoke, expiry (a
//! maybe-applied op from the earliest instant the lease may expire),
//! keepalive and TimeToLive. Timelines as in `cases.rs`.

use actcd_linearizability::{Input, Mode, Operation, Options, Outcome, Output, check};

const L: i64 = 0x10;

fn op(client: u64, call: u64, ret: Option<u64>, input: Input, output: Output) -> Operation {
    Operation {
        client,
        call,
        ret,
        input,
        output,
    }
}

fn grant(call: u64, ret: u64, rev: i64) -> Operation {
    op(
        1,
        call,
        Some(ret),
        Input::LeaseGrant { lease: L, ttl: 2 },
        Output::Lease {
            revision: Some(rev),
        },
    )
}

fn put_lease(call: u64, ret: u64, k: &str, v: &str, rev: Option<i64>) -> Operation {
    op(
        1,
        call,
        Some(ret),
        Input::PutLease {
            key: k.into(),
            value: v.into(),
            lease: L,
        },
        match rev {
            Some(r) => Output::Put { revision: Some(r) },
            None => Output::LeaseNotFound,
        },
    )
}

fn revoke(call: u64, ret: u64, rev: i64) -> Operation {
    op(
        1,
        call,
        Some(ret),
        Input::LeaseRevoke { lease: L },
        Output::Lease {
            revision: Some(rev),
        },
    )
}

fn expiry(earliest: u64) -> Operation {
    op(
        0,
        earliest,
        None,
        Input::LeaseExpire { lease: L },
        Output::Unknown,
    )
}

fn get(client: u64, call: u64, ret: u64, k: &str, v: Option<&str>, rev: i64) -> Operation {
    op(
        client,
        call,
        Some(ret),
        Input::get(k),
        Output::Get {
            value: v.map(|v| v.as_bytes().to_vec()),
            mod_revision: None,
            revision: Some(rev),
        },
    )
}

fn keepalive(client: u64, call: u64, ret: u64, ttl: i64) -> Operation {
    op(
        client,
        call,
        Some(ret),
        Input::LeaseKeepAlive { lease: L },
        Output::LeaseTtl { ttl, keys: None },
    )
}

fn ttl(client: u64, call: u64, ret: u64, ttl: i64, keys: &[&str]) -> Operation {
    op(
        client,
        call,
        Some(ret),
        Input::LeaseTimeToLive { lease: L },
        Output::LeaseTtl {
            ttl,
            keys: Some(keys.iter().map(|k| k.as_bytes().to_vec()).collect()),
        },
    )
}

fn verdict(h: &[Operation], mode: Mode) -> Outcome {
    check(
        h,
        &Options {
            mode,
            ..Options::default()
        },
    )
}

fn must_pass(name: &str, h: Vec<Operation>) {
    for mode in [Mode::PerKey, Mode::Whole] {
        let out = verdict(&h, mode);
        assert_eq!(out, Outcome::Linearizable, "{name} in {mode:?}");
    }
}

fn must_fail(name: &str, h: Vec<Operation>) {
    for mode in [Mode::PerKey, Mode::Whole] {
        match verdict(&h, mode) {
            Outcome::Violation(v) => println!("{name} ({mode:?}):\n{v}"),
            out => panic!("{name} in {mode:?}: expected a violation, got {out:?}"),
        }
    }
}

#[test]
fn revoke_deletes_every_attached_key_in_one_revision() {
    // grant; put a, b with the lease (revs 2, 3); revoke (rev 4);
    // reads after it see both gone at revision 4.
    must_pass(
        "revoke",
        vec![
            grant(0, 10, 1),
            put_lease(20, 30, "a", "1", Some(2)),
            put_lease(40, 50, "b", "2", Some(3)),
            revoke(60, 70, 4),
            get(2, 80, 90, "a", None, 4),
            get(3, 80, 90, "b", None, 4),
        ],
    );
    // Only one of the two keys gone: not one atomic revoke.
    must_fail(
        "half a revoke",
        vec![
            grant(0, 10, 1),
            put_lease(20, 30, "a", "1", Some(2)),
            put_lease(40, 50, "b", "2", Some(3)),
            revoke(60, 70, 4),
            get(2, 80, 90, "a", None, 4),
            get(3, 80, 90, "b", Some("2"), 4),
        ],
    );
}

#[test]
fn key_readable_after_acknowledged_revoke_is_a_violation() {
    must_fail(
        "read after revoke",
        vec![
            grant(0, 10, 1),
            put_lease(20, 30, "a", "1", Some(2)),
            revoke(40, 50, 3),
            get(2, 60, 70, "a", Some("1"), 3),
        ],
    );
    // Concurrent with the revoke: either order is fine.
    must_pass(
        "read during revoke",
        vec![
            grant(0, 10, 1),
            put_lease(20, 30, "a", "1", Some(2)),
            revoke(40, 70, 3),
            get(2, 50, 60, "a", Some("1"), 2),
        ],
    );
}

#[test]
fn expiry_may_delete_at_any_time_after_the_ttl_and_never_before() {
    // The key vanishes with no revoke: fine after the earliest expiry...
    must_pass(
        "expired",
        vec![
            grant(0, 10, 1),
            put_lease(20, 30, "a", "1", Some(2)),
            expiry(100),
            get(2, 120, 130, "a", None, 3),
        ],
    );
    // ...and fine not to have happened yet long after.
    must_pass(
        "not expired yet",
        vec![
            grant(0, 10, 1),
            put_lease(20, 30, "a", "1", Some(2)),
            expiry(100),
            get(2, 500, 510, "a", Some("1"), 2),
        ],
    );
    // Gone before the lease could expire: a lost write.
    must_fail(
        "vanished early",
        vec![
            grant(0, 10, 1),
            put_lease(20, 30, "a", "1", Some(2)),
            expiry(100),
            get(2, 40, 50, "a", None, 3),
        ],
    );
    // Expired, then back: nothing explains it.
    must_fail(
        "back after expiry",
        vec![
            grant(0, 10, 1),
            put_lease(20, 30, "a", "1", Some(2)),
            expiry(100),
            get(2, 120, 130, "a", None, 3),
            get(3, 140, 150, "a", Some("1"), 3),
        ],
    );
}

#[test]
fn put_with_a_revoked_lease_must_fail() {
    must_pass(
        "refused",
        vec![
            grant(0, 10, 1),
            revoke(20, 30, 1),
            put_lease(40, 50, "a", "1", None),
        ],
    );
    must_fail(
        "accepted after revoke",
        vec![
            grant(0, 10, 1),
            revoke(20, 30, 1),
            put_lease(40, 50, "a", "1", Some(2)),
        ],
    );
    // Refused while the lease was live and could not have expired.
    must_fail(
        "refused while live",
        vec![
            grant(0, 10, 1),
            expiry(1000),
            put_lease(40, 50, "a", "1", None),
        ],
    );
}

#[test]
fn keepalive_and_timetolive_after_revoke() {
    must_pass(
        "alive then gone",
        vec![
            grant(0, 10, 1),
            put_lease(20, 30, "a", "1", Some(2)),
            keepalive(2, 35, 38, 2),
            ttl(3, 35, 39, 2, &["a"]),
            revoke(40, 50, 3),
            keepalive(2, 60, 70, 0),
            ttl(3, 60, 70, -1, &[]),
        ],
    );
    must_fail(
        "keepalive answers TTL > 0 after revoke",
        vec![grant(0, 10, 1), revoke(20, 30, 1), keepalive(2, 40, 50, 2)],
    );
    must_fail(
        "timetolive answers TTL > 0 after revoke",
        vec![grant(0, 10, 1), revoke(20, 30, 1), ttl(2, 40, 50, 1, &[])],
    );
    must_fail(
        "keepalive says gone while live",
        vec![grant(0, 10, 1), expiry(1000), keepalive(2, 40, 50, 0)],
    );
    must_fail(
        "timetolive names a key not attached",
        vec![
            grant(0, 10, 1),
            put_lease(20, 30, "a", "1", Some(2)),
            op(
                1,
                40,
                Some(50),
                Input::put("a", "2"),
                Output::Put { revision: Some(3) },
            ),
            ttl(2, 60, 70, 2, &["a"]),
        ],
    );
}

#[test]
fn maybe_applied_lease_requests() {
    // A failed revoke may have happened: the key may be gone or not.
    let failed_revoke = op(
        1,
        40,
        None,
        Input::LeaseRevoke { lease: L },
        Output::Unknown,
    );
    must_pass(
        "failed revoke applied",
        vec![
            grant(0, 10, 1),
            put_lease(20, 30, "a", "1", Some(2)),
            failed_revoke.clone(),
            get(2, 60, 70, "a", None, 3),
        ],
    );
    must_pass(
        "failed revoke not applied",
        vec![
            grant(0, 10, 1),
            put_lease(20, 30, "a", "1", Some(2)),
            failed_revoke,
            get(2, 60, 70, "a", Some("1"), 2),
        ],
    );
    // A failed grant may have happened: a put with the lease may succeed.
    must_pass(
        "failed grant applied",
        vec![
            op(
                1,
                0,
                None,
                Input::LeaseGrant { lease: L, ttl: 2 },
                Output::Unknown,
            ),
            put_lease(20, 30, "a", "1", Some(2)),
        ],
    );
}

#[test]
fn expiry_with_a_return_is_malformed() {
    let mut e = expiry(10);
    e.ret = Some(20);
    assert!(matches!(
        check(&[e], &Options::default()),
        Outcome::Malformed { index: 0, .. }
    ));
}
