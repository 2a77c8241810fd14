//! Tests of [`Lessor`] on a timeline of offsets from one instant: nothing sleeps.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actcd_types::EtcdError;
use actcd_types::msg::LeaseTtl;

use super::Lessor;
use crate::config::LessorConfig;

fn s(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// A primary lessor promoted at `t0` with no extension, and `t0`.
fn primary(config: LessorConfig) -> (Lessor, Instant) {
    let t0 = Instant::now();
    let mut l = Lessor::new(config);
    l.promote(t0, Duration::ZERO);
    (l, t0)
}

fn with_interval(interval: Duration) -> LessorConfig {
    LessorConfig {
        checkpoint_interval: interval,
        ..LessorConfig::default()
    }
}

#[test]
fn expired_hands_out_leases_in_expiry_order() {
    struct Case {
        name: &'static str,
        /// `(id, ttl)` granted at t0.
        grants: &'static [(i64, i64)],
        at: Duration,
        limit: usize,
        want_expired: &'static [i64],
    }
    let cases = [
        Case {
            name: "none due yet",
            grants: &[(1, 5), (2, 10)],
            at: ms(4999),
            limit: 10,
            want_expired: &[],
        },
        Case {
            name: "exactly at expiry",
            grants: &[(1, 5), (2, 10)],
            at: s(5),
            limit: 10,
            want_expired: &[1],
        },
        Case {
            name: "earliest first, ties by id",
            grants: &[(9, 7), (3, 2), (5, 7), (4, 30)],
            at: s(8),
            limit: 10,
            want_expired: &[3, 5, 9],
        },
        Case {
            name: "limit keeps the earliest",
            grants: &[(9, 7), (3, 2), (5, 7)],
            at: s(8),
            limit: 2,
            want_expired: &[3, 5],
        },
        Case {
            name: "zero limit",
            grants: &[(1, 1)],
            at: s(8),
            limit: 0,
            want_expired: &[],
        },
    ];
    for c in cases {
        let (mut l, t0) = primary(LessorConfig::default());
        for &(id, ttl) in c.grants {
            l.granted(id, ttl, 0, t0);
        }
        assert_eq!(l.expired(t0 + c.at, c.limit), c.want_expired, "{}", c.name);
    }
}

#[test]
fn renew() {
    struct Case {
        name: &'static str,
        primary: bool,
        /// `(id, ttl, remaining_ttl)` granted at t0.
        grants: &'static [(i64, i64, i64)],
        id: i64,
        at: Duration,
        want: Result<i64, EtcdError>,
        /// When the lease expires afterwards, as an offset from t0.
        want_expiry: Option<Duration>,
    }
    let cases = [
        Case {
            name: "moves the expiry to now + TTL",
            primary: true,
            grants: &[(1, 10, 0)],
            id: 1,
            at: s(8),
            want: Ok(10),
            want_expiry: Some(s(18)),
        },
        Case {
            name: "full TTL even after a checkpoint",
            primary: true,
            grants: &[(1, 600, 30)],
            id: 1,
            at: s(8),
            want: Ok(600),
            want_expiry: Some(s(608)),
        },
        Case {
            name: "follower",
            primary: false,
            grants: &[(1, 10, 0)],
            id: 1,
            at: s(1),
            want: Err(EtcdError::NotLeader),
            want_expiry: None,
        },
        Case {
            name: "unknown lease",
            primary: true,
            grants: &[(1, 10, 0)],
            id: 2,
            at: s(1),
            want: Err(EtcdError::LeaseNotFound),
            want_expiry: None,
        },
        Case {
            name: "already expired: its revoke is pending",
            primary: true,
            grants: &[(1, 10, 0)],
            id: 1,
            at: s(10),
            want: Err(EtcdError::LeaseNotFound),
            want_expiry: Some(s(10)),
        },
    ];
    for c in cases {
        let t0 = Instant::now();
        let mut l = Lessor::new(LessorConfig::default());
        if c.primary {
            l.promote(t0, Duration::ZERO);
        }
        for &(id, ttl, remaining) in c.grants {
            l.granted(id, ttl, remaining, t0);
        }
        assert_eq!(l.renew(c.id, t0 + c.at), c.want, "{}", c.name);
        if let Some(exp) = c.want_expiry {
            let before = t0 + exp - ms(1);
            assert_eq!(
                l.time_to_live(c.id, before).map(|t| t.remaining_ttl),
                Ok(0),
                "{}: not expired 1 ms before",
                c.name
            );
            assert_eq!(l.expired(before, 10), Vec::<i64>::new(), "{}", c.name);
            assert_eq!(l.expired(t0 + exp, 10), vec![c.id], "{}", c.name);
        }
    }
}

#[test]
fn revoked_lease_leaves_the_queues() {
    let (mut l, t0) = primary(with_interval(s(60)));
    l.granted(1, 100, 0, t0);
    l.granted(2, 100, 0, t0);
    l.checkpointed(1, 80, t0);
    assert_eq!(l.renew(1, t0 + s(1)), Ok(100)); // asks for a clear
    l.revoked(1);
    l.revoked(1); // a second revoke of the same lease is harmless
    l.revoked(7); // so is one of a lease never heard of

    assert_eq!(l.leases(), vec![2]);
    assert_eq!(l.time_to_live(1, t0), Err(EtcdError::LeaseNotFound));
    assert_eq!(l.renew(1, t0 + s(2)), Err(EtcdError::LeaseNotFound));
    assert_eq!(l.expired(t0 + s(1000), 10), vec![2]);
    // Lease 1's clear and scheduled checkpoint went with it.
    assert_eq!(l.due_checkpoints(t0 + s(60), 10), vec![(2, 40)]);
    assert_eq!(l.len(), 1);
}

#[test]
fn follower_never_expires_or_checkpoints() {
    let t0 = Instant::now();
    let mut l = Lessor::new(with_interval(s(1)));
    l.granted(1, 5, 0, t0);
    l.granted(2, 5, 3, t0);
    l.checkpointed(1, 2, t0);
    let later = t0 + s(1_000_000);
    assert!(!l.is_primary());
    assert_eq!(l.expired(later, 100), Vec::<i64>::new());
    assert_eq!(l.due_checkpoints(later, 100), vec![]);
    assert_eq!(l.time_to_live(1, later), Err(EtcdError::NotLeader));
    assert_eq!(l.leases(), vec![1, 2]);
    assert_eq!(l.tick(later), Default::default());
}

#[test]
fn promote_restarts_every_clock() {
    struct Case {
        name: &'static str,
        ttl: i64,
        /// Checkpointed remaining TTL before the promotion (0 = none).
        remaining: i64,
        extend: Duration,
        want_ttl: i64,
    }
    let cases = [
        Case {
            name: "full TTL plus the extension",
            ttl: 10,
            remaining: 0,
            extend: s(1),
            want_ttl: 11,
        },
        Case {
            name: "checkpointed remaining TTL plus the extension",
            ttl: 600,
            remaining: 42,
            extend: s(1),
            want_ttl: 43,
        },
        Case {
            name: "no extension",
            ttl: 10,
            remaining: 5,
            extend: Duration::ZERO,
            want_ttl: 5,
        },
    ];
    for c in cases {
        let t0 = Instant::now();
        let mut l = Lessor::new(LessorConfig::default());
        l.granted(1, c.ttl, 0, t0);
        if c.remaining > 0 {
            l.checkpointed(1, c.remaining, t0 + s(3));
        }
        // Promoted long after the grant: followers' clocks don't run.
        let at = t0 + s(3600);
        l.promote(at, c.extend);
        assert_eq!(
            l.time_to_live(1, at),
            Ok(LeaseTtl {
                granted_ttl: c.ttl,
                remaining_ttl: c.want_ttl
            }),
            "{}",
            c.name
        );
        let expiry = at + s(c.want_ttl as u64);
        assert_eq!(
            l.expired(expiry - ms(1), 10),
            Vec::<i64>::new(),
            "{}",
            c.name
        );
        assert_eq!(l.expired(expiry, 10), vec![1], "{}", c.name);
    }
}

#[test]
fn demote_then_promote_gives_a_fresh_clock() {
    let (mut l, t0) = primary(LessorConfig::default());
    l.granted(1, 10, 0, t0);
    assert_eq!(l.expired(t0 + s(10), 10), vec![1]); // handed out, revoke never applied
    l.demote();
    assert_eq!(l.renew(1, t0 + s(11)), Err(EtcdError::NotLeader));
    assert_eq!(l.expired(t0 + s(100), 10), Vec::<i64>::new());

    l.promote(t0 + s(100), s(1));
    assert_eq!(l.expired(t0 + ms(110_999), 10), Vec::<i64>::new());
    assert_eq!(l.renew(1, t0 + s(105)), Ok(10));
    assert_eq!(l.expired(t0 + ms(114_999), 10), Vec::<i64>::new());
    assert_eq!(l.expired(t0 + s(115), 10), vec![1]);
}

#[test]
fn time_to_live_truncates_toward_zero() {
    struct Case {
        at: Duration,
        want_remaining: i64,
    }
    let cases = [
        Case {
            at: Duration::ZERO,
            want_remaining: 10,
        },
        Case {
            at: ms(1),
            want_remaining: 9,
        },
        Case {
            at: ms(8001),
            want_remaining: 1,
        },
        Case {
            at: ms(9999),
            want_remaining: 0,
        },
        Case {
            at: s(10),
            want_remaining: 0,
        },
        // Expired, revoke not applied yet: etcd's leader reports what is left, below zero.
        Case {
            at: ms(10_500),
            want_remaining: 0,
        },
        Case {
            at: ms(11_500),
            want_remaining: -1,
        },
    ];
    let (mut l, t0) = primary(LessorConfig::default());
    l.granted(1, 10, 0, t0);
    for c in cases {
        assert_eq!(
            l.time_to_live(1, t0 + c.at),
            Ok(LeaseTtl {
                granted_ttl: 10,
                remaining_ttl: c.want_remaining
            }),
            "at {:?}",
            c.at
        );
    }
    assert_eq!(l.time_to_live(2, t0), Err(EtcdError::LeaseNotFound));
}

#[test]
fn revokes_are_rate_limited_per_tick() {
    let cfg = LessorConfig {
        revoke_per_tick: 500,
        ..LessorConfig::default()
    };
    let (mut l, t0) = primary(cfg);
    for id in 1..=1200 {
        l.granted(id, 1, 0, t0);
    }
    let now = t0 + s(1);
    let sizes: Vec<usize> = (0..4).map(|_| l.tick(now).revokes.len()).collect();
    assert_eq!(sizes, vec![500, 500, 200, 0]);
}

#[test]
fn expired_lease_is_handed_out_again_after_the_retry_interval() {
    let cfg = LessorConfig {
        expired_retry_interval: s(3),
        ..LessorConfig::default()
    };
    let (mut l, t0) = primary(cfg);
    l.granted(1, 1, 0, t0);
    l.granted(2, 1, 0, t0);
    struct Step {
        at: Duration,
        /// Revoke applied just before this step.
        applied: Option<i64>,
        want_expired: &'static [i64],
    }
    let steps = [
        Step {
            at: s(1),
            applied: None,
            want_expired: &[1, 2],
        },
        Step {
            at: ms(1500),
            applied: None,
            want_expired: &[],
        },
        Step {
            at: ms(3999),
            applied: Some(2),
            want_expired: &[],
        },
        Step {
            at: s(4),
            applied: None,
            want_expired: &[1],
        },
        Step {
            at: s(6),
            applied: None,
            want_expired: &[],
        },
        Step {
            at: s(7),
            applied: None,
            want_expired: &[1],
        },
        Step {
            at: s(100),
            applied: Some(1),
            want_expired: &[],
        },
    ];
    for st in steps {
        if let Some(id) = st.applied {
            l.revoked(id);
        }
        assert_eq!(l.expired(t0 + st.at, 10), st.want_expired, "at {:?}", st.at);
    }
}

#[test]
fn zero_retry_interval_still_hands_a_lease_out_once_per_call() {
    let cfg = LessorConfig {
        expired_retry_interval: Duration::ZERO,
        ..LessorConfig::default()
    };
    let (mut l, t0) = primary(cfg);
    l.granted(1, 1, 0, t0);
    assert_eq!(l.expired(t0 + s(1), 10), vec![1]);
    assert_eq!(l.expired(t0 + s(1), 10), vec![1]);
}

#[test]
fn checkpoint_scheduling() {
    struct Case<'a> {
        name: &'static str,
        interval: Duration,
        /// `(id, ttl)` granted at t0.
        grants: &'a [(i64, i64)],
        /// `(offset, want checkpoints)` in order.
        steps: &'a [(Duration, &'a [(i64, i64)])],
    }
    let cases = [
        Case {
            name: "only leases longer than the interval",
            interval: s(60),
            grants: &[(1, 100), (2, 60), (3, 30)],
            steps: &[(ms(59_999), &[]), (s(60), &[(1, 40)]), (s(1000), &[])],
        },
        Case {
            name: "remaining TTL rounds up",
            interval: s(60),
            grants: &[(1, 100)],
            steps: &[(ms(60_500), &[(1, 40)])],
        },
        Case {
            name: "etcd's: a 2 s lease, 1 s interval",
            interval: s(1),
            grants: &[(1, 2)],
            steps: &[(s(1), &[(1, 1)])],
        },
        Case {
            name: "re-armed while the remaining TTL is longer than the interval",
            interval: s(60),
            grants: &[(1, 1000), (2, 100)],
            steps: &[
                (s(60), &[(1, 940), (2, 40)]),
                (s(119), &[]),
                (s(120), &[(1, 880)]),
                (s(180), &[(1, 820)]),
            ],
        },
        Case {
            name: "an expired lease gets no checkpoint",
            interval: s(1),
            grants: &[(1, 2)],
            steps: &[(s(2), &[]), (s(10), &[])],
        },
    ];
    for c in cases {
        let (mut l, t0) = primary(with_interval(c.interval));
        for &(id, ttl) in c.grants {
            l.granted(id, ttl, 0, t0);
        }
        for &(at, want) in c.steps {
            assert_eq!(
                l.due_checkpoints(t0 + at, 100),
                want,
                "{} at {at:?}",
                c.name
            );
        }
    }
}

#[test]
fn applied_checkpoint_schedules_the_next() {
    let (mut l, t0) = primary(with_interval(s(60)));
    l.granted(1, 100, 0, t0);
    l.granted(2, 1000, 0, t0);
    assert_eq!(l.due_checkpoints(t0 + s(60), 10), vec![(1, 40), (2, 940)]);
    // Applied a second later. Lease 1 has 40 s left, under the interval: no further
    // checkpoint. Lease 2's next is due an interval after this one applied.
    l.checkpointed(1, 40, t0 + s(61));
    l.checkpointed(2, 940, t0 + s(61));
    assert_eq!(l.due_checkpoints(t0 + s(120), 10), vec![]);
    assert_eq!(l.due_checkpoints(t0 + s(121), 10), vec![(2, 879)]);
    // A checkpoint doesn't move the running clock: lease 1 still expires at 100 s.
    assert_eq!(l.expired(t0 + s(100), 10), vec![1]);
}

#[test]
fn checkpoint_is_skipped_while_the_lease_has_its_full_ttl() {
    let (mut l, t0) = primary(with_interval(s(60)));
    l.granted(1, 100, 0, t0);
    assert_eq!(l.renew(1, t0 + ms(59_500)), Ok(100));
    // 99.5 s left rounds up to the full 100: nothing to save, but it is checked again later.
    assert_eq!(l.due_checkpoints(t0 + s(60), 10), vec![]);
    assert_eq!(l.due_checkpoints(t0 + s(120), 10), vec![(1, 40)]);
}

#[test]
fn renew_clears_a_checkpointed_remaining_ttl() {
    struct Case {
        name: &'static str,
        checkpointing: bool,
        /// Remaining TTL checkpointed before the renewal (0 = none).
        remaining: i64,
        want_checkpoints: &'static [(i64, i64)],
    }
    let cases = [
        Case {
            name: "checkpointed: clear it",
            checkpointing: true,
            remaining: 40,
            want_checkpoints: &[(1, 0)],
        },
        Case {
            name: "never checkpointed: nothing to clear",
            checkpointing: true,
            remaining: 0,
            want_checkpoints: &[],
        },
        Case {
            name: "checkpointing off",
            checkpointing: false,
            remaining: 40,
            want_checkpoints: &[],
        },
    ];
    for c in cases {
        let cfg = LessorConfig {
            checkpointing: c.checkpointing,
            ..with_interval(s(60))
        };
        let (mut l, t0) = primary(cfg);
        l.granted(1, 100, 0, t0);
        if c.remaining > 0 {
            l.checkpointed(1, c.remaining, t0 + s(10));
        }
        assert_eq!(l.renew(1, t0 + s(20)), Ok(100), "{}", c.name);
        assert_eq!(l.renew(1, t0 + s(21)), Ok(100), "{}", c.name);
        assert_eq!(
            l.due_checkpoints(t0 + s(21), 10),
            c.want_checkpoints,
            "{}: one clear however many renewals",
            c.name
        );
        assert_eq!(l.due_checkpoints(t0 + s(22), 10), vec![], "{}", c.name);
    }
}

#[test]
fn clears_come_before_scheduled_checkpoints_within_the_limit() {
    let (mut l, t0) = primary(with_interval(s(60)));
    // Leases 1-3 are too short for scheduled checkpoints but carry one from an earlier leader.
    for id in 1..=3 {
        l.granted(id, 50, 0, t0);
        l.checkpointed(id, 30, t0);
    }
    l.granted(4, 100, 0, t0);
    for id in 1..=3 {
        assert_eq!(l.renew(id, t0 + s(1)), Ok(50));
    }
    let now = t0 + s(60);
    assert_eq!(l.due_checkpoints(now, 2), vec![(1, 0), (2, 0)]);
    assert_eq!(l.due_checkpoints(now, 2), vec![(3, 0), (4, 40)]);
    assert_eq!(l.due_checkpoints(now, 2), vec![]);
}

#[test]
fn demote_drops_pending_clears_and_schedules() {
    let (mut l, t0) = primary(with_interval(s(60)));
    l.granted(1, 100, 0, t0);
    l.checkpointed(1, 50, t0);
    assert_eq!(l.renew(1, t0 + s(1)), Ok(100));
    l.demote();
    assert_eq!(l.due_checkpoints(t0 + s(60), 10), vec![]);
    l.promote(t0 + s(200), Duration::ZERO);
    // The renewal cleared the remaining TTL here, so the new clock runs the full TTL.
    assert_eq!(l.due_checkpoints(t0 + s(200), 10), vec![]);
    assert_eq!(l.due_checkpoints(t0 + s(260), 10), vec![(1, 40)]);
}

#[test]
fn granted_on_a_primary_starts_from_the_remaining_ttl() {
    let (mut l, t0) = primary(LessorConfig::default());
    l.granted(1, 600, 20, t0);
    assert_eq!(
        l.time_to_live(1, t0),
        Ok(LeaseTtl {
            granted_ttl: 600,
            remaining_ttl: 20
        })
    );
    assert_eq!(l.expired(t0 + s(20), 10), vec![1]);
}

#[test]
fn leases_are_listed_soonest_expiry_first() {
    let (mut l, t0) = primary(LessorConfig::default());
    l.granted(5, 30, 0, t0);
    l.granted(3, 10, 0, t0);
    l.granted(9, 10, 0, t0);
    l.granted(1, 20, 0, t0);
    assert_eq!(l.leases(), vec![3, 9, 1, 5]);
    l.demote();
    assert_eq!(l.leases(), vec![1, 3, 5, 9]);
}

#[test]
fn huge_ttls_do_not_overflow() {
    let (mut l, t0) = primary(LessorConfig::default());
    l.granted(1, 9_000_000_000, 0, t0); // etcd's MaxLeaseTTL
    assert_eq!(l.renew(1, t0 + s(1)), Ok(9_000_000_000));
    let ttl = l.time_to_live(1, t0 + s(1)).map(|t| t.remaining_ttl);
    assert!(matches!(ttl, Ok(t) if t >= 8_999_999_999), "{ttl:?}");
    assert_eq!(l.expired(t0 + s(1_000_000), 10), Vec::<i64>::new());
}

/// etcd's `TestLessorRenewExtendPileup`, at a revoke rate of 10 a second: 100 leases of 10 s and
/// 100 of 11 s promoted at once are spread so that between 5 and 10 expire in each second.
#[test]
fn promote_spreads_a_pile_up() {
    let cfg = LessorConfig {
        revoke_per_tick: 5,
        tick_interval: ms(500),
        ..LessorConfig::default()
    };
    assert_eq!(cfg.revoke_rate(), 10);
    let t0 = Instant::now();
    let mut l = Lessor::new(cfg);
    for i in 1..=100 {
        l.granted(2 * i, 10, 0, t0);
        l.granted(2 * i + 1, 11, 0, t0);
    }
    l.promote(t0, Duration::ZERO);

    let mut per_second: HashMap<i64, usize> = HashMap::new();
    // Read 100 ms early, as etcd's test rounds up slightly, so a lease placed exactly on a
    // second counts in that second whatever the float rounding.
    let early = t0.checked_sub(ms(100)).unwrap();
    for id in l.leases() {
        let ttl = l.time_to_live(id, early).map(|t| t.remaining_ttl);
        per_second
            .entry(ttl.unwrap())
            .and_modify(|n| *n += 1)
            .or_insert(1);
    }
    for second in 10..30 {
        let n = per_second.get(&second).copied().unwrap_or(0);
        assert!((5..=10).contains(&n), "{n} leases expire at {second} s");
    }
    assert_eq!(per_second.values().sum::<usize>(), 200);
}

#[test]
fn promote_does_not_spread_fewer_leases_than_the_revoke_rate() {
    let (mut l, t0) = primary(LessorConfig::default());
    l.demote();
    for id in 1..=999 {
        l.granted(id, 10, 0, t0);
    }
    l.promote(t0, s(1));
    assert_eq!(l.expired(t0 + s(11), 2000).len(), 999);
}

#[test]
fn an_unknown_lease_may_be_early_for_an_election_timeout_after_promotion() {
    struct Case {
        name: &'static str,
        primary: bool,
        known: bool,
        after: Duration,
        want_until: Option<Duration>,
    }
    let config = LessorConfig::default();
    let window = config.election_timeout;
    let cases = [
        Case {
            name: "unknown, just promoted",
            primary: true,
            known: false,
            after: ms(10),
            want_until: Some(window),
        },
        Case {
            name: "unknown, window over",
            primary: true,
            known: false,
            after: window,
            want_until: None,
        },
        Case {
            name: "known",
            primary: true,
            known: true,
            after: ms(10),
            want_until: None,
        },
        Case {
            name: "demoted",
            primary: false,
            known: false,
            after: ms(10),
            want_until: None,
        },
    ];
    for c in cases {
        let mut l = Lessor::new(config.clone());
        let t0 = Instant::now();
        if c.known {
            l.granted(1, 10, 0, t0);
        }
        l.promote(t0, config.election_timeout);
        if !c.primary {
            l.demote();
        }
        assert_eq!(
            l.renew_may_be_early(1, t0 + c.after),
            c.want_until.map(|d| t0 + d),
            "{}",
            c.name
        );
    }
}
