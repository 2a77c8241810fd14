//! How the v2 store is kept durable in the backend's `actcd_v2` table.
//!
//! The state is small next to the requests that change it only for small trees, and a whole
//! copy per write would cost every write the size of the tree. So the table holds a
//! checkpoint and a journal:
//!
//! - `c/tree` — the tree as `actcd_v2tree::Store::save` writes it (nodes, TTLs, index, the
//!   1000-event history, counters);
//! - `c/auth` — the v2 auth state as `actcd_v2auth::AuthState::save` writes it;
//! - `c/meta` — JSON `{"index":N,"version_set":bool}`: the raft index the checkpoint covers,
//!   and whether the cluster-version change etcd's v2 store records has been counted;
//! - `r/` + the entry's raft index (8 bytes, big-endian) + a sequence number (4 bytes,
//!   big-endian; one raft entry may record more than one v2 write, e.g. a member removal) —
//!   each v2 write applied after the checkpoint, as its encoded `V2Request`.
//!
//! Every write goes into the same backend commit as the consistent index of its entry (the
//! applier carries the ops with its run), so after a crash the table and the consistent index
//! agree, and the WAL replays whatever came after both. Loading reads the checkpoint and
//! applies the journal over it in index order; applying is deterministic (every input —
//! values, expirations, the leader's SYNC time — is in the request), so the result is the state
//! the member had. Every [`CHECKPOINT_EVERY`] journaled entries a new checkpoint replaces the
//! journal.

use std::sync::Arc;

use actcd_proto::actcdpb::V2Request;
use actcd_types::storage::{Op, ReadTxn, StorageError, Table};
use prost::Message;
use serde::{Deserialize, Serialize};

pub const TREE: &[u8] = b"c/tree";
pub const AUTH: &[u8] = b"c/auth";
pub const META: &[u8] = b"c/meta";
pub const JOURNAL: &[u8] = b"r/";

/// Journaled entries between checkpoints: etcd's default `--snapshot-count`, at which etcd
/// saves its whole v2 store too. A checkpoint serializes the whole tree (measured: with tens
/// of thousands of keys, one every 10,000 writes cost a fifth of v2 set throughput), so it is
/// as rare as etcd's; a restart replays at most this many journaled writes.
pub const CHECKPOINT_EVERY: usize = 100_000;

/// What a checkpoint says besides the two states.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The raft index the checkpoint covers (0: none yet).
    pub index: u64,
    /// Whether the cluster version's change has been counted in the tree's index.
    pub version_set: bool,
    /// Whether the v2 auth directories etcd creates at the first auth change have been
    /// counted (four writes: `/2`, `/2/users/`, `/2/roles/`, `/2/enabled`).
    #[serde(default)]
    pub auth_dirs: bool,
}

/// The table as read at start-up or after a snapshot was installed.
#[derive(Debug, Default)]
pub struct Loaded {
    pub tree: Option<Vec<u8>>,
    pub auth: Option<Vec<u8>>,
    pub meta: Meta,
    /// Journaled entries after the checkpoint, in log order: (raft index, sequence, request).
    pub journal: Vec<(u64, u32, V2Request)>,
}

fn journal_key(index: u64, seq: u32) -> Vec<u8> {
    let mut k = JOURNAL.to_vec();
    k.extend_from_slice(&index.to_be_bytes());
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

fn put(key: &[u8], value: Vec<u8>) -> Op {
    Op::Put {
        table: Table::V2,
        key: key.to_vec(),
        value: Arc::from(value),
    }
}

/// Reads the checkpoint and the journal.
pub fn load(txn: &dyn ReadTxn) -> Result<Loaded, StorageError> {
    let mut loaded = Loaded {
        tree: txn.get(Table::V2, TREE)?,
        auth: txn.get(Table::V2, AUTH)?,
        ..Loaded::default()
    };
    if let Some(meta) = txn.get(Table::V2, META)? {
        loaded.meta = serde_json::from_slice(&meta)
            .map_err(|e| StorageError(format!("v2 store: checkpoint meta: {e}")))?;
    }
    let mut bad = None;
    txn.scan(Table::V2, JOURNAL, Some(b"r0"), &mut |k, v| {
        let Some(key) = k
            .strip_prefix(JOURNAL)
            .and_then(|i| <[u8; 12]>::try_from(i).ok())
        else {
            bad = Some("v2 store: a journal key is not 12 bytes".to_owned());
            return false;
        };
        let index = u64::from_be_bytes([
            key[0], key[1], key[2], key[3], key[4], key[5], key[6], key[7],
        ]);
        let seq = u32::from_be_bytes([key[8], key[9], key[10], key[11]]);
        match V2Request::decode(v) {
            Ok(r) => loaded.journal.push((index, seq, r)),
            Err(e) => {
                bad = Some(format!("v2 store: journal entry: {e}"));
                return false;
            }
        }
        true
    })?;
    match bad {
        Some(e) => Err(StorageError(e)),
        None => Ok(loaded),
    }
}

/// The journal's bookkeeping: which writes are journaled since the checkpoint.
#[derive(Debug)]
pub struct Journal {
    since_checkpoint: Vec<(u64, u32)>,
    every: usize,
}

impl Default for Journal {
    fn default() -> Self {
        Self {
            since_checkpoint: Vec::new(),
            every: CHECKPOINT_EVERY,
        }
    }
}

impl Journal {
    /// Starts from the writes a load found.
    pub fn resume(keys: impl IntoIterator<Item = (u64, u32)>) -> Self {
        Self {
            since_checkpoint: keys.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Checkpoints every `every` journaled writes instead of [`CHECKPOINT_EVERY`].
    pub fn set_every(&mut self, every: usize) {
        self.every = every.max(1);
    }

    /// The write that records `request`, applied at `index`.
    pub fn record(&mut self, index: u64, request: &V2Request) -> Op {
        let seq = match self.since_checkpoint.last() {
            Some(&(i, s)) if i == index => s + 1,
            _ => 0,
        };
        self.since_checkpoint.push((index, seq));
        put(&journal_key(index, seq), request.encode_to_vec())
    }

    /// Whether a checkpoint is due.
    pub fn checkpoint_due(&self) -> bool {
        self.since_checkpoint.len() >= self.every
    }

    /// The writes of a checkpoint covering everything journaled so far, which replace the
    /// journal.
    pub fn checkpoint(&mut self, tree: Vec<u8>, auth: Vec<u8>, meta: Meta) -> Vec<Op> {
        let mut ops = Vec::with_capacity(self.since_checkpoint.len() + 3);
        ops.push(put(TREE, tree));
        ops.push(put(AUTH, auth));
        ops.push(put(META, serde_json::to_vec(&meta).unwrap_or_default()));
        for (index, seq) in self.since_checkpoint.drain(..) {
            ops.push(Op::Delete {
                table: Table::V2,
                key: journal_key(index, seq),
            });
        }
        ops
    }
}
