//! The watch hub's messages from the front: one client Watch stream each, opened, fed with the
//! client's requests in order, and closed. The hub (`actcd-watch`) answers them; what it sends
//! back on a stream is [`StreamResponse`]s, which the front finishes (raft term, `prev_kv`)
//! before they go to the client.

use std::sync::{Arc, OnceLock};

use actcd_proto::etcdserverpb::{WatchRequest, WatchResponse};
use actcd_proto::mvccpb::Event;
use actix::Message;
use tokio::sync::mpsc;

/// A watch id, unique within its stream. Chosen by the client (non-zero) or assigned.
pub type WatchId = i64;

/// etcd's id for responses that concern no single watcher (progress requested for a stream).
pub const INVALID_WATCH_ID: WatchId = -1;

/// One client Watch stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

/// One response on its way to a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamResponse {
    /// Ready to send but for `header.raft_term` (and `cluster_id`/`member_id` when the hub was
    /// not given them).
    pub response: WatchResponse,
    /// Events shared with other watchers' responses (one copy for every watcher that gets the
    /// same events): they follow `response.events`, which the hub then leaves empty. Use
    /// [`StreamResponse::into_response`] to get the whole message.
    pub shared: Option<SharedEvents>,
    /// The watcher asked for `prev_kv`: before sending, give every event that is not a creation
    /// (a DELETE, or a PUT whose `create_revision != mod_revision`) and has no `prev_kv` yet the
    /// key's value at `mod_revision - 1`, when there is one. Only set on responses with events.
    pub fill_prev_kv: bool,
}

impl StreamResponse {
    /// A response that carries its events itself.
    pub fn new(response: WatchResponse, fill_prev_kv: bool) -> Self {
        Self {
            response,
            shared: None,
            fill_prev_kv,
        }
    }

    /// Events it carries, shared ones included.
    pub fn event_count(&self) -> usize {
        self.response.events.len() + self.shared.as_ref().map_or(0, |s| s.events().len())
    }

    /// The whole message: the shared events copied in after its own.
    pub fn into_response(self) -> WatchResponse {
        let mut response = self.response;
        if let Some(shared) = self.shared {
            response.events.extend_from_slice(shared.events());
        }
        response
    }
}

/// A run of events several responses carry: `all[start..end]`, shared, not copied.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedEvents {
    pub all: Arc<EventRun>,
    pub start: usize,
    pub end: usize,
}

impl SharedEvents {
    pub fn events(&self) -> &[Event] {
        &self.all[self.start..self.end]
    }

    /// The events as a `WatchResponse` writes them (its field 11, one after another), encoded
    /// once for every response that shares them.
    pub fn wire(&self) -> &[u8] {
        self.all.wire(self.start, self.end)
    }
}

/// Events in revision order, shared by the responses of many watchers, with their wire form,
/// made the first time a response is encoded.
#[derive(Debug)]
pub struct EventRun {
    events: Vec<Event>,
    /// Every event as `WatchResponse.events` (field 11), back to back, and where each starts
    /// (one offset more, the end).
    wire: OnceLock<(Vec<u8>, Vec<usize>)>,
}

/// `WatchResponse.events`.
const EVENTS_TAG: u32 = 11;

impl EventRun {
    pub fn new(events: Vec<Event>) -> Self {
        Self {
            events,
            wire: OnceLock::new(),
        }
    }

    /// The wire form of `events[start..end]`.
    pub fn wire(&self, start: usize, end: usize) -> &[u8] {
        let (bytes, at) = self.wire.get_or_init(|| {
            let mut bytes = Vec::new();
            let mut at = Vec::with_capacity(self.events.len() + 1);
            for e in &self.events {
                at.push(bytes.len());
                prost::encoding::message::encode(EVENTS_TAG, e, &mut bytes);
            }
            at.push(bytes.len());
            (bytes, at)
        });
        &bytes[at[start]..at[end]]
    }
}

impl std::ops::Deref for EventRun {
    type Target = [Event];

    fn deref(&self) -> &[Event] {
        &self.events
    }
}

impl PartialEq for EventRun {
    fn eq(&self, other: &Self) -> bool {
        self.events == other.events
    }
}

/// Open a stream for one client Watch RPC. Its responses arrive on `responses`, a queue of
/// `capacity` (at least 1) that the hub fills without ever waiting.
#[derive(Debug, Message)]
#[rtype(result = "OpenedStream")]
pub struct OpenStream {
    pub capacity: usize,
}

/// The answer to [`OpenStream`].
#[derive(Debug)]
pub struct OpenedStream {
    pub stream: StreamId,
    /// Ends when the hub drops the stream (the stream never read its responses, or the hub
    /// stopped): end the RPC then.
    pub responses: mpsc::Receiver<StreamResponse>,
}

/// A request the client sent on its Watch stream, forwarded in the order received.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct WatchRequestMsg {
    pub stream: StreamId,
    pub request: WatchRequest,
}

/// The front refused a create request (auth): answer it in stream order with etcd's
/// created + canceled response carrying `reason`.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct RejectWatch {
    pub stream: StreamId,
    /// The create request's `watch_id`, as etcd 3.5.1 echoes it.
    pub watch_id: WatchId,
    pub reason: String,
}

/// The client's stream ended: forget it and its watchers.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct CloseStream {
    pub stream: StreamId,
}
