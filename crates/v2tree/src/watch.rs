//! Registered watchers and who is told about which event.

use std::collections::HashMap;
use std::sync::Arc;

use crate::event::Event;
use crate::node::{components, hidden_below};

/// Names a registered watcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WatcherId(pub u64);

/// How a watch began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchStart {
    /// An event in the history already answers it. The event's
    /// `etcd_index` is the store index at the time of the watch, which is
    /// also the `X-Etcd-Index` header etcd sends. Nothing is registered:
    /// etcd sends this one event even to a stream watch and then nothing
    /// more on that connection.
    Ready(Event),
    /// Registered; events arrive through
    /// [`crate::Store::take_notifications`]. The `X-Etcd-Index` header
    /// etcd sends with the response is the store index at the time of the
    /// watch ([`crate::Store::watcher_start_index`]), not the events'.
    Registered(WatcherId),
}

#[derive(Debug, Clone)]
struct Watcher {
    key: String,
    recursive: bool,
    stream: bool,
    since_index: u64,
    start_index: u64,
}

#[derive(Debug, Default)]
pub(crate) struct WatcherHub {
    next_id: u64,
    by_key: HashMap<String, Vec<WatcherId>>,
    watchers: HashMap<WatcherId, Watcher>,
    pending: Vec<(WatcherId, Arc<Event>)>,
    /// The event being offered, shared by every watcher that takes it (one copy per change,
    /// not one per watcher): keyed by where the caller's event lives and its index, which
    /// identify one change while it is offered.
    offered: Option<(usize, u64, Arc<Event>)>,
}

impl WatcherHub {
    pub fn register(
        &mut self,
        key: String,
        recursive: bool,
        stream: bool,
        since_index: u64,
        start_index: u64,
    ) -> WatcherId {
        self.next_id += 1;
        let id = WatcherId(self.next_id);
        self.by_key.entry(key.clone()).or_default().push(id);
        self.watchers.insert(
            id,
            Watcher {
                key,
                recursive,
                stream,
                since_index,
                start_index,
            },
        );
        id
    }

    pub fn count(&self) -> usize {
        self.watchers.len()
    }

    pub fn start_index(&self, id: WatcherId) -> Option<u64> {
        self.watchers.get(&id).map(|w| w.start_index)
    }

    pub fn cancel(&mut self, id: WatcherId) -> bool {
        let Some(w) = self.watchers.remove(&id) else {
            return false;
        };
        if let Some(list) = self.by_key.get_mut(&w.key) {
            list.retain(|x| *x != id);
            if list.is_empty() {
                self.by_key.remove(&w.key);
            }
        }
        self.pending.retain(|(x, _)| *x != id);
        true
    }

    pub fn take(&mut self) -> Vec<(WatcherId, Arc<Event>)> {
        self.offered = None;
        std::mem::take(&mut self.pending)
    }

    /// Offers `e` to the watchers registered exactly at `node_path`.
    /// `deleted` marks the paths a delete or expiry removed: their
    /// watchers hear of it even when not recursive.
    pub fn notify_watchers(&mut self, e: &Event, node_path: &str, deleted: bool) {
        let Some(list) = self.by_key.get_mut(node_path) else {
            return;
        };
        let original = e.node.key == node_path;
        if !original && hidden_below(node_path, &e.node.key) {
            return;
        }
        let mut kept = Vec::with_capacity(list.len());
        for id in list.drain(..) {
            let Some(w) = self.watchers.get(&id) else {
                continue;
            };
            if (w.recursive || original || deleted) && e.index() >= w.since_index {
                let shared = shared(&mut self.offered, e);
                self.pending.push((id, shared));
                if w.stream {
                    kept.push(id);
                } else {
                    self.watchers.remove(&id);
                }
            } else {
                kept.push(id);
            }
        }
        if kept.is_empty() {
            self.by_key.remove(node_path);
        } else {
            *list = kept;
        }
    }

    /// Offers `e` to the watchers of its key and of every ancestor, root
    /// first.
    pub fn notify_path(&mut self, e: &Event) {
        self.notify_watchers(e, "/", false);
        let mut cur = String::with_capacity(e.node.key.len());
        for comp in components(&e.node.key) {
            cur.push('/');
            cur.push_str(comp);
            self.notify_watchers(e, &cur, false);
        }
    }
}

/// `e`, shared: the copy made for the first watcher that took it in this change.
fn shared(offered: &mut Option<(usize, u64, Arc<Event>)>, e: &Event) -> Arc<Event> {
    let key = (std::ptr::from_ref(e) as usize, e.index());
    match offered {
        Some((at, index, shared)) if (*at, *index) == key && **shared == *e => Arc::clone(shared),
        _ => {
            let shared = Arc::new(e.clone());
            *offered = Some((key.0, key.1, Arc::clone(&shared)));
            shared
        }
    }
}
