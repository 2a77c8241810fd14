//! [`LessorConfig`]: the lessor's tunables, etcd 3.5's values by default.

use std::time::Duration;

/// How the lessor times leases. Every field has etcd 3.5's value by default, except
/// `checkpointing`, which etcd leaves off (`--experimental-enable-lease-checkpoint`) and actcd
/// turns on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LessorConfig {
    /// Propose remaining-TTL checkpoints, and clear a lease's checkpoint when it is renewed
    /// (etcd's `EnableLeaseCheckpoint`). Without them a leader change or a restart gives every
    /// lease its full TTL again.
    pub checkpointing: bool,
    /// How long after a lease's last checkpoint (or its grant) the next one is due, if its TTL
    /// is longer than this (etcd's `--experimental-lease-checkpoint-interval`, 5 minutes).
    pub checkpoint_interval: Duration,
    /// A lease handed out for revoke is handed out again after this long if its revoke has not
    /// been applied by then (etcd's `ExpiredLeasesRetryInterval`, 3 s).
    pub expired_retry_interval: Duration,
    /// Most leases handed out for revoke per tick: etcd's `leaseRevokeRate` (1000 per second)
    /// over its 500 ms expiry loop.
    pub revoke_per_tick: usize,
    /// Most checkpoints proposed per tick, one batch (etcd's `maxLeaseCheckpointBatchSize`).
    pub checkpoints_per_tick: usize,
    /// How often the daemon sends `LessorTick` (etcd's expiry loop runs every 500 ms). The
    /// lessor never waits on it; it turns `revoke_per_tick` into the per-second revoke rate
    /// that spreads pile-ups on promotion.
    pub tick_interval: Duration,
    /// What a new leader adds to every lease's expiry (etcd promotes with the election timeout,
    /// `--election-timeout`, 1000 ms by default), so a lease a client kept alive through the
    /// old leader doesn't expire before the client finds the new one.
    pub election_timeout: Duration,
    /// etcd 3.7's `FastLeaseKeepAlive` gate (etcd #20589, on by default): the primary renews a
    /// lease it knows at once; only a keepalive of a lease it does not know first waits until
    /// this member has applied everything committed (the lease may have been granted and not
    /// applied here yet). Off, every keepalive on the primary waits so, as in etcd 3.5 (#13932,
    /// `waitAppliedIndex`). See [`crate::keepalive_waits_for_apply`].
    pub fast_keepalive: bool,
    /// How long a keepalive waits for that (etcd's request timeout, 5 s + 2 election
    /// timeouts); past it the keepalive fails with `request timed out`.
    pub apply_wait_timeout: Duration,
}

impl Default for LessorConfig {
    fn default() -> Self {
        Self {
            checkpointing: true,
            checkpoint_interval: Duration::from_secs(5 * 60),
            expired_retry_interval: Duration::from_secs(3),
            revoke_per_tick: 500,
            checkpoints_per_tick: 1000,
            tick_interval: Duration::from_millis(500),
            election_timeout: Duration::from_millis(1000),
            fast_keepalive: true,
            apply_wait_timeout: Duration::from_secs(7),
        }
    }
}

impl LessorConfig {
    /// Leases revoked per second at most: `revoke_per_tick` over `tick_interval` (1000 by
    /// default, etcd's `leaseRevokeRate`).
    pub fn revoke_rate(&self) -> usize {
        let secs = self.tick_interval.as_secs_f64();
        if secs <= 0.0 {
            return self.revoke_per_tick;
        }
        (self.revoke_per_tick as f64 / secs).round() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revoke_rate_is_per_tick_over_interval() {
        struct Case {
            per_tick: usize,
            interval: Duration,
            want_rate: usize,
        }
        let cases = [
            Case {
                per_tick: 500,
                interval: Duration::from_millis(500),
                want_rate: 1000,
            },
            Case {
                per_tick: 5,
                interval: Duration::from_millis(500),
                want_rate: 10,
            },
            Case {
                per_tick: 100,
                interval: Duration::from_secs(1),
                want_rate: 100,
            },
            Case {
                per_tick: 7,
                interval: Duration::ZERO,
                want_rate: 7,
            },
        ];
        for c in cases {
            let cfg = LessorConfig {
                revoke_per_tick: c.per_tick,
                tick_interval: c.interval,
                ..LessorConfig::default()
            };
            assert_eq!(
                cfg.revoke_rate(),
                c.want_rate,
                "{} per {:?}",
                c.per_tick,
                c.interval
            );
        }
    }
}
