//! Learners that promote themselves: the `AutoPromoteLearners` gate (alpha, off), named after
//! the gate etcd's unmerged PR #21744 proposes for etcd #15107 / #21611.
//!
//! While this member leads, every [`ROUND`] (etcd's `monitorVersionInterval`, the period of
//! the PR's leader loop) it looks at each learner and promotes one when all of these hold:
//! - **caught up, for long enough:** etcd's `isLearnerReady` (its log matches at least 90% of
//!   the leader's, the same check as `etcdctl member promote`) in [`READY_ROUNDS`] rounds in a
//!   row, so a learner that is close only for a moment, or falls behind again, is not taken;
//! - **running:** it has published its name (it started and applied its own publish), and
//!   its peer stream has been up for etcd's `HealthInterval` (5 s), so a learner that caught
//!   up and then stopped is not promoted into a voter that is down;
//! - **quorum-safe:** with the learner as a voter, the connected voters (this member, the
//!   learner and every voter whose stream is up) are a majority of the grown cluster, and the
//!   started voters are too (etcd's `IsReadyToPromoteMember`, asked whatever
//!   `--strict-reconfig-check` says);
//! - **one at a time:** a round proposes at most one promotion and waits for it to apply;
//!   the next round reads the membership again, so two learners are never promoted on one
//!   view of the cluster.
//!
//! The promotion goes through the log as the member's own request (never judged by auth), the
//! same entry `MemberPromote` proposes; a manual promotion racing it is refused when applied
//! (`member not learner`), as two manual ones would be. A leader change forgets every streak:
//! the new leader counts afresh from its own view.
//!
//! [`AutoPromoter`] is the decision, fed one observation per round (no clock); [`run`] is the
//! loop that feeds it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actcd_proto::actcdpb::{InternalRaftRequest, MemberChange, member_change::Kind};
use actcd_types::msg::{CheckLearner, MemberRecord, PeerActivity};

use super::cluster::{HEALTH_INTERVAL, ready_to_promote};
use crate::pipeline::Pipeline;

/// How often the leader looks at its learners (etcd's `monitorVersionInterval`).
pub const ROUND: Duration = Duration::from_secs(4);
/// Rounds in a row a learner must be ready before it is promoted.
pub const READY_ROUNDS: u32 = 2;

/// One learner as a round sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnerView {
    pub id: u64,
    /// etcd's `isLearnerReady` on the leader.
    pub caught_up: bool,
    /// Published, and its peer stream up for `HealthInterval`.
    pub running: bool,
    /// Promoting it keeps a connected and a started majority.
    pub quorum_safe: bool,
}

/// The decision: which learner, if any, to promote after this round.
#[derive(Debug)]
pub struct AutoPromoter {
    needed: u32,
    streaks: HashMap<u64, u32>,
}

impl AutoPromoter {
    pub fn new(needed: u32) -> Self {
        AutoPromoter {
            needed: needed.max(1),
            streaks: HashMap::new(),
        }
    }

    /// One round. `leading`: this member leads now. Answers the learner to promote (the
    /// lowest id among those ready for `needed` rounds, running and quorum-safe); its streak
    /// starts again, so a promotion that fails is tried only after another full window.
    pub fn round(&mut self, leading: bool, learners: &[LearnerView]) -> Option<u64> {
        if !leading {
            self.streaks.clear();
            return None;
        }
        self.streaks
            .retain(|id, _| learners.iter().any(|l| l.id == *id));
        for l in learners {
            let streak = self.streaks.entry(l.id).or_insert(0);
            *streak = if l.caught_up && l.running {
                streak.saturating_add(1)
            } else {
                0
            };
        }
        let chosen = learners
            .iter()
            .filter(|l| {
                l.quorum_safe && self.streaks.get(&l.id).copied().unwrap_or(0) >= self.needed
            })
            .map(|l| l.id)
            .min()?;
        self.streaks.insert(chosen, 0);
        Some(chosen)
    }
}

/// Whether promoting `learner` keeps both majorities: the started voters (etcd's
/// `IsReadyToPromoteMember`) and the connected ones, this member and the learner counted.
pub fn quorum_safe(
    members: &[MemberRecord],
    learner: u64,
    me: u64,
    activity: &HashMap<u64, Duration>,
) -> bool {
    let up = |id: u64| id == me || activity.get(&id).is_some_and(|d| *d >= HEALTH_INTERVAL);
    let voters: Vec<u64> = members
        .iter()
        .filter(|m| !m.is_learner)
        .map(|m| m.id)
        .chain(std::iter::once(learner))
        .collect();
    let connected = voters.iter().filter(|&&id| up(id)).count();
    ready_to_promote(members) && connected > voters.len() / 2
}

/// The leader's loop, for as long as the member runs (the caller drops it at shutdown).
pub async fn run(pipeline: Arc<Pipeline>) {
    let me = pipeline.config.identity.member_id;
    let mut promoter = AutoPromoter::new(READY_ROUNDS);
    let mut every = tokio::time::interval(ROUND);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let leading = *pipeline.routes.leader.borrow() == me;
        let learners = if leading {
            observe(&pipeline, me).await
        } else {
            Vec::new()
        };
        let Some(id) = promoter.round(leading, &learners) else {
            continue;
        };
        let req = InternalRaftRequest {
            member_change: Some(MemberChange {
                kind: Kind::Promote as i32,
                member_id: id,
                peer_urls: vec![],
            }),
            ..Default::default()
        };
        match pipeline.write_internal(req).await {
            Ok(_) => tracing::info!(member_id = %format!("{id:x}"), "auto-promoted learner"),
            Err(e) => tracing::warn!(
                member_id = %format!("{id:x}"),
                error = %e,
                "failed to auto-promote learner"
            ),
        }
    }
}

/// Each learner's view this round; none when the membership or the peers cannot be read.
async fn observe(pipeline: &Pipeline, me: u64) -> Vec<LearnerView> {
    let Ok(members) = pipeline.members().await else {
        return Vec::new();
    };
    if !members.iter().any(|m| m.is_learner) {
        return Vec::new();
    }
    let Ok(activity) = pipeline.routes.peer_activity.send(PeerActivity).await else {
        return Vec::new();
    };
    let mut views = Vec::new();
    for m in members.iter().filter(|m| m.is_learner) {
        let caught_up = matches!(
            pipeline
                .routes
                .learner_ready
                .send(CheckLearner { id: m.id })
                .await,
            Ok(Ok(()))
        );
        let running =
            !m.name.is_empty() && activity.get(&m.id).is_some_and(|d| *d >= HEALTH_INTERVAL);
        views.push(LearnerView {
            id: m.id,
            caught_up,
            running,
            quorum_safe: quorum_safe(&members, m.id, me, &activity),
        });
    }
    views
}

#[cfg(test)]
#[path = "autopromote_tests.rs"]
mod tests;
