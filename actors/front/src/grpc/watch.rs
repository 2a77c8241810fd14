//! The Watch service: one task per client stream between the client and the watch hub.
//!
//! The task forwards the client's requests to the hub in the order they arrive, and the hub's
//! responses to the client after adding what only the front knows: the raft term in the header,
//! and, for watchers that asked for `prev_kv`, each event's previous value, read from the store
//! at `mod_revision - 1` as etcd's send loop does. It ends the stream when the client goes, when
//! the hub drops it, or at shutdown (with `Unavailable`, as etcd's clients see it end), and then
//! tells the hub.

use std::pin::Pin;
use std::sync::Arc;

use actcd_proto::etcdserverpb::watch_server::Watch;
use actcd_proto::etcdserverpb::{
    RangeRequest, ResponseHeader, WatchRequest, WatchResponse, watch_request,
};
use actcd_proto::mvccpb::event::EventType;
use actcd_types::EtcdError;
use actcd_types::watch::{
    CloseStream, OpenStream, ResponseReceiver, SharedEvents, StreamResponse, WatchRequestMsg,
};
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::authn::Credentials;
use crate::pipeline::Pipeline;

pub struct WatchService {
    pub pipeline: Arc<Pipeline>,
}

/// Responses the hub may queue for one stream before its watchers fall back to catching up from
/// history (etcd's buffer is 128). Whatever is queued is sent before any newer event, so the
/// queue is the stream's delay: with a thousand watchers on each of 100 streams and a put a
/// millisecond, 4096 held four revisions a stream, 400k responses, and 300 MiB to 1.2 GiB
/// before watchers shared their events. Too small a queue starves a crowded stream instead: a
/// retry (every 10 ms) catches up at most a queue's worth of its watchers, so 10,000 watchers
/// on one stream heard of a put in p50 650 ms with 256, 450-490 ms with 1024 (etcd 1.1 s);
/// 100,000 on 100 streams 2.3 s with 256, 1.7-2.0 s with 1024 (a busy 2-core machine).
const HUB_QUEUE: usize = 1024;
/// Bytes (as encoded) the hub may queue for one stream, beside [`HUB_QUEUE`]'s count: what
/// bounds a stream's memory when its responses are large and not shared (catch-up runs of a
/// thousand events copied for a watcher with `prev_kv` or a filter, of which 1,024 could hold
/// a million events).
const HUB_QUEUE_BYTES: usize = 4 << 20;
/// Responses forwarded in one turn ([`Pipeline::watch_turn`]), sharing one header lookup.
/// Measured at 1,000 watchers catching up under 100 writers (`benches/beyond-watch.sh`): put
/// p99 9.3 ms with 8, 10.3 ms with 32, against 4.8 ms with one watcher; 8 costs nothing seen at
/// 100,000 watchers or with stalled clients.
const TURN: usize = 8;
/// Bytes forwarded in one turn, beside [`TURN`]'s count, so a turn of catch-up responses (each up
/// to a history read's thousand events) is not eight times that.
const TURN_BYTES: usize = 256 << 10;
/// Responses ready for the client that tonic has not sent yet.
const SEND_QUEUE: usize = 16;

type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchResponse, Status>> + Send>>;

/// A response ready for the client. Events the hub shared among watchers stay shared up to
/// here: the gRPC route (`watch_route.rs`) encodes them from the shared copy; the gateway and
/// the other users of a stream take the whole message (`WatchResponse::from`).
pub(crate) struct WatchOut {
    pub(crate) response: WatchResponse,
    pub(crate) shared: Option<SharedEvents>,
}

impl From<WatchOut> for WatchResponse {
    fn from(out: WatchOut) -> Self {
        StreamResponse {
            response: out.response,
            shared: out.shared,
            fill_prev_kv: false,
        }
        .into_response()
    }
}

/// Fills in what the hub leaves to the front.
async fn finish(
    p: &Pipeline,
    header: &ResponseHeader,
    out: StreamResponse,
) -> Result<WatchOut, EtcdError> {
    let fill_prev_kv = out.fill_prev_kv;
    let (mut response, shared) = if fill_prev_kv {
        (out.into_response(), None)
    } else {
        (out.response, out.shared)
    };
    let h = response.header.get_or_insert_with(Default::default);
    h.raft_term = header.raft_term;
    h.cluster_id = header.cluster_id;
    h.member_id = header.member_id;
    if fill_prev_kv {
        for ev in &mut response.events {
            let Some(kv) = &ev.kv else { continue };
            let creation =
                ev.r#type == EventType::Put as i32 && kv.create_revision == kv.mod_revision;
            if creation || ev.prev_kv.is_some() {
                continue;
            }
            let read = p.routes.reads.range(&RangeRequest {
                key: kv.key.clone(),
                revision: kv.mod_revision - 1,
                serializable: true,
                ..Default::default()
            });
            // Compacted away, or nothing there: no previous value, as in etcd.
            if let Ok(mut r) = read
                && !r.kvs.is_empty()
            {
                ev.prev_kv = Some(r.kvs.swap_remove(0));
            }
        }
    }
    Ok(WatchOut { response, shared })
}

/// Sends `first` and whatever else the hub has queued, up to [`TURN`] responses or
/// [`TURN_BYTES`], with one header lookup for all of them, in one turn
/// ([`Pipeline::watch_turn`]). Room in the client's queue is waited for before the turn is
/// taken, so a client that does not read holds up only its own stream; a response that finds
/// the queue full once the turn is under way is handed back (`Ok(Some)`) to go first next
/// time. `Err` ends the stream.
async fn forward<T: From<WatchOut>>(
    p: &Pipeline,
    first: (StreamResponse, usize),
    responses: &mut ResponseReceiver,
    tx: &mpsc::Sender<Result<T, Status>>,
) -> Result<Option<(StreamResponse, usize)>, ()> {
    let room = tx.reserve().await.map_err(|_| ())?;
    let (_turn, header) = p.watch_turn().await;
    let header = match header {
        Ok(h) => h,
        Err(e) => {
            room.send(Err(e.to_status()));
            return Err(());
        }
    };
    let mut slot = Some(room);
    let mut next = Some(first);
    let (mut sent, mut sent_bytes) = (0, 0);
    while let Some((out, bytes)) = next.take() {
        let room = match slot.take() {
            Some(room) => room,
            None => match tx.try_reserve() {
                Ok(room) => room,
                Err(mpsc::error::TrySendError::Full(())) => return Ok(Some((out, bytes))),
                Err(mpsc::error::TrySendError::Closed(())) => return Err(()),
            },
        };
        // etcd's send loop times each response from taking it to handing it to the stream: a
        // watch response (events, progress, a compaction's cancel) with its previous values
        // read, or a control response (created, canceled on request).
        let started = std::time::Instant::now();
        let events = out.event_count();
        let control =
            out.response.created || (out.response.canceled && out.response.compact_revision == 0);
        match finish(p, &header, out).await {
            Ok(r) => room.send(Ok(T::from(r))),
            Err(e) => {
                room.send(Err(e.to_status()));
                return Err(());
            }
        }
        let durations = &p.counters.durations;
        if control {
            durations.control_stream.observe(started.elapsed());
        } else {
            durations.watch_response(events, started.elapsed());
        }
        sent += 1;
        sent_bytes += bytes;
        if sent < TURN && sent_bytes < TURN_BYTES {
            next = responses.try_recv();
        }
    }
    Ok(None)
}

/// With auth on, a watch needs read permission on its range; without it the create is answered
/// created-and-canceled with `permission denied`, as etcd answers it, and never reaches the hub.
async fn refuse_watch(
    p: &Pipeline,
    creds: &Credentials,
    request: &WatchRequest,
) -> Option<WatchResponse> {
    if !p.auth.enabled() {
        return None;
    }
    let Some(watch_request::RequestUnion::CreateRequest(create)) = &request.request_union else {
        return None;
    };
    // etcd refuses a negative start before it looks at permissions: the hub answers it.
    if create.start_revision < 0 {
        return None;
    }
    let mut key = create.key.clone();
    if key.is_empty() {
        key = vec![0];
    }
    // A from-key watch (`range_end` "\0") is checked as the open range it watches: etcd up to
    // 3.5.32 checked it as the single key it starts at, after rewriting the end, and sent a
    // user allowed to read one key every key after it (GHSA-xg4h-6gfc-h4m8, fixed in
    // 3.5.33 / 3.6.14 / 3.7.1).
    let range_end = create.range_end.clone();
    let refused = match p.auth.identify(creds) {
        Ok(who) => p.check_read(who, key, range_end).await.err()?,
        Err(e) => e,
    };
    let header = p.recent_header().await.ok();
    // etcd 3.5.6 (#14547, #14563): watch id -1 (the client's own id, 0 when the server picks,
    // would close a live watch of that id), and the reason names the failure, as the gRPC
    // error's Go rendering.
    let cancel_reason = match refused {
        EtcdError::InvalidAuthToken => {
            "rpc error: code = Unauthenticated desc = etcdserver: invalid auth token"
        }
        EtcdError::AuthOldRevision => {
            "rpc error: code = InvalidArgument desc = etcdserver: revision of auth store is old"
        }
        EtcdError::UserEmpty | EtcdError::AuthStoreUserEmpty => {
            "rpc error: code = InvalidArgument desc = etcdserver: user name is empty"
        }
        _ => "rpc error: code = PermissionDenied desc = etcdserver: permission denied",
    };
    Some(WatchResponse {
        header,
        watch_id: actcd_types::watch::INVALID_WATCH_ID,
        created: true,
        canceled: true,
        cancel_reason: cancel_reason.into(),
        ..Default::default()
    })
}

/// One watch stream: requests from `inbound` go to the hub (create requests checked for read
/// permission first), the hub's responses come out of the returned channel. The stream ends
/// when `inbound` ends, the receiver is dropped, or the server shuts down (the gRPC service's
/// `inbound` ends only on a broken client stream, not on a half-close); at shutdown its last
/// item is `Unavailable` ([`crate::pipeline::shutdown_status`]), so clients watch again
/// elsewhere. The gRPC service and the JSON gateway share it.
pub(crate) async fn open_stream(
    p: Arc<Pipeline>,
    creds: Credentials,
    inbound: impl futures::Stream<Item = WatchRequest> + Send + 'static,
) -> Result<mpsc::Receiver<Result<WatchResponse, Status>>, EtcdError> {
    open_stream_as(p, creds, inbound).await
}

/// [`open_stream`], its responses as `T` (the gRPC route takes [`WatchOut`]s).
pub(crate) async fn open_stream_as<T: From<WatchOut> + From<WatchResponse> + Send + 'static>(
    p: Arc<Pipeline>,
    creds: Credentials,
    inbound: impl futures::Stream<Item = WatchRequest> + Send + 'static,
) -> Result<mpsc::Receiver<Result<T, Status>>, EtcdError> {
    let opened = p
        .routes
        .open_watch
        .send(OpenStream {
            capacity: HUB_QUEUE,
            max_bytes: HUB_QUEUE_BYTES,
        })
        .await?;
    let (stream, mut responses) = (opened.stream, opened.responses);
    let (tx, rx) = mpsc::channel(SEND_QUEUE);
    tokio::spawn(async move {
        let mut inbound = std::pin::pin!(inbound);
        loop {
            tokio::select! {
                next = inbound.next() => {
                    let Some(request) = next else { break };
                    if let Some(refusal) = refuse_watch(&p, &creds, &request).await {
                        // A control response, as etcd's recvLoop queues it for the send loop.
                        let started = std::time::Instant::now();
                        if tx.send(Ok(T::from(refusal))).await.is_err() {
                            break;
                        }
                        p.counters.durations.control_stream.observe(started.elapsed());
                        continue;
                    }
                    let msg = WatchRequestMsg { stream, request };
                    if p.routes.watch_request.send(msg).await.is_err() {
                        break;
                    }
                }
                out = responses.recv() => {
                    let Some(mut first) = out else { break };
                    let ended = loop {
                        match forward(&p, first, &mut responses, &tx).await {
                            Ok(Some(left)) => first = left,
                            Ok(None) => break false,
                            Err(()) => break true,
                        }
                    };
                    if ended {
                        break;
                    }
                }
                () = tx.closed() => break,
                () = p.closed() => break,
            }
        }
        // Whichever branch saw it first at shutdown (the hub may go before the signal).
        if p.is_closing() {
            crate::pipeline::end_at_shutdown(&tx).await;
        }
        p.routes.close_watch.do_send(CloseStream { stream });
    });
    Ok(rx)
}

/// The requests of a client's gRPC stream. A broken client stream ends the watch stream. A
/// client that half-closes (stops sending) keeps its watchers until it goes away, as etcd's
/// does: its recvLoop ends on EOF without ending the stream (found by the hostile-input run; a
/// finite request iterator, as Python's grpc makes, half-closes right after its creates).
pub(crate) fn client_requests(
    requests: Streaming<WatchRequest>,
) -> impl futures::Stream<Item = WatchRequest> + Send + 'static {
    futures::stream::unfold(requests, |mut s| async move {
        match s.next().await {
            Some(Ok(r)) => Some((r, s)),
            Some(Err(_)) => None,
            None => futures::future::pending().await,
        }
    })
}

#[tonic::async_trait]
impl Watch for WatchService {
    type WatchStream = WatchStream;

    async fn watch(
        &self,
        req: Request<Streaming<WatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        // Who is asking is settled per create request, as etcd does, so the auth revision a
        // check uses is current.
        // Not reached from the gRPC server, which routes this method to `watch_route.rs`.
        let creds = self.pipeline.auth.credentials(&req);
        let inbound = client_requests(req.into_inner());
        let rx = open_stream(self.pipeline.clone(), creds, inbound).await?;
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
