//! Tests of the front's `cluster.rs` (its `tests` module, included from there by `#[path]`).

use super::*;

/// A member record: named once `started` (published), a voter unless `learner`.
pub(crate) fn member(id: u64, started: bool, learner: bool) -> MemberRecord {
    MemberRecord {
        id,
        name: if started {
            format!("m{id}")
        } else {
            String::new()
        },
        is_learner: learner,
        ..Default::default()
    }
}

#[test]
fn peer_urls_are_checked_as_etcd_checks_them() {
    let ok = |u: &[&str]| check_peer_urls(&u.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(ok(&["http://127.0.0.1:2380"]), Ok(()));
    assert_eq!(ok(&["https://a.example:2380", "http://b:1"]), Ok(()));
    for bad in [
        &[][..],
        &["127.0.0.1:2380"],
        &["ftp://a:1"],
        &["http://a"],
        &["http://a:port"],
        &["http://a:1/path"],
        &["http://:1"],
    ] {
        assert_eq!(ok(bad), Err(EtcdError::MemberBadUrls), "{bad:?}");
    }
}

#[test]
fn membership_changes_wait_for_connected_peers() {
    let up = |pairs: &[(u64, u64)]| -> HashMap<u64, Duration> {
        pairs
            .iter()
            .map(|&(id, secs)| (id, Duration::from_secs(secs)))
            .collect()
    };
    let voters = [1, 2, 3];
    // Just started: the streams are younger than the health interval.
    assert!(!healthy_to_add(&voters, 1, &up(&[(2, 1), (3, 1)])));
    assert!(healthy_to_add(&voters, 1, &up(&[(2, 5), (3, 9)])));
    // One of three down: two of four would be no quorum.
    assert!(!healthy_to_add(&voters, 1, &up(&[(2, 5)])));
    // One of four down: three of five are (etcd 3.5.30, #21669; 3.5.1 refused).
    assert!(healthy_to_add(&[1, 2, 3, 4], 1, &up(&[(2, 5), (3, 5)])));
    assert!(!healthy_to_add(&[1, 2, 3, 4], 1, &up(&[(2, 5)])));
    assert!(healthy_to_add(&[1], 1, &up(&[])));
    // A member that is down may be removed; a connected one only if a quorum stays.
    assert!(healthy_to_remove(&voters, 1, 3, &up(&[(2, 9)])));
    assert!(healthy_to_remove(&voters, 1, 3, &up(&[(2, 9), (3, 9)])));
    assert!(!healthy_to_remove(&voters, 1, 3, &up(&[(2, 1), (3, 9)])));
    assert!(!healthy_to_remove(&voters, 1, 1, &up(&[(2, 9)])));
}

#[test]
fn strict_reconfiguration_counts_started_voters() {
    // One started member may always add a second.
    assert!(ready_to_add_voter(&[member(1, true, false)]));
    // Two members, one not started: a third voter would leave 1 of 3 started.
    assert!(!ready_to_add_voter(&[
        member(1, true, false),
        member(2, false, false)
    ]));
    assert!(ready_to_add_voter(&[
        member(1, true, false),
        member(2, true, false),
        member(3, false, true)
    ]));
    // Removing a started voter of three with one unstarted leaves 1 of 2.
    let three = [
        member(1, true, false),
        member(2, true, false),
        member(3, false, false),
    ];
    assert!(!ready_to_remove_voter(&three, 1));
    assert!(ready_to_remove_voter(&three, 3));
    assert!(ready_to_promote(&[
        member(1, true, false),
        member(2, false, true)
    ]));
    assert!(!ready_to_promote(&[
        member(1, true, false),
        member(2, false, false),
        member(3, false, false),
        member(4, false, true)
    ]));
}
