//! The actors of one member, started by one small builder per subsystem.
//!
//! The actors refer to each other in cycles (raft → applier → store → raft, preflight → raft →
//! preflight, the store ⇄ the watch hub), so every mailbox the cycles need is made first
//! ([`Mailboxes`]) and each actor then starts once, with all its peers: no actor runs with a
//! peer missing and is connected later. The order of the builders is the order facts must
//! reach actors before traffic can: the lessor hears every stored lease before raft can make
//! it the leader's; the store knows raft and the hub before the applier hands it an entry.
//!
//! Threads are decided here and nowhere else (measured; see `lib.rs`, "Threads"): raft, the
//! WAL writer, the applier, preflight and the lessor share the System thread; the backend, the
//! auth store and the watch hub have threads of their own; the store has its own thread unless
//! the gRPC front shares the System thread (small machines), when it joins that thread too.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actcd_applier::{
    Alarms, Applier, ApplierActor, ApplierPeers, ChainPeers, Leases, LessorLink, Membership,
};
use actcd_auth::AuthActor;
use actcd_backend::{BackendActor, LmdbEngine, Subscribe};
use actcd_corrupt::{Check, CheckerConfig, CheckerPeers, CorruptionChecker, InitialCheck};
use actcd_front::{ActorProbe, PipelineRoutes};
use actcd_lessor::{LessorActor, LessorConfig, TokioClock};
use actcd_mvcc::{
    BackendLink, DamageReport, MvccActor, MvccPeers, MvccReader, ReadViews, ScrubConfig, ScrubTick,
    Scrubber, Store,
};
use actcd_preflight::{Limits, PreflightActor, PreflightPeers};
use actcd_raft::{RaftActor, RaftNode, RaftPeers};
use actcd_transport::{PeerListener, PeerRoutes, TransportActor, serve_peers};
use actcd_types::MemberIdentity;
use actcd_types::auth::SharedView;
use actcd_types::msg::{CorruptFlag, MemberRecord, PeerChange};
use actcd_types::storage::ReadEngine;
use actcd_v2store::{V2Peers, V2StoreActor};
use actcd_wal::{Wal, WalActor};
use actcd_watch::{HubConfig, WatchHubActor};
use actix::dev::channel::{AddressReceiver, channel};
use actix::prelude::*;

use crate::config::Config;
use crate::node::StartError;
use crate::serve::SocketFiles;
use crate::supervisor::{DrainWith, Supervisor};
use crate::ticker::{BackendBatch, Periodic, Ticker};

/// The newest v2 auth state, as the v2 store publishes it.
type V2AuthStates = tokio::sync::watch::Receiver<Arc<actcd_v2auth::AuthState>>;

/// What the member's actors start from: recovered state, opened before any actor runs.
pub(crate) struct Recovered {
    pub engine: Arc<LmdbEngine>,
    pub store: Store,
    pub auth: AuthActor,
    pub alarms: Alarms,
    /// The leases as recorded in `engine`, with the store's leased keys attached.
    pub leases: Leases,
    pub wal: Wal,
    pub raft_node: RaftNode,
    pub consistent_index: u64,
    /// The members as recorded in `engine` (a new cluster's recorded before the actors start).
    pub members: Membership,
}

/// The mailboxes of the actors in cycles, made before any of them runs. Those that run on the
/// System thread get their whole context here; those on threads of their own get the receiving
/// end of their channel, which the thread builds its context from ([`run_on_own_thread`]).
struct Mailboxes {
    preflight: Context<PreflightActor>,
    applier: Context<ApplierActor>,
    raft: Context<RaftActor>,
    store: AddressReceiver<MvccActor>,
    reader: AddressReceiver<MvccReader>,
    hub: AddressReceiver<WatchHubActor>,
}

/// Their addresses, to hand out as peers.
#[derive(Clone)]
struct Addrs {
    preflight: Addr<PreflightActor>,
    applier: Addr<ApplierActor>,
    raft: Addr<RaftActor>,
    store: Addr<MvccActor>,
    /// Reads of the key space, from the store's published views.
    reader: Addr<MvccReader>,
    hub: Addr<WatchHubActor>,
}

impl Mailboxes {
    fn new() -> (Self, Addrs) {
        let (store_tx, store) = channel(MAILBOX);
        let (reader_tx, reader) = channel(MAILBOX);
        let (hub_tx, hub) = channel(MAILBOX);
        let m = Self {
            preflight: Context::new(),
            applier: Context::new(),
            raft: Context::new(),
            store,
            reader,
            hub,
        };
        let a = Addrs {
            preflight: m.preflight.address(),
            applier: m.applier.address(),
            raft: m.raft.address(),
            store: Addr::new(store_tx),
            reader: Addr::new(reader_tx),
            hub: Addr::new(hub_tx),
        };
        (m, a)
    }
}

/// actix's default mailbox size; actors that need more set it when they start.
const MAILBOX: usize = 16;

/// Runs the actor `make` builds on a new arbiter thread, on the mailbox `rx` whose address
/// was handed out already. The actor is built on that thread.
fn run_on_own_thread<A>(rx: AddressReceiver<A>, make: impl FnOnce() -> A + Send + 'static)
where
    A: Actor<Context = Context<A>>,
{
    let arbiter = Arbiter::new();
    arbiter.spawn_fn(move || {
        Context::with_receiver(rx).run(make());
    });
    arbiter.spawn(crate::allocator::tend_this_thread());
}

/// What the client side talks to.
pub(crate) type Started = (PipelineRoutes, Recipient<InitialCheck>);

/// Starts every actor of the member once the peer listeners are bound (`peer_listeners`, from
/// [`bind_peer_urls`]); returns what the client side talks to.
pub(crate) fn start_actors(
    cfg: &Config,
    rec: Recovered,
    supervisor: &Addr<Supervisor>,
    peer_listeners: Vec<(String, PeerListener)>,
) -> Started {
    let (boxes, a) = Mailboxes::new();
    // The corruption checker answers the peer port's hash questions, and asks the transport
    // the peers': its mailbox comes first.
    let checker_box = Context::<CorruptionChecker>::new();
    let checker = checker_box.address();
    let identity = MemberIdentity {
        cluster_id: cfg.cluster_id,
        member_id: cfg.member_id,
    };
    let lessor = leases(cfg, &rec.leases, &a);
    let (auth, auth_view) = auth_store(rec.auth);
    let current_revision = rec.store.current_revision();
    // The applier reads its alarms and members from the engine again after a snapshot is
    // installed.
    let alarm_engine = rec.engine.clone() as Arc<dyn ReadEngine>;
    let v2_engine = rec.engine.clone() as Arc<dyn ReadEngine>;
    // A damaged key record, wherever it is met, raises CORRUPT through the checker.
    let damage = DamageReport::to(checker.clone().recipient(), cfg.member_id);
    let scrubber = scrubber(cfg, rec.engine.clone(), damage.clone());
    // Every compaction's hash goes to the checker (etcd 3.5 keeps them whether or not its own
    // compact hash check runs: peers' checks ask for them).
    let mut store = rec.store;
    store.set_compaction_hashes(checker.clone().recipient());
    let (backend, views) = storage(
        rec.engine,
        (store, damage),
        (boxes.store, boxes.reader),
        &a,
        (supervisor, cfg),
    );
    watch_hub(cfg, boxes.hub, &a, identity, current_revision);
    let consensus = consensus(
        cfg,
        peer_listeners,
        boxes.raft,
        rec.raft_node,
        rec.wal,
        &rec.members.list(),
        &a,
        &lessor,
        (&checker, &backend),
        supervisor,
    );
    let v2 = v2_store(cfg, v2_engine, rec.members.list().len(), &a, supervisor);
    let corrupt = apply(
        boxes.applier,
        rec.consistent_index,
        (rec.alarms, rec.members, rec.leases, alarm_engine),
        (&a, &lessor),
        (&auth, auth_view),
        (identity, v2.as_ref().map(|(addr, _)| addr)),
        supervisor,
    );
    admission(cfg, boxes.preflight, &a);
    corruption_checks(cfg, checker_box, &a, &consensus.transport);
    ticks(cfg, &a, &lessor, &backend, (&checker, scrubber), supervisor);
    if let Some((addr, _)) = &v2 {
        Ticker::new()
            .every(
                Duration::from_millis(500),
                Periodic::V2Sync(addr.clone().recipient()),
            )
            .start();
    }
    let actors = vec![
        ActorProbe::of("preflight", &a.preflight),
        ActorProbe::of("raft", &a.raft),
        ActorProbe::of("wal", &consensus.wal),
        ActorProbe::of("applier", &a.applier),
        ActorProbe::of("mvcc", &a.store),
        ActorProbe::of("mvcc_reader", &a.reader),
        ActorProbe::of("watch", &a.hub),
        ActorProbe::of("transport", &consensus.transport),
        ActorProbe::of("backend", &backend),
        ActorProbe::of("lessor", &lessor),
        ActorProbe::of("auth", &auth),
        ActorProbe::of("corrupt", &checker),
    ];
    let v2_routes = match (&v2, cfg.flags.enable_v2) {
        (Some((addr, auth_states)), true) => Some(actcd_front::v2::V2Routes::new(
            addr.clone().recipient(),
            addr.clone().recipient(),
            addr.clone().recipient(),
            auth_states.clone(),
            actcd_v2auth_cost(),
        )),
        _ => None,
    };
    let mut routes = routes(
        a,
        consensus,
        lessor,
        auth,
        (backend, views),
        (actors, corrupt),
    );
    routes.v2 = v2_routes;
    if let Some((addr, _)) = &v2 {
        routes.actors.push(ActorProbe::of("v2store", addr));
    }
    (routes, checker.recipient())
}

/// `ACTCD_DEBUG_CORRUPT_HASH=1`: what a member that seems corrupt XORs into its hashes.
const DEBUG_HASH_SKEW: u32 = 0x00c0_ffee;

/// The corruption checker (etcd's `--experimental-*corrupt*` checks, on by default here): it
/// asks the reader for this member's hash, the transport for the peers', raft whether it
/// leads, and raises CORRUPT through preflight. Its ticks come from [`ticks`].
fn corruption_checks(
    cfg: &Config,
    mailbox: Context<CorruptionChecker>,
    a: &Addrs,
    transport: &Addr<TransportActor>,
) {
    let debug_skew = if std::env::var_os("ACTCD_DEBUG_CORRUPT_HASH").is_some_and(|v| v == "1") {
        tracing::warn!(
            "ACTCD_DEBUG_CORRUPT_HASH=1: this member reports skewed hashes, so its peers find \
             it corrupt (a deliberately broken member for the corruption tests)"
        );
        DEBUG_HASH_SKEW
    } else {
        0
    };
    let checker = CorruptionChecker::new(
        CheckerConfig {
            member_id: cfg.member_id,
            debug_skew,
        },
        CheckerPeers {
            hash_kv: a.reader.clone().recipient(),
            peer_hash: transport.clone().recipient(),
            members: a.applier.clone().recipient(),
            raft: a.raft.clone().recipient(),
            read_index: a.raft.clone().recipient(),
            submit: a.preflight.clone().recipient(),
        },
        // Request ids of its own: the front's carry the member id's low bits on top.
        actcd_types::ids::IdGenerator::new(cfg.member_id ^ 0xc000, now_ms()),
    );
    mailbox.run(checker);
}

/// bcrypt cost of new v2 passwords: etcd v2's (Go's default, 10).
fn actcd_v2auth_cost() -> u32 {
    10
}

/// The v2 store (`--enable-v2`'s API; it applies v2 entries whether or not this member serves
/// the API, so members agree), on a thread of its own: v2 watchers never slow v3 traffic.
/// Loaded from the backend's `actcd_v2` table; a fresh one counts the recorded members as
/// etcd's v2 store counts its member records. A table it cannot read stops the member.
fn v2_store(
    cfg: &Config,
    engine: Arc<dyn ReadEngine>,
    members: usize,
    a: &Addrs,
    supervisor: &Addr<Supervisor>,
) -> Option<(Addr<V2StoreActor>, V2AuthStates)> {
    let peers = V2Peers {
        submit: a.preflight.clone().recipient(),
        raft: a.raft.clone().recipient(),
        member_id: cfg.member_id,
    };
    let ids = actcd_types::ids::IdGenerator::new(cfg.member_id ^ 0x4000, now_ms());
    match V2StoreActor::open(engine, members as u64, peers, ids) {
        Ok(store) => {
            let auth = store.auth_states();
            // Where the front shares the actors' thread (small machines) the v2 store does
            // too, as the MVCC store does: an applied v2 entry and its watchers' events then
            // cross no thread (the A/B is in the v2store crate doc); `ACTCD_V2_THREAD` gives
            // it a thread of its own on any machine.
            let addr = if front_threads() == 0 && std::env::var_os("ACTCD_V2_THREAD").is_none() {
                store.start()
            } else {
                V2StoreActor::start_in_arbiter(&Arbiter::new().handle(), move |_| store)
            };
            Some((addr, auth))
        }
        Err(e) => {
            supervisor.do_send(actcd_types::msg::Fatal {
                actor: "v2store",
                error: e.to_string(),
            });
            None
        }
    }
}

/// Lease time: the lessor, told every stored lease before raft can make it the leader's. On
/// the System thread: a keepalive costs it one short handler (profiled at 100 clients, a lessor
/// thread of its own made no difference).
fn leases(cfg: &Config, leases: &Leases, a: &Addrs) -> Addr<LessorActor<TokioClock>> {
    let config = LessorConfig {
        election_timeout: Duration::from_millis(cfg.flags.election_timeout),
        fast_keepalive: cfg
            .gates
            .enabled(crate::config::gates::FAST_LEASE_KEEP_ALIVE),
        apply_wait_timeout: cfg.request_timeout(),
        ..LessorConfig::default()
    };
    // Keepalives that must wait for the applied index (`FastLeaseKeepAlive`) ask raft.
    let lessor = LessorActor::new(config, TokioClock, a.preflight.clone().recipient())
        .with_applied_wait(a.raft.clone().recipient())
        .start();
    for granted in leases.granted() {
        lessor.do_send(granted);
    }
    lessor
}

/// The auth store on a thread of its own (its loads and view builds must not hold up applies
/// or the front; bcrypt runs on that thread's blocking pool), and the view it starts with.
fn auth_store(auth: AuthActor) -> (Addr<AuthActor>, SharedView) {
    let view = auth.view();
    (auth.start_on_own_thread(), view)
}

/// The key space and its disk: the backend (the environment's only writer, its own thread),
/// the store, which sends it its writes, hears its commits and failures, and is drained into
/// it when the member stops; the views the store publishes, which the front reads Range and
/// read-only txns from in its own tasks (returned with the backend); and the reader, which
/// answers the watch hub's History and HashKV from the same views. No read waits behind
/// applies.
fn storage(
    engine: Arc<LmdbEngine>,
    (mut store, damage): (Store, DamageReport),
    (mailbox, reader): (AddressReceiver<MvccActor>, AddressReceiver<MvccReader>),
    a: &Addrs,
    (supervisor, cfg): (&Addr<Supervisor>, &Config),
) -> (Addr<BackendActor>, ReadViews) {
    let backend = BackendActor::start_on_own_thread(engine);
    store.set_damage_report(damage);
    // etcd's --experimental-compaction-batch-limit; 0 or less keeps its 1000.
    if let Ok(limit @ 1..) = usize::try_from(cfg.flags.experimental_compaction_batch_limit) {
        store.set_compaction_batch_limit(limit);
    }
    let (publisher, views) = ReadViews::channel(store.read_view());
    let front_views = views.clone();
    // Beside the front where the front shares the actors' thread (small machines: a read is a
    // mailbox push, not two thread wake-ups; on its own thread, 2 cores spent 50% more CPU per
    // read), else on a thread of its own (`ACTCD_READER_THREAD` forces that).
    if front_threads() == 0 && std::env::var_os("ACTCD_READER_THREAD").is_none() {
        Context::with_receiver(reader).run(MvccReader::new(views));
    } else {
        run_on_own_thread(reader, move || MvccReader::new(views));
    }
    let peers = MvccPeers {
        views: Some(publisher),
        watch: Some(a.hub.clone().recipient()),
        backend: Some(BackendLink::of(&backend)),
    };
    // Subscribed before any apply: the store trims its write buffer as commits are reported; a
    // failed backend write poisons the store and stops the member.
    backend.do_send(Subscribe {
        committed: Some(a.store.clone().recipient()),
        fatal: Some(a.store.clone().recipient()),
    });
    backend.do_send(Subscribe {
        committed: None,
        fatal: Some(supervisor.clone().recipient()),
    });
    supervisor.do_send(DrainWith(a.store.clone().recipient()));
    // etcd's backend batch limit: at most this many applied requests wait for a commit.
    let (limit, slow) = (
        cfg.backend_batch_limit(),
        cfg.flags.experimental_warning_apply_duration,
    );
    let make = move || {
        MvccActor::batched(store, limit)
            .with_warning_apply_duration(slow)
            .with_peers(peers)
    };
    // With the front on this thread (small machines), the store joins it too: a write then
    // crosses no thread boundary but the fsync's (see `front_threads`).
    if front_threads() == 0 {
        Context::with_receiver(mailbox).run(make());
    } else {
        run_on_own_thread(mailbox, make);
    }
    (backend, front_views)
}

/// The background scrub of the `key` table (`--experimental-scrub-interval`; none when 0), on
/// a thread of its own, reading the committed engine; its ticks come from [`ticks`].
fn scrubber(
    cfg: &Config,
    engine: Arc<LmdbEngine>,
    damage: DamageReport,
) -> Option<Recipient<ScrubTick>> {
    let interval = cfg.flags.experimental_scrub_interval;
    if interval.is_zero() {
        return None;
    }
    tracing::info!(?interval, "enabled key table scrub");
    let scrubber = Scrubber::new(ScrubConfig::every(interval), engine, damage);
    Some(scrubber.start_on_own_thread().recipient())
}

/// The watch hub, on a thread of its own: fanning one write out to thousands of watchers must
/// not hold up raft or the front. It reads history from the store, which notifies it of every
/// applied batch.
fn watch_hub(
    cfg: &Config,
    mailbox: AddressReceiver<WatchHubActor>,
    a: &Addrs,
    member: MemberIdentity,
    current_revision: i64,
) {
    let config = HubConfig {
        max_request_bytes: cfg.flags.max_request_bytes,
        progress_interval: cfg.flags.experimental_watch_progress_notify_interval,
        member,
        ..HubConfig::default()
    };
    let (history, interest) = (a.reader.clone().recipient(), a.store.clone().recipient());
    run_on_own_thread(mailbox, move || {
        WatchHubActor::new(config, history, current_revision).with_interest(interest)
    });
}

/// What consensus started besides the raft node.
struct Consensus {
    wal: Addr<WalActor>,
    transport: Addr<TransportActor>,
    learner: tokio::sync::watch::Receiver<bool>,
    /// The raft node's current leader (0 while there is none).
    leader: tokio::sync::watch::Receiver<u64>,
}

/// Consensus: the raft node, its WAL writer (on raft's thread: small Readies are written in
/// place, large ones and releases move to a blocking-pool thread, see actcd_wal), the transport
/// to the other members, and the peer listener.
#[allow(clippy::too_many_arguments)] // one builder, the whole subsystem's inputs
fn consensus(
    cfg: &Config,
    peer_listeners: Vec<(String, PeerListener)>,
    mailbox: Context<RaftActor>,
    raft_node: RaftNode,
    wal: Wal,
    members: &[MemberRecord],
    a: &Addrs,
    lessor: &Addr<LessorActor<TokioClock>>,
    (checker, backend): (&Addr<CorruptionChecker>, &Addr<BackendActor>),
    supervisor: &Addr<Supervisor>,
) -> Consensus {
    let wal = WalActor::new(wal).start();
    let (learner_tx, learner) = tokio::sync::watch::channel(false);
    let (leader_tx, leader) = tokio::sync::watch::channel(0);
    let transport = TransportActor::new(cfg.cluster_id)
        .with_tls(cfg.peer_tls.clone())
        .with_local_addr(cfg.peer_local_addr)
        .reporting_to(a.raft.clone().recipient())
        .with_snapshots(a.store.clone().recipient(), a.raft.clone().recipient())
        .start();
    let peers = RaftPeers {
        wal: wal.clone().recipient(),
        release: wal.clone().recipient(),
        applier: a.applier.clone().recipient(),
        progress: a.preflight.clone().recipient(),
        sync_storage: a.store.clone().recipient(),
        outbox: Some(transport.clone().recipient()),
        leadership: Some(lessor.clone().recipient()),
        peer_book: Some(transport.clone().recipient()),
        snapshots: Some(transport.clone().recipient()),
        install: Some(a.applier.clone().recipient()),
        learner: Some(learner_tx),
        leader: Some(leader_tx),
        fatal: supervisor.clone().recipient(),
        shutdown: supervisor.clone().recipient(),
    };
    let (snapshot_count, catchup) = (cfg.flags.snapshot_count, cfg.flags.snapshot_catchup_entries);
    mailbox.run(
        RaftActor::new(raft_node, peers, snapshot_count, catchup)
            .with_proposal_ttl(cfg.request_timeout())
            .with_pipeline_depth(
                env_count("ACTCD_RAFT_PIPELINE").unwrap_or(actcd_raft::DEFAULT_PIPELINE_DEPTH),
            )
            .with_read_ids(actcd_types::ids::IdGenerator::new(cfg.member_id, now_ms())),
    );
    for m in members.iter().filter(|m| m.id != cfg.member_id) {
        transport.do_send(PeerChange::Upsert {
            id: m.id,
            urls: m.peer_urls.clone(),
        });
    }
    // A leader's store copy is received into the backend's directory, on the data's own
    // disk; one a crash left half-written is of no use.
    let snapshot_dir = cfg.data_dir.join("member").join("snap");
    let stray = actcd_types::snapshot_blob::remove_leftovers(&snapshot_dir);
    if stray > 0 {
        tracing::info!(
            files = stray,
            "removed snapshot copies a crash left half-received"
        );
    }
    serve_peer_urls(
        cfg,
        peer_listeners,
        PeerRoutes {
            step: a.raft.clone().recipient(),
            snapshot: Some(a.raft.clone().recipient()),
            // A store copy can outgrow the quota a little (deletes and compactions still run
            // under NOSPACE): twice it, and 256 MiB more, bounds it without refusing a real one.
            snapshot_limit: usize::try_from(
                cfg.quota_bytes()
                    .saturating_mul(2)
                    .saturating_add(256 << 20),
            )
            .unwrap_or(usize::MAX),
            snapshot_dir,
            prepare: Some(backend.clone().recipient()),
            members: Some(a.applier.clone().recipient()),
            renew_lease: Some(lessor.clone().recipient()),
            lease_ttl: Some(lessor.clone().recipient()),
            learner_ready: Some(a.raft.clone().recipient()),
            hash_kv: Some(checker.clone().recipient()),
        },
        cfg.cluster_id,
    );
    Consensus {
        wal,
        transport,
        learner,
        leader,
    }
}

/// The applier, which owns the alarms, the members and the leases, and its chain's peers: the
/// store for key-space runs and revoked leases' keys, the auth store for auth entries (their
/// view judges the entries after them), raft for applied membership changes, the lessor for
/// applied lease changes.
fn apply(
    mailbox: Context<ApplierActor>,
    consistent_index: u64,
    (alarms, members, leases, engine): (Alarms, Membership, Leases, Arc<dyn ReadEngine>),
    (a, lessor): (&Addrs, &Addr<LessorActor<TokioClock>>),
    (auth, auth_view): (&Addr<AuthActor>, SharedView),
    (identity, v2): (MemberIdentity, Option<&Addr<V2StoreActor>>),
    supervisor: &Addr<Supervisor>,
) -> CorruptFlag {
    let (corrupt_tx, corrupt) = tokio::sync::watch::channel(false);
    let applier = ApplierActor::new(
        Applier::new(consistent_index),
        ApplierPeers {
            chain: ChainPeers {
                store: a.store.clone().recipient(),
                delete_keys: a.store.clone().recipient(),
                revision: a.store.clone().recipient(),
                auth: auth.clone().recipient(),
                conf: Some(a.raft.clone().recipient()),
                lessor: Some(LessorLink {
                    granted: lessor.clone().recipient(),
                    revoked: lessor.clone().recipient(),
                    checkpointed: lessor.clone().recipient(),
                }),
                identity,
                v2: v2.map(|v| v.clone().recipient()),
            },
            raft: a.raft.clone().recipient(),
            install: Some(a.store.clone().recipient()),
            leased_keys: Some(a.store.clone().recipient()),
            reload_auth: Some(auth.clone().recipient()),
            reload_v2: v2.map(|v| v.clone().recipient()),
            conf_sync: Some(a.raft.clone().recipient()),
            fatal: supervisor.clone().recipient(),
        },
        auth_view,
    )
    .with_alarms(alarms, engine)
    .with_members(members)
    .with_leases(leases)
    .publishing_corrupt(corrupt_tx);
    mailbox.run(applier);
    corrupt
}

/// Preflight: validation, quota and the apply gap before anything is proposed.
fn admission(cfg: &Config, mailbox: Context<PreflightActor>, a: &Addrs) {
    let limits = Limits {
        max_request_bytes: cfg.flags.max_request_bytes,
        max_txn_ops: cfg.flags.max_txn_ops,
        quota_bytes: cfg.quota_bytes(),
        priority_requests: cfg.gates.enabled(crate::config::gates::PRIORITY_REQUEST),
    };
    mailbox.run(
        PreflightActor::new(
            limits,
            PreflightPeers {
                propose: a.raft.clone().recipient(),
                register: a.applier.clone().recipient(),
                cancel: a.applier.clone().recipient(),
            },
        )
        .with_member(cfg.member_id)
        .with_store_status(a.store.clone().recipient())
        .with_conf_changes(a.raft.clone().recipient()),
    );
}

/// How often the scrub may take a step (one step: at most 1,000 records or 4 MiB).
const SCRUB_TICK: Duration = Duration::from_secs(1);

/// Every periodic message comes from one ticker, the only place real time enters the actors
/// (see `ticker.rs` for each period and why); the auto-compactor, when on, is one of its
/// targets.
fn ticks(
    cfg: &Config,
    a: &Addrs,
    lessor: &Addr<LessorActor<TokioClock>>,
    backend: &Addr<BackendActor>,
    (checker, scrubber): (&Addr<CorruptionChecker>, Option<Recipient<ScrubTick>>),
    supervisor: &Addr<Supervisor>,
) {
    let mut ticker = Ticker::new()
        .every(cfg.tick(), Periodic::Raft(a.raft.clone().recipient()))
        .every(
            Duration::from_millis(500),
            Periodic::Lessor(lessor.clone().recipient()),
        )
        .every(
            cfg.backend_batch_interval(),
            Periodic::BackendBatch(BackendBatch {
                store: a.store.clone().recipient(),
                backend: backend.clone().recipient(),
                status: a.store.clone().recipient(),
                quota: a.preflight.clone().recipient(),
                fatal: supervisor.clone().recipient(),
            }),
        );
    let periodic = cfg.flags.experimental_corrupt_check_time;
    if !periodic.is_zero() {
        tracing::info!(interval = ?periodic, "enabled corruption checking");
        ticker = ticker.every(
            periodic,
            Periodic::Corrupt(checker.clone().recipient(), Check::Periodic),
        );
    }
    let compact = cfg.flags.experimental_compact_hash_check_time;
    if cfg.flags.experimental_compact_hash_check_enabled && !compact.is_zero() {
        tracing::info!(interval = ?compact, "enabled compaction hash check");
        ticker = ticker.every(
            compact,
            Periodic::Corrupt(checker.clone().recipient(), Check::CompactHash),
        );
    }
    if let Some(scrubber) = scrubber {
        ticker = ticker.every(SCRUB_TICK, Periodic::Scrub(scrubber));
    }
    if let Some(mode) = cfg.auto_compaction {
        let schedule = actcd_compactor::Schedule::new(mode, Duration::ZERO);
        let every = schedule.tick_interval();
        let compactor = actcd_compactor::CompactorActor::new(
            schedule,
            actcd_compactor::CompactorPeers {
                raft: a.raft.clone().recipient(),
                store: a.store.clone().recipient(),
                submit: a.preflight.clone().recipient(),
                member_id: cfg.member_id,
            },
            // Request ids of its own: the front's carry the member id's low bits on top.
            actcd_types::ids::IdGenerator::new(cfg.member_id ^ 0x8000, now_ms()),
        )
        .start();
        tracing::info!(?mode, "auto compaction on");
        ticker = ticker.every(every, Periodic::Compactor(compactor.recipient()));
    }
    ticker.start();
}

/// Where the client side's calls go.
fn routes(
    a: Addrs,
    c: Consensus,
    lessor: Addr<LessorActor<TokioClock>>,
    auth: Addr<AuthActor>,
    (backend, views): (Addr<BackendActor>, ReadViews),
    (actors, corrupt): (Vec<ActorProbe>, CorruptFlag),
) -> PipelineRoutes {
    PipelineRoutes {
        submit: a.preflight.recipient(),
        read_index: a.raft.clone().recipient(),
        reads: Arc::new(views),
        store_status: a.store.clone().recipient(),
        hash_kv: a.reader.clone().recipient(),
        raft_status: a.raft.clone().recipient(),
        renew_lease: lessor.clone().recipient(),
        lease_ttl: lessor.clone().recipient(),
        list_leases: lessor.recipient(),
        lease_keys: a.applier.clone().recipient(),
        open_watch: a.hub.clone().recipient(),
        watch_request: a.hub.clone().recipient(),
        close_watch: a.hub.recipient(),
        check_password: auth.clone().recipient(),
        hash_password: auth.clone().recipient(),
        draft_token: auth.clone().recipient(),
        sign_token: auth.clone().recipient(),
        token_used: auth.clone().recipient(),
        connect_auth: auth.recipient(),
        members: a.applier.clone().recipient(),
        transfer_leader: a.raft.clone().recipient(),
        peer_activity: c.transport.clone().recipient(),
        learner_ready: a.raft.clone().recipient(),
        learner: c.learner,
        leader: c.leader,
        corrupt,
        leader_call: c.transport.recipient(),
        alarms: a.applier.clone().recipient(),
        hash_backend: a.store.clone().recipient(),
        snapshot: a.store.clone().recipient(),
        defragment: a.store.clone().recipient(),
        fsync_stats: c.wal.recipient(),
        actors,
        commit_stats: backend.recipient(),
        v2: None,
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// gRPC worker threads of their own, or 0: serve gRPC on the actors' System thread.
///
/// On 2 cores the front shares the actors' thread, and so does the MVCC store: a request then
/// reaches preflight, raft, the lessor and the store as mailbox pushes instead of thread
/// wake-ups, and the second core is left to the WAL's fsyncs of large Readies, the backend
/// sync, the watch hub and the clients. Measured on 2 vCPUs in the same runs against etcd 3.5.1:
/// - front shared, against one front thread of its own: put at 100 clients 33k → 39k/s,
///   serializable range 61k → 78k/s, keepalive 118k → 171k/s, single-client put p50 0.27 →
///   0.24 ms;
/// - store shared too, against the store on its own thread: put at 100 clients 31k → 42k/s,
///   linearizable range 59k → 70k/s, single-client put p50 0.25–0.31 → 0.23–0.25 ms.
///
/// With more cores the front gets all but two of them and the store its own thread.
/// `ACTCD_FRONT_THREADS` overrides (0 = share).
///
/// Where the shared thread's time goes (issue 27; release build, put at 100 clients on 10
/// connections, 2 cores, `perf record --call-graph dwarf` of the member, the actors thread's
/// samples grouped by the innermost crate on their stack): the HTTP/2 and gRPC wire (h2,
/// hyper, tonic, the codecs, the `:authority` layer, the byte counting) 51%, actix and tokio
/// scheduling 26%, the front's services and pipeline 8%, and the serial core 15% (MVCC 5.3%,
/// raft 4.8%, applier 3.1%, preflight 1.4%, WAL 0.6%): about 13 µs of the 87 µs the thread
/// spends per put. The thread does 89–91% of the member's CPU, so the member runs as fast on
/// 1 CPU as on 2 (`benches/compare-etcd.sh --cores "1 2"`: 0.98×; etcd 3.5.1 1.23–1.39×).
/// One front thread of its own moves 61% of the CPU onto it but costs 90 → 130 µs per put in
/// hand-offs (a mailbox push and a oneshot wake-up per request, each now crossing threads).
/// A helper thread beside the shared one (`front_helpers`) lets the member grow with cores;
/// its price is measured there.
pub(crate) fn front_threads() -> usize {
    env_count("ACTCD_FRONT_THREADS").unwrap_or_else(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        cores.saturating_sub(2)
    })
}

/// Threads that serve gRPC beside the actors' System thread when the front shares it
/// (`front_threads() == 0`): each accepts on clones of the same listening sockets, so a
/// connection goes to whichever thread waits in `accept` first, and the requests of a helper's
/// connections reach the actors across threads. `ACTCD_FRONT_HELPERS` sets it; default 0.
///
/// Measured for issue 27 (release build, 2 cores, `benches/compare-etcd.sh --cores "1 2"`,
/// put at 100 clients on 10 connections, two runs each, against etcd 3.5.1 in the same runs):
/// - one helper makes the member grow with cores: 1 → 2 CPUs 1.33× and 1.31× (without: 0.96×
///   and 0.90×; etcd 1.41–1.47×), the busiest thread's share of the member's CPU 52–58%
///   (without: 91%), the rest on the helper;
/// - and costs CPU: 85–97 µs per put on 2 CPUs against 72–78 without, 10–30% more per
///   request in the wider A/B (put, ranges, txn-put, keepalives: the hand-offs of the
///   helper's requests, a mailbox push and a oneshot wake-up each crossing threads), for
///   throughput within the runs' spread of the shared layout's on this machine, where the load
///   generator takes the second core;
/// - pinned to one CPU the member sees `available_parallelism() == 1`; a helper there only
///   adds hand-offs (9.1k against 11.9k puts/s), so it is for machines with cores to spare.
///
/// Hence off by default: on 2 cores the shared thread does more per CPU second, and with more
/// cores the front has threads of its own anyway (`front_threads`).
///
/// The extra CPU is not wake-ups: `strace -c -f` of the member at put100 with one helper counts
/// 0.16 `epoll_wait`, 0.08 `futex` and 0.13 eventfd `write` per put (the threads are busy, so
/// most hand-offs find their receiver awake). Batching the hand-offs would save little of it;
/// what remains is work done twice per scheduling round on two runtimes and data moving
/// between cores.
pub(crate) fn front_helpers() -> usize {
    env_count("ACTCD_FRONT_HELPERS").unwrap_or(0)
}

/// A thread-layout override from the environment: a count, or `None` when unset or not one.
fn env_count(name: &str) -> Option<usize> {
    std::env::var(name).ok()?.parse().ok()
}

/// etcd's `configurePeerListeners`: binds every `--listen-peer-urls` URL before any actor
/// starts — a TCP port, or for `unix://` and `unixs://` the socket file the URL's host names
/// (a stale one removed first; removed again at stop through `files`). A URL that cannot be
/// bound stops the start with etcd's `creating peer listener failed`; the socket files made
/// before it are removed when `files` is dropped.
pub(crate) fn bind_peer_urls(
    cfg: &Config,
    files: &mut SocketFiles,
) -> Result<Vec<(String, PeerListener)>, StartError> {
    let mut bound = Vec::new();
    for url in cfg
        .flags
        .listen_peer_urls
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
    {
        let failed = |reason: String| {
            tracing::error!(error = %reason, "creating peer listener failed");
            StartError::Listen {
                url: url.to_string(),
                reason,
            }
        };
        let listener = match actcd_transport::unix_socket_host(url) {
            Some(path) => PeerListener::Unix(
                files
                    .bind(path)
                    .map_err(|e| failed(format!("listen unix {path}: {e}")))?,
            ),
            None => {
                let addr = actcd_front::parse_url(url)
                    .ok_or_else(|| failed("not an http://host:port peer URL".into()))?;
                PeerListener::Tcp(
                    crate::listen::listen(addr, cfg.flags.socket_reuse_port)
                        .map_err(|e| failed(format!("listen tcp {addr}: {e}")))?,
                )
            }
        };
        bound.push((url.to_string(), listener));
    }
    Ok(bound)
}

/// Serves the bound peer listeners for the other members' raft messages (on the actors'
/// thread: each message is one `Step` into the raft node's mailbox). An `https://` URL serves
/// TLS; a unix socket is served plain, as etcd's unix listener is.
fn serve_peer_urls(
    cfg: &Config,
    listeners: Vec<(String, PeerListener)>,
    routes: PeerRoutes,
    cluster_id: u64,
) {
    for (url, listener) in listeners {
        tracing::info!(%url, "listening for peers");
        let routes = routes.clone();
        let tls = cfg.peer_tls.clone().filter(|_| url.starts_with("https://"));
        actix::spawn(async move {
            let serve = serve_peers(
                listener,
                routes,
                cluster_id,
                tls.as_ref(),
                std::future::pending(),
            );
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "peer server failed");
            }
        });
    }
}
