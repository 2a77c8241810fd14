//! [`Lessor`]: lease expiry and checkpoint timing, with "now" passed in.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actcd_types::EtcdError;
use actcd_types::msg::{LeaseTtl, ProposeLeaseOps};

use crate::config::LessorConfig;
use crate::queue::DeadlineQueue;

/// What etcd reports as the remaining TTL of a lease that never expires (`math.MaxInt64`
/// nanoseconds, in seconds). Only a primary lease whose expiry is past what `Instant` can hold
/// (a TTL of centuries) reports it.
const FOREVER_SECS: i64 = i64::MAX / 1_000_000_000;

/// One lease as the lessor times it.
#[derive(Debug)]
struct Lease {
    /// Granted TTL, seconds.
    ttl: i64,
    /// Last checkpointed remaining TTL, seconds; 0 = none.
    remaining_ttl: i64,
    /// When it expires; `None` = never (every lease on a follower).
    expiry: Option<Instant>,
}

impl Lease {
    /// The TTL a (re)started clock runs for: the checkpointed remaining TTL if there is one,
    /// else the granted TTL (etcd's `Lease.RemainingTTL`).
    fn clock_ttl(&self) -> i64 {
        if self.remaining_ttl > 0 {
            self.remaining_ttl
        } else {
            self.ttl
        }
    }
}

/// The lessor's core: which leases exist (as the applied state told it), when each expires,
/// and when each is due a checkpoint. See the crate doc for the rules.
#[derive(Debug)]
pub struct Lessor {
    config: LessorConfig,
    leases: HashMap<i64, Lease>,
    /// Primary only: when to look at each lease next, its expiry or, once handed out for
    /// revoke, the time to hand it out again (etcd's `LeaseExpiredNotifier`).
    expiries: DeadlineQueue,
    /// Primary only: when each lease is due its next remaining-TTL checkpoint.
    checkpoints: DeadlineQueue,
    /// Primary only: renewed leases whose checkpointed remaining TTL must be cleared through
    /// the log, proposed ahead of scheduled checkpoints.
    clears: Vec<i64>,
    primary: bool,
    /// Primary only: until when the grants of earlier terms may still be applying here (an
    /// election timeout after promotion; see [`Self::renew_may_be_early`]).
    settling_until: Option<Instant>,
}

impl Lessor {
    /// A follower lessor with no leases.
    pub fn new(config: LessorConfig) -> Self {
        Self {
            config,
            leases: HashMap::new(),
            expiries: DeadlineQueue::default(),
            checkpoints: DeadlineQueue::default(),
            clears: Vec::new(),
            primary: false,
            settling_until: None,
        }
    }

    pub fn config(&self) -> &LessorConfig {
        &self.config
    }

    /// Whether this lessor expires leases (this member leads raft and has promoted it).
    pub fn is_primary(&self) -> bool {
        self.primary
    }

    /// Whether the lease exists here (its grant has been applied and no revoke since).
    pub fn contains(&self, id: i64) -> bool {
        self.leases.contains_key(&id)
    }

    /// How many leases exist.
    pub fn len(&self) -> usize {
        self.leases.len()
    }

    pub fn is_empty(&self) -> bool {
        self.leases.is_empty()
    }

    /// A lease exists in the applied state (granted, or found at recovery). `ttl` is the granted
    /// TTL, already raised to the minimum by the state machine; `remaining_ttl` its last
    /// checkpoint (0 = none). A primary starts its clock at once; a follower never expires it.
    pub fn granted(&mut self, id: i64, ttl: i64, remaining_ttl: i64, now: Instant) {
        self.revoked(id);
        self.leases.insert(
            id,
            Lease {
                ttl,
                remaining_ttl,
                expiry: None,
            },
        );
        if self.primary {
            self.restart(id, now, Duration::ZERO);
        }
    }

    /// A lease's revoke was applied: forget it. (A clear it asked for is dropped when the
    /// clears are next taken, rather than searched for here.)
    pub fn revoked(&mut self, id: i64) {
        if self.leases.remove(&id).is_some() {
            self.expiries.remove(id);
            self.checkpoints.remove(id);
        }
    }

    /// A checkpoint was applied: remember the remaining TTL for the next promotion (it doesn't
    /// move the current expiry), and on a primary schedule the next checkpoint.
    pub fn checkpointed(&mut self, id: i64, remaining_ttl: i64, now: Instant) {
        let Some(lease) = self.leases.get_mut(&id) else {
            return;
        };
        lease.remaining_ttl = remaining_ttl;
        if self.primary {
            schedule_checkpoint(&self.config, &mut self.checkpoints, id, lease, now);
        }
    }

    /// Whether a keepalive for `id` must wait: this lessor is primary and the lease exists but
    /// has expired, so its revoke is on its way. Answering `LeaseNotFound` now would tell the
    /// client the lease is gone while its keys can still be read; etcd's leader waits for the
    /// revoke to apply (or for losing leadership) first, and so does the actor.
    pub fn renew_must_wait(&self, id: i64, now: Instant) -> bool {
        self.primary
            && self
                .leases
                .get(&id)
                .is_some_and(|l| l.expiry.is_some_and(|e| e <= now))
    }

    /// A keepalive of a lease this primary doesn't know, within an election timeout of its
    /// promotion: the lease may have been granted in an earlier term with its grant not applied
    /// here yet (this lessor is promoted at the election, where etcd's waits until the new
    /// leader has applied its term's first entry, and answers "not primary" until then). The
    /// actor holds such a keepalive until the grant applies or the window ends ("not found"),
    /// rather than telling its client a live lease is gone. Until when, if so.
    pub fn renew_may_be_early(&self, id: i64, now: Instant) -> Option<Instant> {
        let until = self.settling_until.filter(|&u| self.primary && now < u)?;
        (!self.leases.contains_key(&id)).then_some(until)
    }

    /// A keepalive: restarts the lease's clock at its full TTL and returns that TTL.
    /// `NotLeader` on a follower (the caller forwards to the leader); `LeaseNotFound` for an
    /// unknown lease or one already expired (see [`Self::renew_must_wait`]: the actor asks
    /// first and answers an expired lease only once its revoke has applied). A lease with a
    /// checkpointed remaining TTL also gets a
    /// checkpoint of 0 proposed, so a later leader doesn't shorten the lease just renewed.
    pub fn renew(&mut self, id: i64, now: Instant) -> Result<i64, EtcdError> {
        if !self.primary {
            return Err(EtcdError::NotLeader);
        }
        let lease = self.leases.get_mut(&id).ok_or(EtcdError::LeaseNotFound)?;
        if lease.expiry.is_some_and(|e| e <= now) {
            return Err(EtcdError::LeaseNotFound);
        }
        if self.config.checkpointing && lease.remaining_ttl > 0 {
            // Cleared here at once: etcd waits for the clearing checkpoint to apply before it
            // restarts the clock, so the clock runs the full TTL, as it does here.
            lease.remaining_ttl = 0;
            self.clears.push(id);
        }
        start_clock(&mut self.expiries, id, lease, now, Duration::ZERO);
        Ok(lease.ttl)
    }

    /// The lease's granted TTL and the whole seconds left before it expires, truncated toward
    /// zero as etcd's leader reports them (0 or below for a lease expired but not yet revoked).
    /// `NotLeader` on a follower, whose leases have no clock; `LeaseNotFound` if unknown.
    pub fn time_to_live(&self, id: i64, now: Instant) -> Result<LeaseTtl, EtcdError> {
        if !self.primary {
            return Err(EtcdError::NotLeader);
        }
        let lease = self.leases.get(&id).ok_or(EtcdError::LeaseNotFound)?;
        let remaining_ttl = match lease.expiry {
            None => FOREVER_SECS,
            Some(at) => match at.checked_duration_since(now) {
                Some(left) => left.as_secs() as i64,
                None => -((now - at).as_secs() as i64),
            },
        };
        Ok(LeaseTtl {
            granted_ttl: lease.ttl,
            remaining_ttl,
        })
    }

    /// Every lease id, soonest expiry first (etcd sorts its list by remaining time), ties and a
    /// follower's leases by id.
    pub fn leases(&self) -> Vec<i64> {
        let mut ids: Vec<(bool, Option<Instant>, i64)> = self
            .leases
            .iter()
            .map(|(&id, l)| (l.expiry.is_none(), l.expiry, id))
            .collect();
        ids.sort_unstable();
        ids.into_iter().map(|(_, _, id)| id).collect()
    }

    /// This member became leader: restart every lease's clock at `now + extend` plus its
    /// checkpointed remaining TTL (or its TTL), spread expiries that would pile up beyond the
    /// revoke rate, and schedule checkpoints. Promoting a primary restarts the clocks again, as
    /// etcd does once per term.
    pub fn promote(&mut self, now: Instant, extend: Duration) {
        self.primary = true;
        self.settling_until = Some(now + self.config.election_timeout);
        self.expiries.clear();
        self.checkpoints.clear();
        self.clears.clear();

        let ids: Vec<i64> = self.leases.keys().copied().collect();
        for &id in &ids {
            self.restart(id, now, extend);
        }

        let rate = self.config.revoke_rate();
        if self.leases.len() < rate || rate == 0 {
            return; // fewer leases than a second's revokes: no pile-up possible
        }
        self.spread(now, extend, rate);
    }

    /// etcd's pile-up spreading: walking the leases by expiry in windows of one second from the
    /// earliest, once more than three quarters of the revoke rate would expire in a window the
    /// rest are pushed later, at that target rate, so expiry never uses the whole revoke budget
    /// and keepalives of live leases still get through.
    fn spread(&mut self, now: Instant, extend: Duration, rate: usize) {
        let mut by_remaining: Vec<(Duration, i64)> = self
            .leases
            .iter()
            .filter_map(|(&id, l)| Some((l.expiry?.checked_duration_since(now)?, id)))
            .collect();
        by_remaining.sort_unstable();
        let Some(&(first, _)) = by_remaining.first() else {
            return;
        };

        let target_per_second = (3 * rate / 4).max(1);
        let mut base = first;
        let mut next_window = base + Duration::from_secs(1);
        let mut expires = 0usize;
        for (remaining, id) in by_remaining {
            if remaining > next_window {
                base = remaining;
                next_window = base + Duration::from_secs(1);
                expires = 1;
                continue;
            }
            expires += 1;
            if expires <= target_per_second {
                continue;
            }
            // Place this lease `expires / target` seconds after the window's start: minus how
            // far after the start it already is, since the refresh below adds its full TTL.
            let delay_nanos = 1e9 * (expires as f64 / target_per_second as f64)
                - (remaining - base).as_nanos() as f64;
            let delay = Duration::from_nanos(delay_nanos.max(0.0) as u64);
            next_window = base + delay;
            self.restart(id, now, delay + extend);
        }
    }

    /// This member stopped leading: no lease expires here until it is promoted again.
    pub fn demote(&mut self) {
        self.primary = false;
        self.settling_until = None;
        for lease in self.leases.values_mut() {
            lease.expiry = None;
        }
        self.expiries.clear();
        self.checkpoints.clear();
        self.clears.clear();
    }

    /// Up to `limit` expired leases to revoke, earliest first; nothing on a follower. Each is
    /// handed out once and then again every `expired_retry_interval` until its revoke is
    /// applied ([`Self::revoked`]): a proposal lost to a leader change or a full mailbox is
    /// retried, and a pending one isn't proposed twice a tick.
    pub fn expired(&mut self, now: Instant, limit: usize) -> Vec<i64> {
        if !self.primary {
            return Vec::new();
        }
        let mut out = Vec::new();
        while out.len() < limit {
            let Some((_, id)) = self.expiries.pop_due(now) else {
                break;
            };
            out.push(id);
        }
        // Re-filed after the loop, so a zero retry interval can't hand a lease out twice.
        let retry_at = now.checked_add(self.config.expired_retry_interval);
        for &id in &out {
            if let Some(at) = retry_at {
                self.expiries.set(id, at);
            }
        }
        out
    }

    /// Up to `limit` checkpoints `(lease id, remaining TTL in seconds)` to propose: first the
    /// clears asked for by renewals, then scheduled checkpoints now due, each with its lease's
    /// remaining TTL rounded up. A scheduled checkpoint is dropped for an expired lease and
    /// skipped while the remaining TTL is still the full TTL (nothing to save). Nothing on a
    /// follower or with checkpointing off.
    pub fn due_checkpoints(&mut self, now: Instant, limit: usize) -> Vec<(i64, i64)> {
        if !self.primary || !self.config.checkpointing {
            return Vec::new();
        }
        let mut out = Vec::new();
        let take = self.clears.len().min(limit);
        for id in self.clears.drain(..take) {
            if self.leases.contains_key(&id) {
                out.push((id, 0));
            }
        }

        let interval = self.config.checkpoint_interval;
        let mut rearm = Vec::new();
        while out.len() < limit {
            let Some((_, id)) = self.checkpoints.pop_due(now) else {
                break;
            };
            let Some(expiry) = self.leases.get(&id).and_then(|l| l.expiry) else {
                continue;
            };
            let Some(left) = expiry.checked_duration_since(now).filter(|d| !d.is_zero()) else {
                continue; // expired: its revoke is coming
            };
            let remaining = ceil_secs(left);
            // Re-armed now rather than only when the checkpoint applies (as etcd does), so a
            // proposal lost to a leader change is retried an interval later.
            if remaining > interval.as_secs() as i64 {
                rearm.push(id);
            }
            if remaining < self.leases[&id].ttl {
                out.push((id, remaining));
            }
        }
        if let Some(at) = now.checked_add(interval) {
            for id in rearm {
                self.checkpoints.set(id, at);
            }
        }
        out
    }

    /// One tick's work: expired leases and due checkpoints, within the configured limits.
    pub fn tick(&mut self, now: Instant) -> ProposeLeaseOps {
        ProposeLeaseOps {
            revokes: self.expired(now, self.config.revoke_per_tick),
            checkpoints: self.due_checkpoints(now, self.config.checkpoints_per_tick),
        }
    }

    /// Restarts a lease's clock at `now + extend` plus its clock TTL, and schedules its next
    /// checkpoint.
    fn restart(&mut self, id: i64, now: Instant, extend: Duration) {
        let Some(lease) = self.leases.get_mut(&id) else {
            return;
        };
        start_clock(&mut self.expiries, id, lease, now, extend);
        schedule_checkpoint(&self.config, &mut self.checkpoints, id, lease, now);
    }
}

/// Sets the lease's expiry to `now + extend` plus its clock TTL and files it in `expiries`
/// (a clock that would run past what `Instant` holds never expires).
fn start_clock(
    expiries: &mut DeadlineQueue,
    id: i64,
    lease: &mut Lease,
    now: Instant,
    extend: Duration,
) {
    lease.expiry = now
        .checked_add(extend)
        .and_then(|t| t.checked_add(secs(lease.clock_ttl())));
    match lease.expiry {
        Some(at) => expiries.set(id, at),
        None => expiries.remove(id),
    }
}

/// Schedules a checkpoint an interval from now if the lease's clock TTL is longer than the
/// interval (a shorter lease expires or is renewed before one would be due).
fn schedule_checkpoint(
    config: &LessorConfig,
    checkpoints: &mut DeadlineQueue,
    id: i64,
    lease: &Lease,
    now: Instant,
) {
    let interval = config.checkpoint_interval;
    if !config.checkpointing || lease.clock_ttl() <= interval.as_secs() as i64 {
        return;
    }
    if let Some(at) = now.checked_add(interval) {
        checkpoints.set(id, at);
    }
}

fn secs(s: i64) -> Duration {
    Duration::from_secs(s.max(0) as u64)
}

fn ceil_secs(d: Duration) -> i64 {
    (d.as_secs() + u64::from(d.subsec_nanos() > 0)) as i64
}

#[cfg(test)]
#[path = "lessor_tests.rs"]
mod tests;
