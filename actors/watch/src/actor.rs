//! The watch hub as an actor: thin glue between messages and [`WatchHub`].

use actcd_proto::etcdserverpb::WatchRequest;
use actcd_types::EtcdError;
use actcd_types::msg::{History, Notify};
use actix::{
    Actor, ActorFutureExt, AsyncContext, Context, Handler, Message, MessageResult, Recipient,
    WrapFuture,
};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use crate::hub::{
    HubConfig, HubStats, SendError, StreamId, StreamResponse, StreamSink, WatchHub, WatchId,
};

// ---------------------------------------------------------------- messages

/// Open a stream for one client Watch RPC. Its responses arrive on `responses`, a queue of
/// `capacity` (at least 1) that the hub fills without ever waiting.
#[derive(Debug, Message)]
#[rtype(result = "OpenedStream")]
pub struct OpenStream {
    pub capacity: usize,
}

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

/// Send progress notifications now (the actor sends itself one every `progress_interval`).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct ProgressTick;

/// Retry full streams and failed history reads now (the actor schedules one `retry_interval`
/// after anything is left waiting).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct RetryVictims;

/// Counts of streams, watchers per group and held-back responses.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "HubStats")]
pub struct GetHubStats;

// ---------------------------------------------------------------- the actor

/// A stream's queue is a bounded tokio channel; `try_send` never waits.
impl StreamSink for mpsc::Sender<StreamResponse> {
    fn try_send(&mut self, response: StreamResponse) -> Result<(), SendError> {
        mpsc::Sender::try_send(self, response).map_err(|e| match e {
            TrySendError::Full(r) => SendError::Full(r),
            TrySendError::Closed(_) => SendError::Closed,
        })
    }

    fn has_room(&self) -> bool {
        self.capacity() > 0
    }
}

pub struct WatchHubActor {
    hub: WatchHub<mpsc::Sender<StreamResponse>>,
    history: Recipient<History>,
    retry_scheduled: bool,
}

impl WatchHubActor {
    /// `history` is the MVCC store; `current_revision` its revision when the hub starts (the
    /// first `Notify` carries the events after it).
    pub fn new(config: HubConfig, history: Recipient<History>, current_revision: i64) -> Self {
        Self {
            hub: WatchHub::new(config, current_revision),
            history,
            retry_scheduled: false,
        }
    }

    /// After every message: start the history read the hub wants (at most one in flight, awaited
    /// beside other messages so notifications keep flowing), and schedule a retry if anything
    /// is left waiting.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if let Some(read) = self.hub.next_history_read() {
            let history = self.history.clone();
            let reply = async move { history.send(read).await };
            ctx.spawn(reply.into_actor(self).map(|res, act, ctx| {
                let res = res.unwrap_or_else(|e| Err(EtcdError::from(e)));
                act.hub.history_read_done(res);
                act.pump(ctx);
            }));
        }
        if !self.retry_scheduled && self.hub.needs_retry() {
            self.retry_scheduled = true;
            ctx.run_later(self.hub.config().retry_interval, |act, ctx| {
                act.retry_scheduled = false;
                act.hub.retry_victims();
                act.pump(ctx);
            });
        }
    }
}

impl Actor for WatchHubActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let every = self.hub.config().progress_interval;
        if !every.is_zero() {
            ctx.run_interval(every, |act, ctx| {
                act.hub.progress_tick();
                act.pump(ctx);
            });
        }
    }
}

impl Handler<Notify> for WatchHubActor {
    type Result = ();

    /// The store applied a batch: feed synced watchers.
    fn handle(&mut self, msg: Notify, ctx: &mut Context<Self>) {
        self.hub.notify(msg.revision, msg.events);
        self.pump(ctx);
    }
}

impl Handler<OpenStream> for WatchHubActor {
    type Result = MessageResult<OpenStream>;

    fn handle(&mut self, msg: OpenStream, _: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = mpsc::channel(msg.capacity.max(1));
        let stream = self.hub.open_stream(tx);
        MessageResult(OpenedStream {
            stream,
            responses: rx,
        })
    }
}

impl Handler<WatchRequestMsg> for WatchHubActor {
    type Result = ();

    /// Create, cancel or progress request, answered on the stream's queue.
    fn handle(&mut self, msg: WatchRequestMsg, ctx: &mut Context<Self>) {
        self.hub.handle_request(msg.stream, msg.request);
        self.pump(ctx);
    }
}

impl Handler<RejectWatch> for WatchHubActor {
    type Result = ();

    fn handle(&mut self, msg: RejectWatch, ctx: &mut Context<Self>) {
        self.hub.reject_create(msg.stream, msg.watch_id, msg.reason);
        self.pump(ctx);
    }
}

impl Handler<CloseStream> for WatchHubActor {
    type Result = ();

    fn handle(&mut self, msg: CloseStream, ctx: &mut Context<Self>) {
        self.hub.close_stream(msg.stream);
        self.pump(ctx);
    }
}

impl Handler<ProgressTick> for WatchHubActor {
    type Result = ();

    fn handle(&mut self, _: ProgressTick, ctx: &mut Context<Self>) {
        self.hub.progress_tick();
        self.pump(ctx);
    }
}

impl Handler<RetryVictims> for WatchHubActor {
    type Result = ();

    fn handle(&mut self, _: RetryVictims, ctx: &mut Context<Self>) {
        self.hub.retry_victims();
        self.pump(ctx);
    }
}

impl Handler<GetHubStats> for WatchHubActor {
    type Result = MessageResult<GetHubStats>;

    fn handle(&mut self, _: GetHubStats, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.hub.stats())
    }
}
