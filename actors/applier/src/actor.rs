use std::sync::Arc;

use actcd_proto::etcdserverpb::AlarmType;
use actcd_types::EtcdError;
use actcd_types::auth::SharedView;
use actcd_types::msg::{
    Applied, Apply, Cancel, Fatal, GetAlarms, GetMembers, InstallSnapshot, Register, ReloadAuth,
    SyncConf,
};
use actcd_types::storage::ReadEngine;
use actix::prelude::*;

use crate::alarms::Alarms;
use crate::applier::Applier;
use crate::dispatch::{ChainPeers, ChainState, Failure};
use crate::members::Membership;

#[derive(Clone)]
pub struct ApplierPeers {
    /// The state owners the chain sends work to.
    pub chain: ChainPeers,
    pub raft: Recipient<Applied>,
    /// The store, for snapshots from the leader.
    pub install: Option<Recipient<InstallSnapshot>>,
    /// The auth store, told to read its tables again once a snapshot is installed.
    pub reload_auth: Option<Recipient<ReloadAuth>>,
    /// The raft node, given the whole membership once a snapshot is installed.
    pub conf_sync: Option<Recipient<SyncConf>>,
    /// The daemon's supervisor, told once when a batch cannot be applied; the applier then
    /// stops itself.
    pub fatal: Recipient<Fatal>,
}

pub struct ApplierActor {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: std::sync::Arc<actcd_types::meter::Meter>,
    applier: Applier,
    peers: ApplierPeers,
    /// `peers.chain`, shared with each Ready's work without cloning its recipients.
    chain: std::sync::Arc<ChainPeers>,
    /// The permission view at the point of the log applied so far.
    view: SharedView,
    /// The alarms raised at the point of the log applied so far.
    alarms: Alarms,
    /// The cluster's members at the point of the log applied so far.
    members: Membership,
    /// The committed state alarms and members are read from after a snapshot is installed.
    engine: Option<Arc<dyn ReadEngine>>,
}

impl ApplierActor {
    /// `view`: the auth store's view as loaded with the backend the applier starts from.
    pub fn new(applier: Applier, peers: ApplierPeers, view: SharedView) -> Self {
        Self {
            meter: actcd_types::meter::Meter::new(),
            applier,
            chain: std::sync::Arc::new(peers.chain.clone()),
            peers,
            view,
            alarms: Alarms::default(),
            members: Membership::default(),
            engine: None,
        }
    }

    /// Starts from `alarms`, as [`load_alarms`] read them from `engine`'s committed state (the
    /// backend the applier starts from), and reads them again from it whenever a snapshot is
    /// installed.
    pub fn with_alarms(mut self, alarms: Alarms, engine: Arc<dyn ReadEngine>) -> Self {
        self.alarms = alarms;
        self.engine = Some(engine);
        self
    }

    /// Starts from `members`, as [`Membership::load`] read them from the committed state the
    /// applier starts from (after the daemon recorded a new cluster's members); read again with
    /// the alarms whenever a snapshot is installed.
    pub fn with_members(mut self, members: Membership) -> Self {
        self.members = members;
        self
    }
}

/// The members `engine`'s last commit holds.
pub fn load_members(engine: &dyn ReadEngine) -> Result<Membership, EtcdError> {
    let txn = engine.begin_read().map_err(EtcdError::internal)?;
    Membership::load(&*txn).map_err(EtcdError::internal)
}

/// The alarms `engine`'s last commit holds.
pub fn load_alarms(engine: &dyn ReadEngine) -> Result<Alarms, EtcdError> {
    let txn = engine.begin_read().map_err(EtcdError::internal)?;
    Alarms::load(&*txn)
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
        let chain = self.chain.clone();
        // The state travels with the work and comes back: no other message is handled before.
        let mut state = ChainState {
            view: self.view.clone(),
            alarms: std::mem::take(&mut self.alarms),
            members: std::mem::take(&mut self.members),
        };
        let last_index = prepared.last_index;
        let work = async move {
            let res = chain.apply(&mut state, prepared).await;
            (state, res)
        };
        AtomicResponse::new(Box::pin(work.into_actor(self).map(
            move |(state, res), act, ctx| {
                act.view = state.view;
                act.alarms = state.alarms;
                act.members = state.members;
                act.after_apply(res, last_index, ctx);
            },
        )))
    }
}

impl ApplierActor {
    /// What a Ready's outcome leaves: `Applied` to raft, or a stop.
    fn after_apply(&mut self, res: Result<(), Failure>, last_index: u64, ctx: &mut Context<Self>) {
        match res {
            Ok(()) => {
                self.applier.complete(last_index);
                self.peers.raft.do_send(Applied { index: last_index });
            }
            Err(Failure::Fatal(error)) => {
                // Memory and disk may disagree now: apply nothing more, and have the
                // supervisor stop the member (the WAL replays the batch on restart).
                self.peers.fatal.do_send(Fatal {
                    actor: "applier",
                    error,
                });
                ctx.stop();
            }
            Err(Failure::Gone) => tracing::warn!("a state owner is gone; server stopping"),
        }
    }
}

/// A snapshot from the leader replaces the store, in order with the entries before it; the
/// alarms and members are read again from it (raft's configuration follows the members, with
/// `SyncConf`); the consistent index moves to the one the snapshot covers.
impl Handler<InstallSnapshot> for ApplierActor {
    type Result = AtomicResponse<Self, Result<u64, EtcdError>>;

    fn handle(&mut self, msg: InstallSnapshot, _: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("InstallSnapshot");
        let Some(store) = self.peers.install.clone() else {
            let e = EtcdError::internal("no store to install a snapshot into");
            return AtomicResponse::new(Box::pin(fut::ready(Err(e))));
        };
        let reload = self.peers.reload_auth.clone();
        let engine = self.engine.clone();
        let work = async move {
            let index = store.send(msg).await.map_err(EtcdError::from)??;
            let alarms = engine.as_deref().map(load_alarms).transpose()?;
            let members = engine.as_deref().map(load_members).transpose()?;
            let view = match reload {
                Some(auth) => Some(auth.send(ReloadAuth).await.map_err(EtcdError::from)??),
                None => None,
            };
            Ok::<_, EtcdError>((index, alarms, members, view))
        };
        AtomicResponse::new(Box::pin(work.into_actor(self).map(|res, act, _| {
            let (index, alarms, members, view) = res?;
            if let Some(alarms) = alarms {
                act.alarms = alarms;
            }
            if let Some(members) = members {
                act.members = members;
                if let Some(raft) = &act.peers.conf_sync {
                    raft.do_send(SyncConf {
                        members: act.members.list(),
                    });
                }
            }
            if let Some(view) = view {
                act.view = view;
            }
            act.applier.installed(index);
            Ok(index)
        })))
    }
}

/// The alarms raised as of the entries applied so far (Status, `/health`).
impl Handler<GetAlarms> for ApplierActor {
    type Result = MessageResult<GetAlarms>;

    fn handle(&mut self, _: GetAlarms, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.alarms.list(AlarmType::None as i32))
    }
}

/// The members as of the entries applied so far (the Cluster service, the peer `members`
/// route a joining member asks).
impl Handler<GetMembers> for ApplierActor {
    type Result = MessageResult<GetMembers>;

    fn handle(&mut self, _: GetMembers, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.members.list())
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
#[path = "actor_tests.rs"]
mod tests;

actcd_types::impl_mailbox_probe!(ApplierActor, meter);
