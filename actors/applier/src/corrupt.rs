//! Step three of the chain, before the capped step: etcd's corrupt applier. While a CORRUPT
//! alarm is raised (by any member, for any member: the alarm is cluster state), the requests
//! that read or change the key space or leases — Put, DeleteRange, Txn (read-only ones too),
//! Range, Compaction, LeaseGrant, LeaseRevoke — are refused with `etcdserver: corrupt cluster`
//! (gRPC `DataLoss`); alarm requests still run, so an operator can list and disarm, and so do
//! auth, membership and lease checkpoint entries, which etcd's corrupt applier leaves alone.
//! A lease the lessor revokes on expiry is refused too, as in etcd: nothing changes until the
//! alarm is disarmed.
//!
//! Ranges and read-only txns never enter the log; the front refuses those itself while the
//! flag the applier publishes (`CorruptFlag`) is set.

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_types::EtcdError;

/// Refuses `req` while `corrupt` is raised if etcd's corrupt applier refuses it.
pub fn check(corrupt: bool, req: &InternalRaftRequest) -> Result<(), EtcdError> {
    if corrupt && refused(req) {
        Err(EtcdError::Corrupt)
    } else {
        Ok(())
    }
}

/// The requests etcd's `applierV3Corrupt` overrides.
fn refused(req: &InternalRaftRequest) -> bool {
    req.range.is_some()
        || req.put.is_some()
        || req.delete_range.is_some()
        || req.txn.is_some()
        || req.compaction.is_some()
        || req.lease_grant.is_some()
        || req.lease_revoke.is_some()
}

#[cfg(test)]
mod tests {
    use actcd_proto::etcdserverpb::alarm_request::AlarmAction;
    use actcd_proto::etcdserverpb::{
        AlarmRequest, AlarmType, AuthUserAddRequest, CompactionRequest, DeleteRangeRequest,
        LeaseCheckpointRequest, LeaseGrantRequest, LeaseRevokeRequest, PutRequest, RangeRequest,
        TxnRequest,
    };

    use super::*;

    #[test]
    fn corrupt_refuses_what_etcds_corrupt_applier_refuses() {
        struct Case {
            name: &'static str,
            req: InternalRaftRequest,
            want_refused: bool,
        }
        let case = |name, req, want_refused| Case {
            name,
            req,
            want_refused,
        };
        let cases = vec![
            case(
                "put",
                InternalRaftRequest {
                    put: Some(PutRequest::default()),
                    ..Default::default()
                },
                true,
            ),
            case(
                "range",
                InternalRaftRequest {
                    range: Some(RangeRequest::default()),
                    ..Default::default()
                },
                true,
            ),
            case(
                "delete",
                InternalRaftRequest {
                    delete_range: Some(DeleteRangeRequest::default()),
                    ..Default::default()
                },
                true,
            ),
            case(
                "txn",
                InternalRaftRequest {
                    txn: Some(TxnRequest::default()),
                    ..Default::default()
                },
                true,
            ),
            case(
                "compaction",
                InternalRaftRequest {
                    compaction: Some(CompactionRequest::default()),
                    ..Default::default()
                },
                true,
            ),
            case(
                "lease grant",
                InternalRaftRequest {
                    lease_grant: Some(LeaseGrantRequest::default()),
                    ..Default::default()
                },
                true,
            ),
            case(
                "lease revoke",
                InternalRaftRequest {
                    lease_revoke: Some(LeaseRevokeRequest::default()),
                    ..Default::default()
                },
                true,
            ),
            case(
                "alarm disarm",
                InternalRaftRequest {
                    alarm: Some(AlarmRequest {
                        action: AlarmAction::Deactivate as i32,
                        member_id: 1,
                        alarm: AlarmType::Corrupt as i32,
                    }),
                    ..Default::default()
                },
                false,
            ),
            case(
                "lease checkpoint",
                InternalRaftRequest {
                    lease_checkpoint: Some(LeaseCheckpointRequest::default()),
                    ..Default::default()
                },
                false,
            ),
            case(
                "auth",
                InternalRaftRequest {
                    auth_user_add: Some(AuthUserAddRequest::default()),
                    ..Default::default()
                },
                false,
            ),
        ];
        for c in cases {
            assert_eq!(check(false, &c.req), Ok(()), "{}: no alarm", c.name);
            let want = if c.want_refused {
                Err(EtcdError::Corrupt)
            } else {
                Ok(())
            };
            assert_eq!(check(true, &c.req), want, "{}: CORRUPT", c.name);
        }
    }
}
