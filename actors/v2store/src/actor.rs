//! [`V2StoreActor`]: the glue between messages and [`V2State`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use actcd_proto::actcdpb::{InternalRaftRequest, RequestHeader, V2Request};
use actcd_types::EtcdError;
use actcd_types::ids::IdGenerator;
use actcd_types::msg::{ApplyResponse, RaftStatus, Submit};
use actcd_types::storage::ReadEngine;
use actcd_types::v2::{
    ApplyV2, V2Get, V2Reload, V2Reply, V2StoreStats, V2SyncTick, V2Watch, V2Watching,
};
use actcd_v2auth::AuthState;
use actcd_v2tree::{Counters as StatsCounters, WatchStart, WatcherId};
use actix::prelude::*;
use tokio::sync::{mpsc, oneshot, watch};

use crate::state::{MEMBER, V2State};

/// Where the v2 store's own proposals go, and how it knows whether it leads.
#[derive(Clone)]
pub struct V2Peers {
    /// Preflight: the leader's SYNC requests.
    pub submit: Recipient<Submit>,
    /// The raft node: is this member the leader?
    pub raft: Recipient<RaftStatus>,
    pub member_id: u64,
}

pub struct V2StoreActor {
    state: V2State,
    engine: Arc<dyn ReadEngine>,
    peers: V2Peers,
    /// Registered watchers' streams.
    watchers: HashMap<WatcherId, mpsc::Sender<bytes::Bytes>>,
    /// The newest v2 auth state, for the front's checks of every `/v2/keys` request.
    auth: watch::Sender<Arc<AuthState>>,
    ids: IdGenerator,
    /// A SYNC proposed and not yet answered.
    syncing: bool,
    /// Members recorded at bootstrap, counted by a fresh store's index.
    members: u64,
    meter: Arc<actcd_types::meter::Meter>,
    /// etcd's `etcd_debugging_store_*` counts, reported in the probe answer.
    counts: StoreCounts,
}

/// What etcd 3.5.1 counts of its v2 store for `/metrics`: reads and writes by action (etcd
/// counts failed ones too), keys expired, watch requests. Plain fields: only this actor
/// touches them.
#[derive(Debug, Default)]
struct StoreCounts {
    /// `get` and `getRecursive`.
    reads: [u64; 2],
    /// By etcd's action name, in the order etcd's labels sort.
    writes: std::collections::BTreeMap<&'static str, u64>,
    expires: u64,
    watch_requests: u64,
    /// etcd's `etcd_server_apply_duration_seconds` of v2 requests.
    apply: actcd_types::meter::ApplyDurations,
}

impl StoreCounts {
    fn read(&mut self, recursive: bool) {
        self.reads[usize::from(recursive)] += 1;
    }

    fn write(&mut self, action: &'static str, n: u64) {
        if n > 0 {
            *self.writes.entry(action).or_default() += n;
        }
    }

    /// The tree's own counters (`/v2/stats/store`'s) moved from `before` to `after` while
    /// one entry applied: its writes, successful or not, and the keys it expired.
    fn applied(&mut self, before: &StatsCounters, after: &StatsCounters) {
        let d = |a: u64, b: u64| b.saturating_sub(a);
        for (action, n) in [
            (
                "set",
                d(
                    before.sets_success + before.sets_fail,
                    after.sets_success + after.sets_fail,
                ),
            ),
            (
                "create",
                d(
                    before.create_success + before.create_fail,
                    after.create_success + after.create_fail,
                ),
            ),
            (
                "update",
                d(
                    before.update_success + before.update_fail,
                    after.update_success + after.update_fail,
                ),
            ),
            (
                "delete",
                d(
                    before.delete_success + before.delete_fail,
                    after.delete_success + after.delete_fail,
                ),
            ),
            (
                "compareAndSwap",
                d(
                    before.compare_and_swap_success + before.compare_and_swap_fail,
                    after.compare_and_swap_success + after.compare_and_swap_fail,
                ),
            ),
            (
                "compareAndDelete",
                d(
                    before.compare_and_delete_success + before.compare_and_delete_fail,
                    after.compare_and_delete_success + after.compare_and_delete_fail,
                ),
            ),
        ] {
            self.write(action, n);
        }
        self.expires += d(before.expire_count, after.expire_count);
    }

    /// A membership record etcd's v2 store writes under `/0` (`path` as the applier names
    /// it): a member's raft attributes are created (etcd updates them on `member update` and
    /// promotion; actcd's entry does not say which), its attributes set, a removed member's
    /// record deleted and its tombstone created; `version_too` when the cluster version was
    /// set with it.
    fn member(&mut self, path: &str, version_too: bool) {
        let action = if path.ends_with("/raftAttributes") || path.starts_with("/0/removed_members/")
        {
            "create"
        } else if path.ends_with("/attributes") {
            "set"
        } else {
            "delete"
        };
        self.write(action, 1);
        if version_too {
            self.write("set", 1);
        }
    }
}

/// The wall clock, in Unix nanoseconds: the time TTLs are counted from.
fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl V2StoreActor {
    /// Loads the store from `engine`'s table (a fresh one counts `members`).
    pub fn open(
        engine: Arc<dyn ReadEngine>,
        members: u64,
        peers: V2Peers,
        ids: IdGenerator,
    ) -> Result<Self, EtcdError> {
        let state = Self::load(&*engine, members)?;
        let (auth, _) = watch::channel(Arc::new(state.auth().clone()));
        Ok(Self {
            state,
            engine,
            peers,
            watchers: HashMap::new(),
            auth,
            ids,
            syncing: false,
            members,
            meter: actcd_types::meter::Meter::new(),
            counts: StoreCounts::default(),
        }
        .loaded())
    }

    /// etcd reads its member records from the v2 store, recursively, whenever it recovers
    /// the cluster from it (at start, after a snapshot): counted as one `getRecursive`, for
    /// the whole tree read here.
    fn loaded(mut self) -> Self {
        self.counts.read(true);
        self
    }

    fn load(engine: &dyn ReadEngine, members: u64) -> Result<V2State, EtcdError> {
        let txn = engine.begin_read().map_err(EtcdError::internal)?;
        V2State::load(&*txn, members).map_err(EtcdError::internal)
    }

    /// The newest v2 auth state, followed by the front.
    pub fn auth_states(&self) -> watch::Receiver<Arc<AuthState>> {
        self.auth.subscribe()
    }

    fn publish_auth(&self) {
        let newest = self.state.auth();
        if **self.auth.borrow() != *newest {
            self.auth.send_replace(Arc::new(newest.clone()));
        }
    }

    fn deliver(&mut self, notifications: Vec<(WatcherId, Arc<actcd_v2tree::Event>)>) {
        // One change notifies many watchers with the same (shared) event: its JSON is
        // rendered once and shared too (measured: with 100 watchers, rendering per watcher
        // was most of the store's time per change).
        let mut rendered: Option<(Arc<actcd_v2tree::Event>, bytes::Bytes)> = None;
        for (id, event) in notifications {
            let Some(tx) = self.watchers.get(&id) else {
                continue;
            };
            let json = match &rendered {
                Some((e, json)) if Arc::ptr_eq(e, &event) => json.clone(),
                _ => {
                    let json = bytes::Bytes::from(format!("{}\n", event.to_json()));
                    rendered = Some((event, json.clone()));
                    json
                }
            };
            // A client that does not keep up is dropped, as etcd drops a watcher whose buffer
            // is full: its stream ends.
            let gone = tx.try_send(json).is_err();
            // A one-shot watcher is done once it has its event; the tree has let it go.
            if gone || self.state.watcher_start_index(id).is_none() {
                self.watchers.remove(&id);
                if gone {
                    self.state.cancel_watch(id);
                }
            }
        }
    }

    /// Drops watchers whose client went away.
    fn sweep(&mut self) {
        let closed: Vec<WatcherId> = self
            .watchers
            .iter()
            .filter(|(_, tx)| tx.is_closed())
            .map(|(id, _)| *id)
            .collect();
        for id in closed {
            self.watchers.remove(&id);
            self.state.cancel_watch(id);
        }
    }
}

impl Actor for V2StoreActor {
    type Context = Context<Self>;
}

impl Handler<ApplyV2> for V2StoreActor {
    type Result = MessageResult<ApplyV2>;

    fn handle(&mut self, msg: ApplyV2, _: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("ApplyV2");
        let now = now();
        let mut ops = Vec::new();
        for entry in msg.entries {
            let before = self.state.tree().stats();
            let index_before = self.state.tree().index();
            let started = std::time::Instant::now();
            let outcome = self
                .state
                .apply(entry.index, entry.term, &entry.request, now);
            // etcd times each v2 request it applies under its method.
            let op = match entry.request.method.as_str() {
                "PUT" => Some("PUT"),
                "POST" => Some("POST"),
                "DELETE" => Some("DELETE"),
                "QGET" => Some("QGET"),
                "SYNC" => Some("SYNC"),
                _ => None,
            };
            if let Some(op) = op {
                self.counts.apply.observe(
                    "v2",
                    op,
                    outcome.reply.status < 400,
                    started.elapsed().as_secs_f64(),
                );
            }
            let request = &entry.request;
            match request.method.as_str() {
                "QGET" => self.counts.read(request.recursive),
                MEMBER => self
                    .counts
                    .member(&request.path, self.state.tree().index() > index_before + 1),
                _ => self.counts.applied(&before, &self.state.tree().stats()),
            }
            // The new auth state is published before the change is answered: a client's next
            // request after the answer is judged by it.
            if entry.request.method == "AUTH" {
                self.publish_auth();
            }
            if let Some(reply) = entry.reply {
                let _ = reply.send(Ok(ApplyResponse::V2(outcome.reply)));
            }
            self.deliver(outcome.notifications);
            ops.extend(outcome.ops);
        }
        MessageResult(ops)
    }
}

impl Handler<V2Get> for V2StoreActor {
    type Result = MessageResult<V2Get>;

    fn handle(&mut self, msg: V2Get, _: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("V2Get");
        self.counts.read(msg.recursive);
        MessageResult(self.state.get(&msg.path, msg.recursive, msg.sorted, now()))
    }
}

impl Handler<V2Watch> for V2StoreActor {
    type Result = Result<V2Watching, V2Reply>;

    fn handle(&mut self, msg: V2Watch, _: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("V2Watch");
        self.counts.watch_requests += 1;
        let (raft_index, raft_term) = self.state.applied();
        let (tx, events) = mpsc::channel(actcd_types::v2::V2_WATCH_BUFFER);
        match self
            .state
            .watch(&msg.path, msg.recursive, msg.stream, msg.since)
        {
            Ok(WatchStart::Ready(event)) => {
                let _ = tx.try_send(bytes::Bytes::from(format!("{}\n", event.to_json())));
                Ok(V2Watching {
                    etcd_index: event.etcd_index,
                    raft_index,
                    raft_term,
                    events,
                })
            }
            Ok(WatchStart::Registered(id)) => {
                let etcd_index = self
                    .state
                    .watcher_start_index(id)
                    .unwrap_or_else(|| self.state.tree().index());
                self.watchers.insert(id, tx);
                Ok(V2Watching {
                    etcd_index,
                    raft_index,
                    raft_term,
                    events,
                })
            }
            Err(e) => Err(self.state.error_reply(&e)),
        }
    }
}

impl Handler<V2StoreStats> for V2StoreActor {
    type Result = MessageResult<V2StoreStats>;

    fn handle(&mut self, _: V2StoreStats, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.state.tree().stats_json())
    }
}

/// Every 500 ms: drop watchers whose clients left; on the leader, propose a SYNC carrying its
/// clock when a key's TTL has run out (etcd's leader does the same, so every member expires
/// the same keys at the same point of the log).
impl Handler<V2SyncTick> for V2StoreActor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, _: V2SyncTick, _: &mut Context<Self>) -> Self::Result {
        self.sweep();
        let at = now();
        if self.syncing || !self.state.expiry_due(at) {
            return Box::pin(fut::ready(()));
        }
        self.syncing = true;
        let raft = self.peers.raft.send(RaftStatus);
        Box::pin(raft.into_actor(self).then(move |status, act, _| {
            let leads = status.is_ok_and(|s| s.leader == act.peers.member_id && s.leader != 0);
            let (tx, rx) = oneshot::channel();
            if leads {
                let request = InternalRaftRequest {
                    header: Some(RequestHeader {
                        id: act.ids.next(),
                        // The member's own request: never judged by auth.
                        internal: true,
                        ..Default::default()
                    }),
                    v2: Some(V2Request {
                        method: "SYNC".into(),
                        time: at,
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                act.peers.submit.do_send(Submit {
                    request: Box::new(request),
                    reply: tx,
                    deadline: None,
                });
            } else {
                drop(tx);
            }
            async move {
                let _ = rx.await;
            }
            .into_actor(act)
            .map(|(), act, _| act.syncing = false)
        }))
    }
}

/// A snapshot replaced the backend: the tree, auth and journal are read again from it.
/// Watchers are told nothing (etcd's v2 watchers of a member that installs a snapshot are
/// left waiting too) and stay registered only in the new tree's absence: they are dropped, so
/// their clients see the watch end.
impl Handler<V2Reload> for V2StoreActor {
    type Result = Result<(), EtcdError>;

    fn handle(&mut self, _: V2Reload, _: &mut Context<Self>) -> Self::Result {
        self.state = Self::load(&*self.engine, self.members)?;
        self.counts.read(true);
        self.watchers.clear();
        self.publish_auth();
        Ok(())
    }
}

impl V2StoreActor {
    /// etcd's `etcd_debugging_store_*` families.
    fn samples(&self) -> Vec<actcd_types::meter::Sample> {
        use actcd_types::meter::Sample;
        let c = &self.counts;
        let labelled = |name, action: &str, n: u64| {
            let mut s = Sample::value(name, n as f64);
            s.labels.push(("action", action.to_owned()));
            s
        };
        let mut out = Vec::new();
        for (action, n) in [("get", c.reads[0]), ("getRecursive", c.reads[1])] {
            if n > 0 {
                out.push(labelled("etcd_debugging_store_reads_total", action, n));
            }
        }
        for (action, n) in &c.writes {
            out.push(labelled("etcd_debugging_store_writes_total", action, *n));
        }
        out.push(Sample::value(
            "etcd_debugging_store_expires_total",
            c.expires as f64,
        ));
        out.push(Sample::value(
            "etcd_debugging_store_watch_requests_total",
            c.watch_requests as f64,
        ));
        out.push(Sample::value(
            "etcd_debugging_store_watchers",
            self.state.tree().stats().watchers as f64,
        ));
        out.extend(c.apply.samples());
        out
    }
}

actcd_types::impl_mailbox_probe!(V2StoreActor, meter, samples);
