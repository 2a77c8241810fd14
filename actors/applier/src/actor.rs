use std::sync::Arc;

use actcd_proto::etcdserverpb::AlarmType;
use actcd_types::EtcdError;
use actcd_types::auth::SharedView;
use actcd_types::msg::{
    Applied, Apply, Cancel, Fatal, GetAlarms, GetMembers, InstallSnapshot, LeaseKeys, LeaseRevoked,
    LeasedKeys, Register, ReloadAuth, SyncConf,
};
use actcd_types::storage::ReadEngine;
use actix::prelude::*;

use crate::alarms::Alarms;
use crate::applier::Applier;
use crate::dispatch::{ChainPeers, ChainState, Failure};
use crate::leases::Leases;
use crate::members::Membership;

#[derive(Clone)]
pub struct ApplierPeers {
    /// The state owners the chain sends work to.
    pub chain: ChainPeers,
    pub raft: Recipient<Applied>,
    /// The store, for snapshots from the leader.
    pub install: Option<Recipient<InstallSnapshot>>,
    /// The store's live leased keys, asked once a snapshot is installed (the attachments are
    /// rebuilt from them).
    pub leased_keys: Option<Recipient<LeasedKeys>>,
    /// The auth store, told to read its tables again once a snapshot is installed.
    pub reload_auth: Option<Recipient<ReloadAuth>>,
    /// The v2 store, told to read its table again once a snapshot is installed.
    pub reload_v2: Option<Recipient<actcd_types::v2::V2Reload>>,
    /// The raft node, given the whole membership once a snapshot is installed.
    pub conf_sync: Option<Recipient<SyncConf>>,
    /// The daemon's supervisor, told once when a batch cannot be applied; the applier then
    /// stops itself.
    pub fatal: Recipient<Fatal>,
}

pub struct ApplierActor {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: std::sync::Arc<actcd_types::meter::Meter>,
    /// etcd's `etcd_server_apply_duration_seconds` of the requests applied here (leases,
    /// alarms, auth), reported in the probe answer.
    apply_durations: actcd_types::meter::ApplyDurations,
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
    /// The leases at the point of the log applied so far.
    leases: Leases,
    /// The key space's revision as the store last reported it.
    revision: Option<i64>,
    /// The committed state alarms, members and leases are read from after a snapshot is
    /// installed.
    engine: Option<Arc<dyn ReadEngine>>,
    /// Where whether CORRUPT is raised is published (the front refuses reads while it is).
    corrupt: Option<tokio::sync::watch::Sender<bool>>,
}

impl ApplierActor {
    /// `view`: the auth store's view as loaded with the backend the applier starts from.
    pub fn new(applier: Applier, peers: ApplierPeers, view: SharedView) -> Self {
        Self {
            meter: actcd_types::meter::Meter::new(),
            apply_durations: actcd_types::meter::ApplyDurations::default(),
            applier,
            chain: std::sync::Arc::new(peers.chain.clone()),
            peers,
            view,
            alarms: Alarms::default(),
            members: Membership::default(),
            leases: Leases::default(),
            revision: None,
            engine: None,
            corrupt: None,
        }
    }

    /// Publishes on `flag` whether a CORRUPT alarm is raised: now, after every Ready and after
    /// every snapshot installed.
    pub fn publishing_corrupt(mut self, flag: tokio::sync::watch::Sender<bool>) -> Self {
        self.corrupt = Some(flag);
        self.publish_corrupt();
        self
    }

    fn publish_corrupt(&self) {
        if let Some(tx) = &self.corrupt {
            let corrupt = self.alarms.corrupt();
            tx.send_if_modified(|v| std::mem::replace(v, corrupt) != corrupt);
        }
    }

    /// Starts from `leases`, as [`load_leases`] read them from the committed state the applier
    /// starts from, with the store's leased keys attached and the minimum TTL set; read again
    /// with the alarms whenever a snapshot is installed.
    pub fn with_leases(mut self, leases: Leases) -> Self {
        self.leases = leases;
        self
    }

    /// Starts from `alarms`, as [`load_alarms`] read them from `engine`'s committed state (the
    /// backend the applier starts from), and reads them again from it whenever a snapshot is
    /// installed.
    pub fn with_alarms(mut self, alarms: Alarms, engine: Arc<dyn ReadEngine>) -> Self {
        self.alarms = alarms;
        self.engine = Some(engine);
        self.publish_corrupt();
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

/// The leases `engine`'s last commit holds (their keys are attached with
/// [`Leases::attach_all`]).
pub fn load_leases(engine: &dyn ReadEngine) -> Result<Leases, EtcdError> {
    let txn = engine.begin_read().map_err(EtcdError::internal)?;
    Leases::load(&*txn)
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
            leases: std::mem::take(&mut self.leases),
            revision: self.revision,
            apply_durations: std::mem::take(&mut self.apply_durations),
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
                act.leases = state.leases;
                act.revision = state.revision;
                act.apply_durations = state.apply_durations;
                act.publish_corrupt();
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
/// alarms, members and leases are read again from it (raft's configuration follows the
/// members, with `SyncConf`; the lessor hears which leases went and came); the consistent
/// index moves to the one the snapshot covers.
impl Handler<InstallSnapshot> for ApplierActor {
    type Result = AtomicResponse<Self, Result<u64, EtcdError>>;

    fn handle(&mut self, msg: InstallSnapshot, _: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("InstallSnapshot");
        let Some(store) = self.peers.install.clone() else {
            let e = EtcdError::internal("no store to install a snapshot into");
            return AtomicResponse::new(Box::pin(fut::ready(Err(e))));
        };
        let reload = self.peers.reload_auth.clone();
        let reload_v2 = self.peers.reload_v2.clone();
        let leased_keys = self.peers.leased_keys.clone();
        let engine = self.engine.clone();
        let min_ttl = self.leases.min_ttl();
        let work = async move {
            let index = store.send(msg).await.map_err(EtcdError::from)??;
            let alarms = engine.as_deref().map(load_alarms).transpose()?;
            let members = engine.as_deref().map(load_members).transpose()?;
            let mut leases = engine.as_deref().map(load_leases).transpose()?;
            if let Some(leases) = &mut leases {
                leases.set_min_ttl(min_ttl);
                if let Some(keys) = leased_keys {
                    leases.attach_all(keys.send(LeasedKeys).await.map_err(EtcdError::from)??);
                }
            }
            let view = match reload {
                Some(auth) => Some(auth.send(ReloadAuth).await.map_err(EtcdError::from)??),
                None => None,
            };
            if let Some(v2) = reload_v2 {
                v2.send(actcd_types::v2::V2Reload)
                    .await
                    .map_err(EtcdError::from)??;
            }
            Ok::<_, EtcdError>((index, alarms, members, leases, view))
        };
        AtomicResponse::new(Box::pin(work.into_actor(self).map(|res, act, _| {
            let (index, alarms, members, leases, view) = res?;
            act.revision = None;
            if let Some(alarms) = alarms {
                act.alarms = alarms.replacing(&act.alarms);
                act.publish_corrupt();
            }
            if let Some(leases) = leases {
                act.replace_leases(leases);
            }
            if let Some(members) = members {
                act.members = members.with_max_learners(act.members.max_learners());
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

impl ApplierActor {
    /// After a snapshot: the lessor forgets the leases that went and learns the new ones.
    fn replace_leases(&mut self, leases: Leases) {
        let old = std::mem::replace(&mut self.leases, leases);
        let Some(lessor) = &self.peers.chain.lessor else {
            return;
        };
        for g in old.granted() {
            if !self.leases.exists(g.id) {
                lessor.revoked.do_send(LeaseRevoked { id: g.id });
            }
        }
        for g in self.leases.granted() {
            lessor.granted.do_send(g);
        }
    }
}

/// The keys attached to a lease as of the entries applied so far (LeaseTimeToLive with keys).
impl Handler<LeaseKeys> for ApplierActor {
    type Result = Result<Vec<Vec<u8>>, EtcdError>;

    fn handle(&mut self, msg: LeaseKeys, _: &mut Context<Self>) -> Self::Result {
        self.leases.keys_of(msg.id)
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

impl ApplierActor {
    fn samples(&self) -> Vec<actcd_types::meter::Sample> {
        let mut samples: Vec<_> = self.apply_durations.samples().collect();
        samples.extend(self.alarms.samples());
        samples
    }
}

actcd_types::impl_mailbox_probe!(ApplierActor, meter, samples);
