//! The store: the tree, the index, the expiry index, the history and the
//! watchers, and the operations on them.

use std::collections::HashMap;

use crate::error::{
    ECODE_DIR_NOT_EMPTY, ECODE_KEY_NOT_FOUND, ECODE_NODE_EXIST, ECODE_NOT_DIR, ECODE_NOT_FILE,
    ECODE_ROOT_RONLY, ECODE_TEST_FAILED, V2Error,
};
use crate::event::{
    ACTION_COMPARE_AND_DELETE, ACTION_COMPARE_AND_SWAP, ACTION_CREATE, ACTION_DELETE,
    ACTION_EXPIRE, ACTION_GET, ACTION_SET, ACTION_UPDATE, Event, NodeExtern, extern_key,
};
use crate::history::EventHistory;
use crate::node::{Kind, Node, clean_path, components, is_hidden_name, join, split};
use crate::stats::{Counters, Stats};
use crate::ttl::TtlIndex;
use crate::watch::{WatchStart, WatcherHub, WatcherId};

/// 2000-01-01T00:00:00Z in Unix nanoseconds: a key created with an expiry
/// before it is made permanent instead (etcd's rule).
pub const MIN_EXPIRE_TIME: i64 = 946_684_800_000_000_000;

/// The TTL part of a write (etcd's `TTLOptionSet`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TtlOptions {
    /// Absolute expiry in Unix nanoseconds; `None` makes (or keeps) the
    /// node permanent.
    pub expire_at: Option<i64>,
    /// Only move the expiry: the value is kept, and watchers are not told.
    pub refresh: bool,
}

impl TtlOptions {
    /// No TTL, no refresh.
    #[must_use]
    pub fn none() -> Self {
        TtlOptions::default()
    }

    /// Expire at `unix_nanos`.
    #[must_use]
    pub fn expire_at(unix_nanos: i64) -> Self {
        TtlOptions {
            expire_at: Some(unix_nanos),
            refresh: false,
        }
    }

    /// From a request's `expiration` (0 = none) and `refresh`.
    #[must_use]
    pub fn from_request(expiration: i64, refresh: bool) -> Self {
        TtlOptions {
            expire_at: (expiration != 0).then_some(expiration),
            refresh,
        }
    }
}

/// etcd's v2 store. See the crate documentation.
#[derive(Debug)]
pub struct Store {
    pub(crate) nodes: HashMap<String, Node>,
    pub(crate) current_index: u64,
    pub(crate) ttl: TtlIndex,
    pub(crate) history: EventHistory,
    pub(crate) hub: WatcherHub,
    pub(crate) stats: Stats,
}

impl Default for Store {
    fn default() -> Self {
        Store::new()
    }
}

enum Which {
    Index,
    Value,
    Both,
}

fn compare(n: &Node, prev_value: &str, prev_index: u64) -> Option<Which> {
    let index_ok = prev_index == 0 || n.modified_index == prev_index;
    let value_ok = prev_value.is_empty() || n.value() == prev_value;
    match (value_ok, index_ok) {
        (true, true) => None,
        (false, true) => Some(Which::Value),
        (true, false) => Some(Which::Index),
        (false, false) => Some(Which::Both),
    }
}

fn compare_fail_cause(n: &Node, which: &Which, prev_value: &str, prev_index: u64) -> String {
    match which {
        Which::Index => format!("[{prev_index} != {}]", n.modified_index),
        Which::Value => format!("[{prev_value} != {}]", n.value()),
        Which::Both => format!(
            "[{prev_value} != {}] [{prev_index} != {}]",
            n.value(),
            n.modified_index
        ),
    }
}

impl Store {
    /// An empty store at index 0 holding only the root directory.
    #[must_use]
    pub fn new() -> Self {
        let mut nodes = HashMap::new();
        nodes.insert("/".to_owned(), Node::dir(0, None));
        Store {
            nodes,
            current_index: 0,
            ttl: TtlIndex::default(),
            history: EventHistory::default(),
            hub: WatcherHub::default(),
            stats: Stats::default(),
        }
    }

    /// The store's current index (the index of its last change).
    #[must_use]
    pub fn index(&self) -> u64 {
        self.current_index
    }

    /// Whether any node has a TTL.
    #[must_use]
    pub fn has_ttl_keys(&self) -> bool {
        self.ttl.len() != 0
    }

    /// The earliest expiry of any node, in Unix nanoseconds (when the
    /// caller should next propose a SYNC).
    #[must_use]
    pub fn next_expiration(&self) -> Option<i64> {
        self.ttl.first().map(|(at, _, _)| at)
    }

    /// The counters of `/v2/stats/store`, `watchers` filled in.
    #[must_use]
    pub fn stats(&self) -> Counters {
        self.stats.snapshot(self.hub.count() as u64)
    }

    /// The body of `/v2/stats/store`, byte for byte as etcd writes it.
    #[must_use]
    pub fn stats_json(&self) -> String {
        self.stats().to_json()
    }

    // ---- reading ------------------------------------------------------

    /// The node at a clean path, or etcd's "not a directory" / "key not
    /// found" error, walking from the root.
    fn lookup(&self, path: &str) -> Result<&Node, V2Error> {
        let mut cur_path = "/".to_owned();
        let mut cur = self.node("/")?;
        for comp in components(path) {
            if !cur.is_dir() {
                return Err(V2Error::new(
                    ECODE_NOT_DIR,
                    extern_key(&cur_path),
                    self.current_index,
                ));
            }
            let child_path = join(&cur_path, comp);
            match self.nodes.get(&child_path) {
                Some(n) => {
                    cur = n;
                    cur_path = child_path;
                }
                None => {
                    return Err(V2Error::new(
                        ECODE_KEY_NOT_FOUND,
                        child_path,
                        self.current_index,
                    ));
                }
            }
        }
        Ok(cur)
    }

    /// The node at `path`, which the tree's own bookkeeping says exists.
    fn node(&self, path: &str) -> Result<&Node, V2Error> {
        self.nodes
            .get(path)
            .ok_or_else(|| V2Error::new(ECODE_KEY_NOT_FOUND, path, self.current_index))
    }

    fn node_mut(&mut self, path: &str) -> Result<&mut Node, V2Error> {
        let index = self.current_index;
        self.nodes
            .get_mut(path)
            .ok_or_else(|| V2Error::new(ECODE_KEY_NOT_FOUND, path, index))
    }

    /// A node and, for a recursive listing, everything under it (hidden
    /// children left out). Children are always in key order.
    fn repr(&self, path: &str, n: &Node, recursive: bool, now: i64) -> NodeExtern {
        let mut ne = n.repr_flat(path, now);
        if recursive {
            ne.nodes = self.list(path, n, true, now);
        }
        ne
    }

    fn list(&self, path: &str, n: &Node, recursive: bool, now: i64) -> Vec<NodeExtern> {
        let Some(children) = n.children() else {
            return Vec::new();
        };
        children
            .iter()
            .filter(|name| !is_hidden_name(name))
            .filter_map(|name| {
                let p = join(path, name);
                self.nodes.get(&p).map(|c| self.repr(&p, c, recursive, now))
            })
            .collect()
    }

    /// etcd's Get: the node at `path` (a directory with its visible
    /// children, and theirs too when `recursive`), as an event with action
    /// `get` and `etcd_index` the current index. Children come in key order
    /// whether or not `sorted` is asked for (etcd's unsorted order is
    /// random, so key order is one of its possible answers). TTLs are
    /// computed at `now` (Unix nanoseconds).
    pub fn get(
        &self,
        path: &str,
        recursive: bool,
        sorted: bool,
        now: i64,
    ) -> Result<Event, V2Error> {
        let _ = sorted;
        let path = clean_path(path);
        let n = match self.lookup(&path) {
            Ok(n) => n,
            Err(e) => {
                self.stats.get_fail();
                return Err(e);
            }
        };
        let mut e = Event::new(ACTION_GET, &path, n.modified_index, n.created_index);
        e.etcd_index = self.current_index;
        let mut ne = n.repr_flat(&path, now);
        if n.is_dir() {
            ne.nodes = self.list(&path, n, recursive, now);
        }
        e.node = ne;
        self.stats.get_ok();
        Ok(e)
    }

    // ---- bookkeeping shared by the writes -------------------------------

    fn set_expiry(&mut self, path: &str, expire_at: Option<i64>) -> Result<(), V2Error> {
        let n = self.node_mut(path)?;
        let old = n.expire_at.map(|at| (at, n.ttl_seq));
        n.expire_at = expire_at;
        if let Some((at, seq)) = old {
            self.ttl.remove(at, seq, path);
        }
        if let Some(at) = expire_at {
            let seq = self.ttl.insert(at, path);
            self.node_mut(path)?.ttl_seq = seq;
        }
        Ok(())
    }

    /// Removes the node at `path` (and, for a directory, everything under
    /// it) from the tree, the parent's listing and the expiry index, after
    /// etcd's checks. Returns the removed paths children first, the order
    /// in which etcd tells their watchers.
    fn remove(&mut self, path: &str, dir: bool, recursive: bool) -> Result<Vec<String>, V2Error> {
        let n = self.node(path)?;
        if let Some(children) = n.children() {
            if !dir {
                return Err(V2Error::new(ECODE_NOT_FILE, path, self.current_index));
            }
            if !children.is_empty() && !recursive {
                return Err(V2Error::new(ECODE_DIR_NOT_EMPTY, path, self.current_index));
            }
        }
        // Post-order walk without recursion.
        let mut order = Vec::new();
        let mut stack = vec![(path.to_owned(), false)];
        while let Some((p, expanded)) = stack.pop() {
            let kids: Vec<String> = match self.nodes.get(&p).and_then(Node::children) {
                Some(c) if !expanded && !c.is_empty() => {
                    c.iter().rev().map(|name| join(&p, name)).collect()
                }
                _ => Vec::new(),
            };
            if kids.is_empty() {
                order.push(p);
            } else {
                stack.push((p, true));
                stack.extend(kids.into_iter().map(|k| (k, false)));
            }
        }
        for p in &order {
            if let Some(n) = self.nodes.remove(p)
                && let Some(at) = n.expire_at
            {
                self.ttl.remove(at, n.ttl_seq, p);
            }
        }
        if path != "/" {
            let (parent, name) = split(path);
            if let Some(Node {
                kind: Kind::Dir(children),
                ..
            }) = self.nodes.get_mut(parent)
            {
                children.remove(name);
            }
        }
        Ok(order)
    }

    /// Makes sure every directory on the way to `dir_path` exists, creating
    /// the missing ones (permanent, at the next index), as etcd does before
    /// a create; fails with "not a directory" on a file in the way.
    fn make_dirs(&mut self, dir_path: &str) -> Result<(), V2Error> {
        let next = self.current_index + 1;
        let mut cur = "/".to_owned();
        for comp in components(dir_path).map(str::to_owned).collect::<Vec<_>>() {
            let child = join(&cur, &comp);
            match self.nodes.get(&child) {
                Some(n) if n.is_dir() => {}
                Some(_) => {
                    return Err(V2Error::new(ECODE_NOT_DIR, child, self.current_index));
                }
                None => {
                    self.nodes.insert(child.clone(), Node::dir(next, None));
                    if let Some(Node {
                        kind: Kind::Dir(children),
                        ..
                    }) = self.nodes.get_mut(&cur)
                    {
                        children.insert(comp);
                    }
                }
            }
            cur = child;
        }
        Ok(())
    }

    /// Records a change in the history and tells the watchers of its key
    /// and of every ancestor.
    fn notify(&mut self, e: &Event) {
        self.history.add(e.clone());
        self.hub.notify_path(e);
    }

    /// Records a refresh in the history only.
    fn record_refresh(&mut self, e: &mut Event) {
        e.refresh = true;
        self.history.add(e.clone());
    }

    /// A write's event: a refresh goes to the history only, any other change to the
    /// watchers too.
    fn publish(&mut self, e: &mut Event, refresh: bool) {
        if refresh {
            self.record_refresh(e);
        } else {
            self.notify(e);
        }
    }

    #[allow(clippy::too_many_arguments, clippy::fn_params_excessive_bools)]
    fn internal_create(
        &mut self,
        path: &str,
        dir: bool,
        value: &str,
        unique: bool,
        replace: bool,
        expire_at: Option<i64>,
        action: &str,
        now: i64,
    ) -> Result<Event, V2Error> {
        let curr = self.current_index;
        let next = curr + 1;
        let path = if unique {
            clean_path(&format!("{path}/{next:020}"))
        } else {
            clean_path(path)
        };
        if path == "/" {
            return Err(V2Error::new(ECODE_ROOT_RONLY, "/", curr));
        }
        let expire_at = expire_at.filter(|at| *at >= MIN_EXPIRE_TIME);
        let (parent, name) = split(&path);
        let (parent, name) = (parent.to_owned(), name.to_owned());
        if let Err(mut err) = self.make_dirs(&parent) {
            // etcd counts a failed set here on top of the caller's own count.
            self.stats.c.sets_fail += 1;
            err.index = curr;
            return Err(err);
        }
        let mut e = Event::new(action, &path, next, next);
        if let Some(existing) = self.nodes.get(&path) {
            if !replace {
                return Err(V2Error::new(ECODE_NODE_EXIST, path, curr));
            }
            if existing.is_dir() {
                return Err(V2Error::new(ECODE_NOT_FILE, path, curr));
            }
            e.prev_node = Some(existing.repr_flat(&path, now));
            self.remove(&path, false, false)?;
        }
        let n = if dir {
            e.node.dir = true;
            Node::dir(next, expire_at)
        } else {
            e.node.value = Some(value.to_owned());
            Node::file(value.to_owned(), next, expire_at)
        };
        (e.node.expiration, e.node.ttl) = n.expiration_and_ttl(now);
        self.nodes.insert(path.clone(), n);
        if let Some(Node {
            kind: Kind::Dir(children),
            ..
        }) = self.nodes.get_mut(&parent)
        {
            children.insert(name);
        }
        if let Some(at) = expire_at {
            let seq = self.ttl.insert(at, &path);
            self.node_mut(&path)?.ttl_seq = seq;
        }
        self.current_index = next;
        Ok(e)
    }

    // ---- writes --------------------------------------------------------

    /// etcd's Create: a new key (or directory) at `path`, failing with 105
    /// when it exists. With `unique` the key is a new child of `path` named
    /// by the new index, 20 digits zero-padded (POST's in-order keys).
    pub fn create(
        &mut self,
        path: &str,
        dir: bool,
        value: &str,
        unique: bool,
        opts: TtlOptions,
        now: i64,
    ) -> Result<Event, V2Error> {
        match self.internal_create(
            path,
            dir,
            value,
            unique,
            false,
            opts.expire_at,
            ACTION_CREATE,
            now,
        ) {
            Ok(mut e) => {
                e.etcd_index = self.current_index;
                self.notify(&e);
                self.stats.c.create_success += 1;
                Ok(e)
            }
            Err(err) => {
                self.stats.c.create_fail += 1;
                Err(err)
            }
        }
    }

    /// etcd's Set: creates or replaces the key (never a directory) at
    /// `path`. With `opts.refresh` the key must exist and keeps its value.
    pub fn set(
        &mut self,
        path: &str,
        dir: bool,
        value: &str,
        opts: TtlOptions,
        now: i64,
    ) -> Result<Event, V2Error> {
        let r = self.set_inner(path, dir, value, opts, now);
        if r.is_ok() {
            self.stats.c.sets_success += 1;
        } else {
            self.stats.c.sets_fail += 1;
        }
        r
    }

    fn set_inner(
        &mut self,
        path: &str,
        dir: bool,
        value: &str,
        opts: TtlOptions,
        now: i64,
    ) -> Result<Event, V2Error> {
        let path = clean_path(path);
        let prev = match self.lookup(&path) {
            Ok(n) => Some(n.repr_flat(&path, now)),
            Err(e) if e.code == ECODE_KEY_NOT_FOUND => {
                if opts.refresh {
                    return Err(e);
                }
                None
            }
            Err(e) => return Err(e),
        };
        let value = if opts.refresh {
            self.lookup(&path)?.value().to_owned()
        } else {
            value.to_owned()
        };
        let mut e = self.internal_create(
            &path,
            dir,
            &value,
            false,
            true,
            opts.expire_at,
            ACTION_SET,
            now,
        )?;
        e.etcd_index = self.current_index;
        if prev.is_some() {
            e.prev_node = prev;
        }
        self.publish(&mut e, opts.refresh);
        Ok(e)
    }

    /// etcd's Update (PUT with `prevExist=true`): a new value and TTL for an
    /// existing key, or a new TTL for a directory (whose modified index
    /// etcd then leaves as it was, though the event shows the new one).
    pub fn update(
        &mut self,
        path: &str,
        value: &str,
        opts: TtlOptions,
        now: i64,
    ) -> Result<Event, V2Error> {
        let path = clean_path(path);
        let curr = self.current_index;
        let next = curr + 1;
        if path == "/" {
            // etcd counts this refusal as a successful update.
            self.stats.c.update_success += 1;
            return Err(V2Error::new(ECODE_ROOT_RONLY, "/", curr));
        }
        let n = match self.lookup(&path) {
            Ok(n) => n,
            Err(err) => {
                self.stats.c.update_fail += 1;
                return Err(err);
            }
        };
        if n.is_dir() && !value.is_empty() {
            // etcd counts this refusal as a successful update too.
            self.stats.c.update_success += 1;
            return Err(V2Error::new(ECODE_NOT_FILE, path, curr));
        }
        let value = if opts.refresh {
            n.value().to_owned()
        } else {
            value.to_owned()
        };
        let mut e = Event::new(ACTION_UPDATE, &path, next, n.created_index);
        e.etcd_index = next;
        e.prev_node = Some(n.repr_flat(&path, now));
        let is_dir = n.is_dir();
        {
            let n = self.node_mut(&path)?;
            if let Kind::File(v) = &mut n.kind {
                v.clone_from(&value);
                n.modified_index = next;
            }
        }
        if is_dir {
            e.node.dir = true;
        } else {
            e.node.value = Some(value);
        }
        self.set_expiry(&path, opts.expire_at)?;
        (e.node.expiration, e.node.ttl) = self.node(&path)?.expiration_and_ttl(now);
        self.current_index = next;
        self.publish(&mut e, opts.refresh);
        self.stats.c.update_success += 1;
        Ok(e)
    }

    /// etcd's CompareAndSwap: replaces the value (and TTL) of a key when
    /// its value equals `prev_value` (if not empty) and its modified index
    /// equals `prev_index` (if not 0).
    pub fn compare_and_swap(
        &mut self,
        path: &str,
        prev_value: &str,
        prev_index: u64,
        value: &str,
        opts: TtlOptions,
        now: i64,
    ) -> Result<Event, V2Error> {
        let path = clean_path(path);
        if path == "/" {
            // etcd counts this refusal as a successful compare-and-swap.
            self.stats.c.compare_and_swap_success += 1;
            return Err(V2Error::new(ECODE_ROOT_RONLY, "/", self.current_index));
        }
        let r = self.cas_inner(&path, prev_value, prev_index, value, opts, now);
        if r.is_ok() {
            self.stats.c.compare_and_swap_success += 1;
        } else {
            self.stats.c.compare_and_swap_fail += 1;
        }
        r
    }

    fn cas_inner(
        &mut self,
        path: &str,
        prev_value: &str,
        prev_index: u64,
        value: &str,
        opts: TtlOptions,
        now: i64,
    ) -> Result<Event, V2Error> {
        let n = self.lookup(path)?;
        if n.is_dir() {
            return Err(V2Error::new(ECODE_NOT_FILE, path, self.current_index));
        }
        if let Some(which) = compare(n, prev_value, prev_index) {
            let cause = compare_fail_cause(n, &which, prev_value, prev_index);
            return Err(V2Error::new(ECODE_TEST_FAILED, cause, self.current_index));
        }
        let value = if opts.refresh {
            n.value().to_owned()
        } else {
            value.to_owned()
        };
        let next = self.current_index + 1;
        let mut e = Event::new(ACTION_COMPARE_AND_SWAP, path, next, n.created_index);
        e.etcd_index = next;
        e.prev_node = Some(n.repr_flat(path, now));
        {
            let n = self.node_mut(path)?;
            n.kind = Kind::File(value.clone());
            n.modified_index = next;
        }
        self.set_expiry(path, opts.expire_at)?;
        e.node.value = Some(value);
        (e.node.expiration, e.node.ttl) = self.node(path)?.expiration_and_ttl(now);
        self.current_index = next;
        self.publish(&mut e, opts.refresh);
        Ok(e)
    }

    /// etcd's Delete: removes a key; a directory needs `dir` (empty ones)
    /// or `recursive` (any; implies `dir`).
    pub fn delete(
        &mut self,
        path: &str,
        dir: bool,
        recursive: bool,
        now: i64,
    ) -> Result<Event, V2Error> {
        let path = clean_path(path);
        if path == "/" {
            // etcd counts this refusal as a successful delete.
            self.stats.c.delete_success += 1;
            return Err(V2Error::new(ECODE_ROOT_RONLY, "/", self.current_index));
        }
        let dir = dir || recursive;
        let r = self.delete_inner(&path, dir, recursive, now);
        if r.is_ok() {
            self.stats.c.delete_success += 1;
        } else {
            self.stats.c.delete_fail += 1;
        }
        r
    }

    fn delete_inner(
        &mut self,
        path: &str,
        dir: bool,
        recursive: bool,
        now: i64,
    ) -> Result<Event, V2Error> {
        let n = self.lookup(path)?;
        let next = self.current_index + 1;
        let mut e = Event::new(ACTION_DELETE, path, next, n.created_index);
        e.etcd_index = next;
        e.prev_node = Some(n.repr_flat(path, now));
        if n.is_dir() {
            e.node.dir = true;
        }
        let removed = self.remove(path, dir, recursive)?;
        for p in &removed {
            self.hub.notify_watchers(&e, p, true);
        }
        self.current_index = next;
        self.notify(&e);
        Ok(e)
    }

    /// etcd's CompareAndDelete: removes a key (never a directory) when the
    /// compare holds, as in [`Store::compare_and_swap`].
    pub fn compare_and_delete(
        &mut self,
        path: &str,
        prev_value: &str,
        prev_index: u64,
        now: i64,
    ) -> Result<Event, V2Error> {
        let path = clean_path(path);
        let n = match self.lookup(&path) {
            Ok(n) => n,
            Err(err) => {
                self.stats.c.compare_and_delete_fail += 1;
                return Err(err);
            }
        };
        if n.is_dir() {
            // etcd counts the next two refusals as successes.
            self.stats.c.compare_and_delete_success += 1;
            return Err(V2Error::new(
                ECODE_NOT_FILE,
                extern_key(&path),
                self.current_index,
            ));
        }
        if let Some(which) = compare(n, prev_value, prev_index) {
            let cause = compare_fail_cause(n, &which, prev_value, prev_index);
            self.stats.c.compare_and_delete_success += 1;
            return Err(V2Error::new(ECODE_TEST_FAILED, cause, self.current_index));
        }
        let next = self.current_index + 1;
        let mut e = Event::new(ACTION_COMPARE_AND_DELETE, &path, next, n.created_index);
        e.etcd_index = next;
        e.prev_node = Some(n.repr_flat(&path, now));
        self.current_index = next;
        let removed = self.remove(&path, false, false)?;
        for p in &removed {
            self.hub.notify_watchers(&e, p, true);
        }
        self.notify(&e);
        self.stats.c.compare_and_delete_success += 1;
        Ok(e)
    }

    /// etcd's DeleteExpiredKeys: removes every node whose expiry is at or
    /// before `cutoff` (Unix nanoseconds), earliest first, each at a new
    /// index with an `expire` event (returned, recorded and sent to
    /// watchers). The TTLs in the events' prevNodes are computed at
    /// `cutoff`.
    pub fn delete_expired_keys(&mut self, cutoff: i64) -> Vec<Event> {
        let mut out = Vec::new();
        while let Some((at, seq, path)) = self.ttl.first() {
            if at > cutoff {
                break;
            }
            let path = path.to_owned();
            let Some(n) = self.nodes.get(&path) else {
                // Cannot happen: the index only names live nodes. Drop it.
                self.ttl.remove(at, seq, &path);
                continue;
            };
            let next = self.current_index + 1;
            let mut e = Event::new(ACTION_EXPIRE, &path, next, n.created_index);
            e.etcd_index = next;
            e.prev_node = Some(n.repr_flat(&path, cutoff));
            if n.is_dir() {
                e.node.dir = true;
            }
            self.current_index = next;
            let removed = self.remove(&path, true, true).unwrap_or_default();
            for p in &removed {
                self.hub.notify_watchers(&e, p, true);
            }
            self.stats.c.expire_count += 1;
            self.notify(&e);
            out.push(e);
        }
        out
    }

    /// The same as [`Store::delete_expired_keys`] (what a SYNC request
    /// does, with its `time`).
    pub fn sync(&mut self, time: i64) -> Vec<Event> {
        self.delete_expired_keys(time)
    }

    /// A write etcd's v2 store makes under its hidden `/0` (a member's record, the cluster
    /// version), which clients never see but which takes the next index: the index moves,
    /// and the history gets an event no watch can match (its key, `internal:` and `name`, has
    /// no leading `/`), so the window's indices stay consecutive and every index is etcd's.
    pub fn internal_change(&mut self, name: &str) {
        let next = self.current_index + 1;
        self.current_index = next;
        self.history.add(Event {
            action: crate::event::ACTION_SET.to_owned(),
            node: NodeExtern {
                key: format!("internal:{name}"),
                modified_index: next,
                created_index: next,
                ..NodeExtern::default()
            },
            prev_node: None,
            etcd_index: next,
            refresh: false,
        });
    }

    // ---- watches -------------------------------------------------------

    /// etcd's Watch on `key` (and, when `recursive`, everything under it)
    /// from `since_index` (0: from the next change). Answers at once from
    /// the history when an event there matches; fails with 401 (index: the
    /// current index) when `since_index` is older than the history.
    pub fn watch(
        &mut self,
        key: &str,
        recursive: bool,
        stream: bool,
        since_index: u64,
    ) -> Result<WatchStart, V2Error> {
        let key = clean_path(key);
        let since = if since_index == 0 {
            self.current_index + 1
        } else {
            since_index
        };
        match self.history.scan(&key, recursive, since) {
            Err(mut err) => {
                err.index = self.current_index;
                Err(err)
            }
            Ok(Some(e)) => {
                let mut e = e.clone();
                e.etcd_index = self.current_index;
                Ok(WatchStart::Ready(e))
            }
            Ok(None) => Ok(WatchStart::Registered(self.hub.register(
                key,
                recursive,
                stream,
                since,
                self.current_index,
            ))),
        }
    }

    /// The events delivered to registered watchers since the last call, in
    /// order. A non-stream watcher is gone once it has had its event;
    /// stream watchers stay until cancelled. A stream watcher on a key
    /// that is deleted hears of it twice, as in etcd.
    pub fn take_notifications(&mut self) -> Vec<(WatcherId, std::sync::Arc<Event>)> {
        self.hub.take()
    }

    /// Drops a watcher (and any events not yet taken for it). Returns
    /// whether it was registered.
    pub fn cancel_watch(&mut self, id: WatcherId) -> bool {
        self.hub.cancel(id)
    }

    /// The store index when the watcher was registered, which etcd sends
    /// as `X-Etcd-Index` for the whole watch response. `None` once the
    /// watcher is gone.
    #[must_use]
    pub fn watcher_start_index(&self, id: WatcherId) -> Option<u64> {
        self.hub.start_index(id)
    }

    /// How many watchers are registered.
    #[must_use]
    pub fn watcher_count(&self) -> usize {
        self.hub.count()
    }
}
