//! The alarm store (etcd's `alarmStore`): which member raised which alarm. Alarm entries are
//! applied here, by the applier, in log order; their writes go out as `Op`s that ride with the
//! next `ApplyBatch`, into the backend commit of a consistent index at or after the entry.
//! Records sit in the `alarm` table keyed by the encoded `AlarmMember`, as etcd keys its `alarm`
//! bucket, with an empty value.

use std::collections::BTreeSet;

use actcd_proto::etcdserverpb::alarm_request::AlarmAction;
use actcd_proto::etcdserverpb::{AlarmMember, AlarmRequest, AlarmResponse, AlarmType};
use actcd_types::EtcdError;
use actcd_types::storage::{Op, ReadTxn, Table};
use prost::Message;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Alarms {
    /// (member id, alarm type number).
    raised: BTreeSet<(u64, i32)>,
    /// Every alarm raised while this member ran (loaded or applied): the series of
    /// `etcd_debugging_server_alarms` ([`Self::samples`]), kept at 0 once disarmed.
    shown: BTreeSet<(u64, i32)>,
}

fn member(m: u64, alarm: i32) -> AlarmMember {
    AlarmMember {
        member_id: m,
        alarm,
    }
}

impl Alarms {
    /// The alarms a committed state holds (at start-up, and after a snapshot is installed).
    pub fn load<R: ReadTxn + ?Sized>(txn: &R) -> Result<Self, EtcdError> {
        let mut raised = BTreeSet::new();
        txn.scan(Table::Alarm, &[], None, &mut |k, _| {
            if let Ok(m) = AlarmMember::decode(k) {
                raised.insert((m.member_id, m.alarm));
            }
            true
        })
        .map_err(EtcdError::internal)?;
        Ok(Self {
            shown: raised.clone(),
            raised,
        })
    }

    /// These alarms (loaded from an installed snapshot) in place of `before`: the series shown
    /// so far stay.
    pub fn replacing(mut self, before: &Alarms) -> Self {
        self.shown.extend(before.shown.iter().copied());
        self
    }

    /// etcd 3.6's `etcd_debugging_server_alarms{alarm_type,server_id}`: 1 while the member
    /// named by `server_id` (hex, as etcd writes ids) has the alarm raised, 0 once disarmed.
    /// etcd adds 1 on every ACTIVATE applied (a repeated one shows 2 for one alarm) and shows
    /// nothing for the alarms it loads at start-up; here the value is whether it is raised.
    pub fn samples(&self) -> Vec<actcd_types::meter::Sample> {
        self.shown
            .iter()
            .map(|key @ &(m, a)| {
                let alarm_type = AlarmType::try_from(a)
                    .map_or_else(|_| a.to_string(), |t| t.as_str_name().to_owned());
                let mut s = actcd_types::meter::Sample::value(
                    "etcd_debugging_server_alarms",
                    f64::from(u8::from(self.raised.contains(key))),
                );
                s.labels = vec![("alarm_type", alarm_type), ("server_id", format!("{m:x}"))];
                s
            })
            .collect()
    }

    /// Whether a NOSPACE alarm is raised (the capped step then refuses growing requests).
    pub fn nospace(&self) -> bool {
        self.raised
            .iter()
            .any(|&(_, a)| a == AlarmType::Nospace as i32)
    }

    /// Whether a CORRUPT alarm is raised (the corrupt step then refuses key-space and lease
    /// requests, and the front refuses reads).
    pub fn corrupt(&self) -> bool {
        self.raised
            .iter()
            .any(|&(_, a)| a == AlarmType::Corrupt as i32)
    }

    /// Raised alarms of one type, or all of them for NONE.
    pub fn list(&self, alarm: i32) -> Vec<AlarmMember> {
        self.raised
            .iter()
            .filter(|&&(_, a)| alarm == AlarmType::None as i32 || a == alarm)
            .map(|&(m, a)| member(m, a))
            .collect()
    }

    /// etcd's rules: GET lists; ACTIVATE of NONE does nothing, otherwise raises (or finds) the
    /// alarm and returns it; DEACTIVATE returns the alarm it cleared, nothing if none was raised.
    /// The table writes are pushed onto `ops`; the answer has no header yet.
    pub fn apply(&mut self, req: &AlarmRequest, ops: &mut Vec<Op>) -> AlarmResponse {
        let key = || member(req.member_id, req.alarm).encode_to_vec();
        let alarms = match AlarmAction::try_from(req.action) {
            Ok(AlarmAction::Get) => self.list(req.alarm),
            Ok(AlarmAction::Activate) if req.alarm != AlarmType::None as i32 => {
                self.shown.insert((req.member_id, req.alarm));
                if self.raised.insert((req.member_id, req.alarm)) {
                    ops.push(Op::Put {
                        table: Table::Alarm,
                        key: key(),
                        value: Vec::new().into(),
                    });
                }
                vec![member(req.member_id, req.alarm)]
            }
            Ok(AlarmAction::Deactivate) if self.raised.remove(&(req.member_id, req.alarm)) => {
                ops.push(Op::Delete {
                    table: Table::Alarm,
                    key: key(),
                });
                vec![member(req.member_id, req.alarm)]
            }
            _ => vec![],
        };
        AlarmResponse {
            header: None,
            alarms,
        }
    }
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
            want_ops: usize,
        }
        use AlarmAction::*;
        use AlarmType::*;
        let cases = vec![
            Case {
                name: "get none",
                req: req(Get, 0, None),
                want: vec![],
                want_nospace: false,
                want_ops: 0,
            },
            Case {
                name: "activate NONE is ignored",
                req: req(Activate, 1, None),
                want: vec![],
                want_nospace: false,
                want_ops: 0,
            },
            Case {
                name: "activate",
                req: req(Activate, 1, Nospace),
                want: vec![(1, Nospace)],
                want_nospace: true,
                want_ops: 1,
            },
            Case {
                name: "activate again: found, not written again",
                req: req(Activate, 1, Nospace),
                want: vec![(1, Nospace)],
                want_nospace: true,
                want_ops: 0,
            },
            Case {
                name: "other member",
                req: req(Activate, 2, Corrupt),
                want: vec![(2, Corrupt)],
                want_nospace: true,
                want_ops: 1,
            },
            Case {
                name: "get all",
                req: req(Get, 0, None),
                want: vec![(1, Nospace), (2, Corrupt)],
                want_nospace: true,
                want_ops: 0,
            },
            Case {
                name: "get one type",
                req: req(Get, 0, Corrupt),
                want: vec![(2, Corrupt)],
                want_nospace: true,
                want_ops: 0,
            },
            Case {
                name: "deactivate absent",
                req: req(Deactivate, 3, Nospace),
                want: vec![],
                want_nospace: true,
                want_ops: 0,
            },
            Case {
                name: "deactivate",
                req: req(Deactivate, 1, Nospace),
                want: vec![(1, Nospace)],
                want_nospace: false,
                want_ops: 1,
            },
        ];
        let engine = MemEngine::new();
        let mut alarms = Alarms::default();
        for c in cases {
            let mut ops = Vec::new();
            let resp = alarms.apply(&c.req, &mut ops);
            assert_eq!(ops.len(), c.want_ops, "{}: ops", c.name);
            let mut txn = engine.write().unwrap();
            actcd_types::storage::write_ops(&mut *txn, &ops, Option::None).unwrap();
            txn.commit().unwrap();
            let got: Vec<_> = resp.alarms.iter().map(|m| (m.member_id, m.alarm)).collect();
            let want: Vec<_> = c.want.iter().map(|&(m, a)| (m, a as i32)).collect();
            assert_eq!(got, want, "{}", c.name);
            assert_eq!(alarms.nospace(), c.want_nospace, "{}", c.name);
            assert_eq!(
                Alarms::load(&*engine.read().unwrap())
                    .unwrap()
                    .list(AlarmType::None as i32),
                alarms.list(AlarmType::None as i32),
                "{}: the ops persist it",
                c.name
            );
        }
    }

    /// `etcd_debugging_server_alarms`: a series per alarm raised, by type and member id in
    /// hex, 1 while raised and 0 once disarmed; one loaded at start-up is shown too, and the
    /// series survive a snapshot's alarms replacing them.
    #[test]
    fn the_alarms_gauge_is_one_while_raised_and_zero_once_disarmed() {
        use actcd_types::meter::SampleValue;
        let values = |a: &Alarms| -> Vec<(String, String, f64)> {
            a.samples()
                .into_iter()
                .map(|s| {
                    assert_eq!(s.name, "etcd_debugging_server_alarms");
                    let [(k1, t), (k2, id)] = &s.labels[..] else {
                        panic!("two labels: {:?}", s.labels)
                    };
                    assert_eq!((*k1, *k2), ("alarm_type", "server_id"));
                    let SampleValue::Value(v) = s.value else {
                        panic!("a gauge")
                    };
                    (t.clone(), id.clone(), v)
                })
                .collect()
        };
        let mut alarms = Alarms::default();
        assert!(values(&alarms).is_empty(), "no series before an alarm");
        let mut ops = Vec::new();
        alarms.apply(
            &req(AlarmAction::Activate, 0xabc, AlarmType::Nospace),
            &mut ops,
        );
        alarms.apply(
            &req(AlarmAction::Activate, 0xabc, AlarmType::Nospace),
            &mut ops,
        );
        alarms.apply(&req(AlarmAction::Activate, 7, AlarmType::None), &mut ops);
        assert_eq!(
            values(&alarms),
            vec![("NOSPACE".into(), "abc".into(), 1.0)],
            "once, however often activated; NONE is no alarm"
        );
        alarms.apply(
            &req(AlarmAction::Deactivate, 0xabc, AlarmType::Nospace),
            &mut ops,
        );
        assert_eq!(values(&alarms), vec![("NOSPACE".into(), "abc".into(), 0.0)]);

        let engine = MemEngine::new();
        let mut txn = engine.write().unwrap();
        let corrupt = [req(AlarmAction::Activate, 2, AlarmType::Corrupt)];
        let mut ops = Vec::new();
        Alarms::default().apply(&corrupt[0], &mut ops);
        actcd_types::storage::write_ops(&mut *txn, &ops, Option::None).unwrap();
        txn.commit().unwrap();
        let loaded = Alarms::load(&*engine.read().unwrap()).unwrap();
        assert_eq!(values(&loaded), vec![("CORRUPT".into(), "2".into(), 1.0)]);
        assert_eq!(
            values(&loaded.replacing(&alarms)),
            vec![
                ("CORRUPT".into(), "2".into(), 1.0),
                ("NOSPACE".into(), "abc".into(), 0.0),
            ]
        );
    }
}
