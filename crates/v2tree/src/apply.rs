//! Applying a committed v2 request (etcd's `applyV2Request` and its
//! `applierV2store`).

use actcd_proto::actcdpb::V2Request;

use crate::error::{ECODE_RAFT_INTERNAL, V2Error};
use crate::event::{ACTION_SYNC, Event, NodeExtern};
use crate::store::{Store, TtlOptions};

/// The cause etcd reports for a request method it cannot apply.
pub const UNKNOWN_METHOD_CAUSE: &str = "etcdserver: unknown method";

/// What applying a request produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// A read or a change, answered with this event.
    Event(Event),
    /// A SYNC: the keys it expired (etcd answers SYNC with no event).
    Synced(Vec<Event>),
}

impl Store {
    /// Applies a committed request as etcd does (see [`Store::apply_full`]);
    /// a SYNC request, which etcd answers with no event, returns a
    /// placeholder event with action `sync`, empty node and `etcd_index`
    /// the index after the sync (the expiries themselves reach watchers
    /// and the history; use [`Store::apply_full`] or [`Store::sync`] to
    /// see them).
    pub fn apply(&mut self, req: &V2Request, now: i64) -> Result<Event, V2Error> {
        match self.apply_full(req, now)? {
            Applied::Event(e) => Ok(e),
            Applied::Synced(_) => Ok(Event {
                action: ACTION_SYNC.to_owned(),
                node: NodeExtern::default(),
                prev_node: None,
                etcd_index: self.current_index,
                refresh: false,
            }),
        }
    }

    /// Applies a committed request: `POST` creates an in-order key under
    /// `path`; `PUT` is an update (`prevExist=true`, no compare), a
    /// compare-and-swap (`prevExist=true` with a compare, or a compare
    /// alone), a create (`prevExist=false`) or a set; `DELETE` is a
    /// compare-and-delete when `prevIndex`/`prevValue` are given, else a
    /// delete; `QGET` is a read; `SYNC` expires keys up to `req.time`. Any
    /// other method fails with code 300 and cause
    /// `etcdserver: unknown method` (index 0), which is how etcd's v2 HTTP
    /// front reports it. `now` (Unix nanoseconds) is the clock for the TTLs
    /// shown in the returned nodes.
    pub fn apply_full(&mut self, req: &V2Request, now: i64) -> Result<Applied, V2Error> {
        let opts = TtlOptions::from_request(req.expiration, req.refresh.unwrap_or(false));
        let ev = match req.method.as_str() {
            "POST" => self.create(&req.path, req.dir, &req.val, true, opts, now),
            "PUT" => match req.prev_exist {
                Some(true) if req.prev_index == 0 && req.prev_value.is_empty() => {
                    self.update(&req.path, &req.val, opts, now)
                }
                Some(true) => self.compare_and_swap(
                    &req.path,
                    &req.prev_value,
                    req.prev_index,
                    &req.val,
                    opts,
                    now,
                ),
                Some(false) => self.create(&req.path, req.dir, &req.val, false, opts, now),
                None if req.prev_index > 0 || !req.prev_value.is_empty() => self.compare_and_swap(
                    &req.path,
                    &req.prev_value,
                    req.prev_index,
                    &req.val,
                    opts,
                    now,
                ),
                None => self.set(&req.path, req.dir, &req.val, opts, now),
            },
            "DELETE" => {
                if req.prev_index > 0 || !req.prev_value.is_empty() {
                    self.compare_and_delete(&req.path, &req.prev_value, req.prev_index, now)
                } else {
                    self.delete(&req.path, req.dir, req.recursive, now)
                }
            }
            "QGET" => self.get(&req.path, req.recursive, req.sorted, now),
            "SYNC" => return Ok(Applied::Synced(self.sync(req.time))),
            _ => Err(V2Error::request(ECODE_RAFT_INTERNAL, UNKNOWN_METHOD_CAUSE)),
        };
        ev.map(Applied::Event)
    }
}
