//! The chain with recorder actors in the state owners' places.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use actcd_authz::{AuthView, UserEntry, UserPerms};
use actcd_proto::actcdpb::member_change::Kind;
use actcd_proto::actcdpb::{InternalRaftRequest, MemberAttributes, MemberChange, RequestHeader};
use actcd_proto::authpb::{Permission, Role, permission::Type};
use actcd_proto::etcdserverpb::alarm_request::AlarmAction;
use actcd_proto::etcdserverpb::{
    AlarmMember, AlarmRequest, AlarmType, AuthRoleRevokePermissionRequest, DeleteRangeRequest,
    LeaseCheckpoint, LeaseCheckpointRequest, LeaseGrantRequest, LeaseRevokeRequest, PutRequest,
    RequestOp, TxnRequest, request_op,
};
use actcd_types::MemberIdentity;
use actcd_types::msg::{
    ApplyAuth, ApplyBatch, ApplyConfChange, ApplyResponse, ApplyResult, AuthApplied, AuthReply,
    BatchApplied, CommittedEntry, ConfChangeKind, CurrentRevision, DeleteKeys, EntryKind,
    InstallSnapshot, LeaseAttachment, LeaseCheckpointed, LeaseGranted, LeaseKeys, LeaseRevoked,
    LeasedKeys, MemberRecord,
};
use actcd_types::storage::{Op, Table};
use prost::Message as _;
use tokio::sync::oneshot;

use super::*;
use crate::LessorLink;

/// A batch as the store heard it: its consistent index, its puts' keys, the other owner's ops.
type SeenBatch = (u64, Vec<Vec<u8>>, Vec<Op>);

/// Stands in for the store, the auth actor, the raft node, the lessor and the supervisor,
/// recording what each hears. Its store fails every batch when `fail` is set, reports every
/// leased put as attaching its key, and answers revision 42 (43 after deleting keys); its auth
/// actor answers every request with `after_auth` (a view where alice lost her grant) and one op.
#[derive(Clone)]
struct Recorder {
    fail: bool,
    after_auth: SharedView,
    batches: Arc<Mutex<Vec<SeenBatch>>>,
    /// Each batch's `leases`.
    batch_leases: Arc<Mutex<Vec<Vec<i64>>>>,
    /// Each `DeleteKeys`: its consistent index, keys and ops.
    deleted: Arc<Mutex<Vec<SeenBatch>>>,
    /// What the lessor heard, in order.
    lessor: Arc<Mutex<Vec<String>>>,
    auth: Arc<Mutex<usize>>,
    applied: Arc<Mutex<Vec<u64>>>,
    fatal: Arc<Mutex<Vec<Fatal>>>,
    conf: Arc<Mutex<Vec<(ConfChangeKind, u64)>>>,
}

impl Recorder {
    fn new(fail: bool) -> Self {
        Self {
            fail,
            after_auth: view_with_grant(false),
            batches: Default::default(),
            batch_leases: Default::default(),
            deleted: Default::default(),
            lessor: Default::default(),
            auth: Default::default(),
            applied: Default::default(),
            fatal: Default::default(),
            conf: Default::default(),
        }
    }
}

impl Actor for Recorder {
    type Context = Context<Self>;
}

impl Handler<ApplyBatch> for Recorder {
    type Result = Result<BatchApplied, EtcdError>;
    fn handle(&mut self, m: ApplyBatch, _: &mut Context<Self>) -> Self::Result {
        let keys = m
            .requests
            .iter()
            .map(|r| r.put.as_ref().map(|p| p.key.clone()).unwrap_or_default())
            .collect();
        let attachments = m
            .requests
            .iter()
            .filter_map(|r| r.put.as_ref())
            .filter(|p| p.lease != 0 && m.leases.contains(&p.lease))
            .map(|p| LeaseAttachment {
                key: p.key.clone(),
                old_lease: 0,
                new_lease: p.lease,
            })
            .collect();
        self.batches
            .lock()
            .unwrap()
            .push((m.consistent_index, keys, m.ops));
        self.batch_leases.lock().unwrap().push(m.leases);
        if self.fail {
            return Err(EtcdError::internal("mdb_txn_commit: File too large"));
        }
        for reply in m.replies.into_iter().flatten() {
            let _ = reply.send(Ok(ApplyResponse::Empty));
        }
        Ok(BatchApplied {
            results: Vec::new(),
            revision: 42,
            attachments,
        })
    }
}

impl Handler<DeleteKeys> for Recorder {
    type Result = Result<BatchApplied, EtcdError>;
    fn handle(&mut self, m: DeleteKeys, _: &mut Context<Self>) -> Self::Result {
        let attachments = m
            .keys
            .iter()
            .map(|k| LeaseAttachment {
                key: k.clone(),
                old_lease: 0,
                new_lease: 0,
            })
            .collect();
        self.deleted
            .lock()
            .unwrap()
            .push((m.consistent_index, m.keys, m.ops));
        Ok(BatchApplied {
            results: Vec::new(),
            revision: 43,
            attachments,
        })
    }
}

impl Handler<LeaseGranted> for Recorder {
    type Result = ();
    fn handle(&mut self, m: LeaseGranted, _: &mut Context<Self>) {
        let note = format!("granted {} ttl {}", m.id, m.ttl);
        self.lessor.lock().unwrap().push(note);
    }
}

impl Handler<LeaseRevoked> for Recorder {
    type Result = ();
    fn handle(&mut self, m: LeaseRevoked, _: &mut Context<Self>) {
        self.lessor
            .lock()
            .unwrap()
            .push(format!("revoked {}", m.id));
    }
}

impl Handler<LeaseCheckpointed> for Recorder {
    type Result = ();
    fn handle(&mut self, m: LeaseCheckpointed, _: &mut Context<Self>) {
        let note = format!("checkpointed {} at {}", m.id, m.remaining_ttl);
        self.lessor.lock().unwrap().push(note);
    }
}

impl Handler<ApplyAuth> for Recorder {
    type Result = Result<AuthApplied, EtcdError>;
    fn handle(&mut self, _: ApplyAuth, _: &mut Context<Self>) -> Self::Result {
        *self.auth.lock().unwrap() += 1;
        Ok(AuthApplied {
            result: Ok(AuthReply::RoleRevokePermission(Default::default())),
            view: self.after_auth.clone(),
            ops: vec![Op::Delete {
                table: Table::AuthRoles,
                key: b"app".to_vec(),
            }],
        })
    }
}

impl Handler<CurrentRevision> for Recorder {
    type Result = i64;
    fn handle(&mut self, _: CurrentRevision, _: &mut Context<Self>) -> i64 {
        42
    }
}

impl Handler<Applied> for Recorder {
    type Result = ();
    fn handle(&mut self, m: Applied, _: &mut Context<Self>) {
        self.applied.lock().unwrap().push(m.index);
    }
}

impl Handler<ApplyConfChange> for Recorder {
    type Result = ();
    fn handle(&mut self, m: ApplyConfChange, _: &mut Context<Self>) {
        self.conf.lock().unwrap().push((m.kind, m.node_id));
    }
}

impl Handler<Fatal> for Recorder {
    type Result = ();
    fn handle(&mut self, m: Fatal, _: &mut Context<Self>) {
        self.fatal.lock().unwrap().push(m);
    }
}

/// Auth on at revision 1; alice may write `k` when `granted`.
fn view_with_grant(granted: bool) -> SharedView {
    let role = Role {
        name: b"app".to_vec(),
        key_permission: vec![Permission {
            perm_type: Type::Readwrite as i32,
            key: b"k".to_vec(),
            range_end: Vec::new(),
        }],
    };
    let perms = if granted {
        UserPerms::build([&role])
    } else {
        UserPerms::default()
    };
    let mut users = HashMap::new();
    users.insert(
        b"alice".to_vec(),
        UserEntry {
            is_root: false,
            perms,
        },
    );
    AuthView::new(true, 1, users).shared()
}

fn entry(index: u64, req: InternalRaftRequest) -> CommittedEntry {
    CommittedEntry {
        index,
        term: 1,
        kind: EntryKind::Normal,
        data: req.encode_to_vec(),
    }
}

/// A put of `k` by `user` (as a client, or as the member itself).
fn put(id: u64, user: &str, internal: bool) -> InternalRaftRequest {
    InternalRaftRequest {
        header: Some(RequestHeader {
            id,
            username: user.into(),
            auth_revision: 2,
            internal,
        }),
        put: Some(PutRequest {
            key: b"k".to_vec(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn revoke(id: u64) -> InternalRaftRequest {
    InternalRaftRequest {
        header: Some(RequestHeader {
            id,
            username: "root".into(),
            auth_revision: 1,
            ..Default::default()
        }),
        auth_role_revoke_permission: Some(AuthRoleRevokePermissionRequest {
            role: "app".into(),
            key: b"k".to_vec(),
            range_end: Vec::new(),
        }),
        ..Default::default()
    }
}

fn start(seen: &Recorder, view: SharedView) -> Addr<ApplierActor> {
    let fake = seen.clone().start();
    ApplierActor::new(
        Applier::new(0),
        ApplierPeers {
            chain: ChainPeers {
                store: fake.clone().recipient(),
                delete_keys: fake.clone().recipient(),
                revision: fake.clone().recipient(),
                auth: fake.clone().recipient(),
                conf: None,
                lessor: Some(LessorLink {
                    granted: fake.clone().recipient(),
                    revoked: fake.clone().recipient(),
                    checkpointed: fake.clone().recipient(),
                }),
                identity: MemberIdentity::default(),
                v2: None,
            },
            raft: fake.clone().recipient(),
            install: None,
            leased_keys: None,
            reload_auth: None,
            reload_v2: None,
            conf_sync: None,
            fatal: fake.recipient(),
        },
        view,
    )
    .start()
}

async fn register(applier: &Addr<ApplierActor>, id: u64) -> oneshot::Receiver<ApplyResult> {
    let (tx, rx) = oneshot::channel();
    applier.send(Register { id, reply: tx }).await.unwrap();
    rx
}

#[actix_rt::test]
async fn a_grant_revoked_earlier_in_the_ready_refuses_the_next_write() {
    let seen = Recorder::new(false);
    let applier = start(&seen, view_with_grant(true));
    let before = register(&applier, 1).await;
    let revoked = register(&applier, 2).await;
    let after = register(&applier, 3).await;
    let internal = register(&applier, 4).await;
    applier
        .send(Apply {
            entries: vec![
                entry(1, put(1, "alice", false)),
                entry(2, revoke(2)),
                entry(3, put(3, "alice", false)),
                entry(4, put(4, "", true)),
            ],
        })
        .await
        .unwrap();
    assert_eq!(before.await.unwrap(), Ok(ApplyResponse::Empty));
    match revoked.await.unwrap() {
        Ok(ApplyResponse::Auth(AuthReply::RoleRevokePermission(r))) => {
            assert_eq!(r.header.unwrap().revision, 42, "the store's revision");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(after.await.unwrap(), Err(EtcdError::PermissionDenied));
    assert_eq!(
        internal.await.unwrap(),
        Ok(ApplyResponse::Empty),
        "a member's own request is never judged"
    );
    assert_eq!(*seen.auth.lock().unwrap(), 1);
    let batches = seen.batches.lock().unwrap().clone();
    let want_op = vec![Op::Delete {
        table: Table::AuthRoles,
        key: b"app".to_vec(),
    }];
    assert_eq!(
        batches,
        vec![
            (1, vec![b"k".to_vec()], Vec::new()),
            // The refused put never reaches the store; the auth writes ride with the next batch.
            (4, vec![b"k".to_vec()], want_op),
        ]
    );
    assert_eq!(*seen.applied.lock().unwrap(), vec![4]);
}

#[actix_rt::test]
async fn a_ready_ending_with_an_auth_entry_sends_its_writes_and_index() {
    let seen = Recorder::new(false);
    let applier = start(&seen, view_with_grant(true));
    applier
        .send(Apply {
            entries: vec![entry(1, revoke(1))],
        })
        .await
        .unwrap();
    applier
        .send(Apply {
            entries: vec![entry(2, put(2, "alice", false))],
        })
        .await
        .unwrap();
    let batches = seen.batches.lock().unwrap().clone();
    assert_eq!(batches.len(), 2, "{batches:?}");
    assert_eq!(batches[0].0, 1);
    assert!(batches[0].1.is_empty());
    assert_eq!(batches[0].2.len(), 1);
    assert_eq!(
        batches[1],
        (2, Vec::new(), Vec::new()),
        "the next Ready is judged by the view after the change"
    );
}

#[actix_rt::test]
async fn a_failed_batch_is_reported_once_and_nothing_more_is_applied() {
    let seen = Recorder::new(true);
    let applier = start(&seen, AuthView::disabled().shared());
    applier
        .send(Apply {
            entries: vec![entry(1, put(1, "", false))],
        })
        .await
        .unwrap();
    let later = applier
        .send(Apply {
            entries: vec![entry(2, put(2, "", false))],
        })
        .await;
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert!(later.is_err(), "the applier stopped itself");
    assert_eq!(seen.batches.lock().unwrap().len(), 1);
    assert!(
        seen.applied.lock().unwrap().is_empty(),
        "index 1 is not applied"
    );
    let fatal = seen.fatal.lock().unwrap().clone();
    assert_eq!(fatal.len(), 1);
    assert_eq!(fatal[0].actor, "applier");
    assert!(fatal[0].error.contains("File too large"), "{fatal:?}");
}

fn alarm(id: u64, action: AlarmAction) -> InternalRaftRequest {
    InternalRaftRequest {
        header: Some(RequestHeader {
            id,
            ..Default::default()
        }),
        alarm: Some(AlarmRequest {
            action: action as i32,
            member_id: 9,
            alarm: AlarmType::Nospace as i32,
        }),
        ..Default::default()
    }
}

fn nospace_key() -> Vec<u8> {
    AlarmMember {
        member_id: 9,
        alarm: AlarmType::Nospace as i32,
    }
    .encode_to_vec()
}

#[actix_rt::test]
async fn a_nospace_alarm_caps_growing_writes_from_the_next_entry_until_disarmed() {
    #[derive(Debug, PartialEq)]
    enum Want {
        Stored,
        Alarms(usize),
        NoSpace,
    }
    struct Case {
        name: &'static str,
        req: InternalRaftRequest,
        want: Want,
    }
    let plain = |id, f: fn(&mut InternalRaftRequest)| {
        let mut r = InternalRaftRequest {
            header: Some(RequestHeader {
                id,
                ..Default::default()
            }),
            ..Default::default()
        };
        f(&mut r);
        r
    };
    let cases = vec![
        Case {
            name: "a put before the alarm",
            req: put(1, "", false),
            want: Want::Stored,
        },
        Case {
            name: "raise NOSPACE",
            req: alarm(2, AlarmAction::Activate),
            want: Want::Alarms(1),
        },
        Case {
            name: "a put is capped",
            req: put(3, "", false),
            want: Want::NoSpace,
        },
        Case {
            name: "a lease grant is capped",
            req: plain(4, |r| {
                r.lease_grant = Some(LeaseGrantRequest { ttl: 5, id: 1 })
            }),
            want: Want::NoSpace,
        },
        Case {
            name: "a delete makes room",
            req: plain(5, |r| {
                r.delete_range = Some(DeleteRangeRequest {
                    key: b"k".to_vec(),
                    ..Default::default()
                })
            }),
            want: Want::Stored,
        },
        Case {
            name: "list",
            req: alarm(6, AlarmAction::Get),
            want: Want::Alarms(1),
        },
        Case {
            name: "disarm",
            req: alarm(7, AlarmAction::Deactivate),
            want: Want::Alarms(1),
        },
        Case {
            name: "a put after the disarm",
            req: put(8, "", false),
            want: Want::Stored,
        },
    ];
    let seen = Recorder::new(false);
    let applier = start(&seen, AuthView::disabled().shared());
    let mut waiting = Vec::new();
    let mut entries = Vec::new();
    for (i, c) in cases.into_iter().enumerate() {
        let index = i as u64 + 1;
        waiting.push((c.name, c.want, register(&applier, index).await));
        entries.push(entry(index, c.req));
    }
    applier.send(Apply { entries }).await.unwrap();
    for (name, want, rx) in waiting {
        let got = match rx.await.unwrap() {
            Ok(ApplyResponse::Empty) => Want::Stored,
            Ok(ApplyResponse::Alarm(a)) => {
                let h = a.header.unwrap();
                assert_eq!((h.revision, h.raft_term), (42, 1), "{name}: header");
                Want::Alarms(a.alarms.len())
            }
            Err(EtcdError::NoSpace) => Want::NoSpace,
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(got, want, "{name}");
    }
    let raised = Op::Put {
        table: Table::Alarm,
        key: nospace_key(),
        value: Vec::new().into(),
    };
    let cleared = Op::Delete {
        table: Table::Alarm,
        key: nospace_key(),
    };
    assert_eq!(
        seen.batches.lock().unwrap().clone(),
        vec![
            // Each alarm entry flushes the run before it (its answer carries that revision).
            (1, vec![b"k".to_vec()], Vec::new()),
            // The alarm's write rides with the next batch; capped requests never reach it.
            (5, vec![Vec::new()], vec![raised]),
            (8, vec![b"k".to_vec()], vec![cleared]),
        ]
    );
    assert!(applier.send(GetAlarms).await.unwrap().is_empty());
}

#[actix_rt::test]
async fn a_corrupt_alarm_refuses_the_key_space_from_the_next_entry_and_is_published() {
    let corrupt = |id, action: AlarmAction| InternalRaftRequest {
        header: Some(RequestHeader {
            id,
            internal: true,
            ..Default::default()
        }),
        alarm: Some(AlarmRequest {
            action: action as i32,
            member_id: 9,
            alarm: AlarmType::Corrupt as i32,
        }),
        ..Default::default()
    };
    let seen = Recorder::new(false);
    let (tx, flag) = tokio::sync::watch::channel(false);
    let fake = seen.clone().start();
    let applier = ApplierActor::new(
        Applier::new(0),
        ApplierPeers {
            chain: ChainPeers {
                store: fake.clone().recipient(),
                delete_keys: fake.clone().recipient(),
                revision: fake.clone().recipient(),
                auth: fake.clone().recipient(),
                conf: None,
                lessor: None,
                identity: MemberIdentity::default(),
                v2: None,
            },
            raft: fake.clone().recipient(),
            install: None,
            leased_keys: None,
            reload_auth: None,
            reload_v2: None,
            conf_sync: None,
            fatal: fake.recipient(),
        },
        AuthView::disabled().shared(),
    )
    .publishing_corrupt(tx)
    .start();
    // Raised, then a put in the same Ready: refused, and never reaches the store.
    let raised = register(&applier, 1).await;
    let refused = register(&applier, 2).await;
    let entries = vec![
        entry(1, corrupt(1, AlarmAction::Activate)),
        entry(2, put(2, "", false)),
    ];
    applier.send(Apply { entries }).await.unwrap();
    assert!(matches!(raised.await.unwrap(), Ok(ApplyResponse::Alarm(_))));
    assert_eq!(refused.await.unwrap(), Err(EtcdError::Corrupt));
    assert!(*flag.borrow(), "the front hears of it");
    // Disarmed: writes go through again, and the flag drops.
    let disarmed = register(&applier, 3).await;
    let stored = register(&applier, 4).await;
    let entries = vec![
        entry(3, corrupt(3, AlarmAction::Deactivate)),
        entry(4, put(4, "", false)),
    ];
    applier.send(Apply { entries }).await.unwrap();
    assert!(matches!(
        disarmed.await.unwrap(),
        Ok(ApplyResponse::Alarm(_))
    ));
    assert_eq!(stored.await.unwrap(), Ok(ApplyResponse::Empty));
    assert!(!*flag.borrow());
    // (The alarm's own table writes ride with the batch covering the refused put.)
    let puts: Vec<u64> = seen
        .batches
        .lock()
        .unwrap()
        .iter()
        .filter(|b| b.1.contains(&b"k".to_vec()))
        .map(|b| b.0)
        .collect();
    assert_eq!(
        puts,
        vec![4],
        "only the put after the disarm reached the store"
    );
}

#[actix_rt::test]
async fn alarms_are_listed_as_applied_and_a_ready_ending_with_one_commits_its_write() {
    let seen = Recorder::new(false);
    let applier = start(&seen, AuthView::disabled().shared());
    applier
        .send(Apply {
            entries: vec![entry(1, alarm(0, AlarmAction::Activate))],
        })
        .await
        .unwrap();
    assert_eq!(
        applier.send(GetAlarms).await.unwrap(),
        vec![AlarmMember {
            member_id: 9,
            alarm: AlarmType::Nospace as i32,
        }]
    );
    let batches = seen.batches.lock().unwrap().clone();
    assert_eq!(batches.len(), 1, "{batches:?}");
    assert_eq!((batches[0].0, batches[0].1.len()), (1, 0));
    assert_eq!(batches[0].2.len(), 1, "the alarm's write with index 1");
}

fn member_change(id: u64, kind: Kind, member_id: u64, url: &str) -> InternalRaftRequest {
    InternalRaftRequest {
        header: Some(RequestHeader {
            id,
            ..Default::default()
        }),
        member_change: Some(MemberChange {
            kind: kind as i32,
            member_id,
            peer_urls: vec![url.to_string()],
        }),
        ..Default::default()
    }
}

#[actix_rt::test]
async fn membership_is_applied_in_log_order_told_to_raft_and_written_with_the_next_batch() {
    let seen = Recorder::new(false);
    let fake = seen.clone().start();
    let mut members = Membership::default();
    members.bootstrap(
        vec![MemberRecord {
            id: 1,
            peer_urls: vec!["http://a:2380".into()],
            ..Default::default()
        }],
        &mut Vec::new(),
    );
    let applier = ApplierActor::new(
        Applier::new(0),
        ApplierPeers {
            chain: ChainPeers {
                store: fake.clone().recipient(),
                delete_keys: fake.clone().recipient(),
                revision: fake.clone().recipient(),
                auth: fake.clone().recipient(),
                conf: Some(fake.clone().recipient()),
                lessor: None,
                identity: MemberIdentity::default(),
                v2: None,
            },
            raft: fake.clone().recipient(),
            install: None,
            leased_keys: None,
            reload_auth: None,
            reload_v2: None,
            conf_sync: None,
            fatal: fake.recipient(),
        },
        AuthView::disabled().shared(),
    )
    .with_members(members)
    .start();
    let added = register(&applier, 2).await;
    let refused = register(&applier, 3).await;
    let attrs = InternalRaftRequest {
        member_attr_set: Some(MemberAttributes {
            member_id: 2,
            name: "b".into(),
            client_urls: vec!["http://b:2379".into()],
        }),
        ..Default::default()
    };
    applier
        .send(Apply {
            entries: vec![
                entry(1, put(1, "", true)),
                entry(2, member_change(2, Kind::Add, 2, "http://b:2380")),
                entry(3, member_change(3, Kind::Add, 4, "http://a:2380")),
                entry(4, attrs),
                entry(5, put(5, "", true)),
            ],
        })
        .await
        .unwrap();
    match added.await.unwrap() {
        Ok(ApplyResponse::Members { member, members }) => {
            assert_eq!(member.map(|m| m.id), Some(2));
            assert_eq!(members.len(), 2);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(refused.await.unwrap(), Err(EtcdError::PeerUrlExist));
    assert_eq!(
        *seen.conf.lock().unwrap(),
        [(ConfChangeKind::AddVoter, 2)],
        "only the applied change reaches raft"
    );
    let listed = applier.send(GetMembers).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[1].name, "b");
    let batches = seen.batches.lock().unwrap().clone();
    let shape: Vec<_> = batches
        .iter()
        .map(|(index, keys, ops)| (*index, keys.len(), ops.len()))
        .collect();
    // Each membership entry flushes the run before it (so raft hears a change after what
    // precedes it is applied); each write rides with the next batch, covering its entry.
    assert_eq!(shape, [(1, 1, 0), (2, 0, 1), (5, 1, 1)]);
}

// ------------------------------------------------------------------ leases

fn client(id: u64) -> Option<RequestHeader> {
    Some(RequestHeader {
        id,
        ..Default::default()
    })
}

fn grant(id: u64, lease: i64, ttl: i64) -> InternalRaftRequest {
    InternalRaftRequest {
        header: client(id),
        lease_grant: Some(LeaseGrantRequest { id: lease, ttl }),
        ..Default::default()
    }
}

fn leased_put(id: u64, key: &str, lease: i64) -> InternalRaftRequest {
    InternalRaftRequest {
        header: client(id),
        put: Some(PutRequest {
            key: key.into(),
            lease,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn lease_revoke(id: u64, lease: i64) -> InternalRaftRequest {
    InternalRaftRequest {
        header: client(id),
        lease_revoke: Some(LeaseRevokeRequest { id: lease }),
        ..Default::default()
    }
}

/// The ids of the leases `ops` write or delete, in order (`-id` for a delete).
fn lease_ops(ops: &[Op]) -> Vec<i64> {
    ops.iter()
        .filter_map(|op| match op {
            Op::Put {
                table: Table::Lease,
                key,
                ..
            } => Some(i64::from_be_bytes(key.as_slice().try_into().unwrap())),
            Op::Delete {
                table: Table::Lease,
                key,
            } => Some(-i64::from_be_bytes(key.as_slice().try_into().unwrap())),
            _ => None,
        })
        .collect()
}

#[actix_rt::test]
async fn leases_are_granted_attached_and_revoked_in_log_order() {
    let seen = Recorder::new(false);
    let applier = start(&seen, AuthView::disabled().shared());
    let granted = register(&applier, 1).await;
    let exists = register(&applier, 3).await;
    let revoked = register(&applier, 6).await;
    let gone = register(&applier, 7).await;
    let entries = vec![
        // A put naming lease 5 before it is granted: the store must not see it exist.
        entry(1, leased_put(0, "early", 5)),
        entry(2, grant(1, 5, 1)),
        entry(3, grant(3, 5, 10)),
        entry(4, leased_put(0, "a", 5)),
        entry(
            5,
            InternalRaftRequest {
                txn: Some(TxnRequest {
                    success: vec![RequestOp {
                        request: Some(request_op::Request::RequestPut(PutRequest {
                            key: b"b".to_vec(),
                            lease: 9,
                            ..Default::default()
                        })),
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            },
        ),
        entry(6, lease_revoke(6, 5)),
        entry(7, lease_revoke(7, 5)),
        entry(
            8,
            InternalRaftRequest {
                lease_checkpoint: Some(LeaseCheckpointRequest {
                    checkpoints: vec![LeaseCheckpoint {
                        id: 5,
                        remaining_ttl: 3,
                    }],
                }),
                ..Default::default()
            },
        ),
    ];
    applier.send(Apply { entries }).await.unwrap();

    match granted.await.unwrap() {
        Ok(ApplyResponse::LeaseGrant(r)) => {
            assert_eq!((r.id, r.ttl), (5, 1));
            assert_eq!(r.header.unwrap().revision, 42);
        }
        other => panic!("grant: {other:?}"),
    }
    assert_eq!(exists.await.unwrap(), Err(EtcdError::LeaseExists));
    match revoked.await.unwrap() {
        Ok(ApplyResponse::LeaseRevoke(r)) => assert_eq!(r.header.unwrap().revision, 43),
        other => panic!("revoke: {other:?}"),
    }
    assert_eq!(gone.await.unwrap(), Err(EtcdError::LeaseNotFound));

    let batches = seen.batches.lock().unwrap().clone();
    let leases = seen.batch_leases.lock().unwrap().clone();
    // The grant ends the run naming its lease; the revoke ends the next.
    assert_eq!(batches[0].1, vec![b"early".to_vec()]);
    assert_eq!(leases[0], Vec::<i64>::new());
    assert_eq!(lease_ops(&batches[0].2), Vec::<i64>::new());
    assert_eq!(batches[1].1, vec![b"a".to_vec(), Vec::new()]);
    assert_eq!(leases[1], vec![5], "lease 9 does not exist");
    assert_eq!(lease_ops(&batches[1].2), vec![5]);
    // The revoke deletes the keys attached at its point of the log, with its table write,
    // committed with its own index.
    let deleted = seen.deleted.lock().unwrap().clone();
    assert_eq!(deleted.len(), 1);
    assert_eq!(
        (deleted[0].0, deleted[0].1.clone()),
        (6, vec![b"a".to_vec()])
    );
    assert_eq!(lease_ops(&deleted[0].2), vec![-5]);
    // The checkpoint of a revoked lease writes nothing; the last batch carries the index.
    assert_eq!(batches.len(), 3);
    assert_eq!(batches[2].0, 8);
    assert_eq!(lease_ops(&batches[2].2), Vec::<i64>::new());
    assert_eq!(
        seen.lessor.lock().unwrap().clone(),
        vec!["granted 5 ttl 1".to_string(), "revoked 5".to_string()]
    );
    assert_eq!(
        applier.send(LeaseKeys { id: 5 }).await.unwrap(),
        Err(EtcdError::LeaseNotFound)
    );
}

#[actix_rt::test]
async fn attachments_follow_the_batches_and_a_keyless_revoke_deletes_nothing() {
    let seen = Recorder::new(false);
    let applier = start(&seen, AuthView::disabled().shared());
    let entries = vec![
        entry(1, grant(0, 5, 10)),
        entry(2, grant(0, 6, 10)),
        entry(3, leased_put(0, "b", 5)),
        entry(4, leased_put(0, "a", 5)),
        entry(
            5,
            InternalRaftRequest {
                lease_checkpoint: Some(LeaseCheckpointRequest {
                    checkpoints: vec![LeaseCheckpoint {
                        id: 5,
                        remaining_ttl: 3,
                    }],
                }),
                ..Default::default()
            },
        ),
    ];
    applier.send(Apply { entries }).await.unwrap();
    assert_eq!(
        applier.send(LeaseKeys { id: 5 }).await.unwrap(),
        Ok(vec![b"a".to_vec(), b"b".to_vec()])
    );
    assert_eq!(applier.send(LeaseKeys { id: 6 }).await.unwrap(), Ok(vec![]));
    // Grants without waiters whose lease no put named did not end the run.
    assert_eq!(seen.batches.lock().unwrap().len(), 1);
    let revoked = register(&applier, 7).await;
    applier
        .send(Apply {
            entries: vec![
                entry(6, leased_put(0, "c", 0)),
                entry(7, lease_revoke(7, 6)),
            ],
        })
        .await
        .unwrap();
    let batches = seen.batches.lock().unwrap().clone();
    // The run before the revoke is sent, then the empty lease's delete rides with the last.
    assert_eq!(batches.len(), 3);
    assert_eq!(lease_ops(&batches[2].2), vec![-6]);
    assert_eq!(seen.deleted.lock().unwrap().len(), 0, "no key to delete");
    match revoked.await.unwrap() {
        Ok(ApplyResponse::LeaseRevoke(r)) => assert_eq!(r.header.unwrap().revision, 42),
        other => panic!("revoke: {other:?}"),
    }
    assert_eq!(
        seen.lessor.lock().unwrap().clone(),
        vec![
            "granted 5 ttl 10".to_string(),
            "granted 6 ttl 10".to_string(),
            "checkpointed 5 at 3".to_string(),
            "revoked 6".to_string()
        ]
    );
}

impl Handler<InstallSnapshot> for Recorder {
    type Result = Result<u64, EtcdError>;
    fn handle(&mut self, m: InstallSnapshot, _: &mut Context<Self>) -> Self::Result {
        Ok(m.index)
    }
}

/// The installed store's leased keys.
impl Handler<LeasedKeys> for Recorder {
    type Result = Result<Vec<(Vec<u8>, i64)>, EtcdError>;
    fn handle(&mut self, _: LeasedKeys, _: &mut Context<Self>) -> Self::Result {
        Ok(vec![(b"k".to_vec(), 3), (b"x".to_vec(), 1)])
    }
}

#[actix_rt::test]
async fn a_snapshot_brings_its_leases_and_the_lessor_hears_which_went_and_came() {
    use actcd_types::storage::{KvEngine, MemEngine, write_ops};
    // The snapshot's committed state: leases 2 and 3.
    let engine = Arc::new(MemEngine::new());
    let mut ops = Vec::new();
    let mut recorded = crate::Leases::default();
    recorded.grant(2, 7, &mut ops).unwrap();
    recorded.grant(3, 9, &mut ops).unwrap();
    let mut txn = engine.write().unwrap();
    write_ops(&mut *txn, &ops, None).unwrap();
    txn.commit().unwrap();

    let seen = Recorder::new(false);
    let fake = seen.clone().start();
    let applier = ApplierActor::new(
        Applier::new(0),
        ApplierPeers {
            chain: ChainPeers {
                store: fake.clone().recipient(),
                delete_keys: fake.clone().recipient(),
                revision: fake.clone().recipient(),
                auth: fake.clone().recipient(),
                conf: None,
                lessor: Some(LessorLink {
                    granted: fake.clone().recipient(),
                    revoked: fake.clone().recipient(),
                    checkpointed: fake.clone().recipient(),
                }),
                identity: MemberIdentity::default(),
                v2: None,
            },
            raft: fake.clone().recipient(),
            install: Some(fake.clone().recipient()),
            leased_keys: Some(fake.clone().recipient()),
            reload_auth: None,
            reload_v2: None,
            conf_sync: None,
            fatal: fake.recipient(),
        },
        AuthView::disabled().shared(),
    )
    .with_alarms(Alarms::default(), engine)
    .start();
    let entries = vec![entry(1, grant(0, 1, 5)), entry(2, grant(0, 2, 5))];
    applier.send(Apply { entries }).await.unwrap();
    let dir = std::env::temp_dir();
    let path = actcd_types::snapshot_blob::SnapshotBlob::incoming_path(&dir);
    let data = actcd_types::snapshot_blob::StoreCopy::Blob(
        actcd_types::snapshot_blob::SnapshotBlob::write(path, b"").unwrap(),
    );
    let installed = applier
        .send(InstallSnapshot { index: 100, data })
        .await
        .unwrap();
    assert_eq!(installed, Ok(100));
    assert_eq!(
        seen.lessor.lock().unwrap().clone(),
        vec![
            "granted 1 ttl 5".to_string(),
            "granted 2 ttl 5".to_string(),
            "revoked 1".to_string(),
            "granted 2 ttl 7".to_string(),
            "granted 3 ttl 9".to_string(),
        ]
    );
    // Attachments come from the store's leased keys (x names a lease the snapshot lacks).
    assert_eq!(
        applier.send(LeaseKeys { id: 3 }).await.unwrap(),
        Ok(vec![b"k".to_vec()])
    );
    assert_eq!(
        applier.send(LeaseKeys { id: 1 }).await.unwrap(),
        Err(EtcdError::LeaseNotFound)
    );
}
