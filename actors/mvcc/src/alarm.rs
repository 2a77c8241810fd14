//! The alarm store (etcd's `alarmStore`): which member raised which alarm. It lives beside the
//! key space because its changes are applied from the log like any write and must commit in the
//! same backend transaction as the consistent index; records sit in the `alarm` table keyed by
//! the encoded `AlarmMember`, as etcd keys its `alarm` bucket.
//!
//! While a NOSPACE alarm is raised the store refuses what would grow it (Put, and a Txn whose
//! branches put anything: etcd's capped applier) with `etcdserver: mvcc: database space
//! exceeded`; deletes and compactions still run, so an operator can make room and disarm.

use std::collections::BTreeSet;

use actcd_proto::etcdserverpb::alarm_request::AlarmAction;
use actcd_proto::etcdserverpb::{
    AlarmMember, AlarmRequest, AlarmResponse, AlarmType, TxnRequest, request_op,
};
use actcd_types::storage::{ReadTxn, Table, WriteTxn};
use prost::Message;

use crate::error::Error;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Alarms {
    /// (member id, alarm type number).
    raised: BTreeSet<(u64, i32)>,
}

fn member(m: u64, alarm: i32) -> AlarmMember {
    AlarmMember {
        member_id: m,
        alarm,
    }
}

impl Alarms {
    pub(crate) fn load<R: ReadTxn + ?Sized>(txn: &R) -> Result<Self, Error> {
        let mut raised = BTreeSet::new();
        txn.scan(Table::Alarm, &[], None, &mut |k, _| {
            if let Ok(m) = AlarmMember::decode(k) {
                raised.insert((m.member_id, m.alarm));
            }
            true
        })?;
        Ok(Self { raised })
    }

    pub(crate) fn nospace(&self) -> bool {
        self.raised
            .iter()
            .any(|&(_, a)| a == AlarmType::Nospace as i32)
    }

    /// Raised alarms of one type, or all of them for NONE.
    pub(crate) fn list(&self, alarm: i32) -> Vec<AlarmMember> {
        self.raised
            .iter()
            .filter(|&&(_, a)| alarm == AlarmType::None as i32 || a == alarm)
            .map(|&(m, a)| member(m, a))
            .collect()
    }

    /// etcd's rules: GET lists; ACTIVATE of NONE does nothing, otherwise raises (or finds) the
    /// alarm and returns it; DEACTIVATE returns the alarm it cleared, nothing if none was raised.
    pub(crate) fn apply<W: WriteTxn + ?Sized>(
        &mut self,
        txn: &mut W,
        req: &AlarmRequest,
    ) -> Result<AlarmResponse, Error> {
        let key = member(req.member_id, req.alarm).encode_to_vec();
        let alarms = match AlarmAction::try_from(req.action) {
            Ok(AlarmAction::Get) => self.list(req.alarm),
            Ok(AlarmAction::Activate) if req.alarm != AlarmType::None as i32 => {
                if self.raised.insert((req.member_id, req.alarm)) {
                    txn.put(Table::Alarm, &key, &[])?;
                }
                vec![member(req.member_id, req.alarm)]
            }
            Ok(AlarmAction::Deactivate) if self.raised.remove(&(req.member_id, req.alarm)) => {
                txn.delete(Table::Alarm, &key)?;
                vec![member(req.member_id, req.alarm)]
            }
            _ => vec![],
        };
        Ok(AlarmResponse {
            header: None,
            alarms,
        })
    }
}

/// Whether a txn would grow the store: any put in either branch (top level, as etcd counts).
pub(crate) fn txn_puts(t: &TxnRequest) -> bool {
    t.success
        .iter()
        .chain(&t.failure)
        .any(|op| matches!(op.request, Some(request_op::Request::RequestPut(_))))
}

#[cfg(test)]
mod tests {
    use actcd_types::storage::{KvEngine, MemEngine};

    use super::*;

    fn req(action: AlarmAction, m: u64, alarm: AlarmType) -> AlarmRequest {
        AlarmRequest {
            action: action as i32,
            member_id: m,
            alarm: alarm as i32,
        }
    }

    #[test]
    fn activate_deactivate_and_list_like_etcd() {
        struct Case {
            name: &'static str,
            req: AlarmRequest,
            want: Vec<(u64, AlarmType)>,
            want_nospace: bool,
        }
        use AlarmAction::*;
        use AlarmType::*;
        let cases = vec![
            Case {
                name: "get none",
                req: req(Get, 0, None),
                want: vec![],
                want_nospace: false,
            },
            Case {
                name: "activate NONE is ignored",
                req: req(Activate, 1, None),
                want: vec![],
                want_nospace: false,
            },
            Case {
                name: "activate",
                req: req(Activate, 1, Nospace),
                want: vec![(1, Nospace)],
                want_nospace: true,
            },
            Case {
                name: "activate again",
                req: req(Activate, 1, Nospace),
                want: vec![(1, Nospace)],
                want_nospace: true,
            },
            Case {
                name: "other member",
                req: req(Activate, 2, Corrupt),
                want: vec![(2, Corrupt)],
                want_nospace: true,
            },
            Case {
                name: "get all",
                req: req(Get, 0, None),
                want: vec![(1, Nospace), (2, Corrupt)],
                want_nospace: true,
            },
            Case {
                name: "get one type",
                req: req(Get, 0, Corrupt),
                want: vec![(2, Corrupt)],
                want_nospace: true,
            },
            Case {
                name: "deactivate absent",
                req: req(Deactivate, 3, Nospace),
                want: vec![],
                want_nospace: true,
            },
            Case {
                name: "deactivate",
                req: req(Deactivate, 1, Nospace),
                want: vec![(1, Nospace)],
                want_nospace: false,
            },
        ];
        let engine = MemEngine::new();
        let mut alarms = Alarms::default();
        for c in cases {
            let mut txn = engine.write().unwrap();
            let resp = alarms.apply(&mut *txn, &c.req).unwrap();
            txn.commit().unwrap();
            let got: Vec<_> = resp.alarms.iter().map(|m| (m.member_id, m.alarm)).collect();
            let want: Vec<_> = c.want.iter().map(|&(m, a)| (m, a as i32)).collect();
            assert_eq!(got, want, "{}", c.name);
            assert_eq!(alarms.nospace(), c.want_nospace, "{}", c.name);
            assert_eq!(
                Alarms::load(&*engine.read().unwrap()).unwrap(),
                alarms,
                "{}: persisted",
                c.name
            );
        }
    }
}
