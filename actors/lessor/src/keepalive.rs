//! When a keepalive waits for the applied index: etcd's `LeaseRenew` on the leader, with and
//! without etcd 3.7's `FastLeaseKeepAlive` gate (etcd #20589).
//!
//! etcd 3.5 (#13932) has the leader wait, before every renewal, until its applied index has
//! reached its committed index (`waitAppliedIndex`), so a keepalive forwarded to a leader that
//! has committed a lease's grant but not yet applied it finds the lease instead of answering
//! "not found". Under load that wait delays every keepalive by the apply backlog, and leases
//! expire. With `FastLeaseKeepAlive` (etcd 3.7, on by default) the leader renews a lease its
//! lessor already knows at once and waits only for one it does not know: that one may still be
//! on its way through the apply loop.
//!
//! Safety is unchanged either way: only the primary (the raft leader's lessor) renews, a
//! follower answers `NotLeader` and the keepalive goes to the leader, and the TTL answered is
//! the lessor's.

/// Whether a keepalive must wait until this member has applied everything committed before the
/// lessor renews: only on the primary (`primary`), always when the gate is off (`fast` false),
/// else only for a lease the lessor does not know (`known` false).
pub fn keepalive_waits_for_apply(fast: bool, primary: bool, known: bool) -> bool {
    primary && !(fast && known)
}

#[cfg(test)]
mod tests {
    use super::keepalive_waits_for_apply;

    #[test]
    fn only_the_primary_waits_and_with_the_gate_only_for_unknown_leases() {
        struct Case {
            fast: bool,
            primary: bool,
            known: bool,
            waits: bool,
        }
        let cases = [
            // FastLeaseKeepAlive on (etcd 3.7's default): a known lease is renewed at once.
            Case {
                fast: true,
                primary: true,
                known: true,
                waits: false,
            },
            Case {
                fast: true,
                primary: true,
                known: false,
                waits: true,
            },
            // Off: every keepalive on the primary waits, as in etcd 3.5.
            Case {
                fast: false,
                primary: true,
                known: true,
                waits: true,
            },
            Case {
                fast: false,
                primary: true,
                known: false,
                waits: true,
            },
            // A follower never waits: it refuses, and the keepalive goes to the leader.
            Case {
                fast: true,
                primary: false,
                known: true,
                waits: false,
            },
            Case {
                fast: true,
                primary: false,
                known: false,
                waits: false,
            },
            Case {
                fast: false,
                primary: false,
                known: true,
                waits: false,
            },
            Case {
                fast: false,
                primary: false,
                known: false,
                waits: false,
            },
        ];
        for c in cases {
            assert_eq!(
                keepalive_waits_for_apply(c.fast, c.primary, c.known),
                c.waits,
                "fast {} primary {} known {}",
                c.fast,
                c.primary,
                c.known
            );
        }
    }
}
