use actcd_types::EtcdError;
use actcd_types::msg::{Applied, Apply, ApplyBatch, Cancel, InstallSnapshot, Register};
use actix::prelude::*;

use crate::applier::Applier;

#[derive(Clone)]
pub struct ApplierPeers {
    pub store: Recipient<ApplyBatch>,
    pub raft: Recipient<Applied>,
    /// The store, for snapshots from the leader.
    pub install: Option<Recipient<InstallSnapshot>>,
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
            move |res, act, _| match res {
                Ok(Ok(_)) => {
                    act.applier.complete(last_index);
                    act.peers.raft.do_send(Applied { index: last_index });
                }
                Ok(Err(e)) => {
                    tracing::error!(error = %e, index = last_index, "apply failed; stopping");
                    System::current().stop_with_code(1);
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

actcd_types::impl_mailbox_probe!(ApplierActor, meter);
