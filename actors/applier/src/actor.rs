use actcd_types::EtcdError;
use actcd_types::msg::{Applied, Apply, ApplyBatch, Cancel, Fatal, InstallSnapshot, Register};
use actix::prelude::*;

use crate::applier::Applier;

#[derive(Clone)]
pub struct ApplierPeers {
    pub store: Recipient<ApplyBatch>,
    pub raft: Recipient<Applied>,
    /// The store, for snapshots from the leader.
    pub install: Option<Recipient<InstallSnapshot>>,
    /// The daemon's supervisor, told once when a batch cannot be applied; the applier then
    /// stops itself.
    pub fatal: Recipient<Fatal>,
}

pub struct ApplierActor {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: std::sync::Arc<actcd_types::meter::Meter>,
    applier: Applier,
    peers: ApplierPeers,
}

impl ApplierActor {
    pub fn new(applier: Applier, peers: ApplierPeers) -> Self {
        Self {
            meter: actcd_types::meter::Meter::new(),
            applier,
            peers,
        }
    }
}

impl Actor for ApplierActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(65536);
    }
}

impl Handler<Apply> for ApplierActor {
    type Result = AtomicResponse<Self, ()>;

    /// Writes one Ready's committed entries through the store; the next Apply waits for it.
    fn handle(&mut self, msg: Apply, _: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("Apply");
        let Some(prepared) = self.applier.prepare(msg.entries) else {
            self.peers.raft.do_send(Applied {
                index: self.applier.applied(),
            });
            return AtomicResponse::new(Box::pin(fut::ready(())));
        };
        let send = self.peers.store.send(prepared.batch);
        let last_index = prepared.last_index;
        AtomicResponse::new(Box::pin(send.into_actor(self).map(
            move |res, act, ctx| match res {
                Ok(Ok(_)) => {
                    act.applier.complete(last_index);
                    act.peers.raft.do_send(Applied { index: last_index });
                }
                Ok(Err(e)) => {
                    // Memory and disk may disagree now: apply nothing more, and have the
                    // supervisor stop the member (the WAL replays the batch on restart).
                    act.peers.fatal.do_send(Fatal {
                        actor: "applier",
                        error: format!("applying entries up to index {last_index} failed: {e}"),
                    });
                    ctx.stop();
                }
                Err(_) => tracing::warn!("store is gone; server stopping"),
            },
        )))
    }
}

/// A snapshot from the leader replaces the store, in order with the entries before it; the
/// consistent index moves to the one the snapshot covers.
impl Handler<InstallSnapshot> for ApplierActor {
    type Result = AtomicResponse<Self, Result<u64, EtcdError>>;

    fn handle(&mut self, msg: InstallSnapshot, _: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("InstallSnapshot");
        let Some(store) = self.peers.install.clone() else {
            let e = EtcdError::internal("no store to install a snapshot into");
            return AtomicResponse::new(Box::pin(fut::ready(Err(e))));
        };
        AtomicResponse::new(Box::pin(store.send(msg).into_actor(self).map(
            |res, act, _| {
                let index = res.map_err(EtcdError::from)??;
                act.applier.installed(index);
                Ok(index)
            },
        )))
    }
}

impl Handler<Register> for ApplierActor {
    type Result = ();

    fn handle(&mut self, msg: Register, _: &mut Context<Self>) {
        self.applier.register(msg.id, msg.reply);
    }
}

impl Handler<Cancel> for ApplierActor {
    type Result = ();

    fn handle(&mut self, msg: Cancel, _: &mut Context<Self>) {
        self.applier.cancel(msg.id, msg.error);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use actcd_proto::actcdpb::{InternalRaftRequest, RequestHeader};
    use actcd_proto::etcdserverpb::PutRequest;
    use actcd_types::msg::{ApplyResult, CommittedEntry, EntryKind};
    use prost::Message as _;

    use super::*;

    /// A store whose commits fail, a raft node and a supervisor, recording what they hear.
    #[derive(Default, Clone)]
    struct Recorder {
        batches: Arc<Mutex<usize>>,
        applied: Arc<Mutex<Vec<u64>>>,
        fatal: Arc<Mutex<Vec<Fatal>>>,
    }

    impl Actor for Recorder {
        type Context = Context<Self>;
    }

    impl Handler<ApplyBatch> for Recorder {
        type Result = Result<Vec<ApplyResult>, EtcdError>;
        fn handle(&mut self, _: ApplyBatch, _: &mut Context<Self>) -> Self::Result {
            *self.batches.lock().unwrap() += 1;
            Err(EtcdError::internal("mdb_txn_commit: File too large"))
        }
    }

    impl Handler<Applied> for Recorder {
        type Result = ();
        fn handle(&mut self, m: Applied, _: &mut Context<Self>) {
            self.applied.lock().unwrap().push(m.index);
        }
    }

    impl Handler<Fatal> for Recorder {
        type Result = ();
        fn handle(&mut self, m: Fatal, _: &mut Context<Self>) {
            self.fatal.lock().unwrap().push(m);
        }
    }

    fn put(index: u64) -> CommittedEntry {
        let req = InternalRaftRequest {
            header: Some(RequestHeader {
                id: index,
                ..Default::default()
            }),
            put: Some(PutRequest {
                key: b"k".to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        };
        CommittedEntry {
            index,
            term: 1,
            kind: EntryKind::Normal,
            data: req.encode_to_vec(),
        }
    }

    #[actix_rt::test]
    async fn a_failed_batch_is_reported_once_and_nothing_more_is_applied() {
        let seen = Recorder::default();
        let fake = seen.clone().start();
        let applier = ApplierActor::new(
            Applier::new(0),
            ApplierPeers {
                store: fake.clone().recipient(),
                raft: fake.clone().recipient(),
                install: None,
                fatal: fake.recipient(),
            },
        )
        .start();
        applier
            .send(Apply {
                entries: vec![put(1)],
            })
            .await
            .unwrap();
        let later = applier
            .send(Apply {
                entries: vec![put(2)],
            })
            .await;
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        assert!(later.is_err(), "the applier stopped itself");
        assert_eq!(*seen.batches.lock().unwrap(), 1);
        assert!(
            seen.applied.lock().unwrap().is_empty(),
            "index 1 is not applied"
        );
        let fatal = seen.fatal.lock().unwrap().clone();
        assert_eq!(fatal.len(), 1);
        assert_eq!(fatal[0].actor, "applier");
        assert!(fatal[0].error.contains("File too large"), "{fatal:?}");
    }
}

actcd_types::impl_mailbox_probe!(ApplierActor, meter);
