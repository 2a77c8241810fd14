//! The v2 store's messages (`--enable-v2`): what the applier hands it, what the front asks it.
//!
//! The v2 API answers with HTTP statuses and JSON bodies, not gRPC: the store renders them
//! (it owns the tree and etcd's v2 JSON), so a reply here is a status, a body and the indexes
//! the front puts in `X-Etcd-Index`, `X-Raft-Index` and `X-Raft-Term`.

use actcd_proto::actcdpb::V2Request;
use actix::Message;
use tokio::sync::{mpsc, oneshot};

use crate::msg::ApplyResult;
use crate::storage::Op;

/// An answer of the v2 store, rendered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct V2Reply {
    /// HTTP status: 200, 201, or a v2 error's.
    pub status: u16,
    /// etcd's JSON for the event or the error, as etcd sends it (the keys API's bodies end
    /// with the newline Go's JSON encoder writes; the auth API's do not).
    pub body: String,
    /// Headers of its own beyond the index headers (the auth APIs' `Content-Type`, `ETag`,
    /// `WWW-Authenticate`).
    pub headers: Vec<(String, String)>,
    /// The v2 store's index (`X-Etcd-Index`).
    pub etcd_index: u64,
    /// The log position the answer reflects (`X-Raft-Index`, `X-Raft-Term`).
    pub raft_index: u64,
    pub raft_term: u64,
}

/// One committed v2 entry (or a membership change etcd's v2 store records, method `MEMBER`).
#[derive(Debug)]
pub struct V2Entry {
    pub index: u64,
    pub term: u64,
    pub request: V2Request,
    pub reply: Option<oneshot::Sender<ApplyResult>>,
}

/// Committed v2 entries, applied by the v2 store in log order: the applier gathers those of a
/// run and sends them at once, before the run's writes leave for the backend. The store
/// answers each `reply` itself (with `ApplyResponse::V2`) and returns the table writes that
/// make the entries durable; the applier commits them with the consistent index of the last
/// of them or a later one.
#[derive(Debug, Message)]
#[rtype(result = "Vec<Op>")]
pub struct ApplyV2 {
    pub entries: Vec<V2Entry>,
}

/// A read of the tree as this member has applied it (a GET without `quorum=true`).
#[derive(Debug, Message)]
#[rtype(result = "V2Reply")]
pub struct V2Get {
    pub path: String,
    pub recursive: bool,
    pub sorted: bool,
}

/// A watch (`wait=true`): answered at once from the event history, or registered.
#[derive(Debug, Message)]
#[rtype(result = "Result<V2Watching, V2Reply>")]
pub struct V2Watch {
    pub path: String,
    pub recursive: bool,
    /// Keep the watch after its first event (`stream=true`).
    pub stream: bool,
    /// `waitIndex`; 0 for the next change.
    pub since: u64,
}

/// A started watch: the store's index when it started (the response header), and the events
/// as rendered JSON. The store drops the watch when the receiver is gone, or when it has
/// [`V2_WATCH_BUFFER`] events the client has not taken (etcd ends such a stream too).
#[derive(Debug)]
pub struct V2Watching {
    pub etcd_index: u64,
    pub raft_index: u64,
    pub raft_term: u64,
    /// Each event's JSON, shared by every watcher it goes to (rendered once per event).
    pub events: mpsc::Receiver<bytes::Bytes>,
}

/// Events a v2 watcher may have waiting before the store drops it (etcd's watcher buffer).
pub const V2_WATCH_BUFFER: usize = 100;

/// The store's counters as etcd's `/v2/stats/store` JSON.
#[derive(Debug, Message)]
#[rtype(result = "String")]
pub struct V2StoreStats;

/// Every 500 ms: the leader proposes a `SYNC` carrying its clock when keys with a TTL may have
/// expired, so every member expires the same keys at the same point of the log.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct V2SyncTick;

/// The backend was replaced by a snapshot: read the tree again from it.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<(), crate::EtcdError>")]
pub struct V2Reload;
