//! Tests of the front's `grpc/autopromote.rs` (its `tests` module, included from there by `#[path]`).

use super::*;
use crate::grpc::cluster::tests::member;

fn view(id: u64, caught_up: bool) -> LearnerView {
    LearnerView {
        id,
        caught_up,
        running: true,
        quorum_safe: true,
    }
}

#[test]
fn a_learner_is_promoted_once_ready_for_the_whole_window() {
    let mut p = AutoPromoter::new(2);
    assert_eq!(
        p.round(true, &[view(7, true)]),
        None,
        "one round is not enough"
    );
    assert_eq!(p.round(true, &[view(7, true)]), Some(7));
    // A promotion that did not apply is tried again only after another full window.
    assert_eq!(p.round(true, &[view(7, true)]), None);
    assert_eq!(p.round(true, &[view(7, true)]), Some(7));
}

#[test]
fn a_learner_that_falls_behind_again_starts_over() {
    let mut p = AutoPromoter::new(2);
    assert_eq!(p.round(true, &[view(7, true)]), None);
    assert_eq!(p.round(true, &[view(7, false)]), None, "behind again");
    assert_eq!(
        p.round(true, &[view(7, true)]),
        None,
        "counts from one again"
    );
    assert_eq!(p.round(true, &[view(7, true)]), Some(7));
}

#[test]
fn a_learner_that_is_not_running_is_never_promoted() {
    let mut p = AutoPromoter::new(2);
    let stopped = LearnerView {
        running: false,
        ..view(7, true)
    };
    for _ in 0..5 {
        assert_eq!(p.round(true, &[stopped]), None);
    }
}

#[test]
fn a_promotion_that_would_lose_quorum_waits_until_it_would_not() {
    let mut p = AutoPromoter::new(2);
    let unsafe_now = LearnerView {
        quorum_safe: false,
        ..view(7, true)
    };
    for _ in 0..4 {
        assert_eq!(p.round(true, &[unsafe_now]), None);
    }
    // The learner kept up all along: promoted as soon as it is safe.
    assert_eq!(p.round(true, &[view(7, true)]), Some(7));
}

#[test]
fn only_a_leader_promotes_and_a_new_term_counts_afresh() {
    let mut p = AutoPromoter::new(2);
    assert_eq!(p.round(true, &[view(7, true)]), None);
    assert_eq!(p.round(false, &[view(7, true)]), None, "not leading");
    assert_eq!(p.round(true, &[view(7, true)]), None, "streak forgotten");
    assert_eq!(p.round(true, &[view(7, true)]), Some(7));
    let mut follower = AutoPromoter::new(1);
    for _ in 0..3 {
        assert_eq!(follower.round(false, &[view(7, true)]), None);
    }
}

#[test]
fn two_ready_learners_are_promoted_one_round_at_a_time() {
    let mut p = AutoPromoter::new(2);
    let both = [view(9, true), view(4, true)];
    assert_eq!(p.round(true, &both), None);
    assert_eq!(p.round(true, &both), Some(4), "lowest id first, one only");
    // Next round: 4 is a voter now (gone from the learners); 9 kept its streak.
    assert_eq!(p.round(true, &[view(9, true)]), Some(9));
}

#[test]
fn a_learner_gone_from_the_membership_is_forgotten() {
    let mut p = AutoPromoter::new(2);
    assert_eq!(p.round(true, &[view(7, true)]), None);
    assert_eq!(p.round(true, &[]), None, "removed");
    assert_eq!(
        p.round(true, &[view(7, true)]),
        None,
        "added again: counts afresh"
    );
}

fn up(ids: &[u64]) -> HashMap<u64, Duration> {
    ids.iter().map(|&id| (id, HEALTH_INTERVAL)).collect()
}

#[test]
fn quorum_safety_counts_connected_and_started_voters_with_the_learner() {
    let me = 1;
    // One voter and a learner: two of two connected after the promotion.
    let pair = [member(1, true, false), member(9, true, true)];
    assert!(quorum_safe(&pair, 9, me, &up(&[9])));
    assert!(!quorum_safe(&pair, 9, me, &up(&[])), "the learner is down");
    let young: HashMap<u64, Duration> = [(9, HEALTH_INTERVAL / 2)].into();
    assert!(!quorum_safe(&pair, 9, me, &young), "its stream is too new");
    // Three voters, one down, and the learner: three of four connected.
    let four = [
        member(1, true, false),
        member(2, true, false),
        member(3, true, false),
        member(9, true, true),
    ];
    assert!(quorum_safe(&four, 9, me, &up(&[2, 9])));
    // Two voters down: two of four is no majority.
    assert!(!quorum_safe(&four, 9, me, &up(&[9])));
    // Started voters: two of three voters never published; with the learner, two of four.
    let unstarted = [
        member(1, true, false),
        member(2, false, false),
        member(3, false, false),
        member(9, true, true),
    ];
    assert!(!quorum_safe(&unstarted, 9, me, &up(&[2, 3, 9])));
}
