//! Saving the store to bytes and loading it back.
//!
//! The format is JSON (serde) of a versioned struct:
//!
//! ```text
//! {"version":1,
//!  "current_index":N,
//!  "nodes":[{"path":"/","dir":true,"created_index":0,"modified_index":0,"expire_at":null,"value":null}, ...],
//!  "history":{"events":[<Event>...],"start_index":S,"last_index":L},
//!  "stats":{<Counters>}}
//! ```
//!
//! `nodes` is flat, every node by its absolute path, parents before
//! children (sorted by path), so loading never recurses on key depth;
//! `expire_at` is the absolute expiry in Unix nanoseconds. Events are as
//! [`crate::Event`] serializes (`refresh` included). Watchers are not
//! saved. Like etcd, the counters travel with the snapshot.

use serde::{Deserialize, Serialize};

use crate::error::{ECODE_RAFT_INTERNAL, V2Error};
use crate::history::{EventHistory, HISTORY_CAPACITY};
use crate::node::{Kind, Node, clean_path, split};
use crate::stats::{Counters, Stats};
use crate::store::Store;
use crate::ttl::TtlIndex;

/// The snapshot format version [`Store::save`] writes.
pub const SNAPSHOT_VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct Snapshot {
    version: u32,
    current_index: u64,
    nodes: Vec<SnapNode>,
    history: EventHistory,
    stats: Counters,
}

#[derive(Debug, Serialize, Deserialize)]
struct SnapNode {
    path: String,
    dir: bool,
    created_index: u64,
    modified_index: u64,
    expire_at: Option<i64>,
    value: Option<String>,
}

fn bad(what: &str) -> V2Error {
    V2Error::request(ECODE_RAFT_INTERNAL, format!("v2tree snapshot: {what}"))
}

impl Store {
    /// The whole store as bytes: the tree with its TTLs, the current
    /// index, the event history and the counters (not the watchers).
    #[must_use]
    pub fn save(&self) -> Vec<u8> {
        let mut paths: Vec<&String> = self.nodes.keys().collect();
        paths.sort();
        let nodes = paths
            .into_iter()
            .filter_map(|p| {
                self.nodes.get(p).map(|n| SnapNode {
                    path: p.clone(),
                    dir: n.is_dir(),
                    created_index: n.created_index,
                    modified_index: n.modified_index,
                    expire_at: n.expire_at,
                    value: match &n.kind {
                        Kind::File(v) => Some(v.clone()),
                        Kind::Dir(_) => None,
                    },
                })
            })
            .collect();
        let snap = Snapshot {
            version: SNAPSHOT_VERSION,
            current_index: self.current_index,
            nodes,
            history: self.history.clone(),
            stats: self.stats.snapshot(self.hub.count() as u64),
        };
        serde_json::to_vec(&snap).unwrap_or_default()
    }

    /// A store loaded from [`Store::save`]'s bytes, with no watchers.
    /// Malformed input fails with code 300 and a cause starting
    /// `v2tree snapshot:`.
    pub fn recover(bytes: &[u8]) -> Result<Store, V2Error> {
        let snap: Snapshot = serde_json::from_slice(bytes).map_err(|e| bad(&e.to_string()))?;
        if snap.version != SNAPSHOT_VERSION {
            return Err(bad(&format!("unknown version {}", snap.version)));
        }
        if snap.history.events.len() > HISTORY_CAPACITY {
            return Err(bad("history longer than its window"));
        }
        let mut store = Store::new();
        store.nodes.clear();
        let mut ttl = TtlIndex::default();
        for sn in snap.nodes {
            if clean_path(&sn.path) != sn.path || store.nodes.contains_key(&sn.path) {
                return Err(bad(&format!("bad or repeated path {:?}", sn.path)));
            }
            let mut n = if sn.dir {
                Node::dir(sn.created_index, sn.expire_at)
            } else {
                Node::file(sn.value.unwrap_or_default(), sn.created_index, sn.expire_at)
            };
            n.modified_index = sn.modified_index;
            if let Some(at) = sn.expire_at {
                n.ttl_seq = ttl.insert(at, &sn.path);
            }
            if sn.path != "/" {
                let (parent, name) = split(&sn.path);
                match store.nodes.get_mut(parent) {
                    Some(Node {
                        kind: Kind::Dir(children),
                        ..
                    }) => {
                        children.insert(name.to_owned());
                    }
                    _ => return Err(bad(&format!("{:?} has no parent directory", sn.path))),
                }
            } else if !sn.dir {
                return Err(bad("the root is not a directory"));
            }
            store.nodes.insert(sn.path, n);
        }
        if !store.nodes.contains_key("/") {
            return Err(bad("no root"));
        }
        store.ttl = ttl;
        store.current_index = snap.current_index;
        store.history = snap.history;
        store.stats = Stats::from_counters(snap.stats);
        Ok(store)
    }

    /// Replaces this store's contents with a snapshot's, keeping the
    /// registered watchers (and undelivered notifications), as etcd's
    /// recovery does.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), V2Error> {
        let loaded = Store::recover(bytes)?;
        let hub = std::mem::take(&mut self.hub);
        *self = loaded;
        self.hub = hub;
        Ok(())
    }
}
