//! The window of recent events a watch may start from (etcd keeps the last
//! 1000).

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::error::{ECODE_EVENT_INDEX_CLEARED, V2Error};
use crate::event::{ACTION_DELETE, ACTION_EXPIRE, Event};
use crate::node::clean_path;

/// How many events etcd's v2 store remembers.
pub const HISTORY_CAPACITY: usize = 1000;

/// The last [`HISTORY_CAPACITY`] events, oldest first. Every change that
/// takes an index adds exactly one event, so the indices in the window are
/// consecutive from `start_index` to `last_index`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct EventHistory {
    pub events: VecDeque<Event>,
    pub start_index: u64,
    pub last_index: u64,
}

impl EventHistory {
    pub fn add(&mut self, e: Event) {
        self.last_index = e.index();
        self.events.push_back(e);
        while self.events.len() > HISTORY_CAPACITY {
            self.events.pop_front();
        }
        self.start_index = self.events.front().map_or(0, Event::index);
    }

    /// The first event at or after `index` that a watch on `key` would
    /// see, `None` when there is none yet, or the 401 error (index 0; the
    /// caller fills it in) when `index` fell out of the window.
    pub fn scan(&self, key: &str, recursive: bool, index: u64) -> Result<Option<&Event>, V2Error> {
        if index < self.start_index {
            return Err(V2Error::new(
                ECODE_EVENT_INDEX_CLEARED,
                format!(
                    "the requested history has been cleared [{}/{}]",
                    self.start_index, index
                ),
                0,
            ));
        }
        if index > self.last_index {
            return Ok(None);
        }
        let offset = usize::try_from(index - self.start_index).unwrap_or(usize::MAX);
        let prefix = if recursive {
            let mut p = clean_path(key);
            if !p.ends_with('/') {
                p.push('/');
            }
            Some(p)
        } else {
            None
        };
        for e in self.events.iter().skip(offset) {
            if e.refresh {
                continue;
            }
            let mut hit = e.node.key == key;
            if let Some(p) = &prefix {
                hit = hit || e.node.key.starts_with(p.as_str());
            }
            if (e.action == ACTION_DELETE || e.action == ACTION_EXPIRE)
                && e.prev_node
                    .as_ref()
                    .is_some_and(|p| p.dir && key.starts_with(p.key.as_str()))
            {
                hit = true;
            }
            if hit {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }
}
