//! The watch hub's messages from the front: one client Watch stream each, opened, fed with the
//! client's requests in order, and closed. The hub (`actcd-watch`) answers them; what it sends
//! back on a stream is [`StreamResponse`]s, which the front finishes (raft term, `prev_kv`)
//! before they go to the client.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use prost::Message as _;

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

    /// Its size on the wire: the message as encoded, shared events included (what a stream's
    /// queue counts against its bytes, [`response_queue`]).
    pub fn bytes(&self) -> usize {
        self.response.encoded_len() + self.shared.as_ref().map_or(0, SharedEvents::wire_len)
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

    /// How long [`Self::wire`] is, without encoding anything.
    pub fn wire_len(&self) -> usize {
        self.all.at[self.end] - self.all.at[self.start]
    }
}

/// Events in revision order, shared by the responses of many watchers, with their wire form,
/// made the first time a response is encoded.
#[derive(Debug)]
pub struct EventRun {
    events: Vec<Event>,
    /// Where each event starts in the wire form (one offset more, the end), known from the
    /// start so that a response's size costs nothing to learn.
    at: Vec<usize>,
    /// Every event as `WatchResponse.events` (field 11), back to back.
    wire: OnceLock<Vec<u8>>,
}

/// `WatchResponse.events`.
const EVENTS_TAG: u32 = 11;

impl EventRun {
    pub fn new(events: Vec<Event>) -> Self {
        let mut at = Vec::with_capacity(events.len() + 1);
        let mut len = 0;
        for e in &events {
            at.push(len);
            len += prost::encoding::message::encoded_len(EVENTS_TAG, e);
        }
        at.push(len);
        Self {
            events,
            at,
            wire: OnceLock::new(),
        }
    }

    /// The wire form of `events[start..end]`.
    pub fn wire(&self, start: usize, end: usize) -> &[u8] {
        let bytes = self.wire.get_or_init(|| {
            let mut bytes = Vec::with_capacity(self.at[self.events.len()]);
            for e in &self.events {
                prost::encoding::message::encode(EVENTS_TAG, e, &mut bytes);
            }
            bytes
        });
        &bytes[self.at[start]..self.at[end]]
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

/// A stream's queue from the hub to the front, bounded twice: by responses (`capacity`) and by
/// the bytes they come to on the wire (`max_bytes`, [`StreamResponse::bytes`]). The hub fills
/// it without ever waiting ([`ResponseSender::try_send`]); what does not fit makes its watcher
/// a victim. The count bounds a stream of small responses (one event for each of thousands of
/// watchers), the bytes a stream of large ones (catch-up runs of a thousand events each), so
/// the front is never handed more in one go than a stream can send in a moment. A response
/// larger than `max_bytes` fits an empty queue.
pub fn response_queue(capacity: usize, max_bytes: usize) -> (ResponseSender, ResponseReceiver) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    let used = Arc::new(AtomicUsize::new(0));
    (
        ResponseSender {
            tx,
            used: used.clone(),
            max_bytes: max_bytes.max(1),
        },
        ResponseReceiver { rx, used },
    )
}

/// Why a stream took no response ([`ResponseSender::try_send`], the hub's `StreamSink`).
#[derive(Debug)]
pub enum SendError {
    /// Its queue is full (responses or bytes); the response is handed back.
    Full(StreamResponse),
    /// Nobody reads it any more.
    Closed,
}

/// The hub's end of a [`response_queue`].
#[derive(Debug)]
pub struct ResponseSender {
    tx: mpsc::Sender<(StreamResponse, usize)>,
    /// Bytes queued: added by the one sender as a response is queued, taken off by the
    /// receiver as the front takes it. A plain counter, not a semaphore: nobody waits on it.
    used: Arc<AtomicUsize>,
    max_bytes: usize,
}

impl ResponseSender {
    /// Queues `response` if it fits, never waiting.
    pub fn try_send(&self, response: StreamResponse) -> Result<(), SendError> {
        let bytes = response.bytes();
        // Only this sender adds, so what it reads can only have shrunk since.
        let used = self.used.load(Ordering::Acquire);
        if used > 0 && used.saturating_add(bytes) > self.max_bytes {
            return if self.tx.is_closed() {
                Err(SendError::Closed)
            } else {
                Err(SendError::Full(response))
            };
        }
        self.used.fetch_add(bytes, Ordering::AcqRel);
        match self.tx.try_send((response, bytes)) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.used.fetch_sub(bytes, Ordering::AcqRel);
                match e {
                    mpsc::error::TrySendError::Full((r, _)) => Err(SendError::Full(r)),
                    mpsc::error::TrySendError::Closed(_) => Err(SendError::Closed),
                }
            }
        }
    }

    /// How many more responses would fit now: the free places, scaled down by the share of
    /// bytes in use, so that a queue full of bytes has no room and one a quarter free of both
    /// has a quarter of its places.
    pub fn room(&self) -> usize {
        let places = self.tx.capacity();
        let free = self
            .max_bytes
            .saturating_sub(self.used.load(Ordering::Acquire)) as u128;
        let scaled = self.tx.max_capacity() as u128 * free / self.max_bytes as u128;
        places.min(usize::try_from(scaled).unwrap_or(usize::MAX))
    }

    /// How many responses the queue holds when full.
    pub fn capacity(&self) -> usize {
        self.tx.max_capacity()
    }
}

/// The front's end of a [`response_queue`].
#[derive(Debug)]
pub struct ResponseReceiver {
    rx: mpsc::Receiver<(StreamResponse, usize)>,
    used: Arc<AtomicUsize>,
}

impl ResponseReceiver {
    /// The next response and its size on the wire; `None` once the hub dropped the stream.
    pub async fn recv(&mut self) -> Option<(StreamResponse, usize)> {
        let (response, bytes) = self.rx.recv().await?;
        self.used.fetch_sub(bytes, Ordering::AcqRel);
        Some((response, bytes))
    }

    /// [`Self::recv`] if one is queued now.
    pub fn try_recv(&mut self) -> Option<(StreamResponse, usize)> {
        let (response, bytes) = self.rx.try_recv().ok()?;
        self.used.fetch_sub(bytes, Ordering::AcqRel);
        Some((response, bytes))
    }
}

/// Open a stream for one client Watch RPC. Its responses arrive on `responses`, a
/// [`response_queue`] of `capacity` responses (at least 1) and `max_bytes` that the hub fills
/// without ever waiting.
#[derive(Debug, Message)]
#[rtype(result = "OpenedStream")]
pub struct OpenStream {
    pub capacity: usize,
    pub max_bytes: usize,
}

/// The answer to [`OpenStream`].
#[derive(Debug)]
pub struct OpenedStream {
    pub stream: StreamId,
    /// Ends when the hub drops the stream (the stream never read its responses, or the hub
    /// stopped): end the RPC then.
    pub responses: ResponseReceiver,
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

#[cfg(test)]
mod tests {
    use actcd_proto::etcdserverpb::WatchResponse;
    use actcd_proto::mvccpb::{Event, KeyValue};

    use super::*;

    fn event(value_len: usize) -> Event {
        Event {
            kv: Some(KeyValue {
                key: b"k".to_vec(),
                value: vec![b'v'; value_len],
                mod_revision: 2,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn shared(events: Vec<Event>) -> StreamResponse {
        let end = events.len();
        StreamResponse {
            response: WatchResponse {
                watch_id: 1,
                ..Default::default()
            },
            shared: Some(SharedEvents {
                all: Arc::new(EventRun::new(events)),
                start: 0,
                end,
            }),
            fill_prev_kv: false,
        }
    }

    #[test]
    fn a_response_counts_its_wire_size_shared_events_included() {
        let r = shared(vec![event(100), event(1000)]);
        assert_eq!(r.bytes(), r.clone().into_response().encoded_len());
        let s = r.shared.as_ref().unwrap();
        assert_eq!(s.wire_len(), s.wire().len());
        let tail = SharedEvents {
            start: 1,
            ..s.clone()
        };
        assert_eq!(tail.wire_len(), tail.wire().len());
    }

    #[tokio::test]
    async fn the_queue_is_bounded_by_bytes_and_by_count() {
        // Room for 100 responses but 3,000 bytes: two 1,000-byte events fit, the third waits.
        let (tx, mut rx) = response_queue(100, 3000);
        assert_eq!(tx.room(), 100);
        tx.try_send(shared(vec![event(1000)])).unwrap();
        tx.try_send(shared(vec![event(1000)])).unwrap();
        assert!(
            tx.room() <= 100 / 3,
            "bytes in use shrink the room: {}",
            tx.room()
        );
        assert!(matches!(
            tx.try_send(shared(vec![event(1000)])),
            Err(SendError::Full(_))
        ));
        // Taking one gives its bytes back.
        let (_, bytes) = rx.recv().await.unwrap();
        assert!(bytes > 1000);
        tx.try_send(shared(vec![event(1000)])).unwrap();
        // A response larger than the whole queue fits an empty one, and only that.
        assert!(matches!(
            tx.try_send(shared(vec![event(10_000)])),
            Err(SendError::Full(_))
        ));
        while rx.try_recv().is_some() {}
        assert_eq!(tx.room(), 100);
        tx.try_send(shared(vec![event(10_000)])).unwrap();
        assert_eq!(tx.room(), 0);
        assert!(rx.try_recv().is_some());
        // The count still bounds small responses.
        let (tx, _rx) = response_queue(2, 1 << 20);
        tx.try_send(shared(vec![event(1)])).unwrap();
        tx.try_send(shared(vec![event(1)])).unwrap();
        assert!(matches!(
            tx.try_send(shared(vec![event(1)])),
            Err(SendError::Full(_))
        ));
        // A dropped receiver closes it.
        let (tx, rx) = response_queue(2, 1 << 20);
        drop(rx);
        assert!(matches!(
            tx.try_send(shared(vec![event(1)])),
            Err(SendError::Closed)
        ));
    }
}
