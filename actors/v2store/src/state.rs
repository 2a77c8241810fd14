//! [`V2State`]: the v2 tree and the v2 auth state, moved along the log by the entries the
//! applier hands over, and rendered as etcd's HTTP answers. No actor, no clock: the time an
//! answer's TTLs are counted from is passed in.

use actcd_proto::actcdpb::V2Request;
use actcd_types::storage::{Op, ReadTxn, StorageError};
use actcd_types::v2::V2Reply;
use actcd_v2auth::{AuthState, Proposal};
use actcd_v2tree::{Applied, Event, Store, V2Error, WatchStart, WatcherId};

use crate::journal::{self, Journal, Meta};

/// The method of the entries the applier makes of membership changes: etcd's v2 store records
/// members (and the cluster version) under its hidden `/0`, and each such write takes a store
/// index, which clients see in `X-Etcd-Index`. `path` names the write; `dir` says the change
/// completed the members' published attributes (etcd then records the cluster version).
pub const MEMBER: &str = "MEMBER";

/// Where each change's TTLs are counted from when the answer is rendered.
pub type Now = i64;

pub struct V2State {
    tree: Store,
    auth: AuthState,
    meta: Meta,
    journal: Journal,
    /// The last entry applied: `X-Raft-Index` and `X-Raft-Term` of reads.
    applied: (u64, u64),
}

impl std::fmt::Debug for V2State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("V2State")
            .field("index", &self.tree.index())
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

/// What applying one entry produced.
#[derive(Debug)]
pub struct Outcome {
    pub reply: V2Reply,
    /// The table writes that make it durable.
    pub ops: Vec<Op>,
    /// Events for registered watchers.
    pub notifications: Vec<(WatcherId, std::sync::Arc<Event>)>,
}

impl V2State {
    /// An empty store whose index already counts `members` member records, as etcd's v2
    /// store counts the initial members it records when a cluster starts.
    pub fn new(members: u64) -> Self {
        let mut tree = Store::new();
        for i in 0..members {
            tree.internal_change(&format!("/0/members/{i}/raftAttributes"));
        }
        Self {
            tree,
            auth: AuthState::new(),
            meta: Meta::default(),
            journal: Journal::default(),
            applied: (0, 0),
        }
    }

    /// The state the backend's table holds (checkpoint, then journal), or a new one counting
    /// `members` when the table is empty.
    pub fn load(txn: &dyn ReadTxn, members: u64) -> Result<Self, StorageError> {
        let loaded = journal::load(txn)?;
        let bad =
            |what: &str, e: &dyn std::fmt::Display| StorageError(format!("v2 store: {what}: {e}"));
        let mut state = match &loaded.tree {
            None => Self::new(members),
            Some(tree) => Self {
                tree: Store::recover(tree).map_err(|e| bad("tree", &e.to_json()))?,
                auth: match &loaded.auth {
                    Some(a) => AuthState::recover(a).map_err(|e| bad("auth", &e))?,
                    None => AuthState::new(),
                },
                meta: loaded.meta,
                journal: Journal::default(),
                applied: (loaded.meta.index, 0),
            },
        };
        state.meta = loaded.meta;
        let keys: Vec<(u64, u32)> = loaded.journal.iter().map(|(i, s, _)| (*i, *s)).collect();
        for (index, _, request) in loaded.journal {
            let now = request.time;
            state.apply_inner(index, 0, &request, now);
            state.tree.take_notifications();
        }
        state.journal = Journal::resume(keys);
        Ok(state)
    }

    /// Checkpoints every `every` journaled writes (tests; the default is etcd's snapshot count).
    #[must_use]
    pub fn checkpoint_every(mut self, every: usize) -> Self {
        self.journal.set_every(every);
        self
    }

    pub fn tree(&self) -> &Store {
        &self.tree
    }

    pub fn auth(&self) -> &AuthState {
        &self.auth
    }

    pub fn applied(&self) -> (u64, u64) {
        self.applied
    }

    /// Applies a committed entry: the answer, the writes that record it, and what registered
    /// watchers hear. A quorum read changes nothing and is not recorded.
    pub fn apply(&mut self, index: u64, term: u64, request: &V2Request, now: Now) -> Outcome {
        let reply = self.apply_inner(index, term, request, now);
        let mut ops = Vec::new();
        if request.method != "QGET" {
            ops.push(self.journal.record(index, request));
            if self.journal.checkpoint_due() {
                self.meta.index = index;
                ops.extend(
                    self.journal
                        .checkpoint(self.tree.save(), self.auth.save(), self.meta),
                );
            }
        }
        Outcome {
            reply,
            ops,
            notifications: self.tree.take_notifications(),
        }
    }

    fn apply_inner(&mut self, index: u64, term: u64, request: &V2Request, now: Now) -> V2Reply {
        self.applied = (index, term);
        match request.method.as_str() {
            "AUTH" => self.apply_auth(request),
            MEMBER => {
                self.tree.internal_change(&request.path);
                if request.dir && !self.meta.version_set {
                    self.meta.version_set = true;
                    self.tree.internal_change("/0/version");
                }
                self.reply_ok(200, String::new())
            }
            _ => match self.tree.apply_full(request, now) {
                Ok(Applied::Event(e)) => {
                    let status = if e.is_created() { 201 } else { 200 };
                    let body = format!("{}\n", e.to_json());
                    let mut reply = self.reply_ok(status, body);
                    reply.etcd_index = e.etcd_index;
                    reply
                }
                Ok(Applied::Synced(_)) => self.reply_ok(200, String::new()),
                Err(e) => self.error_reply(&e),
            },
        }
    }

    /// A v2 auth change: the proposal carries the op and how its answer is rendered.
    fn apply_auth(&mut self, request: &V2Request) -> V2Reply {
        let (status, headers, body) = match Proposal::decode(&request.auth_op) {
            Ok(p) => {
                let now_ms = u64::try_from(request.time / 1_000_000).unwrap_or(0);
                let guest_existed = self.auth.roles.contains_key(actcd_v2auth::GUEST_ROLE);
                let result = self.auth.apply(&p.op, now_ms);
                self.count_auth_writes(&p.op, &result, guest_existed);
                let mut a = p.render.render(result);
                if a.cluster_id {
                    // Filled in by the front, which knows the cluster id.
                    a.headers
                        .push(("X-Etcd-Cluster-Id".to_owned(), String::new()));
                }
                (a.status, a.headers, a.body)
            }
            Err(e) => (
                500,
                Vec::new(),
                format!("{{\"message\":\"{e}\"}}").into_bytes(),
            ),
        };
        V2Reply {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
            headers,
            etcd_index: self.tree.index(),
            raft_index: self.applied.0,
            raft_term: self.applied.1,
        }
    }

    /// etcd keeps v2 auth in its v2 store, so every auth change takes store indexes, which
    /// clients see: the first change that reaches the store creates the auth directories and
    /// the `enabled` flag (four writes); then each change is one write, except an enable
    /// that must also create the guest role (two). Counted here as hidden writes.
    fn count_auth_writes(
        &mut self,
        op: &actcd_v2auth::AuthOp,
        result: &Result<actcd_v2auth::Answer, actcd_v2auth::AuthError>,
        guest_existed: bool,
    ) {
        use actcd_v2auth::{AuthError as E, AuthOp};
        // Refusals etcd only finds by trying the store write (after making the directories).
        let reached_store = result.is_ok()
            || matches!(
                result,
                Err(E::UserExists(_)
                    | E::RoleExists(_)
                    | E::DeleteUserNotFound(_)
                    | E::DeleteRoleNotFound(_))
            );
        if reached_store && !self.meta.auth_dirs {
            self.meta.auth_dirs = true;
            for dir in ["/2", "/2/users/", "/2/roles/", "/2/enabled"] {
                self.tree.internal_change(dir);
            }
        }
        let writes = match (op, result) {
            (AuthOp::Enable, Ok(_)) if !guest_existed => 2,
            (_, Ok(_)) => 1,
            _ => 0,
        };
        for _ in 0..writes {
            self.tree.internal_change("/2/auth");
        }
    }

    fn reply_ok(&self, status: u16, body: String) -> V2Reply {
        V2Reply {
            status,
            body,
            headers: Vec::new(),
            etcd_index: self.tree.index(),
            raft_index: self.applied.0,
            raft_term: self.applied.1,
        }
    }

    pub fn error_reply(&self, e: &V2Error) -> V2Reply {
        V2Reply {
            status: e.http_status(),
            body: format!("{}\n", e.to_json()),
            headers: Vec::new(),
            etcd_index: e.index,
            raft_index: self.applied.0,
            raft_term: self.applied.1,
        }
    }

    /// A GET served from this member's tree.
    pub fn get(&self, path: &str, recursive: bool, sorted: bool, now: Now) -> V2Reply {
        match self.tree.get(path, recursive, sorted, now) {
            Ok(e) => {
                let mut reply = self.reply_ok(200, format!("{}\n", e.to_json()));
                reply.etcd_index = e.etcd_index;
                reply
            }
            Err(e) => self.error_reply(&e),
        }
    }

    pub fn watch(
        &mut self,
        path: &str,
        recursive: bool,
        stream: bool,
        since: u64,
    ) -> Result<WatchStart, V2Error> {
        self.tree.watch(path, recursive, stream, since)
    }

    pub fn cancel_watch(&mut self, id: WatcherId) {
        self.tree.cancel_watch(id);
    }

    pub fn watcher_start_index(&self, id: WatcherId) -> Option<u64> {
        self.tree.watcher_start_index(id)
    }

    /// Whether a SYNC at `now` would expire something.
    pub fn expiry_due(&self, now: Now) -> bool {
        self.tree.next_expiration().is_some_and(|at| at <= now)
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
