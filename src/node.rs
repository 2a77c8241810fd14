//! Start-up, wiring and shutdown of one member.
//!
//! Recovery order (DESIGN.md, "Recovery"): open the backend → rebuild the key index and read the
//! consistent index → open the WAL (or create it) → build the raft node from the WAL's snapshot
//! mark, hard state and entries; raft then re-delivers committed entries above the consistent
//! index and the applier applies them.

use std::sync::Arc;
use std::sync::mpsc;

use actcd_applier::Membership;
use actcd_auth::AuthActor;
use actcd_backend::{BackendOptions, LmdbEngine};
use actcd_mvcc::Store;
use actcd_raft::{NodeConfig, RaftNode, Recovered};
use actcd_types::MemberIdentity;
use actcd_types::msg::MemberRecord;
use actcd_types::storage::{KvEngine, StorageError, Table, WriteTxn};
use actcd_wal::Wal;
use actix::prelude::*;

use crate::config::Config;
use crate::supervisor::{StopActors, Supervisor};

/// The etcd version actcd reports (Status, `/version`, `etcd_server_version`, `--version`):
/// etcd 3.7's API, RangeStream included, so Kubernetes 1.37 uses it and its consistent reads
/// from the watch cache (docs/compatibility.md, "The version actcd reports").
pub const API_VERSION: &str = "3.7.1";

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot open backend in {path}: {reason}")]
    Backend { path: String, reason: String },
    #[error("cannot open WAL: {0}")]
    Wal(String),
    #[error("cannot start raft node: {0}")]
    Raft(String),
    #[error("cannot listen on {url}: {reason}")]
    Listen { url: String, reason: String },
    #[error("{0}")]
    Runtime(String),
    #[error("cannot join the existing cluster: {0}")]
    Join(String),
    /// The initial corruption check found a peer whose data differ (etcd's
    /// `found data inconsistency with peers`).
    #[error("{0}")]
    Corrupt(String),
    /// An actor reported a fatal error and the member was shut down (the supervisor logged it).
    #[error("{actor}: {error}")]
    Fatal { actor: &'static str, error: String },
}

fn wal_metadata(cfg: &Config) -> Vec<u8> {
    let mut m = Vec::with_capacity(16);
    m.extend_from_slice(&cfg.member_id.to_be_bytes());
    m.extend_from_slice(&cfg.cluster_id.to_be_bytes());
    m
}

fn parse_wal_metadata(m: &[u8]) -> Option<(u64, u64)> {
    let member = u64::from_be_bytes(m.get(0..8)?.try_into().ok()?);
    let cluster = u64::from_be_bytes(m.get(8..16)?.try_into().ok()?);
    Some((member, cluster))
}

/// Runs the member until SIGINT/SIGTERM.
/// Opens (creating) the member's backend; returns it with the backend and WAL directories.
fn open_backend(
    cfg: &Config,
) -> Result<(Arc<LmdbEngine>, std::path::PathBuf, std::path::PathBuf), StartError> {
    open_backend_at(cfg, "snap")
}

/// [`open_backend`] with the backend in `member/<name>`.
fn open_backend_at(
    cfg: &Config,
    name: &str,
) -> Result<(Arc<LmdbEngine>, std::path::PathBuf, std::path::PathBuf), StartError> {
    let member_dir = cfg.data_dir.join("member");
    let snap_dir = member_dir.join(name);
    let wal_dir = cfg.wal_dir();
    let backend_error = |path: &std::path::Path, e: &dyn std::fmt::Display| StartError::Backend {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    // 0700, as etcd makes them (CVE-2020-15113); a wider existing one is reported, as etcd
    // 3.4.13+ reports it, and kept.
    for dir in [&cfg.data_dir, &member_dir] {
        match actcd_types::private_fs::touch_private_dir(dir) {
            Ok(None) => {}
            Ok(Some(warning)) => tracing::warn!(error = %warning, "check file permission"),
            Err(e) => return Err(backend_error(dir, &e)),
        }
    }
    let options = BackendOptions {
        map_size: cfg.backend_map_size(),
        ..BackendOptions::default()
    };
    let engine = LmdbEngine::open(&snap_dir, options).map_err(|e| backend_error(&snap_dir, &e))?;
    Ok((Arc::new(engine), snap_dir, wal_dir))
}

/// The members `--initial-cluster` names, as a new cluster records them.
fn initial_members(cfg: &Config) -> Vec<MemberRecord> {
    cfg.members
        .iter()
        .map(|m| MemberRecord {
            id: m.id,
            name: m.name.clone(),
            peer_urls: m.peer_urls.clone(),
            ..Default::default()
        })
        .collect()
}

/// The members `engine` records; a data dir that has none records `initial` first, with one
/// commit straight into the engine before any actor runs: a new cluster's members, or those a
/// joining member fetched. A data dir that has members keeps them: after that the applied
/// membership is the truth.
fn bootstrap_members(
    engine: &dyn KvEngine,
    initial: Vec<MemberRecord>,
) -> Result<Membership, String> {
    let mut members = actcd_applier::load_members(engine).map_err(|e| e.to_string())?;
    if !members.is_empty() {
        return Ok(members);
    }
    let mut ops = Vec::new();
    members.bootstrap(initial, &mut ops);
    let mut txn = engine.write().map_err(|e| e.to_string())?;
    actcd_types::storage::write_ops(&mut *txn, &ops, None).map_err(|e| e.to_string())?;
    txn.commit().map_err(|e| e.to_string())?;
    Ok(members)
}

/// `--experimental-bootstrap-defrag-threshold-megabytes`: before anything reads the backend,
/// defragment it when that frees at least the threshold, as etcd does at start-up.
fn bootstrap_defrag(cfg: &Config, engine: &LmdbEngine) -> Result<(), actcd_backend::BackendError> {
    let threshold = cfg
        .flags
        .experimental_bootstrap_defrag_threshold_megabytes
        .saturating_mul(1024 * 1024);
    if threshold == 0 {
        return Ok(());
    }
    let (size, in_use) = engine.disk_size()?;
    let freeable = size.saturating_sub(in_use);
    if freeable < threshold {
        tracing::info!(
            current_db_size_bytes = size,
            current_db_size_in_use_bytes = in_use,
            defrag_threshold_bytes = threshold,
            "skipping defragmentation"
        );
        return Ok(());
    }
    let (before, after) = engine.defragment()?;
    tracing::info!(
        current_db_size_bytes = before,
        defragmented_db_size_bytes = after,
        "defragmented the backend at start-up"
    );
    Ok(())
}

/// `--force-new-cluster`: this member's data as a one-member cluster, as etcd does it. Every
/// other member is removed from the recorded membership (into `members_removed`, so none can
/// come back) with one commit before any actor runs; raft's configuration follows from it.
/// The member and cluster ids stay, and so does every key.
fn force_new_cluster(
    engine: &dyn KvEngine,
    mut members: Membership,
    me: u64,
) -> Result<Membership, String> {
    use actcd_proto::actcdpb::{MemberChange, member_change::Kind};
    let others: Vec<u64> = members
        .list()
        .iter()
        .map(|m| m.id)
        .filter(|&id| id != me)
        .collect();
    if others.is_empty() {
        return Ok(members);
    }
    let mut ops = Vec::new();
    for id in &others {
        let change = MemberChange {
            kind: Kind::Remove as i32,
            member_id: *id,
            peer_urls: vec![],
        };
        members
            .apply(&change, &mut ops)
            .map_err(|e| e.to_string())?;
    }
    let mut txn = engine.write().map_err(|e| e.to_string())?;
    actcd_types::storage::write_ops(&mut *txn, &ops, None).map_err(|e| e.to_string())?;
    txn.commit().map_err(|e| e.to_string())?;
    tracing::warn!(
        removed = ?others.iter().map(|id| format!("{id:x}")).collect::<Vec<_>>(),
        "--force-new-cluster: starting as a one-member cluster; the other members are removed"
    );
    Ok(members)
}

/// Where [`restore`]'s records go, one at a time: table, key, value (borrowed for the call).
pub type RestorePut<'f> = dyn FnMut(Table, &[u8], &[u8]) -> Result<(), StorageError> + 'f;

/// A restore commits every this many bytes of keys and values: LMDB (without `WRITEMAP`)
/// holds a write transaction's pages in memory until it commits, each large value's overflow
/// pages included, so one commit would hold the whole snapshot.
const RESTORE_BATCH_BYTES: usize = 64 << 20;

/// Makes `cfg.data_dir` a new member of a new cluster (the one `cfg`'s `--initial-cluster`
/// and token describe) whose state is the records `fill` hands to the `put` it is given, as
/// it reads them: what a snapshot restore does. The data dir must be empty or absent. The
/// records go into `member/snap.restoring`, a commit every [`RESTORE_BATCH_BYTES`], and the
/// directory becomes the backend (`member/snap`) only once they are all in; the new cluster's
/// members are recorded as a fresh start records them; the WAL is created last. So a crash
/// part-way leaves a directory that is refused (not empty) rather than a member with half its
/// state, and a restore that fails (`fill`'s error, a damaged file) leaves the data dir as it
/// found it. Starting the member from it then starts the cluster from an empty log at that
/// state.
pub fn restore<E: std::fmt::Display>(
    cfg: &Config,
    fill: impl FnOnce(&mut RestorePut<'_>) -> Result<(), E>,
) -> Result<(), StartError> {
    let not_empty = std::fs::read_dir(&cfg.data_dir)
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    if not_empty {
        return Err(StartError::Runtime(format!(
            "data-dir {:?} not empty or could not be read",
            cfg.data_dir.display().to_string()
        )));
    }
    let existed = cfg.data_dir.exists();
    let restored = restore_into(cfg, fill);
    if restored.is_err() {
        // Empty or absent before: whatever is there now is ours.
        if existed {
            for entry in std::fs::read_dir(&cfg.data_dir)
                .into_iter()
                .flatten()
                .flatten()
            {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        } else {
            let _ = std::fs::remove_dir_all(&cfg.data_dir);
        }
    }
    restored
}

fn restore_into<E: std::fmt::Display>(
    cfg: &Config,
    fill: impl FnOnce(&mut RestorePut<'_>) -> Result<(), E>,
) -> Result<(), StartError> {
    let (engine, snap_dir, wal_dir) = open_backend_at(cfg, "snap.restoring")?;
    let backend_error = |e: &dyn std::fmt::Display| StartError::Backend {
        path: snap_dir.display().to_string(),
        reason: e.to_string(),
    };
    {
        let mut txn: Option<Box<dyn WriteTxn + '_>> = None;
        let mut pending = 0usize;
        let mut failed: Option<String> = None;
        let mut put = |t: Table, k: &[u8], v: &[u8]| -> Result<(), StorageError> {
            let mut put_one = || -> Result<(), StorageError> {
                let w = match &mut txn {
                    Some(w) => w,
                    None => txn.insert(engine.write()?),
                };
                w.put(t, k, v)?;
                pending += k.len() + v.len();
                if pending >= RESTORE_BATCH_BYTES {
                    pending = 0;
                    if let Some(w) = txn.take() {
                        w.commit()?;
                    }
                }
                Ok(())
            };
            put_one().inspect_err(|e| failed = Some(e.to_string()))
        };
        let filled = fill(&mut put);
        if let Some(reason) = failed {
            return Err(backend_error(&reason));
        }
        filled.map_err(|e| StartError::Runtime(e.to_string()))?;
        if let Some(w) = txn.take() {
            w.commit().map_err(|e| backend_error(&e))?;
        }
    }
    engine.force_sync().map_err(|e| backend_error(&e))?;
    drop(engine);
    let restoring = snap_dir.clone();
    let (engine, snap_dir, _) = {
        let snap = restoring.with_file_name("snap");
        std::fs::rename(&restoring, &snap).map_err(|e| backend_error(&e))?;
        open_backend(cfg)?
    };
    let backend_error = |e: &dyn std::fmt::Display| StartError::Backend {
        path: snap_dir.display().to_string(),
        reason: e.to_string(),
    };
    let identity = MemberIdentity {
        cluster_id: cfg.cluster_id,
        member_id: cfg.member_id,
    };
    // Opening the store finishes a compaction the records say was under way, as a start would.
    Store::open(engine.clone() as Arc<dyn KvEngine>, identity).map_err(|e| backend_error(&e))?;
    bootstrap_members(&*engine, initial_members(cfg)).map_err(|e| backend_error(&e))?;
    engine.force_sync().map_err(|e| backend_error(&e))?;
    Wal::create(&wal_dir, &wal_metadata(cfg)).map_err(|e| StartError::Wal(e.to_string()))?;
    Ok(())
}

pub fn run(cfg: Config) -> Result<(), StartError> {
    run_until(cfg, wait_for_signal())
}

/// Runs the member until `stop` resolves (a signal for the daemon; a channel for in-process
/// benches and tests), this member's removal from the cluster, or an actor's fatal error (see
/// `supervisor.rs`). Returns once every actor has stopped and the backend is synced: with
/// [`StartError::Fatal`] if an actor reported a fatal error (must not run inside a tokio
/// runtime: it builds its own).
pub fn run_until(
    mut cfg: Config,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    if cfg
        .gates
        .enabled(crate::config::gates::SET_MEMBER_LOCAL_ADDR)
    {
        crate::local_addr::log_choice(
            &crate::config::split_urls(&cfg.flags.initial_advertise_peer_urls),
            cfg.peer_local_addr,
        );
    }
    cfg.log_quota();
    let (engine, snap_dir, wal_dir) = open_backend(&cfg)?;
    bootstrap_defrag(&cfg, &engine).map_err(|e| StartError::Backend {
        path: snap_dir.display().to_string(),
        reason: e.to_string(),
    })?;
    // A member that has a WAL keeps the identity it was created with, whatever the
    // --initial-cluster flags say now (etcd ignores them on restart too).
    let fresh = !Wal::exists(&wal_dir);
    // A member joining an existing cluster learns its id, the cluster's and the members from
    // the cluster itself (etcd's GetClusterFromRemotePeers), before its WAL records them.
    let joined = if fresh && cfg.flags.initial_cluster_state == "existing" {
        Some(join_existing(&mut cfg)?)
    } else {
        None
    };
    let (wal, mut recovered) = if !fresh {
        let (wal, c) = Wal::open(&wal_dir).map_err(|e| StartError::Wal(e.to_string()))?;
        let (member_id, cluster_id) = parse_wal_metadata(&c.metadata)
            .ok_or_else(|| StartError::Wal("metadata is not an actcd member identity".into()))?;
        if member_id != cfg.member_id {
            tracing::info!(
                member_id = format!("{member_id:x}"),
                "restarting with the member id recorded in the WAL"
            );
            if let Some(me) = cfg.members.iter_mut().find(|m| m.id == cfg.member_id) {
                me.id = member_id;
            }
            cfg.member_id = member_id;
        }
        cfg.cluster_id = cluster_id;
        let rec = Recovered {
            snapshot: c.snapshot.map(|s| (s.index, s.term, s.conf_state)),
            hard_state: c.hard_state,
            entries: c.entries,
        };
        (wal, rec)
    } else {
        let wal = Wal::create(&wal_dir, &wal_metadata(&cfg))
            .map_err(|e| StartError::Wal(e.to_string()))?;
        (wal, Recovered::default())
    };
    let mut wal = wal;
    if cfg.flags.unsafe_no_fsync {
        tracing::warn!(
            "--unsafe-no-fsync: the WAL is not fsynced; a crash may lose acknowledged writes"
        );
        wal.set_unsafe_no_fsync(true);
    }
    let identity = MemberIdentity {
        cluster_id: cfg.cluster_id,
        member_id: cfg.member_id,
    };
    // The membership is applied state: a new member records the initial cluster (or the one
    // it joined) once; after that the recorded copy is the truth (the applier's, once the
    // actors run), and raft's configuration starts from it.
    let initial = joined.unwrap_or_else(|| initial_members(&cfg));
    let mut membership =
        bootstrap_members(&*engine, initial).map_err(|reason| StartError::Backend {
            path: snap_dir.display().to_string(),
            reason,
        })?;
    if cfg.flags.force_new_cluster && !fresh {
        membership = force_new_cluster(&*engine, membership, cfg.member_id).map_err(|reason| {
            StartError::Backend {
                path: snap_dir.display().to_string(),
                reason,
            }
        })?;
        // Entries the old cluster never committed are dropped, as etcd drops them.
        let commit = recovered.hard_state.commit;
        recovered.entries.retain(|e| e.index <= commit);
    }
    // etcd 3.6's `ValidateMaxLearnerConfig`: no start with more learners than `--max-learners`.
    let membership = membership.with_max_learners(cfg.flags.max_learners);
    membership
        .check_max_learners()
        .map_err(|e| StartError::Runtime(e.to_string()))?;
    let store = Store::open(engine.clone() as Arc<dyn KvEngine>, identity).map_err(|e| {
        StartError::Backend {
            path: snap_dir.display().to_string(),
            reason: e.to_string(),
        }
    })?;
    let consistent_index = store.consistent_index();
    // The auth store loads its tables from the same committed state.
    let tokens = cfg
        .token_provider()
        .map_err(|e| StartError::Runtime(e.to_string()))?;
    let auth = AuthActor::open(
        engine.clone() as Arc<dyn actcd_types::storage::ReadEngine>,
        cfg.flags.bcrypt_cost,
        tokens,
    )
    .map_err(|e| StartError::Backend {
        path: snap_dir.display().to_string(),
        reason: e.to_string(),
    })?;
    // The applier's alarms and leases, from the same committed state; the keys attached to
    // each lease from the store's live leased keys.
    let alarms = actcd_applier::load_alarms(&*engine).map_err(|e| StartError::Backend {
        path: snap_dir.display().to_string(),
        reason: e.to_string(),
    })?;
    let mut leases = actcd_applier::load_leases(&*engine).map_err(|e| StartError::Backend {
        path: snap_dir.display().to_string(),
        reason: e.to_string(),
    })?;
    leases.set_min_ttl(cfg.min_lease_ttl());
    leases.attach_all(store.leased_keys());
    let members = membership.list();
    if membership.is_removed(cfg.member_id) {
        return Err(StartError::Raft(
            "the member has been permanently removed from the cluster".into(),
        ));
    }
    // A restarted member keeps the identity in its data dir whatever the flags say, as etcd's
    // does; if it now advertises other peer URLs than the cluster knows it by, say so: the
    // others keep dialling the old ones until `member update`.
    if !fresh && let Some(me) = membership.get(cfg.member_id) {
        let advertised: Vec<String> = cfg
            .flags
            .initial_advertise_peer_urls
            .split(',')
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty())
            .collect();
        if !crate::config::same_urls(&me.peer_urls, &advertised) {
            tracing::warn!(
                data_dir = %cfg.data_dir.display(),
                member_id = format!("{:x}", cfg.member_id),
                known_peer_urls = %me.peer_urls.join(","),
                advertised = %advertised.join(","),
                "this data dir's member is known by other peer URLs than the ones advertised; peers keep using the known ones (etcdctl member update changes them)"
            );
        }
    }

    let node_cfg = NodeConfig {
        id: cfg.member_id,
        voters: members
            .iter()
            .filter(|m| !m.is_learner)
            .map(|m| m.id)
            .collect(),
        learners: members
            .iter()
            .filter(|m| m.is_learner)
            .map(|m| m.id)
            .collect(),
        election_tick: cfg.election_ticks(),
        fixed_election_timeout: None,
        heartbeat_tick: 1,
        pre_vote: cfg.flags.pre_vote,
        applied: consistent_index,
    };
    let mut raft_node =
        RaftNode::new(&node_cfg, recovered).map_err(|e| StartError::Raft(e.to_string()))?;
    // The WAL replayed up to a snapshot count of entries the state machine already holds.
    raft_node.trim_replayed(cfg.flags.snapshot_catchup_entries);
    // Reading the WAL and rebuilding the index freed far more than they keep; the member may
    // go quiet now, and nothing would return those pages to the system then.
    crate::allocator::give_back_freed();
    // Rebuilding the index read every page of the data file once; they stay in the page
    // cache, but need not stay mapped in this process.
    if let Err(e) = engine.release_mapped_pages() {
        tracing::warn!(error = %e, "could not release the data file's mapped pages");
    }
    // etcd's initial election tick advance, for a member of a larger cluster (one alone
    // campaigns at once). Only with pre-vote: etcd first waits for its peers' streams, so that
    // a leader's heartbeat can reach it before it campaigns; a pre-vote cannot disrupt a
    // leader the others still hear from, so here no wait is needed.
    if cfg.flags.initial_election_tick_advance && cfg.flags.pre_vote && node_cfg.voters.len() > 1 {
        raft_node.advance_ticks(cfg.election_ticks().saturating_sub(2));
    }
    tracing::info!(
        member_id = format!("{:x}", cfg.member_id),
        cluster_id = format!("{:x}", cfg.cluster_id),
        consistent_index,
        data_dir = %cfg.data_dir.display(),
        "starting member"
    );

    // Actors live on their own System thread; the addresses come back over a channel.
    let (routes_tx, routes_rx) = mpsc::channel();
    // The supervisor asks the client side to stop when an actor reports a fatal error or this
    // member was removed from the cluster, instead of serving errors forever.
    let (stop_serving_tx, stop_serving_rx) = tokio::sync::oneshot::channel::<()>();
    // The actors' thread ending early (a panic) stops the client side too.
    let (actors_done_tx, actors_done_rx) = tokio::sync::oneshot::channel::<()>();
    let actix_cfg = cfg.clone();
    let actix_engine = engine.clone();
    let actix_thread = std::thread::Builder::new()
        .name("actors".into())
        .spawn(move || {
            let sys = actix::System::new();
            let started = sys.block_on(async move {
                actix::spawn(crate::allocator::tend_this_thread());
                let supervisor = Supervisor::new(stop_serving_tx).start();
                let recovered = crate::wiring::Recovered {
                    engine: actix_engine,
                    store,
                    auth,
                    alarms,
                    leases,
                    wal,
                    raft_node,
                    consistent_index,
                    members: membership,
                };
                // etcd's configurePeerListeners, before anything serves: a peer URL that
                // cannot be bound stops the start.
                let mut peer_files = crate::serve::SocketFiles::default();
                let peer_listeners =
                    match crate::wiring::bind_peer_urls(&actix_cfg, &mut peer_files) {
                        Ok(l) => l,
                        Err(e) => {
                            // The socket files go before the error is told: the process
                            // exits as soon as the main thread hears it.
                            drop(peer_files);
                            let _ = routes_tx.send(Err(e));
                            return false;
                        }
                    };
                let (routes, initial_check) =
                    crate::wiring::start_actors(&actix_cfg, recovered, &supervisor, peer_listeners);
                let _ = routes_tx.send(Ok((
                    routes,
                    initial_check,
                    actix::System::current(),
                    supervisor,
                    peer_files,
                )));
                true
            });
            if !started {
                return Ok(());
            }
            let res = sys.run();
            let _ = actors_done_tx.send(());
            res
        })
        .map_err(|e| StartError::Runtime(e.to_string()))?;
    // The peer socket files are dropped (removed) last, once every listener is closed.
    let (routes, initial_check, system, supervisor, _peer_files) = routes_rx
        .recv()
        .map_err(|e| StartError::Runtime(e.to_string()))??;

    let stop = async move {
        tokio::select! {
            () = stop => {}
            _ = stop_serving_rx => {}
            _ = actors_done_rx => tracing::warn!("the actors stopped; shutting down"),
        }
    };
    let served = crate::serve::serve_clients(
        &cfg,
        (routes, initial_check),
        stop,
        system.arbiter().clone(),
    );
    // Clients are no longer served: the supervisor stops the actors and says whether one
    // failed (no answer: the actors' thread is already gone).
    let (reply, failure) = tokio::sync::oneshot::channel();
    supervisor.do_send(StopActors { reply });
    let failure = failure.blocking_recv();
    let _ = actix_thread.join();
    if let Err(e) = engine.force_sync() {
        tracing::warn!(error = %e, "final backend sync failed");
    }
    tracing::info!("stopped");
    served?;
    match failure {
        Ok(None) => Ok(()),
        Ok(Some(f)) => Err(StartError::Fatal {
            actor: f.actor,
            error: f.error,
        }),
        Err(_) => Err(StartError::Runtime(
            "the actors' thread ended unexpectedly".into(),
        )),
    }
}

/// Of the member lists peers answer (asked lazily, in order), the one a joining member judges
/// its flags against: the first that already lists it (`own_urls`), else the first. A peer
/// that has not applied the MemberAdd yet (a follower behind the leader) answers without it,
/// and judged as etcd judges the first answer, the start would fail with "member count is
/// unequal" although the cluster has the member.
fn member_list_to_judge(
    answers: impl Iterator<Item = actcd_proto::actcdpb::MembersReply>,
    own_urls: &[String],
) -> Option<actcd_proto::actcdpb::MembersReply> {
    let mut first = None;
    for r in answers {
        if r.members
            .iter()
            .any(|m| crate::config::same_urls(&m.peer_ur_ls, own_urls))
        {
            return Some(r);
        }
        if first.is_none() {
            tracing::info!("a peer's member list lacks this member yet; asking the others");
            first = Some(r);
        }
    }
    first
}

/// Asks the other members named in `--initial-cluster` for the cluster's members, checks them
/// against the flags as etcd does (same count, every member's peer URLs found), and takes this
/// member's id and the cluster's from the answer.
fn join_existing(cfg: &mut Config) -> Result<Vec<MemberRecord>, StartError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| StartError::Runtime(e.to_string()))?;
    let others: Vec<String> = cfg
        .members
        .iter()
        .filter(|m| m.id != cfg.member_id)
        .flat_map(|m| m.peer_urls.clone())
        .collect();
    let mut last_error = "no other member in --initial-cluster".to_string();
    let own_urls = cfg
        .members
        .iter()
        .find(|m| m.id == cfg.member_id)
        .map(|m| m.peer_urls.clone())
        .unwrap_or_default();
    let answers = others.iter().filter_map(|url| {
        match rt.block_on(actcd_transport::fetch_members(
            url,
            cfg.peer_tls.as_ref(),
            cfg.peer_local_addr,
        )) {
            Ok(r) => Some(r),
            Err(e) => {
                last_error = format!("{url}: {e}");
                None
            }
        }
    });
    let remote = member_list_to_judge(answers, &own_urls);
    let remote = remote.ok_or_else(|| {
        StartError::Join(format!(
            "cannot fetch cluster info from peer urls: {last_error}"
        ))
    })?;
    if remote.members.len() != cfg.members.len() {
        return Err(StartError::Join(format!(
            "error validating peerURLs: member count is unequal (--initial-cluster has {}, the cluster {})",
            cfg.members.len(),
            remote.members.len()
        )));
    }
    for local in &mut cfg.members {
        let found = remote
            .members
            .iter()
            .find(|r| crate::config::same_urls(&r.peer_ur_ls, &local.peer_urls))
            .ok_or_else(|| {
                StartError::Join(format!(
                    "error validating peerURLs: unmatched member while checking PeerURLs ({}={})",
                    local.name,
                    local.peer_urls.join(",")
                ))
            })?;
        if local.name == cfg.flags.name {
            if !found.name.is_empty() {
                return Err(StartError::Join(format!(
                    "member {:x} has already been bootstrapped",
                    found.id
                )));
            }
            cfg.member_id = found.id;
        }
        local.id = found.id;
    }
    cfg.cluster_id = remote.cluster_id;
    tracing::info!(
        member_id = format!("{:x}", cfg.member_id),
        cluster_id = format!("{:x}", cfg.cluster_id),
        "joining an existing cluster"
    );
    Ok(remote
        .members
        .into_iter()
        .map(|m| MemberRecord {
            id: m.id,
            name: m.name,
            peer_urls: m.peer_ur_ls,
            client_urls: m.client_ur_ls,
            is_learner: m.is_learner,
        })
        .collect())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers, run until killed.
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[cfg(test)]
mod join_tests {
    use actcd_proto::actcdpb::MembersReply;
    use actcd_proto::etcdserverpb::Member;

    use super::member_list_to_judge;

    fn list(urls: &[&str]) -> MembersReply {
        MembersReply {
            cluster_id: 1,
            members: urls
                .iter()
                .map(|u| Member {
                    peer_ur_ls: vec![(*u).to_owned()],
                    ..Default::default()
                })
                .collect(),
        }
    }

    const ME: &str = "http://127.0.0.1:3";

    #[test]
    fn a_list_that_holds_this_member_wins_over_an_earlier_one_that_does_not() {
        // The first peer has not applied the MemberAdd; the second (the leader) has.
        let lagging = list(&["http://127.0.0.1:1", "http://127.0.0.1:2"]);
        let current = list(&["http://127.0.0.1:1", "http://127.0.0.1:2", ME]);
        let got = member_list_to_judge(vec![lagging, current.clone()].into_iter(), &[ME.into()]);
        assert_eq!(got, Some(current));
    }

    #[test]
    fn the_first_answer_is_judged_when_none_holds_this_member_and_no_peer_is_asked_after_a_match() {
        let a = list(&["http://127.0.0.1:1"]);
        let b = list(&["http://127.0.0.1:2"]);
        let got = member_list_to_judge(vec![a.clone(), b].into_iter(), &[ME.into()]);
        assert_eq!(got, Some(a));
        let holds = list(&[ME]);
        let mut asked = 0;
        let answers = [holds.clone(), list(&[])]
            .into_iter()
            .inspect(|_| asked += 1);
        assert_eq!(member_list_to_judge(answers, &[ME.into()]), Some(holds));
        assert_eq!(asked, 1);
        assert_eq!(member_list_to_judge(std::iter::empty(), &[ME.into()]), None);
    }
}
